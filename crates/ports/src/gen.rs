//! Deterministic synthetic traces: Ethernet/IPv4 frames carrying TCP, UDP and ICMP flows.
//!
//! **Sizes.** Every size in this module is an Ethernet *frame size including the 4-byte
//! FCS*, as traffic generators and RFC 2544 count them; the FCS itself is not captured, so
//! a frame of size `n` is written to pcap as `n - 4` bytes (a 64-byte frame is 60 bytes in
//! the file, a 1518-byte frame 1514). Sizes are kept within [`MIN_FRAME`]..=[`MAX_FRAME`].
//! IMIX is 64, 576 and 1500-byte frames in the proportion 7:4:1. Every packet is padded
//! with payload to its size, SYN and FIN segments included (no Ethernet trailer is used,
//! so the IP total length always covers the frame).
//!
//! **Flows.** `flows` distinct flows are drawn up front: protocol by the mix weights,
//! source and destination addresses uniformly inside the prefixes (host parts all-zeros and
//! all-ones avoided when the prefix is /30 or shorter), ports from the port ranges or lists
//! (an ICMP flow's echo identifier is drawn like a source port). A 5-tuple already taken is
//! drawn again (up to 64 times, after which a duplicate is accepted: when the address and
//! port spaces are too small the number of *distinct* flows can be lower). Each flow gets
//! one packet, then the remaining packets go to flows picked uniformly at random; at each
//! step the next packet comes from a flow picked uniformly among those with packets left.
//! When `packets < flows`, only the first `packets` flows are used. The flow table is held
//! in memory (about 64 bytes a flow); packets are produced lazily.
//!
//! **TCP** flows go from the source to the destination prefix only: the first packet is a
//! SYN, middle ones ACK|PSH, the last one FIN|ACK (a one-packet flow is a lone SYN);
//! sequence numbers start from a random ISN and advance by the payload length (and by one
//! for the SYN). **UDP** datagrams and **ICMP** echo requests (sequence numbers 1, 2, ...)
//! complete the mix. Every IP, TCP, UDP and ICMP checksum is valid.
//!
//! **Randomness.** A SplitMix64 generator (Steele, Lea & Flood, 2014) seeded with `seed`
//! drives every choice, so the same configuration always gives the same bytes. Timestamps
//! are `start + i * gap_ns` for the i-th packet.

use packet::Timestamp;
use std::collections::HashSet;
use std::net::Ipv4Addr;
use wire::ethernet::{self, Address};
use wire::{icmpv4, ipv4, tcp, udp};

/// Smallest frame size (with FCS) generated.
pub const MIN_FRAME: u32 = 64;
/// Largest frame size (with FCS) generated (a 9000-byte jumbo payload).
pub const MAX_FRAME: u32 = 9018;
/// Bytes of the frame check sequence, counted in sizes but not captured.
pub const FCS_LEN: u32 = 4;

/// Relative weights of the protocols of the generated flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Weight of TCP flows.
    pub tcp: u32,
    /// Weight of UDP flows.
    pub udp: u32,
    /// Weight of ICMP echo flows.
    pub icmp: u32,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            tcp: 1,
            udp: 1,
            icmp: 0,
        }
    }
}

/// How frame sizes (including the FCS) are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeDist {
    /// Every frame has this size.
    Fixed(u32),
    /// Sizes uniformly distributed over `lo..=hi`.
    Uniform(u32, u32),
    /// Simple IMIX: 64, 576 and 1500-byte frames in the proportion 7:4:1.
    Imix,
}

/// Where ports come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSpec {
    /// Uniformly from `lo..=hi`.
    Range(u16, u16),
    /// Uniformly from this list (an empty list gives port 0).
    List(Vec<u16>),
}

