//! The per-flow fast path (`--mode fastpath`) gives what the naive chain gives — packets,
//! drops by reason, every element's counters, NF state — on the bundled chains, with flows
//! whose TTL varies and that carry bad IPv4 checksums mid-flow (the guards send those
//! packets through the full chain), with replies (`--reflect`), and while the table is too
//! small for the flows (evictions). And it does serve most packets from consolidated
//! entries.

use chain::{ChainFile, Endpoint, Executor, ExitSink, FastOptions, Initial, RunOptions};
use ports::gen::{generate, Anomalies, GenConfig, Mix, PortSpec, Rate};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use synth::verify::{compare, run, Mode};
use tempfile::TempDir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory, removed when dropped.
fn scratch(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fastpath-{name}-"))
        .tempdir()
        .unwrap()
}

/// A trace of `flows` flows; TTLs drawn from `ttl` and 2 % bad checksums when `rough`: its
/// scratch directory (removed when dropped) and its path in it.
fn trace(name: &str, cfg: GenConfig) -> (TempDir, PathBuf) {
    let dir = scratch(name);
    let path = dir.path().join("t.pcap");
    let mut w = ports::pcap::PcapWriter::create(&path, packet::Precision::Micro, 1).unwrap();
    for (ts, frame) in generate(&cfg) {
        w.write(ts, &frame).unwrap();
    }
    w.finish().unwrap();
    (dir, path)
}

/// A fresh directory (removed when dropped) holding `examples/napts/napt.click` with
/// one-second UDP timeouts, `tcp` seconds for TCP and reaping every second (`napt.click`),
/// for tests whose mappings must expire mid-trace.
fn napt_with_short_timeouts(name: &str, tcp: u32) -> TempDir {
    let dir = scratch(name);
    let click = std::fs::read_to_string(root().join("examples/napts/napt.click"))
        .unwrap()
        .replace(
            "0 1, drop);",
            &format!(
                "0 1, drop, UDP_TIMEOUT 1, TCP_TIMEOUT {tcp}, TCP_DONE_TIMEOUT 1, REAP_INTERVAL 1);"
            ),
        );
    assert!(click.contains("UDP_TIMEOUT 1"), "{click}");
    std::fs::write(dir.path().join("napt.click"), click).unwrap();
    dir
}

fn cfg(src: (Ipv4Addr, u8), dst: (Ipv4Addr, u8), rough: Option<(u8, u8)>) -> GenConfig {
    GenConfig {
        packets: 3000,
        flows: 60,
        mix: Mix {
            tcp: 1,
            udp: 2,
            icmp: 1,
        },
        src_prefix: src,
        dst_prefix: dst,
        dst_ports: PortSpec::List(vec![1234, 53, 80]),
        seed: 11,
        anomalies: Anomalies {
            ttl_range: rough,
            bad_ip_checksum: if rough.is_some() {
                Rate(20_000)
            } else {
                Rate::NEVER
            },
            ..Anomalies::default()
        },
        ..GenConfig::default()
    }
}

/// Runs `chain` naive and fastpath on `input` at `entry`; asserts they are identical and
/// returns how many packets the fast path served and how many the chain took in.
fn same(chain: &str, entry: &str, input: &Path, reflect: Option<&str>) -> (u64, u64) {
    let chain = ChainFile::load(&root().join("examples").join(chain)).unwrap();
    let opts = RunOptions {
        reflect: reflect
            .map(|r| vec![Endpoint::parse(r).unwrap()])
            .unwrap_or_default(),
        ..RunOptions::default()
    };
    let inputs = [(Endpoint::parse(entry).unwrap(), input.to_path_buf())];
    let a = run(&chain, &inputs, &opts, Mode::Naive).unwrap();
    let b = run(&chain, &inputs, &opts, Mode::Fastpath).unwrap();
    assert!(a.packets() > 0);
    let d = compare(&a, &b);
    assert!(d.is_empty(), "{}: {d:?}", chain.path.display());
    // How much the fast path did, from a run of our own.
    let mut ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count)).unwrap();
    ex.enable_fastpath(FastOptions::default());
    let at = ex.entry(&Endpoint::parse(entry).unwrap()).unwrap();
    let records = ports::pcap::read_all(input).unwrap().0;
    ex.replay(&[(at, records)], 1);
    let f = ex.fast_stats().unwrap();
    (f.hits, ex.summary().totals.input)
}

