//! `NatNF`: a NAT (NAPT) with two sides, written with operators: the inside on input 0,
//! the outside on input 1, each packet's side its [`Input`] metadata.
//!
//! ```text
//! NatNF(EXTERNAL ADDR, [PORTS LO-HI, TIMEOUT T, CAPACITY N, REAP_INTERVAL T])
//! ```
//!
//! * Inside → outside (input 0): a TCP or UDP packet of a new flow gets a mapping: source
//!   `EXTERNAL` and the next free port of `PORTS` (default 50000–65535), taken in order
//!   from after the last one given out, wrapping around (a port is free when no live
//!   mapping's reply uses it). The packet and later ones of the flow are rewritten (IP and
//!   TCP/UDP checksums updated incrementally; a UDP checksum of 0 stays 0) and leave by
//!   output 0.
//! * Outside → inside (input 1): replies of a mapping are rewritten back (destination the
//!   inside host and port) and leave by output 1; other packets are dropped
//!   (`rewriter-drop`).
//! * A mapping lives `TIMEOUT` (default 300 s of virtual time) after its last packet; an
//!   expired mapping is removed when a lookup meets it, and every `REAP_INTERVAL` (default
//!   15 min; 0: never) all expired ones are. At most `CAPACITY` (default 262,144) mappings:
//!   a new flow beyond it, once the expired ones are gone, is dropped
//!   (`mapping-table-full`).
//!
//! The NAT port choice is deterministic: it depends only on the packets seen before.
//!
//! Same behaviour, bytes and state dump as Click's `IPRewriter` with the input
//! specifications `pattern EXTERNAL LO-HI# - - 0 1` and `drop` and every timeout `TIMEOUT`
//! (`examples/bricks/click/nat.click`): the same checks in the same order (`not-tcp-udp`,
//! `ip-fragment`, `short-transport` under 8 transport bytes; a TCP segment with under 18 is
//! mapped by its ports but keeps them, only its addresses change), TCP and UDP in separate
//! tables (map 0 and 1), the same state lines (`map M proto P S:SP > D:DP => S':SP' >
//! D':DP' out 0/1 input 0 expiry NS`, sorted, then `rr input 0 next 0` and `rr input 1 next
//! 0`, the round-robin positions a rewriter's pattern inputs never move), the destination
//! annotation set. Where they
//! differ: `IPRewriter` evicts a mapping whose guarantee has passed when the table is full
//! (this NAT refuses the new flow), and hands its port range out in slices when the chain
//! runs on several workers (this NAT is for one).
//!
//! Drops: `parse-ethernet`, `not-ipv4` (not EtherType 0x0800), `parse-ipv4` (no IPv4
//! header: the rewriter's `bad-ip-header`), and the rewriter's reasons above.

use elements::model::{Field, IpAnchor};
use elements::reason::FlowReason;
use elements::record::Declared;
use elements::registry::{Doc, ElementClass};
use elements::rewriter::{rewrite_ipv4, FlowId, RewriterReason};
use elements::{Args, BuildCtx, ConfigError, Element};
use operators::nf::{class, Leave};
use operators::{pipe, Cx, Ethernet, Input, Ipv4, OperatorNf, Pkt, Raw, Stage};
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// The class name.
pub const NAME: &str = "NatNF";

const TCP: u8 = 6;
const UDP: u8 = 17;
const SEC: u64 = 1_000_000_000;

/// Which way a packet goes through a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// The direction that created it (inside → outside).
    Out,
    /// Its replies.
    Back,
}

/// One mapping.
#[derive(Debug, Clone)]
struct Mapping {
    proto: u8,
    original: FlowId,
    rewritten: FlowId,
    expiry: u64,
}

/// The NAT's configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The outside address.
    pub external: Ipv4Addr,
    /// The ports handed out, `lo..=hi`.
    pub ports: (u16, u16),
    /// How long a mapping lives after its last packet (ns).
    pub timeout: u64,
    /// The most mappings.
    pub capacity: usize,
    /// How often every expired mapping is removed (ns; 0: never).
    pub reap_interval: u64,
}

