//! Toeplitz receive-side-scaling hash with a symmetric key.
//!
//! Written here rather than taken from a crate because it sits on the hot path of every
//! packet when work is spread over cores, and the symmetric key (Woo & Park, 2012) must be
//! used so both directions of a flow land on the same core.
//!
//! This is the one flow hash of FuseBox: [`crate::FlowKey::rss_hash`] is
//! [`symmetric_rss`]. Hash tables keyed by a flow hash the key with their own hasher.

use crate::FlowKey;
use std::net::IpAddr;

/// The symmetric RSS key of Woo & Park: `0x6d5a` repeated. With it, swapping source and
/// destination (addresses and ports) leaves the Toeplitz hash unchanged.
pub const SYMMETRIC_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
];

/// A Toeplitz hasher over a 40-byte key (inputs up to 36 bytes: IPv6 + ports).
#[derive(Debug, Clone)]
pub struct Toeplitz {
    key: [u8; 40],
}

impl Toeplitz {
    /// A hasher for `key`.
    pub fn new(key: [u8; 40]) -> Toeplitz {
        Toeplitz { key }
    }

    /// The Toeplitz hash of `input` (at most 36 bytes are used).
    pub fn hash(&self, input: &[u8]) -> u32 {
        let mut result = 0u32;
        // The 32-bit window of the key starting at bit i.
        let mut window = u32::from_be_bytes([self.key[0], self.key[1], self.key[2], self.key[3]]);
        for (i, &byte) in input.iter().take(36).enumerate() {
            let next = self.key[i + 4];
            for bit in 0..8 {
                if byte & (0x80 >> bit) != 0 {
                    result ^= window;
                }
                window = (window << 1) | u32::from((next >> (7 - bit)) & 1);
            }
        }
        result
    }

    /// The hash of a flow key laid out as RSS does: source address, destination address,
    /// then source and destination ports.
    pub fn hash_flow(&self, key: &FlowKey) -> u32 {
        let mut buf = [0u8; 36];
        let mut n = 0;
        for addr in [key.src, key.dst] {
            match addr {
                IpAddr::V4(a) => {
                    buf[n..n + 4].copy_from_slice(&a.octets());
                    n += 4;
                }
                IpAddr::V6(a) => {
                    buf[n..n + 16].copy_from_slice(&a.octets());
                    n += 16;
                }
            }
        }
        buf[n..n + 2].copy_from_slice(&key.src_port.to_be_bytes());
        buf[n + 2..n + 4].copy_from_slice(&key.dst_port.to_be_bytes());
        self.hash(&buf[..n + 4])
    }
}

