//! `Maglev`: Google's Maglev load balancer (Eisenbud et al., NSDI 2016), as the SpeedyBox and
//! NetBricks evaluations use it: consistent hashing through a lookup table, connection
//! tracking, backend failures and recoveries.
//!
//! ```text
//! Maglev(BACKEND NAME IP MAC, BACKEND ..., [SCHEDULE FILE], [TIMEOUT T], [REAP_INTERVAL T],
//!        [SEED N], [CAPACITY N])
//! ```
//!
//! * **Lookup table.** [`TABLE_SIZE`] = 65,537 entries (a prime), filled by the paper's
//!   population (§3.4, Pseudocode 1): backend `i` has `offset = h1(name) mod M` and
//!   `skip = h2(name) mod (M − 1) + 1`, its preference list is `(offset + j·skip) mod M`, and
//!   the up backends take turns claiming their next unclaimed preferred entry until the table
//!   is full. So every up backend owns ⌊M/N⌋ or ⌈M/N⌉ entries. `h1`/`h2` are
//!   [`splitmix64`] over 64-bit FNV-1a of the backend's name, the FNV basis xor-ed with
//!   `SEED` (default 0) and `H1_KEY` / `H2_KEY` respectively ([`backend_hashes`]).
//! * **Flows.** A flow is (protocol, source address and port, destination address and port);
//!   its table entry is `splitmix64(FNV-1a(SEED, the flow's 13 bytes)) mod M`
//!   ([`flow_hash`]). The first packet of a flow picks the entry's backend and creates a
//!   connection-tracking entry; later packets follow the entry while it lives: every packet
//!   of the flow on input 0 refreshes it, and it expires `TIMEOUT` (default 60 s) of virtual
//!   time after the last one. Expired entries are removed when their flow is next looked up
//!   and all at once every `REAP_INTERVAL` (default 60 s) of virtual time.
//! * **Bound.** At most `CAPACITY` connection entries (default [`DEFAULT_CAPACITY`] =
//!   262,144; the paper's connection table is of fixed size too). A new flow that finds
//!   the table full is balanced by the lookup table alone, without an entry (counted in
//!   `untracked`): its packets go to the entry's backend as long as the table does not
//!   change, its replies are dropped (`no-connection`), and it gets an entry at its first
//!   packet after reaping made room.
//! * **Rewrite.** Packets on input 0 (TCP and UDP, first fragments) get the backend's IP as
//!   destination, IP and TCP/UDP checksums updated incrementally (RFC 1624; a UDP checksum 0
//!   stays 0); when the element sees an Ethernet header in front of the IP header (the
//!   network header 14 bytes into its data) the destination MAC becomes the backend's MAC.
//!   Output 0.
//! * **Replies** (optional input 1 → output 1): a backend's reply to a tracked flow (its
//!   addresses and ports those of the flow as rewritten, swapped) gets the flow's original
//!   destination back as source address, so the client (or a NAT before the balancer) sees
//!   the service's address. Replies do not refresh the entry. A packet on input 1 of no
//!   tracked flow is dropped (`no-connection`).
//! * **Failures.** `SCHEDULE FILE` lists events, one per line: `INDEX down|up NAME`
//!   (`#` starts a comment). An event takes effect just before the chain input packet with
//!   canonical index `INDEX` (or the first later one that reaches the element) is processed
//!   here, in every execution mode. `down`: the table is rebuilt without the backend and
//!   its connection entries are removed, so its flows are re-hashed at their next packet.
//!   `up`: the table is rebuilt with it; existing entries stay on their backends. An event
//!   that does not change a backend's state is counted but rebuilds nothing.
//! * **Drops**: no IPv4 header annotation (`bad-ip-header`), not TCP/UDP (`not-tcp-udp`),
//!   a later fragment (`ip-fragment`), under 8 transport bytes (20 for TCP,
//!   `short-transport`), every backend down (`no-backend`).
//!
//! `state_dump`: the table's size, digest (FNV-1a of its entries) and rebuild count, each
//! backend with its state, table entries and packet counts, then the connection entries
//! (flow → backend, last packet time) sorted by flow. `stats`: `packets_NAME` per backend,
//! `forwarded`, `replies`, `rebuilds`, `evicted` (entries removed by failures),
//! `connections`, `untracked` (packets forwarded without an entry: the table was full).
//!
//! **Fast path.** A recorded packet declares its writes (`IpDst` and `EthDst` on input 0,
//! `IpSrc` on input 1), a guard (an IPv4 first fragment with a whole transport header: what
//! this packet needed to be rewritten rather than dropped), and one state function whose token names the connection entry (slot
//! and generation). [`Element::check`] applies the schedule events due at the packet's input
//! index and the reaping due at its time, then says no when the entry is gone, replaced,
//! expired or on a down backend; [`Element::replay`] refreshes the entry and counts the packet
//! exactly as `push` does. No expiry is recorded: `check` tests the entry's lifetime itself.
//! A packet forwarded without an entry (a full table) is recorded as opaque: such a flow
//! takes the full chain, where its next packet may get an entry.

