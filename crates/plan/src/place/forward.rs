//! Forward-only pipelines: the exact search and the repair of a refused one.
//!
//! A pipeline runs its stages in order, so every packet should only move to the same or a
//! later stage. *Forward* is read along [`flow_order`]: an edge from an earlier node of that
//! order to a later one must not go from a later stage to an earlier one (edges against the
//! order, the way back of a cycle such as a NAT's replies, are not constrained here: they
//! cost their crossings, and the executor's own check decides whether it can run them).
//! The stages of such a pipeline are the differences of a growing chain of *downsets*
//! (node sets holding every forward predecessor of their nodes), which is what
//! [`exact`] searches by dynamic programming; [`brute_force`] tries every mapping instead
//! (the tests' reference). [`repair`] moves NFs between stages until the executor accepts a
//! placement.

use super::flow_order;
use super::model::{Graph, Machine};
use super::partition::next_assignment;
use std::collections::HashMap;

/// Node indices per stage, in pipeline order.
pub type Stages = Vec<Vec<usize>>;

/// The most downsets [`exact`] enumerates; beyond, it searches the prefixes of
/// [`flow_order`] only (still exact among contiguous cuts of that order).
pub const DOWNSET_LIMIT: usize = 512;

/// The nodes [`exact`] handles (one bit each).
const MAX_NODES: usize = 64;

/// Per node, the mask of its forward predecessors (edges carrying traffic from an earlier
/// node of `order` to a later one); `pos` is each node's place in `order`.
fn forward_preds(g: &Graph, pos: &[usize]) -> Vec<u64> {
    let n = g.nodes.len();
    let mut preds = vec![0u64; n];
    for e in &g.edges {
        if e.from < n && e.to < n && e.from != e.to && e.packets > 0.0 && pos[e.from] < pos[e.to] {
            preds[e.to] |= 1u64 << e.from;
        }
    }
    preds
}

/// Each node's place in [`flow_order`].
fn positions(g: &Graph, order: &[usize]) -> Vec<usize> {
    let mut pos = vec![0usize; g.nodes.len()];
    for (i, &v) in order.iter().enumerate() {
        pos[v] = i;
    }
    pos
}

/// Whether `stages` (node indices per stage, in pipeline order) only ever send forward
/// traffic (along [`flow_order`]) to the same or a later stage, and hold each node once.
pub fn is_forward(g: &Graph, stages: &[Vec<usize>]) -> bool {
    let n = g.nodes.len();
    let mut stage = vec![usize::MAX; n];
    for (s, st) in stages.iter().enumerate() {
        for &v in st {
            match stage.get_mut(v) {
                Some(x) if *x == usize::MAX => *x = s,
                _ => return false,
            }
        }
    }
    if stage.contains(&usize::MAX) {
        return false;
    }
    let pos = positions(g, &flow_order(g));
    g.edges.iter().all(|e| {
        e.from >= n
            || e.to >= n
            || e.from == e.to
            || e.packets <= 0.0
            || pos[e.from] > pos[e.to]
            || stage[e.from] <= stage[e.to]
    })
}

/// ns per chain input packet of the stage holding the nodes of `mask`: their work plus,
/// for every edge with one end inside, the crossing times its traffic (as
/// [`Machine::times`] counts it on cores).
fn stage_ns(g: &Graph, mask: u64, cross_ns: f64) -> f64 {
    let inside = |v: usize| mask >> v & 1 == 1;
    let n = g.nodes.len();
    let mut t: f64 = (0..n)
        .filter(|&v| inside(v))
        .map(|v| g.nodes[v].cpu_ns)
        .sum();
    for e in &g.edges {
        if e.from < n && e.to < n && e.from != e.to && inside(e.from) != inside(e.to) {
            t += cross_ns * e.packets;
        }
    }
    t
}

/// Every downset of the forward order (`None` when there are more than `limit`).
fn downsets(order: &[usize], preds: &[u64], limit: usize) -> Option<Vec<u64>> {
    let mut sets = vec![0u64];
    for &v in order {
        let mut more = Vec::new();
        for &s in &sets {
            if preds[v] & !s == 0 {
                more.push(s | 1u64 << v);
            }
        }
        sets.extend(more);
        if sets.len() > limit {
            return None;
        }
    }
    Some(sets)
}

