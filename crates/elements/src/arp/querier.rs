//! `ARPQuerier`.

use super::{arp_frame, parse_arp};
use crate::args::{parse_bool, parse_seconds, parse_uint};
use crate::model::{Case, Effect, Field, FieldSet, Filter, Model, Outcome};
use crate::net::mask;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::{Meta, Packet};
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use wire::ethernet::{ethertype, Address as EthAddr, Frame as EthernetFrame};

reasons! {
    /// Why `ARPQuerier` drops a packet.
    pub enum ARPQuerierReason {
        /// An ARP reply on input 1, consumed into the table.
        Consumed => "arp-consumed",
        /// A held packet pushed out of a full queue (CAPACITY), or of an entry removed for
        /// the table's size.
        QueueFull => "arp-queue-full",
        /// A held packet of an entry that expired.
        Timeout => "arp-timeout",
        /// Next hop 0.0.0.0.
        ZeroAddress => "arp-zero-address",
    }
}

const SEC: u64 = 1_000_000_000;

#[derive(Debug)]
struct Entry {
    eth: EthAddr,
    known: bool,
    live_at: u64,
    /// Last query time; `None`: never queried (a query may go at once).
    polled_at: Option<u64>,
    polls: u8,
    queue: VecDeque<Packet>,
}

impl Entry {
    fn new(now: u64) -> Entry {
        Entry {
            eth: EthAddr::BROADCAST,
            known: false,
            live_at: now,
            polled_at: None,
            polls: 0,
            queue: VecDeque::new(),
        }
    }

    fn expired(&self, now: u64, timeout: u64) -> bool {
        timeout != 0 && self.live_at.saturating_add(timeout) < now
    }

    fn allow_poll(&self, now: u64) -> bool {
        let gap = if self.polls >= 10 { 2 * SEC } else { SEC / 10 };
        self.polled_at.is_none_or(|t| now >= t.saturating_add(gap))
    }

    fn mark_poll(&mut self, now: u64) {
        self.polled_at = Some(now);
        self.polls = self.polls.saturating_add(1);
    }
}

/// `ARPQuerier(IP, ETH [, keywords])` or `ARPQuerier(NAME [, keywords])`: resolves next hops
/// with ARP and encapsulates IP packets in Ethernet (Click 2/1-2; input 1 may be left
/// unconnected when every next hop is static).
///
/// Input 0 takes IP packets whose destination IP annotation is the next hop. A 14-byte
/// Ethernet header (type 0x0800, source ETH) is prepended (Click's `push_mac_header`: the MAC
/// header annotation at it, the network header annotation right after it) and the
/// destination is:
/// - a static entry's or a known (ARP-resolved, not expired) entry's address;
/// - `ff:ff:ff:ff:ff:ff` for 255.255.255.255 and the BROADCAST address (default: the
///   broadcast address of IP's prefix if IP is given as a prefix);
/// - `01:00:5e` plus the low 23 bits for multicast next hops (RFC 1112);
/// - the `DEFAULT_ETH` address, if configured, for any other next hop.
///
/// Those packets go to output 0. A next hop of 0.0.0.0 is dropped (`arp-zero-address`).
/// Otherwise the packet is held on the next hop's entry and an ARP query is emitted (at most
/// one per 100 ms per address, one per 2 s after 10 unanswered queries) on output 1 if it is
/// connected, else output 0. When the held packets exceed CAPACITY (default 2048; 0:
/// unlimited), the oldest packets of the oldest entries are dropped (`arp-queue-full`);
/// ENTRY_PACKET_CAPACITY (default 0: unlimited) bounds one entry's queue the same way.
/// An unresolved entry and its packets are dropped (`arp-timeout`) once it is TIMEOUT old
/// (default 5 min; 0: never) and no packet for it arrived since — Click keeps a queried
/// entry alive while packets for it keep arriving. Expiry is checked at each push on the
/// virtual clock. A known entry is polled (a unicast query, or broadcast with
/// BROADCAST_POLL true) when a packet uses it POLL_TIMEOUT (default 1 min; 0: never) after
/// it was resolved. ENTRY_CAPACITY (default 0: unlimited) bounds the number of entries (the
/// oldest go first).
///
/// Input 1 takes ARP frames: an Ethernet/IPv4 ARP reply with a unicast sender address
/// installs (or refreshes) the sender's entry and releases its held packets, in arrival
/// order, on output 0. Every frame on input 1 is consumed (dropped, `arp-consumed`).
///
/// FuseBox extensions, for captures without ARP replies: `STATIC IP ETH` pre-loads a
/// permanent entry (never expires, never polled); repeat the keyword or give several pairs
/// (`STATIC 10.0.0.2 00:00:00:00:00:02 10.0.0.3 00:00:00:00:00:03`). `DEFAULT_ETH ETH`
/// resolves every other unicast next hop to ETH (a default gateway's address) without
/// querying. `TABLE` (a shared ARPTable) is not supported.
#[derive(Debug)]
pub struct ARPQuerier {
    my_ip: Ipv4Addr,
    my_eth: EthAddr,
    bcast: Ipv4Addr,
    statics: HashMap<Ipv4Addr, EthAddr>,
    default_eth: Option<EthAddr>,
    capacity: u64,
    entry_capacity: usize,
    entry_packet_capacity: usize,
    timeout: u64,
    poll_timeout: u64,
    broadcast_poll: bool,
    query_port: usize,
    /// Connected inputs (2: ARP replies may arrive on input 1).
    ninputs: usize,
    table: HashMap<Ipv4Addr, Entry>,
    /// Entries from oldest to newest `live_at`.
    age: Vec<Ipv4Addr>,
    packets: u64,
    queries: u64,
    responses: u64,
    drops: u64,
}

