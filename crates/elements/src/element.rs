//! The element trait and what the executor hands an element.

use crate::capability::{AsAny, RewriteSpec, RouteTable, StatefulFlow, WorkerShare};
use crate::net::Names;
use crate::record::{Access, Recorder, ReplayView};
use packet::{Meta, Packet, Timestamp};
use space::{Field, Filter};
use std::path::Path;

/// What an element did with a packet it was pushed.
#[derive(Debug)]
pub enum Verdict {
    /// Send the packet out of this output port.
    Out(usize, Packet),
    /// Drop the packet, counted under this reason (a short kebab-case word, e.g. `bad-ip-header`):
    /// the text of one of the element's reason enums (see [`crate::reason`]), written
    /// `Reason::Variant.into()`.
    Drop(Packet, &'static str),
    /// The element kept the packet (queued, consumed by a sink) or emitted whatever it had to
    /// through [`Context::emit`] / [`Context::drop`].
    Done,
}

/// Whether, and how, the executor may run an element over a batch of packets at once
/// ([`Element::push_batch`]) instead of one packet after another to completion. One input
/// at a time is the semantics; a batch is only an order of work that gives the same packets,
/// counters and state (see the executor's `batch` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batching {
    /// Never: the element creates, emits or drops packets through the [`Context`], keeps
    /// packets, or shares state with other elements. A chain holding one runs packet by
    /// packet.
    Never,
    /// In any order: what the element does to a packet depends only on the packet and the
    /// configuration, and its state, if any, is counters whose sums do not depend on the
    /// order of the packets.
    Free,
    /// In input order: the element keeps state later packets depend on (a NAT's mappings)
    /// or reads the virtual clock, so packets must reach it in the order the chain took
    /// them, each at the virtual time it had.
    Ordered,
}

/// The virtual clock of a batch: what [`Context::now`] was when each of its chain inputs
/// entered, by input index from `first`.
#[derive(Debug, Clone, Copy)]
pub struct BatchClock<'a> {
    /// Input index of the batch's first packet.
    pub first: u64,
    /// Per input of the batch, the virtual time it entered at.
    pub nows: &'a [Timestamp],
}

impl BatchClock<'_> {
    /// The virtual time at which the input that caused `p` entered (the latest time when
    /// `p` is not of this batch).
    #[inline]
    pub fn now(&self, p: &Packet) -> Timestamp {
        let i = p.meta.input_index.wrapping_sub(self.first);
        usize::try_from(i)
            .ok()
            .and_then(|i| self.nows.get(i))
            .or(self.nows.last())
            .copied()
            .unwrap_or_default()
    }
}

/// `push` and `push_batch` of an element whose inherent `fn step(&mut self, &mut Packet) ->
/// Step` changes each packet in place (a [`Batching::Free`] element that never replaces,
/// holds or creates a packet): `push` is the step's [`Step::verdict`], `push_batch` is
/// [`push_batch_in_place`] over it. Written inside the element's `impl Element`.
macro_rules! push_in_place {
    () => {
        #[inline]
        fn push(
            &mut self,
            _port: usize,
            mut p: packet::Packet,
            _cx: &mut $crate::Context,
        ) -> $crate::Verdict {
            self.step(&mut p).verdict(p)
        }
        fn push_batch(
            &mut self,
            _port: u32,
            batch: &mut Vec<Option<packet::Packet>>,
            _clock: &$crate::BatchClock<'_>,
            side: &mut $crate::BatchOut,
            _cx: &mut $crate::Context,
        ) {
            $crate::push_batch_in_place(batch, side, |p| self.step(p));
        }
    };
}

/// What an element did with a packet it changed in place: the output it leaves by, or the
/// reason it is dropped. [`Step::verdict`] gives [`Element::push`]'s answer;
/// [`push_batch_in_place`] runs a batch with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Leaves by this output.
    Out(u32),
    /// Dropped for this reason.
    Drop(&'static str),
}

impl Step {
    /// The verdict on `p` (the packet the step changed).
    #[inline(always)]
    pub fn verdict(self, p: Packet) -> Verdict {
        match self {
            Step::Out(o) => Verdict::Out(o as usize, p),
            Step::Drop(r) => Verdict::Drop(p, r),
        }
    }
}

