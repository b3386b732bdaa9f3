//! Established flows of a synthesized program: one lookup per packet (SNF's shared state
//! table, Property 1).
//!
//! The first packets of a flow take the program's slow path: classification, then each
//! stateful rewriter's decision through the rewriter itself. When what follows the root
//! classification is sure to repeat for the flow's next packets (the same mappings, no
//! per-packet test on fields the root class leaves open, and packets like this one change
//! the mappings only in their counts and expiry), the executor remembers the whole path: its
//! nodes, its end and the register values. A later packet of the flow that falls in the same
//! root class then costs one table lookup and the class's writes.
//!
//! What the skipped rewriters would have done to their state (a packet count, an expiry, a
//! counter) is owed, not lost: each entry counts the packets it served and the time of the
//! last, and [`Executor::flush_flows`] pays the debt in one call per mapping
//! ([`elements::StatefulFlow::replay_n`]) before anything reads or changes a
//! rewriter's table: a slow-path decision, a naive packet reaching a rewriter, a state dump
//! or the end of a run. An entry is used only while
//! - every mapping it names has the version it had (not removed, replaced, or changed in
//!   TCP state, reply flag or timeout),
//! - no mapping can have expired (its own clock, kept per entry, runs out first),
//! - no rewriter on the path is due to reap its table (the next packet reaping must be a
//!   slow one), and
//! - the packet is like the one that made the entry: same root class, same TCP flags that
//!   matter to the timeouts (FIN, SYN, RST), payload or not, and a header each rewriter
//!   accepts (first fragment, long enough).
//!
//! So every mode still gives the same packets, counters and state dumps.
//!
//! Paths without a rewriter decision are remembered the same way: a flow the firewall
//! denies (its drop), or one that leaves without meeting a rewriter, costs one lookup
//! instead of the firewall's ordered classifier; so does a flow a rewriter drops for its
//! protocol alone (`not-tcp-udp`: the drop and the rewriter's drop count are owed like a
//! mapping's packets). A path's debts are paid in the order of their last packets, so a
//! mapping touched by both of its flow's directions gets the later packet's expiry.
//!
//! A flow also keeps its root class ([`RootMemo`]): a packet its remembered path cannot
//! serve (a SYN or FIN, a mapping that changed, a packet kind not seen yet) but whose
//! fields outside the flow key are those the root classification tested for the flow
//! before, skips the root classifier. ICMP flows are keyed by type, code and echo
//! identifier, so an echo flow keeps its key as its sequence number changes.

use super::fast::QuickGuards;
use super::{Counters, Executor, Kind, ProgramEnd, SynthState};
use crate::program::{Getter, Node, NodeId, Program, Regs, Step, Track, Val, NO_MAPPING};
use elements::hash::FlowHasher;
use elements::model::Field;
use elements::rewriter::{PacketInfo, TCP_REWRITE_MIN, TRANSPORT_MIN};
use packet::Packet;
use std::collections::VecDeque;

/// The TCP flags whose presence changes a mapping's state: FIN, SYN, RST.
const STATE_FLAGS: u8 = 0x07;

/// The boxes remembered paths check packets against, each kept once (many flows share
/// one; kept together, they stay in cache).
#[derive(Debug, Clone, Default)]
pub(super) struct Regions {
    boxes: Vec<Region>,
    ids: foldhash::HashMap<Region, u32>,
    /// Each box compiled for the segment that first checked a packet against it (the
    /// fields are that segment's getters), made then.
    quick: Vec<Option<QuickRegion>>,
}

/// A box compiled for one segment: its one-interval tests as [`QuickGuards`] (masked words,
/// the IPv4 checksum called directly), the others as they are.
#[derive(Debug, Clone)]
struct QuickRegion {
    /// The segment's entry element.
    el: u32,
    guards: QuickGuards,
    rest: Vec<(Getter, Vec<(u128, u128)>)>,
}

/// A box: allowed intervals per field (index into the segment's fields).
type Region = Vec<(u16, Vec<(u128, u128)>)>;

impl Regions {
    /// The index of `region`, added if new.
    fn id(&mut self, region: &[(u16, Vec<(u128, u128)>)]) -> u32 {
        if let Some(&i) = self.ids.get(region) {
            return i;
        }
        let i = self.boxes.len() as u32;
        self.boxes.push(region.to_vec());
        self.ids.insert(region.to_vec(), i);
        i
    }

