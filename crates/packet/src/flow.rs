//! The flow key: one 5-tuple type, one IPv4 header reader, and the rules by which the
//! readers of a packet's flow differ.
//!
//! Every place that needs a packet's flow reads it here:
//!
//! * [`FlowKey`] is the 5-tuple (protocol, source, source port, destination, destination
//!   port), over any address type: [`FlowKey<IpAddr>`](FlowKey) for captures, ports and RSS
//!   (IPv4 and IPv6), [`Ipv4FlowKey`] for the IPv4-only elements (Maglev, Monitor). It orders
//!   by protocol, then source, then destination, and prints as `proto P S:SP > D:DP`.
//! * [`Ipv4Flow`] is the one reader of an IPv4 header for flow purposes: a checked view
//!   ([`Ipv4Flow::parse`]; [`Ipv4Flow::parse_trimmed`] for the packet cut at its IPv4 total
//!   length) with the header length, fragment, transport length and TCP facts the
//!   rewriters need, and [`Ipv4Flow::table_key`] for the fast path's flow table, which reads
//!   any bytes (missing ones as 0) without checking them.
//! * [`Ports`] names how each reader takes the ports: the rewriters' raw words after the
//!   header, the Maglev/Monitor rule (TCP and UDP first fragments), or the transport rule
//!   of captures and RSS (TCP, UDP, SCTP; the ICMP echo identifier as both ports).
//! * The one flow hash is [`FlowKey::rss_hash`] (the symmetric Toeplitz hash of
//!   [`crate::rss`]), equal for both directions of a flow: the hash live workers use to
//!   keep a flow on one core. Hash tables hash the key with their own hasher.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::icmpv4::msg_type;
use wire::ip::protocol::{ICMP, SCTP, TCP, UDP};

/// A transport flow: protocol, addresses and ports (0 when the protocol has none, see
/// [`Ports`]). `A` is the address type: [`IpAddr`] by default, [`Ipv4Addr`] for
/// [`Ipv4FlowKey`]. Orders by protocol, source (address, port), destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey<A = IpAddr> {
    /// IP protocol number.
    pub protocol: u8,
    /// Source address.
    pub src: A,
    /// Source port (TCP/UDP), ICMP echo identifier, or 0.
    pub src_port: u16,
    /// Destination address.
    pub dst: A,
    /// Destination port (TCP/UDP), ICMP echo identifier, or 0.
    pub dst_port: u16,
}

/// The flow key of an IPv4 packet.
pub type Ipv4FlowKey = FlowKey<Ipv4Addr>;

impl<A: Copy> FlowKey<A> {
    /// The key of the reverse direction.
    #[inline]
    pub fn reversed(&self) -> FlowKey<A> {
        FlowKey {
            protocol: self.protocol,
            src: self.dst,
            src_port: self.dst_port,
            dst: self.src,
            dst_port: self.src_port,
        }
    }
}

impl<A: fmt::Display> fmt::Display for FlowKey<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "proto {} {}:{} > {}:{}",
            self.protocol, self.src, self.src_port, self.dst, self.dst_port
        )
    }
}

impl From<Ipv4FlowKey> for FlowKey {
    #[inline]
    fn from(k: Ipv4FlowKey) -> FlowKey {
        FlowKey {
            protocol: k.protocol,
            src: k.src.into(),
            src_port: k.src_port,
            dst: k.dst.into(),
            dst_port: k.dst_port,
        }
    }
}

impl Ipv4FlowKey {
    /// The symmetric RSS hash of the flow (see [`FlowKey::rss_hash`]).
    #[inline]
    pub fn rss_hash(&self) -> u32 {
        crate::rss::symmetric_rss(&FlowKey::from(*self))
    }
}

/// How a reader takes a packet's ports. Readers differ on purpose, and each keeps its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ports {
    /// The two 16-bit words after the IP header whatever the protocol and fragment, each 0
    /// when the data ends before it: what the rewriters (`IPRewriter`, `MazuNAT`) read.
    Raw,
    /// TCP and UDP ports of first fragments with at least 4 transport bytes, else 0: what
    /// Maglev and Monitor read.
    TcpUdp,
    /// TCP, UDP and SCTP ports, and the ICMP echo/information identifier as both ports, of
    /// first fragments; else 0: the key of captures and RSS.
    Transport,
}

