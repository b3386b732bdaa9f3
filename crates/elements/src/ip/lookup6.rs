//! IPv6 route lookup: `LookupIP6Route` over a path-compressed binary radix trie ([`Lpm6`]).

use crate::args::parse_uint;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use std::net::Ipv6Addr;

use super::IpHeaderReason;
use crate::reason::RouteReason;

/// No child / no route.
const NONE: u32 = u32::MAX;

/// The mask of the first `len` bits of a 128-bit address (`len` ≥ 128: all ones).
#[inline]
pub fn mask6(len: u8) -> u128 {
    match len {
        0 => 0,
        l if l >= 128 => u128::MAX,
        l => u128::MAX << (128 - u32::from(l)),
    }
}

/// Bit `i` (0 = most significant) of `a`, as 0 or 1.
#[inline]
fn bit(a: u128, i: u8) -> usize {
    ((a >> (127 - u32::from(i.min(127)))) & 1) as usize
}

/// One trie node: a prefix (`key`, split into two words so a node is 32 bytes, not 48 with
/// `u128`'s 16-byte alignment), its length, the route stored there (or [`NONE`]) and the two
/// children (or [`NONE`]).
#[derive(Debug, Clone, Copy)]
struct Node {
    hi: u64,
    lo: u64,
    child: [u32; 2],
    route: u32,
    len: u8,
}

impl Node {
    #[inline]
    fn key(&self) -> u128 {
        (u128::from(self.hi) << 64) | u128::from(self.lo)
    }
}

/// An IPv6 longest-prefix-match table: a path-compressed binary radix trie (a PATRICIA trie
/// over prefixes), every node in one `Vec` addressed by `u32` indices.
///
/// A node holds a prefix; its children extend it by at least one bit, the next bit choosing
/// the child, and single-child chains without routes are compressed away. A lookup walks
/// from the root, checks each node's prefix against the address with one masked 128-bit
/// compare, remembers the last node with a route and stops at the first mismatch or missing
/// child: at most one node per distinct prefix length on the path (about 20 steps from the
/// root for a 500k-prefix table, a handful below the direct stride), no hashing, no
/// allocation. Memory is two nodes per prefix at most (32 bytes each).
///
/// Why a trie of our own rather than the `prefix-trie` crate (which builds on this
/// toolchain): the same interface and semantics as the IPv4 [`super::Lpm`] (built once from
/// a slice, lookups return the index of the winning prefix in that slice, the first of
/// identical prefixes wins) without converting every address to another crate's prefix
/// type on each lookup, a flat 32-byte node layout with `u32` links, and no new dependency
/// for a hundred lines of code. A multibit layout like the IPv4 table's does not fit IPv6:
/// a 16-8-8-… expansion of 500k /48s would take hundreds of megabytes.
///
/// From [`Lpm6::DIRECT_FROM`] prefixes the walk starts from a direct-indexed first stride
/// (as the IPv4 table's first level): one entry per value of the top 16 address bits (20
/// bits from [`Lpm6::WIDE_FROM`] prefixes), each holding the best route among the trie's
/// shorter prefixes there and the first node at least as long to continue from. This skips
/// the top of the trie (about 13 of 14 levels of branching for 16k prefixes in 2000::/3)
/// for 512 KiB (8 MiB with 20 bits, next to the 32 MB of nodes of a 500k-prefix table),
/// which small tables do not pay.
#[derive(Debug, Clone)]
pub struct Lpm6 {
    nodes: Vec<Node>,
    /// Per value of the top `stride` bits: (node to continue from or [`NONE`], best route
    /// so far or [`NONE`]). Empty for small tables: the walk starts at the root.
    direct: Vec<(u32, u32)>,
    /// Bits indexed by `direct` (1..=24), or 0 without it.
    stride: u32,
}

