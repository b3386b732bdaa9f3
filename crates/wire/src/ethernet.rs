//! Ethernet II frames.

use core::fmt;
use core::str::FromStr;

use crate::{clamp, clamp_mut, rd16, rdarr, wr16, Error, Result};

/// Byte ranges of the Ethernet II header fields.
pub mod field {
    use core::ops::{Range, RangeFrom};
    /// Destination MAC address.
    pub const DESTINATION: Range<usize> = 0..6;
    /// Source MAC address.
    pub const SOURCE: Range<usize> = 6..12;
    /// EtherType (or the TPID of a VLAN tag).
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// Payload following the header.
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the Ethernet II header in bytes.
pub const HEADER_LEN: usize = 14;

/// Well-known EtherType values.
pub mod ethertype {
    /// Internet Protocol version 4.
    pub const IPV4: u16 = 0x0800;
    /// Address Resolution Protocol.
    pub const ARP: u16 = 0x0806;
    /// IEEE 802.1Q VLAN tag (C-tag).
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service tag (QinQ S-tag).
    pub const QINQ: u16 = 0x88a8;
    /// Internet Protocol version 6.
    pub const IPV6: u16 = 0x86dd;
    /// Network Service Header (RFC 8300).
    pub const NSH: u16 = 0x894f;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
}

/// A 48-bit Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Address(pub [u8; 6]);

impl Address {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: Address = Address([0xff; 6]);

    /// Returns the raw address bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether this is the broadcast address.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the group bit (LSB of the first octet) is set; includes broadcast.
    #[inline]
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether this is an individual (non-group) address.
    #[inline]
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Whether the locally administered bit is set.
    #[inline]
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

/// The 48-bit integer a MAC address spells in network byte order (`00:00:00:00:00:01` is 1),
/// as header-field values hold it.
#[inline]
pub const fn mac_to_u64(mac: &[u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]])
}

/// The MAC address of the low 48 bits of `v` in network byte order (inverse of
/// [`mac_to_u64`]; higher bits are ignored).
#[inline]
pub const fn u64_to_mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

impl From<[u8; 6]> for Address {
    #[inline]
    fn from(bytes: [u8; 6]) -> Self {
        Address(bytes)
    }
}

impl fmt::Display for Address {
    #[inline]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for Address {
    type Err = Error;

    /// Parses six 1-2 digit hex octets separated consistently by `:` or `-`.
    fn from_str(s: &str) -> Result<Self> {
        let sep = if s.contains(':') { ':' } else { '-' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for byte in out.iter_mut() {
            let part = parts.next().ok_or(Error::Malformed)?;
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(Error::Malformed);
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| Error::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed);
        }
        Ok(Address(out))
    }
}

/// A read/write view of an Ethernet II frame.
///
/// Invariant: a view built by [`Frame::new_checked`] holds at least
/// [`HEADER_LEN`] bytes, so every getter and setter is panic-free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without validation (getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer after checking it holds a full Ethernet header.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Checks that the buffer holds a full Ethernet header.
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

    /// Header length in bytes (always [`HEADER_LEN`]).
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst_addr(&self) -> Address {
        Address(rdarr(self.buffer.as_ref(), field::DESTINATION))
    }

    /// Source MAC address.
    #[inline]
    pub fn src_addr(&self) -> Address {
        Address(rdarr(self.buffer.as_ref(), field::SOURCE))
    }

    /// EtherType field (may be a VLAN TPID; see [`crate::vlan`]).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Bytes after the 14-byte header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        clamp(data, HEADER_LEN, data.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination MAC address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Address) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source MAC address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Address) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType field.
    #[inline]
    pub fn set_ethertype(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::ETHERTYPE, value);
    }

    /// Mutable bytes after the 14-byte header.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let data = self.buffer.as_mut();
        let len = data.len();
        clamp_mut(data, HEADER_LEN, len)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The whole underlying buffer, writable (as the setters see it).
impl<T: AsRef<[u8]> + AsMut<[u8]>> AsMut<[u8]> for Frame<T> {
    #[inline]
    fn as_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
}

/// High-level representation of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source MAC address.
    pub src_addr: Address,
    /// Destination MAC address.
    pub dst_addr: Address,
    /// EtherType.
    pub ethertype: u16,
}

