//! The arguments every command that talks to the control plane's etcd takes (`controller`,
//! `agent`, `chain status`), and the async runtime those commands build for themselves.

use crate::error::CliError;
use clap::Args;
use std::path::PathBuf;

/// Where etcd is and who we are (mutual TLS: certificates from `fusebox pki`).
#[derive(Args, Debug, Clone)]
pub struct EtcdArgs {
    /// etcd's client URL (`https://10.0.0.1:2379`).
    #[arg(long, value_name = "URL")]
    pub etcd: String,
    /// The CA certificate (PEM) etcd's certificate is signed by.
    #[arg(long, value_name = "FILE")]
    pub ca: PathBuf,
    /// This party's certificate (PEM), signed by the same CA.
    #[arg(long, value_name = "FILE")]
    pub cert: PathBuf,
    /// This party's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
}

impl EtcdArgs {
    /// The TLS files.
    pub fn tls(&self) -> sfc::store::TlsFiles {
        sfc::store::TlsFiles {
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
        }
    }
}

/// The async runtime of one command (the rest of `fusebox` is synchronous): two workers.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::io("tokio runtime", "cannot start: ", e))
}

/// A stop signal that turns true on SIGINT or SIGTERM (the command then returns cleanly).
pub fn stop_on_signals() -> tokio::sync::watch::Receiver<bool> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term => {}
        }
        let _ = tx.send(true);
    });
    rx
}

/// Log lines of the long-running commands: to stderr with the time.
pub fn log(line: &str) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    eprintln!("[{t:.3}] {line}");
}
