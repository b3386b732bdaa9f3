//! Field sets: unions of disjoint value intervals (SNF's field filters).

use std::fmt;

use crate::field::max_value;

/// The most intervals [`FieldSet::from_mask`] will build before giving up.
pub const MAX_MASK_INTERVALS: usize = 4096;

/// An error from building a set or filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpaceError {
    /// A value/mask match would need more than `limit` intervals (`needed` of them).
    TooManyIntervals {
        /// Intervals the exact set needs (saturating).
        needed: u128,
        /// The limit, [`MAX_MASK_INTERVALS`].
        limit: usize,
    },
}

impl fmt::Display for SpaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpaceError::TooManyIntervals { needed, limit } => write!(
                f,
                "value/mask match needs {needed} intervals, more than the limit of {limit}"
            ),
        }
    }
}

impl std::error::Error for SpaceError {}

/// A set of values of one field, kept as sorted, disjoint, non-adjacent inclusive intervals.
///
/// The form is canonical, so `==` is set equality. A set does not carry a width: the
/// operations that need one ([`FieldSet::full`], [`FieldSet::complement`],
/// [`FieldSet::shift`], ...) take it as an argument, and [`crate::Filter`] clips every set
/// to its field's width.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldSet {
    intervals: Vec<(u128, u128)>,
}

impl FieldSet {
    /// The empty set.
    pub fn empty() -> FieldSet {
        FieldSet::default()
    }

    /// Every value of a `width`-bit field, `[0, 2^width - 1]`.
    pub fn full(width: u32) -> FieldSet {
        FieldSet::range(0, max_value(width))
    }

    /// The one value `v`.
    pub fn single(v: u128) -> FieldSet {
        FieldSet::range(v, v)
    }

    /// The values `lo..=hi` (empty if `lo > hi`).
    pub fn range(lo: u128, hi: u128) -> FieldSet {
        let intervals = if lo <= hi { vec![(lo, hi)] } else { Vec::new() };
        FieldSet { intervals }
    }

    /// The union of the given inclusive intervals (intervals with `lo > hi` are ignored).
    pub fn from_intervals(intervals: impl IntoIterator<Item = (u128, u128)>) -> FieldSet {
        let mut all: Vec<_> = intervals.into_iter().filter(|(lo, hi)| lo <= hi).collect();
        all.sort_unstable();
        let mut out: Vec<(u128, u128)> = Vec::with_capacity(all.len());
        for (lo, hi) in all {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        FieldSet { intervals: out }
    }

    /// The `width`-bit values whose top `len` bits equal those of `value` (an address prefix).
    ///
    /// `len` is capped at `width`; `len == 0` gives the full set.
    pub fn prefix(value: u128, len: u32, width: u32) -> FieldSet {
        let width = width.min(128);
        let len = len.min(width);
        if len == 0 {
            return FieldSet::full(width);
        }
        let host = max_value(width - len);
        let lo = value & max_value(width) & !host;
        FieldSet::range(lo, lo | host)
    }

    /// The `width`-bit values `x` with `x & mask == value & mask` (Click's `value%mask`).
    ///
    /// A mask that is not a prefix matches many intervals: one per combination of the
    /// unmasked bits above the lowest masked bit. Beyond [`MAX_MASK_INTERVALS`] this returns
    /// [`SpaceError::TooManyIntervals`] so that the caller can fall back (e.g. to a run-time
    /// check).
    pub fn from_mask(value: u128, mask: u128, width: u32) -> Result<FieldSet, SpaceError> {
        let width = width.min(128);
        let base = value & mask;
        if base > max_value(width) {
            return Ok(FieldSet::empty()); // a masked bit beyond the width must be 1
        }
        let mask = mask & max_value(width);
        if mask == 0 {
            return Ok(FieldSet::full(width));
        }
        let low = mask.trailing_zeros(); // < width because mask != 0
        let block = max_value(low);
        let free: Vec<u32> = (low..width).filter(|&b| mask & (1u128 << b) == 0).collect();
        let needed = 1u128.checked_shl(free.len() as u32).unwrap_or(u128::MAX);
        if needed > MAX_MASK_INTERVALS as u128 {
            return Err(SpaceError::TooManyIntervals {
                needed,
                limit: MAX_MASK_INTERVALS,
            });
        }
        // Depositing a counter into the free bits enumerates the blocks in increasing
        // order; two blocks never touch because they agree on the lowest masked bit.
        let intervals = (0..needed)
            .map(|c| {
                let lo = free
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| c & (1u128 << i) != 0)
                    .fold(base, |acc, (_, &b)| acc | (1u128 << b));
                (lo, lo | block)
            })
            .collect();
        Ok(FieldSet { intervals })
    }

