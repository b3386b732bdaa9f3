//! Field operations, actions (one operation per field) and their images and preimages.

use std::collections::BTreeMap;
use std::fmt;

use crate::field::{max_value, Field};
use crate::filter::{Filter, FilterSet, PacketPoint};
use crate::set::FieldSet;

/// What an action does to one field.
///
/// Arithmetic is modulo `2^width`. Inside an [`Action`] every operation is kept in a
/// canonical form (values masked to the width, `Add` constants in `[-2^(w-1), 2^(w-1))`,
/// `Add(0)` as `Identity`, `StatefulThen` with `add == 0` as `Stateful`), so `==` between
/// actions is equality of their effect.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Leave the field alone.
    Identity,
    /// Write a constant.
    Set(u128),
    /// Add a constant modulo `2^width` (TTL decrement is `Add(-1)`).
    Add(i128),
    /// Write a value from `values`, chosen at run time by the stateful element `id`
    /// (NAT ports, round-robin addresses).
    Pool {
        /// The values the element may write.
        values: FieldSet,
        /// The element whose state decides.
        id: u32,
    },
    /// Write a value known only at run time, decided by the stateful element `id`.
    Stateful {
        /// The element whose state decides.
        id: u32,
    },
    /// Write the run-time value of element `id`, then add `add` modulo `2^width`.
    StatefulThen {
        /// The element whose state decides.
        id: u32,
        /// The constant added afterwards.
        add: i128,
    },
}

/// `c` modulo `2^width`, as the representative in `[-2^(width-1), 2^(width-1))`.
fn reduce(c: i128, width: u32) -> i128 {
    let width = width.min(128);
    if width == 0 {
        return 0;
    }
    let max = max_value(width);
    let u = c as u128 & max;
    if u >> (width - 1) & 1 == 1 {
        (u | !max) as i128 // sign-extend
    } else {
        u as i128
    }
}

/// `x + c` modulo `2^width`.
fn add_mod(x: u128, c: i128, width: u32) -> u128 {
    x.wrapping_add(c as u128) & max_value(width)
}

impl Op {
    /// The canonical form of the operation on a `width`-bit field.
    pub fn normalize(&self, width: u32) -> Op {
        match self {
            Op::Identity => Op::Identity,
            Op::Set(v) => Op::Set(v & max_value(width)),
            Op::Add(c) => match reduce(*c, width) {
                0 => Op::Identity,
                c => Op::Add(c),
            },
            Op::Pool { values, id } => Op::Pool {
                values: values.clip(width),
                id: *id,
            },
            Op::Stateful { id } => Op::Stateful { id: *id },
            Op::StatefulThen { id, add } => match reduce(*add, width) {
                0 => Op::Stateful { id: *id },
                add => Op::StatefulThen { id: *id, add },
            },
        }
    }

    /// Whether the operation has no result at all (a `Pool` with no values: the element
    /// cannot write, so the packet goes nowhere); such an operation absorbs later ones.
    pub fn is_dead(&self) -> bool {
        matches!(self, Op::Pool { values, .. } if values.is_empty())
    }

    /// Whether the result is known without run-time state (`Identity`, `Set`, `Add`).
    pub fn is_deterministic(&self) -> bool {
        matches!(self, Op::Identity | Op::Set(_) | Op::Add(_))
    }

    /// The operation "apply `self`, then `later`" on a `width`-bit field.
    ///
    /// A later `Identity` keeps `self`; a later `Add(c)` shifts whatever `self` writes
    /// (`Set(v)` → `Set(v+c)`, `Add(d)` → `Add(d+c)`, `Pool` → the pool shifted by `c`,
    /// `Stateful` → `StatefulThen`); any other later operation overrides `self`, except
    /// that a dead `self` ([`Op::is_dead`]) stays. Since the shifts form a group acting on
    /// the operations, composition is associative.
    pub fn then(&self, later: &Op, width: u32) -> Op {
        let this = self.normalize(width);
        if this.is_dead() {
            return this; // nothing comes out, whatever follows
        }
        let c = match later {
            Op::Identity => return this,
            Op::Add(c) => *c,
            other => return other.normalize(width),
        };
        let out = match &this {
            Op::Identity => Op::Add(c),
            Op::Set(v) => Op::Set(add_mod(*v, c, width)),
            Op::Add(d) => Op::Add(d.wrapping_add(c)),
            Op::Pool { values, id } => Op::Pool {
                values: values.shift(c, width),
                id: *id,
            },
            Op::Stateful { id } => Op::StatefulThen { id: *id, add: c },
            Op::StatefulThen { id, add } => Op::StatefulThen {
                id: *id,
                add: add.wrapping_add(c),
            },
        };
        out.normalize(width)
    }

