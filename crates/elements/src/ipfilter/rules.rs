//! Rule files for `IPFilter` (`FILE path`), and the decision tree that finds the first
//! matching rule when there are many.
//!
//! # Rule files
//!
//! A `FILE` argument stands for the rules of a file, in order, at its place among the other
//! rules. Two formats are read, told apart by the first rule line:
//! * **Click's dialect:** one `ACTION PATTERN` rule per line, as in the configuration
//!   (`allow tcp && dst port 80`); blank lines and lines starting with `#` or `//` are
//!   skipped, a trailing comma is ignored.
//! * **ClassBench filter sets** (lines starting with `@`, see [`classify::classbench`]): each
//!   rule becomes `src net S && dst net D [&& ip proto P] [&& src port ...] [&& dst port ...]`
//!   (a full port range or wildcard protocol adds no test; a port test implies TCP or UDP,
//!   as Click's port tests do). ClassBench sets carry no actions: rule `i` is `allow` by the
//!   seeded draw [`classify::classbench::allowed`]`(SEED, i, ALLOW_PERCENT)`, else `deny`.
//!   Keywords of the element: `ALLOW_PERCENT` (default 85), `SEED` (default 1), and `FIRST n`
//!   to keep only the first `n` rules of each ClassBench file (`FIRST all`, the default,
//!   keeps them all; the ISP chain's ~250-rule list is `FIRST 250` of `fw1_1k`).
//!
//! Relative paths are read from the configuration's directory (or, when not found there, from the
//! working directory, for paths given with `--define`). Errors name the file, line
//! and column.
//!
//! # The first-match tree
//!
//! A linear scan of thousands of rules costs microseconds per packet. When a filter has
//! [`TREE_AT`] rules or more, the longest run of rules from the first that compile exactly
//! into header space ([`super::space::compile`]) is also laid out as a decision tree
//! ([`classify::Classifier`], HyperSplit): each rule's boxes become range rules over the
//! fields the patterns read, with the rule's place as its priority. A packet whose layout
//! agrees with the model's (transport header right after the IPv4 header) is looked up in
//! the tree; a miss continues the scan after that run. Both give the same first match (the
//! tests compare them on generated packets).

use super::space::compile;
use super::FilterAction;
use crate::model::{Field, Headers};
use crate::ConfigError;
use packet::Packet;
use std::path::Path;

/// Filters with at least this many rules get a tree.
pub const TREE_AT: usize = 16;

/// How the rules of ClassBench files become `IPFilter` rules.
#[derive(Debug, Clone, Copy)]
pub struct ClassBenchActions {
    /// Percentage of rules drawn `allow`.
    pub allow_percent: u32,
    /// Seed of the draw.
    pub seed: u64,
    /// Keep only this many rules of each file.
    pub first: Option<usize>,
}

/// One rule read from a file: its text (`ACTION PATTERN`) and where it was written.
#[derive(Debug, Clone)]
pub struct FileRule {
    /// The rule in Click's dialect.
    pub text: String,
    /// `file:line`.
    pub origin: String,
}

/// Reads the rules of `path` (see the module documentation).
pub fn load(path: &Path, cb: &ClassBenchActions) -> Result<Vec<FileRule>, ConfigError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(format!("FILE {name}: cannot read it: {e}")))?;
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("//"));
    if first.is_some_and(|l| l.starts_with('@')) {
        let rules = classify::classbench::parse_rules(&text, &name)
            .map_err(|e| ConfigError::new(e.to_string()))?;
        let keep = cb.first.unwrap_or(usize::MAX);
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        return Ok(rules
            .iter()
            .take(keep)
            .enumerate()
            .map(|(i, r)| {
                let line = lines.next().map_or(0, |(n, _)| n + 1);
                let action = if classify::classbench::allowed(cb.seed, i, cb.allow_percent) {
                    "allow"
                } else {
                    "deny"
                };
                FileRule {
                    text: format!("{action} {}", classbench_pattern(&r.ranges)),
                    origin: format!("{name}:{line}"),
                }
            })
            .collect());
    }
    Ok(text
        .lines()
        .enumerate()
        .filter_map(|(n, l)| {
            let l = l.trim();
            let l = l.strip_suffix(',').unwrap_or(l).trim();
            (!l.is_empty() && !l.starts_with('#') && !l.starts_with("//")).then(|| FileRule {
                text: l.to_string(),
                origin: format!("{name}:{}", n + 1),
            })
        })
        .collect())
}

/// The Click pattern of a ClassBench rule's five ranges (source, destination, ports,
/// protocol).
fn classbench_pattern(r: &[(u64, u64)]) -> String {
    let mut parts = Vec::new();
    let net = |what: &str, (lo, hi): (u64, u64)| -> Option<String> {
        let size = hi - lo + 1;
        if size >= 1 << 32 {
            return None;
        }
        let len = 32 - size.trailing_zeros();
        Some(format!(
            "{what} net {}/{len}",
            std::net::Ipv4Addr::from(lo as u32)
        ))
    };
    let port = |what: &str, (lo, hi): (u64, u64)| -> Option<String> {
        match (lo, hi) {
            (0, 0xffff) => None,
            (a, b) if a == b => Some(format!("{what} port {a}")),
            (a, b) => Some(format!("{what} port >= {a} && {what} port <= {b}")),
        }
    };
    if let Some(&s) = r.first() {
        parts.extend(net("src", s));
    }
    if let Some(&d) = r.get(1) {
        parts.extend(net("dst", d));
    }
    if let Some(&(lo, hi)) = r.get(4) {
        if lo == hi {
            parts.push(format!("ip proto {lo}"));
        }
    }
    if let Some(&p) = r.get(2) {
        parts.extend(port("src", p));
    }
    if let Some(&p) = r.get(3) {
        parts.extend(port("dst", p));
    }
    if parts.is_empty() {
        "all".to_string()
    } else {
        parts.join(" && ")
    }
}

