//! A compiled tcpdump expression as header space, for `PcapFilter`'s model.
//!
//! Evaluation is three-valued (true, false, abort), and some comparisons cannot be written
//! over the model's fields (variable offsets, arithmetic between loads): those are *unknown*.
//! [`regions`] computes, for an expression, the disjoint sets of packets on which it is
//! surely true ([`Regions::yes`]), surely false ([`Regions::no`]) and unknown
//! ([`Regions::unknown`]); the rest aborts (and so is rejected). Fields are read with the
//! model anchor [`IpAnchor::Data(14)`](crate::model::IpAnchor): the frame starts at the
//! data, the IPv4 header is at byte 14, transport fields at 14 + IHL × 4.
//!
//! A comparison `((load >> shift) & mask) OP constant` is compiled when the load is
//! * at a fixed offset: through the Click dialect's compiler ([`crate::ipfilter::space`])
//!   for the IPv4 header's named fields when it reads inside the header at byte 14, else as
//!   a [`Field::Raw`] read (or [`Field::EtherType`]) with [`Field::FrameLen`] covering it;
//! * relative to the IPv4 transport header at 14 + IHL × 4 (`tcp[13]`, ports): through the
//!   Click dialect's compiler on the transport fields;
//! * `len` (with `greater`/`less`): [`Field::FrameLen`], the data length.
//!
//! Anything else (an index computed from the packet, `len` in arithmetic, a load after a
//! `vlan` in the transport header, ...) is unknown: the model hands those packets to the
//! element ([`crate::model::Outcome::Runtime`]).

use super::expr::{ArithOp, Pred, Value};
use crate::ipfilter::space::{compile, MAX_BOXES};
use crate::ipfilter::{full_mask, Base, CmpOp, Expr, Test};
use crate::model::{Field, FieldSet, Filter, FilterSet};

/// The packets on which an expression is true, false or unknown (disjoint sets).
#[derive(Debug, Clone)]
pub struct Regions {
    /// Surely true.
    pub yes: FilterSet,
    /// Surely false.
    pub no: FilterSet,
    /// Not decidable from the model's fields.
    pub unknown: FilterSet,
}

impl Regions {
    fn opaque() -> Regions {
        Regions {
            yes: FilterSet::empty(),
            no: FilterSet::empty(),
            unknown: FilterSet::any(),
        }
    }
}

fn bounded(s: FilterSet) -> Option<FilterSet> {
    (s.len() <= MAX_BOXES).then_some(s)
}

/// The regions of `p`, or `None` if they need more than [`MAX_BOXES`] boxes.
pub fn regions(p: &Pred) -> Option<Regions> {
    Some(match p {
        Pred::True => Regions {
            yes: FilterSet::any(),
            no: FilterSet::empty(),
            unknown: FilterSet::empty(),
        },
        Pred::False => Regions {
            yes: FilterSet::empty(),
            no: FilterSet::any(),
            unknown: FilterSet::empty(),
        },
        Pred::Not(q) => {
            let r = regions(q)?;
            Regions {
                yes: r.no,
                no: r.yes,
                unknown: r.unknown,
            }
        }
        Pred::And(v) => {
            let mut acc = regions(&Pred::True)?;
            for q in v {
                let r = regions(q)?;
                acc = Regions {
                    no: bounded(acc.no.union(&acc.yes.intersection(&r.no)))?,
                    unknown: bounded(acc.unknown.union(&acc.yes.intersection(&r.unknown)))?,
                    yes: bounded(acc.yes.intersection(&r.yes))?,
                };
            }
            acc
        }
        Pred::Or(v) => {
            let mut acc = regions(&Pred::False)?;
            for q in v {
                let r = regions(q)?;
                acc = Regions {
                    yes: bounded(acc.yes.union(&acc.no.intersection(&r.yes)))?,
                    unknown: bounded(acc.unknown.union(&acc.no.intersection(&r.unknown)))?,
                    no: bounded(acc.no.intersection(&r.no))?,
                };
            }
            acc
        }
        Pred::Cmp(a, op, b) => match cmp(a, *op, b) {
            Some((yes, no)) => Regions {
                yes,
                no,
                unknown: FilterSet::empty(),
            },
            None => Regions::opaque(),
        },
    })
}

/// `(load, shift, mask)` of a value `((load >> shift) & mask)`.
fn field_form(v: &Value) -> Option<(&Value, u32, u32)> {
    match v {
        Value::Load { size, .. } => Some((v, 0, full_mask(*size))),
        Value::Len => Some((v, 0, 0xffff_ffff)),
        Value::Bin(ArithOp::And, x, m) | Value::Bin(ArithOp::And, m, x)
            if m.constant().is_some() =>
        {
            let (l, s, mm) = field_form(x)?;
            Some((l, s, mm & m.constant()?))
        }
        Value::Bin(ArithOp::Shr, x, s) => {
            let s = s.constant()?;
            let (l, s0, m) = field_form(x)?;
            if s0 != 0 || s >= 32 || m != full_mask_of(l) {
                return None;
            }
            Some((l, s, m >> s))
        }
        _ => None,
    }
}

fn full_mask_of(l: &Value) -> u32 {
    match l {
        Value::Load { size, .. } => full_mask(*size),
        _ => u32::MAX,
    }
}

fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Ge => CmpOp::Le,
        op => op,
    }
}

/// The (true, false) sets of a comparison, or `None` if it is not expressible.
fn cmp(a: &Value, op: CmpOp, b: &Value) -> Option<(FilterSet, FilterSet)> {
    let (v, op, c) = match (a.constant(), b.constant()) {
        (Some(x), Some(y)) => {
            return Some(if op.apply(x, y) {
                (FilterSet::any(), FilterSet::empty())
            } else {
                (FilterSet::empty(), FilterSet::any())
            })
        }
        (None, Some(c)) => (a, op, c),
        (Some(c), None) => (b, flip(op), c),
        (None, None) => return None,
    };
    let (load, shift, mask) = field_form(v)?;
    match load {
        Value::Len => {
            // The model's frame length saturates at 65535: larger constants stay opaque.
            if shift != 0 || mask != u32::MAX || c >= 0xffff {
                return None;
            }
            let yes =
                FilterSet::from(Filter::any().with(Field::FrameLen, interval(op, c, 0xffff)?));
            let no = FilterSet::any().difference(&yes);
            Some((yes, no))
        }
        Value::Load {
            ihl_at: None,
            index: None,
            off,
            size,
        } => fixed(*off, *size, shift, mask, op, c),
        Value::Load {
            ihl_at: Some(14),
            index: None,
            off,
            size,
        } if *off >= 14 => {
            let t = Test {
                base: Base::Transport,
                offset: u16::try_from(off - 14).ok()?,
                len: *size,
                shift: u8::try_from(shift).ok()?,
                mask,
                op,
                value: c,
            };
            click_pair(&t)
        }
        _ => None,
    }
}

/// The true and false sets of a Click test (both within the test's presence condition).
fn click_pair(t: &Test) -> Option<(FilterSet, FilterSet)> {
    let yes = compile(&Expr::Test(*t))?;
    let no = compile(&Expr::Test(Test {
        op: t.op.negate(),
        ..*t
    }))?;
    Some((yes, no))
}

/// `{x : x OP c}` over a field of values `0..=max`, if one interval.
fn interval(op: CmpOp, c: u32, max: u128) -> Option<FieldSet> {
    let c = u128::from(c);
    let set = match op {
        CmpOp::Eq => FieldSet::single(c),
        CmpOp::Ne => FieldSet::single(c).complement(width_of(max)),
        CmpOp::Lt if c == 0 => FieldSet::empty(),
        CmpOp::Lt => FieldSet::range(0, c - 1),
        CmpOp::Le => FieldSet::range(0, c),
        CmpOp::Gt => FieldSet::range(c + 1, max.max(c + 1)),
        CmpOp::Ge => FieldSet::range(c, max.max(c)),
    };
    Some(set.clip(width_of(max)))
}

fn width_of(max: u128) -> u32 {
    128 - max.leading_zeros()
}

/// A comparison on `size` bytes at fixed frame offset `off`.
fn fixed(
    off: u32,
    size: u8,
    shift: u32,
    mask: u32,
    op: CmpOp,
    c: u32,
) -> Option<(FilterSet, FilterSet)> {
    let end = off + u32::from(size);
    if end > 0xffff {
        return None;
    }
    if off >= 14 {
        let t = Test {
            base: Base::Network,
            offset: u16::try_from(off - 14).ok()?,
            len: size,
            shift: u8::try_from(shift).ok()?,
            mask,
            op,
            value: c,
        };
        if let Some(pair) = click_pair(&t) {
            return Some(pair);
        }
    }
    let (field, width) = if off == 12 && size == 2 {
        (Field::EtherType, 16)
    } else {
        (
            Field::raw(u16::try_from(off).ok()?, size)?,
            8 * u32::from(size),
        )
    };
    let present = Filter::any().with(Field::FrameLen, FieldSet::range(u128::from(end), 0xffff));
    let full = full_mask(size) >> shift;
    let holds = if mask == full {
        // (raw >> shift) OP c  ⇔  raw in an interval.
        let z = interval(op, c, u128::from(full))?;
        let mut ivs = Vec::new();
        for (lo, hi) in z.intervals() {
            ivs.push((lo << shift, ((hi + 1) << shift) - 1));
        }
        FieldSet::from_intervals(ivs)
    } else {
        let (eq, negated) = match op {
            CmpOp::Eq => (true, false),
            CmpOp::Ne => (true, true),
            _ => (false, false),
        };
        if !eq {
            return None;
        }
        let set = if c & !mask != 0 {
            FieldSet::empty()
        } else {
            FieldSet::from_mask(u128::from(c) << shift, u128::from(mask) << shift, width).ok()?
        };
        if negated {
            set.complement(width)
        } else {
            set
        }
    };
    let yes_f = present.clone().with(field, holds.clone());
    let yes = if yes_f.is_empty() {
        FilterSet::empty()
    } else {
        FilterSet::from(yes_f)
    };
    let no_set = holds.complement(width);
    let no_f = present.with(field, no_set);
    let no = if no_f.is_empty() {
        FilterSet::empty()
    } else {
        FilterSet::from(no_f)
    };
    Some((yes, no))
}
