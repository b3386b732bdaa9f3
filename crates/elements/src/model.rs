//! Semantic models: an element's behaviour as cases over header fields, for synthesis.
//!
//! A [`Model`] says, for every packet an element can receive, which output it goes to (or
//! why it is dropped) and what the element writes, in the vocabulary of the `space` crate:
//! a list of [`Case`]s tried in order, each a packet [`Filter`] with [`Effect`]s and an
//! [`Outcome`]. The first case whose filter holds applies, so the cases of a model cover every
//! packet (the last case is usually `Filter::any()`).
//!
//! Where the fields are, as the element sees the packet:
//!
//! * Ethernet fields ([`Field::EthDst`], [`Field::EthSrc`], [`Field::EtherType`]) are the first
//!   14 bytes of the packet data.
//! * IPv4 fields ([`Field::IpVersion`] … [`Field::IpDst`], [`Field::IpChecksumOk`],
//!   [`Field::IpLenOk`], [`Field::IpAvail`]) are those of the header at [`Model::ip_at`]: the
//!   network-header annotation, or a fixed offset into the data.
//! * Transport fields ([`Field::SrcPort`], [`Field::DstPort`], [`Field::TcpFlags`],
//!   [`Field::IcmpType`], [`Field::IcmpCode`], [`Field::L4Avail`]) start at that IPv4 header
//!   plus its header length. A field whose bytes are missing reads as 0: a model that must not
//!   match such packets constrains [`Field::L4Avail`] (or [`Field::IpAvail`]) itself.
//! * [`Field::Paint`], [`Field::DstIpAnno`] and [`Field::PacketType`] are annotations.
//! * [`Field::Raw`] reads `len` bytes at `offset` from the start of the data (`Classifier`).
//!
//! An element with no model (`Element::model` returns `None`) is opaque: synthesis runs it
//! as it is. A case whose outcome is [`Outcome::Runtime`] is opaque for the packets of that
//! case only (an `IPFragmenter` fragments packets longer than its MTU; the rest pass).

pub use space::{Action, Base, Field, FieldSet, Filter, FilterSet, Group, Layout, Op, PacketPoint};
use wire::ethernet::ethertype;

/// Where an element finds the IPv4 header it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IpAnchor {
    /// At the network-header annotation (most IP elements).
    #[default]
    Annotation,
    /// At this byte offset into the packet data (`CheckIPHeader(OFFSET)`).
    Data(u16),
}

/// What happens to the packets of one case.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The packet leaves on this output port.
    Out(usize),
    /// The packet is dropped under this reason (the same reason `push` gives, from the same
    /// reason enum: see [`crate::reason`]).
    Drop(&'static str),
    /// The element must run on these packets (it copies, creates or reshapes them in ways the
    /// model does not describe). Synthesis hands the packet to the element itself.
    Runtime,
    /// The packet leaves on every output `0..n`, the first `n − 1` as copies the element
    /// creates (`Tee`); output 0 runs to completion first, then 1, and so on.
    Copies(usize),
}

/// One thing an element does to a packet, in the order given.
///
/// What each effect does is said once, as primitives of an [`EffectSink`], by
/// [`apply_effect`]: a new effect is a variant here, its line there, and any new primitive
/// in each sink (the reference [`apply`], synthesis, the fast path).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Writes a field with an operation (Ethernet fields, annotations, raw bytes). Writing an
    /// IPv4 or transport field through `Write` leaves the checksums alone; an element that
    /// fixes them lists [`Effect::SetIpChecksum`] too.
    Write(Field, Op),
    /// `DecIPTTL`: the TTL goes down by one and the IP checksum is updated incrementally
    /// (RFC 1624 eqn. 3; a valid checksum stays valid, an invalid one stays as wrong).
    DecTtl,
    /// `Strip(n)`: `n` bytes are pulled off the front of the data (into the headroom).
    Pull(u16),
    /// `Unstrip(n)`: `n` bytes of headroom are put back in front of the data.
    Unpull(u16),
    /// `EtherEncap`: a 14-byte Ethernet header is pushed in front of the data; the MAC-header
    /// annotation points at it and the network-header annotation right after it.
    EtherEncap {
        /// The Ethernet type.
        ethertype: u16,
        /// Source address.
        src: [u8; 6],
        /// Destination address.
        dst: [u8; 6],
    },
    /// `EtherRewrite`: the destination and source addresses are written over the 12 bytes
    /// at the MAC-header annotation (the start of the data without one). A packet with
    /// fewer than 14 bytes from there is left to the element ([`apply`] says
    /// [`Outcome::Runtime`]).
    EtherRewrite {
        /// Source address.
        src: [u8; 6],
        /// Destination address.
        dst: [u8; 6],
    },
    /// The MAC-header annotation is set to the start of the data (`FromDevice`).
    MarkMac,
    /// The packet-type annotation is set from the destination MAC address (`FromDevice`).
    PacketTypeFromEth,
    /// The network-header annotation is set at the model's IPv4 header and the
    /// transport-header annotation right after it (`CheckIPHeader`, `MarkIPHeader`).
    MarkIp,
    /// The packet is cut at the end of the IPv4 total length (`CheckIPHeader` removes
    /// Ethernet padding).
    TrimToIpLen,
    /// The destination-IP annotation is set to the IPv4 destination (`GetIPAddress(16)`,
    /// `CheckIPHeader`).
    DstAnnoFromIpDst,
    /// The IPv4 header checksum is recomputed (`SetIPChecksum`).
    SetIpChecksum,
}