/// Whether `a` is below `b` by more than rounding.
fn less(a: f64, b: f64) -> bool {
    a < b - 1e-9 * b.abs().max(1.0)
}

/// The best forward-only pipeline of at most `max_stages` stages of `g`'s nodes on cores
/// crossing at `cross_ns`: the one whose slowest stage (its nodes plus its crossings) is
/// fastest, with the fewest stages among equals. Dynamic programming over the downsets of
/// the forward order (the stages are differences of nested downsets); exact over every
/// forward-only pipeline when there are at most [`DOWNSET_LIMIT`] downsets, else over the
/// cuts of [`flow_order`] into consecutive runs. Returns the stages (each in flow order) and
/// whether the search covered every forward-only pipeline; `None` for an empty graph or
/// more than 64 nodes.
pub fn exact(g: &Graph, max_stages: usize, cross_ns: f64) -> Option<(Vec<Vec<usize>>, bool)> {
    exact_stages(g, 1, max_stages, cross_ns)
}

/// [`exact`] among the pipelines of `min_stages` to `max_stages` stages (`None` also when
/// there are fewer nodes than `min_stages`).
pub fn exact_stages(
    g: &Graph,
    min_stages: usize,
    max_stages: usize,
    cross_ns: f64,
) -> Option<(Vec<Vec<usize>>, bool)> {
    let n = g.nodes.len();
    if min_stages > n || min_stages > max_stages.max(1) {
        return None;
    }
    if n == 0 || n > MAX_NODES {
        return None;
    }
    let order = flow_order(g);
    let pos = positions(g, &order);
    let preds = forward_preds(g, &pos);
    let (sets, complete) = match downsets(&order, &preds, DOWNSET_LIMIT) {
        Some(s) => (s, true),
        None => {
            // The prefixes of the order: downsets whatever the edges.
            let mut s = vec![0u64];
            for &v in &order {
                s.push(s[s.len() - 1] | 1u64 << v);
            }
            (s, false)
        }
    };
    let full: u64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let index: HashMap<u64, usize> = sets.iter().enumerate().map(|(i, &s)| (s, i)).collect();
    let d = sets.len();
    let stages = max_stages.clamp(1, n);
    // best[j][i]: the slowest stage's ns covering downset i with exactly j stages, and the
    // downset before the last stage.
    let mut best: Vec<Vec<Option<(f64, usize)>>> = vec![vec![None; d]; stages + 1];
    best[0][index[&0]] = Some((0.0, usize::MAX));
    let mut cost: HashMap<u64, f64> = HashMap::new();
    for j in 1..=stages {
        for (i, &set) in sets.iter().enumerate() {
            let mut here: Option<(f64, usize)> = None;
            for (t, &sub) in sets.iter().enumerate() {
                if sub == set || sub & !set != 0 {
                    continue;
                }
                let Some((before, _)) = best[j - 1][t] else {
                    continue;
                };
                let stage = set & !sub;
                let c = *cost
                    .entry(stage)
                    .or_insert_with(|| stage_ns(g, stage, cross_ns));
                let b = before.max(c);
                if here.is_none_or(|(x, _)| less(b, x)) {
                    here = Some((b, t));
                }
            }
            best[j][i] = here;
        }
    }
    let last = index[&full];
    let mut chosen: Option<(f64, usize)> = None;
    for (j, row) in best.iter().enumerate().skip(min_stages.max(1)) {
        if let Some((b, _)) = row[last] {
            if chosen.is_none_or(|(x, _)| less(b, x)) {
                chosen = Some((b, j));
            }
        }
    }
    let (_, j) = chosen?;
    let mut masks = Vec::with_capacity(j);
    let (mut at, mut k) = (last, j);
    while k > 0 {
        let (_, prev) = best[k][at]?;
        masks.push(sets[at] & !sets[prev]);
        at = prev;
        k -= 1;
    }
    masks.reverse();
    let out = masks
        .into_iter()
        .map(|m| order.iter().copied().filter(|&v| m >> v & 1 == 1).collect())
        .collect();
    Some((out, complete))
}

