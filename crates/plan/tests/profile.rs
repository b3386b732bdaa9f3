//! The profiling run on a real chain: per-element times, traffic per edge, the graph the
//! placement partitions, and the cross-core handoff measurement.

use chain::{ChainFile, Executor, ExitSink, RunOptions};
use plan::place::measure;
use ports::pcap::Record;
use std::net::Ipv4Addr;
use std::path::PathBuf;

fn isp() -> ChainFile {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    ChainFile::load(&root.join("examples/isp/chain.toml")).unwrap()
}

fn trace(packets: u64) -> Vec<Record> {
    let cfg = ports::gen::GenConfig {
        packets,
        flows: 50,
        src_prefix: (Ipv4Addr::new(10, 0, 0, 0), 16),
        dst_prefix: (Ipv4Addr::new(203, 0, 113, 0), 24),
        seed: 7,
        ..Default::default()
    };
    ports::gen::generate(&cfg)
        .map(|(ts, data)| Record {
            timestamp: ts,
            precision: packet::Precision::Nano,
            orig_len: data.len() as u32,
            data,
        })
        .collect()
}

#[test]
fn profile_times_elements_and_counts_edges() {
    let chain = isp();
    let build =
        || Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count)).unwrap();
    let (mut plain, mut timed) = (build(), build());
    let entry = timed
        .entry(&chain::Endpoint::parse("fw.eth0").unwrap())
        .unwrap();
    let inputs = vec![(entry, trace(2000))];
    let p = measure::profile(&mut plain, &mut timed, &inputs, 0);
    assert_eq!(p.nfs, vec!["fw", "router", "napt"]);
    assert_eq!(p.input_packets, 2000);
    assert!(p.one_core_ns > 0.0);
    // The entry element saw every packet and took time.
    let first = timed.global(entry.0, entry.1) as usize;
    assert_eq!(p.elements[first].packets, 2000);
    // Every element that saw packets has a time, and packets per edge add up: what enters
    // an element that is not an entry came along the edges into it.
    for (g, e) in p.elements.iter().enumerate() {
        if g == first {
            continue;
        }
        let into: u64 = p.edges.iter().filter(|x| x.1 == g).map(|x| x.2).sum();
        assert_eq!(into, e.packets, "{}", e.name);
    }
    assert!(p.elements.iter().any(|e| e.ns_per_packet > 0.0));
    // Links between NFs are edges of the graph.
    assert!(p
        .edges
        .iter()
        .any(|&(a, b, _)| p.elements[a].nf == 0 && p.elements[b].nf == 1));
    // The graph's work adds up to the untimed run's ns per packet.
    let g = p.graph();
    assert!((g.total_cpu_ns() - p.one_core_ns).abs() < 1e-6 * p.one_core_ns.max(1.0));
    let nf = g.by_nf();
    assert_eq!(nf.nodes.len(), 3);
    // Placed on two workers: every NF once.
    let placing = plan::place::place(&g, 2, 50.0, &|_| 1.0, &|_| Ok(()));
    for c in &placing.candidates {
        let mut all: Vec<usize> = c.stages.iter().flat_map(|s| s.nfs.clone()).collect();
        all.sort();
        assert_eq!(all, vec![0, 1, 2], "{placing}");
    }
}

#[test]
fn handoff_is_measured() {
    let ns = measure::handoff_ns(20_000, 2);
    assert!(ns.is_finite() && ns >= 0.0, "{ns}");
    let c = measure::clock_overhead_ns();
    assert!(c.is_finite() && c >= 0.0, "{c}");
}

#[test]
fn offloadable_classes_are_lookups_scans_and_ciphers() {
    assert!(measure::offloadable("RadixIPLookup"));
    assert!(measure::offloadable("LookupIPRoute"));
    assert!(measure::offloadable("SnortIDS"));
    assert!(!measure::offloadable("DecIPTTL"));
    assert!(!measure::offloadable("IPFilter"));
}

/// The ISP chain with equal NF costs on three workers, one flow: the exact search's
/// one-NF-per-core pipeline is refused by the executor (the NAPT sends packets back through
/// the router to its own rewriter), and repaired by moving NFs; the executor runs what is
/// chosen, and the plan says what moved.
#[test]
fn a_refused_pipeline_of_the_isp_chain_is_repaired() {
    use plan::place::{Edge, Graph, Node};
    let chain = isp();
    let ex = Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count)).unwrap();
    let nfs: Vec<String> = ["fw", "router", "napt"].map(String::from).to_vec();
    let g = Graph {
        nodes: nfs
            .iter()
            .enumerate()
            .map(|(i, n)| Node {
                name: n.clone(),
                nf: i,
                cpu_ns: 300.0,
                packets: 1.0,
                offloadable: false,
            })
            .collect(),
        edges: vec![
            Edge {
                from: 0,
                to: 1,
                packets: 1.0,
            },
            Edge {
                from: 1,
                to: 2,
                packets: 1.0,
            },
        ],
        nfs,
    };
    let admit = |p: &chain::layout::Placement| chain::layout::check_pipeline(&ex, p);
    let one_nf = chain::layout::Placement {
        stages: (0..3)
            .map(|i| chain::layout::Stage {
                nfs: vec![i],
                processor: i,
            })
            .collect(),
        replicas: 1,
    };
    assert!(admit(&one_nf).is_err());
    let placing = plan::place::place(&g, 3, 10.0, &|r| r as f64, &admit);
    let exact = placing
        .candidates
        .iter()
        .find(|c| c.how == "pipeline/exact")
        .unwrap();
    assert!(exact.runnable, "{placing}");
    assert!(!exact.moves.is_empty(), "{placing}");
    assert!(admit(&exact.placement()).is_ok());
    assert!(
        exact.note.as_deref().unwrap().contains("repaired"),
        "{placing}"
    );
    let best = placing.best().unwrap();
    assert!(admit(&best.placement()).is_ok());
    assert_eq!(best.stages.len(), 2, "{placing}");
    // fw | router, napt: the only split the executor runs.
    let stages: Vec<Vec<usize>> = exact.stages.iter().map(|s| s.nfs.clone()).collect();
    assert_eq!(stages, vec![vec![0], vec![1, 2]], "{placing}");
}