/// The first-match tree over a filter's leading compilable rules.
#[derive(Debug, Clone)]
pub struct FirstMatch {
    tree: classify::Classifier,
    /// The fields the tree's rules test: the key's dimensions.
    dims: Vec<Field>,
    /// For each tree rule, the filter rule it comes from.
    rule_of: Vec<u32>,
    /// The tree covers rules `0..covered`.
    covered: usize,
}

/// One box of a rule: per field, its intervals.
type Box1 = Vec<(Field, Vec<(u64, u64)>)>;

/// The most tree rules per filter rule (boxes times interval combinations) on average.
const EXPANSION: usize = 16;

impl FirstMatch {
    /// The tree over the leading rules of `rules` that compile, or `None` if too few do.
    pub fn new(rules: &[(FilterAction, super::Expr)]) -> Option<FirstMatch> {
        if rules.len() < TREE_AT {
            return None;
        }
        let cap = EXPANSION * rules.len() + 4096;
        let mut dims: Vec<Field> = Vec::new();
        // (rule, per field: its intervals)
        let mut boxes: Vec<(u32, Box1)> = Vec::new();
        let mut covered = 0;
        'rules: for (i, (_, e)) in rules.iter().enumerate() {
            let Some(set) = compile(e) else { break };
            let mut mine = Vec::new();
            for m in set.members() {
                let mut fields = Vec::new();
                for (f, s) in m.fields() {
                    let narrow = s
                        .intervals()
                        .map(|(lo, hi)| Some((u64::try_from(lo).ok()?, u64::try_from(hi).ok()?)))
                        .collect::<Option<Vec<_>>>();
                    match (readable(f), narrow) {
                        (true, Some(iv)) => fields.push((f, iv)),
                        _ => break 'rules,
                    }
                }
                mine.push((i as u32, fields));
            }
            for (_, fields) in &mine {
                for (f, _) in fields {
                    if !dims.contains(f) {
                        dims.push(*f);
                    }
                }
            }
            boxes.extend(mine);
            covered = i + 1;
        }
        if covered < TREE_AT || dims.len() > 16 {
            return None;
        }
        let mut tree_rules = Vec::new();
        let mut rule_of = Vec::new();
        for (rule, fields) in boxes {
            let mut per_dim: Vec<Vec<(u64, u64)>> = vec![vec![(0, u64::MAX)]; dims.len()];
            for (f, iv) in fields {
                let d = dims.iter().position(|x| *x == f)?;
                per_dim[d] = iv;
            }
            let boxes = classify::Rule::product(&per_dim, cap.saturating_sub(tree_rules.len()))?;
            rule_of.extend(std::iter::repeat_n(rule, boxes.len()));
            tree_rules.extend(boxes);
        }
        let tree = classify::Classifier::new(tree_rules, dims.len()).ok()?;
        Some(FirstMatch {
            tree,
            dims,
            rule_of,
            covered,
        })
    }

    /// The rules the tree covers (`0..covered()`).
    pub fn covered(&self) -> usize {
        self.covered
    }

    /// The tree's size.
    pub fn stats(&self) -> classify::Stats {
        self.tree.stats()
    }

    /// The first rule among the covered ones that `p` matches: `Some(Some(i))`,
    /// `Some(None)` when none does, `None` when the packet's layout is not the model's (the
    /// caller scans instead).
    #[inline]
    pub fn find(&self, p: &Packet) -> Option<Option<usize>> {
        let net = p.network_offset_in_data();
        let h = Headers::new(p.data(), net);
        if let Some(n) = net {
            let hl = h.hl;
            let t = p.meta.transport_offset;
            let expected = p.data_offset() as usize + n + hl;
            if hl < 20 || (t != packet::NO_OFFSET && t as usize != expected) {
                return None;
            }
        }
        let mut key = [0u64; 16];
        let key = key.get_mut(..self.dims.len())?;
        for (k, f) in key.iter_mut().zip(&self.dims) {
            *k = h.value_of(*f) as u64;
        }
        Some(
            self.tree
                .classify(key)
                .and_then(|r| self.rule_of.get(r))
                .map(|&i| i as usize),
        )
    }
}

/// Fields read from the packet's bytes (annotations are not: they are not in `Headers`),
/// at most 64 bits wide.
fn readable(f: Field) -> bool {
    !matches!(
        f,
        Field::InPort | Field::Paint | Field::DstIpAnno | Field::FixIpSrc | Field::PacketType
    ) && f.width() <= 64
}