impl Default for Lpm6 {
    fn default() -> Self {
        Lpm6 {
            nodes: vec![Node {
                hi: 0,
                lo: 0,
                child: [NONE; 2],
                route: NONE,
                len: 0,
            }],
            direct: Vec::new(),
            stride: 0,
        }
    }
}

impl Lpm6 {
    /// Builds the table for `prefixes` (address, length; host bits are ignored, lengths
    /// above 128 read as 128); lookups return the index into `prefixes` of the longest
    /// matching prefix. Of identical prefixes the first wins.
    pub fn new(prefixes: &[(Ipv6Addr, u8)]) -> Lpm6 {
        let stride = match prefixes.len() {
            n if n >= Self::WIDE_FROM => 20,
            n if n >= Self::DIRECT_FROM => 16,
            _ => 0,
        };
        Self::build(prefixes, stride)
    }

    /// The table with a direct first stride of `stride` bits (0: none; at most 24).
    fn build(prefixes: &[(Ipv6Addr, u8)], stride: u32) -> Lpm6 {
        let mut t = Lpm6::default();
        t.nodes.reserve(prefixes.len() * 2);
        for (i, &(a, len)) in prefixes.iter().enumerate() {
            let len = len.min(128);
            t.insert(u128::from(a) & mask6(len), len, i as u32);
        }
        let stride = stride.min(24);
        if stride > 0 {
            t.stride = stride;
            t.direct = (0..1u32 << stride).map(|v| t.start(v)).collect();
        }
        t
    }

    /// Tables with at least this many prefixes get a direct first stride of 16 bits.
    pub const DIRECT_FROM: usize = 256;

    /// Tables with at least this many prefixes get a direct first stride of 20 bits.
    pub const WIDE_FROM: usize = 65_536;

    /// The direct-stride entry for top bits `v`: the walk over the nodes shorter than
    /// the stride, which the top bits decide entirely.
    fn start(&self, v: u32) -> (u32, u32) {
        let a = u128::from(v) << (128 - self.stride);
        let (mut n, mut best) = (0u32, NONE);
        while let Some(node) = self.nodes.get(n as usize) {
            if u32::from(node.len) >= self.stride {
                return (n, best);
            }
            if (a ^ node.key()) & mask6(node.len) != 0 {
                break;
            }
            if node.route != NONE {
                best = node.route;
            }
            n = node.child[bit(a, node.len)];
        }
        (NONE, best)
    }

    fn push(&mut self, key: u128, len: u8, route: u32) -> u32 {
        self.nodes.push(Node {
            hi: (key >> 64) as u64,
            lo: key as u64,
            child: [NONE; 2],
            route,
            len,
        });
        (self.nodes.len() - 1) as u32
    }

    /// Inserts `key/len` (host bits clear) with route `route`, unless the prefix has one.
    fn insert(&mut self, key: u128, len: u8, route: u32) {
        // Invariant: node `n`'s prefix contains key/len and is not longer.
        let mut n = 0usize;
        loop {
            let node = self.nodes[n];
            if node.len == len {
                if node.route == NONE {
                    self.nodes[n].route = route;
                }
                return;
            }
            let b = bit(key, node.len);
            let c = node.child[b];
            if c == NONE {
                let new = self.push(key, len, route);
                self.nodes[n].child[b] = new;
                return;
            }
            let child = self.nodes[c as usize];
            let ck = child.key();
            let common = ((key ^ ck).leading_zeros() as u8).min(len).min(child.len);
            if common == child.len {
                n = c as usize; // the child's prefix contains key/len: go down
                continue;
            }
            // key/len and the child part ways (or key/len is a prefix of the child) at bit
            // `common`: a node of that length goes in between.
            let mid = if common == len {
                self.push(key, len, route)
            } else {
                let m = self.push(key & mask6(common), common, NONE);
                let leaf = self.push(key, len, route);
                self.nodes[m as usize].child[bit(key, common)] = leaf;
                m
            };
            self.nodes[mid as usize].child[bit(ck, common)] = c;
            self.nodes[n].child[b] = mid;
            return;
        }
    }

