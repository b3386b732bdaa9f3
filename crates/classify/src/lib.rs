//! Multi-field packet classification: prioritised rules over header fields (each an
//! inclusive range per field: prefixes, port ranges, exact values and wildcards are all
//! ranges) compiled into a lookup structure that returns the first matching rule.
//!
//! # The algorithm: a HyperSplit decision tree
//!
//! [`Classifier`] is a binary decision tree in the style of HyperSplit (Qi et al., 2009):
//! each inner node splits one field's range at one value; each leaf holds at most
//! [`LEAF_RULES`] rules, checked in priority order. The split chosen at a node is the field
//! with the most distinct rule boundaries inside the node's box, cut at the median of those
//! boundaries, so both sides get about half of the distinct "segments".
//!
//! Why this one:
//! - **Ranges are native.** ClassBench rules (and `IPFilter` ranges, TTL and length tests)
//!   are ranges, not prefixes; HyperSplit cuts ranges directly, where TupleMerge and
//!   PartitionSort have to expand or group them.
//! - **Bounded memory.** Binary cuts at rule boundaries replicate far fewer rules than
//!   equal-size cuts (HiCuts/HyperCuts), and a rule that covers a node's whole box cuts off
//!   every lower-priority rule below it, so trees over 10k ClassBench rules stay small.
//! - **Simple, branch-light lookup**: a walk of a few dozen comparisons on one field each,
//!   then a short linear scan; no hashing.
//!
//! Incremental updates are not supported: a changed rule set is compiled again.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod classbench;

use std::fmt;

/// At most this many rules in a leaf (checked linearly).
pub const LEAF_RULES: usize = 4;

/// Depth at which splitting stops whatever the leaf size (a guard: rule sets whose rules
/// cannot be separated by cuts would otherwise recurse deeply).
const MAX_DEPTH: usize = 64;

/// An inclusive range of a field's values.
pub type Range = (u64, u64);

/// A rule: one range per field (the classifier's dimensions, in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Allowed values per field.
    pub ranges: Vec<Range>,
}

impl Rule {
    /// The rules of a box whose fields allow unions of ranges (`per_field[d]`, one list
    /// per dimension): one rule per combination of one range from each field. `None` when
    /// there would be more than `max`.
    pub fn product(per_field: &[Vec<Range>], max: usize) -> Option<Vec<Rule>> {
        let mut combos: Vec<Vec<Range>> = vec![Vec::with_capacity(per_field.len())];
        for ranges in per_field {
            if combos.len().saturating_mul(ranges.len()) > max {
                return None;
            }
            combos = combos
                .iter()
                .flat_map(|c| {
                    ranges.iter().map(move |&r| {
                        let mut c2 = c.clone();
                        c2.push(r);
                        c2
                    })
                })
                .collect();
        }
        Some(combos.into_iter().map(|ranges| Rule { ranges }).collect())
    }

    /// Whether `key` (one value per field) satisfies the rule.
    #[inline]
    pub fn matches(&self, key: &[u64]) -> bool {
        self.ranges
            .iter()
            .zip(key)
            .all(|(&(lo, hi), &v)| lo <= v && v <= hi)
    }
}

/// A rule set that cannot be classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// A tree node in 16 bytes (four to a cache line). Nodes are laid out in preorder, so an
/// inner node's left child is the next node and only the right one is stored.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// Inner node: values `<= at` of field `dim` go left (to the next node), the rest to
    /// `right`. Leaf: the index of its first rule in `leaf_rules`.
    at: u64,
    /// Inner node: the right child. Leaf: the number of rules.
    right: u32,
    /// The field an inner node cuts, or [`LEAF`].
    dim: u32,
}

/// [`Node::dim`] of a leaf.
const LEAF: u32 = u32::MAX;

