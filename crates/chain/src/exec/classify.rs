//! A classification node as the executor evaluates it: the program's classes laid out flat
//! (one interval per test inline, the rare lists of intervals aside), busy classes first.
//!
//! The program's own class list is never reordered, so a class keeps its index there (the
//! remembered paths of `flows` read its tests by that index).

use crate::program::{Class, NodeId};

/// One test: the field (index into the segment's fields) lies in `lo..=hi`, or, when `more`
/// is not empty, in one of those intervals.
#[derive(Debug, Clone)]
struct Test {
    field: u16,
    lo: u128,
    hi: u128,
    more: Box<[(u128, u128)]>,
}

#[derive(Debug, Clone)]
struct Entry {
    node: NodeId,
    /// Index of the class in the program's node.
    index: u32,
    hits: u64,
    tests: Box<[Test]>,
}

/// The classes of one node, ready to evaluate.
#[derive(Debug, Clone)]
pub(super) struct Classes {
    entries: Vec<Entry>,
}

impl Classes {
    /// Lays out `classes` (tests already in the order they should run).
    pub(super) fn new(classes: &[Class]) -> Classes {
        let entries = classes
            .iter()
            .enumerate()
            .map(|(i, c)| Entry {
                node: c.node,
                index: i as u32,
                hits: 0,
                tests: c
                    .tests
                    .iter()
                    .map(|(f, iv)| match iv.as_slice() {
                        [(lo, hi)] => Test {
                            field: *f,
                            lo: *lo,
                            hi: *hi,
                            more: Box::new([]),
                        },
                        _ => Test {
                            field: *f,
                            lo: 1,
                            hi: 0,
                            more: iv.clone().into_boxed_slice(),
                        },
                    })
                    .collect(),
            })
            .collect();
        Classes { entries }
    }

    /// The class the packet whose field `i` is `get(i)` falls in: (its first node, its index
    /// in the program's node). Busy classes move to the front, one step at a time (classes
    /// are disjoint, so the order never changes the answer).
    #[inline]
    pub(super) fn classify(&mut self, mut get: impl FnMut(u16) -> u128) -> Option<(NodeId, u32)> {
        let i = self.entries.iter().position(|c| {
            c.tests.iter().all(|t| {
                let v = get(t.field);
                if t.more.is_empty() {
                    t.lo <= v && v <= t.hi
                } else {
                    t.more.iter().any(|&(lo, hi)| lo <= v && v <= hi)
                }
            })
        })?;
        let e = &mut self.entries[i];
        e.hits += 1;
        let found = (e.node, e.index);
        if i > 0 && self.entries[i].hits > self.entries[i - 1].hits {
            self.entries.swap(i, i - 1);
        }
        Some(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_class_and_keeps_busy_ones_first() {
        let classes = vec![
            Class {
                tests: vec![(0, vec![(0, 9)])],
                node: 10,
                hits: 0,
            },
            Class {
                tests: vec![(0, vec![(10, 19), (30, 39)]), (1, vec![(5, 5)])],
                node: 11,
                hits: 0,
            },
        ];
        let mut c = Classes::new(&classes);
        let vals = [35u128, 5];
        assert_eq!(c.classify(|i| vals[usize::from(i)]), Some((11, 1)));
        assert_eq!(c.entries[0].node, 11, "the busy class moved up");
        assert_eq!(c.classify(|i| [3u128, 0][usize::from(i)]), Some((10, 0)));
        assert_eq!(c.classify(|i| [25u128, 5][usize::from(i)]), None);
        assert_eq!(c.classify(|i| [35u128, 6][usize::from(i)]), None);
    }
}
