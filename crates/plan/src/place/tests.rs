use super::forward::{self, best_admitted, brute_force, exact, is_forward, repair};
use super::partition::{cluster, exhaustive, metis, next_assignment, refine};
use super::*;
use proptest::prelude::*;

fn node(name: &str, nf: usize, cpu_ns: f64, offloadable: bool) -> Node {
    Node {
        name: name.to_string(),
        nf,
        cpu_ns,
        packets: 1.0,
        offloadable,
    }
}

fn edge(from: usize, to: usize, packets: f64) -> Edge {
    Edge { from, to, packets }
}

/// A chain of NFs, one node each, every packet going through all of them.
fn chain(costs: &[f64]) -> Graph {
    Graph {
        nodes: costs
            .iter()
            .enumerate()
            .map(|(i, &c)| node(&format!("nf{i}"), i, c, false))
            .collect(),
        edges: (1..costs.len()).map(|i| edge(i - 1, i, 1.0)).collect(),
        nfs: (0..costs.len()).map(|i| format!("nf{i}")).collect(),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn times_add_nodes_and_crossings_on_both_sides() {
    let g = chain(&[100.0, 200.0, 50.0]);
    let m = Machine::cores(2, 10.0);
    // nf0 alone; nf1 and nf2 together: one crossing of 1 packet.
    let t = m.times(&g, &[0, 1, 1]);
    assert!(close(t[0], 110.0) && close(t[1], 260.0), "{t:?}");
    assert!(close(m.bottleneck(&g, &[0, 1, 1]), 260.0));
    // Back and forth: two crossings each.
    let t = m.times(&g, &[0, 1, 0]);
    assert!(close(t[0], 170.0) && close(t[1], 220.0), "{t:?}");
}

#[test]
fn accelerator_costs_launch_per_batch_packets_and_transfer() {
    let a = Accelerator {
        launch_ns: 6400.0,
        batch: 64,
        per_packet_ns: 5.0,
        speedup: 4.0,
        transfer_ns: 30.0,
    };
    let m = Machine::cores(1, 10.0).with_accelerator("gpu", a);
    let mut g = chain(&[100.0, 400.0]);
    g.nodes[1].offloadable = true;
    // On the accelerator: 1 × (5 + 6400/64) + 400/4 = 205; crossing 30 each side.
    assert!(close(m.node_cost(&g.nodes[1], 1), 205.0));
    let t = m.times(&g, &[0, 1]);
    assert!(close(t[0], 130.0) && close(t[1], 235.0), "{t:?}");
    // What an accelerator cannot run is infinitely expensive there.
    assert!(m.node_cost(&g.nodes[0], 1).is_infinite());
}

#[test]
fn predicted_rate_replicas_against_pipeline() {
    let g = chain(&[100.0, 200.0, 100.0]);
    // Even flows: replicas at 2 × 10⁹/400 = 5 Mpps beat the best pipeline (310 ns: 3.2 Mpps).
    let p = place(&g, 2, 10.0, &|_| 1.0, &|_| Ok(()));
    assert_eq!(p.candidates[0].how, "replicas");
    assert!(close(p.candidates[0].predicted_pps, 5e6));
    assert_eq!(p.chosen, 0);
    for c in &p.candidates[1..] {
        assert!(close(c.bottleneck_ns(), 310.0), "{c:?}");
        assert!(close(c.predicted_pps, 1e9 / 310.0));
    }
    // One flow carries everything: replicas run at one core's rate, the pipeline wins.
    let p = place(&g, 2, 10.0, &|r| r as f64, &|_| Ok(()));
    assert!(close(p.candidates[0].predicted_pps, 2.5e6));
    let best = p.best().unwrap();
    assert_ne!(best.how, "replicas");
    assert!(close(best.predicted_pps, 1e9 / 310.0));
    let pl = best.placement();
    assert_eq!(pl.replicas, 1);
    assert_eq!(pl.stages.len(), 2);
    let mut all: Vec<usize> = pl.stages.iter().flat_map(|s| s.nfs.clone()).collect();
    all.sort();
    assert_eq!(all, vec![0, 1, 2]);
    // A pipeline the executor refuses is listed, not chosen.
    let p = place(&g, 2, 10.0, &|r| r as f64, &|pl| {
        if pl.stages.len() > 1 {
            Err("state on the way back".into())
        } else {
            Ok(())
        }
    });
    assert_eq!(p.chosen, 0);
    assert!(p.candidates[1..].iter().all(|c| !c.runnable));
    assert!(p.candidates[1]
        .note
        .as_deref()
        .unwrap()
        .contains("state on the way back"));
    // Crossing too costly: the pipeline loses to a single core even with one flow; the
    // best pipeline using both workers is listed beside the exact one of one stage.
    let p = place(&g, 2, 1000.0, &|r| r as f64, &|_| Ok(()));
    assert_eq!(p.chosen, 0);
    let exact1 = p
        .candidates
        .iter()
        .find(|c| c.how == "pipeline/exact")
        .unwrap();
    assert_eq!(exact1.stages.len(), 1);
    let all = p
        .candidates
        .iter()
        .find(|c| c.how == "pipeline/exact-all")
        .unwrap();
    assert_eq!(all.stages.len(), 2);
    assert!(close(all.bottleneck_ns(), 1300.0), "{p}");
}

#[test]
fn pipelines_and_replicas_combine_on_four_workers() {
    let g = chain(&[100.0, 100.0, 100.0, 100.0]);
    let p = place(&g, 4, 5.0, &|r| r as f64, &|_| Ok(()));
    let hows: Vec<&str> = p.candidates.iter().map(|c| c.how.as_str()).collect();
    assert!(hows.contains(&"pipeline/METIS ×2"), "{hows:?}");
    assert!(hows.contains(&"pipeline/clustering"), "{hows:?}");
    // One flow: four stages of 100 ns plus crossings are the fastest.
    let best = p.best().unwrap();
    assert_eq!(best.stages.len(), 4, "{p}");
    assert_eq!(best.replicas, 1);
    // Stages run forward along the chain.
    let order: Vec<usize> = best.stages.iter().flat_map(|s| s.nfs.clone()).collect();
    assert_eq!(order, vec![0, 1, 2, 3]);
}

#[test]
fn contiguous_merges_a_processor_used_twice() {
    let g = chain(&[10.0, 100.0, 10.0, 100.0]);
    let (stages, merged) = contiguous(&g, &[0, 1, 0, 1]);
    assert!(merged);
    let mut seen = Vec::new();
    for s in &stages {
        seen.extend(s.iter().copied());
    }
    assert_eq!(seen, vec![0, 1, 2, 3]);
    assert!(stages.len() <= 2, "{stages:?}");
    let (stages, merged) = contiguous(&g, &[0, 0, 1, 1]);
    assert!(!merged);
    assert_eq!(stages, vec![vec![0, 1], vec![2, 3]]);
}

#[test]
fn exhaustive_finds_the_hand_computed_optimum() {
    // 4 NFs of 100 on 2 cores crossing at 10: two stages of two, one crossing each: 210.
    let g = chain(&[100.0, 100.0, 100.0, 100.0]);
    let m = Machine::cores(2, 10.0);
    let best = exhaustive(&g, &m).unwrap();
    assert!(close(m.bottleneck(&g, &best), 210.0), "{best:?}");
    // Too large to search.
    let g = chain(&[1.0; 40]);
    assert!(exhaustive(&g, &m).is_none());
}

#[test]
fn both_partitioners_balance_equal_work() {
    // 8 equal NFs on 4 cores with little traffic: two each.
    let mut g = chain(&[100.0; 8]);
    for e in &mut g.edges {
        e.packets = 0.01;
    }
    let m = Machine::cores(4, 10.0);
    for (how, assign) in [
        ("METIS", metis(&g, &m).0),
        ("clustering", cluster(&g, &m, 0.1)),
    ] {
        let mut per = [0usize; 4];
        for &p in &assign {
            per[p] += 1;
        }
        assert_eq!(per, [2, 2, 2, 2], "{how}: {assign:?}");
        assert!(m.bottleneck(&g, &assign) <= 200.0 + 2.0 * 10.0 * 0.01 * 2.0 + 1e-9);
    }
}

#[test]
fn bad_input_does_not_panic() {
    let empty = Graph::default();
    let m = Machine::cores(3, 10.0);
    assert!(metis(&empty, &m).0.is_empty());
    assert!(cluster(&empty, &m, 0.1).is_empty());
    let p = place(&empty, 0, 10.0, &|_| f64::NAN, &|_| Ok(()));
    assert_eq!(p.candidates.len(), 1);
    // Edges to nodes that do not exist, NaN and negative costs, no processors.
    let mut g = chain(&[f64::NAN, -5.0, 1e300]);
    g.edges.push(edge(7, 9, 1.0));
    g.edges.push(edge(1, 1, 3.0));
    let _ = metis(&g, &m);
    let _ = cluster(&g, &m, 0.1);
    let _ = refine(&g, &m, vec![0, 1, 2]);
    let none = Machine::cores(0, 1.0);
    assert_eq!(metis(&g, &none).0, vec![0, 0, 0]);
    let _ = place(&g, 5, f64::INFINITY, &|_| 1.0, &|_| Ok(()));
    let _ = offload(&g, &m, 0.1);
}

/// A slow accelerator worth using for part of the heavy element only.
fn half_speed_gpu() -> Accelerator {
    Accelerator {
        launch_ns: 640.0,
        batch: 64,
        per_packet_ns: 2.0,
        speedup: 2.0,
        transfer_ns: 5.0,
    }
}

fn heavy_middle() -> Graph {
    let mut g = Graph {
        nodes: vec![
            node("fw/in", 0, 50.0, false),
            node("ipsec/esp", 0, 1000.0, true),
            node("fw/out", 0, 50.0, false),
        ],
        edges: vec![edge(0, 1, 1.0), edge(1, 2, 1.0)],
        nfs: vec!["fw".to_string()],
    };
    g.nodes[2].nf = 0;
    g
}

#[test]
fn accelerator_takes_a_share_of_the_offloadable_element() {
    let g = heavy_middle();
    let cpu_only = rate(g.total_cpu_ns());
    let m = Machine::cores(1, 20.0).with_accelerator("gpu", half_speed_gpu());
    for o in offload(&g, &m, 0.1) {
        // Neither all (522 ns on the accelerator) nor nothing (1100 ns on the core): about
        // 70 % of the heavy element, as NFCompass found for IPsec, none of the others.
        assert!(o.ratio[1] > 0.0 && o.ratio[1] < 1.0, "{o:?}");
        assert_eq!((o.ratio[0], o.ratio[2]), (0.0, 0.0), "{o:?}");
        assert!(o.predicted_pps > 1.4 * cpu_only, "{o:?}");
    }
    // METIS with refinement reaches the optimum of the expanded graph (12 nodes: searched).
    let (x, _) = g.expand(0.1);
    let best = exhaustive(&x, &m).unwrap();
    let o = &offload(&g, &m, 0.1)[0];
    assert!(
        close(o.predicted_pps, rate(m.bottleneck(&x, &best))),
        "{o:?}"
    );
}

#[test]
fn a_useless_accelerator_gets_nothing() {
    let g = heavy_middle();
    let slow = Accelerator {
        speedup: 0.5,
        transfer_ns: 500.0,
        ..half_speed_gpu()
    };
    let m = Machine::cores(1, 20.0).with_accelerator("gpu", slow);
    for o in offload(&g, &m, 0.1) {
        assert_eq!(o.ratio, vec![0.0, 0.0, 0.0], "{o:?}");
        assert!(close(o.predicted_pps, rate(1100.0)), "{o:?}");
    }
}

#[test]
fn expansion_keeps_work_and_traffic() {
    let g = heavy_middle();
    let (x, origin) = g.expand(0.1);
    assert_eq!(x.nodes.len(), 12);
    assert_eq!(origin.iter().filter(|&&o| o == 1).count(), 10);
    assert!(close(x.total_cpu_ns(), g.total_cpu_ns()));
    let into: f64 = x
        .edges
        .iter()
        .filter(|e| origin[e.to] == 1)
        .map(|e| e.packets)
        .sum();
    assert!(close(into, 1.0));
}

/// Two groups of `sizes` nodes, each a clique of heavy traffic, the second group's costs a
/// rotation of the first's (equal work), joined by light edges: the planted cut is the
/// balanced one that crosses only light traffic.
fn planted(costs: &[f64], heavy: &[f64], light: &[(usize, usize, f64)]) -> (Graph, Vec<usize>) {
    let k = costs.len();
    let mut nodes = Vec::new();
    for (i, &c) in costs.iter().enumerate() {
        nodes.push(node(&format!("a{i}"), i, c, false));
    }
    for i in 0..k {
        nodes.push(node(&format!("b{i}"), k + i, costs[(i + 1) % k], false));
    }
    let mut edges = Vec::new();
    let mut h = heavy.iter().cycle();
    for base in [0, k] {
        for i in 0..k {
            for j in i + 1..k {
                edges.push(edge(base + i, base + j, *h.next().unwrap_or(&5.0)));
            }
        }
    }
    for &(i, j, w) in light {
        edges.push(edge(i % k, k + j % k, w));
    }
    let truth = (0..2 * k).map(|v| usize::from(v >= k)).collect();
    let g = Graph {
        nfs: nodes.iter().map(|n| n.name.clone()).collect(),
        nodes,
        edges,
    };
    (g, truth)
}

#[test]
fn exact_finds_the_best_cut_of_a_chain() {
    let g = chain(&[100.0, 200.0, 100.0]);
    let (stages, complete) = exact(&g, 2, 10.0).unwrap();
    assert!(complete);
    assert_eq!(stages.len(), 2);
    assert!(
        close(forward::bottleneck(&g, &stages, 10.0), 310.0),
        "{stages:?}"
    );
    // Crossing dearer than any split saves: one stage.
    let (stages, _) = exact(&g, 2, 1000.0).unwrap();
    assert_eq!(stages, vec![vec![0, 1, 2]]);
    // Four equal NFs on four cores, cheap crossings: one each.
    let g = chain(&[100.0; 4]);
    let (stages, _) = exact(&g, 4, 5.0).unwrap();
    assert_eq!(stages, vec![vec![0], vec![1], vec![2], vec![3]]);
    assert!(exact(&Graph::default(), 2, 1.0).is_none());
    // Exactly two stages, however dear the crossing.
    let g = chain(&[100.0, 200.0, 100.0]);
    let (stages, _) = forward::exact_stages(&g, 2, 2, 1000.0).unwrap();
    assert_eq!(stages.len(), 2);
    assert!(close(forward::bottleneck(&g, &stages, 1000.0), 1300.0));
    assert!(forward::exact_stages(&g, 4, 4, 1.0).is_none());
}

/// a → b, a → c, b → d, costs 10, 100, 100, 10: the best forward split {a, c} | {b, d}
/// (120 ns with crossings of 10) is no cut of the flow order a, b, c, d (the best of those,
/// {a, b} | {c, d}, takes 130).
fn diamond() -> Graph {
    Graph {
        nodes: vec![
            node("a", 0, 10.0, false),
            node("b", 1, 100.0, false),
            node("c", 2, 100.0, false),
            node("d", 3, 10.0, false),
        ],
        edges: vec![edge(0, 1, 1.0), edge(0, 2, 1.0), edge(1, 3, 1.0)],
        nfs: ["a", "b", "c", "d"].map(String::from).to_vec(),
    }
}

#[test]
fn exact_searches_beyond_cuts_of_the_flow_order() {
    let g = diamond();
    assert_eq!(flow_order(&g), vec![0, 1, 2, 3]);
    let (stages, complete) = exact(&g, 2, 10.0).unwrap();
    assert!(complete);
    assert_eq!(stages, vec![vec![0, 2], vec![1, 3]]);
    assert!(close(forward::bottleneck(&g, &stages, 10.0), 120.0));
    assert!(close(brute_force(&g, 2, 10.0).unwrap(), 120.0));
    assert!(close(
        forward::bottleneck(&g, &[vec![0, 1], vec![2, 3]], 10.0),
        130.0
    ));
    // Backward stages are not forward.
    assert!(!is_forward(&g, &[vec![1, 3], vec![0, 2]]));
    assert!(!is_forward(&g, &[vec![0, 2], vec![1]]));
    assert!(!is_forward(&g, &[vec![0, 2], vec![1, 3, 3]]));
}

#[test]
fn exact_on_a_wide_graph_falls_back_to_cuts_of_the_order() {
    // 12 independent NFs: 4096 downsets, beyond the limit.
    let mut g = chain(&[10.0; 12]);
    g.edges.clear();
    let (stages, complete) = exact(&g, 2, 1.0).unwrap();
    assert!(!complete);
    assert!(is_forward(&g, &stages));
    assert!(
        close(forward::bottleneck(&g, &stages, 1.0), 60.0),
        "{stages:?}"
    );
}

/// An executor that refuses to split `together` over stages.
fn keeps_together(together: Vec<usize>) -> impl Fn(&[Vec<usize>]) -> bool {
    move |st: &[Vec<usize>]| st.iter().any(|s| together.iter().all(|v| s.contains(v)))
}

#[test]
fn repair_moves_the_fewest_nfs() {
    let g = chain(&[100.0, 100.0, 100.0]);
    let admit = keeps_together(vec![1, 2]);
    let (st, moves) = repair(&g, &[vec![0], vec![1], vec![2]], 10.0, &admit).unwrap();
    assert_eq!(st, vec![vec![0], vec![1, 2]]);
    assert_eq!(moves.len(), 1, "{moves:?}");
    // Two moves when one is not enough.
    let g = chain(&[100.0; 4]);
    let admit = keeps_together(vec![1, 2, 3]);
    let (st, moves) = repair(&g, &[vec![0], vec![1], vec![2], vec![3]], 10.0, &admit).unwrap();
    assert_eq!(st, vec![vec![0], vec![1, 2, 3]]);
    assert_eq!(moves.len(), 2, "{moves:?}");
    // More: the moves say which NFs went where.
    let g = chain(&[100.0; 5]);
    let admit = keeps_together(vec![1, 2, 3, 4]);
    let start: Vec<Vec<usize>> = (0..5).map(|v| vec![v]).collect();
    let (st, moves) = repair(&g, &start, 10.0, &admit).unwrap();
    assert_eq!(st, vec![vec![0], vec![1, 2, 3, 4]]);
    assert_eq!(moves.len(), 3, "{moves:?}");
    assert_eq!(moves[0].to_string(), "moved nf2 from stage 2 to stage 1");
    // Nothing but one stage is accepted: no repair.
    let admit = |st: &[Vec<usize>]| st.len() == 1;
    assert!(repair(&g, &start, 10.0, &admit).is_none());
}

#[test]
fn place_repairs_a_refused_pipeline_and_says_what_moved() {
    let g = chain(&[100.0, 100.0, 100.0]);
    // One flow: pipelines win; the executor refuses router and NAPT in different stages.
    let refuse = |pl: &Placement| {
        if pl
            .stages
            .iter()
            .any(|s| s.nfs.contains(&1) != s.nfs.contains(&2))
        {
            Err("a packet crossing back reaches state".to_string())
        } else {
            Ok(())
        }
    };
    let p = place(&g, 3, 5.0, &|r| r as f64, &refuse);
    let exact3 = p
        .candidates
        .iter()
        .find(|c| c.how == "pipeline/exact" && !c.moves.is_empty())
        .expect("the 3-stage exact pipeline is repaired");
    assert!(exact3.runnable);
    assert_eq!(exact3.placement().stages.len(), 2);
    assert!(exact3.note.as_deref().unwrap().contains("repaired: moved"));
    let best = p.best().unwrap();
    assert!(refuse(&best.placement()).is_ok());
    assert_eq!(best.stages.len(), 2, "{p}");
    // The exact pipeline uses two stages of three (a third predicts no faster); the best of
    // three, once repaired, is the same and is not listed twice.
    let g3 = chain(&[100.0, 10.0, 10.0]);
    let q = place(&g3, 3, 5.0, &|r| r as f64, &refuse);
    let hows: Vec<&str> = q.candidates.iter().map(|c| c.how.as_str()).collect();
    assert!(!hows.contains(&"pipeline/exact-all"), "{q}");
    let e = q
        .candidates
        .iter()
        .find(|c| c.how == "pipeline/exact")
        .unwrap();
    assert_eq!(e.stages.len(), 2, "{q}");
    assert!(
        e.note
            .as_deref()
            .unwrap()
            .contains("2 of 3 workers per replica used: more stages predict no faster"),
        "{q}"
    );
    // Among runnable pipelines, none is predicted faster than the exact one.
    for c in p
        .candidates
        .iter()
        .filter(|c| c.runnable && c.how != "replicas")
    {
        assert!(
            c.predicted_pps <= exact3.predicted_pps * (1.0 + 1e-9),
            "{p}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The exact forward-only search matches trying every forward mapping; its stages are
    /// forward; nothing unconstrained is worse; and neither heuristic, once made forward,
    /// beats it.
    #[test]
    fn exact_matches_brute_force_and_bounds_the_heuristics(
        costs in prop::collection::vec(1.0f64..100.0, 1..=6),
        edges in prop::collection::vec((0usize..6, 0usize..6, 0.0f64..3.0), 0..10),
        k in 2usize..=3,
        cross in 0.0f64..40.0,
    ) {
        let n = costs.len();
        let mut g = chain(&costs);
        g.edges.extend(edges.into_iter().map(|(a, b, w)| edge(a % n, b % n, w)));
        let (stages, complete) = exact(&g, k, cross).unwrap();
        prop_assert!(complete);
        prop_assert!(stages.len() <= k);
        prop_assert!(is_forward(&g, &stages), "{:?}", stages);
        let optimum = forward::bottleneck(&g, &stages, cross);
        let brute = brute_force(&g, k, cross).unwrap();
        prop_assert!(close(optimum, brute), "exact {} vs brute force {}", optimum, brute);
        if let Some((all, _)) = forward::exact_stages(&g, k, k, cross) {
            prop_assert_eq!(all.len(), k);
            prop_assert!(is_forward(&g, &all));
            prop_assert!(forward::bottleneck(&g, &all, cross) >= optimum - 1e-6);
        } else {
            prop_assert!(n < k);
        }
        let m = Machine::cores(k, cross);
        let free = m.bottleneck(&g, &exhaustive(&g, &m).unwrap());
        prop_assert!(free <= optimum + 1e-6);
        for assign in [metis(&g, &m).0, cluster(&g, &m, 0.1)] {
            let (st, _) = contiguous(&g, &assign);
            prop_assert!(is_forward(&g, &st));
            prop_assert!(forward::bottleneck(&g, &st, cross) >= optimum - 1e-6);
        }
    }

    /// A repair ends at a placement the executor accepts, forward, every NF once.
    #[test]
    fn repairs_are_accepted_forward_and_complete(
        costs in prop::collection::vec(1.0f64..100.0, 3..=6),
        group in (0usize..6, 2usize..=4),
        k in 2usize..=4,
    ) {
        let n = costs.len();
        let g = chain(&costs);
        let (first, len) = group;
        let together: Vec<usize> = (first % n..(first % n + len).min(n)).collect();
        let admit = keeps_together(together);
        let k = k.min(n);
        let start: Vec<Vec<usize>> = (0..k)
            .map(|s| (s * n / k..(s + 1) * n / k).collect())
            .collect();
        // The best accepted forward pipeline of 2..=k stages, by trying every mapping.
        let mut truth: Option<f64> = None;
        let mut assign = vec![0usize; n];
        loop {
            if assign.windows(2).all(|w| w[0] <= w[1]) {
                let st: Vec<Vec<usize>> = (0..k)
                    .map(|s| (0..n).filter(|&v| assign[v] == s).collect::<Vec<_>>())
                    .filter(|s| !s.is_empty())
                    .collect();
                if st.len() > 1 && admit(&st) {
                    let b = forward::bottleneck(&g, &st, 5.0);
                    truth = Some(truth.map_or(b, |t: f64| t.min(b)));
                }
            }
            if !next_assignment(&mut assign, k) {
                break;
            }
        }
        let fewest = repair(&g, &start, 5.0, &admit);
        let fastest = best_admitted(&g, &start, 5.0, &admit);
        prop_assert_eq!(fewest.is_some(), truth.is_some());
        prop_assert_eq!(fastest.is_some(), truth.is_some());
        if let (Some((st, moves)), Some((best, _)), Some(t)) = (fewest, fastest, truth) {
            for s in [&st, &best] {
                prop_assert!(admit(s));
                prop_assert!(is_forward(&g, s));
                prop_assert!(s.len() > 1 && s.len() <= k);
            }
            prop_assert!(!moves.is_empty() || admit(&start));
            prop_assert!(close(forward::bottleneck(&g, &best, 5.0), t));
            prop_assert!(forward::bottleneck(&g, &st, 5.0) >= t - 1e-6);
        }
    }

    /// Graphs with a known optimal cut: both partitioners find a mapping as good as the
    /// exhaustive search's, which is the planted one.
    #[test]
    fn partitioners_find_planted_cuts(
        costs in prop::collection::vec(10.0f64..100.0, 2..=4),
        heavy in prop::collection::vec(5.0f64..10.0, 6),
        light in prop::collection::vec((0usize..4, 0usize..4, 0.001f64..0.05), 1..4),
    ) {
        let (g, truth) = planted(&costs, &heavy, &light);
        let m = Machine::cores(2, 50.0);
        let best = exhaustive(&g, &m).unwrap();
        let optimum = m.bottleneck(&g, &best);
        // The planted cut is optimal (the test's own premise).
        prop_assert!(close(m.bottleneck(&g, &truth), optimum));
        let (ma, _) = metis(&g, &m);
        prop_assert!(close(m.bottleneck(&g, &ma), optimum), "METIS {:?} vs {:?}", ma, best);
        let ca = cluster(&g, &m, 0.1);
        prop_assert!(close(m.bottleneck(&g, &ca), optimum), "clustering {:?} vs {:?}", ca, best);
        // And it is the planted cut itself (up to naming the cores).
        prop_assert!(ma[0] != ma[costs.len()]);
        for v in 0..g.nodes.len() {
            prop_assert_eq!(ma[v] == ma[0], truth[v] == 0);
        }
    }

    /// On any tiny graph: nothing beats the exhaustive search, and the refinement ends where
    /// no single move improves.
    #[test]
    fn exhaustive_bounds_and_refinement_is_a_local_optimum(
        costs in prop::collection::vec(1.0f64..100.0, 1..=6),
        edges in prop::collection::vec((0usize..6, 0usize..6, 0.0f64..3.0), 0..10),
        k in 2usize..=3,
        cross in 0.0f64..40.0,
    ) {
        let n = costs.len();
        let mut g = chain(&costs);
        g.edges = edges.into_iter().map(|(a, b, w)| edge(a % n, b % n, w)).collect();
        let m = Machine::cores(k, cross);
        let best = exhaustive(&g, &m).unwrap();
        let optimum = m.bottleneck(&g, &best);
        let (ma, _) = metis(&g, &m);
        let ca = cluster(&g, &m, 0.1);
        for a in [&ma, &ca] {
            prop_assert!(m.bottleneck(&g, a) >= optimum - 1e-6);
        }
        let here = m.bottleneck(&g, &ma);
        for v in 0..n {
            for q in 0..k {
                let mut t = ma.clone();
                t[v] = q;
                prop_assert!(m.bottleneck(&g, &t) >= here - 1e-6, "move {} to {}", v, q);
            }
        }
    }

    /// Every candidate of a placement runs every NF exactly once, forward along the chain.
    #[test]
    fn placements_cover_every_nf_once(
        costs in prop::collection::vec(1.0f64..500.0, 1..8),
        workers in 1usize..=6,
        cross in 0.0f64..100.0,
    ) {
        let g = chain(&costs);
        let p = place(&g, workers, cross, &|r| r as f64, &|_| Ok(()));
        prop_assert!(p.chosen < p.candidates.len());
        for c in &p.candidates {
            let order: Vec<usize> = c.stages.iter().flat_map(|s| s.nfs.clone()).collect();
            prop_assert_eq!(order, (0..costs.len()).collect::<Vec<_>>());
            prop_assert!(c.stages.len() * c.replicas <= workers);
            prop_assert!(c.predicted_pps > 0.0);
        }
    }
}
