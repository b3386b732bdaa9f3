//! Patterns as header space: an [`Expr`] compiled into the [`FilterSet`] of the packets it
//! matches, for the semantic models of `IPClassifier` and `IPFilter`.
//!
//! The compilation is exact or refused: a packet is in `compile(expr)` (read with
//! [`crate::model::point_of`] at [`crate::model::IpAnchor::Annotation`]) iff
//! `expr.matches(&View::of(packet))`, under the model's layout convention that the transport
//! header is the IPv4 header plus its header length (IHL × 4). That is where `CheckIPHeader`
//! and `MarkIPHeader` put the transport annotation and where `View::of` looks when it is not
//! set, except that `View::of` finds no transport header at all when IHL < 5 and no annotation
//! is set; such packets do not reach a classifier through those elements.
//!
//! Each [`Test`] reads `len` bytes of one header. It becomes
//! * a presence condition: [`Field::IpAvail`] (network) or [`Field::L4Avail`] (transport)
//!   at least `offset + len`, since a test whose bytes are missing is false;
//! * a condition on the named fields whose bits it loads (see [`network_layout`] and
//!   [`transport_layout`]). `((raw >> shift) & mask) OP value` is first written as a union
//!   of disjoint *cubes* of `raw` (bit patterns: some bits fixed, the rest free): one cube
//!   for `==`, one per candidate first-differing bit for `>`, both for `>=`; `!=`, `<=` and
//!   `<` are the complements within the presence condition. A cube splits along field
//!   boundaries into one value/mask set per field ([`FieldSet::from_mask`]), so each cube is
//!   one box, however many fields the load spans (version + IHL, flags + fragment offset,
//!   source + destination port).
//!
//! `not`, `and` and `or` are the complement (within every packet), intersection and union.
//!
//! Refused (`None`):
//! * `ether` tests: the MAC-header annotation is not a field of the model. After `Strip(14)`
//!   it lies in the headroom and every `ether` test is false, so reading [`Field::EthSrc`] at
//!   the data start would be wrong;
//! * loads of bits no named field covers (IP checksum and options, TCP sequence numbers,
//!   window, ...) unless the mask ignores them;
//! * partial loads of a field the model cannot read whenever the test can: a field reads 0
//!   unless all the bytes it is loaded from are there, so `ip[12:2]` (half of
//!   [`Field::IpSrc`], which a 14-byte header already has) or `ip[6] & 0xe0`
//!   ([`Field::IpFlags`], loaded together with byte 7) cannot be decided from the fields;
//! * loads of 0 or more than 4 bytes (the parser makes neither);
//! * value/mask sets needing more than [`crate::model::FieldSet::from_mask`]'s interval limit
//!   (`ip[14:2]`, a non-prefix mask on the low bits of an address), and patterns needing more
//!   than [`MAX_BOXES`] boxes.

use super::eval::{Base, CmpOp, Expr, Test};
use crate::model::{Field, FieldSet, Filter, FilterSet};

/// The most disjoint boxes a compiled pattern (or any part of it) may need before the
/// compilation gives up.
pub const MAX_BOXES: usize = 1024;

/// The packets `expr` matches, as a union of disjoint boxes over the model's fields, or
/// `None` if that set cannot be written exactly (see the module documentation).
pub fn compile(expr: &Expr) -> Option<FilterSet> {
    let set = match expr {
        Expr::True => FilterSet::any(),
        Expr::False => FilterSet::empty(),
        Expr::Not(e) => FilterSet::any().difference(&compile(e)?),
        Expr::And(v) => {
            let mut acc = FilterSet::any();
            for e in v {
                acc = acc.intersection(&compile(e)?);
                if acc.is_empty() {
                    break; // false whatever the rest is
                }
                bounded(&acc)?;
            }
            acc
        }
        Expr::Or(v) => {
            let mut acc = FilterSet::empty();
            for e in v {
                acc = acc.union(&compile(e)?);
                bounded(&acc)?;
            }
            acc
        }
        Expr::Test(t) => compile_test(t)?,
    };
    bounded(&set)?;
    Some(set)
}

