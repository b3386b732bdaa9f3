//! Test packets built from the headers' [`Repr`](crate::ipv4::Repr)s: one builder for the
//! Ethernet/IPv4/TCP/UDP/ICMP frames the tests of every crate need (ICMP errors quoting a
//! datagram: [`Frame::icmp_error`] and [`quote`]), one for Ethernet/ARP frames ([`Arp`]), one
//! for NSH-encapsulated frames over Ethernet or VXLAN-GPE ([`Nsh`], [`Gpe`]), and
//! [`ethernet`] for any payload behind a VLAN tag stack,
//! with correct checksums by default and ways to break them (a wrong or zero checksum, a
//! short frame, a lying length, odd ARP types) for the negative tests. `fusebox explain
//! --packet` builds its sample frame with it too.
//!
//! ```
//! use wire::build::{Frame, Sum};
//! let syn = Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80)
//!     .flags(wire::tcp::flags::SYN)
//!     .payload(b"hello")
//!     .ttl(17)
//!     .build();
//! assert_eq!(syn.len(), 14 + 20 + 20 + 5);
//! let bad = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 53, 53).ip_sum(Sum::Wrong).build();
//! assert_ne!(wire::checksum::data(&bad[14..34]), 0);
//! ```
//!
//! Defaults: Ethernet destination `02:00:00:00:00:01`, source `02:00:00:00:00:02`,
//! EtherType IPv4; IPv4 TTL 64, TOS 0, identification 0, no flags, no options; TCP
//! sequence, acknowledgement, flags and window 0; no payload.

use crate::ip::protocol;
use crate::{arp, ethernet, icmpv4, ipv4, nsh, tcp, udp, vlan, vxlan};
use std::net::Ipv4Addr;

/// How a checksum is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sum {
    /// The correct checksum.
    Valid,
    /// Zero (for UDP: "no checksum").
    Zero,
    /// The correct checksum plus one: always wrong.
    Wrong,
}

/// The transport header a [`Frame`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Tcp {
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        window: u16,
    },
    Udp {
        sport: u16,
        dport: u16,
    },
    Icmp {
        msg_type: u8,
        code: u8,
        rest: u32,
    },
    /// No transport header: the payload follows the IPv4 header.
    None,
}

/// An Ethernet/IPv4 frame under construction (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    ether: Option<ethernet::Repr>,
    ip: ipv4::Repr,
    ip_options: Vec<u8>,
    transport: Transport,
    payload: Vec<u8>,
    ip_sum: Sum,
    l4_sum: Sum,
    total_len: Option<u16>,
    truncate: Option<usize>,
    pad_to: usize,
}

impl Frame {
    fn new(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, transport: Transport) -> Frame {
        Frame {
            ether: Some(ethernet::Repr {
                dst_addr: ethernet::Address([2, 0, 0, 0, 0, 1]),
                src_addr: ethernet::Address([2, 0, 0, 0, 0, 2]),
                ethertype: ethernet::ethertype::IPV4,
            }),
            ip: ipv4::Repr {
                src_addr: src,
                dst_addr: dst,
                protocol,
                payload_len: 0,
                ttl: 64,
                tos: 0,
                ident: 0,
                dont_frag: false,
                more_frags: false,
                frag_offset: 0,
            },
            ip_options: Vec::new(),
            transport,
            payload: Vec::new(),
            ip_sum: Sum::Valid,
            l4_sum: Sum::Valid,
            total_len: None,
            truncate: None,
            pad_to: 0,
        }
    }

    /// A TCP segment from `src:sport` to `dst:dport`.
    pub fn tcp(
        src: impl Into<Ipv4Addr>,
        dst: impl Into<Ipv4Addr>,
        sport: u16,
        dport: u16,
    ) -> Frame {
        let t = Transport::Tcp {
            sport,
            dport,
            seq: 0,
            ack: 0,
            flags: 0,
            window: 0,
        };
        Frame::new(src.into(), dst.into(), protocol::TCP, t)
    }

    /// A UDP datagram from `src:sport` to `dst:dport`.
    pub fn udp(
        src: impl Into<Ipv4Addr>,
        dst: impl Into<Ipv4Addr>,
        sport: u16,
        dport: u16,
    ) -> Frame {
        Frame::new(
            src.into(),
            dst.into(),
            protocol::UDP,
            Transport::Udp { sport, dport },
        )
    }

