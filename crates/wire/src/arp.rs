//! ARP for Ethernet/IPv4 (RFC 826).

use core::net::Ipv4Addr;

use crate::ethernet::{self, Address};
use crate::{rd16, rdarr, wr16, Error, Result};

/// Byte ranges of the Ethernet/IPv4 ARP packet fields.
pub mod field {
    use core::ops::Range;
    /// Hardware type.
    pub const HTYPE: Range<usize> = 0..2;
    /// Protocol type.
    pub const PTYPE: Range<usize> = 2..4;
    /// Hardware address length.
    pub const HLEN: usize = 4;
    /// Protocol address length.
    pub const PLEN: usize = 5;
    /// Operation.
    pub const OPER: Range<usize> = 6..8;
    /// Sender hardware address.
    pub const SHA: Range<usize> = 8..14;
    /// Sender protocol address.
    pub const SPA: Range<usize> = 14..18;
    /// Target hardware address.
    pub const THA: Range<usize> = 18..24;
    /// Target protocol address.
    pub const TPA: Range<usize> = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

/// Length of an Ethernet frame carrying an ARP packet, without padding (14 + 28).
pub const FRAME_LEN: usize = ethernet::HEADER_LEN + PACKET_LEN;

/// ARP hardware type for Ethernet.
pub const HARDWARE_ETHERNET: u16 = 1;

/// ARP operation codes.
pub mod operation {
    /// ARP request.
    pub const REQUEST: u16 = 1;
    /// ARP reply.
    pub const REPLY: u16 = 2;
}

/// A read/write view of an Ethernet/IPv4 ARP packet.
///
/// Invariant: a view built by [`Packet::new_checked`] holds at least 28 bytes
/// with hardware type 1, protocol type 0x0800 and lengths 6/4, so getters
/// never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after validating it is a complete Ethernet/IPv4 ARP packet.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Validates length (`Truncated`) and address types/lengths (`Unsupported`).
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < 8 {
            return Err(Error::Truncated);
        }
        let needed = 8 + 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()));
        if data.len() < needed {
            return Err(Error::Truncated);
        }
        if self.hardware_type() != HARDWARE_ETHERNET
            || self.protocol_type() != ethernet::ethertype::IPV4
            || self.hardware_len() != 6
            || self.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        Ok(())
    }

    /// Consumes the view and returns the underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 = Ethernet).
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::HTYPE)
    }

    /// Protocol type (0x0800 = IPv4).
    #[inline]
    pub fn protocol_type(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::PTYPE)
    }

    /// Hardware address length.
    #[inline]
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    #[inline]
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation; see [`operation`].
    #[inline]
    pub fn operation(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::OPER)
    }

    /// Sender MAC address.
    #[inline]
    pub fn sender_hardware_addr(&self) -> Address {
        Address(rdarr(self.buffer.as_ref(), field::SHA))
    }

    /// Sender IPv4 address.
    #[inline]
    pub fn sender_protocol_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(rdarr::<4>(self.buffer.as_ref(), field::SPA))
    }

    /// Target MAC address.
    #[inline]
    pub fn target_hardware_addr(&self) -> Address {
        Address(rdarr(self.buffer.as_ref(), field::THA))
    }

    /// Target IPv4 address.
    #[inline]
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(rdarr::<4>(self.buffer.as_ref(), field::TPA))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the hardware type.
    #[inline]
    pub fn set_hardware_type(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::HTYPE, value);
    }

    /// Sets the protocol type.
    #[inline]
    pub fn set_protocol_type(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::PTYPE, value);
    }

    /// Sets the hardware address length.
    #[inline]
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length.
    #[inline]
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the operation.
    #[inline]
    pub fn set_operation(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::OPER, value);
    }

    /// Sets the sender MAC address.
    #[inline]
    pub fn set_sender_hardware_addr(&mut self, addr: Address) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&addr.0);
    }

    /// Sets the sender IPv4 address.
    #[inline]
    pub fn set_sender_protocol_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&addr.octets());
    }

    /// Sets the target MAC address.
    #[inline]
    pub fn set_target_hardware_addr(&mut self, addr: Address) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&addr.0);
    }

    /// Sets the target IPv4 address.
    #[inline]
    pub fn set_target_protocol_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&addr.octets());
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

/// High-level representation of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Operation (1 request, 2 reply).
    pub operation: u16,
    /// Sender MAC address.
    pub sender_hardware_addr: Address,
    /// Sender IPv4 address.
    pub sender_protocol_addr: Ipv4Addr,
    /// Target MAC address.
    pub target_hardware_addr: Address,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

impl Repr {
    /// Parses a packet view (re-validating; never panics).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            operation: packet.operation(),
            sender_hardware_addr: packet.sender_hardware_addr(),
            sender_protocol_addr: packet.sender_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    /// Header length (28: ARP has no payload).
    pub const fn header_len(&self) -> usize {
        PACKET_LEN
    }

    /// Bytes written by `emit` (28).
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// The Ethernet frame from `src` to `dst` (EtherType ARP, no padding) carrying this
    /// packet: what ARP requests and replies are sent as.
    #[inline]
    pub fn frame(&self, dst: Address, src: Address) -> [u8; FRAME_LEN] {
        let mut f = [0u8; FRAME_LEN];
        let eth = ethernet::Repr {
            dst_addr: dst,
            src_addr: src,
            ethertype: ethernet::ethertype::ARP,
        };
        let mut frame = ethernet::Frame::new_unchecked(&mut f[..]);
        eth.emit(&mut frame);
        self.emit(&mut Packet::new_unchecked(frame.payload_mut()));
        f
    }

