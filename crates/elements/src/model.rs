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
}

impl Case {
    /// A case with no effects and no counters.
    pub fn new(filter: Filter, outcome: Outcome) -> Case {
        Case {
            filter,
            effects: Vec::new(),
            outcome,
            stats: Vec::new(),
        }
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
pub fn load(data: &[u8], off: usize, len: usize) -> u128 {
    match data.get(off..off + len) {
        Some(b) => b.iter().fold(0u128, |acc, x| (acc << 8) | u128::from(*x)),
        None => 0,
    }
}

/// The packet-type annotation value of a [`packet::PacketType`] (its declaration order).
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
    let data = p.data();
    let mut pt = PacketPoint::new();
    pt.set(Field::InPort, u128::from(p.meta.ingress));
    pt.set(Field::FrameLen, data.len().min(0xffff) as u128);
    pt.set(Field::EthDst, load(data, 0, 6));
    pt.set(Field::EthSrc, load(data, 6, 6));
    let et = load(data, 12, 2);
    pt.set(Field::EtherType, et);
    if et == 0x8100 {
        pt.set(Field::HasVlan, 1);
        pt.set(Field::VlanId, load(data, 14, 2) & 0xfff);
    }
    pt.set(Field::Paint, u128::from(p.meta.paint));
    pt.set(Field::DstIpAnno, u128::from(u32::from(p.meta.dst_ip)));
    pt.set(Field::PacketType, packet_type_value(p.meta.packet_type));
    if let Some(ip) = ip_offset(p, ip_at).and_then(|o| data.get(o..)) {
        ip_fields(ip, &mut pt);
    }
    pt
}

/// Sets the IPv4 and transport fields of `pt` from `ip`, the bytes from the IPv4 header to
/// the end of the data.
pub fn ip_fields(ip: &[u8], pt: &mut PacketPoint) {
    let avail = ip.len();
    pt.set(Field::IpAvail, avail.min(0xffff) as u128);
    if avail == 0 {
        return;
    }
    let b0 = ip[0];
    let ihl = usize::from(b0 & 0x0f);
    let hl = ihl * 4;
    pt.set(Field::IpVersion, u128::from(b0 >> 4));
    pt.set(Field::IpIhl, ihl as u128);
    pt.set(Field::IpOptions, u128::from(ihl > 5));
    pt.set(Field::IpTos, load(ip, 1, 1));
    let len = load(ip, 2, 2);
    pt.set(Field::IpLen, len);
    pt.set(Field::IpId, load(ip, 4, 2));
    let ff = load(ip, 6, 2);
    pt.set(Field::IpFlags, ff >> 13);
    pt.set(Field::IpFragOffset, ff & 0x1fff);
    pt.set(Field::IpTtl, load(ip, 8, 1));
    pt.set(Field::IpProto, load(ip, 9, 1));
    let ck_ok = hl >= 20 && hl <= avail && wire::checksum::data(&ip[..hl]) == 0;
    pt.set(Field::IpChecksumOk, u128::from(ck_ok));
    pt.set(Field::IpSrc, load(ip, 12, 4));
    pt.set(Field::IpDst, load(ip, 16, 4));
    let len = len as usize;
    pt.set(Field::IpLenOk, u128::from(len >= hl && len <= avail));
    let l4 = ip.get(hl..).unwrap_or(&[]);
    pt.set(Field::L4Avail, l4.len().min(0xffff) as u128);
    pt.set(Field::SrcPort, load(l4, 0, 2));
    pt.set(Field::DstPort, load(l4, 2, 2));
    pt.set(Field::TcpFlags, load(l4, 13, 1));
    pt.set(Field::TcpDataOff, load(l4, 12, 1) >> 4);
    pt.set(Field::L4Len, len.saturating_sub(hl) as u128);
    pt.set(Field::IcmpType, load(l4, 0, 1));
    pt.set(Field::IcmpCode, load(l4, 1, 1));
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