/// The largest search [`brute_force`] does: `max_stages`^nodes at most this.
pub const BRUTE_LIMIT: f64 = 2e6;

/// The slowest stage's ns of the best forward-only pipeline found by trying every mapping of
/// the nodes to `max_stages` cores that sends forward traffic only forward (`None` beyond
/// [`BRUTE_LIMIT`]): the reference [`exact`] is tested against.
pub fn brute_force(g: &Graph, max_stages: usize, cross_ns: f64) -> Option<f64> {
    let n = g.nodes.len();
    let k = max_stages.max(1);
    if (k as f64).powi(n as i32) > BRUTE_LIMIT {
        return None;
    }
    let m = Machine::cores(k, cross_ns);
    let pos = positions(g, &flow_order(g));
    let forward: Vec<(usize, usize)> = g
        .edges
        .iter()
        .filter(|e| {
            e.from < n && e.to < n && e.from != e.to && e.packets > 0.0 && pos[e.from] < pos[e.to]
        })
        .map(|e| (e.from, e.to))
        .collect();
    let mut assign = vec![0usize; n];
    let mut best = m.bottleneck(g, &assign);
    loop {
        if !next_assignment(&mut assign, k) {
            return Some(best);
        }
        if forward.iter().all(|&(a, b)| assign[a] <= assign[b]) {
            best = best.min(m.bottleneck(g, &assign));
        }
    }
}

/// The bottleneck of `stages` of `g` on cores crossing at `cross_ns`.
pub fn bottleneck(g: &Graph, stages: &[Vec<usize>], cross_ns: f64) -> f64 {
    let mut assign = vec![0usize; g.nodes.len()];
    for (s, st) in stages.iter().enumerate() {
        for &v in st {
            if let Some(a) = assign.get_mut(v) {
                *a = s;
            }
        }
    }
    Machine::cores(stages.len().max(1), cross_ns).bottleneck(g, &assign)
}

/// One NF moved from a stage to another by [`repair`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Move {
    /// The node (NF) moved.
    pub node: usize,
    /// Its name.
    pub name: String,
    /// The stage it was in (of the refused placement; `usize::MAX` when it was in none).
    pub from: usize,
    /// The stage it went to (of the repaired placement).
    pub to: usize,
}

impl std::fmt::Display for Move {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "moved {} from stage {} to stage {}",
            self.name, self.from, self.to
        )
    }
}

/// The most forward-only pipelines [`repair`] tries.
pub const REPAIR_LIMIT: usize = 20_000;

/// Every forward-only pipeline of 2 to `max_stages` stages of `g` (stage masks, in order),
/// at most `limit` of them: chains of nested downsets (of prefixes of [`flow_order`] when
/// the downsets are too many).
fn pipelines(g: &Graph, max_stages: usize, limit: usize) -> Vec<Vec<u64>> {
    let n = g.nodes.len();
    if n == 0 || n > MAX_NODES {
        return Vec::new();
    }
    let order = flow_order(g);
    let pos = positions(g, &order);
    let preds = forward_preds(g, &pos);
    let sets = downsets(&order, &preds, DOWNSET_LIMIT).unwrap_or_else(|| {
        let mut s = vec![0u64];
        for &v in &order {
            s.push(s[s.len() - 1] | 1u64 << v);
        }
        s
    });
    let full: u64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut out = Vec::new();
    let mut chain: Vec<u64> = Vec::new();
    // Steps of the search, so that dead ends are bounded too.
    let mut budget = limit.saturating_mul(50);
    #[allow(clippy::too_many_arguments)]
    fn grow(
        sets: &[u64],
        full: u64,
        done: u64,
        max: usize,
        limit: usize,
        budget: &mut usize,
        chain: &mut Vec<u64>,
        out: &mut Vec<Vec<u64>>,
    ) {
        if out.len() >= limit || *budget == 0 {
            return;
        }
        *budget -= 1;
        if done == full {
            if chain.len() >= 2 {
                out.push(chain.clone());
            }
            return;
        }
        if chain.len() >= max {
            return;
        }
        for &next in sets {
            if next & done == done && next != done {
                chain.push(next & !done);
                grow(sets, full, next, max, limit, budget, chain, out);
                chain.pop();
            }
        }
    }
    grow(
        &sets,
        full,
        0,
        max_stages,
        limit,
        &mut budget,
        &mut chain,
        &mut out,
    );
    out
}