    /// The value written into a field holding `x`, or `None` if run-time state decides.
    pub fn apply(&self, x: u128, width: u32) -> Option<u128> {
        match self {
            Op::Identity => Some(x & max_value(width)),
            Op::Set(v) => Some(v & max_value(width)),
            Op::Add(c) => Some(add_mod(x, *c, width)),
            _ => None,
        }
    }

    /// Every value the field may hold afterwards if it held a value of `set` before.
    pub fn image(&self, set: &FieldSet, width: u32) -> FieldSet {
        let set = set.clip(width);
        if set.is_empty() {
            return set;
        }
        match self {
            Op::Identity => set,
            Op::Set(v) => FieldSet::single(v & max_value(width)),
            Op::Add(c) => set.shift(*c, width),
            Op::Pool { values, .. } => values.clip(width),
            Op::Stateful { .. } | Op::StatefulThen { .. } => FieldSet::full(width),
        }
    }

    /// The values before the operation that may end up in `set` afterwards.
    ///
    /// Returns `(values, runtime)`: `runtime` is true when whether a value ends up in `set`
    /// depends on a run-time choice (then `values` are those for which it can).
    pub fn preimage(&self, set: &FieldSet, width: u32) -> (FieldSet, bool) {
        let set = set.clip(width);
        let full = FieldSet::full(width);
        let all_or_nothing =
            |hit: bool| (if hit { full.clone() } else { FieldSet::empty() }, false);
        match self {
            Op::Identity => (set, false),
            Op::Set(v) => all_or_nothing(set.contains(v & max_value(width))),
            Op::Add(c) => (set.shift(c.wrapping_neg(), width), false),
            Op::Pool { values, .. } => {
                let values = values.clip(width);
                if values.intersection(&set).is_empty() {
                    all_or_nothing(false)
                } else if values.is_subset(&set) {
                    all_or_nothing(true)
                } else {
                    (full, true)
                }
            }
            Op::Stateful { .. } | Op::StatefulThen { .. } => {
                if set.is_empty() || set.is_full(width) {
                    all_or_nothing(!set.is_empty())
                } else {
                    (full, true)
                }
            }
        }
    }

    /// The run-time element deciding the result, if any.
    pub fn state_id(&self) -> Option<u32> {
        match self {
            Op::Pool { id, .. } | Op::Stateful { id } | Op::StatefulThen { id, .. } => Some(*id),
            _ => None,
        }
    }
}

impl fmt::Display for Op {
    /// Writes `id`, `:= v`, `+= c`, `-= c`, `:= pool#id set`, `:= state#id` or
    /// `:= state#id + c`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Identity => f.write_str("id"),
            Op::Set(v) => write!(f, ":= {v}"),
            Op::Add(c) if *c < 0 => write!(f, "-= {}", c.unsigned_abs()),
            Op::Add(c) => write!(f, "+= {c}"),
            Op::Pool { values, id } => write!(f, ":= pool#{id} {values}"),
            Op::Stateful { id } => write!(f, ":= state#{id}"),
            Op::StatefulThen { id, add } => write!(f, ":= state#{id} + {add}"),
        }
    }
}

/// An operation on every field (SNF's ω): identity wherever none is given.
///
/// Operations are stored in canonical form and identities are not stored, so `==` is
/// equality of effect.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Action {
    ops: BTreeMap<Field, Op>,
}

/// A check the synthesized class must make at run time, after element `id` has written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RuntimeCheck {
    /// The field whose final value is checked.
    pub field: Field,
    /// The stateful element whose choice decides the value.
    pub id: u32,
    /// The final values of `field` that pass (the value written, after any pending add).
    pub allowed: FieldSet,
}

/// The packets that, after an action, fall in a filter (see [`Action::preimage`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Preimage {
    /// Exactly these packets do.
    Exact(Filter),
    /// Packets outside `may_match` never do; those inside do iff every check passes at run
    /// time (SNF limitation 2: a read of a statefully rewritten field).
    RuntimeDecision {
        /// The packets that can match for some run-time choice.
        may_match: Filter,
        /// The run-time checks, one per field whose value run-time state decides.
        checks: Vec<RuntimeCheck>,
    },
}

impl Preimage {
    /// The packets that can match (all of them for an exact preimage).
    pub fn may_match(&self) -> &Filter {
        match self {
            Preimage::Exact(f) | Preimage::RuntimeDecision { may_match: f, .. } => f,
        }
    }

    /// Whether no run-time decision is needed.
    pub fn is_exact(&self) -> bool {
        matches!(self, Preimage::Exact(_))
    }

