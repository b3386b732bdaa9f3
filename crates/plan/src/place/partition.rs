//! The partitioners (NFCompass §IV.C.3): METIS (multilevel, Karypis and Kumar) followed by a
//! Kernighan–Lin style refinement on the real objective, and the light seed-based
//! agglomerative clustering; an exhaustive search for tiny graphs (the tests' reference).
//!
//! Every partitioner maps each node of a [`Graph`] to a processor of a [`Machine`]; the
//! objective is the pipeline's bottleneck ([`Machine::bottleneck`]), ties broken by the
//! total time (less crossing).

use super::model::{Graph, Kind, Machine};

/// (bottleneck, total) of `times`: what the partitioners minimise, in that order.
fn score(times: &[f64]) -> (f64, f64) {
    let max = times.iter().copied().fold(0.0, f64::max);
    let sum = times.iter().sum();
    (max, sum)
}

/// Whether score `a` beats `b` by more than rounding.
fn better(a: (f64, f64), b: (f64, f64)) -> bool {
    let eps = |x: f64| 1e-9 * x.abs().max(1.0);
    if a.0 < b.0 - eps(b.0) {
        return true;
    }
    a.0 <= b.0 + eps(b.0) && a.1 < b.1 - eps(b.1)
}

/// Steps `assign` (each node's processor, `0..k`) to the next mapping, counting in base
/// `k`; `false` (and all zeros) after the last.
pub(super) fn next_assignment(assign: &mut [usize], k: usize) -> bool {
    for a in assign.iter_mut() {
        *a += 1;
        if *a < k {
            return true;
        }
        *a = 0;
    }
    false
}

/// The largest graph [`exhaustive`] searches: processors^nodes at most this.
pub const EXHAUSTIVE_LIMIT: f64 = 2e6;

/// The best mapping by trying every one (`None` when there are more than
/// [`EXHAUSTIVE_LIMIT`]): the reference the tests hold the partitioners to.
pub fn exhaustive(g: &Graph, m: &Machine) -> Option<Vec<usize>> {
    let n = g.nodes.len();
    let k = m.processors.len();
    if k == 0 || (k as f64).powi(n as i32) > EXHAUSTIVE_LIMIT {
        return None;
    }
    let mut assign = vec![0usize; n];
    let mut best = assign.clone();
    let mut best_score = score(&m.times(g, &assign));
    loop {
        if !next_assignment(&mut assign, k) {
            return Some(best);
        }
        let s = score(&m.times(g, &assign));
        if better(s, best_score) {
            best_score = s;
            best.clone_from(&assign);
        }
    }
}

/// Incremental processor times under an assignment, for moves in O(degree).
struct State<'a> {
    g: &'a Graph,
    m: &'a Machine,
    adj: Vec<Vec<(usize, f64)>>,
    assign: Vec<usize>,
    times: Vec<f64>,
}

impl<'a> State<'a> {
    fn new(g: &'a Graph, m: &'a Machine, assign: Vec<usize>) -> State<'a> {
        let times = m.times(g, &assign);
        State {
            g,
            m,
            adj: g.adjacency(),
            assign,
            times,
        }
    }

    /// Moves node `v` to processor `q`, keeping the times up to date.
    fn relocate(&mut self, v: usize, q: usize) {
        let p = self.assign[v];
        if p == q {
            return;
        }
        let n = &self.g.nodes[v];
        self.times[p] -= self.m.node_cost(n, p);
        self.times[q] += self.m.node_cost(n, q);
        for &(u, w) in &self.adj[v] {
            let r = self.assign[u];
            if r != p {
                let c = self.m.cross_cost(p, r) * w;
                self.times[p] -= c;
                self.times[r] -= c;
            }
            if r != q {
                let c = self.m.cross_cost(q, r) * w;
                self.times[q] += c;
                self.times[r] += c;
            }
        }
        self.assign[v] = q;
        // Infinite costs do not subtract back to finite values: recompute then.
        if self.times.iter().any(|t| t.is_nan()) {
            self.times = self.m.times(self.g, &self.assign);
        }
    }

    fn score(&self) -> (f64, f64) {
        score(&self.times)
    }
}

