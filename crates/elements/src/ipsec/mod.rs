//! An IPsec gateway: ESP in tunnel mode (RFC 4303) with AES-GCM (RFC 4106), the third heavy
//! NF of NFCompass beside forwarding and DPI.
//!
//! * [`IPsecGCMEncap`] takes the IPv4 datagram at the network header annotation, encrypts it
//!   whole and sends it inside a new outer IPv4 header (protocol 50) from the tunnel's SRC
//!   to its DST.
//! * [`IPsecGCMDecap`] takes such an ESP packet, finds its security association by SPI,
//!   rejects replays (the anti-replay window of RFC 4303 §3.4.3), checks the ICV, decrypts
//!   it and puts the inner datagram where the outer one was.
//!
//! The wire format, as the Linux kernel's `rfc4106(gcm(aes))` writes it:
//!
//! ```text
//! outer IPv4 (20) | SPI (4) | SEQ (4, low 32 bits) | IV (8) |
//!     ciphertext of [inner datagram | padding 1, 2, 3 … | pad length (1) | next header 4 (1)] |
//!     ICV (16)
//! ```
//!
//! The key is 16 or 32 bytes (AES-GCM-128 or -256) and a 4-byte salt; the 12-byte GCM nonce
//! is the salt followed by the 8-byte explicit IV; the associated data is the SPI and the
//! sequence number (SPI, high and low 32 bits with extended sequence numbers, RFC 4106 §5).
//! Padding brings the plaintext to a multiple of 4 bytes, as the kernel does.
//!
//! *Decisions.*
//!
//! * The explicit IV is the packet's 64-bit sequence number (RFC 4106 §3.1 allows any
//!   counter): unique under a key for as long as the SA's sequence numbers are, and
//!   deterministic, so every execution mode writes the same bytes. A configuration's key
//!   must therefore never be used by two element instances that both encrypt (or by one
//!   run after another with the same `SEQ`): a nonce reused under a GCM key loses both
//!   secrecy and integrity. Replicas on several workers (`--cores N`) are told their share
//!   ([`crate::WorkerShare`]) and use disjoint, interleaved sequence numbers (worker `w` of
//!   `n` sends `SEQ + w`, `SEQ + w + n`, …).
//! * Extended sequence numbers (64-bit, RFC 4303 §2.2.1) are supported, off by default
//!   (`ESN true` on both sides). Without them the sender stops at 2^32 − 1 (later packets
//!   are dropped as `seq-overflow`: the SA must be rekeyed), as RFC 4303 §3.3.3 asks.
//! * The receiver's window (`REPLAY`, 64 packets by default, at most 4096; 0 turns the check
//!   off, without ESN only) is checked before the ICV and updated only after it verified
//!   (RFC 4303 §3.4.3); the high half of an extended sequence number is inferred as in its
//!   Appendix A2.
//! * Only IPv4 inside IPv4 (next header 4). Fragments of ESP packets are not reassembled
//!   (dropped as `malformed`); the inner datagram is cut to its IP total length (TFC padding
//!   is allowed).
//!
//! Both elements are opaque to synthesis (no model: every byte changes, and each packet
//! depends on the sequence state) and record themselves as opaque for the fast path, so
//! flows through them take the full chain in every mode and the outputs stay identical.

mod decap;
mod encap;
mod window;

pub use decap::{IPsecGCMDecap, IPsecGCMDecapReason};
pub use encap::{IPsecGCMEncap, IPsecGCMEncapReason};
pub use window::ReplayWindow;

use crate::{Args, ConfigError};
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm, Nonce, Tag};

/// Bytes of the ESP header: SPI and sequence number.
pub const ESP_HEADER: usize = 8;
/// Bytes of the explicit IV (RFC 4106 §3.1).
pub const IV_LEN: usize = 8;
/// Bytes of the ICV (RFC 4106: 16; the 8- and 12-byte variants are not offered).
pub const ICV_LEN: usize = 16;
/// Bytes of the outer IPv4 header the encapsulation writes.
pub const OUTER_IP: usize = 20;
/// The default anti-replay window, in packets (RFC 4303 §3.4.3 recommends 64).
pub const DEFAULT_REPLAY: u64 = 64;
/// The largest anti-replay window accepted, in packets.
pub const MAX_REPLAY: u64 = 4096;

