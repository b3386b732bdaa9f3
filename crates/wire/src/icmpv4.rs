//! ICMPv4 messages (RFC 792).

use crate::{checksum, clamp, clamp_mut, rd16, rd32, wr16, wr32, Error, Result};

/// Byte ranges of the ICMPv4 header fields.
pub mod field {
    use core::ops::Range;
    /// Message type.
    pub const TYPE: usize = 0;
    /// Message code.
    pub const CODE: usize = 1;
    /// Checksum over the whole message.
    pub const CHECKSUM: Range<usize> = 2..4;
    /// Type-specific "rest of header" word.
    pub const REST: Range<usize> = 4..8;
    /// Echo identifier.
    pub const ECHO_IDENT: Range<usize> = 4..6;
    /// Echo sequence number.
    pub const ECHO_SEQNO: Range<usize> = 6..8;
}

/// Length of the fixed ICMPv4 header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = 8;

/// ICMPv4 message types.
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 3;
    /// Source quench (deprecated).
    pub const SOURCE_QUENCH: u8 = 4;
    /// Redirect.
    pub const REDIRECT: u8 = 5;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 9;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 10;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter problem.
    pub const PARAMETER_PROBLEM: u8 = 12;
    /// Timestamp request.
    pub const TIMESTAMP: u8 = 13;
    /// Timestamp reply.
    pub const TIMESTAMP_REPLY: u8 = 14;
    /// Information request (obsolete).
    pub const INFO_REQUEST: u8 = 15;
    /// Information reply (obsolete).
    pub const INFO_REPLY: u8 = 16;
    /// Address mask request.
    pub const ADDRESS_MASK_REQUEST: u8 = 17;
    /// Address mask reply.
    pub const ADDRESS_MASK_REPLY: u8 = 18;

    /// Whether messages of type `t` are errors, which quote the datagram they answer:
    /// destination unreachable, source quench, redirect, time exceeded, parameter problem.
    #[inline]
    pub const fn is_error(t: u8) -> bool {
        matches!(
            t,
            DEST_UNREACHABLE | SOURCE_QUENCH | REDIRECT | TIME_EXCEEDED | PARAMETER_PROBLEM
        )
    }

    /// Whether messages of type `t` are queries or their replies carrying an identifier
    /// (and sequence number) after the checksum: echo, timestamp, information and address
    /// mask.
    #[inline]
    pub const fn has_ident(t: u8) -> bool {
        matches!(
            t,
            ECHO_REPLY
                | ECHO_REQUEST
                | TIMESTAMP
                | TIMESTAMP_REPLY
                | INFO_REQUEST
                | INFO_REPLY
                | ADDRESS_MASK_REQUEST
                | ADDRESS_MASK_REPLY
        )
    }
}

/// Codes of [`msg_type::DEST_UNREACHABLE`] messages.
pub mod dest_unreachable {
    /// Network unreachable.
    pub const NET: u8 = 0;
    /// Host unreachable.
    pub const HOST: u8 = 1;
    /// Protocol unreachable.
    pub const PROTOCOL: u8 = 2;
    /// Port unreachable.
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set (next-hop MTU in the low 16 bits of rest of header).
    pub const FRAG_NEEDED: u8 = 4;
    /// Communication administratively prohibited.
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Codes of [`msg_type::TIME_EXCEEDED`] messages.
pub mod time_exceeded {
    /// TTL exceeded in transit.
    pub const TTL_EXCEEDED: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const FRAG_REASSEMBLY: u8 = 1;
}

/// A read/write view of an ICMPv4 message.
///
/// Invariant: a view built by [`Packet::new_checked`] holds at least
/// [`HEADER_LEN`] bytes, so getters never panic. The checksum covers the
/// whole buffer, so pass exactly the IPv4 payload.
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
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type; see [`msg_type`].
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Message code.
    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Echo identifier (meaningful for echo request/reply).
    #[inline]
    pub fn ident(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number (meaningful for echo request/reply).
    #[inline]
    pub fn seq_no(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// The next-hop MTU of a "fragmentation needed" unreachable (RFC 1191: the low 16 bits
    /// of the rest-of-header word).
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        self.seq_no()
    }

    /// The type-specific 32-bit word following the checksum.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        rd32(self.buffer.as_ref(), field::REST)
    }

