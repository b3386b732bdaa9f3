//! The hashes elements share: FNV-1a ([`Fnv`], [`fnv1a`]), the splitmix64 finaliser, and
//! [`FlowHasher`], the hasher of flow-keyed maps (the rewriters' mapping tables, the
//! executor's remembered flows). Deterministic, so runs repeat. A neutral place: the
//! rewriters, Maglev and the executor all use them, none owns them.

use std::hash::Hasher;

/// The FNV-1a offset basis.
pub const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// The FNV-1a prime.
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a of `bytes`, starting from `basis` ([`FNV_BASIS`], or a seeded basis).
#[inline]
pub fn fnv1a(basis: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(basis, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// FNV-1a, used both for the table's hash map (deterministic and fast) and for the
/// rewriters' pseudo-random choices.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Fnv {
    /// FNV-1a starting from `basis` instead of [`FNV_BASIS`].
    pub fn with_basis(basis: u64) -> Fnv {
        Fnv(basis)
    }
}

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(FNV_BASIS)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = fnv1a(self.0, bytes);
    }
}

/// The hasher of flow-keyed hash maps: FNV-1a with the splitmix64 finaliser, so the
/// high bits the hash map tags its slots with are well mixed (plain FNV-1a leaves them poor
/// for short keys, and lookups then compare many keys).
#[derive(Debug, Clone, Copy, Default)]
pub struct FlowHasher(Fnv);

impl Hasher for FlowHasher {
    #[inline]
    fn finish(&self) -> u64 {
        splitmix64(self.0.finish())
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }
    #[inline]
    fn write_u128(&mut self, v: u128) {
        // One folded multiply per half (the keys are packed flow identifiers).
        let m = |a: u64, b: u64| {
            let p = u128::from(a) * u128::from(b);
            (p as u64) ^ ((p >> 64) as u64)
        };
        let lo = m(v as u64 ^ 0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344);
        let hi = m(
            (v >> 64) as u64 ^ 0xA409_3822_299F_31D0,
            0x082E_FA98_EC4E_6C89,
        );
        self.0 .0 = lo ^ hi.rotate_left(23);
    }
}

/// The splitmix64 finaliser: spreads an FNV hash's bits.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
