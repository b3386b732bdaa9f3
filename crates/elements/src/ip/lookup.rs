//! Route lookups: `RadixIPLookup`, `StaticIPLookup`, `LinearIPLookup`, `DirectIPLookup` and
//! the old `LookupIPRoute`, all one element over one longest-prefix-match table ([`Lpm`]).

use crate::args::parse_uint;
use crate::model::{Case, Effect, Field, FieldSet, Filter, Model, Op, Outcome};
use crate::net::mask;
use crate::reason::RouteReason;
use crate::{Args, BuildCtx, ConfigError, Element, PortCount, RouteTable};
use packet::Packet;
use std::net::Ipv4Addr;

/// One route: destinations in `addr/len` go to output `port`, with the destination IP
/// annotation set to `gw` when there is a gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Network address (host bits cleared).
    pub addr: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub len: u8,
    /// Gateway, if any (`-` or 0.0.0.0 mean none, as in Click).
    pub gw: Option<Ipv4Addr>,
    /// Output port.
    pub port: usize,
}

/// Entry flag: the rest of the entry indexes a child chunk of 256 entries.
const CHUNK: u32 = 1 << 31;

/// A longest-prefix-match table: a 16-8-8 multibit trie with controlled prefix expansion
/// (the DIR-24-8 idea of Gupta, Lin and McKeown, with a 16-bit first stride).
///
/// Why this design: a lookup is one load from a 64 Ki-entry first level indexed by the top
/// 16 address bits, plus at most two more loads from 256-entry chunks for prefixes longer
/// than 16 or 24 bits; no hashing, no branches per prefix length, no allocation. With a
/// handful of routes it costs a few nanoseconds (the first level, 256 KiB, stays in cache for
/// the hot entries), and it stays O(1) for full Internet tables, unlike a linear scan or a
/// per-length hash probe (one probe per distinct length). A full DIR-24-8 first level would
/// be 64 MiB per element instance, too much for many NFs per process.
///
/// Entries hold 0 (no route), a route index + 1, or `CHUNK` | chunk number. Routes are
/// inserted shortest prefix first, so a longer prefix overwrites the expansion of a shorter
/// one and a chunk starts as copies of its parent entry.
pub struct Lpm {
    l1: Box<[u32; 1 << 16]>,
    l2: Vec<u32>,
    l3: Vec<u32>,
}

impl Default for Lpm {
    fn default() -> Self {
        Lpm {
            l1: Box::new([0; 1 << 16]),
            l2: Vec::new(),
            l3: Vec::new(),
        }
    }
}

impl Lpm {
    /// Builds the table for `prefixes` (address, length); lookups return the index into
    /// `prefixes` of the longest matching prefix. For identical prefixes the first wins.
    pub fn new(prefixes: &[(Ipv4Addr, u8)]) -> Lpm {
        let mut lpm = Lpm::default();
        let mut order: Vec<usize> = (0..prefixes.len()).collect();
        // Stable sort by length; iterate duplicates in reverse so the first one is written last.
        order.sort_by_key(|&i| (prefixes[i].1, std::cmp::Reverse(i)));
        for i in order {
            let (a, len) = prefixes[i];
            lpm.insert(u32::from(a) & mask(len), len.min(32), i as u32 + 1);
        }
        lpm
    }

    fn child(table: &mut Vec<u32>, parent: &mut u32) -> usize {
        if *parent & CHUNK != 0 {
            return (*parent & !CHUNK) as usize;
        }
        let n = table.len() / 256;
        table.extend(std::iter::repeat_n(*parent, 256));
        *parent = CHUNK | n as u32;
        n
    }

    fn insert(&mut self, a: u32, len: u8, v: u32) {
        let i1 = (a >> 16) as usize;
        if len <= 16 {
            let n = 1usize << (16 - len);
            for e in &mut self.l1[i1..i1 + n] {
                *e = v;
            }
            return;
        }
        let c2 = Self::child(&mut self.l2, &mut self.l1[i1]);
        let i2 = c2 * 256 + ((a >> 8) & 0xff) as usize;
        if len <= 24 {
            let n = 1usize << (24 - len);
            for e in &mut self.l2[i2..i2 + n] {
                *e = v;
            }
            return;
        }
        let mut parent = self.l2[i2];
        let c3 = Self::child(&mut self.l3, &mut parent);
        self.l2[i2] = parent;
        let i3 = c3 * 256 + (a & 0xff) as usize;
        let n = 1usize << (32 - len);
        for e in &mut self.l3[i3..i3 + n] {
            *e = v;
        }
    }

    /// Bytes the table holds: the 64 Ki-entry first level and the 256-entry chunks below.
    pub fn memory(&self) -> usize {
        4 * (self.l1.len() + self.l2.len() + self.l3.len())
    }

