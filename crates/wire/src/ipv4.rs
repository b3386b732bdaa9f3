//! IPv4 headers (RFC 791).

use core::net::Ipv4Addr;

use crate::{checksum, clamp, clamp_mut, rd16, rdarr, wr16, Error, Result};

/// Byte ranges of the IPv4 header fields.
pub mod field {
    use core::ops::Range;
    /// Version (high nibble) and IHL (low nibble).
    pub const VER_IHL: usize = 0;
    /// DSCP (6 bits) and ECN (2 bits), a.k.a. TOS.
    pub const DSCP_ECN: usize = 1;
    /// Total length.
    pub const LENGTH: Range<usize> = 2..4;
    /// Identification.
    pub const IDENT: Range<usize> = 4..6;
    /// Flags (3 bits) and fragment offset (13 bits, 8-byte units).
    pub const FLG_OFF: Range<usize> = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol (next header).
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Range<usize> = 10..12;
    /// Source address.
    pub const SRC_ADDR: Range<usize> = 12..16;
    /// Destination address.
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// IANA IP protocol numbers (shared by IPv4 `protocol` and IPv6 `next_header`).
pub use crate::ip::protocol;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_MASK: u16 = 0x1fff;

/// A read/write view of an IPv4 packet.
///
/// Invariant: a view built by [`Packet::new_checked`] satisfies
/// `20 <= header_len() <= total_len() <= buffer.len()`, so every getter is
/// panic-free. Variable-length accessors (`options`, `payload`) are clamped to
/// the buffer and never panic, even after setters broke the invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (fixed-field getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after validating version and length fields.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Validates the buffer: at least 20 bytes, version 4,
    /// `20 <= header_len <= total_len <= buffer length`.
    ///
    /// A buffer longer than `total_len` (e.g. Ethernet padding) is accepted.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::Malformed);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if hl > len {
            return Err(Error::Truncated);
        }
        let tl = usize::from(self.total_len());
        if tl < hl {
            return Err(Error::Malformed);
        }
        if tl > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Consumes the view and returns the underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// IP version (4 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP and ECN byte.
    #[inline]
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// Type of service byte (same as [`Packet::dscp_ecn`]).
    #[inline]
    pub fn tos(&self) -> u8 {
        self.dscp_ecn()
    }

    /// Differentiated services code point (upper 6 bits of TOS).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.dscp_ecn() >> 2
    }

    /// Explicit congestion notification (lower 2 bits of TOS).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.dscp_ecn() & 0x03
    }

    /// Total length (header + payload) in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification field.
    #[inline]
    pub fn ident(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::IDENT)
    }

    /// Raw flags + fragment offset word.
    #[inline]
    pub fn flags_frag_raw(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::FLG_OFF)
    }

    /// Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_frag_raw() & FLAG_DF != 0
    }

    /// More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_frag_raw() & FLAG_MF != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag_raw() & FRAG_MASK) << 3
    }

    /// Whether this packet is a fragment (MF set or non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.flags_frag_raw() & (FLAG_MF | FRAG_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload (alias of [`Packet::protocol`]).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Protocol of the payload; see [`protocol`].
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.next_header()
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(rdarr::<4>(self.buffer.as_ref(), field::SRC_ADDR))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(rdarr::<4>(self.buffer.as_ref(), field::DST_ADDR))
    }

    /// Option bytes (between byte 20 and `header_len`).
    #[inline]
    pub fn options(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), HEADER_LEN, self.header_len())
    }

    /// Payload bytes, from `header_len` to `total_len` (padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        clamp(
            self.buffer.as_ref(),
            self.header_len(),
            usize::from(self.total_len()),
        )
    }

    /// Whether the header checksum is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::ipv4_header_ok(clamp(self.buffer.as_ref(), 0, self.header_len()))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, value: u8) {
        let d = self.data_mut();
        d[field::VER_IHL] = (d[field::VER_IHL] & 0x0f) | (value << 4);
    }

    /// Sets the header length in bytes (must be a multiple of 4, <= 60).
    #[inline]
    pub fn set_header_len(&mut self, value: usize) {
        let d = self.data_mut();
        d[field::VER_IHL] = (d[field::VER_IHL] & 0xf0) | ((value / 4) as u8 & 0x0f);
    }

    /// Sets the DSCP/ECN byte.
    #[inline]
    pub fn set_dscp_ecn(&mut self, value: u8) {
        self.data_mut()[field::DSCP_ECN] = value;
    }

    /// Sets the type of service byte (same as [`Packet::set_dscp_ecn`]).
    #[inline]
    pub fn set_tos(&mut self, value: u8) {
        self.set_dscp_ecn(value);
    }

    /// Sets the total length.
    #[inline]
    pub fn set_total_len(&mut self, value: u16) {
        wr16(self.data_mut(), field::LENGTH, value);
    }

    /// Sets the identification field.
    #[inline]
    pub fn set_ident(&mut self, value: u16) {
        wr16(self.data_mut(), field::IDENT, value);
    }

    /// Sets the raw flags + fragment offset word.
    #[inline]
    pub fn set_flags_frag_raw(&mut self, value: u16) {
        wr16(self.data_mut(), field::FLG_OFF, value);
    }

    /// Sets or clears Don't Fragment.
    #[inline]
    pub fn set_dont_frag(&mut self, value: bool) {
        let raw = self.flags_frag_raw() & !FLAG_DF;
        self.set_flags_frag_raw(if value { raw | FLAG_DF } else { raw });
    }

    /// Sets or clears More Fragments.
    #[inline]
    pub fn set_more_frags(&mut self, value: bool) {
        let raw = self.flags_frag_raw() & !FLAG_MF;
        self.set_flags_frag_raw(if value { raw | FLAG_MF } else { raw });
    }

    /// Sets the fragment offset in bytes (rounded down to a multiple of 8).
    #[inline]
    pub fn set_frag_offset(&mut self, value: u16) {
        let raw = self.flags_frag_raw() & !FRAG_MASK;
        self.set_flags_frag_raw(raw | ((value >> 3) & FRAG_MASK));
    }

    /// Sets the time to live.
    #[inline]
    pub fn set_ttl(&mut self, value: u8) {
        self.data_mut()[field::TTL] = value;
    }

    /// Sets the payload protocol (alias of [`Packet::set_protocol`]).
    #[inline]
    pub fn set_next_header(&mut self, value: u8) {
        self.data_mut()[field::PROTOCOL] = value;
    }

    /// Sets the payload protocol.
    #[inline]
    pub fn set_protocol(&mut self, value: u8) {
        self.set_next_header(value);
    }

    /// Sets the header checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        wr16(self.data_mut(), field::CHECKSUM, value);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.data_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.data_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Zeroes the checksum then recomputes it over `header_len` bytes.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let ck = checksum::data(clamp(self.buffer.as_ref(), 0, hl));
        self.set_checksum(ck);
    }

    /// Mutable option bytes.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clamp_mut(self.data_mut(), HEADER_LEN, hl)
    }

    /// Mutable payload bytes (bounded by `total_len`).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        clamp_mut(self.data_mut(), hl, tl)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The whole underlying buffer, writable (as the setters see it).
