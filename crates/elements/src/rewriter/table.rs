//! The mapping table shared by the rewriters: flows stored under both directions' flow
//! identifiers, their expiry on the virtual clock, and the allocator that picks a new flow's
//! rewritten identifier from a pattern (Click's `IPRewriterPattern::rewrite_flowid`).

use super::pattern::{Choice, Pattern, Vary};
use crate::hash::{splitmix64, FlowHasher, Fnv};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::Ipv4Addr;

/// A flow identifier: source address and port, destination address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId {
    /// Source address.
    pub saddr: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination address.
    pub daddr: Ipv4Addr,
    /// Destination port.
    pub dport: u16,
}

impl FlowId {
    /// The identifier of the opposite direction.
    pub fn reverse(&self) -> FlowId {
        FlowId {
            saddr: self.daddr,
            sport: self.dport,
            daddr: self.saddr,
            dport: self.sport,
        }
    }

    /// The four fields as values, in this order: source address, source port, destination
    /// address, destination port (what synthesized programs keep in a flow register).
    #[inline]
    pub fn values(&self) -> [u128; 4] {
        [
            u128::from(u32::from(self.saddr)),
            u128::from(self.sport),
            u128::from(u32::from(self.daddr)),
            u128::from(self.dport),
        ]
    }

    fn bytes(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.saddr.octets());
        b[4..6].copy_from_slice(&self.sport.to_be_bytes());
        b[6..10].copy_from_slice(&self.daddr.octets());
        b[10..12].copy_from_slice(&self.dport.to_be_bytes());
        b
    }
}

/// Which direction of a flow a table entry stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The direction that created the mapping (rewritten to `Flow::rewritten`, sent to
    /// `Flow::foutput`).
    Forward,
    /// The reply direction (rewritten back to the original flow, sent to `Flow::routput`).
    Reply,
}

/// The timeouts (nanoseconds of virtual time) that decide when a mapping expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP flows that carried data both ways (`TCP_TIMEOUT`, default 24 hours).
    pub tcp: u64,
    /// TCP flows closed by FIN both ways or RST (`TCP_DONE_TIMEOUT`, default 4 minutes).
    pub tcp_done: u64,
    /// Other TCP flows (`TCP_NODATA_TIMEOUT`, default 5 minutes).
    pub tcp_nodata: u64,
    /// Minimum lifetime after each packet of a TCP flow (`TCP_GUARANTEE`, default 5 s).
    pub tcp_guarantee: u64,
    /// UDP (and other) flows (`UDP_TIMEOUT`, default 5 minutes).
    pub udp: u64,
    /// UDP flows with at least 3 packets and traffic both ways (`UDP_STREAMING_TIMEOUT`,
    /// default the UDP timeout).
    pub udp_streaming: u64,
    /// Minimum lifetime after each packet of a UDP flow (`UDP_GUARANTEE`, default 5 s).
    pub udp_guarantee: u64,
}

const SEC: u64 = 1_000_000_000;

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            tcp: 86_400 * SEC,
            tcp_done: 240 * SEC,
            tcp_nodata: 300 * SEC,
            tcp_guarantee: 5 * SEC,
            udp: 300 * SEC,
            udp_streaming: 300 * SEC,
            udp_guarantee: 5 * SEC,
        }
    }
}

const TCP_FWD_DONE: u8 = 1;
const TCP_REP_DONE: u8 = 2;
const TCP_FWD_DATA: u8 = 4;
const TCP_REP_DATA: u8 = 8;

/// One mapping: a flow, what its packets become, and where they go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// IP protocol of the flow.
    pub proto: u8,
    /// The flow identifier of the packets that created the mapping.
    pub original: FlowId,
    /// What those packets are rewritten to.
    pub rewritten: FlowId,
    /// Output for forward packets.
    pub foutput: u16,
    /// Output for reply packets.
    pub routput: u16,
    /// The rewriter input whose specification created the mapping.
    pub input: u16,
    /// Virtual time (ns) after which the mapping is gone.
    pub expiry: u64,
    /// Virtual time (ns) until which the mapping may not be evicted to make room.
    pub guaranteed_until: u64,
    tcp_flags: u8,
    packets: u32,
    reply_seen: bool,
}

impl Flow {
    /// The identifier packets of `dir` are rewritten to.
    pub fn rewrite_for(&self, dir: Direction) -> FlowId {
        match dir {
            Direction::Forward => self.rewritten,
            Direction::Reply => self.original.reverse(),
        }
    }

    /// The output packets of `dir` are sent to.
    pub fn output_for(&self, dir: Direction) -> usize {
        match dir {
            Direction::Forward => usize::from(self.foutput),
            Direction::Reply => usize::from(self.routput),
        }
    }
}

/// What a packet tells the table about its flow's state (for the TCP timeouts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketInfo {
    /// TCP flags (0 for other protocols).
    pub tcp_flags: u8,
    /// True if the packet carries payload.
    pub has_payload: bool,
}