use super::{config_path, FlowKey, L4, TCP, UDP};
use crate::args::{parse_seconds, parse_uint};
use crate::hash::{fnv1a, splitmix64, FNV_BASIS};
use crate::reason::{FlowReason, IpHeaderReason};
use crate::record::{Access, ReplayView};
use crate::rewriter::{rewrite_ipv4, FlowId};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use space::Field;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use wire::ethernet::{Address, Frame as EthernetFrame};

reasons! {
    /// Why `Maglev` drops a packet (besides [`IpHeaderReason::Bad`] and the
    /// [`FlowReason`]s: it balances TCP and UDP flows only).
    pub enum MaglevReason {
        /// A reply (input 1) of no live connection.
        NoConnection => "no-connection",
        /// No backend is up for the new flow's table slot.
        NoBackend => "no-backend",
    }
}

/// The most connection entries a `Maglev` keeps when `CAPACITY` is not given.
pub const DEFAULT_CAPACITY: usize = 1 << 18;

/// The lookup table's size M (a prime, as the paper requires).
pub const TABLE_SIZE: usize = 65_537;
/// Key xor-ed into the FNV basis for a backend's offset hash `h1`.
pub const H1_KEY: u64 = 0x6d61_676c_6576_6831; // "maglevh1"
/// Key xor-ed into the FNV basis for a backend's skip hash `h2`.
pub const H2_KEY: u64 = 0x6d61_676c_6576_6832; // "maglevh2"

const EMPTY: u16 = u16::MAX;

/// A backend's `(offset, skip)` in a table of `m` entries: `h1 = splitmix64(FNV-1a(name))`
/// with the FNV basis xor-ed with `seed ^ H1_KEY`, `h2` likewise with `seed ^ H2_KEY`;
/// `offset = h1 mod m`, `skip = h2 mod (m − 1) + 1`.
pub fn backend_hashes(name: &str, seed: u64, m: usize) -> (usize, usize) {
    let h1 = splitmix64(fnv1a(FNV_BASIS ^ seed ^ H1_KEY, name.as_bytes()));
    let h2 = splitmix64(fnv1a(FNV_BASIS ^ seed ^ H2_KEY, name.as_bytes()));
    let m64 = m.max(2) as u64;
    ((h1 % m64) as usize, (h2 % (m64 - 1)) as usize + 1)
}

/// The table entry of a flow: `splitmix64(FNV-1a(protocol, source address, source port,
/// destination address, destination port; big-endian))` with the FNV basis xor-ed with
/// `seed`, modulo `m`.
pub fn flow_hash(key: &FlowKey, seed: u64, m: usize) -> usize {
    let mut b = [0u8; 13];
    b[0] = key.protocol;
    b[1..5].copy_from_slice(&key.src.octets());
    b[5..7].copy_from_slice(&key.src_port.to_be_bytes());
    b[7..11].copy_from_slice(&key.dst.octets());
    b[11..13].copy_from_slice(&key.dst_port.to_be_bytes());
    (splitmix64(fnv1a(FNV_BASIS ^ seed, &b)) % m.max(1) as u64) as usize
}

