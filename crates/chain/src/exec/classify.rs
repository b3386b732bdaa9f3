//! A classification node as the executor evaluates it: the program's classes laid out flat
//! (one interval per test inline, the rare lists of intervals aside), busy classes first.
//! A node with many classes also gets a decision tree over them (the `classify` crate): the
//! busiest class is checked first, then the tree finds the class in a few dozen
//! comparisons instead of a scan.
//!
//! The program's own class list is never reordered, so a class keeps its index there (the
//! remembered paths of `flows` read its tests by that index).

use crate::program::{Class, FrameView, Getter, NodeId};

/// One test: the field (index into the segment's fields) lies in `lo..=lo + span`, or,
/// when `more` is not empty, in one of those intervals. Single intervals are kept as 64-bit
/// offset and span (one comparison: `v - lo <= span`, wrapping); a field wider than 64
/// bits always uses `more`.
#[derive(Debug, Clone)]
struct Test {
    /// How the field is read (kept with the test: no lookup per read).
    getter: Getter,
    field: u16,
    lo: u64,
    span: u64,
    more: Box<[(u128, u128)]>,
}

impl Test {
    fn new(getter: Getter, field: u16, iv: &[(u128, u128)]) -> Test {
        let narrow = match getter {
            Getter::Other(f) => f.width() <= 64,
            _ => true,
        };
        match iv {
            [(lo, hi)] if narrow && *hi <= u128::from(u64::MAX) && lo <= hi => Test {
                getter,
                field,
                lo: *lo as u64,
                span: (*hi - *lo) as u64,
                more: Box::new([]),
            },
            _ => Test {
                getter,
                field,
                lo: 1,
                span: 0,
                more: iv.to_vec().into_boxed_slice(),
            },
        }
    }

    /// The single interval this test checks, if it is one.
    fn single(&self) -> Option<(u64, u64)> {
        self.more
            .is_empty()
            .then(|| (self.lo, self.lo.wrapping_add(self.span)))
    }

    #[inline(always)]
    fn holds(&self, v: u128) -> bool {
        if self.more.is_empty() {
            (v as u64).wrapping_sub(self.lo) <= self.span
        } else {
            self.more.iter().any(|&(lo, hi)| lo <= v && v <= hi)
        }
    }
}

