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
//!
//! **Anomalies** ([`Anomalies`], all off by default) make traces that exercise the error
//! paths of NFs, each chosen per packet with its own probability. They are drawn from a
//! second SplitMix64 stream (seeded from `seed`), so turning them on changes only the
//! packets they touch: the flows, sizes and order stay those of the plain trace.
//! * `ttl_range`: each packet's TTL is drawn uniformly from `lo..=hi` instead of `ttl`
//!   (`--ttl 1-12`: packets that expire somewhere along a chain).
//! * `ip_options`: a valid IPv4 options field, one of NOP padding ended by End-of-list, an
//!   empty record-route option (RFC 791, 1–9 slots, pointer 4), an empty timestamp option
//!   (1–9 slots, pointer 5, flag 0) or a router alert (RFC 2113), padded with End to a
//!   multiple of 4 bytes. IHL and the total length count the options, the checksum covers
//!   them; the option bytes come out of the payload, and the frame grows by what the
//!   payload cannot give.
//! * `bad_ip_checksum`: the IPv4 header checksum is wrong (never one of the two encodings
//!   of the right sum).
//! * `arp`: instead of the next flow packet, an ARP request (`who-has` a flow's destination
//!   `tell` its source, from the source MAC to broadcast, 60 bytes): the trace still has
//!   `packets` frames, so the flows lose packets at the end.
//! * `truncated`: one of two length faults, with equal chance. Either the frame is cut
//!   short by 1 to all of its transport bytes (the IP total length now claims more than
//!   was captured), or the IP total length is lowered by 1 to all of the transport bytes
//!   (the IP packet ends before the frame, whose rest becomes an Ethernet trailer; the
//!   header checksum is recomputed).
//! * `short_transport`: a TCP segment cut to 7 to 19 transport bytes, or a UDP datagram to
//!   7 or 8 — around the thresholds of Click's rewriters (8 bytes to be rewritten at all,
//!   18 for a TCP header's ports and checksum). The IP total length ends there (the header
//!   checksum is recomputed; the transport checksum is left as it was), and the frame
//!   ends there too, or, with equal chance, carries zeros up to 60 bytes as an Ethernet
//!   trailer. It replaces `truncated` on a packet both pick.

use packet::Timestamp;
use std::collections::HashSet;
use std::net::Ipv4Addr;
use wire::ethernet::{self, Address};
use wire::{arp, icmpv4, ipv4, tcp, udp};

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
    /// IP time-to-live of every packet (unless `anomalies.ttl_range` is set).
    pub ttl: u8,
    /// Faults and unusual packets mixed into the trace (none by default).
    pub anomalies: Anomalies,
}

/// A per-packet probability in millionths (`Rate(10_000)` is 1 %); integer so that
/// configurations compare exactly and draws are the same on every platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(pub u32);

impl Rate {
    /// Never.
    pub const NEVER: Rate = Rate(0);
    /// Every packet.
    pub const ALWAYS: Rate = Rate(1_000_000);

    /// The rate closest to the probability `p` (clamped to 0..=1; NaN is 0).
    pub fn from_probability(p: f64) -> Rate {
        if p.is_nan() || p <= 0.0 {
            Rate::NEVER
        } else if p >= 1.0 {
            Rate::ALWAYS
        } else {
            Rate((p * 1e6).round() as u32)
        }
    }

    /// The probability this rate stands for.
    pub fn probability(self) -> f64 {
        f64::from(self.0) / 1e6
    }

    /// Whether the rate is zero.
    pub fn is_never(self) -> bool {
        self.0 == 0
    }
}

/// Which anomalies a trace contains, and how often (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Anomalies {
    /// Draw each packet's TTL uniformly from `lo..=hi` (overrides [`GenConfig::ttl`]).
    pub ttl_range: Option<(u8, u8)>,
    /// Share of IPv4 packets with a wrong header checksum.
    pub bad_ip_checksum: Rate,
    /// Share of IPv4 packets carrying an options field.
    pub ip_options: Rate,
    /// Share of frames that are ARP requests instead of flow packets.
    pub arp: Rate,
    /// Share of IPv4 packets whose length is cut (frame or IP total length).
    pub truncated: Rate,
    /// Share of TCP and UDP packets cut to a short transport part (see the module
    /// documentation): the thresholds of Click's rewriters.
    pub short_transport: Rate,
}

