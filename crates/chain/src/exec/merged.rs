//! The merged mode (NFCompass §IV.B.2, element merging): edges along which the planner
//! found elements redundant lead past them, rewired once at set-up. The hot loop is
//! naive's, unchanged: it follows edges that now skip those elements.
//!
//! Entries: the planner assumes packets come in by interfaces no link joins (the chain's
//! entries, replies, dumps); in this mode [`Executor::entry`] refuses a linked one.
//!
//! Counters: an element stepped over is not pushed, but the summary is naive's. The edges
//! as built are kept; the packets that went along a rewired edge (counted on it, as naive
//! counts the edge) are added to the edge out of each element they skipped by the output
//! it would have used, so each skipped element's input (its incoming edges) and outputs
//! come out as naive's (`Executor::folded`). It never drops (the planner only steps over
//! elements no packet on that edge could be dropped by), and its own `stats()` stay as
//! they are (the planner only steps over cases that count nothing).
//!
//! Drop tests run earlier ([`crate::layout::Hoist`]): the edge into the first element the
//! test now runs before leads to the test, its way on to that element, and the last one's
//! way on to where the test led. What the test dropped (its edge in minus its way on) is
//! added to the edge out of each element it runs before, so their counts are naive's.

use super::{Edge, Executor, Kind};
use crate::layout::Merged;
use elements::Role;

/// The merged mode's state: the edges as built, and per rewired edge the edges whose
/// counts it adds to.
pub(super) struct MergedState {
    /// The edges as [`Executor::new`] wired them (the summary counts along these).
    pub(super) built: Vec<Edge>,
    /// Per rewired edge: its index, and the edges out of the elements it skips.
    pub(super) folds: Vec<(usize, Vec<usize>)>,
    /// Per drop test run earlier: the edge into it now, its way on, and the edges out of
    /// the elements it runs before (each gets what it dropped: the first minus the second).
    pub(super) hoisted: Vec<(usize, usize, Vec<usize>)>,
    /// The elements links lead to (no entries in this mode).
    pub(super) linked: Vec<u32>,
}

/// A skip [`Executor::enable_merged`] refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeRefused {
    /// The element the edge leaves (global index).
    pub from: usize,
    /// Its output.
    pub output: usize,
    /// Why the edge stays.
    pub why: String,
}

