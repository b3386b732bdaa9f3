//! SpeedyBox's two real chains (`examples/speedybox`: MazuNAT → Maglev → Monitor →
//! BlacklistFilter, and BlacklistFilter → SnortIDS → Monitor) give the same packets, drops,
//! counters, alerts, Maglev choices and NF state with the per-flow fast path as naive:
//! on generated traces with replies, with TTLs that vary within a flow and bad IPv4
//! checksums mid-flow (the guards send those packets through the full chain), with
//! Maglev's schedule failing the backend of a fifth of the flows mid-stream, and on shared
//! captures of whole TCP conversations (zeek's `http`, `smtp` and `echo-connections`).

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// Runs `fusebox verify` naive against fastpath; returns the verify line and the
/// `fastpath:` line of a fastpath run.
fn same(
    dir: &Path,
    chain: &str,
    input: &str,
    reflect: Option<&str>,
    initial: &str,
) -> (String, String) {
    let chain = root().join("examples/speedybox").join(chain);
    let chain = chain.to_str().unwrap();
    let mut args = vec![
        "verify",
        chain,
        "--input",
        input,
        "--modes",
        "naive,fastpath",
    ];
    if let Some(r) = reflect {
        args.extend(["--reflect", r]);
    }
    let out = fusebox(dir, &args);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("identical:"),
        "{chain} {input}: {text}"
    );
    let verify = text
        .lines()
        .find(|l| l.contains("identical:"))
        .unwrap()
        .to_string();
    let mut args = vec![
        "run",
        chain,
        "--input",
        input,
        "--mode",
        "fastpath",
        "--initial",
        initial,
        "--out-dir",
        ".",
    ];
    if let Some(r) = reflect {
        args.extend(["--reflect", r]);
    }
    let out = fusebox_ok(dir, &args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let fast = err
        .lines()
        .find(|l| l.starts_with("fastpath:"))
        .unwrap_or_else(|| panic!("no fastpath line: {err}"))
        .to_string();
    (verify, fast)
}

/// The number before `what` in a `fastpath:` line.
fn count(line: &str, what: &str) -> u64 {
    let i = line
        .find(what)
        .unwrap_or_else(|| panic!("no `{what}` in {line}"));
    line[..i]
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before `{what}` in {line}"))
}

#[test]
fn generated_traces_with_replies_failures_ttl_and_bad_checksums() {
    let dir = scratch("speedybox-fastpath-gen");
    gen_trace(
        &dir,
        "t.pcap",
        &[
            "--packets",
            "10000",
            "--flows",
            "200",
            "--mix",
            "tcp=1,udp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "198.51.100.0/24",
            "--dport",
            "80,443,53,23",
            "--ttl",
            "2-64",
            "--bad-ip-checksum",
            "0.02",
        ],
    );
    for initial in ["first", "handshake"] {
        let (v, f) = same(
            &dir,
            "chain1.toml",
            "nat.eth0=t.pcap",
            Some("bl.eth1"),
            initial,
        );
        assert!(count(&f, "packets served") > 5000, "{v}\n{f}");
        // Bad checksums mid-flow fail a guard; web3's failure is an event.
        assert!(count(&f, "guard misses") > 0, "{f}");
        assert!(count(&f, "events") > 0, "{f}");
    }
    gen_trace(
        &dir,
        "t2.pcap",
        &[
            "--packets",
            "10000",
            "--flows",
            "200",
            "--mix",
            "tcp=1,udp=1",
            "--dport",
            "53,1234,80,23",
            "--dst",
            "10.0.0.0/24",
            "--ttl",
            "2-64",
            "--bad-ip-checksum",
            "0.02",
        ],
    );
    let (v, f) = same(&dir, "chain2.toml", "bl.eth0=t2.pcap", None, "first");
    assert!(count(&f, "packets served") > 5000, "{v}\n{f}");
}

/// The shared captures, or `None` (with a message) when `../shared/data` is absent
/// outside CI.
fn captures() -> Option<Vec<PathBuf>> {
    let base = root().join("../shared/data/pcaps/zeek-traces");
    let files = [
        base.join("http/bro.org.pcap"),
        base.join("smtp.pcap"),
        base.join("echo-connections.pcap"),
    ];
    if files.iter().all(|f| f.exists()) {
        return Some(files.to_vec());
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} missing under CI",
        base.display()
    );
    eprintln!("skipping: {} not found", base.display());
    None
}

#[test]
fn shared_tcp_conversations() {
    let Some(files) = captures() else { return };
    let dir = scratch("speedybox-fastpath-shared");
    for f in files {
        let input1 = format!("nat.eth0={}", f.display());
        let (_, fast1) = same(&dir, "chain1.toml", &input1, Some("bl.eth1"), "first");
        let input2 = format!("bl.eth0={}", f.display());
        let (_, fast2) = same(&dir, "chain2.toml", &input2, None, "handshake");
        assert!(
            count(&fast1, "packets served") + count(&fast2, "packets served") > 0,
            "{}: {fast1}\n{fast2}",
            f.display()
        );
    }
}

/// `run --mode fastpath --json` says what the fast path did, in the summary's JSON.
#[test]
fn json_summary_tells_what_the_fast_path_did() {
    let dir = scratch("speedybox-fastpath-json");
    gen_trace(
        &dir,
        "t.pcap",
        &["--packets", "2000", "--flows", "20", "--mix", "udp=1"],
    );
    let chain = root().join("examples/fig5/chain.toml");
    let out = fusebox_ok(
        &dir,
        &[
            "run",
            chain.to_str().unwrap(),
            "--input",
            "napt.eth0=t.pcap",
            "--mode",
            "fastpath",
            "--json",
            "--out-dir",
            ".",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let f = &v["fastpath"];
    let served = f["served"].as_u64().unwrap();
    let recorded = f["recorded"].as_u64().unwrap();
    assert!(served > 1000, "{f}");
    assert!((20..200).contains(&recorded), "{f}");
    assert_eq!(v["totals"]["input"], 2000, "{v}");
}
