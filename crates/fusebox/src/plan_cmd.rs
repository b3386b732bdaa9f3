//! `fusebox plan CHAIN`: planning a chain after NFCompass. Each part of the plan is a
//! function of the `plan` crate returning printable data; this command only prints it (or
//! writes a PLAN file): the NFs' action profiles beside the paper's Table II, their
//! dependencies field by field and the groups that may run side by side, or a placement
//! written by hand (`--pipeline`); with `--profile TRACE`, the placement from measured costs
//! (the `place` submodule).

pub(crate) mod place;

use crate::error::CliError;
use crate::run_cmd::{load_chain, parse_defines};
use chain::{Executor, ExitSink, RunOptions};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `fusebox plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Chain file (.toml) or a single Click configuration (.click).
    pub chain: PathBuf,
    /// Override a `define` of the Click configurations: NAME=VALUE. Repeatable.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
    /// Print the analysis as one JSON object (`profiles`, `dependencies`, `groups`).
    #[arg(long, conflicts_with = "pipeline")]
    pub json: bool,
    /// A placement written by hand: stages separated by `|`, the NFs of a stage by `,`
    /// (`fw,router|napt`); stage S runs on processor S. Written to --out as a PLAN file for
    /// `fusebox run --plan`.
    #[arg(long, value_name = "NF,NF|NF")]
    pub pipeline: Option<String>,
    /// Copies of the whole pipeline, flows spread over them by RSS (with --pipeline).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub replicas: usize,
    /// Write the plan here (JSON, the PLAN format `fusebox run --plan` reads): the placement
    /// --pipeline or --profile made; without it, --pipeline's plan is printed on stdout.
    #[arg(long, value_name = "PLAN")]
    pub out: Option<PathBuf>,
    /// The placement from measured costs (NFCompass §IV.C).
    #[command(flatten)]
    pub place: place::PlaceArgs,
}

/// Runs `fusebox plan`.
pub fn run(a: &PlanArgs) -> Result<ExitCode, CliError> {
    let chain = load_chain(&a.chain)?;
    let Some(spec) = &a.pipeline else {
        return analysis(a, &chain);
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

/// The analysis: profiles (Table II), dependencies (Table III), parallel groups and element
/// merging.
fn analysis(a: &PlanArgs, chain: &chain::ChainFile) -> Result<ExitCode, CliError> {
    let opts = RunOptions {
        defines: parse_defines(&a.defines)?,
        ..RunOptions::default()
    };
    let ex = Executor::new(chain, &opts, |_, _| Ok(ExitSink::Count))?;
    let profiles = plan::profile::profiles(&ex);
    let (par, deps) = plan::deps::parallel_with(&ex, &profiles);
    if a.place.profile.is_none() && a.out.is_some() {
        return Err(CliError::Invalid(
            "--out needs --pipeline 'NF,NF|NF' or --profile TRACE (a placement to write)".into(),
        ));
    }
    let placed = match &a.place.profile {
        Some(_) => Some(place::run(&a.place, chain, &opts, a.out.as_deref())?),
        None => None,
    };
    // Merging is for the NFs placed together: each stage of the chosen placement apart.
    let chosen = placed
        .as_ref()
        .and_then(|p| p.placement.best())
        .map(|c| c.placement());
    let (_, merge) = plan::merge::analyze(&ex, chosen.as_ref());
    // Which branches go to other workers: profiled costs come with --profile.
    let workers = a
        .place
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let costs = placed
        .as_ref()
        .map(|p| plan::offload::Costs::from_profile(&p.profile, p.placement.cross_ns));
    let off = plan::offload::offload(&ex, &par, &profiles, workers, costs.as_ref());
    if a.json {
        let groups: Vec<&Vec<usize>> = par.groups.iter().map(|g| &g.nfs).collect();
        let v = serde_json::json!({
            "profiles": profiles,
            "dependencies": deps,
            "groups": groups,
            "merge": merge,
            "branches": off,
            "placement": placed.as_ref().map(|p| p.json()),
        });
        outln!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("Action profiles (NFCompass Table II; each NF beside the paper's nearest rows)\n");
    outln!("{}", plan::profile::table(&profiles));
    outln!("Dependencies (Table III, field by field) and parallel groups\n");
    outln!("{}", deps.text());
    outln!("Element merging (NFCompass §IV.B.2; --mode merged steps over what is taken)\n");
    outln!("{}", merge.text());
    outln!("Branches on other workers (NFCompass §IV.B; costs with --profile)\n");
    outln!("{}", off.text());
    match &placed {
        Some(p) => outln!("Placement (NFCompass §IV.C)\n\n{}", p.text()),
        None => outln!("Placement: give --profile TRACE (the chain's costs are measured)"),
    }
    Ok(ExitCode::SUCCESS)
}