/// One case of a model: the packets of `filter` get `effects`, then `outcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The packets this case is about (after the cases before it did not match).
    pub filter: Filter,
    /// What the element does to them, in order.
    pub effects: Vec<Effect>,
    /// Where they go.
    pub outcome: Outcome,
    /// Names of the element's `stats()` counters this case adds one to.
    pub stats: Vec<&'static str>,
    /// Names of the element's `stats()` counters this case adds the packet's length to (the
    /// length of the data as the element receives it: `Counter`'s `byte_count`).
    pub byte_stats: Vec<&'static str>,
}

impl Case {
    /// A case with no effects and no counters.
    pub fn new(filter: Filter, outcome: Outcome) -> Case {
        Case {
            filter,
            effects: Vec::new(),
            outcome,
            stats: Vec::new(),
            byte_stats: Vec::new(),
        }
    }

    /// Adds a counter this case adds the packet's length to.
    pub fn byte_stat(mut self, name: &'static str) -> Case {
        self.byte_stats.push(name);
        self
    }

    /// Adds an effect.
    pub fn effect(mut self, e: Effect) -> Case {
        self.effects.push(e);
        self
    }

    /// Adds a counter this case increments.
    pub fn stat(mut self, name: &'static str) -> Case {
        self.stats.push(name);
        self
    }
}

/// An element's behaviour as first-match cases (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// Where the IPv4 fields of the filters and effects are.
    pub ip_at: IpAnchor,
    /// The cases, tried in order.
    pub cases: Vec<Case>,
}

impl Model {
    /// A model reading IPv4 fields at the network-header annotation.
    pub fn new(cases: Vec<Case>) -> Model {
        Model {
            ip_at: IpAnchor::Annotation,
            cases,
        }
    }

    /// Every packet leaves on output 0 unchanged (`Null`, `Queue`, ...).
    pub fn pass() -> Model {
        Model::new(vec![Case::new(Filter::any(), Outcome::Out(0))])
    }
}

/// Reads `len` (≤ 16) big-endian bytes at `off`, or 0 when they are not all there.
#[inline]
pub fn load(data: &[u8], off: usize, len: usize) -> u128 {
    match data.get(off..off + len) {
        Some(b) => b.iter().fold(0u128, |acc, x| (acc << 8) | u128::from(*x)),
        None => 0,
    }
}

/// The packet-type annotation value of a [`packet::PacketType`] (its declaration order).
#[inline]
pub fn packet_type_value(t: packet::PacketType) -> u128 {
    t as u128
}

/// Where the IPv4 header is, as an offset into the data, for an element reading it at `ip_at`.
pub fn ip_offset(p: &packet::Packet, ip_at: IpAnchor) -> Option<usize> {
    match ip_at {
        IpAnchor::Annotation => p.network_offset_in_data(),
        IpAnchor::Data(o) => Some(usize::from(o)),
    }
}

/// The named fields of `p` as an element with IPv4 anchor `ip_at` sees them (see the module
/// documentation for where each field is); raw fields are left out (see [`raw_value`]).
/// Missing bytes read as 0; without an IPv4 header every IPv4 and transport field is 0.
pub fn point_of(p: &packet::Packet, ip_at: IpAnchor) -> PacketPoint {
    let h = Headers::new(p.data(), ip_offset(p, ip_at));
    let mut pt = PacketPoint::new();
    for f in Field::ALL {
        pt.set(f, h.value(f));
    }
    pt.set(Field::InPort, u128::from(p.meta.ingress));
    pt.set(Field::Paint, u128::from(p.meta.paint));
    pt.set(Field::DstIpAnno, u128::from(u32::from(p.meta.dst_ip)));
    pt.set(Field::PacketType, packet_type_value(p.meta.packet_type));
    pt.set(Field::FixIpSrc, u128::from(p.meta.fix_ip_src));
    pt
}

/// The value of stored field `Field::$f` in `Headers` `$h`, its [`Layout`] a compile-time
/// constant (see [`Headers::value`]).
macro_rules! stored {
    ($h:expr, $f:ident) => {{
        const L: Layout = match Field::$f.layout() {
            Some(l) => l,
            None => panic!("not a stored field"),
        };
        L.read($h.base(L.base))
    }};
}

/// A packet's data with its IPv4 and transport headers located once: the one reading of the
/// fields that models ([`point_of`]) and synthesized programs (the frame as it arrived, IPv4
/// header at 14) share.
#[derive(Debug, Clone, Copy)]
pub struct Headers<'a> {
    /// The data.
    pub data: &'a [u8],
    /// From the IPv4 header to the end of the data (empty without one).
    pub ip: &'a [u8],
    /// The IPv4 header length in bytes (IHL × 4; 0 without a header).
    pub hl: usize,
    /// From the transport header (IPv4 header + `hl`) to the end of the data.
    pub l4: &'a [u8],
}