/// The symmetric RSS hash of a flow: equal for a flow and its reverse.
pub fn symmetric_rss(key: &FlowKey) -> u32 {
    Toeplitz::new(SYMMETRIC_RSS_KEY).hash_flow(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;
    use wire::ip::protocol::{TCP, UDP};

    /// The key of Microsoft's "Verifying the RSS Hash Calculation".
    const MS_KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    /// Microsoft's IPv4 verification suite: (destination, destination port, source,
    /// source port, hash of the addresses only, hash with the TCP ports).
    type MsCase = ([u8; 4], u16, [u8; 4], u16, u32, u32);
    const MS_V4: [MsCase; 5] = [
        (
            [161, 142, 100, 80],
            1766,
            [66, 9, 149, 187],
            2794,
            0x323e_8fc2,
            0x51cc_c178,
        ),
        (
            [65, 69, 140, 83],
            4739,
            [199, 92, 111, 2],
            14230,
            0xd718_262a,
            0xc626_b0ea,
        ),
        (
            [12, 22, 207, 184],
            38024,
            [24, 19, 198, 95],
            12898,
            0xd2d0_a5de,
            0x5c2b_394a,
        ),
        (
            [209, 142, 163, 6],
            2217,
            [38, 27, 205, 30],
            48228,
            0x8298_9176,
            0xafc7_327f,
        ),
        (
            [202, 188, 127, 2],
            1303,
            [153, 39, 163, 191],
            44251,
            0x5d18_09c5,
            0x10e8_28a2,
        ),
    ];

    #[test]
    fn microsoft_ipv4_vectors() {
        let t = Toeplitz::new(MS_KEY);
        for (dst, dport, src, sport, addrs_only, with_ports) in MS_V4 {
            let k = FlowKey {
                src: Ipv4Addr::from(src).into(),
                dst: Ipv4Addr::from(dst).into(),
                src_port: sport,
                dst_port: dport,
                protocol: TCP,
            };
            assert_eq!(t.hash_flow(&k), with_ports, "{k:?}");
            let mut input = src.to_vec();
            input.extend_from_slice(&dst);
            assert_eq!(t.hash(&input), addrs_only, "{k:?}");
        }
    }

    /// Microsoft's IPv6 verification suite (with ports).
    #[test]
    fn microsoft_ipv6_vectors() {
        let t = Toeplitz::new(MS_KEY);
        let cases = [
            (
                "3ffe:2501:200:3::1",
                1766,
                "3ffe:2501:200:1fff::7",
                2794,
                0x2cc1_8cd5,
                0x4020_7d3d,
            ),
            (
                "ff02::1",
                4739,
                "3ffe:501:8::260:97ff:fe40:efab",
                14230,
                0x0f0c_461c,
                0xdde5_1bbf,
            ),
            (
                "fe80::200:f8ff:fe21:67cf",
                38024,
                "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
                44251,
                0x4b61_e985,
                0x02d1_feef,
            ),
        ];
        for (dst, dport, src, sport, addrs_only, with_ports) in cases {
            let (dst, src): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
                (dst.parse().unwrap(), src.parse().unwrap());
            let k = FlowKey {
                src: src.into(),
                dst: dst.into(),
                src_port: sport,
                dst_port: dport,
                protocol: TCP,
            };
            assert_eq!(t.hash_flow(&k), with_ports, "{k:?}");
            let mut input = src.octets().to_vec();
            input.extend_from_slice(&dst.octets());
            assert_eq!(t.hash(&input), addrs_only, "{k:?}");
        }
    }

    #[test]
    fn symmetric_key_is_0x6d5a_repeated() {
        assert!(SYMMETRIC_RSS_KEY.chunks(2).all(|c| c == [0x6d, 0x5a]));
        // The Microsoft key is not symmetric: the property comes from the key.
        let (dst, dport, src, sport, _, _) = MS_V4[0];
        let k = FlowKey {
            src: Ipv4Addr::from(src).into(),
            dst: Ipv4Addr::from(dst).into(),
            src_port: sport,
            dst_port: dport,
            protocol: TCP,
        };
        let t = Toeplitz::new(MS_KEY);
        assert_ne!(t.hash_flow(&k), t.hash_flow(&k.reversed()));
        assert_eq!(symmetric_rss(&k), symmetric_rss(&k.reversed()));
    }

    proptest! {
        #[test]
        fn symmetric(a: u32, b: u32, sp: u16, dp: u16) {
            let k = FlowKey { src: Ipv4Addr::from(a).into(), dst: Ipv4Addr::from(b).into(), src_port: sp, dst_port: dp, protocol: UDP };
            prop_assert_eq!(symmetric_rss(&k), symmetric_rss(&k.reversed()));
        }

        #[test]
        fn symmetric_v6(a: u128, b: u128, sp: u16, dp: u16) {
            let k = FlowKey {
                src: std::net::Ipv6Addr::from(a).into(),
                dst: std::net::Ipv6Addr::from(b).into(),
                src_port: sp,
                dst_port: dp,
                protocol: TCP,
            };
            prop_assert_eq!(symmetric_rss(&k), symmetric_rss(&k.reversed()));
        }
    }
}