/// The ports of transport bytes `t` under [`Ports::Transport`] (`first`: the packet is not
/// a later fragment).
#[inline]
fn transport_ports(protocol: u8, t: &[u8], first: bool) -> (u16, u16) {
    if !first {
        return (0, 0);
    }
    match protocol {
        TCP | UDP | SCTP if t.len() >= 4 => (
            u16::from_be_bytes([t[0], t[1]]),
            u16::from_be_bytes([t[2], t[3]]),
        ),
        // ICMP echo / reply and the information messages: the identifier stands for both.
        ICMP if t.len() >= 6 && msg_type::has_ident(t[0]) => {
            let id = u16::from_be_bytes([t[4], t[5]]);
            (id, id)
        }
        _ => (0, 0),
    }
}

/// The 16-bit word at `off`, or `None` when the data ends before it.
#[inline]
fn word(d: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]))
}

/// An IPv4 header as flow readers see it: the bytes from the IP header to the end of the
/// data, checked to hold the fixed header and its options (`20 <= header length <= data`).
/// The version is not checked (the rewriters do not look at it; see
/// [`Ipv4Flow::version`]).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Flow<'a> {
    ip: &'a [u8],
    hl: usize,
}

impl<'a> Ipv4Flow<'a> {
    /// The view of `ip`, or `None` when it is shorter than 20 bytes or than its header
    /// length, or the header length is below 20.
    #[inline]
    pub fn parse(ip: &'a [u8]) -> Option<Ipv4Flow<'a>> {
        let hl = usize::from(ip.first().copied().unwrap_or(0) & 0x0f) * 4;
        if ip.len() < 20 || hl < 20 || hl > ip.len() {
            return None;
        }
        Some(Ipv4Flow { ip, hl })
    }

    /// The view of `ip` cut at its IPv4 total length (what a packet is once the bytes after
    /// its IPv4 length are trimmed), or `None` when the length is unreadable, beyond the
    /// data, or the cut bytes fail [`Ipv4Flow::parse`].
    #[inline]
    pub fn parse_trimmed(ip: &'a [u8]) -> Option<Ipv4Flow<'a>> {
        let len = usize::from(word(ip, 2)?);
        Ipv4Flow::parse(ip.get(..len)?)
    }

    #[inline]
    fn header(&self) -> wire::ipv4::Packet<&'a [u8]> {
        // `parse` checked the 20 bytes the fixed fields are in.
        wire::ipv4::Packet::new_unchecked(self.ip)
    }

    /// The bytes viewed (from the IP header on).
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.ip
    }

    /// IP version (the first nibble; not checked by [`Ipv4Flow::parse`]).
    #[inline]
    pub fn version(&self) -> u8 {
        self.header().version()
    }