/// Everything [`generate`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenConfig {
    /// Number of packets.
    pub packets: u64,
    /// Number of flows (at least 1).
    pub flows: u32,
    /// Protocol weights.
    pub mix: Mix,
    /// Frame size distribution.
    pub size: SizeDist,
    /// Prefix source addresses are drawn from.
    pub src_prefix: (Ipv4Addr, u8),
    /// Prefix destination addresses are drawn from.
    pub dst_prefix: (Ipv4Addr, u8),
    /// Source ports (and ICMP echo identifiers).
    pub src_ports: PortSpec,
    /// Destination ports.
    pub dst_ports: PortSpec,
    /// Source MAC address of every frame.
    pub src_mac: Address,
    /// Destination MAC address of every frame.
    pub dst_mac: Address,
    /// Seed of the pseudo-random generator.
    pub seed: u64,
    /// Timestamp of the first packet.
    pub start: Timestamp,
    /// Nanoseconds between consecutive packets.
    pub gap_ns: u64,
    /// IP time-to-live of every packet.
    pub ttl: u8,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            packets: 1000,
            flows: 10,
            mix: Mix::default(),
            size: SizeDist::Fixed(MIN_FRAME),
            src_prefix: (Ipv4Addr::new(10, 0, 0, 0), 16),
            dst_prefix: (Ipv4Addr::new(10, 1, 0, 0), 16),
            src_ports: PortSpec::Range(1024, 65535),
            dst_ports: PortSpec::List(vec![80, 443, 1234]),
            src_mac: Address([0x02, 0, 0, 0, 0, 0x01]),
            dst_mac: Address([0x02, 0, 0, 0, 0, 0x02]),
            seed: 1,
            start: Timestamp::from_parts(1_700_000_000, 0),
            gap_ns: 1000,
            ttl: 64,
        }
    }
}