/// The FNV-1a hash of a rewriter's qualified name: the seed of its pseudo-random choices.
pub fn name_seed(name: &str) -> u64 {
    let mut h = Fnv::default();
    h.write(name.as_bytes());
    h.finish()
}

/// The pseudo-random value a rewriter seeded with `seed` uses for a new flow: splitmix64 of
/// FNV-1a over the seed, the protocol and the flow's 12 identifier bytes. Fixed, so runs repeat.
pub fn flow_random(seed: u64, proto: u8, flow: &FlowId) -> u64 {
    let mut h = Fnv::with_basis(seed);
    h.write(&[proto]);
    h.write(&flow.bytes());
    splitmix64(h.finish())
}

/// Per-pattern allocation state (Click's `_next_variation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PatternState {
    /// The range offset a sequential (`#`) allocation tries first.
    pub next: u32,
}

/// A map key: map id and flow identifier packed in 104 bits.
type Key = u128;

/// The key of `flow` in map `map_id`.
#[inline]
fn key(map_id: u8, flow: &FlowId) -> Key {
    (u128::from(map_id) << 96)
        | (u128::from(u32::from(flow.saddr)) << 64)
        | (u128::from(flow.sport) << 48)
        | (u128::from(u32::from(flow.daddr)) << 16)
        | u128::from(flow.dport)
}

/// The number of mappings a rewriter holds when `MAPPING_CAPACITY` is not given (Click's
/// default is unlimited): 2^18, about 64 MB of mappings, so that a flood of new flows
/// cannot grow a rewriter without bound.
pub const DEFAULT_CAPACITY: usize = 1 << 18;

/// A lazily kept min-heap of (time, slot) pairs: a slot's entry may be out of date (its
/// flow's time moved, or the flow is gone), and is checked against the flow when it comes
/// to the top. Kept so that every live flow has an entry whose time is at most its current
/// time: the first entry at the top that matches its flow is the live flow with the
/// smallest (time, slot).
type LazyHeap = BinaryHeap<Reverse<(u64, u32)>>;

/// The mapping table: flows indexed under (map id, flow identifier) for both directions.
///
/// `map id` separates tables the way Click does: `IPRewriter` keeps TCP (0) and UDP (1)
/// apart, `TCPRewriter` and `UDPRewriter` use one map (0). Expiry is on the virtual clock:
/// an expired mapping is removed when a lookup finds it and by [`MappingTable::reap`].
///
/// The table holds at most `capacity` flows. A new flow beyond it first reaps the expired
/// ones, then evicts the flow that expires first among those whose guarantee has passed
/// (ties: the lowest slot), or is refused when every flow is still guaranteed (Click's
/// `IPRewriterBase::store_flow`). Finding the victim and reaping cost a logarithm of the
/// table's size per flow or packet concerned (lazily kept heaps: every flow by expiry, the
/// guaranteed ones by the end of their guarantee, the others by expiry, as Click keeps
/// them), nothing per packet but a comparison when a packet shortens a flow's lifetime.
#[derive(Debug, Clone)]
pub struct MappingTable {
    map: HashMap<Key, (u32, Direction), BuildHasherDefault<FlowHasher>>,
    flows: Vec<Option<(u8, Flow)>>,
    /// Per slot: bumped whenever the slot's flow goes away or changes in anything but its
    /// packet count and expiry (see [`MappingTable::version`]).
    versions: Vec<u32>,
    /// Version bumps so far, over all slots.
    changes: u64,
    free: Vec<u32>,
    timeouts: Timeouts,
    capacity: usize,
    active: usize,
    reap_interval: u64,
    next_reap: Option<u64>,
    created: u64,
    evicted: u64,
    refused: u64,
    /// Live flows by expiry (see [`LazyHeap`]).
    by_expiry: LazyHeap,
    /// Live flows by the end of their guarantee, until it has passed (see [`LazyHeap`]).
    by_guarantee: LazyHeap,
    /// Live flows whose guarantee has passed, by expiry (see [`LazyHeap`]).
    best_effort: LazyHeap,
    /// Whether TCP flows follow the TCP state and timeouts (else every flow is timed out
    /// as UDP: `UDPRewriter`).
    tcp_state: bool,
}

impl MappingTable {
    /// An empty table with these timeouts, at most `capacity` flows, reaped every
    /// `reap_interval` ns of virtual time (0: never).
    pub fn new(timeouts: Timeouts, capacity: usize, reap_interval: u64) -> MappingTable {
        MappingTable {
            map: HashMap::default(),
            flows: Vec::new(),
            versions: Vec::new(),
            changes: 0,
            free: Vec::new(),
            timeouts,
            capacity: capacity.max(1),
            active: 0,
            reap_interval,
            next_reap: None,
            created: 0,
            evicted: 0,
            refused: 0,
            by_expiry: BinaryHeap::new(),
            by_guarantee: BinaryHeap::new(),
            best_effort: BinaryHeap::new(),
            tcp_state: true,
        }
    }

