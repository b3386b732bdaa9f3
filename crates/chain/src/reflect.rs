//! `--reflect`: turn a packet leaving the chain into the reply its destination would send,
//! so stateful NFs see both directions of every flow they open.

use wire::tcp::flags as tcp_flags;
use wire::{arp, checksum, ethernet, icmpv4, icmpv6, ipv4, ipv6, tcp, udp, IpProtocol};

/// The reply to an Ethernet frame: MACs, IP addresses and ports swapped, TCP flags answered
/// (SYN → SYN+ACK, FIN → FIN+ACK, data → ACK; sequence numbers follow), ICMP echo requests
/// answered with echo replies, TTL reset to 64, checksums recomputed. An ARP request is
/// answered by the host it asks for, whose MAC is `02:fb:` followed by its IPv4 address
/// (so captures without ARP replies still resolve). Other frames just get their MACs
/// swapped.
pub fn reply(p: &packet::Packet) -> Vec<u8> {
    let mut b = p.data().to_vec();
    if b.len() < ethernet::HEADER_LEN {
        return b;
    }
    if let Some(r) = arp_reply(&b) {
        return r;
    }
    swap(
        &mut b,
        ethernet::field::DESTINATION,
        ethernet::field::SOURCE,
    );
    let Ok(l) = wire::parse::layers(&b) else {
        return b;
    };
    let (Some(l3), Some(proto)) = (l.l3_offset, l.ip_proto) else {
        return b;
    };
    let ip = match Ip::at(&b, l3) {
        Some(ip) => ip,
        None => return b,
    };
    swap(&mut b, ip.src.clone(), ip.dst.clone());
    let ip_end = ip.answer(&mut b);
    let Some(l4) = l.l4_offset.filter(|_| !l.is_fragment || l.first_fragment) else {
        return b;
    };
    if l4 >= ip_end {
        return b;
    }
    let seg = l4..ip_end;
    let at = |r: std::ops::Range<usize>| l4 + r.start..l4 + r.end;
    match proto {
        IpProtocol::TCP if seg.len() >= tcp::HEADER_LEN => {
            use tcp::field;
            swap(&mut b, at(field::SRC_PORT), at(field::DST_PORT));
            let read = |b: &[u8], r: std::ops::Range<usize>| {
                wire::bytes::read_u32(b, l4 + r.start).unwrap_or(0)
            };
            let (seq, ack) = (read(&b, field::SEQ_NUM), read(&b, field::ACK_NUM));
            let flags = b[l4 + field::FLAGS];
            let hl = usize::from(b[l4 + field::DATA_OFF] >> 4) * 4;
            let payload = seg.len().saturating_sub(hl) as u32;
            let (syn, fin) = (flags & tcp_flags::SYN != 0, flags & tcp_flags::FIN != 0);
            let answer = if flags & tcp_flags::RST != 0 {
                tcp_flags::RST
            } else if syn && flags & tcp_flags::ACK == 0 {
                tcp_flags::SYN | tcp_flags::ACK
            } else if fin {
                tcp_flags::FIN | tcp_flags::ACK
            } else {
                tcp_flags::ACK
            };
            let new_ack = seq
                .wrapping_add(payload)
                .wrapping_add(u32::from(syn) + u32::from(fin));
            wire::bytes::write_u32(&mut b, l4 + field::SEQ_NUM.start, ack);
            wire::bytes::write_u32(&mut b, l4 + field::ACK_NUM.start, new_ack);
            b[l4 + field::FLAGS] = answer;
            fill_l4(&mut b, &ip, seg, field::CHECKSUM.start, proto);
        }
        IpProtocol::UDP if seg.len() >= udp::HEADER_LEN => {
            use udp::field;
            swap(&mut b, at(field::SRC_PORT), at(field::DST_PORT));
            // A UDP checksum of zero (none, over IPv4) stays none.
            if b[at(field::CHECKSUM)] != [0, 0] || ip.v6 {
                fill_l4(&mut b, &ip, seg, field::CHECKSUM.start, proto);
            }
        }
        IpProtocol::ICMP
            if seg.len() >= icmpv4::HEADER_LEN
                && b[l4 + icmpv4::field::TYPE] == icmpv4::msg_type::ECHO_REQUEST =>
        {
            b[l4 + icmpv4::field::TYPE] = icmpv4::msg_type::ECHO_REPLY;
            let ck = at(icmpv4::field::CHECKSUM);
            b[ck.clone()].fill(0);
            let sum = checksum::data(&b[seg]);
            wire::bytes::write_u16(&mut b, ck.start, sum);
        }
        IpProtocol::ICMPV6
            if seg.len() >= icmpv6::HEADER_LEN
                && b[l4 + icmpv6::field::TYPE] == icmpv6::msg_type::ECHO_REQUEST =>
        {
            b[l4 + icmpv6::field::TYPE] = icmpv6::msg_type::ECHO_REPLY;
            fill_l4(&mut b, &ip, seg, icmpv6::field::CHECKSUM.start, proto);
        }
        _ => {}
    }
    b
}

