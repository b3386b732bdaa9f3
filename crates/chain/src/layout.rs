//! What the planner (`plan`, after NFCompass) decides and the executor runs, as plain data:
//! NFs run side by side on copies of a packet ([`Parallel`]), elements stepped over because
//! an earlier element already decided for them and drop tests run earlier ([`Merged`]) and the chain cut into stages on
//! workers ([`Placement`]). `plan` produces them; `chain` and `dataplane` run them. They are
//! serde data: `plan::file` writes them into PLAN files (`fusebox run --plan`).

use crate::exec::{Executor, Place};
use elements::Batching;
use serde::{Deserialize, Serialize};

/// NFs of the chain run side by side on copies of each packet, their results merged by XOR
/// against the original (NFCompass §IV.B).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parallel {
    /// The groups; an NF is in at most one. NFs in no group run as written.
    pub groups: Vec<Group>,
}

/// NFs that run side by side: consecutive along the chain's links, each one's only way on
/// being the link to the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// Indices into the executor's NFs ([`crate::Executor::nfs`]), in chain order.
    pub nfs: Vec<usize>,
}

/// Elements the merged mode steps over (NFCompass §IV.B.2, element merging), edge by edge:
/// each [`Skip`] says that every packet leaving element `from` by output `output` would go
/// through the elements of `over` untouched, each sending it out of the output named (a
/// header check an equal check already passed, a lookup an identical one already
/// answered), so that edge leads straight to where the last of them sends it. `plan::merge`
/// finds them; [`crate::Executor::enable_merged`] rewires.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Merged {
    /// The edges rewired, each at most once.
    pub skips: Vec<Skip>,
    /// Drop tests run earlier (the edges they rewire are not rewired by a skip).
    #[serde(default)]
    pub hoists: Vec<Hoist>,
}

/// A drop test run earlier (NFCompass §IV.B.2, "later drops moved earlier"): element
/// `element` either drops a packet or sends it out of `output`, and the elements of
/// `before`, a straight path leading to it, neither change what it reads nor drop, branch,
/// count or keep state. The element then runs first: the one edge into the first of
/// `before` leads to it, its `output` to the first of `before`, and the last of `before`
/// (its named output) to where `element`'s `output` led. A packet it drops no longer goes
/// through `before`; the counts of `before`'s outputs get those drops added back, so the
/// summary is as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hoist {
    /// The dropping element (global index).
    pub element: usize,
    /// The one output its packets that are not dropped leave by.
    pub output: usize,
    /// The elements it now runs before, in path order (the first is where the test now
    /// runs), each with its one output towards the next (the last's towards `element`).
    pub before: Vec<Bypass>,
}

/// One edge of the element graph rewired past the elements it led through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skip {
    /// The element the edge leaves (global index, [`crate::Executor::element`]).
    pub from: usize,
    /// Its output the edge leaves by.
    pub output: usize,
    /// The elements stepped over, in path order: the edge led to the first, each one's
    /// named output to the next.
    pub over: Vec<Bypass>,
}

/// One element stepped over on a [`Skip`]'s path: it would have sent the packet out of
/// `output`, untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bypass {
    /// The element (global index).
    pub element: usize,
    /// The output it would have sent the packet out of.
    pub output: usize,
}

/// The chain cut into stages, each on a processor, packets crossing between them in order
/// (a pipeline); with one stage, run-to-completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// The stages in pipeline order; every NF is in exactly one.
    pub stages: Vec<Stage>,
    /// Copies of the whole pipeline, flows spread over them by RSS (1: one pipeline; the
    /// default when a plan file leaves it out).
    #[serde(default = "one")]
    pub replicas: usize,
}

/// One stage of a [`Placement`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Indices into the executor's NFs, in chain order.
    pub nfs: Vec<usize>,
    /// The processor (worker) it runs on.
    pub processor: usize,
}

fn one() -> usize {
    1
}

