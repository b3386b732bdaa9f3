//! Which branches of the parallel groups run on other workers (NFCompass §IV.B with the
//! placement's processors): the executor's thread runs a group's first branch and hands the
//! others' packet copies, a batch at a time, to helper threads
//! (`chain::Executor::enable_parallel_placed`; see the `parallel` module of `chain::exec`).
//!
//! A branch goes to another worker only when all of these hold, in this order:
//!
//! * there is another worker (`workers` ≥ 2);
//! * the group's packets can be handed off in batches
//!   ([`Executor::group_batching`]): handing off packet by packet costs a thread wake-up
//!   per packet, far more than any branch;
//! * **no earlier NF of the group may drop** (by its action profile). In the executor's
//!   thread, a branch after a drop never runs; on a helper it has run already, and its NF's
//!   state saw a packet the sequential chain never gives it (the executor counts such
//!   branches as `discarded`). The first branch never moves: it starts the group;
//! * **it pays**: its profiled cost (ns per packet of the NF's elements, from a profiling
//!   run, `crate::place::measure::profile`) is above the measured cost of handing a packet
//!   to another core and back (`crate::place::measure::handoff_ns`). Without a profile,
//!   nothing moves.
//!
//! Branches that may go are then spread over the workers heaviest first, each to the worker
//! with the least work so far, the executor's thread counting every NF it keeps (a branch
//! that would land there stays home). [`offload`] returns the result as a
//! [`chain::layout::Placement`] with, per branch, where it runs and why.

use crate::place::measure::Profile as Measured;
use crate::profile::Profile;
use chain::layout::{Parallel, Placement, Stage};
use chain::Executor;
use serde::Serialize;
use std::fmt::Write as _;

/// What a branch costs and what a hand-off costs, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Costs {
    /// Per NF (by index), ns per chain input packet of its elements.
    pub nf_ns: Vec<f64>,
    /// ns to hand one packet to another core and back (batched).
    pub handoff_ns: f64,
}

impl Costs {
    /// Per-NF costs from a profiling run (ns of the NF's elements per chain input), and
    /// the measured hand-off cost.
    pub fn from_profile(p: &Measured, handoff_ns: f64) -> Costs {
        let mut nf_ns = vec![0.0; p.nfs.len()];
        let inputs = p.input_packets.max(1) as f64;
        for e in &p.elements {
            if let Some(c) = nf_ns.get_mut(e.nf) {
                *c += e.ns_per_packet * e.packets as f64 / inputs;
            }
        }
        Costs { nf_ns, handoff_ns }
    }
}

/// Where one branch of a group runs, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Branch {
    /// The group (index into the layout's groups).
    pub group: usize,
    /// The NF (index into [`Executor::nfs`]) and its name.
    pub nf: usize,
    /// Its name.
    pub name: String,
    /// Its profiled cost, ns per packet (when profiled).
    pub ns: Option<f64>,
    /// The worker that runs it (0: the executor's thread).
    pub worker: usize,
    /// Why it runs there.
    pub why: String,
}

/// The planner's decision for a parallel layout on `workers` workers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offload {
    /// Workers available (the executor's thread included).
    pub workers: usize,
    /// The hand-off cost it compared branches with (when measured).
    pub handoff_ns: Option<f64>,
    /// Per group and branch, in chain order.
    pub branches: Vec<Branch>,
    /// The placement the executor runs (`None`: every branch in the executor's thread).
    pub placement: Option<Placement>,
}

