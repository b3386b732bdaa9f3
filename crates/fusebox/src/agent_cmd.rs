//! `fusebox agent --host NAME --config AGENT.toml --etcd URL --ca --cert --key`: one host's
//! agent of the chains across hosts (`sfc::agent`): registers the host's Hello under a lease,
//! watches its plan and makes the data plane match it, publishes its status every second.

use crate::error::CliError;
use crate::etcd_args::{log, runtime, stop_on_signals, EtcdArgs};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `fusebox agent`.
#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The host's name (as the chain file's functions name it).
    #[arg(long)]
    pub host: String,
    /// The host's SFs (tag, interfaces, namespace) and underlay address (AGENT.toml).
    #[arg(long, value_name = "AGENT.toml")]
    pub config: PathBuf,
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// The lease's time to live in seconds: the controller routes around this host this
    /// long after the agent stops answering.
    #[arg(long, default_value_t = 5)]
    pub ttl: i64,
    /// Keep the data plane's entries in this JSON file instead of the kernel's maps (no eBPF,
    /// no root): for trying the control plane out.
    #[arg(long, value_name = "FILE")]
    pub fake_dataplane: Option<PathBuf>,
    /// Where the kernel data plane records the entries it installed (default
    /// /run/fusebox/sfc-agent-HOST.json); with the pinned maps it lets a restarted agent
    /// pick up where it left off.
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
}

/// `fusebox agent`.
pub fn run(a: &AgentArgs) -> Result<ExitCode, CliError> {
    if a.ttl < 2 {
        return Err(CliError::Invalid(format!(
            "--ttl {}: at least 2 seconds (etcd's minimum lease)",
            a.ttl
        )));
    }
    let config = sfc::agent::AgentConfig::load(&a.config)?;
    let hello = config.hello(&a.host)?;
    let mut options = sfc::agent::AgentOptions::new(&a.etcd.etcd, a.etcd.tls());
    options.ttl = a.ttl;
    options.status_every = Duration::from_secs(1);
    let rt = runtime()?;
    // The agent runs on this thread (`block_on`): the kernel data plane's handles stay here.
    if let Some(path) = &a.fake_dataplane {
        let mut dp = sfc::dataplane::FileDataplane::new(path);
        rt.block_on(async {
            let stop = stop_on_signals();
            sfc::agent::run(&hello, &mut dp, &options, stop, &log).await;
        });
    } else {
        let ledger = a
            .ledger
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("/run/fusebox/sfc-agent-{}.json", a.host)));
        let mut dp = sfc::kernel::KernelDataplane::open(&a.host, &ledger, config.namespaces())
            .map_err(|e| CliError::Invalid(format!("the kernel data plane: {e}")))?;
        rt.block_on(async {
            let stop = stop_on_signals();
            sfc::agent::run(&hello, &mut dp, &options, stop, &log).await;
        });
    }
    Ok(ExitCode::SUCCESS)
}
