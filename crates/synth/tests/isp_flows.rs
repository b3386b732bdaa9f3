//! The ISP chain (firewall → router → NAPT) synthesized: besides flows through the NAPT's
//! mappings, flows the firewall denies and flows the NAPT drops for their protocol (ICMP)
//! are remembered too, so their later packets take one lookup instead of the firewall's
//! ordered classifier. The outputs, counters and state stay those of the naive run.

use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use ports::gen::{generate, GenConfig, Mix, PortSpec};
use ports::pcap::Record;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;

type Outcome = (
    std::collections::BTreeMap<String, chain::exec::Captured>,
    std::collections::BTreeMap<String, Vec<String>>,
    String,
);

/// Runs `records` through the chain `passes` times: the outcome, and the packets served by
/// a remembered path.
fn run(chain: &ChainFile, records: &[Record], synth: bool, passes: u64) -> (Outcome, u64) {
    let mut ex = Executor::new(chain, &RunOptions::default(), |_, _| {
        Ok(ExitSink::Memory(Vec::new()))
    })
    .unwrap();
    if synth {
        synth::install(&mut ex);
    }
    let at = ex.entry(&Endpoint::parse("fw.eth0").unwrap()).unwrap();
    ex.replay(&[(at, records.to_vec())], passes);
    let served = ex.flow_stats().1;
    let s = ex.summary().to_text();
    ((ex.finish().unwrap(), ex.state_dump(), s), served)
}

#[test]
fn denied_and_unnatted_flows_take_one_lookup_and_stay_exact() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let tmp = tempfile::Builder::new()
        .prefix("isp-flows-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    // A list that denies a third of the flows (by destination port) before allowing the
    // rest, with overlapping rules.
    let rules = dir.join("acl.rules");
    let mut f = std::fs::File::create(&rules).unwrap();
    writeln!(f, "deny src net 10.3.0.0/16 && dst port 22").unwrap();
    writeln!(f, "deny dst port 22").unwrap();
    writeln!(f, "allow src net 10.0.0.0/8 && dst port 80").unwrap();
    writeln!(f, "allow all").unwrap();
    drop(f);
    let mut chain = ChainFile::load(&root.join("isp/chain.toml")).unwrap();
    for nf in chain.nfs.iter_mut().filter(|n| n.name == "fw") {
        nf.defines
            .push(("RULES".into(), rules.display().to_string()));
    }
    let cfg = GenConfig {
        packets: 6000,
        flows: 120,
        mix: Mix {
            tcp: 1,
            udp: 1,
            icmp: 1,
        },
        src_prefix: (Ipv4Addr::new(10, 0, 0, 0), 8),
        dst_prefix: (Ipv4Addr::new(0, 0, 0, 0), 0),
        dst_ports: PortSpec::List(vec![22, 80, 443]),
        seed: 5,
        ..GenConfig::default()
    };
    let records: Vec<Record> = generate(&cfg).records();
    let passes = 2;
    let (naive, _) = run(&chain, &records, false, passes);
    let (synth, served) = run(&chain, &records, true, passes);
    assert_eq!(naive.0, synth.0, "exits");
    assert_eq!(naive.1, synth.1, "state");
    assert_eq!(naive.2, synth.2, "summary");
    // Both kinds of drop happened, for many packets each.
    let count = |reason: &str| -> u64 {
        naive
            .2
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("drop {reason}")))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let (denied, unnatted) = (count("filter-deny"), count("not-tcp-udp"));
    assert!(denied > 1000, "{denied} denied\n{}", naive.2);
    assert!(unnatted > 1000, "{unnatted} not TCP/UDP\n{}", naive.2);
    // Every flow's packets after its first few (a TCP flow's data and pure ACKs are
    // remembered apart; SYN and FIN packets change the mapping) take one lookup, the
    // denied and unnatted ones included.
    let total = records.len() as u64 * passes;
    let slow = total - served;
    assert!(
        slow < total / 20,
        "{slow} of {total} packets took the slow path ({denied} denied, {unnatted} not TCP/UDP)"
    );
}
