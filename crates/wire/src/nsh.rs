//! Network Service Header (RFC 8300).
//!
//! Layout: a 4-byte base header, a 4-byte service path header, then context
//! headers — four fixed 4-byte words for MD type 1, or variable TLVs for MD
//! type 2 — for a total of `length * 4` bytes.

use crate::{clamp, clamp_mut, rd32, wr32, Error, Result};

/// Byte ranges of the NSH fields.
pub mod field {
    use core::ops::{Range, RangeFrom};
    /// Version (2 bits), O bit, U bit, TTL high 4 bits.
    pub const VER_O_TTL: usize = 0;
    /// TTL low 2 bits, length (6 bits, in 4-byte words).
    pub const TTL_LEN: usize = 1;
    /// Unassigned (4 bits) and MD type (4 bits).
    pub const MD_TYPE: usize = 2;
    /// Next protocol.
    pub const NEXT_PROTO: usize = 3;
    /// Service path header: SPI (24 bits) and SI (8 bits).
    pub const SERVICE_PATH: Range<usize> = 4..8;
    /// Service path identifier.
    pub const SPI: Range<usize> = 4..7;
    /// Service index.
    pub const SI: usize = 7;
    /// Context headers (MD type 1) or TLVs (MD type 2).
    pub const CONTEXT: RangeFrom<usize> = 8..;
}

/// Length of the base header plus the service path header.
pub const MIN_HEADER_LEN: usize = 8;

/// Length of an MD type 1 NSH (length field 6).
pub const MD1_HEADER_LEN: usize = 24;

/// Maximum length of MD type 2 metadata (63 words minus the 2 fixed words).
pub const MAX_MD2_LEN: usize = 61 * 4;

/// MD type values.
pub mod md_type {
    /// Fixed-length context headers.
    pub const TYPE1: u8 = 1;
    /// Variable-length TLV context headers.
    pub const TYPE2: u8 = 2;
}

/// Next protocol values.
pub mod next_protocol {
    /// IPv4.
    pub const IPV4: u8 = 1;
    /// IPv6.
    pub const IPV6: u8 = 2;
    /// Ethernet.
    pub const ETHERNET: u8 = 3;
    /// NSH.
    pub const NSH: u8 = 4;
    /// MPLS.
    pub const MPLS: u8 = 5;
}

/// One MD type 2 metadata TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tlv<'a> {
    /// Metadata class.
    pub class: u16,
    /// Type within the class.
    pub tlv_type: u8,
    /// Value bytes (unpadded, `length` bytes).
    pub value: &'a [u8],
}

impl Tlv<'_> {
    /// Encoded size in bytes: 4-byte TLV header plus value padded to 4.
    pub fn encoded_len(&self) -> usize {
        4 + self.value.len().div_ceil(4) * 4
    }

    /// Writes the TLV (class, type, the unassigned bit clear, length, the value and zero
    /// padding to a 4-byte boundary) at the start of `buf`; returns the bytes written
    /// ([`Tlv::encoded_len`]).
    ///
    /// # Panics
    /// If the value is longer than 127 bytes or `buf` is shorter than `encoded_len()`.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        assert!(
            self.value.len() <= 0x7f,
            "NSH TLV value longer than 127 bytes"
        );
        let n = self.encoded_len();
        let out = &mut buf[..n];
        out[..2].copy_from_slice(&self.class.to_be_bytes());
        out[2] = self.tlv_type;
        out[3] = self.value.len() as u8;
        out[4..4 + self.value.len()].copy_from_slice(self.value);
        out[4 + self.value.len()..].fill(0);
        n
    }
}

/// The MD type 2 metadata area holding `tlvs` in order (for [`Metadata::Type2`]).
///
/// # Panics
/// If a value is longer than 127 bytes.
pub fn encode_tlvs(tlvs: &[Tlv<'_>]) -> Vec<u8> {
    let mut out = vec![0; tlvs.iter().map(Tlv::encoded_len).sum()];
    let mut at = 0;
    for t in tlvs {
        at += t.emit(&mut out[at..]);
    }
    out
}

/// How an NSH packet travels between service functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Outer Ethernet (EtherType 0x894F) | NSH.
    Ethernet,
    /// Outer Ethernet | IPv4 | UDP (destination port 4790) | VXLAN-GPE (next protocol NSH) | NSH.
    VxlanGpe,
}

