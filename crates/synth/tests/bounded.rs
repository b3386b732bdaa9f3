//! Full tables give the same results in every mode: a chain whose per-flow tables are tiny
//! (a NAPT's mappings, `Maglev`'s connections, `Monitor`'s counters, `SnortIDS`'s flows and
//! alert lines, the fast path's flow table) runs many more flows than they hold, with the
//! far end reflected, in naive, synth and fastpath mode; the runs must not differ, and the
//! counters must show the bounds at work.

use chain::{ChainFile, Endpoint, FastOptions, RunOptions};
use ports::gen::{generate, GenConfig, Mix, PortSpec};
use ports::pcap::{PcapWriter, DLT_EN10MB};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use synth::verify::{compare, run_with, Mode, RunResult};

const NAPT: &str = "
rw :: IPRewriter(pattern 198.51.100.1 1024-65535 - - 0 1, drop,
                 MAPPING_CAPACITY 8, UDP_GUARANTEE 0, TCP_GUARANTEE 0);
FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> [0]rw;
FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> [1]rw;
rw[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02) -> ToDevice(eth1);
rw[1] -> EtherEncap(0x0800, 02:00:00:00:00:02, 02:00:00:00:00:01) -> ToDevice(eth0);
";

const LB: &str = "
lb :: Maglev(BACKEND a 10.0.1.1 02:00:00:00:01:01, BACKEND b 10.0.1.2 02:00:00:00:01:02,
             CAPACITY 5, TIMEOUT 1s, REAP_INTERVAL 1s);
FromDevice(eth0) -> CheckIPHeader(14) -> [0]lb[0] -> Monitor(CAPACITY 6)
  -> ids :: SnortIDS(ids.rules, FLOW_CAPACITY 7, ALERT_MEMORY 10) -> ToDevice(eth1);
FromDevice(eth1) -> CheckIPHeader(14) -> [1]lb[1] -> ToDevice(eth0);
";

const RULES: &str = "alert udp any any -> any any (msg:\"udp\"; sid:1;)\n\
alert tcp any any -> any any (msg:\"tcp est\"; flow:established; sid:2;)\n";