/// An AES-GCM key of either size.
enum Gcm {
    A128(Box<Aes128Gcm>),
    A256(Box<Aes256Gcm>),
}

impl Gcm {
    fn new(key: &[u8]) -> Option<Gcm> {
        match key.len() {
            16 => Aes128Gcm::new_from_slice(key)
                .ok()
                .map(|c| Gcm::A128(Box::new(c))),
            32 => Aes256Gcm::new_from_slice(key)
                .ok()
                .map(|c| Gcm::A256(Box::new(c))),
            _ => None,
        }
    }
}

/// The cryptographic half of a security association: SPI, cipher, salt and whether
/// sequence numbers are extended. Shared by both elements.
pub struct Sa {
    /// Security parameters index.
    pub spi: u32,
    gcm: Gcm,
    salt: [u8; 4],
    /// Extended (64-bit) sequence numbers.
    pub esn: bool,
    /// Key length in bytes (16 or 32).
    pub key_len: usize,
}

impl std::fmt::Debug for Sa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Sa")
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("aes_bits", &(self.key_len * 8))
            .field("esn", &self.esn)
            .finish()
    }
}

impl Sa {
    /// Reads `SPI`, `KEY`, `SALT` and `ESN` (positional: SPI, KEY, SALT).
    ///
    /// KEY is 16 or 32 bytes in hexadecimal (optionally `0x`-prefixed); SALT 4 bytes. A KEY
    /// of 20 or 36 bytes is key and salt together, as `ip xfrm state … aead
    /// 'rfc4106(gcm(aes))' KEYSALT 128` takes them; SALT must then be absent.
    pub fn configure(args: &Args) -> Result<Sa, ConfigError> {
        let spi = crate::args::parse_uint_max(
            args.require(0, "SPI", "the security parameters index")?,
            u64::from(u32::MAX),
            "SPI",
        )? as u32;
        if spi < 256 {
            return Err(ConfigError::new(format!(
                "expected SPI 256 or more (0 to 255 are reserved, RFC 4303 §2.1), found {spi}"
            )));
        }
        let key = parse_hex(args.require(1, "KEY", "an AES-GCM key in hex")?, "KEY")?;
        let salt_arg = args.get(2, "SALT");
        let (key, salt) =
            match (key.len(), salt_arg) {
                (16 | 32, Some(s)) => {
                    let salt = parse_hex(s, "SALT")?;
                    let salt: [u8; 4] = salt.as_slice().try_into().map_err(|_| {
                        ConfigError::new(format!(
                            "expected SALT to be 4 bytes in hex, found {} bytes",
                            salt.len()
                        ))
                    })?;
                    (key, salt)
                }
                (16 | 32, None) => return Err(ConfigError::new(
                    "missing argument SALT (4 bytes in hex), or give KEY as key and salt together",
                )),
                (20 | 36, None) => {
                    let n = key.len() - 4;
                    let mut salt = [0u8; 4];
                    salt.copy_from_slice(&key[n..]);
                    (key[..n].to_vec(), salt)
                }
                (20 | 36, Some(_)) => {
                    return Err(ConfigError::new(
                        "KEY of 20 or 36 bytes holds the salt already: SALT must not be given",
                    ))
                }
                (n, _) => {
                    return Err(ConfigError::new(format!(
                        "expected KEY of 16 or 32 bytes (AES-GCM-128 or -256), or 20 or 36 with \
                     the salt, found {n} bytes"
                    )))
                }
            };
        let esn = args
            .keyword("ESN")
            .map_or(Ok(false), |s| crate::args::parse_bool(s, "ESN"))?;
        let gcm = Gcm::new(&key).ok_or_else(|| ConfigError::new("KEY: bad AES key length"))?;
        Ok(Sa {
            spi,
            gcm,
            salt,
            esn,
            key_len: key.len(),
        })
    }