#[test]
fn routers_with_varying_ttl_and_bad_checksums() {
    let (_t, t) = trace(
        "routers",
        cfg(
            (Ipv4Addr::new(10, 0, 0, 0), 16),
            (Ipv4Addr::new(10, 1, 0, 0), 16),
            Some((1, 14)),
        ),
    );
    let (hits, input) = same("routers/chain.toml", "r1.eth0", &t, None);
    assert!(hits > 0, "some packets take consolidated entries");
    assert!(hits < input, "packets failing a guard take the full chain");
    let (_smooth, smooth) = trace(
        "routers-smooth",
        cfg(
            (Ipv4Addr::new(10, 0, 0, 0), 16),
            (Ipv4Addr::new(10, 1, 0, 0), 16),
            None,
        ),
    );
    let (hits, input) = same("routers/chain.toml", "r1.eth0", &smooth, None);
    // Handshakes, FIN/RST and first packets take the full chain; most others do not.
    assert!(hits * 10 > input * 6, "{hits} of {input} packets served");
}

#[test]
fn napts_and_fig5_with_replies() {
    let (_t, t) = trace(
        "napts",
        cfg(
            (Ipv4Addr::new(10, 0, 0, 0), 16),
            (Ipv4Addr::new(10, 1, 0, 0), 16),
            Some((30, 64)),
        ),
    );
    let (hits, _) = same("napts/chain.toml", "n1.eth0", &t, Some("n10.eth1"));
    assert!(hits > 0);
    let (_t, t) = trace(
        "fig5",
        cfg(
            (Ipv4Addr::new(192, 168, 0, 0), 24),
            (Ipv4Addr::new(10, 0, 2, 0), 24),
            Some((1, 64)),
        ),
    );
    let (hits, _) = same("fig5/chain.toml", "napt.eth0", &t, Some("lb.eth1"));
    assert!(hits > 0);
}

#[test]
fn a_full_table_evicts_and_stays_exact() {
    let (_t, t) = trace(
        "evict",
        cfg(
            (Ipv4Addr::new(192, 168, 0, 0), 24),
            (Ipv4Addr::new(10, 0, 2, 0), 24),
            None,
        ),
    );
    let chain = ChainFile::load(&root().join("examples/fig5/chain.toml")).unwrap();
    let opts = RunOptions::default();
    let records = ports::pcap::read_all(&t).unwrap().0;
    let mut outs = Vec::new();
    for fast in [None, Some(4usize)] {
        let mut ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Memory(Vec::new()))).unwrap();
        if let Some(n) = fast {
            ex.enable_fastpath(FastOptions {
                max_flows: n,
                idle_ns: 1_000_000_000,
                initial: Initial::AfterHandshake,
                ..FastOptions::default()
            });
        }
        let at = ex.entry(&Endpoint::parse("napt.eth0").unwrap()).unwrap();
        ex.replay(&[(at, records.clone())], 1);
        if fast.is_some() {
            let f = ex.fast_stats().unwrap();
            assert!(f.entries <= 4, "{f:?}");
            assert!(f.evictions > 0, "{f:?}");
        }
        let s = ex.summary();
        assert!(s.totals.balanced);
        outs.push((ex.finish().unwrap(), ex.state_dump(), s.to_text()));
    }
    assert_eq!(outs[0], outs[1]);
}

