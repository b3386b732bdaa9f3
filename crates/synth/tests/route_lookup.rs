//! A long route table synthesizes into one run-time lookup (`Node::Lookup`) instead of a
//! traffic class per route, and stays exact: naive, synth and fastpath give the same
//! packets, counters and state, with and without a NAPT before it.

use chain::ChainFile;
use ports::gen::{generate, Anomalies, GenConfig, Mix, Rate};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use synth::verify::{compare, run, Mode};

/// A router with `n` seeded routes over 4 outputs (some with gateways) and a default,
/// optionally behind a NAPT (source rewriting: established flows remember their path
/// through the lookup).
fn router(dir: &Path, n: usize, nat: bool) -> PathBuf {
    let mut x = ports::gen::SplitMix64(7);
    let mut s = String::from("rt :: RadixIPLookup(\n");
    for i in 0..n {
        let len = [8u32, 16, 20, 24, 24, 24, 28][(x.next_u64() % 7) as usize];
        let addr = (x.next_u64() as u32) & (u32::MAX << (32 - len));
        let port = x.next_u64() % 4;
        if i % 5 == 0 {
            let _ = writeln!(
                s,
                "    {}/{len} 10.0.0.{} {port},",
                Ipv4Addr::from(addr),
                1 + i % 3
            );
        } else {
            let _ = writeln!(s, "    {}/{len} {port},", Ipv4Addr::from(addr));
        }
    }
    s.push_str("    10.9.0.0/16 3);\n");
    if nat {
        s.push_str("rw :: IPRewriter(pattern 192.0.2.1 1024-65535 - - 0 1, drop);\n");
        s.push_str(
            "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> rw -> GetIPAddress(16) -> rt;\n",
        );
        s.push_str("rw[1] -> Discard;\n");
    } else {
        s.push_str("FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> DecIPTTL -> rt;\n");
    }
    for port in 0..4 {
        let _ = writeln!(
            s,
            "rt[{port}] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:01:0{port}) -> ToDevice(eth{});",
            port + 1
        );
    }
    let path = dir.join(if nat {
        "nat-router.click"
    } else {
        "router.click"
    });
    std::fs::write(&path, s).unwrap();
    path
}

fn trace(dir: &Path) -> PathBuf {
    let cfg = GenConfig {
        packets: 4000,
        flows: 800,
        mix: Mix {
            tcp: 1,
            udp: 1,
            icmp: 1,
        },
        dst_prefix: (Ipv4Addr::new(0, 0, 0, 0), 0),
        seed: 9,
        anomalies: Anomalies {
            ttl_range: Some((1, 8)),
            bad_ip_checksum: Rate(20_000),
            ..Anomalies::default()
        },
        ..GenConfig::default()
    };
    let path = dir.join("t.pcap");
    let mut w = ports::pcap::PcapWriter::create(&path, packet::Precision::Micro, 1).unwrap();
    for (ts, f) in generate(&cfg) {
        w.write(ts, &f).unwrap();
    }
    w.finish().unwrap();
    path
}

#[test]
fn long_route_tables_are_one_lookup_and_exact() {
    let tmp = tempfile::Builder::new()
        .prefix("route-lookup-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let t = trace(dir);
    for nat in [false, true] {
        let click = router(dir, 3000, nat);
        let chain = ChainFile::single(&click);
        let ex = chain::Executor::new(&chain, &chain::RunOptions::default(), |_, _| {
            Ok(chain::ExitSink::Count)
        })
        .unwrap();
        let s = synth::synthesize(&ex);
        assert!(s.naive_entries.is_empty(), "{:?}", s.naive_entries);
        let lookups = s
            .program
            .nodes
            .iter()
            .filter(|n| matches!(n, chain::program::Node::Lookup { .. }))
            .count();
        assert_eq!(lookups, 1, "nat {nat}: one lookup node");
        assert!(
            s.classes.len() < 100,
            "nat {nat}: {} classes",
            s.classes.len()
        );
        let inputs = [(
            chain::Endpoint::parse(&format!("{}.eth0", chain.nfs[0].name)).unwrap(),
            t.clone(),
        )];
        let opts = chain::RunOptions::default();
        let a = run(&chain, &inputs, &opts, Mode::Naive).unwrap();
        assert!(a.packets() > 1000);
        for mode in [Mode::Synth, Mode::Fastpath] {
            let b = run(&chain, &inputs, &opts, mode).unwrap();
            let d = compare(&a, &b);
            assert!(d.is_empty(), "nat {nat}, {mode}: {d:?}");
        }
    }
}
