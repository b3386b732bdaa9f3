//! VXLAN (RFC 7348) and VXLAN-GPE (draft-ietf-nvo3-vxlan-gpe) headers.
//!
//! Both are 8 bytes: flags, 16 reserved bits, a byte that is reserved in
//! VXLAN and holds the next protocol in VXLAN-GPE (when the P flag is set),
//! the 24-bit VNI and a reserved byte. One view serves both.

use crate::{clamp, clamp_mut, rd32, wr32, Error, Result};

/// Byte ranges of the VXLAN / VXLAN-GPE header fields.
pub mod field {
    use core::ops::{Range, RangeFrom};
    /// Flags byte.
    pub const FLAGS: usize = 0;
    /// Reserved (VXLAN: 24 bits from here; GPE: 16 bits).
    pub const RESERVED: Range<usize> = 1..3;
    /// Next protocol (VXLAN-GPE only; reserved in VXLAN).
    pub const NEXT_PROTO: usize = 3;
    /// VNI (24 bits) and a reserved byte.
    pub const VNI: Range<usize> = 4..8;
    /// Encapsulated payload.
    pub const PAYLOAD: RangeFrom<usize> = 8..;
}

/// Length of the VXLAN / VXLAN-GPE header.
pub const HEADER_LEN: usize = 8;

/// IANA UDP destination port for VXLAN.
pub const VXLAN_PORT: u16 = 4789;

/// IANA UDP destination port for VXLAN-GPE.
pub const VXLAN_GPE_PORT: u16 = 4790;

/// Flag bits of the first byte.
pub mod flags {
    /// VNI is valid (both VXLAN and GPE).
    pub const I: u8 = 0x08;
    /// Next protocol field is present (GPE).
    pub const P: u8 = 0x04;
    /// BUM traffic (GPE).
    pub const B: u8 = 0x02;
    /// OAM packet (GPE).
    pub const O: u8 = 0x01;
    /// GPE version bits (must be 0).
    pub const VERSION_MASK: u8 = 0x30;
}

/// VXLAN-GPE next protocol values.
pub mod next_protocol {
    /// IPv4.
    pub const IPV4: u8 = 1;
    /// IPv6.
    pub const IPV6: u8 = 2;
    /// Ethernet.
    pub const ETHERNET: u8 = 3;
    /// Network Service Header.
    pub const NSH: u8 = 4;
    /// MPLS.
    pub const MPLS: u8 = 5;
}

/// A read/write view of a VXLAN or VXLAN-GPE header.
///
/// Invariant: a view built by [`Packet::new_checked`] holds at least 8 bytes,
/// so getters never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (getters may panic if it is short).
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

    /// Flags byte; see [`flags`].
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// I flag: the VNI is valid.
    pub fn i_flag(&self) -> bool {
        self.flags() & flags::I != 0
    }

    /// P flag (GPE): the next protocol field is present.
    pub fn p_flag(&self) -> bool {
        self.flags() & flags::P != 0
    }

    /// B flag (GPE): BUM traffic.
    pub fn b_flag(&self) -> bool {
        self.flags() & flags::B != 0
    }

    /// O flag (GPE): OAM packet.
    pub fn o_flag(&self) -> bool {
        self.flags() & flags::O != 0
    }

    /// GPE version (2 bits).
    pub fn gpe_version(&self) -> u8 {
        (self.flags() & flags::VERSION_MASK) >> 4
    }

    /// Raw next protocol byte (meaningful for GPE with the P flag set).
    pub fn next_protocol(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_PROTO]
    }

    /// VXLAN network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        rd32(self.buffer.as_ref(), field::VNI) >> 8
    }

    /// Encapsulated bytes after the 8-byte header.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        clamp(d, HEADER_LEN, d.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the flags byte.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Sets the next protocol byte (does not touch the P flag).
    pub fn set_next_protocol(&mut self, value: u8) {
        self.buffer.as_mut()[field::NEXT_PROTO] = value;
    }

    /// Sets the VNI (low 24 bits of `value`), keeping the reserved byte.
    pub fn set_vni(&mut self, value: u32) {
        let reserved = rd32(self.buffer.as_ref(), field::VNI) & 0xff;
        wr32(self.buffer.as_mut(), field::VNI, (value << 8) | reserved);
    }

    /// Mutable encapsulated bytes.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let d = self.buffer.as_mut();
        let len = d.len();
        clamp_mut(d, HEADER_LEN, len)
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

