//! `fusebox chain status --etcd URL --ca --cert --key [--json]`: the chains across hosts as
//! the control plane sees them: each chain's path (the controller's report), and per host and
//! stage the installed entries and counters (what each agent published).

use crate::error::CliError;
use crate::etcd_args::{runtime, EtcdArgs};
use clap::{Args, Subcommand};
use std::process::ExitCode;

/// Arguments of `fusebox chain`.
#[derive(Args, Debug)]
pub struct ChainArgs {
    #[command(subcommand)]
    pub command: ChainCommand,
}

/// The subcommands of `fusebox chain`.
#[derive(Subcommand, Debug)]
pub enum ChainCommand {
    /// Per chain its path; per host and stage the installed entries and counters.
    Status(StatusArgs),
}

/// Arguments of `fusebox chain status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `fusebox chain`.
pub fn run(a: &ChainArgs) -> Result<ExitCode, CliError> {
    match &a.command {
        ChainCommand::Status(s) => status(s),
    }
}

fn status(a: &StatusArgs) -> Result<ExitCode, CliError> {
    let status = runtime()?.block_on(async {
        let mut store = sfc::store::Store::connect(&a.etcd.etcd, &a.etcd.tls()).await?;
        sfc::status::ChainStatus::fetch(&mut store).await
    })?;
    if a.json {
        let text = serde_json::to_string_pretty(&status)
            .map_err(|e| CliError::Invalid(format!("status as JSON: {e}")))?;
        outln!("{text}");
    } else {
        let text = status.render(sfc::status::now());
        outln!("{}", text.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}