fn bounded(set: &FilterSet) -> Option<()> {
    (set.len() <= MAX_BOXES).then_some(())
}

/// One named field of a header: where its bits are and which bytes the model loads it from.
#[derive(Debug, Clone, Copy)]
pub struct Place {
    /// The field.
    pub field: Field,
    /// Its first bit, counted from the most significant bit of the header's byte 0.
    pub bit: u32,
    /// Its width in bits.
    pub width: u32,
    /// The end (exclusive, in bytes from the header start) of the bytes
    /// [`crate::model::point_of`] loads it from: the field reads 0 unless they are all there.
    /// [`Field::IpFlags`] shares bytes 6–7 with the fragment offset, so it needs byte 7.
    pub stored_to: u32,
}

const fn place(field: Field, bit: u32, width: u32, stored_to: u32) -> Place {
    Place {
        field,
        bit,
        width,
        stored_to,
    }
}

/// The named fields of the IPv4 header. Bytes 10–11 (checksum) and 20 on (options) have
/// none.
pub fn network_layout() -> Vec<Place> {
    vec![
        place(Field::IpVersion, 0, 4, 1),
        place(Field::IpIhl, 4, 4, 1),
        place(Field::IpTos, 8, 8, 2),
        place(Field::IpLen, 16, 16, 4),
        place(Field::IpId, 32, 16, 6),
        place(Field::IpFlags, 48, 3, 8),
        place(Field::IpFragOffset, 51, 13, 8),
        place(Field::IpTtl, 64, 8, 9),
        place(Field::IpProto, 72, 8, 10),
        place(Field::IpSrc, 96, 32, 16),
        place(Field::IpDst, 128, 32, 20),
    ]
}

/// The named fields of the transport header for a load of bytes `[offset, offset + len)`.
///
/// Bytes 0–1 are [`Field::SrcPort`] when the load reads both, else [`Field::IcmpType`] and
/// [`Field::IcmpCode`] (the same bits under the name covering what is read); bytes 2–3 are
/// [`Field::DstPort`], the high nibble of byte 12 [`Field::TcpDataOff`], byte 13
/// [`Field::TcpFlags`].
pub fn transport_layout(offset: u32, len: u32) -> Vec<Place> {
    let mut v = if offset == 0 && len >= 2 {
        vec![place(Field::SrcPort, 0, 16, 2)]
    } else {
        vec![
            place(Field::IcmpType, 0, 8, 1),
            place(Field::IcmpCode, 8, 8, 2),
        ]
    };
    v.push(place(Field::DstPort, 16, 16, 4));
    v.push(place(Field::TcpDataOff, 96, 4, 13));
    v.push(place(Field::TcpFlags, 104, 8, 14));
    v
}

/// A run of bits of a loaded value that belong to one field (or to none).
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// The field, or `None` for bits no field names, or for a field the model cannot read
    /// whenever the load can (its stored bytes reach past the load).
    field: Option<Field>,
    /// Bit index (0 = least significant) in the loaded value of the run's lowest bit.
    raw_lo: u32,
    /// Number of bits in the run.
    bits: u32,
    /// Bit index in the field's value of the run's lowest bit.
    field_lo: u32,
}

/// Splits the load of header bits `[start, end)` into runs along the fields of `layout`.
fn segments(layout: &[Place], start: u32, end: u32) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut at = start;
    let mut fields: Vec<Place> = layout.to_vec();
    fields.sort_by_key(|f| f.bit);
    let gap = |out: &mut Vec<Segment>, a: u32, b: u32| {
        if a < b {
            out.push(Segment {
                field: None,
                raw_lo: end - b,
                bits: b - a,
                field_lo: 0,
            });
        }
    };
    for f in fields {
        let a = at.max(f.bit);
        let b = end.min(f.bit + f.width);
        if a >= b {
            continue;
        }
        gap(&mut out, at, a);
        out.push(Segment {
            field: (8 * f.stored_to <= end).then_some(f.field),
            raw_lo: end - b,
            bits: b - a,
            field_lo: f.bit + f.width - b,
        });
        at = b;
    }
    gap(&mut out, at, end);
    out
}

