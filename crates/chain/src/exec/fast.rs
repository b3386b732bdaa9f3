//! The per-flow fast path (SpeedyBox, `--mode fastpath`): runtime consolidation over the
//! naive executor.
//!
//! A packet entering the chain gets a flow key once, at the entry: (entry element, VLAN tag,
//! IPv4 protocol, addresses, ports, header length), read from the frame as it arrived, and
//! the key's table index goes into [`packet::Meta::flow_id`], where it stays whatever NATs do
//! to the tuple. The first packet of a flow (or, if asked, the first after the TCP
//! handshake) walks the real chain while every element *records* what it did (see
//! `elements::record`): elements with a synthesis model by the model case the packet took,
//! the others through the recording calls, the rewriters by the mapping that rewrote the
//! packet. The walk ends at an exit or a drop, and the records are *consolidated* into one
//! entry of the chain's global flow table:
//!
//! * **guards**, in the coordinates of the frame as it arrived: each element's case filter
//!   (and the earlier cases that could match the flow, negated), with what earlier elements
//!   wrote folded in (a field written with a constant is decided once, at recording; a TTL
//!   test moves by the decrements before it; fields of the flow key need no test);
//! * **one header action**: every field written once with its last value, the TTL moved by
//!   the sum of the decrements, IPv4 and transport checksums fixed once at the end
//!   (incrementally, or recomputed when an element recomputed it), bytes pulled or pushed at
//!   the front netted out (an encapsulation and a decapsulation cancel), the packet cut at
//!   its IPv4 length when an element did that; a drop dominates (nothing is written);
//! * **state functions**, in path order: each element's recorded tokens
//!   (`Element::replay`), the rewriters' mapping refreshes (`StatefulFlow::replay`), and the
//!   counters of every element and link on the path;
//! * **events**: before anything runs, every state function's `check` (and each rewriter's
//!   `check_replay`); one that fails drops the entry and the packet takes the full chain,
//!   which records the flow afresh;
//! * **lifetime**: the earliest timer recorded (a NAT mapping's expiry), an idle timeout
//!   (virtual time), and FIN/RST, which remove the entry (the NFs keep their own state).
//!
//! A later packet of the flow that passes every guard gets the entry: checks, state
//! functions, counters, the header action, then its exit (or its drop). One that fails a
//! guard takes the full chain and leaves the entry alone. Before an entry is stored, its
//! header action is applied to a copy of the recorded packet as it arrived and must give the
//! bytes the chain gave; any disagreement, an element that neither has a model nor records,
//! copies or held packets make the flow take the full chain for good (it is counted by
//! reason), never a wrong packet.
//!
//! An entry is a *template* shared by every flow that took the same path (guards, header
//! action, state functions, counters, end: found by their description when the entry is
//! made) and what the flow holds alone, in its table slot: the values its rewriters'
//! mappings gave the addresses and ports, the checksum operands these add, its expiry and
//! each rewriter's mapping (index, version, direction, the tuple it saw). So the NAPTs'
//! flows, each with its own mapping, read one template that stays in cache and their own
//! slot.
//!
//! The table is bounded: when it is full, the oldest entry is evicted (counted).

use super::{finish_packet, Counters, Executor, Kind, NfCounters};
use crate::program::{frame_location, Finish, Getter, IpChecksum, Regs, Tuple, Val};
use elements::model::{self, Case, Field, FieldSet, Filter, Group, Headers, Model, Outcome};
use elements::record::{Access, ReplayView, Step};
use elements::rewriter::{Direction, FlowInput, PacketInfo};
use elements::Verdict;
use packet::Packet;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use wire::checksum::{fold, operands16, operands32};

/// Which packet of a flow is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Initial {
    /// The first packet of the flow.
    First,
    /// The second packet of the flow: its first takes the full chain unrecorded and the
    /// flow is remembered as seen (a fingerprint in a bounded set), so traffic of one-packet flows
    /// (scans, floods) costs what the naive chain costs plus a table update, not a
    /// recording and a consolidation each. For TCP, a flow is seen by any packet of it.
    #[default]
    Second,
    /// For TCP, the first packet after the handshake: packets with SYN, or without ACK, take
    /// the full chain and are not recorded (SpeedyBox's choice). Other protocols: the first.
    AfterHandshake,
}

/// Settings of the fast path.
#[derive(Debug, Clone)]
pub struct FastOptions {
    /// Most flows the global table holds; a new flow beyond that evicts the oldest entry.
    pub max_flows: usize,
    /// An entry unused for this long (virtual time, ns) is removed.
    pub idle_ns: u64,
    /// Which packet of a flow is recorded.
    pub initial: Initial,
    /// Run the state functions of the later NFs of a flow on a second core, beside those of
    /// the earlier ones (SpeedyBox Table I): only where no earlier NF writes the payload and
    /// no later one reads what an earlier one writes; a later writer works on its own copy of
    /// the packet, merged back after both halves are done.
    pub parallel: bool,
}

impl Default for FastOptions {
    fn default() -> Self {
        FastOptions {
            max_flows: 1 << 16,
            idle_ns: 60_000_000_000,
            initial: Initial::Second,
            parallel: false,
        }
    }
}

/// What the fast path did over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastStats {
    /// Packets served by a consolidated entry.
    pub hits: u64,
    /// Packets recorded (walked the chain to make an entry).
    pub recorded: u64,
    /// Entries made.
    pub consolidated: u64,
    /// Packets of flows with an entry that failed a guard (took the full chain).
    pub guard_misses: u64,
    /// Entries dropped because an event check said the recorded decision no longer holds.
    pub events: u64,
    /// Entries removed by FIN or RST.
    pub closed: u64,
    /// Entries removed after the idle timeout or their recorded expiry.
    pub expired: u64,
    /// Entries evicted because the table was full.
    pub evictions: u64,
    /// Packets that took the full chain because their flow cannot be consolidated, by reason.
    pub refused: BTreeMap<&'static str, u64>,
    /// Entries in the table at the end.
    pub entries: u64,
    /// Flows whose first packet took the full chain unrecorded ([`Initial::Second`]).
    pub first_seen: u64,
    /// Entries made that share the template of an earlier one (flows that took the same
    /// path, each with its own mappings and tuple values).
    pub shared: u64,
}

/// A flow's key: entry element, VLAN tag, and the tuple (packet kind, IPv4 header length,
/// protocol, addresses, ports) as two halves, so that the key takes 24 bytes of its slot's
/// first cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    entry: u32,
    vlan: u32,
    lo: u64,
    hi: u64,
}

impl std::hash::Hash for Key {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // As a key of (u32, u32, u128) hashes: flow ids stay what they were.
        h.write_u32(self.entry);
        h.write_u32(self.vlan);
        h.write_u128(self.tuple());
    }
}

/// A test on one field of the frame as it arrived: allowed intervals.
type Test = (Field, Vec<(u128, u128)>);

/// A [`Test`] with its field's reader compiled ([`Getter::of`]), as a consolidated entry
/// checks it per packet.
type GetterTest = (Getter, Vec<(u128, u128)>);

fn compile_tests(tests: &[Test]) -> Vec<GetterTest> {
    tests
        .iter()
        .map(|(f, iv)| (Getter::of(*f), iv.clone()))
        .collect()
}

#[derive(Debug, PartialEq, Eq)]
enum End {
    Exit(u32),
    Drop,
}

/// A rewriter's step as recorded: its part of the entry's template ([`RwCall`]) and of
/// the flow's own data ([`RwFlow`]).
#[derive(Debug)]
struct RwRec {
    element: u32,
    trimmed: bool,
    flow: RwFlow,
}

/// A rewriter's part of an entry's template (shared by the flows that took the same path).
#[derive(Debug, PartialEq, Eq)]
struct RwCall {
    element: u32,
    /// Whether the rewriter saw the packet cut at its IPv4 length.
    trimmed: bool,
}

/// A rewriter's part of one flow's entry: the mapping the flow holds there.
#[derive(Debug, Clone, Copy)]
struct RwFlow {
    idx: u32,
    /// The mapping's version when recorded (a replaced or changed mapping has another).
    version: u32,
    dir: Direction,
    /// The tuple the rewriter saw (saddr, sport, daddr, dport).
    view: elements::rewriter::FlowId,
}

/// What an entry holds for its flow alone, beside its (shared) template: the values the
/// flow's rewriters gave its tuple, the checksum operands they add, and the mapping each
/// rewriter of the template holds for the flow (its expiry is [`Slot::expiry`]). Kept in
/// the table slot, so a hit reads the template (in cache, shared) and its own slot only.
#[derive(Debug, Default)]
struct Own {
    /// Values written to the tuple fields the template's [`Consolidated::tuple`] names
    /// (in [`Field::TUPLE`]'s order, which is the order of its bits).
    tuple: [u32; 4],
    /// Operands added to the IPv4 and transport checksums (folded).
    ip_ops: u32,
    l4_ops: u32,
    /// Per rewriter of the template, in order (read when replays are paid or checked).
    rw: Option<Arc<[RwFlow]>>,
}

impl Own {
    /// The flow's mappings, one per rewriter of the template.
    fn rw(&self) -> &[RwFlow] {
        self.rw.as_deref().unwrap_or(&[])
    }
}

/// A recorded state function.
#[derive(Debug, PartialEq, Eq)]
struct StateCall {
    element: u32,
    nf: u32,
    access: Access,
    token: u64,
    head: u16,
    ip: Option<u16>,
    trimmed: bool,
}