    /// How many regions are kept.
    pub(super) fn len(&self) -> usize {
        self.boxes.len()
    }

    /// Forgets every region.
    pub(super) fn clear(&mut self) {
        self.boxes.clear();
        self.ids.clear();
        self.quick.clear();
    }

    /// Whether frame `view`, at the segment of entry element `el` whose fields `getters`
    /// reads, is inside box `id` (`None`: no such box). The box is compiled at its first
    /// check; a frame too short for the compiled words, or a box first compiled for
    /// another segment, is checked field by field.
    #[inline]
    fn contains(
        &mut self,
        id: u32,
        el: u32,
        getters: &[Getter],
        view: &crate::program::FrameView<'_>,
    ) -> Option<bool> {
        let i = id as usize;
        let region = self.boxes.get(i)?;
        if self.quick.len() <= i {
            self.quick.resize(i + 1, None);
        }
        let q = self.quick[i].get_or_insert_with(|| {
            let mut singles = Vec::new();
            let mut rest = Vec::new();
            // A field without a getter reads 0 (below): left to that check.
            let mut el = el;
            for (f, iv) in region {
                let Some(&g) = getters.get(usize::from(*f)) else {
                    el = u32::MAX;
                    continue;
                };
                match iv.as_slice() {
                    [(lo, hi)] => singles.push((g, *lo, *hi)),
                    _ => rest.push((g, iv.clone())),
                }
            }
            QuickRegion {
                el,
                guards: QuickGuards::new(&singles),
                rest,
            }
        });
        let rest_pass = |q: &QuickRegion| {
            q.rest.iter().all(|(g, iv)| {
                let v = g.get(view);
                iv.iter().any(|&(lo, hi)| lo <= v && v <= hi)
            })
        };
        if q.el == el {
            if let Some(pass) = q.guards.pass(view) {
                return Some(pass && (q.rest.is_empty() || rest_pass(q)));
            }
        }
        Some(region.iter().all(|(i, iv)| {
            let v = getters.get(usize::from(*i)).map_or(0, |g| g.get(view));
            iv.iter().any(|&(lo, hi)| lo <= v && v <= hi)
        }))
    }
}

/// What the executor remembers about one flow.
#[derive(Debug, Clone, Default)]
pub(super) struct FlowEntry {
    /// The rewriter decisions of the flow's last slow packet: hints that let a rewriter
    /// check its mapping by index instead of looking it up.
    pub(super) steps: Vec<Step>,
    /// The whole path, while it is sure to repeat (in the slot: one memory access finds
    /// the flow and its path).
    pub(super) fast: Option<Fast>,
    /// The root classification's choice for the flow's packets, while they are like the
    /// one that made it: a packet the remembered path cannot serve (a SYN or FIN, a
    /// mapping that changed) still skips the root classifier.
    pub(super) root: Option<RootMemo>,
}

/// A flow's root class: what the root classification chose, and the packets it holds for.
#[derive(Debug, Clone, Copy)]
pub(super) struct RootMemo {
    /// The node after the root, and the class index.
    choice: (NodeId, u32),
    /// The packets it holds for fall in this box of the segment's fields outside the flow
    /// key (index into [`Regions`]): the class's own tests, or, for ordered classes, the
    /// values of every field the classifier tested.
    region: u32,
}

