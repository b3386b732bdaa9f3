//! Network address and port translation: `IPRewriter`, `TCPRewriter`, `UDPRewriter` and
//! `RoundRobinIPMapper`, with Click's input specifications, patterns and timeouts.
//!
//! A rewriter offers the executor its per-flow state ([`StatefulFlow`]) and synthesis its
//! input specifications ([`RewriteSpec`]); the mapping table ([`MappingTable`]) and pattern
//! allocator are public so that tests and tools can read its state.

mod mazunat;
mod pattern;
mod table;

pub use mazunat::MazuNAT;

pub use pattern::{parse_input_spec, parse_mapper_config, Choice, InputSpec, Pattern, Vary};
pub use table::{
    flow_random, name_seed, Direction, Flow, FlowId, MappingTable, PacketInfo, PatternState,
    Timeouts, DEFAULT_CAPACITY,
};

use crate::args::{parse_bool, parse_seconds, parse_uint};
use crate::capability::{
    slice, FlowStep, Pool, RewriteSpec, ShareError, Sliced, StatefulFlow, WorkerShare,
};
use crate::reason::{FlowReason, InputReason, IpHeaderReason};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use space::Field;
use wire::checksum::{update16, update16_udp, update32, update32_udp};
use wire::ipv4::Packet as Ipv4Packet;
use wire::{tcp, udp};

use wire::bytes::{read_u16, write_u16};
use wire::ip::protocol::{TCP, UDP};

reasons! {
    /// Why a rewriter (`IPRewriter`, `TCPRewriter`, `UDPRewriter`, `MazuNAT`) drops a packet
    /// (besides [`IpHeaderReason::Bad`] and the [`FlowReason`]s it cannot key).
    pub enum RewriterReason {
        /// The input's specification is `drop` (or there is none).
        Dropped => "rewriter-drop",
        /// The pattern has no free source port for a new flow.
        NoFreePort => "no-free-port",
        /// The mapping table is full.
        TableFull => "mapping-table-full",
    }
}
/// DCCP's protocol number (only rewriters name it, as Click's do).
const DCCP: u8 = 33;

/// The fewest transport bytes a packet needs to be rewritten at all: its two ports (and
/// UDP's length and checksum). Click's rewriters send shorter ones to the input's
/// `nochange` output or drop them (`transport_length() < 8`).
pub const TRANSPORT_MIN: usize = 8;

/// The fewest transport bytes a TCP segment needs for Click's TCP rewriting to touch its
/// header: up to the end of the checksum. Click's `TCPFlow::apply` returns after the
/// addresses when `transport_length() < 18`; its `UDPFlow::apply` updates a TCP checksum
/// only from 18 bytes on.
pub const TCP_REWRITE_MIN: usize = 18;

/// Which of Click's rewriter classes an [`IPRewriter`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriterKind {
    /// `IPRewriter`: TCP and UDP, in separate tables (map id 0 for TCP, 1 for UDP).
    Ip,
    /// `TCPRewriter`: TCP only (one table).
    Tcp,
    /// `UDPRewriter`: TCP, UDP and DCCP in one table, all timed out with the UDP timeouts.
    Udp,
}

