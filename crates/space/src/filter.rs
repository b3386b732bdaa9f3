//! Packet points, packet filters (boxes of the packet space) and unions of disjoint filters.

use std::collections::BTreeMap;
use std::fmt;

use crate::field::Field;
use crate::set::FieldSet;

/// One packet as a point of the packet space: a value per field, 0 where not set.
///
/// Values are stored masked to the field's width and zeros are not stored, so `==` compares
/// the points.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PacketPoint {
    values: BTreeMap<Field, u128>,
}

impl PacketPoint {
    /// The point with every field 0.
    pub fn new() -> PacketPoint {
        PacketPoint::default()
    }

    /// The value of `field` (0 if never set).
    pub fn get(&self, field: Field) -> u128 {
        self.values.get(&field).copied().unwrap_or(0)
    }

    /// Sets `field` to `value` reduced modulo `2^width`.
    pub fn set(&mut self, field: Field, value: u128) {
        let value = value & field.max_value();
        if value == 0 {
            self.values.remove(&field);
        } else {
            self.values.insert(field, value);
        }
    }

    /// The point with `field` set to `value` (builder form of [`PacketPoint::set`]).
    pub fn with(mut self, field: Field, value: u128) -> PacketPoint {
        self.set(field, value);
        self
    }

    /// The non-zero fields and their values, in field order.
    pub fn iter(&self) -> impl Iterator<Item = (Field, u128)> + '_ {
        self.values.iter().map(|(&f, &v)| (f, v))
    }
}

/// SNF's packet filter: a box of the packet space, one [`FieldSet`] per field.
///
/// A field that is not mentioned may take any value. If any field's set is empty the whole
/// filter is empty; all empty filters are stored alike, and full sets are not stored, so `==`
/// is set equality.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Filter {
    empty: bool,
    fields: BTreeMap<Field, FieldSet>,
}

impl Filter {
    /// The filter that matches every packet.
    pub fn any() -> Filter {
        Filter::default()
    }

    /// The filter that matches no packet.
    pub fn none() -> Filter {
        Filter {
            empty: true,
            fields: BTreeMap::new(),
        }
    }

    /// The filter further restricted to packets whose `field` is in `set` ("and field ∈ set").
    pub fn with(mut self, field: Field, set: FieldSet) -> Filter {
        self.restrict(field, &set);
        self
    }

    /// Restricts `field` to `set`, intersecting with any constraint already there.
    pub fn restrict(&mut self, field: Field, set: &FieldSet) {
        if self.empty {
            return;
        }
        let width = field.width();
        let next = match self.fields.get(&field) {
            Some(old) => old.intersection(set),
            None => set.clip(width),
        };
        if next.is_empty() {
            *self = Filter::none();
        } else if next.is_full(width) {
            self.fields.remove(&field);
        } else {
            self.fields.insert(field, next);
        }
    }

    /// The values `field` may take: full if unconstrained, empty if the filter is empty.
    pub fn get(&self, field: Field) -> FieldSet {
        if self.empty {
            return FieldSet::empty();
        }
        self.fields
            .get(&field)
            .cloned()
            .unwrap_or_else(|| FieldSet::full(field.width()))
    }