/// Kernighan–Lin style refinement (NFCompass' modified KL): moves single nodes to another
/// processor, and swaps pairs of nodes between processors, while the bottleneck (then the
/// total) improves. Ends at a mapping no single move or swap improves.
pub fn refine(g: &Graph, m: &Machine, assign: Vec<usize>) -> Vec<usize> {
    let n = g.nodes.len();
    let k = m.processors.len();
    if n == 0 || k < 2 {
        return assign;
    }
    // First, every node on a processor that cannot run it goes where it costs least.
    let mut assign = assign;
    assign.resize(n, 0);
    for (v, a) in assign.iter_mut().enumerate() {
        if *a >= k || !m.node_cost(&g.nodes[v], *a).is_finite() {
            *a = (0..k)
                .min_by(|&p, &q| {
                    let c = |p| m.node_cost(&g.nodes[v], p);
                    c(p).total_cmp(&c(q))
                })
                .unwrap_or(0);
        }
    }
    let mut s = State::new(g, m, assign);
    // Swaps are quadratic: only on graphs of a few hundred nodes.
    let swaps = n <= 300;
    for _round in 0..64 {
        let mut improved = false;
        for v in 0..n {
            let p = s.assign[v];
            let mut best = (s.score(), p);
            for q in 0..k {
                if q == p {
                    continue;
                }
                s.relocate(v, q);
                let sc = s.score();
                if better(sc, best.0) {
                    best = (sc, q);
                }
                s.relocate(v, p);
            }
            if best.1 != p {
                s.relocate(v, best.1);
                improved = true;
            }
        }
        if swaps {
            for v in 0..n {
                for u in v + 1..n {
                    let (p, q) = (s.assign[v], s.assign[u]);
                    if p == q {
                        continue;
                    }
                    let before = s.score();
                    s.relocate(v, q);
                    s.relocate(u, p);
                    if better(s.score(), before) {
                        improved = true;
                    } else {
                        s.relocate(u, q);
                        s.relocate(v, p);
                    }
                }
            }
        }
        if !improved {
            break;
        }
    }
    s.assign
}

/// Integer weights for METIS: `x` on a scale where `max` is 100,000, at least 1.
fn scaled(x: f64, max: f64) -> i32 {
    if max.is_nan() || max <= 0.0 || !x.is_finite() {
        return 1;
    }
    (x / max * 100_000.0).round().clamp(1.0, 100_000.0) as i32
}

/// METIS' k-way partition of `g` into one part per processor, balancing the CPU cost and
/// cutting the least traffic (times the crossing cost), then each way of giving the parts
/// to the processors (which part goes to an accelerator) refined by [`refine`]; the best
/// is returned. Falls back to the refinement of a round-robin mapping when METIS refuses
/// the graph (the error is returned beside it).
pub fn metis(g: &Graph, m: &Machine) -> (Vec<usize>, Option<String>) {
    let n = g.nodes.len();
    let k = m.processors.len();
    if n == 0 || k == 0 {
        return (vec![0; n], None);
    }
    if k == 1 {
        return (vec![0; n], None);
    }
    let (parts, err) = if n <= k {
        ((0..n).collect(), None)
    } else {
        match metis_parts(g, m, k) {
            Ok(p) => (p, None),
            Err(e) => ((0..n).map(|v| v % k).collect(), Some(e)),
        }
    };
    // Parts are anonymous: with an accelerator, try each part on it.
    let accels: Vec<usize> = (0..k)
        .filter(|&p| matches!(m.processors[p].kind, Kind::Accelerator(_)))
        .collect();
    let mut labelings: Vec<Vec<usize>> = vec![(0..k).collect()];
    if !accels.is_empty() {
        for part in 0..k {
            // Part `part` goes to the first accelerator, the others in order to the rest.
            let mut order: Vec<usize> = (0..k).filter(|&p| p != accels[0]).collect();
            order.insert(part.min(order.len()), accels[0]);
            // order[i] is the processor of part i.
            labelings.push(order);
        }
    }
    let mut best: Option<(Vec<usize>, (f64, f64))> = None;
    for lab in labelings {
        let assign: Vec<usize> = parts.iter().map(|&p| lab[p % k]).collect();
        let refined = refine(g, m, assign);
        let sc = score(&m.times(g, &refined));
        if best.as_ref().is_none_or(|(_, b)| better(sc, *b)) {
            best = Some((refined, sc));
        }
    }
    (best.map(|b| b.0).unwrap_or_else(|| vec![0; n]), err)
}

