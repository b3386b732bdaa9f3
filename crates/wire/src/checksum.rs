//! Internet checksum (RFC 1071) helpers and incremental updates (RFC 1624).
//!
//! Sums are carried as `u32` ones'-complement accumulators that are *not*
//! folded, so partial sums (pseudo headers, header pieces) can be combined
//! with [`combine`] before a single [`fold`].
//!
//! UDP note: a UDP checksum field of `0` means "no checksum" (IPv4 only), so
//! a computed checksum of `0` is transmitted as `0xFFFF` ([`udp_finish`]), and
//! a field of `0` must stay `0` across incremental updates
//! ([`update16_udp`] / [`update32_udp`]).

/// Reduces a 64-bit accumulator to 32 bits while preserving its value
/// modulo `0xFFFF` (which is all the ones'-complement sum cares about).
#[inline]
fn reduce64(mut acc: u64) -> u32 {
    while acc > u64::from(u32::MAX) {
        acc = (acc & 0xFFFF_FFFF) + (acc >> 32);
    }
    acc as u32
}

/// Ones'-complement sum of `data` as big-endian 16-bit words (an odd trailing
/// byte is padded with zero), returned folded into 16 bits (at most 0xFFFF) so a few
/// sums can be added in a `u32` before the final [`fold`].
///
/// Adds 32-bit big-endian words: since 2^16 ≡ 1 (mod 0xFFFF), that is the same sum modulo
/// 0xFFFF as adding the 16-bit words, in half the additions (the hot path of every IP
/// header check).
#[inline]
pub fn sum(data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut quads = data.chunks_exact(4);
    for q in &mut quads {
        acc += u64::from(u32::from_be_bytes([q[0], q[1], q[2], q[3]]));
    }
    let mut pairs = quads.remainder().chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(u16::from_be_bytes([*last, 0]));
    }
    // Fold to 16 bits so callers can add a few sums and constants in a u32.
    u32::from(fold(reduce64(acc)))
}

/// Folds the carries of a ones'-complement accumulator into 16 bits
/// (the result is *not* inverted).
#[inline]
pub fn fold(sum: u32) -> u16 {
    let mut s = sum;
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

/// Internet checksum of `data`: `!fold(sum(data))`.
#[inline]
pub fn data(data: &[u8]) -> u16 {
    !fold(sum(data))
}

/// Whether the IPv4 header `h` (exactly its bytes) checksums to zero. The common 20-byte
/// header is summed at a length the compiler knows, so the loop is unrolled.
#[inline]
pub fn ipv4_header_ok(h: &[u8]) -> bool {
    match <&[u8; 20]>::try_from(h) {
        Ok(h20) => header20_ok(h20),
        Err(_) => data(h) == 0,
    }
}

/// [`ipv4_header_ok`] for the common 20-byte header, in a few instructions: the five 32-bit
/// words are added as the machine loads them (native byte order) and the sum is tested
/// for a multiple of 0xFFFF. In either byte order a word's value is the big-endian one
/// times 2^8 or 2^0 modulo 0xFFFF (2^16 ≡ 1), and 2^8 is invertible modulo 0xFFFF, so the
/// sum is a multiple of 0xFFFF exactly when the big-endian sum is; `!fold(sum) == 0` means
/// precisely that, for a non-zero sum (a header of zeros folds to 0 and fails).
#[inline]
fn header20_ok(h: &[u8; 20]) -> bool {
    let w = |i: usize| u64::from(u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let acc = w(0) + w(4) + w(8) + w(12) + w(16);
    acc != 0 && acc % 0xFFFF == 0
}

/// Adds several unfolded accumulators together (still unfolded).
pub fn combine(sums: &[u32]) -> u32 {
    reduce64(sums.iter().map(|&s| u64::from(s)).sum())
}

/// Unfolded sum of the IPv4 pseudo header (RFC 768 / RFC 793).
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, length: u16) -> u32 {
    sum(&src) + sum(&dst) + u32::from(proto) + u32::from(length)
}

/// Unfolded sum of the IPv6 pseudo header (RFC 8200 section 8.1).
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, length: u32) -> u32 {
    combine(&[
        sum(&src),
        sum(&dst),
        length >> 16,
        length & 0xFFFF,
        u32::from(next_header),
    ])
}