/// The NAT's state and decisions: the stage after the Ethernet header is parsed.
#[derive(Debug)]
pub struct Nat {
    cfg: Config,
    /// Mappings by (table, original flow).
    mappings: HashMap<(u8, FlowId), Mapping>,
    /// Both directions' flows → (table, original flow) and direction.
    index: HashMap<(u8, FlowId), (FlowId, Dir)>,
    /// The port offset tried first for the next new flow.
    next: u32,
    next_reap: Option<u64>,
    created: u64,
    rewritten: u64,
}

impl Nat {
    /// A NAT with no mappings.
    pub fn new(cfg: Config) -> Nat {
        Nat {
            cfg,
            mappings: HashMap::new(),
            index: HashMap::new(),
            next: 0,
            next_reap: None,
            created: 0,
            rewritten: 0,
        }
    }

    fn remove(&mut self, table: u8, original: FlowId) {
        if let Some(m) = self.mappings.remove(&(table, original)) {
            self.index.remove(&(table, m.original));
            self.index.remove(&(table, m.rewritten.reverse()));
        }
    }

    fn reap(&mut self, now: u64) {
        let expired: Vec<(u8, FlowId)> = self
            .mappings
            .iter()
            .filter(|(_, m)| now >= m.expiry)
            .map(|(k, _)| *k)
            .collect();
        for (table, original) in expired {
            self.remove(table, original);
        }
    }

    /// Reaps when `REAP_INTERVAL` has passed since the last time (the first packet starts
    /// the clock).
    fn maybe_reap(&mut self, now: u64) {
        if self.cfg.reap_interval == 0 {
            return;
        }
        match self.next_reap {
            Some(t) if now < t => {}
            Some(_) => {
                self.reap(now);
                self.next_reap = Some(now.saturating_add(self.cfg.reap_interval));
            }
            None => self.next_reap = Some(now.saturating_add(self.cfg.reap_interval)),
        }
    }

    /// The live mapping `flow` belongs to (an expired one is removed on the way).
    fn lookup(&mut self, table: u8, flow: &FlowId, now: u64) -> Option<(FlowId, Dir)> {
        let (original, dir) = *self.index.get(&(table, *flow))?;
        if self
            .mappings
            .get(&(table, original))
            .is_some_and(|m| now >= m.expiry)
        {
            self.remove(table, original);
            return None;
        }
        Some((original, dir))
    }