/// `IPRewriter(INPUTSPEC, ...)`, `TCPRewriter(...)` and `UDPRewriter(...)`: Click's NAPT.
///
/// Each packet (with its IP header annotation set) is looked up by flow identifier (source
/// and destination address and port) in the mapping table. A hit is rewritten to the
/// mapping's identifier — IP checksum and TCP/UDP checksum updated incrementally (RFC 1624;
/// a UDP checksum of 0 stays 0) — and sent to the mapping's forward output, or its reply
/// output for reply-direction packets; the mapping's timeout is refreshed on the virtual
/// clock. A miss is handled by the input's specification:
/// - `drop` / `discard`: dropped (`rewriter-drop`);
/// - `pass N`: sent unchanged to output N, no mapping;
/// - `keep FOUTPUT ROUTPUT`: a mapping that changes nothing;
/// - `pattern SADDR SPORT DADDR DPORT FOUTPUT ROUTPUT` (or `pattern NAME FOUTPUT ROUTPUT`
///   with an `IPRewriterPatterns` name): a mapping to the pattern; `-` keeps a field. SPORT
///   may be a range `L-H`, or SADDR an address range `A-B` or a prefix (its `.0` and
///   broadcast addresses left out), from which each new flow takes a value whose reply
///   identifier is not mapped: no suffix prefers the packet's own value, then tries from a
///   pseudo-random point; `#` tries from the value after the last one allocated; `?` tries
///   from a pseudo-random point. No free value: dropped (`no-free-port`).
/// - `MAPPER`: the name of a `RoundRobinIPMapper`; each new flow uses its next pattern (a
///   pattern with no free value is skipped).
///
/// The pseudo-random point is `splitmix64(FNV-1a(qualified element name, protocol, flow
/// identifier)) mod range size` ([`flow_random`]), so a run always repeats exactly.
///
/// Packets that are not TCP/UDP (`IPRewriter`), not TCP (`TCPRewriter`), not TCP/UDP/DCCP
/// (`UDPRewriter`), non-first fragments and packets with under 8 transport bytes go to
/// output N of a `pass N` input and are dropped on other inputs (`not-tcp-udp`,
/// `ip-fragment`, `short-transport`). A packet without a valid IP header annotation is
/// dropped (`bad-ip-header`).
///
/// A TCP first fragment with 8 to 17 transport bytes (cut before the end of its checksum)
/// is mapped by its ports like any other, and then, as Click's rewriters do
/// (`TCPRewriter::TCPFlow::apply`, which `IPRewriter` uses for TCP): `IPRewriter` and
/// `TCPRewriter` rewrite its addresses and IP checksum only — its ports and the bytes of
/// the TCP checksum there are stay, and its flags are not read (the mapping's TCP state
/// does not change, its timeout is refreshed); `UDPRewriter` (`UDPFlow::apply`) also
/// rewrites its ports. From [`TCP_REWRITE_MIN`] (18) bytes on a segment is rewritten in
/// full and its flags (byte 13) and payload (the IP total length beyond the IP header and
/// the data offset, as Click computes it) update the mapping's TCP state. The transport
/// length is the rewriter's view: the bytes after the IP header to the end of the data
/// (what Click's `transport_length()` counts), trailer included unless an element such as
/// `CheckIPHeader` cut the packet at its IP total length.
///
/// Keywords (Click's defaults): `TCP_TIMEOUT`/`TIMEOUT` (24 h; `TIMEOUT` is the UDP timeout
/// for `UDPRewriter`), `TCP_DONE_TIMEOUT` (240 s), `TCP_NODATA_TIMEOUT` (300 s),
/// `TCP_GUARANTEE`/`GUARANTEE` (5 s), `UDP_TIMEOUT` (300 s), `UDP_STREAMING_TIMEOUT` (the
/// UDP timeout; `UDPRewriter` also `STREAMING_TIMEOUT`), `UDP_GUARANTEE` (5 s),
/// `REAP_INTERVAL` (15 min), `MAPPING_CAPACITY`/
/// `CAPACITY` (the most mappings held; Click's default is unlimited, FuseBox's is
/// [`DEFAULT_CAPACITY`] = 262,144 so that state stays bounded), `DST_ANNO` (true: set the
/// destination IP annotation to the rewritten destination). A mapping lives until its
/// timeout (never less than its guarantee) after its last packet; FuseBox removes an expired
/// mapping when a lookup meets it (Click keeps it until the next reap) and reaps all expired
/// mappings every `REAP_INTERVAL` of virtual time. When the table is full, a new flow first
/// reaps the expired mappings, then evicts the mapping that expires first among those whose
/// guarantee has passed (counted in `mappings_evicted`), or is dropped
/// (`mapping-table-full`, counted in `mappings_refused`) if all are guaranteed, as Click's
/// `IPRewriterBase::store_flow` does. `UDPRewriter` times every mapping out as UDP, TCP
/// ones included (Click's `UDPFlow`: the UDP timeout, the streaming timeout once a flow has
/// 3 packets and a reply; TCP flags are never read).
///
/// Deviation from Click: an SADDR range is honoured in 4-word patterns (Click only
/// handles it in 2-word `SADDR DADDR` patterns), and a pattern may not range both SADDR and
/// SPORT.
#[derive(Debug)]
pub struct IPRewriter {
    kind: RewriterKind,
    specs: Vec<InputSpec>,
    /// Allocation state per input spec, one per pattern (mapper specs have several).
    states: Vec<Vec<PatternState>>,
    rr_next: Vec<usize>,
    /// The mapping that rewrote the last packet decided (see `decide_at`).
    last: Option<(u32, Direction)>,
    table: MappingTable,
    dst_anno: bool,
    seed: u64,
    noutputs: usize,
    rewritten: u64,
    dropped: u64,
}

/// The keywords every rewriter accepts.
const REWRITER_KEYWORDS: &[&str] = &[
    "TCP_TIMEOUT",
    "TIMEOUT",
    "TCP_DONE_TIMEOUT",
    "TCP_NODATA_TIMEOUT",
    "TCP_GUARANTEE",
    "GUARANTEE",
    "UDP_TIMEOUT",
    "UDP_STREAMING_TIMEOUT",
    "UDP_GUARANTEE",
    "REAP_INTERVAL",
    "REAP_TIME",
    "MAPPING_CAPACITY",
    "CAPACITY",
    "DST_ANNO",
];