/// [`Element::push_batch`] for a [`Batching::Free`] element whose `push` changes the packet
/// in place and never replaces, holds or creates one (`step` is that change): each packet
/// stays in its slot unless it leaves by another output than the first packet's or is
/// dropped, so a batch going straight on moves no packet at all.
#[inline(always)]
pub fn push_batch_in_place(
    batch: &mut Vec<Option<Packet>>,
    side: &mut BatchOut,
    mut step: impl FnMut(&mut Packet) -> Step,
) {
    let mut main: Option<u32> = None;
    let mut all_kept = true;
    for slot in batch.iter_mut() {
        let Some(p) = slot.as_mut() else {
            continue;
        };
        match step(p) {
            Step::Out(o) if *main.get_or_insert(o) == o => {}
            Step::Out(o) => {
                all_kept = false;
                if let Some(q) = slot.take() {
                    side.sent.push((o, q));
                }
            }
            Step::Drop(r) => {
                all_kept = false;
                if let Some(q) = slot.take() {
                    side.dropped.push((q, r));
                }
            }
        }
    }
    side.main = main.unwrap_or(0);
    if !all_kept {
        batch.retain(Option::is_some);
    }
}

/// What an element did with the packets of a batch that did not leave by its main output
/// ([`Element::push_batch`]), in input order.
#[derive(Debug, Default)]
pub struct BatchOut {
    /// The output the packets left in the batch took (the first packet's; 0 when no packet
    /// left). The executor resets it to 0 before each call.
    pub main: u32,
    /// (output port, packet) for outputs other than `main`.
    pub sent: Vec<(u32, Packet)>,
    /// (packet, reason).
    pub dropped: Vec<(Packet, &'static str)>,
}

/// How many input and output ports an element accepts, as Click's `port_count` does
/// (for example `1/1-2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortCount {
    /// Minimum number of inputs.
    pub min_in: usize,
    /// Maximum number of inputs.
    pub max_in: usize,
    /// Minimum number of outputs.
    pub min_out: usize,
    /// Maximum number of outputs.
    pub max_out: usize,
}

impl PortCount {
    /// Exactly `i` inputs and `o` outputs.
    pub const fn exact(i: usize, o: usize) -> PortCount {
        PortCount {
            min_in: i,
            max_in: i,
            min_out: o,
            max_out: o,
        }
    }
    /// Inputs in `i0..=i1`, outputs in `o0..=o1`.
    pub const fn range(i0: usize, i1: usize, o0: usize, o1: usize) -> PortCount {
        PortCount {
            min_in: i0,
            max_in: i1,
            min_out: o0,
            max_out: o1,
        }
    }
    /// Click's notation, e.g. `1/1-2`.
    pub fn describe(&self) -> String {
        fn side(a: usize, b: usize) -> String {
            if a == b {
                a.to_string()
            } else if b == usize::MAX {
                format!("{a}-")
            } else {
                format!("{a}-{b}")
            }
        }
        format!(
            "{}/{}",
            side(self.min_in, self.max_in),
            side(self.min_out, self.max_out)
        )
    }
}

/// The part an element plays for the executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// An ordinary element.
    Inner,
    /// `FromDevice(X)`: packets arriving on the NF's interface `X` enter here.
    FromDevice(String),
    /// `ToDevice(X)`: packets pushed here leave the NF by interface `X`.
    ToDevice(String),
    /// `FromDump(FILE)`: the executor reads this capture and pushes its packets here.
    FromDump(std::path::PathBuf),
    /// `ToDump(FILE)`: packets pushed here are written to this capture.
    ToDump(std::path::PathBuf),
}

/// What an element needs to know while it is being built.
#[derive(Debug, Clone, Copy)]
pub struct BuildCtx<'a> {
    /// Qualified element name (`nf/element`, with compound members as `nf/compound/member`).
    /// Rewriters key their deterministic random choices by it.
    pub name: &'a str,
    /// Number of connected input ports (highest connected port + 1).
    pub ninputs: usize,
    /// Number of connected output ports (highest connected port + 1).
    pub noutputs: usize,
    /// `AddressInfo` names and `IPRewriterPatterns` patterns declared in the same NF.
    pub names: &'a Names,
    /// Directory relative paths in the configuration (`FromDump`, `ToDump`) are resolved against.
    pub base_dir: &'a Path,
}

