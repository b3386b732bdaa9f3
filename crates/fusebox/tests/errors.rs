//! Every malformed input gives one clear error and a non-zero exit, never a panic.

mod common;
use common::*;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// Runs fusebox, expects failure, returns stderr.
fn fails(dir: &Path, args: &[&str]) -> String {
    let o = fusebox(dir, args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        !o.status.success(),
        "fusebox {args:?} should fail; stderr:\n{err}"
    );
    assert_ne!(o.status.code(), Some(101), "panicked: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

const PASS: &str = "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> EtherEncap(0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2) -> ToDevice(eth1);\n";

#[test]
fn truncated_pcap_processes_complete_records_then_fails() {
    let d = scratch("trunc");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "t.pcap",
            "--packets",
            "10",
            "--flows",
            "2",
            "--mix",
            "udp=1",
        ],
    );
    let bytes = std::fs::read(d.join("t.pcap")).unwrap();
    std::fs::write(d.join("cut.pcap"), &bytes[..bytes.len() - 7]).unwrap();
    write(&d, "nf.click", PASS);
    let err = fails(
        &d,
        &[
            "run",
            "nf.click",
            "--input",
            "eth0=cut.pcap",
            "--output",
            "eth1=o.pcap",
        ],
    );
    assert!(err.contains("cut.pcap"), "{err}");
    assert!(err.to_lowercase().contains("truncated"), "{err}");
    assert_eq!(
        packets(&d.join("o.pcap")).len(),
        9,
        "the nine complete records were processed"
    );
}

#[test]
fn bad_magic() {
    let d = scratch("magic");
    std::fs::write(d.join("x.pcap"), b"this is not a capture file at all").unwrap();
    write(&d, "nf.click", PASS);
    let err = fails(&d, &["run", "nf.click", "--input", "eth0=x.pcap"]);
    assert!(
        err.contains("x.pcap") && err.to_lowercase().contains("magic"),
        "{err}"
    );
}

#[test]
fn click_syntax_errors_name_file_line_and_column() {
    let d = scratch("syntax");
    write(
        &d,
        "bad.click",
        "FromDevice(eth0) -> Strip(14)\n  -> -> ToDevice(eth1);\n",
    );
    let err = fails(&d, &["check", "bad.click"]);
    assert!(err.contains("bad.click:2:6"), "{err}");
    write(
        &d,
        "open.click",
        "FromDevice(eth0) -> Strip(14 -> ToDevice(eth1);\n",
    );
    let err = fails(&d, &["check", "open.click"]);
    assert!(err.contains("open.click:1:"), "{err}");
}

#[test]
fn unknown_element_and_wrong_argument() {
    let d = scratch("elem");
    write(
        &d,
        "u.click",
        "FromDevice(eth0) -> Frobnicate(3) -> ToDevice(eth1);\n",
    );
    let err = fails(&d, &["check", "u.click"]);
    assert!(
        err.contains("u.click:1:21") && err.contains("unknown element class `Frobnicate`"),
        "{err}"
    );
    write(
        &d,
        "a.click",
        "FromDevice(eth0) -> Strip(fourteen) -> ToDevice(eth1);\n",
    );
    let err = fails(&d, &["check", "a.click"]);
    assert!(
        err.contains("a.click:1:21") && err.contains("fourteen"),
        "{err}"
    );
    write(
        &d,
        "p.click",
        "FromDevice(eth0) -> rt :: RadixIPLookup(10.0.0.0/40 0) -> ToDevice(eth1);\n",
    );
    let err = fails(&d, &["check", "p.click"]);
    assert!(err.contains("p.click:1:21"), "{err}");
}

#[test]
fn chain_wiring_errors() {
    let d = scratch("wiring");
    write(&d, "a.click", PASS);
    write(&d, "b.click", PASS);
    write(
        &d,
        "self.toml",
        "[nf.a]\nclick = \"a.click\"\n[[link]]\nbetween = [\"a.eth0\", \"a.eth1\"]\n",
    );
    let err = fails(&d, &["check", "self.toml"]);
    assert!(
        err.contains("self.toml:4:11") && err.contains("linked to itself"),
        "{err}"
    );
    write(
        &d,
        "two.toml",
        "[nf.a]\nclick = \"a.click\"\n[nf.b]\nclick = \"b.click\"\n[[link]]\nbetween = [\"a.eth1\", \"b.eth0\"]\n[[link]]\nbetween = [\"a.eth1\", \"b.eth1\"]\n",
    );
    let err = fails(&d, &["check", "two.toml"]);
    assert!(
        err.contains("two.toml:8:11") && err.contains("`a.eth1` is already in the link"),
        "{err}"
    );
    write(&d, "iface.toml", "[nf.a]\nclick = \"a.click\"\n[nf.b]\nclick = \"b.click\"\n[[link]]\nbetween = [\"a.eth7\", \"b.eth0\"]\n");
    let err = fails(&d, &["check", "iface.toml"]);
    assert!(
        err.contains("unknown interface `a.eth7`") && err.contains("eth0, eth1"),
        "{err}"
    );
    write(
        &d,
        "nf.toml",
        "[nf.a]\nclick = \"a.click\"\n[[entry]]\nto = \"zz.eth0\"\n",
    );
    let err = fails(&d, &["check", "nf.toml"]);
    assert!(err.contains("unknown NF `zz`"), "{err}");
    write(&d, "missing.toml", "[nf.a]\nclick = \"nope.click\"\n");
    let err = fails(&d, &["check", "missing.toml"]);
    assert!(err.contains("nope.click"), "{err}");
}

#[test]
fn unconnected_output_is_refused() {
    let d = scratch("unconn");
    write(
        &d,
        "c.click",
        "FromDevice(eth0) -> c :: Classifier(12/0800, -); c[0] -> ToDevice(eth1);\n",
    );
    let err = fails(&d, &["check", "c.click"]);
    assert!(
        err.contains("c.click:1:21") && err.contains("output 1"),
        "{err}"
    );
}

#[test]
fn a_run_without_inputs_says_what_to_give() {
    let d = scratch("noinput");
    let ex = root().join("examples/fig5/chain.toml");
    let err = fails(&d, &["run", ex.to_str().unwrap()]);
    assert!(
        err.contains("--input") && err.contains("napt.eth0"),
        "{err}"
    );
}
