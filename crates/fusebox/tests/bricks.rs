//! The NFs written with operators (examples/bricks) through the command line: each is
//! identical in every mode (naive, synth, fastpath), identical to its Click counterpart
//! (`fusebox verify CHAIN --against CLICKFILE`), and usable beside Click NFs in a chain and
//! by name inside a Click configuration.

mod common;
use common::*;
use std::path::Path;

/// A trace with every anomaly `fusebox gen` makes (expiring TTLs, bad checksums, options,
/// ARP, cut frames and IP lengths, short transport parts), 20 ms apart so that NAT
/// mappings expire on the way.
fn anomalous_trace(dir: &Path) {
    gen_trace(
        dir,
        "trace.pcap",
        &[
            "--packets",
            "3000",
            "--flows",
            "80",
            "--mix",
            "tcp=2,udp=2,icmp=1",
            "--ttl",
            "1-4",
            "--bad-ip-checksum",
            "2%",
            "--ip-options",
            "2%",
            "--arp",
            "2%",
            "--truncate",
            "2%",
            "--short-transport",
            "3%",
            "--gap-ns",
            "20000000",
            "--seed",
            "7",
        ],
    );
}

/// Runs `fusebox verify ARGS` in `dir`; asserts exit 0 and returns the first line.
fn identical(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    let o = fusebox(dir, &all);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        o.status.code(),
        Some(0),
        "fusebox {all:?}:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out.lines().next().unwrap_or_default().to_string();
    assert!(line.starts_with("identical: "), "{out}");
    line
}

/// `identical: N packets on M exits, K drops, S state lines...` → (N, K, S).
fn numbers(line: &str) -> (u64, u64, u64) {
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    (n[0], n[2], n[3])
}

/// (chain, entry, reflected exit, Click counterpart)
const PAIRS: &[(&str, &str, Option<&str>, &str)] = &[
    ("ttl.toml", "ttl.eth0", None, "click/ttl.click"),
    ("firewall.toml", "fw.eth0", None, "click/firewall.click"),
    ("monitor.toml", "mon.eth0", None, "click/monitor.click"),
    ("nat.toml", "nat.eth0", Some("nat.eth1"), "click/nat.click"),
    (
        "maglev.toml",
        "lb.eth0",
        Some("lb.eth1"),
        "click/maglev.click",
    ),
];