const KEYWORDS: &[&str] = &[
    "CAPACITY",
    "ENTRY_CAPACITY",
    "ENTRY_PACKET_CAPACITY",
    "CAPACITY_SLIM_FACTOR",
    "TIMEOUT",
    "POLL_TIMEOUT",
    "BROADCAST",
    "BROADCAST_POLL",
    "STATIC",
    "DEFAULT_ETH",
    "IP",
    "ETH",
];

impl ARPQuerier {
    /// Builds the querier from its arguments.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<ARPQuerier, ConfigError> {
        if args.keyword("TABLE").is_some() {
            return Err(ConfigError::new(
                "TABLE (a shared ARPTable) is not supported; expected the ARPQuerier's own table",
            ));
        }
        args.check(2, KEYWORDS)?;
        let names = bcx.names;
        let ip_text = args.require(0, "IP", "this host's IP address")?;
        let eth_text = args.get(1, "ETH").unwrap_or(ip_text);
        let (my_ip, len) = names.prefix(ip_text)?;
        let my_eth = names.eth(eth_text)?;
        let uint = |k: &str, d: u64| -> Result<u64, ConfigError> {
            args.keyword(k)
                .map(|v| parse_uint(v, k))
                .transpose()
                .map(|v| v.unwrap_or(d))
        };
        let secs = |k: &str, d: u64| -> Result<u64, ConfigError> {
            args.keyword(k)
                .map(|v| parse_seconds(v, k))
                .transpose()
                .map(|v| v.unwrap_or(d))
        };
        let bcast = match args.keyword("BROADCAST") {
            Some(b) => names.ipv4(b)?,
            None => {
                let b = Ipv4Addr::from(u32::from(my_ip) | !mask(len));
                if b == my_ip {
                    Ipv4Addr::BROADCAST
                } else {
                    b
                }
            }
        };
        let mut statics = HashMap::new();
        for a in args
            .all()
            .iter()
            .filter(|a| a.keyword.as_deref() == Some("STATIC"))
        {
            let words: Vec<&str> = a.value.split_whitespace().collect();
            if words.is_empty() || !words.len().is_multiple_of(2) {
                return Err(ConfigError::new(format!(
                    "expected STATIC `IP ETH [IP ETH...]`, found `{}`",
                    a.value
                )));
            }
            for pair in words.chunks(2) {
                statics.insert(names.ipv4(pair[0])?, names.eth(pair[1])?);
            }
        }
        let default_eth = args
            .keyword("DEFAULT_ETH")
            .map(|e| names.eth(e))
            .transpose()?;
        uint("CAPACITY_SLIM_FACTOR", 2)?;
        Ok(ARPQuerier {
            my_ip,
            my_eth,
            bcast,
            statics,
            default_eth,
            capacity: uint("CAPACITY", 2048)?,
            entry_capacity: usize::try_from(uint("ENTRY_CAPACITY", 0)?).unwrap_or(usize::MAX),
            entry_packet_capacity: usize::try_from(uint("ENTRY_PACKET_CAPACITY", 0)?)
                .unwrap_or(usize::MAX),
            timeout: secs("TIMEOUT", 300 * SEC)?,
            poll_timeout: secs("POLL_TIMEOUT", 60 * SEC)?,
            broadcast_poll: args
                .keyword("BROADCAST_POLL")
                .map(|v| parse_bool(v, "BROADCAST_POLL"))
                .transpose()?
                .unwrap_or(false),
            query_port: bcx.noutputs.clamp(1, 2) - 1,
            ninputs: bcx.ninputs,
            table: HashMap::new(),
            age: Vec::new(),
            packets: 0,
            queries: 0,
            responses: 0,
            drops: 0,
        })
    }

    /// This host's IP address.
    pub fn ip(&self) -> Ipv4Addr {
        self.my_ip
    }

    /// This host's Ethernet address.
    pub fn eth(&self) -> EthAddr {
        self.my_eth
    }

    /// The local broadcast address.
    pub fn broadcast(&self) -> Ipv4Addr {
        self.bcast
    }

    /// The static entries.
    pub fn statics(&self) -> &HashMap<Ipv4Addr, EthAddr> {
        &self.statics
    }

    /// The Ethernet address of a resolved next hop at virtual time `now` (static, or known
    /// and not expired).
    pub fn resolved(&self, ip: Ipv4Addr, now: u64) -> Option<EthAddr> {
        if let Some(e) = self.statics.get(&ip) {
            return Some(*e);
        }
        self.table
            .get(&ip)
            .filter(|e| e.known && !e.expired(now, self.timeout))
            .map(|e| e.eth)
    }

    fn age_remove(&mut self, ip: Ipv4Addr) {
        if let Some(i) = self.age.iter().position(|a| *a == ip) {
            self.age.remove(i);
        }
    }

    /// Puts `ip` back in the age list by its `live_at` (before entries not older than it).
    fn age_place(&mut self, ip: Ipv4Addr) {
        self.age_remove(ip);
        let live = self.table.get(&ip).map_or(0, |e| e.live_at);
        let pos = self
            .age
            .iter()
            .position(|a| self.table.get(a).is_some_and(|e| e.live_at >= live))
            .unwrap_or(self.age.len());
        self.age.insert(pos, ip);
    }

    fn remove_entry(&mut self, ip: Ipv4Addr, reason: ARPQuerierReason, cx: &mut Context) {
        self.age_remove(ip);
        if let Some(e) = self.table.remove(&ip) {
            for p in e.queue {
                self.packets -= 1;
                self.drops += 1;
                cx.drop(p, reason.into());
            }
        }
    }

    /// Click's `ARPTable::slim`: drops expired (or surplus) entries from the old end, then the
    /// oldest held packets while over CAPACITY.
    fn slim(&mut self, now: u64, cx: &mut Context) {
        while let Some(&front) = self.age.first() {
            let expired = self
                .table
                .get(&front)
                .is_none_or(|e| e.expired(now, self.timeout));
            let surplus = self.entry_capacity != 0 && self.table.len() > self.entry_capacity;
            if !(expired || surplus) {
                break;
            }
            self.remove_entry(
                front,
                if expired {
                    ARPQuerierReason::Timeout
                } else {
                    ARPQuerierReason::QueueFull
                },
                cx,
            );
        }
        let mut i = 0;
        while self.capacity != 0 && self.packets > self.capacity && i < self.age.len() {
            let ip = self.age[i];
            if let Some(e) = self.table.get_mut(&ip) {
                while self.packets > self.capacity {
                    let Some(p) = e.queue.pop_front() else { break };
                    self.packets -= 1;
                    self.drops += 1;
                    cx.drop(p, ARPQuerierReason::QueueFull.into());
                }
            }
            i += 1;
        }
    }

    fn ensure(&mut self, ip: Ipv4Addr, now: u64, cx: &mut Context) {
        if let std::collections::hash_map::Entry::Vacant(v) = self.table.entry(ip) {
            v.insert(Entry::new(now));
            self.age.push(ip);
            if self.entry_capacity != 0 && self.table.len() > self.entry_capacity {
                // Never evict the entry being made.
                self.age_remove(ip);
                self.slim(now, cx);
                self.age.push(ip);
            }
        }
    }

    fn query(&mut self, like: &Meta, dst_eth: EthAddr, target: Ipv4Addr, cx: &mut Context) {
        let frame = arp_frame(
            dst_eth.0,
            self.my_eth.0,
            wire::arp::operation::REQUEST,
            self.my_eth.0,
            self.my_ip.octets(),
            [0; 6],
            target.octets(),
        );
        let mut q = cx.new_packet(&frame, like);
        q.set_mac_header(0);
        self.queries += 1;
        cx.emit(self.query_port, q);
    }

    /// Sends an Ethernet-encapsulated packet (`p` already has its 14-byte header).
    fn send(&mut self, mut p: Packet, dst: EthAddr, cx: &mut Context) {
        // The two addresses (12 bytes) are written when there.
        if let Some(h) = p.data_mut().get_mut(..12) {
            let mut eth = EthernetFrame::new_unchecked(h);
            eth.set_dst_addr(dst);
            eth.set_src_addr(self.my_eth);
        }
        cx.emit(0, p);
    }

    fn handle_ip(&mut self, mut p: Packet, response: bool, cx: &mut Context) {
        let now = cx.now.0;
        if !response {
            // Click's `push_mac_header(14)`: the MAC header annotation at the new header, the
            // network header annotation right after it (as `EtherEncap`).
            EthernetFrame::new_unchecked(p.push(14)).set_ethertype(ethertype::IPV4);
            p.set_mac_header(0);
            p.set_network_header(14);
        }
        let dst = p.meta.dst_ip;
        if let Some(e) = self.statics.get(&dst).copied() {
            return self.send(p, e, cx);
        }
        let (poll_timeout, timeout) = (self.poll_timeout, self.timeout);
        if let Some(e) = self
            .table
            .get_mut(&dst)
            .filter(|e| e.known && !e.expired(now, timeout))
        {
            let eth = e.eth;
            let poll = poll_timeout != 0
                && now >= e.live_at.saturating_add(poll_timeout)
                && e.allow_poll(now);
            if poll {
                e.mark_poll(now);
                let to = if self.broadcast_poll {
                    EthAddr::BROADCAST
                } else {
                    eth
                };
                if self.query_port == 0 {
                    self.query(&p.meta, to, dst, cx);
                    self.send(p, eth, cx);
                } else {
                    let like = p.meta.clone();
                    self.send(p, eth, cx);
                    self.query(&like, to, dst, cx);
                }
                return;
            }
            return self.send(p, eth, cx);
        }
        let d = u32::from(dst);
        if dst == Ipv4Addr::BROADCAST || dst == self.bcast {
            return self.send(p, EthAddr::BROADCAST, cx);
        }
        if d & 0xf000_0000 == 0xe000_0000 {
            let m = EthAddr([
                0x01,
                0x00,
                0x5e,
                ((d >> 16) & 0x7f) as u8,
                (d >> 8) as u8,
                d as u8,
            ]);
            return self.send(p, m, cx);
        }
        if d == 0 {
            self.drops += 1;
            cx.drop(p, ARPQuerierReason::ZeroAddress.into());
            return;
        }
        if let Some(e) = self.default_eth {
            return self.send(p, e, cx);
        }
        // Hold the packet and query.
        self.ensure(dst, now, cx);
        if let Some(e) = self.table.get_mut(&dst) {
            if timeout != 0 {
                let min = now.saturating_sub(timeout);
                if e.live_at < min {
                    e.live_at = min;
                    self.age_place(dst);
                }
            }
        }
        self.packets += 1;
        if self.capacity != 0 && self.packets > self.capacity {
            self.slim(now, cx);
        }
        let cap = self.entry_packet_capacity;
        let Some(e) = self.table.get_mut(&dst) else {
            self.packets -= 1;
            self.drops += 1;
            cx.drop(p, ARPQuerierReason::QueueFull.into());
            return;
        };
        let mut overflow = Vec::new();
        while cap != 0 && e.queue.len() >= cap {
            match e.queue.pop_front() {
                Some(old) => overflow.push(old),
                None => break,
            }
        }
        let like = p.meta.clone();
        e.queue.push_back(p);
        let poll = e.allow_poll(now);
        if poll {
            e.mark_poll(now);
        }
        for old in overflow {
            self.packets -= 1;
            self.drops += 1;
            cx.drop(old, ARPQuerierReason::QueueFull.into());
        }
        if poll {
            self.query(&like, EthAddr::BROADCAST, dst, cx);
        }
    }

    fn handle_response(&mut self, p: &Packet, cx: &mut Context) {
        let now = cx.now.0;
        let Some(a) = parse_arp(p.data()) else { return };
        self.responses += 1;
        let sha = EthAddr(a.sha);
        if a.op != wire::arp::operation::REPLY || sha.is_multicast() {
            return;
        }
        let ip = Ipv4Addr::from(a.spa);
        self.ensure(ip, now, cx);
        let held = match self.table.get_mut(&ip) {
            Some(e) => {
                e.eth = sha;
                e.known = true;
                e.live_at = now;
                e.polled_at = None;
                e.polls = 0;
                std::mem::take(&mut e.queue)
            }
            None => VecDeque::new(),
        };
        self.age_remove(ip);
        self.age.push(ip);
        self.packets -= held.len() as u64;
        for q in held {
            self.handle_ip(q, true, cx);
        }
    }

    /// Drops expired entries and their packets (run at each push, on the virtual clock).
    fn expire(&mut self, now: u64, cx: &mut Context) {
        if self
            .age
            .first()
            .and_then(|ip| self.table.get(ip))
            .is_some_and(|e| e.expired(now, self.timeout))
        {
            self.slim(now, cx);
        }
    }
}

