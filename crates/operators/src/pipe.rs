//! Operators and how they compose.
//!
//! A [`Pipe`] is built operator by operator, each a generic [`Stage`] wrapping the ones
//! before it, so the compiler sees the whole NF as one function: a packet runs through every
//! operator to completion (NetBricks' run-to-completion), and a UDF costs what its body costs.
//!
//! ```
//! use operators::{pipe, Ethernet, Ipv4, Pkt, Raw};
//! // NetBricks' Listing 1: decrement the TTL, drop at 0.
//! let ttl = pipe::<Raw, ()>()
//!     .parse::<Ethernet>()
//!     .parse::<Ipv4>()
//!     .transform(|p| {
//!         let mut ip = p.header_mut();
//!         let ttl = ip.ttl().saturating_sub(1);
//!         ip.set_ttl(ttl);
//!         ip.fill_checksum();
//!     })
//!     .filter("ttl-expired", |p| p.header().ttl() != 0);
//! # let _ = ttl;
//! ```

use crate::header::{Header, Over, Stack};
use crate::pkt::Pkt;
use packet::{Packet, Timestamp};
use std::marker::PhantomData;

/// What an operator may do besides passing its packet on: send packets to the NF's outputs,
/// drop them under a reason, read the virtual clock.
#[derive(Debug, Default)]
pub struct Cx {
    /// The virtual clock: the latest packet timestamp seen (never the wall clock).
    pub now: Timestamp,
    sent: Vec<(usize, Packet)>,
    dropped: Vec<(Packet, &'static str)>,
    /// The metadata of the packet being processed (what a created packet inherits).
    origin: packet::Meta,
    created: u64,
}

impl Cx {
    /// A context at virtual time `now`.
    pub fn new(now: Timestamp) -> Cx {
        Cx {
            now,
            ..Cx::default()
        }
    }

    /// Sends `pkt` out of the NF's output `port`: it is gone for the NF.
    #[inline]
    pub fn send<S: Stack, M>(&mut self, port: usize, pkt: Pkt<S, M>) {
        self.sent.push((port, pkt.into_packet()));
    }

    /// Drops `pkt`, counted under `reason`.
    #[inline]
    pub fn drop<S: Stack, M>(&mut self, pkt: Pkt<S, M>, reason: &'static str) {
        self.dropped.push((pkt.into_packet(), reason));
    }

    /// A packet the NF makes itself (a packetized stream, a reply), counted as created and
    /// given the lineage of the packet being processed (its input index, timestamp,
    /// ingress), so that every packet stays accounted for and outputs keep their order.
    /// Its header annotations stay as `packet` has them.
    pub fn create(&mut self, mut packet: Packet) -> Pkt {
        let (mac, net, tr) = (
            packet.meta.mac_offset,
            packet.meta.network_offset,
            packet.meta.transport_offset,
        );
        packet.meta.clone_from(&self.origin);
        packet.meta.mac_offset = mac;
        packet.meta.network_offset = net;
        packet.meta.transport_offset = tr;
        self.created += 1;
        Pkt::new(packet)
    }

    /// Sets the packet being processed (see [`Cx::create`]; the NF adapter and runtimes
    /// call it before each packet).
    #[inline]
    pub fn set_origin(&mut self, meta: &packet::Meta) {
        self.origin.clone_from(meta);
    }

    /// How many packets were created since the count was last taken, and resets it.
    #[inline]
    pub fn take_created(&mut self) -> u64 {
        std::mem::take(&mut self.created)
    }

    /// Takes the packets sent so far, in the order they were sent.
    pub fn take_sent(&mut self) -> std::vec::Drain<'_, (usize, Packet)> {
        self.sent.drain(..)
    }

    /// Takes the packets dropped so far, with their reasons.
    pub fn take_dropped(&mut self) -> std::vec::Drain<'_, (Packet, &'static str)> {
        self.dropped.drain(..)
    }

    /// How many packets were sent and dropped since they were last taken.
    pub fn pending(&self) -> (usize, usize) {
        (self.sent.len(), self.dropped.len())
    }
}