/// Fewer tests for the same class, so that the busy classes cost less per packet:
/// - two fields of one load whose upper one is tested for a single value and whose lower
///   one lies right below it become one test (IPv4 version 4 and header length 5–15 are
///   the byte 0x45–0x4f; flags and fragment offset likewise);
/// - a test implied by the class's other tests goes: the frame length when the bytes from
///   the IPv4 header on are tested nonzero (the frame then holds 14 more), and those bytes
///   when the total length is tested valid (within the data) and at least as large.
fn simplify(mut tests: Vec<Test>) -> Vec<Test> {
    // The least header length the class allows, read before the version and header
    // length tests are merged (see the total length's rule at the end).
    // A valid header checksum needs a header of 20 bytes or more (IHL 5).
    let ihl_lo = tests
        .iter()
        .find(|t| t.getter == Getter::of(elements::model::Field::IpIhl))
        .and_then(Test::single)
        .map(|(lo, _)| lo)
        .into_iter()
        .chain(
            tests
                .iter()
                .any(|t| t.getter == Getter::IpChecksumOk && t.single() == Some((1, 1)))
                .then_some(5),
        )
        .max();
    // Bits a contiguous low mask covers (`None` if the mask is not of that form).
    let bits = |len: u8, mask: u64| -> Option<u32> {
        let m = if len >= 8 {
            mask
        } else {
            mask & ((1u64 << (u32::from(len) * 8)) - 1)
        };
        (m & m.wrapping_add(1) == 0).then(|| 64 - m.leading_zeros())
    };
    let mut k = 0;
    while k < tests.len() {
        let mut merged = false;
        for j in 0..tests.len() {
            if j == k {
                continue;
            }
            let (
                Getter::Load {
                    l4: l4a,
                    off: offa,
                    len: lena,
                    shift: sa,
                    mask: ma,
                    ..
                },
                Getter::Load {
                    l4: l4b,
                    off: offb,
                    len: lenb,
                    shift: sb,
                    mask: mb,
                    ..
                },
            ) = (tests[k].getter, tests[j].getter)
            else {
                continue;
            };
            if (l4a, offa, lena) != (l4b, offb, lenb) {
                continue;
            }
            let (Some((a, a2)), Some((blo, bhi))) = (tests[k].single(), tests[j].single()) else {
                continue;
            };
            let (Some(wa), Some(wb)) = (bits(lena, ma), bits(lenb, mb)) else {
                continue;
            };
            // `k`, exact, sits right above `j`.
            if a != a2 || u32::from(sa) != u32::from(sb) + wb || wa + wb > 63 {
                continue;
            }
            let w = wa + wb;
            let mask = (1u64 << w) - 1;
            let (lo, hi) = ((a << wb) | blo, (a << wb) | bhi);
            tests[j] = Test {
                getter: Getter::Load {
                    l4: l4b,
                    off: offb,
                    len: lenb,
                    shift: sb,
                    mask,
                    wide: (8 - lenb.min(8)) * 8 + sb,
                },
                field: tests[j].field,
                lo,
                span: hi - lo,
                more: Box::new([]),
            };
            tests.remove(k);
            merged = true;
            break;
        }
        if !merged {
            k += 1;
        }
    }
    let find = |tests: &[Test], g: Getter| tests.iter().position(|t| t.getter == g);
    let ip_len = Getter::of(elements::model::Field::IpLen);
    let max16 = 0xffffu64;
    // The bytes from the IPv4 header on, implied by a valid total length.
    if let (Some(a), Some(ok), Some(l)) = (
        find(&tests, Getter::IpAvail),
        find(&tests, Getter::IpLenOk),
        find(&tests, ip_len),
    ) {
        if let (Some((alo, ahi)), Some((1, 1)), Some((llo, _))) =
            (tests[a].single(), tests[ok].single(), tests[l].single())
        {
            if ahi >= max16 && llo >= alo {
                tests.remove(a);
            }
        }
    }
    // The frame length, implied by the bytes after the Ethernet header.
    let frame_len = Getter::Other(elements::model::Field::FrameLen);
    if let Some(f) = find(&tests, frame_len) {
        let avail_lo = match find(&tests, Getter::IpAvail) {
            Some(a) => tests[a].single().map(|(lo, _)| lo),
            // Dropped above: implied by the total length, at least that many.
            None => match (find(&tests, Getter::IpLenOk), find(&tests, ip_len)) {
                (Some(ok), Some(l)) if tests[ok].single() == Some((1, 1)) => {
                    tests[l].single().map(|(lo, _)| lo)
                }
                _ => None,
            },
        };
        if let (Some((flo, fhi)), Some(alo)) = (tests[f].single(), avail_lo) {
            if fhi >= max16 && alo >= 1 && flo <= 14 + alo {
                tests.remove(f);
            }
        }
    }
    // A lower bound on the total length implied by a consistent one (`ip_len_ok`: at least
    // the header length, 4 × IHL) goes: `ip_len=20-65535` when the IHL is at least 5 (tested,
    // or implied by a valid checksum).
    if let (Some(ok), Some(l), Some(ihl)) =
        (find(&tests, Getter::IpLenOk), find(&tests, ip_len), ihl_lo)
    {
        if let (Some((1, 1)), Some((llo, lhi))) = (tests[ok].single(), tests[l].single()) {
            if lhi >= max16 && llo <= 4 * ihl {
                tests.remove(l);
            }
        }
    }
    tests
}