impl IPRewriter {
    /// Builds a rewriter of `kind` from its arguments.
    pub fn configure(
        kind: RewriterKind,
        args: &Args,
        bcx: &BuildCtx,
    ) -> Result<IPRewriter, ConfigError> {
        if kind == RewriterKind::Udp {
            // Click's UDPRewriter also names the streaming timeout without `UDP_`.
            let mut kw = REWRITER_KEYWORDS.to_vec();
            kw.push("STREAMING_TIMEOUT");
            args.check(usize::MAX, &kw)?;
        } else {
            args.check(usize::MAX, REWRITER_KEYWORDS)?;
        }
        let secs = |k: &str| -> Result<Option<u64>, ConfigError> {
            args.keyword(k).map(|v| parse_seconds(v, k)).transpose()
        };
        let mut t = Timeouts::default();
        if kind == RewriterKind::Udp {
            if let Some(v) = secs("TIMEOUT")? {
                t.udp = v;
            }
            if let Some(v) = secs("GUARANTEE")? {
                t.udp_guarantee = v;
            }
        } else {
            if let Some(v) = secs("TIMEOUT")? {
                t.tcp = v;
            }
            if let Some(v) = secs("GUARANTEE")? {
                t.tcp_guarantee = v;
            }
        }
        if let Some(v) = secs("TCP_TIMEOUT")? {
            t.tcp = v;
        }
        if let Some(v) = secs("TCP_DONE_TIMEOUT")? {
            t.tcp_done = v;
        }
        if let Some(v) = secs("TCP_NODATA_TIMEOUT")? {
            t.tcp_nodata = v;
        }
        if let Some(v) = secs("TCP_GUARANTEE")? {
            t.tcp_guarantee = v;
        }
        if let Some(v) = secs("UDP_TIMEOUT")? {
            t.udp = v;
        }
        if let Some(v) = secs("UDP_GUARANTEE")? {
            t.udp_guarantee = v;
        }
        let streaming = match kind {
            // Click reads both; the second wins.
            RewriterKind::Udp => secs("STREAMING_TIMEOUT")?,
            _ => None,
        };
        t.udp_streaming = streaming
            .or(secs("UDP_STREAMING_TIMEOUT")?)
            .unwrap_or(t.udp);
        let reap = match (secs("REAP_INTERVAL")?, secs("REAP_TIME")?) {
            (Some(v), _) | (None, Some(v)) => v,
            (None, None) => 900 * 1_000_000_000,
        };
        let capacity = match args
            .keyword("MAPPING_CAPACITY")
            .or_else(|| args.keyword("CAPACITY"))
        {
            Some(v) => {
                let c = parse_uint(v, "MAPPING_CAPACITY").map_err(|_| {
                    ConfigError::new(format!(
                        "expected MAPPING_CAPACITY (a number of mappings; sharing another rewriter's capacity is not supported), found `{v}`"
                    ))
                })?;
                usize::try_from(c).unwrap_or(usize::MAX)
            }
            None => DEFAULT_CAPACITY,
        };
        let dst_anno = args
            .keyword("DST_ANNO")
            .map(|v| parse_bool(v, "DST_ANNO"))
            .transpose()?
            .unwrap_or(true);
        let positional = args.positional();
        if positional.is_empty() {
            return Err(ConfigError::new(
                "expected `INPUTSPEC, ...` (at least one input specification)",
            ));
        }
        let mut specs = Vec::new();
        for (i, p) in positional.iter().enumerate() {
            let spec = parse_input_spec(p, bcx.names)
                .map_err(|e| ConfigError::new(format!("input spec {i}: {}", e.message)))?;
            specs.push(spec);
        }
        let states = specs
            .iter()
            .map(|s| match s {
                InputSpec::Mapper { patterns, .. } => vec![PatternState::default(); patterns.len()],
                _ => vec![PatternState::default()],
            })
            .collect();
        let noutputs = specs.iter().map(InputSpec::max_output).max().unwrap_or(0) + 1;
        Ok(IPRewriter {
            kind,
            rr_next: vec![0; specs.len()],
            last: None,
            specs,
            states,
            table: match kind {
                RewriterKind::Udp => MappingTable::new(t, capacity, reap).udp_timeouts_only(),
                _ => MappingTable::new(t, capacity, reap),
            },
            dst_anno,
            seed: name_seed(bcx.name),
            noutputs,
            rewritten: 0,
            dropped: 0,
        })
    }

    /// Which rewriter class this is.
    pub fn kind(&self) -> RewriterKind {
        self.kind
    }

    /// The mapping table.
    pub fn table(&self) -> &MappingTable {
        &self.table
    }

    /// The seed of this rewriter's pseudo-random choices (FNV-1a of its qualified name).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The map a protocol's flows live in (Click: `IPRewriter` keeps UDP apart from TCP).
    fn map_of(&self, proto: u8) -> u8 {
        match (self.kind, proto) {
            (RewriterKind::Ip, UDP) => 1,
            _ => 0,
        }
    }

    fn handles(&self, proto: u8) -> bool {
        match self.kind {
            RewriterKind::Ip => proto == TCP || proto == UDP,
            RewriterKind::Tcp => proto == TCP,
            RewriterKind::Udp => proto == TCP || proto == UDP || proto == DCCP,
        }
    }