    /// The preimage restricted to the packets of `filter`.
    pub fn intersect(self, filter: &Filter) -> Preimage {
        match self {
            Preimage::Exact(f) => Preimage::Exact(f.intersection(filter)),
            Preimage::RuntimeDecision { may_match, checks } => {
                let may_match = may_match.intersection(filter);
                if may_match.is_empty() {
                    Preimage::Exact(may_match)
                } else {
                    Preimage::RuntimeDecision { may_match, checks }
                }
            }
        }
    }
}

impl Action {
    /// The action that changes nothing.
    pub fn identity() -> Action {
        Action::default()
    }

    /// The action with `field`'s operation replaced by `op`.
    pub fn with(mut self, field: Field, op: Op) -> Action {
        self.set(field, op);
        self
    }

    /// Replaces `field`'s operation by `op`.
    pub fn set(&mut self, field: Field, op: Op) {
        match op.normalize(field.width()) {
            Op::Identity => self.ops.remove(&field),
            op => self.ops.insert(field, op),
        };
    }

    /// The operation on `field` (`Identity` if none).
    pub fn get(&self, field: Field) -> &Op {
        static IDENTITY: Op = Op::Identity;
        self.ops.get(&field).unwrap_or(&IDENTITY)
    }

    /// The fields with a non-identity operation, in field order.
    pub fn ops(&self) -> impl Iterator<Item = (Field, &Op)> + '_ {
        self.ops.iter().map(|(&f, op)| (f, op))
    }

    /// Whether the action changes nothing.
    pub fn is_identity(&self) -> bool {
        self.ops.is_empty()
    }

    /// Whether every operation is deterministic (no run-time state decides a value).
    pub fn is_deterministic(&self) -> bool {
        self.ops.values().all(Op::is_deterministic)
    }

    /// The action "apply `self`, then `later`" (SNF's ω' = ωi ∘ ω), field by field.
    pub fn then(&self, later: &Action) -> Action {
        let mut out = self.clone();
        for (&f, op) in &later.ops {
            out.set(f, self.get(f).then(op, f.width()));
        }
        out
    }

    /// The packet after the action, or `None` if some operation is decided at run time.
    pub fn apply(&self, p: &PacketPoint) -> Option<PacketPoint> {
        let mut out = p.clone();
        for (&f, op) in &self.ops {
            out.set(f, op.apply(p.get(f), f.width())?);
        }
        Some(out)
    }

    /// Every packet the action can turn a packet of `filter` into (a box again, exactly).
    pub fn image(&self, filter: &Filter) -> Filter {
        if filter.is_empty() {
            return Filter::none();
        }
        let mut out = filter.clone();
        for (&f, op) in &self.ops {
            let img = op.image(&filter.get(f), f.width());
            out = out.without(f).with(f, img);
        }
        out
    }

    /// The image of every member of `set`, as a union of disjoint filters.
    pub fn image_set(&self, set: &FilterSet) -> FilterSet {
        let mut out = FilterSet::empty();
        for m in set.members() {
            out.insert(&self.image(m));
        }
        out
    }

    /// The packets that, after the action, fall in `filter`: ω⁻¹(filter).
    ///
    /// This makes SNF's `intersect` (Algorithm 2) exact: a filter read after ω keeps
    /// φ ∩ ω⁻¹(filter) ([`Action::refine`]) instead of dropping packets whose rewritten
    /// field still matches. Deterministic operations give an exact answer; a read of a field
    /// that run-time state writes (`Pool`, `Stateful`) is exact only when the outcome does
    /// not depend on the choice, and otherwise yields [`Preimage::RuntimeDecision`]. An
    /// action with a dead operation ([`Op::is_dead`]) lets nothing through.
    pub fn preimage(&self, filter: &Filter) -> Preimage {
        if filter.is_empty() || self.ops.values().any(Op::is_dead) {
            return Preimage::Exact(Filter::none());
        }
        let mut may_match = Filter::any();
        let mut checks = Vec::new();
        for (f, set) in filter.fields() {
            let op = self.get(f);
            let (pre, runtime) = op.preimage(set, f.width());
            may_match.restrict(f, &pre);
            if runtime {
                let allowed = op.image(&FieldSet::full(f.width()), f.width());
                checks.push(RuntimeCheck {
                    field: f,
                    id: op.state_id().unwrap_or_default(),
                    allowed: allowed.intersection(set),
                });
            }
        }
        if checks.is_empty() || may_match.is_empty() {
            Preimage::Exact(may_match)
        } else {
            Preimage::RuntimeDecision { may_match, checks }
        }
    }

    /// SNF's `intersect` made exact: the packets of `current` that, after the action, fall
    /// in `read`.
    pub fn refine(&self, current: &Filter, read: &Filter) -> Preimage {
        self.preimage(read).intersect(current)
    }
}

