//! `fusebox pki`: the certificates of the control plane's mutual TLS. One CA; etcd's server
//! certificate (SANs 127.0.0.1, ::1, localhost and any given); the controller's client
//! certificate (CN `fusebox-controller`); etcd's administrator's client certificate (CN
//! `root`: etcd's root user, what `fusebox chain access` runs with to turn access control
//! on; keep it off the hosts); one client certificate per agent (CN = its host name, which
//! etcd's client-certificate authentication takes as the user).
//!
//! Files (PEM; keys mode 0600): `ca.pem` `ca-key.pem`, `etcd.pem` `etcd-key.pem`,
//! `controller.pem` `controller-key.pem`, `root.pem` `root-key.pem`, `agent-<host>.pem`
//! `agent-<host>-key.pem`.
//!
//! [`Ca`] is the authority itself (the tests' `sfc::testing::TestCa` issues with it too).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The controller certificate's common name.
pub const CONTROLLER_CN: &str = "fusebox-controller";

/// The administrator certificate's common name: etcd's root user when access control is on.
pub const ROOT_CN: &str = "root";

/// A certificate and its private key, in PEM.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The certificate.
    pub cert_pem: String,
    /// The private key (PKCS#8).
    pub key_pem: String,
}

/// Everything `fusebox pki` makes.
#[derive(Clone, Debug)]
pub struct Bundle {
    /// The CA (self-signed).
    pub ca: Pair,
    /// etcd's server certificate.
    pub etcd: Pair,
    /// The controller's client certificate.
    pub controller: Pair,
    /// The administrator's client certificate (CN [`ROOT_CN`], for `fusebox chain access`).
    pub root: Pair,
    /// One client certificate per agent, by host name.
    pub agents: BTreeMap<String, Pair>,
}

/// What can go wrong making or writing certificates.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen refused.
    #[error("making a certificate: {0}")]
    Cert(#[from] rcgen::Error),
    /// A host name or SAN that cannot go in a certificate.
    #[error("{0}")]
    Bad(String),
    /// Files that are there already (no `--force`).
    #[error("refusing to overwrite {} (give --force to replace them)", .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    Exists(Vec<PathBuf>),
    /// Writing failed.
    #[error("writing {path}: {err}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
}

fn dn(cn: &str) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    d.push(DnType::OrganizationName, "FuseBox SFC");
    d.push(DnType::CommonName, cn);
    d
}

/// Valid from January 1 of this year for ten years.
fn validity(p: &mut CertificateParams) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let year = 1970 + (secs / 31_556_952) as i32;
    p.not_before = rcgen::date_time_ymd(year, 1, 1);
    p.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
}

fn leaf(
    cn: &str,
    sans: Vec<SanType>,
    eku: Vec<ExtendedKeyUsagePurpose>,
    ca: &Issuer<'_, KeyPair>,
) -> Result<Pair, PkiError> {
    let key = KeyPair::generate()?;
    let mut p = CertificateParams::default();
    p.distinguished_name = dn(cn);
    p.subject_alt_names = sans;
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = eku;
    p.use_authority_key_identifier_extension = true;
    validity(&mut p);
    let cert = p.signed_by(&key, ca)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A certificate authority: its own certificate and the key it signs with.
pub struct Ca {
    pair: Pair,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    /// A new self-signed CA with common name `cn`, allowed to sign leaf certificates only.
    pub fn new(cn: &str) -> Result<Ca, PkiError> {
        let key = KeyPair::generate()?;
        let mut ca = CertificateParams::default();
        ca.distinguished_name = dn(cn);
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut ca);
        let cert = ca.self_signed(&key)?;
        let pair = Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        Ok(Ca {
            pair,
            issuer: Issuer::new(ca, key),
        })
    }

    /// The CA's certificate and key.
    pub fn pair(&self) -> &Pair {
        &self.pair
    }

    /// A client certificate with common name `cn` (the user etcd sees).
    pub fn client(&self, cn: &str) -> Result<Pair, PkiError> {
        leaf(
            cn,
            vec![],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            &self.issuer,
        )
    }

    /// A server certificate (usable as a client too) with common name `cn`, naming
    /// 127.0.0.1, ::1, localhost and `extra_sans` (IP addresses or DNS names).
    pub fn server(&self, cn: &str, extra_sans: &[String]) -> Result<Pair, PkiError> {
        let mut sans = vec![san("127.0.0.1")?, san("::1")?, san("localhost")?];
        for s in extra_sans {
            let s = san(s)?;
            if !sans.contains(&s) {
                sans.push(s);
            }
        }
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        leaf(cn, sans, vec![ServerAuth, ClientAuth], &self.issuer)
    }
}