/// A remembered path and what its packets owe the rewriters.
#[derive(Debug, Clone, Default)]
pub(super) struct Fast {
    /// The packets it serves fall in this box of the segment's fields (index into
    /// [`Regions`]): the intersection of the classes the path chose, so every
    /// classification on the path chooses the same.
    region: u32,
    /// The packets it serves are like this (state-relevant TCP flags, payload); `None`
    /// when no rewriter on the path looks at them (any packet whose header a rewriter would
    /// accept).
    info: Option<PacketInfo>,
    /// Version of each step's mapping when the path was recorded.
    versions: Vec<u32>,
    /// The rewriters' change count when the versions were last checked.
    epoch: u64,
    /// The nodes after the root, in order (their counts are owed).
    path: Vec<NodeId>,
    /// Whether some node of `path` counts bytes.
    bytes: bool,
    /// The last node: an exit, a hand-off, a drop, or a rewriter that drops the flow's
    /// packets (`drop`).
    end: NodeId,
    /// The rewriter that drops the flow's packets, and why (each packet served owes it a
    /// drop).
    drop: Option<(u32, &'static str)>,
    /// The register values the path computed (the rewriters' decisions).
    regs: Regs,
    /// The shortest lifetime a packet gives the path's mappings.
    life: u64,
    /// The path is not used at or after this time (a mapping may have expired).
    expiry: u64,
    /// Time of the last packet served.
    last: u64,
    /// When it was served, in the order of all packets remembered paths served (debts are
    /// paid in that order: a mapping's expiry is its latest packet's).
    seq: u64,
    /// Packets served since the debt was last paid.
    pending: u32,
    /// Their frame and IPv4 lengths, summed (for byte counters on the path).
    pending_bytes: (u64, u64),
}

/// What a packet's own headers say to the rewriters, when every rewriter of a remembered
/// path accepts them as it accepted the packet that made the path: an IPv4 first fragment
/// whose transport header is long enough, both as it arrived and cut at its IPv4 length.
pub(super) fn fast_info(data: &[u8]) -> Option<PacketInfo> {
    // The IPv4 header at 14 cut at its IPv4 length: the cut view is the shorter of the two
    // the rewriters may read (whole, or trimmed), so it decides the length checks.
    let ip = packet::Ipv4Flow::parse_trimmed(data.get(14..)?)?;
    if !ip.first_fragment() {
        return None;
    }
    if ip.protocol() != wire::IpProtocol::TCP {
        return (ip.transport_len() >= TRANSPORT_MIN).then_some(PacketInfo::default());
    }
    // A segment cut before its checksum's end is rewritten apart (its ports may stay).
    if ip.transport_len() < TCP_REWRITE_MIN {
        return None;
    }
    Some(PacketInfo {
        tcp_flags: ip.tcp_flags() & STATE_FLAGS,
        has_payload: ip.tcp_has_payload(),
    })
}

/// The flow-table key of a frame as it arrived at entry element `el`: the element (24
/// bits) above the IPv4 table key of the bytes at 14 ([`packet::Ipv4Flow::table_key`]:
/// protocol, addresses and ports; for ICMP, the type and code and the echo identifier in
/// place of the ports, so an echo flow keeps its key while its sequence number changes).
#[inline]
pub(super) fn flow_key(el: u32, data: &[u8]) -> u128 {
    let ip = data.get(14..).unwrap_or(&[]);
    (u128::from(el & 0xff_ffff) << 104) | packet::Ipv4Flow::table_key(ip)
}

/// Whether the flow key holds field `f` (protocol, addresses, ports, and the ICMP type and
/// code that share the ports' bytes): a test on it holds for every packet of the flow.
pub(super) fn keyed(f: Option<&Field>) -> bool {
    matches!(
        f,
        Some(
            Field::IpProto
                | Field::IpSrc
                | Field::IpDst
                | Field::SrcPort
                | Field::DstPort
                | Field::IcmpType
                | Field::IcmpCode
        )
    )
}

/// Narrows `region` (a box: allowed intervals per field, sorted by field) to the packets
/// also in the box `tests`, on the fields `keep` keeps (the others are left open).
pub(super) fn narrow(
    region: &mut Vec<(u16, Vec<(u128, u128)>)>,
    tests: &[(u16, Vec<(u128, u128)>)],
    keep: impl Fn(u16) -> bool,
) {
    for (f, iv) in tests.iter().filter(|(f, _)| keep(*f)) {
        let at = region.binary_search_by_key(f, |(g, _)| *g);
        match at.ok().and_then(|i| region.get_mut(i)) {
            // One interval each (the usual case): in place.
            Some((_, have)) if have.len() == 1 && iv.len() == 1 => {
                let ((l1, h1), (l2, h2)) = (have[0], iv[0]);
                let (l, h) = (l1.max(l2), h1.min(h2));
                if l <= h {
                    have[0] = (l, h);
                } else {
                    have.clear();
                }
            }
            Some((_, have)) => {
                // Both sorted and disjoint: one merge.
                let mut out = Vec::with_capacity(have.len().max(iv.len()));
                let (mut i, mut j) = (0, 0);
                while let (Some(&(l1, h1)), Some(&(l2, h2))) = (have.get(i), iv.get(j)) {
                    let (l, h) = (l1.max(l2), h1.min(h2));
                    if l <= h {
                        out.push((l, h));
                    }
                    if h1 < h2 {
                        i += 1;
                    } else {
                        j += 1;
                    }
                }
                *have = out;
            }
            None => {
                if let Err(i) = at {
                    region.insert(i, (*f, iv.clone()));
                }
            }
        }
    }
}

/// Narrows `region` (as [`narrow`] does) to the packets whose field `f` is `v`, without
/// building a one-value test.
pub(super) fn narrow_point(region: &mut Vec<(u16, Vec<(u128, u128)>)>, f: u16, v: u128) {
    match region.binary_search_by_key(&f, |(g, _)| *g) {
        Ok(i) => {
            let have = &mut region[i].1;
            let inside = have.iter().any(|&(lo, hi)| lo <= v && v <= hi);
            have.clear();
            if inside {
                have.push((v, v));
            }
        }
        Err(i) => region.insert(i, (f, vec![(v, v)])),
    }
}

/// Whether a run-time check reads only what the flow decides (constants and registers).
pub(super) fn flow_determined(tests: &[(Val, Vec<(u128, u128)>)]) -> bool {
    tests
        .iter()
        .all(|(v, _)| matches!(v, Val::Const(_) | Val::Reg(..)))
}

/// Whether a rewriter's view of the packet's addresses and ports depends only on the flow
/// key and registers.
pub(super) fn tuple_determined(tuple: &[Val; 4]) -> bool {
    tuple.iter().all(|v| match v {
        Val::Orig(f, _) => matches!(
            f,
            Field::IpSrc | Field::SrcPort | Field::IpDst | Field::DstPort
        ),
        _ => true,
    })
}

/// Remembers the root class the classifier just chose for the flow of `key` (in
/// `flows`; `root` is the segment's root node): `choice` (next node, class index, pins it made), with the class's tests or its
/// pinned values outside the flow key (`unkeyed`) as the region.
pub(super) fn memo_root(
    regs: &Track,
    regions: &mut Regions,
    (flows, order): (&mut FlowTable, &mut VecDeque<u128>),
    prog: &Program,
    (root, key): (NodeId, u128),
    (next, index, pins): (NodeId, u32, usize),
    unkeyed: impl Fn(u16) -> bool + Copy,
) {
    let mut region = Vec::new();
    if let Some(&(n, i)) = regs.visits.first().filter(|(n, _)| *n == root) {
        if let Some(crate::program::Node::Classify(cs)) = prog.nodes.get(n as usize) {
            if let Some(c) = cs.get(i as usize).filter(|_| i == index) {
                narrow(&mut region, &c.tests, unkeyed);
            }
        }
    }
    for &(i, v) in regs.pinned[..pins.min(regs.pinned.len())]
        .iter()
        .filter(|(i, _)| unkeyed(*i))
    {
        narrow_point(&mut region, i, v);
    }
    let region = regions.id(&region);
    slot(flows, order, key).root = Some(RootMemo {
        choice: (next, index),
        region,
    });
}

/// The most flows the established-flow table remembers unless `--max-flows` says otherwise
/// (the fast path's default too): beyond, the oldest flow is forgotten (after its debt is
/// paid), counted in `Executor::flow_evictions`.
pub(super) const DEFAULT_MAX_FLOWS: usize = 1 << 16;

/// The most regions kept (distinct boxes; each remembered path names one): beyond, the
/// table and the regions are emptied together.
pub(super) const MAX_REGIONS: usize = 1 << 16;

/// Slots of the seen-once filter (`SynthState::seen`) for a table of `max_flows` flows:
/// twice as many, a power of two, between 2^10 and 2^22 (8 KiB to 32 MiB of fingerprints),
/// so that a flow's second packet usually finds its first noted while the table could
/// hold the flows in between.
pub(super) fn seen_slots(max_flows: usize) -> usize {
    max_flows
        .saturating_mul(2)
        .clamp(1 << 10, 1 << 22)
        .next_power_of_two()
}

/// Whether the flow of `key` was seen before (its fingerprint is in its slot of `seen`);
/// if not, notes it. A slot holds the last flow that hashed there, so a flow whose slot
/// another flow took meanwhile is remembered one packet later: only speed depends on it.
/// An empty filter says yes.
#[inline]
pub(super) fn seen_again(seen: &mut [u64], key: u128) -> bool {
    let h = seen_fingerprint(key);
    let Some(s) = seen.get_mut(h as usize & seen.len().wrapping_sub(1)) else {
        return true;
    };
    if *s == h {
        return true;
    }
    *s = h;
    false
}

/// The fingerprint [`seen_again`] keeps of `key` (never 0, an empty slot).
#[inline]
fn seen_fingerprint(key: u128) -> u64 {
    elements::hash::splitmix64(key as u64 ^ elements::hash::splitmix64((key >> 64) as u64)) | 1
}

/// The slot of `seen` that [`seen_again`] looks at for `key` (reading the slots of a batch
/// one after the other, ahead of their checks, has their cache misses overlap where a check
/// per packet waits for each).
#[inline]
pub(super) fn seen_slot(seen: &[u64], key: u128) -> usize {
    seen_fingerprint(key) as usize & seen.len().wrapping_sub(1)
}

/// The entry of `key` in `flows`, made (and noted in `order` as the newest) when new.
#[inline]
fn slot<'a>(flows: &'a mut FlowTable, order: &mut VecDeque<u128>, key: u128) -> &'a mut FlowEntry {
    flows.entry(key).or_insert_with(|| {
        order.push_back(key);
        FlowEntry::default()
    })
}

