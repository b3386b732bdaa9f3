//! `fusebox plan CHAIN`: planning a chain after NFCompass. Each part of the plan is a
//! function of the `plan` crate returning printable data; this command only prints it (or
//! writes a PLAN file).

use crate::error::CliError;
use crate::run_cmd::load_chain;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `fusebox plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Chain file (.toml) or a single Click configuration (.click).
    pub chain: PathBuf,
    /// A placement written by hand: stages separated by `|`, the NFs of a stage by `,`
    /// (`fw,router|napt`); stage S runs on processor S. Written to --out as a PLAN file for
    /// `fusebox run --plan`.
    #[arg(long, value_name = "NF,NF|NF")]
    pub pipeline: Option<String>,
    /// Copies of the whole pipeline, flows spread over them by RSS (with --pipeline).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub replicas: usize,
    /// Write the plan here (JSON, the PLAN format `fusebox run --plan` reads); without it the
    /// plan is printed on stdout.
    #[arg(long, value_name = "PLAN")]
    pub out: Option<PathBuf>,
}

/// Runs `fusebox plan`.
pub fn run(a: &PlanArgs) -> Result<ExitCode, CliError> {
    let chain = load_chain(&a.chain)?;
    let Some(spec) = &a.pipeline else {
        return Err(CliError::Invalid(format!(
            "fusebox plan: nothing to plan yet; --pipeline 'NF,NF|NF' writes a placement by hand (NFs of {}: {})",
            a.chain.display(),
            chain.nfs.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
        )));
    };
    let invalid = |e: plan::file::PlanError| CliError::Invalid(e.to_string());
    let placement = plan::file::pipeline(&chain, spec, a.replicas).map_err(invalid)?;
    let file = plan::file::PlanFile::new(&chain, placement, "hand").map_err(invalid)?;
    match &a.out {
        Some(path) => {
            file.save(path).map_err(invalid)?;
            eprintln!(
                "plan: {} stage(s) x {} replica(s) written to {}",
                file.placement.stages.len(),
                file.placement.replicas,
                path.display()
            );
        }
        None => outln!("{}", file.to_json()),
    }
    Ok(ExitCode::SUCCESS)
}