fn ones(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// The cubes `(mask, value)` of `width`-bit values `y`-masked-by-`m` in relation `op` to `v`:
/// `{ z : (z & m) op v }` is the disjoint union of `{ z : z & mask == value }` over the
/// returned cubes, for `op` in `==`, `>`, `>=` (`m` has no bits at or above `width`).
fn cubes(width: u32, m: u128, v: u128, op: CmpOp) -> Vec<(u128, u128)> {
    let mut out = Vec::new();
    if matches!(op, CmpOp::Eq | CmpOp::Ge) && v & !m == 0 {
        out.push((m, v));
    }
    if matches!(op, CmpOp::Gt | CmpOp::Ge) && v >> width == 0 {
        // z & m > v: the highest bit where they differ is a bit k of m that v lacks, and
        // above it z & m equals v (so v has no bits outside m there).
        for k in 0..width {
            let bit = 1u128 << k;
            let above = ones(width) & !ones(k + 1);
            if m & bit != 0 && v & bit == 0 && v & above & !m == 0 {
                out.push(((m & above) | bit, (v & m & above) | bit));
            }
        }
    }
    out
}

/// One cube of the loaded value as a box over the fields of `segs` (`None` if it constrains
/// bits no field names, or a field's value/mask set is too large).
fn cube_box(mask: u128, value: u128, segs: &[Segment]) -> Option<Filter> {
    let mut f = Filter::any();
    for s in segs {
        let sm = (mask >> s.raw_lo) & ones(s.bits);
        if sm == 0 {
            continue;
        }
        let field = s.field?;
        let sv = (value >> s.raw_lo) & ones(s.bits);
        let set = FieldSet::from_mask(sv << s.field_lo, sm << s.field_lo, field.width()).ok()?;
        f = f.with(field, set);
    }
    Some(f)
}

/// The packets on which one test holds.
fn compile_test(t: &Test) -> Option<FilterSet> {
    let len = u32::from(t.len);
    let offset = u32::from(t.offset);
    if !(1..=4).contains(&len) || offset + len > 0xffff {
        return None;
    }
    let (layout, avail) = match t.base {
        Base::Mac => return None,
        Base::Network => (network_layout(), Field::IpAvail),
        Base::Transport => (transport_layout(offset, len), Field::L4Avail),
    };
    let present = Filter::any().with(avail, FieldSet::range(u128::from(offset + len), 0xffff));
    let nbits = 8 * len;
    let segs = segments(&layout, 8 * offset, 8 * (offset + len));

    // ((raw >> shift) & mask) OP value, with z = raw >> shift of `zbits` bits.
    let shift = u32::from(t.shift);
    let zbits = nbits.saturating_sub(shift);
    let m = u128::from(t.mask) & ones(zbits);
    let v = u128::from(t.value);
    let (op, negated) = match t.op {
        CmpOp::Ne => (CmpOp::Eq, true),
        CmpOp::Le => (CmpOp::Gt, true),
        CmpOp::Lt => (CmpOp::Ge, true),
        op => (op, false),
    };
    let mut holds = FilterSet::empty();
    for (cm, cv) in cubes(zbits, m, v, op) {
        // z's bits are the loaded value's bits from `shift` up (none if zbits is 0).
        let (rm, rv) = if zbits == 0 {
            (0, 0)
        } else {
            (cm << shift, cv << shift)
        };
        let b = cube_box(rm, rv, &segs)?;
        holds.insert(&b);
    }
    let present = FilterSet::from(present);
    Some(if negated {
        present.difference(&holds)
    } else {
        present.intersection(&holds)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(filters: Vec<Filter>) -> FilterSet {
        let mut s = FilterSet::empty();
        for f in &filters {
            s.insert(f);
        }
        s
    }

    #[test]
    fn cubes_cover_the_relation() {
        for width in 0..=6u32 {
            for m in 0..=ones(width) {
                for v in 0..=(ones(width) + 2) {
                    for op in [CmpOp::Eq, CmpOp::Gt, CmpOp::Ge] {
                        let cs = cubes(width, m, v, op);
                        for z in 0..=ones(width) {
                            let want = op.apply((z & m) as u32, v as u32);
                            let n = cs.iter().filter(|(cm, cv)| z & cm == *cv).count();
                            assert_eq!(n, usize::from(want), "w{width} m{m} v{v} {op:?} z{z}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn segments_split_along_fields() {
        // ip[6:2]: flags (3 bits) then fragment offset (13 bits).
        let s = segments(&network_layout(), 48, 64);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].field, s[0].raw_lo, s[0].bits, s[0].field_lo),
            (Some(Field::IpFlags), 13, 3, 0)
        );
        assert_eq!(
            (s[1].field, s[1].raw_lo, s[1].bits, s[1].field_lo),
            (Some(Field::IpFragOffset), 0, 13, 0)
        );
        // ip[9:4]: protocol, checksum (no field), the top byte of the source address (which
        // the model cannot read from 13 bytes).
        let s = segments(&network_layout(), 72, 104);
        let got: Vec<_> = s
            .iter()
            .map(|s| (s.field, s.raw_lo, s.bits, s.field_lo))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(Field::IpProto), 24, 8, 0),
                (None, 8, 16, 0),
                (None, 0, 8, 24)
            ]
        );
        // ip[6]: the flags, stored with byte 7, and the top of the fragment offset.
        let s = segments(&network_layout(), 48, 56);
        assert!(s.iter().all(|s| s.field.is_none()));
        // transp[12:2]: data offset, reserved bits, flags.
        let s = segments(&transport_layout(12, 2), 96, 112);
        let got: Vec<_> = s.iter().map(|s| (s.field, s.raw_lo, s.bits)).collect();
        assert_eq!(
            got,
            vec![
                (Some(Field::TcpDataOff), 12, 4),
                (None, 8, 4),
                (Some(Field::TcpFlags), 0, 8)
            ]
        );
    }

    #[test]
    fn flags_and_fragment_offset() {
        let frag = Test {
            mask: 0x3fff,
            ..Test::field(Base::Network, 6, 2, CmpOp::Ne, 0)
        };
        let got = compile(&Expr::Test(frag)).unwrap();
        let present = Filter::any().with(Field::IpAvail, FieldSet::range(8, 0xffff));
        let mf = present.clone().with(
            Field::IpFlags,
            FieldSet::from_intervals([(1, 1), (3, 3), (5, 5), (7, 7)]),
        );
        let off = present.with(Field::IpFragOffset, FieldSet::range(1, 0x1fff));
        assert!(got.equivalent(&set(vec![mf, off])), "{got}");
    }

    #[test]
    fn refused() {
        let mac = Test::field(Base::Mac, 0, 4, CmpOp::Eq, 1);
        assert!(compile(&Expr::Test(mac)).is_none());
        let cksum = Test::field(Base::Network, 10, 2, CmpOp::Eq, 1);
        assert!(compile(&Expr::Test(cksum)).is_none());
        let win = Test::field(Base::Transport, 14, 2, CmpOp::Gt, 1);
        assert!(compile(&Expr::Test(win)).is_none());
        // The low byte of an address under a value/mask: 2^24 intervals.
        let low = Test {
            mask: 0xff,
            ..Test::field(Base::Network, 12, 4, CmpOp::Eq, 5)
        };
        assert!(compile(&Expr::Test(low)).is_none());
        // But a mask ignoring the checksum bytes is fine: ip[8:4] & 0xff000000 == 64 << 24.
        let ttl = Test {
            mask: 0xff00_0000,
            ..Test::field(Base::Network, 8, 4, CmpOp::Eq, 64 << 24)
        };
        let want = Filter::any()
            .with(Field::IpAvail, FieldSet::range(12, 0xffff))
            .with(Field::IpTtl, FieldSet::single(64));
        assert!(compile(&Expr::Test(ttl))
            .unwrap()
            .equivalent(&FilterSet::from(want)));
        // And false under a refused test is still false.
        let e = Expr::And(vec![Expr::False, Expr::Test(mac)]);
        assert!(compile(&e).unwrap().is_empty());
    }
}