/// The operands RFC 1624 eqn. 3 adds when a 16-bit word changes from `old` to `new`
/// (`~m + m'`). Summing the operands of several changes and folding once gives exactly the
/// checksum the changes made one after the other would give.
#[inline]
pub fn operands16(old: u16, new: u16) -> u32 {
    u32::from(!old) + u32::from(new)
}

/// The operands of a change of a 32-bit value (two aligned 16-bit words, e.g. an IPv4
/// address) from `old` to `new` (see [`operands16`]).
#[inline]
pub fn operands32(old: u32, new: u32) -> u32 {
    operands16((old >> 16) as u16, (new >> 16) as u16) + operands16(old as u16, new as u16)
}

/// Incrementally updates `old_checksum` after a 16-bit word changed from
/// `old` to `new`, using RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn update16(old_checksum: u16, old: u16, new: u16) -> u16 {
    !fold(u32::from(!old_checksum) + operands16(old, new))
}

/// Incrementally updates `old_checksum` after a 32-bit value (two aligned
/// 16-bit words, e.g. an IPv4 address) changed from `old` to `new`
/// (RFC 1624 eqn. 3).
#[inline]
pub fn update32(old_checksum: u16, old: u32, new: u32) -> u16 {
    !fold(u32::from(!old_checksum) + operands32(old, new))
}

/// What decrementing an IPv4 TTL by one adds to the one's-complement sum of the header
/// (RFC 1624): the TTL is the high byte of the TTL/protocol word, so the word drops by
/// `0x0100`, whose operands `~m + m'` are `0xFEFF`. Summed `n` times for `n` decrements.
pub const TTL_DECREMENT: u32 = 0xFEFF;

/// The IPv4 header checksum after the TTL was decremented by one, computed exactly as
/// Click's `DecIPTTL` does: `sum = ~old + 0xFEFF; new = ~(sum + (sum >> 16))` (one carry
/// fold, RFC 1624).
#[inline]
pub fn ttl_decremented(old_checksum: u16) -> u16 {
    let sum = u32::from(!old_checksum) + TTL_DECREMENT;
    !((sum + (sum >> 16)) as u16)
}

/// Maps a freshly computed UDP checksum of `0` to `0xFFFF` (RFC 768: a
/// transmitted `0` means "no checksum").
#[inline]
pub fn udp_finish(computed: u16) -> u16 {
    if computed == 0 {
        0xFFFF
    } else {
        computed
    }
}

/// Incremental update for a UDP checksum field: a field of `0` ("none")
/// stays `0`; otherwise [`update16`] with a `0` result mapped to `0xFFFF`.
#[inline]
pub fn update16_udp(old_checksum: u16, old: u16, new: u16) -> u16 {
    if old_checksum == 0 {
        0
    } else {
        udp_finish(update16(old_checksum, old, new))
    }
}