    /// The index of the longest prefix containing `addr`, if any.
    #[inline]
    pub fn lookup(&self, addr: Ipv6Addr) -> Option<usize> {
        self.lookup_u128(u128::from(addr))
    }

    /// [`Lpm6::lookup`] on the address as a big-endian 128-bit number.
    #[inline]
    pub fn lookup_u128(&self, a: u128) -> Option<usize> {
        // Without a stride the shift is 128: no top bits, an empty table, the walk starts at
        // the root.
        let top = a.checked_shr(128 - self.stride).unwrap_or(0) as usize;
        let (mut n, mut best) = match self.direct.get(top) {
            Some(&e) => e,
            None => (0, NONE),
        };
        while let Some(node) = self.nodes.get(n as usize) {
            if (a ^ node.key()) & mask6(node.len) != 0 {
                break;
            }
            if node.route != NONE {
                best = node.route;
            }
            if node.len >= 128 {
                break;
            }
            n = node.child[bit(a, node.len)];
        }
        (best != NONE).then_some(best as usize)
    }

    /// Number of trie nodes (prefixes plus the branching nodes between them).
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Bytes the nodes and the direct first stride take.
    pub fn memory(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>() + self.direct.len() * 8
    }
}

/// One IPv6 route: destinations in `addr/len` go to output `port`; `gw` is the configured
/// gateway, if any (`::` means none, as in Click).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route6 {
    /// Network address (host bits cleared).
    pub addr: Ipv6Addr,
    /// Prefix length, 0..=128.
    pub len: u8,
    /// Gateway, if any.
    pub gw: Option<Ipv6Addr>,
    /// Output port.
    pub port: usize,
}

/// The length of a contiguous IPv6 netmask (`ffff:ffff::` → 32), `None` if not contiguous.
fn mask_len(m: Ipv6Addr) -> Option<u8> {
    let m = u128::from(m);
    let len = m.leading_ones();
    (m.checked_shl(len).unwrap_or(0) == 0).then_some(len as u8)
}

/// `ADDR/LEN`, `ADDR/MASK` or a bare `ADDR` (a /128).
fn parse_prefix6(s: &str) -> Result<(Ipv6Addr, u8), ConfigError> {
    let bad = || ConfigError::new(format!("expected IPv6 prefix ADDR/LEN, found `{s}`"));
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let a: Ipv6Addr = a.parse().map_err(|_| bad())?;
    let len = match l {
        None => 128,
        Some(l) if l.contains(':') => {
            let m: Ipv6Addr = l.parse().map_err(|_| bad())?;
            mask_len(m).ok_or_else(|| {
                ConfigError::new(format!("expected a contiguous IPv6 netmask, found `{l}`"))
            })?
        }
        Some(l) => l.parse::<u8>().ok().filter(|&l| l <= 128).ok_or_else(bad)?,
    };
    Ok((a, len))
}