const CHAIN: &str = "
[nf.napt]
click = \"napt.click\"
[nf.lb]
click = \"lb.click\"
[[link]]
between = [\"napt.eth1\", \"lb.eth0\"]
[[entry]]
to = \"napt.eth0\"
";

fn stat(r: &RunResult, class: &str, name: &str) -> u64 {
    r.summary
        .nfs
        .iter()
        .flat_map(|n| &n.elements)
        .filter(|e| e.class == class)
        .map(|e| e.stats.get(name).copied().unwrap_or(0))
        .sum()
}

#[test]
fn full_tables_decide_the_same_in_every_mode() {
    let tmp = tempfile::Builder::new()
        .prefix("fusebox-bounded-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    for (f, text) in [
        ("napt.click", NAPT),
        ("lb.click", LB),
        ("ids.rules", RULES),
        ("chain.toml", CHAIN),
    ] {
        std::fs::write(dir.join(f), text).unwrap();
    }
    // 60 flows over 3000 packets, 1 ms apart (3 s of virtual time).
    let cfg = GenConfig {
        packets: 3000,
        flows: 60,
        mix: Mix {
            tcp: 1,
            udp: 1,
            icmp: 0,
        },
        src_prefix: (Ipv4Addr::new(192, 168, 0, 0), 24),
        dst_prefix: (Ipv4Addr::new(10, 9, 9, 0), 24),
        dst_ports: PortSpec::List(vec![80, 53]),
        gap_ns: 1_000_000,
        ..GenConfig::default()
    };
    let trace = dir.join("trace.pcap");
    let mut w = PcapWriter::create(&trace, packet::Precision::Micro, DLT_EN10MB).unwrap();
    for (ts, frame) in generate(&cfg) {
        w.write(ts, &frame).unwrap();
    }
    w.finish().unwrap();
    let chain = ChainFile::load(&dir.join("chain.toml")).unwrap();
    let inputs = vec![(Endpoint::parse("napt.eth0").unwrap(), trace)];
    let opts = RunOptions {
        reflect: vec![Endpoint::parse("lb.eth1").unwrap()],
        ..RunOptions::default()
    };
    let small = FastOptions {
        max_flows: 4,
        ..FastOptions::default()
    };
    let naive = run_with(&chain, &inputs, &opts, Mode::Naive, small.clone()).unwrap();
    for mode in [Mode::Synth, Mode::Fastpath] {
        let other = run_with(&chain, &inputs, &opts, mode, small.clone()).unwrap();
        let d = compare(&naive, &other);
        assert!(d.is_empty(), "{mode:?} differs: {:?}", &d[..d.len().min(5)]);
    }
    // Every bound was reached.
    let got: BTreeMap<&str, u64> = [
        (
            "mappings_evicted",
            stat(&naive, "IPRewriter", "mappings_evicted"),
        ),
        (
            "active_mappings",
            stat(&naive, "IPRewriter", "active_mappings"),
        ),
        ("maglev untracked", stat(&naive, "Maglev", "untracked")),
        ("monitor flows", stat(&naive, "Monitor", "flows")),
        ("monitor untracked", stat(&naive, "Monitor", "untracked")),
        ("ids flows", stat(&naive, "SnortIDS", "flows")),
        ("ids untracked", stat(&naive, "SnortIDS", "untracked")),
        (
            "alerts_not_kept",
            stat(&naive, "SnortIDS", "alerts_not_kept"),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(got["active_mappings"], 8, "{got:?}");
    assert_eq!(got["monitor flows"], 6, "{got:?}");
    assert_eq!(got["ids flows"], 7, "{got:?}");
    for k in [
        "mappings_evicted",
        "maglev untracked",
        "monitor untracked",
        "ids untracked",
        "alerts_not_kept",
    ] {
        assert!(got[k] > 0, "{k}: {got:?}");
    }
    assert!(stat(&naive, "Maglev", "connections") <= 5, "{got:?}");
}

/// What a run gave: its exits' packets, its state dump and its summary as text.
type Outcome = (
    BTreeMap<String, chain::exec::Captured>,
    BTreeMap<String, Vec<String>>,
    String,
);

/// Runs `records` into `napts/one.toml`'s entry in `mode` with synth's and the fast path's
/// flow tables bounded to `max_flows`: the outcome (exits, state, summary) and synth's
/// (flows evicted, packets served by remembered paths, paths remembered at the end).
fn run_napt(
    records: &[ports::pcap::Record],
    mode: Mode,
    max_flows: usize,
) -> (Outcome, (u64, u64, usize)) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let chain = ChainFile::load(&root.join("napts/one.toml")).unwrap();
    let mut ex = chain::Executor::new(&chain, &RunOptions::default(), |_, _| {
        Ok(chain::ExitSink::Memory(Vec::new()))
    })
    .unwrap();
    let fast = FastOptions {
        max_flows,
        ..FastOptions::default()
    };
    mode.install(&mut ex, fast);
    let at = ex.entry(&Endpoint::parse("n1.eth0").unwrap()).unwrap();
    ex.replay(&[(at, records.to_vec())], 2);
    let (paths, served) = ex.flow_stats();
    let evicted = ex.flow_evictions();
    let s = ex.summary().to_text();
    (
        (ex.finish().unwrap(), ex.state_dump(), s),
        (evicted, served, paths),
    )
}

#[test]
fn synth_flow_table_is_bounded_by_max_flows_and_counts_evictions() {
    // 400 flows of about 15 packets each, in random order, run twice: far more flows than
    // a table of 8 holds, so remembered flows are evicted over and over.
    let cfg = GenConfig {
        packets: 6000,
        flows: 400,
        mix: Mix {
            tcp: 1,
            udp: 1,
            icmp: 0,
        },
        seed: 17,
        ..GenConfig::default()
    };
    let records = generate(&cfg).records();
    let (naive, _) = run_napt(&records, Mode::Naive, 8);
    for max in [1, 8, 1 << 16] {
        let (synth, (evicted, served, paths)) = run_napt(&records, Mode::Synth, max);
        assert_eq!(naive.0, synth.0, "exits, --max-flows {max}");
        assert_eq!(naive.1, synth.1, "state, --max-flows {max}");
        assert_eq!(naive.2, synth.2, "summary, --max-flows {max}");
        assert!(paths <= max, "{paths} paths held with --max-flows {max}");
        if max < 400 {
            assert!(evicted > 0, "no eviction with --max-flows {max}");
        } else {
            assert_eq!(evicted, 0, "evictions with room for every flow");
            // With room for every flow, most packets take a remembered path.
            assert!(served > 6000, "{served} served");
        }
        if max == 8 {
            // A flow evicted comes back on its next slow packet: many are served still.
            assert!(served > 0, "{served} served with --max-flows 8");
        }
    }
    // The fast path keeps to the same bound (and agrees).
    let (fast, _) = run_napt(&records, Mode::Fastpath, 8);
    assert_eq!(naive.0, fast.0, "fastpath exits");
    assert_eq!(naive.2, fast.2, "fastpath summary");
}