/// State functions of later NFs on a second core (`FastOptions::parallel`) change nothing:
/// SpeedyBox's chain 2 (BlacklistFilter → SnortIDS → Monitor: the IDS reads payloads, the
/// monitor counts) gives the naive packets, counters, alerts and state.
#[test]
fn state_functions_on_two_cores_change_nothing() {
    let (_t, t) = trace(
        "parallel",
        cfg(
            (Ipv4Addr::new(192, 168, 0, 0), 24),
            (Ipv4Addr::new(10, 0, 0, 0), 24),
            Some((2, 64)),
        ),
    );
    let chain = ChainFile::load(&root().join("examples/speedybox/chain2.toml")).unwrap();
    let records = ports::pcap::read_all(&t).unwrap().0;
    let mut outs = Vec::new();
    for parallel in [None, Some(true)] {
        let mut ex = Executor::new(&chain, &RunOptions::default(), |_, _| {
            Ok(ExitSink::Memory(Vec::new()))
        })
        .unwrap();
        if let Some(p) = parallel {
            ex.enable_fastpath(FastOptions {
                parallel: p,
                ..FastOptions::default()
            });
        }
        let at = ex.entry(&Endpoint::parse("bl.eth0").unwrap()).unwrap();
        ex.replay(&[(at, records.clone())], 1);
        if parallel.is_some() {
            assert!(ex.fast_stats().unwrap().hits > 1000);
        }
        let s = ex.summary().to_text();
        outs.push((ex.finish().unwrap(), ex.state_dump(), s));
    }
    assert!(
        outs[0].1.values().flatten().any(|l| l.contains("alert ")),
        "{:?}",
        outs[0].1
    );
    assert_eq!(outs[0], outs[1]);
}

/// The rewriters' replays the fast path owes (paid in bulk before a rewriter is next read)
/// leave every mapping as the naive chain leaves it: two NAPTs with short timeouts and
/// reaping, replies on the same mappings (`--reflect`), flows idle long enough for their
/// mappings to expire; the state dumps and counters agree at every checkpoint, not only at
/// the end.
#[test]
fn owed_rewriter_replays_leave_the_naive_state() {
    let napt_dir = napt_with_short_timeouts("owed", 2);
    let dir = napt_dir.path();
    let mut toml = String::new();
    for (i, ext) in [(1, "10.0.101.1"), (2, "10.0.102.1")] {
        toml.push_str(&format!(
            "[nf.n{i}]\nclick = \"napt.click\"\ndefine = {{ EXT = \"{ext}\" }}\n"
        ));
    }
    toml.push_str("[[link]]\nbetween = [\"n1.eth1\", \"n2.eth0\"]\n[[entry]]\nto = \"n1.eth0\"\n");
    std::fs::write(dir.join("chain.toml"), toml).unwrap();
    let chain = ChainFile::load(&dir.join("chain.toml")).unwrap();
    let mut g = cfg(
        (Ipv4Addr::new(10, 0, 0, 0), 16),
        (Ipv4Addr::new(10, 1, 0, 0), 16),
        None,
    );
    g.packets = 4000;
    g.flows = 300;
    g.gap_ns = 2_000_000;
    let records = ports::pcap::read_all(&trace("owed", g).1).unwrap().0;
    let opts = RunOptions {
        reflect: vec![Endpoint::parse("n2.eth1").unwrap()],
        ..RunOptions::default()
    };
    let mut runs = Vec::new();
    for fast in [false, true] {
        let mut ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Memory(Vec::new()))).unwrap();
        if fast {
            ex.enable_fastpath(FastOptions::default());
        }
        let at = ex.entry(&Endpoint::parse("n1.eth0").unwrap()).unwrap();
        let mut checkpoints = Vec::new();
        for (i, r) in records.iter().enumerate() {
            ex.push_input(at, i as u64, &r.data, r.timestamp, r.precision);
            if i % 250 == 249 {
                ex.settle_flows();
                checkpoints.push((i, ex.state_dump(), ex.summary().to_text()));
            }
        }
        ex.settle_flows();
        if fast {
            let f = ex.fast_stats().unwrap();
            assert!(f.hits > 1000, "{f:?}");
            assert!(f.expired > 0, "{f:?}");
            // The flows' entries share templates: each holds its own mappings.
            assert!(f.shared * 2 > f.consolidated, "{f:?}");
        }
        let s = ex.summary().to_text();
        runs.push((checkpoints, ex.finish().unwrap(), ex.state_dump(), s));
    }
    assert!(
        runs[0].2.values().flatten().any(|l| l.contains("expiry")),
        "{:?}",
        runs[0].2
    );
    for (a, b) in runs[0].0.iter().zip(&runs[1].0) {
        assert_eq!(a, b, "at packet {}", a.0);
    }
    assert_eq!(runs[0], runs[1]);
}