    /// The index of the longest prefix containing `addr`, if any: one load, plus one per
    /// level below for addresses covered by prefixes longer than 16 (24) bits.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<usize> {
        let mut e = self.l1[(addr >> 16) as usize];
        if e & CHUNK != 0 {
            let i = ((e & !CHUNK) as usize) << 8 | ((addr >> 8) & 0xff) as usize;
            e = self.l2.get(i).copied().unwrap_or(0);
            if e & CHUNK != 0 {
                let i = ((e & !CHUNK) as usize) << 8 | (addr & 0xff) as usize;
                e = self.l3.get(i).copied().unwrap_or(0);
            }
        }
        e.checked_sub(1).map(|i| i as usize)
    }
}

/// Parses one route `ADDR/LEN [GW|-] OUT` (Click's `cp_ip_route`; `ADDR` alone is a /32); with
/// `legacy`, also the old `LookupIPRoute` form `DST MASK GW OUT` (four words, a dotted mask).
fn parse_route(s: &str, legacy: bool, bcx: &BuildCtx) -> Result<Route, ConfigError> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let expected = || {
        ConfigError::new(format!(
            "expected route `ADDR/MASK [GATEWAY] OUTPUT`{}, found `{s}`",
            if legacy {
                " or `DST MASK GATEWAY OUTPUT`"
            } else {
                ""
            }
        ))
    };
    let (prefix, gw, out) = match words.as_slice() {
        [p, o] => (bcx.names.prefix(p)?, None, *o),
        [p, g, o] => (bcx.names.prefix(p)?, Some(*g), *o),
        [d, m, g, o] if legacy => {
            let dst = bcx.names.ipv4(d)?;
            let m = u32::from(bcx.names.ipv4(m).map_err(|_| {
                ConfigError::new(format!(
                    "expected netmask (like 255.255.255.0), found `{m}`"
                ))
            })?);
            let len = m.leading_ones();
            if m.checked_shl(len).unwrap_or(0) != 0 {
                return Err(ConfigError::new(format!(
                    "expected a contiguous netmask, found `{}`",
                    Ipv4Addr::from(m)
                )));
            }
            ((dst, len as u8), Some(*g), *o)
        }
        _ => return Err(expected()),
    };
    let gw = match gw {
        None | Some("-") => None,
        Some(g) => Some(bcx.names.ipv4(g)?).filter(|g| !g.is_unspecified()),
    };
    let port = parse_uint(out, "OUTPUT").map_err(|_| {
        ConfigError::new(format!(
            "expected OUTPUT port number in route `{s}`, found `{out}`"
        ))
    })?;
    let port = usize::try_from(port)
        .ok()
        .filter(|&p| p < 1 << 16)
        .ok_or_else(|| {
            ConfigError::new(format!(
                "expected OUTPUT port number below 65536 in route `{s}`"
            ))
        })?;
    let (addr, len) = prefix;
    Ok(Route {
        addr: Ipv4Addr::from(u32::from(addr) & mask(len)),
        len,
        gw,
        port,
    })
}

/// `RadixIPLookup(ADDR/MASK [GW] OUT, ...)` and its siblings `StaticIPLookup`,
/// `LinearIPLookup`, `DirectIPLookup` and the old `LookupIPRoute` (which also accepts
/// `DST MASK GW OUT`): IP routing table lookup.
///
/// Click's `IPRouteTable::push`: looks up the packet's destination IP annotation (set by
/// `CheckIPHeader`, which always sets it, or by `GetIPAddress`/`SetIPAddress`; an unset
/// annotation is 0.0.0.0 and only matches a default route) with longest-prefix match. On a
/// match, a route with a gateway sets the destination IP annotation to the gateway (no
/// gateway: the annotation is kept), and the packet leaves on the route's output. No match:
/// dropped under `no-route`. Of two routes with the same prefix the first one configured wins
/// (Click's `add_route` refuses the second with `EEXIST`). Needs at least max OUT + 1 outputs
/// (1/N-). `stats()`: `no-route` drops.
pub struct IPLookup {
    class: &'static str,
    routes: Vec<Route>,
    /// Per route: output port and gateway as a u32 (0 = none), for the hot path.
    hops: Vec<(usize, u32)>,
    lpm: Lpm,
    min_out: usize,
    no_route: u64,
}

impl IPLookup {
    /// Builds a lookup element of Click class `class` from its routes.
    pub fn configure(class: &str, args: &Args, bcx: &BuildCtx) -> Result<IPLookup, ConfigError> {
        let class = match class {
            "RadixIPLookup" => "RadixIPLookup",
            "StaticIPLookup" => "StaticIPLookup",
            "LinearIPLookup" => "LinearIPLookup",
            "DirectIPLookup" => "DirectIPLookup",
            _ => "LookupIPRoute",
        };
        let legacy = class == "LookupIPRoute";
        let mut routes = Vec::new();
        for (i, a) in args.all().iter().enumerate() {
            let text = match &a.keyword {
                Some(k) => format!("{k} {}", a.value),
                None => a.value.clone(),
            };
            let r = parse_route(&text, legacy, bcx)
                .map_err(|e| ConfigError::new(format!("argument {}: {}", i + 1, e.message)))?;
            routes.push(r);
        }
        Ok(IPLookup::from_routes(class, routes))
    }

