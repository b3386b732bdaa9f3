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
        Self::from_ip_at(ip, layers.l4_offset.map(|o| o - l3), layers.ip_proto, layers.first_fragment || !layers.is_fragment)
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
            let first = frag.map_or(true, |f| f.offset == 0);
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
        Some(FlowKey { src, dst, src_port: sp, dst_port: dp, protocol })
    }
}