/// Counter changes one packet of the flow makes (from the recording's snapshot).
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    arrivals: Vec<(u32, u64)>,
    out: Vec<(u32, u64)>,
    drops: Vec<(u32, &'static str, u64)>,
    nfs: Vec<(u32, NfCounters)>,
    stats: Vec<(u32, &'static str)>,
    /// (element, counter, head, trimmed): adds the packet's length as the element saw it.
    byte_stats: Vec<(u32, &'static str, u16, bool)>,
}

impl Counts {
    /// Adds `n` packets' worth (with `bytes`: the sums of their frame and IPv4 lengths).
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        n: u64,
        bytes: (u64, u64),
        arrivals: &mut [u64],
        out: &mut [u64],
        drops: &mut [Vec<(&'static str, u64)>],
        nfs: &mut [NfCounters],
        stats: &mut [Vec<(&'static str, u64)>],
    ) {
        for &(e, k) in &self.arrivals {
            arrivals[e as usize] += k * n;
        }
        for &(e, k) in &self.out {
            out[e as usize] += k * n;
        }
        for &(e, r, k) in &self.drops {
            add_stat(&mut drops[e as usize], r, k * n);
        }
        for (f, d) in &self.nfs {
            let t = &mut nfs[*f as usize];
            t.input += d.input * n;
            t.output += d.output * n;
            t.created += d.created * n;
            t.dropped += d.dropped * n;
        }
        for &(e, name) in &self.stats {
            add_stat(&mut stats[e as usize], name, n);
        }
        for &(e, name, head, trimmed) in &self.byte_stats {
            let b = if trimmed { bytes.1 + 14 * n } else { bytes.0 };
            add_stat(
                &mut stats[e as usize],
                name,
                b.saturating_sub(u64::from(head) * n),
            );
        }
    }
}

#[derive(Debug)]
struct Consolidated {
    /// Tests of one interval each (most guards), checked first. Each field is read through
    /// its [`Getter`], compiled once when the entry is made (a plain load for most fields),
    /// not looked up per packet.
    ranges: Vec<(Getter, u128, u128)>,
    /// `ranges` compiled for a hit: what a frame long enough for them checks instead.
    quick: QuickGuards,
    /// Tests of several intervals.
    tests: Vec<GetterTest>,
    negatives: Vec<Vec<GetterTest>>,
    /// The header action, less the tuple writes the flows hold apart (`tuple`).
    finish: Finish,
    /// `finish` as recorded, before [`Finish::prepare`]: templates are told apart by it (a
    /// template found equal is not prepared).
    source: Finish,
    /// `finish` compiled for a hit, when it is only constant bytes, byte adds, an
    /// incremental IPv4 checksum, a trim and a pull (a router's: MACs, TTL).
    quick_finish: Option<QuickFinish>,
    /// Whether an address or port is rewritten (the transport checksum is then fixed).
    rewrote: bool,
    /// The tuple fields ([`Field::TUPLE`], one bit each) whose written values each flow holds
    /// ([`Own::tuple`]): a NAPT's entry is shared by flows whose mappings differ.
    tuple: u8,
    /// Whether the flows add checksum operands of their own ([`Own::ip_ops`]); without,
    /// a hit reads nothing of its slot beyond the first cache line.
    ops: bool,
    rewriters: Vec<RwCall>,
    states: Vec<StateCall>,
    counts: Counts,
    end: End,
    /// The rewriters' packet info the entry holds for (FIN/SYN/RST, payload or not).
    info: Option<PacketInfo>,
}

/// Equal templates are one ([`Executor::fast_shared`]): every field is compared but those
/// made from others (`quick` from `ranges`; `finish` and `quick_finish` from `source`), so
/// that a template found equal is neither prepared nor compiled.
impl PartialEq for Consolidated {
    fn eq(&self, o: &Consolidated) -> bool {
        let Consolidated {
            ranges,
            quick: _,
            tests,
            negatives,
            finish: _,
            source,
            quick_finish: _,
            rewrote,
            tuple,
            ops,
            rewriters,
            states,
            counts,
            end,
            info,
        } = self;
        *ranges == o.ranges
            && *tests == o.tests
            && *negatives == o.negatives
            && *source == o.source
            && *rewrote == o.rewrote
            && *tuple == o.tuple
            && *ops == o.ops
            && *rewriters == o.rewriters
            && *states == o.states
            && *counts == o.counts
            && *end == o.end
            && *info == o.info
    }
}

impl Consolidated {
    /// A hash of the template for [`Executor::fast_shared`]'s lookup (equal templates hash
    /// alike; what it leaves out, such as the fields the guards read, equality decides).
    fn template_hash(&self) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = foldhash::fast::FixedState::with_seed(7).build_hasher();
        for &(_, lo, hi) in &self.ranges {
            (lo, hi).hash(&mut h);
        }
        for (_, iv) in &self.tests {
            iv.hash(&mut h);
        }
        self.negatives.len().hash(&mut h);
        self.source.hash(&mut h);
        (self.rewrote, self.tuple, self.ops).hash(&mut h);
        for r in &self.rewriters {
            (r.element, r.trimmed).hash(&mut h);
        }
        for st in &self.states {
            (st.element, st.token).hash(&mut h);
        }
        self.counts.arrivals.hash(&mut h);
        match self.end {
            End::Exit(el) => (1u8, el).hash(&mut h),
            End::Drop => 0u8.hash(&mut h),
        }
        h.finish()
    }

    /// The entry's end for `p`: its consolidated header action applied (with the flow's own
    /// values, `own`) and the exit it leaves by, or `None` when the entry drops it (nothing
    /// is written then).
    #[inline]
    fn finish_on(&self, own: &Own, p: &mut Packet) -> Option<u32> {
        match self.end {
            End::Exit(el) => {
                self.apply(own, p);
                Some(el)
            }
            End::Drop => None,
        }
    }

    /// Applies the header action to `p` (the frame as it arrived): the flow's tuple values
    /// first (no other write of the template touches those bytes, and the checksums are
    /// fixed after every write), then the template's writes, checksums and layout.
    #[inline]
    fn apply(&self, own: &Own, p: &mut Packet) {
        if let Some(q) = &self.quick_finish {
            let done = if self.tuple == 0 && !self.rewrote && !self.ops {
                q.apply(p)
            } else {
                // The flow's tuple values, then the transport checksum, after the
                // template's bytes (they write other bytes) and before the IPv4 checksum.
                let (ip_ops, l4_ops) = if self.ops {
                    (own.ip_ops, own.l4_ops)
                } else {
                    (0, 0)
                };
                q.apply_with(p, ip_ops, |d| {
                    let hl = ip_header_len(d);
                    if self.tuple != 0 {
                        write_tuple_hl(d, hl, self.tuple, &own.tuple);
                    }
                    if self.rewrote {
                        super::fix_l4_checksum(d, hl, l4_ops);
                    }
                })
            };
            if done {
                return;
            }
        }
        if self.tuple != 0 {
            write_tuple(p.data_mut(), self.tuple, &own.tuple);
        }
        let (ip_ops, l4_ops) = if self.ops {
            (own.ip_ops, own.l4_ops)
        } else {
            (0, 0)
        };
        let regs = Regs {
            ip_ops,
            l4_ops,
            rewrote: self.rewrote,
            ..Regs::default()
        };
        finish_packet(p, &self.finish, &regs);
    }
}

/// An entry's one-interval guards ([`Consolidated::ranges`]) compiled for a hit: the tests
/// of one value on fields read by a plain load become masked compares of 8-byte words (the
/// fields whose bits fall in one word share it), the other loads compare 64-bit values, and
/// only the computed fields (IPv4 checksum, length checks) go through their [`Getter`].
/// Used when the frame holds every word read ([`QuickGuards::need`]); a shorter frame is
/// checked by `ranges` (a load of missing bytes reads 0 there).
#[derive(Debug, Default, Clone)]
pub(super) struct QuickGuards {
    /// (offset in the frame, mask, value): the 8 bytes at the offset, read big-endian and
    /// masked, equal the value.
    words: Vec<(u16, u64, u64)>,
    /// The same, from the transport header.
    l4_words: Vec<(u16, u64, u64)>,
    /// One-interval tests on loads: (from the transport header, offset, right shift, mask,
    /// low, high).
    loads: Vec<(bool, u16, u8, u64, u64, u64)>,
    /// Whether the IPv4 header checksum must verify, and the IPv4 length check pass (the
    /// usual tests on those computed fields, made without their getters).
    checksum_ok: bool,
    len_ok: bool,
    /// The bytes from the IPv4 header on ([`Getter::IpAvail`]) are within these.
    avail: Option<(u64, u64)>,
    /// The other tests on computed fields.
    other: Vec<(Getter, u128, u128)>,
    /// Bytes the frame and its transport header must hold for the words and loads.
    need: usize,
    need_l4: usize,
}

/// Whether frame `h` passes every one-interval test of `ranges` (through their getters; out
/// of line, as its loop's setup is paid even when there is nothing to test).
#[inline(never)]
fn ranges_pass(ranges: &[(Getter, u128, u128)], h: &Headers) -> bool {
    ranges
        .iter()
        .all(|&(g, lo, hi)| (lo..=hi).contains(&g.get(h)))
}

/// The 8 bytes at `off` of `b` read big-endian (0 when they are not all there).
#[inline(always)]
fn word_at(b: &[u8], off: u16) -> u64 {
    let o = usize::from(off);
    match b.get(o..o + 8) {
        Some(w) => {
            let mut x = [0u8; 8];
            x.copy_from_slice(w);
            u64::from_be_bytes(x)
        }
        None => 0,
    }
}

impl QuickGuards {
    /// Compiles the one-interval tests `ranges`.
    pub(super) fn new(ranges: &[(Getter, u128, u128)]) -> QuickGuards {
        let mut q = QuickGuards::default();
        // Equality tests as (offset, mask, value) of the word at their offset, per base.
        let mut eq: [Vec<(u16, u64, u64)>; 2] = [Vec::new(), Vec::new()];
        for &(g, lo, hi) in ranges {
            let Getter::Load {
                l4,
                off,
                mask,
                wide,
                ..
            } = g
            else {
                match (g, lo, hi) {
                    (Getter::IpChecksumOk, 1, 1) => q.checksum_ok = true,
                    (Getter::IpLenOk, 1, 1) => q.len_ok = true,
                    (Getter::IpAvail, lo, hi) if lo <= u128::from(u64::MAX) => {
                        let hi = hi.min(u128::from(u64::MAX)) as u64;
                        let (a, b) = q.avail.unwrap_or((0, u64::MAX));
                        q.avail = Some((a.max(lo as u64), b.min(hi)));
                    }
                    _ => q.other.push((g, lo, hi)),
                }
                continue;
            };
            let end = usize::from(off) + 8;
            let wide32 = u32::from(wide);
            let wm = u128::from(mask).checked_shl(wide32).unwrap_or(u128::MAX);
            let wmask = wm as u64;
            if wide >= 64 || wm >> 64 != 0 || lo > u128::from(mask) || lo > hi {
                // Not a load this compiles (or a test nothing passes): checked as it was.
                q.other.push((g, lo, hi));
                continue;
            }
            if l4 {
                q.need_l4 = q.need_l4.max(end);
            } else {
                q.need = q.need.max(end);
            }
            if lo == hi {
                eq[usize::from(l4)].push((off, wmask, (lo as u64) << wide));
            } else {
                let hi = hi.min(u128::from(u64::MAX)) as u64;
                q.loads.push((l4, off, wide, mask, lo as u64, hi));
            }
        }
        // Tests whose bits fall in an earlier test's word share it.
        for (i, tests) in eq.iter_mut().enumerate() {
            tests.sort_by_key(|t| t.0);
            let mut words: Vec<(u16, u64, u64)> = Vec::new();
            for &(off, m, v) in tests.iter() {
                let merged = words.last_mut().is_some_and(|w| {
                    let d = u32::from(off - w.0) * 8;
                    if d >= 64 || m & ((1u64 << d) - 1) != 0 {
                        return false;
                    }
                    let (m2, v2) = (m >> d, v >> d);
                    if w.1 & m2 & (w.2 ^ v2) != 0 {
                        return false;
                    }
                    w.1 |= m2;
                    w.2 |= v2;
                    true
                });
                if !merged {
                    words.push((off, m, v));
                }
            }
            if i == 0 {
                q.words = words;
            } else {
                q.l4_words = words;
            }
        }
        q
    }

    /// Whether frame `h` passes the tests, or `None` when it is too short for the words
    /// and loads.
    #[inline]
    pub(super) fn pass(&self, h: &Headers) -> Option<bool> {
        if h.data.len() < self.need || h.l4.len() < self.need_l4 {
            return None;
        }
        Some(
            self.words
                .iter()
                .all(|&(o, m, v)| word_at(h.data, o) & m == v)
                && self
                    .l4_words
                    .iter()
                    .all(|&(o, m, v)| word_at(h.l4, o) & m == v)
                && self.loads.iter().all(|&(l4, o, wide, mask, lo, hi)| {
                    let x = (word_at(if l4 { h.l4 } else { h.data }, o) >> wide) & mask;
                    lo <= x && x <= hi
                })
                && self.avail.is_none_or(|(lo, hi)| {
                    let n = h.ip.len().min(0xffff) as u64;
                    lo <= n && n <= hi
                })
                && (!self.len_ok || h.ip_len_ok())
                && (!self.checksum_ok || h.ip_checksum_ok())
                && (self.other.is_empty() || ranges_pass(&self.other, h)),
        )
    }
}

/// A header action ([`Finish`]) of constant byte runs, byte adds (TTL decrements), an
/// incremental IPv4 checksum, a trim and a pull, compiled for a hit: the runs become masked
/// writes of 8-byte words, and nothing else of [`finish_packet`]'s general case is looked at.
#[derive(Debug)]
struct QuickFinish {
    /// (offset, mask, value): the 8 bytes at the offset, read big-endian, keep the bits
    /// outside the mask and take the value's inside it.
    words: Vec<(u16, u64, u64)>,
    /// Bytes the frame must hold for the words (a shorter frame takes [`finish_packet`]).
    need: usize,
    adds: Vec<(u16, u8)>,
    /// The operands added to the IPv4 checksum (0: left alone).
    ip_ops: u32,
    trim: bool,
    head: u16,
}

impl QuickFinish {
    /// Compiles `f` when it is of that kind (an entry's flows may add their tuple values
    /// and checksum operands: [`QuickFinish::apply_with`]).
    fn new(f: &Finish) -> Option<QuickFinish> {
        let IpChecksum::Incremental(ip_ops) = f.ip_checksum else {
            return None;
        };
        if !f.placed.is_empty() || !f.writes.is_empty() || f.annos.is_some() {
            return None;
        }
        // The header length is read after the constant bytes are written (`apply_with`):
        // an action that writes its byte is left to `finish_packet`, which reads it before.
        const IHL: usize = crate::program::fixed_offset(Field::IpIhl);
        let touches =
            |off: u16, len: usize| (usize::from(off)..usize::from(off) + len).contains(&IHL);
        if f.runs.iter().any(|(o, b)| touches(*o, b.len()))
            || f.adds.iter().any(|(o, _)| touches(*o, 1))
        {
            return None;
        }
        // The runs' bytes, later runs over earlier ones (as they are copied in order).
        let mut bytes: BTreeMap<usize, u8> = BTreeMap::new();
        for (off, b) in &f.runs {
            for (i, x) in b.iter().enumerate() {
                bytes.insert(usize::from(*off) + i, *x);
            }
        }
        let mut words: Vec<(u16, u64, u64)> = Vec::new();
        let mut need = 0;
        for (o, x) in bytes {
            let shift = |base: usize| 8 * (7 - (o - base)) as u32;
            match words.last_mut() {
                Some(w) if o < usize::from(w.0) + 8 => {
                    let sh = shift(usize::from(w.0));
                    w.1 |= 0xff << sh;
                    w.2 |= u64::from(x) << sh;
                }
                _ => {
                    let base = u16::try_from(o).ok()?;
                    need = need.max(o + 8);
                    words.push((base, 0xff << 56, u64::from(x) << 56));
                }
            }
        }
        Some(QuickFinish {
            words,
            need,
            adds: f.adds.clone(),
            ip_ops,
            trim: f.trim,
            head: f.head,
        })
    }

    /// Applies the action to `p` (the frame as it arrived), as [`finish_packet`] would; `false`
    /// (nothing done) when the frame is too short for the words.
    #[inline]
    fn apply(&self, p: &mut Packet) -> bool {
        self.apply_with(p, 0, |_| {})
    }

    /// [`QuickFinish::apply`] with more: `placed` writes the frame after the constant bytes
    /// and adds, as [`finish_packet`]'s placed writes and transport checksum do (the IPv4
    /// header length byte is as it arrived: [`QuickFinish::new`] compiles no write of it),
    /// and `ip_ops` more operands go to the IPv4 checksum.
    #[inline(always)]
    fn apply_with(&self, p: &mut Packet, ip_ops: u32, placed: impl FnOnce(&mut [u8])) -> bool {
        use crate::program::IP_OFFSET;
        const LEN: usize = crate::program::fixed_offset(Field::IpLen);
        const IP_CHECKSUM: usize = IP_OFFSET + wire::ipv4::field::CHECKSUM.start;
        let d = p.data_mut();
        if d.len() < self.need {
            return false;
        }
        let ip_len = usize::from(u16::from_be_bytes([
            d.get(LEN).copied().unwrap_or(0),
            d.get(LEN + 1).copied().unwrap_or(0),
        ]));
        for &(off, m, v) in &self.words {
            let o = usize::from(off);
            if let Some(b) = d.get_mut(o..o + 8) {
                let mut x = [0u8; 8];
                x.copy_from_slice(b);
                let w = (u64::from_be_bytes(x) & !m) | v;
                b.copy_from_slice(&w.to_be_bytes());
            }
        }
        for &(off, a) in &self.adds {
            if let Some(b) = d.get_mut(usize::from(off)) {
                *b = b.wrapping_add(a);
            }
        }
        placed(d);
        let ops = self.ip_ops + ip_ops;
        if ops != 0 {
            if let Some(b) = d.get_mut(IP_CHECKSUM..IP_CHECKSUM + 2) {
                let c0 = u16::from_be_bytes([b[0], b[1]]);
                let c = !fold(u32::from(!c0) + u32::from(fold(ops)));
                b.copy_from_slice(&c.to_be_bytes());
            }
        }
        if self.trim {
            p.truncate(IP_OFFSET + ip_len);
        }
        p.pull(usize::from(self.head));
        true
    }
}

/// An exit's header action ([`Finish`]) compiled for the remembered paths of synth mode:
/// [`QuickFinish`] for its constant part, and its writes of the values the path's rewriters
/// decided (registers), put in place with the path's registers.
#[derive(Debug)]
pub(super) struct QuickExit {
    finish: QuickFinish,
    /// Writes of register values: where (from the transport header or not, offset, 2 or 4
    /// bytes), and the register, component and constant added.
    regs: Vec<(bool, u16, u8, u8, Tuple, i128)>,
}

impl QuickExit {
    /// Compiles `f` when its writes other than constant bytes and adds are register values
    /// of 2 or 4 bytes, it sets no annotations, and its IPv4 checksum is incremental.
    pub(super) fn new(f: &Finish) -> Option<QuickExit> {
        // `writes` keeps what [`Finish::prepare`] placed; a write it could not place (not
        // whole bytes) leaves them unequal.
        if f.writes.len() != f.placed.len() || f.annos.is_some() {
            return None;
        }
        let mut regs = Vec::new();
        for w in &f.placed {
            let Val::Reg(r, t, add) = w.val else {
                return None;
            };
            if w.len != 2 && w.len != 4 {
                return None;
            }
            regs.push((w.transport, w.off, w.len, r, t, add));
        }
        let constant = Finish {
            placed: Vec::new(),
            writes: Vec::new(),
            ..f.clone()
        };
        Some(QuickExit {
            finish: QuickFinish::new(&constant)?,
            regs,
        })
    }

    /// Applies the action to `p` (the frame as it arrived) with the path's registers
    /// `regs`, as [`finish_packet`] would; `false` (nothing done) when the frame is too short
    /// for the compiled words.
    #[inline]
    pub(super) fn apply(&self, p: &mut Packet, regs: &Regs) -> bool {
        self.finish.apply_with(p, regs.ip_ops, |d| {
            let hl = ip_header_len(d);
            for &(l4, off, len, r, t, add) in &self.regs {
                let o = usize::from(off)
                    + if l4 {
                        crate::program::IP_OFFSET + hl
                    } else {
                        0
                    };
                let v = super::reg_value(regs, r, t, add);
                if len == 4 {
                    if let Some(b) = d.get_mut(o..o + 4) {
                        b.copy_from_slice(&(v as u32).to_be_bytes());
                    }
                } else if let Some(b) = d.get_mut(o..o + 2) {
                    b.copy_from_slice(&(v as u16).to_be_bytes());
                }
            }
            if regs.rewrote {
                super::fix_l4_checksum(d, hl, regs.l4_ops);
            }
        })
    }
}

/// Where the tuple fields are in a frame whose IPv4 header is `hl` bytes long ([`Field::TUPLE`]'s
/// order: offset, whether 4 bytes long, else 2).
#[inline(always)]
fn tuple_at(hl: usize) -> [(usize, bool); 4] {
    const SRC: usize = crate::program::fixed_offset(Field::IpSrc);
    const DST: usize = crate::program::fixed_offset(Field::IpDst);
    let l4 = crate::program::IP_OFFSET + hl;
    [(SRC, true), (l4, false), (DST, true), (l4 + 2, false)]
}

/// Writes the values `vals` of the tuple fields `mask` names ([`Field::TUPLE`], one bit each) into
/// frame `d` (nothing where the frame is too short).
#[inline]
fn write_tuple(d: &mut [u8], mask: u8, vals: &[u32; 4]) {
    write_tuple_hl(d, ip_header_len(d), mask, vals);
}

/// The IPv4 header length of frame `d` (IPv4 at 14), as written.
#[inline(always)]
fn ip_header_len(d: &[u8]) -> usize {
    usize::from(d.get(14).copied().unwrap_or(0) & 0x0f) * 4
}

/// [`write_tuple`] in a frame whose IPv4 header is `hl` bytes long.
#[inline(always)]
fn write_tuple_hl(d: &mut [u8], hl: usize, mask: u8, vals: &[u32; 4]) {
    for (i, (off, wide)) in tuple_at(hl).into_iter().enumerate() {
        if mask >> i & 1 == 0 {
            continue;
        }
        if wide {
            if let Some(b) = d.get_mut(off..off + 4) {
                b.copy_from_slice(&vals[i].to_be_bytes());
            }
        } else if let Some(b) = d.get_mut(off..off + 2) {
            b.copy_from_slice(&(vals[i] as u16).to_be_bytes());
        }
    }
}

#[derive(Debug)]
enum Entry {
    Fast(Arc<Consolidated>),
    /// The flow cannot be consolidated (the reason is counted per packet; boxed, so that
    /// an entry is two words).
    Refused(Box<Why>),
}

/// Why a flow cannot be consolidated.
#[derive(Debug)]
struct Why(&'static str);

/// A flow's place in the table. Laid out by hand: its first cache line holds all a hit
/// on an entry without rewriters reads and writes (key, entry, last use, expiry, packets
/// owed); what rewriters' entries also need follows.
#[derive(Debug)]
#[repr(C, align(64))]
struct Slot {
    key: Key,
    entry: Entry,
    last: u64,
    /// The entry is not used at or after this time (a mapping may have expired).
    expiry: u64,
    /// What the packets served owe, and what the entry knows of its rewriters.
    st: Served,
    /// What the entry holds for this flow alone (its template may be shared).
    own: Own,
}

/// The bookkeeping of an entry's served packets.
#[derive(Debug)]
#[repr(C)]
struct Served {
    /// Packets served since the counters were last paid (first: in the slot's first cache
    /// line).
    pending: u64,
    /// Packets served whose rewriter replays are owed (paid by [`Executor::fast_settle`]).
    owed: u32,
    /// The time of the last of them.
    owed_at: u64,
    /// Its place in the order of every packet whose replays were owed (debts are paid in
    /// that order: a mapping's expiry is its latest packet's).
    seq: u64,
    /// The [`Guards::generation`] the entry last checked its rewriters under, and the
    /// earliest time one of them reaps, as then known.
    generation: u64,
    reap_at: u64,
    /// The rewriters' change count when the entry's mapping versions were last found
    /// unchanged.
    epoch: u64,
    /// The sums of the served packets' frame lengths and IPv4 total lengths (for byte
    /// counters).
    pending_len: u64,
    pending_ip_len: u64,
}

/// The flow table: slots found by their key (a [`hashbrown::HashTable`], so that the key
/// is in its slot's first cache line).
#[derive(Default)]
struct FlowTable {
    t: hashbrown::HashTable<Slot>,
    hasher: foldhash::fast::FixedState,
}

impl FlowTable {
    #[inline]
    fn hash(&self, k: &Key) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(k)
    }

    #[inline]
    fn get(&self, k: &Key) -> Option<&Slot> {
        self.t.find(self.hash(k), |s| s.key == *k)
    }

    #[inline]
    fn get_mut(&mut self, k: &Key) -> Option<&mut Slot> {
        let h = self.hash(k);
        self.get_mut_hashed(h, k)
    }

    /// [`FlowTable::get`] with the key's [`FlowTable::hash`] given.
    #[inline]
    fn get_hashed(&self, h: u64, k: &Key) -> Option<&Slot> {
        self.t.find(h, |s| s.key == *k)
    }

    /// [`FlowTable::get_mut`] with the key's [`FlowTable::hash`] given.
    #[inline]
    fn get_mut_hashed(&mut self, h: u64, k: &Key) -> Option<&mut Slot> {
        self.t.find_mut(h, |s| s.key == *k)
    }

    fn contains_key(&self, k: &Key) -> bool {
        self.get(k).is_some()
    }

    fn remove(&mut self, k: &Key) -> Option<Slot> {
        let h = self.hash(k);
        self.t
            .find_entry(h, |s| s.key == *k)
            .ok()
            .map(|e| e.remove().0)
    }

    /// Puts `slot` in, in place of the slot of the same key if there is one (returned).
    fn insert(&mut self, slot: Slot) -> Option<Slot> {
        if let Some(old) = self.get_mut(&slot.key) {
            return Some(std::mem::replace(old, slot));
        }
        let h = self.hash(&slot.key);
        let FlowTable { t, hasher } = self;
        t.insert_unique(h, slot, |s| {
            std::hash::BuildHasher::hash_one(&*hasher, s.key)
        });
        None
    }

    fn len(&self) -> usize {
        self.t.len()
    }

    fn values(&self) -> impl Iterator<Item = &Slot> {
        self.t.iter()
    }
}

impl Served {
    /// Owes the counters of one more packet `data` served by entry `c` (paid in bulk:
    /// [`Executor::fast_pay`]).
    #[inline]
    fn count(&mut self, c: &Consolidated, data: &[u8]) {
        self.pending += 1;
        if !c.counts.byte_stats.is_empty() {
            let ip_len = u16::from_be_bytes([
                data.get(16).copied().unwrap_or(0),
                data.get(17).copied().unwrap_or(0),
            ]);
            self.pending_len += data.len() as u64;
            self.pending_ip_len += u64::from(ip_len);
        }
    }
}

impl Slot {
    fn new(key: Key, entry: Entry, (own, expiry): (Own, u64), last: u64) -> Slot {
        Slot {
            key,
            entry,
            last,
            expiry,
            own,
            st: Served {
                pending: 0,
                pending_len: 0,
                pending_ip_len: 0,
                owed: 0,
                owed_at: 0,
                seq: 0,
                epoch: u64::MAX,
                generation: 0,
                reap_at: 0,
            },
        }
    }
}

/// What one field looks like at the element being recorded, relative to the frame as it
/// arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// This value, whatever the packet held.
    Const(u128),
    /// The TTL, moved down by this many decrements.
    Ttl(u32),
}

/// The symbolic state of the packet being recorded.
#[derive(Debug, Default)]
struct Track {
    /// What each written field holds now.
    known: Vec<(Field, Known)>,
    ttl_decs: u32,
    recompute: bool,
    /// A plain write touched the IPv4 header: its checksum's validity is no longer known.
    csum_unknown: bool,
    trimmed: bool,
    ip_ops: u32,
    l4_ops: u32,
    rewrote: bool,
}

impl Track {
    /// A hash of everything translation reads from the state.
    fn fingerprint(&self) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = foldhash::fast::FixedState::with_seed(1).build_hasher();
        for (f, w) in &self.known {
            f.hash(&mut h);
            match w {
                Known::Const(v) => (0u8, *v).hash(&mut h),
                Known::Ttl(k) => (1u8, u128::from(*k)).hash(&mut h),
            }
        }
        (self.recompute, self.csum_unknown, self.trimmed).hash(&mut h);
        h.finish()
    }

    fn get(&self, f: Field) -> Option<Known> {
        self.known.iter().find(|(g, _)| *g == f).map(|(_, w)| *w)
    }
    fn set(&mut self, f: Field, w: Known) {
        match self.known.iter_mut().find(|(g, _)| *g == f) {
            Some(x) => x.1 = w,
            None => self.known.push((f, w)),
        }
    }
}

/// The counters before the recorded packet (its drops are kept as they happen:
/// `FastState::drops`).
struct Snapshot {
    arrivals: Vec<u64>,
    out_count: Vec<u64>,
    nf_counters: Vec<NfCounters>,
}

/// The guards of one model case.
#[derive(Debug, Clone)]
struct CaseGuards {
    /// The case's own tests.
    tests: Vec<Test>,
    /// The earlier cases, each negated (the packet is in none of them).
    negatives: Vec<Vec<Test>>,
    /// Whether the destination MAC needs a test.
    eth_dst: bool,
}

/// What a rewriter said about the packet recorded.
struct RewriterSaid {
    /// The mapping that rewrote it (index and direction).
    mapping: Option<(u32, Direction)>,
    /// The lifetime packets like it give the mapping (none: not steady).
    lifetime: Option<u64>,
    /// The mapping's version (an event check compares it).
    version: u32,
}

/// The recording in progress.
struct Recording {
    key: Key,
    entry_data: Vec<u8>,
    entry_offset: u32,
    depth: usize,
    created: u64,
    snap: Snapshot,
    t: Track,
    tests: Vec<Test>,
    negatives: Vec<Vec<Test>>,
    rewriters: Vec<RwRec>,
    states: Vec<StateCall>,
    stats: Vec<(u32, &'static str)>,
    byte_stats: Vec<(u32, &'static str, u16, bool)>,
    info: Option<PacketInfo>,
    refused: Option<&'static str>,
    /// The earliest expiry of what the entry depends on (ns).
    expiry: u64,
    /// The element being pushed: its model case, the packet before the push.
    pre: Option<Pre>,
}

struct Pre {
    case: Option<usize>,
    /// For a long model: the memo key, and what the memo holds for it.
    memo_key: Option<MemoKey>,
    memo: Option<Arc<Memo>>,
    /// Annotations of the packet as the element got it.
    annos: [u128; 5],
    data: Vec<u8>,
    head: i32,
    ip: Option<usize>,
    flow: Option<FlowInput>,
}

/// What recording a packet through a long model worked out, kept for the next packet with
/// the same values of the model's fields in the same symbolic state.
#[derive(Debug)]
struct Memo {
    case: Option<usize>,
    result: Result<CaseGuards, &'static str>,
}

/// What a memo entry holds for: the packet at the same element, with the same values of the
/// model's fields, in the same symbolic state, seen from the same place.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MemoKey {
    element: u32,
    /// The values of the model's fields.
    values: Vec<u128>,
    /// A fingerprint of the symbolic state ([`Track::fingerprint`]).
    state: u64,
    /// The view's head.
    head: i32,
    /// Whether the view's IPv4 header is the frame's.
    ip_ok: bool,
}

/// Most distinct shared entries kept for lookup ([`FastState::shared`]).
const MAX_SHARED: usize = 4096;

/// Models with more cases than this keep a memo (recording through them scans the cases).
const MEMO_AT: usize = 64;

/// The fast path's tables and counters (owned by the executor).
pub(super) struct FastState {
    opts: FastOptions,
    table: FlowTable,
    order: VecDeque<Key>,
    models: Vec<Option<Model>>,
    /// Per long model: the fields its cases test.
    model_fields: Vec<Option<Vec<Field>>>,
    memo: HashMap<MemoKey, Arc<Memo>, foldhash::fast::FixedState>,
    /// Buffers for the packet copies recording makes, reused.
    spare: Vec<Vec<u8>>,
    rec: Option<Box<Recording>>,
    pub(super) stats: FastStats,
    /// Element counters the fast path added (as `stats()` names).
    pub(super) derived: Vec<Vec<(&'static str, u64)>>,
    /// Drops while a packet is recorded (element, reason).
    pub(super) drops: Vec<(u32, &'static str)>,
    /// What the entries may assume of the rewriters between two rewriter steps.
    guards: Guards,
    /// Entries without a rewriter's mapping, by their full description: flows that took
    /// the same path share one (at most [`MAX_SHARED`] kept; then the lookup starts afresh).
    shared: HashMap<u64, Vec<Arc<Consolidated>>, foldhash::fast::FixedState>,
    /// Flows seen ([`Initial::Second`]): a fingerprint of the flow at a place its hash
    /// picks ([`super::flows::seen_again`]); a flow later at the same place takes it (so it
    /// stays bounded, and a flow forgotten or mistaken for another is only recorded a
    /// packet later or earlier).
    seen: Vec<u64>,
    /// The rewriter replays the entries owe.
    debts: Debts,
}

/// What is known of the chain's rewriters since the last step that could change them (a
/// naive packet reaching one, a replay checked per packet, a debt paid): kept for the
/// entries to check their rewriters against without asking them per packet.
#[derive(Debug, Default)]
struct Guards {
    /// The chain's rewriters (element indices).
    rewriters: Vec<u32>,
    /// Whether `reap_at` and `changes` are current.
    ok: bool,
    /// Counts how many times they were read: an entry that checked its rewriters under
    /// the same count need not check them again.
    generation: u64,
    /// Per element: when its rewriter next reaps (0: not known).
    reap_at: Vec<u64>,
    /// The sum of the rewriters' mapping changes.
    changes: u64,
}

impl Guards {
    /// Whether entry `c` (in `slot`) still holds for its rewriters at `now`: none of them
    /// is due to reap, and every mapping has its recorded version (so it holds the flow,
    /// and, as the entry's expiry was checked, has not expired). Then a served packet's
    /// replays can be owed: they would succeed and change only counts and expiries.
    #[inline]
    fn hold(
        &mut self,
        elements: &mut [Box<dyn elements::Element>],
        slot: &mut Served,
        (c, own): (&Consolidated, &Own),
        now: u64,
    ) -> bool {
        if !self.ok {
            let mut changes = 0u64;
            for &g in &self.rewriters {
                if let Some(rw) = elements[g as usize].stateful_flow() {
                    self.reap_at[g as usize] = rw.next_reap().unwrap_or(0);
                    changes = changes.wrapping_add(rw.changes());
                }
            }
            self.changes = changes;
            self.generation += 1;
            self.ok = true;
        }
        if slot.generation != self.generation {
            let mut until = u64::MAX;
            for r in &c.rewriters {
                until = until.min(self.reap_at[r.element as usize]);
            }
            if slot.epoch != self.changes {
                let same = c.rewriters.len() == own.rw().len()
                    && c.rewriters.iter().zip(own.rw()).all(|(r, m)| {
                        elements[r.element as usize]
                            .stateful_flow()
                            .is_some_and(|rw| rw.version(m.idx) == m.version)
                    });
                if !same {
                    return false;
                }
                slot.epoch = self.changes;
            }
            slot.reap_at = until;
            slot.generation = self.generation;
        }
        // A debt's count is bounded: at its bound the packet is replayed now.
        now < slot.reap_at && slot.owed < u32::MAX
    }
}

/// The entries that owe rewriter replays.
#[derive(Debug, Default)]
struct Debts {
    /// Their keys, each once.
    owing: Vec<Key>,
    /// The next owed packet's place in the order of all owed packets.
    seq: u64,
}

impl Debts {
    /// One more packet, at `now`, owed by the entry of flow `key` (in `slot`).
    #[inline]
    fn owe(&mut self, key: Key, slot: &mut Served, now: u64) {
        if slot.owed == 0 {
            self.owing.push(key);
        }
        slot.owed += 1;
        slot.owed_at = now;
        slot.seq = self.seq;
        self.seq += 1;
    }
}

const TCP: u128 = wire::IpProtocol::TCP as u128;

/// Reasons a packet is not recorded that say nothing about the flow's next packets (a
/// rewriter's mapping changing state on this one: a SYN, a first packet): no entry is kept,
/// the next packet is recorded again.
const TRANSIENT: &[&str] = &[
    "mapping-not-steady",
    "rewriter-no-mapping",
    "rewriters-disagree",
];

/// A packet's flow key and TCP flags, read once by [`Executor::fast_first`] for
/// [`Executor::fast_enter_keyed`].
pub(super) struct Entered {
    key: Key,
    flags: Option<u8>,
    /// The key's hash in the flow table ([`FlowTable::hash`]), computed once.
    hash: u64,
    /// The key's hash the seen-filter keeps ([`FastState::seen`]; 0 when not read).
    seen: u128,
}

fn key_of(entry: u32, data: &[u8]) -> Key {
    key_and_flags(entry, data).0
}

/// The flow key of a frame entering at `entry` ([`key_of`]) and its TCP flags (`None`
/// unless it is an IPv4 TCP frame), read in one pass.
#[inline(always)]
fn key_and_flags(entry: u32, data: &[u8]) -> (Key, Option<u8>) {
    let h = Headers::new(data, Some(14));
    let proto = h.value(Field::IpProto);
    let flags = h.value(Field::TcpFlags);
    let tcp_flags = (proto == TCP && h.value(Field::EtherType) == 0x0800).then_some(flags as u8);
    let vlan = if h.value(Field::HasVlan) == 1 {
        0x1_0000 | h.value(Field::VlanId) as u32
    } else {
        0
    };
    // TCP packets of one flow with and without payload, or with FIN/SYN/RST, are recorded
    // apart (a NAT's mapping treats them apart): data and pure ACKs both get an entry.
    let variant = if proto == TCP {
        let payload =
            h.value(Field::IpLen) > 4 * h.value(Field::IpIhl) + 4 * h.value(Field::TcpDataOff);
        (flags & 0x07) | (u128::from(payload) << 3)
    } else {
        0
    };
    let tuple = (variant << 112)
        | (h.value(Field::IpIhl) << 108)
        | (proto << 96)
        | (h.value(Field::IpSrc) << 64)
        | (h.value(Field::IpDst) << 32)
        | (h.value(Field::SrcPort) << 16)
        | h.value(Field::DstPort);
    (Key::new(entry, vlan, tuple), tcp_flags)
}

impl Key {
    fn new(entry: u32, vlan: u32, tuple: u128) -> Key {
        Key {
            entry,
            vlan,
            lo: tuple as u64,
            hi: (tuple >> 64) as u64,
        }
    }

    /// The tuple (packet kind, header length, protocol, addresses, ports).
    fn tuple(&self) -> u128 {
        (u128::from(self.hi) << 64) | u128::from(self.lo)
    }

    /// The key with the packet kind (TCP flags, payload or not) set to `variant`; 0: the
    /// flow itself, whatever its packets' kinds.
    fn with_variant(self, variant: u128) -> Key {
        let t = (self.tuple() & !(0xffff << 112)) | (variant << 112);
        Key::new(self.entry, self.vlan, t)
    }

    /// A hash of the flow (not of the packet kind), seeded with `seed`.
    fn flow_hash(self, seed: u64) -> u64 {
        use std::hash::BuildHasher;
        foldhash::fast::FixedState::with_seed(seed).hash_one(self.with_variant(0))
    }
}

/// A hash of the flow key of a frame entering at `entry` (for per-flow measurements).
pub(super) fn flow_hash(entry: u32, data: &[u8]) -> u64 {
    key_of(entry, data).flow_hash(0)
}

/// The 32-bit flow id of a key (never 0, which means unset), the same for every packet of
/// the flow whatever its TCP flags.
fn flow_id(key: &Key) -> u32 {
    (key.flow_hash(2) as u32) | 1
}

/// Fields every packet of a flow shares (the key is read the same way).
fn is_key(f: Field) -> bool {
    matches!(
        f,
        Field::IpIhl
            | Field::IpProto
            | Field::IpSrc
            | Field::IpDst
            | Field::SrcPort
            | Field::DstPort
            | Field::HasVlan
            | Field::VlanId
    )
}

/// One element-view test, translated to the frame as it arrived.
enum Translated {
    /// Holds for every packet of the recorded kind.
    True,
    /// Holds for none.
    False,
    /// A test on this field of the frame as it arrived.
    Keep(Field, FieldSet),
}

fn passes(tests: &[GetterTest], h: &Headers) -> bool {
    tests.iter().all(|(g, iv)| {
        let v = g.get(h);
        iv.iter().any(|&(lo, hi)| lo <= v && v <= hi)
    })
}

impl FastState {
    pub(super) fn new(opts: FastOptions, models: Vec<Option<Model>>) -> FastState {
        let n = models.len();
        let model_fields = models
            .iter()
            .map(|m| {
                m.as_ref().filter(|m| m.cases.len() > MEMO_AT).map(|m| {
                    let mut v: Vec<Field> = Vec::new();
                    for c in &m.cases {
                        for (f, _) in c.filter.fields() {
                            if !v.contains(&f) {
                                v.push(f);
                            }
                        }
                    }
                    v
                })
            })
            .collect();
        FastState {
            opts,
            table: FlowTable::default(),
            order: VecDeque::new(),
            models,
            model_fields,
            memo: HashMap::default(),
            spare: Vec::new(),
            rec: None,
            stats: FastStats::default(),
            derived: vec![Vec::new(); n],
            drops: Vec::new(),
            guards: Guards {
                reap_at: vec![0; n],
                ..Guards::default()
            },
            debts: Debts::default(),
            seen: Vec::new(),
            shared: HashMap::default(),
        }
    }

    /// Whether flow `key` was seen before ([`FastState::seen`]); if not, it is now (synth's
    /// seen-once filter, `flows::seen_again`, over the flow's hash).
    #[inline]
    fn seen(&mut self, key: &Key) -> bool {
        self.seen_hashed(u128::from(key.flow_hash(3)))
    }

    /// [`FastState::seen`] of the key whose hash is `h`.
    #[inline]
    fn seen_hashed(&mut self, h: u128) -> bool {
        if self.seen.is_empty() {
            self.seen = vec![0; super::flows::seen_slots(self.opts.max_flows)];
        }
        if super::flows::seen_again(&mut self.seen, h) {
            return true;
        }
        self.stats.first_seen += 1;
        false
    }

    fn refuse(&mut self, why: &'static str) {
        *self.stats.refused.entry(why).or_default() += 1;
    }
}

fn add_stat(v: &mut Vec<(&'static str, u64)>, name: &'static str, n: u64) {
    match v.iter_mut().find(|(x, _)| *x == name) {
        Some((_, m)) => *m += n,
        None => v.push((name, n)),
    }
}

/// The checksum operands a rewrite from `cur` to `new` adds to the IPv4 and transport
/// checksums, in `rewrite_ipv4`'s order, folded.
pub(super) fn rewrite_ops(cur: [u128; 4], new: &elements::rewriter::FlowId) -> (u32, u32) {
    let (os, od) = (cur[0] as u32, cur[2] as u32);
    let (ns, nd) = (u32::from(new.saddr), u32::from(new.daddr));
    let (mut ip, mut l4) = (0u32, 0u32);
    if os != ns {
        ip += operands32(os, ns);
        l4 += operands32(os, ns);
    }
    if od != nd {
        ip += operands32(od, nd);
        l4 += operands32(od, nd);
    }
    if cur[1] as u16 != new.sport {
        l4 += operands16(cur[1] as u16, new.sport);
    }
    if cur[3] as u16 != new.dport {
        l4 += operands16(cur[3] as u16, new.dport);
    }
    (u32::from(fold(ip)), u32::from(fold(l4)))
}

impl Executor {
    /// Turns on the per-flow fast path (`--mode fastpath`): see the `fast` module.
    pub fn enable_fastpath(&mut self, opts: FastOptions) {
        // A table replaced pays what it owes first.
        self.fast_settle();
        let models = self.elements.iter().map(|e| e.model()).collect();
        let mut fs = FastState::new(opts, models);
        fs.guards.rewriters = (0..self.elements.len() as u32)
            .filter(|&g| self.elements[g as usize].stateful_flow().is_some())
            .collect();
        self.fast = Some(Box::new(fs));
        // A naive step into a rewriter pays the entries' owed replays first
        // (`flush_flows`, which calls `fast_settle`).
        self.synth.is_rewriter = self
            .elements
            .iter_mut()
            .map(|e| e.stateful_flow().is_some())
            .collect();
        self.mode_hooks = true;
    }

    /// What the fast path did so far (`None` unless it is on).
    pub fn fast_stats(&self) -> Option<FastStats> {
        self.fast.as_ref().map(|f| {
            let mut s = f.stats.clone();
            s.entries = f.table.len() as u64;
            s
        })
    }

    /// A packet entering the chain at `el`: served by the fast path (`None`), or handed back
    /// to walk the chain (recorded or not).
    pub(super) fn fast_enter(&mut self, el: u32, p: Packet) -> Option<Packet> {
        if self.fast.is_none() {
            return Some(p);
        }
        let (key, flags) = key_and_flags(el, p.data());
        let hash = self.fast.as_deref().map_or(0, |fp| fp.table.hash(&key));
        self.fast_enter_keyed(
            p,
            Entered {
                key,
                flags,
                hash,
                seen: 0,
            },
        )
    }

    /// Whether `p`, entering at `el`, is the first packet of its flow that the fast path
    /// lets walk the chain unrecorded (no entry, not closing, and the seen-filter had not
    /// noted it: it is now): then `Ok`, with its flow id set as [`Executor::fast_enter`]
    /// sets it, and the packet must run naive. Else what `fast_enter_keyed` needs.
    pub(super) fn fast_first(&mut self, p: &mut Packet, e: Entered) -> Result<(), Entered> {
        let first = e.flags.is_none_or(|f| f & 0x05 == 0)
            && self.fast.as_deref_mut().is_some_and(|fp| {
                fp.opts.initial == Initial::Second
                    && fp.table.get_hashed(e.hash, &e.key).is_none()
                    && !fp.seen_hashed(e.seen)
            });
        if !first {
            return Err(e);
        }
        p.meta.flow_id = flow_id(&e.key);
        Ok(())
    }

    /// The fast path's reading of frame `data` entering at `el` (its flow key and flags),
    /// and the seen-filter's slot for it (to be read ahead: see `flows::seen_slot`).
    pub(super) fn fast_key(&self, el: u32, data: &[u8]) -> (Entered, usize) {
        let (key, flags) = key_and_flags(el, data);
        let seen = u128::from(key.flow_hash(3));
        let (slot, hash) = self.fast.as_deref().map_or((0, 0), |fp| {
            (super::flows::seen_slot(&fp.seen, seen), fp.table.hash(&key))
        });
        (
            Entered {
                key,
                flags,
                hash,
                seen,
            },
            slot,
        )
    }

    /// Reads the flow table where `e`'s entry is (or would be), so that a batch's misses
    /// overlap when its keys are read ahead ([`Executor::run_firsts`]); the value means
    /// nothing.
    #[inline]
    pub(super) fn fast_touch(&self, e: &Entered) -> u64 {
        self.fast
            .as_deref()
            .and_then(|fp| fp.table.get_hashed(e.hash, &e.key))
            .map_or(0, |s| s.last)
    }

    /// The fast path's seen-filter (empty before its first use, or without the fast path).
    pub(super) fn fast_seen(&self) -> &[u64] {
        self.fast.as_deref().map_or(&[], |fp| &fp.seen)
    }

    /// [`Executor::fast_enter`] with the packet's flow key and flags read.
    #[inline(always)]
    pub(super) fn fast_enter_keyed(
        &mut self,
        mut p: Packet,
        Entered {
            key, flags, hash, ..
        }: Entered,
    ) -> Option<Packet> {
        let now = self.cx.now.0;
        let Executor { fast, elements, .. } = self;
        let Some(fp) = fast.as_deref_mut() else {
            return Some(p);
        };
        // The flow id stays with the packet (and what it becomes) whatever NATs do.
        p.meta.flow_id = flow_id(&key);
        let closing = flags.is_some_and(|f| f & 0x05 != 0);
        if closing {
            // FIN or RST: every entry of the flow goes (the NFs keep their own state).
            let mut any = false;
            for v in 0..16u128 {
                any |= self.fast_remove(&key.with_variant(v));
            }
            if let Some(fp) = self.fast.as_deref_mut() {
                fp.stats.closed += u64::from(any);
            }
            return Some(p);
        }
        let FastState {
            table,
            opts,
            stats,
            guards,
            debts,
            ..
        } = fp;
        let found = table.get_mut_hashed(hash, &key);
        let known = found.is_some();
        if let Some(slot) = found {
            if now.saturating_sub(slot.last) > opts.idle_ns || now >= slot.expiry {
                stats.expired += 1;
                self.fast_remove(&key);
            } else {
                slot.last = now;
                let Slot { entry, st, own, .. } = slot;
                match &*entry {
                    Entry::Refused(why) => {
                        let why = why.0;
                        *stats.refused.entry(why).or_default() += 1;
                        return Some(p);
                    }
                    Entry::Fast(arc) => {
                        let c: &Consolidated = arc;
                        let h = Headers::new(p.data(), Some(14));
                        // What the rewriters would say of the packet, when every one of
                        // them accepts it as it accepted the recorded one.
                        let said = match c.info {
                            Some(_) => super::flows::fast_info(p.data()),
                            None => None,
                        };
                        let info_ok = c.info.is_none_or(|i| {
                            said == Some(i) || {
                                let fi = super::flow_input(p.data(), false);
                                fi.is_some_and(|fi| {
                                    fi.info.tcp_flags & 0x07 == i.tcp_flags
                                        && fi.info.has_payload == i.has_payload
                                })
                            }
                        });
                        let ranges_ok = match c.quick.pass(&h) {
                            Some(ok) => ok,
                            None => ranges_pass(&c.ranges, &h),
                        };
                        if !info_ok
                            || !ranges_ok
                            || !(c.tests.is_empty() || passes(&c.tests, &h))
                            || c.negatives.iter().any(|n| passes(n, &h))
                        {
                            // The packet is unlike the recorded one: it walks the chain and
                            // is recorded in its place (the latest packet defines the entry).
                            stats.guard_misses += 1;
                            self.fast_remove(&key);
                            return self.fast_record(key, flags, p);
                        }
                        let parallel = opts.parallel;
                        // The rewriters' replays are owed when the entry is sure to hold
                        // for them (paid in bulk before a rewriter is next read); else they
                        // are checked and replayed now, after the debts are paid.
                        let owed = !c.rewriters.is_empty()
                            && said.is_some()
                            && said == c.info
                            && guards.hold(elements, st, (c, own), now);
                        if (owed || c.rewriters.is_empty()) && c.states.is_empty() && !parallel {
                            // No event check can fail, nothing runs per packet: the packet
                            // is served (its counters and replays owed) by the header
                            // action.
                            st.count(c, p.data());
                            if owed {
                                debts.owe(key, st, now);
                            }
                            stats.hits += 1;
                            let end = c.finish_on(own, &mut p);
                            self.fast_end_packet(end, p);
                            return None;
                        }
                        let c = Arc::clone(arc);
                        // The flow's own values, apart from the table (a replay checked
                        // here may change it).
                        let own = Own {
                            rw: own.rw.clone(),
                            ..*own
                        };
                        if !owed && !c.rewriters.is_empty() {
                            self.fast_settle();
                        }
                        // Events: every check before any state function runs.
                        if self.fast_checks((&c, &own), &mut p, owed) {
                            self.fast_served(&key, &c, p.data(), owed);
                            self.fast_apply((&c, &own), p, owed);
                            if let Some(fp) = self.fast.as_deref_mut() {
                                fp.stats.hits += 1;
                            }
                            return None;
                        }
                        if let Some(fp) = self.fast.as_deref_mut() {
                            fp.stats.events += 1;
                        }
                        self.fast_remove(&key);
                    }
                }
            }
        }
        if !known {
            if let Some(fp) = self.fast.as_deref_mut() {
                if fp.opts.initial == Initial::Second && !fp.seen(&key) {
                    // A flow's first packet walks the chain unrecorded.
                    return Some(p);
                }
            }
        }
        self.fast_record(key, flags, p)
    }

    /// Counts packet `data` as served by flow `key`'s entry `c` (its counters are owed),
    /// and with `owed` its rewriter replays too (after [`Guards::hold`] and the entry's
    /// event checks passed).
    fn fast_served(&mut self, key: &Key, c: &Consolidated, data: &[u8], owed: bool) {
        let now = self.cx.now.0;
        let Some(fp) = self.fast.as_deref_mut() else {
            return;
        };
        if let Some(slot) = fp.table.get_mut(key) {
            slot.st.count(c, data);
            if owed {
                fp.debts.owe(*key, &mut slot.st, now);
            }
        }
    }

    /// Records `p` (the packet of flow `key` with TCP flags `flags`) if it may be recorded.
    fn fast_record(&mut self, key: Key, flags: Option<u8>, p: Packet) -> Option<Packet> {
        let Some(fp) = self.fast.as_deref_mut() else {
            return Some(p);
        };
        // FIN and RST end the flow; a SYN does not repeat (its entry would serve only
        // retransmissions): those packets are never recorded.
        let mut record = flags.is_none_or(|f| f & 0x07 == 0);
        if fp.opts.initial == Initial::AfterHandshake {
            if let Some(f) = flags {
                if f & 0x02 != 0 || f & 0x10 == 0 {
                    record = false;
                }
            }
        }
        if !record {
            return Some(p);
        }
        // Start recording.
        fp.stats.recorded += 1;

        fp.rec = Some(Box::new(Recording {
            key,
            entry_data: p.data().to_vec(),
            entry_offset: p.data_offset(),
            depth: self.stack.len(),
            created: self.counts.chain_created
                + self
                    .counts
                    .nf_counters
                    .iter()
                    .map(|c| c.created)
                    .sum::<u64>(),
            snap: Snapshot {
                arrivals: self.counts.arrivals.clone(),
                out_count: self.counts.out_count.clone(),
                nf_counters: self.counts.nf_counters.clone(),
            },
            t: Track::default(),
            tests: Vec::new(),
            negatives: Vec::new(),
            rewriters: Vec::new(),
            states: Vec::new(),
            stats: Vec::new(),
            byte_stats: Vec::new(),
            info: None,
            refused: None,
            expiry: u64::MAX,
            pre: None,
        }));
        self.cx.recorder.active = true;
        self.cx.recorder.expiry = None;
        fp.drops.clear();
        Some(p)
    }

    /// Pays the rewriter replays the entries owe (`StatefulFlow::replay_n`, one call per
    /// entry and rewriter), in the order of each entry's last owed packet, as if each packet
    /// had been replayed when it was served. Called before anything reads or changes a
    /// rewriter's table (`flush_flows`: a naive step into a rewriter, a state dump, the end
    /// of a run), before a replay checked per packet, and before an owing entry goes.
    pub(super) fn fast_settle(&mut self) {
        let Executor { fast, elements, .. } = self;
        let Some(fp) = fast.as_deref_mut() else {
            return;
        };
        // The rewriters are about to be read or changed: what was cached of them is stale.
        fp.guards.ok = false;
        if fp.debts.owing.is_empty() {
            return;
        }
        let mut owing = std::mem::take(&mut fp.debts.owing);
        if owing.len() > 1 {
            let table = &fp.table;
            owing.sort_by_cached_key(|k| table.get(k).map_or(0, |s| s.st.seq));
        }
        for k in owing.drain(..) {
            let Some(slot) = fp.table.get_mut(&k) else {
                continue;
            };
            let n = std::mem::take(&mut slot.st.owed);
            let (Entry::Fast(c), true) = (&slot.entry, n > 0) else {
                continue;
            };
            let Some(info) = c.info else { continue };
            for (r, m) in c.rewriters.iter().zip(slot.own.rw()) {
                if let Some(rw) = elements[r.element as usize].stateful_flow() {
                    rw.replay_n(m.idx, m.dir, info, slot.st.owed_at, n);
                }
            }
        }
        fp.debts.owing = owing;
    }

    /// Removes flow `key`'s entry, paying what it owes; whether there was one.
    fn fast_remove(&mut self, key: &Key) -> bool {
        let Some(fp) = self.fast.as_mut() else {
            return false;
        };
        if fp.table.get(key).is_some_and(|s| s.st.owed > 0) {
            // Its debt is paid with every other (in order) before it goes.
            self.fast_settle();
        }
        let Some(fp) = self.fast.as_mut() else {
            return false;
        };
        match fp.table.remove(key) {
            Some(slot) => {
                if let Entry::Fast(c) = &slot.entry {
                    self.fast_pay(c, &slot);
                }
                true
            }
            None => false,
        }
    }

    /// Adds to the counters what the packets entry `c` (in `slot`) served since the last
    /// payment did.
    fn fast_pay(&mut self, c: &Consolidated, slot: &Slot) {
        let (n, len, ip_len) = (slot.st.pending, slot.st.pending_len, slot.st.pending_ip_len);
        if n == 0 {
            return;
        }
        let Executor {
            fast: Some(fp),
            counts:
                Counters {
                    arrivals,
                    out_count,
                    drops,
                    nf_counters,
                    ..
                },
            ..
        } = self
        else {
            return;
        };
        c.counts.add(
            n,
            (len, ip_len),
            arrivals,
            out_count,
            drops,
            nf_counters,
            &mut fp.derived,
        );
    }

    /// Adds what the live entries owe to copies of the counters (for a summary).
    pub(super) fn fast_owed(
        &self,
        arrivals: &mut [u64],
        out: &mut [u64],
        drops: &mut [Vec<(&'static str, u64)>],
        nfs: &mut [NfCounters],
        stats: &mut [Vec<(&'static str, u64)>],
    ) {
        let Some(fp) = self.fast.as_ref() else { return };
        for (g, v) in fp.derived.iter().enumerate() {
            for (r, n) in v {
                add_stat(&mut stats[g], r, *n);
            }
        }
        for slot in fp.table.values() {
            if let Entry::Fast(c) = &slot.entry {
                let n = slot.st.pending;
                if n > 0 {
                    let bytes = (slot.st.pending_len, slot.st.pending_ip_len);
                    c.counts.add(n, bytes, arrivals, out, drops, nfs, stats);
                }
            }
        }
    }

    /// Runs the state functions of `c` in two halves on two cores (earlier NFs here, later
    /// NFs on the pool), when the payload accesses allow it; `false` (nothing run) when they
    /// do not or when the flow's state functions are all in one NF.
    fn fast_states_parallel(&mut self, c: &Consolidated, p: &mut Packet) -> bool {
        let states = &c.states;
        let (Some(first), Some(last)) = (states.first(), states.last()) else {
            return false;
        };
        if first.nf == last.nf {
            return false;
        }
        // Split at the NF boundary nearest the middle.
        let mid = states.len() / 2;
        let cuts = (1..states.len()).filter(|&i| states[i].nf != states[i - 1].nf);
        let Some(k) = cuts.min_by_key(|&i| i.abs_diff(mid)) else {
            return false;
        };
        let (a, b) = states.split_at(k);
        let a_writes = a.iter().any(|s| s.access == Access::Write);
        let b_touches = b.iter().any(|s| s.access != Access::Ignore);
        let b_writes = b.iter().any(|s| s.access == Access::Write);
        if a_writes && b_touches {
            return false;
        }
        let mut copy = p.duplicate();
        let (ts, index) = (p.meta.timestamp, p.meta.input_index);
        let now = self.cx.now;
        type Els<'e> = Vec<(u32, &'e mut Box<dyn elements::Element>)>;
        let mut a_el: Els = Vec::new();
        let mut b_el: Els = Vec::new();
        for (g, e) in self.elements.iter_mut().enumerate() {
            let g = g as u32;
            if a.iter().any(|s| s.element == g) {
                a_el.push((g, e));
            } else if b.iter().any(|s| s.element == g) {
                b_el.push((g, e));
            }
        }
        let run =
            |calls: &[StateCall], els: &mut Els, q: &mut Packet, cx: &mut elements::Context| {
                for s in calls {
                    let Some((_, el)) = els.iter_mut().find(|(g, _)| *g == s.element) else {
                        continue;
                    };
                    let (data, ip) = view_of(q, s);
                    let mut view = ReplayView {
                        data,
                        ip,
                        now: ts,
                        clock: now,
                        input_index: index,
                    };
                    el.replay(s.token, &mut view, cx);
                }
            };
        let cx = &mut self.cx;
        let mut cx_b = elements::Context::new(now);
        rayon::join(
            || run(a, &mut a_el, p, cx),
            || run(b, &mut b_el, &mut copy, &mut cx_b),
        );
        if b_writes {
            p.data_mut().copy_from_slice(copy.data());
        }
        true
    }

    /// Runs every event check of entry `c` for packet `p` (as it arrived).
    /// `owed`: the rewriters' replays are owed ([`Executor::fast_owe`] checked them).
    fn fast_checks(&mut self, (c, own): (&Consolidated, &Own), p: &mut Packet, owed: bool) -> bool {
        let now = self.cx.now.0;
        let per_packet = if owed { &[][..] } else { &c.rewriters[..] };
        if per_packet.len() != own.rw().len() && !owed {
            return false;
        }
        if !per_packet.is_empty() {
            // The rewriters may reap or change here.
            if let Some(fp) = self.fast.as_deref_mut() {
                fp.guards.ok = false;
            }
        }
        for (r, m) in per_packet.iter().zip(own.rw()) {
            let Some(mut input) = super::flow_input(p.data(), r.trimmed) else {
                return false;
            };
            input.flow = m.view;
            let Some(rw) = self.elements[r.element as usize].stateful_flow() else {
                return false;
            };
            if !rw.check_replay(&input, now, m.idx, m.dir, m.version) {
                return false;
            }
        }
        let ts = p.meta.timestamp;
        let index = p.meta.input_index;
        for s in &c.states {
            let (data, ip) = view_of(p, s);
            let view = ReplayView {
                data,
                ip,
                now: ts,
                clock: self.cx.now,
                input_index: index,
            };
            if !self.elements[s.element as usize].check(s.token, &view) {
                return false;
            }
        }
        true
    }

    /// Serves `p` from entry `c`: state functions, counters, the header action, the end.
    /// `owed`: the rewriters' replays are owed, not made here.
    fn fast_apply(&mut self, (c, own): (&Consolidated, &Own), mut p: Packet, owed: bool) {
        let now = self.cx.now.0;
        let per_packet = if owed { &[][..] } else { &c.rewriters[..] };
        for (r, m) in per_packet.iter().zip(own.rw()) {
            if let Some(mut input) = super::flow_input(p.data(), r.trimmed) {
                input.flow = m.view;
                if let Some(rw) = self.elements[r.element as usize].stateful_flow() {
                    rw.replay(&input, now, m.idx, m.dir);
                }
            }
        }
        let parallel = self.fast.as_ref().is_some_and(|f| f.opts.parallel);
        if !(parallel && self.fast_states_parallel(c, &mut p)) {
            let (ts, clock) = (p.meta.timestamp, self.cx.now);
            let index = p.meta.input_index;
            for s in &c.states {
                let (data, ip) = view_of(&mut p, s);
                let mut view = ReplayView {
                    data,
                    ip,
                    now: ts,
                    clock,
                    input_index: index,
                };
                self.elements[s.element as usize].replay(s.token, &mut view, &mut self.cx);
            }
        }
        let end = c.finish_on(own, &mut p);
        self.fast_end_packet(end, p);
    }

    /// A packet served by an entry (its header action applied) leaves by exit element
    /// `end`, or is dropped (`None`).
    #[inline]
    fn fast_end_packet(&mut self, end: Option<u32>, p: Packet) {
        let Some(el) = end else {
            self.recycle(p);
            return;
        };
        let info = self.info[el as usize];
        if let Kind::Exit(x) = info.kind {
            self.counts.nf_counters[info.nf as usize].output += 1;
            self.exit(x as usize, p);
        } else {
            self.recycle(p);
        }
    }

    /// Before element `el` is pushed `p` on `port` while recording.
    #[cold]
    pub(super) fn fast_pre(&mut self, el: u32, p: &Packet) {
        let Some(fp) = self.fast.as_mut() else { return };
        let Some(rec) = fp.rec.as_mut() else { return };
        let head = p.data_offset() as i32 - rec.entry_offset as i32;
        let model = fp.models.get(el as usize).and_then(|m| m.as_ref());
        let mut ip = p.network_offset_in_data();
        let annos = [
            u128::from(p.meta.ingress),
            u128::from(p.meta.paint),
            u128::from(u32::from(p.meta.dst_ip)),
            u128::from(p.meta.fix_ip_src),
            model::packet_type_value(p.meta.packet_type),
        ];
        if let Some(m) = model {
            ip = model::ip_offset(p, m.ip_at);
        }
        let h = Headers::new(p.data(), ip);
        let ip_ok = ip.map(|o| o as i32 + head) == Some(14);
        let memo_key = fp
            .model_fields
            .get(el as usize)
            .and_then(|f| f.as_ref())
            .map(|fields| {
                let vals = fields.iter().map(|f| value_with(&h, &annos, *f)).collect();
                MemoKey {
                    element: el,
                    values: vals,
                    state: rec.t.fingerprint(),
                    head,
                    ip_ok,
                }
            });
        let memo = memo_key.as_ref().and_then(|k| fp.memo.get(k)).cloned();
        let case = match &memo {
            Some(m) => m.case,
            None => model.and_then(|m| {
                m.cases.iter().position(|c| {
                    c.filter
                        .fields()
                        .all(|(f, set)| set.contains(value_with(&h, &annos, f)))
                })
            }),
        };
        let flow = p
            .network_offset_in_data()
            .and_then(|o| p.data().get(o..))
            .and_then(FlowInput::parse);
        rec.pre = Some(Pre {
            case,
            memo_key,
            memo,
            annos,
            data: {
                let mut d = fp.spare.pop().unwrap_or_default();
                d.clear();
                d.extend_from_slice(p.data());
                d
            },
            head,
            ip,
            flow,
        });
        self.cx.recorder.begin();
    }

    /// After element `el` was pushed while recording, with verdict `v`.
    #[cold]
    pub(super) fn fast_post(&mut self, el: u32, v: &Verdict) {
        let step = self.cx.recorder.take();
        let now = self.cx.now.0;
        let Some(pre) = self
            .fast
            .as_mut()
            .and_then(|fp| fp.rec.as_mut())
            .and_then(|r| r.pre.take())
        else {
            return;
        };
        let class = self.elements[el as usize].class_name();
        let rw_last = self.elements[el as usize].stateful_flow().map(|rw| {
            let last = rw.last_mapping();
            let life = match (last, pre.flow) {
                // A segment cut before its checksum's end is rewritten apart from the
                // others of its flow (its ports may stay): it is not recorded.
                (Some(_), Some(f)) if f.short_tcp() => None,
                (Some((i, d)), Some(f)) => rw.steady(i, d, f.info),
                _ => None,
            };
            RewriterSaid {
                mapping: last,
                lifetime: life,
                version: last.map_or(0, |(i, _)| rw.version(i)),
            }
        });
        let Some(fp) = self.fast.as_mut() else { return };
        let FastState {
            rec,
            models,
            memo,
            spare,
            ..
        } = &mut **fp;
        if let Some(rec) = rec.as_mut() {
            if rec.refused.is_none() {
                if let Err(why) =
                    record_step(rec, el, class, models, &pre, step, v, rw_last, now, memo)
                {
                    rec.refused = Some(why);
                }
            }
        }
        if spare.len() < 64 {
            spare.push(pre.data);
        }
    }

    /// The recorded packet leaves the chain at exit element `el` (`Some`) or is dropped or
    /// kept (`None`), with `out` the packet as it leaves: the entry is consolidated.
    #[cold]
    pub(super) fn fast_end(&mut self, el: Option<u32>, out: Option<&Packet>) {
        self.cx.recorder.active = false;
        let expiry = self.cx.recorder.expiry.take().map(|t| t.0);
        let created = self.counts.chain_created
            + self
                .counts
                .nf_counters
                .iter()
                .map(|c| c.created)
                .sum::<u64>();
        let depth = self.stack.len();
        let now = self.cx.now.0;
        let Some(fp) = self.fast.as_mut() else { return };
        let Some(rec) = fp.rec.take() else { return };
        let mut why = rec.refused;
        if why.is_none() && (created != rec.created || depth != rec.depth) {
            why = Some("copies");
        }
        if why.is_none() && el.is_none() && out.is_some() {
            why = Some("held");
        }
        let rec = *rec;
        if let Some(w) = why.filter(|w| TRANSIENT.contains(w)) {
            // This packet could not be recorded, the next one of the flow may be.
            if let Some(fp) = self.fast.as_deref_mut() {
                fp.refuse(w);
            }
            return;
        }
        let refused = |w| (Entry::Refused(Box::new(Why(w))), (Own::default(), u64::MAX));
        let (entry, own) = match why {
            Some(w) => refused(w),
            None => match consolidate(&rec, el, out, expiry, self) {
                Ok((Template::Shared(a), own)) => {
                    if let Some(fp) = self.fast.as_deref_mut() {
                        fp.stats.shared += 1;
                    }
                    (Entry::Fast(a), own)
                }
                Ok((Template::New(c), own)) => (Entry::Fast(self.fast_shared(*c)), own),
                Err(w) => refused(w),
            },
        };
        let Some(fp) = self.fast.as_deref_mut() else {
            return;
        };
        match &entry {
            Entry::Fast(_) => fp.stats.consolidated += 1,
            Entry::Refused(w) => fp.refuse(w.0),
        }
        self.fast_insert(rec.key, entry, own, now);
    }

    /// The template already made for another flow that equals `c` (flows that took the same
    /// path share one: a hit then reads a template other flows keep in cache, and its own
    /// slot). What differs between flows of one path through rewriters (their mappings, the
    /// tuple values and checksum operands these give, the expiry) is the flow's [`Own`], not
    /// part of the template.
    fn fast_find_shared(&self, c: &Consolidated) -> Option<Arc<Consolidated>> {
        let fp = self.fast.as_deref()?;
        let v = fp.shared.get(&c.template_hash())?;
        v.iter().find(|a| ***a == *c).cloned()
    }

    /// Keeps new template `c` (compiled) for the flows that take its path after this one
    /// ([`Executor::fast_find_shared`]).
    fn fast_shared(&mut self, c: Consolidated) -> Arc<Consolidated> {
        let Some(fp) = self.fast.as_deref_mut() else {
            return Arc::new(c);
        };
        let h = c.template_hash();
        if fp.shared.len() >= MAX_SHARED {
            fp.shared.clear();
        }
        let a = Arc::new(c);
        fp.shared.entry(h).or_default().push(Arc::clone(&a));
        a
    }

    /// Puts `entry` in the table as flow `key`'s, evicting the oldest entry when the table
    /// is full (counted) and paying what a replaced entry owes.
    fn fast_insert(&mut self, key: Key, entry: Entry, own: (Own, u64), now: u64) {
        let Some(fp) = self.fast.as_deref_mut() else {
            return;
        };
        if fp.table.len() >= fp.opts.max_flows {
            while let Some(k) = self.fast.as_mut().and_then(|f| f.order.pop_front()) {
                if self.fast_remove(&k) {
                    if let Some(fp) = self.fast.as_deref_mut() {
                        fp.stats.evictions += 1;
                    }
                    break;
                }
            }
        }
        if self
            .fast
            .as_ref()
            .and_then(|f| f.table.get(&key))
            .is_some_and(|s| s.st.owed > 0)
        {
            // The entry replaced pays what it owes (with every other, in order).
            self.fast_settle();
        }
        let Some(fp) = self.fast.as_deref_mut() else {
            return;
        };
        if fp.table.insert(Slot::new(key, entry, own, now)).is_none() {
            fp.order.push_back(key);
            if fp.order.len() > 2 * fp.opts.max_flows {
                // Keys of removed entries linger in the eviction order: drop them.
                let table = &fp.table;
                let mut seen = std::collections::HashSet::new();
                let mut kept: VecDeque<Key> = fp
                    .order
                    .iter()
                    .rev()
                    .copied()
                    .filter(|k| table.contains_key(k) && seen.insert(*k))
                    .collect();
                kept.make_contiguous().reverse();
                fp.order = kept;
            }
        }
    }
}

/// The data a state function sees: from the element's view start, cut at the IPv4 length
/// where the element saw it cut.
fn view_of<'a>(p: &'a mut Packet, s: &StateCall) -> (&'a mut [u8], Option<usize>) {
    let d = p.data_mut();
    let end = if s.trimmed {
        let ip_len = usize::from(u16::from_be_bytes([
            d.get(16).copied().unwrap_or(0),
            d.get(17).copied().unwrap_or(0),
        ]));
        (14 + ip_len).min(d.len())
    } else {
        d.len()
    };
    let start = usize::from(s.head).min(end);
    (&mut d[start..end], s.ip.map(usize::from))
}

/// Translates an element-view filter into tests on the frame as it arrived: `Ok(None)` when
/// no packet of the flow can match it.
fn translate(
    t: &Track,
    filter: &Filter,
    head: i32,
    ip_ok: bool,
    actual: &dyn Fn(Field) -> u128,
    entry: &Headers,
) -> Result<Option<Vec<Test>>, &'static str> {
    // A quick look first: a test on a field every packet of the flow shares, which the
    // flow's value fails, rules the filter out (most rules of a long list, for one flow).
    if ip_ok {
        for (f, s) in filter.fields() {
            let fixed = match t.get(f) {
                Some(Known::Const(v)) => Some(v),
                Some(Known::Ttl(_)) => None,
                None if is_key(f) && f.group() != Group::Ethernet => Some(entry.value_of(f)),
                None => None,
            };
            if fixed.is_some_and(|v| !s.contains(v)) {
                return Ok(None);
            }
        }
    }
    let mut out: Vec<Test> = Vec::new();
    for (f, s) in filter.fields() {
        let tr = translate_one(t, f, s, head, ip_ok, actual, entry)?;
        match tr {
            Translated::True => {}
            Translated::False => return Ok(None),
            Translated::Keep(g, set) => {
                let iv: Vec<(u128, u128)> = set.intervals().collect();
                match out.iter_mut().find(|(h, _)| *h == g) {
                    Some((_, old)) => {
                        let a = FieldSet::from_intervals(old.iter().copied());
                        let b = FieldSet::from_intervals(iv);
                        let c = a.intersection(&b);
                        if c.is_empty() {
                            return Ok(None);
                        }
                        *old = c.intervals().collect();
                    }
                    None => out.push((g, iv)),
                }
            }
        }
    }
    Ok(Some(out))
}

fn translate_one(
    t: &Track,
    f: Field,
    s: &FieldSet,
    head: i32,
    ip_ok: bool,
    actual: &dyn Fn(Field) -> u128,
    entry: &Headers,
) -> Result<Translated, &'static str> {
    let decide = |v: u128| {
        if s.contains(v) {
            Translated::True
        } else {
            Translated::False
        }
    };
    if f.group() == Group::Annotation {
        // Annotations are set along the path from the flow's constant fields (or, for the
        // packet type, from the destination MAC, which the caller guards).
        return Ok(decide(actual(f)));
    }
    if f == Field::FrameLen {
        if t.trimmed {
            return Err("frame-length-after-trim");
        }
        return Ok(Translated::Keep(
            Field::FrameLen,
            s.shift(i128::from(head), 16),
        ));
    }
    if f.group() == Group::Ethernet {
        if head != 0 {
            return Err("ethernet-moved");
        }
        if let Some(Known::Const(v)) = t.get(f) {
            return Ok(decide(v));
        }
        if is_key(f) {
            return Ok(decide(entry.value_of(f)));
        }
        return Ok(Translated::Keep(f, s.clone()));
    }
    if let Field::Raw { offset, len } = f {
        let off = i32::from(offset) + head;
        if off < 0 || off > i32::from(u16::MAX) {
            return Err("raw-moved");
        }
        let (o, l) = (off as usize, usize::from(len));
        let hl = entry.hl.max(20);
        for (g, _) in &t.known {
            if let Some((a, n)) = frame_location(*g, hl) {
                if a < o + l && o < a + n {
                    return Err("raw-overlaps-write");
                }
            }
        }
        if (t.rewrote || t.ttl_decs > 0 || t.recompute) && o < 14 + 60 + 20 {
            return Err("raw-overlaps-checksum");
        }
        return Ok(Translated::Keep(
            Field::Raw {
                offset: off as u16,
                len,
            },
            s.clone(),
        ));
    }
    if !ip_ok {
        return Err("ip-header-moved");
    }
    match f {
        Field::IpChecksumOk => {
            if t.recompute {
                return Ok(decide(1));
            }
            if t.csum_unknown {
                return Err("checksum-unknown");
            }
            return Ok(Translated::Keep(f, s.clone()));
        }
        Field::IpLenOk | Field::IpAvail | Field::L4Avail if t.trimmed => {
            if t.get(Field::IpLen).is_some() {
                return Err("length-written");
            }
            return Ok(match f {
                Field::IpLenOk => decide(1),
                Field::IpAvail => Translated::Keep(Field::IpLen, s.clone()),
                _ => Translated::Keep(Field::L4Len, s.clone()),
            });
        }
        _ => {}
    }
    match t.get(f) {
        Some(Known::Const(v)) => return Ok(decide(v)),
        Some(Known::Ttl(k)) => return Ok(Translated::Keep(f, s.shift(i128::from(k), 8))),
        None => {}
    }
    let derived_from_written = match f {
        Field::IpLenOk | Field::L4Len | Field::IpAvail | Field::L4Avail => {
            t.get(Field::IpLen).is_some()
        }
        Field::IpOptions => t.get(Field::IpIhl).is_some(),
        _ => false,
    };
    if derived_from_written {
        return Err("length-written");
    }
    if is_key(f) {
        return Ok(decide(entry.value_of(f)));
    }
    Ok(Translated::Keep(f, s.clone()))
}

/// The guards of case `i` (`c`) of model `m` for the packet `pre`: the case's tests, the
/// earlier cases that could match the flow (negated), and whether the destination MAC needs
/// a guard (a packet-type test).
fn case_guards(
    t: &Track,
    m: &Model,
    c: &Case,
    i: usize,
    pre: &Pre,
    ip_ok: bool,
    entry_h: &Headers,
) -> Result<CaseGuards, &'static str> {
    let act = |f: Field| -> u128 { pre_value(pre, f) };
    let Some(tests) = translate(t, &c.filter, pre.head, ip_ok, &act, entry_h)? else {
        return Err("model-disagrees");
    };
    let mut eth = c.filter.fields().any(|(f, _)| f == Field::PacketType);
    let mut negatives = Vec::new();
    for earlier in &m.cases[..i] {
        if let Some(n) = translate(t, &earlier.filter, pre.head, ip_ok, &act, entry_h)? {
            if n.is_empty() {
                return Err("model-disagrees");
            }
            eth |= earlier.filter.fields().any(|(f, _)| f == Field::PacketType);
            negatives.push(n);
        }
    }
    Ok(CaseGuards {
        tests,
        negatives,
        eth_dst: eth,
    })
}

/// Records one element's push into `rec`: a rewriter's decision, a model case, or the
/// element's own declared step.
#[allow(clippy::too_many_arguments)]
fn record_step(
    rec: &mut Recording,
    el: u32,
    class: &'static str,
    models: &[Option<Model>],
    pre: &Pre,
    step: Step,
    v: &Verdict,
    rw_last: Option<RewriterSaid>,
    now: u64,
    memo: &mut HashMap<MemoKey, Arc<Memo>, foldhash::fast::FixedState>,
) -> Result<(), &'static str> {
    if let Some(w) = step.opaque {
        return Err(w);
    }
    let ip_ok = pre.ip.map(|o| o as i32 + pre.head) == Some(14);
    // What a state function sees: the data from the element's start.
    let head = u16::try_from(pre.head).map_err(|_| "pushed-front")?;
    // A rewriter: its mapping is the header action, its refresh the state function.
    if let Some(said) = rw_last {
        return record_rewriter(rec, el, pre, v, said, ip_ok, now);
    }
    let model = models.get(el as usize).and_then(|m| m.as_ref());
    let case: Option<(&Model, &Case, usize)> = match (model, pre.case) {
        (Some(m), Some(i)) => m.cases.get(i).map(|c| (m, c, i)),
        _ => None,
    };
    let at = StepAt { el, ip_ok, head };
    match case {
        Some((m, c, i)) if c.outcome != Outcome::Runtime => {
            record_case(rec, at, (m, c, i), pre, v, memo)
        }
        _ => record_declared(rec, at, class, pre, &step, v),
    }
}

/// Where a recorded step happens: the element, whether its IPv4 header is the frame's
/// (at 14), and the start of the data it sees.
#[derive(Clone, Copy)]
struct StepAt {
    el: u32,
    ip_ok: bool,
    head: u16,
}

/// Records a rewriter's push: its mapping is the header action, its refresh the state
/// function.
fn record_rewriter(
    rec: &mut Recording,
    el: u32,
    pre: &Pre,
    v: &Verdict,
    said: RewriterSaid,
    ip_ok: bool,
    now: u64,
) -> Result<(), &'static str> {
    let RewriterSaid {
        mapping: last,
        lifetime,
        version,
    } = said;
    let Some(life) = lifetime else {
        return Err("mapping-not-steady");
    };
    rec.expiry = rec.expiry.min(now.saturating_add(life));
    let (Some((idx, dir)), Some(input), Verdict::Out(..)) = (last, pre.flow, v) else {
        return Err("rewriter-no-mapping");
    };
    if !ip_ok {
        return Err("ip-header-moved");
    }
    for f in [
        Field::IpProto,
        Field::IpIhl,
        Field::IpFragOffset,
        Field::IpLen,
        Field::TcpFlags,
    ] {
        if rec.t.get(f).is_some() {
            return Err("rewriter-input-written");
        }
    }
    let Verdict::Out(_, q) = v else {
        unreachable!()
    };
    let Some(after) = q
        .network_offset_in_data()
        .and_then(|o| q.data().get(o..))
        .and_then(FlowInput::parse)
    else {
        return Err("rewriter-output");
    };
    let new = after.flow;
    let (ip, l4) = rewrite_ops(input.flow.values(), &new);
    rec.t.ip_ops = u32::from(fold(rec.t.ip_ops + ip));
    rec.t.l4_ops = u32::from(fold(rec.t.l4_ops + l4));
    rec.t.rewrote = true;
    let nv = [
        (Field::IpSrc, u128::from(u32::from(new.saddr))),
        (Field::SrcPort, u128::from(new.sport)),
        (Field::IpDst, u128::from(u32::from(new.daddr))),
        (Field::DstPort, u128::from(new.dport)),
    ];
    for (f, x) in nv {
        rec.t.set(f, Known::Const(x));
    }
    let info = PacketInfo {
        tcp_flags: input.info.tcp_flags & 0x07,
        has_payload: input.info.has_payload,
    };
    if rec.info.is_some_and(|i| i != info) {
        return Err("rewriters-disagree");
    }
    rec.info = Some(info);
    rec.rewriters.push(RwRec {
        element: el,
        trimmed: rec.t.trimmed,
        flow: RwFlow {
            idx,
            version,
            dir,
            view: input.flow,
        },
    });
    Ok(())
}

/// Records a push that took model case `c` (number `i` of model `m`): its guards (from the
/// memo when the model is long), counters and effects.
fn record_case(
    rec: &mut Recording,
    at: StepAt,
    (m, c, i): (&Model, &Case, usize),
    pre: &Pre,
    v: &Verdict,
    memo: &mut HashMap<MemoKey, Arc<Memo>, foldhash::fast::FixedState>,
) -> Result<(), &'static str> {
    let StepAt { el, ip_ok, head } = at;
    let entry_data = rec.entry_data.clone();
    let entry_h = Headers::new(&entry_data, Some(14));
    let agrees = match (&c.outcome, v) {
        (Outcome::Out(o), Verdict::Out(o2, _)) => o == o2,
        (Outcome::Drop(r), Verdict::Drop(_, r2)) => r == r2,
        _ => false,
    };
    if !agrees {
        return Err("model-disagrees");
    }
    let guards = match &pre.memo {
        Some(m) => m.result.clone(),
        None => {
            let r = case_guards(&rec.t, m, c, i, pre, ip_ok, &entry_h);
            if let Some(k) = &pre.memo_key {
                if memo.len() > 1 << 16 {
                    memo.clear();
                }
                memo.insert(
                    k.clone(),
                    Arc::new(Memo {
                        case: Some(i),
                        result: r.clone(),
                    }),
                );
            }
            r
        }
    };
    let CaseGuards {
        tests,
        negatives,
        eth_dst: eth,
    } = guards?;
    if eth {
        guard_eth_dst(rec)?;
    }
    rec.tests.extend(tests);
    rec.negatives.extend(negatives);
    for s in &c.stats {
        rec.stats.push((el, s));
    }
    for s in &c.byte_stats {
        rec.byte_stats.push((el, s, head, rec.t.trimmed));
    }
    model::apply_effects(
        &c.effects,
        &mut Recorder {
            rec,
            head: pre.head,
            ip_ok,
        },
    )
}

/// Records a push the element described itself (no model case): its guards, its declared
/// writes (checked against the bytes it produced) and its state functions.
fn record_declared(
    rec: &mut Recording,
    at: StepAt,
    class: &'static str,
    pre: &Pre,
    step: &Step,
    v: &Verdict,
) -> Result<(), &'static str> {
    let StepAt { el, ip_ok, head } = at;
    let entry_data = rec.entry_data.clone();
    let entry_h = Headers::new(&entry_data, Some(14));
    let pre_h = Headers::new(&pre.data, pre.ip);
    if !step.touched {
        return Err(class);
    }
    for g in &step.guards {
        let act = |f: Field| -> u128 { pre_value(pre, f) };
        // The recorded packet must pass its own guard: a guard for packets unlike it (a
        // first-fragment guard recorded for a later fragment whose payload reads as the
        // flow's ports) would give those packets the action taken for this one.
        if g.fields().any(|(f, s)| !s.contains(act(f))) {
            return Err("guard-disagrees");
        }
        let Some(tests) = translate(&rec.t, g, pre.head, ip_ok, &act, &entry_h)? else {
            return Err("guard-disagrees");
        };
        rec.tests.extend(tests);
    }
    // Declared writes: checked against the bytes the element produced.
    let after = match v {
        Verdict::Out(_, q) | Verdict::Drop(q, _) => q.data(),
        Verdict::Done => return Err("held"),
    };
    if after.len() != pre.data.len() {
        return Err("undeclared-length-change");
    }
    let hl = pre_h.hl;
    let mut covered = vec![false; after.len()];
    let ip0 = pre.ip.unwrap_or(0);
    for &(f, x) in &step.writes {
        let loc = if f.group() == Group::Ethernet {
            frame_location(f, 20)
        } else {
            frame_location(f, hl).map(|(o, n)| (o - crate::program::IP_OFFSET + ip0, n))
        };
        let Some((o, n)) = loc else {
            return Err("write-unlocatable");
        };
        for b in covered.iter_mut().skip(o).take(n) {
            *b = true;
        }
        let old = model::load(&pre.data, o, n);
        if !ip_ok && f.group() != Group::Ethernet {
            return Err("ip-header-moved");
        }
        if f.group() == Group::Ethernet && head != 0 {
            return Err("ethernet-moved");
        }
        // IPv4 addresses and ports change the checksums incrementally.
        match f {
            Field::IpSrc | Field::IpDst => {
                let d = operands32(old as u32, x as u32);
                if old != x {
                    rec.t.ip_ops = u32::from(fold(rec.t.ip_ops + d));
                    rec.t.l4_ops = u32::from(fold(rec.t.l4_ops + d));
                    rec.t.rewrote = true;
                }
            }
            Field::SrcPort | Field::DstPort if old != x => {
                let d = operands16(old as u16, x as u16);
                rec.t.l4_ops = u32::from(fold(rec.t.l4_ops + d));
                rec.t.rewrote = true;
            }
            Field::SrcPort | Field::DstPort => {}
            _ if f.group() != Group::Ethernet => rec.t.csum_unknown = true,
            _ => {}
        }
        rec.t.set(f, Known::Const(x));
    }
    if rec.t.rewrote && pre.ip.is_some() {
        // The checksums the element fixed.
        for (o, n) in [(ip0 + 10, 2), (ip0 + hl + 16, 2), (ip0 + hl + 6, 2)] {
            for b in covered.iter_mut().skip(o).take(n) {
                *b = true;
            }
        }
    }
    if pre
        .data
        .iter()
        .zip(after)
        .enumerate()
        .any(|(i, (a, b))| a != b && !covered[i])
    {
        return Err("undeclared-write");
    }
    for &(token, access) in &step.states {
        rec.states.push(StateCall {
            element: el,
            nf: 0,
            access,
            token,
            head,
            ip: pre.ip.map(|o| o as u16),
            trimmed: rec.t.trimmed,
        });
    }
    Ok(())
}

/// The value of `f` for the element about to be pushed (annotations included).
fn pre_value(pre: &Pre, f: Field) -> u128 {
    value_with(&Headers::new(&pre.data, pre.ip), &pre.annos, f)
}

/// The value of `f` in `h`, annotations from `annos` (in-port, paint, destination-IP,
/// fix-IP-source, packet type).
fn value_with(h: &Headers, annos: &[u128; 5], f: Field) -> u128 {
    match f {
        Field::InPort => annos[0],
        Field::Paint => annos[1],
        Field::DstIpAnno => annos[2],
        Field::FixIpSrc => annos[3],
        Field::PacketType => annos[4],
        _ => h.value_of(f),
    }
}

/// Guards the destination MAC (the packet-type annotation comes from it).
fn guard_eth_dst(rec: &mut Recording) -> Result<(), &'static str> {
    if rec.t.get(Field::EthDst).is_some() {
        return Ok(());
    }
    let v = Headers::new(&rec.entry_data, Some(14)).value(Field::EthDst);
    if !rec
        .tests
        .iter()
        .any(|(f, iv)| *f == Field::EthDst && iv == &[(v, v)])
    {
        rec.tests.push((Field::EthDst, vec![(v, v)]));
    }
    Ok(())
}