    /// An ICMP message of `msg_type` and `code` (the rest of the header 0).
    pub fn icmp(
        src: impl Into<Ipv4Addr>,
        dst: impl Into<Ipv4Addr>,
        msg_type: u8,
        code: u8,
    ) -> Frame {
        let t = Transport::Icmp {
            msg_type,
            code,
            rest: 0,
        };
        Frame::new(src.into(), dst.into(), protocol::ICMP, t)
    }

    /// An ICMP error (destination unreachable, time exceeded, …: `msg_type`, `code`)
    /// quoting `datagram`, the bytes of the IPv4 packet it answers from its IP header on, as
    /// many as the sender quotes ([`quote`] cuts a packet to RFC 792's header and 8 bytes).
    /// The rest of the ICMP header is 0 (a next-hop MTU or a gateway: [`Frame::icmp_rest`]).
    pub fn icmp_error(
        src: impl Into<Ipv4Addr>,
        dst: impl Into<Ipv4Addr>,
        msg_type: u8,
        code: u8,
        datagram: &[u8],
    ) -> Frame {
        Frame::icmp(src, dst, msg_type, code).payload(datagram)
    }

    /// An IPv4 packet of `protocol` whose payload is the bytes given by [`Frame::payload`]
    /// (no transport header is built).
    pub fn ip(src: impl Into<Ipv4Addr>, dst: impl Into<Ipv4Addr>, protocol: u8) -> Frame {
        Frame::new(src.into(), dst.into(), protocol, Transport::None)
    }

    /// The bytes after the transport header.
    pub fn payload(mut self, payload: &[u8]) -> Frame {
        self.payload = payload.to_vec();
        self
    }

    /// TCP flags (see [`tcp::flags`]); ignored for other transports.
    pub fn flags(mut self, value: u8) -> Frame {
        if let Transport::Tcp { flags, .. } = &mut self.transport {
            *flags = value;
        }
        self
    }

    /// TCP sequence and acknowledgement numbers.
    pub fn seq_ack(mut self, seq_number: u32, ack_number: u32) -> Frame {
        if let Transport::Tcp { seq, ack, .. } = &mut self.transport {
            (*seq, *ack) = (seq_number, ack_number);
        }
        self
    }

    /// TCP window.
    pub fn window(mut self, value: u16) -> Frame {
        if let Transport::Tcp { window, .. } = &mut self.transport {
            *window = value;
        }
        self
    }

    /// The ICMP header's last four bytes (echo identifier and sequence, …).
    pub fn icmp_rest(mut self, value: u32) -> Frame {
        if let Transport::Icmp { rest, .. } = &mut self.transport {
            *rest = value;
        }
        self
    }

    /// IPv4 time to live.
    pub fn ttl(mut self, ttl: u8) -> Frame {
        self.ip.ttl = ttl;
        self
    }

    /// IPv4 type of service byte.
    pub fn tos(mut self, tos: u8) -> Frame {
        self.ip.tos = tos;
        self
    }

    /// IPv4 identification.
    pub fn ident(mut self, ident: u16) -> Frame {
        self.ip.ident = ident;
        self
    }

    /// IPv4 fragmentation: don't fragment, more fragments, offset in bytes (a multiple of 8).
    pub fn fragment(mut self, dont_frag: bool, more_frags: bool, offset: u16) -> Frame {
        (self.ip.dont_frag, self.ip.more_frags, self.ip.frag_offset) =
            (dont_frag, more_frags, offset);
        self
    }

    /// IPv4 options (padded with zeros to a multiple of 4 bytes).
    pub fn ip_options(mut self, options: &[u8]) -> Frame {
        self.ip_options = options.to_vec();
        self.ip_options.resize(options.len().div_ceil(4) * 4, 0);
        self
    }

    /// Ethernet source and destination addresses.
    pub fn macs(mut self, src: [u8; 6], dst: [u8; 6]) -> Frame {
        if let Some(e) = &mut self.ether {
            (e.src_addr, e.dst_addr) = (ethernet::Address(src), ethernet::Address(dst));
        }
        self
    }

    /// No Ethernet header: the bytes start with the IPv4 header.
    pub fn no_ethernet(mut self) -> Frame {
        self.ether = None;
        self
    }

    /// How the IPv4 header checksum is written.
    pub fn ip_sum(mut self, sum: Sum) -> Frame {
        self.ip_sum = sum;
        self
    }

    /// How the TCP, UDP or ICMP checksum is written.
    pub fn l4_sum(mut self, sum: Sum) -> Frame {
        self.l4_sum = sum;
        self
    }

    /// Both checksums zero (frames for elements that do not read them).
    pub fn no_sums(self) -> Frame {
        self.ip_sum(Sum::Zero).l4_sum(Sum::Zero)
    }