impl GenConfig {
    /// Checks the configuration, saying what is wrong with it.
    pub fn validate(&self) -> Result<(), String> {
        if self.flows == 0 {
            return Err("expected at least 1 flow, found 0".into());
        }
        if self.mix.tcp == 0 && self.mix.udp == 0 && self.mix.icmp == 0 {
            return Err("expected a protocol mix with a non-zero weight".into());
        }
        let check = |n: u32| {
            if (MIN_FRAME..=MAX_FRAME).contains(&n) {
                Ok(())
            } else {
                Err(format!(
                    "expected a frame size in {MIN_FRAME}..={MAX_FRAME}, found {n}"
                ))
            }
        };
        match self.size {
            SizeDist::Fixed(n) => check(n)?,
            SizeDist::Uniform(lo, hi) => {
                check(lo)?;
                check(hi)?;
                if lo > hi {
                    return Err(format!("expected a size range low-high, found {lo}-{hi}"));
                }
            }
            SizeDist::Imix => {}
        }
        for (what, p) in [
            ("source", self.src_prefix),
            ("destination", self.dst_prefix),
        ] {
            if p.1 > 32 {
                return Err(format!(
                    "expected a {what} prefix length of at most 32, found {}",
                    p.1
                ));
            }
        }
        for (what, p) in [
            ("source", &self.src_ports),
            ("destination", &self.dst_ports),
        ] {
            match p {
                PortSpec::Range(lo, hi) if lo > hi => {
                    return Err(format!(
                        "expected a {what} port range low-high, found {lo}-{hi}"
                    ))
                }
                PortSpec::List(l) if l.is_empty() => {
                    return Err(format!("expected at least one {what} port"))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// SplitMix64: a tiny, fast, well-distributed 64-bit generator.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by Lemire's multiply-shift (bias below 2^-32 for the
    /// small ranges used here).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        lo + self.below(hi - lo + 1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Proto {
    Tcp,
    Udp,
    Icmp,
}

impl Proto {
    fn number(self) -> u8 {
        match self {
            Proto::Tcp => ipv4::protocol::TCP,
            Proto::Udp => ipv4::protocol::UDP,
            Proto::Icmp => ipv4::protocol::ICMP,
        }
    }

    fn header_len(self) -> usize {
        match self {
            Proto::Tcp => tcp::HEADER_LEN,
            Proto::Udp => udp::HEADER_LEN,
            Proto::Icmp => icmpv4::HEADER_LEN,
        }
    }
}

#[derive(Debug, Clone)]
struct Flow {
    proto: Proto,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    /// Packets still to send.
    left: u64,
    /// Packets sent so far.
    sent: u64,
    /// Next TCP sequence number.
    seq: u32,
    /// TCP acknowledgement number (the peer's ISN + 1).
    ack: u32,
    /// Next IP identification.
    ident: u16,
}

/// The packet iterator returned by [`generate`].
#[derive(Debug, Clone)]
pub struct Generator {
    rng: SplitMix64,
    flows: Vec<Flow>,
    /// Indices of flows with packets left.
    active: Vec<u32>,
    size: SizeDist,
    src_mac: Address,
    dst_mac: Address,
    ttl: u8,
    next_ts: Timestamp,
    gap_ns: u64,
    remaining: u64,
}

fn normalize_prefix((addr, len): (Ipv4Addr, u8)) -> (u32, u32) {
    let len = u32::from(len.min(32));
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    (u32::from(addr) & mask, mask)
}

fn draw_addr(rng: &mut SplitMix64, (base, mask): (u32, u32)) -> Ipv4Addr {
    let host_mask = !mask;
    let mut host = rng.next_u64() as u32 & host_mask;
    // Avoid the network and broadcast addresses of prefixes that have other hosts.
    if host_mask >= 3 {
        for _ in 0..16 {
            if host != 0 && host != host_mask {
                break;
            }
            host = rng.next_u64() as u32 & host_mask;
        }
    }
    Ipv4Addr::from(base | host)
}

fn draw_port(rng: &mut SplitMix64, spec: &PortSpec) -> u16 {
    match spec {
        PortSpec::Range(lo, hi) => rng.range(u64::from(*lo), u64::from(*hi)) as u16,
        PortSpec::List(list) => {
            if list.is_empty() {
                0
            } else {
                let i = rng.below(list.len() as u64) as usize;
                list.get(i).copied().unwrap_or(0)
            }
        }
    }
}

/// An iterator over the frames of the trace `cfg` describes: `(timestamp, frame bytes)`
/// pairs, the frames starting with their Ethernet header and excluding the FCS.
///
/// Out-of-range settings are brought into range rather than refused (call
/// [`GenConfig::validate`] first to report them): zero flows count as one, an all-zero mix
/// as UDP only, sizes are clamped to [`MIN_FRAME`]..=[`MAX_FRAME`].
pub fn generate(cfg: &GenConfig) -> Generator {
    let mut rng = SplitMix64(cfg.seed);
    let nflows = u64::from(cfg.flows.max(1)).min(cfg.packets);
    let src = normalize_prefix(cfg.src_prefix);
    let dst = normalize_prefix(cfg.dst_prefix);
    let weights = [
        (Proto::Tcp, u64::from(cfg.mix.tcp)),
        (Proto::Udp, u64::from(cfg.mix.udp)),
        (Proto::Icmp, u64::from(cfg.mix.icmp)),
    ];
    let total_weight: u64 = weights.iter().map(|w| w.1).sum();
    let mut seen = HashSet::new();
    let mut flows = Vec::with_capacity(nflows as usize);
    for _ in 0..nflows {
        let proto = if total_weight == 0 {
            Proto::Udp
        } else {
            let mut pick = rng.below(total_weight);
            let mut chosen = Proto::Udp;
            for (p, w) in weights {
                if pick < w {
                    chosen = p;
                    break;
                }
                pick -= w;
            }
            chosen
        };
        let mut tuple = (proto, Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED, 0, 0);
        for _ in 0..64 {
            let s = draw_addr(&mut rng, src);
            let d = draw_addr(&mut rng, dst);
            let sp = draw_port(&mut rng, &cfg.src_ports);
            let dp = if proto == Proto::Icmp {
                sp
            } else {
                draw_port(&mut rng, &cfg.dst_ports)
            };
            tuple = (proto, s, d, sp, dp);
            if !seen.contains(&tuple) {
                break;
            }
        }
        seen.insert(tuple);
        flows.push(Flow {
            proto,
            src: tuple.1,
            dst: tuple.2,
            sport: tuple.3,
            dport: tuple.4,
            left: 1,
            sent: 0,
            seq: rng.next_u64() as u32,
            ack: (rng.next_u64() as u32).wrapping_add(1),
            ident: rng.next_u64() as u16,
        });
    }
    // Spread the packets beyond one a flow.
    if nflows > 0 {
        for _ in nflows..cfg.packets {
            let i = rng.below(nflows) as usize;
            if let Some(f) = flows.get_mut(i) {
                f.left += 1;
            }
        }
    }
    let active = (0..flows.len() as u32).collect();
    Generator {
        rng,
        flows,
        active,
        size: cfg.size,
        src_mac: cfg.src_mac,
        dst_mac: cfg.dst_mac,
        ttl: cfg.ttl,
        next_ts: cfg.start,
        gap_ns: cfg.gap_ns,
        remaining: cfg.packets,
    }
}

impl Generator {
    /// Number of flows the trace is made of.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    fn frame_size(&mut self) -> u32 {
        let n = match self.size {
            SizeDist::Fixed(n) => n,
            SizeDist::Uniform(lo, hi) => self.rng.range(u64::from(lo), u64::from(hi)) as u32,
            SizeDist::Imix => match self.rng.below(12) {
                0..=6 => 64,
                7..=10 => 576,
                _ => 1500,
            },
        };
        n.clamp(MIN_FRAME, MAX_FRAME)
    }

    fn build(&mut self, index: usize) -> Option<Vec<u8>> {
        let size = self.frame_size();
        let flow = self.flows.get_mut(index)?;
        let cap_len = (size - FCS_LEN) as usize;
        let l4_len = cap_len - ethernet::HEADER_LEN - ipv4::HEADER_LEN;
        let payload_len = l4_len - flow.proto.header_len();
        let mut frame = vec![0u8; cap_len];
        ethernet::Repr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            ethertype: ethernet::ethertype::IPV4,
        }
        .emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
        let ip = ipv4::Repr {
            src_addr: flow.src,
            dst_addr: flow.dst,
            protocol: flow.proto.number(),
            payload_len: l4_len,
            ttl: self.ttl,
            tos: 0,
            ident: flow.ident,
            dont_frag: flow.proto == Proto::Tcp,
            more_frags: false,
            frag_offset: 0,
        };
        flow.ident = flow.ident.wrapping_add(1);
        let (_, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
        let (ip_buf, l4) = rest.split_at_mut(ipv4::HEADER_LEN);
        ip.emit(&mut ipv4::Packet::new_unchecked(ip_buf));
        // Payload: a counting pattern offset by the flow's packet number.
        let fill = |buf: &mut [u8], sent: u64| {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (i as u64).wrapping_add(sent) as u8;
            }
        };
        let first = flow.sent == 0;
        let last = flow.left == 1;
        match flow.proto {
            Proto::Tcp => {
                let flags = if first {
                    tcp::flags::SYN
                } else if last {
                    tcp::flags::FIN | tcp::flags::ACK
                } else {
                    tcp::flags::PSH | tcp::flags::ACK
                };
                let repr = tcp::Repr {
                    src_port: flow.sport,
                    dst_port: flow.dport,
                    seq_number: flow.seq,
                    ack_number: if first { 0 } else { flow.ack },
                    flags,
                    window_len: 65535,
                    urgent_at: 0,
                    payload_len,
                };
                let mut seg = tcp::Packet::new_unchecked(&mut l4[..]);
                repr.emit(&mut seg);
                fill(seg.payload_mut(), flow.sent);
                seg.fill_checksum_v4(flow.src, flow.dst);
                let consumed = payload_len as u32 + u32::from(first) + u32::from(last && !first);
                flow.seq = flow.seq.wrapping_add(consumed);
            }
            Proto::Udp => {
                let repr = udp::Repr {
                    src_port: flow.sport,
                    dst_port: flow.dport,
                    payload_len,
                };
                let mut dgram = udp::Packet::new_unchecked(&mut l4[..]);
                repr.emit(&mut dgram);
                fill(dgram.payload_mut(), flow.sent);
                dgram.fill_checksum_v4(flow.src, flow.dst);
            }
            Proto::Icmp => {
                let seq = (flow.sent.wrapping_add(1)) as u16;
                let repr = icmpv4::Repr {
                    msg_type: icmpv4::msg_type::ECHO_REQUEST,
                    msg_code: 0,
                    rest_of_header: (u32::from(flow.sport) << 16) | u32::from(seq),
                    data_len: payload_len,
                };
                let mut msg = icmpv4::Packet::new_unchecked(&mut l4[..]);
                fill(msg.data_mut(), flow.sent);
                repr.emit(&mut msg);
            }
        }
        flow.sent += 1;
        flow.left -= 1;
        Some(frame)
    }
}

impl Iterator for Generator {
    type Item = (Timestamp, Vec<u8>);

    fn next(&mut self) -> Option<(Timestamp, Vec<u8>)> {
        if self.remaining == 0 || self.active.is_empty() {
            return None;
        }
        let slot = self.rng.below(self.active.len() as u64) as usize;
        let index = *self.active.get(slot)? as usize;
        let frame = self.build(index)?;
        if self.flows.get(index).is_some_and(|f| f.left == 0) {
            self.active.swap_remove(slot);
        }
        self.remaining -= 1;
        let ts = self.next_ts;
        self.next_ts = ts.add_nanos(self.gap_ns);
        Some((ts, frame))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

/// Parses a size distribution: `64` (fixed), `uniform:64-1500` or `imix`.
pub fn parse_size(s: &str) -> Result<SizeDist, String> {
    let s = s.trim();
    let num = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| format!("expected a frame size in bytes, found `{t}`"))
    };
    let dist = if s.eq_ignore_ascii_case("imix") {
        SizeDist::Imix
    } else if let Some(r) = s.strip_prefix("uniform:") {
        let (lo, hi) = r
            .split_once('-')
            .ok_or_else(|| format!("expected uniform:LOW-HIGH, found `{s}`"))?;
        SizeDist::Uniform(num(lo)?, num(hi)?)
    } else {
        SizeDist::Fixed(num(s)?)
    };
    let probe = GenConfig {
        size: dist,
        ..GenConfig::default()
    };
    probe.validate()?;
    Ok(dist)
}

/// Parses protocol weights such as `tcp=1,udp=1,icmp=0` (protocols left out weigh 0).
pub fn parse_mix(s: &str) -> Result<Mix, String> {
    let mut mix = Mix {
        tcp: 0,
        udp: 0,
        icmp: 0,
    };
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("expected PROTOCOL=WEIGHT, found `{part}`"))?;
        let w: u32 = v
            .trim()
            .parse()
            .map_err(|_| format!("expected a weight (integer), found `{}`", v.trim()))?;
        match k.trim().to_ascii_lowercase().as_str() {
            "tcp" => mix.tcp = w,
            "udp" => mix.udp = w,
            "icmp" => mix.icmp = w,
            other => return Err(format!("expected tcp, udp or icmp, found `{other}`")),
        }
    }
    if mix.tcp == 0 && mix.udp == 0 && mix.icmp == 0 {
        return Err(format!(
            "expected a protocol mix with a non-zero weight, found `{s}`"
        ));
    }
    Ok(mix)
}