    /// Builds a lookup element of class `class` over `routes`.
    pub fn from_routes(class: &'static str, routes: Vec<Route>) -> IPLookup {
        let prefixes: Vec<(Ipv4Addr, u8)> = routes.iter().map(|r| (r.addr, r.len)).collect();
        let hops = routes
            .iter()
            .map(|r| (r.port, r.gw.map_or(0, u32::from)))
            .collect();
        let min_out = routes.iter().map(|r| r.port + 1).max().unwrap_or(0);
        IPLookup {
            class,
            lpm: Lpm::new(&prefixes),
            routes,
            hops,
            min_out,
            no_route: 0,
        }
    }

    /// The route for `dst`: (output port, gateway if any).
    #[inline]
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<(usize, Option<Ipv4Addr>)> {
        let (port, gw) = *self.hops.get(self.lpm.lookup(u32::from(dst))?)?;
        Some((port, (gw != 0).then(|| Ipv4Addr::from(gw))))
    }

    /// What `push` does, in place.
    #[inline(always)]
    fn step(&mut self, p: &mut Packet) -> crate::Step {
        match self.lookup(p.meta.dst_ip) {
            Some((port, gw)) => {
                if let Some(gw) = gw {
                    p.meta.dst_ip = gw;
                }
                crate::Step::Out(port as u32)
            }
            None => {
                self.no_route += 1;
                crate::Step::Drop(RouteReason::NoRoute.into())
            }
        }
    }
}

impl RouteTable for IPLookup {
    fn routes(&self) -> &[Route] {
        &self.routes
    }

    #[inline]
    fn route_index(&self, dst: u32) -> Option<usize> {
        self.lpm.lookup(dst)
    }
}