    /// An IPv4 total length other than the true one (checksums are computed with it).
    pub fn total_len(mut self, len: u16) -> Frame {
        self.total_len = Some(len);
        self
    }

    /// Zero bytes after the IPv4 packet up to `len` bytes in all (Ethernet padding: not
    /// counted in the IPv4 total length).
    pub fn pad_to(mut self, len: usize) -> Frame {
        self.pad_to = len;
        self
    }

    /// Cuts the built frame to `len` bytes (after the checksums are computed).
    pub fn truncate(mut self, len: usize) -> Frame {
        self.truncate = Some(len);
        self
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let l2 = self.ether.map_or(0, |e| e.header_len());
        let ihl = ipv4::HEADER_LEN + self.ip_options.len();
        let l4 = match self.transport {
            Transport::Tcp { .. } => tcp::HEADER_LEN,
            Transport::Udp { .. } => udp::HEADER_LEN,
            Transport::Icmp { .. } => icmpv4::HEADER_LEN,
            Transport::None => 0,
        };
        let mut buf = vec![0u8; l2 + ihl + l4 + self.payload.len()];
        if let Some(e) = self.ether {
            e.emit(&mut ethernet::Frame::new_unchecked(&mut buf[..l2]));
        }
        buf[l2 + ihl + l4..].copy_from_slice(&self.payload);
        let ip_repr = ipv4::Repr {
            payload_len: ihl - ipv4::HEADER_LEN + l4 + self.payload.len(),
            ..self.ip
        };
        let (src, dst) = (ip_repr.src_addr, ip_repr.dst_addr);
        {
            let seg = &mut buf[l2 + ihl..];
            match self.transport {
                Transport::Tcp {
                    sport,
                    dport,
                    seq,
                    ack,
                    flags,
                    window,
                } => {
                    let mut p = tcp::Packet::new_unchecked(seg);
                    tcp::Repr {
                        src_port: sport,
                        dst_port: dport,
                        seq_number: seq,
                        ack_number: ack,
                        flags,
                        window_len: window,
                        urgent_at: 0,
                        payload_len: self.payload.len(),
                    }
                    .emit(&mut p);
                    p.fill_checksum_v4(src, dst);
                    let c = p.checksum();
                    p.set_checksum(apply(self.l4_sum, c));
                }
                Transport::Udp { sport, dport } => {
                    let mut p = udp::Packet::new_unchecked(seg);
                    udp::Repr {
                        src_port: sport,
                        dst_port: dport,
                        payload_len: self.payload.len(),
                    }
                    .emit(&mut p);
                    p.fill_checksum_v4(src, dst);
                    let c = p.checksum();
                    p.set_checksum(apply(self.l4_sum, c));
                }
                Transport::Icmp {
                    msg_type,
                    code,
                    rest,
                } => {
                    let mut p = icmpv4::Packet::new_unchecked(seg);
                    icmpv4::Repr {
                        msg_type,
                        msg_code: code,
                        rest_of_header: rest,
                        data_len: self.payload.len(),
                    }
                    .emit(&mut p);
                    let c = p.checksum();
                    p.set_checksum(apply(self.l4_sum, c));
                }
                Transport::None => {}
            }
        }
        {
            let mut p = ipv4::Packet::new_unchecked(&mut buf[l2..]);
            ip_repr.emit(&mut p);
            if !self.ip_options.is_empty() {
                p.set_header_len(ihl);
            }
            if let Some(len) = self.total_len {
                p.set_total_len(len);
            }
        }
        buf[l2 + ipv4::HEADER_LEN..l2 + ihl].copy_from_slice(&self.ip_options);
        {
            let mut p = ipv4::Packet::new_unchecked(&mut buf[l2..]);
            p.fill_checksum();
            let c = p.checksum();
            p.set_checksum(apply(self.ip_sum, c));
        }
        if buf.len() < self.pad_to {
            buf.resize(self.pad_to, 0);
        }
        if let Some(n) = self.truncate {
            buf.truncate(n);
        }
        buf
    }
}

/// The checksum to write for `sum`, given the correct one.
fn apply(sum: Sum, correct: u16) -> u16 {
    match sum {
        Sum::Valid => correct,
        Sum::Zero => 0,
        Sum::Wrong => correct.wrapping_add(1),
    }
}