/// What the executor lends an element for one push: the virtual clock, a place to emit more
/// than one packet, and packet allocation (every packet an element creates is counted).
#[derive(Debug, Default)]
pub struct Context {
    /// Virtual time: the latest packet timestamp seen (never the wall clock).
    pub now: Timestamp,
    emitted: Vec<(usize, Packet)>,
    dropped: Vec<(Packet, &'static str)>,
    created: u64,
    pending: bool,
    pool: Vec<Packet>,
    /// The fast path's recorder (see [`crate::record`]).
    pub recorder: Recorder,
}

impl Context {
    /// A context at virtual time `now`.
    pub fn new(now: Timestamp) -> Context {
        Context {
            now,
            ..Context::default()
        }
    }

    /// Emits `packet` on output `port`. Emitted packets are processed in emission order, each
    /// to completion (depth first), after the element returns; emit lower ports first.
    #[inline]
    pub fn emit(&mut self, port: usize, packet: Packet) {
        self.pending = true;
        self.emitted.push((port, packet));
    }

    /// Drops `packet` under `reason` (for elements that drop some packets and emit others);
    /// `reason` is the text of one of the element's reason enums (see [`crate::reason`]).
    #[inline]
    pub fn drop(&mut self, packet: Packet, reason: &'static str) {
        self.pending = true;
        self.dropped.push((packet, reason));
    }

    /// A new packet holding `data`, with metadata copied from `like` (timestamp, input index,
    /// annotations). Counted as created.
    pub fn new_packet(&mut self, data: &[u8], like: &Meta) -> Packet {
        self.created += 1;
        self.pending = true;
        let mut p = self.pool.pop().unwrap_or_else(|| Packet::from_bytes(&[]));
        p.reset(data);
        p.meta = like.clone();
        p.meta.mac_offset = packet::NO_OFFSET;
        p.meta.network_offset = packet::NO_OFFSET;
        p.meta.transport_offset = packet::NO_OFFSET;
        p
    }

    /// A copy of `packet` (bytes, header annotations and metadata). Counted as created.
    #[inline]
    pub fn copy_packet(&mut self, packet: &Packet) -> Packet {
        self.created += 1;
        self.pending = true;
        packet.duplicate()
    }

    /// Gives a packet's buffer back for reuse (the packet is gone: call only for packets the
    /// element is accounting for otherwise, e.g. a fragment source it replaced).
    pub fn recycle(&mut self, packet: Packet) {
        if self.pool.len() < 1024 {
            self.pool.push(packet);
        }
    }

    /// Takes what was emitted during the last push (executor use).
    pub fn take_emitted(&mut self) -> std::vec::Drain<'_, (usize, Packet)> {
        self.emitted.drain(..)
    }

    /// True if anything was created, emitted or dropped through the context since the
    /// executor last settled it (executor use).
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending
    }

    /// Marks everything created, emitted and dropped so far as taken (executor use, after
    /// [`Context::take_created`], [`Context::take_dropped`] and [`Context::take_emitted`]).
    #[inline]
    pub fn settled(&mut self) {
        self.pending = false;
    }

    /// Takes what was dropped during the last push (executor use).
    pub fn take_dropped(&mut self) -> std::vec::Drain<'_, (Packet, &'static str)> {
        self.dropped.drain(..)
    }

    /// Whether the packet being pushed is being recorded for the fast path (see
    /// [`crate::record`]). Elements may skip building records when it is false; the
    /// `record_*` calls do nothing then anyway.
    #[inline]
    pub fn recording(&self) -> bool {
        self.recorder.active
    }

    /// Records that the element writes `value` into `field` (element view).
    #[inline]
    pub fn record_write(&mut self, field: Field, value: u128) {
        if self.recorder.active {
            self.recorder.step.touched = true;
            self.recorder.step.writes.push((field, value));
        }
    }

    /// Records a guard: later packets of the flow take the recorded action only if they pass
    /// `filter` (element view).
    #[inline]
    pub fn record_guard(&mut self, filter: Filter) {
        if self.recorder.active {
            self.recorder.step.touched = true;
            self.recorder.step.guards.push(filter);
        }
    }

    /// Records a state function: `token` comes back to [`Element::replay`] (and
    /// [`Element::check`]) for every later packet of the flow.
    #[inline]
    pub fn record_state(&mut self, token: u64, payload: Access) {
        if self.recorder.active {
            self.recorder.step.touched = true;
            self.recorder.step.states.push((token, payload));
        }
    }

    /// Records that the flow's entry must not be used at or after virtual time `at`.
    #[inline]
    pub fn record_expiry(&mut self, at: Timestamp) {
        if self.recorder.active {
            self.recorder.step.touched = true;
            self.recorder.expiry = Some(self.recorder.expiry.map_or(at, |e| e.min(at)));
        }
    }

    /// Records that the element's decision cannot be guarded: the flow takes the full chain.
    #[inline]
    pub fn record_opaque(&mut self, why: &'static str) {
        if self.recorder.active {
            self.recorder.step.touched = true;
            self.recorder.step.opaque.get_or_insert(why);
        }
    }

    /// Records that the element did nothing to the packet but forward or drop it (an element
    /// without a model that is neither stateful nor writing).
    #[inline]
    pub fn record_nothing(&mut self) {
        if self.recorder.active {
            self.recorder.step.touched = true;
        }
    }

    /// Counts `n` packets the element made without [`Context::new_packet`] (an operator
    /// NF's packetized stream), so that every packet stays accounted for.
    #[inline]
    pub fn count_created(&mut self, n: u64) {
        self.created += n;
        self.pending = true;
    }

    /// Packets created so far, and resets the count (executor use).
    #[inline]
    pub fn take_created(&mut self) -> u64 {
        std::mem::take(&mut self.created)
    }
}

