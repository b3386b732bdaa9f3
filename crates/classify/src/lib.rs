//! Multi-field packet classification: prioritised rules over header fields (each an
//! inclusive range per field: prefixes, port ranges, exact values and wildcards are all
//! ranges) compiled into a lookup structure that returns the first matching rule.
//!
//! # The algorithm: a HyperSplit decision tree
//!
//! [`Classifier`] is a binary decision tree in the style of HyperSplit (Qi et al., 2009):
//! each inner node splits one field's range at one value; each leaf holds at most
//! [`LEAF_RULES`] rules ([`SIMD_LEAF_RULES`] where the AVX-512 lookup is used, or two rules
//! that overlap inside the leaf's box), checked in priority order. The cut at a node is,
//! per field, the median of the rule boundaries inside the node's box, on the field that
//! copies the fewest rules to both sides; trees for the AVX-512 lookup instead take, of
//! every boundary of every field, the cut whose larger side holds the fewest rules, since
//! their walk costs as much as the deepest key of a block.
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
//! # Batch lookup
//!
//! [`Classifier::classify_batch`] answers many keys per call, the way packets arrive
//! (DPDK's `rte_acl` is measured with batches of 64). A single-key walk is a chain of
//! dependent loads with a hard-to-predict branch at every node; a batch walks [`LANES`]
//! keys through a tree together, one step for every key per round, choosing each child
//! with a conditional move (`std::hint::select_unpredictable`; a plain `if` was compiled
//! to a branch, and lockstep walks with branches were slower than single keys). The keys'
//! node loads are independent, so they overlap, and no branch depends on the keys until
//! the leaves. Leaves point to themselves and are compared against a key slot holding
//! `u64::MAX`, so a finished key stays put without a test and a round where no key moved
//! ends the walk. A tree is only walked for the keys whose best answer so far could still
//! be beaten by it; leftover keys go in groups of 4 rather than padding a group of 16.
//! On the ClassBench 10k sets this is 1.5 to 1.8 times the single-key rate (measured
//! alternating in one process; `docs/benchmarks.md`).
//!
//! Where the CPU has AVX-512F (detected at run time), classifiers whose bounds fit `u32`
//! with at most 8 fields look blocks up in AVX-512 registers instead (the `avx512`
//! module, the crate's only `unsafe` code): the same walk, all 64 keys of a block stepped
//! together sixteen to a register, each step gathering the keys' nodes as 8-byte entries
//! and picking each key's field from registers that hold the keys field by field
//! (permutes, no gather); the walk ends on each key's leaf entry, which says where the
//! leaf's rule is, and that one rule is checked in one compare of its fields against the
//! key's, kept with a select (no branch on the outcome). Blocks with a key beyond `u32`
//! take the portable walk. Each tree keeps a `[u32; 2]` copy of its nodes for it, kept in
//! step by updates, and its leaves hold one rule ([`SIMD_LEAF_RULES`]), or two where two
//! rules overlap in the leaf's box (checked with one more load and compare, still without
//! a branch on the outcome). On an Intel Xeon that is 1.9 to 2.2 times the first AVX-512
//! lookup (gathers of 4-byte node halves and of key fields, a branch per leaf check),
//! itself 1.5 to 2.2 times the portable walk with leaves of 4 (`docs/benchmarks.md`, "an
//! AVX-512 lookup" and "Closing the gap"); the cuts and leaves of two gave 1.13 to 1.19
//! times more on acl5 ("acl5 above the bar").
//!
//! *Decision:* 4-way nodes (two levels of the binary tree merged, three comparisons per
//! step) were tried to halve the walk's steps, and were slower (0.70 to 0.82 times, more
//! work per step and twice the node bytes); the gathers pay because one instruction
//! serves sixteen keys.
//!
//! # Incremental updates
//!
//! [`Classifier::insert`] and [`Classifier::remove`] change the rule list in place (with
//! `Vec::insert` / `Vec::remove` semantics: rule indices after the change point shift, and
//! lookups answer positions in the current list) without compiling the classifier again,
//! which `rte_acl` cannot do. On the ClassBench 10k sets an update takes 5 to 15
//! microseconds on average (under a millisecond at worst), against 10 to 35 ms for a full
//! build (`docs/benchmarks.md`).
//!
//! What makes it local: a leaf holds exactly *the rules of its tree's group that overlap
//! its box, in priority order, up to and including the first one that covers the whole
//! box*. So
//! - an **insert** walks the group's tree down to the leaves whose box the new rule
//!   overlaps (boxes are recomputed from the cuts on the way; nothing extra is stored),
//!   and adds the rule to each list unless an earlier rule covers that leaf's box (cutting
//!   the list after the new rule if it covers the box itself);
//! - a **remove** rewrites the leaves whose list holds the rule; where it was the covering
//!   rule that cut the list, the later rules of the group that overlap the box come back
//!   (from one pass over the group's rules that overlap the removed one, done only when
//!   needed).
//!
//! A list that still fits its place is rewritten there; a longer one of at most the leaf
//! size ([`LEAF_RULES`] or [`SIMD_LEAF_RULES`]) goes to the end of the leaf arrays; a longer one still is compiled
//! into a subtree (with the leaf's box and depth) appended after the tree's nodes, and the
//! old leaf becomes a *jump* node to it. Jumps keep the preorder layout and the batch walk
//! unchanged: a jump is a node whose comparison always goes "right", so it costs one
//! more step on those paths and no extra test in the batch walk (the single-key walk
//! already tests for leaves, and jumps share that test). Rule indices in the leaves, the
//! group lists and each tree's best rule are renumbered by a linear pass over `u32`s.
//!
//! *Decision:* rather than re-laying out the tree on every update, the space that updates
//! leave unused (overwritten leaf entries, jump nodes) is counted, and a tree is compiled
//! again from its group's rules when that passes half its size, or after as many updates
//! as it has rules (at least 64), since subtrees compiled leaf by leaf and cuts that
//! removed rules no longer need are not as good as a fresh tree. Either way a rebuild's
//! cost is spread over the many updates before it (amortised; [`Classifier::rebuilds`]
//! counts them). In a test of 3000 random updates on a 200-rule set, memory stayed within
//! 3.5 times a fresh build's. Only an inserted rule with a bound beyond `u32`, in a
//! classifier whose leaf ranges are stored as `u32` pairs, recompiles everything.

// `unsafe` only in the `avx512` module (runtime-detected `std::arch`), each block with its
// invariant; everything else is safe code.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod classbench;

use std::fmt;

/// At most this many rules in a leaf (checked linearly), except in classifiers that use the
/// AVX-512 lookup (see the crate docs), whose leaves hold [`SIMD_LEAF_RULES`].
pub const LEAF_RULES: usize = 4;

/// At most this many rules in a leaf of a classifier that uses the AVX-512 lookup, except
/// where two rules overlap inside the leaf's box: those two make a leaf of two (see
/// [`Classifier`]'s build decisions).
///
/// *Decision:* the AVX-512 walk costs little per extra level (sixteen keys per gather)
/// while each leaf rule is a dependent load and a branch per key, so deeper trees with one
/// rule per leaf pay: against leaves of 4, 1.5x on acl5, 1.1-1.3x on acl_10k, fw2, ipc2
/// (same process, alternating; leaves of 2: 1.05-1.29x, of 6 or 8: 0.84-1.0x), for 1.3 to
/// 2.5 times the memory (0.8 to 1.7 MB on the ClassBench 10k sets). Checked again once the
/// one-rule check had no branch on its outcome: leaves of 2, checked the same way, gave
/// 0.80 to 0.95 times.
pub const SIMD_LEAF_RULES: usize = 1;

/// A key's value type for [`Classifier::classify_batch`]: `u64`, or `u32` where every
/// field fits it (IPv4 5-tuples), which halves the bytes a batch reads.
pub trait KeyValue: Copy + Into<u64> + sealed::Sealed {
    /// Bytes per value.
    const BYTES: usize;
}

impl KeyValue for u64 {
    const BYTES: usize = 8;
}

impl KeyValue for u32 {
    const BYTES: usize = 4;
}

mod sealed {
    /// Only `u32` and `u64` are [`KeyValue`](super::KeyValue)s.
    pub trait Sealed {}
    impl Sealed for u64 {}
    impl Sealed for u32 {}
}

/// [`Classifier::classify_batch`] works on blocks of this many keys.
pub const BATCH: usize = 64;

/// [`Classifier::classify_batch`] walks this many keys through a tree in lockstep.
pub const LANES: usize = 16;

/// Keys left over after groups of [`LANES`] go through a tree this many at a time.
const FEW_LANES: usize = 4;

/// Depth at which splitting stops whatever the leaf size (a guard: rule sets whose rules
/// cannot be separated by cuts would otherwise recurse deeply).
const MAX_DEPTH: usize = 64;

/// A tree stops cutting (its remaining leaves hold all their rules) past this many nodes
/// per rule (plus 1024). HyperSplit's cuts can multiply without bound when many fields
/// overlap (120 random rules over 9 fields made 32 million nodes); ClassBench 10k sets
/// take 0.8 to 1.7 nodes per rule.
const NODE_BUDGET: usize = 32;

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

/// A rule set that cannot be classified, an update or batch the classifier refuses, or a
/// ClassBench file that does not parse. Each message says what was expected and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A field count outside 1..=255.
    Fields(usize),
    /// More rules than a classifier holds.
    TooManyRules(usize),
    /// An insertion into a classifier that is full.
    Full,
    /// A rule (`rule`: its index, `None` for an inserted rule) with the wrong field count.
    RuleFields {
        /// The rule's index in the list given, or `None` for a rule being inserted.
        rule: Option<usize>,
        /// Fields of the classifier.
        expected: usize,
        /// Fields of the rule.
        found: usize,
    },
    /// A rule with a range whose low end is above its high end.
    EmptyRange {
        /// The rule's index, or `None` for a rule being inserted.
        rule: Option<usize>,
        /// The field.
        field: usize,
    },
    /// An insertion past the end of the list.
    InsertAt {
        /// The position asked for.
        at: usize,
        /// Rules in the list.
        len: usize,
    },
    /// A removal of a rule the list does not have.
    RemoveAt {
        /// The position asked for.
        at: usize,
        /// Rules in the list.
        len: usize,
    },
    /// A batch with a different number of keys and answer slots.
    BatchLength {
        /// Keys given.
        keys: usize,
        /// Answer slots given.
        answers: usize,
    },
    /// A key with fewer values than the classifier has fields.
    ShortKey {
        /// The key's index in the batch.
        key: usize,
        /// Fields of the classifier.
        expected: usize,
        /// Values of the key.
        found: usize,
    },
    /// A line of a ClassBench file that does not parse.
    Syntax {
        /// The file's name.
        file: String,
        /// Line (from 1).
        line: usize,
        /// Column (from 1).
        col: usize,
        /// What was expected and found.
        what: String,
    },
}