fn bricks(file: &str) -> String {
    root()
        .join("examples/bricks")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn operator_nfs_are_identical_in_every_mode() {
    let d = scratch("bricks-modes");
    anomalous_trace(&d);
    for (chain, entry, reflect, _) in PAIRS {
        let input = format!("{entry}=trace.pcap");
        let chain = bricks(chain);
        let mut args = vec![
            chain.as_str(),
            "--input",
            &input,
            "--modes",
            "naive,synth,fastpath,parallel",
        ];
        if let Some(r) = reflect {
            args.extend(["--reflect", r]);
        }
        let (packets, drops, _) = numbers(&identical(&d, &args));
        assert!(packets > 1000, "{chain}: {packets} packets");
        assert!(packets + drops >= 3000, "{chain}");
    }
    let mixed = bricks("mixed.toml");
    let line = identical(
        &d,
        &[
            &mixed,
            "--input",
            "fw.eth0=trace.pcap",
            "--modes",
            "naive,synth,fastpath,parallel",
        ],
    );
    let (packets, drops, state) = numbers(&line);
    assert!(packets > 500 && drops > 500 && state > 10, "{line}");
    // SignatureNF (no Click equivalent: SnortIDS matches packet by packet): its alerts over
    // the reassembled TCP streams are the same in every mode, and there are some.
    let sig = bricks("signature.toml");
    let line = identical(
        &d,
        &[
            &sig,
            "--input",
            "sig.eth0=trace.pcap",
            "--modes",
            "naive,synth,fastpath,parallel",
        ],
    );
    let (packets, _, state) = numbers(&line);
    assert!(packets > 2500 && state > 0, "{line}");
}

#[test]
fn operator_nfs_match_their_click_counterparts() {
    let d = scratch("bricks-against");
    anomalous_trace(&d);
    for (chain, entry, reflect, click) in PAIRS {
        let input = format!("{entry}=trace.pcap");
        let (chain, click) = (bricks(chain), bricks(click));
        let mut args = vec![chain.as_str(), "--input", &input, "--against", &click];
        if let Some(r) = reflect {
            args.extend(["--reflect", r]);
        }
        let line = identical(&d, &args);
        assert!(line.ends_with(&format!("(chain vs {click})")), "{line}");
        let (packets, drops, state) = numbers(&line);
        assert!(packets > 1000, "{line}");
        match *entry {
            "mon.eth0" => assert!(drops == 0 && state > 80, "{line}"),
            "nat.eth0" => assert!(drops > 0 && state > 10, "{line}"),
            "lb.eth0" => assert!(drops > 500 && state > 50, "{line}"),
            _ => assert!(drops > 500, "{line}"),
        }
    }
}

#[test]
fn a_changed_counterpart_is_found_different() {
    // The check can fail: the TTL NF against a configuration that does not decrement.
    let d = scratch("bricks-different");
    anomalous_trace(&d);
    let click = d.join("ttl.click");
    std::fs::write(
        &click,
        "c :: Classifier(12/0800, -);\nFromDevice(ttl_eth0) -> c;\nc[0] -> ToDevice(ttl_eth1);\nc[1] -> Discard;\n",
    )
    .unwrap();
    let o = fusebox(
        &d,
        &[
            "verify",
            &bricks("ttl.toml"),
            "--input",
            "ttl.eth0=trace.pcap",
            "--against",
            click.to_str().unwrap(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn operator_nfs_run_by_name_in_click_configurations_and_chain_files() {
    let d = scratch("bricks-run");
    anomalous_trace(&d);
    std::fs::write(
        d.join("ops.click"),
        "FromDevice(eth0) -> Counter -> TTLNF -> MacSwapNF -> mon :: MonitorNF -> ToDevice(eth1);\n",
    )
    .unwrap();
    let o = fusebox_ok(
        &d,
        &[
            "run",
            "ops.click",
            "--input",
            "eth0=trace.pcap",
            "--output",
            "eth1=out.pcap",
        ],
    );
    let out = String::from_utf8_lossy(&o.stderr);
    assert!(
        out.contains("TTLNF") && out.contains("drop ttl-expired") && out.contains("MonitorNF"),
        "{out}"
    );
    let sent = packets(&d.join("out.pcap"));
    assert!(!sent.is_empty());
    // MAC swapped: the generator's source MAC is now the destination.
    assert!(sent.iter().all(|p| p[..6] == [2, 0, 0, 0, 0, 1]));
    // A chain file with an operator NF, and its errors.
    std::fs::write(
        d.join("c.toml"),
        "[nf.t]\nrust = \"TTLNF\"\n[[entry]]\nto = \"t.eth0\"\n",
    )
    .unwrap();
    let o = fusebox_ok(&d, &["run", "c.toml", "--input", "t.eth0=trace.pcap"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("exit t.eth1"));
    std::fs::write(
        d.join("bad.toml"),
        "[nf.t]\nrust = \"TTLNF\"\nargs = \"7\"\n",
    )
    .unwrap();
    let o = fusebox(&d, &["check", "bad.toml"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("bad.toml:2:8") && err.contains("TTLNF: "),
        "{err}"
    );
    std::fs::write(d.join("unknown.toml"), "[nf.t]\nrust = \"TTLNFX\"\n").unwrap();
    let o = fusebox(&d, &["check", "unknown.toml"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown.toml:2:8: unknown element class `TTLNFX`"),
        "{err}"
    );
}

#[test]
fn the_ttl_nf_model_is_folded_by_synthesis_and_consolidated_by_the_fast_path() {
    let d = scratch("bricks-model");
    gen_trace(
        &d,
        "trace.pcap",
        &["--packets", "3000", "--flows", "60", "--ttl", "1-4"],
    );
    let o = fusebox_ok(&d, &["synth", &bricks("ttl.toml")]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("-> drop ttl-expired at ttl/nf"), "{out}");
    assert!(out.contains("writes ip_ttl-=1 ip_csum once"), "{out}");
    // The fast path: the TTL NF's flows are consolidated, the monitor's (no model) are not.
    let served = |chain: &str, entry: &str| {
        let input = format!("{entry}=trace.pcap");
        let o = fusebox_ok(
            &d,
            &[
                "run",
                &bricks(chain),
                "--input",
                &input,
                "--mode",
                "fastpath",
            ],
        );
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let line = err
            .lines()
            .find(|l| l.starts_with("fastpath: "))
            .unwrap_or_default()
            .to_string();
        let n: u64 = line
            .trim_start_matches("fastpath: ")
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{err}"));
        (n, line)
    };
    let (ttl, line) = served("ttl.toml", "ttl.eth0");
    assert!(ttl > 500, "{line}");
    let (mon, line) = served("monitor.toml", "mon.eth0");
    assert_eq!(mon, 0, "{line}");
    assert!(line.contains("operator NF without a model"), "{line}");
}