/// The ranges of a tree's leaf rules, in leaf order (`dims` per rule reference, rules
/// copied into every leaf that holds them), so a leaf's checks read consecutive bytes
/// instead of one scattered rule after another; as `u32` pairs when every bound of the rule
/// set fits (ClassBench: addresses, ports and protocols do), which halves those bytes,
/// else as `u64` pairs.
#[derive(Debug, Clone, Default)]
enum Flat {
    /// No leaf rules (yet).
    #[default]
    Empty,
    Narrow(Vec<(u32, u32)>),
    Wide(Vec<Range>),
}

impl Flat {
    fn bytes(&self) -> usize {
        match self {
            Flat::Empty => 0,
            Flat::Narrow(v) => v.len() * 8,
            Flat::Wide(v) => v.len() * 16,
        }
    }
}

/// The first of `ids` (rule indices in priority order; only those below `bound` count)
/// whose ranges in `flat` (the leaf's, `d` per rule, in the order of `ids`) contain `key`.
#[inline(always)]
fn first_match<T: Copy + Into<u64>>(
    flat: &[(T, T)],
    d: usize,
    ids: &[u32],
    key: &[u64],
    bound: usize,
) -> Option<usize> {
    for (&r, rs) in ids.iter().zip(flat.chunks_exact(d)) {
        let r = r as usize;
        if r >= bound {
            return None;
        }
        if rs
            .iter()
            .zip(key)
            .all(|(&(lo, hi), &v)| lo.into() <= v && v <= hi.into())
        {
            return Some(r);
        }
    }
    None
}

/// One decision tree over a subset of the rules.
#[derive(Debug, Clone, Default)]
struct Tree {
    nodes: Vec<Node>,
    leaf_rules: Vec<u32>,
    /// The ranges of `leaf_rules`, in the same order.
    leaf_flat: Flat,
    /// The highest-priority (lowest) rule index in the tree.
    first: u32,
}

/// Rules compiled into decision trees; [`Classifier::classify`] gives the index of the
/// first rule (in the order given) that matches.
///
/// Rules are first partitioned (as CutSplit does) by whether each of the first two fields
/// (the addresses, for 5-tuple rules) is narrow (fewer than 2^28 values: an IPv4 prefix of
/// /5 or longer) or wide (in practice a wildcard): cutting a narrow field never has to copy
/// the wide rules of the other groups, which is what makes a single tree blow up on
/// firewall sets full of wildcards. Each group gets its own tree; a lookup keeps the lowest
/// rule index over the trees (skipping trees whose best rule cannot win).
///
/// *Decision:* the threshold was 2^16 (/16). On the ClassBench 10k sets, 2^28 gives the
/// same lookup rate on acl and fw sets and 1.25-1.3x on ipc sets, with fewer nodes (fw_10k:
/// 15k instead of 30k); 2^8 and 2^31 were slower (0.5-0.95x); measured alternating in one
/// process.
#[derive(Debug, Clone)]
pub struct Classifier {
    dims: usize,
    rules: Vec<Rule>,
    trees: Vec<Tree>,
}

/// Ranges with more values than this are wide (partitioning).
const NARROW: u64 = 1 << 28;

/// Size figures of a compiled classifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Rules.
    pub rules: usize,
    /// Tree nodes (inner and leaves).
    pub nodes: usize,
    /// Rule references stored in leaves (rules replicated across leaves count once per
    /// leaf).
    pub leaf_rules: usize,
    /// Longest root-to-leaf path.
    pub depth: usize,
    /// Trees (rule groups).
    pub trees: usize,
    /// Bytes the compiled trees take (nodes, leaf rule indices and their copied ranges).
    pub memory: usize,
}

