//! SNF's header-space algebra: the sets, filters and actions FuseBox synthesizes chains with.
//!
//! A packet is a point of a space with one coordinate per header field ([`Field`]): the
//! ingress interface, the Ethernet, VLAN, IPv4 and transport fields, Click's annotations,
//! and raw bytes at an offset for `Classifier` reads. Each coordinate is an unsigned integer
//! of the field's width, and [`PacketPoint`] holds one such point.
//!
//! A [`FieldSet`] is a set of values of one field, kept as canonical sorted, disjoint,
//! non-adjacent intervals (SNF's field filter). A [`Filter`] (SNF's packet filter) is a box:
//! one field set per field, any value where a field is not mentioned. Boxes are closed under
//! intersection but not under union or difference, so a [`FilterSet`] keeps a union of
//! pairwise disjoint boxes.
//!
//! An [`Action`] (SNF's operation ω) applies one [`Op`] to each field: identity, set a
//! constant, add a constant modulo `2^width` (TTL decrement), or write a value that a
//! stateful element decides at run time, either from a known pool (NAT ports) or unknown.
//! Actions compose ([`Action::then`]), apply to points, and map filters forward
//! ([`Action::image`]) and backward ([`Action::preimage`]).
//!
//! A traffic class unit is a triple (filter, action, exit): the packets of the filter leave
//! by the exit after the action. Walking a chain, a unit (φ, ω) that meets a read φ₀ keeps
//! φ ∩ ω⁻¹(φ₀) — the packets that still match once the earlier writes are applied. This is
//! SNF's `intersect` (Algorithm 2) made exact: the paper keeps a rewritten field only if the
//! whole image matches and otherwise drops the unit; [`Action::refine`] keeps exactly the
//! part that matches. Reads of fields that run-time state writes cannot always be settled
//! statically (SNF limitation 2); they come back as [`Preimage::RuntimeDecision`] with the
//! checks the synthesized class must make, instead of being refused.
//!
//! ```
//! use space::{Action, Field, FieldSet, Filter, Op, Preimage};
//!
//! // A unit holding IPv4 packets with TTL ≥ 2 whose router decremented the TTL...
//! let phi = Filter::any().with(Field::IpTtl, FieldSet::range(2, 255));
//! let omega = Action::identity().with(Field::IpTtl, Op::Add(-1));
//! // ...meets a second router that only forwards TTL ≥ 2.
//! let read = Filter::any().with(Field::IpTtl, FieldSet::range(2, 255));
//! let kept = omega.refine(&phi, &read);
//! assert_eq!(kept, Preimage::Exact(Filter::any().with(Field::IpTtl, FieldSet::range(3, 255))));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod action;
mod field;
mod filter;
mod set;

pub use action::{Action, Op, Preimage, RuntimeCheck};
pub use field::{max_value, Base, Field, Group, Layout, MAX_RAW_LEN};
pub use filter::{Filter, FilterSet, PacketPoint};
pub use set::{FieldSet, SpaceError, MAX_MASK_INTERVALS};