/// Makes `stages` of `g` (a pipeline the executor refuses; `admit` is its check) runnable by
/// moving NFs between stages: among the forward-only pipelines of 2 up to as many stages
/// (at most [`REPAIR_LIMIT`] tried), the one `admit` accepts that moves the fewest NFs
/// (an NF moves when its stage number changes), the fastest among those. `None` when only
/// one stage is accepted (that is the replicas' candidate). Returns the stages (each in
/// flow order) and the moves, in node order.
pub fn repair(
    g: &Graph,
    stages: &[Vec<usize>],
    cross_ns: f64,
    admit: &dyn Fn(&[Vec<usize>]) -> bool,
) -> Option<(Vec<Vec<usize>>, Vec<Move>)> {
    search(g, stages, cross_ns, admit, false)
}

/// The fastest forward-only pipeline of 2 up to as many stages as `stages` that `admit`
/// accepts (fewest NFs moved from `stages` among equals): the exact optimum among the
/// pipelines the executor runs, when there are at most [`REPAIR_LIMIT`]. Returns it with
/// the moves from `stages`, as [`repair`] does.
pub fn best_admitted(
    g: &Graph,
    stages: &[Vec<usize>],
    cross_ns: f64,
    admit: &dyn Fn(&[Vec<usize>]) -> bool,
) -> Option<(Vec<Vec<usize>>, Vec<Move>)> {
    search(g, stages, cross_ns, admit, true)
}

/// [`repair`] (`fastest`: false, fewest moves first) and [`best_admitted`] (fastest
/// first).
fn search(
    g: &Graph,
    stages: &[Vec<usize>],
    cross_ns: f64,
    admit: &dyn Fn(&[Vec<usize>]) -> bool,
    fastest: bool,
) -> Option<(Vec<Vec<usize>>, Vec<Move>)> {
    let n = g.nodes.len();
    let mut was = vec![usize::MAX; n];
    for (s, st) in stages.iter().enumerate() {
        for &v in st {
            if let Some(x) = was.get_mut(v) {
                *x = s;
            }
        }
    }
    let order = flow_order(g);
    // (moves, bottleneck) ordered as asked: is `a` strictly better than `b`?
    let ahead = |a: (usize, f64), b: (usize, f64)| {
        if fastest {
            less(a.1, b.1) || (!less(b.1, a.1) && a.0 < b.0)
        } else {
            a.0 < b.0 || (a.0 == b.0 && less(a.1, b.1))
        }
    };
    // ((moves, bottleneck), stages) of the best so far.
    let mut best: Option<((usize, f64), Stages)> = None;
    for masks in pipelines(g, stages.len().max(2), REPAIR_LIMIT) {
        let st: Vec<Vec<usize>> = masks
            .iter()
            .map(|m| order.iter().copied().filter(|&v| m >> v & 1 == 1).collect())
            .collect();
        let moved = st
            .iter()
            .enumerate()
            .map(|(s, nodes)| nodes.iter().filter(|&&v| was[v] != s).count())
            .sum::<usize>();
        let key = (moved, bottleneck(g, &st, cross_ns));
        if best.as_ref().is_some_and(|(k, _)| !ahead(key, *k)) {
            continue;
        }
        if admit(&st) {
            best = Some((key, st));
        }
    }
    let (_, st) = best?;
    let mut moves = Vec::new();
    for (s, nodes) in st.iter().enumerate() {
        for &v in nodes {
            if was[v] != s {
                moves.push(Move {
                    node: v,
                    name: g.nodes[v].name.clone(),
                    from: was[v],
                    to: s,
                });
            }
        }
    }
    moves.sort_by_key(|m| m.node);
    Some((st, moves))
}
