//! Seeded random routing tables shaped like real BGP tables, for the longest-prefix-match
//! tests and benchmarks ([`super::Lpm`], [`super::Lpm6`]). Deterministic: the same size and
//! seed give the same table on every machine.

use crate::net::mask;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A xorshift64 generator (seed 0 is replaced by 1).
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed | 1)
    }

    /// The next 64 random bits.
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// The next 128 random bits.
    #[inline]
    pub fn next128(&mut self) -> u128 {
        (u128::from(self.next()) << 64) | u128::from(self.next())
    }

    /// A value below `n` (`n` > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `n` random IPv4 prefixes whose lengths follow a BGP table: about 60 % /24, 32 % /16–/23,
/// 4 % /8–/15 and 4 % /25–/32 (each range uniform), addresses uniform over the whole space.
pub fn bgp_v4(n: usize, seed: u64) -> Vec<(Ipv4Addr, u8)> {
    let mut r = XorShift::new(seed);
    (0..n)
        .map(|_| {
            let len = match r.below(100) {
                0..=59 => 24,
                60..=91 => 16 + r.below(8) as u8,
                92..=95 => 8 + r.below(8) as u8,
                _ => 25 + r.below(8) as u8,
            };
            (Ipv4Addr::from(r.next() as u32 & mask(len)), len)
        })
        .collect()
}

/// The length of an IPv6 prefix drawn from the distribution of [`bgp_v6`].
fn v6_len(r: &mut XorShift) -> u8 {
    match r.below(1000) {
        0..=499 => 48,
        500..=619 => 32,
        620..=679 => 44,
        680..=739 => 40,
        740..=769 => 36,
        770..=879 => 33 + r.below(15) as u8, // /33–/47
        880..=909 => 29,
        910..=939 => 19 + r.below(13) as u8, // /19–/31
        940..=959 => 56,
        960..=979 => 64,
        _ => 49 + r.below(16) as u8, // /49–/64
    }
}

/// `n` random IPv6 prefixes shaped like the IPv6 BGP table.
///
/// Lengths (per mille): /48 500; /32 120, /44 60, /40 60, /36 30 and /33–/47 uniform 110
/// (together 380 for /32–/47); /29 30 and /19–/31 uniform 30 (60); /56 20, /64 20 and
/// /49–/64 uniform 20 (60). This is the shape of the public IPv6 table (about half /48,
/// then /32 and the nibble-aligned /36–/44 allocations, a few short aggregates and more
/// specifics), approximated rather than copied from one snapshot.
///
/// Addresses lie in 2000::/3. Like the real table, prefixes nest: half of them (when an
/// earlier, shorter prefix is found among four random tries) extend an earlier prefix
/// with random bits (a customer /48 inside a provider /32), the rest are random. Lengths
/// repeat, so identical prefixes can occur; lookups must return the first.
pub fn bgp_v6(n: usize, seed: u64) -> Vec<(Ipv6Addr, u8)> {
    let mut r = XorShift::new(seed ^ 0x6666_0000_0000_0006);
    let mut out: Vec<(u128, u8)> = Vec::with_capacity(n);
    for _ in 0..n {
        let len = v6_len(&mut r);
        let mut a = (r.next128() >> 3) | (1u128 << 125); // 2000::/3
        if !out.is_empty() && r.below(2) == 0 {
            for _ in 0..4 {
                let (p, l) = out[r.below(out.len() as u64) as usize];
                if l < len {
                    let m = super::mask6(l);
                    a = (p & m) | (a & !m);
                    break;
                }
            }
        }
        out.push((a & super::mask6(len), len));
    }
    out.into_iter()
        .map(|(a, l)| (Ipv6Addr::from(a), l))
        .collect()
}
