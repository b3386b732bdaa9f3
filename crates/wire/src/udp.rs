//! UDP headers (RFC 768).
//!
//! Checksum rules: over IPv4 a checksum field of `0` means "no checksum" and
//! is accepted by [`Packet::verify_checksum_v4`]; a computed `0` is sent as
//! `0xFFFF`. Over IPv6 a zero checksum is invalid (RFC 8200 section 8.1).
//! For incremental updates use [`crate::checksum::update16_udp`].

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::{checksum, clamp, clamp_mut, rd16, wr16, Error, Result};

/// Byte ranges of the UDP header fields.
pub mod field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Length (header + payload).
    pub const LENGTH: Range<usize> = 4..6;
    /// Checksum.
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A read/write view of a UDP datagram.
///
/// Invariant: a view built by [`Packet::new_checked`] satisfies
/// `8 <= len() <= buffer.len()`, so getters never panic. `payload` and the
/// checksum helpers are clamped to the buffer and never panic at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (fixed-field getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after validating the length field against it.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Validates `8 <= len <= buffer length` (longer buffers are accepted).
    pub fn check_len(&self) -> Result<()> {
        let buf_len = self.buffer.as_ref().len();
        if buf_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len > buf_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Consumes the view and returns the underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field (header + payload, bytes).
    #[allow(clippy::len_without_is_empty)]
    #[inline]
    pub fn len(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Payload bytes, bounded by the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), HEADER_LEN, usize::from(self.len()))
    }

    /// Datagram bytes covered by the checksum (bounded by the length field).
    #[inline]
    fn datagram(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), 0, usize::from(self.len()))
    }

    /// Unfolded sum of pseudo header + datagram.
    #[inline]
    fn sum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u32 {
        let d = self.datagram();
        checksum::combine(&[
            checksum::pseudo_header_v4(src.octets(), dst.octets(), 17, d.len() as u16),
            checksum::sum(d),
        ])
    }

    /// Unfolded sum of IPv6 pseudo header + datagram.
    #[inline]
    fn sum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        let d = self.datagram();
        checksum::combine(&[
            checksum::pseudo_header_v6(src.octets(), dst.octets(), 17, d.len() as u32),
            checksum::sum(d),
        ])
    }

    /// Verifies the checksum over IPv4; a checksum of `0` ("none") is valid.
    #[inline]
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0 || checksum::fold(self.sum_v4(src, dst)) == 0xFFFF
    }

    /// Verifies the checksum over IPv6; a checksum of `0` is invalid.
    #[inline]
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        self.checksum() != 0 && checksum::fold(self.sum_v6(src, dst)) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    /// Sets the length field.
    #[inline]
    pub fn set_len(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Mutable payload bytes, bounded by the length field.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        clamp_mut(self.buffer.as_mut(), HEADER_LEN, len)
    }

    /// Computes and stores the IPv4 checksum (a computed `0` becomes `0xFFFF`).
    #[inline]
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let ck = !checksum::fold(self.sum_v4(src, dst));
        self.set_checksum(checksum::udp_finish(ck));
    }

    /// Computes and stores the IPv6 checksum (a computed `0` becomes `0xFFFF`).
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let ck = !checksum::fold(self.sum_v6(src, dst));
        self.set_checksum(checksum::udp_finish(ck));
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