    /// The constrained fields and their sets, in field order (none for an empty filter).
    pub fn fields(&self) -> impl Iterator<Item = (Field, &FieldSet)> + '_ {
        self.fields.iter().map(|(&f, s)| (f, s))
    }

    /// Whether the filter matches no packet.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// Whether the filter matches every packet.
    pub fn is_any(&self) -> bool {
        !self.empty && self.fields.is_empty()
    }

    /// Whether the packet `p` matches.
    pub fn contains(&self, p: &PacketPoint) -> bool {
        !self.empty && self.fields.iter().all(|(&f, s)| s.contains(p.get(f)))
    }

    /// Packets matching both filters.
    pub fn intersection(&self, other: &Filter) -> Filter {
        if other.empty {
            return Filter::none();
        }
        let mut out = self.clone();
        for (&f, s) in &other.fields {
            out.restrict(f, s);
        }
        out
    }

    /// Whether every packet matching `self` matches `other`.
    pub fn is_subset(&self, other: &Filter) -> bool {
        self.empty || (!other.empty && other.fields.iter().all(|(&f, s)| self.get(f).is_subset(s)))
    }

    /// Packets matching `self` but not `other`, as disjoint non-empty filters.
    ///
    /// Box subtraction: for each field `other` constrains, in order, carve off the part of
    /// the remaining box outside `other`'s set, then keep only the inside and go on.
    pub fn difference(&self, other: &Filter) -> Vec<Filter> {
        if self.intersection(other).is_empty() {
            return if self.empty {
                Vec::new()
            } else {
                vec![self.clone()]
            };
        }
        let mut out = Vec::new();
        let mut rest = self.clone();
        for (&f, s) in &other.fields {
            let outside = rest.get(f).difference(s);
            if !outside.is_empty() {
                out.push(rest.clone().with_replaced(f, outside));
            }
            rest.restrict(f, s);
        }
        out
    }

    /// The filter with no constraint on `field` (an empty filter stays empty).
    pub fn without(mut self, field: Field) -> Filter {
        self.fields.remove(&field);
        self
    }

    /// The filter with `field`'s set replaced by `set`.
    fn with_replaced(self, field: Field, set: FieldSet) -> Filter {
        self.without(field).with(field, set)
    }

    /// The single field where two non-empty filters differ, `Some(None)` if they are equal,
    /// `None` if they differ in more than one field.
    fn differing_field(&self, other: &Filter) -> Option<Option<Field>> {
        let mut found = None;
        let keys = self.fields.keys().chain(other.fields.keys());
        for &f in keys {
            if self.fields.get(&f) != other.fields.get(&f) && found != Some(f) {
                if found.is_some() {
                    return None;
                }
                found = Some(f);
            }
        }
        Some(found)
    }
}

impl fmt::Display for Filter {
    /// Writes `none`, `any`, or the constraints as `field in set` joined by ` && `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.empty {
            return f.write_str("none");
        }
        if self.fields.is_empty() {
            return f.write_str("any");
        }
        for (i, (field, set)) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(" && ")?;
            }
            write!(f, "{field} in {set}")?;
        }
        Ok(())
    }
}

/// A union of pairwise disjoint, non-empty filters (SNF's traffic-class filter).
///
/// The members are kept disjoint by every operation, and neighbours that differ in only one
/// field are merged. The decomposition is not unique, so compare two sets with
/// [`FilterSet::equivalent`], not `==`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FilterSet {
    members: Vec<Filter>,
}

impl FilterSet {
    /// The set matching no packet.
    pub fn empty() -> FilterSet {
        FilterSet::default()
    }

    /// The set matching every packet.
    pub fn any() -> FilterSet {
        FilterSet::from(Filter::any())
    }

    /// The disjoint members.
    pub fn members(&self) -> &[Filter] {
        &self.members
    }

    /// The number of disjoint members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set matches no packet.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether the packet `p` matches some member.
    pub fn contains(&self, p: &PacketPoint) -> bool {
        self.members.iter().any(|m| m.contains(p))
    }

    /// Adds the packets of `filter` (only the part not already covered is stored).
    pub fn insert(&mut self, filter: &Filter) {
        let mut pieces = vec![filter.clone()];
        for m in &self.members {
            pieces = pieces.iter().flat_map(|p| p.difference(m)).collect();
            if pieces.is_empty() {
                return;
            }
        }
        for p in pieces {
            self.push_merged(p);
        }
    }

    /// Packets in either set.
    pub fn union(&self, other: &FilterSet) -> FilterSet {
        let mut out = self.clone();
        for m in &other.members {
            out.insert(m);
        }
        out
    }

    /// Packets in both sets.
    pub fn intersection(&self, other: &FilterSet) -> FilterSet {
        let mut out = FilterSet::empty();
        for a in &self.members {
            for b in &other.members {
                let ab = a.intersection(b);
                if !ab.is_empty() {
                    out.push_merged(ab);
                }
            }
        }
        out
    }

    /// Packets in `self` but not in `other`.
    pub fn difference(&self, other: &FilterSet) -> FilterSet {
        let mut out = FilterSet::empty();
        for a in &self.members {
            let mut pieces = vec![a.clone()];
            for b in &other.members {
                pieces = pieces.iter().flat_map(|p| p.difference(b)).collect();
            }
            for p in pieces {
                out.push_merged(p);
            }
        }
        out
    }