/// Where the NSH lies in a frame [`locate`] recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The transport the NSH came over.
    pub transport: Transport,
    /// Offset of the NSH in the frame (its length is the NSH's own length field).
    pub nsh: usize,
    /// Offset of what the NSH carries (the inner frame when its next protocol is Ethernet).
    pub inner: usize,
}

/// Finds the NSH in an Ethernet frame carrying one over either [`Transport`] (no VLAN tags;
/// an IPv4 header with options is walked; UDP to port 4790 with a VXLAN-GPE header whose P
/// flag is set and next protocol is NSH). The NSH is validated as [`Packet::new_checked`]
/// does. `None` for any other frame or a truncated one; never panics.
pub fn locate(frame: &[u8]) -> Option<Located> {
    use crate::{ethernet, ipv4, udp, vxlan};
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    let (transport, nsh) = match eth.ethertype() {
        ethernet::ethertype::NSH => (Transport::Ethernet, ethernet::HEADER_LEN),
        ethernet::ethertype::IPV4 => {
            let ip = ipv4::Packet::new_checked(eth.payload()).ok()?;
            if ip.protocol() != crate::ip::protocol::UDP || ip.more_frags() || ip.frag_offset() != 0
            {
                return None;
            }
            let u = udp::Packet::new_checked(ip.payload()).ok()?;
            if u.dst_port() != vxlan::VXLAN_GPE_PORT {
                return None;
            }
            let g = vxlan::Packet::new_checked(u.payload()).ok()?;
            if !g.p_flag() || g.gpe_version() != 0 || g.next_protocol() != vxlan::next_protocol::NSH
            {
                return None;
            }
            let at = ethernet::HEADER_LEN + ip.header_len() + udp::HEADER_LEN + vxlan::HEADER_LEN;
            (Transport::VxlanGpe, at)
        }
        _ => return None,
    };
    let p = Packet::new_checked(frame.get(nsh..)?).ok()?;
    Some(Located {
        transport,
        nsh,
        inner: nsh + p.header_len(),
    })
}

/// Iterator over MD type 2 TLVs; yields `Err(Truncated)` once and stops if
/// a TLV overruns the metadata area.
#[derive(Debug, Clone)]
pub struct TlvIter<'a> {
    data: &'a [u8],
}

impl<'a> TlvIter<'a> {
    /// Iterates over the TLVs encoded in `data`.
    pub fn new(data: &'a [u8]) -> TlvIter<'a> {
        TlvIter { data }
    }
}

impl<'a> Iterator for TlvIter<'a> {
    type Item = Result<Tlv<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() {
            return None;
        }
        let data = core::mem::take(&mut self.data);
        let Some(&[c0, c1, tlv_type, len]) = data.get(..4) else {
            return Some(Err(Error::Truncated));
        };
        let len = usize::from(len & 0x7f);
        let padded = len.div_ceil(4) * 4;
        let Some(value) = data.get(4..4 + len) else {
            return Some(Err(Error::Truncated));
        };
        let Some(rest) = data.get(4 + padded..) else {
            return Some(Err(Error::Truncated));
        };
        self.data = rest;
        Some(Ok(Tlv {
            class: u16::from_be_bytes([c0, c1]),
            tlv_type,
            value,
        }))
    }
}