    /// Chooses and installs a mapping for a new flow per input `port`'s specification.
    /// `Ok(Some(idx))`: installed; `Ok(None)`: pass unchanged to the returned output;
    /// `Err(reason)`: drop.
    fn new_mapping(
        &mut self,
        port: usize,
        proto: u8,
        flow: &FlowId,
        now: u64,
    ) -> Result<Result<usize, usize>, RewriterReason> {
        let map_id = self.map_of(proto);
        let random = flow_random(self.seed, proto, flow);
        let (rewritten, fout, rout) = match self.specs.get(port) {
            None | Some(InputSpec::Drop) => return Err(RewriterReason::Dropped),
            Some(InputSpec::Pass(o)) => return Ok(Err(*o)),
            Some(InputSpec::Keep { foutput, routput }) => (*flow, *foutput, *routput),
            Some(InputSpec::Pattern {
                pattern,
                foutput,
                routput,
            }) => {
                let st = self
                    .states
                    .get_mut(port)
                    .and_then(|v| v.first_mut())
                    .ok_or(RewriterReason::Dropped)?;
                let r = self
                    .table
                    .allocate(map_id, pattern, st, flow, random, now)
                    .ok_or(RewriterReason::NoFreePort)?;
                (r, *foutput, *routput)
            }
            Some(InputSpec::Mapper { patterns, .. }) => {
                let n = patterns.len();
                let start = self.rr_next.get(port).copied().unwrap_or(0) % n.max(1);
                let mut found = None;
                for k in 0..n {
                    let i = (start + k) % n;
                    let (pat, fo, ro) = &patterns[i];
                    let Some(st) = self.states.get_mut(port).and_then(|v| v.get_mut(i)) else {
                        continue;
                    };
                    if let Some(r) = self.table.allocate(map_id, pat, st, flow, random, now) {
                        found = Some((i, r, *fo, *ro));
                        break;
                    }
                }
                let (i, r, fo, ro) = found.ok_or(RewriterReason::NoFreePort)?;
                if let Some(next) = self.rr_next.get_mut(port) {
                    *next = (i + 1) % n;
                }
                (r, fo, ro)
            }
        };
        match self
            .table
            .insert(map_id, proto, *flow, rewritten, fout, rout, port, now)
        {
            Some(idx) => Ok(Ok(idx)),
            None => Err(RewriterReason::TableFull),
        }
    }
}

/// Every pattern of `specs` (mappers' included), in order.
fn patterns_mut(specs: &mut [InputSpec]) -> impl Iterator<Item = &mut Pattern> {
    specs.iter_mut().flat_map(|s| match s {
        InputSpec::Pattern { pattern, .. } => vec![pattern],
        InputSpec::Mapper { patterns, .. } => patterns.iter_mut().map(|(p, _, _)| p).collect(),
        _ => Vec::new(),
    })
}

/// The pool a pattern allocates from, if it has a range.
fn pool_of(p: &Pattern) -> Option<Pool> {
    match p.vary {
        Vary::None => None,
        Vary::SourcePort { base, top } => Some(Pool {
            addrs: p.saddr.map(|a| (a, 1)),
            ports: Some((base, u64::from(top) + 1)),
            sliced: Sliced::Ports,
        }),
        Vary::SourceAddr { base, top } => Some(Pool {
            addrs: Some((base, u64::from(top) + 1)),
            ports: p.sport.map(|s| (s, 1)),
            sliced: Sliced::Addresses,
        }),
    }
}

/// Worker shares of the rewriters: every ranged pattern (input specifications and mappers
/// alike) narrows to the worker's [`slice`] of its range, so replicas never hand out the
/// same public address and port; its pool is what the dispatcher steers replies by.
impl WorkerShare for IPRewriter {
    fn pools(&self) -> Vec<Pool> {
        let mut specs = self.specs.clone();
        patterns_mut(&mut specs)
            .filter_map(|p| pool_of(p))
            .collect()
    }

    fn narrow(&mut self, w: usize, n: usize) -> Result<(), ShareError> {
        for p in self.pools() {
            let (count, what) = match p.sliced {
                Sliced::Ports => (p.ports.map_or(0, |(_, c)| c), "ports"),
                Sliced::Addresses => (p.addrs.map_or(0, |(_, c)| c), "addresses"),
            };
            if count < n as u64 {
                return Err(ShareError {
                    count,
                    what,
                    workers: n,
                });
            }
        }
        for p in patterns_mut(&mut self.specs) {
            match p.vary {
                Vary::None => {}
                Vary::SourcePort { base, top } => {
                    let (off, len) = slice(u64::from(top) + 1, w, n);
                    let base = base.wrapping_add(off as u16);
                    p.vary = Vary::SourcePort {
                        base,
                        top: len.saturating_sub(1) as u16,
                    };
                    p.sport = Some(base);
                }
                Vary::SourceAddr { base, top } => {
                    let (off, len) = slice(u64::from(top) + 1, w, n);
                    let base = std::net::Ipv4Addr::from(u32::from(base).wrapping_add(off as u32));
                    p.vary = Vary::SourceAddr {
                        base,
                        top: len.saturating_sub(1) as u32,
                    };
                    p.saddr = Some(base);
                }
            }
        }
        Ok(())
    }
}

