//! A classification node as the executor evaluates it: the program's classes laid out flat
//! (one interval per test inline, the rare lists of intervals aside), busy classes first.
//!
//! The program's own class list is never reordered, so a class keeps its index there (the
//! remembered paths of `flows` read its tests by that index).

use crate::program::{Class, FrameView, Getter, NodeId};

/// One test: the field (index into the segment's fields) lies in `lo..=hi`, or, when `more`
/// is not empty, in one of those intervals.
#[derive(Debug, Clone)]
struct Test {
    /// How the field is read (kept with the test: no lookup per read).
    getter: Getter,
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
    /// Lays out `classes` (tests already in the order they should run), reading field `i`
    /// with `getters[i]`.
    pub(super) fn new(classes: &[Class], getters: &[Getter]) -> Classes {
        let getter = |f: u16| {
            getters
                .get(usize::from(f))
                .copied()
                .unwrap_or(Getter::Load {
                    l4: false,
                    off: u16::MAX,
                    len: 0,
                    shift: 0,
                    mask: 0,
                    wide: 0,
                })
        };
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
                            getter: getter(*f),
                            field: *f,
                            lo: *lo,
                            hi: *hi,
                            more: Box::new([]),
                        },
                        _ => Test {
                            getter: getter(*f),
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

    /// The class the packet `view` shows falls in: (its first node, its index in the
    /// program's node). Plain loads are read again when several classes test them; computed
    /// fields (a checksum) once per packet, kept in `vals` (`valid` says which, for the
    /// first 64 fields). Busy classes move to the front, one step at a time (classes are
    /// disjoint, so the order never changes the answer).
    #[inline]
    pub(super) fn classify(
        &mut self,
        view: &FrameView<'_>,
        vals: &mut [u128],
        valid: &mut u64,
    ) -> Option<(NodeId, u32)> {
        let mut get = |t: &Test| -> u128 {
            if let Getter::Load { .. } = t.getter {
                return t.getter.get(view);
            }
            let i = usize::from(t.field);
            if i < 64 && (*valid >> i) & 1 == 1 {
                return vals.get(i).copied().unwrap_or(0);
            }
            let v = t.getter.get(view);
            if i < 64 {
                if let Some(x) = vals.get_mut(i) {
                    *x = v;
                    *valid |= 1 << i;
                }
            }
            v
        };
        let i = self.entries.iter().position(|c| {
            c.tests.iter().all(|t| {
                let v = get(t);
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
        use elements::model::Field;
        // Field 0: the TTL (frame byte 22); field 1: the protocol (byte 23).
        let getters = [Getter::of(Field::IpTtl), Getter::of(Field::IpProto)];
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
        let mut c = Classes::new(&classes, &getters);
        let frame = |ttl: u8, proto: u8| {
            let mut f = vec![0u8; 64];
            f[14] = 0x45;
            f[22] = ttl;
            f[23] = proto;
            f
        };
        let mut vals = [0u128; 2];
        let mut run = |f: &[u8]| {
            let mut valid = 0;
            c.classify(&crate::program::frame(f), &mut vals, &mut valid)
        };
        assert_eq!(run(&frame(35, 5)), Some((11, 1)));
        assert_eq!(run(&frame(3, 0)), Some((10, 0)));
        assert_eq!(run(&frame(25, 5)), None);
        assert_eq!(run(&frame(35, 6)), None);
        assert_eq!(c.entries[0].node, 11, "the busy class moved up");
    }
}