    /// A new mapping for `flow`: the next free port in order.
    fn map(
        &mut self,
        table: u8,
        proto: u8,
        flow: FlowId,
        now: u64,
    ) -> Result<FlowId, &'static str> {
        let (lo, hi) = self.cfg.ports;
        let top = u32::from(hi - lo);
        let mut v = if self.next > top { 0 } else { self.next };
        let mut found = None;
        for _ in 0..=top {
            let c = FlowId {
                saddr: self.cfg.external,
                sport: lo + v as u16,
                ..flow
            };
            if self.lookup(table, &c.reverse(), now).is_none() {
                self.next = v + 1;
                found = Some(c);
                break;
            }
            v = if v == top { 0 } else { v + 1 };
        }
        let rewritten = found.ok_or(RewriterReason::NoFreePort.as_str())?;
        for k in [flow, rewritten.reverse()] {
            if let Some(&(original, _)) = self.index.get(&(table, k)) {
                self.remove(table, original);
            }
        }
        if self.mappings.len() >= self.cfg.capacity {
            self.reap(now);
        }
        if self.mappings.len() >= self.cfg.capacity {
            return Err(RewriterReason::TableFull.as_str());
        }
        let m = Mapping {
            proto,
            original: flow,
            rewritten,
            expiry: now,
        };
        self.mappings.insert((table, flow), m);
        self.index.insert((table, flow), (flow, Dir::Out));
        self.index
            .insert((table, rewritten.reverse()), (flow, Dir::Back));
        self.created += 1;
        Ok(flow)
    }

    /// Decides on an IPv4 packet: the flow it becomes and the output, or a drop reason.
    fn decide(
        &mut self,
        p: &Pkt<(Ipv4, (Ethernet, Raw)), Input>,
        now: u64,
    ) -> Result<(FlowId, usize), &'static str> {
        let ip = p.header();
        let proto = ip.protocol();
        if proto != TCP && proto != UDP {
            return Err(FlowReason::NotTcpUdp.as_str());
        }
        if ip.frag_offset() != 0 {
            return Err(FlowReason::Fragment.as_str());
        }
        let l4 = p.payload();
        let [a, b, c, d, ..] = *l4 else {
            return Err(FlowReason::ShortTransport.as_str());
        };
        if l4.len() < 8 {
            return Err(FlowReason::ShortTransport.as_str());
        }
        let flow = FlowId {
            saddr: ip.src_addr(),
            sport: u16::from_be_bytes([a, b]),
            daddr: ip.dst_addr(),
            dport: u16::from_be_bytes([c, d]),
        };
        let table = u8::from(proto == UDP);
        let (original, dir) = match self.lookup(table, &flow, now) {
            Some(hit) => hit,
            None if p.meta().0 == 0 => (self.map(table, proto, flow, now)?, Dir::Out),
            None => return Err(RewriterReason::Dropped.as_str()),
        };
        let m = self
            .mappings
            .get_mut(&(table, original))
            .ok_or(RewriterReason::Dropped.as_str())?;
        m.expiry = now.saturating_add(self.cfg.timeout);
        let (mut new, out) = match dir {
            Dir::Out => (m.rewritten, 0),
            Dir::Back => (m.original.reverse(), 1),
        };
        if proto == TCP && l4.len() < 18 {
            // A segment cut before its checksum's end keeps its ports (as Click's rewriter).
            (new.sport, new.dport) = (flow.sport, flow.dport);
        }
        Ok((new, out))
    }
}

impl Stage<Pkt<(Ethernet, Raw), Input>> for Nat {
    type Out = Pkt<(Ipv4, (Ethernet, Raw)), Input>;

    fn run(&mut self, p: Pkt<(Ethernet, Raw), Input>, cx: &mut Cx) -> Option<Self::Out> {
        let now = cx.now.0;
        self.maybe_reap(now);
        let mut p = match p.parse::<Ipv4>() {
            Ok(p) => p,
            Err(p) => {
                cx.drop(p, "parse-ipv4");
                return None;
            }
        };
        match self.decide(&p, now) {
            Ok((new, out)) => {
                let ip = p.header_mut();
                let (hl, proto) = (ip.header_len(), ip.protocol());
                rewrite_ipv4(ip.into_inner(), hl, proto, &new);
                p.anno_mut().dst_ip = new.daddr;
                self.rewritten += 1;
                if out == 0 {
                    return Some(p);
                }
                cx.send(out, p);
            }
            Err(reason) => cx.drop(p, reason),
        }
        None
    }

    fn state(&self, out: &mut Vec<String>) {
        let mut lines: Vec<String> = self
            .mappings
            .iter()
            .map(|((table, _), m)| {
                let (o, r) = (m.original, m.rewritten);
                format!(
                    "map {table} proto {} {}:{} > {}:{} => {}:{} > {}:{} out 0/1 input 0 expiry {}",
                    m.proto,
                    o.saddr,
                    o.sport,
                    o.daddr,
                    o.dport,
                    r.saddr,
                    r.sport,
                    r.daddr,
                    r.dport,
                    m.expiry
                )
            })
            .collect();
        lines.sort();
        out.extend(lines);
        // The rewriter's round-robin positions, which inputs with a pattern never move.
        out.extend([
            "rr input 0 next 0".to_string(),
            "rr input 1 next 0".to_string(),
        ]);
    }

    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        out.extend([
            ("mappings_created", self.created),
            ("active_mappings", self.mappings.len() as u64),
            ("rewritten", self.rewritten),
        ]);
    }
}

