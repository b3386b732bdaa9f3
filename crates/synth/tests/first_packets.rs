//! A flow's first packet in synth and fastpath runs through the naive batched path (runs
//! of first packets in a batch, `chain::exec::firsts`): the same exits, state, summary and
//! mode counters (entries, evictions, the seen-filter's first packets, `--max-flows`) as
//! the same mode taking every packet one by one, and as naive.

use chain::{ChainFile, Endpoint, FastOptions, FastStats, RunOptions};
use ports::gen::{generate, GenConfig, Mix};
use std::collections::BTreeMap;
use synth::Mode;

/// What a run gave: exits, state dump, summary text, the fast path's counters, and synth's
/// (paths remembered, packets served by them, flows evicted).
#[derive(Debug, PartialEq)]
struct Outcome {
    exits: BTreeMap<String, chain::exec::Captured>,
    state: BTreeMap<String, Vec<String>>,
    summary: String,
    fast: Option<FastStats>,
    synth: (usize, u64, u64),
}

/// Runs `records` twice over (`replay`, 2 passes) into `chain`'s entry `entry` in `mode`,
/// the flow tables bounded to `max_flows`; `batches` turns the naive batched path (and with
/// it the batched first packets) on or off.
fn run(
    chain: &str,
    entry: &str,
    records: &[ports::pcap::Record],
    (mode, max_flows, batches): (Mode, usize, bool),
) -> Outcome {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let chain = ChainFile::load(&root.join(chain)).unwrap();
    let mut ex = chain::Executor::new(&chain, &RunOptions::default(), |_, _| {
        Ok(chain::ExitSink::Memory(Vec::new()))
    })
    .unwrap();
    let fast = FastOptions {
        max_flows,
        ..FastOptions::default()
    };
    mode.install(&mut ex, fast);
    if mode == Mode::Synth {
        ex.limit_flows(max_flows);
    }
    ex.batch_elements(batches);
    assert_eq!(ex.batches_elements(), batches, "{chain:?} batches");
    let at = ex.entry(&Endpoint::parse(entry).unwrap()).unwrap();
    ex.replay(&[(at, records.to_vec())], 2);
    let (paths, served) = ex.flow_stats();
    let evicted = ex.flow_evictions();
    let summary = ex.summary().to_text();
    let fast = ex.fast_stats();
    let state = ex.state_dump();
    Outcome {
        exits: ex.finish().unwrap(),
        state,
        summary,
        fast,
        synth: (paths, served, evicted),
    }
}

/// Many flows of one packet (new at every pass while the tables are small) among flows of
/// several packets, TCP and UDP, in random order: batches mix first packets, second
/// packets (recorded, remembered) and hits.
fn records() -> Vec<ports::pcap::Record> {
    let cfg = GenConfig {
        packets: 3000,
        flows: 1800,
        mix: Mix {
            tcp: 1,
            udp: 2,
            icmp: 0,
        },
        seed: 23,
        ..GenConfig::default()
    };
    generate(&cfg).records()
}

/// A NAPT of 8 mappings that evicts (the least recently used goes): which mapping a new
/// flow evicts depends on the remembered flows' debts being paid before it is made.
const SMALL_NAPT: &str = "
rw :: IPRewriter(pattern 198.51.100.1 1024-65535 - - 0 1, drop,
                 MAPPING_CAPACITY 8, UDP_GUARANTEE 0, TCP_GUARANTEE 0);
FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> [0]rw;
FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> [1]rw;
rw[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02) -> ToDevice(eth1);
rw[1] -> EtherEncap(0x0800, 02:00:00:00:00:02, 02:00:00:00:00:01) -> ToDevice(eth0);
";

#[test]
fn first_packets_batched_give_what_one_by_one_gives() {
    let records = records();
    let tmp = tempfile::Builder::new()
        .prefix("fusebox-first-packets-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("napt.click"), SMALL_NAPT).unwrap();
    std::fs::write(
        dir.join("chain.toml"),
        "[nf.napt]\nclick = \"napt.click\"\n[[entry]]\nto = \"napt.eth0\"\n",
    )
    .unwrap();
    let small = dir.join("chain.toml").display().to_string();
    for (chain, entry) in [
        ("napts/one.toml", "n1.eth0"),
        ("isp/chain.toml", "fw.eth0"),
        (small.as_str(), "napt.eth0"),
    ] {
        let naive = run(chain, entry, &records, (Mode::Naive, 1 << 16, true));
        for mode in [Mode::Synth, Mode::Fastpath] {
            for max in [8, 1 << 16] {
                let batched = run(chain, entry, &records, (mode, max, true));
                let alone = run(chain, entry, &records, (mode, max, false));
                let what = format!("{chain} {mode:?} --max-flows {max}");
                assert_eq!(batched, alone, "{what}: batched first packets differ");
                assert_eq!(naive.exits, batched.exits, "{what}: exits");
                assert_eq!(naive.state, batched.state, "{what}: state");
                assert_eq!(naive.summary, batched.summary, "{what}: summary");
                if let Some(f) = &batched.fast {
                    // First packets were seen, flows were recorded and served, and the
                    // small table evicted.
                    assert!(f.first_seen > 1000, "{what}: {f:?}");
                    assert!(f.recorded > 0 && f.hits > 0, "{what}: {f:?}");
                    assert!(f.entries <= max as u64, "{what}: {f:?}");
                }
                if mode == Mode::Synth {
                    let (paths, served, evicted) = batched.synth;
                    assert!(paths <= max, "{what}: {paths} paths");
                    assert!(served > 0, "{what}: nothing served");
                    assert_eq!(evicted > 0, max == 8, "{what}: {evicted} evictions");
                }
            }
        }
    }
}
