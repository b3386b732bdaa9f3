//! `fusebox controller FILE`: the chains-across-hosts controller. `--check` validates the
//! chain file; `--dry-run` also plans it without etcd and prints, per host and SF, the
//! stages and the map entries the agents would install (the thesis' Fig. 5.10 tables).
//! With `--etcd URL --ca --cert --key` it runs (`sfc::controller`): plans from the file and
//! the live agents' Hellos, writes each host's entries as a diff, and runs on, replanning
//! when an agent appears or its lease expires and when the file changes (its modification
//! time is polled every half second; no signal needed); `--once` applies and exits.

use crate::error::CliError;
use crate::etcd_args::{log, runtime, stop_on_signals};
use clap::Args;
use sfc::file::ChainFile;
use sfc::registry::{Hello, Registry};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `fusebox controller`.
#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// The chain file: Chaining-Box's JSON (Appendix A), or the same in TOML (`.toml`).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Only validate the file (schema and references); print a one-line summary.
    #[arg(long, conflicts_with = "dry_run")]
    pub check: bool,
    /// Validate and plan without etcd: print per host and SF the stages and entries.
    /// Without --hellos every host is assumed live, each SF on an interface named by the
    /// file (or after its tag) with placeholder ifindexes and MACs.
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: the agents' Hellos (a JSON array of what each agent registers) to
    /// plan against; hosts without one are not live.
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    pub hellos: Option<PathBuf>,
    /// With --dry-run: print the plan as JSON instead of the table.
    #[arg(long, requires = "dry_run")]
    pub json: bool,
    /// Run the controller on etcd at this client URL (`https://10.0.0.1:2379`).
    #[arg(long, value_name = "URL", conflicts_with_all = ["check", "dry_run"], requires_all = ["ca", "cert", "key"])]
    pub etcd: Option<String>,
    /// With --etcd: the CA certificate (PEM) etcd's certificate is signed by.
    #[arg(long, value_name = "FILE", requires = "etcd")]
    pub ca: Option<PathBuf>,
    /// With --etcd: the controller's certificate (PEM), signed by the same CA.
    #[arg(long, value_name = "FILE", requires = "etcd")]
    pub cert: Option<PathBuf>,
    /// With --etcd: the controller's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "etcd")]
    pub key: Option<PathBuf>,
    /// With --etcd: apply the plan once and exit (no watching).
    #[arg(long, requires = "etcd")]
    pub once: bool,
}

fn run_on_etcd(a: &ControllerArgs, url: &str) -> Result<ExitCode, CliError> {
    let (Some(ca), Some(cert), Some(key)) = (&a.ca, &a.cert, &a.key) else {
        return Err(CliError::Invalid(
            "--etcd needs --ca, --cert and --key".into(),
        ));
    };
    let tls = sfc::store::TlsFiles {
        ca: ca.clone(),
        cert: cert.clone(),
        key: key.clone(),
    };
    let mut options = sfc::controller::ControllerOptions::new(url, tls);
    options.once = a.once;
    let mut source = sfc::controller::ChainFileSource::new(&a.file, sfc::plan::plan);
    runtime()?.block_on(async {
        let stop = stop_on_signals();
        sfc::controller::run(&mut source, &options, stop, &log).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `fusebox controller`.
pub fn run(a: &ControllerArgs) -> Result<ExitCode, CliError> {
    let file = ChainFile::load(&a.file)?;
    if a.check {
        outln!(
            "{}: valid ({} chains, {} functions)",
            a.file.display(),
            file.chains.len(),
            file.functions.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(url) = &a.etcd {
        return run_on_etcd(a, url);
    }
    if !a.dry_run {
        return Err(CliError::Invalid(
            "fusebox controller FILE: give --etcd URL --ca --cert --key to run, or --dry-run / --check"
                .into(),
        ));
    }
    let reg = match &a.hellos {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::io(path, "cannot read: ", e))?;
            let hellos: Vec<Hello> = serde_json::from_str(&text).map_err(|e| {
                CliError::Invalid(format!(
                    "{}:{}:{}: expected a JSON array of Hellos: {e}",
                    path.display(),
                    e.line(),
                    e.column()
                ))
            })?;
            Registry::from_hellos(hellos)
        }
        None => Registry::assumed(&file),
    };
    let plan = sfc::plan::plan(&file, &reg);
    if a.json {
        let text = serde_json::to_string_pretty(&plan)
            .map_err(|e| CliError::Invalid(format!("the plan as JSON: {e}")))?;
        outln!("{text}");
    } else {
        if a.hellos.is_none() {
            outln!("(every host assumed live; interfaces, ifindexes and MACs are placeholders)");
        }
        for line in sfc::table::render(&plan, &reg).lines() {
            outln!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