/// A packet-processing element.
///
/// What the executor and synthesis need beyond pushing packets, an element offers through
/// its capability methods ([`Element::stateful_flow`], [`Element::rewrite_spec`],
/// [`Element::route_table`]); see [`crate::capability`].
///
/// `push` is called with one packet at a time; batching is the executor's business. An
/// element must never panic on packet contents: malformed packets are dropped with a reason.
pub trait Element: Send + AsAny {
    /// The Click class name (`"DecIPTTL"`).
    fn class_name(&self) -> &'static str;

    /// The port counts this element accepts, given its configuration.
    fn port_count(&self) -> PortCount;

    /// Processes `packet` arriving on input `port`.
    fn push(&mut self, port: usize, packet: Packet, cx: &mut Context) -> Verdict;

    /// Whether the executor may run this element over batches ([`Batching::Never`] unless
    /// the element says otherwise).
    fn batching(&self) -> Batching {
        Batching::Never
    }

    /// Processes the packets of `batch`, all arriving on input `port`, in order: a packet
    /// that leaves by the main output (the first packet's output, written to `side.main`)
    /// takes its own place again, the others go to `side` (sent by another output, or
    /// dropped) and leave `batch`, which keeps the order of the rest.
    /// For a [`Batching::Ordered`] element, [`Context::now`] is, while each packet is pushed,
    /// the time its input entered the chain (`clock`). Only called for elements whose
    /// [`Element::batching`] is not `Never`. The default calls [`Element::push`] in a loop
    /// compiled for each element, so the per-packet call is direct (and may be inlined),
    /// the virtual call is paid once per batch, and packets going straight on stay where
    /// they are.
    fn push_batch(
        &mut self,
        port: u32,
        batch: &mut Vec<Option<Packet>>,
        clock: &BatchClock<'_>,
        side: &mut BatchOut,
        cx: &mut Context,
    ) {
        let timed = self.batching() == Batching::Ordered;
        let mut all_kept = true;
        // The output packets stay in place for: the first packet's (a router sends most of
        // a batch by one output, often not 0).
        let mut main: Option<usize> = None;
        for slot in batch.iter_mut() {
            let Some(p) = slot.take() else {
                continue;
            };
            if timed {
                cx.now = clock.now(&p);
            }
            match self.push(port as usize, p, cx) {
                Verdict::Out(o, q) if *main.get_or_insert(o) == o => *slot = Some(q),
                Verdict::Out(o, q) => {
                    all_kept = false;
                    side.sent.push((o as u32, q));
                }
                Verdict::Drop(q, r) => {
                    all_kept = false;
                    side.dropped.push((q, r));
                }
                Verdict::Done => all_kept = false,
            }
        }
        side.main = main.unwrap_or(0) as u32;
        if !all_kept {
            batch.retain(Option::is_some);
        }
    }

    /// The element's part for the executor (device, dump file, or an ordinary element).
    fn role(&self) -> Role {
        Role::Inner
    }

