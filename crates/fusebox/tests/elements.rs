//! `fusebox elements`: the list of classes from the registry, one class's documentation,
//! and an unknown class refused.

use std::process::Command;

fn fusebox(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fusebox"))
        .args(args)
        .output()
        .expect("run fusebox");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn lists_every_registered_class() {
    let (ok, out, _) = fusebox(&["elements"]);
    assert!(ok);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), elements::registry::CLASSES.len());
    for (line, c) in lines.iter().zip(elements::registry::CLASSES) {
        assert!(line.starts_with(&format!("{}(", c.name)), "{line}");
    }
}

#[test]
fn describes_one_class() {
    let (ok, out, _) = fusebox(&["elements", "DecIPTTL"]);
    assert!(ok);
    assert!(out.starts_with("DecIPTTL("), "{out}");
    assert!(out.contains("ports      1/1-2"), "{out}");
    assert!(out.contains("ttl-expired"), "{out}");
    assert!(out.contains("model      yes"), "{out}");
    let (ok, _, err) = fusebox(&["elements", "NoSuchClass"]);
    assert!(!ok);
    assert!(err.contains("no element class `NoSuchClass`"), "{err}");
}