impl fmt::Display for Action {
    /// Writes `id`, or `field op` for each operation joined by `, `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ops.is_empty() {
            return f.write_str("id");
        }
        for (i, (field, op)) in self.ops.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{field} {op}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ttl(set: FieldSet) -> Filter {
        Filter::any().with(Field::IpTtl, set)
    }

    #[test]
    fn ttl_decrement_keeps_what_still_matches() {
        // φ = TTL ∈ [2, 255]; ω = TTL − 1; a later read keeps TTL ≥ 2.
        let phi = ttl(FieldSet::range(2, 255));
        let dec = Action::identity().with(Field::IpTtl, Op::Add(-1));
        let kept = dec.refine(&phi, &ttl(FieldSet::range(2, 255)));
        assert_eq!(kept, Preimage::Exact(ttl(FieldSet::range(3, 255))));
        // SNF's Algorithm 2 would give ∅ here since ω(φ) = [1, 254] ⊄ [2, 255].
        let expired = dec.refine(&phi, &ttl(FieldSet::single(1)));
        assert_eq!(expired, Preimage::Exact(ttl(FieldSet::single(2))));
    }

    #[test]
    fn canonical_ops() {
        let a = Action::identity().with(Field::IpTtl, Op::Add(255));
        assert_eq!(a.get(Field::IpTtl), &Op::Add(-1));
        assert_eq!(a.to_string(), "ip_ttl -= 1");
        assert!(Action::identity()
            .with(Field::IpTtl, Op::Add(256))
            .is_identity());
        let s = Action::identity().with(Field::IpProto, Op::Set(0x106));
        assert_eq!(s.get(Field::IpProto), &Op::Set(6));
        let wide = Field::Raw { offset: 0, len: 16 };
        let w = Action::identity().with(wide, Op::Add(i128::MIN));
        assert_eq!(w.then(&w), Action::identity());
        assert_eq!(reduce(i128::MIN, 128), i128::MIN);
        assert_eq!(reduce(128, 8), -128);
        assert_eq!(reduce(127, 8), 127);
        assert_eq!(reduce(5, 0), 0);
    }

    #[test]
    fn composition_rules() {
        let f = Field::SrcPort;
        let pool = Op::Pool {
            values: FieldSet::range(1024, 2047),
            id: 7,
        };
        assert_eq!(Op::Set(65535).then(&Op::Add(2), 16), Op::Set(1));
        assert_eq!(Op::Add(3).then(&Op::Add(-3), 16), Op::Identity);
        assert_eq!(Op::Add(3).then(&Op::Set(9), 16), Op::Set(9));
        assert_eq!(Op::Set(3).then(&pool, 16), pool);
        assert_eq!(
            pool.then(&Op::Add(1), 16),
            Op::Pool {
                values: FieldSet::range(1025, 2048),
                id: 7
            }
        );
        let st = Op::Stateful { id: 2 };
        assert_eq!(st.then(&Op::Add(1), 16), Op::StatefulThen { id: 2, add: 1 });
        assert_eq!(
            st.then(&Op::Add(1), 16).then(&Op::Add(-1), 16),
            Op::Stateful { id: 2 }
        );
        let a = Action::identity().with(f, pool.clone());
        assert!(!a.is_deterministic());
        assert_eq!(a.apply(&PacketPoint::new()), None);
        assert_eq!(a.to_string(), "sport := pool#7 [1024, 2047]");
    }

    #[test]
    fn reads_of_stateful_writes_are_decided_at_run_time() {
        let nat = Action::identity().with(
            Field::SrcPort,
            Op::Pool {
                values: FieldSet::range(1024, 65535),
                id: 3,
            },
        );
        let high = Filter::any().with(Field::SrcPort, FieldSet::range(2048, 65535));
        let pre = nat.preimage(&high);
        assert_eq!(
            pre,
            Preimage::RuntimeDecision {
                may_match: Filter::any(),
                checks: vec![RuntimeCheck {
                    field: Field::SrcPort,
                    id: 3,
                    allowed: FieldSet::range(2048, 65535),
                }],
            }
        );
        let any_high = Filter::any().with(Field::SrcPort, FieldSet::range(1000, 65535));
        assert_eq!(nat.preimage(&any_high), Preimage::Exact(Filter::any()));
        let low = Filter::any().with(Field::SrcPort, FieldSet::range(0, 1023));
        assert_eq!(nat.preimage(&low), Preimage::Exact(Filter::none()));
        // A failing deterministic read settles it without a run-time check.
        let both = high.clone().with(Field::IpTtl, FieldSet::single(1));
        let reset = nat.clone().with(Field::IpTtl, Op::Set(64));
        assert_eq!(reset.preimage(&both), Preimage::Exact(Filter::none()));
        let ok = high.clone().with(Field::IpTtl, FieldSet::single(64));
        assert!(!reset.preimage(&ok).is_exact());
        assert!(nat.refine(&Filter::none(), &high).is_exact());
    }
}