/// High-level representation of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl Repr {
    /// Parses a datagram view (re-validating lengths; never panics).
    ///
    /// The checksum is not verified (that needs the IP addresses).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes ports and length, with a zero checksum: write the payload, then
    /// call `fill_checksum_v4`/`fill_checksum_v6`.
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(self.buffer_len() as u16);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);

    // UDP part of an Ethernet/IPv4 DNS query (192.168.1.10 -> 192.168.1.1),
    // generated and checksummed offline.
    const DNS_QUERY: [u8; 37] = [
        0xcf, 0x08, 0x00, 0x35, 0x00, 0x25, 0xcb, 0x68, 0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63,
        0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
    ];

    // UDP part of an IPv6 datagram 2001:db8::1 -> 2001:db8::2, "hello fusebox".
    const V6_DGRAM: [u8; 21] = [
        0x13, 0x88, 0x17, 0x70, 0x00, 0x15, 0x81, 0x1a, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x66,
        0x75, 0x73, 0x65, 0x62, 0x6f, 0x78,
    ];
    const SRC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

    #[test]
    fn parse_fixture() {
        let p = Packet::new_checked(&DNS_QUERY[..]).unwrap();
        assert_eq!(p.src_port(), 53000);
        assert_eq!(p.dst_port(), 53);
        assert_eq!(p.len(), 37);
        assert_eq!(p.checksum(), 0xcb68);
        assert_eq!(p.payload(), &DNS_QUERY[8..]);
        assert!(p.verify_checksum_v4(SRC, DST));
        assert!(!p.verify_checksum_v4(DST, Ipv4Addr::new(192, 168, 1, 2)));
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                src_port: 53000,
                dst_port: 53,
                payload_len: 29
            }
        );
    }

    #[test]
    fn v6_checksum() {
        let p = Packet::new_checked(&V6_DGRAM[..]).unwrap();
        assert!(p.verify_checksum_v6(SRC6, DST6));
        let mut buf = V6_DGRAM;
        let mut q = Packet::new_checked(&mut buf[..]).unwrap();
        q.set_checksum(0);
        assert!(!q.verify_checksum_v6(SRC6, DST6));
        q.fill_checksum_v6(SRC6, DST6);
        assert_eq!(buf, V6_DGRAM);
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr::parse(&Packet::new_checked(&DNS_QUERY[..]).unwrap()).unwrap();
        let mut buf = DNS_QUERY;
        buf[..8].fill(0x5a);
        let mut p = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut p);
        assert_eq!(p.checksum(), 0);
        assert!(p.verify_checksum_v4(SRC, DST), "zero means no checksum");
        p.fill_checksum_v4(SRC, DST);
        assert_eq!(buf, DNS_QUERY);
    }

    #[test]
    fn setters_and_incremental() {
        let mut buf = DNS_QUERY;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        let old = p.src_port();
        p.set_src_port(40000);
        let ck = checksum::update16_udp(p.checksum(), old, 40000);
        p.set_checksum(ck);
        assert!(p.verify_checksum_v4(SRC, DST));
        // NAT rewrite of the source address.
        let new_src = Ipv4Addr::new(203, 0, 113, 7);
        let ck = checksum::update32_udp(p.checksum(), SRC.to_bits(), new_src.to_bits());
        p.set_checksum(ck);
        assert!(p.verify_checksum_v4(new_src, DST));
        p.set_dst_port(5353);
        p.payload_mut()[0] = 0xff;
        p.set_len(10);
        assert_eq!(p.payload(), &[0xff, 0x34]);
        assert_eq!(p.dst_port(), 5353);
    }

    #[test]
    fn fill_maps_zero_to_ffff() {
        // Find a payload word that makes the computed checksum zero.
        let mut buf = [0u8; 10];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_len(10);
        let s = checksum::fold(p.sum_v4(SRC, DST));
        p.payload_mut().copy_from_slice(&(!s).to_be_bytes());
        p.fill_checksum_v4(SRC, DST);
        assert_eq!(p.checksum(), 0xFFFF);
        assert!(p.verify_checksum_v4(SRC, DST));
    }

    #[test]
    fn rejects_bad_buffers() {
        assert_eq!(
            Packet::new_checked(&DNS_QUERY[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&DNS_QUERY[..36]).unwrap_err(),
            Error::Truncated
        );
        let mut b = DNS_QUERY;
        b[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn every_truncation_is_safe() {
        for n in 0..=DNS_QUERY.len() {
            let res = Packet::new_checked(&DNS_QUERY[..n]);
            assert_eq!(res.is_ok(), n == DNS_QUERY.len());
            if let Ok(p) = res {
                let _ = (Repr::parse(&p), p.payload(), p.verify_checksum_v4(SRC, DST));
            }
            let p = Packet::new_unchecked(&DNS_QUERY[..n]);
            let _ = Repr::parse(&p);
        }
    }
}