/// An Ethernet frame from `src` to `dst` carrying `payload` as `ethertype`, behind the
/// VLAN tags `tags` (TPID and TCI each, outermost first): for the frames [`Frame`] and
/// [`Arp`] do not build (IPv6, other EtherTypes, tag stacks, arbitrary payloads).
///
/// ```
/// use wire::ethernet::ethertype;
/// let tags = [(ethertype::VLAN, 7)];
/// let f = wire::build::ethernet([0xff; 6], [2, 0, 0, 0, 0, 1], &tags, ethertype::IPV6, &[0x60]);
/// assert_eq!(&f[12..], &[0x81, 0x00, 0x00, 0x07, 0x86, 0xdd, 0x60]);
/// ```
pub fn ethernet(
    dst: [u8; 6],
    src: [u8; 6],
    tags: &[(u16, u16)],
    ethertype: u16,
    payload: &[u8],
) -> Vec<u8> {
    let l2 = ethernet::HEADER_LEN + tags.len() * vlan::HEADER_LEN;
    let mut f = vec![0u8; l2 + payload.len()];
    let outer = tags.first().map_or(ethertype, |t| t.0);
    ethernet::Repr {
        dst_addr: ethernet::Address(dst),
        src_addr: ethernet::Address(src),
        ethertype: outer,
    }
    .emit(&mut ethernet::Frame::new_unchecked(&mut f[..]));
    for (i, &(_, tci)) in tags.iter().enumerate() {
        let at = ethernet::HEADER_LEN + i * vlan::HEADER_LEN;
        let mut tag = vlan::Packet::new_unchecked(&mut f[at..at + vlan::HEADER_LEN]);
        tag.set_tci(tci);
        tag.set_ethertype(tags.get(i + 1).map_or(ethertype, |t| t.0));
    }
    f[l2..].copy_from_slice(payload);
    f
}

/// An NSH-encapsulated frame under construction, as service functions pass them (RFC 8300;
/// the packet formats of `crates/stages/bpf/cbox.h`): the NSH ([`Nsh::header`]) over
/// Ethernet transport ([`Nsh::ethernet`]: outer Ethernet, EtherType 0x894F) or over
/// VXLAN-GPE ([`Nsh::vxlan_gpe`]: outer Ethernet, IPv4, UDP to port 4790, VXLAN-GPE with
/// the P flag and next protocol NSH), carrying an inner frame. Defaults: TTL 63, OAM bit
/// clear, next protocol Ethernet (3). The eBPF stages' fixtures, the interoperability tests
/// (tshark, Open vSwitch) and `fusebox run --nsh`'s tests all build their frames here.
///
/// ```
/// use wire::build::{Frame, Gpe, Nsh};
/// use wire::nsh::Tlv;
/// let inner = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53).build();
/// let md1 = Nsh::md1(0x42, 255, [1, 2, 3, 4]).ethernet([2; 6], [4; 6], &inner);
/// assert_eq!(md1.len(), 14 + 24 + inner.len());
/// assert_eq!(&md1[12..14], &[0x89, 0x4f]);
/// let tlv = Tlv { class: 0x0101, tlv_type: 7, value: &[9, 9, 9] };
/// let md2 = Nsh::md2(0x42, 254, &[tlv]).ttl(9);
/// let gpe = Gpe::new([10, 1, 0, 1], [10, 1, 0, 2], 7);
/// let f = md2.vxlan_gpe(&gpe, &inner);
/// assert_eq!(f.len(), 14 + 20 + 8 + 8 + 16 + inner.len());
/// assert_eq!(wire::nsh::locate(&f).unwrap().inner, 14 + 20 + 8 + 8 + 16);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nsh {
    o_bit: bool,
    ttl: u8,
    next_protocol: u8,
    spi: u32,
    si: u8,
    md1: Option<[u32; 4]>,
    md2: Vec<u8>,
}

impl Nsh {
    /// An MD type 1 NSH on path `spi` (24 bits) at index `si` with the four context headers.
    pub fn md1(spi: u32, si: u8, context: [u32; 4]) -> Nsh {
        Nsh {
            o_bit: false,
            ttl: 63,
            next_protocol: nsh::next_protocol::ETHERNET,
            spi,
            si,
            md1: Some(context),
            md2: Vec::new(),
        }
    }