/// Swaps the bytes of two equal-length ranges of `b`.
fn swap(b: &mut [u8], x: std::ops::Range<usize>, y: std::ops::Range<usize>) {
    for (i, j) in x.zip(y) {
        b.swap(i, j);
    }
}

/// Where the IP header of the frame being answered keeps its addresses (absolute ranges).
struct Ip {
    l3: usize,
    v6: bool,
    src: std::ops::Range<usize>,
    dst: std::ops::Range<usize>,
}

impl Ip {
    /// The IPv4 or IPv6 header at `l3`, if its addresses are within the frame.
    fn at(b: &[u8], l3: usize) -> Option<Ip> {
        let v6 = b.get(l3).is_some_and(|v| v >> 4 == 6);
        let (src, dst) = if v6 {
            (ipv6::field::SRC_ADDR, ipv6::field::DST_ADDR)
        } else {
            (ipv4::field::SRC_ADDR, ipv4::field::DST_ADDR)
        };
        let abs = |r: std::ops::Range<usize>| l3 + r.start..l3 + r.end;
        (b.len() >= l3 + dst.end).then(|| Ip {
            l3,
            v6,
            src: abs(src),
            dst: abs(dst),
        })
    }

    /// Makes the header the answer's (TTL or hop limit 64; the IPv4 checksum recomputed)
    /// and returns where the IP packet ends (its length, within the frame).
    fn answer(&self, b: &mut [u8]) -> usize {
        let l3 = self.l3;
        let len = if self.v6 {
            b[l3 + ipv6::field::HOP_LIMIT] = 64;
            let payload = wire::bytes::read_u16(b, l3 + ipv6::field::LENGTH.start).unwrap_or(0);
            usize::from(payload) + ipv6::HEADER_LEN
        } else {
            b[l3 + ipv4::field::TTL] = 64;
            let hl = usize::from(b[l3 + ipv4::field::VER_IHL] & 0x0f) * 4;
            let ck = l3 + ipv4::field::CHECKSUM.start;
            b[ck..ck + 2].fill(0);
            let sum = checksum::data(&b[l3..l3 + hl]);
            wire::bytes::write_u16(b, ck, sum);
            let total = wire::bytes::read_u16(b, l3 + ipv4::field::LENGTH.start).unwrap_or(0);
            usize::from(total)
        };
        (l3 + len).min(b.len())
    }
}

/// Recomputes the transport checksum at `ck_at` (from the segment's start) over `seg` with
/// the pseudo header of `ip`.
fn fill_l4(b: &mut [u8], ip: &Ip, seg: std::ops::Range<usize>, ck_at: usize, proto: u8) {
    let ck = seg.start + ck_at;
    b[ck..ck + 2].fill(0);
    let len = seg.len() as u32;
    let pseudo = if ip.v6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&b[ip.src.clone()]);
        d.copy_from_slice(&b[ip.dst.clone()]);
        checksum::pseudo_header_v6(s, d, proto, len)
    } else {
        let mut s = [0u8; 4];
        let mut d = [0u8; 4];
        s.copy_from_slice(&b[ip.src.clone()]);
        d.copy_from_slice(&b[ip.dst.clone()]);
        checksum::pseudo_header_v4(s, d, proto, len as u16)
    };
    let mut sum = !checksum::fold(checksum::combine(&[pseudo, checksum::sum(&b[seg])]));
    if proto == IpProtocol::UDP {
        sum = checksum::udp_finish(sum);
    }
    wire::bytes::write_u16(b, ck, sum);
}

/// The MAC FuseBox's reflection gives the host that owns `ip`.
pub fn reflected_mac(ip: [u8; 4]) -> [u8; 6] {
    [0x02, 0xfb, ip[0], ip[1], ip[2], ip[3]]
}