impl Anomalies {
    /// Whether the configuration asks for no anomaly at all.
    pub fn is_none(&self) -> bool {
        *self == Anomalies::default()
    }
}

/// How many packets of each anomaly a [`Generator`] has produced so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnomalyCounts {
    /// IPv4 packets with a TTL of at most 1 (expire at the first `DecIPTTL`).
    pub ttl_at_most_1: u64,
    /// IPv4 packets with a wrong header checksum.
    pub bad_ip_checksum: u64,
    /// IPv4 packets with an options field.
    pub ip_options: u64,
    /// ARP frames.
    pub arp: u64,
    /// Frames cut short (IP total length beyond the captured bytes).
    pub cut_frames: u64,
    /// IPv4 packets whose total length was lowered (an Ethernet trailer follows).
    pub short_ip_length: u64,
    /// TCP and UDP packets cut to a short transport part.
    pub short_transport: u64,
}

/// The TTL setting of `fusebox gen --ttl`: one value or a range drawn from per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlSpec {
    /// Every packet has this TTL.
    Fixed(u8),
    /// Each packet's TTL is uniform in `lo..=hi`.
    Range(u8, u8),
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
            anomalies: Anomalies::default(),
        }
    }
}

/// Why a generator configuration or one of its command-line values is not valid. The
/// messages say what was expected and what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    /// The configuration asks for no flow.
    #[error("expected at least 1 flow, found 0")]
    NoFlows,
    /// Every protocol of the mix weighs 0 (`found`: the text parsed, when there was one).
    #[error("expected a protocol mix with a non-zero weight{}", found_suffix(.found))]
    ZeroMix {
        /// The mix as written, when it was parsed from text.
        found: Option<String>,
    },
    /// A frame size outside `MIN_FRAME..=MAX_FRAME`.
    #[error("expected a frame size in {MIN_FRAME}..={MAX_FRAME}, found {0}")]
    FrameSize(u32),
    /// A range whose low end is above its high end (`what`: `size`, `TTL`, `source port`…).
    #[error("expected a {what} range low-high, found {lo}-{hi}")]
    ReversedRange {
        /// What the range bounds.
        what: &'static str,
        /// The low end written.
        lo: u32,
        /// The high end written.
        hi: u32,
    },
    /// A prefix length above 32 (`which`: `source` or `destination`).
    #[error("expected a {which} prefix length of at most 32, found {len}")]
    PrefixLength {
        /// Which prefix.
        which: &'static str,
        /// The length found.
        len: u8,
    },
    /// An anomaly rate above 1 (`what`: the anomaly).
    #[error("expected a {what} probability between 0 and 1, found {}", .rate.probability())]
    RateAbove {
        /// The anomaly the rate is for.
        what: &'static str,
        /// The rate found.
        rate: Rate,
    },
    /// An empty port list (`which`: `source` or `destination`).
    #[error("expected at least one {0} port")]
    NoPorts(&'static str),
    /// Text that does not parse as the value expected.
    #[error("expected {expected}, found `{found}`")]
    Syntax {
        /// What the text should have been (`a TTL (0-255)`, `IP prefix`…).
        expected: &'static str,
        /// The text found.
        found: String,
    },
}

fn found_suffix(found: &Option<String>) -> String {
    found
        .as_ref()
        .map_or_else(String::new, |f| format!(", found `{f}`"))
}

fn syntax(expected: &'static str, found: &str) -> GenError {
    GenError::Syntax {
        expected,
        found: found.to_string(),
    }
}

