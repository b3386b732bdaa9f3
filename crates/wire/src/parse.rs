//! One-pass header walker locating the L2/L3/L4 headers of an Ethernet frame.
//!
//! Used for accounting and classification: it validates what it crosses
//! (Ethernet, VLAN/QinQ tags, the IPv4 header, the IPv6 header and its
//! extension headers) but does not look inside the transport header.

use crate::ethernet::ethertype;
use crate::{ipv4, ipv6, vlan, Error};

/// Header offsets found by [`layers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Layers {
    /// Length of the L2 header, VLAN tags included (offset of the L3 header).
    pub l2_len: usize,
    /// Number of VLAN / QinQ tags.
    pub vlan_tags: u8,
    /// Final EtherType after the VLAN tags.
    pub ethertype: u16,
    /// Offset of the L3 header from the frame start (always `Some(l2_len)` on success).
    pub l3_offset: Option<usize>,
    /// Offset of the transport header, when the packet is IPv4/IPv6 and
    /// carries it (`None` for non-first fragments and IPv6 "no next header").
    pub l4_offset: Option<usize>,
    /// Transport protocol (IPv4 protocol / last IPv6 next-header value).
    pub ip_proto: Option<u8>,
    /// Whether the IP packet is a fragment (IPv4 MF/offset or IPv6 fragment header).
    pub is_fragment: bool,
    /// Whether the packet is the first fragment (a fragment with offset 0);
    /// `false` for unfragmented packets.
    pub first_fragment: bool,
}

