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

pub use space::{Action, Field, FieldSet, Filter, FilterSet, Op, PacketPoint};

/// Where an element finds the IPv4 header it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpAnchor {
    /// At the network-header annotation (most IP elements).
    Annotation,
    /// At this byte offset into the packet data (`CheckIPHeader(OFFSET)`).
    Data(u16),
}

/// What happens to the packets of one case.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The packet leaves on this output port.
    Out(usize),
    /// The packet is dropped under this reason (the same reason `push` gives).
    Drop(&'static str),
    /// The element must run on these packets (it copies, creates or reshapes them in ways the
    /// model does not describe). Synthesis hands the packet to the element itself.
    Runtime,
    /// The packet leaves on every output `0..n`, the first `n − 1` as copies the element
    /// creates (`Tee`); output 0 runs to completion first, then 1, and so on.
    Copies(usize),
}

/// One thing an element does to a packet, in the order given.
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
        hl >= 20 && hl <= ip.len() && wire::checksum::data(&ip[..hl]) == 0
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
    #[inline]
    pub fn value(&self, field: Field) -> u128 {
        let (data, ip, hl, l4) = (self.data, self.ip, self.hl, self.l4);
        match field {
            Field::FrameLen => data.len().min(0xffff) as u128,
            Field::EthDst => load(data, 0, 6),
            Field::EthSrc => load(data, 6, 6),
            Field::EtherType => load(data, 12, 2),
            Field::HasVlan => u128::from(load(data, 12, 2) == 0x8100),
            Field::VlanId => {
                if load(data, 12, 2) == 0x8100 {
                    load(data, 14, 2) & 0xfff
                } else {
                    0
                }
            }
            Field::PacketType => packet_type_value(packet::PacketType::from_dst_mac(data)),
            Field::IpAvail => ip.len().min(0xffff) as u128,
            Field::IpVersion => load(ip, 0, 1) >> 4,
            Field::IpIhl => load(ip, 0, 1) & 0x0f,
            Field::IpOptions => u128::from(load(ip, 0, 1) & 0x0f > 5),
            Field::IpTos => load(ip, 1, 1),
            Field::IpLen => load(ip, 2, 2),
            Field::IpId => load(ip, 4, 2),
            Field::IpFlags => load(ip, 6, 2) >> 13,
            Field::IpFragOffset => load(ip, 6, 2) & 0x1fff,
            Field::IpTtl => load(ip, 8, 1),
            Field::IpProto => load(ip, 9, 1),
            Field::IpChecksumOk => u128::from(self.ip_checksum_ok()),
            Field::IpSrc => load(ip, 12, 4),
            Field::IpDst => load(ip, 16, 4),
            Field::IpLenOk => u128::from(self.ip_len_ok()),
            Field::L4Avail => l4.len().min(0xffff) as u128,
            Field::L4Len => (load(ip, 2, 2) as usize).saturating_sub(hl) as u128,
            Field::SrcPort => load(l4, 0, 2),
            Field::DstPort => load(l4, 2, 2),
            Field::TcpFlags => load(l4, 13, 1),
            Field::TcpDataOff => load(l4, 12, 1) >> 4,
            Field::IcmpType => load(l4, 0, 1),
            Field::IcmpCode => load(l4, 1, 1),
            Field::Raw { offset, len } => load(data, usize::from(offset), usize::from(len)),
            Field::InPort | Field::Paint | Field::DstIpAnno | Field::FixIpSrc => 0,
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
            if !crate::basic::etherrewrite::rewrite_at_mac(&mut q, src, dst) {
                return runtime(p);
            }
        }
    }
    for e in &case.effects {
        apply_effect(e, &mut p, model.ip_at);
    }
    Applied {
        outcome: case.outcome.clone(),
        packet: p,
        stats: case.stats.clone(),
        bytes: case.byte_stats.iter().map(|n| (*n, len)).collect(),
    }
}

/// Where a stored field's bits are counted from.
#[derive(Clone, Copy)]
enum Base {
    /// The start of the data.
    Data,
    /// The IPv4 header at the model's anchor.
    Ip,
    /// The transport header: the IPv4 header + IHL × 4.
    L4,
}

/// Where a field is stored in the packet bytes: (base, byte offset, bytes, bit shift of the
/// field's lowest bit within those bytes read big-endian); `None` for annotations and
/// computed fields.
fn place(f: Field) -> Option<(Base, usize, usize, u32)> {
    Some(match f {
        Field::EthDst => (Base::Data, 0, 6, 0),
        Field::EthSrc => (Base::Data, 6, 6, 0),
        Field::EtherType => (Base::Data, 12, 2, 0),
        Field::VlanId => (Base::Data, 14, 2, 0),
        Field::Raw { offset, len } => (
            Base::Data,
            usize::from(offset),
            usize::from(len.clamp(1, space::MAX_RAW_LEN)),
            0,
        ),
        Field::IpVersion => (Base::Ip, 0, 1, 4),
        Field::IpIhl => (Base::Ip, 0, 1, 0),
        Field::IpTos => (Base::Ip, 1, 1, 0),
        Field::IpLen => (Base::Ip, 2, 2, 0),
        Field::IpId => (Base::Ip, 4, 2, 0),
        Field::IpFlags => (Base::Ip, 6, 2, 13),
        Field::IpFragOffset => (Base::Ip, 6, 2, 0),
        Field::IpTtl => (Base::Ip, 8, 1, 0),
        Field::IpProto => (Base::Ip, 9, 1, 0),
        Field::IpSrc => (Base::Ip, 12, 4, 0),
        Field::IpDst => (Base::Ip, 16, 4, 0),
        Field::SrcPort => (Base::L4, 0, 2, 0),
        Field::IcmpType => (Base::L4, 0, 1, 0),
        Field::DstPort => (Base::L4, 2, 2, 0),
        Field::IcmpCode => (Base::L4, 1, 1, 0),
        Field::TcpFlags => (Base::L4, 13, 1, 0),
        Field::TcpDataOff => (Base::L4, 12, 1, 4),
        _ => return None,
    })
}