impl Element for IPLookup {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, self.min_out, usize::MAX)
    }
    push_in_place!();
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![(RouteReason::NoRoute.into(), self.no_route)]
    }
    /// Longest-prefix match on the destination annotation as first-match cases: routes by
    /// prefix length, longest first, and among equal prefixes the first configured (later
    /// duplicates can never match and are left out). A gateway is written into the
    /// annotation. No route: `no-route`.
    fn route_table(&self) -> Option<&dyn RouteTable> {
        Some(self)
    }

    fn model(&self) -> Option<Model> {
        let mut order: Vec<&Route> = self.routes.iter().collect();
        order.sort_by_key(|r| std::cmp::Reverse(r.len.min(32))); // stable: first of equals first
        let mut seen = std::collections::HashSet::new();
        let mut cases = Vec::new();
        for r in order {
            let len = r.len.min(32);
            let net = u32::from(r.addr) & mask(len);
            if !seen.insert((net, len)) {
                continue;
            }
            let f = Filter::any().with(
                Field::DstIpAnno,
                FieldSet::prefix(u128::from(net), u32::from(len), 32),
            );
            let mut c = Case::new(f, Outcome::Out(r.port));
            if let Some(gw) = r.gw.filter(|g| u32::from(*g) != 0) {
                c = c.effect(Effect::Write(
                    Field::DstIpAnno,
                    Op::Set(u128::from(u32::from(gw))),
                ));
            }
            cases.push(c);
        }
        cases.push(
            Case::new(Filter::any(), Outcome::Drop(RouteReason::NoRoute.into()))
                .stat(RouteReason::NoRoute.into()),
        );
        Some(Model::new(cases))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use packet::Packet;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    /// Reference LPM: linear scan, longest prefix, first of equals.
    fn linear(prefixes: &[(Ipv4Addr, u8)], a: u32) -> Option<usize> {
        let mut best: Option<(usize, u8)> = None;
        for (i, &(p, l)) in prefixes.iter().enumerate() {
            if a & mask(l) == u32::from(p) & mask(l) && best.is_none_or(|(_, bl)| l > bl) {
                best = Some((i, l));
            }
        }
        best.map(|b| b.0)
    }

    #[test]
    fn lpm_matches_linear_scan() {
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20 {
            let n = (next() % 40) as usize;
            let base = next() as u32;
            let prefixes: Vec<(Ipv4Addr, u8)> = (0..n)
                .map(|_| {
                    // Cluster addresses so prefixes nest and collide.
                    let a = (base & 0xffff_0000) | (next() as u32 & 0x0000_ffff);
                    let a = if next() % 4 == 0 { next() as u32 } else { a };
                    (Ipv4Addr::from(a), (next() % 33) as u8)
                })
                .collect();
            let lpm = Lpm::new(&prefixes);
            for _ in 0..2000 {
                let a = if next() % 2 == 0 {
                    (base & 0xffff_0000) | (next() as u32 & 0xffff)
                } else {
                    next() as u32
                };
                assert_eq!(
                    lpm.lookup(a),
                    linear(&prefixes, a),
                    "addr {}",
                    Ipv4Addr::from(a)
                );
            }
        }
    }

    #[test]
    fn lpm_matches_a_scan_on_bgp_like_tables() {
        for (n, lookups, seed) in [(16_384usize, 20_000usize, 7u64), (500_000, 1_500, 11)] {
            let table = super::super::tables::bgp_v4(n, seed);
            let lpm = Lpm::new(&table);
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            for k in 0..lookups {
                // Half the addresses inside a random prefix of the table (often nested
                // under shorter ones), half anywhere.
                let a = if k % 2 == 0 {
                    let (p, l) = table[(next() % n as u64) as usize];
                    u32::from(p) | (next() as u32 & !mask(l))
                } else {
                    next() as u32
                };
                let want = linear(&table, a);
                let got = lpm.lookup(a);
                // Equal prefixes: both give the first; otherwise the same prefix.
                assert_eq!(
                    got.map(|i| table[i]),
                    want.map(|i| table[i]),
                    "{n} prefixes, addr {}",
                    Ipv4Addr::from(a)
                );
            }
        }
    }

    #[test]
    fn routes_gateways_and_no_route() {
        let mut e = build(
            "RadixIPLookup",
            "10.0.0.0/8 1, 10.1.0.0/16 10.0.0.254 2, 10.1.2.3/32 3, 0.0.0.0/0 192.168.1.1 0",
            4,
        )
        .unwrap();
        assert_eq!(e.port_count().min_out, 4);
        let go = |e: &mut dyn Element, d: &str| {
            let mut p = Packet::from_bytes(&[0; 20]);
            p.meta.dst_ip = ip(d);
            let o = push(e, p);
            o.out.first().map(|(port, p)| (*port, p.meta.dst_ip))
        };
        assert_eq!(go(e.as_mut(), "10.9.9.9"), Some((1, ip("10.9.9.9"))));
        assert_eq!(go(e.as_mut(), "10.1.9.9"), Some((2, ip("10.0.0.254"))));
        assert_eq!(go(e.as_mut(), "10.1.2.3"), Some((3, ip("10.1.2.3"))));
        assert_eq!(go(e.as_mut(), "8.8.8.8"), Some((0, ip("192.168.1.1"))));
        let mut e = build("StaticIPLookup", "10.0.0.0/8 - 0, 10.0.0.0/8 1", 2).unwrap();
        assert_eq!(go(e.as_mut(), "10.1.1.1"), Some((0, ip("10.1.1.1"))));
        let mut p = Packet::from_bytes(&[0; 20]);
        p.meta.dst_ip = ip("11.0.0.1");
        assert_eq!(push(e.as_mut(), p).drops, vec!["no-route"]);
        assert_eq!(e.stats(), vec![("no-route", 1)]);
    }

    #[test]
    fn legacy_syntax_and_errors() {
        let mut e = build(
            "LookupIPRoute",
            "18.26.4.0 255.255.255.0 0.0.0.0 0, 0.0.0.0 0.0.0.0 18.26.4.1 1",
            2,
        )
        .unwrap();
        let mut p = Packet::from_bytes(&[0; 20]);
        p.meta.dst_ip = ip("1.2.3.4");
        let o = push(e.as_mut(), p);
        assert_eq!((o.out[0].0, o.out[0].1.meta.dst_ip), (1, ip("18.26.4.1")));
        let mut p = Packet::from_bytes(&[0; 20]);
        p.meta.dst_ip = ip("18.26.4.7");
        assert_eq!(push(e.as_mut(), p).out[0].0, 0);
        for (class, cfg) in [
            ("RadixIPLookup", "18.26.4.0 255.255.255.0 0.0.0.0 0"),
            ("LookupIPRoute", "18.26.4.0 255.0.255.0 0.0.0.0 0"),
            ("RadixIPLookup", "10.0.0.0/33 0"),
            ("RadixIPLookup", "10.0.0.0/8 x"),
            ("RadixIPLookup", "10.0.0.0/8"),
            ("RadixIPLookup", "10.0.0.0/8 1.2.3 0"),
            ("RadixIPLookup", "10.0.0.0/8 -1"),
        ] {
            assert!(build(class, cfg, 2).is_err(), "{class}({cfg})");
        }
        assert!(build("DirectIPLookup", "", 0).is_ok());
    }
}
