//! Placement (NFCompass §IV.C): the chain's element graph, weighted by measured per-element
//! costs, traffic per edge and the measured cost of crossing cores, partitioned over the
//! processors; the result is a pipeline of stages on cores, or run-to-completion replicas,
//! whichever the model predicts faster.
//!
//! * [`model`]: the graph ([`Graph`]: elements, or NFs once contracted, or an offloadable
//!   element's virtual instances), the processors ([`Machine`], [`Kind`]: cores and an
//!   accelerator with a launch and a per-packet cost) and the prediction
//!   ([`Machine::times`]: each processor's nodes plus its crossings; a pipeline runs at its
//!   slowest processor).
//! * [`partition`]: METIS (then Kernighan–Lin refinement on the real objective), the
//!   seed-based agglomerative clustering, and an exhaustive search for tiny graphs.
//! * [`forward`]: the exact search for the best forward-only pipeline (dynamic programming
//!   over the downsets of the flow order; the pipeline candidate and the heuristics'
//!   reference) and the repair of a pipeline the executor refuses (NFs moved between stages).
//! * [`measure`]: the profiling run (ns per packet per element, packets per edge) and the
//!   cross-core handoff measurement.
//!
//! Decision: the graph's nodes are elements (what NFCompass partitions, and where an
//! accelerator's offload ratios live), but the executor cuts a chain between whole NFs, so
//! the runnable placement ([`place`]) partitions the graph contracted to NFs
//! ([`Graph::by_nf`]); the element-level partition with an accelerator ([`offload`]) exists
//! in the model only (no accelerator is available to run it).

pub mod forward;
pub mod measure;
pub mod model;
pub mod partition;

pub use model::{rate, Accelerator, Edge, Graph, Kind, Machine, Node, Processor};

use chain::layout::{Placement, Stage};
use serde::Serialize;
use std::fmt;

/// One stage of a candidate mapping.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StagePlan {
    /// Indices of its NFs, in pipeline order.
    pub nfs: Vec<usize>,
    /// Their names.
    pub names: Vec<String>,
    /// The worker it runs on (within one replica of the pipeline).
    pub processor: usize,
    /// Predicted ns per chain input packet on that worker (its NFs and crossings).
    pub ns: f64,
}

/// A way of running the chain on the workers, with its predicted rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// How it was found: `replicas`, `pipeline/exact` (the best forward pipeline of at most
    /// as many stages as workers per replica), `pipeline/exact-all` (the best using all of
    /// them, listed when fewer predict faster), `pipeline/METIS`, `pipeline/clustering`
    /// (`×r` when the pipeline is replicated).
    pub how: String,
    /// The stages of one pipeline (one stage: run-to-completion).
    pub stages: Vec<StagePlan>,
    /// Copies of the pipeline, flows spread over them by the dispatcher.
    pub replicas: usize,
    /// How unevenly the trace's flows spread over the replicas: the busiest replica's share
    /// times the number of replicas (1: even).
    pub skew: f64,
    /// Predicted packets per second: replicas × 10⁹ / slowest stage's ns, divided by the skew.
    pub predicted_pps: f64,
    /// Why the partitioner's own result was changed, or why the executor would refuse it.
    pub note: Option<String>,
    /// Whether the executor can run it (see [`place`]'s `admit`); only such are chosen.
    pub runnable: bool,
    /// NFs moved between stages to make the partition the executor refused runnable
    /// ([`forward::repair`]); empty when it was accepted as found.
    pub moves: Vec<forward::Move>,
}

impl Candidate {
    /// The placement the executor runs.
    pub fn placement(&self) -> Placement {
        Placement {
            stages: self
                .stages
                .iter()
                .map(|s| Stage {
                    nfs: s.nfs.clone(),
                    processor: s.processor,
                })
                .collect(),
            replicas: self.replicas,
        }
    }

    /// The slowest stage's ns per packet.
    pub fn bottleneck_ns(&self) -> f64 {
        self.stages.iter().map(|s| s.ns).fold(0.0, f64::max)
    }
}

/// The placement part of a plan: every candidate and the one chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placing {
    /// Workers available.
    pub workers: usize,
    /// The crossing cost used, ns per packet (measured, or given).
    pub cross_ns: f64,
    /// One core running the whole chain: ns per chain input packet.
    pub one_core_ns: f64,
    /// The candidates, replicas first.
    pub candidates: Vec<Candidate>,
    /// Index of the fastest predicted candidate.
    pub chosen: usize,
}

impl Placing {
    /// The chosen candidate.
    pub fn best(&self) -> Option<&Candidate> {
        self.candidates.get(self.chosen)
    }
}