/// One-packet flows (a scan, a flood) are not recorded by default ([`Initial::Second`]):
/// each walks the chain as in naive mode and is only remembered as seen, in a set bounded
/// like the table; a flow's second packet is recorded. The results are naive's either way.
#[test]
fn a_flows_first_packet_is_not_recorded() {
    let mut g = cfg(
        (Ipv4Addr::new(10, 0, 0, 0), 16),
        (Ipv4Addr::new(10, 1, 0, 0), 16),
        None,
    );
    g.packets = 3000;
    g.flows = 3000;
    g.mix = Mix {
        tcp: 0,
        udp: 1,
        icmp: 0,
    };
    let (_t, t) = trace("new-flows", g);
    same("napts/one.toml", "n1.eth0", &t, None);
    let chain = ChainFile::load(&root().join("examples/napts/one.toml")).unwrap();
    let records = ports::pcap::read_all(&t).unwrap().0;
    let flows = records.len() as u64;
    for (initial, passes) in [
        (Initial::Second, 1),
        (Initial::Second, 2),
        (Initial::First, 1),
    ] {
        let mut ex =
            Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count)).unwrap();
        ex.enable_fastpath(FastOptions {
            initial,
            max_flows: 1024,
            ..FastOptions::default()
        });
        let at = ex.entry(&Endpoint::parse("n1.eth0").unwrap()).unwrap();
        ex.replay(&[(at, records.clone())], passes);
        let f = ex.fast_stats().unwrap();
        assert!(f.entries <= 1024, "{f:?}");
        match (initial, passes) {
            (Initial::Second, 1) => {
                assert_eq!(
                    (f.recorded, f.first_seen, f.entries),
                    (0, flows, 0),
                    "{f:?}"
                )
            }
            // The second pass: flows still in the (1024-place) set are recorded.
            (Initial::Second, _) => assert!(f.recorded > 0 && f.recorded < flows, "{f:?}"),
            _ => assert_eq!((f.recorded, f.first_seen), (flows, 0), "{f:?}"),
        }
    }
}

/// Runs `chain` (entering at `entry`) naive and fastpath over `records`, one packet at a
/// time, settling the flows and comparing state dumps and counters every `every` packets;
/// returns the fast path's statistics.
fn same_at_checkpoints(
    chain: &ChainFile,
    entry: &str,
    opts: &RunOptions,
    records: &[ports::pcap::Record],
    every: usize,
) -> chain::FastStats {
    let mut runs = Vec::new();
    let mut stats = None;
    for fast in [false, true] {
        let mut ex = Executor::new(chain, opts, |_, _| Ok(ExitSink::Memory(Vec::new()))).unwrap();
        if fast {
            ex.enable_fastpath(FastOptions::default());
        }
        let at = ex.entry(&Endpoint::parse(entry).unwrap()).unwrap();
        let mut checkpoints = Vec::new();
        for (i, r) in records.iter().enumerate() {
            ex.push_input(at, i as u64, &r.data, r.timestamp, r.precision);
            if i % every == every - 1 {
                ex.settle_flows();
                checkpoints.push((i, ex.state_dump(), ex.summary().to_text()));
            }
        }
        ex.settle_flows();
        if fast {
            stats = ex.fast_stats();
        }
        let s = ex.summary().to_text();
        runs.push((checkpoints, ex.finish().unwrap(), ex.state_dump(), s));
    }
    for (a, b) in runs[0].0.iter().zip(&runs[1].0) {
        assert_eq!(a, b, "at packet {}", a.0);
    }
    assert_eq!(runs[0], runs[1]);
    stats.unwrap()
}