    /// Whether every packet of `self` is in `other`.
    pub fn is_subset(&self, other: &FilterSet) -> bool {
        self.difference(other).is_empty()
    }

    /// Whether both sets match the same packets.
    pub fn equivalent(&self, other: &FilterSet) -> bool {
        self.is_subset(other) && other.is_subset(self)
    }

    /// Adds `f`, which must be non-empty and disjoint from every member, merging it with a
    /// member that differs in one field only (repeatedly, as a merge may enable another).
    fn push_merged(&mut self, mut f: Filter) {
        if f.is_empty() {
            return;
        }
        while let Some((i, field)) = self
            .members
            .iter()
            .enumerate()
            .find_map(|(i, m)| f.differing_field(m).map(|d| (i, d)))
        {
            let m = self.members.swap_remove(i);
            if let Some(field) = field {
                let joined = f.get(field).union(&m.get(field));
                f = f.with_replaced(field, joined);
            }
        }
        self.members.push(f);
    }
}

impl From<Filter> for FilterSet {
    fn from(f: Filter) -> FilterSet {
        let mut out = FilterSet::empty();
        out.push_merged(f);
        out
    }
}

impl fmt::Display for FilterSet {
    /// Writes `none`, or each member in parentheses joined by ` || `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.members.is_empty() {
            return f.write_str("none");
        }
        for (i, m) in self.members.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(f, "({m})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp80() -> Filter {
        Filter::any()
            .with(Field::IpProto, FieldSet::single(6))
            .with(Field::DstPort, FieldSet::single(80))
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(
            Filter::any().with(Field::IpTtl, FieldSet::full(8)),
            Filter::any()
        );
        assert_eq!(
            Filter::any().with(Field::IpTtl, FieldSet::range(0, 1000)),
            Filter::any()
        );
        let empty = tcp80().with(Field::IpTtl, FieldSet::empty());
        assert_eq!(empty, Filter::none());
        assert!(empty.is_empty() && !empty.is_any());
        assert!(empty.get(Field::IpProto).is_empty());
        assert_eq!(tcp80().get(Field::IpTtl), FieldSet::full(8));
        assert_eq!(tcp80().to_string(), "ip_proto in {6} && dport in {80}");
    }

    #[test]
    fn points_mask_to_width() {
        let p = PacketPoint::new()
            .with(Field::IpTtl, 0x1ff)
            .with(Field::Paint, 0);
        assert_eq!(p.get(Field::IpTtl), 0xff);
        assert_eq!(p, PacketPoint::new().with(Field::IpTtl, 0xff));
        let q = PacketPoint::new()
            .with(Field::IpProto, 6)
            .with(Field::DstPort, 80);
        assert!(tcp80().contains(&q));
        assert!(!tcp80().contains(&q.clone().with(Field::DstPort, 81)));
        assert!(!Filter::none().contains(&q));
    }

    #[test]
    fn difference_carves_disjoint_boxes() {
        let tcp = Filter::any().with(Field::IpProto, FieldSet::single(6));
        let parts = tcp.difference(&tcp80());
        assert_eq!(
            parts,
            vec![tcp
                .clone()
                .with(Field::DstPort, FieldSet::single(80).complement(16))]
        );
        assert!(tcp80().difference(&tcp).is_empty());
        assert_eq!(Filter::any().difference(&tcp80()).len(), 2);
        let set = FilterSet::from(Filter::any()).difference(&FilterSet::from(tcp80()));
        assert!(set
            .union(&FilterSet::from(tcp80()))
            .equivalent(&FilterSet::any()));
    }

    #[test]
    fn neighbours_merge() {
        let mut s = FilterSet::empty();
        s.insert(&Filter::any().with(Field::IpTtl, FieldSet::range(0, 9)));
        s.insert(&Filter::any().with(Field::IpTtl, FieldSet::range(10, 255)));
        assert_eq!(s.members(), &[Filter::any()]);
        assert_eq!(s.to_string(), "(any)");
    }
}
