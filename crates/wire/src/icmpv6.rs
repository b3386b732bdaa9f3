//! ICMPv6 messages (RFC 4443).

use core::net::Ipv6Addr;

use crate::{checksum, clamp, clamp_mut, rd16, rd32, wr16, wr32, Error, Result};

/// Byte ranges of the ICMPv6 header fields.
pub mod field {
    use core::ops::Range;
    /// Message type.
    pub const TYPE: usize = 0;
    /// Message code.
    pub const CODE: usize = 1;
    /// Checksum (with the IPv6 pseudo header).
    pub const CHECKSUM: Range<usize> = 2..4;
    /// Type-specific 32-bit word (echo ident/seq, MTU, pointer, ...).
    pub const REST: Range<usize> = 4..8;
    /// Echo identifier.
    pub const ECHO_IDENT: Range<usize> = 4..6;
    /// Echo sequence number.
    pub const ECHO_SEQNO: Range<usize> = 6..8;
}

/// Length of the fixed part checked by `new_checked` (type, code, checksum, 4-byte body word).
pub const HEADER_LEN: usize = 8;

/// ICMPv6 message types.
pub mod msg_type {
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Multicast listener query.
    pub const MLD_QUERY: u8 = 130;
    /// Multicast listener report (MLDv1).
    pub const MLD_REPORT: u8 = 131;
    /// Multicast listener done.
    pub const MLD_DONE: u8 = 132;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect.
    pub const REDIRECT: u8 = 137;
    /// Multicast listener report (MLDv2).
    pub const MLDV2_REPORT: u8 = 143;
}

/// A read/write view of an ICMPv6 message.
///
/// Invariant: a view built by [`Packet::new_checked`] holds at least 8 bytes,
/// so getters never panic. The checksum covers the whole buffer: pass exactly
/// the ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (fixed-field getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the 8-byte header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Consumes the view and returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type; see [`msg_type`].
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Message code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The type-specific 32-bit word after the checksum.
    pub fn rest_of_header(&self) -> u32 {
        rd32(self.buffer.as_ref(), field::REST)
    }

    /// Echo identifier.
    pub fn ident(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number.
    pub fn seq_no(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// Message data after the first 8 bytes.
    pub fn data(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        clamp(d, HEADER_LEN, d.len())
    }

    /// Same as [`Packet::data`].
    pub fn payload(&self) -> &[u8] {
        self.data()
    }

    fn sum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        let d = self.buffer.as_ref();
        checksum::combine(&[
            checksum::pseudo_header_v6(src.octets(), dst.octets(), 58, d.len() as u32),
            checksum::sum(d),
        ])
    }

    /// Verifies the checksum with the IPv6 pseudo header.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        checksum::fold(self.sum(src, dst)) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the message type.
    pub fn set_msg_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::TYPE] = value;
    }

    /// Sets the message code.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the type-specific 32-bit word.
    pub fn set_rest_of_header(&mut self, value: u32) {
        wr32(self.buffer.as_mut(), field::REST, value);
    }

    /// Sets the echo identifier.
    pub fn set_ident(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::ECHO_IDENT, value);
    }

    /// Sets the echo sequence number.
    pub fn set_seq_no(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::ECHO_SEQNO, value);
    }

    /// Mutable message data.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let d = self.buffer.as_mut();
        let len = d.len();
        clamp_mut(d, HEADER_LEN, len)
    }

    /// Same as [`Packet::data_mut`].
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.data_mut()
    }

    /// Computes and stores the checksum with the IPv6 pseudo header.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let ck = !checksum::fold(self.sum(src, dst));
        self.set_checksum(ck);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The whole underlying buffer, writable (as the setters see it).
impl<T: AsRef<[u8]> + AsMut<[u8]>> AsMut<[u8]> for Packet<T> {
    fn as_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
}

/// High-level representation of an ICMPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Message type.
    pub msg_type: u8,
    /// Message code.
    pub msg_code: u8,
    /// Type-specific word.
    pub rest_of_header: u32,
    /// Length of the data after the first 8 bytes.
    pub data_len: usize,
}

impl Repr {
    /// Parses a message view (re-validating length; never panics; checksum not verified).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            msg_type: packet.msg_type(),
            msg_code: packet.msg_code(),
            rest_of_header: packet.rest_of_header(),
            data_len: packet.data().len(),
        })
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus data length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data_len
    }

    /// Writes the header with a zero checksum: write the data, then call
    /// [`Packet::fill_checksum`] (it needs the addresses).
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_msg_type(self.msg_type);
        packet.set_msg_code(self.msg_code);
        packet.set_checksum(0);
        packet.set_rest_of_header(self.rest_of_header);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

    // Echo request 2001:db8::1 -> 2001:db8::2, ident 0xbeef, seq 7, "pingpong".
    const ECHO: [u8; 16] = [
        0x80, 0x00, 0xa7, 0xa1, 0xbe, 0xef, 0x00, 0x07, 0x70, 0x69, 0x6e, 0x67, 0x70, 0x6f, 0x6e,
        0x67,
    ];

    #[test]
    fn parse_fixture() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), msg_type::ECHO_REQUEST);
        assert_eq!(p.msg_code(), 0);
        assert_eq!(p.checksum(), 0xa7a1);
        assert_eq!((p.ident(), p.seq_no()), (0xbeef, 7));
        assert_eq!(p.rest_of_header(), 0xbeef_0007);
        assert_eq!(p.data(), b"pingpong");
        assert!(p.verify_checksum(SRC, DST));
        assert!(!p.verify_checksum(SRC, Ipv6Addr::LOCALHOST));
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.data_len, 8);
        assert_eq!(r.buffer_len(), 16);
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr::parse(&Packet::new_checked(&ECHO[..]).unwrap()).unwrap();
        let mut buf = ECHO;
        buf[..8].fill(0x11);
        let mut p = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut p);
        p.fill_checksum(SRC, DST);
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn setters_reply() {
        let mut buf = ECHO;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        let ck = checksum::update16(p.checksum(), 0x8000, 0x8100);
        p.set_msg_type(msg_type::ECHO_REPLY);
        p.set_checksum(ck);
        assert!(p.verify_checksum(SRC, DST));
        p.set_ident(1);
        p.set_seq_no(2);
        p.set_msg_code(3);
        p.data_mut()[0] = b'P';
        p.fill_checksum(DST, SRC);
        assert!(p.verify_checksum(DST, SRC));
        assert_eq!((p.ident(), p.seq_no(), p.msg_code()), (1, 2, 3));
        p.set_rest_of_header(1280);
        assert_eq!(p.rest_of_header(), 1280);
    }

    #[test]
    fn rejects_truncated() {
        assert_eq!(
            Packet::new_checked(&ECHO[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&ECHO[..1])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn every_truncation_is_safe() {
        for n in 0..=ECHO.len() {
            if let Ok(p) = Packet::new_checked(&ECHO[..n]) {
                let _ = (Repr::parse(&p), p.data(), p.verify_checksum(SRC, DST));
            }
            let _ = Repr::parse(&Packet::new_unchecked(&ECHO[..n]));
        }
    }
}