/// How a rule is named in [`Error`] messages.
struct RuleName(Option<usize>);

impl fmt::Display for RuleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(i) => write!(f, "rule {i}"),
            None => f.write_str("inserted rule"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Fields(n) => write!(f, "expected 1 to 255 fields, found {n}"),
            Error::TooManyRules(n) => write!(f, "expected at most {MAX_RULES} rules, found {n}"),
            Error::Full => write!(f, "expected at most {MAX_RULES} rules"),
            Error::RuleFields {
                rule,
                expected,
                found,
            } => write!(
                f,
                "{}: expected {expected} fields, found {found}",
                RuleName(*rule)
            ),
            Error::EmptyRange { rule, field } => {
                write!(f, "{}: field {field} has an empty range", RuleName(*rule))
            }
            Error::InsertAt { at, len } => {
                write!(f, "cannot insert at {at}: there are {len} rules")
            }
            Error::RemoveAt { at, len } => {
                write!(f, "cannot remove rule {at}: there are {len} rules")
            }
            Error::BatchLength { keys, answers } => {
                write!(f, "{keys} keys but room for {answers} answers")
            }
            Error::ShortKey {
                key,
                expected,
                found,
            } => write!(f, "key {key}: expected {expected} values, found {found}"),
            Error::Syntax {
                file,
                line,
                col,
                what,
            } => write!(f, "{file}:{line}:{col}: {what}"),
        }
    }
}

impl std::error::Error for Error {}

/// A tree node in 16 bytes (four to a cache line). Nodes are laid out in preorder, so an
/// inner node's left child is the next node and only the right one is stored.
///
/// Three kinds, told apart by `dim`:
/// - inner node (`dim` < the number of fields): values `<= at` of field `dim` go left (to
///   the next node), the rest to `right`;
/// - leaf (`dim` == [`LEAF`]): `at` packs the index of its first rule in `leaf_rules` and
///   the number of rules ([`leaf_at`]); `right` is the leaf itself;
/// - jump (`dim` == [`JUMP`], `at` 0): go to `right` (an updated leaf whose replacement
///   subtree was appended at the end).
///
/// Leaves and jumps are shaped so that the branch-free step of a batch walk handles them
/// like inner nodes: the batch key buffer holds `u64::MAX` in the slot that `LEAF` and
/// `JUMP` select after masking, which is above every `at`, so the walk goes "right": a
/// jump moves on and a leaf stays where it is.
#[derive(Debug, Clone, Copy)]
struct Node {
    at: u64,
    right: u32,
    dim: u32,
}

/// [`Node::dim`] of a leaf.
const LEAF: u32 = u32::MAX;
/// [`Node::dim`] of a jump. Like [`LEAF`], every low bit is set (so masked by a
/// power-of-two key width it selects the last slot).
const JUMP: u32 = 0x7fff_ffff;

/// Leaves hold at most this many rules (the count is packed above bit 40 of a leaf's `at`).
const MAX_RULES: usize = (1 << 23) - 1;

/// A leaf's `at`: its first rule's index in `leaf_rules` and how many rules it has.
#[inline]
fn leaf_at(from: usize, count: usize) -> u64 {
    debug_assert!(from < 1 << 40 && count <= MAX_RULES);
    from as u64 | (count as u64) << 40
}

/// The range of a leaf's rules in `leaf_rules` (from its `at`).
#[inline]
fn leaf_span(at: u64) -> (usize, usize) {
    let from = (at & ((1 << 40) - 1)) as usize;
    (from, from + (at >> 40) as usize)
}

/// The ranges of a tree's leaf rules, in leaf order (`dims` per rule reference, rules
/// copied into every leaf that holds them), so a leaf's checks read consecutive bytes
/// instead of one scattered rule after another; as `u32` pairs when every bound of the rule
/// set fits (ClassBench: addresses, ports and protocols do), which halves those bytes,
/// else as `u64` pairs.
#[derive(Debug, Clone)]
enum Flat {
    Narrow(Vec<(u32, u32)>),
    Wide(Vec<Range>),
}

impl Default for Flat {
    fn default() -> Flat {
        Flat::Narrow(Vec::new())
    }
}

impl Flat {
    fn bytes(&self) -> usize {
        match self {
            Flat::Narrow(v) => v.len() * 8,
            Flat::Wide(v) => v.len() * 16,
        }
    }

    /// Appends `ranges` (one rule's).
    fn push(&mut self, ranges: &[Range]) {
        match self {
            Flat::Narrow(v) => v.extend(ranges.iter().map(|&(lo, hi)| (lo as u32, hi as u32))),
            Flat::Wide(v) => v.extend_from_slice(ranges),
        }
    }