/// Parses an IPv4 prefix `A.B.C.D/LEN` (a bare address is a /32).
pub fn parse_prefix(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let s = s.trim();
    let (a, l) = s.split_once('/').unwrap_or((s, "32"));
    let addr: Ipv4Addr = a
        .parse()
        .map_err(|_| format!("expected IP prefix, found `{s}`"))?;
    let len: u8 = l
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("expected IP prefix length 0-32, found `{l}`"))?;
    Ok((addr, len))
}

/// Parses ports: a range `1024-65535`, a list `80,443,1234` or a single port `80`.
pub fn parse_ports(s: &str) -> Result<PortSpec, String> {
    let s = s.trim();
    let port = |t: &str| {
        t.trim()
            .parse::<u16>()
            .map_err(|_| format!("expected a port number (0-65535), found `{}`", t.trim()))
    };
    if let Some((lo, hi)) = s.split_once('-') {
        let (lo, hi) = (port(lo)?, port(hi)?);
        if lo > hi {
            return Err(format!("expected a port range LOW-HIGH, found `{s}`"));
        }
        return Ok(PortSpec::Range(lo, hi));
    }
    let list = s.split(',').map(port).collect::<Result<Vec<_>, _>>()?;
    Ok(PortSpec::List(list))
}

/// Parses a MAC address `02:00:00:00:00:01` (or with `-` separators).
pub fn parse_mac(s: &str) -> Result<Address, String> {
    s.trim()
        .parse::<Address>()
        .map_err(|_| format!("expected Ethernet address, found `{}`", s.trim()))
}