/// Rewrites the IPv4 packet `ip` (header length `hl`, protocol `proto`) to flow `new`,
/// updating the IP checksum and the transport checksum incrementally (RFC 1624); a UDP
/// checksum of 0 stays 0. Fields that do not change are left alone.
///
/// The IP header needs its fixed 20 bytes (else nothing changes). The transport header may
/// be cut short, as Click's rewriters accept: the ports are rewritten when their 4 bytes are
/// there, the checksum when its 2 bytes are (offsets from `wire`'s TCP and UDP layouts) —
/// for TCP that is Click's rule of 18 transport bytes ([`TCP_REWRITE_MIN`]). Whether a
/// short TCP segment's ports change is the decision's (`new` holds its own ports then).
#[inline]
pub fn rewrite_ipv4(ip: &mut [u8], hl: usize, proto: u8, new: &FlowId) {
    if ip.len() < wire::ipv4::HEADER_LEN {
        return;
    }
    let mut h = Ipv4Packet::new_unchecked(&mut *ip);
    let (os, od) = (u32::from(h.src_addr()), u32::from(h.dst_addr()));
    let (ns, nd) = (u32::from(new.saddr), u32::from(new.daddr));
    let mut ipck = h.checksum();
    if os != ns {
        ipck = update32(ipck, os, ns);
        h.set_src_addr(new.saddr);
    }
    if od != nd {
        ipck = update32(ipck, od, nd);
        h.set_dst_addr(new.daddr);
    }
    h.set_checksum(ipck);
    let sport_at = hl + tcp::field::SRC_PORT.start;
    let dport_at = hl + tcp::field::DST_PORT.start;
    let (Some(osp), Some(odp)) = (read_u16(ip, sport_at), read_u16(ip, dport_at)) else {
        return;
    };
    let ck_off = hl
        + if proto == TCP {
            tcp::field::CHECKSUM.start
        } else {
            udp::field::CHECKSUM.start
        };
    let Some(mut ck) = read_u16(ip, ck_off) else {
        write_u16(ip, sport_at, new.sport);
        write_u16(ip, dport_at, new.dport);
        return;
    };
    let udp = proto == UDP;
    let u32f = if udp { update32_udp } else { update32 };
    let u16f = if udp { update16_udp } else { update16 };
    if os != ns {
        ck = u32f(ck, os, ns);
    }
    if od != nd {
        ck = u32f(ck, od, nd);
    }
    if osp != new.sport {
        ck = u16f(ck, osp, new.sport);
    }
    if odp != new.dport {
        ck = u16f(ck, odp, new.dport);
    }
    write_u16(ip, ck_off, ck);
    write_u16(ip, sport_at, new.sport);
    write_u16(ip, dport_at, new.dport);
}

/// What a rewriter needs to know about a packet to decide on it (see [`IPRewriter::decide`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowInput {
    /// IP protocol.
    pub proto: u8,
    /// IP header length in bytes.
    pub hl: usize,
    /// True unless the packet is a later fragment (fragment offset ≠ 0).
    pub first_frag: bool,
    /// Bytes after the IP header.
    pub tlen: usize,
    /// Addresses and ports.
    pub flow: FlowId,
    /// TCP flags and whether it carries payload.
    pub info: PacketInfo,
}

impl FlowInput {
    /// Whether this is a TCP segment with fewer than [`TCP_REWRITE_MIN`] transport bytes:
    /// one whose TCP header Click's rewriters leave alone past the ports (see
    /// [`IPRewriter`]).
    #[inline]
    pub fn short_tcp(&self) -> bool {
        self.proto == TCP && self.tlen < TCP_REWRITE_MIN
    }

    /// Reads the input from the bytes `ip` from the IPv4 header to the end of the packet,
    /// or `None` if they do not hold an IPv4 header (`bad-ip-header`).
    #[inline]
    pub fn parse(ip: &[u8]) -> Option<FlowInput> {
        packet::Ipv4Flow::parse(ip).map(FlowInput::of)
    }

    /// The input of a checked IPv4 view: ports as the two words after the header
    /// ([`packet::Ports::Raw`], whatever the protocol and fragment), TCP facts for TCP.
    #[inline]
    pub fn of(v: packet::Ipv4Flow<'_>) -> FlowInput {
        let proto = v.protocol();
        let (sport, dport) = v.ports(packet::Ports::Raw);
        let flow = FlowId {
            saddr: v.src(),
            sport,
            daddr: v.dst(),
            dport,
        };
        let info = if proto == TCP {
            PacketInfo {
                tcp_flags: v.tcp_flags(),
                has_payload: v.tcp_has_payload(),
            }
        } else {
            PacketInfo::default()
        };
        FlowInput {
            proto,
            hl: v.header_len(),
            first_frag: v.first_fragment(),
            tlen: v.transport_len(),
            flow,
            info,
        }
    }
}