impl Classifier {
    /// Compiles `rules` (highest priority first), each with `dims` ranges.
    pub fn new(rules: Vec<Rule>, dims: usize) -> Result<Classifier, Error> {
        if dims == 0 || dims > 255 {
            return Err(Error(format!("expected 1 to 255 fields, found {dims}")));
        }
        for (i, r) in rules.iter().enumerate() {
            if r.ranges.len() != dims {
                return Err(Error(format!(
                    "rule {i}: expected {dims} fields, found {}",
                    r.ranges.len()
                )));
            }
            if let Some(d) = r.ranges.iter().position(|(lo, hi)| lo > hi) {
                return Err(Error(format!("rule {i}: field {d} has an empty range")));
            }
        }
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); 4];
        for (i, r) in rules.iter().enumerate() {
            let wide = |d: usize| r.ranges.get(d).is_some_and(|&(lo, hi)| hi - lo >= NARROW);
            groups[usize::from(wide(0)) | (usize::from(wide(1)) << 1)].push(i as u32);
        }
        let narrow = rules
            .iter()
            .all(|r| r.ranges.iter().all(|&(_, hi)| hi <= u64::from(u32::MAX)));
        let mut c = Classifier {
            dims,
            rules,
            trees: Vec::new(),
        };
        for g in groups.into_iter().filter(|g| !g.is_empty()) {
            let mut t = Tree {
                first: g[0],
                ..Tree::default()
            };
            let space = vec![(0, u64::MAX); dims];
            c.build(&mut t, g, space, 0);
            let ranges = t
                .leaf_rules
                .iter()
                .flat_map(|&r| c.rules[r as usize].ranges.iter().copied());
            t.leaf_flat = if narrow {
                Flat::Narrow(ranges.map(|(lo, hi)| (lo as u32, hi as u32)).collect())
            } else {
                Flat::Wide(ranges.collect())
            };
            c.trees.push(t);
        }
        c.trees.sort_by_key(|t| t.first);
        Ok(c)
    }

    /// Builds the subtree for `rules` (sorted by priority) inside `space`; returns its node.
    fn build(&self, t: &mut Tree, rules: Vec<u32>, space: Vec<Range>, depth: usize) -> u32 {
        // A rule covering the whole box matches every packet here: nothing after it can.
        let rules = match rules.iter().position(|&r| {
            self.rules[r as usize]
                .ranges
                .iter()
                .zip(&space)
                .all(|(&(lo, hi), &(a, b))| lo <= a && b <= hi)
        }) {
            Some(k) => rules[..=k].to_vec(),
            None => rules,
        };
        let id = t.nodes.len() as u32;
        if rules.len() <= LEAF_RULES || depth >= MAX_DEPTH {
            return Self::leaf(t, &rules);
        }
        let Some((dim, at)) = self.split_point(&rules, &space) else {
            return Self::leaf(t, &rules);
        };
        t.nodes.push(Node {
            at: 0,
            right: 0,
            dim: LEAF,
        });
        let side = |lo: u64, hi: u64| -> Vec<u32> {
            rules
                .iter()
                .copied()
                .filter(|&r| {
                    let (a, b) = self.rules[r as usize].ranges[dim];
                    a <= hi && lo <= b
                })
                .collect()
        };
        let (lo, hi) = space[dim];
        let (lr, rr) = (side(lo, at), side(at + 1, hi));
        let mut ls = space.clone();
        ls[dim] = (lo, at);
        let mut rs = space;
        rs[dim] = (at + 1, hi);
        let left = self.build(t, lr, ls, depth + 1);
        debug_assert_eq!(left, id + 1);
        let right = self.build(t, rr, rs, depth + 1);
        t.nodes[id as usize] = Node {
            at,
            right,
            dim: dim as u32,
        };
        id
    }

    fn leaf(t: &mut Tree, rules: &[u32]) -> u32 {
        let from = t.leaf_rules.len() as u64;
        t.leaf_rules.extend_from_slice(rules);
        t.nodes.push(Node {
            at: from,
            right: rules.len() as u32,
            dim: LEAF,
        });
        (t.nodes.len() - 1) as u32
    }

    /// The field and value to cut at: per field, the median of the rule boundaries inside
    /// the box; of those, the cut that sends the fewest rule copies down (rules on both
    /// sides count twice), ties to the more even one. `None` when no cut separates anything.
    fn split_point(&self, rules: &[u32], space: &[Range]) -> Option<(usize, u64)> {
        let mut best: Option<((usize, usize), usize, u64)> = None;
        for (d, &(lo, hi)) in space.iter().enumerate() {
            // Cut points: the last value of a segment (a rule's end, or the value before a
            // rule's start), strictly inside the box.
            let mut cuts: Vec<u64> = Vec::with_capacity(rules.len() * 2);
            for &r in rules {
                let (a, b) = self.rules[r as usize].ranges[d];
                if a > lo && a <= hi {
                    cuts.push(a - 1);
                }
                if b >= lo && b < hi {
                    cuts.push(b);
                }
            }
            cuts.sort_unstable();
            cuts.dedup();
            if cuts.is_empty() {
                continue;
            }
            let at = cuts[(cuts.len() - 1) / 2];
            let (mut l, mut r) = (0usize, 0usize);
            for &x in rules {
                let (a, b) = self.rules[x as usize].ranges[d];
                l += usize::from(a <= at);
                r += usize::from(b > at);
            }
            let cost = (l + r, l.max(r));
            if best.is_none_or(|(c, _, _)| cost < c) {
                best = Some((cost, d, at));
            }
        }
        best.map(|(_, d, at)| (d, at))
    }

    /// The index of the first rule `key` (one value per field) matches, if any.
    #[inline]
    pub fn classify(&self, key: &[u64]) -> Option<usize> {
        let mut best = usize::MAX;
        for t in &self.trees {
            if best <= t.first as usize {
                break; // trees are in order of their best rule
            }
            if let Some(r) = self.classify_in(t, key, best) {
                best = r;
            }
        }
        (best != usize::MAX).then_some(best)
    }

    /// The first rule of tree `t` that `key` matches, if it is below `bound`.
    #[inline]
    fn classify_in(&self, t: &Tree, key: &[u64], bound: usize) -> Option<usize> {
        let mut n = 0usize;
        loop {
            let node = *t.nodes.get(n)?;
            if node.dim == LEAF {
                let (from, to) = (node.at as usize, node.at as usize + node.right as usize);
                let ids = t.leaf_rules.get(from..to)?;
                let d = self.dims;
                return match &t.leaf_flat {
                    Flat::Narrow(f) => first_match(f.get(from * d..to * d)?, d, ids, key, bound),
                    Flat::Wide(f) => first_match(f.get(from * d..to * d)?, d, ids, key, bound),
                    Flat::Empty => None,
                };
            }
            let v = key.get(node.dim as usize).copied().unwrap_or(0);
            n = if v <= node.at {
                n + 1
            } else {
                node.right as usize
            };
        }
    }

    /// The index of the first rule `key` matches, by checking every rule in order (the
    /// reference the tree is tested against).
    pub fn classify_linear(&self, key: &[u64]) -> Option<usize> {
        self.rules.iter().position(|r| r.matches(key))
    }

    /// The rules, in priority order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Number of fields.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Size of the compiled trees (summed; the depth is the deepest).
    pub fn stats(&self) -> Stats {
        let mut st = Stats {
            rules: self.rules.len(),
            nodes: 0,
            leaf_rules: 0,
            depth: 0,
            trees: self.trees.len(),
            memory: 0,
        };
        for t in &self.trees {
            st.nodes += t.nodes.len();
            st.leaf_rules += t.leaf_rules.len();
            st.memory += t.nodes.len() * std::mem::size_of::<Node>()
                + t.leaf_rules.len() * 4
                + t.leaf_flat.bytes();
            let mut todo = vec![(0u32, 1usize)];
            while let Some((n, d)) = todo.pop() {
                st.depth = st.depth.max(d);
                if let Some(node) = t.nodes.get(n as usize).filter(|x| x.dim != LEAF) {
                    todo.push((n + 1, d + 1));
                    todo.push((node.right, d + 1));
                }
            }
        }
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rule(r: &[(u64, u64)]) -> Rule {
        Rule { ranges: r.to_vec() }
    }

    #[test]
    fn a_product_has_one_rule_per_combination_and_respects_its_limit() {
        let per = vec![
            vec![(0, 1), (5, 6)],
            vec![(7, 7)],
            vec![(1, 2), (3, 3), (9, 9)],
        ];
        let rules = Rule::product(&per, 6).unwrap();
        assert_eq!(rules.len(), 6);
        assert_eq!(rules[0].ranges, vec![(0, 1), (7, 7), (1, 2)]);
        assert_eq!(rules[5].ranges, vec![(5, 6), (7, 7), (9, 9)]);
        for k in [[0u64, 7, 3], [6, 7, 9]] {
            assert_eq!(rules.iter().filter(|r| r.matches(&k)).count(), 1);
        }
        assert!(Rule::product(&per, 5).is_none());
    }

    #[test]
    fn first_match_wins_and_misses_are_none() {
        let rules = vec![
            rule(&[(10, 20), (0, 5)]),
            rule(&[(0, 100), (3, 3)]),
            rule(&[(15, 15), (0, u64::MAX)]),
        ];
        let c = Classifier::new(rules, 2).unwrap();
        assert_eq!(c.classify(&[15, 3]), Some(0));
        assert_eq!(c.classify(&[50, 3]), Some(1));
        assert_eq!(c.classify(&[15, 9]), Some(2));
        assert_eq!(c.classify(&[200, 9]), None);
    }

    #[test]
    fn bad_rules_are_refused() {
        assert!(Classifier::new(vec![rule(&[(5, 1)])], 1).is_err());
        assert!(Classifier::new(vec![rule(&[(1, 5)])], 2).is_err());
        assert!(Classifier::new(vec![], 0).is_err());
    }

    fn arb_rules() -> impl Strategy<Value = Vec<Rule>> {
        let range = (0u64..64, 0u64..64).prop_map(|(a, b)| (a.min(b), a.max(b)));
        let r = proptest::collection::vec(range, 3).prop_map(|ranges| Rule { ranges });
        proptest::collection::vec(r, 0..120)
    }

    proptest! {
        #[test]
        fn tree_agrees_with_the_linear_scan(
            rules in arb_rules(),
            keys in proptest::collection::vec(proptest::collection::vec(0u64..70, 3), 64),
        ) {
            let c = Classifier::new(rules, 3).unwrap();
            for k in &keys {
                prop_assert_eq!(c.classify(k), c.classify_linear(k));
            }
        }

        /// Bounds beyond `u32` (the ranges stored as `u64` pairs), and keys beyond them.
        #[test]
        fn wide_values_agree_with_the_linear_scan(
            rules in arb_rules(),
            keys in proptest::collection::vec(proptest::collection::vec(0u64..70, 3), 64),
        ) {
            let wide = |v: u64| if v == 63 { u64::MAX } else { v << 34 };
            let rules: Vec<Rule> = rules
                .into_iter()
                .map(|r| Rule { ranges: r.ranges.iter().map(|&(a, b)| (wide(a), wide(b))).collect() })
                .collect();
            let c = Classifier::new(rules, 3).unwrap();
            let fits = c.rules().iter().all(|r| r.ranges.iter().all(|x| x.1 <= u64::from(u32::MAX)));
            prop_assert!(fits || c.trees.iter().all(|t| !matches!(t.leaf_flat, Flat::Narrow(_))));
            for k in &keys {
                let k: Vec<u64> = k.iter().map(|&v| wide(v)).collect();
                prop_assert_eq!(c.classify(&k), c.classify_linear(&k));
            }
        }
    }
}