/// Maglev's table population (§3.4, Pseudocode 1): `prefs[i]` is backend `i`'s
/// `(offset, skip)`, `up[i]` whether it takes part. Returns `m` entries, each a backend index
/// (or `u16::MAX` when no backend is up). `m` must be prime for the preference lists to be
/// permutations.
pub fn populate(prefs: &[(usize, usize)], up: &[bool], m: usize) -> Vec<u16> {
    let mut entry = vec![EMPTY; m];
    let live: Vec<usize> = (0..prefs.len())
        .filter(|&i| up.get(i).copied().unwrap_or(false))
        .collect();
    if live.is_empty() || m == 0 {
        return entry;
    }
    let mut next = vec![0usize; prefs.len()];
    let mut filled = 0;
    loop {
        for &i in &live {
            let (offset, skip) = prefs[i];
            let mut c = (offset + next[i] * skip) % m;
            while entry[c] != EMPTY {
                next[i] += 1;
                c = (offset + next[i] * skip) % m;
            }
            entry[c] = i as u16;
            next[i] += 1;
            filled += 1;
            if filled == m {
                return entry;
            }
        }
    }
}

/// One backend.
#[derive(Debug, Clone)]
struct Backend {
    name: String,
    ip: Ipv4Addr,
    mac: [u8; 6],
    offset: usize,
    skip: usize,
    up: bool,
    packets: u64,
    replies: u64,
    stat: &'static str,
}

/// A scheduled failure or recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Canonical chain input index the event takes effect before.
    pub index: u64,
    /// `true` for `up`, `false` for `down`.
    pub up: bool,
    /// The backend (position in the configuration).
    pub backend: usize,
}

/// A connection-tracking entry.
#[derive(Debug, Clone)]
struct Conn {
    key: FlowKey,
    backend: u16,
    last: u64,
    generation: u32,
}

/// `Maglev`: consistent-hashing load balancer with connection tracking (module docs).
#[derive(Debug)]
pub struct Maglev {
    backends: Vec<Backend>,
    table: Vec<u16>,
    seed: u64,
    timeout: u64,
    reap_interval: u64,
    next_reap: Option<u64>,
    events: Vec<Event>,
    next_event: usize,
    conns: HashMap<FlowKey, usize>,
    replies_of: HashMap<FlowKey, usize>,
    slots: Vec<Option<Conn>>,
    free: Vec<usize>,
    generation: u32,
    two_way: bool,
    capacity: usize,
    rebuilds: u64,
    evicted: u64,
    forwarded: u64,
    replies: u64,
    untracked: u64,
}

/// Bit of a token that marks the reply direction.
const REPLY_BIT: u64 = 1 << 63;