    /// Overwrites the entry at `at` (a rule's ranges, `ranges.len()` of them per rule).
    fn set(&mut self, at: usize, ranges: &[Range]) {
        let d = ranges.len();
        match self {
            Flat::Narrow(v) => {
                for (x, &(lo, hi)) in v[at * d..].iter_mut().zip(ranges) {
                    *x = (lo as u32, hi as u32);
                }
            }
            Flat::Wide(v) => {
                for (x, &r) in v[at * d..].iter_mut().zip(ranges) {
                    *x = r;
                }
            }
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

/// [`first_match`] with `FIELDS` fields per rule, fixed at compile time (so the field checks
/// unroll).
#[inline(always)]
fn first_match_fixed<T: Copy + Into<u64>, const FIELDS: usize>(
    flat: &[[(T, T); FIELDS]],
    ids: &[u32],
    key: &[u64; FIELDS],
    bound: usize,
) -> Option<usize> {
    for (&r, rs) in ids.iter().zip(flat) {
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

/// Moves every rule index of tree `t` (leaves, members, first) that is at least `from`
/// one place: up (`+1`) after an insert, down (`-1`) after a remove. Branch-free over
/// plain slices, so that it vectorises: it is most of an update's time.
fn renumber(t: &mut Tree, from: u32, up: bool) {
    let shift = |v: &mut [u32]| {
        for r in v {
            let moved = u32::from(*r >= from);
            *r = if up {
                r.wrapping_add(moved)
            } else {
                r.wrapping_sub(moved)
            };
        }
    };
    shift(&mut t.leaf_rules);
    shift(&mut t.members);
    t.first = t.members.first().copied().unwrap_or(u32::MAX);
}

/// A node as the AVX-512 walk reads it: `[cut, right | field slot << 28]`. Leaves and jumps
/// select one of the key table's `u32::MAX` slots (13 to 15) and cut below `u32::MAX`, so
/// the walk goes to `right` (itself for a leaf); the slot and cut of a leaf say what the
/// leaf checks need: [`LEAF_ONE`] (one rule, the cut its index in `leaf_rules`),
/// [`LEAF_TWO`] (two rules, the cut the first one's index), [`LEAF_NONE`] (no rule) or
/// [`LEAF_MANY`]. Only for classifiers whose bounds fit `u32`,
/// with at most 8 fields and fewer than 2^27 nodes per tree.
fn walk_entry(node: &Node) -> [u32; 2] {
    match node.dim {
        LEAF => {
            let (from, to) = leaf_span(node.at);
            match to - from {
                0 => [0, node.right | LEAF_NONE << 28],
                1 if from < u32::MAX as usize => [from as u32, node.right | LEAF_ONE << 28],
                2 if from + 1 < u32::MAX as usize => [from as u32, node.right | LEAF_TWO << 28],
                _ => [0, node.right | LEAF_MANY << 28],
            }
        }
        JUMP => [0, node.right | 15 << 28],
        d => [node.at as u32, node.right | d << 28],
    }
}

/// The walk slot of a leaf of one rule ([`walk_entry`]).
const LEAF_ONE: u32 = 15;
/// The walk slot of a leaf of no rule ([`walk_entry`]).
const LEAF_NONE: u32 = 14;
/// The walk slot of a leaf of more than two rules ([`walk_entry`]).
const LEAF_MANY: u32 = 13;
/// The walk slot of a leaf of two rules ([`walk_entry`]).
const LEAF_TWO: u32 = 12;

/// Whether the AVX-512 batch walk can run here (x86-64 with AVX-512F, detected at run
/// time).
fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
use avx512::Keys as SimdKeys;

thread_local! {
    /// This thread's key buffer for the AVX-512 lookup ([`Classifier::classify_batch`]).
    static SIMD_KEYS: std::cell::RefCell<Box<SimdKeys>> = std::cell::RefCell::new(Box::default());
}

/// Stands in for `avx512::Keys` where there is no AVX-512 (never filled).
#[cfg(not(target_arch = "x86_64"))]
#[derive(Default)]
struct SimdKeys;

#[cfg(not(target_arch = "x86_64"))]
impl SimdKeys {
    fn fill<K: AsRef<[V]>, V: KeyValue>(&mut self, _: &[K], _: usize) -> bool {
        false
    }
    fn key(&self, _: usize) -> Vec<u64> {
        Vec::new()
    }
}

/// The AVX-512 lookup of the first `n` keys in tree `t` (see `avx512::tree`; `all`: every
/// key, without reading `best`): false when it cannot be used there.
#[cfg(target_arch = "x86_64")]
fn simd_tree(
    t: &Tree,
    dims: usize,
    keys: &SimdKeys,
    n: usize,
    best: &mut [u32; BATCH],
    all: bool,
) -> bool {
    avx512::tree(t, dims, keys, n, best, all)
}

#[cfg(not(target_arch = "x86_64"))]
fn simd_tree(_: &Tree, _: usize, _: &SimdKeys, _: usize, _: &mut [u32; BATCH], _: bool) -> bool {
    false
}

/// The rule indices of leaf `n`.
fn leaf_ids(t: &Tree, n: u32) -> &[u32] {
    let (from, to) = t
        .nodes
        .get(n as usize)
        .map_or((0, 0), |node| leaf_span(node.at));
    t.leaf_rules.get(from..to).unwrap_or(&[])
}

/// Whether `r` covers the whole box `space`.
fn covers(r: &Rule, space: &[Range]) -> bool {
    r.ranges
        .iter()
        .zip(space)
        .all(|(&(lo, hi), &(a, b))| lo <= a && b <= hi)
}

/// Whether rules `a` and `b` have a point in common inside the box `space`.
fn overlap_in(a: &Rule, b: &Rule, space: &[Range]) -> bool {
    a.ranges
        .iter()
        .zip(&b.ranges)
        .zip(space)
        .all(|((&(a0, a1), &(b0, b1)), &(s0, s1))| a0.max(b0).max(s0) <= a1.min(b1).min(s1))
}

/// Whether `r` overlaps the box `space`.
fn overlaps(r: &Rule, space: &[Range]) -> bool {
    r.ranges
        .iter()
        .zip(space)
        .all(|(&(lo, hi), &(a, b))| lo <= b && a <= hi)
}

/// One decision tree over a subset of the rules.
#[derive(Debug, Clone, Default)]
struct Tree {
    nodes: Vec<Node>,
    /// `nodes` as the AVX-512 walk reads them ([`walk_entry`]), kept for classifiers whose
    /// bounds fit `u32`, of at most 8 fields (empty otherwise; see `sync_walk`).
    walk: Vec<[u32; 2]>,
    leaf_rules: Vec<u32>,
    /// The ranges of `leaf_rules`, in the same order.
    leaf_flat: Flat,
    /// The highest-priority (lowest) rule index in the tree.
    first: u32,
    /// Past this many nodes, [`Classifier::build`] makes leaves instead of cutting.
    budget: usize,
    /// The tree's rule group ([`Classifier::group`]).
    group: usize,
    /// The indices of the group's rules, in order.
    members: Vec<u32>,
    /// Entries of `leaf_rules` no leaf uses any more, plus jump nodes (left by updates).
    stale: usize,
    /// Inserts and removes since the tree was compiled.
    updates: usize,
}

/// Rules compiled into decision trees; [`Classifier::classify`] gives the index of the
/// first rule (in the order given) that matches.
///
/// Rules are first partitioned (as CutSplit does) by whether each of two fields (those
/// with the most wide rules: the addresses, for 5-tuple rules) is narrow (fewer than 2^28 values: an IPv4 prefix of
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
    /// Every bound fits in `u32` (leaf ranges are stored as `u32` pairs).
    narrow: bool,
    /// Trees rebuilt from scratch by updates (their stale entries having grown too many).
    rebuilds: usize,
    /// The two fields whose width partitions the rules (see [`Classifier`]).
    part: [usize; 2],
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
            return Err(Error::Fields(dims));
        }
        if rules.len() > MAX_RULES {
            return Err(Error::TooManyRules(rules.len()));
        }
        for (i, r) in rules.iter().enumerate() {
            Self::check_rule(dims, r, Some(i))?;
        }
        let narrow = rules.iter().all(Self::fits_u32);
        let part = Self::partition_fields(&rules, dims);
        let mut c = Classifier {
            dims,
            rules,
            trees: Vec::new(),
            narrow,
            rebuilds: 0,
            part,
        };
        c.build_all();
        Ok(c)
    }

    /// Checks that `r` has one non-empty range per field of `dims` (`rule`: its index in
    /// errors, `None` for a rule being inserted).
    fn check_rule(dims: usize, r: &Rule, rule: Option<usize>) -> Result<(), Error> {
        if r.ranges.len() != dims {
            return Err(Error::RuleFields {
                rule,
                expected: dims,
                found: r.ranges.len(),
            });
        }
        if let Some(field) = r.ranges.iter().position(|(lo, hi)| lo > hi) {
            return Err(Error::EmptyRange { rule, field });
        }
        Ok(())
    }

    fn fits_u32(r: &Rule) -> bool {
        r.ranges.iter().all(|&(_, hi)| hi <= u64::from(u32::MAX))
    }

    /// The two fields with the most wide rules (ties to the earlier field): the addresses
    /// of 5-tuple rules, wherever they are in the key. (Partitioning by fields where no
    /// rule is wide, a protocol or a port, puts every rule in one tree, which multiplies
    /// the wildcards: an `IPFilter` over 10k ClassBench rules whose first fields were the
    /// protocol and a flag made 5.7 million nodes, 750 MB.)
    fn partition_fields(rules: &[Rule], dims: usize) -> [usize; 2] {
        let mut wide = vec![0usize; dims];
        for r in rules {
            for (d, &(lo, hi)) in r.ranges.iter().enumerate() {
                if hi - lo >= NARROW {
                    if let Some(w) = wide.get_mut(d) {
                        *w += 1;
                    }
                }
            }
        }
        let mut order: Vec<usize> = (0..dims).collect();
        order.sort_by_key(|&d| std::cmp::Reverse(wide[d]));
        [
            order.first().copied().unwrap_or(0),
            order.get(1).copied().unwrap_or(usize::MAX),
        ]
    }

    /// A rule's group: whether each of the two partitioning fields is wide.
    fn group(&self, r: &Rule) -> usize {
        let wide = |d: usize| r.ranges.get(d).is_some_and(|&(lo, hi)| hi - lo >= NARROW);
        usize::from(wide(self.part[0])) | (usize::from(wide(self.part[1])) << 1)
    }

    /// Compiles every group's tree.
    fn build_all(&mut self) {
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); 4];
        for (i, r) in self.rules.iter().enumerate() {
            groups[self.group(r)].push(i as u32);
        }
        let trees: Vec<Tree> = groups
            .into_iter()
            .enumerate()
            .filter(|(_, g)| !g.is_empty())
            .map(|(group, g)| self.make_tree(group, g))
            .collect();
        self.trees = trees;
        self.trees.sort_by_key(|t| t.first);
    }

    /// The tree of `group` over `members` (rule indices in order, at least one).
    fn make_tree(&self, group: usize, members: Vec<u32>) -> Tree {
        let mut t = Tree {
            first: members.first().copied().unwrap_or(u32::MAX),
            budget: NODE_BUDGET * members.len() + 1024,
            group,
            members: members.clone(),
            leaf_flat: if self.narrow {
                Flat::Narrow(Vec::new())
            } else {
                Flat::Wide(Vec::new())
            },
            ..Tree::default()
        };
        self.build(&mut t, members, vec![(0, u64::MAX); self.dims], 0);
        self.flat_from(&mut t, 0);
        self.sync_walk(&mut t, 0);
        t
    }

    /// Brings `t.walk` up to date after node `n` changed and nodes were appended (clears
    /// it when leaf ranges are not `u32`, with more than 8 fields, or from 2^27 nodes).
    fn sync_walk(&self, t: &mut Tree, n: u32) {
        if !self.narrow || self.dims > 8 || t.nodes.len() >= 1 << 27 {
            t.walk = Vec::new();
            return;
        }
        if let (Some(w), Some(node)) = (t.walk.get_mut(n as usize), t.nodes.get(n as usize)) {
            *w = walk_entry(node);
        }
        let have = t.walk.len();
        t.walk
            .extend(t.nodes.get(have..).unwrap_or(&[]).iter().map(walk_entry));
    }

    /// Appends to `t.leaf_flat` the ranges of `t.leaf_rules[from..]`.
    fn flat_from(&self, t: &mut Tree, from: usize) {
        for &r in &t.leaf_rules[from..] {
            t.leaf_flat.push(&self.rules[r as usize].ranges);
        }
    }

    /// Inserts `rule` so that it becomes rule `at` (`at` at most the number of rules); the
    /// rules from `at` on move one place down, as with `Vec::insert`, and lookups keep
    /// answering positions in the current list. Only the leaves of its group's tree whose
    /// box the rule overlaps are rewritten (see the crate docs); a rule with a bound beyond
    /// `u32` in a classifier whose leaf ranges are stored as `u32` recompiles everything.
    pub fn insert(&mut self, at: usize, rule: Rule) -> Result<(), Error> {
        if at > self.rules.len() {
            return Err(Error::InsertAt {
                at,
                len: self.rules.len(),
            });
        }
        if self.rules.len() >= MAX_RULES {
            return Err(Error::Full);
        }
        Self::check_rule(self.dims, &rule, None)?;
        let a = at as u32;
        for t in &mut self.trees {
            renumber(t, a, true);
        }
        let group = self.group(&rule);
        let fits = Self::fits_u32(&rule);
        self.rules.insert(at, rule);
        if self.narrow && !fits {
            self.narrow = false;
            self.build_all();
            return Ok(());
        }
        let Some(ti) = self.trees.iter().position(|t| t.group == group) else {
            let t = self.make_tree(group, vec![a]);
            self.trees.push(t);
            self.trees.sort_by_key(|t| t.first);
            return Ok(());
        };
        let mut t = std::mem::take(&mut self.trees[ti]);
        let p = t.members.partition_point(|&r| r < a);
        t.members.insert(p, a);
        t.first = t.members[0];
        let rule = &self.rules[at];
        for (n, space, depth) in self.leaves_overlapping(&t, rule) {
            let ids = leaf_ids(&t, n);
            // The leaf's rules: those overlapping its box, up to the first covering it.
            if ids
                .last()
                .is_some_and(|&l| l < a && covers(&self.rules[l as usize], &space))
            {
                continue; // hidden here by an earlier rule covering the box
            }
            let mut list = ids.to_vec();
            let p = list.partition_point(|&r| r < a);
            list.insert(p, a);
            if covers(rule, &space) {
                list.truncate(p + 1);
            }
            self.set_leaf(&mut t, n, list, space, depth);
        }
        self.trees[ti] = t;
        self.after_update(ti);
        Ok(())
    }