/// METIS' partition of `g` into `k` parts (part per node).
fn metis_parts(g: &Graph, m: &Machine, k: usize) -> Result<Vec<usize>, String> {
    let n = g.nodes.len();
    let adj = g.adjacency();
    let maxv = g.nodes.iter().map(|x| x.cpu_ns).fold(0.0, f64::max);
    let maxe = adj
        .iter()
        .flatten()
        .map(|&(_, w)| w * m.cross_ns.max(1.0))
        .fold(0.0, f64::max);
    let mut xadj: Vec<i32> = Vec::with_capacity(n + 1);
    let mut adjncy: Vec<i32> = Vec::new();
    let mut adjwgt: Vec<i32> = Vec::new();
    xadj.push(0);
    for list in &adj {
        for &(u, w) in list {
            adjncy.push(u as i32);
            adjwgt.push(scaled(w * m.cross_ns.max(1.0), maxe));
        }
        xadj.push(adjncy.len() as i32);
    }
    let vwgt: Vec<i32> = g.nodes.iter().map(|x| scaled(x.cpu_ns, maxv)).collect();
    let mut part = vec![0i32; n];
    let graph = metis::Graph::new(1, k as i32, &xadj, &adjncy)
        .map_err(|e| format!("METIS: {e}"))?
        .set_vwgt(&vwgt)
        .set_adjwgt(&adjwgt)
        .set_option(metis::option::Seed(1));
    // METIS advises recursive bisection for few parts.
    let r = if k <= 8 {
        graph.part_recursive(&mut part)
    } else {
        graph.part_kway(&mut part)
    };
    r.map_err(|e| format!("METIS: {e}"))?;
    Ok(part
        .into_iter()
        .map(|p| usize::try_from(p).unwrap_or(0).min(k - 1))
        .collect())
}

/// The seeds of the clustering: one node per processor. An accelerator's seed is the
/// offloadable node that gains most there; a core's is the node least connected to the
/// seeds chosen so far (ties: the heaviest), so seeds spread over the graph.
pub fn seeds(g: &Graph, m: &Machine) -> Vec<Option<usize>> {
    let adj = g.adjacency();
    let mut chosen: Vec<Option<usize>> = vec![None; m.processors.len()];
    let mut taken = vec![false; g.nodes.len()];
    for (p, proc_) in m.processors.iter().enumerate() {
        if let Kind::Accelerator(_) = proc_.kind {
            let best = (0..g.nodes.len())
                .filter(|&v| !taken[v] && g.nodes[v].offloadable)
                .map(|v| (g.nodes[v].cpu_ns - m.node_cost(&g.nodes[v], p), v))
                .filter(|(gain, _)| *gain > 0.0)
                .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
            if let Some((_, v)) = best {
                taken[v] = true;
                chosen[p] = Some(v);
            }
        }
    }
    for (p, proc_) in m.processors.iter().enumerate() {
        if proc_.kind != Kind::Cpu {
            continue;
        }
        let affinity = |v: usize| -> f64 {
            adj[v]
                .iter()
                .filter(|(u, _)| taken[*u])
                .map(|(_, w)| *w)
                .sum()
        };
        let pick = (0..g.nodes.len()).filter(|&v| !taken[v]).min_by(|&a, &b| {
            affinity(a)
                .total_cmp(&affinity(b))
                .then(g.nodes[b].cpu_ns.total_cmp(&g.nodes[a].cpu_ns))
                .then(a.cmp(&b))
        });
        if let Some(v) = pick {
            taken[v] = true;
            chosen[p] = Some(v);
        }
    }
    chosen
}