/// The NF's pipeline: Ethernet, IPv4 frames only, then the NAT.
pub fn pipeline(cfg: Config) -> impl Stage<Pkt<Raw, Input>, Out = impl Leave> + 'static {
    pipe::<Raw, Input>()
        .parse::<Ethernet>()
        .filter("not-ipv4", |p| p.header().ethertype() == 0x0800)
        .then(Nat::new(cfg))
        .into_stage()
}

/// What the NF declares for the planner: it reads the flow and the TCP flags (IPv4 header
/// at 14, as its pipeline parses it), rewrites addresses and ports with both checksums
/// updated (and the destination IP annotation), drops what it cannot map and keeps
/// mappings.
pub fn declared() -> Declared {
    Declared {
        sets_headers: true,
        ip_at: IpAnchor::Data(14),
        writes: vec![
            Field::IpSrc,
            Field::IpDst,
            Field::SrcPort,
            Field::DstPort,
            Field::DstIpAnno,
        ],
        ip_checksum: true,
        l4_checksum: true,
        drops: true,
        stateful: true,
        ..Declared::default()
    }
    .read(&[Field::EtherType, Field::TcpFlags, Field::TcpDataOff])
    .read(&Declared::FLOW)
}

/// Reads the arguments.
fn configure(args: &Args, bcx: &BuildCtx<'_>) -> Result<Config, ConfigError> {
    args.check(
        0,
        &["EXTERNAL", "PORTS", "TIMEOUT", "CAPACITY", "REAP_INTERVAL"],
    )?;
    let external = args
        .keyword("EXTERNAL")
        .ok_or_else(|| ConfigError::new("missing argument EXTERNAL (the outside address)"))?;
    let ports = args.keyword("PORTS").unwrap_or("50000-65535").trim();
    let ports = ports
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)))
        .filter(|(a, b)| a <= b)
        .ok_or_else(|| {
            ConfigError::new(format!(
                "expected PORTS as a port range `LO-HI`, found `{ports}`"
            ))
        })?;
    let secs = |k: &str, default: u64| {
        args.keyword(k)
            .map_or(Ok(default), |v| elements::args::parse_seconds(v, k))
    };
    let capacity = match args.keyword("CAPACITY") {
        Some(v) => {
            usize::try_from(elements::args::parse_uint(v, "CAPACITY")?).unwrap_or(usize::MAX)
        }
        None => elements::rewriter::DEFAULT_CAPACITY,
    };
    Ok(Config {
        external: bcx.names.ipv4(external)?,
        ports,
        timeout: secs("TIMEOUT", 300 * SEC)?,
        capacity: capacity.max(1),
        reap_interval: secs("REAP_INTERVAL", 900 * SEC)?,
    })
}

/// Builds the NF: two inputs, two outputs.
fn build(
    name: &'static str,
    args: &Args,
    bcx: &BuildCtx<'_>,
) -> Result<Box<dyn Element>, ConfigError> {
    let cfg =
        configure(args, bcx).map_err(|e| ConfigError::new(format!("{name}: {}", e.message)))?;
    Ok(Box::new(
        OperatorNf::<_, Input>::new(name, 2, pipeline(cfg))
            .inputs(2)
            .with_declared(declared()),
    ))
}

/// The registry entry.
pub const CLASS: ElementClass = class(
    NAME,
    build,
    Doc::new(
        "EXTERNAL ADDR, [PORTS LO-HI, TIMEOUT T, CAPACITY N, REAP_INTERVAL T]",
        "A NAT written with operators (examples/bricks): inside on input 0 (new TCP/UDP flows \
         get EXTERNAL and the next free port, out on output 0), outside on input 1 (replies \
         translated back, out on output 1, others dropped); as IPRewriter(pattern EXTERNAL \
         LO-HI# - - 0 1, drop) with every timeout T.",
        "EXTERNAL 203.0.113.1",
    )
    .outputs(2)
    .drops(&[
        &["parse-ethernet", "not-ipv4", "parse-ipv4"],
        FlowReason::TEXTS,
        RewriterReason::TEXTS,
    ]),
);

