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
    // The binary registers the operator NFs of examples/bricks at start-up: so does the test.
    bricks::register().unwrap();
    let all = elements::registry::all();
    assert_eq!(
        all.len(),
        elements::registry::CLASSES.len() + bricks::CLASSES.len()
    );
    assert_eq!(lines.len(), all.len());
    for (line, c) in lines.iter().zip(all) {
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
    let (ok, out, _) = fusebox(&["elements", "TTLNF"]);
    assert!(ok);
    assert!(out.starts_with("TTLNF("), "{out}");
    assert!(out.contains("ttl-expired"), "{out}");
    let (ok, _, err) = fusebox(&["elements", "NoSuchClass"]);
    assert!(!ok);
    assert!(err.contains("no element class `NoSuchClass`"), "{err}");
}