/// How flows spread over `r` replicas: `skew(r)` ≥ 1 is the busiest replica's share of the
/// packets times `r` (1 when even, `r` when one flow carries everything).
pub type Skew<'a> = &'a dyn Fn(usize) -> f64;

/// The order packets go through the graph's nodes: topological from the nodes nothing
/// sends to (ties and cycles by index).
pub fn flow_order(g: &Graph) -> Vec<usize> {
    let n = g.nodes.len();
    let mut indeg = vec![0usize; n];
    for e in &g.edges {
        if e.from != e.to && e.from < n && e.to < n && e.packets > 0.0 {
            indeg[e.to] += 1;
        }
    }
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        // The lowest-index ready node, or (a cycle) the lowest-index node left.
        let v = (0..n)
            .find(|&v| !done[v] && indeg[v] == 0)
            .or_else(|| (0..n).find(|&v| !done[v]));
        let Some(v) = v else { break };
        done[v] = true;
        order.push(v);
        for e in &g.edges {
            if e.from == v && e.to != v && e.to < n && e.packets > 0.0 && !done[e.to] {
                indeg[e.to] = indeg[e.to].saturating_sub(1);
            }
        }
    }
    order
}

/// Makes a mapping of `g`'s nodes a forward pipeline: along [`flow_order`], runs of nodes on
/// one processor become stages; while a processor holds two runs, the adjacent pair of runs
/// with the least work is merged (on the processor of the heavier). Returns the stages (node
/// indices in order) and whether anything had to be merged.
pub fn contiguous(g: &Graph, assign: &[usize]) -> (Vec<Vec<usize>>, bool) {
    let mut runs: Vec<(Vec<usize>, usize)> = Vec::new();
    for v in flow_order(g) {
        let p = assign.get(v).copied().unwrap_or(0);
        match runs.last_mut() {
            Some((nodes, q)) if *q == p => nodes.push(v),
            _ => runs.push((vec![v], p)),
        }
    }
    let work = |r: &[usize]| -> f64 { r.iter().map(|&v| g.nodes[v].cpu_ns).sum() };
    let mut merged = false;
    loop {
        let mut seen = std::collections::BTreeSet::new();
        let repeated = runs.iter().any(|(_, p)| !seen.insert(*p));
        if !repeated || runs.len() < 2 {
            break;
        }
        let i = (0..runs.len() - 1)
            .min_by(|&a, &b| {
                let wa = work(&runs[a].0) + work(&runs[a + 1].0);
                let wb = work(&runs[b].0) + work(&runs[b + 1].0);
                wa.total_cmp(&wb).then(a.cmp(&b))
            })
            .unwrap_or(0);
        let (next, q) = runs.remove(i + 1);
        let p = if work(&next) > work(&runs[i].0) {
            q
        } else {
            runs[i].1
        };
        runs[i].0.extend(next);
        runs[i].1 = p;
        merged = true;
    }
    (runs.into_iter().map(|r| r.0).collect(), merged)
}

/// A candidate from stages of `g`'s NF nodes on `machine`'s first cores.
fn candidate(
    how: &str,
    g: &Graph,
    m: &Machine,
    stages: Vec<Vec<usize>>,
    replicas: usize,
    skew: f64,
    note: Option<String>,
) -> Candidate {
    let order = flow_order(g);
    let mut pos = vec![0usize; g.nodes.len()];
    for (i, &v) in order.iter().enumerate() {
        pos[v] = i;
    }
    let mut stages = stages;
    for s in &mut stages {
        s.sort_by_key(|&v| pos.get(v).copied().unwrap_or(usize::MAX));
    }
    let mut assign = vec![0usize; g.nodes.len()];
    for (i, s) in stages.iter().enumerate() {
        for &v in s {
            assign[v] = i;
        }
    }
    let cores = Machine::cores(stages.len().max(1), m.cross_ns);
    let times = cores.times(g, &assign);
    let stages: Vec<StagePlan> = stages
        .into_iter()
        .enumerate()
        .map(|(i, s)| StagePlan {
            names: s.iter().map(|&v| g.nodes[v].name.clone()).collect(),
            nfs: s,
            processor: i,
            ns: times.get(i).copied().unwrap_or(0.0),
        })
        .collect();
    let bottleneck = stages.iter().map(|s| s.ns).fold(0.0, f64::max);
    let skew = if skew.is_finite() && skew >= 1.0 {
        skew
    } else {
        1.0
    };
    Candidate {
        how: how.to_string(),
        stages,
        replicas,
        skew,
        predicted_pps: rate(bottleneck) * replicas as f64 / skew,
        note,
        runnable: true,
        moves: Vec::new(),
    }
}