    /// An MD type 2 NSH on path `spi` at index `si` carrying `tlvs` in order.
    ///
    /// # Panics
    /// If a value is longer than 127 bytes.
    pub fn md2(spi: u32, si: u8, tlvs: &[nsh::Tlv<'_>]) -> Nsh {
        Nsh {
            md1: None,
            md2: nsh::encode_tlvs(tlvs),
            ..Nsh::md1(spi, si, [0; 4])
        }
    }

    /// The TTL (6 bits; 63 by default).
    pub fn ttl(mut self, ttl: u8) -> Nsh {
        self.ttl = ttl;
        self
    }

    /// The OAM bit.
    pub fn oam(mut self, o_bit: bool) -> Nsh {
        self.o_bit = o_bit;
        self
    }

    /// The next protocol (see [`nsh::next_protocol`]; Ethernet by default).
    pub fn next_protocol(mut self, value: u8) -> Nsh {
        self.next_protocol = value;
        self
    }

    /// The NSH's representation.
    pub fn repr(&self) -> nsh::Repr<'_> {
        nsh::Repr {
            o_bit: self.o_bit,
            ttl: self.ttl,
            next_protocol: self.next_protocol,
            spi: self.spi,
            si: self.si,
            metadata: match self.md1 {
                Some(ctx) => nsh::Metadata::Type1(ctx),
                None => nsh::Metadata::Type2(&self.md2),
            },
        }
    }

    /// The NSH followed by `inner`.
    ///
    /// # Panics
    /// If the MD type 2 metadata is longer than [`nsh::MAX_MD2_LEN`].
    pub fn header(&self, inner: &[u8]) -> Vec<u8> {
        let repr = self.repr();
        let mut out = vec![0; repr.header_len() + inner.len()];
        repr.emit(&mut nsh::Packet::new_unchecked(&mut out[..]));
        out[repr.header_len()..].copy_from_slice(inner);
        out
    }

    /// Over Ethernet transport: outer Ethernet from `src` to `dst`, EtherType NSH.
    pub fn ethernet(&self, dst: [u8; 6], src: [u8; 6], inner: &[u8]) -> Vec<u8> {
        ethernet(dst, src, &[], ethernet::ethertype::NSH, &self.header(inner))
    }

    /// Over VXLAN-GPE through `tunnel` (the UDP checksum zero, as RFC 7348 recommends over
    /// IPv4; the IPv4 checksum valid).
    pub fn vxlan_gpe(&self, tunnel: &Gpe, inner: &[u8]) -> Vec<u8> {
        let mut gpe = vec![0; vxlan::HEADER_LEN];
        vxlan::Repr {
            vni: tunnel.vni,
            next_protocol: Some(vxlan::next_protocol::NSH),
        }
        .emit(&mut vxlan::Packet::new_unchecked(&mut gpe[..]));
        gpe.extend_from_slice(&self.header(inner));
        Frame::udp(
            tunnel.src_ip,
            tunnel.dst_ip,
            tunnel.sport,
            vxlan::VXLAN_GPE_PORT,
        )
        .macs(tunnel.src_mac, tunnel.dst_mac)
        .ttl(tunnel.ttl)
        .fragment(tunnel.dont_frag, false, 0)
        .payload(&gpe)
        .l4_sum(Sum::Zero)
        .build()
    }
}

/// A VXLAN-GPE tunnel's outer headers, for [`Nsh::vxlan_gpe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpe {
    /// Outer Ethernet destination (the next hop's MAC); `02:00:00:00:00:01` by default.
    pub dst_mac: [u8; 6],
    /// Outer Ethernet source; `02:00:00:00:00:02` by default.
    pub src_mac: [u8; 6],
    /// Outer IPv4 source (this tunnel end).
    pub src_ip: Ipv4Addr,
    /// Outer IPv4 destination (the tunnel endpoint).
    pub dst_ip: Ipv4Addr,
    /// UDP source port; 4790 by default.
    pub sport: u16,
    /// Outer IPv4 TTL; 64 by default.
    pub ttl: u8,
    /// The outer IPv4 header's don't-fragment flag; clear by default.
    pub dont_frag: bool,
    /// The 24-bit VXLAN network identifier.
    pub vni: u32,
}

impl Gpe {
    /// A tunnel from `src_ip` to `dst_ip` on `vni`, with the defaults above.
    pub fn new(src_ip: impl Into<Ipv4Addr>, dst_ip: impl Into<Ipv4Addr>, vni: u32) -> Gpe {
        Gpe {
            dst_mac: [2, 0, 0, 0, 0, 1],
            src_mac: [2, 0, 0, 0, 0, 2],
            src_ip: src_ip.into(),
            dst_ip: dst_ip.into(),
            sport: vxlan::VXLAN_GPE_PORT,
            ttl: 64,
            dont_frag: false,
            vni,
        }
    }
}