// ARPQuerier holds packets, makes queries and encapsulates (its model's run-time cases): it declares nothing (`Element::declared`).
impl Element for ARPQuerier {
    fn class_name(&self) -> &'static str {
        "ARPQuerier"
    }

    fn port_count(&self) -> PortCount {
        PortCount::range(1, 2, 1, 2)
    }

    fn push(&mut self, port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        self.expire(cx.now.0, cx);
        if port == 0 {
            self.handle_ip(packet, false, cx);
        } else {
            self.handle_response(&packet, cx);
            cx.drop(packet, ARPQuerierReason::Consumed.into());
        }
        Verdict::Done
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("queries", self.queries),
            ("responses", self.responses),
            ("drops", self.drops),
            ("held", self.packets),
        ]
    }

    fn held(&self) -> u64 {
        self.packets
    }

    /// The packets decided without the table, as `handle_ip` tries them: a static next hop
    /// is encapsulated to its address on output 0 (statics come first, even for 0.0.0.0 or
    /// a broadcast address); broadcast and multicast next hops are left to the element; a
    /// next hop of 0.0.0.0 is dropped (`arp-zero-address`, counted in `drops`); any other
    /// goes to `DEFAULT_ETH` if there is one, else to the element (a query, a held packet).
    ///
    /// Only when skipping `push` for the modelled packets changes nothing else: with input 1
    /// connected, replies make known entries (which come before `DEFAULT_ETH`, and the model
    /// does not see the input port), so there is no model; and every `push` first expires
    /// the old entries of the table (dropping their held packets), so there is a model only
    /// when nothing is ever held (`DEFAULT_ETH`) or nothing expires (`TIMEOUT 0`). Without a
    /// pre-loaded entry there is nothing to model.
    fn model(&self) -> Option<Model> {
        if self.ninputs > 1 || (self.default_eth.is_none() && self.timeout != 0) {
            return None;
        }
        if self.statics.is_empty() && self.default_eth.is_none() {
            return None;
        }
        let hop = |set: FieldSet| Filter::any().with(Field::DstIpAnno, set);
        let encap = |dst: EthAddr| Effect::EtherEncap {
            ethertype: ethertype::IPV4,
            src: self.my_eth.0,
            dst: dst.0,
        };
        let mut statics: Vec<(Ipv4Addr, EthAddr)> =
            self.statics.iter().map(|(ip, e)| (*ip, *e)).collect();
        statics.sort_by_key(|(ip, _)| u32::from(*ip));
        let mut cases: Vec<Case> = statics
            .into_iter()
            .map(|(ip, e)| {
                Case::new(
                    hop(FieldSet::single(u128::from(u32::from(ip)))),
                    Outcome::Out(0),
                )
                .effect(encap(e))
            })
            .collect();
        let bcast = FieldSet::single(u128::from(u32::from(Ipv4Addr::BROADCAST)))
            .union(&FieldSet::single(u128::from(u32::from(self.bcast))));
        cases.push(Case::new(hop(bcast), Outcome::Runtime));
        cases.push(Case::new(
            hop(FieldSet::range(0xe000_0000, 0xefff_ffff)),
            Outcome::Runtime,
        ));
        cases.push(
            // Dropped after the header went on, its addresses still zero.
            Case::new(
                hop(FieldSet::single(0)),
                Outcome::Drop(ARPQuerierReason::ZeroAddress.into()),
            )
            .effect(Effect::EtherEncap {
                ethertype: ethertype::IPV4,
                src: [0; 6],
                dst: [0; 6],
            })
            .stat("drops"),
        );
        cases.push(match self.default_eth {
            Some(e) => Case::new(Filter::any(), Outcome::Out(0)).effect(encap(e)),
            None => Case::new(Filter::any(), Outcome::Runtime),
        });
        Some(Model::new(cases))
    }
}
