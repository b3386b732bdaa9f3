//! What the executor and synthesis may ask of an element beyond [`Element`]'s packet
//! interface, as small traits an element offers through [`Element`]'s capability methods
//! (Click's `Element::cast()` to a base interface):
//!
//! - [`StatefulFlow`] ([`Element::stateful_flow`]): per-flow state the executor drives
//!   itself (decide, replay for later packets of the flow, pay replays in bulk) — the
//!   rewriters and `MazuNAT`;
//! - [`RewriteSpec`] ([`Element::rewrite_spec`]): a rewriter whose decisions follow from its
//!   input specifications alone, which synthesis turns into a run-time decision node;
//! - [`RouteTable`] ([`Element::route_table`]): a longest-prefix route table, which synthesis
//!   turns into one run-time lookup and the executor looks up.
//!
//! The executor resolves them when a program is installed (which elements are stateful, which
//! node looks up which element); nothing is downcast per packet. [`AsAny`] is only for tests
//! and tools that need an element's concrete type: every element has it, nobody writes it.

use crate::ip::Route;
use crate::rewriter::{Decision, Direction, FlowInput, InputSpec, PacketInfo};
use crate::Element;
use std::any::Any;

/// An element as [`Any`], so that a test can reach its concrete type
/// (`e.as_any().downcast_ref::<Queue>()`). Implemented once, for every element type.
pub trait AsAny {
    /// The element as `Any`.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Element + 'static> AsAny for T {
    #[inline]
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// What one decision of a [`StatefulFlow`] element came to
/// ([`StatefulFlow::decide_flow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowStep {
    /// What happens to the packet.
    pub decision: Decision,
    /// The mapping (index, direction) that rewrote the packet, if one did.
    pub mapping: Option<(u32, Direction)>,
    /// That mapping's version ([`StatefulFlow::version`]); 0 without one.
    pub version: u32,
    /// The lifetime packets like this one give that mapping, if they leave it steady
    /// ([`StatefulFlow::steady`]); `None` without a mapping.
    pub steady: Option<u64>,
}

/// An element with per-flow state (a mapping table) that the executor drives directly: it
/// decides for a packet without the packet's bytes being rewritten (the executor rewrites
/// them), replays an earlier decision for later packets of the flow, and pays replayed
/// packets in bulk. Every call updates the state exactly as pushing the packet(s) would.
pub trait StatefulFlow {
    /// Decides for a packet arriving on input `port` at virtual time `now` (ns) (`input`:
    /// `None` for a packet without an IPv4 header). `hint` is the mapping an earlier packet
    /// of the flow took: if it still holds the flow it is used without a lookup.
    fn decide_flow(
        &mut self,
        port: usize,
        input: Option<&FlowInput>,
        now: u64,
        hint: Option<(u32, Direction)>,
    ) -> FlowStep;

    /// Decides for a packet that an earlier decision says mapping `idx` in direction `dir`
    /// rewrites, if that mapping still holds the flow; otherwise changes nothing and returns
    /// `None`.
    fn replay(&mut self, input: &FlowInput, now: u64, idx: u32, dir: Direction)
        -> Option<Decision>;

    /// Whether [`StatefulFlow::replay`] of mapping `idx` in direction `dir` would succeed for
    /// `input` at `now` and the mapping is still at `version`. May reap (as any packet would)
    /// but changes no mapping otherwise (the fast path's event check).
    fn check_replay(
        &mut self,
        input: &FlowInput,
        now: u64,
        idx: u32,
        dir: Direction,
        version: u32,
    ) -> bool;

    /// The mapping (index, direction) that rewrote the last packet decided, if one did.
    fn last_mapping(&self) -> Option<(u32, Direction)>;

    /// What `n` successful replays of mapping `idx` in direction `dir` by packets like
    /// `info`, the last at `now`, do to the state, in one call (the caller knows they would
    /// succeed: the version is unchanged and no reap was due).
    fn replay_n(&mut self, idx: u32, dir: Direction, info: PacketInfo, now: u64, n: u32);

    /// What `n` drops for a per-flow reason ([`crate::rewriter::RewriterDrop::per_flow`]) do to
    /// the state: its drop count.
    fn drop_n(&mut self, n: u32);

    /// The version of mapping `idx`: it changes whenever the mapping goes away or changes in
    /// anything but its packet count and expiry.
    fn version(&self, idx: u32) -> u32;

    /// How many times a mapping's version has changed, over all mappings.
    fn changes(&self) -> u64;

    /// The lifetime a packet like `info` gives mapping `idx` in direction `dir`, if such
    /// packets leave it steady.
    fn steady(&self, idx: u32, dir: Direction, info: PacketInfo) -> Option<u64>;

    /// When the next packet reaps the table (`None` before the first packet).
    fn next_reap(&self) -> Option<u64>;
}

/// A rewriter whose every decision follows from its input specifications and its mapping
/// table, as synthesis models it: a packet arriving on input `s` is rewritten by a mapping
/// made by the specifications of the inputs that share its map, or by its own
/// specification.
pub trait RewriteSpec {
    /// The input specifications, one per input port.
    fn specs(&self) -> &[InputSpec];

    /// The map a protocol's flows live in (Click: `IPRewriter` keeps UDP apart from TCP).
    fn map_id(&self, proto: u8) -> u8;

    /// Whether the destination IP annotation is set to the rewritten destination.
    fn dst_anno(&self) -> bool;
}

/// A longest-prefix-match route table (the `IPLookup` classes).
pub trait RouteTable {
    /// The routes, in configuration order.
    fn routes(&self) -> &[Route];

    /// The index (in [`RouteTable::routes`]) of the route for destination `dst`, if any.
    fn route_index(&self, dst: u32) -> Option<usize>;
}