#[derive(Debug, Clone)]
struct Entry {
    node: NodeId,
    /// Index of the class in the program's node.
    index: u32,
    hits: u64,
    tests: Box<[Test]>,
    /// The class's one-interval tests compiled as the fast path compiles a flow's guards
    /// (masked word compares, the computed fields' usual tests made directly), and its
    /// tests of several intervals, checked after them; `None` when every test has several.
    quick: Option<(super::fast::QuickGuards, Box<[Test]>)>,
}

/// Nodes with more classes than this get a decision tree.
const TREE_AT: usize = 48;

/// A decision tree over a node's classes: each class expanded into rules (one per
/// combination of its fields' intervals).
#[derive(Debug, Clone)]
struct Tree {
    tree: classify::Classifier,
    /// The fields the rules test, as (field index, getter): the key's dimensions.
    dims: Vec<(u16, Getter)>,
    /// For each rule, its class (index in the program's node).
    class_of: Vec<u32>,
    /// For each class (index in the program's node), its place in `entries`.
    pos: Vec<u32>,
}

/// Narrows a class's intervals per dimension by what every real frame in it satisfies
/// (facts synthesis leaves out of its classes: a valid checksum needs a 20-byte header; a
/// consistent total length lies within the data; the bytes from the IPv4 header on follow
/// 14 of Ethernet header). The tree's rules then no longer overlap the early drops
/// (malformed headers) on points no frame has, so those stay out of its leaves.
fn real_frames(dims: &[(u16, Getter)], per_dim: &mut [Vec<(u64, u64)>]) {
    use elements::model::Field;
    let dim = |g: Getter| dims.iter().position(|(_, x)| *x == g);
    let single = |per_dim: &[Vec<(u64, u64)>], g: Getter| -> Option<(u64, u64)> {
        match per_dim.get(dim(g)?)?.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    };
    let restrict = |per_dim: &mut [Vec<(u64, u64)>], g: Getter, lo: u64, hi: u64| {
        if let Some(v) = dim(g).and_then(|d| per_dim.get_mut(d)) {
            *v = v
                .iter()
                .filter_map(|&(a, b)| {
                    let (a, b) = (a.max(lo), b.min(hi));
                    (a <= b).then_some((a, b))
                })
                .collect();
        }
    };
    if single(per_dim, Getter::IpChecksumOk) == Some((1, 1)) {
        restrict(per_dim, Getter::of(Field::IpIhl), 5, 15);
    }
    if single(per_dim, Getter::IpLenOk) == Some((1, 1)) {
        if let Some(&(len, _)) = dim(Getter::of(Field::IpLen))
            .and_then(|d| per_dim.get(d))
            .and_then(|v| v.first())
        {
            restrict(per_dim, Getter::IpAvail, len, u64::MAX);
            // (Lengths read at most 0xffff.)
            restrict(
                per_dim,
                Getter::Other(Field::FrameLen),
                (14 + len).min(0xffff),
                u64::MAX,
            );
        }
    }
    if let Some(&(a, _)) = dim(Getter::IpAvail)
        .and_then(|d| per_dim.get(d))
        .and_then(|v| v.first())
    {
        if a >= 1 {
            restrict(
                per_dim,
                Getter::Other(Field::FrameLen),
                (14 + a).min(0xffff),
                u64::MAX,
            );
        }
    }
}

/// The value of the computed field `field` (read with `g`, not a load) of the frame `view`
/// looks at: read once per packet, kept in `vals` (which of them are read: `valid`).
#[inline(never)]
fn computed(
    field: u16,
    g: &Getter,
    view: &FrameView<'_>,
    vals: &mut [u128],
    valid: &mut u64,
) -> u128 {
    let i = usize::from(field);
    if i < 64 && (*valid >> i) & 1 == 1 {
        return vals.get(i).copied().unwrap_or(0);
    }
    let v = g.get(view);
    if i < 64 {
        if let Some(x) = vals.get_mut(i) {
            *x = v;
            *valid |= 1 << i;
        }
    }
    v
}