impl Repr {
    /// Parses a frame view (re-validating its length; never panics).
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Header length in bytes.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Bytes `emit` writes (the header only; the payload follows it).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into `frame`.
    ///
    /// # Panics
    /// If the frame buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Ethernet + IPv4 + UDP (DNS query), generated and checksummed offline.
    const FRAME: [u8; 30] = [
        0x00, 0x16, 0x3e, 0x11, 0x22, 0x33, 0x52, 0x54, 0x00, 0x12, 0xab, 0xcd, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x39, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x9b, 0x12, 0xc0, 0xa8, 0x01, 0x0a,
    ];

    #[test]
    fn mac_integers_round_trip() {
        let m = [0x00, 0x16, 0x3e, 0x11, 0x22, 0xff];
        assert_eq!(mac_to_u64(&m), 0x0016_3e11_22ff);
        assert_eq!(u64_to_mac(0x0016_3e11_22ff), m);
        assert_eq!(u64_to_mac(0xffff_0016_3e11_22ff), m);
        assert_eq!(mac_to_u64(&[0xff; 6]), 0xffff_ffff_ffff);
        assert_eq!(mac_to_u64(&[0, 0, 0, 0, 0, 1]), 1);
    }

    #[test]
    fn parse_frame() {
        let f = Frame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr(), Address([0x00, 0x16, 0x3e, 0x11, 0x22, 0x33]));
        assert_eq!(f.src_addr(), Address([0x52, 0x54, 0x00, 0x12, 0xab, 0xcd]));
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(f.payload(), &FRAME[14..]);
        let r = Repr::parse(&f).unwrap();
        assert_eq!(r.ethertype, 0x0800);
        assert_eq!(r.buffer_len(), 14);
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr::parse(&Frame::new_checked(&FRAME[..]).unwrap()).unwrap();
        let mut buf = FRAME;
        buf[..14].fill(0);
        let mut f = Frame::new_unchecked(&mut buf[..]);
        r.emit(&mut f);
        assert_eq!(buf, FRAME);
    }

    #[test]
    fn setters() {
        let mut buf = FRAME;
        let mut f = Frame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(Address::BROADCAST);
        f.set_src_addr(Address([2, 0, 0, 0, 0, 1]));
        f.set_ethertype(ethertype::ARP);
        f.payload_mut()[0] = 0xee;
        assert!(f.dst_addr().is_broadcast());
        assert_eq!(f.src_addr().to_string(), "02:00:00:00:00:01");
        assert_eq!(f.ethertype(), 0x0806);
        assert_eq!(f.into_inner()[14], 0xee);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
        assert!(Frame::new_checked(&FRAME[..14])
            .unwrap()
            .payload()
            .is_empty());
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&FRAME[..3])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn every_truncation_is_safe() {
        for n in 0..=FRAME.len() {
            if let Ok(f) = Frame::new_checked(&FRAME[..n]) {
                let _ = Repr::parse(&f);
                let _ = f.payload();
            }
            let _ = Repr::parse(&Frame::new_unchecked(&FRAME[..n]));
        }
    }

    #[test]
    fn address_classes_and_format() {
        let a: Address = "01:00:5e:00:00:fb".parse().unwrap();
        assert!(a.is_multicast() && !a.is_unicast() && !a.is_broadcast());
        assert_eq!(a.to_string(), "01:00:5e:00:00:fb");
        let b: Address = "52-54-00-12-AB-CD".parse().unwrap();
        assert_eq!(b, Address([0x52, 0x54, 0x00, 0x12, 0xab, 0xcd]));
        assert!(b.is_unicast() && b.is_local());
        assert!(Address::BROADCAST.is_multicast());
        for bad in [
            "",
            "52:54:00:12:ab",
            "52:54:00:12:ab:cd:ef",
            "52:54:00:12:ab:cdd",
            "52:54-00:12:ab:cd",
            "52:54:00:12:ab:zz",
            "52:54:00:12::cd",
            "+1:54:00:12:ab:cd",
        ] {
            assert_eq!(bad.parse::<Address>(), Err(Error::Malformed), "{bad}");
        }
    }
}