    /// The ARP packet of an Ethernet frame: EtherType ARP and an Ethernet/IPv4 ARP packet
    /// in the 28 bytes after the header (padding after them ignored); `None` otherwise.
    /// Never panics.
    #[inline]
    pub fn parse_frame(frame: &[u8]) -> Option<Repr> {
        let eth = ethernet::Frame::new_checked(frame.get(..FRAME_LEN)?).ok()?;
        if eth.ethertype() != ethernet::ethertype::ARP {
            return None;
        }
        Repr::parse(&Packet::new_checked(eth.payload()).ok()?).ok()
    }

    /// Writes the complete ARP packet.
    ///
    /// # Panics
    /// If the buffer is shorter than 28 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_hardware_type(HARDWARE_ETHERNET);
        packet.set_protocol_type(ethernet::ethertype::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_sender_hardware_addr(self.sender_hardware_addr);
        packet.set_sender_protocol_addr(self.sender_protocol_addr);
        packet.set_target_hardware_addr(self.target_hardware_addr);
        packet.set_target_protocol_addr(self.target_protocol_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // who-has 192.168.1.1 tell 192.168.1.10 (52:54:00:12:ab:cd).
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0xab, 0xcd, 0xc0,
        0xa8, 0x01, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01,
    ];

    #[test]
    fn parse_fixture() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.protocol_type(), 0x0800);
        assert_eq!((p.hardware_len(), p.protocol_len()), (6, 4));
        assert_eq!(p.operation(), operation::REQUEST);
        assert_eq!(
            p.sender_hardware_addr(),
            Address([0x52, 0x54, 0x00, 0x12, 0xab, 0xcd])
        );
        assert_eq!(p.sender_protocol_addr(), Ipv4Addr::new(192, 168, 1, 10));
        assert_eq!(p.target_hardware_addr(), Address([0; 6]));
        assert_eq!(p.target_protocol_addr(), Ipv4Addr::new(192, 168, 1, 1));
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.operation, 1);
        assert_eq!(r.buffer_len(), 28);
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr::parse(&Packet::new_checked(&REQUEST[..]).unwrap()).unwrap();
        let mut buf = [0xffu8; 28];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, REQUEST);
    }

    #[test]
    fn build_reply_with_setters() {
        let mut buf = REQUEST;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        let mine = Address([0x02, 0, 0, 0, 0, 0x01]);
        let (sha, spa, tpa) = (
            p.sender_hardware_addr(),
            p.sender_protocol_addr(),
            p.target_protocol_addr(),
        );
        p.set_operation(operation::REPLY);
        p.set_target_hardware_addr(sha);
        p.set_target_protocol_addr(spa);
        p.set_sender_hardware_addr(mine);
        p.set_sender_protocol_addr(tpa);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.operation, operation::REPLY);
        assert_eq!(r.sender_hardware_addr, mine);
        assert_eq!(r.sender_protocol_addr, Ipv4Addr::new(192, 168, 1, 1));
        assert_eq!(r.target_hardware_addr, sha);
        assert_eq!(r.target_protocol_addr, Ipv4Addr::new(192, 168, 1, 10));
    }

    #[test]
    fn rejects_bad_buffers() {
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&REQUEST[..5]).unwrap_err(),
            Error::Truncated
        );
        let mut b = REQUEST;
        b[2..4].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Unsupported);
        let mut b = REQUEST;
        b[4] = 8;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
        let mut long = [0u8; 40];
        long[..28].copy_from_slice(&REQUEST);
        long[4] = 8;
        assert_eq!(
            Packet::new_checked(&long[..]).unwrap_err(),
            Error::Unsupported
        );
    }

    #[test]
    fn every_truncation_is_safe() {
        for n in 0..=REQUEST.len() {
            let res = Packet::new_checked(&REQUEST[..n]);
            assert_eq!(res.is_ok(), n == REQUEST.len());
            if let Ok(p) = res {
                let _ = Repr::parse(&p);
            }
            let _ = Repr::parse(&Packet::new_unchecked(&REQUEST[..n]));
        }
    }

    #[test]
    fn ethernet_frames() {
        let r = Repr::parse(&Packet::new_checked(&REQUEST[..]).unwrap()).unwrap();
        let (dst, src) = (
            Address::BROADCAST,
            Address([0x52, 0x54, 0x00, 0x12, 0xab, 0xcd]),
        );
        let f = r.frame(dst, src);
        assert_eq!(&f[..6], &[0xff; 6]);
        assert_eq!(&f[6..12], &src.0);
        assert_eq!(&f[12..14], &[0x08, 0x06]);
        assert_eq!(&f[14..], &REQUEST[..]);
        assert_eq!(Repr::parse_frame(&f), Some(r));
        let mut padded = f.to_vec();
        padded.resize(60, 0);
        assert_eq!(Repr::parse_frame(&padded), Some(r));
        for n in 0..FRAME_LEN {
            assert_eq!(Repr::parse_frame(&f[..n]), None);
        }
        let mut ip = f;
        ip[13] = 0x00;
        assert_eq!(Repr::parse_frame(&ip), None);
        let mut v6 = f;
        v6[16..18].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(Repr::parse_frame(&v6), None);
    }
}