/// The one-interval tests of `tests` compiled ([`super::fast::QuickGuards`]) and the others
/// as they are, or `None` when no test has one interval.
fn quick(tests: &[Test]) -> Option<(super::fast::QuickGuards, Box<[Test]>)> {
    let singles: Vec<(Getter, u128, u128)> = tests
        .iter()
        .filter_map(|t| {
            t.single()
                .map(|(lo, hi)| (t.getter, u128::from(lo), u128::from(hi)))
        })
        .collect();
    if singles.is_empty() {
        return None;
    }
    let rest: Box<[Test]> = tests
        .iter()
        .filter(|t| t.single().is_none())
        .cloned()
        .collect();
    Some((super::fast::QuickGuards::new(&singles), rest))
}

/// The busiest classes (the first entries) are checked before the tree.
const HOT: usize = 4;

/// Whether the packet whose field values `get` reads is in class `c`.
#[inline(always)]
fn inside(c: &Entry, view: &FrameView<'_>, get: &mut impl FnMut(u16, &Getter) -> u128) -> bool {
    if let Some((q, rest)) = &c.quick {
        // (A frame too short for the compiled words takes the tests one by one.)
        if let Some(ok) = q.pass(view) {
            return ok && rest.iter().all(|t| t.holds(get(t.field, &t.getter)));
        }
    }
    c.tests.iter().all(|t| t.holds(get(t.field, &t.getter)))
}

/// The classes of one node, ready to evaluate.
#[derive(Debug, Clone)]
pub(super) struct Classes {
    entries: Vec<Entry>,
    tree: Option<Tree>,
    /// Classes in priority order, possibly overlapping: never reordered, and the tree
    /// alone (no busy classes first) when there is one.
    ordered: bool,
    /// The fields (indices into the segment's) any class tests.
    fields: Vec<u16>,
}

impl Classes {
    /// Lays out `classes` (tests already in the order they should run), reading field `i`
    /// with `getters[i]`; `ordered` when the first class containing a packet is its class
    /// (classes may overlap).
    pub(super) fn new(classes: &[Class], getters: &[Getter], ordered: bool) -> Classes {
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
            .map(|(i, c)| {
                let tests = simplify(
                    c.tests
                        .iter()
                        .map(|(f, iv)| Test::new(getter(*f), *f, iv))
                        .collect(),
                );
                Entry {
                    node: c.node,
                    index: i as u32,
                    hits: 0,
                    quick: quick(&tests),
                    tests: tests.into_boxed_slice(),
                }
            })
            .collect();
        let mut fields: Vec<u16> = classes
            .iter()
            .flat_map(|c| c.tests.iter().map(|(f, _)| *f))
            .collect();
        fields.sort_unstable();
        fields.dedup();
        let mut c = Classes {
            entries,
            tree: None,
            ordered,
            fields,
        };
        if c.entries.len() > TREE_AT {
            c.tree = Self::tree(&c.entries);
        }
        c
    }