impl GenConfig {
    /// Checks the configuration, saying what is wrong with it.
    pub fn validate(&self) -> Result<(), GenError> {
        if self.flows == 0 {
            return Err(GenError::NoFlows);
        }
        if self.mix.tcp == 0 && self.mix.udp == 0 && self.mix.icmp == 0 {
            return Err(GenError::ZeroMix { found: None });
        }
        let check = |n: u32| {
            if (MIN_FRAME..=MAX_FRAME).contains(&n) {
                Ok(())
            } else {
                Err(GenError::FrameSize(n))
            }
        };
        match self.size {
            SizeDist::Fixed(n) => check(n)?,
            SizeDist::Uniform(lo, hi) => {
                check(lo)?;
                check(hi)?;
                if lo > hi {
                    return Err(GenError::ReversedRange {
                        what: "size",
                        lo,
                        hi,
                    });
                }
            }
            SizeDist::Imix => {}
        }
        for (what, p) in [
            ("source", self.src_prefix),
            ("destination", self.dst_prefix),
        ] {
            if p.1 > 32 {
                return Err(GenError::PrefixLength {
                    which: what,
                    len: p.1,
                });
            }
        }
        let a = &self.anomalies;
        if let Some((lo, hi)) = a.ttl_range {
            if lo > hi {
                return Err(GenError::ReversedRange {
                    what: "TTL",
                    lo: u32::from(lo),
                    hi: u32::from(hi),
                });
            }
        }
        for (what, r) in [
            ("bad IP checksum", a.bad_ip_checksum),
            ("IP options", a.ip_options),
            ("ARP", a.arp),
            ("truncated", a.truncated),
            ("short transport", a.short_transport),
        ] {
            if r > Rate::ALWAYS {
                return Err(GenError::RateAbove { what, rate: r });
            }
        }
        for (what, range, p) in [
            ("source", "source port", &self.src_ports),
            ("destination", "destination port", &self.dst_ports),
        ] {
            match p {
                PortSpec::Range(lo, hi) if lo > hi => {
                    return Err(GenError::ReversedRange {
                        what: range,
                        lo: u32::from(*lo),
                        hi: u32::from(*hi),
                    })
                }
                PortSpec::List(l) if l.is_empty() => return Err(GenError::NoPorts(what)),
                _ => {}
            }
        }
        Ok(())
    }
}

/// SplitMix64: a tiny, fast, well-distributed 64-bit generator (the trace generator's, and
/// the random chain generator's; the same seed gives the same draws on every platform).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0), by Lemire's multiply-shift (bias below 2^-32
    /// for the small ranges used here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// Uniform in `lo..=hi` (the bounds in either order).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `rate`; draws nothing when the rate is zero.
    fn chance(&mut self, rate: Rate) -> bool {
        !rate.is_never() && self.below(Rate::ALWAYS.0.into()) < u64::from(rate.0)
    }
}

/// Offset of the anomaly stream's seed from the trace seed (an arbitrary odd constant).
const ANOMALY_SEED: u64 = 0x5eed_a1a0_0dd5_0001;