/// The executor's flow table.
pub(super) type FlowTable =
    std::collections::HashMap<u128, FlowEntry, std::hash::BuildHasherDefault<FlowHasher>>;

/// The earliest time a rewriter of the program (`rewriters`, indices into `elements`)
/// reaps (0 when one has not scheduled its first reap yet: its next packet takes the slow
/// path and schedules it), and the sum of the rewriters' mapping changes.
fn guards_now(rewriters: &[u32], elements: &mut [Box<dyn elements::Element>]) -> (u64, u64) {
    let (mut t, mut c) = (u64::MAX, 0u64);
    for &g in rewriters {
        if let Some(rw) = elements.get_mut(g as usize).and_then(|e| e.stateful_flow()) {
            t = t.min(rw.next_reap().unwrap_or(0));
            c = c.wrapping_add(rw.changes());
        }
    }
    (t, c)
}

impl Executor {
    /// Runs `p`, arriving at entry element `el`, by its flow's remembered path if that path
    /// still holds for it; else `Err(known)`: it must take the slow path, and `known` says
    /// whether the flow has an entry (a root memo, hints) at all.
    pub(super) fn run_fast(
        &mut self,
        prog: &Program,
        el: u32,
        key: u128,
        p: &mut Packet,
    ) -> Result<ProgramEnd, bool> {
        let now = self.cx.now.0;
        let Executor {
            synth:
                SynthState {
                    flows,
                    flows_dirty,
                    start_of,
                    flow_hits,
                    regions,
                    guards,
                    rewriters,
                    quick_exits,
                    ..
                },
            elements,
            info: einfo,
            ..
        } = self;
        let Some(e) = flows.get_mut(&key) else {
            return Err(false);
        };
        let Some(f) = e.fast.as_mut() else {
            return Err(true);
        };
        let (deadline, epoch) = match *guards {
            Some(g) => g,
            None => {
                let g = guards_now(rewriters, elements);
                *guards = Some(g);
                g
            }
        };
        if now >= f.expiry || now >= deadline || f.pending == u32::MAX {
            return Err(true);
        }
        let steps = &e.steps;
        let mut serve = || -> Option<ProgramEnd> {
            let getters = &start_of.get(el as usize)?.as_ref()?.getters;
            let view = crate::program::frame(p.data());
            let inside = regions.contains(f.region, el, getters, &view)?;
            // `fast_info` also makes sure the flow key's ports are the packet's (a first
            // fragment, its transport header all there).
            let info = fast_info(p.data())?;
            if !inside || f.info.is_some_and(|i| i != info) {
                return None;
            }
            if f.epoch != epoch {
                // Some mapping changed since: are this path's still as they were?
                for (s, v) in steps.iter().zip(&f.versions) {
                    if elements[s.0 as usize].stateful_flow()?.version(s.1) != *v {
                        return None;
                    }
                }
                f.epoch = epoch;
            }
            *flow_hits += 1;
            f.seq = *flow_hits;
            f.pending += 1;
            if f.pending == 1 {
                flows_dirty.push(key);
            }
            f.last = now;
            f.expiry = now.saturating_add(f.life);
            if f.bytes {
                let d = p.data();
                let ip_len = u16::from_be_bytes([
                    d.get(16).copied().unwrap_or(0),
                    d.get(17).copied().unwrap_or(0),
                ]);
                f.pending_bytes.0 += d.len() as u64;
                f.pending_bytes.1 += u64::from(ip_len);
            }
            let end = prog.nodes.get(f.end as usize)?;
            if let (Some(Some(q)), Node::Exit { element, .. }) =
                (quick_exits.get(f.end as usize), end)
            {
                if q.apply(p, &f.regs) {
                    return Some(match einfo.get(*element as usize).map(|i| i.kind) {
                        Some(Kind::Exit(x)) => ProgramEnd::Exit(x),
                        _ => ProgramEnd::Gone,
                    });
                }
            }
            Some(super::leave(end, p, &f.regs, einfo))
        };
        serve().ok_or(true)
    }