    /// The table with every flow timed out as UDP, TCP included, its flags never read:
    /// Click's `UDPRewriter`, whose flows are all `UDPFlow`s (`UDP_TIMEOUT`/`TIMEOUT`, the
    /// streaming timeout after 3 packets with one reply, `UDP_GUARANTEE`).
    pub fn udp_timeouts_only(mut self) -> MappingTable {
        self.tcp_state = false;
        self
    }

    /// The most flows the table holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// Number of live flows (each counts once although it has two entries).
    pub fn len(&self) -> usize {
        self.active
    }

    /// True when no flow is mapped.
    pub fn is_empty(&self) -> bool {
        self.active == 0
    }

    /// Flows created since the table was made.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// Flows evicted to make room under the capacity.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// New flows refused because the table was full of guaranteed flows.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The map id of the flow with index `idx`, if it is alive.
    pub fn map_of(&self, idx: usize) -> Option<u8> {
        self.flows.get(idx).and_then(|f| f.as_ref()).map(|f| f.0)
    }

    /// The flow with index `idx` (as returned by [`MappingTable::lookup`]).
    pub fn flow(&self, idx: usize) -> Option<&Flow> {
        self.flows.get(idx).and_then(|f| f.as_ref()).map(|f| &f.1)
    }

    /// Every live flow with its map id, in index order.
    pub fn flows(&self) -> impl Iterator<Item = (u8, &Flow)> {
        self.flows
            .iter()
            .filter_map(|f| f.as_ref().map(|(m, f)| (*m, f)))
    }

    fn remove(&mut self, idx: u32) {
        if let Some(Some((map_id, f))) = self.flows.get_mut(idx as usize).map(Option::take) {
            let fwd = key(map_id, &f.original);
            let rep = key(map_id, &f.rewritten.reverse());
            if self.map.get(&fwd).is_some_and(|e| e.0 == idx) {
                self.map.remove(&fwd);
            }
            if self.map.get(&rep).is_some_and(|e| e.0 == idx) {
                self.map.remove(&rep);
            }
            self.free.push(idx);
            self.active -= 1;
            self.bump(idx as usize);
        }
    }

    fn bump(&mut self, idx: usize) {
        if let Some(v) = self.versions.get_mut(idx) {
            *v = v.wrapping_add(1);
            self.changes += 1;
        }
    }

    /// How many times a slot's version has changed: while this stays the same, every
    /// version does.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The version of slot `idx`: it changes whenever the slot's flow is removed or
    /// replaced, or a packet changes the flow's TCP state, reply flag or timeout. A caller
    /// that remembers (index, version) knows, while the version is unchanged, that the
    /// mapping is the same and that packets like the last one change only its packet
    /// count and expiry (see [`MappingTable::steady`]).
    pub fn version(&self, idx: usize) -> u32 {
        self.versions.get(idx).copied().unwrap_or(u32::MAX)
    }

    /// The next time a packet's [`MappingTable::maybe_reap`] reaps (`None`: not scheduled
    /// yet; `Some(u64::MAX)`: never).
    pub fn next_reap(&self) -> Option<u64> {
        if self.reap_interval == 0 {
            return Some(u64::MAX);
        }
        self.next_reap
    }

    fn expired(&self, idx: u32, now: u64) -> bool {
        self.flows
            .get(idx as usize)
            .and_then(|f| f.as_ref())
            .is_some_and(|(_, f)| now >= f.expiry)
    }

    /// Looks up `flow` in map `map_id`: the flow's index and the direction, or `None`.
    /// An expired mapping found here is removed and reported as absent.
    pub fn lookup(&mut self, map_id: u8, flow: &FlowId, now: u64) -> Option<(usize, Direction)> {
        let (idx, dir) = *self.map.get(&key(map_id, flow))?;
        if self.expired(idx, now) {
            self.remove(idx);
            return None;
        }
        Some((idx as usize, dir))
    }

    /// True if no live mapping uses `flow` in map `map_id`.
    pub fn is_free(&mut self, map_id: u8, flow: &FlowId, now: u64) -> bool {
        self.lookup(map_id, flow, now).is_none()
    }

    /// Removes every expired mapping if the reap interval has passed (call at each packet).
    pub fn maybe_reap(&mut self, now: u64) {
        if self.reap_interval == 0 {
            return;
        }
        match self.next_reap {
            None => self.next_reap = Some(now.saturating_add(self.reap_interval)),
            Some(t) if now >= t => {
                self.reap(now);
                self.next_reap = Some(now.saturating_add(self.reap_interval));
            }
            Some(_) => {}
        }
    }

    /// Removes every expired mapping (in order of expiry, then slot).
    pub fn reap(&mut self, now: u64) {
        while let Some(idx) = self.earliest(now) {
            self.remove(idx);
        }
    }