    /// The decision tree over `entries`, unless a field is wider than 64 bits or the
    /// classes expand into too many rules.
    fn tree(entries: &[Entry]) -> Option<Tree> {
        let mut dims: Vec<(u16, Getter)> = Vec::new();
        for e in entries {
            for t in e.tests.iter() {
                if let Getter::Other(f) = t.getter {
                    if f.width() > 64 {
                        return None;
                    }
                }
                // A merged test reads its own load: dimensions are (field, getter).
                if !dims.contains(&(t.field, t.getter)) {
                    dims.push((t.field, t.getter));
                }
            }
        }
        if dims.len() > 32 {
            return None;
        }
        let cap = 64 * entries.len() + 1024;
        let mut rules = Vec::new();
        let mut class_of = Vec::new();
        for e in entries {
            // Per dimension, the class's intervals (everything when it does not test it).
            let mut per_dim: Vec<Vec<(u64, u64)>> = vec![vec![(0, u64::MAX)]; dims.len()];
            for t in e.tests.iter() {
                let d = dims.iter().position(|d| *d == (t.field, t.getter))?;
                let iv: Vec<(u128, u128)> = if let Some((lo, hi)) = t.single() {
                    vec![(u128::from(lo), u128::from(hi))]
                } else {
                    t.more.to_vec()
                };
                let narrow: Option<Vec<(u64, u64)>> = iv
                    .iter()
                    .map(|&(lo, hi)| Some((u64::try_from(lo).ok()?, u64::try_from(hi).ok()?)))
                    .collect();
                per_dim[d] = narrow?;
            }
            real_frames(&dims, &mut per_dim);
            let boxes = classify::Rule::product(&per_dim, cap.saturating_sub(rules.len()))?;
            class_of.extend(std::iter::repeat_n(e.index, boxes.len()));
            rules.extend(boxes);
        }
        let tree = classify::Classifier::new(rules, dims.len()).ok()?;
        let mut pos = vec![0u32; entries.len()];
        for (k, e) in entries.iter().enumerate() {
            if let Some(p) = pos.get_mut(e.index as usize) {
                *p = k as u32;
            }
        }
        Some(Tree {
            tree,
            dims,
            class_of,
            pos,
        })
    }

    /// The fields (indices into the segment's) the classes test.
    pub(super) fn fields(&self) -> &[u16] {
        &self.fields
    }

    /// Whether the classes are in priority order (and may overlap).
    pub(super) fn ordered(&self) -> bool {
        self.ordered
    }

