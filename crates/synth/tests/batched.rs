//! Naive runs in batches element by element (`chain`'s `batch` module) give exactly what
//! packet-by-packet runs give, on the bundled examples: every exit's packets, the counters
//! and the state, with and without replies, with anomalies in the traffic.

use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use ports::gen::{generate, Anomalies, GenConfig, Mix, PortSpec, Rate};
use ports::pcap::{PcapWriter, DLT_EN10MB};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use synth::verify::{compare, run_installed, RunResult};

fn example(name: &str) -> ChainFile {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    ChainFile::load(&root.join(name)).expect("chain file")
}

/// 2,000 packets of 300 TCP/UDP/ICMP flows from 10.0.0.0/16, with bad checksums, IP
/// options, ARP, cut frames, short transport parts and TTLs down to 1.
fn trace(dir: &Path) -> PathBuf {
    let cfg = GenConfig {
        packets: 2000,
        flows: 300,
        mix: Mix {
            tcp: 2,
            udp: 2,
            icmp: 1,
        },
        src_prefix: (Ipv4Addr::new(10, 0, 0, 0), 16),
        dst_prefix: (Ipv4Addr::new(0, 0, 0, 0), 0),
        dst_ports: PortSpec::List(vec![80, 53, 443]),
        gap_ns: 100_000,
        anomalies: Anomalies {
            ttl_range: Some((1, 12)),
            bad_ip_checksum: Rate(20),
            ip_options: Rate(20),
            arp: Rate(30),
            truncated: Rate(30),
            short_transport: Rate(20),
        },
        ..GenConfig::default()
    };
    let path = dir.join("trace.pcap");
    let mut w = PcapWriter::create(&path, packet::Precision::Micro, DLT_EN10MB).unwrap();
    for (ts, frame) in generate(&cfg) {
        w.write(ts, &frame).unwrap();
    }
    w.finish().unwrap();
    path
}

fn run(
    chain: &ChainFile,
    inputs: &[(Endpoint, PathBuf)],
    opts: &RunOptions,
    batch: bool,
) -> RunResult {
    run_installed(chain, inputs, opts, |ex: &mut Executor| {
        if batch {
            assert!(
                ex.batches_elements(),
                "the chain is batched: {:?}",
                ex.batch_refusal()
            );
        }
        ex.batch_elements(batch)
    })
    .expect("run")
}

/// Runs `chain` fed `trace` at `entry` batched and packet by packet, without and with
/// replies from `far`, and checks that both give the same; returns the fewest packets that
/// left in a run.
fn batched_as_one_by_one(chain: &ChainFile, entry: &str, far: &str, trace: &Path) -> usize {
    let inputs = vec![(Endpoint::parse(entry).unwrap(), trace.to_path_buf())];
    let mut fewest = usize::MAX;
    for reflect in [false, true] {
        let opts = RunOptions {
            reflect: if reflect {
                vec![Endpoint::parse(far).unwrap()]
            } else {
                Vec::new()
            },
            batch: 32,
            ..RunOptions::default()
        };
        let a = run(chain, &inputs, &opts, true);
        let b = run(chain, &inputs, &opts, false);
        let d = compare(&a, &b);
        assert!(
            d.is_empty(),
            "{entry} (reflect {reflect}): {:?}",
            &d[..d.len().min(5)]
        );
        fewest = fewest.min(a.packets());
    }
    fewest
}

#[test]
fn batched_naive_runs_give_what_packet_by_packet_runs_give() {
    let tmp = tempfile::Builder::new()
        .prefix("fusebox-batched-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let t = trace(dir);
    for (ex, entry, far) in [
        ("routers/chain.toml", "r1.eth0", "r10.eth1"),
        ("routers/one.toml", "r1.eth0", "r1.eth1"),
        ("napts/chain.toml", "n1.eth0", "n10.eth1"),
        ("napts/one.toml", "n1.eth0", "n1.eth1"),
        ("isp/chain.toml", "fw.eth0", "napt.eth1"),
        ("fig5/chain.toml", "napt.eth0", "lb.eth1"),
    ] {
        let left = batched_as_one_by_one(&example(ex), entry, far, &t);
        assert!(left > 0, "{ex}: packets leave");
    }
}

/// A chain of routers is batched from end to end; a chain of NATs up to its first rewriter.
#[test]
fn what_is_batched_follows_the_elements() {
    for ex in ["routers/chain.toml", "napts/chain.toml", "isp/chain.toml"] {
        let e = Executor::new(&example(ex), &RunOptions::default(), |_, _| {
            Ok(ExitSink::Count)
        })
        .unwrap();
        assert!(e.batches_elements(), "{ex}: {:?}", e.batch_refusal());
    }
}

/// Runs handed on at once (a path of `Free` elements in one call) keep what an element
/// that needs input order sees: TCP and UDP part at a classifier, each takes its own
/// element, both meet again at one `Free` element (which is then given two runs of one
/// batch) and go on to a NAPT's rewriter (`Ordered`) that holds 40 mappings, so which
/// flows get one depends on the order it sees them in. Batched and packet-by-packet runs
/// give the same packets, counters and mappings (handing the rewriter its runs at once
/// fails this).
#[test]
fn paths_that_meet_before_an_ordered_element_keep_input_order() {
    let tmp = tempfile::Builder::new()
        .prefix("fusebox-batched-join-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let t = trace(dir);
    std::fs::write(
        dir.join("join.click"),
        "rw :: IPRewriter(pattern 10.9.0.1 1024-65535 - - 0 1, drop, MAPPING_CAPACITY 40);\n\
         FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> c :: IPClassifier(tcp, udp, -);\n\
         c[0] -> Paint(1) -> j :: Paint(3);\n\
         c[1] -> Paint(2) -> j;\n\
         c[2] -> Discard;\n\
         j -> [0]rw;\n\
         FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> [1]rw;\n\
         rw[0] -> DecIPTTL -> EtherEncap(0x0800, 02:00:00:00:01:11, 02:00:00:00:02:10) -> ToDevice(eth1);\n\
         rw[1] -> DecIPTTL -> EtherEncap(0x0800, 02:00:00:00:01:10, 02:00:00:00:00:11) -> ToDevice(eth0);\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("chain.toml"),
        "[nf.j]\nclick = \"join.click\"\n[[entry]]\nto = \"j.eth0\"\n",
    )
    .unwrap();
    let chain = ChainFile::load(&dir.join("chain.toml")).expect("chain file");
    let left = batched_as_one_by_one(&chain, "j.eth0", "j.eth1", &t);
    assert!(left > 100, "packets leave");
}