/// One operator (or a composition of them): takes a packet of type `I`, gives one of type
/// [`Stage::Out`] to the operators after it, or `None` when the packet left this path (sent,
/// dropped, or kept, e.g. by a window waiting for more bytes).
pub trait Stage<I>: Send {
    /// What the stage hands on.
    type Out;
    /// Runs one packet.
    fn run(&mut self, input: I, cx: &mut Cx) -> Option<Self::Out>;
    /// The virtual clock moved to `cx.now`: expire what must expire (window timeouts,
    /// scheduled events). Called before each packet and at the end of a run.
    #[inline]
    fn tick(&mut self, cx: &mut Cx) {
        let _ = cx;
    }
    /// Counters of the stage (name, value), appended to `out`.
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        let _ = out;
    }
    /// The stage's state as text lines (flow tables, counters), appended to `out`, in one
    /// deterministic order, so that runs in different modes can be compared.
    fn state(&self, out: &mut Vec<String>) {
        let _ = out;
    }
}

impl<I, T> Stage<I> for Box<dyn Stage<I, Out = T>> {
    type Out = T;
    #[inline]
    fn run(&mut self, input: I, cx: &mut Cx) -> Option<T> {
        (**self).run(input, cx)
    }
    fn tick(&mut self, cx: &mut Cx) {
        (**self).tick(cx)
    }
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        (**self).stats(out)
    }
    fn state(&self, out: &mut Vec<String>) {
        (**self).state(out)
    }
}

/// The stage that hands its input on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity;

impl<I> Stage<I> for Identity {
    type Out = I;
    #[inline(always)]
    fn run(&mut self, input: I, _: &mut Cx) -> Option<I> {
        Some(input)
    }
}

/// `A`, then `B` on what `A` handed on.
#[derive(Debug, Clone, Copy)]
pub struct Then<A, B>(pub A, pub B);

impl<I, A: Stage<I>, B: Stage<A::Out>> Stage<I> for Then<A, B> {
    type Out = B::Out;
    #[inline(always)]
    fn run(&mut self, input: I, cx: &mut Cx) -> Option<B::Out> {
        let x = self.0.run(input, cx)?;
        self.1.run(x, cx)
    }
    fn tick(&mut self, cx: &mut Cx) {
        self.0.tick(cx);
        self.1.tick(cx);
    }
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        self.0.stats(out);
        self.1.stats(out);
    }
    fn state(&self, out: &mut Vec<String>) {
        self.0.state(out);
        self.1.state(out);
    }
}

/// A pipeline of operators taking packets of type `I`; `St` is its composed stage.
pub struct Pipe<I, St> {
    stage: St,
    _input: PhantomData<fn(I)>,
}

/// An empty pipeline over packets with header stack `S` and metadata `M` (usually
/// `pipe::<Raw, ()>()`, what an NF receives).
pub fn pipe<S: Stack, M>() -> Pipe<Pkt<S, M>, Identity> {
    Pipe {
        stage: Identity,
        _input: PhantomData,
    }
}

impl<I, St: Stage<I>> Pipe<I, St> {
    /// Appends any stage.
    #[inline]
    pub fn then<B: Stage<St::Out>>(self, stage: B) -> Pipe<I, Then<St, B>> {
        Pipe {
            stage: Then(self.stage, stage),
            _input: PhantomData,
        }
    }

    /// The composed stage.
    pub fn into_stage(self) -> St {
        self.stage
    }

    /// The pipeline behind one virtual call (so that pipelines of different operators can
    /// be branches of one `group_by`).
    pub fn boxed(self) -> Pipe<I, Box<dyn Stage<I, Out = St::Out>>>
    where
        St: 'static,
    {
        Pipe {
            stage: Box::new(self.stage),
            _input: PhantomData,
        }
    }
}