    /// Removes rule `at` and returns it; the rules after it move one place up, as with
    /// `Vec::remove`. Only the leaves that held it are rewritten; where it covered a
    /// leaf's whole box (hiding every later rule there), the later rules overlapping the
    /// box come back.
    pub fn remove(&mut self, at: usize) -> Result<Rule, Error> {
        if at >= self.rules.len() {
            return Err(Error::RemoveAt {
                at,
                len: self.rules.len(),
            });
        }
        let a = at as u32;
        let group = self.group(&self.rules[at]);
        if let Some(ti) = self.trees.iter().position(|t| t.group == group) {
            let mut t = std::mem::take(&mut self.trees[ti]);
            if let Ok(p) = t.members.binary_search(&a) {
                t.members.remove(p);
            }
            let rule = &self.rules[at];
            // Later rules of the group overlapping the removed one (computed once needed).
            let mut later: Option<Vec<u32>> = None;
            for (n, space, depth) in self.leaves_overlapping(&t, rule) {
                let ids = leaf_ids(&t, n);
                let Some(p) = ids.iter().position(|&r| r == a) else {
                    continue;
                };
                let mut list = ids.to_vec();
                list.remove(p);
                if p + 1 == ids.len() && covers(rule, &space) {
                    let later = later.get_or_insert_with(|| {
                        let from = t.members.partition_point(|&r| r < a);
                        t.members[from..]
                            .iter()
                            .copied()
                            .filter(|&r| overlaps(&self.rules[r as usize], &rule.ranges))
                            .collect()
                    });
                    for &r in later.iter() {
                        let x = &self.rules[r as usize];
                        if overlaps(x, &space) {
                            list.push(r);
                            if covers(x, &space) {
                                break;
                            }
                        }
                    }
                }
                self.set_leaf(&mut t, n, list, space, depth);
            }
            self.trees[ti] = t;
            if self.trees[ti].members.is_empty() {
                self.trees.remove(ti);
            } else {
                self.after_update(ti);
            }
        }
        let rule = self.rules.remove(at);
        for t in &mut self.trees {
            renumber(t, a + 1, false);
        }
        self.trees.sort_by_key(|t| t.first);
        Ok(rule)
    }

    /// After an update of tree `ti`: recompiles it when its stale entries and jumps have
    /// grown past half its size, or after as many updates as it has rules (at least 64:
    /// subtrees compiled leaf by leaf, and cuts left over from removed rules, are not as
    /// good as a fresh tree), and restores the trees' order.
    fn after_update(&mut self, ti: usize) {
        let t = &mut self.trees[ti];
        t.updates += 1;
        if t.stale * 2 > t.nodes.len() + t.leaf_rules.len() || t.updates >= t.members.len().max(64)
        {
            let (group, members) = (t.group, t.members.clone());
            self.trees[ti] = self.make_tree(group, members);
            self.rebuilds += 1;
        }
        self.trees.sort_by_key(|t| t.first);
    }

    /// The leaves of `t` whose box overlaps `rule`: (node, box, depth).
    fn leaves_overlapping(&self, t: &Tree, rule: &Rule) -> Vec<(u32, Vec<Range>, usize)> {
        let mut out = Vec::new();
        let mut todo = vec![(0u32, vec![(0, u64::MAX); self.dims], 0usize)];
        while let Some((n, space, depth)) = todo.pop() {
            let Some(node) = t.nodes.get(n as usize) else {
                continue;
            };
            match node.dim {
                LEAF => out.push((n, space, depth)),
                JUMP => todo.push((node.right, space, depth)),
                d => {
                    let d = d as usize;
                    let (Some(&(lo, hi)), Some(&(a, b))) = (rule.ranges.get(d), space.get(d))
                    else {
                        continue;
                    };
                    if hi > node.at {
                        let mut rs = space.clone();
                        rs[d] = (node.at + 1, b);
                        todo.push((node.right, rs, depth + 1));
                    }
                    if lo <= node.at {
                        let mut ls = space;
                        ls[d] = (a, node.at);
                        todo.push((n + 1, ls, depth + 1));
                    }
                }
            }
        }
        out
    }

    /// Gives leaf `n` of `t` (box `space`, at `depth`) the rules `list`: in place when they
    /// fit, else as a new leaf at the end of `leaf_rules`, or, past the leaf size
    /// ([`leaf_size`](Self::leaf_size)), as a
    /// new subtree at the end of `nodes` that `n` becomes a jump to.
    fn set_leaf(&self, t: &mut Tree, n: u32, list: Vec<u32>, space: Vec<Range>, depth: usize) {
        let Some(&node) = t.nodes.get(n as usize) else {
            return;
        };
        let (from, to) = leaf_span(node.at);
        let old = to - from;
        if list.len() <= old {
            for (k, &r) in list.iter().enumerate() {
                t.leaf_rules[from + k] = r;
                t.leaf_flat.set(from + k, &self.rules[r as usize].ranges);
            }
            t.nodes[n as usize].at = leaf_at(from, list.len());
            t.stale += old - list.len();
        } else if list.len() <= self.leaf_size() {
            let start = t.leaf_rules.len();
            t.leaf_rules.extend_from_slice(&list);
            self.flat_from(t, start);
            t.nodes[n as usize].at = leaf_at(start, list.len());
            t.stale += old;
        } else {
            let start = t.leaf_rules.len();
            t.budget = t.nodes.len() + NODE_BUDGET * list.len() + 1024;
            let root = self.build(t, list, space, depth);
            self.flat_from(t, start);
            t.nodes[n as usize] = Node {
                at: 0,
                right: root,
                dim: JUMP,
            };
            t.stale += old + 1;
        }
        self.sync_walk(t, n);
    }

    /// At most this many rules per leaf: [`SIMD_LEAF_RULES`] where batches use the AVX-512
    /// lookup (bounds fitting `u32`, at most 8 fields, a CPU with AVX-512F), else
    /// [`LEAF_RULES`].
    fn leaf_size(&self) -> usize {
        if self.simd_leaves() {
            SIMD_LEAF_RULES
        } else {
            LEAF_RULES
        }
    }

    /// Whether trees are built for the AVX-512 lookup (bounds fitting `u32`, at most 8
    /// fields, a CPU with AVX-512F): leaves of [`SIMD_LEAF_RULES`] (two where two rules
    /// overlap), cuts by [`balanced_split`](Self::balanced_split).
    fn simd_leaves(&self) -> bool {
        self.narrow && self.dims <= 8 && simd_available()
    }

    /// How many times an [`insert`](Self::insert) or [`remove`](Self::remove) recompiled a
    /// whole tree (because the space earlier updates left unused had grown past half the
    /// tree, or after as many updates as the tree has rules).
    pub fn rebuilds(&self) -> usize {
        self.rebuilds
    }