    /// Header length in bytes, options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        self.hl
    }

    /// IP protocol number.
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.header().next_header()
    }

    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        self.header().src_addr()
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        self.header().dst_addr()
    }

    /// The total length field.
    #[inline]
    pub fn total_len(&self) -> u16 {
        self.header().total_len()
    }

    /// False for a later fragment (fragment offset ≠ 0).
    #[inline]
    pub fn first_fragment(&self) -> bool {
        self.header().frag_offset() == 0
    }

    /// Bytes from the transport header to the end of the data.
    #[inline]
    pub fn transport_len(&self) -> usize {
        self.ip.len() - self.hl
    }

    /// The bytes from the transport header to the end of the data.
    #[inline]
    pub fn transport(&self) -> &'a [u8] {
        &self.ip[self.hl..]
    }

    /// Source and destination ports under `rule`.
    #[inline]
    pub fn ports(&self, rule: Ports) -> (u16, u16) {
        let t = self.transport();
        match rule {
            Ports::Raw => (word(t, 0).unwrap_or(0), word(t, 2).unwrap_or(0)),
            Ports::TcpUdp => {
                let p = self.protocol();
                if self.first_fragment() && (p == TCP || p == UDP) && t.len() >= 4 {
                    (
                        u16::from_be_bytes([t[0], t[1]]),
                        u16::from_be_bytes([t[2], t[3]]),
                    )
                } else {
                    (0, 0)
                }
            }
            Ports::Transport => transport_ports(self.protocol(), t, self.first_fragment()),
        }
    }

    /// The flow key, ports under `rule`.
    #[inline]
    pub fn key(&self, rule: Ports) -> Ipv4FlowKey {
        let (src_port, dst_port) = self.ports(rule);
        FlowKey {
            protocol: self.protocol(),
            src: self.src(),
            src_port,
            dst: self.dst(),
            dst_port,
        }
    }

    /// The TCP flags byte (0 when the data ends before it; meaningful for TCP only).
    #[inline]
    pub fn tcp_flags(&self) -> u8 {
        self.ip.get(self.hl + 13).copied().unwrap_or(0)
    }

    /// Whether a TCP segment carries payload, as Click's TCP rewriter judges it
    /// (`TCPFlow::apply`): the IPv4 total length goes past the IP header and the TCP data
    /// offset as written (a data offset the data ends before reads 0; meaningful for TCP
    /// only). The total length is taken as written, even beyond the data.
    #[inline]
    pub fn tcp_has_payload(&self) -> bool {
        let doff = usize::from(self.ip.get(self.hl + 12).copied().unwrap_or(0) >> 4) * 4;
        usize::from(self.total_len()) > self.hl + doff
    }

    /// The fast path's flow-table key of the unchecked bytes `ip` (an IPv4 header, or
    /// anything): protocol, source, first port word, destination, second port word, from
    /// bit 96 down; for ICMP the type and code word and the echo identifier (the word after
    /// the checksum) in place of the ports, so an echo flow keeps its key while its sequence
    /// number changes. Missing bytes read 0 and the header length is taken as written, so
    /// any frame has a key.
    #[inline]
    pub fn table_key(ip: &[u8]) -> u128 {
        // Every packet of a flow asks for its key: when the bytes are all there, read the
        // words whole (a quarter of the byte-by-byte walk's instructions).
        if let Some(h) = ip.get(..20) {
            let t = usize::from(h[0] & 0x0f) * 4;
            let second = if h[9] == ICMP { t + 4 } else { t + 2 };
            if let (Some(p1), Some(p2)) = (ip.get(t..t + 2), ip.get(second..second + 2)) {
                let word = |w: &[u8]| u128::from(u16::from_be_bytes([w[0], w[1]]));
                let addr = |a: &[u8]| u128::from(u32::from_be_bytes([a[0], a[1], a[2], a[3]]));
                return (u128::from(h[9]) << 96)
                    | (addr(&h[12..16]) << 64)
                    | (word(p1) << 48)
                    | (addr(&h[16..20]) << 16)
                    | word(p2);
            }
        }
        Self::table_key_bytes(ip)
    }

    /// [`Ipv4Flow::table_key`] byte by byte, missing bytes read as 0.
    fn table_key_bytes(ip: &[u8]) -> u128 {
        let b = |i: usize| u128::from(ip.get(i).copied().unwrap_or(0));
        let be = |i: usize, n: usize| (i..i + n).fold(0u128, |a, j| (a << 8) | b(j));
        let t = usize::from(ip.first().copied().unwrap_or(0) & 0x0f) * 4;
        let second = if b(9) == u128::from(ICMP) {
            t + 4
        } else {
            t + 2
        };
        (b(9) << 96) | (be(12, 4) << 64) | (be(t, 2) << 48) | (be(16, 4) << 16) | be(second, 2)
    }
}

impl FlowKey {
    /// The flow key of an Ethernet frame (VLAN tags, IPv4 and IPv6 extension headers are
    /// walked), ports under [`Ports::Transport`]. Non-first fragments and non-IP frames have
    /// no ports (0).
    pub fn from_ethernet(frame: &[u8]) -> Option<FlowKey> {
        let layers = wire::parse::layers(frame).ok()?;
        let l3 = layers.l3_offset?;
        let ip = frame.get(l3..)?;
        Self::from_ip_at(
            ip,
            layers.l4_offset.map(|o| o - l3),
            layers.ip_proto,
            layers.first_fragment || !layers.is_fragment,
        )
    }

