//! The bundled examples are synthesized, not silently run naive: every entry gets a program
//! and packets go through its nodes.

use chain::{ChainFile, Executor, ExitSink, RunOptions};
use packet::Packet;
use std::path::Path;
use wire::build::{Frame, Sum};

fn executor(example: &str) -> Executor {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let chain = ChainFile::load(&root.join(example)).expect("chain file");
    Executor::new(&chain, &RunOptions::default(), |_, _| {
        Ok(ExitSink::Memory(Vec::new()))
    })
    .expect("chain builds")
}

/// A UDP frame 10.0.x.y:4000 > 10.1.2.3:1234 with TTL 64, a valid IPv4 checksum and no
/// UDP checksum, padded to 60 bytes.
fn udp(src_last: u8) -> Vec<u8> {
    Frame::udp([10, 0, 0, src_last], [10, 1, 2, 3], 4000, 1234)
        .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .l4_sum(Sum::Zero)
        .pad_to(60)
        .build()
}

#[test]
fn every_entry_of_every_example_is_synthesized() {
    for ex in [
        "fig5/chain.toml",
        "routers/chain.toml",
        "napts/chain.toml",
        "isp/chain.toml",
    ] {
        let e = executor(ex);
        let s = synth::synthesize(&e);
        assert!(s.naive_entries.is_empty(), "{ex}: {:?}", s.naive_entries);
        assert_eq!(s.program.starts.len(), e.entry_elements().len(), "{ex}");
        assert!(!s.classes.is_empty(), "{ex}");
    }
}

#[test]
fn packets_run_through_the_program() {
    for (ex, entry) in [
        ("routers/chain.toml", "r1.eth0"),
        ("napts/chain.toml", "n1.eth0"),
    ] {
        let mut e = executor(ex);
        synth::install(&mut e);
        let at = e
            .entry(&chain::Endpoint::parse(entry).expect("endpoint"))
            .expect("entry");
        for i in 0..50u8 {
            e.inject(at, Packet::from_bytes(&udp(i)));
        }
        let used: u64 = e.node_counts().iter().sum();
        assert!(used >= 100, "{ex}: program nodes reached {used} times");
        let out = e.finish().expect("finish");
        let n: usize = out.values().map(Vec::len).sum();
        assert_eq!(n, 50, "{ex}: every packet leaves");
        let s = e.summary();
        assert!(s.totals.balanced, "{ex}");
    }
}

#[test]
fn established_napt_flows_take_one_lookup_and_keep_state_exact() {
    // The same 5 flows, 40 times each, through ten NAPTs: a flow is remembered from its
    // second packet (the first only notes that it was seen), so after each flow's first two
    // packets, packets are served by the remembered path; the mappings and counters come out
    // as in the naive run.
    let run = |synth: bool| {
        let mut e = executor("napts/chain.toml");
        if synth {
            synth::install(&mut e);
        }
        let at = e
            .entry(&chain::Endpoint::parse("n1.eth0").expect("endpoint"))
            .expect("entry");
        for i in 0..200u8 {
            e.inject(at, Packet::from_bytes(&udp(i % 5)));
        }
        let stats = e.flow_stats();
        let out = e.finish().expect("finish");
        (stats, out, e.summary(), e.state_dump())
    };
    let (stats, out, summary, state) = run(true);
    let (_, out0, summary0, state0) = run(false);
    assert_eq!(stats.0, 5, "one remembered path per flow: {stats:?}");
    assert_eq!(
        stats.1, 190,
        "all but the first two packets of each flow: {stats:?}"
    );
    assert_eq!(out, out0);
    assert_eq!(summary, summary0);
    assert_eq!(state, state0);
}

/// `Executor::tell_translations` on the ten NAPTs, in every mode: each flow is told once,
/// as it arrived and as it leaves the last NAPT (the 5-tuple of the packets that left),
/// before the first of them left; a flow that leaves unchanged (none here) is not told.
#[test]
fn the_napts_tell_each_rewritten_flow_once() {
    use std::sync::{Arc, Mutex};
    for mode in ["naive", "synth", "fastpath"] {
        let mut e = executor("napts/chain.toml");
        match mode {
            "synth" => {
                synth::install(&mut e);
            }
            "fastpath" => e.enable_fastpath(chain::FastOptions::default()),
            _ => {}
        }
        let told: Arc<Mutex<Vec<(packet::FlowKey, packet::FlowKey)>>> = Arc::default();
        let sink = told.clone();
        e.tell_translations(Some(Box::new(move |k, o| {
            if let Ok(mut v) = sink.lock() {
                v.push((*k, *o));
            }
        })));
        let at = e
            .entry(&chain::Endpoint::parse("n1.eth0").unwrap())
            .unwrap();
        for i in 0..40u8 {
            e.inject(at, Packet::from_bytes(&udp(i % 5)));
            // Told before the packet left, so a proxy knows the flow when it arrives.
            let n = told.lock().unwrap().len();
            assert_eq!(n, usize::from(i.min(4)) + 1, "{mode}: after packet {i}");
        }
        let out = e.finish().expect("finish");
        let told = told.lock().unwrap().clone();
        let sent: std::collections::BTreeSet<packet::FlowKey> = out
            .values()
            .flatten()
            .filter_map(|(_, _, d)| packet::FlowKey::from_ethernet(d))
            .collect();
        assert_eq!(sent.len(), 5, "{mode}");
        for (k, o) in &told {
            assert_eq!(k.dst, o.dst, "{mode}");
            assert_ne!(k.src, o.src, "{mode}");
            assert_eq!(
                o.src.to_string(),
                "10.0.110.1",
                "{mode}: the last NAPT's address"
            );
            assert!(sent.contains(o), "{mode}: {o:?} never left");
        }
        let arrived: std::collections::BTreeSet<_> = told.iter().map(|t| t.0).collect();
        assert_eq!(arrived.len(), 5, "{mode}: {told:?}");
    }
}
