//! `fusebox chain status --etcd URL --ca --cert --key [--json]`: the chains across hosts as
//! the control plane sees them: each chain's path (the controller's report), and per host and
//! stage the installed entries and counters (what each agent published).
//! `fusebox chain access`: etcd's access control by certificate CN.

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
    /// Turn on etcd's access control by certificate common name: each agent may write only
    /// its own Hello and status and read only its own plan; the controller everything
    /// under /fusebox/sfc/v1/. Run with a certificate whose CN is `root` (`fusebox pki`
    /// makes `root.pem` and `root-key.pem`).
    Access(AccessArgs),
}

/// Arguments of `fusebox chain access`.
#[derive(Args, Debug)]
pub struct AccessArgs {
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// The controller's certificate CN (repeatable; `fusebox pki` makes
    /// `fusebox-controller`).
    #[arg(long, value_name = "CN")]
    pub controller: Vec<String>,
    /// An agent: its host, and its certificate's CN if not the host name (as `fusebox pki`
    /// makes them) (repeatable).
    #[arg(long, value_name = "HOST[=CN]")]
    pub agent: Vec<String>,
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
        ChainCommand::Access(s) => access(s),
    }
}

fn access(a: &AccessArgs) -> Result<ExitCode, CliError> {
    let mut agents = Vec::new();
    for spec in &a.agent {
        let (host, cn) = match spec.split_once('=') {
            Some((h, c)) => (h.to_string(), c.to_string()),
            None => (spec.clone(), spec.clone()),
        };
        if host.is_empty() || cn.is_empty() || host.contains('/') {
            return Err(CliError::Invalid(format!(
                "--agent {spec:?}: want HOST or HOST=CN"
            )));
        }
        if cn == sfc::pki::ROOT_CN {
            return Err(CliError::Invalid(format!(
                "--agent {spec:?}: CN {cn} is etcd's root user, not an agent"
            )));
        }
        agents.push((host, cn));
    }
    runtime()?.block_on(async {
        let mut store = sfc::store::Store::connect(&a.etcd.etcd, &a.etcd.tls()).await?;
        for cn in &a.controller {
            store.allow_controller(cn).await?;
        }
        for (host, cn) in &agents {
            store.allow_agent(cn, host).await?;
        }
        store.enable_auth().await
    })?;
    outln!(
        "access control on: {} controller(s), {} agent(s)",
        a.controller.len(),
        agents.len()
    );
    Ok(ExitCode::SUCCESS)
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