/// High-level representation of a VXLAN (`next_protocol: None`) or VXLAN-GPE
/// (`next_protocol: Some(_)`) header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// VXLAN network identifier (24 bits).
    pub vni: u32,
    /// GPE next protocol when the P flag is set; `None` for plain VXLAN.
    pub next_protocol: Option<u8>,
}

impl Repr {
    /// Parses a header view (never panics). The I flag must be set
    /// (`Malformed` otherwise); a non-zero GPE version is `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if !packet.i_flag() {
            return Err(Error::Malformed);
        }
        if packet.gpe_version() != 0 {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            vni: packet.vni(),
            next_protocol: packet.p_flag().then(|| packet.next_protocol()),
        })
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Bytes written by `emit` (8; the payload follows).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header: I flag (+P and next protocol for GPE), VNI, zero reserved bits.
    ///
    /// # Panics
    /// If the buffer is shorter than 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.buffer.as_mut()[..HEADER_LEN].fill(0);
        match self.next_protocol {
            Some(np) => {
                packet.set_flags(flags::I | flags::P);
                packet.set_next_protocol(np);
            }
            None => packet.set_flags(flags::I),
        }
        packet.set_vni(self.vni);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // VXLAN, I flag, VNI 0x123456, then the start of an inner Ethernet frame.
    const VXLAN: [u8; 12] = [
        0x08, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x00, 0x00, 0x16, 0x3e, 0x11,
    ];

    // VXLAN-GPE, I+P flags, next protocol NSH, VNI 100, then an NSH base header.
    const GPE_NSH: [u8; 12] = [
        0x0c, 0x00, 0x00, 0x04, 0x00, 0x00, 0x64, 0x00, 0x0f, 0xc6, 0x01, 0x03,
    ];

    #[test]
    fn parse_vxlan() {
        let p = Packet::new_checked(&VXLAN[..]).unwrap();
        assert!(p.i_flag() && !p.p_flag() && !p.b_flag() && !p.o_flag());
        assert_eq!(p.vni(), 0x12_3456);
        assert_eq!(p.payload(), &VXLAN[8..]);
        assert_eq!(
            Repr::parse(&p),
            Ok(Repr {
                vni: 0x12_3456,
                next_protocol: None
            })
        );
    }

    #[test]
    fn parse_gpe() {
        let p = Packet::new_checked(&GPE_NSH[..]).unwrap();
        assert!(p.i_flag() && p.p_flag());
        assert_eq!(p.gpe_version(), 0);
        assert_eq!(p.next_protocol(), next_protocol::NSH);
        assert_eq!(p.vni(), 100);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.next_protocol, Some(4));
        assert_eq!(r.buffer_len(), 8);
    }

    #[test]
    fn emit_round_trip() {
        for fixture in [VXLAN, GPE_NSH] {
            let r = Repr::parse(&Packet::new_checked(&fixture[..]).unwrap()).unwrap();
            let mut buf = fixture;
            buf[..8].fill(0xff);
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            assert_eq!(buf, fixture);
        }
    }

    #[test]
    fn setters() {
        let mut buf = VXLAN;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_vni(0xffff_ffff);
        assert_eq!(p.vni(), 0xff_ffff);
        p.set_flags(flags::I | flags::P | flags::B | flags::O);
        p.set_next_protocol(next_protocol::IPV6);
        assert!(p.p_flag() && p.b_flag() && p.o_flag());
        assert_eq!(p.next_protocol(), 2);
        p.payload_mut()[0] = 0x99;
        assert_eq!(p.into_inner()[8], 0x99);
        assert_eq!(buf[7], 0, "reserved byte untouched");
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(
            Packet::new_checked(&VXLAN[..7]).unwrap_err(),
            Error::Truncated
        );
        let mut b = VXLAN;
        b[0] = 0;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
        b[0] = 0x18;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
    }

    #[test]
    fn every_truncation_is_safe() {
        for fixture in [VXLAN, GPE_NSH] {
            for n in 0..=fixture.len() {
                let res = Packet::new_checked(&fixture[..n]);
                assert_eq!(res.is_ok(), n >= 8);
                if let Ok(p) = res {
                    let _ = (Repr::parse(&p), p.payload());
                }
                let _ = Repr::parse(&Packet::new_unchecked(&fixture[..n]));
            }
        }
    }
}