#[cfg(test)]
mod tests {
    use crate::testutil::{build, build_in, push};
    use elements::Verdict;
    use wire::build::Frame;

    #[test]
    fn maps_in_order_translates_replies_and_expires() {
        let mut nat = build("NatNF", "EXTERNAL 1.1.1.1, PORTS 100-101, TIMEOUT 10", 2);
        let out = |v: Verdict| match v {
            Verdict::Out(o, p) => {
                let ip = &p.data()[14..];
                let sport = u16::from_be_bytes([ip[20], ip[21]]);
                let dport = u16::from_be_bytes([ip[22], ip[23]]);
                assert_eq!(wire::checksum::data(&ip[..20]), 0, "IP checksum");
                (
                    o,
                    [ip[12], ip[13], ip[14], ip[15]],
                    sport,
                    [ip[16], ip[17], ip[18], ip[19]],
                    dport,
                )
            }
            v => panic!("{v:?}"),
        };
        let f = |s, sp, d, dp| Frame::udp(s, d, sp, dp).build();
        let a = f([10, 0, 0, 1], 7, [8, 8, 8, 8], 53);
        assert_eq!(
            out(push(&mut *nat, 0, &a, 0)),
            (0, [1, 1, 1, 1], 100, [8, 8, 8, 8], 53)
        );
        let b = f([10, 0, 0, 2], 7, [8, 8, 8, 8], 53);
        assert_eq!(
            out(push(&mut *nat, 0, &b, 1)),
            (0, [1, 1, 1, 1], 101, [8, 8, 8, 8], 53)
        );
        let reply = f([8, 8, 8, 8], 53, [1, 1, 1, 1], 101);
        assert_eq!(
            out(push(&mut *nat, 1, &reply, 2)),
            (1, [8, 8, 8, 8], 53, [10, 0, 0, 2], 7)
        );
        // The range is used up; an unknown outside flow is dropped.
        let c = f([10, 0, 0, 3], 7, [8, 8, 8, 8], 53);
        assert!(matches!(
            push(&mut *nat, 0, &c, 3),
            Verdict::Drop(_, "no-free-port")
        ));
        assert!(matches!(
            push(&mut *nat, 1, &c, 3),
            Verdict::Drop(_, "rewriter-drop")
        ));
        assert_eq!(nat.state_dump().len(), 4);
        assert_eq!(
            nat.state_dump()[0],
            "map 1 proto 17 10.0.0.1:7 > 8.8.8.8:53 => 1.1.1.1:100 > 8.8.8.8:53 out 0/1 input 0 expiry 10000000000"
        );
        // 10 s after its last packet, a's mapping is gone: c takes port 100.
        let t = 10_000_000_000;
        assert_eq!(
            out(push(&mut *nat, 0, &c, t)),
            (0, [1, 1, 1, 1], 100, [8, 8, 8, 8], 53)
        );
        let icmp = Frame::icmp([10, 0, 0, 1], [8, 8, 8, 8], 8, 0).build();
        assert!(matches!(
            push(&mut *nat, 0, &icmp, t),
            Verdict::Drop(_, "not-tcp-udp")
        ));
    }

    #[test]
    fn refuses_bad_arguments() {
        let dir = std::path::Path::new(".");
        for (args, want) in [
            ("", "NatNF: missing argument EXTERNAL"),
            ("EXTERNAL 1.1.1.1, PORTS 9-1", "NatNF: expected PORTS"),
            ("EXTERNAL 1.1.1.1, TIMEOUT x", "NatNF: expected TIMEOUT"),
            ("EXTERNAL nowhere", "NatNF: "),
        ] {
            let e = build_in("NatNF", args, 2, dir).err().unwrap();
            assert!(e.message.starts_with(want), "{args}: {e}");
        }
    }
}