/// A valid IPv4 options field (length a multiple of 4, at most 40 bytes).
fn draw_options(rng: &mut SplitMix64) -> Vec<u8> {
    const END: u8 = 0;
    const NOP: u8 = 1;
    const RECORD_ROUTE: u8 = 7;
    const TIMESTAMP: u8 = 68;
    const ROUTER_ALERT: u8 = 148;
    let mut o = match rng.below(4) {
        0 => {
            let mut o = vec![NOP; rng.range(1, 7) as usize];
            o.push(END);
            o
        }
        1 => {
            let slots = rng.range(1, 9) as usize;
            let mut o = vec![RECORD_ROUTE, (3 + 4 * slots) as u8, 4];
            o.resize(3 + 4 * slots, 0);
            o
        }
        2 => {
            let slots = rng.range(1, 9) as usize;
            let mut o = vec![TIMESTAMP, (4 + 4 * slots) as u8, 5, 0];
            o.resize(4 + 4 * slots, 0);
            o
        }
        _ => vec![ROUTER_ALERT, 4, 0, 0],
    };
    while o.len() % 4 != 0 {
        o.push(END);
    }
    o
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Proto {
    Tcp,
    Udp,
    Icmp,
    /// Any other protocol: 4 bytes standing for the ports, then the payload.
    Other(u8),
}

impl Proto {
    fn number(self) -> u8 {
        match self {
            Proto::Tcp => ipv4::protocol::TCP,
            Proto::Udp => ipv4::protocol::UDP,
            Proto::Icmp => ipv4::protocol::ICMP,
            Proto::Other(p) => p,
        }
    }

    fn header_len(self) -> usize {
        match self {
            Proto::Tcp => tcp::HEADER_LEN,
            Proto::Udp => udp::HEADER_LEN,
            Proto::Icmp => icmpv4::HEADER_LEN,
            Proto::Other(_) => 4,
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
    anomalies: Anomalies,
    /// The anomaly stream, separate so that plain traces do not depend on it.
    arng: SplitMix64,
    counts: AnomalyCounts,
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
    spread(cfg, rng, flows)
}

/// Like [`generate`], with the flows' 5-tuples given (a ClassBench header trace, say): flow
/// `i` is `tuples[i]` (for ICMP, the source port is the echo identifier), for `cfg.flows` flows (at most one per tuple); the protocol mix and
/// address and port ranges of `cfg` are not used. TCP, UDP and ICMP get their headers;
/// other protocols carry the two ports as the first four bytes after the IPv4 header.
pub fn generate_tuples(cfg: &GenConfig, tuples: &[packet::Ipv4FlowKey]) -> Generator {
    let mut rng = SplitMix64(cfg.seed);
    let nflows = u64::from(cfg.flows.max(1))
        .min(cfg.packets)
        .min(tuples.len() as u64);
    let flows = tuples
        .iter()
        .take(nflows as usize)
        .map(|t| Flow {
            proto: match t.protocol {
                ipv4::protocol::TCP => Proto::Tcp,
                ipv4::protocol::UDP => Proto::Udp,
                ipv4::protocol::ICMP => Proto::Icmp,
                p => Proto::Other(p),
            },
            src: t.src,
            dst: t.dst,
            sport: t.src_port,
            dport: t.dst_port,
            left: 1,
            sent: 0,
            seq: rng.next_u64() as u32,
            ack: (rng.next_u64() as u32).wrapping_add(1),
            ident: rng.next_u64() as u16,
        })
        .collect();
    spread(cfg, rng, flows)
}

/// The generator over `flows` (one packet each so far): the rest of the packets spread
/// over them at random.
fn spread(cfg: &GenConfig, mut rng: SplitMix64, mut flows: Vec<Flow>) -> Generator {
    let nflows = flows.len() as u64;
    let remaining = if nflows == 0 { 0 } else { cfg.packets };
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
        remaining,
        anomalies: cfg.anomalies,
        arng: SplitMix64(cfg.seed ^ ANOMALY_SEED),
        counts: AnomalyCounts::default(),
    }
}

impl Generator {
    /// The whole trace as capture records (nanosecond timestamps): what an in-memory
    /// replay preloads.
    pub fn records(self) -> Vec<crate::pcap::Record> {
        self.map(|(timestamp, data)| crate::pcap::Record {
            timestamp,
            precision: packet::Precision::Nano,
            orig_len: data.len() as u32,
            data,
        })
        .collect()
    }

    /// Number of flows the trace is made of.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// The anomalies produced so far (all of them once the iterator is exhausted).
    pub fn anomaly_counts(&self) -> AnomalyCounts {
        self.counts
    }

    /// An ARP request for a random flow's destination, from its source (60 bytes).
    fn arp_frame(&mut self) -> Vec<u8> {
        let i = self.arng.below(self.flows.len() as u64) as usize;
        let (src, dst) = self
            .flows
            .get(i)
            .map_or((Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED), |f| {
                (f.src, f.dst)
            });
        let mut frame = vec![0u8; (MIN_FRAME - FCS_LEN) as usize];
        ethernet::Repr {
            src_addr: self.src_mac,
            dst_addr: Address([0xff; 6]),
            ethertype: ethernet::ethertype::ARP,
        }
        .emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
        if let Some(body) = frame.get_mut(ethernet::HEADER_LEN..) {
            arp::Repr {
                operation: arp::operation::REQUEST,
                sender_hardware_addr: self.src_mac,
                sender_protocol_addr: src,
                target_hardware_addr: Address([0; 6]),
                target_protocol_addr: dst,
            }
            .emit(&mut arp::Packet::new_unchecked(body));
        }
        self.counts.arp += 1;
        frame
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
        let a = self.anomalies;
        let ttl = match a.ttl_range {
            Some((lo, hi)) => self.arng.range(lo.into(), hi.into()) as u8,
            None => self.ttl,
        };
        let options = if self.arng.chance(a.ip_options) {
            draw_options(&mut self.arng)
        } else {
            Vec::new()
        };
        let flow = self.flows.get_mut(index)?;
        let mut cap_len = (size - FCS_LEN) as usize;
        let mut payload_len =
            cap_len - ethernet::HEADER_LEN - ipv4::HEADER_LEN - flow.proto.header_len();
        // Options come out of the payload; the frame grows by what it cannot give.
        let opt_len = options.len();
        cap_len += opt_len.saturating_sub(payload_len);
        payload_len = payload_len.saturating_sub(opt_len);
        let ihl = ipv4::HEADER_LEN + opt_len;
        let l4_len = flow.proto.header_len() + payload_len;
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
            payload_len: opt_len + l4_len,
            ttl,
            tos: 0,
            ident: flow.ident,
            dont_frag: flow.proto == Proto::Tcp,
            more_frags: false,
            frag_offset: 0,
        };
        flow.ident = flow.ident.wrapping_add(1);
        let (_, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
        let (ip_buf, l4) = rest.split_at_mut(ihl);
        ip.emit(&mut ipv4::Packet::new_unchecked(&mut ip_buf[..]));
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
            Proto::Other(_) => {
                if let Some(h) = l4.get_mut(..4) {
                    h[..2].copy_from_slice(&flow.sport.to_be_bytes());
                    h[2..].copy_from_slice(&flow.dport.to_be_bytes());
                }
                if let Some(rest) = l4.get_mut(4..) {
                    fill(rest, flow.sent);
                }
            }
        }
        flow.sent += 1;
        flow.left -= 1;
        if ttl <= 1 {
            self.counts.ttl_at_most_1 += 1;
        }
        if !a.is_none() {
            self.apply_anomalies(&mut frame, &options, l4_len);
        }
        Some(frame)
    }

    /// Writes the options, then the length and checksum faults, into a built IPv4 frame
    /// whose header has `options.len()` bytes of room for the options.
    fn apply_anomalies(&mut self, frame: &mut Vec<u8>, options: &[u8], l4_len: usize) {
        let a = self.anomalies;
        let truncate = self.arng.chance(a.truncated);
        let (cut_frame, cut) = if truncate {
            (
                self.arng.below(2) == 0,
                self.arng.range(1, l4_len as u64) as usize,
            )
        } else {
            (false, 0)
        };
        let bad = self.arng.chance(a.bad_ip_checksum);
        let proto = frame.get(ethernet::HEADER_LEN + 9).copied();
        let short = match proto {
            Some(ipv4::protocol::TCP) => Some(7..=19u64),
            Some(ipv4::protocol::UDP) => Some(7..=8u64),
            _ => None,
        }
        // Only a cut counts: a datagram already that short is left alone.
        .filter(|r| (*r.start() as usize) < l4_len && self.arng.chance(a.short_transport))
        .map(|r| {
            let hi = (*r.end()).min(l4_len as u64 - 1);
            let n = self.arng.range(*r.start(), hi) as usize;
            (n, self.arng.below(2) == 0)
        });
        let (truncate, cut_frame) = if short.is_some() {
            (false, false)
        } else {
            (truncate, cut_frame)
        };
        let Some(ip_buf) = frame.get_mut(ethernet::HEADER_LEN..) else {
            return;
        };
        let mut ip = ipv4::Packet::new_unchecked(ip_buf);
        if !options.is_empty() {
            ip.set_header_len(ipv4::HEADER_LEN + options.len());
            let dst = ip.options_mut();
            if dst.len() == options.len() {
                dst.copy_from_slice(options);
            }
            self.counts.ip_options += 1;
        }
        if truncate && !cut_frame {
            ip.set_total_len(ip.total_len().saturating_sub(cut as u16));
            self.counts.short_ip_length += 1;
        }
        let short_end = short.map(|(n, pad)| {
            let end = ip.header_len() + n;
            ip.set_total_len(end as u16);
            (ethernet::HEADER_LEN + end, pad)
        });
        ip.fill_checksum();
        if bad {
            let good = ip.checksum();
            let mut wrong = good.wrapping_add(self.arng.range(1, 0xfffe) as u16);
            ip.set_checksum(wrong);
            // 0x0000 and 0xffff can both be right (one's complement has two zeros).
            while ip.verify_checksum() {
                wrong = wrong.wrapping_add(1);
                ip.set_checksum(wrong);
            }
            self.counts.bad_ip_checksum += 1;
        }
        if cut_frame {
            frame.truncate(frame.len().saturating_sub(cut));
            self.counts.cut_frames += 1;
        }
        if let Some((end, pad)) = short_end {
            frame.truncate(end);
            if pad && frame.len() < 60 {
                frame.resize(60, 0);
            }
            self.counts.short_transport += 1;
        }
    }
}

impl Iterator for Generator {
    type Item = (Timestamp, Vec<u8>);

    fn next(&mut self) -> Option<(Timestamp, Vec<u8>)> {
        if self.remaining == 0 || self.active.is_empty() {
            return None;
        }
        let frame = if self.arng.chance(self.anomalies.arp) {
            self.arp_frame()
        } else {
            let slot = self.rng.below(self.active.len() as u64) as usize;
            let index = *self.active.get(slot)? as usize;
            let frame = self.build(index)?;
            if self.flows.get(index).is_some_and(|f| f.left == 0) {
                self.active.swap_remove(slot);
            }
            frame
        };
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
pub fn parse_size(s: &str) -> Result<SizeDist, GenError> {
    let s = s.trim();
    let num = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| syntax("a frame size in bytes", t))
    };
    let dist = if s.eq_ignore_ascii_case("imix") {
        SizeDist::Imix
    } else if let Some(r) = s.strip_prefix("uniform:") {
        let (lo, hi) = r
            .split_once('-')
            .ok_or_else(|| syntax("uniform:LOW-HIGH", s))?;
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
pub fn parse_mix(s: &str) -> Result<Mix, GenError> {
    let mut mix = Mix {
        tcp: 0,
        udp: 0,
        icmp: 0,
    };
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| syntax("PROTOCOL=WEIGHT", part))?;
        let w: u32 = v
            .trim()
            .parse()
            .map_err(|_| syntax("a weight (integer)", v.trim()))?;
        match k.trim().to_ascii_lowercase().as_str() {
            "tcp" => mix.tcp = w,
            "udp" => mix.udp = w,
            "icmp" => mix.icmp = w,
            other => return Err(syntax("tcp, udp or icmp", other)),
        }
    }
    if mix.tcp == 0 && mix.udp == 0 && mix.icmp == 0 {
        return Err(GenError::ZeroMix {
            found: Some(s.to_string()),
        });
    }
    Ok(mix)
}

/// Parses an IPv4 prefix `A.B.C.D/LEN` (a bare address is a /32).
pub fn parse_prefix(s: &str) -> Result<(Ipv4Addr, u8), GenError> {
    let s = s.trim();
    let (a, l) = s.split_once('/').unwrap_or((s, "32"));
    let addr: Ipv4Addr = a.parse().map_err(|_| syntax("IP prefix", s))?;
    let len: u8 = l
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| syntax("IP prefix length 0-32", l))?;
    Ok((addr, len))
}