    /// Builds the subtree for `rules` (sorted by priority) inside `space`; returns its node.
    fn build(&self, t: &mut Tree, rules: Vec<u32>, space: Vec<Range>, depth: usize) -> u32 {
        // A rule covering the whole box matches every packet here: nothing after it can.
        let rules = match rules
            .iter()
            .position(|&r| covers(&self.rules[r as usize], &space))
        {
            Some(k) => rules[..=k].to_vec(),
            None => rules,
        };
        let id = t.nodes.len() as u32;
        if rules.len() <= self.leaf_size() || depth >= MAX_DEPTH || t.nodes.len() >= t.budget {
            return Self::leaf(t, &rules);
        }
        if let [a, b] = rules[..] {
            if self.simd_leaves()
                && overlap_in(&self.rules[a as usize], &self.rules[b as usize], &space)
            {
                // Separating two rules that overlap here takes up to two cuts per field
                // (the box shrunk to the first until it covers it): a leaf of two instead.
                return Self::leaf(t, &rules);
            }
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
        let from = t.leaf_rules.len();
        t.leaf_rules.extend_from_slice(rules);
        let id = t.nodes.len() as u32;
        t.nodes.push(Node {
            at: leaf_at(from, rules.len()),
            right: id,
            dim: LEAF,
        });
        id
    }

    /// The field and value to cut at: [`balanced_split`](Self::balanced_split) where
    /// trees are built for the AVX-512 lookup, else
    /// [`split_point_median`](Self::split_point_median).
    fn split_point(&self, rules: &[u32], space: &[Range]) -> Option<(usize, u64)> {
        if self.simd_leaves() {
            self.balanced_split(rules, space)
        } else {
            self.split_point_median(rules, space)
        }
    }

    /// The cut for the portable lookup: per field, the median of the rule boundaries inside
    /// the box; of those, the cut that sends the fewest rule copies down (rules on both
    /// sides count twice), ties to the more even one. `None` when no cut separates anything.
    fn split_point_median(&self, rules: &[u32], space: &[Range]) -> Option<(usize, u64)> {
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

    /// The field and value to cut at for the AVX-512 lookup: of every cut point of every
    /// field (a rule's end, or the value before a rule's start, strictly inside the box),
    /// the one whose larger side holds the fewest rules (rules on both sides count on
    /// both), ties to the fewest copies. `None` when no field has a cut point.
    ///
    /// *Decision:* the AVX-512 walk steps a block of 64 keys until its deepest key reaches
    /// a leaf, so the tree's deep paths, not its average, set the walk's cost. The median
    /// of a field's distinct boundaries ([`split_point`](Self::split_point)) can leave
    /// most rules on one side (acl5: 15.3 steps per key on average, 23.0 for the deepest
    /// of each block); the most even cut over all candidates, with leaves of two for
    /// overlapping pairs, gives 13.0 and 15.0 and 1.15-1.18 times the lookup rate on acl5,
    /// 1.04-1.16 on the other acl sets, 0.95-1.04 on fw and ipc2 (same process,
    /// alternating; `docs/benchmarks.md`). Either change alone gave at most 1.07 on acl5.
    fn balanced_split(&self, rules: &[u32], space: &[Range]) -> Option<(usize, u64)> {
        let n = rules.len();
        let mut best: Option<((usize, usize), usize, u64)> = None;
        let mut starts: Vec<u64> = Vec::with_capacity(n);
        let mut ends: Vec<u64> = Vec::with_capacity(n);
        let mut cuts: Vec<u64> = Vec::with_capacity(n * 2);
        for (d, &(lo, hi)) in space.iter().enumerate() {
            starts.clear();
            ends.clear();
            cuts.clear();
            for &r in rules {
                let Some(&(a, b)) = self.rules.get(r as usize).and_then(|x| x.ranges.get(d)) else {
                    continue;
                };
                starts.push(a);
                ends.push(b);
                if a > lo && a <= hi {
                    cuts.push(a - 1);
                }
                if b >= lo && b < hi {
                    cuts.push(b);
                }
            }
            cuts.sort_unstable();
            cuts.dedup();
            starts.sort_unstable();
            ends.sort_unstable();
            // Left of cut `c`: the rules starting at or before it; right: those ending
            // after it. Both counts only grow / shrink as `c` rises.
            let (mut i, mut j) = (0usize, 0usize);
            for &c in &cuts {
                while starts.get(i).is_some_and(|&a| a <= c) {
                    i += 1;
                }
                while ends.get(j).is_some_and(|&b| b <= c) {
                    j += 1;
                }
                let (l, r) = (i, ends.len() - j);
                let cost = (l.max(r), l + r);
                if best.is_none_or(|(bc, _, _)| cost < bc) {
                    best = Some((cost, d, c));
                }
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

    /// Classifies many keys at once: `out[i]` becomes [`classify`](Self::classify)`(keys[i])`
    /// (the index of the first rule `keys[i]` matches, if any).
    ///
    /// Keys are any slices of values, one per field (`&[[u64; 5]]`, `&[[u32; 5]]`,
    /// `&[Vec<u64>]`, ...);
    /// values beyond the classifier's [`dims`](Self::dims) are ignored. It is faster than
    /// one [`classify`](Self::classify) call per key: blocks of [`BATCH`] keys go through
    /// each tree [`LANES`] at a time, in lockstep, each step choosing every key's child
    /// without a branch, so the node loads of different keys overlap and the walk
    /// mispredicts no branch per node (one call per 64 or more keys gets the full effect;
    /// rte_acl's figures are for batches of 64). With AVX-512F (detected at run time),
    /// classifiers whose bounds fit `u32` with at most 8 fields walk the blocks in
    /// AVX-512 registers (see the crate docs). Classifiers of more than 15 fields fall back
    /// to one [`classify`](Self::classify) per key.
    ///
    /// Values are `u64` or `u32` ([`KeyValue`]): `u32` keys (where every field fits, as
    /// in IPv4 5-tuples) read half the memory, which the AVX-512 lookup feels (filling its
    /// key table from `[u64; 5]` keys was 13-19 % of its time on ClassBench sets).
    ///
    /// Errors (leaving `out` unchanged) when `out` and `keys` differ in length or a key has
    /// fewer values than there are fields.
    pub fn classify_batch<K: AsRef<[V]>, V: KeyValue>(
        &self,
        keys: &[K],
        out: &mut [Option<usize>],
    ) -> Result<(), Error> {
        if keys.len() != out.len() {
            return Err(Error::BatchLength {
                keys: keys.len(),
                answers: out.len(),
            });
        }
        if let Some(i) = keys.iter().position(|k| k.as_ref().len() < self.dims) {
            return Err(Error::ShortKey {
                key: i,
                expected: self.dims,
                found: keys[i].as_ref().len(),
            });
        }
        if self.narrow
            && self.dims <= 8
            && self.trees.iter().all(|t| !t.walk.is_empty())
            && simd_available()
        {
            // The AVX-512 lookup's key buffer, filled block by block (see `avx512`): this
            // thread's, kept across calls (setting up 4 KB per call of 64 keys cost 2-4 %);
            // a fresh one if it is in use.
            SIMD_KEYS.with(|cell| {
                let mut fresh = None;
                let mut held = cell.try_borrow_mut();
                let sk: &mut SimdKeys = match held.as_deref_mut() {
                    Ok(sk) => sk,
                    Err(_) => fresh.get_or_insert_with(Box::<SimdKeys>::default),
                };
                for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
                    if sk.fill(ks, self.dims) {
                        self.simd_block(sk, ks.len(), os);
                    } else {
                        self.portable_block(ks, os);
                    }
                }
            });
        } else {
            for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
                self.portable_block(ks, os);
            }
        }
        Ok(())
    }

    /// [`classify_batch`](Self::classify_batch) of at most [`BATCH`] keys by the portable
    /// lockstep walk.
    fn portable_block<K: AsRef<[V]>, V: KeyValue>(&self, ks: &[K], os: &mut [Option<usize>]) {
        // Leaf checks with the number of fields known at compile time run 4-6 % faster
        // (ClassBench 10k sets, 5 fields; the others share the generic code).
        match self.dims {
            5 => self.batch_block::<8, 5, K, V>(ks, os),
            1..8 => self.batch_block::<8, 0, K, V>(ks, os),
            8..16 => self.batch_block::<16, 0, K, V>(ks, os),
            _ => {
                for (k, o) in ks.iter().zip(os) {
                    let k: Vec<u64> = k.as_ref().iter().map(|&v| v.into()).collect();
                    *o = self.classify(&k);
                }
            }
        }
    }

    /// [`classify_batch`](Self::classify_batch) of at most [`BATCH`] keys, with `SLOTS` (a
    /// power of two above [`dims`](Self::dims)) values per key in the buffer: the fields,
    /// then `u64::MAX` (the slot leaves and jumps select, see [`Node`]). `FIELDS` is the number
    /// of fields when it is fixed at compile time, else 0.
    #[inline(never)]
    fn batch_block<const SLOTS: usize, const FIELDS: usize, K: AsRef<[V]>, V: KeyValue>(
        &self,
        keys: &[K],
        out: &mut [Option<usize>],
    ) {
        let d = self.dims;
        let mut buf = [[u64::MAX; SLOTS]; BATCH];
        for (b, k) in buf.iter_mut().zip(keys) {
            for (x, &v) in b.iter_mut().zip(k.as_ref().iter().take(d)) {
                *x = v.into();
            }
        }
        let mut best = [usize::MAX; BATCH];
        let mut todo = [0u8; BATCH];
        for t in &self.trees {
            // The keys for which this tree's best rule could still win.
            let mut m = 0;
            for (i, &b) in best.iter().enumerate().take(keys.len()) {
                todo[m] = i as u8;
                m += usize::from(b > t.first as usize);
            }
            if m == 0 {
                continue;
            }
            let (full, rest) = todo[..m].split_at(m - m % LANES);
            for lanes in full.chunks_exact(LANES) {
                self.lanes::<SLOTS, LANES, FIELDS>(t, &buf, lanes, &mut best);
            }
            for lanes in rest.chunks(FEW_LANES) {
                self.lanes::<SLOTS, FEW_LANES, FIELDS>(t, &buf, lanes, &mut best);
            }
        }
        for (o, &b) in out.iter_mut().zip(&best) {
            *o = (b != usize::MAX).then_some(b);
        }
    }

    /// Walks the keys `buf[i]` of `idx` (at most `GROUP`) through tree `t` in lockstep, then
    /// lowers `best[i]` to the first rule each matches in its leaf, if that is lower (`FIELDS`:
    /// see [`batch_block`](Self::batch_block)).
    #[inline(always)]
    fn lanes<const SLOTS: usize, const GROUP: usize, const FIELDS: usize>(
        &self,
        t: &Tree,
        buf: &[[u64; SLOTS]; BATCH],
        idx: &[u8],
        best: &mut [usize; BATCH],
    ) {
        let Some(&last) = idx.last() else {
            return;
        };
        // Short groups repeat their last key (computing its answer twice).
        let mut lk = [buf[last as usize % BATCH]; GROUP];
        for (k, &i) in lk.iter_mut().zip(idx) {
            *k = buf[i as usize % BATCH];
        }
        let mut n = [0u32; GROUP];
        {
            self.walk_lanes::<SLOTS, GROUP>(t, &lk, &mut n);
        }
        let nodes = &t.nodes[..];
        let Some(top) = nodes.len().checked_sub(1) else {
            return;
        };
        for ((&nl, k), &i) in n.iter().zip(&lk).zip(idx) {
            let i = i as usize % BATCH;
            let node = nodes[(nl as usize).min(top)];
            let r = if FIELDS > 0 && FIELDS < SLOTS && FIELDS == self.dims {
                self.leaf_match_fixed::<FIELDS>(t, node.at, &k[..FIELDS], best[i])
            } else {
                self.leaf_match(t, node.at, &k[..self.dims.min(SLOTS)], best[i])
            };
            if let Some(r) = r {
                best[i] = r;
            }
        }
    }

    /// [`classify_batch`](Self::classify_batch) of the `n` keys in `keys` (at most
    /// [`BATCH`]) with the AVX-512 lookup (see `avx512`), a tree at a time.
    fn simd_block(&self, keys: &SimdKeys, n: usize, out: &mut [Option<usize>]) {
        // Best rule so far per key (`u32::MAX`: none); rule indices fit `u32`.
        let mut best = [u32::MAX; BATCH];
        for (ti, t) in self.trees.iter().enumerate() {
            // The first tree walks every key (each one's best is still none).
            if !simd_tree(t, self.dims, keys, n, &mut best, ti == 0) {
                // (Not reached: `classify_batch` checked every tree has its walk form.)
                for (i, b) in best.iter_mut().enumerate().take(n) {
                    if *b > t.first {
                        if let Some(r) = self.classify_in(t, &keys.key(i), *b as usize) {
                            *b = r as u32;
                        }
                    }
                }
            }
        }
        for (o, &b) in out.iter_mut().zip(&best) {
            *o = (b != u32::MAX).then_some(b as usize);
        }
    }

    /// The portable lockstep walk of `lk` through `t`: `n` becomes each key's leaf.
    #[inline(always)]
    fn walk_lanes<const SLOTS: usize, const GROUP: usize>(
        &self,
        t: &Tree,
        lk: &[[u64; SLOTS]; GROUP],
        n: &mut [u32; GROUP],
    ) {
        let nodes = &t.nodes[..];
        let Some(top) = nodes.len().checked_sub(1) else {
            return;
        };
        loop {
            let mut moved = 0u32;
            for (nl, k) in n.iter_mut().zip(lk) {
                let cur = *nl;
                // (Always in bounds; the `min` spares a branch.)
                let node = nodes[(cur as usize).min(top)];
                let v = k[node.dim as usize & (SLOTS - 1)];
                let next =
                    std::hint::select_unpredictable(v <= node.at, cur.wrapping_add(1), node.right);
                moved |= next ^ cur;
                *nl = next;
            }
            if moved == 0 {
                break;
            }
        }
    }

    /// The first rule of tree `t` that `key` matches, if it is below `bound`.
    #[inline]
    fn classify_in(&self, t: &Tree, key: &[u64], bound: usize) -> Option<usize> {
        let mut n = 0usize;
        loop {
            let node = *t.nodes.get(n)?;
            if node.dim as usize >= self.dims {
                if node.dim == LEAF {
                    return match key.get(..5) {
                        Some(k5) if self.dims == 5 => {
                            self.leaf_match_fixed::<5>(t, node.at, k5, bound)
                        }
                        _ => self.leaf_match(t, node.at, key, bound),
                    };
                }
                n = node.right as usize; // a jump
                continue;
            }
            let v = key.get(node.dim as usize).copied().unwrap_or(0);
            n = if v <= node.at {
                n + 1
            } else {
                node.right as usize
            };
        }
    }

    /// The first rule of the leaf whose `at` is `at` that `key` matches, if below `bound`.
    #[inline(always)]
    fn leaf_match(&self, t: &Tree, at: u64, key: &[u64], bound: usize) -> Option<usize> {
        let (from, to) = leaf_span(at);
        let ids = t.leaf_rules.get(from..to)?;
        let d = self.dims;
        match &t.leaf_flat {
            Flat::Narrow(f) => first_match(f.get(from * d..to * d)?, d, ids, key, bound),
            Flat::Wide(f) => first_match(f.get(from * d..to * d)?, d, ids, key, bound),
        }
    }

    /// [`leaf_match`](Self::leaf_match) with `FIELDS` fields (the classifier's, at least
    /// `key.len()`), fixed at compile time.
    #[inline(always)]
    fn leaf_match_fixed<const FIELDS: usize>(
        &self,
        t: &Tree,
        at: u64,
        key: &[u64],
        bound: usize,
    ) -> Option<usize> {
        let key: &[u64; FIELDS] = key.try_into().ok()?;
        let (from, to) = leaf_span(at);
        let ids = t.leaf_rules.get(from..to)?;
        match &t.leaf_flat {
            Flat::Narrow(f) => first_match_fixed(
                f.get(from * FIELDS..to * FIELDS)?.as_chunks().0,
                ids,
                key,
                bound,
            ),
            Flat::Wide(f) => first_match_fixed(
                f.get(from * FIELDS..to * FIELDS)?.as_chunks().0,
                ids,
                key,
                bound,
            ),
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
                + t.walk.len() * 8
                + t.leaf_rules.len() * 4
                + t.leaf_flat.bytes();
            let mut todo = vec![(0u32, 1usize)];
            while let Some((n, d)) = todo.pop() {
                st.depth = st.depth.max(d);
                match t.nodes.get(n as usize) {
                    Some(node) if node.dim == JUMP => todo.push((node.right, d)),
                    Some(node) if node.dim != LEAF => {
                        todo.push((n + 1, d + 1));
                        todo.push((node.right, d + 1));
                    }
                    _ => {}
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
    fn batches_refuse_mismatched_lengths_and_short_keys() {
        let c = Classifier::new(vec![rule(&[(1, 5), (0, 9)])], 2).unwrap();
        let mut out = vec![Some(7); 2];
        assert!(c.classify_batch(&[[1u64, 2]], &mut out).is_err());
        let keys: Vec<Vec<u64>> = vec![vec![1, 2], vec![3]];
        let e = c.classify_batch(&keys, &mut out).unwrap_err();
        assert_eq!(
            e,
            Error::ShortKey {
                key: 1,
                expected: 2,
                found: 1
            }
        );
        assert_eq!(e.to_string(), "key 1: expected 2 values, found 1");
        assert_eq!(out, vec![Some(7); 2], "left unchanged");
        // Extra values are ignored; an empty batch is fine.
        c.classify_batch(&[[3u64, 9, 100], [0, 0, 0]], &mut out)
            .unwrap();
        assert_eq!(out, vec![Some(0), None]);
        c.classify_batch::<[u64; 2], u64>(&[], &mut []).unwrap();
    }

    /// The partition is by the fields where rules are wide, wherever they are: the same
    /// firewall-like rules (addresses wildcarded or not) with a protocol and a flag field
    /// put first give the same trees as with the addresses first (up to ties).
    #[test]
    fn partition_follows_the_wide_fields() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let addr = |v: u64| -> Range {
            match v % 3 {
                0 => (0, u32::MAX.into()),
                1 => {
                    let a = v >> 40 << 8;
                    (a, a + 255)
                }
                _ => (v >> 32, v >> 32),
            }
        };
        let mut first = Vec::new();
        let mut last = Vec::new();
        for _ in 0..2000 {
            let (s, d, p) = (addr(next()), addr(next()), next() % 256);
            let port = match next() % 2 {
                0 => (0, 65535),
                _ => (80, 80),
            };
            let proto = (p, p);
            let flag = (0, 1);
            first.push(rule(&[s, d, port, proto, flag]));
            last.push(rule(&[proto, flag, s, d, port]));
        }
        let (a, b) = (
            Classifier::new(first, 5).unwrap(),
            Classifier::new(last, 5).unwrap(),
        );
        let mut part = b.part;
        part.sort_unstable();
        assert_eq!(part, [2, 3]);
        // The same partition, so trees of the same size (within 1 %: ties between cuts
        // of equal cost go to the earlier field, which differs between the two orders).
        let (na, nb) = (a.stats().nodes, b.stats().nodes);
        assert!(na.abs_diff(nb) * 100 <= na, "{na} vs {nb} nodes");
        assert_eq!(a.stats().trees, b.stats().trees);
        for _ in 0..2000 {
            let (s, d, p, f, port) = (
                next() >> 32,
                next() >> 32,
                next() % 256,
                next() % 2,
                next() % 2 * 80,
            );
            let want = a.classify_linear(&[s, d, port, p, f]);
            assert_eq!(a.classify(&[s, d, port, p, f]), want);
            assert_eq!(b.classify(&[p, f, s, d, port]), want);
        }
    }

    /// Many overlapping fields: the node budget bounds the tree (without it, these 120
    /// rules made 32 million nodes), and answers stay right.
    #[test]
    fn node_budget_bounds_trees_over_many_fields() {
        let mut x = 12345u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 64
        };
        let dims = 9;
        let rules: Vec<Rule> = (0..120)
            .map(|_| Rule {
                ranges: (0..dims)
                    .map(|f| {
                        if f >= 3 && next() % 4 != 0 {
                            (0, 63)
                        } else {
                            let (a, b) = (next(), next());
                            (a.min(b), a.max(b))
                        }
                    })
                    .collect(),
            })
            .collect();
        let c = Classifier::new(rules, dims).unwrap();
        let s = c.stats();
        assert!(s.nodes <= NODE_BUDGET * 120 + 1024 + 2 * MAX_DEPTH, "{s:?}");
        let keys: Vec<Vec<u64>> = (0..500)
            .map(|_| (0..dims).map(|_| next()).collect())
            .collect();
        let mut out = vec![None; keys.len()];
        c.classify_batch(&keys, &mut out).unwrap();
        for (k, o) in keys.iter().zip(&out) {
            assert_eq!(*o, c.classify_linear(k));
        }
        assert!(out.iter().any(Option::is_some));
    }

    /// Checks `c` against `model` (its rules) and the linear scan on `keys`, one by one and
    /// in a batch.
    fn agrees(c: &Classifier, model: &[Rule], keys: &[Vec<u64>]) -> Result<(), String> {
        if c.rules() != model {
            return Err("rule lists differ".into());
        }
        let mut out = vec![None; keys.len()];
        c.classify_batch(keys, &mut out)
            .map_err(|e| e.to_string())?;
        for (k, o) in keys.iter().zip(&out) {
            let want = model.iter().position(|r| r.matches(k));
            if c.classify(k) != want || *o != want {
                return Err(format!(
                    "{k:?}: tree {:?}, batch {o:?}, scan {want:?}",
                    c.classify(k)
                ));
            }
        }
        Ok(())
    }

    #[test]
    fn updates_refuse_bad_positions_and_rules() {
        let mut c = Classifier::new(vec![rule(&[(1, 5), (0, 9)])], 2).unwrap();
        assert!(c.insert(2, rule(&[(0, 1), (0, 1)])).is_err());
        assert!(c.insert(0, rule(&[(0, 1)])).is_err());
        assert!(c.insert(0, rule(&[(3, 1), (0, 1)])).is_err());
        assert!(c.remove(1).is_err());
        assert_eq!(c.rules().len(), 1);
        assert_eq!(c.remove(0).unwrap(), rule(&[(1, 5), (0, 9)]));
        assert_eq!(c.classify(&[3, 3]), None);
        assert!(c.remove(0).is_err());
        c.insert(0, rule(&[(2, 2), (0, 9)])).unwrap();
        assert_eq!(c.classify(&[2, 9]), Some(0));
        // A bound beyond u32 in a classifier with u32 leaf ranges: recompiled, still right.
        c.insert(0, rule(&[(2, u64::MAX), (9, 9)])).unwrap();
        assert_eq!(c.classify(&[2, 9]), Some(0));
        assert_eq!(c.classify(&[1 << 40, 9]), Some(0));
        assert_eq!(c.classify(&[2, 8]), Some(1));
    }

    /// Thousands of updates on one small set: trees get recompiled when stale entries pile
    /// up, and answers stay right throughout.
    #[test]
    fn many_updates_recompile_trees_now_and_then() {
        let mut x = 99u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let rnd_rule = |next: &mut dyn FnMut() -> u64| {
            let ranges = (0..3)
                .map(|_| {
                    let (a, b) = (next() % 64, next() % 64);
                    (a.min(b) << 26, (a.max(b) << 26) + (1 << 26) - 1)
                })
                .collect();
            Rule { ranges }
        };
        let mut model: Vec<Rule> = (0..200).map(|_| rnd_rule(&mut next)).collect();
        let mut c = Classifier::new(model.clone(), 3).unwrap();
        let keys: Vec<Vec<u64>> = (0..300)
            .map(|_| (0..3).map(|_| next() & 0xffff_ffff).collect())
            .collect();
        let mut worst = 0f64;
        for step in 0..3000 {
            if next() % 2 == 0 && !model.is_empty() {
                let at = (next() % model.len() as u64) as usize;
                assert_eq!(c.remove(at).unwrap(), model.remove(at));
            } else {
                let at = (next() % (model.len() as u64 + 1)) as usize;
                let r = rnd_rule(&mut next);
                c.insert(at, r.clone()).unwrap();
                model.insert(at, r);
            }
            if step % 50 == 0 {
                agrees(&c, &model, &keys).unwrap();
                // Space left by updates stays bounded: a few times a fresh build's.
                let fresh = Classifier::new(model.clone(), 3).unwrap().stats();
                let s = c.stats();
                worst = worst.max(s.memory as f64 / fresh.memory.max(1) as f64);
                assert!(s.memory <= 4 * fresh.memory + 8192, "{s:?} vs {fresh:?}");
            }
        }
        agrees(&c, &model, &keys).unwrap();
        assert!(c.rebuilds() > 0, "no tree was recompiled");
        eprintln!("worst memory / fresh build's: {worst:.2}");
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

    /// Up to 120 rules of `dims` fields: the first three random ranges in 0..64, the others
    /// mostly wildcards (so that keys still match), else random ranges.
    fn arb_rules_of(dims: usize) -> impl Strategy<Value = Vec<Rule>> {
        let range = (0u64..64, 0u64..64).prop_map(|(a, b)| (a.min(b), a.max(b)));
        let extra = prop_oneof![3 => Just((0u64, 63u64)), 1 => range.clone()];
        let r = (
            proptest::collection::vec(range, 3),
            proptest::collection::vec(extra, dims - 3),
        )
            .prop_map(|(mut a, b)| {
                a.extend(b);
                Rule { ranges: a }
            });
        proptest::collection::vec(r, 0..120)
    }

    /// A rule of 3 fields: ranges over 0..64, each in units of `2^shift` values (so that
    /// with a shift of 26, fields 0 and 1 are wide from 4 units: several trees).
    fn arb_rule(shift: u32) -> impl Strategy<Value = Rule> {
        let range = (0u64..64, 0u64..64)
            .prop_map(move |(a, b)| (a.min(b) << shift, ((a.max(b) + 1) << shift) - 1));
        proptest::collection::vec(range, 3).prop_map(|ranges| Rule { ranges })
    }

    /// [`Classifier::classify_batch`]'s answers for `keys` by the portable lockstep walk
    /// only.
    fn portable_batch(c: &Classifier, keys: &[Vec<u64>]) -> Vec<Option<usize>> {
        let mut out = vec![None; keys.len()];
        for (ks, os) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            match c.dims {
                1..8 => c.batch_block::<8, 0, _, u64>(ks, os),
                _ => c.batch_block::<16, 0, _, u64>(ks, os),
            }
        }
        out
    }

    /// The same by the AVX-512 lookup, block by block (`None` for a block it refuses: a
    /// key beyond `u32`). Only where [`simd_available`].
    fn simd_batch(c: &Classifier, keys: &[Vec<u64>]) -> Vec<Option<Option<usize>>> {
        let mut sk = SimdKeys::default();
        let mut out = Vec::new();
        for ks in keys.chunks(BATCH) {
            let mut os = vec![None; ks.len()];
            if sk.fill(ks, c.dims) {
                c.simd_block(&sk, ks.len(), &mut os);
                out.extend(os.into_iter().map(Some));
            } else {
                out.extend(std::iter::repeat_n(None, ks.len()));
            }
        }
        out
    }

    /// Rules whose boxes are nested around a few centres (so that many pairs overlap in
    /// every field: the case that makes leaves of two for the AVX-512 lookup), 3 fields of
    /// values below 2^30.
    fn arb_nested_rules() -> impl Strategy<Value = Vec<Rule>> {
        let field = (0u64..4, 0u64..40, 0u64..40).prop_map(|(c, down, up)| {
            let c = ((c + 1) * 100) << 20;
            (c - (down << 20), c + (up << 20) + (1 << 20) - 1)
        });
        let r = proptest::collection::vec(field, 3).prop_map(|ranges| Rule { ranges });
        proptest::collection::vec(r, 0..100)
    }

    /// A key for [`arb_nested_rules`], per field: a centre, an offset in units of 2^20
    /// around it and where in the unit (start, middle, end).
    fn arb_nested_key() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
        proptest::collection::vec((0u64..4, 0u64..44, 0u64..3), 3)
    }

    /// A box of 3 fields with bounds in 0..64.
    fn arb_box() -> impl Strategy<Value = Vec<Range>> {
        let range = (0u64..64, 0u64..64).prop_map(|(a, b)| (a.min(b), a.max(b)));
        proptest::collection::vec(range, 3)
    }

    /// Two rules that overlap everywhere make one leaf of two where the AVX-512 lookup is
    /// used (its walk entry says so), and every lookup answers as the linear scan: keys in
    /// both rules, in either one, in neither.
    #[test]
    fn overlapping_pairs_make_leaves_of_two() {
        let rules = vec![
            rule(&[(10, 20), (10, 20), (0, 5)]),
            rule(&[(0, 30), (5, 25), (0, 9)]),
        ];
        let c = Classifier::new(rules, 3).unwrap();
        let keys: Vec<Vec<u64>> = (0..32)
            .flat_map(|a| (0..32).step_by(3).map(move |b| (a, b)))
            .flat_map(|(a, b)| [0, 5, 6, 9, 10].map(|p| vec![a, b, p]))
            .collect();
        let want: Vec<Option<usize>> = keys.iter().map(|k| c.classify_linear(k)).collect();
        assert!(want.contains(&Some(0)) && want.contains(&Some(1)) && want.contains(&None));
        let mut out = vec![None; keys.len()];
        c.classify_batch(&keys, &mut out).unwrap();
        assert_eq!(out, want);
        assert_eq!(portable_batch(&c, &keys), want);
        for (k, w) in keys.iter().zip(&want) {
            assert_eq!(c.classify(k), *w);
        }
        if !simd_available() {
            eprintln!("skipped: this CPU has no AVX-512F, the AVX-512 lookup cannot run");
            return;
        }
        let t = &c.trees[0];
        assert_eq!((t.nodes.len(), t.leaf_rules.as_slice()), (1, &[0, 1][..]));
        assert_eq!(t.walk[0][1] >> 28, LEAF_TWO);
        let simd: Vec<Option<usize>> = simd_batch(&c, &keys)
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(simd, want);
        // Two rules that do not overlap are separated by a cut (leaves of one).
        let c = Classifier::new(
            vec![
                rule(&[(0, 9), (0, 9), (0, 9)]),
                rule(&[(10, 19), (0, 9), (0, 9)]),
            ],
            3,
        )
        .unwrap();
        assert_eq!(c.stats().nodes, 3);
    }

    /// A ClassBench-sized tree through the AVX-512 lookup, the portable walk and the linear
    /// scan (skips, saying so, where the CPU has no AVX-512).
    #[test]
    fn simd_lookup_agrees_on_a_large_tree() {
        let mut x = 7u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let rules: Vec<Rule> = (0..3000)
            .map(|_| Rule {
                ranges: (0..5)
                    .map(|f| {
                        let bits = [24, 24, 12, 12, 4][f];
                        let w = next() % u64::from(bits + 1);
                        let lo = (next() & 0xffff_ffff) >> (32 - bits) << (32 - bits);
                        let lo = lo >> w << w;
                        (
                            lo,
                            (lo | ((1u64 << (32 - bits + w as u32)) - 1)).min(u32::MAX.into()),
                        )
                    })
                    .collect(),
            })
            .collect();
        let c = Classifier::new(rules.clone(), 5).unwrap();
        assert!(c.stats().depth >= 10, "{:?}", c.stats());
        let keys: Vec<Vec<u64>> = (0..5000)
            .map(|i| {
                let r = &rules[(next() % 3000) as usize];
                (0..5)
                    .map(|f| {
                        let (lo, hi) = r.ranges[f];
                        if i % 3 == 0 {
                            next() & 0xffff_ffff
                        } else {
                            lo + next() % (hi - lo + 1)
                        }
                    })
                    .collect()
            })
            .collect();
        let want: Vec<Option<usize>> = keys.iter().map(|k| c.classify_linear(k)).collect();
        assert_eq!(portable_batch(&c, &keys), want);
        let mut out = vec![None; keys.len()];
        c.classify_batch(&keys, &mut out).unwrap();
        assert_eq!(out, want);
        assert!(want.iter().filter(|w| w.is_some()).count() > 3000);
        if !simd_available() {
            eprintln!("skipped: this CPU has no AVX-512F, the AVX-512 lookup cannot run");
            return;
        }
        // `u32` keys, in calls of different sizes (the key buffer kept across calls holds
        // an earlier call's rows past a short call's keys): the same answers.
        let narrow: Vec<[u32; 5]> = keys
            .iter()
            .map(|k| std::array::from_fn(|f| k[f] as u32))
            .collect();
        let mut out32 = vec![None; keys.len()];
        let mut at = 0;
        for (i, len) in [64, 3, 130, 1, 64, 17].into_iter().cycle().enumerate() {
            let end = (at + len + i % 2).min(keys.len());
            c.classify_batch(&narrow[at..end], &mut out32[at..end])
                .unwrap();
            at = end;
            if at == keys.len() {
                break;
            }
        }
        assert_eq!(out32, want);
        assert!(c.trees.iter().all(|t| t.walk.len() == t.nodes.len()));
        let simd: Vec<Option<usize>> = simd_batch(&c, &keys)
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(simd, want);
    }

    proptest! {
        /// Bounds up to `u32::MAX` (the AVX-512 lookup's range, cuts at its top included)
        /// and, in some batches, keys beyond it (those blocks take the portable walk):
        /// the AVX-512 lookup, the portable walk, `classify_batch` and the linear scan
        /// agree, also after updates (jumps).
        #[test]
        fn simd_lookup_agrees_with_the_portable_walk(
            (dims, rules) in prop_oneof![Just(3usize), Just(5), Just(8)]
                .prop_flat_map(|d| (Just(d), arb_rules_of(d))),
            keys in proptest::collection::vec(proptest::collection::vec(0u64..70, 8), 1..150),
            big in any::<bool>(),
            ops in proptest::collection::vec((any::<usize>(), any::<usize>()), 0..12),
        ) {
            let wide = |(a, b): Range| (a << 26, ((b + 1) << 26) - 1);
            let rules: Vec<Rule> = rules
                .into_iter()
                .map(|r| Rule { ranges: r.ranges.into_iter().map(wide).collect() })
                .collect();
            let key = |v: u64| match v {
                0..64 => v << 26 | (v * 0x9e37) & ((1 << 26) - 1),
                64 => u64::from(u32::MAX),
                65 => u64::from(u32::MAX) - 1,
                66 if big => u64::from(u32::MAX) + 1,
                67 if big => u64::MAX,
                _ => 1 << 26,
            };
            let keys: Vec<Vec<u64>> =
                keys.iter().map(|k| k[..dims].iter().map(|&v| key(v)).collect()).collect();
            let mut c = Classifier::new(rules, dims).unwrap();
            for (round, &(from, to)) in std::iter::once(&(0, 0)).chain(&ops).enumerate() {
                if round > 0 && !c.rules().is_empty() {
                    // Move a rule: a remove and an insert (leaves rewritten, jumps).
                    let r = c.remove(from % c.rules().len()).unwrap();
                    c.insert(to % (c.rules().len() + 1), r).unwrap();
                }
                let want: Vec<Option<usize>> = keys.iter().map(|k| c.classify_linear(k)).collect();
                prop_assert_eq!(&portable_batch(&c, &keys), &want);
                let mut out = vec![Some(usize::MAX); keys.len()];
                c.classify_batch(&keys, &mut out).unwrap();
                prop_assert_eq!(&out, &want);
                if simd_available() {
                    for (s, w) in simd_batch(&c, &keys).into_iter().zip(&want) {
                        if let Some(s) = s {
                            prop_assert_eq!(s, *w);
                        }
                    }
                }
            }
        }

        /// Nested rules (many overlapping pairs: leaves of two for the AVX-512 lookup),
        /// keys at and around their bounds: the AVX-512 lookup, the portable walk,
        /// `classify_batch`, `classify` and the linear scan agree, also after updates.
        #[test]
        fn nested_rules_agree_with_the_linear_scan(
            rules in arb_nested_rules(),
            keys in proptest::collection::vec(arb_nested_key(), 1..150),
            ops in proptest::collection::vec((any::<usize>(), any::<usize>()), 0..8),
        ) {
            // Around centre `c`: `off` units below or above it, at a unit's start, middle
            // or end.
            let keys: Vec<Vec<u64>> = keys
                .iter()
                .map(|k| {
                    k.iter()
                        .map(|&(c, off, at)| {
                            let base = ((c + 1) * 100 + off).saturating_sub(22) << 20;
                            base + [0, 1 << 19, (1 << 20) - 1][at as usize]
                        })
                        .collect()
                })
                .collect();
            let mut c = Classifier::new(rules, 3).unwrap();
            for (round, &(from, to)) in std::iter::once(&(0, 0)).chain(&ops).enumerate() {
                if round > 0 && !c.rules().is_empty() {
                    let r = c.remove(from % c.rules().len()).unwrap();
                    c.insert(to % (c.rules().len() + 1), r).unwrap();
                }
                let want: Vec<Option<usize>> = keys.iter().map(|k| c.classify_linear(k)).collect();
                prop_assert_eq!(&portable_batch(&c, &keys), &want);
                let mut out = vec![Some(usize::MAX); keys.len()];
                c.classify_batch(&keys, &mut out).unwrap();
                prop_assert_eq!(&out, &want);
                for (k, w) in keys.iter().zip(&want) {
                    prop_assert_eq!(c.classify(k), *w);
                }
                if simd_available() {
                    for (s, w) in simd_batch(&c, &keys).into_iter().zip(&want) {
                        prop_assert_eq!(s, Some(*w));
                    }
                }
            }
        }

        /// The AVX-512 build's cut: inside the box, on a field with a cut point, and its
        /// larger side no larger than that of the median cut (one of its candidates); no
        /// cut where no field has a cut point.
        #[test]
        fn balanced_cuts_are_no_less_even_than_the_median(
            rules in arb_rules(),
            space in arb_box(),
        ) {
            let c = Classifier::new(rules, 3).unwrap();
            let ids: Vec<u32> = (0..c.rules().len() as u32)
                .filter(|&r| overlaps(&c.rules()[r as usize], &space))
                .collect();
            let sides = |(d, at): (usize, u64)| {
                let (mut l, mut r) = (0usize, 0usize);
                for &x in &ids {
                    let (a, b) = c.rules()[x as usize].ranges[d];
                    l += usize::from(a <= at);
                    r += usize::from(b > at);
                }
                l.max(r)
            };
            let any_cut = (0..3).any(|d| {
                let (lo, hi) = space[d];
                ids.iter().any(|&x| {
                    let (a, b) = c.rules()[x as usize].ranges[d];
                    (a > lo && a <= hi) || (b >= lo && b < hi)
                })
            });
            let cut = c.balanced_split(&ids, &space);
            prop_assert_eq!(cut.is_some(), any_cut);
            if let Some((d, at)) = cut {
                prop_assert!(space[d].0 <= at && at < space[d].1);
                let median = Classifier::split_point_median(&c, &ids, &space);
                prop_assert!(median.is_some());
                if let Some(m) = median {
                    prop_assert!(sides((d, at)) <= sides(m));
                }
            }
        }

        /// Random inserts and removes on random rule sets: after every step, single and
        /// batch answers equal the linear scan of the current rules.
        #[test]
        fn updates_agree_with_the_linear_scan(
            (shift, rules, ops) in prop_oneof![Just(0u32), Just(26)].prop_flat_map(|sh| (
                Just(sh),
                proptest::collection::vec(arb_rule(sh), 0..80),
                proptest::collection::vec((any::<bool>(), any::<usize>(), arb_rule(sh)), 1..40),
            )),
            keys in proptest::collection::vec(proptest::collection::vec(0u64..66, 3), 48),
            low in any::<bool>(),
        ) {
            let keys: Vec<Vec<u64>> = keys
                .iter()
                .map(|k| k.iter().map(|&v| (v << shift) + if low { 0 } else { (1 << shift) - 1 }).collect())
                .collect();
            let mut model = rules.clone();
            let mut c = Classifier::new(rules, 3).unwrap();
            agrees(&c, &model, &keys).map_err(TestCaseError::fail)?;
            for (ins, pos, r) in ops {
                if ins || model.is_empty() {
                    let at = pos % (model.len() + 1);
                    c.insert(at, r.clone()).unwrap();
                    model.insert(at, r);
                } else {
                    let at = pos % model.len();
                    prop_assert_eq!(c.remove(at).unwrap(), model.remove(at));
                }
                agrees(&c, &model, &keys).map_err(TestCaseError::fail)?;
            }
        }

        /// Batches of every size (1 to 150 keys: partial lane groups and blocks) give the
        /// linear scan's answers, for 3 fields (8-value key buffers), 5 (leaf checks
        /// compiled for 5 fields), 9 (16-value buffers) and 17 (one lookup per key).
        #[test]
        fn batches_agree_with_the_linear_scan(
            (dims, rules) in prop_oneof![Just(3usize), Just(5), Just(9), Just(17)]
                .prop_flat_map(|d| (Just(d), arb_rules_of(d))),
            keys in proptest::collection::vec(proptest::collection::vec(0u64..70, 17), 1..150),
        ) {
            let c = Classifier::new(rules, dims).unwrap();
            let keys: Vec<Vec<u64>> = keys.iter().map(|k| k[..dims].to_vec()).collect();
            let mut out = vec![Some(usize::MAX); keys.len()];
            c.classify_batch(&keys, &mut out).unwrap();
            for (k, o) in keys.iter().zip(&out) {
                prop_assert_eq!(*o, c.classify_linear(k));
                prop_assert_eq!(*o, c.classify(k));
            }
            // The same keys as `u32` values: the same answers.
            let narrow: Vec<Vec<u32>> =
                keys.iter().map(|k| k.iter().map(|&v| v as u32).collect()).collect();
            let mut out32 = vec![Some(usize::MAX); keys.len()];
            c.classify_batch(&narrow, &mut out32).unwrap();
            prop_assert_eq!(out32, out);
        }

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
            let keys: Vec<Vec<u64>> =
                keys.iter().map(|k| k.iter().map(|&v| wide(v)).collect()).collect();
            let mut out = vec![None; keys.len()];
            c.classify_batch(&keys, &mut out).unwrap();
            for (k, o) in keys.iter().zip(&out) {
                prop_assert_eq!(c.classify(k), c.classify_linear(k));
                prop_assert_eq!(*o, c.classify_linear(k));
            }
        }
    }
}
