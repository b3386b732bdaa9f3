//! The TCP segment of a packet: 5-tuple, sequence and acknowledgement numbers, flags and
//! payload, read through `wire`'s views.

use packet::{FlowKey, Packet};
use wire::ethernet::ethertype;
use wire::ip::protocol::TCP;
use wire::{ipv4, ipv6, tcp};

/// The TCP facts of one packet the bytestream operators need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    /// The 5-tuple, in the packet's direction.
    pub flow: FlowKey,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number (meaningful when [`TcpSegment::ack_flag`]).
    pub ack: u32,
    /// The flag byte (`wire::tcp::flags`).
    pub flags: u8,
    /// The payload: up to the IP packet's length (link padding excluded), or up to the end
    /// of the bytes for an IPv4 packet shorter than its total length says.
    pub payload: &'a [u8],
}

impl<'a> TcpSegment<'a> {
    /// The segment of a packet: from its network header annotation when it is set (an
    /// upstream parse, or a decapsulation, put it there), else from the start of its data
    /// as an Ethernet frame (VLAN tags walked). `None` for anything but an unfragmented (or
    /// atomic-fragment) IPv4 or IPv6 packet carrying a whole TCP header. An IPv4 packet cut
    /// short of its total length gives the payload bytes it has (an IPv6 one is not taken).
    pub fn parse(pkt: &'a Packet) -> Option<TcpSegment<'a>> {
        match pkt.network_header() {
            Some(ip) => Self::parse_ip(ip),
            None => Self::parse_ethernet(pkt.data()),
        }
    }

    /// The segment of an Ethernet frame (VLAN tags walked).
    pub fn parse_ethernet(frame: &'a [u8]) -> Option<TcpSegment<'a>> {
        let l2 = wire::vlan::walk(frame).ok()?;
        match l2.ethertype {
            ethertype::IPV4 | ethertype::IPV6 => Self::parse_ip(frame.get(l2.l3_offset..)?),
            _ => None,
        }
    }

    /// The segment of an IP packet (version from the first nibble).
    pub fn parse_ip(ip: &'a [u8]) -> Option<TcpSegment<'a>> {
        match ip.first()? >> 4 {
            4 => {
                // The header must be whole; the payload ends at the total length, or at the
                // end of the bytes when the packet is shorter than it says (a capture cut
                // by its snap length): what is there is taken.
                if ip.len() < ipv4::HEADER_LEN {
                    return None;
                }
                let p = ipv4::Packet::new_unchecked(ip);
                let hl = p.header_len();
                let tl = usize::from(p.total_len());
                if p.version() != 4 || hl < ipv4::HEADER_LEN || tl < hl || hl > ip.len() {
                    return None;
                }
                if p.protocol() != TCP || p.is_fragment() {
                    return None;
                }
                let seg = &ip[hl..tl.min(ip.len())];
                Self::parse_tcp(seg, p.src_addr().into(), p.dst_addr().into())
            }
            6 => {
                let p = ipv6::Packet::new_checked(ip).ok()?;
                let (proto, off, frag) = ipv6::walk_extension_headers(ip).ok()?;
                // An atomic fragment (offset 0, no more fragments) is a whole packet.
                if proto != TCP || frag.is_some_and(|f| f.offset != 0 || f.more_frags) {
                    return None;
                }
                let end = ipv6::HEADER_LEN + usize::from(p.payload_len());
                let seg = ip.get(off..end)?;
                Self::parse_tcp(seg, p.src_addr().into(), p.dst_addr().into())
            }
            _ => None,
        }
    }

    fn parse_tcp(
        seg: &'a [u8],
        src: std::net::IpAddr,
        dst: std::net::IpAddr,
    ) -> Option<TcpSegment<'a>> {
        let t = tcp::Packet::new_checked(seg).ok()?;
        Some(TcpSegment {
            flow: FlowKey {
                protocol: TCP,
                src,
                src_port: t.src_port(),
                dst,
                dst_port: t.dst_port(),
            },
            seq: t.seq_number(),
            ack: t.ack_number(),
            flags: t.flags(),
            payload: seg.get(t.header_len()..)?,
        })
    }

    /// SYN set.
    pub fn syn(&self) -> bool {
        self.flags & tcp::flags::SYN != 0
    }

    /// FIN set.
    pub fn fin(&self) -> bool {
        self.flags & tcp::flags::FIN != 0
    }

    /// RST set.
    pub fn rst(&self) -> bool {
        self.flags & tcp::flags::RST != 0
    }

    /// ACK set.
    pub fn ack_flag(&self) -> bool {
        self.flags & tcp::flags::ACK != 0
    }
}