/// What a rewriter decided for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Rewrite the packet to `new` and send it to output `out`.
    Rewrite {
        /// Output port.
        out: usize,
        /// The addresses and ports the packet gets.
        new: FlowId,
    },
    /// Send it unchanged to output `out` (`pass N`, or `pass` for a refused packet).
    Pass(usize),
    /// Drop it under this reason.
    Drop(RewriterDrop),
}

/// Why a rewriter's decision drops a packet: the packet has no IPv4 header, its flow cannot
/// be keyed, or the rewriter's own reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriterDrop {
    /// No (valid) IPv4 header.
    Header(IpHeaderReason),
    /// A packet whose flow the rewriter cannot key.
    Flow(FlowReason),
    /// The rewriter's own reasons (input spec, ports, table).
    Rewriter(RewriterReason),
}

impl RewriterDrop {
    /// The reason's text (the drop counter's name).
    #[inline]
    pub const fn as_str(self) -> &'static str {
        match self {
            RewriterDrop::Header(r) => r.as_str(),
            RewriterDrop::Flow(r) => r.as_str(),
            RewriterDrop::Rewriter(r) => r.as_str(),
        }
    }

    /// Whether the drop follows from the packet's protocol alone (and the input), so that
    /// every packet of its flow arriving at the same input is dropped the same way, with no
    /// change to the rewriter but its drop count.
    #[inline]
    pub const fn per_flow(self) -> bool {
        matches!(self, RewriterDrop::Flow(FlowReason::NotTcpUdp))
    }
}

impl From<IpHeaderReason> for RewriterDrop {
    fn from(r: IpHeaderReason) -> Self {
        RewriterDrop::Header(r)
    }
}

impl From<FlowReason> for RewriterDrop {
    fn from(r: FlowReason) -> Self {
        RewriterDrop::Flow(r)
    }
}

impl From<RewriterReason> for RewriterDrop {
    fn from(r: RewriterReason) -> Self {
        RewriterDrop::Rewriter(r)
    }
}

impl From<RewriterDrop> for &'static str {
    fn from(r: RewriterDrop) -> &'static str {
        r.as_str()
    }
}

impl IPRewriter {
    /// Decides what happens to a packet arriving on input `port` at virtual time `now` (ns),
    /// and updates the state exactly as pushing the packet would: mapping lookup, new
    /// mappings, round-robin positions, timeouts and counters. `None` is a packet without an
    /// IPv4 header. `push` is this plus the byte rewrite, so synthesis and the element cannot
    /// disagree.
    pub fn decide(&mut self, port: usize, input: Option<&FlowInput>, now: u64) -> Decision {
        self.decide_inner(port, input, now)
    }

    /// Whether mapping `idx` in direction `dir` is still the one a lookup would find for
    /// `input` at `now` (alive, not expired, holding this flow in that direction, and the
    /// packet is one the rewriter handles). Reaps the table when due (as any packet reaching
    /// the rewriter would) but changes no mapping otherwise.
    fn replayable(&mut self, input: &FlowInput, now: u64, idx: u32, dir: Direction) -> bool {
        self.table.maybe_reap(now);
        let i = input;
        if !self.handles(i.proto) || !i.first_frag || i.tlen < TRANSPORT_MIN || i.short_tcp() {
            return false;
        }
        let map_id = self.map_of(i.proto);
        if self.table.map_of(idx as usize) != Some(map_id) {
            return false;
        }
        let Some(f) = self.table.flow(idx as usize) else {
            return false;
        };
        if now >= f.expiry {
            return false;
        }
        let fwd = f.original == i.flow;
        let rep = f.rewritten.reverse() == i.flow;
        match dir {
            Direction::Forward => fwd && !rep,
            Direction::Reply => rep,
        }
    }

    fn decide_inner(&mut self, port: usize, input: Option<&FlowInput>, now: u64) -> Decision {
        self.last = None;
        self.table.maybe_reap(now);
        let Some(i) = input else {
            self.dropped += 1;
            return Decision::Drop(IpHeaderReason::Bad.into());
        };
        let refuse = |me: &mut IPRewriter, reason: FlowReason| match me.specs.get(port) {
            Some(InputSpec::Pass(o)) => Decision::Pass(*o),
            _ => {
                me.dropped += 1;
                Decision::Drop(reason.into())
            }
        };
        if !self.handles(i.proto) {
            return refuse(self, FlowReason::NotTcpUdp);
        }
        if !i.first_frag {
            return refuse(self, FlowReason::Fragment);
        }
        if i.tlen < TRANSPORT_MIN {
            return refuse(self, FlowReason::ShortTransport);
        }
        let map_id = self.map_of(i.proto);
        let (idx, dir) = match self.table.lookup(map_id, &i.flow, now) {
            Some(hit) => hit,
            None => match self.new_mapping(port, i.proto, &i.flow, now) {
                Ok(Ok(idx)) => (idx, Direction::Forward),
                Ok(Err(out)) => return Decision::Pass(out),
                Err(reason) => {
                    self.dropped += 1;
                    return Decision::Drop(reason.into());
                }
            },
        };
        let Some(f) = self.table.flow(idx) else {
            self.dropped += 1;
            return Decision::Drop(RewriterReason::Dropped.into());
        };
        let mut new = f.rewrite_for(dir);
        let out = f.output_for(dir);
        let info = if i.short_tcp() {
            // Click reads nothing past the ports of a segment cut before its checksum's end.
            if self.kind != RewriterKind::Udp {
                new.sport = i.flow.sport;
                new.dport = i.flow.dport;
            }
            PacketInfo::default()
        } else {
            i.info
        };
        self.table.touch(idx, dir, info, now);
        self.rewritten += 1;
        self.last = Some((idx as u32, dir));
        Decision::Rewrite { out, new }
    }
}