    /// The live flow with the smallest (expiry, slot) if it has expired at `now`.
    fn earliest(&mut self, now: u64) -> Option<u32> {
        while let Some(&Reverse((t, idx))) = self.by_expiry.peek() {
            if t > now {
                return None;
            }
            self.by_expiry.pop();
            let Some(Some((_, f))) = self.flows.get(idx as usize) else {
                continue;
            };
            if f.expiry == t {
                return Some(idx);
            }
            if f.expiry > t {
                self.by_expiry.push(Reverse((f.expiry, idx)));
            }
        }
        None
    }

    /// Moves the flows whose guarantee has passed at `now` from the guarantee heap to the
    /// best-effort heap (Click's `shift_heap_best_effort`).
    fn shift_best_effort(&mut self, now: u64) {
        while let Some(&Reverse((t, idx))) = self.by_guarantee.peek() {
            if t > now {
                return;
            }
            self.by_guarantee.pop();
            let Some(Some((_, f))) = self.flows.get(idx as usize) else {
                continue;
            };
            if f.guaranteed_until > t {
                self.by_guarantee.push(Reverse((f.guaranteed_until, idx)));
            } else if f.guaranteed_until == t {
                self.best_effort.push(Reverse((f.expiry, idx)));
            }
        }
    }

    /// The flow to evict at `now`: the one that expires first (then the lowest slot) among
    /// those whose guarantee has passed; `None` when every flow is guaranteed.
    fn victim(&mut self, now: u64) -> Option<u32> {
        self.shift_best_effort(now);
        while let Some(Reverse((t, idx))) = self.best_effort.pop() {
            let Some(Some((_, f))) = self.flows.get(idx as usize) else {
                continue;
            };
            if f.expiry != t {
                // Out of date: a later expiry is queued again; an earlier one already was.
                if f.expiry > t {
                    self.best_effort.push(Reverse((f.expiry, idx)));
                }
                continue;
            }
            if f.guaranteed_until > now {
                // A packet renewed its guarantee: back to the guarantee heap.
                self.by_guarantee.push(Reverse((f.guaranteed_until, idx)));
                continue;
            }
            return Some(idx);
        }
        None
    }

    /// Records the times of flow `idx` in the heaps when they are earlier than the ones its
    /// entries hold (`old`: its expiry and guarantee before; `None` for a new flow).
    ///
    /// Kept so that every live flow has an entry in `by_expiry` at most its expiry, and an
    /// entry in `by_guarantee` at most its guarantee or (once its guarantee has passed) one
    /// in `best_effort` at most its expiry; entries are checked against their flow when
    /// they come to the top.
    fn queue(&mut self, idx: u32, old: Option<(u64, u64)>) {
        let Some(Some((_, f))) = self.flows.get(idx as usize) else {
            return;
        };
        let (e, g) = (f.expiry, f.guaranteed_until);
        if old.is_none_or(|(oe, _)| e < oe) {
            self.by_expiry.push(Reverse((e, idx)));
            if old.is_some() {
                self.best_effort.push(Reverse((e, idx)));
            }
        }
        if old.is_none_or(|(_, og)| g < og) {
            self.by_guarantee.push(Reverse((g, idx)));
        }
        // Entries of flows that are gone or changed linger: rebuild when they outnumber
        // the flows.
        let most = 2 * self.active + 64;
        if self.by_expiry.len() > most
            || self.by_guarantee.len() > most
            || self.best_effort.len() > most
        {
            self.rebuild_heaps();
        }
    }

    fn rebuild_heaps(&mut self) {
        let live = || {
            self.flows
                .iter()
                .enumerate()
                .filter_map(|(i, f)| f.as_ref().map(|(_, f)| (i as u32, f)))
        };
        let e: Vec<_> = live().map(|(i, f)| Reverse((f.expiry, i))).collect();
        let g: Vec<_> = live()
            .map(|(i, f)| Reverse((f.guaranteed_until, i)))
            .collect();
        self.by_expiry = BinaryHeap::from(e);
        self.by_guarantee = BinaryHeap::from(g);
        self.best_effort = BinaryHeap::new();
    }