    /// The root class the flow of `key` chose before, if `p` is in its region.
    pub(super) fn root_memo(&self, el: u32, key: u128, p: &Packet) -> Option<(NodeId, u32)> {
        let m = self.synth.flows.get(&key)?.root?;
        let getters = &self.synth.start_of.get(el as usize)?.as_ref()?.getters;
        let view = crate::program::frame(p.data());
        let region = self.synth.regions.boxes.get(m.region as usize)?;
        // The flow key's fields are the packet's only when its header is all there.
        fast_info(p.data())?;
        region
            .iter()
            .all(|(i, iv)| {
                let v = getters.get(usize::from(*i)).map_or(0, |g| g.get(&view));
                iv.iter().any(|&(lo, hi)| lo <= v && v <= hi)
            })
            .then_some(m.choice)
    }

    /// Pays what the packets served by remembered paths owe: the rewriters' state (counts,
    /// expiries, counters) and the nodes' counts, as if each packet had taken the slow path.
    pub(super) fn flush_flows(&mut self) {
        // The fast path's entries owe the same kind of debt.
        self.fast_settle();
        let Executor {
            synth:
                SynthState {
                    flows,
                    flows_dirty,
                    node_counts,
                    node_bytes,
                    byte_nodes,
                    ..
                },
            elements,
            nf_of,
            counts: Counters {
                nf_counters, drops, ..
            },
            ..
        } = self;
        // In the order of each path's last packet: two paths may touch one mapping (a
        // flow's two directions), and the later packet sets its expiry.
        if flows_dirty.len() > 1 {
            flows_dirty.sort_by_cached_key(|k| {
                flows
                    .get(k)
                    .and_then(|e| e.fast.as_ref())
                    .map_or(0, |f| f.seq)
            });
        }
        for k in flows_dirty.drain(..) {
            let Some(e) = flows.get_mut(&k) else { continue };
            let Some(f) = e.fast.as_mut() else { continue };
            if f.pending == 0 {
                continue;
            }
            if let Some(info) = f.info {
                for s in e.steps.iter().filter(|s| s.1 != NO_MAPPING) {
                    if let Some(rw) = elements[s.0 as usize].stateful_flow() {
                        rw.replay_n(s.1, s.2, info, f.last, f.pending);
                    }
                }
            }
            if let Some((el, reason)) = f.drop {
                if let Some(rw) = elements[el as usize].stateful_flow() {
                    rw.drop_n(f.pending);
                }
                let n = u64::from(f.pending);
                if let Some(c) = nf_of
                    .get(el as usize)
                    .and_then(|&i| nf_counters.get_mut(i as usize))
                {
                    c.dropped += n;
                }
                if let Some(d) = drops.get_mut(el as usize) {
                    match d.iter_mut().find(|(r, _)| *r == reason) {
                        Some((_, m)) => *m += n,
                        None => d.push((reason, n)),
                    }
                }
            }
            for &n in &f.path {
                if let Some(c) = node_counts.get_mut(n as usize) {
                    *c += u64::from(f.pending);
                }
                if f.bytes && byte_nodes.get(n as usize) == Some(&true) {
                    if let Some(b) = node_bytes.get_mut(n as usize) {
                        b.0 += f.pending_bytes.0;
                        b.1 += f.pending_bytes.1;
                    }
                }
            }
            f.pending = 0;
            f.pending_bytes = (0, 0);
        }
    }