/// 32-bit variant of [`update16_udp`] (e.g. for an address rewrite).
#[inline]
pub fn update32_udp(old_checksum: u16, old: u32, new: u32) -> u16 {
    if old_checksum == 0 {
        0
    } else {
        udp_finish(update32(old_checksum, old, new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::XorShift;

    #[test]
    fn ttl_decrement_matches_a_full_recompute() {
        let mut rng = XorShift(0x005e_ed77);
        for _ in 0..2000 {
            let mut h = [0u8; 20];
            for b in h.iter_mut() {
                *b = rng.next_u64() as u8;
            }
            h[8] = h[8].max(1);
            h[10] = 0;
            h[11] = 0;
            let c = data(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h[8] -= 1;
            let inc = ttl_decremented(c);
            h[10..12].copy_from_slice(&inc.to_be_bytes());
            // The incremental result verifies (0 and 0xFFFF are the same one's-complement 0).
            assert!(matches!(data(&h), 0 | 0xffff), "{h:?}");
        }
        assert_eq!(TTL_DECREMENT, u32::from(!0x0100u16));
    }

    #[test]
    fn ipv4_header_check_is_the_plain_sum_at_every_length() {
        let mut rng = XorShift(0x1234_5678);
        for len in [0usize, 1, 19, 20, 21, 24, 40, 60] {
            for _ in 0..500 {
                let mut h: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                assert_eq!(ipv4_header_ok(&h), data(&h) == 0, "{h:?}");
                if len >= 12 {
                    // A correct checksum in place verifies.
                    h[10] = 0;
                    h[11] = 0;
                    let c = data(&h);
                    h[10..12].copy_from_slice(&c.to_be_bytes());
                    assert!(ipv4_header_ok(&h), "{h:?}");
                }
            }
        }
    }

    #[test]
    fn the_20_byte_check_agrees_at_the_edges_of_ones_complement() {
        // Zeros sum to 0, which folds to 0 and fails; all ones and a sum that is a
        // non-zero multiple of 0xFFFF pass; both forms of zero in the checksum field
        // (0x0000 and 0xFFFF) agree with the plain sum.
        let mut rng = XorShift(0x0dd_ba11);
        let mut cases: Vec<[u8; 20]> = vec![[0; 20], [0xff; 20]];
        for _ in 0..2000 {
            let mut h = [0u8; 20];
            for b in h.iter_mut() {
                *b = rng.next_u64() as u8;
            }
            h[10] = 0;
            h[11] = 0;
            let c = data(&h);
            for field in [c, !c, 0, 0xffff, c.swap_bytes()] {
                h[10..12].copy_from_slice(&field.to_be_bytes());
                cases.push(h);
            }
        }
        for h in &cases {
            assert_eq!(ipv4_header_ok(h), data(h) == 0, "{h:?}");
        }
        assert!(!ipv4_header_ok(&[0; 20]) && ipv4_header_ok(&[0xff; 20]));
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: 00 01 f2 03 f4 f5 f6 f7 -> sum ddf2.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&bytes)), 0xddf2);
        assert_eq!(data(&bytes), !0xddf2);
    }

    #[test]
    fn odd_length_pads() {
        assert_eq!(sum(&[0x12]), 0x1200);
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(sum(&[]), 0);
    }

    #[test]
    fn ipv4_header_checksum() {
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(data(&hdr), 0xb861);
    }

    #[test]
    fn combine_matches_concatenation() {
        let a = [1u8, 2, 3, 4, 0xff, 0xff];
        let b = [0xffu8, 0xfe, 9, 8];
        let mut all = a.to_vec();
        all.extend_from_slice(&b);
        assert_eq!(fold(combine(&[sum(&a), sum(&b)])), fold(sum(&all)));
        assert_eq!(fold(combine(&[u32::MAX, u32::MAX, 7])), {
            // (2*(2^32-1) + 7) mod 0xFFFF, folded.
            let v = (2 * (u64::from(u32::MAX)) + 7) % 0xFFFF;
            v as u16
        });
    }

    #[test]
    fn large_input_does_not_overflow() {
        let big = vec![0xffu8; 300_000];
        assert_eq!(fold(sum(&big)), 0xFFFF);
        assert_eq!(data(&big), 0);
    }

    #[test]
    fn pseudo_headers() {
        let v4 = pseudo_header_v4([192, 168, 1, 10], [192, 168, 1, 1], 17, 0x25);
        assert_eq!(
            fold(v4),
            fold(0xc0a8 + 0x010a + 0xc0a8 + 0x0101 + 17 + 0x25)
        );
        let mut s = [0u8; 16];
        s[15] = 1;
        let v6 = pseudo_header_v6(s, s, 58, 0x0001_0002);
        assert_eq!(fold(v6), fold(2 + 1 + 2 + 58));
    }

    #[test]
    fn rfc1624_section4_corner_case() {
        // Sum of other octets 0xCD7A, m = 0x5555 -> m' = 0x3285.
        let hc = !fold(0xCD7A + 0x5555);
        assert_eq!(hc, 0xDD2F);
        assert_eq!(update16(hc, 0x5555, 0x3285), 0x0000);
        assert_eq!(!fold(0xCD7A + 0x3285), 0x0000);
    }

    #[test]
    fn checksum_ffff_and_zero_inputs() {
        // Header whose checksum is 0x0000 (sum of the rest is 0xFFFF), then a
        // word changes 0x0000 -> 0xFFFF and back: eqn. 3 must agree with a
        // full recomputation (eqn. 2 would produce 0xFFFF here).
        let mut hdr = [0x45u8, 0x00, 0xba, 0xff, 0, 0, 0, 0];
        assert_eq!(data(&hdr), 0x0000);
        hdr[4..6].copy_from_slice(&[0xff, 0xff]);
        assert_eq!(update16(0x0000, 0x0000, 0xFFFF), data(&hdr));
        hdr[4..6].copy_from_slice(&[0x00, 0x00]);
        assert_eq!(
            update16(data(&[0x45, 0x00, 0xba, 0xff, 0xff, 0xff]), 0xFFFF, 0),
            data(&hdr)
        );
        // An old checksum of 0xFFFF (negative zero) is handled like 0x0000.
        assert_eq!(update16(0xFFFF, 0x1234, 0x1234), 0x0000);
    }

    /// Compares incremental updates with full recomputation on random headers.
    #[test]
    fn incremental_matches_recompute() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for case in 0..5000 {
            let mut hdr = [0u8; 20];
            for b in hdr.iter_mut() {
                *b = rng.next_u64() as u8;
            }
            // Force a non-zero word so the data is never all zeros (the only
            // case where eqn. 3 returns 0x0000 instead of 0xFFFF).
            hdr[0] = 0x45;
            // Exercise extreme values often.
            let pick = |r: u64| -> u16 {
                match r % 5 {
                    0 => 0x0000,
                    1 => 0xFFFF,
                    _ => (r >> 8) as u16,
                }
            };
            hdr[10] = 0;
            hdr[11] = 0;
            let off = [2usize, 4, 6, 8, 12, 14, 16, 18][case % 8];
            hdr[off..off + 2].copy_from_slice(&pick(rng.next_u64()).to_be_bytes());
            if case % 3 == 0 {
                // Force the RFC 1624 section 4 situation: old checksum 0x0000.
                hdr[18] = 0;
                hdr[19] = 0;
                let rest = fold(sum(&hdr));
                hdr[18..20].copy_from_slice(&(!rest).to_be_bytes());
                assert_eq!(data(&hdr), 0);
            }
            let old_ck = data(&hdr);
            let old_val = u16::from_be_bytes([hdr[off], hdr[off + 1]]);
            let new_val = pick(rng.next_u64());
            hdr[off..off + 2].copy_from_slice(&new_val.to_be_bytes());
            let full = data(&hdr);
            assert_eq!(update16(old_ck, old_val, new_val), full, "case {case}");

            // 32-bit update of the address at 12..16.
            let old32 = u32::from_be_bytes([hdr[12], hdr[13], hdr[14], hdr[15]]);
            let new32 = match rng.next_u64() % 4 {
                0 => 0,
                1 => u32::MAX,
                _ => rng.next_u64() as u32,
            };
            hdr[12..16].copy_from_slice(&new32.to_be_bytes());
            assert_eq!(update32(full, old32, new32), data(&hdr), "case32 {case}");
        }
    }

    #[test]
    fn udp_rules() {
        assert_eq!(udp_finish(0), 0xFFFF);
        assert_eq!(udp_finish(0x1234), 0x1234);
        assert_eq!(update16_udp(0, 0x1111, 0x2222), 0);
        assert_eq!(update32_udp(0, 0x1111, 0x2222), 0);
        // A result of 0 is transmitted as 0xFFFF.
        let hc = !fold(0xCD7A + 0x5555);
        assert_eq!(update16_udp(hc, 0x5555, 0x3285), 0xFFFF);
        assert_eq!(update16_udp(0x1234, 0, 0), 0x1234);
    }
}