    /// Class `hint` (its index in the program's node) if the packet `view` shows is in it:
    /// what a switch that classified the packet said (see `Executor::trust_switch_tags`).
    /// The caller knows no earlier class holds the packet.
    pub(super) fn check(&mut self, view: &FrameView<'_>, hint: u32) -> Option<(NodeId, u32)> {
        let e = self.entries.iter_mut().find(|e| e.index == hint)?;
        let mut get = |_: u16, g: &Getter| g.get(view);
        if !inside(e, view, &mut get) {
            return None;
        }
        e.hits += 1;
        Some((e.node, e.index))
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
        // Field `field` read with `g`: a load in place (small enough to be inlined in
        // every test), a computed field once per packet, out of line.
        let mut get = |field: u16, g: &Getter| -> u128 {
            match g.load(view) {
                Some(v) => v,
                None => computed(field, g, view, vals, valid),
            }
        };
        let i = match &self.tree {
            Some(t) if self.ordered => {
                let mut buf = [0u64; 32];
                let key = buf.get_mut(..t.dims.len())?;
                for (k, (f, g)) in key.iter_mut().zip(&t.dims) {
                    *k = u64::try_from(get(*f, g)).unwrap_or(u64::MAX);
                }
                let r = t.tree.classify(key)?;
                let class = *t.class_of.get(r)? as usize;
                *t.pos.get(class)? as usize
            }
            Some(t) => {
                // The busiest classes first, then the tree (classes are disjoint: the rule
                // found is the packet's class).
                match self
                    .entries
                    .iter()
                    .take(HOT)
                    .position(|c| inside(c, view, &mut get))
                {
                    Some(i) => i,
                    None => {
                        let mut buf = [0u64; 32];
                        let key = buf.get_mut(..t.dims.len())?;
                        for (k, (f, g)) in key.iter_mut().zip(&t.dims) {
                            *k = u64::try_from(get(*f, g)).unwrap_or(u64::MAX);
                        }
                        let r = t.tree.classify(key)?;
                        let class = *t.class_of.get(r)? as usize;
                        *t.pos.get(class)? as usize
                    }
                }
            }
            None => self
                .entries
                .iter()
                .position(|c| inside(c, view, &mut get))?,
        };
        let e = &mut self.entries[i];
        e.hits += 1;
        let found = (e.node, e.index);
        // A margin of an eighth keeps two classes about as busy from trading places at
        // every other packet.
        let before = i.checked_sub(1).map_or(u64::MAX, |b| self.entries[b].hits);
        if !self.ordered && i > 0 && self.entries[i].hits > before.saturating_add(before / 8) {
            self.entries.swap(i, i - 1);
            if let Some(t) = &mut self.tree {
                for k in [i - 1, i] {
                    let idx = self.entries[k].index as usize;
                    if let Some(p) = t.pos.get_mut(idx) {
                        *p = k as u32;
                    }
                }
            }
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
        let mut c = Classes::new(&classes, &getters, false);
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

    #[test]
    fn the_tree_finds_the_same_class_as_the_scan() {
        use elements::model::Field;
        // 120 disjoint classes over TTL x protocol (some with two TTL intervals), plus a
        // catch-all for the rest: more than TREE_AT, so the node gets a tree.
        let getters = [Getter::of(Field::IpTtl), Getter::of(Field::IpProto)];
        let mut classes = Vec::new();
        for k in 0..120u128 {
            let (ttl, proto) = (k % 60, k / 60);
            let ttl_iv = if ttl == 59 {
                vec![(59 * 4, 59 * 4 + 3), (250, 255)]
            } else {
                vec![(ttl * 4, ttl * 4 + 3)]
            };
            classes.push(Class {
                tests: vec![(0, ttl_iv), (1, vec![(proto * 6, proto * 6)])],
                node: k as u32,
                hits: 0,
            });
        }
        classes.push(Class {
            tests: vec![(1, vec![(1, 5), (7, 255)])],
            node: 1000,
            hits: 0,
        });
        let mut tree = Classes::new(&classes, &getters, false);
        assert!(tree.tree.is_some());
        let mut scan = Classes::new(&classes, &getters, false);
        scan.tree = None;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut f = vec![0u8; 40];
            f[14] = 0x45;
            f[22] = x as u8;
            f[23] = [0u8, 6, 17, 1, 200][(x >> 8) as usize % 5];
            let view = crate::program::frame(&f);
            let (mut v1, mut v2) = ([0u128; 2], [0u128; 2]);
            let (mut ok1, mut ok2) = (0, 0);
            assert_eq!(
                tree.classify(&view, &mut v1, &mut ok1),
                scan.classify(&view, &mut v2, &mut ok2),
                "ttl {} proto {}",
                f[22],
                f[23]
            );
        }
    }

    /// Whether `c` (the laid-out form of the one class `class`) finds frame `f` in it,
    /// asserting that the class's own tests, read through `getters`, say the same.
    fn decides_as_the_class(c: &mut Classes, class: &Class, getters: &[Getter], f: &[u8]) -> bool {
        let view = crate::program::frame(f);
        let want = class.tests.iter().all(|(i, iv)| {
            let v = getters[usize::from(*i)].get(&view);
            iv.iter().any(|&(lo, hi)| lo <= v && v <= hi)
        });
        let (mut vals, mut valid) = ([0u128; 8], 0);
        let got = c.classify(&view, &mut vals, &mut valid).is_some();
        assert_eq!(got, want, "frame {f:02x?}");
        got
    }

    #[test]
    fn compiled_tests_and_an_implied_length_decide_as_the_originals() {
        use elements::model::Field;
        // A routed class: a valid checksum and a consistent length imply `ip_len >= 20`,
        // which goes; the one-interval tests are compiled, the destination's two intervals
        // are checked after them.
        let fields = [
            Field::IpVersion,
            Field::IpChecksumOk,
            Field::IpLenOk,
            Field::IpLen,
            Field::IpTtl,
            Field::IpDst,
        ];
        let getters: Vec<Getter> = fields.iter().map(|f| Getter::of(*f)).collect();
        let busy = Class {
            tests: vec![
                (0, vec![(4, 4)]),
                (1, vec![(1, 1)]),
                (2, vec![(1, 1)]),
                (3, vec![(20, 65535)]),
                (4, vec![(2, 255)]),
                (
                    5,
                    vec![(0x0a00_0000, 0x0a00_ffff), (0x0a01_8000, 0x0a01_ffff)],
                ),
            ],
            node: 3,
            hits: 0,
        };
        let mut c = Classes::new(std::slice::from_ref(&busy), &getters, false);
        assert_eq!(
            c.entries[0].tests.len(),
            5,
            "the total length's lower bound is implied"
        );
        assert!(c.entries[0].quick.is_some());
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut seen = [0usize; 2];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = [10usize, 20, 30, 33, 34, 38, 60, 64, 98][(x % 9) as usize];
            let mut f = vec![0u8; len];
            let hl = [5u8, 5, 5, 6, 4, 15][(x >> 8) as usize % 6];
            let ver = [4u8, 4, 4, 6][(x >> 12) as usize % 4];
            let total = [20u16, 46, 50, 84, 19, (x >> 16) as u16][(x >> 20) as usize % 6];
            let ttl = [64u8, 1, 2, 0][(x >> 24) as usize % 4];
            let dst: [u8; 4] = [
                [10, 10, 10, 11][(x >> 28) as usize % 4],
                [0, 1, 1, 2][(x >> 30) as usize % 4],
                (x >> 32) as u8,
                (x >> 40) as u8,
            ];
            let mut ip = [0u8; 60];
            ip[0] = ver << 4 | hl;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[8] = ttl;
            ip[9] = 17;
            ip[16..20].copy_from_slice(&dst);
            let h = usize::from(hl) * 4;
            let sum = wire::checksum::data(&ip[..h.min(60)]);
            if !(x >> 48).is_multiple_of(4) {
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
            }
            for (i, b) in ip.iter().enumerate() {
                if let Some(y) = f.get_mut(14 + i) {
                    *y = *b;
                }
            }
            let got = decides_as_the_class(&mut c, &busy, &getters, &f);
            seen[usize::from(got)] += 1;
        }
        assert!(
            seen[0] > 100 && seen[1] > 100,
            "both outcomes drawn: {seen:?}"
        );
    }

