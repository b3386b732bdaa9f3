//! The ISP chain (`examples/isp`: firewall → router → NAPT) with long ClassBench access
//! lists chosen at run time (`--define RULES=...`): traces drawn from the rules' corners
//! (`fusebox gen --rules`) and from a header trace (`--headers`); synthesis keeps long rule
//! lists as ordered classes (lazy subtraction), and `fusebox verify` finds synth identical
//! to naive in both directions. A generated rule set always; the shared `fw1_1k` (first 250
//! rules, then all) when `../shared/data` is there.

mod common;
use common::*;
use std::path::Path;

/// `t.pcap` in `dir`: `packets` packets of `flows` flows drawn from the corners of the
/// rules in `rules`, with expiring TTLs and some bad checksums and IP options.
fn gen_from_rules(dir: &Path, rules: &str, packets: u64, flows: u32) {
    let (packets, flows) = (packets.to_string(), flows.to_string());
    fusebox_ok(
        dir,
        &[
            "gen",
            "-o",
            "t.pcap",
            "--packets",
            &packets,
            "--flows",
            &flows,
            "--rules",
            rules,
            "--ttl",
            "1-10",
            "--bad-ip-checksum",
            "0.01",
            "--ip-options",
            "0.01",
        ],
    );
}

/// The number of traffic classes `fusebox synth` reports for the firewall's entry.
fn classes(dir: &Path, chain: &str, defines: &[String]) -> usize {
    let mut args = vec!["synth", chain];
    for d in defines {
        args.extend(["-D", d.as_str()]);
    }
    let out = fusebox_ok(dir, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("entry fw.eth0:"))
        .unwrap_or_else(|| panic!("no fw.eth0 entry in:\n{text}"));
    line.split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no class count in `{line}`"))
}

/// Verifies the ISP chain on `trace` with `defines`; returns the verify line.
fn verify(dir: &Path, chain: &str, trace: &str, defines: &[String]) -> String {
    let input = format!("fw.eth0={trace}");
    let mut args = vec!["verify", chain, "--input", &input, "--reflect", "napt.eth1"];
    for d in defines {
        args.extend(["-D", d.as_str()]);
    }
    let out = fusebox_ok(dir, &args);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("identical"), "{text}");
    text
}

#[test]
fn long_generated_access_lists_synthesize_to_ordered_classes_and_verify() {
    let dir = scratch("isp-generated");
    let chain = root().join("examples/isp/chain.toml");
    let chain = chain.to_str().unwrap();
    std::fs::write(dir.join("acl.cb"), rule_set(300, 3)).unwrap();
    gen_from_rules(&dir, "acl.cb", 20_000, 600);
    let rules = format!("RULES={}", dir.join("acl.cb").display());
    let text = verify(&dir, chain, "t.pcap", std::slice::from_ref(&rules));
    // Some packets leave (85 % of the rules allow), some are denied.
    let left: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(left > 1000, "{text}");
    // Ordered classes: a bounded number per rule (subtracting every earlier rule from each
    // later one gave tens of thousands for lists this long).
    let n = classes(&dir, chain, std::slice::from_ref(&rules));
    assert!(n < 20 * 300, "{n} classes for 300 rules");
    // A header trace: the same chain, flows taken in order from the trace's lines.
    let mut trace = String::new();
    let mut x = 77u64;
    for i in 0..500 {
        let s = 0x0a00_0000 | (next(&mut x) % (1 << 18));
        let d = 0x0a00_0000 | (next(&mut x) % (1 << 18));
        let proto = [6, 17, 1, 47][i % 4];
        trace.push_str(&format!(
            "{s}\t{d}\t{}\t{}\t{proto}\t0\t{i}\n",
            1024 + i,
            [53, 80, 443][i % 3]
        ));
    }
    std::fs::write(dir.join("headers"), trace).unwrap();
    fusebox_ok(
        &dir,
        &[
            "gen",
            "-o",
            "h.pcap",
            "--packets",
            "5000",
            "--flows",
            "500",
            "--headers",
            "headers",
        ],
    );
    let pkts = packets(&dir.join("h.pcap"));
    assert_eq!(pkts.len(), 5000);
    let protos: std::collections::BTreeSet<u8> = pkts.iter().map(|p| p[23]).collect();
    assert_eq!(protos, [1u8, 6, 17, 47].into_iter().collect());
    verify(&dir, chain, "h.pcap", &[rules]);
}

#[test]
fn the_shared_fw1_1k_list_verifies() {
    let cb = root().join("../shared/data/classbench/neurocuts/fw1_1k");
    if !cb.exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but {} is missing",
            cb.display()
        );
        eprintln!("skipped: {} not found (the shared test data)", cb.display());
        return;
    }
    let dir = scratch("isp-fw1");
    let chain = root().join("examples/isp/chain.toml");
    let chain = chain.to_str().unwrap();
    let cbs = cb.to_str().unwrap();
    gen_from_rules(&dir, cbs, 30_000, 1000);
    let rules = format!("RULES={cbs}");
    let first = "FIRST=250".to_string();
    verify(&dir, chain, "t.pcap", &[rules.clone(), first.clone()]);
    verify(&dir, chain, "t.pcap", std::slice::from_ref(&rules));
    let (n250, n1k) = (
        classes(&dir, chain, &[rules.clone(), first]),
        classes(&dir, chain, &[rules]),
    );
    assert!(n250 < n1k && n1k < 20 * 1000, "{n250} and {n1k} classes");
}

#[test]
fn remembered_flows_through_ordered_classes_respect_earlier_rules() {
    // Rule 0 denies low TTLs; 80 later rules allow by address. Packets of one flow carry
    // different TTLs, so a flow's later packet may belong to rule 0 though its first did
    // not: the remembered path must not serve it.
    let dir = scratch("isp-ordered-flows");
    let mut acl = String::from("deny ip ttl < 20\n");
    for i in 0..80 {
        acl.push_str(&format!("allow src net 10.0.{i}.0/24 && udp\n"));
    }
    acl.push_str("deny all\n");
    std::fs::write(dir.join("acl.rules"), acl).unwrap();
    let udp = [
        "--packets",
        "20000",
        "--flows",
        "300",
        "--mix",
        "udp=1",
        "--src",
        "10.0.0.0/18",
    ];
    gen_trace(&dir, "t.pcap", &[&udp[..], &["--ttl", "1-64"]].concat());
    let chain = root().join("examples/isp/chain.toml");
    let chain = chain.to_str().unwrap();
    let rules = format!("RULES={}", dir.join("acl.rules").display());
    verify(&dir, chain, "t.pcap", std::slice::from_ref(&rules));
    // The same trace with one TTL: later packets do take remembered paths.
    gen_trace(&dir, "one.pcap", &udp);
    verify(&dir, chain, "one.pcap", std::slice::from_ref(&rules));
    let out = fusebox_ok(
        &dir,
        &[
            "run",
            chain,
            "-D",
            &rules,
            "--mode",
            "synth",
            "--input",
            "fw.eth0=one.pcap",
            "--replay",
            "1",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let hits: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("synth: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no synth line in {err}"));
    assert!(hits > 10_000, "{err}");
}
