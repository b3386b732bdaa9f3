//! A FuseBox server behind the switch `fusebox synth --openflow` programs: frames arrive
//! tagged with their class (VLAN id = 1 + the class's index at the entry's root), the
//! server takes the tag off and skips its classification when the frame is in that class,
//! and classifies frames whose tag is wrong (or missing) itself. Whatever the tags say, the
//! outputs, counters and state are those of the untagged trace run naive.

use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use ports::gen::{generate, Anomalies, GenConfig, Mix, PortSpec, Rate};
use ports::pcap::Record;
use std::net::Ipv4Addr;
use std::path::Path;

/// `frame` with an 802.1Q tag of `vid` after its MAC addresses.
fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let dst: [u8; 6] = frame[..6].try_into().unwrap();
    let src: [u8; 6] = frame[6..12].try_into().unwrap();
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    let tag = [(wire::ethernet::ethertype::VLAN, vid)];
    wire::build::ethernet(dst, src, &tag, ethertype, &frame[14..])
}

type Outcome = (
    std::collections::BTreeMap<String, chain::exec::Captured>,
    std::collections::BTreeMap<String, Vec<String>>,
    String,
);

fn run(
    chain: &ChainFile,
    entry: &Endpoint,
    records: Vec<Record>,
    trust: bool,
) -> (Outcome, (u64, u64, u64)) {
    let mut ex = Executor::new(chain, &RunOptions::default(), |_, _| {
        Ok(ExitSink::Memory(Vec::new()))
    })
    .unwrap();
    if trust {
        synth::install(&mut ex);
        ex.trust_switch_tags(true);
    }
    let at = ex.entry(entry).unwrap();
    ex.replay(&[(at, records)], 1);
    let (held, again) = ex.switch_tag_counts();
    let served = ex.flow_stats().1;
    let s = ex.summary().to_text();
    (
        (ex.finish().unwrap(), ex.state_dump(), s),
        (held, again, served),
    )
}

#[test]
fn the_server_trusts_the_switch_class_and_checks_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let chain = ChainFile::load(&root.join("isp/chain.toml")).unwrap();
    let entry = Endpoint::parse("fw.eth0").unwrap();
    let cfg = GenConfig {
        packets: 3000,
        flows: 200,
        mix: Mix {
            tcp: 1,
            udp: 1,
            icmp: 1,
        },
        src_prefix: (Ipv4Addr::new(10, 0, 0, 0), 8),
        dst_prefix: (Ipv4Addr::new(0, 0, 0, 0), 0),
        dst_ports: PortSpec::List(vec![22, 53, 80, 443, 1234]),
        seed: 3,
        anomalies: Anomalies {
            ttl_range: Some((1, 64)),
            bad_ip_checksum: Rate(20_000),
            ..Anomalies::default()
        },
        ..GenConfig::default()
    };
    let records: Vec<Record> = generate(&cfg).records();
    // The switch's marks: FuseBox's own classes.
    let mut probe =
        Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count)).unwrap();
    let syn = synth::synthesize(&probe);
    let prog = syn.program.clone();
    probe.install(syn.program);
    let g = probe.entry_elements()[0].1;
    let mut wrong = 0;
    let marked: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut r = r.clone();
            let class = synth::openflow::class_of(&prog, g, &r.data);
            r.data = match class {
                // Every 7th frame gets an earlier class's tag (one it is not in: its class
                // is the first that holds it). A tag may not name a later class: the switch
                // gives the first class whose flows match, and those flows match supersets.
                Some(c) if i % 7 == 3 && c > 1 => {
                    wrong += 1;
                    tagged(&r.data, c as u16 - 1)
                }
                Some(c) if i % 11 != 5 => tagged(&r.data, c as u16),
                _ => r.data,
            };
            r
        })
        .collect();
    assert!(wrong > 100);
    let (plain, _) = run(&chain, &entry, records, false);
    let (trusted, (held, again, served)) = run(&chain, &entry, marked, true);
    // Packets of remembered flows take one lookup, whatever their tag says; the tag spares
    // the others the classifier.
    assert!(held > 200, "{held} frames skipped classification");
    assert!(
        held + served > 2000,
        "{held} frames skipped classification, {served} took a remembered path"
    );
    assert!(again > 0, "wrongly tagged frames are classified again");
    assert_eq!(plain.0, trusted.0, "exits");
    assert_eq!(plain.1, trusted.1, "state");
    assert_eq!(plain.2, trusted.2, "summary");
}
