//! TCP headers (RFC 9293).

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::{checksum, clamp, clamp_mut, rd16, rd32, wr16, wr32, Error, Result};

/// Byte ranges of the TCP header fields.
pub mod field {
    use core::ops::Range;
    /// Source port.
    pub const SRC_PORT: Range<usize> = 0..2;
    /// Destination port.
    pub const DST_PORT: Range<usize> = 2..4;
    /// Sequence number.
    pub const SEQ_NUM: Range<usize> = 4..8;
    /// Acknowledgement number.
    pub const ACK_NUM: Range<usize> = 8..12;
    /// Data offset (high nibble), reserved bits and NS (low bit).
    pub const DATA_OFF: usize = 12;
    /// Flag byte (CWR ECE URG ACK PSH RST SYN FIN).
    pub const FLAGS: usize = 13;
    /// Window size.
    pub const WIN_SIZE: Range<usize> = 14..16;
    /// Checksum.
    pub const CHECKSUM: Range<usize> = 16..18;
    /// Urgent pointer.
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;

/// TCP flag bits as found in the flag byte returned by [`Packet::flags`].
pub mod flags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push function.
    pub const PSH: u8 = 0x08;
    /// Acknowledgement field is significant.
    pub const ACK: u8 = 0x10;
    /// Urgent pointer field is significant.
    pub const URG: u8 = 0x20;
    /// ECN echo.
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced.
    pub const CWR: u8 = 0x80;
}

/// A read/write view of a TCP segment.
///
/// Invariant: a view built by [`Packet::new_checked`] satisfies
/// `20 <= header_len() <= buffer.len()`, so getters never panic. The buffer
/// is taken to be exactly the segment (pass the IP payload, not padding), as
/// it determines the payload and the checksummed length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (fixed-field getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after validating the data offset against it.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Validates `20 <= header_len <= buffer length`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if hl > len {
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

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        rd32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    /// Acknowledgement number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        rd32(self.buffer.as_ref(), field::ACK_NUM)
    }

    /// Header length in bytes (data offset * 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFF] >> 4) * 4
    }

    /// Flag byte; test with the constants in [`flags`].
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Whether all bits of `mask` (from [`flags`]) are set.
    #[inline]
    pub fn has_flags(&self, mask: u8) -> bool {
        self.flags() & mask == mask
    }

    /// Window size.
    #[inline]
    pub fn window_len(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::WIN_SIZE)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::URGENT)
    }

    /// Option bytes (between byte 20 and `header_len`).
    #[inline]
    pub fn options(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), HEADER_LEN, self.header_len())
    }

    /// Payload bytes (after `header_len`, to the end of the buffer).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        clamp(data, self.header_len(), data.len())
    }

    #[inline]
    fn sum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u32 {
        let d = self.buffer.as_ref();
        checksum::combine(&[
            checksum::pseudo_header_v4(src.octets(), dst.octets(), 6, d.len() as u16),
            checksum::sum(d),
        ])
    }

    #[inline]
    fn sum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        let d = self.buffer.as_ref();
        checksum::combine(&[
            checksum::pseudo_header_v6(src.octets(), dst.octets(), 6, d.len() as u32),
            checksum::sum(d),
        ])
    }

    /// Verifies the checksum with the IPv4 pseudo header.
    #[inline]
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        checksum::fold(self.sum_v4(src, dst)) == 0xFFFF
    }

    /// Verifies the checksum with the IPv6 pseudo header.
    #[inline]
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        checksum::fold(self.sum_v6(src, dst)) == 0xFFFF
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

    /// Sets the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, value: u32) {
        wr32(self.buffer.as_mut(), field::SEQ_NUM, value);
    }

    /// Sets the acknowledgement number.
    #[inline]
    pub fn set_ack_number(&mut self, value: u32) {
        wr32(self.buffer.as_mut(), field::ACK_NUM, value);
    }

    /// Sets the header length in bytes (multiple of 4, <= 60); keeps the low nibble.
    #[inline]
    pub fn set_header_len(&mut self, value: usize) {
        let d = self.buffer.as_mut();
        d[field::DATA_OFF] = (d[field::DATA_OFF] & 0x0f) | (((value / 4) as u8) << 4);
    }

    /// Sets the flag byte.
    #[inline]
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Sets the window size.
    #[inline]
    pub fn set_window_len(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::WIN_SIZE, value);
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the urgent pointer.
    #[inline]
    pub fn set_urgent_at(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::URGENT, value);
    }

    /// Mutable option bytes.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clamp_mut(self.buffer.as_mut(), HEADER_LEN, hl)
    }

    /// Mutable payload bytes.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        let data = self.buffer.as_mut();
        let len = data.len();
        clamp_mut(data, hl, len)
    }

    /// Computes and stores the checksum with the IPv4 pseudo header.
    #[inline]
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let ck = !checksum::fold(self.sum_v4(src, dst));
        self.set_checksum(ck);
    }

    /// Computes and stores the checksum with the IPv6 pseudo header.
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let ck = !checksum::fold(self.sum_v6(src, dst));
        self.set_checksum(ck);
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