impl StatefulFlow for IPRewriter {
    #[inline]
    fn decide_flow(
        &mut self,
        port: usize,
        input: Option<&FlowInput>,
        now: u64,
        hint: Option<(u32, Direction)>,
    ) -> FlowStep {
        let (decision, mapping) = match (hint, input) {
            (Some((idx, dir)), Some(inp)) => match StatefulFlow::replay(self, inp, now, idx, dir) {
                Some(d) => (d, Some((idx, dir))),
                None => (self.decide_inner(port, input, now), self.last),
            },
            _ => (self.decide_inner(port, input, now), self.last),
        };
        let (version, steady) = match (mapping, input) {
            // A segment cut before its checksum's end is rewritten apart from the others of
            // its flow: no path is remembered from it.
            (Some((idx, _)), Some(inp)) if inp.short_tcp() => {
                (self.table.version(idx as usize), None)
            }
            (Some((idx, dir)), Some(inp)) => (
                self.table.version(idx as usize),
                self.table.steady(idx as usize, dir, inp.info),
            ),
            _ => (0, None),
        };
        FlowStep {
            decision,
            mapping,
            version,
            steady,
        }
    }

    fn replay(
        &mut self,
        input: &FlowInput,
        now: u64,
        idx: u32,
        dir: Direction,
    ) -> Option<Decision> {
        if !self.replayable(input, now, idx, dir) {
            return None;
        }
        let f = self.table.flow(idx as usize)?;
        let new = f.rewrite_for(dir);
        let out = f.output_for(dir);
        self.table.touch(idx as usize, dir, input.info, now);
        self.rewritten += 1;
        Some(Decision::Rewrite { out, new })
    }

    fn check_replay(
        &mut self,
        input: &FlowInput,
        now: u64,
        idx: u32,
        dir: Direction,
        version: u32,
    ) -> bool {
        self.replayable(input, now, idx, dir) && self.table.version(idx as usize) == version
    }

    fn last_mapping(&self) -> Option<(u32, Direction)> {
        self.last
    }

    fn replay_n(&mut self, idx: u32, dir: Direction, info: PacketInfo, now: u64, n: u32) {
        self.rewritten += u64::from(n);
        self.table.touch_n(idx as usize, dir, info, now, n);
    }

    fn drop_n(&mut self, n: u32) {
        self.dropped += u64::from(n);
    }

    fn version(&self, idx: u32) -> u32 {
        self.table.version(idx as usize)
    }

    fn changes(&self) -> u64 {
        self.table.changes()
    }

    fn steady(&self, idx: u32, dir: Direction, info: PacketInfo) -> Option<u64> {
        self.table.steady(idx as usize, dir, info)
    }

    fn next_reap(&self) -> Option<u64> {
        self.table.next_reap()
    }
}

impl RewriteSpec for IPRewriter {
    fn specs(&self) -> &[InputSpec] {
        &self.specs
    }

    fn map_id(&self, proto: u8) -> u8 {
        self.map_of(proto)
    }

    fn dst_anno(&self) -> bool {
        self.dst_anno
    }

    fn short_tcp_keeps_ports(&self) -> bool {
        self.kind != RewriterKind::Udp
    }
}

impl IPRewriter {
    /// What the rewriter (and `MazuNAT`, which is one) declares: it reads the flow and the
    /// TCP flags and data offset (connection state, payload or not), rewrites addresses and
    /// ports with both checksums updated (and the destination IP annotation when it sets
    /// it), drops by its specifications and keeps mappings.
    pub fn declaration(&self) -> crate::record::Declared {
        let mut writes = vec![Field::IpSrc, Field::IpDst, Field::SrcPort, Field::DstPort];
        if self.dst_anno {
            writes.push(Field::DstIpAnno);
        }
        crate::record::Declared {
            writes,
            ip_checksum: true,
            l4_checksum: true,
            drops: true,
            stateful: true,
            ..Default::default()
        }
        .read(&crate::record::Declared::FLOW)
        .read(&[Field::TcpFlags, Field::TcpDataOff])
    }
}