impl Maglev {
    /// Builds the element from its arguments (see the module documentation).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<Maglev, ConfigError> {
        args.check(
            0,
            &[
                "BACKEND",
                "SCHEDULE",
                "TIMEOUT",
                "REAP_INTERVAL",
                "SEED",
                "CAPACITY",
            ],
        )?;
        let capacity = match args.keyword("CAPACITY") {
            Some(v) => usize::try_from(parse_uint(v, "CAPACITY")?).unwrap_or(usize::MAX),
            None => DEFAULT_CAPACITY,
        };
        let seed = args
            .keyword("SEED")
            .map(|v| parse_uint(v, "SEED"))
            .transpose()?
            .unwrap_or(0);
        let timeout = args
            .keyword("TIMEOUT")
            .map(|v| parse_seconds(v, "TIMEOUT"))
            .transpose()?
            .unwrap_or(60_000_000_000);
        let reap_interval = args
            .keyword("REAP_INTERVAL")
            .map(|v| parse_seconds(v, "REAP_INTERVAL"))
            .transpose()?
            .unwrap_or(60_000_000_000);
        let mut backends: Vec<Backend> = Vec::new();
        for a in args.all() {
            if a.keyword.as_deref() != Some("BACKEND") {
                continue;
            }
            let w: Vec<&str> = a.value.split_whitespace().collect();
            let [name, ip, mac] = w[..] else {
                return Err(ConfigError::new(format!(
                    "expected `BACKEND NAME IP MAC`, found `BACKEND {}`",
                    a.value
                )));
            };
            if backends.iter().any(|b| b.name == name) {
                return Err(ConfigError::new(format!(
                    "backend `{name}` declared twice, expected distinct names"
                )));
            }
            let ip = bcx.names.ipv4(ip)?;
            let mac = bcx.names.eth(mac)?.0;
            let (offset, skip) = backend_hashes(name, seed, TABLE_SIZE);
            // One name per backend for the whole run: the counter's name must be 'static.
            let stat: &'static str = Box::leak(format!("packets_{name}").into_boxed_str());
            backends.push(Backend {
                name: name.to_string(),
                ip,
                mac,
                offset,
                skip,
                up: true,
                packets: 0,
                replies: 0,
                stat,
            });
        }
        if backends.is_empty() {
            return Err(ConfigError::new(
                "expected at least one `BACKEND NAME IP MAC` argument",
            ));
        }
        if backends.len() >= usize::from(EMPTY) {
            return Err(ConfigError::new(format!(
                "expected fewer than {} backends, found {}",
                EMPTY,
                backends.len()
            )));
        }
        let events = match args.keyword("SCHEDULE") {
            Some(f) => {
                let path = config_path(bcx, &crate::args::unquote(f));
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    ConfigError::new(format!("SCHEDULE: cannot read `{}`: {e}", path.display()))
                })?;
                parse_schedule(&text, &path.display().to_string(), |n| {
                    backends.iter().position(|b| b.name == n)
                })?
            }
            None => Vec::new(),
        };
        let mut m = Maglev {
            backends,
            table: Vec::new(),
            seed,
            timeout,
            reap_interval,
            next_reap: None,
            events,
            next_event: 0,
            conns: HashMap::new(),
            replies_of: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            generation: 0,
            two_way: bcx.ninputs >= 2 || bcx.noutputs >= 2,
            capacity,
            rebuilds: 0,
            evicted: 0,
            forwarded: 0,
            replies: 0,
            untracked: 0,
        };
        m.rebuild();
        m.rebuilds = 0;
        Ok(m)
    }

    fn rebuild(&mut self) {
        let prefs: Vec<(usize, usize)> = self.backends.iter().map(|b| (b.offset, b.skip)).collect();
        let up: Vec<bool> = self.backends.iter().map(|b| b.up).collect();
        self.table = populate(&prefs, &up, TABLE_SIZE);
        self.rebuilds += 1;
    }

    /// The lookup table (backend index per entry; `u16::MAX` when every backend is down).
    pub fn table(&self) -> &[u16] {
        &self.table
    }

    /// The backends' names, in configuration order.
    pub fn backend_names(&self) -> Vec<&str> {
        self.backends.iter().map(|b| b.name.as_str()).collect()
    }

    /// The backend a tracked flow is on, if it has a connection entry.
    pub fn backend_of(&self, key: &FlowKey) -> Option<&str> {
        let c = self.slots.get(*self.conns.get(key)?)?.as_ref()?;
        self.backends
            .get(usize::from(c.backend))
            .map(|b| b.name.as_str())
    }

    /// FNV-1a over the table's entries (little-endian u16 each).
    pub fn digest(&self) -> u64 {
        self.table
            .iter()
            .fold(FNV_BASIS, |h, e| fnv1a(h, &e.to_le_bytes()))
    }

    /// Applies the schedule events due before chain input `index`, then the reaping due at
    /// `now`.
    fn catch_up(&mut self, index: u64, now: u64) {
        while let Some(ev) = self.events.get(self.next_event).copied() {
            if ev.index > index {
                break;
            }
            self.next_event += 1;
            let Some(b) = self.backends.get_mut(ev.backend) else {
                continue;
            };
            if b.up == ev.up {
                continue;
            }
            b.up = ev.up;
            if !ev.up {
                let gone: Vec<usize> = self
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| {
                        c.as_ref()
                            .is_some_and(|c| usize::from(c.backend) == ev.backend)
                    })
                    .map(|(i, _)| i)
                    .collect();
                for i in gone {
                    self.remove(i);
                    self.evicted += 1;
                }
            }
            self.rebuild();
        }
        if self.reap_interval == 0 {
            return;
        }
        match self.next_reap {
            None => self.next_reap = Some(now.saturating_add(self.reap_interval)),
            Some(t) if now >= t => {
                for i in 0..self.slots.len() {
                    if self.slots[i]
                        .as_ref()
                        .is_some_and(|c| now >= c.last.saturating_add(self.timeout))
                    {
                        self.remove(i);
                    }
                }
                self.next_reap = Some(now.saturating_add(self.reap_interval));
            }
            Some(_) => {}
        }
    }

    fn reply_key(&self, c: &Conn) -> Option<FlowKey> {
        let b = self.backends.get(usize::from(c.backend))?;
        Some(FlowKey {
            protocol: c.key.protocol,
            src: b.ip,
            src_port: c.key.dst_port,
            dst: c.key.src,
            dst_port: c.key.src_port,
        })
    }

    fn remove(&mut self, slot: usize) {
        let Some(c) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.conns.remove(&c.key);
        if let Some(r) = self.reply_key(&c) {
            if self.replies_of.get(&r) == Some(&slot) {
                self.replies_of.remove(&r);
            }
        }
        self.free.push(slot);
    }

    fn insert(&mut self, key: FlowKey, backend: u16, now: u64) -> usize {
        self.generation = (self.generation + 1) & 0x7fff_ffff;
        let c = Conn {
            key,
            backend,
            last: now,
            generation: self.generation,
        };
        let reply = self.reply_key(&c);
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s] = Some(c);
                s
            }
            None => {
                self.slots.push(Some(c));
                self.slots.len() - 1
            }
        };
        self.conns.insert(key, slot);
        if let Some(r) = reply {
            self.replies_of.insert(r, slot);
        }
        slot
    }

    fn alive(&self, slot: usize, now: u64) -> Option<&Conn> {
        self.slots
            .get(slot)?
            .as_ref()
            .filter(|c| now < c.last.saturating_add(self.timeout))
    }

    fn token(&self, slot: usize) -> u64 {
        let g = self.slots[slot].as_ref().map_or(0, |c| c.generation);
        slot as u64 | u64::from(g) << 32
    }

    /// Input 0: the packet's connection entry (found or made; `Err(backend)` when the
    /// table is full and the flow goes to the lookup table's backend without one), or the
    /// drop reason.
    fn forward(&mut self, key: &FlowKey, now: u64) -> Result<Result<usize, u16>, &'static str> {
        if let Some(&slot) = self.conns.get(key) {
            if self.alive(slot, now).is_some() {
                return Ok(Ok(slot));
            }
            self.remove(slot);
        }
        let b = self.table[flow_hash(key, self.seed, TABLE_SIZE)];
        if b == EMPTY {
            return Err(MaglevReason::NoBackend.into());
        }
        if self.conns.len() >= self.capacity {
            return Ok(Err(b));
        }
        Ok(Ok(self.insert(*key, b, now)))
    }

    fn count_forward(&mut self, slot: usize, now: u64) {
        if let Some(Some(c)) = self.slots.get_mut(slot) {
            c.last = now;
            if let Some(b) = self.backends.get_mut(usize::from(c.backend)) {
                b.packets += 1;
            }
        }
        self.forwarded += 1;
    }

    fn count_reply(&mut self, slot: usize) {
        let b = self.slots[slot].as_ref().map(|c| usize::from(c.backend));
        if let Some(b) = b.and_then(|b| self.backends.get_mut(b)) {
            b.replies += 1;
        }
        self.replies += 1;
    }
}