impl<'a> Headers<'a> {
    /// The headers of `data` with the IPv4 header `ip_off` bytes in, if there is one.
    #[inline]
    pub fn new(data: &'a [u8], ip_off: Option<usize>) -> Headers<'a> {
        let ip = ip_off.and_then(|o| data.get(o..)).unwrap_or(&[]);
        let hl = usize::from(ip.first().copied().unwrap_or(0) & 0x0f) * 4;
        let l4 = ip.get(hl..).unwrap_or(&[]);
        Headers { data, ip, hl, l4 }
    }

    /// Whether the IPv4 header checksum verifies ([`Field::IpChecksumOk`]).
    #[inline]
    pub fn ip_checksum_ok(&self) -> bool {
        let (ip, hl) = (self.ip, self.hl);
        hl >= 20 && hl <= ip.len() && wire::checksum::ipv4_header_ok(&ip[..hl])
    }

    /// Whether the IPv4 total length is at least the header's and within the data
    /// ([`Field::IpLenOk`]).
    #[inline]
    pub fn ip_len_ok(&self) -> bool {
        let len = load(self.ip, 2, 2) as usize;
        !self.ip.is_empty() && len >= self.hl && len <= self.ip.len()
    }

    /// The value of `field` (see the module documentation). Annotations read 0, except
    /// [`Field::PacketType`], which reads what `FromDevice` would set from the destination
    /// MAC address.
    ///
    /// Stored fields read at their [`Layout`], made a constant per arm (`stored!`): each arm
    /// compiles to a direct load, as a hand-written offset table would. Inlined always, for
    /// callers with a constant field (it folds to one load); a field known only at run time
    /// goes through [`Headers::value_of`]. (Looking the layout up at run time, inlined into
    /// the fast path's guard loop, cost that path about 10% per packet.)
    #[inline(always)]
    pub fn value(&self, field: Field) -> u128 {
        let (data, ip, hl, l4) = (self.data, self.ip, self.hl, self.l4);
        let vlan = || load(data, 12, 2) == u128::from(ethertype::VLAN);
        match field {
            Field::FrameLen => data.len().min(0xffff) as u128,
            Field::HasVlan => u128::from(vlan()),
            Field::VlanId if !vlan() => 0,
            Field::PacketType => packet_type_value(packet::PacketType::from_dst_mac(data)),
            Field::IpAvail => ip.len().min(0xffff) as u128,
            Field::IpOptions => u128::from(load(ip, 0, 1) & 0x0f > 5),
            Field::IpChecksumOk => u128::from(self.ip_checksum_ok()),
            Field::IpLenOk => u128::from(self.ip_len_ok()),
            Field::L4Avail => l4.len().min(0xffff) as u128,
            Field::L4Len => (load(ip, 2, 2) as usize).saturating_sub(hl) as u128,
            Field::VlanId => stored!(self, VlanId),
            Field::EthDst => stored!(self, EthDst),
            Field::EthSrc => stored!(self, EthSrc),
            Field::EtherType => stored!(self, EtherType),
            Field::IpVersion => stored!(self, IpVersion),
            Field::IpIhl => stored!(self, IpIhl),
            Field::IpTos => stored!(self, IpTos),
            Field::IpLen => stored!(self, IpLen),
            Field::IpId => stored!(self, IpId),
            Field::IpFlags => stored!(self, IpFlags),
            Field::IpFragOffset => stored!(self, IpFragOffset),
            Field::IpTtl => stored!(self, IpTtl),
            Field::IpProto => stored!(self, IpProto),
            Field::IpSrc => stored!(self, IpSrc),
            Field::IpDst => stored!(self, IpDst),
            Field::SrcPort => stored!(self, SrcPort),
            Field::DstPort => stored!(self, DstPort),
            Field::TcpFlags => stored!(self, TcpFlags),
            Field::TcpDataOff => stored!(self, TcpDataOff),
            Field::IcmpType => stored!(self, IcmpType),
            Field::IcmpCode => stored!(self, IcmpCode),
            Field::Raw { .. } => match field.layout() {
                Some(l) => l.read(self.base(l.base)),
                None => 0,
            },
            // Annotations: nothing in the bytes.
            Field::InPort | Field::Paint | Field::DstIpAnno | Field::FixIpSrc => 0,
        }
    }

    /// [`Headers::value`] for a field known only at run time (a guard's, a program's
    /// getter's): one out-of-line call through the match's jump table, which keeps the
    /// loops that call it small. Callers with a constant field use `value`, which folds to
    /// a load.
    #[inline(never)]
    pub fn value_of(&self, field: Field) -> u128 {
        self.value(field)
    }

    /// The bytes from `base` on (empty when that header is missing).
    #[inline(always)]
    pub fn base(&self, base: Base) -> &'a [u8] {
        match base {
            Base::Frame => self.data,
            Base::Network => self.ip,
            Base::Transport => self.l4,
        }
    }
}