/// The reply to an Ethernet/IPv4 ARP request, if `f` is one.
fn arp_reply(f: &[u8]) -> Option<Vec<u8>> {
    let req = arp::Repr::parse_frame(f)?;
    if req.operation != arp::operation::REQUEST {
        return None;
    }
    let mac = ethernet::Address(reflected_mac(req.target_protocol_addr.octets()));
    let reply = arp::Repr {
        operation: arp::operation::REPLY,
        sender_hardware_addr: mac,
        sender_protocol_addr: req.target_protocol_addr,
        target_hardware_addr: req.sender_hardware_addr,
        target_protocol_addr: req.sender_protocol_addr,
    };
    Some(reply.frame(req.sender_hardware_addr, mac).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    use wire::build::{Frame, Sum};

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn answer(f: &Frame) -> Vec<u8> {
        reply(&packet::Packet::from_bytes(&f.build()))
    }

    #[test]
    fn tcp_is_answered_with_swapped_ends_flags_and_sequence_numbers() {
        let tcp = |s: [u8; 4], d: [u8; 4], sp, dp| Frame::tcp(s, d, sp, dp);
        let (c, sv) = ([192, 168, 0, 5], [10, 0, 2, 1]);
        // SYN -> SYN+ACK acknowledging the SYN.
        let syn = tcp(c, sv, 4000, 80)
            .macs(A, B)
            .ttl(9)
            .flags(tcp_flags::SYN)
            .seq_ack(100, 0);
        let want = tcp(sv, c, 80, 4000)
            .macs(B, A)
            .ttl(64)
            .flags(tcp_flags::SYN | tcp_flags::ACK)
            .seq_ack(0, 101);
        assert_eq!(answer(&syn), want.build());
        // Data -> ACK of the data; FIN -> FIN+ACK of the FIN; RST -> RST.
        let data = tcp(c, sv, 4000, 80)
            .macs(A, B)
            .flags(tcp_flags::ACK | tcp_flags::PSH)
            .seq_ack(1000, 2000)
            .payload(&[7; 10]);
        let want = tcp(sv, c, 80, 4000)
            .macs(B, A)
            .ttl(64)
            .flags(tcp_flags::ACK)
            .seq_ack(2000, 1010)
            .payload(&[7; 10]);
        assert_eq!(answer(&data), want.build());
        let fin = tcp(c, sv, 4000, 80)
            .macs(A, B)
            .flags(tcp_flags::FIN | tcp_flags::ACK)
            .seq_ack(5, 6);
        let want = tcp(sv, c, 80, 4000)
            .macs(B, A)
            .ttl(64)
            .flags(tcp_flags::FIN | tcp_flags::ACK)
            .seq_ack(6, 6);
        assert_eq!(answer(&fin), want.build());
        let rst = tcp(c, sv, 4000, 80)
            .macs(A, B)
            .flags(tcp_flags::RST)
            .seq_ack(5, 6);
        let want = tcp(sv, c, 80, 4000)
            .macs(B, A)
            .ttl(64)
            .flags(tcp_flags::RST)
            .seq_ack(6, 5);
        assert_eq!(answer(&rst), want.build());
    }

    #[test]
    fn udp_and_echo_are_answered_with_valid_checksums() {
        let (c, sv) = ([192, 168, 0, 5], [10, 0, 2, 1]);
        let udp = Frame::udp(c, sv, 4000, 53)
            .macs(A, B)
            .ttl(3)
            .payload(b"query");
        let want = Frame::udp(sv, c, 53, 4000)
            .macs(B, A)
            .ttl(64)
            .payload(b"query");
        assert_eq!(answer(&udp), want.build());
        // No checksum stays no checksum.
        let none = udp.clone().l4_sum(Sum::Zero);
        assert_eq!(answer(&none), want.clone().l4_sum(Sum::Zero).build());
        let echo = Frame::icmp(c, sv, icmpv4::msg_type::ECHO_REQUEST, 0)
            .macs(A, B)
            .icmp_rest(0x0001_0002)
            .payload(b"ping");
        let want = Frame::icmp(sv, c, icmpv4::msg_type::ECHO_REPLY, 0)
            .macs(B, A)
            .ttl(64)
            .icmp_rest(0x0001_0002)
            .payload(b"ping");
        assert_eq!(answer(&echo), want.build());
        // A later fragment: addresses swapped, TTL and header checksum answered, the
        // transport bytes (not a header) left alone.
        let frag = Frame::udp(c, sv, 4000, 53)
            .macs(A, B)
            .fragment(false, false, 8);
        let r = answer(&frag);
        let want = Frame::udp(sv, c, 4000, 53)
            .macs(B, A)
            .ttl(64)
            .fragment(false, false, 8);
        assert_eq!(r, want.build());
    }

    #[test]
    fn arp_requests_are_answered_by_the_asked_host() {
        let req =
            wire::build::Arp::request([0, 1, 2, 3, 4, 5], [10, 0, 0, 1], [10, 0, 0, 2]).build();
        let r = reply(&packet::Packet::from_bytes(&req));
        assert_eq!(&r[0..6], &[0, 1, 2, 3, 4, 5], "to the asker");
        assert_eq!(&r[6..12], &[2, 0xfb, 10, 0, 0, 2]);
        assert_eq!(&r[20..22], &[0, 2], "a reply");
        assert_eq!(&r[22..32], &[2, 0xfb, 10, 0, 0, 2, 10, 0, 0, 2]);
        assert_eq!(&r[32..42], &[0, 1, 2, 3, 4, 5, 10, 0, 0, 1]);
        let mac = reflected_mac([10, 0, 0, 2]);
        let want = wire::build::Arp::reply(mac, [10, 0, 0, 2], [0, 1, 2, 3, 4, 5], [10, 0, 0, 1]);
        assert_eq!(r, want.build());
        // Not a request: MACs swapped only.
        let mut other = req.clone();
        other[21] = 2;
        let r = reply(&packet::Packet::from_bytes(&other));
        assert_eq!(&r[0..6], &[0, 1, 2, 3, 4, 5]);
        assert_eq!(&r[6..12], &[0xff; 6]);
        assert_eq!(&r[12..], &other[12..]);
    }
}
