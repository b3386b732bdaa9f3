//! `fusebox pki`: a CA and the certificates of the control plane's mutual TLS (etcd's
//! server certificate, the controller's, etcd's root user's (for `fusebox chain access`)
//! and every agent's client certificate).

use crate::error::CliError;
use clap::Args;
use sfc::pki::Bundle;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `fusebox pki`.
#[derive(Args, Debug)]
pub struct PkiArgs {
    /// Where to write the PEM files (made if missing; keys get mode 0600).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The agents' host names (comma-separated): one client certificate each, CN = host.
    #[arg(long, value_name = "H1,H2", value_delimiter = ',', required = true)]
    pub hosts: Vec<String>,
    /// Another name or IP address for etcd's server certificate (besides 127.0.0.1, ::1
    /// and localhost); repeatable.
    #[arg(long, value_name = "IP|NAME")]
    pub san: Vec<String>,
    /// Replace existing files.
    #[arg(long)]
    pub force: bool,
}

/// Runs `fusebox pki`.
pub fn run(a: &PkiArgs) -> Result<ExitCode, CliError> {
    let bundle = Bundle::generate(&a.hosts, &a.san)?;
    for path in bundle.write(&a.dir, a.force)? {
        outln!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
