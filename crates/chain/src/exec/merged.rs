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
        self.edges = edges;
        self.merged = if folds.is_empty() {
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
        for ((_, outs), n) in m.folds.iter().zip(went) {
            for &j in outs {
                out[j] += n;
            }
        }
    }
}