/// Decides which branches of `layout`'s groups run on other workers (see the module
/// documentation). `profiles` are the chain's NFs' action profiles, `costs` the profiled
/// costs (`None`: nothing moves).
pub fn offload(
    ex: &Executor,
    layout: &Parallel,
    profiles: &[Profile],
    workers: usize,
    costs: Option<&Costs>,
) -> Offload {
    let nfs = ex.nfs();
    let cost = |f: usize| costs.and_then(|c| c.nf_ns.get(f).copied());
    let mut branches = Vec::new();
    // Branches that may go (index into `branches`), and the executor thread's own work.
    let mut movable = Vec::new();
    for (gi, g) in layout.groups.iter().enumerate() {
        let batching = ex.group_batching(&g.nfs);
        for (i, &f) in g.nfs.iter().enumerate() {
            let earlier_drop = g.nfs[..i]
                .iter()
                .find(|&&e| profiles.get(e).is_none_or(|p| p.may_drop));
            let why = if i == 0 {
                Some("the group's first branch starts it in the executor's thread".to_string())
            } else if workers < 2 {
                Some("one worker".to_string())
            } else if let Err(why) = &batching {
                Some(format!("the group cannot be handed off in batches: {why}"))
            } else if let Some(&e) = earlier_drop {
                Some(format!(
                    "{} may drop before it (on another worker its state would see packets the chain drops)",
                    nfs[e].name
                ))
            } else {
                match (cost(f), costs) {
                    (Some(ns), Some(c)) if ns <= c.handoff_ns => Some(format!(
                        "{ns:.0} ns per packet: not above the hand-off's {:.0} ns",
                        c.handoff_ns
                    )),
                    (Some(_), Some(_)) => None,
                    _ => Some("no profiled cost".to_string()),
                }
            };
            if why.is_none() {
                movable.push(branches.len());
            }
            branches.push(Branch {
                group: gi,
                nf: f,
                name: nfs[f].name.clone(),
                ns: cost(f),
                worker: 0,
                why: why.unwrap_or_default(),
            });
        }
    }
    // Heaviest first, each to the least loaded worker; the executor's thread runs every
    // NF it keeps.
    let mut load = vec![0.0f64; workers.max(1)];
    load[0] = (0..nfs.len())
        .filter(|f| !movable.iter().any(|&b| branches[b].nf == *f))
        .filter_map(cost)
        .sum();
    movable.sort_by(|&a, &b| {
        let (x, y) = (branches[a].ns.unwrap_or(0.0), branches[b].ns.unwrap_or(0.0));
        y.total_cmp(&x).then(a.cmp(&b))
    });
    for &b in &movable {
        let ns = branches[b].ns.unwrap_or(0.0);
        let (w, _) = load
            .iter()
            .enumerate()
            .min_by(|x, y| x.1.total_cmp(y.1).then(x.0.cmp(&y.0)))
            .unwrap_or((0, &0.0));
        load[w] += ns;
        branches[b].worker = w;
        branches[b].why = if w == 0 {
            "pays, but the executor's thread has the least work".to_string()
        } else {
            format!(
                "{ns:.0} ns per packet, above the hand-off's {:.0} ns; no earlier NF of the group drops",
                costs.map_or(0.0, |c| c.handoff_ns)
            )
        };
    }
    let placement = branches.iter().any(|b| b.worker > 0).then(|| {
        let mut stages: Vec<Stage> = (0..workers)
            .map(|w| Stage {
                nfs: Vec::new(),
                processor: w,
            })
            .collect();
        for f in 0..nfs.len() {
            let w = branches.iter().find(|b| b.nf == f).map_or(0, |b| b.worker);
            stages[w].nfs.push(f);
        }
        stages.retain(|s| !s.nfs.is_empty());
        Placement {
            stages,
            replicas: 1,
        }
    });
    Offload {
        workers,
        handoff_ns: costs.map(|c| c.handoff_ns),
        branches,
        placement,
    }
}

impl Offload {
    /// The decision as text: per branch, where it runs and why.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = write!(o, "branches on {} worker(s)", self.workers);
        if let Some(h) = self.handoff_ns {
            let _ = write!(o, " (hand-off {h:.0} ns per packet)");
        }
        o.push('\n');
        if self.branches.is_empty() {
            o.push_str("no parallel group\n");
        }
        for b in &self.branches {
            let ns = b.ns.map(|n| format!(" ({n:.0} ns)")).unwrap_or_default();
            let _ = writeln!(
                o,
                "group {} {}{ns}: worker {} — {}",
                b.group, b.name, b.worker, b.why
            );
        }
        o
    }
}
