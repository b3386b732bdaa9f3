//! `fusebox pki`'s certificates: each one chains to the CA, a certificate from another CA
//! does not, names and usages are what etcd's client-certificate authentication needs, keys
//! are private and nothing is overwritten without --force.

use sfc::pki::{Bundle, PkiError, CONTROLLER_CN, ROOT_CN};
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;

fn der(pem: &str) -> Vec<u8> {
    let (_, p) = parse_x509_pem(pem.as_bytes()).expect("PEM");
    p.contents
}

fn cn(der: &[u8]) -> String {
    let (_, c) = x509_parser::parse_x509_certificate(der).unwrap();
    let name = c
        .subject()
        .iter_common_name()
        .next()
        .and_then(|n| n.as_str().ok())
        .unwrap_or_default()
        .to_string();
    name
}

/// Whether `leaf` is signed by `ca`'s key and names it as issuer.
fn chains(leaf: &str, ca: &str) -> bool {
    let (l, c) = (der(leaf), der(ca));
    let (_, l) = x509_parser::parse_x509_certificate(&l).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&c).unwrap();
    l.issuer() == c.subject() && l.verify_signature(Some(c.public_key())).is_ok()
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn certificates_chain_to_their_ca_only() {
    let hosts = vec!["server1".to_string(), "server2".to_string()];
    let b = Bundle::generate(&hosts, &["10.0.0.9".into(), "etcd.lab".into()]).unwrap();
    let other = Bundle::generate(&hosts, &[]).unwrap();
    let (_, ca) = x509_parser::parse_x509_certificate(&der(&b.ca.cert_pem))
        .map(|(r, c)| (r.len(), c.is_ca()))
        .unwrap();
    assert!(ca);
    assert!(chains(&b.ca.cert_pem, &b.ca.cert_pem));
    for leaf in [
        &b.etcd,
        &b.controller,
        &b.root,
        &b.agents["server1"],
        &b.agents["server2"],
    ] {
        assert!(chains(&leaf.cert_pem, &b.ca.cert_pem));
        assert!(!chains(&leaf.cert_pem, &other.ca.cert_pem));
        let d = der(&leaf.cert_pem);
        let (_, c) = x509_parser::parse_x509_certificate(&d).unwrap();
        assert!(!c.is_ca());
        assert!(c.extended_key_usage().unwrap().unwrap().value.client_auth);
    }
    // A certificate of the other CA does not chain to ours.
    assert!(!chains(&other.agents["server1"].cert_pem, &b.ca.cert_pem));
    assert_eq!(cn(&der(&b.controller.cert_pem)), CONTROLLER_CN);
    // etcd's root user, for `fusebox chain access`.
    assert_eq!(cn(&der(&b.root.cert_pem)), ROOT_CN);
    assert_eq!(ROOT_CN, "root");
    assert_eq!(cn(&der(&b.agents["server2"].cert_pem)), "server2");
    // etcd's server certificate names loopback, localhost and the extra SANs.
    let d = der(&b.etcd.cert_pem);
    let (_, c) = x509_parser::parse_x509_certificate(&d).unwrap();
    assert!(c.extended_key_usage().unwrap().unwrap().value.server_auth);
    let san = c.subject_alternative_name().unwrap().unwrap();
    let mut names: Vec<String> = san
        .value
        .general_names
        .iter()
        .map(|g| match g {
            GeneralName::DNSName(n) => n.to_string(),
            GeneralName::IPAddress(ip) => format!("{ip:?}"),
            other => format!("{other:?}"),
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]",
            "[10, 0, 0, 9]",
            "[127, 0, 0, 1]",
            "etcd.lab",
            "localhost"
        ]
    );
}

#[test]
fn files_keys_private_no_overwrite() {
    let dir = TempDir(std::env::temp_dir().join(format!("fusebox-pki-{}", std::process::id())));
    let b = Bundle::generate(&["h1".to_string()], &[]).unwrap();
    let written = b.write(&dir.0, false).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "ca.pem",
            "ca-key.pem",
            "etcd.pem",
            "etcd-key.pem",
            "controller.pem",
            "controller-key.pem",
            "root.pem",
            "root-key.pem",
            "agent-h1.pem",
            "agent-h1-key.pem"
        ]
    );
    for p in &written {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let key = p.to_string_lossy().ends_with("-key.pem");
        assert_eq!(mode, if key { 0o600 } else { 0o644 }, "{}", p.display());
    }
    let first = std::fs::read_to_string(dir.0.join("ca.pem")).unwrap();
    let again = Bundle::generate(&["h1".to_string()], &[]).unwrap();
    match again.write(&dir.0, false) {
        Err(PkiError::Exists(there)) => assert_eq!(there.len(), 10),
        other => panic!("overwrote: {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(dir.0.join("ca.pem")).unwrap(),
        first
    );
    again.write(&dir.0, true).unwrap();
    assert_ne!(
        std::fs::read_to_string(dir.0.join("ca.pem")).unwrap(),
        first
    );
}

#[test]
fn bad_names_refused() {
    assert!(Bundle::generate(&["a/b".to_string()], &[]).is_err());
    assert!(Bundle::generate(&["h".to_string(), "h".to_string()], &[]).is_err());
    assert!(Bundle::generate(&[], &["not a name!".to_string()]).is_err());
    // An agent named like etcd's root user or the controller would carry their rights.
    for taken in [ROOT_CN, CONTROLLER_CN] {
        match Bundle::generate(&[taken.to_string()], &[]) {
            Err(PkiError::Bad(why)) => assert!(why.contains("taken"), "{why}"),
            other => panic!("{taken}: {other:?}"),
        }
    }
}