impl Executor {
    /// Runs the chain with the edges of `merged` leading past the elements they skip (see
    /// [`Merged`]). Returns the skips refused (an element out of range or not an ordinary
    /// one, an edge that does not lead where the skip says, an unconnected output, an edge
    /// rewired twice); the rest are installed. Call on an executor built naive; results
    /// (packets, counters, state) are naive's when the planner was right that every packet
    /// along each edge would have gone through the skipped elements untouched.
    pub fn enable_merged(&mut self, merged: &Merged) -> Vec<MergeRefused> {
        let n = self.elements.len();
        let built = match &self.merged {
            Some(m) => m.built.clone(),
            None => self.edges.clone(),
        };
        let mut edges = built.clone();
        let mut refused = Vec::new();
        let mut folds = Vec::new();
        let mut rewired = vec![false; built.len()];
        let ordinary = |g: usize| {
            g < n
                && matches!(self.info[g].kind, Kind::Inner)
                && matches!(self.elements[g].role(), Role::Inner)
        };
        // The edge out of `g` by `o`, connected.
        let edge = |g: usize, o: usize| -> Result<usize, String> {
            if g >= n {
                return Err(format!("no element {g} (the chain has {n})"));
            }
            if !matches!(self.info[g].kind, Kind::Inner) || o >= self.info[g].outputs as usize {
                return Err(format!("element {g} has no output {o}"));
            }
            let k = self.edge_base[g] as usize + o;
            if built[k].element == u32::MAX {
                return Err(format!("output {o} of element {g} is not connected"));
            }
            Ok(k)
        };
        for s in &merged.skips {
            let check = || -> Result<(usize, Vec<usize>), String> {
                let k = edge(s.from, s.output)?;
                if rewired[k] {
                    return Err("the edge is rewired twice".to_string());
                }
                if s.over.is_empty() {
                    return Err("it skips nothing".to_string());
                }
                let mut at = built[k].element as usize;
                let mut outs = Vec::new();
                for b in &s.over {
                    if b.element != at {
                        return Err(format!("the path leads to {at}, not {}", b.element));
                    }
                    if !ordinary(at) {
                        return Err(format!(
                            "element {at} is not an ordinary one (a device, a dump, a link)"
                        ));
                    }
                    let j = edge(at, b.output)?;
                    outs.push(j);
                    at = built[j].element as usize;
                }
                Ok((k, outs))
            };
            match check() {
                Ok((k, outs)) => {
                    rewired[k] = true;
                    if let Some(&last) = outs.last() {
                        edges[k] = built[last];
                    }
                    folds.push((k, outs));
                }
                Err(why) => refused.push(MergeRefused {
                    from: s.from,
                    output: s.output,
                    why,
                }),
            }
        }
        // Edges a skip uses (rewired, or counted for what it steps over): no hoist may use them.
        let mut used = rewired.clone();
        for (_, outs) in &folds {
            for &j in outs {
                used[j] = true;
            }
        }
        // The edges as built into element `g`.
        let ins = |g: usize| -> Vec<usize> {
            (0..built.len())
                .filter(|&k| built[k].element as usize == g)
                .collect()
        };
        let mut hoisted = Vec::new();
        for h in &merged.hoists {
            let check = || -> Result<(usize, usize, Vec<usize>), String> {
                let Some(first) = h.before.first() else {
                    return Err("it runs before nothing".to_string());
                };
                let d = h.element;
                if !ordinary(d) {
                    return Err(format!(
                        "element {d} is not an ordinary one (a device, a dump, a link)"
                    ));
                }
                // The one way into the first element: an edge, no link, not an entry.
                let first_in = ins(first.element);
                let linked = (0..n).any(|g| self.info[g].kind == Kind::Link(first.element as u32));
                let [k0] = first_in.as_slice() else {
                    return Err(format!(
                        "element {} has {} ways in, not one",
                        first.element,
                        first_in.len()
                    ));
                };
                if linked {
                    return Err(format!("a link leads to element {}", first.element));
                }
                let mut at = first.element;
                let mut outs = Vec::new();
                for (i, b) in h.before.iter().enumerate() {
                    if b.element != at {
                        return Err(format!("the path leads to {at}, not {}", b.element));
                    }
                    if !ordinary(at) || at == d {
                        return Err(format!("element {at} cannot be run after the test"));
                    }
                    let j = edge(at, b.output)?;
                    // Every element on the path has this one way in.
                    if i > 0 && ins(at).len() != 1 {
                        return Err(format!("element {at} has other ways in"));
                    }
                    outs.push(j);
                    at = built[j].element as usize;
                }
                if at != d {
                    return Err(format!("the path leads to {at}, not {d}"));
                }
                if ins(d).len() != 1 {
                    return Err(format!("element {d} has other ways in"));
                }
                let kd = edge(d, h.output)?;
                if kd == *k0 {
                    return Err("the test's way on leads back into the path".to_string());
                }
                let mine: Vec<usize> = outs.iter().copied().chain([*k0, kd]).collect();
                if mine.iter().any(|&k| used[k]) {
                    return Err("an edge it needs is rewired or stepped over already".to_string());
                }
                Ok((*k0, kd, outs))
            };
            match check() {
                Ok((k0, kd, outs)) => {
                    let last = *outs.last().unwrap_or(&k0);
                    for &k in outs.iter().chain([&k0, &kd]) {
                        used[k] = true;
                    }
                    // In front: the edge in leads to the test, the test's way on to the
                    // first element, the last element's way on to where the test led.
                    edges[k0] = built[last];
                    edges[kd] = built[k0];
                    edges[last] = built[kd];
                    hoisted.push((k0, kd, outs));
                }
                Err(why) => refused.push(MergeRefused {
                    from: h.element,
                    output: h.output,
                    why: format!("the drop test stays: {why}"),
                }),
            }
        }
        self.edges = edges;
        self.merged = if folds.is_empty() && hoisted.is_empty() {
            None
        } else {
            let linked = (0..n)
                .filter_map(|g| match self.info[g].kind {
                    Kind::Link(t) => Some(t),
                    _ => None,
                })
                .collect();
            Some(Box::new(MergedState {
                built,
                folds,
                hoisted,
                linked,
            }))
        };
        let plan = self.batch_plan.is_some();
        self.batch_elements(plan);
        refused
    }

    /// The elements the merged mode steps over on some edge (global indices, sorted), none
    /// outside it.
    pub fn merged_elements(&self) -> Vec<usize> {
        let Some(m) = &self.merged else {
            return Vec::new();
        };
        let owner = |k: usize| self.edge_base.partition_point(|&b| b as usize <= k) - 1;
        let mut v: Vec<usize> = m
            .folds
            .iter()
            .flat_map(|(_, outs)| outs.iter().map(|&j| owner(j)))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The edges as built (the merged mode rewires `edges`; counters follow these).
    pub(super) fn built_edges(&self) -> &[Edge] {
        match &self.merged {
            Some(m) => &m.built,
            None => &self.edges,
        }
    }

    /// Adds what the elements stepped over would have sent to `out` (per edge).
    pub(super) fn fold_merged(&self, out: &mut [u64]) {
        let Some(m) = &self.merged else {
            return;
        };
        // What went along each rewired edge, before any is added to.
        let went: Vec<u64> = m.folds.iter().map(|(k, _)| out[*k]).collect();
        // What each test run earlier dropped (its edges are used by no skip).
        let dropped: Vec<u64> = m
            .hoisted
            .iter()
            .map(|&(k0, kd, _)| out[k0].saturating_sub(out[kd]))
            .collect();
        for ((_, outs), n) in m.folds.iter().zip(went) {
            for &j in outs {
                out[j] += n;
            }
        }
        for ((_, _, outs), n) in m.hoisted.iter().zip(dropped) {
            for &j in outs {
                out[j] += n;
            }
        }
    }
}