    /// Chooses the rewritten identifier of a new flow `flow` from `pattern` (Click's
    /// `IPRewriterPattern::rewrite_flowid`): fixed fields are set, and a ranged field takes
    /// the first value whose reply identifier is free in map `map_id`, starting from the
    /// packet's own value (no suffix, if in range and free), the next sequential offset
    /// (`#`) or offset `random % (range size)` (no suffix, `?`). `None` when the range is
    /// exhausted.
    pub fn allocate(
        &mut self,
        map_id: u8,
        pattern: &Pattern,
        state: &mut PatternState,
        flow: &FlowId,
        random: u64,
        now: u64,
    ) -> Option<FlowId> {
        let mut rw = *flow;
        if let Some(a) = pattern.saddr {
            rw.saddr = a;
        }
        if let Some(p) = pattern.sport {
            rw.sport = p;
        }
        if let Some(a) = pattern.daddr {
            rw.daddr = a;
        }
        if let Some(p) = pattern.dport {
            rw.dport = p;
        }
        let (base, top, own): (u32, u32, u32) = match pattern.vary {
            Vary::None => return Some(rw),
            Vary::SourceAddr { base, top } => (u32::from(base), top, u32::from(flow.saddr)),
            Vary::SourcePort { base, top } => {
                (u32::from(base), u32::from(top), u32::from(flow.sport))
            }
        };
        let is_port = matches!(pattern.vary, Vary::SourcePort { .. });
        let candidate = |v: u32| -> FlowId {
            let mut c = rw;
            if is_port {
                c.sport = base.wrapping_add(v) as u16;
            } else {
                c.saddr = Ipv4Addr::from(base.wrapping_add(v));
            }
            c
        };
        if pattern.choice == Choice::PreferOwn {
            let v = own.wrapping_sub(base);
            if v <= top {
                let c = candidate(v);
                if self.is_free(map_id, &c.reverse(), now) {
                    state.next = v.wrapping_add(1);
                    return Some(c);
                }
            }
        }
        let mut v = match pattern.choice {
            Choice::Sequential => {
                if state.next > top {
                    0
                } else {
                    state.next
                }
            }
            _ => (random % (u64::from(top) + 1)) as u32,
        };
        let mut count: u64 = 0;
        while count <= u64::from(top) {
            let c = candidate(v);
            if self.is_free(map_id, &c.reverse(), now) {
                state.next = v.wrapping_add(1);
                return Some(c);
            }
            v = if v == top { 0 } else { v + 1 };
            count += 1;
        }
        None
    }

    fn timeout_of(&self, f: &Flow) -> (u64, u64) {
        let t = &self.timeouts;
        if f.proto == wire::ipv4::protocol::TCP && self.tcp_state {
            let done = f.tcp_flags & (TCP_FWD_DONE | TCP_REP_DONE) == TCP_FWD_DONE | TCP_REP_DONE;
            let data = f.tcp_flags & (TCP_FWD_DATA | TCP_REP_DATA) == TCP_FWD_DATA | TCP_REP_DATA;
            let to = if done {
                t.tcp_done
            } else if data {
                t.tcp
            } else {
                t.tcp_nodata
            };
            (to, t.tcp_guarantee)
        } else {
            let streaming = f.packets >= 3 && f.reply_seen;
            (
                if streaming { t.udp_streaming } else { t.udp },
                t.udp_guarantee,
            )
        }
    }