/// NFCompass' light partitioner: seed-based agglomerative clustering. Every processor starts
/// with a cluster of its seed ([`seeds`]), every other node with a cluster of its own; the
/// edges, heaviest traffic first, merge the clusters at their ends, except two seeded
/// clusters or a merge that would load a processor beyond its fair share by more than
/// `slack` (0.1: 10 %). Clusters left without a seed go where they raise the bottleneck
/// least. O(E log E); no refinement (the paper's point: light, possibly unbalanced).
pub fn cluster(g: &Graph, m: &Machine, slack: f64) -> Vec<usize> {
    let n = g.nodes.len();
    let k = m.processors.len();
    if n == 0 || k <= 1 {
        return vec![0; n];
    }
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut v: usize) -> usize {
        while parent[v] != v {
            parent[v] = parent[parent[v]];
            v = parent[v];
        }
        v
    }
    // Per cluster root: its processor (seeded) and its nodes.
    let mut owner: Vec<Option<usize>> = vec![None; n];
    let mut members: Vec<Vec<usize>> = (0..n).map(|v| vec![v]).collect();
    for (p, s) in seeds(g, m).into_iter().enumerate() {
        if let Some(v) = s {
            owner[v] = Some(p);
        }
    }
    // A cluster's cost on processor p (the nodes only: crossings are not known yet).
    let cost_on = |members: &[usize], p: usize| -> f64 {
        members.iter().map(|&v| m.node_cost(&g.nodes[v], p)).sum()
    };
    // A processor's fair share: the work over the machine's capacity in cores, an
    // accelerator counting as many cores as it is faster on the offloadable work.
    let mut capacity = m.cpu_count() as f64;
    for p in 0..k {
        if let Kind::Accelerator(_) = m.processors[p].kind {
            let (cpu, there) = g
                .nodes
                .iter()
                .filter(|x| x.offloadable)
                .fold((0.0, 0.0), |(c, a), x| {
                    (c + x.cpu_ns, a + m.node_cost(x, p))
                });
            if there > 0.0 && there.is_finite() {
                capacity += cpu / there;
            }
        }
    }
    let fair = g.total_cpu_ns() / capacity.max(f64::MIN_POSITIVE);
    let cap = fair * (1.0 + slack.max(0.0));
    let mut edges: Vec<(f64, usize, usize)> = g
        .adjacency()
        .into_iter()
        .enumerate()
        .flat_map(|(a, l)| l.into_iter().map(move |(b, w)| (w, a, b)))
        .filter(|&(_, a, b)| a < b)
        .collect();
    edges.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    for (_, a, b) in edges {
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        if ra == rb {
            continue;
        }
        let (oa, ob) = (owner[ra], owner[rb]);
        if oa.is_some() && ob.is_some() {
            continue;
        }
        let mut joined = members[ra].clone();
        joined.extend_from_slice(&members[rb]);
        let c = match oa.or(ob) {
            Some(p) => cost_on(&joined, p),
            None => joined.iter().map(|&v| g.nodes[v].cpu_ns).sum(),
        };
        if !c.is_finite() || c > cap {
            continue;
        }
        let (keep, gone) = if ra < rb { (ra, rb) } else { (rb, ra) };
        parent[gone] = keep;
        owner[keep] = oa.or(ob);
        members[keep] = joined;
        members[gone].clear();
    }
    // Place the clusters left without a seed, then read the mapping.
    let mut assign = vec![usize::MAX; n];
    for (v, a) in assign.iter_mut().enumerate() {
        if let Some(p) = owner[root(&mut parent, v)] {
            *a = p;
        }
    }
    let mut rest: Vec<usize> = (0..n)
        .filter(|&v| root(&mut parent, v) == v && owner[v].is_none())
        .collect();
    // The heaviest first, as a greedy bin packing does.
    rest.sort_by(|&a, &b| {
        cost_on(&members[b], 0)
            .total_cmp(&cost_on(&members[a], 0))
            .then(a.cmp(&b))
    });
    for r in rest {
        let mut best: Option<(f64, usize)> = None;
        for p in 0..k {
            let mut trial = assign.clone();
            for &v in &members[r] {
                trial[v] = p;
            }
            // Nodes not placed yet (`usize::MAX`) count nowhere.
            let b = m.bottleneck(g, &trial);
            if best.is_none_or(|(x, _)| b < x) {
                best = Some((b, p));
            }
        }
        let p = best.map(|b| b.1).unwrap_or(0);
        for &v in &members[r] {
            assign[v] = p;
        }
    }
    assign
        .into_iter()
        .map(|x| if x == usize::MAX { 0 } else { x })
        .collect()
}