/// Checks that `placement` of `ex`'s chain runs as a pipeline with the results of one
/// executor (`dataplane::pipeline`): stages take every chain input in order and pass what
/// crosses to a later stage on in order, so each NF sees its packets in the order one
/// executor gives them. A packet crossing a link *back* to an earlier stage (a router
/// sending a packet out the way it came, a NAT's replies) reaches that stage after it has
/// moved on to later inputs; that is only the same when nothing it can reach from there
/// keeps state or makes packets (every element `Free`, see [`elements::Batching`]), and
/// when no element that makes packets lies before it (so its input is one packet on one
/// path, and its place among the exits' packets is its input's). `Err` says which link
/// and element break this.
pub fn check_pipeline(ex: &Executor, placement: &Placement) -> Result<(), String> {
    let nfs = ex.nfs().len();
    let mut stage_of = vec![usize::MAX; nfs];
    for (s, st) in placement.stages.iter().enumerate() {
        for &n in &st.nfs {
            match stage_of.get_mut(n) {
                Some(slot) => *slot = s,
                None => return Err(format!("stage {s} names NF {n}; the chain has {nfs}")),
            }
        }
    }
    let n = ex.element_count();
    let stage = |g: usize| stage_of[ex.element_nf(g) as usize];
    let succ = |g: usize| -> Vec<usize> {
        match ex.place(g) {
            Place::Inner => (0..ex.outputs(g))
                .filter_map(|o| ex.edge(g, o).map(|(_, e, _)| e as usize))
                .collect(),
            Place::Link(t) => vec![t as usize],
            Place::Exit => Vec::new(),
        }
    };
    let backward: Vec<(usize, usize)> = (0..n)
        .filter_map(|g| match ex.place(g) {
            Place::Link(t) if stage(t as usize) < stage(g) => Some((g, t as usize)),
            _ => None,
        })
        .collect();
    if backward.is_empty() {
        return Ok(());
    }
    let nf_name = |g: usize| ex.nfs()[ex.element_nf(g) as usize].name.clone();
    // What a packet crossing back can reach: all of it must be order-free.
    let mut from = vec![None; n];
    let mut work: Vec<usize> = Vec::new();
    for &(g, t) in &backward {
        if from[t].is_none() {
            from[t] = Some((g, t));
            work.push(t);
        }
    }
    while let Some(g) = work.pop() {
        if ex.place(g) == Place::Inner && ex.element(g).batching() != Batching::Free {
            let (link, to) = from[g].unwrap_or((g, g));
            return Err(format!(
                "a packet can cross back from stage {} ({}) to stage {} ({}) and reach {} ({}), \
                 which keeps state or makes packets: it would see that packet after later \
                 inputs; put these NFs in one stage",
                stage(link),
                nf_name(link),
                stage(to),
                nf_name(to),
                ex.element_name(g),
                ex.element(g).class_name(),
            ));
        }
        for t in succ(g) {
            if from[t].is_none() {
                from[t] = from[g];
                work.push(t);
            }
        }
    }
    // What can lead to a backward crossing: nothing there may make packets.
    let mut pred: Vec<Vec<usize>> = vec![Vec::new(); n];
    for g in 0..n {
        for t in succ(g) {
            pred[t].push(g);
        }
    }
    let mut seen = vec![false; n];
    let mut work: Vec<usize> = backward.iter().map(|&(g, _)| g).collect();
    for &g in &work {
        seen[g] = true;
    }
    while let Some(g) = work.pop() {
        if ex.place(g) == Place::Inner && ex.element(g).batching() == Batching::Never {
            return Err(format!(
                "{} ({}) may make or keep packets, and what it sends can cross back to an \
                 earlier stage: the order of its packets at the exits would change; put the \
                 NFs it sends to in its stage",
                ex.element_name(g),
                ex.element(g).class_name(),
            ));
        }
        for &p in &pred[g] {
            if !seen[p] {
                seen[p] = true;
                work.push(p);
            }
        }
    }
    Ok(())
}