    /// Installs a flow `original` → `rewritten` in map `map_id` (forward entry under
    /// `original`, reply entry under the reverse of `rewritten`); a mapping already holding
    /// either identifier is replaced, as Click does. Makes room under the capacity by evicting
    /// the non-guaranteed flow that expires first; returns `None` (the new flow is refused)
    /// when every flow is still guaranteed.
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &mut self,
        map_id: u8,
        proto: u8,
        original: FlowId,
        rewritten: FlowId,
        foutput: usize,
        routput: usize,
        input: usize,
        now: u64,
    ) -> Option<usize> {
        for k in [key(map_id, &original), key(map_id, &rewritten.reverse())] {
            if let Some(&(idx, _)) = self.map.get(&k) {
                self.remove(idx);
            }
        }
        if self.active >= self.capacity {
            self.reap(now);
        }
        if self.active >= self.capacity {
            match self.victim(now) {
                Some(v) => {
                    self.remove(v);
                    self.evicted += 1;
                }
                None => {
                    self.refused += 1;
                    return None;
                }
            }
        }
        let mut f = Flow {
            proto,
            original,
            rewritten,
            // Ports and inputs are small (a rewriter has a handful): kept narrow so that a
            // mapping fits in one cache line.
            foutput: foutput.min(usize::from(u16::MAX)) as u16,
            routput: routput.min(usize::from(u16::MAX)) as u16,
            input: input.min(usize::from(u16::MAX)) as u16,
            expiry: now,
            guaranteed_until: now,
            tcp_flags: 0,
            packets: 0,
            reply_seen: false,
        };
        let (to, g) = self.timeout_of(&f);
        f.expiry = now.saturating_add(to.max(g));
        f.guaranteed_until = now.saturating_add(g);
        let idx = match self.free.pop() {
            Some(i) => {
                if let Some(slot) = self.flows.get_mut(i as usize) {
                    *slot = Some((map_id, f));
                }
                i
            }
            None => {
                self.flows.push(Some((map_id, f)));
                self.versions.push(0);
                (self.flows.len() - 1) as u32
            }
        };
        self.map
            .insert(key(map_id, &original), (idx, Direction::Forward));
        self.map
            .insert(key(map_id, &rewritten.reverse()), (idx, Direction::Reply));
        self.active += 1;
        self.created += 1;
        self.queue(idx, None);
        Some(idx as usize)
    }

    /// Records a packet of flow `idx` in direction `dir` at `now`: updates the TCP state
    /// (RST marks both directions done, else FIN its direction, else a SYN or payload
    /// reopens its direction; payload marks data seen) or the UDP packet count, and pushes the expiry to `now` plus the flow's
    /// timeout (never less than its guarantee).
    pub fn touch(&mut self, idx: usize, dir: Direction, info: PacketInfo, now: u64) {
        self.touch_n(idx, dir, info, now, 1);
    }

    /// `n` packets like `info` of flow `idx` in direction `dir`, the last at `now`: what
    /// `n` calls of [`MappingTable::touch`] do when the flow is steady for such packets
    /// (see [`MappingTable::steady`]) and time does not go back, in one call.
    pub fn touch_n(&mut self, idx: usize, dir: Direction, info: PacketInfo, now: u64, n: u32) {
        let Some(Some((_, f0))) = self.flows.get(idx) else {
            return;
        };
        let f = self.touched(f0, dir, info, now, n);
        let changed = f.tcp_flags != f0.tcp_flags
            || f.reply_seen != f0.reply_seen
            || self.timeout_of(&f) != self.timeout_of(f0);
        let old = (f0.expiry, f0.guaranteed_until);
        let earlier = f.expiry < old.0 || f.guaranteed_until < old.1;
        if let Some(Some(slot)) = self.flows.get_mut(idx) {
            slot.1 = f;
        }
        if earlier {
            self.queue(idx as u32, Some(old));
        }
        if changed {
            self.bump(idx);
        }
    }

    /// Flow `f` after `n` packets like `info` in direction `dir`, the last at `now`.
    fn touched(&self, f: &Flow, dir: Direction, info: PacketInfo, now: u64, n: u32) -> Flow {
        let mut f = f.clone();
        let shift = if dir == Direction::Forward { 0 } else { 1 };
        if f.proto == wire::ipv4::protocol::TCP && self.tcp_state {
            use wire::tcp::flags::{FIN, RST, SYN};
            if info.tcp_flags & RST != 0 {
                f.tcp_flags |= TCP_FWD_DONE | TCP_REP_DONE;
            } else if info.tcp_flags & FIN != 0 {
                f.tcp_flags |= TCP_FWD_DONE << shift;
            } else if info.tcp_flags & SYN != 0 || info.has_payload {
                // Click's `TCPFlow::apply`: a SYN or data reopens its direction.
                f.tcp_flags &= !(TCP_FWD_DONE << shift);
            }
            if info.has_payload {
                f.tcp_flags |= TCP_FWD_DATA << shift;
            }
        } else {
            f.packets = f.packets.saturating_add(n);
            if dir == Direction::Reply {
                f.reply_seen = true;
            }
        }
        let (to, g) = self.timeout_of(&f);
        f.expiry = now.saturating_add(to.max(g));
        f.guaranteed_until = now.saturating_add(g);
        f
    }

    /// Whether any number of further packets like `info` in direction `dir` change flow
    /// `idx` only in its packet count and expiry (its TCP state, reply flag and timeout
    /// stay): then the lifetime one such packet gives the flow, else `None`.
    pub fn steady(&self, idx: usize, dir: Direction, info: PacketInfo) -> Option<u64> {
        let f = self.flow(idx)?;
        // The timeout depends on the packet count only below 3 (UDP streaming).
        let g = self.touched(f, dir, info, 0, 3);
        let same = g.tcp_flags == f.tcp_flags
            && g.reply_seen == f.reply_seen
            && self.timeout_of(&g) == self.timeout_of(f);
        same.then(|| {
            let (to, g) = self.timeout_of(f);
            to.max(g)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fid(a: [u8; 4], sp: u16, b: [u8; 4], dp: u16) -> FlowId {
        FlowId {
            saddr: Ipv4Addr::from(a),
            sport: sp,
            daddr: Ipv4Addr::from(b),
            dport: dp,
        }
    }

    fn port_pattern(base: u16, top: u16, choice: Choice) -> Pattern {
        Pattern {
            saddr: Some(Ipv4Addr::new(10, 0, 0, 1)),
            sport: Some(base),
            daddr: None,
            dport: None,
            vary: Vary::SourcePort { base, top },
            choice,
        }
    }

    #[test]
    fn prefer_own_then_wrap() {
        let mut t = MappingTable::new(Timeouts::default(), usize::MAX, 0);
        let p = port_pattern(1000, 2, Choice::PreferOwn);
        let mut st = PatternState::default();
        let f = fid([192, 168, 0, 1], 1001, [8, 8, 8, 8], 53);
        let r = t.allocate(0, &p, &mut st, &f, 0, 0).unwrap();
        assert_eq!((r.saddr, r.sport), (Ipv4Addr::new(10, 0, 0, 1), 1001));
        t.insert(0, 17, f, r, 0, 1, 0, 0).unwrap();
        // Same source port from another host: 1001 is taken, random start 2 -> 1002.
        let g = fid([192, 168, 0, 2], 1001, [8, 8, 8, 8], 53);
        let r2 = t.allocate(0, &p, &mut st, &g, 2, 0).unwrap();
        assert_eq!(r2.sport, 1002);
        t.insert(0, 17, g, r2, 0, 1, 0, 0).unwrap();
        // Random start 1 (taken) -> 1002 (taken) -> wraps to 1000.
        let h = fid([192, 168, 0, 3], 1001, [8, 8, 8, 8], 53);
        let r3 = t.allocate(0, &p, &mut st, &h, 1, 0).unwrap();
        assert_eq!(r3.sport, 1000);
        t.insert(0, 17, h, r3, 0, 1, 0, 0).unwrap();
        let k = fid([192, 168, 0, 4], 7, [8, 8, 8, 8], 53);
        assert_eq!(t.allocate(0, &p, &mut st, &k, 0, 0), None);
    }

    #[test]
    fn sequential_and_random_ignore_own_port() {
        let mut t = MappingTable::new(Timeouts::default(), usize::MAX, 0);
        let p = port_pattern(5000, 9, Choice::Sequential);
        let mut st = PatternState::default();
        let mut got = Vec::new();
        for i in 0..3u8 {
            let f = fid([192, 168, 0, i], 5005, [1, 1, 1, 1], 80);
            let r = t.allocate(0, &p, &mut st, &f, 7, 0).unwrap();
            t.insert(0, 6, f, r, 0, 0, 0, 0).unwrap();
            got.push(r.sport);
        }
        assert_eq!(got, vec![5000, 5001, 5002]);
        let p = port_pattern(6000, 9, Choice::Random);
        let f = fid([192, 168, 1, 1], 6005, [1, 1, 1, 1], 80);
        let r = t
            .allocate(0, &p, &mut PatternState::default(), &f, 13, 0)
            .unwrap();
        assert_eq!(r.sport, 6003); // 13 % 10
    }

    #[test]
    fn expiry_is_lazy_and_reaped() {
        let to = Timeouts {
            udp: 10,
            udp_guarantee: 0,
            udp_streaming: 10,
            ..Timeouts::default()
        };
        let mut t = MappingTable::new(to, usize::MAX, 100);
        let f = fid([1, 1, 1, 1], 1, [2, 2, 2, 2], 2);
        let i = t.insert(0, 17, f, f, 0, 0, 0, 0).unwrap();
        assert_eq!(t.lookup(0, &f, 9), Some((i, Direction::Forward)));
        t.touch(i, Direction::Forward, PacketInfo::default(), 9);
        assert!(t.lookup(0, &f.reverse(), 18).is_some());
        assert!(t.lookup(0, &f, 19).is_none());
        assert!(t.is_empty());
        let g = fid([3, 3, 3, 3], 1, [2, 2, 2, 2], 2);
        t.insert(0, 17, g, g, 0, 0, 0, 0).unwrap();
        t.maybe_reap(0);
        t.maybe_reap(50);
        assert_eq!(t.len(), 1);
        t.maybe_reap(100);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn capacity_evicts_unguaranteed_or_refuses() {
        let to = Timeouts {
            udp: 100,
            udp_guarantee: 10,
            udp_streaming: 100,
            ..Timeouts::default()
        };
        let mut t = MappingTable::new(to, 1, 0);
        let f = fid([1, 1, 1, 1], 1, [2, 2, 2, 2], 2);
        let g = fid([3, 3, 3, 3], 1, [2, 2, 2, 2], 2);
        t.insert(0, 17, f, f, 0, 0, 0, 0).unwrap();
        assert_eq!(t.insert(0, 17, g, g, 0, 0, 0, 5), None);
        assert!(t.insert(0, 17, g, g, 0, 0, 0, 20).is_some());
        assert_eq!(t.evicted(), 1);
        assert!(t.lookup(0, &f, 20).is_none());
    }

    /// The old rule, by brute force: the live flow with the smallest (expiry, slot) among
    /// those whose guarantee has passed.
    fn reference_victim(t: &MappingTable, now: u64) -> Option<usize> {
        (0..t.flows.len())
            .filter_map(|i| t.flow(i).map(|f| (i, f)))
            .filter(|(_, f)| f.guaranteed_until <= now)
            .min_by_key(|(i, f)| (f.expiry, *i))
            .map(|(i, _)| i)
    }

    proptest::proptest! {
        #[test]
        fn eviction_and_reaping_match_the_brute_force_rule(
            ops in proptest::collection::vec((0u8..4, 0u16..24, 0u64..40, proptest::bool::ANY), 1..200),
            cap in 1usize..8,
        ) {
            // Short timeouts of several classes (TCP data, done, no data; UDP), so that
            // expiries and guarantees cross, and flows shorten their lifetime by FIN/RST.
            let to = Timeouts {
                tcp: 30,
                tcp_done: 4,
                tcp_nodata: 12,
                tcp_guarantee: 6,
                udp: 9,
                udp_streaming: 20,
                udp_guarantee: 3,
            };
            let mut t = MappingTable::new(to, cap, 0);
            let mut now = 0u64;
            for (op, host, dt, flag) in ops {
                now += dt % 7;
                let proto = if host % 2 == 0 { 6 } else { 17 };
                let f = fid([10, 0, 0, host as u8], 1, [2, 2, 2, 2], 2);
                match op {
                    0 | 1 => {
                        // The old rule on a copy: replace the flow's own mapping, reap
                        // everything expired when full, then evict by brute force.
                        let mut r = t.clone();
                        if let Some(&(i, _)) = r.map.get(&key(0, &f)) {
                            r.remove(i);
                        }
                        if r.len() >= r.capacity() {
                            let expired: Vec<u32> = (0..r.flows.len() as u32)
                                .filter(|&i| r.expired(i, now))
                                .collect();
                            for i in expired {
                                r.remove(i);
                            }
                        }
                        let want = (r.len() >= r.capacity()).then(|| reference_victim(&r, now));
                        if let Some(Some(v)) = want {
                            r.remove(v as u32);
                        }
                        let got = t.insert(0, proto, f, f.reverse(), 0, 1, 0, now);
                        proptest::prop_assert_eq!(got.is_none(), want == Some(None));
                        let live = |m: &MappingTable| {
                            let mut v: Vec<FlowId> = m.flows().map(|(_, g)| g.original).collect();
                            v.sort();
                            v
                        };
                        let mut expect = live(&r);
                        if got.is_some() {
                            expect.push(f);
                            expect.sort();
                        }
                        proptest::prop_assert_eq!(live(&t), expect);
                        proptest::prop_assert!(t.len() <= t.capacity());
                    }
                    2 => {
                        if let Some((i, d)) = t.lookup(0, &f, now) {
                            let info = PacketInfo {
                                tcp_flags: if flag { wire::tcp::flags::FIN } else { 0 },
                                has_payload: !flag,
                            };
                            t.touch(i, d, info, now);
                        }
                    }
                    _ => {
                        t.reap(now);
                        proptest::prop_assert!((0..t.flows.len()).all(|i| t.flow(i).is_none_or(|g| now < g.expiry)));
                    }
                }
            }
        }
    }

    /// `n` new UDP flows `gap` ns apart into a table of `cap` flows (default timeouts: 5 s
    /// guarantee, 300 s timeout): the table after them.
    fn flood(cap: usize, n: u32, gap: u64) -> MappingTable {
        let mut t = MappingTable::new(Timeouts::default(), cap, 0);
        for i in 0..n {
            let f = fid(i.to_be_bytes(), 1, [9, 9, 9, 9], 53);
            t.insert(1, 17, f, f, 0, 1, 0, u64::from(i) * gap);
            assert!(t.len() <= cap);
            assert!([&t.by_expiry, &t.by_guarantee, &t.best_effort]
                .iter()
                .all(|h| h.len() <= 2 * cap + 64));
            assert!(t.flows.len() <= cap && t.map.len() <= 2 * cap);
        }
        t
    }

    #[test]
    fn a_flood_of_new_flows_evicts_the_oldest_once_unguaranteed() {
        // 10 ms apart: 500 flows a guarantee (5 s), fewer than the capacity: once full, each
        // new flow evicts the oldest.
        let t = flood(1000, 20_000, 10_000_000);
        assert_eq!(
            (t.len(), t.created(), t.evicted(), t.refused()),
            (1000, 20_000, 19_000, 0)
        );
        // The survivors are the newest 1000.
        let mut hosts: Vec<u32> = t
            .flows()
            .map(|(_, f)| u32::from(f.original.saddr))
            .collect();
        hosts.sort();
        assert_eq!(hosts, (19_000..20_000).collect::<Vec<u32>>());
    }

    #[test]
    fn a_flood_of_new_flows_is_refused_while_all_are_guaranteed() {
        // 1 ms apart: 5000 flows a guarantee, more than the capacity. In every 5 s, the
        // first 1000 flows are taken (evicting the previous 1000, whose guarantee passed)
        // and the other 4000 refused (Click's admission control).
        let t = flood(1000, 20_000, 1_000_000);
        assert_eq!(
            (t.len(), t.created(), t.evicted(), t.refused()),
            (1000, 4000, 3000, 16_000)
        );
    }

    #[test]
    fn the_default_capacity_is_in_force() {
        let t = MappingTable::new(Timeouts::default(), DEFAULT_CAPACITY, 0);
        assert_eq!(t.capacity(), 1 << 18);
    }
}