impl<T: AsRef<[u8]> + AsMut<[u8]>> AsMut<[u8]> for Packet<T> {
    #[inline]
    fn as_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
}

/// High-level representation of an IPv4 header (options are not represented).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: u8,
    /// Payload length in bytes (`total_len - header_len`).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// Type of service (DSCP/ECN) byte.
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment flag.
    pub dont_frag: bool,
    /// More Fragments flag.
    pub more_frags: bool,
    /// Fragment offset in bytes.
    pub frag_offset: u16,
}

impl Repr {
    /// Parses a packet view (re-validating lengths; never panics).
    ///
    /// The checksum is *not* verified; use [`Packet::verify_checksum`].
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
            tos: packet.tos(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        })
    }

    /// Header length emitted (always 20: no options).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-byte header (IHL 5, checksum filled) into `packet`.
    ///
    /// `total_len` is `20 + payload_len`, truncated to 16 bits.
    ///
    /// # Panics
    /// If the buffer is shorter than 20 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN);
        packet.set_tos(self.tos);
        packet.set_total_len(self.buffer_len() as u16);
        packet.set_ident(self.ident);
        let mut raw = (self.frag_offset >> 3) & FRAG_MASK;
        if self.dont_frag {
            raw |= FLAG_DF;
        }
        if self.more_frags {
            raw |= FLAG_MF;
        }
        packet.set_flags_frag_raw(raw);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4 + TCP SYN with options, generated and checksummed offline.
    const IPV4_TCP_SYN: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0xbe, 0xef, 0x40, 0x00, 0x40, 0x06, 0xf8, 0x70, 0xc0, 0xa8, 0x01,
        0x0a, 0xc0, 0xa8, 0x01, 0x01, 0xad, 0x21, 0x00, 0x50, 0x6b, 0x8b, 0x45, 0x67, 0x00, 0x00,
        0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, 0x89, 0x0d, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04,
        0x02, 0x08, 0x0a, 0x00, 0x01, 0xe2, 0x40, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    // Header with a Router Alert option (IHL 6), checksum computed offline.
    const WITH_OPTIONS: [u8; 28] = [
        0x46, 0xc0, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x3a, 0x05, 0x0a, 0x00, 0x00,
        0x01, 0xe0, 0x00, 0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x22, 0x00, 0xf9, 0x02,
    ];

    #[test]
    fn parse_fixture() {
        let p = Packet::new_checked(&IPV4_TCP_SYN[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.tos(), 0);
        assert_eq!(p.total_len(), 60);
        assert_eq!(p.ident(), 0xbeef);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert!(!p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.flags_frag_raw(), 0x4000);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), protocol::TCP);
        assert_eq!(p.checksum(), 0xf870);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 1, 10));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 1, 1));
        assert!(p.options().is_empty());
        assert_eq!(p.payload(), &IPV4_TCP_SYN[20..]);
        assert!(p.verify_checksum());
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 40);
        assert_eq!(r.buffer_len(), 60);
    }

    #[test]
    fn options_fixture() {
        let p = Packet::new_checked(&WITH_OPTIONS[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert_eq!(p.payload(), &WITH_OPTIONS[24..]);
        assert_eq!(p.dscp(), 0x30);
        assert_eq!(p.ecn(), 0);
        assert!(p.verify_checksum());
    }

    #[test]
    fn emit_round_trip() {
        let p = Packet::new_checked(&IPV4_TCP_SYN[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        let mut buf = IPV4_TCP_SYN;
        buf[..20].fill(0xaa);
        let mut q = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut q);
        assert_eq!(buf, IPV4_TCP_SYN);
    }

    #[test]
    fn fragment_fields() {
        let mut buf = IPV4_TCP_SYN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_dont_frag(false);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        assert_eq!(p.flags_frag_raw(), 0x2000 | 185);
        assert!(p.is_fragment() && p.more_frags() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 1480);
        p.set_more_frags(false);
        assert!(p.is_fragment());
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            (r.frag_offset, r.more_frags, r.dont_frag),
            (1480, false, false)
        );
    }

    #[test]
    fn setters() {
        let mut buf = IPV4_TCP_SYN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_ttl(63);
        p.set_tos(0xb8);
        p.set_ident(0x1234);
        p.set_src_addr(Ipv4Addr::new(10, 0, 0, 1));
        p.set_dst_addr(Ipv4Addr::new(10, 0, 0, 2));
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.ttl(), 63);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ident(), 0x1234);
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
        p.set_protocol(protocol::UDP);
        assert_eq!(p.next_header(), 17);
        p.set_total_len(40);
        assert_eq!(p.payload().len(), 20);
        p.payload_mut()[0] = 0;
        p.set_checksum(0xdead);
        assert_eq!(p.checksum(), 0xdead);
        // Setters may break the invariant; payload stays clamped.
        p.set_total_len(9000);
        assert_eq!(p.payload().len(), 40);
        p.set_header_len(60);
        assert_eq!(p.options().len(), 40);
        assert!(p.check_len().is_err());
    }

    #[test]
    fn incremental_ttl_update_matches() {
        let mut buf = IPV4_TCP_SYN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        let old_word = u16::from_be_bytes([p.ttl(), p.protocol()]);
        p.set_ttl(p.ttl() - 1);
        let new_word = u16::from_be_bytes([p.ttl(), p.protocol()]);
        let ck = checksum::update16(p.checksum(), old_word, new_word);
        p.set_checksum(ck);
        assert!(p.verify_checksum());
    }

    #[test]
    fn rejects_bad_buffers() {
        let t = |b: &[u8]| Packet::new_checked(b).map(|_| ()).unwrap_err();
        assert_eq!(t(&IPV4_TCP_SYN[..19]), Error::Truncated);
        assert_eq!(t(&IPV4_TCP_SYN[..59]), Error::Truncated);
        let mut b = IPV4_TCP_SYN;
        b[0] = 0x65;
        assert_eq!(t(&b), Error::Malformed);
        b[0] = 0x44;
        assert_eq!(t(&b), Error::Malformed);
        b[0] = 0x4f;
        assert_eq!(t(&b[..40]), Error::Truncated);
        b[0] = 0x45;
        b[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(t(&b), Error::Malformed);
        // Trailing padding beyond total_len is fine.
        let mut padded = IPV4_TCP_SYN.to_vec();
        padded.extend_from_slice(&[0; 6]);
        let p = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(p.payload().len(), 40);
    }

    #[test]
    fn every_truncation_is_safe() {
        for fixture in [&IPV4_TCP_SYN[..], &WITH_OPTIONS[..]] {
            for n in 0..=fixture.len() {
                let res = Packet::new_checked(&fixture[..n]);
                if n < fixture.len() {
                    assert!(res.is_err());
                }
                if let Ok(p) = res {
                    let _ = Repr::parse(&p);
                    let _ = (p.payload(), p.options(), p.verify_checksum());
                }
                let _ = Repr::parse(&Packet::new_unchecked(&fixture[..n]));
            }
        }
    }
}