impl<I, S: Stack, M: Send + 'static, St: Stage<I, Out = Pkt<S, M>>> Pipe<I, St> {
    /// Parses header `H` on top of the stack; packets that do not hold one are dropped
    /// under `parse-<name>` (e.g. `parse-ipv4`).
    #[inline]
    pub fn parse<H: Over<S::Top>>(self) -> Pipe<I, Then<St, Parse<H>>> {
        self.then(Parse(PhantomData))
    }

    /// Changes headers, payload, length or metadata in place.
    #[inline]
    pub fn transform<F: FnMut(&mut Pkt<S, M>) + Send>(
        self,
        udf: F,
    ) -> Pipe<I, Then<St, Transform<F>>> {
        self.then(Transform(udf))
    }

    /// Turns each packet into another (of another header stack or metadata type).
    #[inline]
    pub fn map<T, F: FnMut(Pkt<S, M>) -> T + Send>(self, udf: F) -> Pipe<I, Then<St, Map<F>>> {
        self.then(Map(udf))
    }

    /// Keeps the packets for which `udf` is true; drops the others under `reason` (the
    /// filter's name, counted like every FuseBox drop).
    #[inline]
    pub fn filter<F: FnMut(&Pkt<S, M>) -> bool + Send>(
        self,
        reason: &'static str,
        udf: F,
    ) -> Pipe<I, Then<St, Filter<F>>> {
        self.then(Filter { reason, udf })
    }

    /// Sends every packet out of the NF's output `port` (nothing goes on after it).
    #[inline]
    pub fn send(self, port: usize) -> Pipe<I, Then<St, Send_>> {
        self.then(Send_(port))
    }

    /// Splits the packets into `n` groups by `key` (a group number below `n`; packets given
    /// another are dropped under `no-group`); [`Groups::branch`] gives each group its
    /// operators, [`Groups::merge`] joins them again.
    pub fn group_by<K: FnMut(&Pkt<S, M>) -> usize + Send>(
        self,
        n: usize,
        key: K,
    ) -> Groups<I, St, K, Pkt<S, M>> {
        Groups {
            before: self.stage,
            key,
            branches: (0..n).map(|_| None).collect(),
            _input: PhantomData,
        }
    }
}

impl<I, H: Header, B: Stack, M: Send + 'static, St: Stage<I, Out = Pkt<(H, B), M>>> Pipe<I, St> {
    /// Pops the top header back into the payload.
    #[inline]
    pub fn deparse(self) -> Pipe<I, Then<St, Deparse>> {
        self.then(Deparse)
    }
}

/// The `parse` operator.
pub struct Parse<H>(PhantomData<fn() -> H>);

impl<S: Stack, M: Send, H: Over<S::Top>> Stage<Pkt<S, M>> for Parse<H> {
    type Out = Pkt<(H, S), M>;
    #[inline(always)]
    fn run(&mut self, p: Pkt<S, M>, cx: &mut Cx) -> Option<Self::Out> {
        match p.parse::<H>() {
            Ok(p) => Some(p),
            Err(p) => {
                cx.drop(p, H::PARSE_REASON);
                None
            }
        }
    }
}

/// The `deparse` operator.
#[derive(Debug, Clone, Copy)]
pub struct Deparse;

impl<H: Header, B: Stack, M: Send> Stage<Pkt<(H, B), M>> for Deparse {
    type Out = Pkt<B, M>;
    #[inline(always)]
    fn run(&mut self, p: Pkt<(H, B), M>, _: &mut Cx) -> Option<Pkt<B, M>> {
        Some(p.deparse())
    }
}

/// The `transform` operator.
pub struct Transform<F>(F);

impl<S: Stack, M, F: FnMut(&mut Pkt<S, M>) + Send> Stage<Pkt<S, M>> for Transform<F> {
    type Out = Pkt<S, M>;
    #[inline(always)]
    fn run(&mut self, mut p: Pkt<S, M>, _: &mut Cx) -> Option<Pkt<S, M>> {
        (self.0)(&mut p);
        Some(p)
    }
}