/// A flow's recording as an [`EffectSink`]: a model case's effects on the header action
/// (as synthesis sees them), or why the fast path cannot take them.
struct Recorder<'a> {
    rec: &'a mut Recording,
    /// Bytes pulled off the frame as it arrived, at this point of the case.
    head: i32,
    /// Whether the element's IPv4 header is the frame's.
    ip_ok: bool,
}

impl Recorder<'_> {
    fn need_ip(&self) -> Result<(), &'static str> {
        if self.ip_ok {
            Ok(())
        } else {
            Err("ip-header-moved")
        }
    }
}

impl model::EffectSink for Recorder<'_> {
    type Error = &'static str;

    fn write(&mut self, f: Field, op: &model::Op) -> Result<(), &'static str> {
        if f.group() == Group::Annotation {
            return Ok(());
        }
        let v = match op {
            model::Op::Identity => return Ok(()),
            model::Op::Set(v) => *v,
            _ => return Err("relative-write"),
        };
        if f.group() == Group::Ethernet {
            if self.head != 0 {
                return Err("ethernet-moved");
            }
        } else if frame_location(f, 20).is_some() {
            self.need_ip()?;
            self.rec.t.csum_unknown = true;
        } else {
            return Err("write-unlocatable");
        }
        self.rec.t.set(f, Known::Const(v));
        Ok(())
    }

    fn dec_ttl(&mut self) -> Result<(), &'static str> {
        self.need_ip()?;
        let t = &mut self.rec.t;
        let w = match t.get(Field::IpTtl) {
            None => Known::Ttl(1),
            Some(Known::Ttl(k)) => Known::Ttl(k + 1),
            Some(Known::Const(v)) => Known::Const(v.wrapping_sub(1) & 0xff),
        };
        t.set(Field::IpTtl, w);
        t.ttl_decs += 1;
        Ok(())
    }

    fn pull(&mut self, n: u16) -> Result<(), &'static str> {
        self.head += i32::from(n);
        Ok(())
    }

    fn unpull(&mut self, n: u16) -> Result<(), &'static str> {
        self.head -= i32::from(n);
        Ok(())
    }

    fn push(&mut self, n: u16) -> Result<(), &'static str> {
        // Pushed bytes are written over the frame's own first bytes only.
        if self.head != i32::from(n) {
            return Err("encap-moved");
        }
        self.head = 0;
        Ok(())
    }

    fn rewrite_macs(&mut self, src: &[u8; 6], dst: &[u8; 6]) -> Result<(), &'static str> {
        if self.head != 0 {
            return Err("ethernet-moved");
        }
        let mac = |m: &[u8; 6]| u128::from(wire::ethernet::mac_to_u64(m));
        self.rec.t.set(Field::EthDst, Known::Const(mac(dst)));
        self.rec.t.set(Field::EthSrc, Known::Const(mac(src)));
        Ok(())
    }

    // Annotations are not part of a flow's header action.
    fn mark_mac(&mut self) -> Result<(), &'static str> {
        Ok(())
    }

    fn mark_network(&mut self, _off: u16) -> Result<(), &'static str> {
        Ok(())
    }

    fn mark_ip(&mut self) -> Result<(), &'static str> {
        Ok(())
    }

    fn packet_type_from_eth(&mut self) -> Result<(), &'static str> {
        guard_eth_dst(self.rec)
    }

    fn dst_anno_from_ip_dst(&mut self) -> Result<(), &'static str> {
        Ok(())
    }

    fn trim_to_ip_len(&mut self) -> Result<(), &'static str> {
        self.need_ip()?;
        if self.rec.t.get(Field::IpLen).is_some() {
            return Err("length-written");
        }
        self.rec.t.trimmed = true;
        Ok(())
    }

    fn set_ip_checksum(&mut self) -> Result<(), &'static str> {
        self.need_ip()?;
        self.rec.t.recompute = true;
        self.rec.t.csum_unknown = false;
        Ok(())
    }
}