/// The RFC 792 quote of an IPv4 packet in an ICMP error: its header (options included) and
/// the first 8 bytes after it, or fewer when the packet is shorter. Bytes that are not an
/// IPv4 header are quoted whole up to 28 bytes.
pub fn quote(ip: &[u8]) -> &[u8] {
    let hl = ip
        .first()
        .map_or(ipv4::HEADER_LEN, |b| usize::from(b & 0x0f) * 4)
        .max(ipv4::HEADER_LEN);
    &ip[..ip.len().min(hl + 8)]
}

/// An Ethernet/ARP frame under construction: a request or a reply with correct header
/// fields by default, and ways to break them (EtherType, hardware or protocol type) or pad
/// the frame for the negative tests.
///
/// ```
/// use wire::build::Arp;
/// let who_has = Arp::request([2, 0, 0, 0, 0, 9], [10, 0, 0, 9], [10, 0, 0, 1]).build();
/// assert_eq!(who_has.len(), 42);
/// assert_eq!(&who_has[..6], &[0xff; 6]);
/// let padded = Arp::request([2, 0, 0, 0, 0, 9], [10, 0, 0, 9], [10, 0, 0, 1])
///     .pad_to(60)
///     .build();
/// assert_eq!(&padded[..42], &who_has[..]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arp {
    eth_dst: [u8; 6],
    eth_src: [u8; 6],
    repr: arp::Repr,
    ethertype: u16,
    hardware_type: u16,
    protocol_type: u16,
    pad_to: usize,
}

impl Arp {
    fn new(eth_dst: [u8; 6], eth_src: [u8; 6], repr: arp::Repr) -> Arp {
        Arp {
            eth_dst,
            eth_src,
            repr,
            ethertype: ethernet::ethertype::ARP,
            hardware_type: arp::HARDWARE_ETHERNET,
            protocol_type: ethernet::ethertype::IPV4,
            pad_to: 0,
        }
    }

    /// Who has `tpa`, tell `spa` (at `sha`): broadcast from `sha`, target hardware address
    /// zero.
    pub fn request(sha: [u8; 6], spa: impl Into<Ipv4Addr>, tpa: impl Into<Ipv4Addr>) -> Arp {
        let repr = arp::Repr {
            operation: arp::operation::REQUEST,
            sender_hardware_addr: ethernet::Address(sha),
            sender_protocol_addr: spa.into(),
            target_hardware_addr: ethernet::Address([0; 6]),
            target_protocol_addr: tpa.into(),
        };
        Arp::new([0xff; 6], sha, repr)
    }

    /// `spa` is at `sha`, told to `tpa` at `tha`: sent from `sha` to `tha`.
    pub fn reply(
        sha: [u8; 6],
        spa: impl Into<Ipv4Addr>,
        tha: [u8; 6],
        tpa: impl Into<Ipv4Addr>,
    ) -> Arp {
        let repr = arp::Repr {
            operation: arp::operation::REPLY,
            sender_hardware_addr: ethernet::Address(sha),
            sender_protocol_addr: spa.into(),
            target_hardware_addr: ethernet::Address(tha),
            target_protocol_addr: tpa.into(),
        };
        Arp::new(tha, sha, repr)
    }

    /// The ARP operation (see [`arp::operation`]), any value.
    pub fn operation(mut self, op: u16) -> Arp {
        self.repr.operation = op;
        self
    }

    /// Ethernet source and destination addresses.
    pub fn macs(mut self, src: [u8; 6], dst: [u8; 6]) -> Arp {
        (self.eth_src, self.eth_dst) = (src, dst);
        self
    }

    /// The Ethernet type (ARP by default).
    pub fn ethertype(mut self, value: u16) -> Arp {
        self.ethertype = value;
        self
    }

    /// The ARP hardware type (Ethernet by default).
    pub fn hardware_type(mut self, value: u16) -> Arp {
        self.hardware_type = value;
        self
    }

    /// The ARP protocol type (IPv4 by default).
    pub fn protocol_type(mut self, value: u16) -> Arp {
        self.protocol_type = value;
        self
    }

