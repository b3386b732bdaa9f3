//! `--reflect`: turn a packet leaving the chain into the reply its destination would send,
//! so stateful NFs see both directions of every flow they open.

use wire::tcp::flags as tcp_flags;
use wire::{arp, checksum, ethernet, icmpv4, icmpv6, IpProtocol};

/// The reply to an Ethernet frame: MACs, IP addresses and ports swapped, TCP flags answered
/// (SYN → SYN+ACK, FIN → FIN+ACK, data → ACK; sequence numbers follow), ICMP echo requests
/// answered with echo replies, TTL reset to 64, checksums recomputed. An ARP request is
/// answered by the host it asks for, whose MAC is `02:fb:` followed by its IPv4 address
/// (so captures without ARP replies still resolve). Other frames just get their MACs
/// swapped.
pub fn reply(p: &packet::Packet) -> Vec<u8> {
    let mut b = p.data().to_vec();
    if b.len() < 14 {
        return b;
    }
    if let Some(r) = arp_reply(&b) {
        return r;
    }
    let (dst, src) = (b[0..6].to_vec(), b[6..12].to_vec());
    b[0..6].copy_from_slice(&src);
    b[6..12].copy_from_slice(&dst);
    let Ok(l) = wire::parse::layers(&b) else {
        return b;
    };
    let (Some(l3), Some(proto)) = (l.l3_offset, l.ip_proto) else {
        return b;
    };
    let v6 = b.get(l3).is_some_and(|v| v >> 4 == 6);
    let (sa, da, alen) = if v6 {
        (l3 + 8, l3 + 24, 16)
    } else {
        (l3 + 12, l3 + 16, 4)
    };
    if b.len() < da + alen {
        return b;
    }
    let s = b[sa..sa + alen].to_vec();
    let d = b[da..da + alen].to_vec();
    b[sa..sa + alen].copy_from_slice(&d);
    b[da..da + alen].copy_from_slice(&s);
    let ip_end = if v6 {
        b[l3 + 7] = 64;
        (l3 + 40 + u16::from_be_bytes([b[l3 + 4], b[l3 + 5]]) as usize).min(b.len())
    } else {
        b[l3 + 8] = 64;
        b[l3 + 10] = 0;
        b[l3 + 11] = 0;
        let hl = ((b[l3] & 0x0f) as usize) * 4;
        let ck = checksum::data(&b[l3..l3 + hl]);
        b[l3 + 10..l3 + 12].copy_from_slice(&ck.to_be_bytes());
        (l3 + u16::from_be_bytes([b[l3 + 2], b[l3 + 3]]) as usize).min(b.len())
    };
    let Some(l4) = l.l4_offset.filter(|_| !l.is_fragment || l.first_fragment) else {
        return b;
    };
    if l4 >= ip_end {
        return b;
    }
    let seg_len = ip_end - l4;
    match proto {
        IpProtocol::TCP if seg_len >= 20 => {
            b.swap(l4, l4 + 2);
            b.swap(l4 + 1, l4 + 3);
            let seq = u32::from_be_bytes([b[l4 + 4], b[l4 + 5], b[l4 + 6], b[l4 + 7]]);
            let ack = u32::from_be_bytes([b[l4 + 8], b[l4 + 9], b[l4 + 10], b[l4 + 11]]);
            let flags = b[l4 + 13];
            let hl = ((b[l4 + 12] >> 4) as usize) * 4;
            let payload = seg_len.saturating_sub(hl) as u32;
            let syn = flags & tcp_flags::SYN != 0;
            let fin = flags & tcp_flags::FIN != 0;
            let rst = flags & tcp_flags::RST != 0;
            let new_flags = if rst {
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
            b[l4 + 4..l4 + 8].copy_from_slice(&ack.to_be_bytes());
            b[l4 + 8..l4 + 12].copy_from_slice(&new_ack.to_be_bytes());
            b[l4 + 13] = new_flags;
            fill_l4(&mut b, l3, l4, ip_end, 16, v6, proto);
        }
        IpProtocol::UDP if seg_len >= 8 => {
            b.swap(l4, l4 + 2);
            b.swap(l4 + 1, l4 + 3);
            if b[l4 + 6] != 0 || b[l4 + 7] != 0 || v6 {
                fill_l4(&mut b, l3, l4, ip_end, 6, v6, proto);
            }
        }
        IpProtocol::ICMP if seg_len >= 8 && b[l4] == icmpv4::msg_type::ECHO_REQUEST => {
            b[l4] = icmpv4::msg_type::ECHO_REPLY;
            b[l4 + 2] = 0;
            b[l4 + 3] = 0;
            let ck = checksum::data(&b[l4..ip_end]);
            b[l4 + 2..l4 + 4].copy_from_slice(&ck.to_be_bytes());
        }
        IpProtocol::ICMPV6 if seg_len >= 8 && b[l4] == icmpv6::msg_type::ECHO_REQUEST => {
            b[l4] = icmpv6::msg_type::ECHO_REPLY;
            fill_l4(&mut b, l3, l4, ip_end, 2, v6, proto);
        }
        _ => {}
    }
    b
}

fn fill_l4(b: &mut [u8], l3: usize, l4: usize, end: usize, ck_at: usize, v6: bool, proto: u8) {
    b[l4 + ck_at] = 0;
    b[l4 + ck_at + 1] = 0;
    let len = (end - l4) as u32;
    let pseudo = if v6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&b[l3 + 8..l3 + 24]);
        d.copy_from_slice(&b[l3 + 24..l3 + 40]);
        checksum::pseudo_header_v6(s, d, proto, len)
    } else {
        let mut s = [0u8; 4];
        let mut d = [0u8; 4];
        s.copy_from_slice(&b[l3 + 12..l3 + 16]);
        d.copy_from_slice(&b[l3 + 16..l3 + 20]);
        checksum::pseudo_header_v4(s, d, proto, len as u16)
    };
    let mut ck = !checksum::fold(checksum::combine(&[pseudo, checksum::sum(&b[l4..end])]));
    if proto == IpProtocol::UDP {
        ck = checksum::udp_finish(ck);
    }
    b[l4 + ck_at..l4 + ck_at + 2].copy_from_slice(&ck.to_be_bytes());
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