    /// The flow key of a packet starting at its IP header (version read from the first
    /// nibble), ports under [`Ports::Transport`].
    pub fn from_ip(ip: &[u8]) -> Option<FlowKey> {
        let v = ip.first()? >> 4;
        if v == 4 {
            let p = wire::ipv4::Packet::new_checked(ip).ok()?;
            let hl = p.header_len();
            let first = p.frag_offset() == 0;
            Self::from_ip_at(ip, Some(hl), Some(p.next_header()), first)
        } else if v == 6 {
            let (proto, off, frag) = wire::ipv6::walk_extension_headers(ip).ok()?;
            let first = frag.is_none_or(|f| f.is_first());
            Self::from_ip_at(ip, Some(off), Some(proto), first)
        } else {
            None
        }
    }

    fn from_ip_at(ip: &[u8], l4: Option<usize>, proto: Option<u8>, first: bool) -> Option<FlowKey> {
        let (src, dst): (IpAddr, IpAddr) = match ip.first()? >> 4 {
            4 if ip.len() >= 20 => {
                let s: [u8; 4] = ip[12..16].try_into().ok()?;
                let d: [u8; 4] = ip[16..20].try_into().ok()?;
                (Ipv4Addr::from(s).into(), Ipv4Addr::from(d).into())
            }
            6 if ip.len() >= 40 => {
                let s: [u8; 16] = ip[8..24].try_into().ok()?;
                let d: [u8; 16] = ip[24..40].try_into().ok()?;
                (Ipv6Addr::from(s).into(), Ipv6Addr::from(d).into())
            }
            _ => return None,
        };
        let protocol = proto?;
        let t = l4.and_then(|o| ip.get(o..)).unwrap_or(&[]);
        let (src_port, dst_port) = transport_ports(protocol, t, first);
        Some(FlowKey {
            protocol,
            src,
            src_port,
            dst,
            dst_port,
        })
    }