/// The placement of `stages` with `replicas` copies, stage `i` on worker `i`.
fn placement_of(stages: &[Vec<usize>], replicas: usize) -> Placement {
    Placement {
        stages: stages
            .iter()
            .enumerate()
            .map(|(i, s)| Stage {
                nfs: s.clone(),
                processor: i,
            })
            .collect(),
        replicas,
    }
}

/// Places a chain on `workers` cores: `elements` is its profiled element graph (or any
/// graph whose nodes carry their NF), `cross_ns` the measured crossing cost, `skew` how its
/// flows spread over replicas. Candidates: run-to-completion replicas on every worker, and
/// for every number of stages `s` > 1 dividing `workers` (with `workers / s` replicas of
/// the pipeline), the best forward-only pipeline ([`forward::exact`]; when it uses fewer
/// than `s` stages, also the best of exactly `s`: `pipeline/exact-all`) and the pipelines
/// METIS and the clustering find on the NF graph (made forward by [`contiguous`]). A
/// pipeline `admit` refuses (the executor's own check, `chain::layout::check_pipeline`: a
/// packet crossing back to an earlier stage must reach no state) is repaired by moving NFs
/// between stages, the moves kept in [`Candidate::moves`]: the exact one becomes the
/// fastest forward pipeline `admit` accepts ([`forward::best_admitted`]), a heuristic's
/// the accepted one fewest moves away ([`forward::repair`]); one that cannot be repaired
/// is listed with the reason, never chosen. The fastest predicted
/// runnable candidate is chosen (the first on ties: replicas need no crossing).
pub fn place(
    elements: &Graph,
    workers: usize,
    cross_ns: f64,
    skew: Skew,
    admit: &dyn Fn(&Placement) -> Result<(), String>,
) -> Placing {
    let workers = workers.max(1);
    let g = elements.by_nf();
    let nfs = g.nodes.len();
    let mut candidates = Vec::new();
    let all: Vec<usize> = flow_order(&g);
    let m1 = Machine::cores(1, cross_ns);
    candidates.push(candidate(
        "replicas",
        &g,
        &m1,
        vec![all],
        workers,
        skew(workers),
        None,
    ));
    for s in 2..=workers.min(nfs) {
        if !workers.is_multiple_of(s) {
            continue;
        }
        let r = workers / s;
        let m = Machine::cores(s, cross_ns);
        // (how, stages, notes) of each pipeline found.
        type Found<'a> = (&'a str, Vec<Vec<usize>>, Vec<String>);
        let mut found: Vec<Found> = Vec::new();
        if let Some((stages, complete)) = forward::exact(&g, s, cross_ns) {
            let mut notes = Vec::new();
            if !complete {
                notes.push(format!(
                    "over {} downsets: searched the cuts of the flow order only",
                    forward::DOWNSET_LIMIT
                ));
            }
            let fewer = stages.len() < s;
            found.push(("pipeline/exact", stages, notes));
            // Fewer stages than workers per replica predict faster: the best pipeline of
            // exactly `s` stages is listed too (what pipelining costs here).
            if fewer {
                if let Some((stages, _)) = forward::exact_stages(&g, s, s, cross_ns) {
                    found.push(("pipeline/exact-all", stages, Vec::new()));
                }
            }
        }
        let (metis_assign, err) = partition::metis(&g, &m);
        let cluster_assign = partition::cluster(&g, &m, 0.1);
        for (how, assign, err) in [
            ("pipeline/METIS", metis_assign, err),
            ("pipeline/clustering", cluster_assign, None),
        ] {
            let (stages, merged) = contiguous(&g, &assign);
            let mut notes = Vec::new();
            if let Some(e) = err {
                notes.push(format!("{e}; refined from round-robin"));
            }
            if merged {
                notes.push("stages merged into a forward pipeline".to_string());
            }
            found.push((how, stages, notes));
        }
        // The exact pipeline as listed (the best of exactly `s` stages is not listed again
        // when its repair makes it that).
        let mut exact_listed: Option<Vec<Vec<usize>>> = None;
        for (how, mut stages, mut notes) in found {
            let mut moves = Vec::new();
            let mut refused = None;
            if let Err(why) = admit(&placement_of(&stages, r)) {
                let ok = |st: &[Vec<usize>]| admit(&placement_of(st, r)).is_ok();
                // The exact candidate becomes the best pipeline the executor runs; a
                // heuristic's is mended with the fewest moves.
                let fixed = if how.starts_with("pipeline/exact") {
                    forward::best_admitted(&g, &stages, cross_ns, &ok)
                } else {
                    forward::repair(&g, &stages, cross_ns, &ok)
                };
                match fixed {
                    Some((fixed, ms)) => {
                        notes.push(format!(
                            "the executor refused the partition ({why}); repaired: {}",
                            ms.iter()
                                .map(|m| m.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                        stages = fixed;
                        moves = ms;
                    }
                    None => refused = Some(why),
                }
            }
            if how == "pipeline/exact" {
                exact_listed = Some(stages.clone());
            } else if how == "pipeline/exact-all" && exact_listed.as_ref() == Some(&stages) {
                continue;
            }
            if stages.len() < s {
                // Fewer stages: the repair merged some, or more stages predict no faster.
                let why = if moves.is_empty() {
                    ": more stages predict no faster"
                } else {
                    ""
                };
                notes.push(format!(
                    "{} of {s} workers per replica used{why}",
                    stages.len()
                ));
            }
            if let Some(why) = &refused {
                notes.push(format!("not runnable: {why}"));
            }
            let note = (!notes.is_empty()).then(|| notes.join("; "));
            let how = if r > 1 {
                format!("{how} ×{r}")
            } else {
                how.to_string()
            };
            let mut c = candidate(&how, &g, &m, stages, r, skew(r), note);
            c.runnable = refused.is_none();
            c.moves = moves;
            candidates.push(c);
        }
    }
    let mut chosen = 0;
    for (i, c) in candidates.iter().enumerate() {
        if c.runnable && c.predicted_pps > candidates[chosen].predicted_pps * (1.0 + 1e-9) {
            chosen = i;
        }
    }
    Placing {
        workers,
        cross_ns,
        one_core_ns: g.total_cpu_ns(),
        candidates,
        chosen,
    }
}

impl fmt::Display for Placing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "placement on {} worker(s): one core {:.1} ns/packet, crossing cores {:.1} ns/packet",
            self.workers, self.one_core_ns, self.cross_ns
        )?;
        for (i, c) in self.candidates.iter().enumerate() {
            let mark = if i == self.chosen {
                "*"
            } else if c.runnable {
                " "
            } else {
                "x"
            };
            let skew = if c.skew > 1.0 + 1e-6 {
                format!(", flow skew {:.2}", c.skew)
            } else {
                String::new()
            };
            writeln!(
                f,
                "{mark} {:<26} {:>10.3} Mpps predicted (slowest stage {:.1} ns, {} replica(s){skew})",
                c.how,
                c.predicted_pps / 1e6,
                c.bottleneck_ns(),
                c.replicas
            )?;
            for s in &c.stages {
                writeln!(
                    f,
                    "      worker {}: {:.1} ns  {}",
                    s.processor,
                    s.ns,
                    s.names.join(" → ")
                )?;
            }
            if let Some(n) = &c.note {
                writeln!(f, "      ({n})")?;
            }
        }
        Ok(())
    }
}