/// Parses one route: `DST/LEN [GW] OUT` (Click's `cp_ip6_prefix` form; `LEN` may also be a
/// netmask, a bare `DST` is a /128) or `DST MASK [GW] OUT` (the form of Click's
/// documentation). With three words and no `/`, the second is a mask when it is a
/// contiguous non-zero netmask (`ffff:ffff::`), otherwise a gateway of a /128 route — so
/// Click's `3ffe::1 ::0 0` stays a host route without gateway.
fn parse_route6(s: &str) -> Result<Route6, ConfigError> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let addr6 = |w: &str, what: &str| -> Result<Ipv6Addr, ConfigError> {
        w.parse()
            .map_err(|_| ConfigError::new(format!("expected {what} (IPv6 address), found `{w}`")))
    };
    let as_mask = |w: &str| {
        w.parse::<Ipv6Addr>()
            .ok()
            .filter(|m| !m.is_unspecified())
            .and_then(mask_len)
    };
    let ((addr, len), gw, out) = match words.as_slice() {
        [p, o] => (parse_prefix6(p)?, None, *o),
        [d, m, o] if !d.contains('/') && as_mask(m).is_some() => {
            let len = as_mask(m).unwrap_or(128);
            ((addr6(d, "destination")?, len), None, *o)
        }
        [p, g, o] => (parse_prefix6(p)?, Some(*g), *o),
        [d, m, g, o] => {
            let dst = addr6(d, "destination")?;
            let mask = addr6(m, "netmask")?;
            let len = mask_len(mask).ok_or_else(|| {
                ConfigError::new(format!("expected a contiguous IPv6 netmask, found `{m}`"))
            })?;
            ((dst, len), Some(*g), *o)
        }
        _ => {
            return Err(ConfigError::new(format!(
                "expected route `DST/LEN [GW] OUT` or `DST MASK [GW] OUT`, found `{s}`"
            )))
        }
    };
    let gw = match gw {
        None | Some("-") => None,
        Some(g) => Some(addr6(g, "gateway")?).filter(|g| !g.is_unspecified()),
    };
    let port = parse_uint(out, "OUT")
        .ok()
        .and_then(|p| usize::try_from(p).ok())
        .filter(|&p| p < 1 << 16)
        .ok_or_else(|| {
            ConfigError::new(format!(
                "expected OUT port number below 65536 in route `{s}`, found `{out}`"
            ))
        })?;
    Ok(Route6 {
        addr: Ipv6Addr::from(u128::from(addr) & mask6(len)),
        len,
        gw,
        port,
    })
}

reasons! {
    /// Why `LookupIP6Route` drops a packet, in the order of its `stats()` (one counter per
    /// reason, `reason as usize`).
    pub enum LookupIP6Reason {
        /// No network header annotation.
        NoIpHeader => IpHeaderReason::Missing.as_str(),
        /// Fewer than 40 bytes (a fixed IPv6 header) at the network header annotation.
        ShortIpv6 => "short-ipv6",
        /// The network header annotation points at a packet whose version is not 6.
        NotIpv6 => "not-ipv6",
        /// No route for the destination.
        NoRoute => RouteReason::NoRoute.as_str(),
    }
}

/// `LookupIP6Route(DST MASK [GW] OUT, DST/LEN [GW] OUT, ...)`: IPv6 routing table lookup.
///
/// Each argument is a route: a destination prefix, an optional gateway (`::` or `-` mean
/// none) and an output. The packet's destination is looked up with longest-prefix match
/// ([`Lpm6`]) and the packet leaves on the matching route's output; of two identical
/// prefixes the first configured wins. Needs at least max OUT + 1 outputs.
///
/// Differences from Click, which looks up the destination IPv6 *annotation*
/// (`DST_IP6_ANNO`, set by `GetIP6Address`) and sets it to the gateway: FuseBox's packets
/// have no IPv6 destination annotation (only the IPv4 one), so this element reads the
/// destination address from the IPv6 header at the network header annotation, and a
/// route's gateway is parsed and kept (see [`LookupIP6Route::routes`]) but written
/// nowhere. Packets that cannot be looked up are dropped and counted, never a panic: no
/// network header annotation (`no-ip-header`), fewer than 40 bytes there (`short-ipv6`),
/// version other than 6 (`not-ipv6`), no matching route (`no-route`). Opaque to synthesis
/// (no model).
pub struct LookupIP6Route {
    routes: Vec<Route6>,
    ports: Vec<usize>,
    lpm: Lpm6,
    min_out: usize,
    drops: [u64; LookupIP6Reason::ALL.len()],
}