/// Makes the entry from a finished recording: its template (what flows taking the same
/// path share) and what the flow holds apart; checks its header action on the recorded
/// packet.
fn consolidate(
    rec: &Recording,
    el: Option<u32>,
    out: Option<&Packet>,
    expiry: Option<u64>,
    ex: &Executor,
) -> Result<(Template, (Own, u64)), &'static str> {
    let t = &rec.t;
    let end = match el {
        Some(e) => End::Exit(e),
        None => End::Drop,
    };
    let mut writes: Vec<(Field, Val)> = t
        .known
        .iter()
        .filter(|(f, _)| frame_location(*f, 20).is_some())
        .map(|(f, w)| {
            (
                *f,
                match w {
                    Known::Const(v) => Val::Const(*v),
                    Known::Ttl(k) => Val::Orig(*f, -i128::from(*k)),
                },
            )
        })
        .collect();
    // Constant writes of the tuple (a rewriter's mapping) are the flow's own values, written
    // apart from the template's (unless a raw write could overlap them).
    let mut tuple = 0u8;
    let mut own_tuple = [0u32; 4];
    if !writes.iter().any(|(f, _)| matches!(f, Field::Raw { .. })) {
        writes.retain(
            |(f, v)| match (Field::TUPLE.iter().position(|g| g == f), v) {
                (Some(i), Val::Const(x)) => {
                    tuple |= 1 << i;
                    own_tuple[i] = *x as u32;
                    false
                }
                _ => true,
            },
        );
    }
    let head = match out {
        Some(q) => q.data_offset() as i64 - i64::from(rec.entry_offset),
        None => 0,
    };
    if head < 0 {
        return Err("pushed-front");
    }
    let source = Finish {
        writes,
        head: head as u16,
        trim: t.trimmed,
        ip_checksum: if t.recompute {
            IpChecksum::Recompute
        } else {
            IpChecksum::Incremental(t.ttl_decs * wire::checksum::TTL_DECREMENT)
        },
        annos: None,
        runs: Vec::new(),
        adds: Vec::new(),
        placed: Vec::new(),
    };
    let exp = expiry.unwrap_or(u64::MAX).min(rec.expiry);
    let own = Own {
        tuple: own_tuple,
        ip_ops: t.ip_ops,
        l4_ops: t.l4_ops,
        rw: (!rec.rewriters.is_empty()).then(|| rec.rewriters.iter().map(|r| r.flow).collect()),
    };
    // Counters: what the recorded packet changed.
    let Snapshot {
        arrivals: a0,
        out_count: o0,
        nf_counters: n0,
    } = &rec.snap;
    let mut counts = Counts::default();
    for (i, (&x, &y)) in ex.counts.arrivals.iter().zip(a0).enumerate() {
        if x != y {
            counts.arrivals.push((i as u32, x - y));
        }
    }
    for (i, (&x, &y)) in ex.counts.out_count.iter().zip(o0).enumerate() {
        if x != y {
            counts.out.push((i as u32, x - y));
        }
    }
    for &(e, r) in ex.fast.as_ref().map_or(&[][..], |f| &f.drops) {
        match counts.drops.iter_mut().find(|(x, y, _)| *x == e && *y == r) {
            Some(d) => d.2 += 1,
            None => counts.drops.push((e, r, 1)),
        }
    }
    for (i, (x, y)) in ex.counts.nf_counters.iter().zip(n0).enumerate() {
        let d = NfCounters {
            input: x.input - y.input,
            output: x.output - y.output,
            created: x.created - y.created,
            dropped: x.dropped - y.dropped,
        };
        if d.input + d.output + d.created + d.dropped != 0 {
            counts.nfs.push((i as u32, d));
        }
    }
    counts.stats = rec.stats.clone();
    counts.byte_stats = rec.byte_stats.clone();
    // One test per field (the intersection of every step's), and only the negatives that
    // can hold together with them.
    let mut merged: Vec<(Field, FieldSet)> = Vec::new();
    for (f, iv) in &rec.tests {
        let set = FieldSet::from_intervals(iv.iter().copied());
        match merged.iter_mut().find(|(g, _)| g == f) {
            Some((_, old)) => *old = old.intersection(&set),
            None => merged.push((*f, set)),
        }
    }
    // A negative on one field is a positive on the rest of that field.
    let mut multi: Vec<&Vec<Test>> = Vec::new();
    for n in &rec.negatives {
        if let [(f, iv)] = n.as_slice() {
            let set = FieldSet::from_intervals(iv.iter().copied());
            match merged.iter_mut().find(|(g, _)| g == f) {
                // Its set and the rest of the field: its set (within the width) less `set`.
                Some((_, old)) => *old = old.clip(f.width()).difference(&set),
                None => merged.push((*f, set.complement(f.width()))),
            }
        } else if !multi.contains(&n) {
            multi.push(n);
        }
    }
    if merged.iter().any(|(_, s)| s.is_empty()) {
        return Err("guards-contradict");
    }
    let negatives: Vec<Vec<GetterTest>> = multi
        .into_iter()
        .filter(|n| {
            n.iter().all(|(f, iv)| {
                merged.iter().find(|(g, _)| g == f).is_none_or(|(_, s)| {
                    !s.intersection(&FieldSet::from_intervals(iv.iter().copied()))
                        .is_empty()
                })
            })
        })
        .map(|n| compile_tests(n))
        .collect();
    // Tests a field's full range passes are no tests.
    let mut ranges = Vec::new();
    let mut tests: Vec<GetterTest> = Vec::new();
    for (f, s) in merged.into_iter().filter(|(f, s)| !s.is_full(f.width())) {
        let iv: Vec<(u128, u128)> = s.intervals().collect();
        match iv.as_slice() {
            [(lo, hi)] => ranges.push((Getter::of(f), *lo, *hi)),
            _ => tests.push((Getter::of(f), iv)),
        }
    }
    let mut c = Consolidated {
        quick: QuickGuards::default(),
        quick_finish: None,
        ranges,
        tests,
        negatives,
        // Made from `source` below, for a new template only.
        finish: Finish {
            writes: Vec::new(),
            head: 0,
            trim: false,
            ip_checksum: IpChecksum::Recompute,
            annos: None,
            runs: Vec::new(),
            adds: Vec::new(),
            placed: Vec::new(),
        },
        source,
        rewrote: t.rewrote,
        tuple,
        ops: t.ip_ops != 0 || t.l4_ops != 0,
        rewriters: rec
            .rewriters
            .iter()
            .map(|r| RwCall {
                element: r.element,
                trimmed: r.trimmed,
            })
            .collect(),
        states: rec
            .states
            .iter()
            .map(|s| StateCall {
                element: s.element,
                nf: ex.nf_of[s.element as usize],
                access: s.access,
                token: s.token,
                head: s.head,
                ip: s.ip,
                trimmed: s.trimmed,
            })
            .collect(),
        counts,
        end,
        info: rec.info,
    };
    // An equal template made before is the entry's (compiled already); else this one is
    // compiled.
    let c = match ex.fast_find_shared(&c) {
        Some(a) => Template::Shared(a),
        None => {
            c.finish = c.source.clone();
            c.finish.prepare();
            c.quick = QuickGuards::new(&c.ranges);
            c.quick_finish = QuickFinish::new(&c.finish);
            Template::New(Box::new(c))
        }
    };
    if let Some(q) = out {
        // The header action (template and the flow's own values) must give the recorded
        // packet's bytes.
        let mut copy = Packet::from_bytes(&rec.entry_data);
        c.get().apply(&own, &mut copy);
        if copy.data() != q.data() {
            return Err("action-differs");
        }
    }
    Ok((c, (own, exp)))
}

