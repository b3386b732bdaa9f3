//! `fusebox controller --check / --dry-run` and `fusebox pki` (chains across hosts).

mod common;
use common::*;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn dry_run_prints_the_thesis_table() {
    let d = scratch("sfc-dry");
    let f = root().join("examples/sfc/fig5-10.json");
    let out = stdout(&fusebox_ok(
        &d,
        &["controller", f.to_str().unwrap(), "--dry-run"],
    ));
    // Fig. 5.10: sf1 and sf2 forward to sf3's MAC, sf3 ends both chains.
    let sf3_mac = out
        .lines()
        .find(|l| l.contains("(200,254)"))
        .and_then(|l| l.split("ethernet to ").nth(1))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    assert!(
        out.contains(&format!("(100,254) → ethernet to {sf3_mac} (sf3 in)")),
        "{out}"
    );
    assert!(out.contains("(100,253) → end of path"), "{out}");
    assert!(out.contains("(200,253) → end of path"), "{out}");
    assert!(
        out.contains("installed: sf2@server1 (SI 255) → sf3@server2 (SI 254)"),
        "{out}"
    );
    let toml = root().join("examples/sfc/fig5-10.toml");
    let again = stdout(&fusebox_ok(
        &d,
        &["controller", toml.to_str().unwrap(), "--dry-run"],
    ));
    assert_eq!(again, out);
    // --json is the plan itself.
    let json = stdout(&fusebox_ok(
        &d,
        &["controller", f.to_str().unwrap(), "--dry-run", "--json"],
    ));
    let plan: sfc::plan::Plan = serde_json::from_str(&json).unwrap();
    assert_eq!(plan.hosts["server2"].instances["sf3"].fwd.len(), 2);
}

#[test]
fn dry_run_with_hellos() {
    let d = scratch("sfc-hellos");
    let hellos = r#"[{"host": "server1", "functions": {
        "sf1": {"iface_in": {"name": "veth1", "ifindex": 7, "mac": "0a:00:00:00:00:01"}}}}]"#;
    std::fs::write(d.join("hellos.json"), hellos).unwrap();
    let f = root().join("examples/sfc/listing-a1.json");
    let out = stdout(&fusebox_ok(
        &d,
        &[
            "controller",
            f.to_str().unwrap(),
            "--dry-run",
            "--hellos",
            "hellos.json",
        ],
    ));
    // server2 has no agent: chain 1234 is not installed, 7892 is.
    assert!(out.contains("dec@veth1"), "{out}");
    assert!(out.contains("(7892,254) → end of path"), "{out}");
    assert!(out.contains("1234     NOT installed"), "{out}");
    assert!(out.contains("host server2 has no live agent"), "{out}");
}

#[test]
fn check_and_errors() {
    let d = scratch("sfc-check");
    let f = root().join("examples/sfc/listing-a1.json");
    let out = stdout(&fusebox_ok(
        &d,
        &["controller", f.to_str().unwrap(), "--check"],
    ));
    assert!(out.contains("valid (2 chains, 2 functions)"), "{out}");
    std::fs::write(
        d.join("bad.json"),
        "{\n  \"chains\": [{\"id\": 1, \"nodes\": [\"sf9\"]}],\n  \"functions\": [{\"tag\": \"sf1\", \"type\": \"x\", \"host\": \"h\"}]\n}\n",
    )
    .unwrap();
    let o = fusebox(&d, &["controller", "bad.json", "--check"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("bad.json:2:34: /chains/0/nodes/0: unknown tag \"sf9\": expected one of the functions' tags (sf1)"),
        "{err}"
    );
    // Without --dry-run or --check this build has no etcd to write to.
    let o = fusebox(&d, &["controller", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn pki_writes_and_refuses_to_overwrite() {
    let d = scratch("sfc-pki");
    let out = stdout(&fusebox_ok(
        &d,
        &[
            "pki",
            "--dir",
            "pki",
            "--hosts",
            "server1,server2",
            "--san",
            "10.1.0.1",
        ],
    ));
    assert_eq!(out.lines().count(), 10, "{out}");
    assert!(d.join("pki/agent-server2-key.pem").exists());
    let o = fusebox(&d, &["pki", "--dir", "pki", "--hosts", "server1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    fusebox_ok(
        &d,
        &["pki", "--dir", "pki", "--hosts", "server1", "--force"],
    );
}