/// The value of a raw field `Raw { offset, len }` of `p` (0 when the bytes are missing, or
/// for a named field).
pub fn raw_value(p: &packet::Packet, field: Field) -> u128 {
    match field {
        Field::Raw { offset, len } => load(p.data(), usize::from(offset), usize::from(len)),
        _ => 0,
    }
}

/// Whether `p` falls in `filter` for an element with IPv4 anchor `ip_at` (raw fields
/// included).
pub fn matches(filter: &Filter, p: &packet::Packet, ip_at: IpAnchor) -> bool {
    let mut pt = point_of(p, ip_at);
    for (f, _) in filter.fields() {
        if let Field::Raw { .. } = f {
            pt.set(f, raw_value(p, f));
        }
    }
    filter.contains(&pt)
}

/// What [`apply`] did with one packet: where it goes, the packet afterwards, and the
/// `stats()` counters the element would have incremented.
#[derive(Debug)]
pub struct Applied {
    /// The outcome of the case that matched ([`Outcome::Runtime`] when the element itself
    /// must run: see [`apply`]).
    pub outcome: Outcome,
    /// The packet after the case's effects (untouched for a run-time outcome).
    pub packet: packet::Packet,
    /// The counters the case adds one to (none for a run-time outcome).
    pub stats: Vec<&'static str>,
    /// The counters the case adds the packet's length to, with that length.
    pub bytes: Vec<(&'static str, u64)>,
}

/// Runs `model` concretely on `p`: finds the first case whose filter matches ([`matches()`]),
/// applies its effects in order and returns its outcome and counters. This is the reference
/// meaning of a model: a model is right when `apply` agrees with the element's `push`.
///
/// Effects, concretely:
///
/// * [`Effect::Write`] of [`Field::EthDst`], [`Field::EthSrc`], [`Field::EtherType`] writes
///   the bytes at the start of the data ([`Field::VlanId`]: the low 12 bits of bytes 14–15),
///   of [`Field::Raw`] the `len` bytes at `offset`; of an IPv4 field the bits of the header at
///   [`Model::ip_at`] ([`Field::IpVersion`]/[`Field::IpIhl`] the nibbles of byte 0,
///   [`Field::IpFlags`]/[`Field::IpFragOffset`] the 3 + 13 bits of bytes 6–7, ...), checksums
///   untouched; of a transport field the bytes at the IPv4 header + IHL × 4. A write whose
///   bytes are not all in the data (or without an IPv4 header) does nothing: the packet never
///   grows, and the field still reads 0 as [`point_of`] says. [`Field::Paint`],
///   [`Field::DstIpAnno`], [`Field::PacketType`] (the [`packet::PacketType`] of that
///   declaration index; 6 and 7 do nothing) and [`Field::InPort`] write the annotations. The
///   fields computed from the packet ([`Field::FrameLen`], [`Field::HasVlan`],
///   [`Field::IpOptions`], [`Field::IpChecksumOk`], [`Field::IpLenOk`], [`Field::IpAvail`],
///   [`Field::L4Avail`], [`Field::L4Len`]) are stored nowhere and cannot be written: such a
///   write does nothing.
///   `Op::Set(v)` writes `v` and `Op::Add(c)` adds `c` to the current value, both modulo
///   `2^width` of the field.
/// * [`Effect::DecTtl`] is `DecIPTTL`'s code: TTL (byte 8) − 1 and the RFC 1624 update of
///   the checksum (bytes 10–11); nothing when the header has fewer than 12 bytes.
/// * [`Effect::Pull`]`(n)` pulls `min(n, length)` bytes (`Strip`); [`Effect::Unpull`]`(n)`
///   puts `n` bytes of headroom back, zero-filled beyond the buffer (`Unstrip`).
/// * [`Effect::EtherEncap`] pushes the 14-byte header and sets the MAC-header annotation at
///   the new start and the network-header annotation 14 bytes later (`EtherEncap`).
/// * [`Effect::MarkMac`] sets the MAC-header annotation at the start of the data;
///   [`Effect::PacketTypeFromEth`] sets the packet type from the destination MAC
///   ([`packet::PacketType::from_dst_mac`] of the data, as `FromDevice` does).
/// * [`Effect::MarkIp`] sets the network-header annotation at the IPv4 anchor and the
///   transport-header annotation IHL × 4 bytes after it, both clamped to the end of the data
///   (`MarkIPHeader`'s code; a data anchor beyond the end marks the end, an IHL read from no
///   byte is 0). With [`IpAnchor::Annotation`] and no network header it does nothing.
/// * [`Effect::TrimToIpLen`] cuts the data at the IPv4 anchor + [`Field::IpLen`] as
///   [`point_of`] reads it (no effect if already shorter; nothing without an IPv4 header).
/// * [`Effect::DstAnnoFromIpDst`] sets the destination-IP annotation to [`Field::IpDst`] as
///   [`point_of`] reads it.
/// * [`Effect::SetIpChecksum`] recomputes the header checksum as `SetIPChecksum` does
///   (nothing when IHL × 4 is below 20 or beyond the data).
///
/// A case whose outcome is [`Outcome::Runtime`], a case with an operation that needs
/// run-time state (`Op::Pool`, `Op::Stateful`, ...), and a packet no case matches all give
/// [`Outcome::Runtime`] with the packet untouched and no counters: the element must run.
pub fn apply(model: &Model, mut p: packet::Packet) -> Applied {
    let runtime = |p| Applied {
        outcome: Outcome::Runtime,
        packet: p,
        stats: Vec::new(),
        bytes: Vec::new(),
    };
    let Some(case) = model
        .cases
        .iter()
        .find(|c| matches(&c.filter, &p, model.ip_at))
    else {
        return runtime(p);
    };
    let deterministic = case.effects.iter().all(|e| match e {
        Effect::Write(_, op) => op.is_deterministic(),
        _ => true,
    });
    if case.outcome == Outcome::Runtime || !deterministic {
        return runtime(p);
    }
    let len = p.len() as u64;
    for e in &case.effects {
        if let Effect::EtherRewrite { src, dst } = e {
            let mut q = p.duplicate();
            if !q.write_ether_addrs(src, dst) {
                return runtime(p);
            }
        }
    }
    let mut concrete = Concrete {
        p: &mut p,
        ip_at: model.ip_at,
    };
    let Ok(()) = apply_effects(&case.effects, &mut concrete);
    Applied {
        outcome: case.outcome.clone(),
        packet: p,
        stats: case.stats.clone(),
        bytes: case.byte_stats.iter().map(|n| (*n, len)).collect(),
    }
}

/// The IPv4 header's offset into the data, if the anchor is inside the data.
fn ip_start(p: &packet::Packet, ip_at: IpAnchor) -> Option<usize> {
    ip_offset(p, ip_at).filter(|&o| o <= p.len())
}

/// Writes `op` into field `f` of `p` (see [`apply`]).
fn write(p: &mut packet::Packet, ip_at: IpAnchor, f: Field, op: &Op) {
    let width = f.width();
    let Some(layout) = f.layout() else {
        let meta = &mut p.meta;
        let old = match f {
            Field::Paint => u128::from(meta.paint),
            Field::DstIpAnno => u128::from(u32::from(meta.dst_ip)),
            Field::PacketType => packet_type_value(meta.packet_type),
            Field::InPort => u128::from(meta.ingress),
            _ => return,
        };
        let Some(v) = op.apply(old, width) else {
            return;
        };
        match f {
            Field::Paint => meta.paint = v as u8,
            Field::DstIpAnno => meta.dst_ip = std::net::Ipv4Addr::from(v as u32),
            Field::InPort => meta.ingress = v as u16,
            _ => {
                if let Some(t) = packet_type_from_value(v) {
                    meta.packet_type = t;
                }
            }
        }
        return;
    };
    let start = match layout.base {
        Base::Frame => 0,
        Base::Network | Base::Transport => {
            let Some(ip) = ip_start(p, ip_at) else {
                return;
            };
            match layout.base {
                Base::Transport => match p.data().get(ip) {
                    Some(b) => ip + usize::from(b & 0x0f) * 4,
                    None => return,
                },
                _ => ip,
            }
        }
    };
    if let Some(bytes) = p.data_mut().get_mut(start..) {
        layout.update(bytes, |old| op.apply(old, width));
    }
}

/// The [`packet::PacketType`] with annotation value `v` (its declaration index).
fn packet_type_from_value(v: u128) -> Option<packet::PacketType> {
    use packet::PacketType as T;
    [
        T::Host,
        T::Broadcast,
        T::Multicast,
        T::OtherHost,
        T::Outgoing,
        T::Loopback,
    ]
    .into_iter()
    .find(|&t| packet_type_value(t) == v)
}

/// The primitive operations a case's effects are made of, as one interpreter of models
/// implements them: the reference ([`apply`], on a concrete packet), synthesis (on a symbolic
/// packet) and the executor's fast path (on a flow's recorded header action).
///
/// [`apply_effect`] is the one place that says which primitives each [`Effect`] is; an
/// interpreter implements only the primitives. A primitive that an interpreter cannot
/// represent fails with its `Error` (the reference never fails).
pub trait EffectSink {
    /// Why an interpreter cannot follow an effect.
    type Error;
    /// Writes `op` into field `f` (a stored field at its [`Field::layout`], or an
    /// annotation); checksums are left alone.
    fn write(&mut self, f: Field, op: &Op) -> Result<(), Self::Error>;
    /// Decrements the IPv4 TTL and updates the header checksum incrementally (RFC 1624).
    fn dec_ttl(&mut self) -> Result<(), Self::Error>;
    /// Pulls `n` bytes off the front of the data.
    fn pull(&mut self, n: u16) -> Result<(), Self::Error>;
    /// Puts `n` bytes of headroom back in front of the data.
    fn unpull(&mut self, n: u16) -> Result<(), Self::Error>;
    /// Pushes `n` new bytes in front of the data (written by the primitives that follow).
    fn push(&mut self, n: u16) -> Result<(), Self::Error>;
    /// Overwrites the Ethernet addresses at the MAC-header annotation.
    fn rewrite_macs(&mut self, src: &[u8; 6], dst: &[u8; 6]) -> Result<(), Self::Error>;
    /// Sets the MAC-header annotation at the start of the data.
    fn mark_mac(&mut self) -> Result<(), Self::Error>;
    /// Sets the network-header annotation `off` bytes into the data.
    fn mark_network(&mut self, off: u16) -> Result<(), Self::Error>;
    /// Sets the network-header annotation at the model's IPv4 header and the
    /// transport-header annotation after it.
    fn mark_ip(&mut self) -> Result<(), Self::Error>;
    /// Sets the packet-type annotation from the destination MAC address.
    fn packet_type_from_eth(&mut self) -> Result<(), Self::Error>;
    /// Sets the destination-IP annotation to the IPv4 destination.
    fn dst_anno_from_ip_dst(&mut self) -> Result<(), Self::Error>;
    /// Cuts the packet at the end of the IPv4 total length.
    fn trim_to_ip_len(&mut self) -> Result<(), Self::Error>;
    /// Recomputes the IPv4 header checksum.
    fn set_ip_checksum(&mut self) -> Result<(), Self::Error>;
}

/// The length of the Ethernet header `EtherEncap` pushes.
const ETHER_HEADER_LEN: u16 = wire::ethernet::HEADER_LEN as u16;

/// A MAC address as a field value.
#[inline]
fn mac_value(m: &[u8; 6]) -> u128 {
    u128::from(wire::ethernet::mac_to_u64(m))
}

/// Applies one effect to `sink` as its primitives: the one statement of what each
/// [`Effect`] does (see [`apply`] for their concrete meaning).
#[inline]
pub fn apply_effect<S: EffectSink>(e: &Effect, sink: &mut S) -> Result<(), S::Error> {
    match e {
        Effect::Write(f, op) => sink.write(*f, op),
        Effect::DecTtl => sink.dec_ttl(),
        Effect::Pull(n) => sink.pull(*n),
        Effect::Unpull(n) => sink.unpull(*n),
        Effect::EtherEncap {
            ethertype,
            src,
            dst,
        } => {
            sink.push(ETHER_HEADER_LEN)?;
            sink.write(Field::EthDst, &Op::Set(mac_value(dst)))?;
            sink.write(Field::EthSrc, &Op::Set(mac_value(src)))?;
            sink.write(Field::EtherType, &Op::Set(u128::from(*ethertype)))?;
            sink.mark_mac()?;
            sink.mark_network(ETHER_HEADER_LEN)
        }
        Effect::EtherRewrite { src, dst } => sink.rewrite_macs(src, dst),
        Effect::MarkMac => sink.mark_mac(),
        Effect::PacketTypeFromEth => sink.packet_type_from_eth(),
        Effect::MarkIp => sink.mark_ip(),
        Effect::TrimToIpLen => sink.trim_to_ip_len(),
        Effect::DstAnnoFromIpDst => sink.dst_anno_from_ip_dst(),
        Effect::SetIpChecksum => sink.set_ip_checksum(),
    }
}

/// Applies `effects` in order to `sink` (see [`apply_effect`]), stopping at the first the
/// sink cannot follow.
pub fn apply_effects<S: EffectSink>(effects: &[Effect], sink: &mut S) -> Result<(), S::Error> {
    effects.iter().try_for_each(|e| apply_effect(e, sink))
}

/// A concrete packet as an [`EffectSink`]: the reference meaning of each primitive (see
/// [`apply`]).
struct Concrete<'a> {
    p: &'a mut packet::Packet,
    ip_at: IpAnchor,
}