/// Parses a schedule: lines `INDEX down|up NAME`, `#` comments, blank lines. `backend` maps
/// a name to its index. Errors name `file`, the line and the column. Events are kept in
/// index order (stable: events at one index apply in file order).
pub fn parse_schedule(
    text: &str,
    file: &str,
    backend: impl Fn(&str) -> Option<usize>,
) -> Result<Vec<Event>, ConfigError> {
    let mut events = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let body = line.split('#').next().unwrap_or("");
        let mut words = Vec::new();
        let mut col = 0;
        for w in body.split(' ').flat_map(|s| s.split('\t')) {
            if !w.is_empty() {
                words.push((col + 1, w));
            }
            col += w.len() + 1;
        }
        if words.is_empty() {
            continue;
        }
        let at = |c: usize, what: &str, found: &str| {
            ConfigError::new(format!(
                "{file}:{}:{c}: expected {what}, found `{found}`",
                ln + 1
            ))
        };
        let end = body.trim_end().len() + 1;
        let (c0, w0) = words[0];
        let index: u64 = w0
            .parse()
            .map_err(|_| at(c0, "an input index (a whole number)", w0))?;
        let Some(&(c1, w1)) = words.get(1) else {
            return Err(at(end, "`down` or `up`", "end of line"));
        };
        let up = match w1 {
            "down" => false,
            "up" => true,
            _ => return Err(at(c1, "`down` or `up`", w1)),
        };
        let Some(&(c2, w2)) = words.get(2) else {
            return Err(at(end, "a backend name", "end of line"));
        };
        let b = backend(w2).ok_or_else(|| at(c2, "the name of a declared BACKEND", w2))?;
        if let Some(&(c3, w3)) = words.get(3) {
            return Err(at(c3, "end of line", w3));
        }
        events.push(Event {
            index,
            up,
            backend: b,
        });
    }
    events.sort_by_key(|e| e.index);
    Ok(events)
}