    #[test]
    fn merged_and_implied_tests_decide_as_the_originals() {
        use elements::model::Field;
        // The fields of the synthesized routers' busy class, plus flags and fragment offset.
        let fields = [
            Field::IpVersion,
            Field::IpIhl,
            Field::FrameLen,
            Field::IpAvail,
            Field::IpLenOk,
            Field::IpLen,
            Field::IpFlags,
            Field::IpFragOffset,
        ];
        let getters: Vec<Getter> = fields.iter().map(|f| Getter::of(*f)).collect();
        let class = |tests: Vec<(u16, Vec<(u128, u128)>)>| Class {
            tests,
            node: 7,
            hits: 0,
        };
        let busy = class(vec![
            (0, vec![(4, 4)]),
            (1, vec![(5, 15)]),
            (2, vec![(14, 65535)]),
            (3, vec![(20, 65535)]),
            (4, vec![(1, 1)]),
            (5, vec![(20, 65521)]),
            (6, vec![(2, 2)]),
            (7, vec![(0, 0)]),
        ]);
        let c = Classes::new(std::slice::from_ref(&busy), &getters, false);
        assert_eq!(
            c.entries[0].tests.len(),
            4,
            "version+length and flags+offset merge, frame length and IPv4 bytes are implied"
        );
        let mut c = c;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut seen = [0usize; 2];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = [10usize, 20, 33, 34, 60, 64, 80][(x % 7) as usize];
            let mut f = vec![0u8; len];
            let pick = |k: u32| (x >> k) as u8;
            let set = |f: &mut Vec<u8>, i: usize, b: u8| {
                if let Some(y) = f.get_mut(i) {
                    *y = b;
                }
            };
            set(
                &mut f,
                14,
                [0x45, 0x46, 0x44, 0x55, 0x4f, pick(8)][(x >> 16) as usize % 6],
            );
            set(&mut f, 16, 0);
            set(
                &mut f,
                17,
                [20, 46, 50, 66, pick(24)][(x >> 32) as usize % 5],
            );
            set(
                &mut f,
                20,
                [0x40, 0x00, 0x20, pick(40)][(x >> 44) as usize % 4],
            );
            set(&mut f, 21, [0, 0, 1][(x >> 50) as usize % 3]);
            let got = decides_as_the_class(&mut c, &busy, &getters, &f);
            seen[usize::from(got)] += 1;
        }
        assert!(
            seen[0] > 100 && seen[1] > 100,
            "both outcomes drawn: {seen:?}"
        );
    }

    #[test]
    fn an_ordered_tree_with_real_frame_facts_finds_the_scans_class() {
        use elements::model::Field;
        // Early drops (short frames, bad checksums, bad lengths) first, then overlapping
        // destination prefixes in priority order, then a catch-all.
        let fields = [
            Field::FrameLen,
            Field::IpAvail,
            Field::IpChecksumOk,
            Field::IpLenOk,
            Field::IpLen,
            Field::IpDst,
        ];
        let getters: Vec<Getter> = fields.iter().map(|f| Getter::of(*f)).collect();
        let class = |tests: Vec<(u16, Vec<(u128, u128)>)>, node| Class {
            tests,
            node,
            hits: 0,
        };
        let ok = |extra: Vec<(u16, Vec<(u128, u128)>)>| {
            let mut t = vec![(2, vec![(1, 1)]), (3, vec![(1, 1)]), (4, vec![(20, 65535)])];
            t.extend(extra);
            t
        };
        let mut classes = vec![
            class(vec![(0, vec![(0, 13)])], 0),
            class(vec![(0, vec![(14, 65535)]), (1, vec![(0, 19)])], 1),
            class(vec![(1, vec![(20, 65535)]), (2, vec![(0, 0)])], 2),
            class(vec![(1, vec![(20, 65535)]), (3, vec![(0, 0)])], 3),
        ];
        for k in 0..60u128 {
            // /8, /16 and /24 prefixes under 10.0.0.0/8, overlapping.
            let (base, size) = match k % 3 {
                0 => (0x0a00_0000, 1u128 << 24),
                1 => (0x0a00_0000 | ((k % 7) << 16), 1 << 16),
                _ => (0x0a00_0000 | ((k % 7) << 16) | ((k % 5) << 8), 1 << 8),
            };
            classes.push(class(
                ok(vec![(5, vec![(base, base + size - 1)])]),
                10 + k as u32,
            ));
        }
        classes.push(class(ok(vec![]), 99));
        let mut tree = Classes::new(&classes, &getters, true);
        assert!(tree.tree.is_some());
        let mut scan = Classes::new(&classes, &getters, true);
        scan.tree = None;
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = [12usize, 20, 30, 34, 40, 60][(x % 6) as usize];
            let mut f = vec![0u8; len];
            for (i, b) in f.iter_mut().enumerate() {
                *b = (x >> (i % 8 * 8)) as u8;
            }
            if len >= 34 {
                f[14] = 0x45;
                let ip_len = [20u16, 26, 200][(x >> 20) as usize % 3];
                f[16..18].copy_from_slice(&ip_len.to_be_bytes());
                f[30] = 10;
                f[31] = (x >> 24) as u8 % 8;
                f[24] = 0;
                f[25] = 0;
                if x >> 40 & 1 == 1 {
                    let c = wire::checksum::data(&f[14..34]);
                    f[24..26].copy_from_slice(&c.to_be_bytes());
                }
            }
            let view = crate::program::frame(&f);
            let (mut v1, mut v2) = ([0u128; 6], [0u128; 6]);
            let (mut ok1, mut ok2) = (0, 0);
            assert_eq!(
                tree.classify(&view, &mut v1, &mut ok1),
                scan.classify(&view, &mut v2, &mut ok2),
                "frame {f:02x?}"
            );
        }
    }
}