impl EffectSink for Concrete<'_> {
    type Error = std::convert::Infallible;

    fn write(&mut self, f: Field, op: &Op) -> Result<(), Self::Error> {
        write(self.p, self.ip_at, f, op);
        Ok(())
    }

    fn dec_ttl(&mut self) -> Result<(), Self::Error> {
        if let Some(ip) = ip_start(self.p, self.ip_at) {
            if let Some(h) = self.p.data_mut().get_mut(ip..ip + 12) {
                h[8] = h[8].wrapping_sub(1);
                let sum =
                    u32::from(!u16::from_be_bytes([h[10], h[11]])) + wire::checksum::TTL_DECREMENT;
                let c = !((sum + (sum >> 16)) as u16);
                h[10..12].copy_from_slice(&c.to_be_bytes());
            }
        }
        Ok(())
    }

    fn pull(&mut self, n: u16) -> Result<(), Self::Error> {
        let n = usize::from(n).min(self.p.len());
        self.p.pull(n);
        Ok(())
    }

    fn unpull(&mut self, n: u16) -> Result<(), Self::Error> {
        self.p.unpull(usize::from(n));
        Ok(())
    }

    fn push(&mut self, n: u16) -> Result<(), Self::Error> {
        self.p.push(usize::from(n));
        Ok(())
    }

    fn rewrite_macs(&mut self, src: &[u8; 6], dst: &[u8; 6]) -> Result<(), Self::Error> {
        self.p.write_ether_addrs(src, dst);
        Ok(())
    }

    fn mark_mac(&mut self) -> Result<(), Self::Error> {
        self.p.set_mac_header(0);
        Ok(())
    }

    fn mark_network(&mut self, off: u16) -> Result<(), Self::Error> {
        self.p.set_network_header(usize::from(off));
        Ok(())
    }

    fn mark_ip(&mut self) -> Result<(), Self::Error> {
        let p = &mut *self.p;
        let len = p.len();
        if let Some(off) = ip_offset(p, self.ip_at).map(|o| o.min(len)) {
            let hl = p.data().get(off).map_or(0, |b| usize::from(b & 0x0f) * 4);
            p.set_network_header(off);
            p.set_transport_header((off + hl).min(len));
        }
        Ok(())
    }

    fn packet_type_from_eth(&mut self) -> Result<(), Self::Error> {
        self.p.meta.packet_type = packet::PacketType::from_dst_mac(self.p.data());
        Ok(())
    }

    fn dst_anno_from_ip_dst(&mut self) -> Result<(), Self::Error> {
        let dst = point_of(self.p, self.ip_at).get(Field::IpDst);
        self.p.meta.dst_ip = std::net::Ipv4Addr::from(dst as u32);
        Ok(())
    }

    fn trim_to_ip_len(&mut self) -> Result<(), Self::Error> {
        if let Some(ip) = ip_start(self.p, self.ip_at) {
            let total = load(self.p.data(), ip + 2, 2) as usize;
            self.p.truncate(ip + total);
        }
        Ok(())
    }

    fn set_ip_checksum(&mut self) -> Result<(), Self::Error> {
        if let Some(ip) = ip_start(self.p, self.ip_at) {
            let h = &mut self.p.data_mut()[ip..];
            let hl = h.first().map_or(0, |b| usize::from(b & 0x0f) * 4);
            if hl >= 20 && hl <= h.len() {
                h[10..12].copy_from_slice(&[0, 0]);
                let c = wire::checksum::data(&h[..hl]);
                h[10..12].copy_from_slice(&c.to_be_bytes());
            }
        }
        Ok(())
    }
}

