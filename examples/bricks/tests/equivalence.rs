//! Each NF written with operators gives what its Click counterpart gives on the same
//! generated traces (anomalies included): the same packets at every exit, the same drops
//! per reason once the reasons are named alike, the same state dump; and every NF, alone
//! or in random chains with Click NFs, is identical in every execution mode.

use chain::{ChainFile, Endpoint, RunOptions};
use ports::gen::{Anomalies, GenConfig, Mix, Rate};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use synth::verify::{compare, compare_export, exported_chain, run, RunResult};
use synth::Mode;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scratch folder of its own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("bricks-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A trace with every anomaly the generator makes, `gap_ns` apart.
fn trace(dir: &Path, seed: u64, gap_ns: u64) -> PathBuf {
    let cfg = GenConfig {
        packets: 2500,
        flows: 120,
        mix: Mix {
            tcp: 2,
            udp: 2,
            icmp: 1,
        },
        seed,
        gap_ns,
        anomalies: Anomalies {
            ttl_range: Some((1, 4)),
            bad_ip_checksum: Rate(20_000),
            ip_options: Rate(20_000),
            arp: Rate(20_000),
            truncated: Rate(20_000),
            short_transport: Rate(30_000),
        },
        ..GenConfig::default()
    };
    let path = dir.join(format!("trace-{seed}.pcap"));
    let mut w = ports::pcap::PcapWriter::create(&path, packet::Precision::Nano, 1).unwrap();
    for (ts, frame) in ports::gen::generate(&cfg) {
        w.write(ts, &frame).unwrap();
    }
    w.finish().unwrap();
    path
}

/// The drops of a run by reason, each renamed by `names` (reasons not named stay).
fn drops(r: &RunResult, names: &[(&str, &str)]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (reason, n) in &r.summary.totals.drops {
        let name = names
            .iter()
            .find(|(a, _)| a == reason)
            .map_or(reason.as_str(), |(_, b)| b);
        *out.entry(name.to_string()).or_default() += n;
    }
    out
}

/// Runs `chain` (entry `entry`, `reflect` reflected) and its Click counterpart `click` on
/// traces of three seeds: no difference `fusebox verify --against` looks at, and the same
/// drops per reason with the operator NF's reasons renamed by `names`.
fn same_as_click(
    chain: &str,
    entry: &str,
    reflect: Option<&str>,
    click: &str,
    names: &[(&str, &str)],
) {
    bricks::register().unwrap();
    let d = Scratch::new(chain);
    let chain_file = ChainFile::load(&examples().join("bricks").join(chain)).unwrap();
    let (exported, map) = exported_chain(&examples().join("bricks").join(click));
    let stem = exported.nfs[0].name.clone();
    let ep = Endpoint::parse(entry).unwrap();
    let reflect: Vec<Endpoint> = reflect
        .iter()
        .map(|r| Endpoint::parse(r).unwrap())
        .collect();
    for (seed, gap) in [(1, 1_000), (2, 20_000_000), (3, 100_000_000)] {
        let t = trace(&d.0, seed, gap);
        let opts = RunOptions {
            reflect: reflect.clone(),
            ..RunOptions::default()
        };
        let x_opts = RunOptions {
            reflect: reflect.iter().map(&map).collect(),
            ..RunOptions::default()
        };
        let a = run(&chain_file, &[(ep.clone(), t.clone())], &opts, Mode::Naive).unwrap();
        let b = run(&exported, &[(map(&ep), t)], &x_opts, Mode::Naive).unwrap();
        let diff = compare_export(&a, &b, &stem);
        assert!(
            diff.is_empty(),
            "{chain} seed {seed}: {:?}",
            &diff[..diff.len().min(5)]
        );
        assert_eq!(drops(&a, names), drops(&b, &[]), "{chain} seed {seed}");
        assert!(a.packets() > 1000, "{chain} seed {seed}");
    }
}

#[test]
fn ttl_is_dec_ip_ttl() {
    same_as_click(
        "ttl.toml",
        "ttl.eth0",
        None,
        "click/ttl.click",
        &[("parse-ethernet", "discard"), ("parse-ipv4", "discard")],
    );
}

#[test]
fn firewall_is_ip_filter() {
    same_as_click(
        "firewall.toml",
        "fw.eth0",
        None,
        "click/firewall.click",
        &[("parse-ethernet", "discard"), ("parse-ipv4", "discard")],
    );
}

#[test]
fn monitor_is_monitor() {
    same_as_click("monitor.toml", "mon.eth0", None, "click/monitor.click", &[]);
}

#[test]
fn nat_is_ip_rewriter() {
    same_as_click(
        "nat.toml",
        "nat.eth0",
        Some("nat.eth1"),
        "click/nat.click",
        &[
            ("parse-ethernet", "discard"),
            ("not-ipv4", "discard"),
            ("parse-ipv4", "bad-ip-header"),
        ],
    );
}

/// xorshift64
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Random chains of operator NFs (chain-file `rust` entries and by name in Click
/// configurations) and Click NFs, each run naive, synthesized and on the fast path: the
/// same packets, drops, counters and state. (`synth::testgen` generates Click NFs only; the
/// operator classes live above it, in this crate.)
#[test]
fn random_chains_mixing_operator_and_click_nfs_are_identical_in_every_mode() {
    bricks::register().unwrap();
    let d = Scratch::new("random");
    let ttl_click = examples().join("ttl/ttl.click");
    let patterns = [
        "tcp && dst port 80",
        "udp",
        "icmp",
        "src net 10.0.0.0/17",
        "dst net 10.1.128.0/17",
        "tcp && src port < 20000",
        "udp && dst port 1234",
        "ip ttl > 2",
    ];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for case in 0..12 {
        let rules = |x: &mut u64| {
            let n = 1 + next(x) % 4;
            let mut r: Vec<String> = (0..n)
                .map(|_| {
                    let p = patterns[(next(x) % patterns.len() as u64) as usize];
                    let a = if next(x).is_multiple_of(3) {
                        "deny"
                    } else {
                        "allow"
                    };
                    format!("{a} {p}")
                })
                .collect();
            r.push(
                if next(x).is_multiple_of(2) {
                    "allow all"
                } else {
                    "deny all"
                }
                .to_string(),
            );
            r.join(", ")
        };
        let len = 2 + next(&mut x) % 4;
        let mut toml = String::new();
        for i in 0..len {
            let nf = match next(&mut x) % 7 {
                0 => "rust = \"TTLNF\"".to_string(),
                1 => "rust = \"MacSwapNF\"".to_string(),
                2 => format!("rust = \"FirewallNF\"\nargs = \"{}\"", rules(&mut x)),
                3 => format!(
                    "rust = \"MonitorNF\"\nargs = \"CAPACITY {}\"",
                    5 + next(&mut x) % 200
                ),
                4 => format!("click = \"{}\"", ttl_click.display()),
                5 => {
                    let f = d.0.join(format!("acl{case}-{i}.click"));
                    std::fs::write(
                        &f,
                        format!(
                            "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> IPFilter({}) -> Unstrip(14) -> ToDevice(eth1);\n",
                            rules(&mut x)
                        ),
                    )
                    .unwrap();
                    format!("click = \"{}\"", f.display())
                }
                _ => {
                    let f = d.0.join(format!("ops{case}-{i}.click"));
                    std::fs::write(
                        &f,
                        "FromDevice(eth0) -> MarkIPHeader(14) -> TTLNF -> MonitorNF -> DecIPTTL -> ToDevice(eth1);\n",
                    )
                    .unwrap();
                    format!("click = \"{}\"", f.display())
                }
            };
            toml.push_str(&format!("[nf.n{i}]\n{nf}\n"));
        }
        for i in 1..len {
            toml.push_str(&format!(
                "[[link]]\nbetween = [\"n{}.eth1\", \"n{i}.eth0\"]\n",
                i - 1
            ));
        }
        toml.push_str("[[entry]]\nto = \"n0.eth0\"\n");
        let path = d.0.join(format!("chain{case}.toml"));
        std::fs::write(&path, &toml).unwrap();
        let chain = ChainFile::load(&path).unwrap();
        let t = trace(&d.0, 10 + case, 1_000);
        let inputs = [(Endpoint::parse("n0.eth0").unwrap(), t)];
        let opts = RunOptions::default();
        let naive = run(&chain, &inputs, &opts, Mode::Naive).unwrap();
        for mode in [Mode::Synth, Mode::Fastpath] {
            let other = run(&chain, &inputs, &opts, mode).unwrap();
            let diff = compare(&naive, &other);
            assert!(
                diff.is_empty(),
                "case {case} ({mode}):\n{toml}\n{:?}",
                &diff[..diff.len().min(5)]
            );
        }
    }
}