/// NAPT flows that take the same path share one entry template, each flow keeping its own
/// mappings, rewritten tuple and checksum operands: ten NAPTs and one, UDP and TCP, with
/// packets carrying IPv4 options among them (the same template then writes the ports
/// further in) and varying TTLs, with and without replies; the results are naive's.
#[test]
fn napt_flows_share_a_template() {
    let mut g = cfg(
        (Ipv4Addr::new(10, 0, 0, 0), 16),
        (Ipv4Addr::new(10, 1, 0, 0), 16),
        Some((30, 64)),
    );
    g.packets = 4000;
    g.flows = 200;
    g.anomalies.ip_options = Rate(100_000);
    let (_t, t) = trace("shared", g);
    for (chain, reflect) in [
        ("napts/chain.toml", None),
        ("napts/chain.toml", Some("n10.eth1")),
        ("napts/one.toml", Some("n1.eth1")),
    ] {
        same(chain, "n1.eth0", &t, reflect);
        let chain = ChainFile::load(&root().join("examples").join(chain)).unwrap();
        let mut ex =
            Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count)).unwrap();
        ex.enable_fastpath(FastOptions::default());
        let at = ex.entry(&Endpoint::parse("n1.eth0").unwrap()).unwrap();
        let records = ports::pcap::read_all(&t).unwrap().0;
        ex.replay(&[(at, records)], 2);
        let f = ex.fast_stats().unwrap();
        assert!(f.hits > 4000, "{f:?}");
        // Two kinds of packets per protocol at most (options or not, TCP flags aside): a
        // handful of templates for a hundred-odd flows.
        assert!(f.consolidated > 100, "{f:?}");
        assert!(f.shared * 10 > f.consolidated * 8, "{f:?}");
    }
}

/// Mappings that expire, are reaped and are made again (with other ports) while the other
/// flows of their template keep being served, and replies on the same mappings: one NAPT
/// with one-second timeouts, many flows, packets far enough apart for mappings to expire;
/// the state dumps and counters are naive's at every checkpoint.
#[test]
fn mappings_change_and_expire_under_a_shared_template() {
    let napt_dir = napt_with_short_timeouts("remap", 1);
    let dir = napt_dir.path();
    std::fs::write(
        dir.join("chain.toml"),
        "[nf.n1]\nclick = \"napt.click\"\n[[entry]]\nto = \"n1.eth0\"\n",
    )
    .unwrap();
    let chain = ChainFile::load(&dir.join("chain.toml")).unwrap();
    let mut g = cfg(
        (Ipv4Addr::new(10, 0, 0, 0), 16),
        (Ipv4Addr::new(10, 1, 0, 0), 16),
        None,
    );
    g.packets = 5000;
    g.flows = 40;
    // 40 flows, a packet every 5 ms: a flow's packets about 0.2 s apart, with long gaps
    // where its mapping expires and is made again.
    g.gap_ns = 5_000_000;
    let mut records = ports::pcap::read_all(&trace("remap", g).1).unwrap().0;
    // Half the flows pause for 1.5 s in the middle of the trace: their mappings expire
    // while the others' entries (same template) keep serving.
    let mid = records.len() / 2;
    let shift = 1_500_000_000u64;
    let late: Vec<_> = records.split_off(mid);
    let (mut quiet, mut busy) = (Vec::new(), Vec::new());
    for r in late {
        if r.data.get(29).is_some_and(|b| b % 2 == 0) {
            quiet.push(r);
        } else {
            busy.push(r);
        }
    }
    records.extend(busy);
    for mut r in quiet {
        r.timestamp = r.timestamp.add_nanos(shift);
        records.push(r);
    }
    records.sort_by_key(|r| r.timestamp.0);
    let opts = RunOptions {
        reflect: vec![Endpoint::parse("n1.eth1").unwrap()],
        ..RunOptions::default()
    };
    let f = same_at_checkpoints(&chain, "n1.eth0", &opts, &records, 200);
    assert!(f.hits > 1000, "{f:?}");
    assert!(f.expired > 0, "{f:?}");
    assert!(f.shared > 40, "{f:?}");
}