/// The `map` operator.
pub struct Map<F>(F);

impl<I, T, F: FnMut(I) -> T + Send> Stage<I> for Map<F> {
    type Out = T;
    #[inline(always)]
    fn run(&mut self, p: I, _: &mut Cx) -> Option<T> {
        Some((self.0)(p))
    }
}

/// The `filter` operator.
pub struct Filter<F> {
    reason: &'static str,
    udf: F,
}

impl<S: Stack, M, F: FnMut(&Pkt<S, M>) -> bool + Send> Stage<Pkt<S, M>> for Filter<F> {
    type Out = Pkt<S, M>;
    #[inline(always)]
    fn run(&mut self, p: Pkt<S, M>, cx: &mut Cx) -> Option<Pkt<S, M>> {
        if (self.udf)(&p) {
            Some(p)
        } else {
            cx.drop(p, self.reason);
            None
        }
    }
}

/// The `send` operator: every packet leaves by one output.
#[derive(Debug, Clone, Copy)]
pub struct Send_(usize);

impl<S: Stack, M: Send> Stage<Pkt<S, M>> for Send_ {
    type Out = Pkt<S, M>;
    #[inline(always)]
    fn run(&mut self, p: Pkt<S, M>, cx: &mut Cx) -> Option<Pkt<S, M>> {
        cx.send(self.0, p);
        None
    }
}

/// A `group_by` being given its branches (see [`Pipe::group_by`]).
pub struct Groups<I, St, K, P> {
    before: St,
    key: K,
    branches: Vec<Option<Box<dyn Stage<P, Out = P>>>>,
    _input: PhantomData<fn(I)>,
}

impl<I, St, K, S: Stack, M: Send + 'static> Groups<I, St, K, Pkt<S, M>>
where
    St: Stage<I, Out = Pkt<S, M>>,
    K: FnMut(&Pkt<S, M>) -> usize + Send,
{
    /// Gives group `group` its operators (a group without any hands its packets straight to
    /// the merge). A group number out of range is ignored.
    pub fn branch<B, F>(mut self, group: usize, build: F) -> Self
    where
        B: Stage<Pkt<S, M>, Out = Pkt<S, M>> + 'static,
        F: FnOnce(Pipe<Pkt<S, M>, Identity>) -> Pipe<Pkt<S, M>, B>,
    {
        if let Some(slot) = self.branches.get_mut(group) {
            *slot = Some(Box::new(build(pipe()).into_stage()));
        }
        self
    }

    /// Joins the groups again: every packet a branch hands on continues after the merge.
    pub fn merge(self) -> Merged<I, St, K, Pkt<S, M>> {
        Pipe {
            stage: Then(
                self.before,
                GroupBy {
                    key: self.key,
                    branches: self.branches,
                },
            ),
            _input: PhantomData,
        }
    }
}

/// The pipeline after a `group_by`'s `merge`.
pub type Merged<I, St, K, P> = Pipe<I, Then<St, GroupBy<K, P>>>;

/// The `group_by` operator with its branches and their `merge`.
pub struct GroupBy<K, P> {
    key: K,
    branches: Vec<Option<Box<dyn Stage<P, Out = P>>>>,
}

/// The drop reason of a packet whose group is out of range.
pub const NO_GROUP: &str = "no-group";

impl<S: Stack, M: Send, K: FnMut(&Pkt<S, M>) -> usize + Send> Stage<Pkt<S, M>>
    for GroupBy<K, Pkt<S, M>>
{
    type Out = Pkt<S, M>;
    #[inline]
    fn run(&mut self, p: Pkt<S, M>, cx: &mut Cx) -> Option<Pkt<S, M>> {
        match self.branches.get_mut((self.key)(&p)) {
            Some(Some(branch)) => branch.run(p, cx),
            Some(None) => Some(p),
            None => {
                cx.drop(p, NO_GROUP);
                None
            }
        }
    }
    fn tick(&mut self, cx: &mut Cx) {
        for b in self.branches.iter_mut().flatten() {
            b.tick(cx);
        }
    }
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        for b in self.branches.iter().flatten() {
            b.stats(out);
        }
    }
    fn state(&self, out: &mut Vec<String>) {
        for b in self.branches.iter().flatten() {
            b.state(out);
        }
    }
}