/// A read/write view of an NSH.
///
/// Invariant: a view built by [`Packet::new_checked`] has version 0,
/// `8 <= header_len() <= buffer.len()` and, for MD type 1, `header_len() ==
/// 24`, so getters never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (fixed-field getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after validating version and length.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Validates: 8 bytes present, version 0 (`Unsupported` otherwise),
    /// length >= 2 words and within the buffer, MD type 1 has length 6.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 0 {
            return Err(Error::Unsupported);
        }
        let hl = self.header_len();
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if hl > len {
            return Err(Error::Truncated);
        }
        if self.md_type() == md_type::TYPE1 && hl != MD1_HEADER_LEN {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// Consumes the view and returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (0).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_O_TTL] >> 6
    }

    /// OAM bit.
    pub fn o_bit(&self) -> bool {
        self.buffer.as_ref()[field::VER_O_TTL] & 0x20 != 0
    }

    /// Time to live (6 bits).
    pub fn ttl(&self) -> u8 {
        let d = self.buffer.as_ref();
        ((d[field::VER_O_TTL] & 0x0f) << 2) | (d[field::TTL_LEN] >> 6)
    }

    /// Length field: total NSH length in 4-byte words.
    pub fn length(&self) -> u8 {
        self.buffer.as_ref()[field::TTL_LEN] & 0x3f
    }

    /// Total NSH length in bytes (`length() * 4`).
    pub fn header_len(&self) -> usize {
        usize::from(self.length()) * 4
    }

    /// MD type; see [`md_type`].
    pub fn md_type(&self) -> u8 {
        self.buffer.as_ref()[field::MD_TYPE] & 0x0f
    }

    /// Next protocol; see [`next_protocol`].
    pub fn next_protocol(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_PROTO]
    }

    /// Service path identifier (24 bits).
    pub fn spi(&self) -> u32 {
        rd32(self.buffer.as_ref(), field::SERVICE_PATH) >> 8
    }

    /// Service index.
    pub fn si(&self) -> u8 {
        self.buffer.as_ref()[field::SI]
    }

    /// Context header bytes (after the service path header, up to `header_len`).
    pub fn metadata(&self) -> &[u8] {
        clamp(self.buffer.as_ref(), MIN_HEADER_LEN, self.header_len())
    }

    /// The four MD type 1 context headers, or `None` for other MD types.
    pub fn md1_context(&self) -> Option<[u32; 4]> {
        if self.md_type() != md_type::TYPE1 {
            return None;
        }
        let m = self.metadata();
        let mut out = [0u32; 4];
        for (i, word) in out.iter_mut().enumerate() {
            let b = m.get(i * 4..i * 4 + 4)?;
            *word = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        }
        Some(out)
    }

    /// Iterator over MD type 2 TLVs (empty for other MD types).
    pub fn tlvs(&self) -> TlvIter<'_> {
        if self.md_type() == md_type::TYPE2 {
            TlvIter::new(self.metadata())
        } else {
            TlvIter::new(&[])
        }
    }

    /// Bytes after the NSH.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        clamp(d, self.header_len(), d.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the version (2 bits).
    pub fn set_version(&mut self, value: u8) {
        let d = self.buffer.as_mut();
        d[field::VER_O_TTL] = (d[field::VER_O_TTL] & 0x3f) | ((value & 0x03) << 6);
    }

    /// Sets the OAM bit.
    pub fn set_o_bit(&mut self, value: bool) {
        let d = self.buffer.as_mut();
        d[field::VER_O_TTL] = (d[field::VER_O_TTL] & !0x20) | if value { 0x20 } else { 0 };
    }

    /// Sets the TTL (low 6 bits of `value`).
    pub fn set_ttl(&mut self, value: u8) {
        let d = self.buffer.as_mut();
        d[field::VER_O_TTL] = (d[field::VER_O_TTL] & 0xf0) | ((value >> 2) & 0x0f);
        d[field::TTL_LEN] = (d[field::TTL_LEN] & 0x3f) | ((value & 0x03) << 6);
    }

    /// Sets the length field in 4-byte words (low 6 bits of `value`).
    pub fn set_length(&mut self, value: u8) {
        let d = self.buffer.as_mut();
        d[field::TTL_LEN] = (d[field::TTL_LEN] & 0xc0) | (value & 0x3f);
    }

    /// Sets the MD type (low 4 bits; the unassigned bits are cleared).
    pub fn set_md_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::MD_TYPE] = value & 0x0f;
    }

    /// Sets the next protocol.
    pub fn set_next_protocol(&mut self, value: u8) {
        self.buffer.as_mut()[field::NEXT_PROTO] = value;
    }

    /// Sets the service path identifier (low 24 bits of `value`).
    pub fn set_spi(&mut self, value: u32) {
        let si = self.si();
        wr32(
            self.buffer.as_mut(),
            field::SERVICE_PATH,
            (value << 8) | u32::from(si),
        );
    }

    /// Sets the service index.
    pub fn set_si(&mut self, value: u8) {
        self.buffer.as_mut()[field::SI] = value;
    }

    /// Writes the four MD type 1 context headers (bytes 8..24).
    ///
    /// # Panics
    /// If the buffer is shorter than 24 bytes.
    pub fn set_md1_context(&mut self, context: [u32; 4]) {
        let d = self.buffer.as_mut();
        for (i, word) in context.iter().enumerate() {
            let s = MIN_HEADER_LEN + i * 4;
            d[s..s + 4].copy_from_slice(&word.to_be_bytes());
        }
    }

    /// Mutable context header bytes.
    pub fn metadata_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        clamp_mut(self.buffer.as_mut(), MIN_HEADER_LEN, hl)
    }

    /// Mutable bytes after the NSH.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        let d = self.buffer.as_mut();
        let len = d.len();
        clamp_mut(d, hl, len)
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