    /// The set as the fewest aligned blocks of a `width`-bit field (at most 127 bits):
    /// (first value, prefix length), in order; a range of `n` values needs at most
    /// `2 log2 n` blocks. What a ternary match (an OpenFlow value/mask) can express.
    pub fn prefixes(&self, width: u32) -> Vec<(u128, u32)> {
        let width = width.min(127);
        let mut out = Vec::new();
        for (lo, hi) in self.clip(width).intervals() {
            let mut at = lo;
            loop {
                // The largest aligned block starting at `at` that ends by `hi`.
                let mut k = at.trailing_zeros().min(width);
                while k > 0 && at + ((1u128 << k) - 1) > hi {
                    k -= 1;
                }
                out.push((at, width - k));
                let next = at + (1u128 << k);
                if next > hi {
                    break;
                }
                at = next;
            }
        }
        out
    }

    /// Whether the set has no values.
    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// Whether the set holds every value of a `width`-bit field.
    pub fn is_full(&self, width: u32) -> bool {
        self.intervals == [(0, max_value(width))]
    }

    /// Whether `v` is in the set.
    pub fn contains(&self, v: u128) -> bool {
        let i = self.intervals.partition_point(|&(_, hi)| hi < v);
        self.intervals.get(i).is_some_and(|&(lo, _)| lo <= v)
    }

    /// The number of values, saturating at `u128::MAX` (only the full 128-bit set saturates).
    pub fn len(&self) -> u128 {
        self.intervals.iter().fold(0u128, |n, &(lo, hi)| {
            n.saturating_add((hi - lo).saturating_add(1))
        })
    }

    /// The smallest value, if any.
    pub fn first(&self) -> Option<u128> {
        self.intervals.first().map(|&(lo, _)| lo)
    }

    /// The largest value, if any.
    pub fn last(&self) -> Option<u128> {
        self.intervals.last().map(|&(_, hi)| hi)
    }

    /// The intervals `(lo, hi)` (inclusive), sorted, disjoint and non-adjacent.
    pub fn intervals(&self) -> impl ExactSizeIterator<Item = (u128, u128)> + '_ {
        self.intervals.iter().copied()
    }

    /// Values in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet::from_intervals(self.intervals().chain(other.intervals()))
    }

    /// Values in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let (a, b) = (&self.intervals, &other.intervals);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while let (Some(&(alo, ahi)), Some(&(blo, bhi))) = (a.get(i), b.get(j)) {
            let (lo, hi) = (alo.max(blo), ahi.min(bhi));
            if lo <= hi {
                out.push((lo, hi));
            }
            if ahi < bhi {
                i += 1;
            } else {
                j += 1;
            }
        }
        FieldSet { intervals: out }
    }

    /// Values in `self` but not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let b = &other.intervals;
        let mut out = Vec::new();
        let mut j = 0;
        for &(lo, hi) in &self.intervals {
            while b.get(j).is_some_and(|&(_, bhi)| bhi < lo) {
                j += 1;
            }
            let mut cur = lo;
            let mut k = j;
            loop {
                match b.get(k) {
                    Some(&(blo, bhi)) if blo <= hi => {
                        if blo > cur {
                            out.push((cur, blo - 1));
                        }
                        if bhi >= hi {
                            break;
                        }
                        cur = cur.max(bhi + 1);
                        k += 1;
                    }
                    _ => {
                        out.push((cur, hi));
                        break;
                    }
                }
            }
        }
        FieldSet { intervals: out }
    }

    /// The values of a `width`-bit field that are not in the set.
    pub fn complement(&self, width: u32) -> FieldSet {
        FieldSet::full(width).difference(self)
    }

    /// Whether every value of `self` is in `other`.
    pub fn is_subset(&self, other: &FieldSet) -> bool {
        self.difference(other).is_empty()
    }

    /// The set clipped to the values of a `width`-bit field.
    pub fn clip(&self, width: u32) -> FieldSet {
        let max = max_value(width);
        if self.last().is_none_or(|m| m <= max) {
            return self.clone();
        }
        self.intersection(&FieldSet::full(width))
    }

    /// `{ (x + c) mod 2^width | x in self }` for the values of a `width`-bit field.
    ///
    /// Values beyond the width are dropped first; an interval that wraps splits in two.
    pub fn shift(&self, c: i128, width: u32) -> FieldSet {
        let max = max_value(width);
        let c = c as u128 & max; // two's complement: congruent to c modulo 2^width
        let mut pieces = Vec::with_capacity(self.intervals.len() + 1);
        for (lo, hi) in self.clip(width).intervals() {
            let (nlo, nhi) = (lo.wrapping_add(c) & max, hi.wrapping_add(c) & max);
            if nlo <= nhi {
                pieces.push((nlo, nhi));
            } else {
                pieces.push((nlo, max));
                pieces.push((0, nhi));
            }
        }
        FieldSet::from_intervals(pieces)
    }
}