/// The IPv4 header's offset into the data, if the anchor is inside the data.
fn ip_start(p: &packet::Packet, ip_at: IpAnchor) -> Option<usize> {
    ip_offset(p, ip_at).filter(|&o| o <= p.len())
}

/// Writes `op` into field `f` of `p` (see [`apply`]).
fn write(p: &mut packet::Packet, ip_at: IpAnchor, f: Field, op: &Op) {
    let width = f.width();
    let Some((base, off, n, shift)) = place(f) else {
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
    let start = match base {
        Base::Data => 0,
        Base::Ip | Base::L4 => {
            let Some(ip) = ip_start(p, ip_at) else {
                return;
            };
            match base {
                Base::L4 => match p.data().get(ip) {
                    Some(b) => ip + usize::from(b & 0x0f) * 4,
                    None => return,
                },
                _ => ip,
            }
        }
    };
    let Some(bytes) = start
        .checked_add(off)
        .and_then(|s| p.data_mut().get_mut(s..s + n))
    else {
        return;
    };
    let old = bytes.iter().fold(0u128, |a, b| (a << 8) | u128::from(*b));
    let max = space::max_value(width);
    let Some(v) = op.apply((old >> shift) & max, width) else {
        return;
    };
    let new = (old & !(max << shift)) | (v << shift);
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (new >> (8 * (n - 1 - i))) as u8;
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

/// Applies one effect to `p` (see [`apply`]).
fn apply_effect(e: &Effect, p: &mut packet::Packet, ip_at: IpAnchor) {
    match e {
        Effect::Write(f, op) => write(p, ip_at, *f, op),
        Effect::DecTtl => {
            let Some(ip) = ip_start(p, ip_at) else {
                return;
            };
            if let Some(h) = p.data_mut().get_mut(ip..ip + 12) {
                h[8] = h[8].wrapping_sub(1);
                let sum = u32::from(!u16::from_be_bytes([h[10], h[11]])) + 0xFEFF;
                let c = !((sum + (sum >> 16)) as u16);
                h[10..12].copy_from_slice(&c.to_be_bytes());
            }
        }
        Effect::Pull(n) => {
            let n = usize::from(*n).min(p.len());
            p.pull(n);
        }
        Effect::Unpull(n) => p.unpull(usize::from(*n)),
        Effect::EtherEncap {
            ethertype,
            src,
            dst,
        } => {
            let h = p.push(14);
            h[..6].copy_from_slice(dst);
            h[6..12].copy_from_slice(src);
            h[12..].copy_from_slice(&ethertype.to_be_bytes());
            p.set_mac_header(0);
            p.set_network_header(14);
        }
        Effect::EtherRewrite { src, dst } => {
            crate::basic::etherrewrite::rewrite_at_mac(p, src, dst);
        }
        Effect::MarkMac => p.set_mac_header(0),
        Effect::PacketTypeFromEth => {
            p.meta.packet_type = packet::PacketType::from_dst_mac(p.data());
        }
        Effect::MarkIp => {
            let len = p.len();
            let Some(off) = ip_offset(p, ip_at).map(|o| o.min(len)) else {
                return;
            };
            let hl = p.data().get(off).map_or(0, |b| usize::from(b & 0x0f) * 4);
            p.set_network_header(off);
            p.set_transport_header((off + hl).min(len));
        }
        Effect::TrimToIpLen => {
            if let Some(ip) = ip_start(p, ip_at) {
                let total = load(p.data(), ip + 2, 2) as usize;
                p.truncate(ip + total);
            }
        }
        Effect::DstAnnoFromIpDst => {
            let dst = point_of(p, ip_at).get(Field::IpDst);
            p.meta.dst_ip = std::net::Ipv4Addr::from(dst as u32);
        }
        Effect::SetIpChecksum => {
            let Some(ip) = ip_start(p, ip_at) else {
                return;
            };
            let h = &mut p.data_mut()[ip..];
            let hl = h.first().map_or(0, |b| usize::from(b & 0x0f) * 4);
            if hl >= 20 && hl <= h.len() {
                h[10..12].copy_from_slice(&[0, 0]);
                let c = wire::checksum::data(&h[..hl]);
                h[10..12].copy_from_slice(&c.to_be_bytes());
            }
        }
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
