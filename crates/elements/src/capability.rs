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
//!   turns into one run-time lookup and the executor looks up;
//! - [`WorkerShare`] ([`Element::worker_share`]): an element that allocates public addresses
//!   or ports (the rewriters, `MazuNAT`), told at set-up that it is worker `w` of `n` so each
//!   worker's replica allocates from its own disjoint slice ([`slice`], [`slice_owner`]:
//!   SNF's per-core rewriters).
//!
//! The executor resolves them when a program is installed (which elements are stateful, which
//! node looks up which element); nothing is downcast per packet. [`AsAny`] is only for tests
//! and tools that need an element's concrete type: every element has it, nobody writes it.

use crate::ip::Route;
use crate::rewriter::{Decision, Direction, FlowInput, InputSpec, PacketInfo};
use crate::Element;
use std::any::Any;
use std::net::Ipv4Addr;

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

    /// Whether a TCP first fragment with fewer than [`crate::rewriter::TCP_REWRITE_MIN`]
    /// transport bytes keeps its ports (its addresses are still rewritten): Click's
    /// `IPRewriter` and `TCPRewriter` do that, its `UDPRewriter` rewrites the ports of any
    /// packet with 8 transport bytes.
    fn short_tcp_keeps_ports(&self) -> bool;
}

/// A longest-prefix-match route table (the `IPLookup` classes).
pub trait RouteTable {
    /// The routes, in configuration order.
    fn routes(&self) -> &[Route];

    /// The index (in [`RouteTable::routes`]) of the route for destination `dst`, if any.
    fn route_index(&self, dst: u32) -> Option<usize>;
}

/// Worker `w` of `n`'s share of `count` values (a port or address range): `(offset, len)`
/// from the range's first value. The shares are contiguous, disjoint, in worker order, cover
/// the range, and differ in length by at most one; each is non-empty when `count >= n`.
/// `w >= n` or `n == 0` gives an empty share.
#[inline]
pub fn slice(count: u64, w: usize, n: usize) -> (u64, u64) {
    if n == 0 || w >= n {
        return (count, 0);
    }
    let (w, n) = (w as u128, n as u128);
    let lo = (u128::from(count) * w / n) as u64;
    let hi = (u128::from(count) * (w + 1) / n) as u64;
    (lo, hi - lo)
}

/// The worker (of `n`) whose [`slice`] of `count` values holds offset `v`; `None` when `v`
/// is outside the range or there are no workers.
#[inline]
pub fn slice_owner(count: u64, n: usize, v: u64) -> Option<usize> {
    if n == 0 || v >= count {
        return None;
    }
    // The w with floor(w * count / n) <= v < floor((w + 1) * count / n).
    Some((((u128::from(v) + 1) * n as u128 - 1) / u128::from(count)) as usize)
}

/// Which dimension of a [`Pool`] is split among workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sliced {
    /// Each worker allocates source ports from its slice of the port range.
    Ports,
    /// Each worker allocates source addresses from its slice of the address range.
    Addresses,
}

/// The public side of a source rewrite: the (source address, source port) values new
/// mappings take, as the replies of those mappings see them (their destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    /// The first address and how many (`None`: the packet's own address is kept).
    pub addrs: Option<(Ipv4Addr, u64)>,
    /// The first port and how many (`None`: the packet's own port is kept).
    pub ports: Option<(u16, u64)>,
    /// Which of the two is split among workers.
    pub sliced: Sliced,
}

impl Pool {
    /// The worker (of `n`) whose slice holds a reply to `(addr, port)`, if that destination
    /// lies in the pool (a pool that keeps the packet's address matches nothing: its
    /// replies cannot be told from other traffic).
    #[inline]
    pub fn owner(&self, addr: Ipv4Addr, port: u16, n: usize) -> Option<usize> {
        let (a0, na) = self.addrs?;
        let da = u64::from(u32::from(addr)).checked_sub(u64::from(u32::from(a0)))?;
        if da >= na {
            return None;
        }
        let dp = match self.ports {
            Some((p0, np)) => {
                let dp = u64::from(port).checked_sub(u64::from(p0))?;
                if dp >= np {
                    return None;
                }
                Some((dp, np))
            }
            None => None,
        };
        match self.sliced {
            Sliced::Addresses => slice_owner(na, n, da),
            Sliced::Ports => dp.and_then(|(dp, np)| slice_owner(np, n, dp)),
        }
    }
}

/// Why an element cannot be split among workers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a range of {count} {what} cannot give each of {workers} workers a slice of its own")]
pub struct ShareError {
    /// How many values the range has.
    pub count: u64,
    /// What the values are (`ports`, `addresses`).
    pub what: &'static str,
    /// How many workers there are.
    pub workers: usize,
}

/// An element whose replicas on several workers must not hand out the same public values
/// (a NAT's source ports): each replica is told which worker it is, and narrows its ranges
/// to that worker's [`slice`]. Set-up only; nothing here runs per packet.
pub trait WorkerShare {
    /// The pools new mappings allocate from (before narrowing), one per ranged pattern.
    fn pools(&self) -> Vec<Pool>;

    /// Narrows every ranged pattern to worker `w`'s slice of `n`. Fails (changing nothing)
    /// when a range has fewer values than workers.
    fn narrow(&mut self, w: usize, n: usize) -> Result<(), ShareError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Slices are contiguous, disjoint, cover the range and are non-empty when the
        /// range has at least as many values as workers; the owner of every value is the
        /// worker whose slice holds it.
        #[test]
        fn slices_partition_the_range(count in 1u64..70_000, n in 1usize..9, probe in 0u64..70_000) {
            let mut next = 0;
            for w in 0..n {
                let (off, len) = slice(count, w, n);
                prop_assert_eq!(off, next);
                if count >= n as u64 {
                    prop_assert!(len >= 1);
                }
                next = off + len;
            }
            prop_assert_eq!(next, count);
            let v = probe % count;
            let w = slice_owner(count, n, v).unwrap();
            let (off, len) = slice(count, w, n);
            prop_assert!(off <= v && v < off + len);
            prop_assert_eq!(slice_owner(count, n, count), None);
        }
    }
}