impl Element for IPRewriter {
    /// Mappings and the clock: batches in input order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Ordered
    }
    fn class_name(&self) -> &'static str {
        match self.kind {
            RewriterKind::Ip => "IPRewriter",
            RewriterKind::Tcp => "TCPRewriter",
            RewriterKind::Udp => "UDPRewriter",
        }
    }

    fn port_count(&self) -> PortCount {
        // Click: `1-/1-`, one input per specification; outputs beyond those the
        // specifications name may be connected and get nothing.
        let n = self.specs.len();
        PortCount::range(n, n, self.noutputs, usize::MAX)
    }

    fn push(&mut self, port: usize, mut packet: Packet, cx: &mut Context) -> Verdict {
        let input = packet
            .network_offset_in_data()
            .and_then(|off| packet.data().get(off..).map(|ip| (off, ip)))
            .and_then(|(off, ip)| FlowInput::parse(ip).map(|i| (off, i)));
        let d = self.decide(port, input.as_ref().map(|(_, i)| i), cx.now.0);
        match (d, input) {
            (Decision::Rewrite { out, new }, Some((off, i))) => {
                if let Some(ip) = packet.data_mut().get_mut(off..) {
                    rewrite_ipv4(ip, i.hl, i.proto, &new);
                }
                if self.dst_anno {
                    packet.meta.dst_ip = new.daddr;
                }
                Verdict::Out(out, packet)
            }
            (Decision::Pass(out), _) => Verdict::Out(out, packet),
            (Decision::Drop(reason), _) => Verdict::Drop(packet, reason.into()),
            (Decision::Rewrite { .. }, None) => Verdict::Drop(packet, IpHeaderReason::Bad.into()),
        }
    }

    fn declared(&self) -> Option<crate::record::Declared> {
        Some(self.declaration())
    }

    fn stateful_flow(&mut self) -> Option<&mut dyn StatefulFlow> {
        Some(self)
    }

    fn rewrite_spec(&self) -> Option<&dyn RewriteSpec> {
        Some(self)
    }

    fn worker_share(&mut self) -> Option<&mut dyn WorkerShare> {
        Some(self)
    }

    fn state_dump(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .table
            .flows()
            .map(|(map, f)| {
                format!(
                    "map {map} proto {} {}:{} > {}:{} => {}:{} > {}:{} out {}/{} input {} expiry {}",
                    f.proto,
                    f.original.saddr,
                    f.original.sport,
                    f.original.daddr,
                    f.original.dport,
                    f.rewritten.saddr,
                    f.rewritten.sport,
                    f.rewritten.daddr,
                    f.rewritten.dport,
                    f.foutput,
                    f.routput,
                    f.input,
                    f.expiry
                )
            })
            .collect();
        v.sort();
        v.extend(
            self.rr_next
                .iter()
                .enumerate()
                .map(|(i, n)| format!("rr input {i} next {n}")),
        );
        v
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("mappings_created", self.table.created()),
            ("active_mappings", self.table.len() as u64),
            ("mappings_evicted", self.table.evicted()),
            ("mappings_refused", self.table.refused()),
            ("rewritten", self.rewritten),
            ("dropped", self.dropped),
        ]
    }
}

/// `RoundRobinIPMapper(PATTERN FOUTPUT ROUTPUT, ...)`: a declarative element (no ports)
/// that a rewriter names in an input specification; each new flow arriving on that input is
/// mapped with the mapper's next pattern in turn (a pattern with no free port is skipped).
/// Each rewriter naming the mapper keeps its own round-robin position.
#[derive(Debug)]
pub struct RoundRobinIPMapper {
    patterns: Vec<(Pattern, usize, usize)>,
}

impl RoundRobinIPMapper {
    /// Builds the mapper from its arguments (one pattern with outputs each).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<RoundRobinIPMapper, ConfigError> {
        let mut patterns = Vec::new();
        for a in args.all() {
            let text = match &a.keyword {
                Some(k) => format!("{k} {}", a.value),
                None => a.value.clone(),
            };
            patterns.push(Pattern::parse_with_ports(&text, bcx.names)?);
        }
        if patterns.is_empty() {
            return Err(ConfigError::new(
                "expected at least one `SADDR SPORT DADDR DPORT FOUTPUT ROUTPUT` pattern",
            ));
        }
        Ok(RoundRobinIPMapper { patterns })
    }

    /// The patterns with their forward and reply outputs.
    pub fn patterns(&self) -> &[(Pattern, usize, usize)] {
        &self.patterns
    }
}

impl Element for RoundRobinIPMapper {
    fn class_name(&self) -> &'static str {
        "RoundRobinIPMapper"
    }

    fn port_count(&self) -> PortCount {
        PortCount::exact(0, 0)
    }

    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Drop(packet, InputReason::NoInput.into())
    }
}

#[cfg(test)]
mod tests;
