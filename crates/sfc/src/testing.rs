//! A real etcd for tests: started on a free loopback port with its own data directory and
//! mutual TLS (`--client-cert-auth`), killed and removed on drop.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let Some(etcd) = sfc::testing::Etcd::start_or_skip("my test")? else { return Ok(()) };
//! let tls = etcd.client_tls("controller")?;
//! let mut store = sfc::store::Store::connect(etcd.endpoint(), &tls).await?;
//! # Ok(()) }
//! ```
//!
//! Without the `etcd` binary, [`Etcd::start_or_skip`] prints why and returns `None`, except
//! under `CI=true` where it is an error (CI installs etcd, so a missing one is a failure).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::pki::{Ca, PkiError};
use crate::store::{Store, TlsFiles};

/// Errors while setting up a test etcd.
#[derive(Debug, thiserror::Error)]
pub enum TestingError {
    /// A file or process operation failed.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// A certificate could not be made.
    #[error("certificate: {0}")]
    Cert(#[from] PkiError),
    /// etcd did not become healthy.
    #[error("etcd did not become healthy: {0}\n--- etcd log (tail):\n{1}")]
    Unhealthy(String, String),
    /// A client certificate was asked of an etcd started with certificates made elsewhere.
    #[error(
        "this etcd was started with given certificates: it has no CA of its own to issue with"
    )]
    NoCa,
    /// `etcd` is missing under `CI=true`.
    #[error("the etcd binary is missing (install etcd-server); CI=true makes this a failure")]
    Missing,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TestingError {
    let what = what.into();
    move |e| TestingError::Io(what, e)
}

/// True when an `etcd` binary runs on this machine.
pub fn etcd_available() -> bool {
    Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// True under `CI=true`, where tests must not skip.
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true").unwrap_or(false)
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique name for this process: `fusebox-<what>-<pid>-<n>`.
pub fn unique_name(what: &str) -> String {
    format!(
        "fusebox-{what}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A certificate authority for tests ([`crate::pki::Ca`]), writing PEM files into a
/// directory.
pub struct TestCa {
    dir: PathBuf,
    ca: Ca,
    /// The CA certificate file (PEM).
    pub ca_file: PathBuf,
}

impl TestCa {
    /// A new CA named `name` writing its files into `dir` (created if needed).
    pub fn new(dir: &Path, name: &str) -> Result<TestCa, TestingError> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let ca = Ca::new(name)?;
        let ca_file = dir.join(format!("{name}.crt"));
        std::fs::write(&ca_file, &ca.pair().cert_pem).map_err(io("writing the CA"))?;
        Ok(TestCa {
            dir: dir.to_path_buf(),
            ca,
            ca_file,
        })
    }

    /// A certificate and key signed by this CA, with common name `cn`; `server` adds the
    /// loopback addresses and `localhost` as names and the server usage.
    pub fn issue(&self, cn: &str, server: bool) -> Result<TlsFiles, TestingError> {
        let pair = if server {
            self.ca.server(cn, &[])?
        } else {
            self.ca.client(cn)?
        };
        let cert_file = self.dir.join(format!("{cn}.crt"));
        let key_file = self.dir.join(format!("{cn}.key"));
        std::fs::write(&cert_file, &pair.cert_pem).map_err(io("writing a certificate"))?;
        std::fs::write(&key_file, &pair.key_pem).map_err(io("writing a key"))?;
        Ok(TlsFiles {
            ca: self.ca_file.clone(),
            cert: cert_file,
            key: key_file,
        })
    }
}

/// A running etcd with mutual TLS, killed and its directory removed on drop.
pub struct Etcd {
    child: Child,
    dir: PathBuf,
    endpoint: String,
    /// The CA it trusts, when it made its own.
    ca: Option<TestCa>,
    /// The identity the health check connects with.
    health: TlsFiles,
}

/// Where an etcd's certificates come from.
#[derive(Clone, Copy)]
enum Certs<'a> {
    /// A new [`TestCa`] in its directory.
    Own,
    /// etcd's server identity (its `ca` is the CA etcd trusts) and a client identity of
    /// that CA for the health check.
    Given {
        server: &'a TlsFiles,
        client: &'a TlsFiles,
    },
}

fn free_port() -> Result<u16, TestingError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(io("binding a free port"))?;
    Ok(l.local_addr().map_err(io("reading a port"))?.port())
}

impl Etcd {
    /// Starts etcd, or returns `None` after printing why when the binary is missing (an
    /// error under `CI=true`). `what` names the test in the message.
    pub fn start_or_skip(what: &str) -> Result<Option<Etcd>, TestingError> {
        if !etcd_available() {
            if in_ci() {
                return Err(TestingError::Missing);
            }
            eprintln!("skipping {what}: no etcd binary (install etcd-server)");
            return Ok(None);
        }
        Etcd::start().map(Some)
    }