    /// Message data after the 8-byte header.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        clamp(d, HEADER_LEN, d.len())
    }

    /// Same as [`Packet::data`].
    #[inline]
    pub fn payload(&self) -> &[u8] {
        self.data()
    }

    /// Whether the checksum over the whole buffer is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the message type.
    #[inline]
    pub fn set_msg_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::TYPE] = value;
    }

    /// Sets the message code.
    #[inline]
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the echo identifier.
    #[inline]
    pub fn set_ident(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::ECHO_IDENT, value);
    }

    /// Sets the echo sequence number.
    #[inline]
    pub fn set_seq_no(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::ECHO_SEQNO, value);
    }

    /// Sets the next-hop MTU of a "fragmentation needed" unreachable (RFC 1191: the low
    /// 16 bits of the rest-of-header word).
    #[inline]
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        self.set_seq_no(value);
    }

    /// Sets the rest-of-header word.
    #[inline]
    pub fn set_rest_of_header(&mut self, value: u32) {
        wr32(self.buffer.as_mut(), field::REST, value);
    }

    /// Mutable message data.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let d = self.buffer.as_mut();
        let len = d.len();
        clamp_mut(d, HEADER_LEN, len)
    }

    /// Same as [`Packet::data_mut`].
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.data_mut()
    }

    /// Zeroes then recomputes the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let ck = checksum::data(self.buffer.as_ref());
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

/// High-level representation of an ICMPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Message type.
    pub msg_type: u8,
    /// Message code.
    pub msg_code: u8,
    /// Type-specific word (e.g. echo ident << 16 | seq).
    pub rest_of_header: u32,
    /// Length of the data following the header.
    pub data_len: usize,
}

impl Repr {
    /// Parses a message view (re-validating length; never panics).
    ///
    /// The checksum is not verified; use [`Packet::verify_checksum`].
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

    /// Writes the header and fills the checksum over the whole view buffer
    /// as it stands (write the data first, or call `fill_checksum` again).
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_msg_type(self.msg_type);
        packet.set_msg_code(self.msg_code);
        packet.set_rest_of_header(self.rest_of_header);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Echo request, ident 0x1234, seq 1, 32 data bytes 0x10..0x2f.
    const ECHO: [u8; 40] = [
        0x08, 0x00, 0xf3, 0xc8, 0x12, 0x34, 0x00, 0x01, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
        0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25,
        0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f,
    ];

    #[test]
    fn next_hop_mtu_is_the_low_half_of_the_rest_of_header() {
        let mut b = [0u8; 8];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_msg_type(3);
        p.set_msg_code(4);
        p.set_next_hop_mtu(1500);
        assert_eq!(p.next_hop_mtu(), 1500);
        assert_eq!(p.rest_of_header(), 1500);
        assert_eq!(b, [3, 4, 0, 0, 0, 0, 0x05, 0xdc]);
    }

    #[test]
    fn parse_fixture() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), msg_type::ECHO_REQUEST);
        assert_eq!(p.msg_code(), 0);
        assert_eq!(p.checksum(), 0xf3c8);
        assert_eq!(p.ident(), 0x1234);
        assert_eq!(p.seq_no(), 1);
        assert_eq!(p.rest_of_header(), 0x1234_0001);
        assert_eq!(p.data(), &ECHO[8..]);
        assert!(p.verify_checksum());
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.data_len, 32);
        assert_eq!(r.buffer_len(), 40);
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr::parse(&Packet::new_checked(&ECHO[..]).unwrap()).unwrap();
        let mut buf = ECHO;
        buf[..8].fill(0);
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn echo_reply_in_place() {
        let mut buf = ECHO;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        let ck = checksum::update16(p.checksum(), 0x0800, 0x0000);
        p.set_msg_type(msg_type::ECHO_REPLY);
        p.set_checksum(ck);
        assert!(p.verify_checksum());
        p.set_ident(7);
        p.set_seq_no(9);
        p.set_msg_code(1);
        p.data_mut()[0] = 0;
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.rest_of_header(), 0x0007_0009);
        p.set_rest_of_header(0x0000_05dc);
        assert_eq!(p.seq_no(), 1500);
    }

    #[test]
    fn rejects_truncated() {
        assert_eq!(
            Packet::new_checked(&ECHO[..7]).unwrap_err(),
            Error::Truncated
        );
        assert!(Packet::new_checked(&ECHO[..8]).is_ok());
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&ECHO[..2])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn every_truncation_is_safe() {
        for n in 0..=ECHO.len() {
            if let Ok(p) = Packet::new_checked(&ECHO[..n]) {
                let _ = (Repr::parse(&p), p.data(), p.verify_checksum());
            }
            let _ = Repr::parse(&Packet::new_unchecked(&ECHO[..n]));
        }
    }

    #[test]
    fn query_types_have_an_identifier() {
        let with: Vec<u8> = (0..=255).filter(|&t| msg_type::has_ident(t)).collect();
        assert_eq!(with, vec![0, 8, 13, 14, 15, 16, 17, 18]);
        let errors: Vec<u8> = (0..=255).filter(|&t| msg_type::is_error(t)).collect();
        assert_eq!(errors, vec![3, 4, 5, 11, 12]);
    }
}