/// Walks an Ethernet frame: VLAN/QinQ tags, then IPv4 (header validated) or
/// IPv6 (extension headers walked) to the transport header. ARP and other
/// EtherTypes succeed with `l3_offset` set and `l4_offset == None`.
///
/// Never panics; errors come from the header that failed validation.
pub fn layers(frame: &[u8]) -> core::result::Result<Layers, Error> {
    let l2 = vlan::walk(frame)?;
    let l3 = l2.l3_offset;
    let mut out = Layers {
        l2_len: l3,
        vlan_tags: l2.tags,
        ethertype: l2.ethertype,
        l3_offset: Some(l3),
        ..Layers::default()
    };
    let rest = frame.get(l3..).ok_or(Error::Truncated)?;
    match l2.ethertype {
        ethertype::IPV4 => {
            let ip = ipv4::Packet::new_checked(rest)?;
            out.ip_proto = Some(ip.protocol());
            out.is_fragment = ip.is_fragment();
            out.first_fragment = out.is_fragment && ip.frag_offset() == 0;
            if ip.frag_offset() == 0 {
                out.l4_offset = Some(l3 + ip.header_len());
            }
        }
        ethertype::IPV6 => {
            let (proto, off, frag) = ipv6::walk_extension_headers(rest)?;
            out.ip_proto = Some(proto);
            if let Some(f) = frag {
                out.is_fragment = true;
                out.first_fragment = f.is_first();
            }
            let has_l4 = frag.is_none_or(|f| f.is_first());
            if has_l4 && proto != ipv6::next_header::IPV6_NONXT {
                out.l4_offset = Some(l3 + off);
            }
        }
        _ => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::XorShift;

    // Ethernet + IPv4 + UDP DNS query, generated and checksummed offline.
    const ETH_IPV4_UDP: [u8; 71] = [
        0x00, 0x16, 0x3e, 0x11, 0x22, 0x33, 0x52, 0x54, 0x00, 0x12, 0xab, 0xcd, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x39, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x9b, 0x12, 0xc0, 0xa8, 0x01, 0x0a,
        0xc0, 0xa8, 0x01, 0x01, 0xcf, 0x08, 0x00, 0x35, 0x00, 0x25, 0xcb, 0x68, 0x12, 0x34, 0x01,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70,
        0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];

    // IPv6 UDP 2001:db8::1 -> 2001:db8::2 "hello fusebox" (IPv6 header first).
    const IPV6_UDP: [u8; 61] = [
        0x62, 0xe1, 0x23, 0x45, 0x00, 0x15, 0x11, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x13, 0x88, 0x17, 0x70, 0x00,
        0x15, 0x81, 0x1a, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x66, 0x75, 0x73, 0x65, 0x62, 0x6f,
        0x78,
    ];

    fn eth(tags: &[(u16, u16)], ethertype: u16, l3: &[u8]) -> Vec<u8> {
        let dst: [u8; 6] = ETH_IPV4_UDP[..6].try_into().unwrap();
        let src: [u8; 6] = ETH_IPV4_UDP[6..12].try_into().unwrap();
        crate::build::ethernet(dst, src, tags, ethertype, l3)
    }

    #[test]
    fn ipv4_udp() {
        let l = layers(&ETH_IPV4_UDP).unwrap();
        assert_eq!(
            l,
            Layers {
                l2_len: 14,
                vlan_tags: 0,
                ethertype: 0x0800,
                l3_offset: Some(14),
                l4_offset: Some(34),
                ip_proto: Some(17),
                is_fragment: false,
                first_fragment: false,
            }
        );
    }

    #[test]
    fn qinq_ipv4_and_padding() {
        let mut f = eth(&[(0x88a8, 10), (0x8100, 20)], 0x0800, &ETH_IPV4_UDP[14..]);
        f.extend_from_slice(&[0; 5]); // Ethernet padding after total_len
        let l = layers(&f).unwrap();
        assert_eq!((l.l2_len, l.vlan_tags, l.ethertype), (22, 2, 0x0800));
        assert_eq!(
            (l.l3_offset, l.l4_offset, l.ip_proto),
            (Some(22), Some(42), Some(17))
        );
    }

    #[test]
    fn ipv4_fragments() {
        let mut ip = ETH_IPV4_UDP[14..].to_vec();
        ip[6..8].copy_from_slice(&0x2000u16.to_be_bytes()); // MF, offset 0
        let l = layers(&eth(&[], 0x0800, &ip)).unwrap();
        assert!(l.is_fragment && l.first_fragment);
        assert_eq!(l.l4_offset, Some(34));
        ip[6..8].copy_from_slice(&0x0003u16.to_be_bytes()); // last fragment, offset 24
        let l = layers(&eth(&[], 0x0800, &ip)).unwrap();
        assert!(l.is_fragment && !l.first_fragment);
        assert_eq!((l.l4_offset, l.ip_proto), (None, Some(17)));
    }

    #[test]
    fn ipv6_and_extension_headers() {
        let l = layers(&eth(&[(0x8100, 5)], 0x86dd, &IPV6_UDP)).unwrap();
        assert_eq!(
            (l.l2_len, l.l4_offset, l.ip_proto),
            (18, Some(58), Some(17))
        );
        // Insert a fragment header (non-first fragment).
        let mut ip = IPV6_UDP[..40].to_vec();
        ip[4..6].copy_from_slice(&29u16.to_be_bytes());
        ip[6] = 44;
        ip.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 1]); // offset 0, M=1
        ip.extend_from_slice(&IPV6_UDP[40..]);
        let l = layers(&eth(&[], 0x86dd, &ip)).unwrap();
        assert!(l.is_fragment && l.first_fragment);
        assert_eq!(l.l4_offset, Some(14 + 48));
        ip[42..44].copy_from_slice(&0x0008u16.to_be_bytes());
        let l = layers(&eth(&[], 0x86dd, &ip)).unwrap();
        assert!(l.is_fragment && !l.first_fragment);
        assert_eq!((l.l4_offset, l.ip_proto), (None, Some(17)));
        // No next header.
        let mut ip = IPV6_UDP[..40].to_vec();
        ip[4..6].fill(0);
        ip[6] = 59;
        let l = layers(&eth(&[], 0x86dd, &ip)).unwrap();
        assert_eq!((l.l4_offset, l.ip_proto), (None, Some(59)));
    }

    #[test]
    fn arp_and_unknown() {
        let l = layers(&eth(&[], 0x0806, &[0; 28])).unwrap();
        assert_eq!(
            (l.ethertype, l.l3_offset, l.l4_offset, l.ip_proto),
            (0x0806, Some(14), None, None)
        );
        let l = layers(&eth(&[(0x8100, 1)], 0x894f, &[])).unwrap();
        assert_eq!(
            (l.ethertype, l.l3_offset, l.l4_offset),
            (0x894f, Some(18), None)
        );
    }

    #[test]
    fn errors() {
        assert_eq!(layers(&[]), Err(Error::Truncated));
        assert_eq!(layers(&ETH_IPV4_UDP[..13]), Err(Error::Truncated));
        assert_eq!(layers(&ETH_IPV4_UDP[..33]), Err(Error::Truncated));
        let mut bad = ETH_IPV4_UDP;
        bad[14] = 0x65;
        assert_eq!(layers(&bad), Err(Error::Malformed));
        assert_eq!(
            layers(&eth(&[], 0x86dd, &IPV6_UDP[..50])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn every_truncation_is_safe() {
        let v6 = eth(&[(0x88a8, 1), (0x8100, 2)], 0x86dd, &IPV6_UDP);
        for fixture in [&ETH_IPV4_UDP[..], &v6[..]] {
            for n in 0..=fixture.len() {
                let res = layers(&fixture[..n]);
                if let Ok(l) = res {
                    assert!(l.l4_offset.unwrap_or(0) <= n);
                }
            }
        }
    }

    /// Thousands of pseudo-random byte strings, biased towards plausible
    /// headers, must never panic.
    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
        let mut buf = [0u8; 200];
        let mut ok = 0;
        for i in 0..20_000 {
            let len = (rng.next_u64() % 200) as usize;
            for b in buf[..len].iter_mut() {
                *b = rng.next_u64() as u8;
            }
            // Make many inputs reach the deeper parsers.
            if len >= 20 && i % 2 == 0 {
                let et: [u16; 5] = [0x0800, 0x86dd, 0x8100, 0x88a8, 0x0806];
                let e = et[(rng.next_u64() % 5) as usize];
                buf[12..14].copy_from_slice(&e.to_be_bytes());
                if i % 4 == 0 {
                    buf[14] = 0x45;
                    buf[16..18].copy_from_slice(&(len as u16 - 14).to_be_bytes());
                }
                if e == 0x86dd && len > 60 {
                    buf[14] = 0x60;
                    buf[18..20].copy_from_slice(&(len as u16 - 54).to_be_bytes());
                    let nh: [u8; 6] = [0, 43, 44, 60, 51, 59];
                    buf[20] = nh[(rng.next_u64() % 6) as usize];
                    for j in (54..len).step_by(8) {
                        buf[j] = nh[(rng.next_u64() % 6) as usize];
                        if j + 1 < len {
                            buf[j + 1] &= 0x03;
                        }
                    }
                }
            }
            if let Ok(l) = layers(&buf[..len]) {
                ok += 1;
                assert!(l.l2_len <= len);
                assert!(l.l4_offset.unwrap_or(0) <= len);
            }
        }
        assert!(ok > 1000, "only {ok} inputs parsed");
    }
}