    /// Makes room in the established-flow table for one more flow: below its bound
    /// (`SynthState::max_flows`) by forgetting the oldest flows (their debts paid first),
    /// and under [`MAX_REGIONS`] by forgetting every flow and region (counted in
    /// `Executor::flow_resets`). Each forgotten flow counts in `Executor::flow_evictions`.
    /// Only speed depends on it: a forgotten flow's next packet takes the slow path, which
    /// gives the same result.
    pub(super) fn bound_flows(&mut self) {
        if self.synth.regions.len() >= MAX_REGIONS {
            self.flush_flows();
            self.synth.flow_evictions += self.synth.flows.len() as u64;
            self.synth.flows.clear();
            self.synth.flow_order.clear();
            self.synth.regions.clear();
            self.synth.flow_resets += 1;
        }
        while self.synth.flows.len() >= self.synth.max_flows {
            let Some(k) = self.synth.flow_order.pop_front() else {
                break;
            };
            let owes = self
                .synth
                .flows
                .get(&k)
                .and_then(|e| e.fast.as_ref())
                .is_some_and(|f| f.pending > 0);
            if owes {
                self.flush_flows();
            }
            if self.synth.flows.remove(&k).is_some() {
                self.synth.flow_evictions += 1;
            }
        }
    }

    /// Remembers what the slow path just did for the packet of flow `key`: its path when it
    /// is sure to repeat, else its decisions as hints. The entry it replaces has paid its
    /// debt.
    pub(super) fn remember(&mut self, key: u128) {
        // A path without a rewriter decision paid nothing on its way: an entry it replaces
        // may still owe.
        if self
            .synth
            .flows
            .get(&key)
            .and_then(|e| e.fast.as_ref())
            .is_some_and(|f| f.pending > 0)
        {
            self.flush_flows();
        }
        let r = &self.synth.track;
        // A path through rewriters needs what the packet told them; a path without one
        // holds for any packet of the flow in its region.
        let mapped = r.record.iter().any(|s| s.1 != NO_MAPPING);
        let info = match (mapped, r.info) {
            (false, _) => Some(None),
            (true, Some(i)) => Some(Some(i)),
            (true, None) => None,
        };
        if r.cacheable {
            if let (Some(info), Some(end)) = (info, r.end) {
                let now = self.cx.now.0;
                let region = self.synth.regions.id(&r.region);
                let SynthState {
                    regs,
                    track: r,
                    flows,
                    flow_order,
                    byte_nodes,
                    ..
                } = &mut self.synth;
                let bytes = r
                    .path
                    .iter()
                    .any(|&n| byte_nodes.get(n as usize) == Some(&true));
                let e = slot(flows, flow_order, key);
                e.steps.clone_from(&r.record);
                // In place: the entry's vectors are reused.
                let f = e.fast.get_or_insert_with(Fast::default);
                f.region = region;
                f.info = info.map(|info| PacketInfo {
                    tcp_flags: info.tcp_flags & STATE_FLAGS,
                    has_payload: info.has_payload,
                });
                f.versions.clone_from(&r.versions);
                f.epoch = u64::MAX;
                f.path.clone_from(&r.path);
                f.bytes = bytes;
                f.end = end;
                f.drop = r.drop;
                f.regs.clone_from(regs);
                f.life = r.life;
                f.expiry = now.saturating_add(r.life);
                f.last = now;
                f.seq = 0;
                f.pending = 0;
                f.pending_bytes = (0, 0);
                return;
            }
        }
        if r.dirty && !r.record.is_empty() {
            let e = slot(&mut self.synth.flows, &mut self.synth.flow_order, key);
            e.steps.clone_from(&self.synth.track.record);
            e.fast = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the rewriters' own parse says: `fast_info` is `Some` exactly when both views of
    /// the packet parse as a first fragment long enough for the protocol, with its info.
    fn reference(data: &[u8]) -> Option<PacketInfo> {
        let a = super::super::flow_input(data, false)?;
        let b = super::super::flow_input(data, true)?;
        let min = if a.proto == wire::IpProtocol::TCP {
            18
        } else {
            8
        };
        (a.first_frag && a.tlen >= min && b.tlen >= min).then_some(PacketInfo {
            tcp_flags: a.info.tcp_flags & STATE_FLAGS,
            has_payload: a.info.has_payload,
        })
    }

    /// Sorted disjoint intervals over 0..64 from a bit mask.
    fn runs(mask: u64) -> Vec<(u128, u128)> {
        let mut out: Vec<(u128, u128)> = Vec::new();
        for v in 0..64u128 {
            if mask >> v & 1 == 1 {
                match out.last_mut() {
                    Some((_, h)) if *h + 1 == v => *h = v,
                    _ => out.push((v, v)),
                }
            }
        }
        out
    }

    #[test]
    fn a_remembered_flow_is_compact() {
        // A table slot (key and entry) holds the path and what its packets' writes read,
        // not the walk's scratch (`Track`): it was about 640 bytes with it.
        let slot = std::mem::size_of::<(u128, FlowEntry)>();
        assert!(slot <= 256, "{slot} bytes per slot");
        assert!(
            std::mem::size_of::<Regs>() <= 48,
            "{}",
            std::mem::size_of::<Regs>()
        );
    }

    #[test]
    fn a_flow_is_seen_again_only_after_it_was_noted() {
        let mut seen = vec![0u64; seen_slots(8)];
        assert_eq!(seen.len(), 1 << 10, "at least 2^10 slots");
        assert!(!seen_again(&mut seen, 42), "first packet: noted");
        assert!(seen_again(&mut seen, 42), "second packet: seen");
        assert!(!seen_again(&mut seen, 43), "another flow: noted");
        assert!(seen_again(&mut [], 7), "an empty filter says yes");
        assert_eq!(seen_slots(1 << 16), 1 << 17);
        assert_eq!(seen_slots(usize::MAX), 1 << 22);
    }

    proptest! {
        #[test]
        fn narrowing_is_the_intersection_per_field(
            boxes in proptest::collection::vec(proptest::collection::vec((0u16..6, any::<u64>()), 0..5), 1..5),
        ) {
            // Each box: up to 5 (field, value set) tests; the region after narrowing by
            // all of them holds, per field, the values every test on that field allows.
            let mut region = Vec::new();
            let mut want: std::collections::BTreeMap<u16, u64> = std::collections::BTreeMap::new();
            for b in &boxes {
                let tests: Vec<(u16, Vec<(u128, u128)>)> =
                    b.iter().map(|&(f, m)| (f, runs(m))).collect();
                // One test per field per box, as a class has.
                let mut seen = std::collections::BTreeSet::new();
                let tests: Vec<_> = tests.into_iter().filter(|(f, _)| seen.insert(*f)).collect();
                for (f, iv) in &tests {
                    let m = iv.iter().fold(0u64, |a, &(l, h)| a | (((1u128 << (h + 1)) - (1u128 << l)) as u64));
                    *want.entry(*f).or_insert(u64::MAX) &= m;
                }
                narrow(&mut region, &tests, |_| true);
            }
            let got: std::collections::BTreeMap<u16, u64> = region
                .iter()
                .map(|(f, iv)| (*f, iv.iter().fold(0u64, |a, &(l, h)| a | (((1u128 << (h + 1)) - (1u128 << l)) as u64))))
                .collect();
            prop_assert_eq!(got, want);
            prop_assert!(region.windows(2).all(|w| w[0].0 < w[1].0), "sorted by field");
        }

        #[test]
        fn fast_info_agrees_with_the_rewriters_parse(
            mut data in proptest::collection::vec(any::<u8>(), 0..120),
            ihl in 0u8..16,
            len in 0u16..130,
            tcp in any::<bool>(),
            frag in 0u16..3,
        ) {
            // Bias towards plausible headers so that both answers occur.
            if data.len() > 24 {
                data[14] = 0x40 | ihl;
                data[16..18].copy_from_slice(&len.to_be_bytes());
                data[20..22].copy_from_slice(&(frag * 0x1000).to_be_bytes());
                data[23] = if tcp { wire::IpProtocol::TCP } else { wire::IpProtocol::UDP };
            }
            prop_assert_eq!(fast_info(&data), reference(&data));
        }

        #[test]
        fn narrowing_to_a_point_is_narrowing_by_its_test(
            tests in proptest::collection::vec((0u16..4, any::<u64>()), 0..4),
            f in 0u16..5,
            v in 0u128..64,
        ) {
            let mut a = Vec::new();
            for (g, m) in &tests {
                narrow(&mut a, &[(*g, runs(*m))], |_| true);
            }
            let mut b = a.clone();
            narrow(&mut a, &[(f, vec![(v, v)])], |_| true);
            narrow_point(&mut b, f, v);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn regions_narrow_to_the_intersection(
            a in (0u128..100, 0u128..100), b in (0u128..100, 0u128..100), v in 0u128..100,
        ) {
            let (a, b) = ((a.0.min(a.1), a.0.max(a.1)), (b.0.min(b.1), b.0.max(b.1)));
            let mut r = Vec::new();
            narrow(&mut r, &[(3, vec![a])], |_| true);
            narrow(&mut r, &[(3, vec![b])], |_| true);
            let inside = r[0].1.iter().any(|&(lo, hi)| lo <= v && v <= hi);
            prop_assert_eq!(inside, a.0 <= v && v <= a.1 && b.0 <= v && v <= b.1);
        }
    }
}
