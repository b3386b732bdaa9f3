//! Toeplitz receive-side-scaling hash with a symmetric key.
//!
//! Written here rather than taken from a crate because it sits on the hot path of every
//! packet when work is spread over cores, and the symmetric key (Woo & Park, 2012) must be
//! used so both directions of a flow land on the same core.

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

    /// Verification vector from Microsoft's RSS documentation (IPv4 with ports).
    #[test]
    fn microsoft_vector() {
        let key = [
            0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
            0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
            0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
        ];
        let k = FlowKey {
            src: Ipv4Addr::new(66, 9, 149, 187).into(),
            dst: Ipv4Addr::new(161, 142, 100, 80).into(),
            src_port: 2794,
            dst_port: 1766,
            protocol: 6,
        };
        assert_eq!(Toeplitz::new(key).hash_flow(&k), 0x51cc_c178);
    }

    proptest! {
        #[test]
        fn symmetric(a: u32, b: u32, sp: u16, dp: u16) {
            let k = FlowKey { src: Ipv4Addr::from(a).into(), dst: Ipv4Addr::from(b).into(), src_port: sp, dst_port: dp, protocol: 17 };
            prop_assert_eq!(symmetric_rss(&k), symmetric_rss(&k.reversed()));
        }
    }
}