/// High-level representation of a TCP header (options are not represented).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgement number.
    pub ack_number: u32,
    /// Flag byte (see [`flags`]).
    pub flags: u8,
    /// Window size.
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_at: u16,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl Repr {
    /// Parses a segment view (re-validating lengths; never panics).
    ///
    /// Options are skipped and the checksum is not verified.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_at: packet.urgent_at(),
            payload_len: packet.payload().len(),
        })
    }

    /// Header length emitted (20: no options).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-byte header with a zero checksum: write the payload, then
    /// call `fill_checksum_v4`/`fill_checksum_v6`.
    ///
    /// # Panics
    /// If the buffer is shorter than 20 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        packet.buffer.as_mut()[field::DATA_OFF] = 0x50;
        packet.set_flags(self.flags);
        packet.set_window_len(self.window_len);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent_at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);

    // TCP SYN 192.168.1.10:44321 -> 192.168.1.1:80 with MSS, SACK-permitted,
    // timestamps, NOP and window scale options; checksummed offline.
    const SYN: [u8; 40] = [
        0xad, 0x21, 0x00, 0x50, 0x6b, 0x8b, 0x45, 0x67, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x89, 0x0d, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x01,
        0xe2, 0x40, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn parse_fixture() {
        let p = Packet::new_checked(&SYN[..]).unwrap();
        assert_eq!(p.src_port(), 44321);
        assert_eq!(p.dst_port(), 80);
        assert_eq!(p.seq_number(), 0x6b8b_4567);
        assert_eq!(p.ack_number(), 0);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), flags::SYN);
        assert!(p.has_flags(flags::SYN) && !p.has_flags(flags::SYN | flags::ACK));
        assert_eq!(p.window_len(), 64240);
        assert_eq!(p.checksum(), 0x890d);
        assert_eq!(p.urgent_at(), 0);
        assert_eq!(&p.options()[..4], &[0x02, 0x04, 0x05, 0xb4]);
        assert_eq!(p.options().len(), 20);
        assert!(p.payload().is_empty());
        assert!(p.verify_checksum_v4(SRC, DST));
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.flags, flags::SYN);
        assert_eq!(r.payload_len, 0);
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr::parse(&Packet::new_checked(&SYN[..]).unwrap()).unwrap();
        let mut buf = [0xffu8; 24];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        let r = Repr {
            payload_len: 4,
            flags: flags::PSH | flags::ACK,
            ..r
        };
        r.emit(&mut p);
        p.payload_mut().copy_from_slice(b"data");
        p.fill_checksum_v4(SRC, DST);
        let q = Packet::new_checked(&buf[..]).unwrap();
        assert!(q.verify_checksum_v4(SRC, DST));
        assert_eq!(Repr::parse(&q).unwrap(), r);
        assert_eq!(q.payload(), b"data");
        assert_eq!(r.buffer_len(), 24);
    }

    #[test]
    fn fill_restores_fixture() {
        let mut buf = SYN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_checksum(0);
        assert!(!p.verify_checksum_v4(SRC, DST));
        p.fill_checksum_v4(SRC, DST);
        assert_eq!(buf, SYN);
    }

    #[test]
    fn v6_checksum() {
        let s = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
        let d = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
        let mut buf = SYN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.fill_checksum_v6(s, d);
        assert!(p.verify_checksum_v6(s, d));
        assert!(!p.verify_checksum_v6(s, Ipv6Addr::LOCALHOST));
    }

    #[test]
    fn setters() {
        let mut buf = SYN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_seq_number(3);
        p.set_ack_number(4);
        p.set_flags(flags::SYN | flags::ACK | flags::ECE);
        p.set_window_len(5);
        p.set_urgent_at(6);
        p.set_header_len(24);
        p.options_mut()[0] = 1;
        assert_eq!(
            (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()),
            (1, 2, 3, 4)
        );
        assert_eq!(p.flags(), 0x52);
        assert_eq!((p.window_len(), p.urgent_at()), (5, 6));
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[1, 4, 5, 0xb4]);
        assert_eq!(p.payload().len(), 16);
        // Incremental sequence-number rewrite stays valid.
        p.fill_checksum_v4(SRC, DST);
        let ck = checksum::update32(p.checksum(), 3, 0xdead_beef);
        p.set_seq_number(0xdead_beef);
        p.set_checksum(ck);
        assert!(p.verify_checksum_v4(SRC, DST));
    }

    #[test]
    fn rejects_bad_buffers() {
        assert_eq!(
            Packet::new_checked(&SYN[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&SYN[..39]).unwrap_err(),
            Error::Truncated
        );
        let mut b = SYN;
        b[12] = 0x40;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[12] = 0xf0;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn every_truncation_is_safe() {
        for n in 0..=SYN.len() {
            let res = Packet::new_checked(&SYN[..n]);
            assert_eq!(res.is_ok(), n == SYN.len());
            if let Ok(p) = res {
                let _ = (Repr::parse(&p), p.payload(), p.options());
            }
            let _ = Repr::parse(&Packet::new_unchecked(&SYN[..n]));
        }
    }
}