/// Context headers of an NSH [`Repr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metadata<'a> {
    /// MD type 1: four fixed context headers.
    Type1([u32; 4]),
    /// MD type 2: encoded TLV bytes (a multiple of 4, at most [`MAX_MD2_LEN`]).
    Type2(&'a [u8]),
}

/// High-level representation of an NSH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// OAM bit.
    pub o_bit: bool,
    /// Time to live (0..=63).
    pub ttl: u8,
    /// Next protocol.
    pub next_protocol: u8,
    /// Service path identifier (24 bits).
    pub spi: u32,
    /// Service index.
    pub si: u8,
    /// Context headers.
    pub metadata: Metadata<'a>,
}

impl<'a> Repr<'a> {
    /// Parses an NSH view (re-validating; never panics).
    ///
    /// MD types other than 1 and 2 are `Unsupported`; MD type 2 TLVs must
    /// exactly fill the metadata area (`Malformed` otherwise).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        let buf: &'a [u8] = packet.buffer.as_ref();
        let metadata = match packet.md_type() {
            md_type::TYPE1 => Metadata::Type1(packet.md1_context().ok_or(Error::Malformed)?),
            md_type::TYPE2 => {
                let md = clamp(buf, MIN_HEADER_LEN, packet.header_len());
                if TlvIter::new(md).any(|t| t.is_err()) {
                    return Err(Error::Malformed);
                }
                Metadata::Type2(md)
            }
            _ => return Err(Error::Unsupported),
        };
        Ok(Repr {
            o_bit: packet.o_bit(),
            ttl: packet.ttl(),
            next_protocol: packet.next_protocol(),
            spi: packet.spi(),
            si: packet.si(),
            metadata,
        })
    }

    /// NSH length in bytes.
    pub fn header_len(&self) -> usize {
        match self.metadata {
            Metadata::Type1(_) => MD1_HEADER_LEN,
            Metadata::Type2(md) => MIN_HEADER_LEN + md.len(),
        }
    }

    /// Bytes written by `emit` (the NSH; the payload follows it).
    pub fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the NSH.
    ///
    /// # Panics
    /// If the buffer is shorter than `header_len()`, or MD type 2 metadata
    /// is not a multiple of 4 bytes or longer than [`MAX_MD2_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let hl = self.header_len();
        assert!(
            hl.is_multiple_of(4) && hl <= 63 * 4,
            "invalid NSH metadata length"
        );
        {
            let d = packet.buffer.as_mut();
            d[..MIN_HEADER_LEN].fill(0);
        }
        packet.set_version(0);
        packet.set_o_bit(self.o_bit);
        packet.set_ttl(self.ttl);
        packet.set_length((hl / 4) as u8);
        packet.set_next_protocol(self.next_protocol);
        packet.set_spi(self.spi);
        packet.set_si(self.si);
        match self.metadata {
            Metadata::Type1(ctx) => {
                packet.set_md_type(md_type::TYPE1);
                packet.set_md1_context(ctx);
            }
            Metadata::Type2(md) => {
                packet.set_md_type(md_type::TYPE2);
                packet.buffer.as_mut()[MIN_HEADER_LEN..hl].copy_from_slice(md);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // MD type 1, TTL 63, length 6, next protocol Ethernet, SPI 0x000309 (777),
    // SI 7, context headers 1, 2, 3, 4 (RFC 8300 figures 1, 3, 4), followed by
    // the first 4 bytes of an inner Ethernet frame.
    const MD1: [u8; 28] = [
        0x0f, 0xc6, 0x01, 0x03, 0x00, 0x03, 0x09, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x16, 0x3e, 0x11,
    ];

    // MD type 2, O bit, TTL 63, length 7, next protocol IPv4, SPI 0x123456,
    // SI 255, TLVs: (class 0x0101, type 1, len 4) and (class 0xfff6, type 0x22,
    // len 5, padded to 8), followed by the first 4 bytes of an IPv4 header.
    const MD2: [u8; 32] = [
        0x2f, 0xc7, 0x02, 0x01, 0x12, 0x34, 0x56, 0xff, 0x01, 0x01, 0x01, 0x04, 0xde, 0xad, 0xbe,
        0xef, 0xff, 0xf6, 0x22, 0x05, 0x01, 0x02, 0x03, 0x04, 0x05, 0x00, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x14,
    ];

    #[test]
    fn parse_md1() {
        let p = Packet::new_checked(&MD1[..]).unwrap();
        assert_eq!(p.version(), 0);
        assert!(!p.o_bit());
        assert_eq!(p.ttl(), 63);
        assert_eq!(p.length(), 6);
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.md_type(), md_type::TYPE1);
        assert_eq!(p.next_protocol(), next_protocol::ETHERNET);
        assert_eq!(p.spi(), 777);
        assert_eq!(p.si(), 7);
        assert_eq!(p.md1_context(), Some([1, 2, 3, 4]));
        assert_eq!(p.tlvs().count(), 0);
        assert_eq!(p.payload(), &[0x00, 0x16, 0x3e, 0x11]);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.metadata, Metadata::Type1([1, 2, 3, 4]));
        assert_eq!(r.buffer_len(), 24);
    }

    #[test]
    fn parse_md2() {
        let p = Packet::new_checked(&MD2[..]).unwrap();
        assert!(p.o_bit());
        assert_eq!((p.ttl(), p.length(), p.md_type()), (63, 7, 2));
        assert_eq!(p.next_protocol(), next_protocol::IPV4);
        assert_eq!((p.spi(), p.si()), (0x12_3456, 255));
        assert_eq!(p.md1_context(), None);
        let tlvs: Vec<_> = p.tlvs().map(|t| t.unwrap()).collect();
        assert_eq!(tlvs.len(), 2);
        assert_eq!(
            tlvs[0],
            Tlv {
                class: 0x0101,
                tlv_type: 1,
                value: &[0xde, 0xad, 0xbe, 0xef]
            }
        );
        assert_eq!(tlvs[1].class, 0xfff6);
        assert_eq!(tlvs[1].tlv_type, 0x22);
        assert_eq!(tlvs[1].value, &[1, 2, 3, 4, 5]);
        assert_eq!(tlvs[1].encoded_len(), 12);
        assert_eq!(p.payload(), &[0x45, 0x00, 0x00, 0x14]);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.header_len(), 28);
        // A zero-length TLV is valid and occupies one word.
        let tlv = TlvIter::new(&[0, 1, 2, 0]).next().unwrap().unwrap();
        assert_eq!((tlv.class, tlv.tlv_type, tlv.value.len()), (1, 2, 0));
    }

    #[test]
    fn emit_round_trip() {
        for fixture in [&MD1[..], &MD2[..]] {
            let r = Repr::parse(&Packet::new_checked(fixture).unwrap()).unwrap();
            let mut buf = fixture.to_vec();
            buf[..r.header_len()].fill(0xff);
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            assert_eq!(buf, fixture);
        }
    }

    #[test]
    fn tlvs_are_emitted_as_parsed() {
        let p = Packet::new_checked(&MD2[..]).unwrap();
        let tlvs: Vec<_> = p.tlvs().map(|t| t.unwrap()).collect();
        assert_eq!(encode_tlvs(&tlvs), &MD2[8..28]);
        // Padding is written as zeros over whatever was there.
        let mut buf = [0xee; 12];
        assert_eq!(tlvs[1].emit(&mut buf), 12);
        assert_eq!(&buf[..], &MD2[16..28]);
        assert!(encode_tlvs(&[]).is_empty());
    }

    #[test]
    fn locate_rejects_other_frames_without_panicking() {
        // Ethernet transport around the MD1 fixture.
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x89, 0x4f];
        f.extend_from_slice(&MD1);
        let at = locate(&f).unwrap();
        assert_eq!(
            (at.transport, at.nsh, at.inner),
            (Transport::Ethernet, 14, 38)
        );
        for n in 0..f.len() {
            assert_eq!(locate(&f[..n]).is_some(), n >= 38, "{n}");
        }
        f[12] = 0x08;
        f[13] = 0x00;
        assert_eq!(locate(&f), None);
    }

    #[test]
    fn setters() {
        let mut buf = MD1;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_ttl(p.ttl() - 1);
        p.set_si(p.si() - 1);
        p.set_spi(0xab_cdef);
        p.set_o_bit(true);
        p.set_next_protocol(next_protocol::NSH);
        p.set_md1_context([5, 6, 7, 8]);
        assert_eq!((p.ttl(), p.si(), p.spi()), (62, 6, 0xab_cdef));
        assert!(p.o_bit());
        assert_eq!(p.version(), 0);
        assert_eq!(p.length(), 6);
        assert_eq!(p.md1_context(), Some([5, 6, 7, 8]));
        p.set_ttl(0xff);
        assert_eq!((p.ttl(), p.length()), (63, 6));
        p.set_length(2);
        p.set_md_type(md_type::TYPE2);
        assert!(p.metadata().is_empty());
        p.metadata_mut();
        p.payload_mut()[0] = 0xaa;
        assert_eq!(p.payload()[0], 0xaa);
        p.set_version(1);
        assert_eq!(p.check_len(), Err(Error::Unsupported));
    }

    #[test]
    fn rejects_bad_buffers() {
        assert_eq!(
            Packet::new_checked(&MD1[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&MD1[..23]).unwrap_err(),
            Error::Truncated
        );
        let mut b = MD1;
        b[1] = 0xc1; // length 1
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[1] = 0xc5; // MD type 1 with length 5
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        let mut b = MD1;
        b[2] = 0x0f; // experimental MD type
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Unsupported));
        // MD type 2 with a TLV overrunning the metadata area.
        let mut b = MD2;
        b[19] = 0x0d;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.tlvs().any(|t| t == Err(Error::Truncated)));
        assert_eq!(p.tlvs().count(), 2);
        assert_eq!(Repr::parse(&p), Err(Error::Malformed));
    }

    #[test]
    fn every_truncation_is_safe() {
        for fixture in [&MD1[..], &MD2[..]] {
            for n in 0..=fixture.len() {
                if let Ok(p) = Packet::new_checked(&fixture[..n]) {
                    let _ = (Repr::parse(&p), p.payload(), p.md1_context());
                    let _ = p.tlvs().count();
                }
                let _ = Repr::parse(&Packet::new_unchecked(&fixture[..n]));
                let _ = TlvIter::new(&fixture[8.min(n)..n]).count();
            }
        }
    }
}
