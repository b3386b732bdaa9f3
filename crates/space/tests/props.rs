//! Property tests: every operation against brute force over small fields.

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::*;
use space::{Action, Field, FieldSet, Filter, FilterSet, Op, PacketPoint, Preimage};

const CASES: u32 = 300;

/// The values of a set, by enumeration (small sets only).
fn model(s: &FieldSet) -> BTreeSet<u128> {
    s.intervals().flat_map(|(lo, hi)| lo..=hi).collect()
}

/// Whether the intervals are sorted, non-empty, disjoint and non-adjacent.
fn canonical(s: &FieldSet) -> bool {
    let iv: Vec<_> = s.intervals().collect();
    iv.iter().all(|(lo, hi)| lo <= hi) && iv.windows(2).all(|w| w[0].1 + 1 < w[1].0)
}

/// Sets of values in `0..=max`, from a few random intervals or the full range.
fn arb_set(max: u128) -> impl Strategy<Value = FieldSet> {
    let len = prop_oneof![Just(0u128), 0..=3u128, 0..=max / 2];
    let intervals = prop::collection::vec((0..=max, len), 0..6).prop_map(move |v| {
        FieldSet::from_intervals(v.into_iter().map(|(lo, n)| (lo, (lo + n).min(max))))
    });
    prop_oneof![4 => intervals, 1 => Just(FieldSet::range(0, max))]
}

// The two small fields the filter and action properties live on.
const A: Field = Field::Paint; // 8 bits
const B: Field = Field::IpFlags; // 3 bits

fn points() -> impl Iterator<Item = PacketPoint> {
    (0..=255u128).flat_map(|a| (0..=7u128).map(move |b| PacketPoint::new().with(A, a).with(B, b)))
}

fn arb_filter() -> impl Strategy<Value = Filter> {
    (prop::option::of(arb_set(255)), prop::option::of(arb_set(7))).prop_map(|(a, b)| {
        let mut f = Filter::any();
        if let Some(a) = a {
            f.restrict(A, &a);
        }
        if let Some(b) = b {
            f.restrict(B, &b);
        }
        f
    })
}

fn arb_det_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Identity),
        any::<u128>().prop_map(Op::Set),
        (0..300u128).prop_map(Op::Set),
        (-300..300i128).prop_map(Op::Add),
        any::<i128>().prop_map(Op::Add),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => arb_det_op(),
        1 => (arb_set(255), 0..3u32).prop_map(|(values, id)| Op::Pool { values, id }),
        1 => (0..3u32).prop_map(|id| Op::Stateful { id }),
        1 => (0..3u32, -300..300i128).prop_map(|(id, add)| Op::StatefulThen { id, add }),
    ]
}

fn action_of<S: Strategy<Value = Op>>(ops: impl Fn() -> S) -> impl Strategy<Value = Action> {
    (ops(), ops()).prop_map(|(a, b)| Action::identity().with(A, a).with(B, b))
}

