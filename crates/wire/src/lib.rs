//! Zero-copy byte views of packet headers for FuseBox.
//!
//! The crate follows smoltcp's wire style. Every protocol lives in its own
//! module and provides:
//!
//! * a `field` module with the byte ranges of every header field;
//! * a view (`Packet<T>`, or `Frame<T>` for Ethernet) wrapping any
//!   `T: AsRef<[u8]>` without copying or allocating. `new_checked` validates
//!   the buffer lengths once; afterwards every getter is panic-free. Setters
//!   are available when `T: AsMut<[u8]>`;
//! * a `Repr` struct: a high-level, owned description of the header with
//!   `parse`, `header_len`/`buffer_len` and `emit`.
//!
//! `new_checked` and `Repr::parse` never panic, whatever the input bytes.
//! Views built with `new_unchecked` skip validation, so fixed-offset getters
//! may panic on a too-short buffer; variable-length accessors (`payload`,
//! `options`, ...) are always clamped to the buffer and never panic.
//!
//! [`parse::layers`] walks a whole Ethernet frame (VLAN tags, IPv4/IPv6 and
//! extension headers) to locate the L3/L4 headers for accounting.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use core::fmt;
use core::ops::Range;

pub mod arp;
pub mod build;
pub mod checksum;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod nsh;
pub mod parse;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

/// Errors returned when validating or parsing header bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header (or a length field) requires.
    Truncated,
    /// A field holds a value that is invalid for the protocol.
    Malformed,
    /// The header is well formed but uses a feature this crate does not handle.
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated packet"),
            Error::Malformed => f.write_str("malformed packet"),
            Error::Unsupported => f.write_str("unsupported packet"),
        }
    }
}

impl std::error::Error for Error {}

/// Result type used throughout the crate.
pub type Result<T> = core::result::Result<T, Error>;

pub use ip::IpProtocol;