/// A consolidated entry's template: one another flow's entry holds already, or a new one.
enum Template {
    Shared(Arc<Consolidated>),
    New(Box<Consolidated>),
}

impl Template {
    fn get(&self) -> &Consolidated {
        match self {
            Template::Shared(a) => a,
            Template::New(c) => c,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tuple_is_where_the_layout_puts_it() {
        // A flow's own tuple values are written at fixed places, not looked up per packet:
        // they must be the fields' places for every IPv4 header length.
        for hl in (20..=60).step_by(4) {
            for (f, (off, wide)) in Field::TUPLE.iter().zip(tuple_at(hl)) {
                let len = if wide { 4 } else { 2 };
                assert_eq!(frame_location(*f, hl), Some((off, len)), "{f:?} at hl {hl}");
            }
        }
    }

    #[test]
    fn tuple_writes_touch_only_their_fields_and_never_panic() {
        let mut d: Vec<u8> = (0..80u8).collect();
        d[14] = 0x46; // a 24-byte IPv4 header
        let before = d.clone();
        write_tuple(&mut d, 0b1010, &[0, 0xaabb, 0, 0xccdd]);
        assert_eq!(&d[38..40], &[0xaa, 0xbb], "source port after the options");
        assert_eq!(&d[40..42], &[0xcc, 0xdd], "destination port");
        let changed: Vec<usize> = (0..d.len()).filter(|&i| d[i] != before[i]).collect();
        assert_eq!(changed, vec![38, 39, 40, 41]);
        write_tuple(&mut d, 0b0101, &[0x0a00_0001, 0, 0x0a00_0002, 0]);
        assert_eq!(&d[26..34], &[10, 0, 0, 1, 10, 0, 0, 2]);
        // Frames too short for the fields are left as they are.
        for n in 0..40 {
            let mut short = vec![0x4fu8; n];
            let copy = short.clone();
            write_tuple(&mut short, 0b1111, &[1, 2, 3, 4]);
            if n < 28 {
                assert_eq!(short, copy, "{n} bytes");
            }
        }
    }

    /// Frames near a 60-byte IPv4/UDP frame: bytes changed at random, every length from 0,
    /// header lengths 20 to 60, and the frame itself (xorshift, seeded).
    fn frames_around(base: &[u8], n: usize) -> Vec<Vec<u8>> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut out = vec![base.to_vec()];
        for len in 0..base.len() {
            out.push(base[..len].to_vec());
        }
        for _ in 0..n {
            let mut f = base.to_vec();
            for _ in 0..(next() % 3) {
                let i = (next() as usize) % f.len();
                f[i] = next() as u8;
            }
            if next() % 4 == 0 {
                f[14] = 0x40 | (next() % 16) as u8;
            }
            if next() % 4 == 0 {
                f.truncate((next() as usize) % (base.len() + 1));
            }
            out.push(f);
        }
        out
    }

    fn udp_frame() -> Vec<u8> {
        let mut d = vec![0u8; 60];
        d[12..14].copy_from_slice(&[0x08, 0x00]);
        d[14] = 0x45;
        d[16..18].copy_from_slice(&46u16.to_be_bytes());
        d[22] = 64;
        d[23] = 17;
        d[26..30].copy_from_slice(&[10, 0, 0, 1]);
        d[30..34].copy_from_slice(&[10, 1, 0, 2]);
        let c = wire::checksum::data(&d[14..34]);
        d[24..26].copy_from_slice(&c.to_be_bytes());
        d[34..38].copy_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        d
    }

    #[test]
    fn compiled_guards_decide_as_the_getters() {
        // An entry's one-interval guards compiled for a hit (words, loads, computed
        // fields) pass exactly the frames the getters pass, short frames included.
        let tests: Vec<(Field, u128, u128)> = vec![
            (Field::EtherType, 0x0800, 0x0800),
            (Field::IpVersion, 4, 4),
            (Field::IpIhl, 5, 15),
            (Field::IpTtl, 2, 255),
            (Field::IpProto, 17, 17),
            (Field::IpFlags, 0, 3),
            (Field::IpChecksumOk, 1, 1),
            (Field::IpLenOk, 1, 1),
            (Field::IpAvail, 20, 0xffff),
            (Field::DstPort, 53, 53),
            (Field::SrcPort, 1024, 65535),
            (Field::EthDst, 0, 0),
        ];
        let base = udp_frame();
        let frames = frames_around(&base, 3000);
        // Every subset of the tests in a few rotations (merged words differ with each).
        for mask in [0xfffu32, 0x0ff, 0xf0f, 0x555, 0xaaa, 0x801, 0x300, 0x007] {
            let ranges: Vec<(Getter, u128, u128)> = tests
                .iter()
                .enumerate()
                .filter(|(i, _)| mask >> i & 1 == 1)
                .map(|(_, &(f, lo, hi))| (Getter::of(f), lo, hi))
                .collect();
            let q = QuickGuards::new(&ranges);
            let mut passed = 0;
            for f in &frames {
                let h = Headers::new(f, Some(14));
                let want = ranges
                    .iter()
                    .all(|&(g, lo, hi)| (lo..=hi).contains(&g.get(&h)));
                let got = q.pass(&h);
                if let Some(got) = got {
                    assert_eq!(got, want, "tests {mask:#x}, frame {f:02x?}");
                    passed += usize::from(got);
                } else {
                    assert!(f.len() < q.need || h.l4.len() < q.need_l4);
                }
            }
            assert!(passed > 0, "tests {mask:#x}: the frame itself passes");
        }
        // A test no value of the field passes is kept as it was (and fails).
        let q = QuickGuards::new(&[(Getter::of(Field::IpTtl), 300, 400)]);
        assert_eq!(q.pass(&Headers::new(&base, Some(14))), Some(false));
    }

    /// A header action of `writes` with a TTL decrement's checksum, prepared.
    fn prepared(writes: Vec<(Field, Val)>, head: u16, trim: bool) -> Finish {
        let mut f = Finish {
            writes,
            head,
            trim,
            ip_checksum: IpChecksum::Incremental(wire::checksum::TTL_DECREMENT),
            annos: None,
            runs: Vec::new(),
            adds: Vec::new(),
            placed: Vec::new(),
        };
        f.prepare();
        f
    }

    #[test]
    fn a_compiled_header_action_writes_what_finish_packet_writes() {
        // A router's action (MACs, TTL decrement, incremental checksum, trim; with and
        // without a pull), compiled for a hit, gives finish_packet's bytes on every frame,
        // short ones included, or defers to it.
        let mac = |b: u8| {
            Val::Const(u128::from_be_bytes([
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, b,
            ]))
        };
        for (head, trim, extra) in [(0u16, true, false), (14, false, true), (0, false, true)] {
            let mut writes = vec![
                (Field::EthDst, mac(0x12)),
                (Field::EthSrc, mac(0x11)),
                (Field::IpTtl, Val::Orig(Field::IpTtl, 255)),
            ];
            if extra {
                writes.push((Field::IpTos, Val::Const(0x2e)));
                writes.push((Field::EtherType, Val::Const(0x0800)));
            }
            let f = prepared(writes, head, trim);
            let q = QuickFinish::new(&f).expect("a router's action compiles");
            let mut base = udp_frame();
            base.extend_from_slice(&[0xee; 6]); // beyond the IPv4 length: trimmed
            for d in frames_around(&base, 2000) {
                let mut a = Packet::from_bytes(&d);
                let mut b = Packet::from_bytes(&d);
                finish_packet(&mut a, &f, &Regs::default());
                if q.apply(&mut b) {
                    assert_eq!(a.data(), b.data(), "frame {d:02x?}");
                } else {
                    assert!(d.len() < q.need);
                    assert_eq!(b.data(), &d[..], "left alone when deferred");
                }
            }
        }
    }

    #[test]
    fn a_compiled_exit_writes_what_finish_packet_writes() {
        // A NAPT's exit (MACs, TTL, a constant source address, the rewriter's port and
        // destination from registers, both checksums), compiled for remembered paths, gives
        // finish_packet's bytes on every frame, TCP, UDP and short ones included, or defers.
        let mut writes = vec![
            (Field::EthDst, Val::Const(0x0200_0000_0012)),
            (Field::EthSrc, Val::Const(0x0200_0000_0011)),
            (Field::IpTtl, Val::Orig(Field::IpTtl, 255)),
            (Field::IpSrc, Val::Const(0x0a00_6501)),
            (Field::SrcPort, Val::Reg(0, Tuple::Sport, 0)),
            (Field::IpDst, Val::Reg(1, Tuple::Daddr, 0)),
            (Field::DstPort, Val::Reg(1, Tuple::Dport, 3)),
        ];
        let mut f = prepared(writes.clone(), 14, true);
        let q = QuickExit::new(&f).expect("a NAPT's exit compiles");
        let regs = |rewrote: bool| Regs {
            flows: vec![[10, 40000, 0x0a01_0002, 53], [7, 1, 0xc0a8_0001, 65534]],
            ip_ops: 0x1_2345,
            l4_ops: 0x2_fedc,
            rewrote,
        };
        let mut tcp = udp_frame();
        tcp[23] = 6;
        tcp[16..18].copy_from_slice(&46u16.to_be_bytes());
        tcp[50..52].copy_from_slice(&[0xab, 0xcd]);
        for base in [udp_frame(), tcp] {
            for d in frames_around(&base, 2000) {
                for r in [regs(true), regs(false)] {
                    let mut a = Packet::from_bytes(&d);
                    let mut b = Packet::from_bytes(&d);
                    finish_packet(&mut a, &f, &r);
                    if q.apply(&mut b, &r) {
                        assert_eq!(a.data(), b.data(), "frame {d:02x?}");
                    } else {
                        assert_eq!(b.data(), &d[..], "left alone when deferred");
                    }
                }
            }
        }
        // What it does not compile: annotations, a value read from the packet.
        f.annos = Some(crate::program::Annotations {
            mac: None,
            net: Some(14),
            transport: true,
            dst_ip: Val::Const(0),
            paint: Val::Const(0),
            packet_type: Val::Const(0),
            hops: 0,
        });
        assert!(QuickExit::new(&f).is_none());
        // A write of the IPv4 header length's byte (read after the constant bytes).
        let mut ihl = writes.clone();
        ihl.push((Field::IpIhl, Val::Const(6)));
        assert!(QuickExit::new(&prepared(ihl, 14, true)).is_none());
        writes.push((Field::IpId, Val::Orig(Field::IpLen, 0)));
        assert!(QuickExit::new(&prepared(writes, 14, true)).is_none());
    }

    #[test]
    fn a_flows_own_part_of_an_entry_is_small() {
        // The slot (key, shared template's pointer, counters owed, the flow's own values)
        // is what a hit reads besides the template: a few cache lines, whatever the chain.
        assert!(std::mem::size_of::<Own>() <= 48);
        assert_eq!(std::mem::size_of::<Key>(), 24);
        assert_eq!(std::mem::size_of::<Entry>(), 16);
        let slot = std::mem::size_of::<Slot>();
        assert!(slot <= 192, "{slot} bytes per slot");
        // What a hit on an entry without rewriters reads is in the first cache line.
        assert_eq!(std::mem::offset_of!(Slot, st), 56);
        assert_eq!(std::mem::offset_of!(Served, pending), 0);
        assert_eq!(std::mem::align_of::<Slot>(), 64);
    }
}