/// Every value `op` may write into a field of `field` holding `x`.
fn outputs(op: &Op, field: Field, x: u128) -> FieldSet {
    op.image(&FieldSet::single(x), field.width())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn prefixes_cover_the_set_exactly(a in arb_set(4095), width in prop_oneof![Just(8u32), Just(12u32)]) {
        let blocks = a.prefixes(width);
        let mut covered = FieldSet::empty();
        for &(v, len) in &blocks {
            let b = FieldSet::prefix(v, len, width);
            prop_assert_eq!(b.first(), Some(v), "block {}/{} is aligned", v, len);
            prop_assert!(covered.intersection(&b).is_empty(), "blocks are disjoint");
            covered = covered.union(&b);
        }
        prop_assert_eq!(covered, a.clip(width));
        // Few blocks: at most 2 * width per interval.
        prop_assert!(blocks.len() <= 2 * width as usize * a.clip(width).intervals().len().max(1));
    }

    #[test]
    fn field_set_ops_match_a_model(
        a in arb_set(4095),
        b in arb_set(4095),
        width in prop_oneof![Just(8u32), Just(12u32)],
    ) {
        let (ma, mb) = (model(&a), model(&b));
        let all: BTreeSet<u128> = (0..(1u128 << width)).collect();
        let union = a.union(&b);
        let inter = a.intersection(&b);
        let diff = a.difference(&b);
        let comp = a.complement(width);
        prop_assert_eq!(model(&union), &ma | &mb);
        prop_assert_eq!(model(&inter), &ma & &mb);
        prop_assert_eq!(model(&diff), &ma - &mb);
        prop_assert_eq!(model(&comp), &all - &ma);
        prop_assert_eq!(model(&a.clip(width)), &ma & &all);
        for s in [&a, &union, &inter, &diff, &comp] {
            prop_assert!(canonical(s));
            // Canonical: rebuilding from single values gives the same structure.
            prop_assert_eq!(s, &FieldSet::from_intervals(model(s).into_iter().map(|v| (v, v))));
        }
        prop_assert_eq!(a.len(), ma.len() as u128);
        prop_assert_eq!(a.is_empty(), ma.is_empty());
        prop_assert_eq!(a.is_full(width), ma == all);
        prop_assert_eq!(a.is_subset(&b), ma.is_subset(&mb));
        prop_assert_eq!(a.first(), ma.first().copied());
        prop_assert_eq!(a.last(), ma.last().copied());
        prop_assert_eq!(a == b, ma == mb);
        for v in 0..=4096u128 {
            prop_assert_eq!(a.contains(v), ma.contains(&v));
        }
    }

    #[test]
    fn from_mask_matches_brute_force(
        value in 0..4096u128,
        mask in prop_oneof![0..4096u128, any::<u128>()],
        width in prop_oneof![Just(8u32), Just(12u32)],
    ) {
        let s = FieldSet::from_mask(value, mask, width).unwrap();
        let expect: BTreeSet<u128> =
            (0..(1u128 << width)).filter(|x| x & mask == value & mask).collect();
        prop_assert!(canonical(&s));
        prop_assert_eq!(model(&s), expect);
    }

    #[test]
    fn prefix_matches_brute_force(
        value in any::<u128>(),
        len in 0..16u32,
        width in prop_oneof![Just(8u32), Just(12u32)],
    ) {
        let s = FieldSet::prefix(value, len, width);
        let l = len.min(width);
        let top = |x: u128| if l == 0 { 0 } else { (x & ((1u128 << width) - 1)) >> (width - l) };
        let expect: BTreeSet<u128> =
            (0..(1u128 << width)).filter(|&x| top(x) == top(value)).collect();
        prop_assert_eq!(model(&s), expect);
    }

    #[test]
    fn shift_matches_brute_force(
        a in arb_set(4095),
        c in prop_oneof![-5000..5000i128, any::<i128>()],
        width in prop_oneof![Just(8u32), Just(12u32)],
    ) {
        let m = (1u128 << width) - 1;
        let s = a.shift(c, width);
        let expect: BTreeSet<u128> =
            model(&a).into_iter().filter(|&x| x <= m).map(|x| x.wrapping_add(c as u128) & m).collect();
        prop_assert!(canonical(&s));
        prop_assert_eq!(model(&s), expect);
    }

    #[test]
    fn filter_ops_match_brute_force(f in arb_filter(), g in arb_filter()) {
        let inter = f.intersection(&g);
        let diff = f.difference(&g);
        let mut any_f = false;
        let mut f_in_g = true;
        for p in points() {
            let (inf, ing) = (f.contains(&p), g.contains(&p));
            any_f |= inf;
            f_in_g &= !inf || ing;
            prop_assert_eq!(inter.contains(&p), inf && ing);
            let hits = diff.iter().filter(|d| d.contains(&p)).count();
            prop_assert!(hits <= 1, "difference pieces overlap at {:?}", p);
            prop_assert_eq!(hits == 1, inf && !ing);
        }
        prop_assert_eq!(f.is_empty(), !any_f);
        prop_assert_eq!(f.is_subset(&g), f_in_g);
        prop_assert!(diff.iter().all(|d| !d.is_empty()));
        // Canonical: equal point sets are equal filters.
        prop_assert_eq!(f.is_subset(&g) && g.is_subset(&f), f == g);
    }

    #[test]
    fn filter_sets_stay_disjoint_and_match_brute_force(
        xs in prop::collection::vec(arb_filter(), 0..4),
        ys in prop::collection::vec(arb_filter(), 0..4),
    ) {
        let build = |fs: &[Filter]| {
            let mut s = FilterSet::empty();
            for f in fs {
                s.insert(f);
            }
            s
        };
        let (x, y) = (build(&xs), build(&ys));
        let union = x.union(&y);
        let inter = x.intersection(&y);
        let diff = x.difference(&y);
        let mut x_in_y = true;
        for p in points() {
            let inx = xs.iter().any(|f| f.contains(&p));
            let iny = ys.iter().any(|f| f.contains(&p));
            x_in_y &= !inx || iny;
            for (s, expect) in [(&x, inx), (&y, iny), (&union, inx || iny),
                                (&inter, inx && iny), (&diff, inx && !iny)] {
                let hits = s.members().iter().filter(|m| m.contains(&p)).count();
                prop_assert!(hits <= 1, "members overlap at {:?} in {}", p, s);
                prop_assert_eq!(hits == 1, expect);
                prop_assert_eq!(s.contains(&p), expect);
            }
        }
        prop_assert_eq!(x.is_subset(&y), x_in_y);
        prop_assert!(union.equivalent(&y.union(&x)));
        for s in [&x, &union, &inter, &diff] {
            prop_assert!(s.members().iter().all(|m| !m.is_empty()));
        }
    }

    #[test]
    fn composition_applies_in_order(
        a in action_of(arb_det_op),
        b in action_of(arb_det_op),
    ) {
        let ab = a.then(&b);
        prop_assert!(ab.is_deterministic());
        for p in points() {
            let step = a.apply(&p).and_then(|q| b.apply(&q));
            prop_assert!(step.is_some());
            prop_assert_eq!(ab.apply(&p), step);
        }
    }

    #[test]
    fn composition_is_associative_with_identity(
        a in action_of(arb_op),
        b in action_of(arb_op),
        c in action_of(arb_op),
    ) {
        prop_assert_eq!(a.then(&b).then(&c), a.then(&b.then(&c)));
        prop_assert_eq!(a.then(&Action::identity()), a.clone());
        prop_assert_eq!(Action::identity().then(&a), a);
    }

    #[test]
    fn image_is_the_set_of_results(a in action_of(arb_det_op), f in arb_filter()) {
        let image = a.image(&f);
        let reached: HashSet<PacketPoint> =
            points().filter(|p| f.contains(p)).filter_map(|p| a.apply(&p)).collect();
        for q in points() {
            prop_assert_eq!(image.contains(&q), reached.contains(&q));
        }
    }

    #[test]
    fn image_of_composition_is_image_of_image(
        a in action_of(arb_op),
        b in action_of(arb_op),
        f in arb_filter(),
    ) {
        prop_assert_eq!(a.then(&b).image(&f), b.image(&a.image(&f)));
        let set = FilterSet::from(f.clone());
        prop_assert!(a.image_set(&set).equivalent(&FilterSet::from(a.image(&f))));
    }

    #[test]
    fn preimage_is_exact_for_deterministic_actions(
        a in action_of(arb_det_op),
        f in arb_filter(),
    ) {
        let Preimage::Exact(pre) = a.preimage(&f) else {
            return Err(TestCaseError::fail("deterministic preimage needs a run-time decision"));
        };
        for p in points() {
            let after = a.apply(&p).expect("deterministic");
            prop_assert_eq!(pre.contains(&p), f.contains(&after));
        }
        // Consistency: the image of the preimage lies in the filter, and a filter lies in
        // the preimage of its image.
        prop_assert!(a.image(&pre).is_subset(&f));
        let Preimage::Exact(back) = a.preimage(&a.image(&f)) else {
            return Err(TestCaseError::fail("deterministic preimage needs a run-time decision"));
        };
        prop_assert!(f.is_subset(&back));
    }

    #[test]
    fn preimage_of_stateful_writes_is_sound(a in action_of(arb_op), f in arb_filter()) {
        let pre = a.preimage(&f);
        for p in points() {
            let mut may = true;
            let mut must = true;
            for field in [A, B] {
                let set = f.get(field);
                let out = outputs(a.get(field), field, p.get(field));
                may &= !out.intersection(&set).is_empty();
                must &= !out.is_empty() && out.is_subset(&set);
            }
            prop_assert_eq!(pre.may_match().contains(&p), may);
            match &pre {
                Preimage::Exact(_) => prop_assert_eq!(may, must),
                Preimage::RuntimeDecision { checks, .. } => {
                    prop_assert!(!checks.is_empty());
                    if !may {
                        continue;
                    }
                    // Every field without a check is settled; a checked field passes iff
                    // its run-time value falls in `allowed`.
                    for (field, set) in f.fields() {
                        let out = outputs(a.get(field), field, p.get(field));
                        match checks.iter().find(|c| c.field == field) {
                            Some(c) => {
                                prop_assert_eq!(Some(c.id), a.get(field).state_id());
                                prop_assert_eq!(&c.allowed, &out.intersection(set));
                                prop_assert!(!out.is_subset(set));
                            }
                            None => prop_assert!(out.is_subset(set)),
                        }
                    }
                }
            }
        }
    }
}