/// The [`packet::PacketType`] with annotation value `v` (inverse of [`packet_type_value`];
/// values past the last type read as `Loopback`).
pub fn packet_type_of_value(v: u128) -> packet::PacketType {
    use packet::PacketType::*;
    match v {
        0 => Host,
        1 => Broadcast,
        2 => Multicast,
        3 => OtherHost,
        4 => Outgoing,
        _ => Loopback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::Packet;

    /// Frames of random bytes (a third of them 802.1Q-tagged), long enough for every
    /// header field whatever the IPv4 header length.
    fn frames() -> Vec<Vec<u8>> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        };
        (0..300)
            .map(|i| {
                let mut d: Vec<u8> = (0..14 + 60 + 40).map(|_| next()).collect();
                if i % 3 == 0 {
                    d[12] = 0x81;
                    d[13] = 0x00;
                }
                d
            })
            .collect()
    }

    fn be(b: &[u8]) -> u128 {
        b.iter().fold(0, |a, x| (a << 8) | u128::from(*x))
    }

    /// The value of each stored named field as the `wire` views read it.
    fn wire_value(d: &[u8], f: Field) -> Option<u128> {
        let eth = wire::ethernet::Frame::new_unchecked(d);
        let ip = wire::ipv4::Packet::new_unchecked(&d[14..]);
        let l4 = &d[14 + ip.header_len()..];
        let tcp = wire::tcp::Packet::new_unchecked(l4);
        let udp = wire::udp::Packet::new_unchecked(l4);
        let icmp = wire::icmpv4::Packet::new_unchecked(l4);
        Some(match f {
            Field::EthDst => be(&eth.dst_addr().0),
            Field::EthSrc => be(&eth.src_addr().0),
            Field::EtherType => u128::from(eth.ethertype()),
            Field::VlanId if eth.ethertype() == ethertype::VLAN => be(&d[14..16]) & 0xfff,
            Field::VlanId => 0,
            Field::IpVersion => u128::from(ip.version()),
            Field::IpIhl => ip.header_len() as u128 / 4,
            Field::IpTos => u128::from(ip.tos()),
            Field::IpLen => u128::from(ip.total_len()),
            Field::IpId => u128::from(ip.ident()),
            Field::IpFlags => u128::from(ip.flags_frag_raw() >> 13),
            Field::IpFragOffset => u128::from(ip.frag_offset() >> 3),
            Field::IpTtl => u128::from(ip.ttl()),
            Field::IpProto => u128::from(ip.protocol()),
            Field::IpSrc => u128::from(u32::from(ip.src_addr())),
            Field::IpDst => u128::from(u32::from(ip.dst_addr())),
            Field::SrcPort => u128::from(tcp.src_port()),
            Field::DstPort => u128::from(udp.dst_port()),
            Field::TcpFlags => u128::from(tcp.flags()),
            Field::TcpDataOff => tcp.header_len() as u128 / 4,
            Field::IcmpType => u128::from(icmp.msg_type()),
            Field::IcmpCode => u128::from(icmp.msg_code()),
            _ => return None,
        })
    }

    #[test]
    fn named_layouts_read_what_the_wire_views_read() {
        let mut checked = 0;
        for d in frames() {
            let pt = point_of(&Packet::from_bytes(&d), IpAnchor::Data(14));
            for f in Field::ALL {
                assert_eq!(f.layout().is_some(), wire_value(&d, f).is_some(), "{f}");
                if let Some(v) = wire_value(&d, f) {
                    assert_eq!(pt.get(f), v, "{f} in {d:02x?}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 300 * 21);
    }

    #[test]
    fn a_write_changes_its_field_and_no_other_byte() {
        for (i, d) in frames().into_iter().enumerate() {
            for f in Field::ALL {
                let Some(l) = f.layout() else {
                    continue;
                };
                let v = (i as u128 * 0x9e37_79b9_7f4a_7c15) & f.max_value();
                let model = Model {
                    ip_at: IpAnchor::Data(14),
                    cases: vec![Case::new(Filter::any(), Outcome::Out(0))
                        .effect(Effect::Write(f, Op::Set(v)))],
                };
                let q = apply(&model, Packet::from_bytes(&d)).packet;
                let start = match l.base {
                    Base::Frame => 0,
                    Base::Network => 14,
                    Base::Transport => 14 + usize::from(d[14] & 0x0f) * 4,
                } + usize::from(l.offset);
                let bytes = start..start + usize::from(l.len);
                for (j, (a, b)) in d.iter().zip(q.data()).enumerate() {
                    assert!(a == b || bytes.contains(&j), "{f} wrote byte {j}");
                }
                // (A transport field over the IPv4 header length, when that is below 5,
                // moves the transport header it is read from.)
                let moves_l4 = bytes.contains(&14) && l.base == Base::Transport;
                if (f != Field::VlanId || d[12..14] == [0x81, 0]) && !moves_l4 {
                    let pt = point_of(&q, IpAnchor::Data(14));
                    assert_eq!(pt.get(f), v, "{f}");
                }
            }
        }
    }

    /// Logs the primitives the driver calls.
    struct Log(Vec<String>);

    impl EffectSink for Log {
        type Error = ();
        fn write(&mut self, f: Field, op: &Op) -> Result<(), ()> {
            self.0.push(format!("write {f} {op:?}"));
            Ok(())
        }
        fn dec_ttl(&mut self) -> Result<(), ()> {
            self.0.push("dec_ttl".into());
            Ok(())
        }
        fn pull(&mut self, n: u16) -> Result<(), ()> {
            self.0.push(format!("pull {n}"));
            Ok(())
        }
        fn unpull(&mut self, n: u16) -> Result<(), ()> {
            self.0.push(format!("unpull {n}"));
            Ok(())
        }
        fn push(&mut self, n: u16) -> Result<(), ()> {
            self.0.push(format!("push {n}"));
            Ok(())
        }
        fn rewrite_macs(&mut self, _: &[u8; 6], _: &[u8; 6]) -> Result<(), ()> {
            self.0.push("rewrite_macs".into());
            Ok(())
        }
        fn mark_mac(&mut self) -> Result<(), ()> {
            self.0.push("mark_mac".into());
            Ok(())
        }
        fn mark_network(&mut self, off: u16) -> Result<(), ()> {
            self.0.push(format!("mark_network {off}"));
            Ok(())
        }
        fn mark_ip(&mut self) -> Result<(), ()> {
            self.0.push("mark_ip".into());
            Ok(())
        }
        fn packet_type_from_eth(&mut self) -> Result<(), ()> {
            self.0.push("packet_type_from_eth".into());
            Ok(())
        }
        fn dst_anno_from_ip_dst(&mut self) -> Result<(), ()> {
            self.0.push("dst_anno_from_ip_dst".into());
            Ok(())
        }
        fn trim_to_ip_len(&mut self) -> Result<(), ()> {
            self.0.push("trim_to_ip_len".into());
            Err(())
        }
        fn set_ip_checksum(&mut self) -> Result<(), ()> {
            self.0.push("set_ip_checksum".into());
            Ok(())
        }
    }

    #[test]
    fn the_driver_spells_each_effect_as_primitives_and_stops_at_a_refusal() {
        let mut log = Log(Vec::new());
        let effects = [
            Effect::EtherEncap {
                ethertype: ethertype::IPV4,
                src: [0, 0, 0, 0, 0, 1],
                dst: [0, 0, 0, 0, 0, 2],
            },
            Effect::DecTtl,
            Effect::TrimToIpLen,
            Effect::SetIpChecksum,
        ];
        assert_eq!(apply_effects(&effects, &mut log), Err(()));
        assert_eq!(
            log.0,
            [
                "push 14",
                "write eth_dst Set(2)",
                "write eth_src Set(1)",
                "write eth_type Set(2048)",
                "mark_mac",
                "mark_network 14",
                "dec_ttl",
                "trim_to_ip_len",
            ]
        );
    }
}