/// Bounds-checked big-endian reads and writes at a byte offset.
///
/// For code that reads a header which may be cut short and must not panic (a flow-key
/// parser reading ports, an element accepting a malformed packet): a read past the end is
/// `None`, a write past the end changes nothing and returns `false`. Code holding a
/// validated view uses the view's getters and setters instead.
pub mod bytes {
    /// The big-endian `u16` at `off`, if both bytes are there.
    #[inline]
    pub fn read_u16(data: &[u8], off: usize) -> Option<u16> {
        let b = data.get(off..off.checked_add(2)?)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    /// The big-endian `u32` at `off`, if all four bytes are there.
    #[inline]
    pub fn read_u32(data: &[u8], off: usize) -> Option<u32> {
        let b = data.get(off..off.checked_add(4)?)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Writes `value` big-endian at `off`; `false` (and no change) if it does not fit.
    #[inline]
    pub fn write_u16(data: &mut [u8], off: usize, value: u16) -> bool {
        match off.checked_add(2).and_then(|end| data.get_mut(off..end)) {
            Some(b) => {
                b.copy_from_slice(&value.to_be_bytes());
                true
            }
            None => false,
        }
    }

    /// Writes `value` big-endian at `off`; `false` (and no change) if it does not fit.
    #[inline]
    pub fn write_u32(data: &mut [u8], off: usize, value: u32) -> bool {
        match off.checked_add(4).and_then(|end| data.get_mut(off..end)) {
            Some(b) => {
                b.copy_from_slice(&value.to_be_bytes());
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn reads_and_writes_stop_at_the_end() {
            let mut d = [1u8, 2, 3, 4, 5];
            assert_eq!(read_u16(&d, 3), Some(0x0405));
            assert_eq!(read_u16(&d, 4), None);
            assert_eq!(read_u16(&d, usize::MAX), None);
            assert_eq!(read_u32(&d, 1), Some(0x0203_0405));
            assert_eq!(read_u32(&d, 2), None);
            assert!(write_u16(&mut d, 0, 0xabcd));
            assert!(!write_u16(&mut d, 4, 0xffff));
            assert!(!write_u32(&mut d, 2, 0xffff_ffff));
            assert!(write_u32(&mut d, 1, 0x1122_3344));
            assert_eq!(d, [0xab, 0x11, 0x22, 0x33, 0x44]);
            assert!(!write_u32(&mut d, usize::MAX, 0));
        }
    }
}

/// Reads a big-endian `u16` at the start of `field`.
#[inline]
pub(crate) fn rd16(data: &[u8], field: Range<usize>) -> u16 {
    let s = field.start;
    u16::from_be_bytes([data[s], data[s + 1]])
}

/// Reads a big-endian `u32` at the start of `field`.
#[inline]
pub(crate) fn rd32(data: &[u8], field: Range<usize>) -> u32 {
    let s = field.start;
    u32::from_be_bytes([data[s], data[s + 1], data[s + 2], data[s + 3]])
}

/// Writes a big-endian `u16` at the start of `field`.
#[inline]
pub(crate) fn wr16(data: &mut [u8], field: Range<usize>, value: u16) {
    let s = field.start;
    data[s..s + 2].copy_from_slice(&value.to_be_bytes());
}

/// Writes a big-endian `u32` at the start of `field`.
#[inline]
pub(crate) fn wr32(data: &mut [u8], field: Range<usize>, value: u32) {
    let s = field.start;
    data[s..s + 4].copy_from_slice(&value.to_be_bytes());
}

/// Copies a fixed-size array out of `data[field]`.
#[inline]
pub(crate) fn rdarr<const N: usize>(data: &[u8], field: Range<usize>) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&data[field.start..field.start + N]);
    out
}

/// Returns `data[start..end]` clamped to the buffer; never panics.
#[inline]
pub(crate) fn clamp(data: &[u8], start: usize, end: usize) -> &[u8] {
    let end = end.min(data.len());
    let start = start.min(end);
    &data[start..end]
}

/// Mutable variant of [`clamp`]; never panics.
#[inline]
pub(crate) fn clamp_mut(data: &mut [u8], start: usize, end: usize) -> &mut [u8] {
    let end = end.min(data.len());
    let start = start.min(end);
    &mut data[start..end]
}

/// Reads `data` with every view, `Repr::parse` and walker of this crate, calling the getters
/// of each view `new_checked` accepts: what robustness tests and fuzz targets run over
/// arbitrary bytes. Nothing here may panic on any input; it panics only if a view breaks
/// its own contract (an IPv4 header whose checksum was just filled does not verify).
pub fn every_view(d: &[u8]) {
    use core::net::{Ipv4Addr, Ipv6Addr};
    let (a4, a6) = (Ipv4Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
    if let Ok(f) = ethernet::Frame::new_checked(d) {
        let _ = (ethernet::Repr::parse(&f), f.payload(), f.ethertype());
        let _ = (f.src_addr(), f.dst_addr());
    }
    if let Ok(p) = ipv4::Packet::new_checked(d) {
        let _ = (ipv4::Repr::parse(&p), p.payload(), p.options());
        let _ = (p.verify_checksum(), p.header_len(), p.total_len());
        let _ = (p.frag_offset(), p.is_fragment(), p.protocol());
        let mut copy = d.to_vec();
        if let Ok(mut m) = ipv4::Packet::new_checked(&mut copy[..]) {
            m.fill_checksum();
            assert!(m.verify_checksum(), "fill_checksum then verify_checksum");
        }
    }
    if let Ok(p) = ipv6::Packet::new_checked(d) {
        let _ = (ipv6::Repr::parse(&p), p.payload());
    }
    let _ = ipv6::walk_extension_headers(d);
    if let Ok(p) = udp::Packet::new_checked(d) {
        let _ = (udp::Repr::parse(&p), p.payload());
        let _ = (p.verify_checksum_v4(a4, a4), p.verify_checksum_v6(a6, a6));
    }
    if let Ok(p) = tcp::Packet::new_checked(d) {
        let _ = (tcp::Repr::parse(&p), p.payload(), p.options());
        let _ = (p.verify_checksum_v4(a4, a4), p.verify_checksum_v6(a6, a6));
    }
    if let Ok(p) = icmpv4::Packet::new_checked(d) {
        let _ = (icmpv4::Repr::parse(&p), p.data(), p.verify_checksum());
    }
    if let Ok(p) = icmpv6::Packet::new_checked(d) {
        let _ = (icmpv6::Repr::parse(&p), p.data(), p.verify_checksum(a6, a6));
    }
    if let Ok(p) = arp::Packet::new_checked(d) {
        let _ = arp::Repr::parse(&p);
    }
    let _ = arp::Repr::parse_frame(d);
    if let Ok(p) = vlan::Packet::new_checked(d) {
        let _ = (vlan::Repr::parse(&p), p.payload());
    }
    let _ = vlan::walk(d);
    if let Ok(p) = nsh::Packet::new_checked(d) {
        let _ = (nsh::Repr::parse(&p), p.payload(), p.md1_context());
        let _ = p.tlvs().count();
    }
    let _ = nsh::TlvIter::new(d).count();
    if let Ok(p) = vxlan::Packet::new_checked(d) {
        let _ = (vxlan::Repr::parse(&p), p.payload());
    }
    let _ = parse::layers(d);
}

/// Deterministic xorshift generator shared by the crate's robustness tests.
#[cfg(test)]
pub(crate) struct XorShift(pub u64);

#[cfg(test)]
impl XorShift {
    /// Next pseudo-random value.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[cfg(test)]
mod robustness {
    use super::*;

    /// Feeds pseudo-random byte strings to every `new_checked`, `Repr::parse`
    /// and walker, and calls every getter on accepted views ([`every_view`]): none may
    /// panic.
    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift(0xDEAD_BEEF_CAFE_F00D);
        let mut buf = [0u8; 256];
        for i in 0..20_000 {
            let len = (rng.next_u64() % 256) as usize;
            for b in buf[..len].iter_mut() {
                *b = rng.next_u64() as u8;
            }
            // Bias the first byte towards valid versions/lengths.
            if len > 0 && i % 2 == 0 {
                buf[0] = [0x45, 0x4f, 0x60, 0x0f, 0x50, 0x08][i % 6];
            }
            let d = &buf[..len];
            every_view(d);
        }
    }

    #[test]
    fn error_display() {
        assert_eq!(Error::Truncated.to_string(), "truncated packet");
        assert_eq!(Error::Malformed.to_string(), "malformed packet");
        assert_eq!(Error::Unsupported.to_string(), "unsupported packet");
        let e: Box<dyn std::error::Error> = Box::new(Error::Malformed);
        assert!(!e.to_string().is_empty());
    }
}