/// Parses ports: a range `1024-65535`, a list `80,443,1234` or a single port `80`.
pub fn parse_ports(s: &str) -> Result<PortSpec, GenError> {
    let s = s.trim();
    let port = |t: &str| {
        t.trim()
            .parse::<u16>()
            .map_err(|_| syntax("a port number (0-65535)", t.trim()))
    };
    if let Some((lo, hi)) = s.split_once('-') {
        let (lo, hi) = (port(lo)?, port(hi)?);
        if lo > hi {
            return Err(syntax("a port range LOW-HIGH", s));
        }
        return Ok(PortSpec::Range(lo, hi));
    }
    let list = s.split(',').map(port).collect::<Result<Vec<_>, _>>()?;
    Ok(PortSpec::List(list))
}

/// Parses a TTL: one value `64` or a range `1-12` drawn from per packet.
pub fn parse_ttl(s: &str) -> Result<TtlSpec, GenError> {
    let s = s.trim();
    let ttl = |t: &str| {
        t.trim()
            .parse::<u8>()
            .map_err(|_| syntax("a TTL (0-255)", t.trim()))
    };
    match s.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (ttl(lo)?, ttl(hi)?);
            if lo > hi {
                return Err(syntax("a TTL range LOW-HIGH", s));
            }
            Ok(TtlSpec::Range(lo, hi))
        }
        None => Ok(TtlSpec::Fixed(ttl(s)?)),
    }
}

/// Parses a per-packet probability: `0.01`, `1%` or `0` (at most 1, i.e. 100 %).
pub fn parse_rate(s: &str) -> Result<Rate, GenError> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    let p = num
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite())
        .map(|p| p / scale)
        .ok_or_else(|| syntax("a probability such as 0.01 or 1%", t))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(syntax("a probability between 0 and 1", t));
    }
    Ok(Rate::from_probability(p))
}

/// Parses a MAC address `02:00:00:00:00:01` (or with `-` separators).
pub fn parse_mac(s: &str) -> Result<Address, GenError> {
    s.trim()
        .parse::<Address>()
        .map_err(|_| syntax("Ethernet address", s.trim()))
}