    /// The GCM nonce of sequence number `seq`: the salt, then the IV (`seq`, big endian).
    #[inline]
    fn nonce(&self, iv: &[u8; IV_LEN]) -> [u8; 12] {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&self.salt);
        n[4..].copy_from_slice(iv);
        n
    }

    /// The associated data of `seq` (8 bytes, 12 with ESN) and its length.
    #[inline]
    fn aad(&self, seq: u64) -> ([u8; 12], usize) {
        let mut a = [0u8; 12];
        a[..4].copy_from_slice(&self.spi.to_be_bytes());
        if self.esn {
            a[4..8].copy_from_slice(&((seq >> 32) as u32).to_be_bytes());
            a[8..].copy_from_slice(&(seq as u32).to_be_bytes());
            (a, 12)
        } else {
            a[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
            (a, 8)
        }
    }

    /// Encrypts `buf` in place for sequence number `seq` under IV `iv`; returns the ICV.
    /// `None` only if `buf` exceeds what GCM can encrypt (it never does for a packet).
    pub fn seal(&self, seq: u64, iv: &[u8; IV_LEN], buf: &mut [u8]) -> Option<[u8; ICV_LEN]> {
        let nonce = self.nonce(iv);
        let nonce = Nonce::from_slice(&nonce);
        let (aad, n) = self.aad(seq);
        let tag = match &self.gcm {
            Gcm::A128(c) => c.encrypt_in_place_detached(nonce, &aad[..n], buf),
            Gcm::A256(c) => c.encrypt_in_place_detached(nonce, &aad[..n], buf),
        }
        .ok()?;
        let mut t = [0u8; ICV_LEN];
        t.copy_from_slice(&tag);
        Some(t)
    }

    /// Checks `icv` over `buf` for sequence number `seq` and IV `iv`, and decrypts `buf` in
    /// place if it verifies (false, `buf` unchanged, if not).
    pub fn open(&self, seq: u64, iv: &[u8; IV_LEN], buf: &mut [u8], icv: &[u8; ICV_LEN]) -> bool {
        let nonce = self.nonce(iv);
        let nonce = Nonce::from_slice(&nonce);
        let (aad, n) = self.aad(seq);
        let tag = Tag::from_slice(icv);
        match &self.gcm {
            Gcm::A128(c) => c.decrypt_in_place_detached(nonce, &aad[..n], buf, tag),
            Gcm::A256(c) => c.decrypt_in_place_detached(nonce, &aad[..n], buf, tag),
        }
        .is_ok()
    }
}

/// Parses bytes written in hexadecimal (optionally `0x`-prefixed, an even number of digits).
pub fn parse_hex(s: &str, what: &str) -> Result<Vec<u8>, ConfigError> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let bad = || ConfigError::new(format!("expected {what} in hexadecimal, found `{s}`"));
    if t.is_empty() || !t.len().is_multiple_of(2) {
        return Err(bad());
    }
    (0..t.len())
        .step_by(2)
        .map(|i| {
            t.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}

/// The valid IPv4 header at the start of `ip`: (header length, total length), when the
/// version is 4, the header length 20 or more, and the total length covers the header and
/// fits in `ip`.
#[inline]
fn ipv4_lengths(ip: &[u8]) -> Option<(usize, usize)> {
    let b0 = *ip.first()?;
    let hl = usize::from(b0 & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    (b0 >> 4 == 4 && hl >= 20 && hl <= total && total <= ip.len()).then_some((hl, total))
}

/// Where the MAC header annotation points into the first `before` bytes of the data, if
/// it does (so an element that moves those bytes can set it again).
#[inline]
fn mac_in_prefix(p: &packet::Packet, before: usize) -> Option<usize> {
    let mac = p.meta.mac_offset;
    let head = p.data_offset();
    (mac != packet::NO_OFFSET && mac >= head && ((mac - head) as usize) < before)
        .then(|| (mac - head) as usize)
}

#[cfg(test)]
mod tests;