impl LookupIP6Route {
    /// Builds the element from its configuration; errors name the argument and what was
    /// expected.
    pub fn configure(args: &Args, _bcx: &BuildCtx) -> Result<LookupIP6Route, ConfigError> {
        let mut routes = Vec::new();
        for (i, a) in args.all().iter().enumerate() {
            let text = match &a.keyword {
                Some(k) => format!("{k} {}", a.value),
                None => a.value.clone(),
            };
            let r = parse_route6(&text)
                .map_err(|e| ConfigError::new(format!("argument {}: {}", i + 1, e.message)))?;
            routes.push(r);
        }
        Ok(LookupIP6Route::from_routes(routes))
    }

    /// Builds the element over `routes`.
    pub fn from_routes(routes: Vec<Route6>) -> LookupIP6Route {
        let prefixes: Vec<(Ipv6Addr, u8)> = routes.iter().map(|r| (r.addr, r.len)).collect();
        LookupIP6Route {
            lpm: Lpm6::new(&prefixes),
            ports: routes.iter().map(|r| r.port).collect(),
            min_out: routes.iter().map(|r| r.port + 1).max().unwrap_or(0),
            routes,
            drops: [0; LookupIP6Reason::ALL.len()],
        }
    }

    /// The configured routes, in configuration order.
    pub fn routes(&self) -> &[Route6] {
        &self.routes
    }

    /// The route for `dst`, if any.
    #[inline]
    pub fn lookup(&self, dst: Ipv6Addr) -> Option<&Route6> {
        self.routes.get(self.lpm.lookup(dst)?)
    }

    /// The output for the packet, or its drop reason.
    #[inline]
    fn decide(&self, p: &Packet) -> Result<usize, LookupIP6Reason> {
        use LookupIP6Reason::*;
        let h = p.network_header().ok_or(NoIpHeader)?;
        if h.first().ok_or(ShortIpv6)? >> 4 != 6 {
            return Err(NotIpv6);
        }
        if h.len() < wire::ipv6::HEADER_LEN {
            return Err(ShortIpv6);
        }
        let dst = wire::ipv6::Packet::new_unchecked(h).dst_addr();
        let i = self.lpm.lookup_u128(u128::from(dst)).ok_or(NoRoute)?;
        self.ports.get(i).copied().ok_or(NoRoute)
    }
}