    /// The flow's symmetric RSS hash: the Toeplitz hash under
    /// [`crate::SYMMETRIC_RSS_KEY`] of the addresses and ports, equal for the flow and its
    /// reverse (the hash that keeps both directions of a flow on one core).
    #[inline]
    pub fn rss_hash(&self) -> u32 {
        crate::rss::symmetric_rss(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ethernet::ethertype;

    /// Ethernet (with optional 802.1Q tag) around an L3 packet.
    fn eth(vlan: Option<u16>, ethertype: u16, l3: &[u8]) -> Vec<u8> {
        let tags: Vec<(u16, u16)> = vlan.map(|v| (ethertype::VLAN, v)).into_iter().collect();
        wire::build::ethernet([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], &tags, ethertype, l3)
    }

    /// IPv4 header (no options, checksum filled) followed by `l4`.
    fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, frag_raw: u16, l4: &[u8]) -> Vec<u8> {
        let (df, mf) = (frag_raw & 0x4000 != 0, frag_raw & 0x2000 != 0);
        wire::build::Frame::ip(src, dst, proto)
            .fragment(df, mf, (frag_raw & 0x1fff) * 8)
            .payload(l4)
            .no_ethernet()
            .build()
    }

    /// IPv6 header followed by `rest` (extension headers and transport).
    fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, rest: &[u8]) -> Vec<u8> {
        let mut ip = vec![0u8; 40];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(rest.len() as u16).to_be_bytes());
        ip[6] = next;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&src.octets());
        ip[24..40].copy_from_slice(&dst.octets());
        ip.extend_from_slice(rest);
        ip
    }

    fn ports(sp: u16, dp: u16, len: usize) -> Vec<u8> {
        let mut t = vec![0u8; len];
        t[0..2].copy_from_slice(&sp.to_be_bytes());
        t[2..4].copy_from_slice(&dp.to_be_bytes());
        t
    }

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [192, 168, 1, 2];

    fn v4key<A: From<Ipv4Addr>>(
        src: [u8; 4],
        dst: [u8; 4],
        sp: u16,
        dp: u16,
        protocol: u8,
    ) -> FlowKey<A> {
        FlowKey {
            src: Ipv4Addr::from(src).into(),
            dst: Ipv4Addr::from(dst).into(),
            src_port: sp,
            dst_port: dp,
            protocol,
        }
    }

    #[test]
    fn ipv4_tcp_udp_and_vlan() {
        let tcp = eth(
            None,
            ethertype::IPV4,
            &ipv4(A, B, TCP, 0x4000, &ports(40000, 80, 20)),
        );
        assert_eq!(
            FlowKey::from_ethernet(&tcp),
            Some(v4key(A, B, 40000, 80, 6))
        );
        let udp = eth(
            Some(7),
            ethertype::IPV4,
            &ipv4(B, A, UDP, 0, &ports(53, 5353, 8)),
        );
        assert_eq!(
            FlowKey::from_ethernet(&udp),
            Some(v4key(B, A, 53, 5353, 17))
        );
        assert_eq!(
            FlowKey::from_ip(&ipv4(A, B, UDP, 0, &ports(1, 2, 8))),
            Some(v4key(A, B, 1, 2, 17))
        );
    }

    #[test]
    fn ipv4_icmp_echo_and_other_protocols() {
        let mut echo = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
        let f = eth(None, ethertype::IPV4, &ipv4(A, B, ICMP, 0, &echo));
        assert_eq!(
            FlowKey::from_ethernet(&f),
            Some(v4key(A, B, 0x1234, 0x1234, 1))
        );
        // Destination unreachable: no identifier.
        echo[0] = 3;
        let f = eth(None, ethertype::IPV4, &ipv4(A, B, ICMP, 0, &echo));
        assert_eq!(FlowKey::from_ethernet(&f), Some(v4key(A, B, 0, 0, 1)));
        // GRE: no ports.
        let f = eth(
            None,
            ethertype::IPV4,
            &ipv4(A, B, wire::ip::protocol::GRE, 0, &[0; 8]),
        );
        assert_eq!(FlowKey::from_ethernet(&f), Some(v4key(A, B, 0, 0, 47)));
    }

    #[test]
    fn ipv4_fragments() {
        let l4 = ports(1000, 2000, 20);
        // First fragment (MF, offset 0): ports are there.
        let f = eth(None, ethertype::IPV4, &ipv4(A, B, TCP, 0x2000, &l4));
        assert_eq!(FlowKey::from_ethernet(&f), Some(v4key(A, B, 1000, 2000, 6)));
        // Later fragment (offset 185 * 8): the bytes are not a TCP header.
        let ip = ipv4(A, B, TCP, 185, &l4);
        assert_eq!(
            FlowKey::from_ethernet(&eth(None, ethertype::IPV4, &ip)),
            Some(v4key(A, B, 0, 0, 6))
        );
        assert_eq!(FlowKey::from_ip(&ip), Some(v4key(A, B, 0, 0, 6)));
    }

    #[test]
    fn ipv6_keys_and_extension_headers() {
        let s: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let want = FlowKey {
            src: s.into(),
            dst: d.into(),
            src_port: 5000,
            dst_port: 443,
            protocol: UDP,
        };
        let ip = ipv6(s, d, 17, &ports(5000, 443, 8));
        assert_eq!(FlowKey::from_ip(&ip), Some(want));
        assert_eq!(
            FlowKey::from_ethernet(&eth(Some(3), ethertype::IPV6, &ip)),
            Some(want)
        );

        // Hop-by-hop options then a first fragment then UDP.
        let mut rest = vec![44, 0, 1, 4, 0, 0, 0, 0]; // HBH: next = fragment, 8 bytes
        rest.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 9]); // offset 0, MF
        rest.extend_from_slice(&ports(5000, 443, 8));
        let ip = ipv6(s, d, 0, &rest);
        assert_eq!(FlowKey::from_ip(&ip), Some(want));
        assert_eq!(
            FlowKey::from_ethernet(&eth(None, ethertype::IPV6, &ip)),
            Some(want)
        );

        // A non-first fragment: protocol known, no ports.
        let mut rest = vec![17, 0, 0x05, 0x00, 0, 0, 0, 9]; // offset 160
        rest.extend_from_slice(&ports(5000, 443, 8));
        let ip = ipv6(s, d, 44, &rest);
        let no_ports = FlowKey {
            src_port: 0,
            dst_port: 0,
            ..want
        };
        assert_eq!(FlowKey::from_ip(&ip), Some(no_ports));
        assert_eq!(
            FlowKey::from_ethernet(&eth(None, ethertype::IPV6, &ip)),
            Some(no_ports)
        );
    }

    #[test]
    fn not_ip_or_broken() {
        assert_eq!(
            FlowKey::from_ethernet(&eth(None, ethertype::ARP, &[0; 28])),
            None
        );
        assert_eq!(FlowKey::from_ethernet(&[]), None);
        assert_eq!(FlowKey::from_ip(&[]), None);
        assert_eq!(FlowKey::from_ip(&[0x50; 40]), None);
        let good = eth(None, ethertype::IPV4, &ipv4(A, B, TCP, 0, &ports(1, 2, 20)));
        for n in 0..good.len() {
            // Never panics; a cut IPv4 header gives no key.
            let k = FlowKey::from_ethernet(&good[..n]);
            if n < 34 {
                assert_eq!(k, None, "{n}");
            }
        }
    }

    #[test]
    fn reversed_swaps_both_ends() {
        let k = v4key(A, B, 40000, 80, 6);
        let r = k.reversed();
        assert_eq!(r, v4key(B, A, 80, 40000, 6));
        assert_eq!(r.reversed(), k);
        // The reply frame gives the reversed key.
        let reply = eth(
            None,
            ethertype::IPV4,
            &ipv4(B, A, TCP, 0, &ports(80, 40000, 20)),
        );
        assert_eq!(FlowKey::from_ethernet(&reply), Some(r));
    }

    #[test]
    fn ipv4_view_port_rules() {
        // TCP first fragment: every rule reads the ports.
        let ip = ipv4(A, B, TCP, 0, &ports(40000, 80, 20));
        let v = Ipv4Flow::parse(&ip).unwrap();
        for rule in [Ports::Raw, Ports::TcpUdp, Ports::Transport] {
            assert_eq!(v.key(rule), v4key(A, B, 40000, 80, 6), "{rule:?}");
        }
        assert_eq!(
            FlowKey::from(v.key(Ports::Transport)),
            FlowKey::from_ip(&ip).unwrap()
        );
        assert_eq!(
            (v.header_len(), v.transport_len(), v.version()),
            (20, 20, 4)
        );
        // A later fragment: only the raw rule reads the words after the header.
        let ip = ipv4(A, B, UDP, 185, &ports(1, 2, 8));
        let v = Ipv4Flow::parse(&ip).unwrap();
        assert!(!v.first_fragment());
        assert_eq!(v.ports(Ports::Raw), (1, 2));
        assert_eq!(v.ports(Ports::TcpUdp), (0, 0));
        assert_eq!(v.ports(Ports::Transport), (0, 0));
        // ICMP echo: the identifier under the transport rule only.
        let ip = ipv4(A, B, ICMP, 0, &[8, 0, 0, 0, 0x12, 0x34, 0, 1]);
        let v = Ipv4Flow::parse(&ip).unwrap();
        assert_eq!(v.ports(Ports::Transport), (0x1234, 0x1234));
        assert_eq!(v.ports(Ports::TcpUdp), (0, 0));
        assert_eq!(v.ports(Ports::Raw), (0x0800, 0));
        // Three transport bytes: the raw rule reads the first word only.
        let ip = ipv4(A, B, TCP, 0, &[1, 2, 3]);
        let v = Ipv4Flow::parse(&ip).unwrap();
        assert_eq!(v.ports(Ports::Raw), (0x0102, 0));
        assert_eq!(v.ports(Ports::TcpUdp), (0, 0));
    }

    #[test]
    fn ipv4_view_checks_and_trimming() {
        let mut ip = ipv4(A, B, TCP, 0, &ports(1, 2, 20));
        assert!(Ipv4Flow::parse(&ip[..19]).is_none());
        // The version is not checked; the header length is.
        ip[0] = 0x65;
        assert_eq!(Ipv4Flow::parse(&ip).map(|v| v.version()), Some(6));
        ip[0] = 0x44;
        assert!(Ipv4Flow::parse(&ip).is_none());
        ip[0] = 0x4f;
        assert!(Ipv4Flow::parse(&ip).is_none()); // 60-byte header in 40 bytes
        ip[0] = 0x45;
        // Padding after the IPv4 length: trimmed away.
        ip.extend_from_slice(&[0; 6]);
        assert_eq!(Ipv4Flow::parse(&ip).unwrap().transport_len(), 26);
        assert_eq!(Ipv4Flow::parse_trimmed(&ip).unwrap().transport_len(), 20);
        // A length beyond the data: no trimmed view.
        assert!(Ipv4Flow::parse_trimmed(&ip[..30]).is_none());
        assert!(Ipv4Flow::parse_trimmed(&ip[..3]).is_none());
    }

    #[test]
    fn tcp_facts() {
        let mut t = ports(1, 2, 20);
        t[12] = 5 << 4;
        t[13] = 0x12;
        let ip = ipv4(A, B, TCP, 0, &t);
        let v = Ipv4Flow::parse(&ip).unwrap();
        assert_eq!(v.tcp_flags(), 0x12);
        assert!(!v.tcp_has_payload());
        t.push(9);
        let ip = ipv4(A, B, TCP, 0, &t);
        assert!(Ipv4Flow::parse(&ip).unwrap().tcp_has_payload());
        // Click's rule: the total length as written (here past the data, whose last byte
        // is cut) against the data offset as written.
        assert!(Ipv4Flow::parse(&ip[..ip.len() - 1])
            .unwrap()
            .tcp_has_payload());
        t.pop();
        t[12] = 0;
        let ip = ipv4(A, B, TCP, 0, &t);
        assert!(Ipv4Flow::parse(&ip).unwrap().tcp_has_payload());
        t[12] = 7 << 4;
        let ip = ipv4(A, B, TCP, 0, &t);
        assert!(!Ipv4Flow::parse(&ip).unwrap().tcp_has_payload());
    }

    #[test]
    fn table_key_reads_anything() {
        assert_eq!(Ipv4Flow::table_key(&[]), 0);
        let ip = ipv4(A, B, UDP, 0, &ports(53, 5353, 8));
        let k = Ipv4Flow::table_key(&ip);
        assert_eq!(k >> 96, 17);
        assert_eq!((k >> 64) as u32, u32::from_be_bytes(A));
        assert_eq!((k >> 48) as u16, 53);
        assert_eq!((k >> 16) as u32, u32::from_be_bytes(B));
        assert_eq!(k as u16, 5353);
        // ICMP echo: type and code, then the identifier, whatever the sequence number.
        let echo = |seq: u8| ipv4(A, B, ICMP, 0, &[8, 0, 0xaa, seq, 0x12, 0x34, 0, seq]);
        assert_eq!(Ipv4Flow::table_key(&echo(1)), Ipv4Flow::table_key(&echo(2)));
        assert_eq!(Ipv4Flow::table_key(&echo(1)) as u16, 0x1234);
        for n in 0..ip.len() {
            let _ = Ipv4Flow::table_key(&ip[..n]);
        }
    }

    proptest::proptest! {
        /// Whole words and the byte-by-byte walk give one key, whatever the bytes and
        /// wherever they end.
        #[test]
        fn table_key_reads_words_as_bytes(
            mut ip in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            ihl in 0u8..16,
            icmp in proptest::prelude::any::<bool>(),
        ) {
            if let Some(b) = ip.first_mut() {
                *b = (*b & 0xf0) | ihl;
            }
            if icmp && ip.len() > 9 {
                ip[9] = ICMP;
            }
            proptest::prop_assert_eq!(Ipv4Flow::table_key(&ip), Ipv4Flow::table_key_bytes(&ip));
        }
    }

    #[test]
    fn display_and_rss() {
        let k: Ipv4FlowKey = v4key(A, B, 40000, 80, 6);
        assert_eq!(k.to_string(), "proto 6 10.0.0.1:40000 > 192.168.1.2:80");
        assert_eq!(k.rss_hash(), k.reversed().rss_hash());
        assert_eq!(k.rss_hash(), FlowKey::<IpAddr>::from(k).rss_hash());
        // Orders by protocol first.
        assert!(v4key::<Ipv4Addr>(B, A, 1, 1, 6) < v4key(A, B, 1, 1, 17));
    }
}