/// Predefined grouping functions.
pub mod group {
    use crate::header::Stack;
    use crate::pkt::Pkt;

    /// Groups by transport flow, both directions together (the symmetric RSS hash of the
    /// 5-tuple modulo `n`); packets that are not IP go to group 0.
    pub fn by_flow<S: Stack, M>(n: usize) -> impl FnMut(&Pkt<S, M>) -> usize + Send + Clone {
        let n = n.max(1);
        move |p| p.flow().map_or(0, |k| k.rss_hash() as usize % n)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::header::{Ethernet, Ipv4, Raw, Udp};

    fn frame(ttl: u8, dport: u16) -> Packet {
        Packet::from_bytes(
            &wire::build::Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, dport)
                .ttl(ttl)
                .build(),
        )
    }

    /// NetBricks' Listing 1 as written there: decrement, then drop at 0.
    pub(crate) fn listing1() -> impl Stage<Pkt<Raw, ()>, Out = Pkt<(Ipv4, (Ethernet, Raw)), ()>> {
        pipe::<Raw, ()>()
            .parse::<Ethernet>()
            .parse::<Ipv4>()
            .transform(|p| {
                let mut ip = p.header_mut();
                let ttl = ip.ttl().saturating_sub(1);
                ip.set_ttl(ttl);
                ip.fill_checksum();
            })
            .filter("ttl-expired", |p| p.header().ttl() != 0)
            .into_stage()
    }

    #[test]
    fn ttl_pipeline_decrements_and_drops_at_zero() {
        let mut nf = listing1();
        let mut cx = Cx::default();
        let out = nf.run(Pkt::new(frame(5, 53)), &mut cx).unwrap();
        assert_eq!(out.header().ttl(), 4);
        assert!(out.header().verify_checksum());
        assert!(nf.run(Pkt::new(frame(1, 53)), &mut cx).is_none());
        assert!(nf
            .run(Pkt::new(Packet::from_bytes(&[0; 20])), &mut cx)
            .is_none());
        let reasons: Vec<_> = cx.take_dropped().map(|(_, r)| r).collect();
        assert_eq!(reasons, ["ttl-expired", "parse-ipv4"]);
    }

    #[test]
    fn group_by_runs_each_branch_and_merges() {
        let mut nf = pipe::<Raw, ()>()
            .parse::<Ethernet>()
            .parse::<Ipv4>()
            .parse::<Udp>()
            .group_by(3, |p| usize::from(p.header().dst_port() % 4))
            .branch(0, |b| b.filter("zero", |_| false))
            .branch(1, |b| {
                b.transform(|p| {
                    let port = p.header().src_port();
                    p.header_mut().set_src_port(port + 1)
                })
            })
            .branch(2, |b| b.send(2))
            .merge()
            .deparse()
            .into_stage();
        let mut cx = Cx::default();
        let mut outs = Vec::new();
        for dport in 0..8 {
            if let Some(p) = nf.run(Pkt::new(frame(64, dport)), &mut cx) {
                outs.push((dport, u16::from_be_bytes([p.payload()[0], p.payload()[1]])));
            }
        }
        let sent: Vec<_> = cx.take_sent().map(|(port, _)| port).collect();
        let dropped: Vec<_> = cx.take_dropped().map(|(_, r)| r).collect();
        assert_eq!(outs, [(1, 1001), (5, 1001)]);
        assert_eq!(sent, [2, 2]);
        assert_eq!(dropped, ["zero", "no-group", "zero", "no-group"]);
    }
}