/// Values of a 128-bit field, biased towards the edges where arithmetic overflows.
fn wide_value() -> impl Strategy<Value = u128> {
    prop_oneof![
        Just(0u128),
        Just(u128::MAX),
        (0..8u128),
        (0..8u128).prop_map(|d| u128::MAX - d),
        (0..8u128).prop_map(|d| (1u128 << 127) ^ d),
        any::<u128>(),
    ]
}

fn wide_set() -> impl Strategy<Value = FieldSet> {
    prop::collection::vec((wide_value(), wide_value()), 0..5)
        .prop_map(|v| FieldSet::from_intervals(v.into_iter().map(|(a, b)| (a.min(b), a.max(b)))))
}

const WIDE: Field = Field::Raw { offset: 0, len: 16 };

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn wide_sets_keep_set_laws(a in wide_set(), b in wide_set(), c in any::<i128>()) {
        let inter = a.intersection(&b);
        let diff = a.difference(&b);
        for s in [&inter, &diff, &a.union(&b), &a.complement(128), &a.shift(c, 128)] {
            prop_assert!(s.intervals().all(|(lo, hi)| lo <= hi));
            prop_assert!(s.intervals().collect::<Vec<_>>().windows(2).all(|w| w[0].1 < w[1].0 && w[1].0 - w[0].1 > 1));
        }
        prop_assert_eq!(diff.union(&inter), a.clone());
        prop_assert!(diff.intersection(&b).is_empty());
        prop_assert_eq!(a.complement(128).complement(128), a.clone());
        prop_assert_eq!(a.shift(c, 128).shift(c.wrapping_neg(), 128), a.clone());
        prop_assert_eq!(a.union(&a.complement(128)), FieldSet::full(128));
        for (lo, hi) in a.intervals() {
            for v in [lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1)] {
                let inside = a.intervals().any(|(l, h)| l <= v && v <= h);
                prop_assert_eq!(a.contains(v), inside);
                prop_assert_eq!(a.shift(c, 128).contains(v.wrapping_add(c as u128)), inside);
            }
        }
    }

    #[test]
    fn wide_actions_are_exact_at_the_edges(
        ops in prop::collection::vec(
            prop_oneof![
                wide_value().prop_map(Op::Set),
                any::<i128>().prop_map(Op::Add),
                Just(Op::Add(i128::MIN)),
                Just(Op::Add(-1)),
            ],
            1..4,
        ),
        f in wide_set(),
        x in wide_value(),
    ) {
        let actions: Vec<Action> =
            ops.into_iter().map(|op| Action::identity().with(WIDE, op)).collect();
        let whole = actions.iter().fold(Action::identity(), |acc, a| acc.then(a));
        let p = PacketPoint::new().with(WIDE, x);
        let stepwise = actions.iter().try_fold(p.clone(), |q, a| a.apply(&q));
        prop_assert_eq!(whole.apply(&p), stepwise);
        let filter = Filter::any().with(WIDE, f);
        let Preimage::Exact(pre) = whole.preimage(&filter) else {
            return Err(TestCaseError::fail("deterministic preimage needs a run-time decision"));
        };
        let mut probes = vec![x];
        for (lo, hi) in pre.get(WIDE).intervals() {
            probes.extend([lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1)]);
        }
        for v in probes {
            let q = PacketPoint::new().with(WIDE, v);
            let after = whole.apply(&q).expect("deterministic");
            prop_assert_eq!(pre.contains(&q), filter.contains(&after));
        }
    }
}
