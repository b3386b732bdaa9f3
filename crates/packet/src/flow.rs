//! 5-tuple flow keys.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A transport flow: addresses, ports (0 when the protocol has none) and IP protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (TCP/UDP), ICMP echo identifier, or 0.
    pub src_port: u16,
    /// Destination port (TCP/UDP), ICMP echo identifier, or 0.
    pub dst_port: u16,
    /// IP protocol number.
    pub protocol: u8,
}

impl FlowKey {
    /// The key of the reverse direction.
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            protocol: self.protocol,
        }
    }

    /// The flow key of an Ethernet frame (VLAN tags, IPv4 and IPv6 extension headers are
    /// walked). Non-first fragments and non-IP frames have no ports (0).
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

    /// The flow key of a packet starting at its IP header (version read from the first nibble).
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

    fn from_ip_at(ip: &[u8], l4: Option<usize>, proto: Option<u8>, ports: bool) -> Option<FlowKey> {
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
        let (mut sp, mut dp) = (0, 0);
        if ports {
            if let Some(t) = l4.and_then(|o| ip.get(o..)) {
                match protocol {
                    6 | 17 | 132 if t.len() >= 4 => {
                        sp = u16::from_be_bytes([t[0], t[1]]);
                        dp = u16::from_be_bytes([t[2], t[3]]);
                    }
                    // ICMP echo / reply: the identifier stands for both ports.
                    1 if t.len() >= 6 && matches!(t[0], 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18) => {
                        sp = u16::from_be_bytes([t[4], t[5]]);
                        dp = sp;
                    }
                    _ => {}
                }
            }
        }
        Some(FlowKey {
            src,
            dst,
            src_port: sp,
            dst_port: dp,
            protocol,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

    /// Ethernet (with optional 802.1Q tag) around an L3 packet.
    fn eth(vlan: Option<u16>, ethertype: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = MAC.to_vec();
        if let Some(vid) = vlan {
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&vid.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    /// IPv4 header (no options, checksum filled) followed by `l4`.
    fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, frag_raw: u16, l4: &[u8]) -> Vec<u8> {
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        ip[6..8].copy_from_slice(&frag_raw.to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        let mut p = wire::ipv4::Packet::new_unchecked(&mut ip[..]);
        p.fill_checksum();
        ip.extend_from_slice(l4);
        ip
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

    fn v4key(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16, protocol: u8) -> FlowKey {
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
        let tcp = eth(None, 0x0800, &ipv4(A, B, 6, 0x4000, &ports(40000, 80, 20)));
        assert_eq!(
            FlowKey::from_ethernet(&tcp),
            Some(v4key(A, B, 40000, 80, 6))
        );
        let udp = eth(Some(7), 0x0800, &ipv4(B, A, 17, 0, &ports(53, 5353, 8)));
        assert_eq!(
            FlowKey::from_ethernet(&udp),
            Some(v4key(B, A, 53, 5353, 17))
        );
        assert_eq!(
            FlowKey::from_ip(&ipv4(A, B, 17, 0, &ports(1, 2, 8))),
            Some(v4key(A, B, 1, 2, 17))
        );
    }

    #[test]
    fn ipv4_icmp_echo_and_other_protocols() {
        let mut echo = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
        let f = eth(None, 0x0800, &ipv4(A, B, 1, 0, &echo));
        assert_eq!(
            FlowKey::from_ethernet(&f),
            Some(v4key(A, B, 0x1234, 0x1234, 1))
        );
        // Destination unreachable: no identifier.
        echo[0] = 3;
        let f = eth(None, 0x0800, &ipv4(A, B, 1, 0, &echo));
        assert_eq!(FlowKey::from_ethernet(&f), Some(v4key(A, B, 0, 0, 1)));
        // GRE: no ports.
        let f = eth(None, 0x0800, &ipv4(A, B, 47, 0, &[0; 8]));
        assert_eq!(FlowKey::from_ethernet(&f), Some(v4key(A, B, 0, 0, 47)));
    }

    #[test]
    fn ipv4_fragments() {
        let l4 = ports(1000, 2000, 20);
        // First fragment (MF, offset 0): ports are there.
        let f = eth(None, 0x0800, &ipv4(A, B, 6, 0x2000, &l4));
        assert_eq!(FlowKey::from_ethernet(&f), Some(v4key(A, B, 1000, 2000, 6)));
        // Later fragment (offset 185 * 8): the bytes are not a TCP header.
        let ip = ipv4(A, B, 6, 185, &l4);
        assert_eq!(
            FlowKey::from_ethernet(&eth(None, 0x0800, &ip)),
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
            protocol: 17,
        };
        let ip = ipv6(s, d, 17, &ports(5000, 443, 8));
        assert_eq!(FlowKey::from_ip(&ip), Some(want));
        assert_eq!(
            FlowKey::from_ethernet(&eth(Some(3), 0x86dd, &ip)),
            Some(want)
        );

        // Hop-by-hop options then a first fragment then UDP.
        let mut rest = vec![44, 0, 1, 4, 0, 0, 0, 0]; // HBH: next = fragment, 8 bytes
        rest.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 9]); // offset 0, MF
        rest.extend_from_slice(&ports(5000, 443, 8));
        let ip = ipv6(s, d, 0, &rest);
        assert_eq!(FlowKey::from_ip(&ip), Some(want));
        assert_eq!(FlowKey::from_ethernet(&eth(None, 0x86dd, &ip)), Some(want));

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
            FlowKey::from_ethernet(&eth(None, 0x86dd, &ip)),
            Some(no_ports)
        );
    }

    #[test]
    fn not_ip_or_broken() {
        assert_eq!(FlowKey::from_ethernet(&eth(None, 0x0806, &[0; 28])), None);
        assert_eq!(FlowKey::from_ethernet(&[]), None);
        assert_eq!(FlowKey::from_ip(&[]), None);
        assert_eq!(FlowKey::from_ip(&[0x50; 40]), None);
        let good = eth(None, 0x0800, &ipv4(A, B, 6, 0, &ports(1, 2, 20)));
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
        let reply = eth(None, 0x0800, &ipv4(B, A, 6, 0, &ports(80, 40000, 20)));
        assert_eq!(FlowKey::from_ethernet(&reply), Some(r));
    }
}