    /// Element-specific counters (`Counter`'s count and byte_count, a rewriter's mappings).
    fn stats(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Packets the element holds at this moment (an `ARPQuerier` queue), for accounting.
    fn held(&self) -> u64 {
        0
    }

    /// The element's semantic model for synthesis, or `None` if it is opaque (synthesis then
    /// runs the element as it is). See [`crate::model`].
    fn model(&self) -> Option<crate::model::Model> {
        None
    }

    /// What the element declares it may do to any packet, when it has no model (see
    /// [`crate::record::Declared`]); `None`: nothing declared (a planner then assumes it may
    /// do anything).
    fn declared(&self) -> Option<crate::record::Declared> {
        None
    }

    /// The element's per-flow state, if the executor may drive it directly (the rewriters
    /// and `MazuNAT`): it then asks for decisions instead of pushing packets through it.
    fn stateful_flow(&mut self) -> Option<&mut dyn StatefulFlow> {
        None
    }

    /// The element as a rewriter synthesis can model from its input specifications
    /// (`IPRewriter`, `TCPRewriter`, `UDPRewriter`), if it is one.
    fn rewrite_spec(&self) -> Option<&dyn RewriteSpec> {
        None
    }

    /// The element's route table, if it is a longest-prefix route lookup.
    fn route_table(&self) -> Option<&dyn RouteTable> {
        None
    }

    /// The element's public address or port ranges, if replicas on several workers must
    /// split them ([`WorkerShare`]: the rewriters and `MazuNAT`).
    fn worker_share(&mut self) -> Option<&mut dyn WorkerShare> {
        None
    }

    /// The element's state as text lines (NAT mappings, tables), dumped in one format by every
    /// execution mode so runs can be compared. Elements without state return nothing.
    fn state_dump(&self) -> Vec<String> {
        Vec::new()
    }

    /// Fast path, event check: whether state function `token` (recorded by this element for
    /// a flow) still stands for one more packet of the flow, given the element's state now.
    /// It may bring clock- or schedule-driven state up to date but must not change per-flow
    /// state. `false` sends the packet through the full chain, where the flow is recorded
    /// again. Asked for every state function of the flow before any of them runs.
    fn check(&mut self, token: u64, view: &ReplayView<'_>) -> bool {
        let _ = (token, view);
        true
    }

    /// Fast path, state function: does to the element's state what pushing this later packet
    /// of the flow would have done (counters, timers, payload scans), for the `token` the
    /// element recorded. Runs only after every [`Element::check`] of the flow said yes.
    fn replay(&mut self, token: u64, view: &mut ReplayView<'_>, cx: &mut Context) {
        let _ = (token, view, cx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets going by the first packet's output stay in place and in order; the others
    /// leave for `side`, in order, with their output or reason; empty slots are skipped.
    #[test]
    fn a_batch_in_place_keeps_the_first_packets_output() {
        // The first byte says what happens: 0–9 leave by that output, 0xff is dropped.
        let step = |p: &mut Packet| -> Step {
            let b = p.data()[0];
            p.data_mut()[1] = b.wrapping_add(1);
            match b {
                0xff => Step::Drop("bad"),
                o => Step::Out(u32::from(o)),
            }
        };
        let firsts = [2u8, 2, 0, 0xff, 2, 1, 2];
        let mut batch: Vec<Option<Packet>> = firsts
            .iter()
            .enumerate()
            .map(|(i, &b)| Some(Packet::from_bytes(&[b, 0, i as u8])))
            .collect();
        batch.insert(3, None);
        let mut side = BatchOut::default();
        push_batch_in_place(&mut batch, &mut side, step);
        assert_eq!(side.main, 2);
        let kept: Vec<(u8, u8)> = batch
            .iter()
            .map(|s| {
                let p = s.as_ref().expect("only packets stay");
                (p.data()[1], p.data()[2])
            })
            .collect();
        assert_eq!(kept, vec![(3, 0), (3, 1), (3, 4), (3, 6)]);
        let sent: Vec<(u32, u8)> = side.sent.iter().map(|(o, p)| (*o, p.data()[2])).collect();
        assert_eq!(sent, vec![(0, 2), (1, 5)]);
        let dropped: Vec<(&str, u8)> = side
            .dropped
            .iter()
            .map(|(p, r)| (*r, p.data()[2]))
            .collect();
        assert_eq!(dropped, vec![("bad", 3)]);

        // A batch that all goes one way is left as it was (no packet moves).
        let mut all: Vec<Option<Packet>> = (0..4)
            .map(|i| Some(Packet::from_bytes(&[5, 0, i])))
            .collect();
        let mut side = BatchOut::default();
        push_batch_in_place(&mut all, &mut side, step);
        assert_eq!((side.main, all.len(), side.sent.len()), (5, 4, 0));
        // An empty batch says output 0.
        let mut none: Vec<Option<Packet>> = Vec::new();
        push_batch_in_place(&mut none, &mut side, step);
        assert_eq!(side.main, 0);
    }
}