// LookupIP6Route reads an IPv6 header, which no declarable field names: it declares nothing (`Element::declared`).
impl Element for LookupIP6Route {
    fn class_name(&self) -> &'static str {
        "LookupIP6Route"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, self.min_out, usize::MAX)
    }
    #[inline]
    fn push(&mut self, _port: usize, p: Packet, _cx: &mut Context) -> Verdict {
        match self.decide(&p) {
            Ok(port) => Verdict::Out(port, p),
            Err(r) => {
                self.drops[r as usize] += 1;
                Verdict::Drop(p, r.into())
            }
        }
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        LookupIP6Reason::TEXTS
            .iter()
            .copied()
            .zip(self.drops)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tables::{bgp_v6, XorShift};
    use super::super::testutil::*;
    use super::*;
    use proptest::prelude::*;

    /// Reference LPM: linear scan, longest prefix, first of identical prefixes.
    fn linear(prefixes: &[(Ipv6Addr, u8)], a: u128) -> Option<usize> {
        let mut best: Option<(usize, u8)> = None;
        for (i, &(p, l)) in prefixes.iter().enumerate() {
            let l = l.min(128);
            if (a ^ u128::from(p)) & mask6(l) == 0 && best.is_none_or(|(_, bl)| l > bl) {
                best = Some((i, l));
            }
        }
        best.map(|b| b.0)
    }

    fn ip6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn the_generated_tables_have_the_documented_shape() {
        let t = bgp_v6(100_000, 3);
        let share = |f: &dyn Fn(u8) -> bool| {
            t.iter().filter(|&&(_, l)| f(l)).count() as f64 / t.len() as f64
        };
        assert!((share(&|l| l == 48) - 0.50).abs() < 0.01);
        assert!((share(&|l| (32..48).contains(&l)) - 0.38).abs() < 0.01);
        assert!((share(&|l| (19..32).contains(&l)) - 0.06).abs() < 0.005);
        assert!((share(&|l| (49..=64).contains(&l)) - 0.06).abs() < 0.005);
        assert!(t
            .iter()
            .all(|&(a, l)| u128::from(a) >> 125 == 1 && u128::from(a) & !mask6(l) == 0));
        // Prefixes nest: many lie inside a shorter one of the table (a trie of the
        // shorter prefixes, filled length by length, finds it).
        let mut by_len = t[..20_000].to_vec();
        by_len.sort_by_key(|p| p.1);
        let mut shorter = Lpm6::default();
        let mut nested = 0;
        for group in by_len.chunk_by(|x, y| x.1 == y.1) {
            nested += group
                .iter()
                .filter(|p| shorter.lookup(p.0).is_some())
                .count();
            for &(a, l) in group {
                shorter.insert(u128::from(a), l, 0);
            }
        }
        assert!(
            nested > 6_000 && nested < 14_000,
            "{nested} of 20000 nested"
        );
    }

    /// Lookup addresses: prefix-derived (random host bits inside a random prefix of the
    /// table, often also inside shorter and longer ones), its first and last address, and
    /// random addresses in and out of 2000::/3.
    fn check_against_scan(table: &[(Ipv6Addr, u8)], lookups: usize, seed: u64) {
        let lpm = Lpm6::new(table);
        let mut r = XorShift::new(seed);
        let (mut hits, mut misses) = (0, 0);
        for k in 0..lookups {
            let (p, l) = table[r.below(table.len() as u64) as usize];
            let (p, m) = (u128::from(p), mask6(l));
            let a = match k % 5 {
                0 | 1 => p | (r.next128() & !m),
                2 => p,
                3 => p | !m,
                _ if k % 10 == 4 => (r.next128() >> 3) | (1 << 125),
                _ => r.next128(),
            };
            let want = linear(table, a);
            assert_eq!(
                lpm.lookup_u128(a),
                want,
                "{} prefixes, address {}",
                table.len(),
                Ipv6Addr::from(a)
            );
            if want.is_some() {
                hits += 1
            } else {
                misses += 1
            }
        }
        // Both outcomes were exercised.
        assert!(
            hits > lookups / 2 && misses > 0,
            "{hits} hits, {misses} misses"
        );
    }

    #[test]
    fn trie_matches_a_scan_on_a_16k_bgp_like_table() {
        check_against_scan(&bgp_v6(16_384, 21), 40_000, 5);
    }

    #[test]
    fn trie_matches_a_scan_on_a_500k_bgp_like_table() {
        let t = bgp_v6(500_000, 23);
        check_against_scan(&t, 3_000, 9);
        // Compact: a node per prefix plus the branching nodes, 32 bytes each.
        let lpm = Lpm6::new(&t);
        assert!(lpm.nodes() <= 2 * t.len() + 1, "{}", lpm.nodes());
        assert_eq!(lpm.memory(), 32 * lpm.nodes() + (8 << 20));
    }

    #[test]
    fn duplicates_nesting_and_defaults() {
        let t = [
            (ip6("2001:db8::"), 32),
            (ip6("2001:db8:1::"), 48),
            (ip6("2001:db8::ff"), 32), // same prefix as 0 (host bits ignored): 0 wins
            (ip6("::"), 0),
            (ip6("2001:db8:1::1"), 128),
            (ip6("2001:db8:1::1"), 200), // read as /128, identical to 4
        ];
        for lpm in [Lpm6::build(&t, 0), Lpm6::build(&t, 16), Lpm6::build(&t, 20)] {
            assert_eq!(lpm.lookup(ip6("2001:db8:2::1")), Some(0));
            assert_eq!(lpm.lookup(ip6("2001:db8:1:ffff::")), Some(1));
            assert_eq!(lpm.lookup(ip6("2001:db8:1::1")), Some(4));
            assert_eq!(lpm.lookup(ip6("2001:db8:1::2")), Some(1));
            assert_eq!(lpm.lookup(ip6("3000::")), Some(3));
        }
        assert_eq!(Lpm6::new(&t[..3]).lookup(ip6("3000::")), None);
        assert_eq!(Lpm6::new(&[]).lookup(ip6("::")), None);
    }

    /// Small tables of nesting, colliding prefixes: the top 4 bits from a 2-value set, the
    /// next bits random, lengths anywhere in 0..=128.
    fn arb_prefix() -> impl Strategy<Value = (u128, u8)> {
        (0u128..2, any::<u128>(), 0u8..=130).prop_map(|(top, rest, l)| {
            let a = (top << 124)
                | (rest >> 4
                    & if rest & 1 == 0 {
                        u128::MAX >> 100
                    } else {
                        u128::MAX
                    });
            (a, l)
        })
    }

    proptest! {
        #[test]
        fn lookups_equal_the_scan_on_small_tables(
            table in proptest::collection::vec(arb_prefix(), 0..48),
            probes in proptest::collection::vec((any::<u128>(), 0usize..48, 0u8..3), 64),
        ) {
            let table: Vec<(Ipv6Addr, u8)> =
                table.into_iter().map(|(a, l)| (Ipv6Addr::from(a), l)).collect();
            let lpm = Lpm6::build(&table, 0);
            let direct = Lpm6::build(&table, 16);
            let narrow = Lpm6::build(&table, 3);
            for (x, i, how) in probes {
                let a = match (table.get(i % table.len().max(1)), how) {
                    (Some(&(p, l)), 0) => u128::from(p) & mask6(l) | (x & !mask6(l)),
                    (Some(&(p, _)), 1) => u128::from(p),
                    _ => x >> 123 << 124 | (x & 0xff),
                };
                prop_assert_eq!(lpm.lookup_u128(a), linear(&table, a), "{}", Ipv6Addr::from(a));
                prop_assert_eq!(direct.lookup_u128(a), linear(&table, a), "{}", Ipv6Addr::from(a));
                prop_assert_eq!(narrow.lookup_u128(a), linear(&table, a), "{}", Ipv6Addr::from(a));
            }
        }
    }

    /// An IPv6 header (40 bytes, no payload) to `dst`, behind `lead` bytes of something else.
    fn v6(dst: &str, lead: usize) -> Packet {
        let mut b = vec![0u8; lead + 40];
        b[lead] = 0x60;
        b[lead + 6] = 59; // no next header
        b[lead + 7] = 64;
        b[lead + 8..lead + 24].copy_from_slice(&ip6("2001:db8::99").octets());
        b[lead + 24..lead + 40].copy_from_slice(&ip6(dst).octets());
        let mut p = Packet::from_bytes(&b);
        p.set_network_header(lead);
        p
    }

    #[test]
    fn element_routes_and_drops_by_reason() {
        let mut e = build(
            "LookupIP6Route",
            "2001:db8::/32 0, 2001:db8:1:: ffff:ffff:ffff:: fe80::1 1, \
             2001:db8:1:2::1 ::0 2, 2001:db8:5::/48 - 3",
            4,
        )
        .unwrap();
        assert_eq!(e.class_name(), "LookupIP6Route");
        assert_eq!(e.port_count().min_out, 4);
        assert!(e.model().is_none());
        let out = |e: &mut dyn Element, p: Packet| push(e, p).out.first().map(|o| o.0);
        assert_eq!(out(e.as_mut(), v6("2001:db8:9::1", 0)), Some(0));
        assert_eq!(out(e.as_mut(), v6("2001:db8:1::7", 14)), Some(1));
        assert_eq!(out(e.as_mut(), v6("2001:db8:1:2::1", 0)), Some(2));
        assert_eq!(out(e.as_mut(), v6("2001:db8:1:2::2", 0)), Some(1));
        assert_eq!(out(e.as_mut(), v6("2001:db8:5:ffff::", 0)), Some(3));
        // The packet leaves unchanged.
        let p = v6("2001:db8:1::7", 0);
        let bytes = p.data().to_vec();
        assert_eq!(push(e.as_mut(), p).out[0].1.data(), &bytes[..]);

        let drops = |e: &mut dyn Element, p: Packet| push(e, p).drops;
        assert_eq!(drops(e.as_mut(), v6("2001:db9::1", 0)), vec!["no-route"]);
        assert_eq!(drops(e.as_mut(), v6("::", 0)), vec!["no-route"]);
        // IPv4 at the annotation (even a long one), a 39-byte IPv6 header, an empty one,
        // and no annotation at all.
        let v4 = udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, &[0; 40]);
        assert_eq!(drops(e.as_mut(), pkt(&v4)), vec!["not-ipv6"]);
        let mut short = v6("2001:db8::1", 0).data().to_vec();
        short.pop();
        let mut p = Packet::from_bytes(&short);
        p.set_network_header(0);
        assert_eq!(drops(e.as_mut(), p), vec!["short-ipv6"]);
        let mut p = Packet::from_bytes(&short);
        p.set_network_header(short.len());
        assert_eq!(drops(e.as_mut(), p), vec!["short-ipv6"]);
        let p = Packet::from_bytes(v6("2001:db8::1", 0).data());
        assert_eq!(drops(e.as_mut(), p), vec!["no-ip-header"]);
        assert_eq!(
            e.stats(),
            vec![
                ("no-ip-header", 1),
                ("short-ipv6", 2),
                ("not-ipv6", 1),
                ("no-route", 2)
            ]
        );
    }

    #[test]
    fn route_syntax_and_errors() {
        let e = build(
            "LookupIP6Route",
            "3ffe:1ce1:2::/128 ::0 0, 3ffe:1ce1:2:0:200::/80 ::0 2, 0::ffff:0:0/96 ::0 3, \
             ::0/0 3ffe:1ce1:2::2 1, 2001:db8::/ffff:ffff:: 4, 2001:db8::7 5, \
             2001:db8:: ffff:: fe80::2 6",
            7,
        )
        .unwrap();
        let e = e.as_any().downcast_ref::<LookupIP6Route>().unwrap();
        let r = e.routes();
        assert_eq!((r[0].len, r[0].gw, r[0].port), (128, None, 0));
        assert_eq!((r[1].addr, r[1].len), (ip6("3ffe:1ce1:2:0:200::"), 80));
        assert_eq!(r[3].gw, Some(ip6("3ffe:1ce1:2::2")));
        assert_eq!((r[4].len, r[5].len), (32, 128));
        assert_eq!(
            (r[6].len, r[6].gw, r[6].port),
            (16, Some(ip6("fe80::2")), 6)
        );
        assert_eq!(
            e.lookup(ip6("3ffe:1ce1:2:0:200::1")).map(|r| r.port),
            Some(2)
        );
        assert_eq!(e.lookup(ip6("3ffe:1ce1:2::")).map(|r| r.port), Some(0));
        assert_eq!(e.lookup(ip6("3ffe:1ce1:2::1")).map(|r| r.port), Some(1));
        assert_eq!(e.lookup(ip6("9::")).map(|r| r.port), Some(1));
        for cfg in [
            "2001:db8::/129 0",
            "2001:db8::/32",
            "2001:db8::/32 x",
            "2001:db8::/32 70000",
            "2001:db8::/32 fe80::zz 0",
            "10.0.0.0/8 0",
            "2001:db8:: ffff:0:ffff:: ::1 0",
            "2001:db8::/ff00:ff00:: 0",
            "a b c d e",
        ] {
            let err = build("LookupIP6Route", cfg, 2).err();
            let msg = err.map(|e| e.message).unwrap_or_default();
            assert!(msg.starts_with("argument 1: expected"), "{cfg}: {msg}");
        }
    }
}