fn san(s: &str) -> Result<SanType, PkiError> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    let bad = || PkiError::Bad(format!("not an IP address or DNS name: {s:?}"));
    let labels_ok = s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if !labels_ok {
        return Err(bad());
    }
    let name = s.to_string().try_into().map_err(|_| bad())?;
    Ok(SanType::DnsName(name))
}

fn host_ok(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 63
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && h.starts_with(|c: char| c.is_ascii_alphanumeric())
}

impl Bundle {
    /// A new CA and certificates for etcd (with the extra SANs), the controller and the
    /// agents of `hosts`.
    pub fn generate(hosts: &[String], extra_sans: &[String]) -> Result<Bundle, PkiError> {
        let mut seen = std::collections::BTreeSet::new();
        for h in hosts {
            if !host_ok(h) {
                return Err(PkiError::Bad(format!(
                    "host name {h:?}: expected letters, digits, '_', '.', '-' (as in the chain file)"
                )));
            }
            if !seen.insert(h) {
                return Err(PkiError::Bad(format!("host {h} given twice")));
            }
            if h == ROOT_CN || h == CONTROLLER_CN {
                // The agent's certificate would carry etcd's root user or the controller.
                return Err(PkiError::Bad(format!(
                    "host name {h:?}: taken by the {} certificate",
                    if h == ROOT_CN { "root" } else { "controller" }
                )));
            }
        }
        let ca = Ca::new("FuseBox SFC CA")?;
        let etcd = ca.server("etcd", extra_sans)?;
        let controller = ca.client(CONTROLLER_CN)?;
        let root = ca.client(ROOT_CN)?;
        let mut agents = BTreeMap::new();
        for h in hosts {
            agents.insert(h.clone(), ca.client(h)?);
        }
        Ok(Bundle {
            ca: ca.pair,
            etcd,
            controller,
            root,
            agents,
        })
    }

    /// The files to write: (name, contents, is a key).
    pub fn files(&self) -> Vec<(String, &str, bool)> {
        let mut pairs: Vec<(String, &Pair)> = vec![
            ("ca".into(), &self.ca),
            ("etcd".into(), &self.etcd),
            ("controller".into(), &self.controller),
            ("root".into(), &self.root),
        ];
        pairs.extend(self.agents.iter().map(|(h, p)| (format!("agent-{h}"), p)));
        pairs
            .into_iter()
            .flat_map(|(base, p)| {
                [
                    (format!("{base}.pem"), p.cert_pem.as_str(), false),
                    (format!("{base}-key.pem"), p.key_pem.as_str(), true),
                ]
            })
            .collect()
    }

    /// Writes the files into `dir` (made if missing); keys get mode 0600. Without `force`,
    /// refuses (writing nothing) if any of them exists.
    pub fn write(&self, dir: &Path, force: bool) -> Result<Vec<PathBuf>, PkiError> {
        let files = self.files();
        if !force {
            let there: Vec<PathBuf> = files
                .iter()
                .map(|(n, _, _)| dir.join(n))
                .filter(|p| p.exists())
                .collect();
            if !there.is_empty() {
                return Err(PkiError::Exists(there));
            }
        }
        std::fs::create_dir_all(dir).map_err(|err| PkiError::Io {
            path: dir.to_path_buf(),
            err,
        })?;
        let mut written = Vec::new();
        for (name, text, key) in files {
            let path = dir.join(&name);
            write_file(&path, text, key).map_err(|err| PkiError::Io {
                path: path.clone(),
                err,
            })?;
            written.push(path);
        }
        Ok(written)
    }
}

fn write_file(path: &Path, text: &str, key: bool) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mode = if key { 0o600 } else { 0o644 };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    // An existing file keeps its mode on open: set it.
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}