/// Reads the packet for either input: IP offset in the data and its headers, or the drop
/// reason.
fn classify(packet: &Packet) -> Result<(usize, L4), &'static str> {
    let off = packet
        .network_offset_in_data()
        .ok_or(IpHeaderReason::Bad.as_str())?;
    let l4 = packet
        .data()
        .get(off..)
        .and_then(L4::parse)
        .ok_or(IpHeaderReason::Bad.as_str())?;
    let proto = l4.key.protocol;
    if proto != TCP && proto != UDP {
        return Err(FlowReason::NotTcpUdp.into());
    }
    if !l4.first_frag {
        return Err(FlowReason::Fragment.into());
    }
    if l4.tlen < 8 || (proto == TCP && l4.tlen < 20) {
        return Err(FlowReason::ShortTransport.into());
    }
    Ok((off, l4))
}

fn flow_id(k: &FlowKey) -> FlowId {
    FlowId {
        saddr: k.src,
        sport: k.src_port,
        daddr: k.dst,
        dport: k.dst_port,
    }
}

impl Element for Maglev {
    fn class_name(&self) -> &'static str {
        "Maglev"
    }

    fn port_count(&self) -> PortCount {
        if self.two_way {
            PortCount::exact(2, 2)
        } else {
            PortCount::exact(1, 1)
        }
    }

    fn push(&mut self, port: usize, mut packet: Packet, cx: &mut Context) -> Verdict {
        let now = cx.now.0;
        self.catch_up(packet.meta.input_index, now);
        let (off, l4) = match classify(&packet) {
            Ok(x) => x,
            Err(r) => return Verdict::Drop(packet, r),
        };
        let key = l4.key;
        if port == 0 {
            let (slot, b) = match self.forward(&key, now) {
                Ok(Ok(s)) => {
                    self.count_forward(s, now);
                    let b = self.slots[s].as_ref().map_or(0, |c| usize::from(c.backend));
                    (Some(s), b)
                }
                Ok(Err(b)) => {
                    // A full table: balanced without an entry.
                    if let Some(be) = self.backends.get_mut(usize::from(b)) {
                        be.packets += 1;
                    }
                    self.forwarded += 1;
                    self.untracked += 1;
                    (None, usize::from(b))
                }
                Err(r) => return Verdict::Drop(packet, r),
            };
            let (ip, mac) = (self.backends[b].ip, self.backends[b].mac);
            let new = FlowId {
                daddr: ip,
                ..flow_id(&key)
            };
            if let Some(d) = packet.data_mut().get_mut(off..) {
                rewrite_ipv4(d, l4.hl, key.protocol, &new);
            }
            let eth = off == 14;
            if eth {
                // The network header at 14: the data starts with an Ethernet header.
                if let Some(d) = packet.data_mut().get_mut(..6) {
                    EthernetFrame::new_unchecked(d).set_dst_addr(Address(mac));
                }
            }
            if cx.recording() {
                match slot {
                    Some(slot) => {
                        cx.record_write(Field::IpDst, u128::from(u32::from(ip)));
                        if eth {
                            cx.record_write(Field::EthDst, wire::ethernet::mac_to_u64(&mac).into());
                        }
                        cx.record_guard(super::l4_guard(if key.protocol == TCP { 20 } else { 8 }));
                        cx.record_state(self.token(slot), Access::Ignore);
                    }
                    None => cx.record_opaque("maglev: connection table full"),
                }
            }
            Verdict::Out(0, packet)
        } else {
            let Some(&slot) = self.replies_of.get(&key) else {
                return Verdict::Drop(packet, MaglevReason::NoConnection.into());
            };
            let Some(orig) = self.alive(slot, now).map(|c| c.key.dst) else {
                self.remove(slot);
                return Verdict::Drop(packet, MaglevReason::NoConnection.into());
            };
            self.count_reply(slot);
            let new = FlowId {
                saddr: orig,
                ..flow_id(&key)
            };
            if let Some(d) = packet.data_mut().get_mut(off..) {
                rewrite_ipv4(d, l4.hl, key.protocol, &new);
            }
            if cx.recording() {
                cx.record_write(Field::IpSrc, u128::from(u32::from(orig)));
                cx.record_guard(super::l4_guard(if key.protocol == TCP { 20 } else { 8 }));
                cx.record_state(self.token(slot) | REPLY_BIT, Access::Ignore);
            }
            Verdict::Out(1, packet)
        }
    }

    /// Reads the flow; writes the destination address (and the Ethernet destination where
    /// the IPv4 header is at 14) of forward packets, the source address of replies, with
    /// both checksums updated; drops what it cannot balance; keeps connections.
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(crate::record::Declared {
            reads: crate::record::Declared::FLOW.to_vec(),
            writes: vec![Field::IpDst, Field::IpSrc, Field::EthDst],
            ip_checksum: true,
            l4_checksum: true,
            drops: true,
            stateful: true,
            ..Default::default()
        })
    }

    fn check(&mut self, token: u64, view: &ReplayView<'_>) -> bool {
        // The virtual clock, as `push` reads it (`cx.now`), not the packet's own timestamp.
        let now = view.clock.0;
        self.catch_up(view.input_index, now);
        let slot = (token & 0xffff_ffff) as usize;
        let generation = ((token & !REPLY_BIT) >> 32) as u32;
        let Some(c) = self.alive(slot, now) else {
            return false;
        };
        let ok = c.generation == generation
            && self
                .backends
                .get(usize::from(c.backend))
                .is_some_and(|b| b.up);
        if token & REPLY_BIT != 0 {
            // The reply's lookup must still find this entry.
            ok && self
                .reply_key(c)
                .is_some_and(|r| self.replies_of.get(&r) == Some(&slot))
        } else {
            ok
        }
    }

    fn replay(&mut self, token: u64, view: &mut ReplayView<'_>, _cx: &mut Context) {
        let slot = (token & 0xffff_ffff) as usize;
        if token & REPLY_BIT != 0 {
            self.count_reply(slot);
        } else {
            self.count_forward(slot, view.clock.0);
        }
    }

    fn state_dump(&self) -> Vec<String> {
        let mut v = vec![format!(
            "table size {} digest {:016x} rebuilds {}",
            self.table.len(),
            self.digest(),
            self.rebuilds
        )];
        let mut owned = vec![0u64; self.backends.len()];
        for &e in &self.table {
            if let Some(n) = owned.get_mut(usize::from(e)) {
                *n += 1;
            }
        }
        for (b, n) in self.backends.iter().zip(owned) {
            v.push(format!(
                "backend {} {} {} entries {} packets {} replies {}",
                b.name,
                b.ip,
                if b.up { "up" } else { "down" },
                n,
                b.packets,
                b.replies
            ));
        }
        let mut conns: Vec<&Conn> = self.slots.iter().flatten().collect();
        conns.sort_by_key(|c| c.key);
        for c in conns {
            let name = self
                .backends
                .get(usize::from(c.backend))
                .map_or("?", |b| b.name.as_str());
            v.push(format!("conn {} => {} last {}", c.key, name, c.last));
        }
        v
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> =
            self.backends.iter().map(|b| (b.stat, b.packets)).collect();
        v.extend([
            ("forwarded", self.forwarded),
            ("replies", self.replies),
            ("rebuilds", self.rebuilds),
            ("evicted", self.evicted),
            ("connections", self.conns.len() as u64),
            ("untracked", self.untracked),
        ]);
        v
    }
}

#[cfg(test)]
mod tests;