    /// Zero bytes after the ARP packet up to `len` bytes in all (Ethernet padding).
    pub fn pad_to(mut self, len: usize) -> Arp {
        self.pad_to = len;
        self
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut f = self
            .repr
            .frame(
                ethernet::Address(self.eth_dst),
                ethernet::Address(self.eth_src),
            )
            .to_vec();
        ethernet::Frame::new_unchecked(&mut f[..]).set_ethertype(self.ethertype);
        let mut a = arp::Packet::new_unchecked(&mut f[ethernet::HEADER_LEN..]);
        a.set_hardware_type(self.hardware_type);
        a.set_protocol_type(self.protocol_type);
        if f.len() < self.pad_to {
            f.resize(self.pad_to, 0);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum;

    #[test]
    fn valid_frames_parse_and_verify() {
        let f = Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80)
            .flags(tcp::flags::SYN)
            .payload(b"abc")
            .build();
        let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.total_len(), 43);
        assert_eq!(ip.ttl(), 64);
        let t = tcp::Packet::new_checked(ip.payload()).unwrap();
        assert!(t.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        assert_eq!(
            (t.src_port(), t.dst_port(), t.flags()),
            (1000, 80, tcp::flags::SYN)
        );
        let u = Frame::udp([1, 2, 3, 4], [5, 6, 7, 8], 53, 5353)
            .no_ethernet()
            .build();
        let ip = ipv4::Packet::new_checked(&u[..]).unwrap();
        let d = udp::Packet::new_checked(ip.payload()).unwrap();
        assert!(d.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        let i = Frame::icmp([1, 2, 3, 4], [5, 6, 7, 8], 8, 0)
            .icmp_rest(0x1234_0001)
            .build();
        assert_eq!(checksum::data(&i[34..]), 0);
    }

    #[test]
    fn options_and_corruptions() {
        let f = Frame::udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)
            .ip_options(&[0x94, 0x04, 0, 0])
            .build();
        assert_eq!(f[14], 0x46);
        assert_eq!(checksum::data(&f[14..38]), 0);
        let bad = Frame::udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)
            .ip_sum(Sum::Wrong)
            .build();
        assert_ne!(checksum::data(&bad[14..34]), 0);
        let zero = Frame::udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)
            .no_sums()
            .build();
        assert_eq!(&zero[24..26], &[0, 0]);
        assert_eq!(&zero[40..42], &[0, 0]);
        let short = Frame::tcp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)
            .truncate(40)
            .build();
        assert_eq!(short.len(), 40);
        let long = Frame::udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)
            .total_len(100)
            .build();
        assert_eq!(u16::from_be_bytes([long[16], long[17]]), 100);
        assert_eq!(checksum::data(&long[14..34]), 0);
    }

    #[test]
    fn icmp_errors_quote_the_datagram() {
        let orig = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53)
            .payload(&[7; 30])
            .no_ethernet()
            .build();
        assert_eq!(quote(&orig), &orig[..28]);
        assert_eq!(quote(&orig[..25]), &orig[..25]);
        let with_options = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2)
            .ip_options(&[1, 1, 1, 1])
            .payload(&[7; 30])
            .no_ethernet()
            .build();
        assert_eq!(quote(&with_options).len(), 32);
        let e = Frame::icmp_error(
            [10, 0, 0, 254],
            [10, 0, 0, 1],
            icmpv4::msg_type::TIME_EXCEEDED,
            0,
            quote(&orig),
        )
        .build();
        assert_eq!(e.len(), 14 + 20 + 8 + 28);
        let ip = ipv4::Packet::new_checked(&e[14..]).unwrap();
        assert!(ip.verify_checksum());
        let i = icmpv4::Packet::new_checked(ip.payload()).unwrap();
        assert!(i.verify_checksum());
        assert_eq!((i.msg_type(), i.msg_code()), (11, 0));
        assert_eq!(i.data(), &orig[..28]);
    }

    #[test]
    fn arp_requests_and_replies() {
        let req = Arp::request([2, 0, 0, 0, 0, 9], [10, 0, 0, 9], [10, 0, 0, 1]).build();
        let r = arp::Repr::parse_frame(&req).unwrap();
        assert_eq!(r.operation, arp::operation::REQUEST);
        assert_eq!(
            &req[..12],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 9]
        );
        assert_eq!(r.target_hardware_addr, ethernet::Address([0; 6]));
        assert_eq!(r.target_protocol_addr, Ipv4Addr::new(10, 0, 0, 1));
        let rep = Arp::reply(
            [2, 0, 0, 0, 0, 1],
            [10, 0, 0, 1],
            [2, 0, 0, 0, 0, 9],
            [10, 0, 0, 9],
        )
        .build();
        let r = arp::Repr::parse_frame(&rep).unwrap();
        assert_eq!(r.operation, arp::operation::REPLY);
        assert_eq!(&rep[..12], &[2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 1]);
        assert_eq!(r.sender_protocol_addr, Ipv4Addr::new(10, 0, 0, 1));
        let odd = Arp::request([2, 0, 0, 0, 0, 9], [10, 0, 0, 9], [10, 0, 0, 1])
            .ethertype(0x0800)
            .hardware_type(6)
            .protocol_type(0x86dd)
            .operation(9)
            .macs([1; 6], [3; 6])
            .pad_to(60)
            .build();
        assert_eq!(odd.len(), 60);
        assert_eq!(
            &odd[..22],
            &[3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 8, 0, 0, 6, 0x86, 0xdd, 6, 4, 0, 9]
        );
        assert_eq!(arp::Repr::parse_frame(&odd), None);
    }

    #[test]
    fn nsh_frames_over_both_transports() {
        let inner = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53)
            .payload(b"q")
            .build();
        let md1 = Nsh::md1(0x12_3456, 9, [1, 2, 3, 0xdead_beef]);
        let f = md1.ethernet([1; 6], [2; 6], &inner);
        assert_eq!(
            &f[..14],
            &[&[1u8; 6][..], &[2; 6], &[0x89, 0x4f]].concat()[..]
        );
        let p = nsh::Packet::new_checked(&f[14..]).unwrap();
        let r = nsh::Repr::parse(&p).unwrap();
        assert_eq!(r, md1.repr());
        assert_eq!((r.ttl, r.spi, r.si, r.next_protocol), (63, 0x12_3456, 9, 3));
        assert_eq!(p.payload(), &inner[..]);
        let at = nsh::locate(&f).unwrap();
        assert_eq!(
            (at.transport, at.nsh, at.inner),
            (nsh::Transport::Ethernet, 14, 38)
        );

        let tlvs = [
            nsh::Tlv {
                class: 0x0101,
                tlv_type: 1,
                value: &[0xde, 0xad, 0xbe, 0xef],
            },
            nsh::Tlv {
                class: 0xfff6,
                tlv_type: 0x22,
                value: &[1, 2, 3, 4, 5],
            },
        ];
        let md2 = Nsh::md2(7, 255, &tlvs).ttl(5).oam(true);
        let mut gpe = Gpe::new([192, 168, 0, 1], [192, 168, 0, 2], 0xab_cdef);
        gpe.sport = 40000;
        let f = md2.vxlan_gpe(&gpe, &inner);
        let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert!(!ip.dont_frag());
        assert_eq!(ip.protocol(), crate::ip::protocol::UDP);
        gpe.dont_frag = true;
        let df = md2.vxlan_gpe(&gpe, &inner);
        let dip = ipv4::Packet::new_checked(&df[14..]).unwrap();
        assert!(dip.dont_frag() && dip.verify_checksum());
        assert_eq!(
            (&df[..20], &df[22..24], &df[26..]),
            (&f[..20], &f[22..24], &f[26..])
        );
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.checksum()), (40000, 4790, 0));
        let g = vxlan::Packet::new_checked(u.payload()).unwrap();
        let gr = vxlan::Repr::parse(&g).unwrap();
        assert_eq!((gr.vni, gr.next_protocol), (0xab_cdef, Some(4)));
        let p = nsh::Packet::new_checked(g.payload()).unwrap();
        assert!(p.o_bit());
        assert_eq!((p.ttl(), p.md_type(), p.length()), (5, 2, 7));
        assert_eq!(p.tlvs().map(Result::unwrap).collect::<Vec<_>>(), tlvs);
        assert_eq!(p.payload(), &inner[..]);
        let at = nsh::locate(&f).unwrap();
        assert_eq!(at.transport, nsh::Transport::VxlanGpe);
        assert_eq!(&f[at.inner..], &inner[..]);
        // Plain frames, and NSH cut short, are not NSH packets.
        assert_eq!(nsh::locate(&inner), None);
        assert_eq!(nsh::locate(&f[..at.inner - 1]), None);
    }

    #[test]
    fn ethernet_frames_with_tag_stacks() {
        let f = ethernet([1; 6], [2; 6], &[], 0x0806, &[9, 9]);
        assert_eq!(f, [&[1u8; 6][..], &[2; 6], &[8, 6, 9, 9]].concat());
        let q = ethernet(
            [1; 6],
            [2; 6],
            &[(0x88a8, 0x6064), (0x8100, 0x10c8)],
            0x0800,
            &[0x45],
        );
        assert_eq!(
            &q[12..],
            &[0x88, 0xa8, 0x60, 0x64, 0x81, 0x00, 0x10, 0xc8, 0x08, 0x00, 0x45]
        );
        let l2 = vlan::walk(&q).unwrap();
        assert_eq!((l2.tags, l2.ethertype, l2.l3_offset), (2, 0x0800, 22));
    }
}
