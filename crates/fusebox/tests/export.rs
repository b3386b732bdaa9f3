//! `fusebox synth --click`: the exported configuration is made of stock Click elements,
//! parses back into FuseBox, and `fusebox verify --against` finds it identical to the chain
//! (packets per exit, packets in/out/dropped, rewriters' state) on traces with expiring
//! TTLs, bad checksums and IP options; a changed configuration is found different.

mod common;
use common::*;
use std::path::Path;

/// The stock Click element classes an export may use.
const STOCK: &[&str] = &[
    "FromDevice",
    "ToDevice",
    "ToDump",
    "Strip",
    "Unstrip",
    "CheckIPHeader",
    "CheckIPHeader2",
    "IPClassifier",
    "IPFilter",
    "Discard",
    "Null",
    "Paint",
    "PaintSwitch",
    "IPRewriter",
    "TCPRewriter",
    "UDPRewriter",
    "RoundRobinIPMapper",
    "DecIPTTL",
    "EtherEncap",
    "SetIPAddress",
    "GetIPAddress",
    "SetIPChecksum",
    "IPFragmenter",
    "Tee",
    "Counter",
    "RadixIPLookup",
    "StaticIPLookup",
    "LinearIPLookup",
];

/// Writes `fusebox synth CHAIN --click` to `file` in `dir` and returns the text.
fn export(dir: &Path, chain: &str, file: &str) -> String {
    let c = root().join(chain);
    let o = fusebox_ok(dir, &["synth", c.to_str().unwrap(), "--click"]);
    let text = String::from_utf8(o.stdout).unwrap();
    std::fs::write(dir.join(file), &text).unwrap();
    text
}

/// The element classes a configuration declares (`name :: Class(...)`).
fn classes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_once(" :: "))
        .map(|(_, rest)| rest.split(['(', ';']).next().unwrap_or("").to_string())
        .collect()
}

/// `fusebox verify CHAIN --against FILE ARGS`: (exit code, stdout).
fn against(dir: &Path, chain: &str, file: &str, args: &[&str]) -> (Option<i32>, String) {
    let c = root().join(chain);
    let mut all = vec!["verify", c.to_str().unwrap(), "--against", file];
    all.extend_from_slice(args);
    let o = fusebox(dir, &all);
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn trace(dir: &Path, file: &str, args: &[&str]) {
    let mut all = vec!["gen", "-o", file, "--packets", "20000"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--ttl",
        "1-8",
        "--bad-ip-checksum",
        "0.01",
        "--ip-options",
        "0.01",
        "--seed",
        "11",
    ]);
    fusebox_ok(dir, &all);
}

#[test]
fn fig5_export_is_stock_click_and_identical() {
    let d = scratch("export-fig5");
    let text = export(&d, "examples/fig5/chain.toml", "fig5.click");
    for c in classes(&text) {
        assert!(STOCK.contains(&c.as_str()), "{c} is not a stock element");
    }
    // One rewriter per original stateful element, under its qualified name.
    assert!(text.contains("napt/rw :: IPRewriter("), "{text}");
    assert!(text.contains("lb/rw :: IPRewriter(lb/rr, drop)"), "{text}");
    assert!(text.contains("lb/rr :: RoundRobinIPMapper("), "{text}");
    // The UDP class is decremented three times (one DecIPTTL per NF).
    assert!(text.matches("DecIPTTL").count() >= 3);

    trace(
        &d,
        "t.pcap",
        &[
            "--flows",
            "400",
            "--mix",
            "udp=3,tcp=2",
            "--src",
            "192.168.0.0/24",
            "--dst",
            "10.0.0.0/8",
            "--dport",
            "1234",
        ],
    );
    let (code, out) = against(
        &d,
        "examples/fig5/chain.toml",
        "fig5.click",
        &["--input", "napt.eth0=t.pcap", "--reflect", "lb.eth1"],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("identical: "), "{out}");
    // Replies came back through both rewriters, whose mappings compare equal.
    let n: Vec<u64> = out
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    assert!(n[0] > 1000 && n[1] == 3 && n[3] > 100, "{out}");

    // A configuration that is not equivalent is found out: the load balancer's MACs.
    let changed = text.replacen(
        "EtherEncap(0x0800, 02:00:00:00:00:05, 02:00:00:00:00:06)",
        "EtherEncap(0x0800, 02:00:00:00:00:05, 02:00:00:00:00:07)",
        1,
    );
    assert_ne!(changed, text);
    std::fs::write(d.join("changed.click"), changed).unwrap();
    let (code, out) = against(
        &d,
        "examples/fig5/chain.toml",
        "changed.click",
        &["--input", "napt.eth0=t.pcap", "--reflect", "lb.eth1"],
    );
    assert_eq!(code, Some(4), "{out}");
    assert!(out.starts_with("different: "), "{out}");
}

#[test]
fn router_chain_exports_are_identical() {
    let d = scratch("export-routers");
    trace(
        &d,
        "t.pcap",
        &[
            "--flows",
            "300",
            "--mix",
            "udp=1,tcp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "10.0.0.0/8",
        ],
    );
    for (chain, file) in [
        ("examples/routers/one.toml", "one.click"),
        ("examples/routers/chain.toml", "ten.click"),
    ] {
        let text = export(&d, chain, file);
        for c in classes(&text) {
            assert!(STOCK.contains(&c.as_str()), "{c} is not a stock element");
        }
        let (code, out) = against(&d, chain, file, &["--input", "r1.eth0=t.pcap"]);
        assert_eq!(code, Some(0), "{chain}: {out}");
        assert!(out.starts_with("identical: "), "{chain}: {out}");
    }
    // The exported single router runs on its own, its devices named NF_IFACE.
    fusebox_ok(
        &d,
        &[
            "run",
            "one.click",
            "--input",
            "r1_eth0=t.pcap",
            "--out-dir",
            ".",
        ],
    );
    assert!(d.join("one.r1_eth1.pcap").exists());
}