/// An element-level mapping on a machine with an accelerator (model only).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offload {
    /// Which partitioner: `METIS` or `clustering`.
    pub how: String,
    /// Per element of the graph: the share of its packets the accelerator runs (0 to 1, in
    /// the expansion's steps).
    pub ratio: Vec<f64>,
    /// Per processor: predicted ns per chain input packet.
    pub times: Vec<f64>,
    /// Predicted packets per second (the slowest processor's rate).
    pub predicted_pps: f64,
}

/// NFCompass' heterogeneous mapping: `elements` expanded into virtual instances at `step`
/// ([`Graph::expand`]; 0.1 in the paper), partitioned over `machine` (cores and
/// accelerators) by METIS and by the clustering; per element, the offload ratio each found.
pub fn offload(elements: &Graph, machine: &Machine, step: f64) -> Vec<Offload> {
    let (g, origin) = elements.expand(step);
    let accel: Vec<bool> = machine
        .processors
        .iter()
        .map(|p| matches!(p.kind, Kind::Accelerator(_)))
        .collect();
    let (metis_assign, _) = partition::metis(&g, machine);
    let cluster_assign = partition::cluster(&g, machine, 0.1);
    [("METIS", metis_assign), ("clustering", cluster_assign)]
        .into_iter()
        .map(|(how, assign)| {
            let mut ratio = vec![0.0; elements.nodes.len()];
            for (v, &p) in assign.iter().enumerate() {
                if accel.get(p) == Some(&true) {
                    let o = origin[v];
                    let share = g.nodes[v].cpu_ns / elements.nodes[o].cpu_ns.max(f64::MIN_POSITIVE);
                    ratio[o] += if elements.nodes[o].cpu_ns > 0.0 {
                        share
                    } else {
                        1.0 / origin.iter().filter(|&&x| x == o).count() as f64
                    };
                }
            }
            for r in &mut ratio {
                *r = (*r * 1000.0).round() / 1000.0;
            }
            let times = machine.times(&g, &assign);
            let slowest = times.iter().copied().fold(0.0, f64::max);
            Offload {
                how: how.to_string(),
                ratio,
                times,
                predicted_pps: rate(slowest),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