impl fmt::Display for FieldSet {
    /// Writes `{}` when empty, else the intervals joined by ` | `, a single value as `{v}`
    /// and a range as `[lo, hi]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("{}");
        }
        for (i, (lo, hi)) in self.intervals().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            if lo == hi {
                write!(f, "{{{lo}}}")?;
            } else {
                write!(f, "[{lo}, {hi}]")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_lists_intervals() {
        assert_eq!(FieldSet::empty().to_string(), "{}");
        assert_eq!(FieldSet::single(80).to_string(), "{80}");
        let s = FieldSet::from_intervals([(3, 255), (1, 1)]);
        assert_eq!(s.to_string(), "{1} | [3, 255]");
    }

    #[test]
    fn adjacent_intervals_merge() {
        let s = FieldSet::from_intervals([(5, 9), (0, 4), (11, 11), (10, 10)]);
        assert_eq!(s, FieldSet::range(0, 11));
        let top = FieldSet::from_intervals([(u128::MAX, u128::MAX), (0, u128::MAX - 1)]);
        assert!(top.is_full(128));
        assert_eq!(top.len(), u128::MAX);
        assert_eq!(FieldSet::range(9, 3), FieldSet::empty());
    }

    #[test]
    fn prefixes_are_address_blocks() {
        let ten = FieldSet::prefix(0x0a01_0203, 8, 32);
        assert_eq!(ten, FieldSet::range(0x0a00_0000, 0x0aff_ffff));
        assert_eq!(FieldSet::prefix(7, 0, 32), FieldSet::full(32));
        assert_eq!(FieldSet::prefix(7, 40, 32), FieldSet::single(7));
        assert!(FieldSet::prefix(0, 0, 128).is_full(128));
        assert_eq!(FieldSet::prefix(1 << 127, 1, 128).first(), Some(1 << 127));
    }

    #[test]
    fn masks_that_are_not_prefixes_split() {
        // Even values of 8 bits: 128 singletons.
        let even = FieldSet::from_mask(0, 1, 8).unwrap();
        assert_eq!(even.intervals().len(), 128);
        assert_eq!(even.len(), 128);
        assert!(even.contains(254) && !even.contains(255));
        // A /16 written as value%mask is one interval.
        let net = FieldSet::from_mask(0x0a0b_0000, 0xffff_0000, 32).unwrap();
        assert_eq!(net, FieldSet::prefix(0x0a0b_0000, 16, 32));
        // The low bit of a 32-bit address leaves 2^31 intervals: refused.
        assert_eq!(
            FieldSet::from_mask(1, 1, 32),
            Err(SpaceError::TooManyIntervals {
                needed: 1 << 31,
                limit: MAX_MASK_INTERVALS
            })
        );
        // Exactly at the limit is fine: 12 free bits above the masked bit 0.
        assert_eq!(
            FieldSet::from_mask(0, 1, 13).map(|s| s.intervals().len()),
            Ok(4096)
        );
        assert!(FieldSet::from_mask(0, 1, 14).is_err());
        assert!(FieldSet::from_mask(1, 1, 128).is_err());
    }

    #[test]
    fn shifting_wraps_around() {
        let ttl = FieldSet::range(2, 255);
        assert_eq!(ttl.shift(-1, 8), FieldSet::range(1, 254));
        assert_eq!(
            ttl.shift(1, 8),
            FieldSet::from_intervals([(3, 255), (0, 0)])
        );
        assert_eq!(FieldSet::full(8).shift(77, 8), FieldSet::full(8));
        assert_eq!(
            FieldSet::single(u128::MAX).shift(1, 128),
            FieldSet::single(0)
        );
        assert_eq!(
            FieldSet::single(0).shift(i128::MIN, 128),
            FieldSet::single(1 << 127)
        );
    }
}