    /// Starts etcd on free loopback ports with a new data directory and a new CA, and waits
    /// until it answers a client with a certificate of that CA.
    pub fn start() -> Result<Etcd, TestingError> {
        Etcd::start_certs(Certs::Own)
    }

    /// Like [`Etcd::start_or_skip`], with certificates made elsewhere (e.g. by
    /// [`crate::pki::Bundle`]): `server` is etcd's identity (its `ca`, the CA etcd trusts
    /// clients of), `client` an identity of that CA the health check connects with. Such an
    /// etcd has no [`Etcd::ca`] and cannot [`Etcd::client_tls`].
    pub fn start_with_or_skip(
        what: &str,
        server: &TlsFiles,
        client: &TlsFiles,
    ) -> Result<Option<Etcd>, TestingError> {
        if !etcd_available() {
            if in_ci() {
                return Err(TestingError::Missing);
            }
            eprintln!("skipping {what}: no etcd binary (install etcd-server)");
            return Ok(None);
        }
        Etcd::start_certs(Certs::Given { server, client }).map(Some)
    }

    fn start_certs(certs: Certs<'_>) -> Result<Etcd, TestingError> {
        let mut last = String::new();
        // A free port may be taken between probing and etcd's bind: try a few times.
        for _ in 0..3 {
            match Etcd::start_once(certs) {
                Ok(e) => return Ok(e),
                Err(TestingError::Unhealthy(why, log)) => last = format!("{why}\n{log}"),
                Err(e) => return Err(e),
            }
        }
        Err(TestingError::Unhealthy("three attempts".into(), last))
    }

    fn start_once(certs: Certs<'_>) -> Result<Etcd, TestingError> {
        let name = unique_name("etcd");
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        // From here on the directory is removed on failure (by `Dir`) or by `Etcd`'s drop.
        let guard = Dir(dir.clone());
        let (ca, server, health) = match certs {
            Certs::Own => {
                let ca = TestCa::new(&dir.join("pki"), "fusebox-test-ca")?;
                let server = ca.issue("etcd-server", true)?;
                let health = ca.issue("health-check", false)?;
                (Some(ca), server, health)
            }
            Certs::Given { server, client } => (None, server.clone(), client.clone()),
        };
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let endpoint = format!("https://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log =
            std::fs::File::create(dir.join("etcd.log")).map_err(io("creating the etcd log"))?;
        let log2 = log.try_clone().map_err(io("cloning the etcd log"))?;
        let child = Command::new("etcd")
            .arg("--name")
            .arg(&name)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen-client-urls")
            .arg(&endpoint)
            .arg("--advertise-client-urls")
            .arg(&endpoint)
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(format!("{name}={peer}"))
            .arg("--client-cert-auth")
            .arg("--trusted-ca-file")
            .arg(&server.ca)
            .arg("--cert-file")
            .arg(&server.cert)
            .arg("--key-file")
            .arg(&server.key)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(io("starting etcd"))?;
        std::mem::forget(guard);
        let mut etcd = Etcd {
            child,
            dir,
            endpoint,
            ca,
            health,
        };
        etcd.wait_healthy(Duration::from_secs(20))?;
        Ok(etcd)
    }

    fn wait_healthy(&mut self, within: Duration) -> Result<(), TestingError> {
        let tls = self.health.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io("building a runtime"))?;
        let start = Instant::now();
        let mut last = String::from("not tried");
        while start.elapsed() < within {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(TestingError::Unhealthy(
                    format!("etcd exited: {status}"),
                    self.log_tail(),
                ));
            }
            match rt.block_on(Store::connect(&self.endpoint, &tls)) {
                Ok(_) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(TestingError::Unhealthy(last, self.log_tail()))
    }

    /// The last lines of etcd's log (for failure messages).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The client URL (`https://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The directory of this etcd (data, log, certificates); removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA etcd trusts, when it made its own ([`Etcd::start`]).
    pub fn ca(&self) -> Option<&TestCa> {
        self.ca.as_ref()
    }

    /// A client certificate with common name `cn`, signed by the CA etcd trusts
    /// ([`TestingError::NoCa`] when it was started with given certificates).
    pub fn client_tls(&self, cn: &str) -> Result<TlsFiles, TestingError> {
        self.ca.as_ref().ok_or(TestingError::NoCa)?.issue(cn, false)
    }
}

/// Removes a directory on drop (a start that failed half-way leaves nothing behind).
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
