//! IPv6 headers (RFC 8200) and extension-header walking.

use core::net::Ipv6Addr;

use crate::{clamp, clamp_mut, rd16, rd32, rdarr, wr16, wr32, Error, Result};

pub use crate::ipv4::protocol as next_header;

/// Byte ranges of the IPv6 fixed header fields.
pub mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    /// Payload length (everything after the 40-byte header).
    pub const LENGTH: Range<usize> = 4..6;
    /// Next header.
    pub const NXT_HDR: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC_ADDR: Range<usize> = 8..24;
    /// Destination address.
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = 40;

/// Maximum number of extension headers [`walk_extension_headers`] follows.
pub const MAX_EXTENSION_HEADERS: usize = 16;

/// A read/write view of an IPv6 packet.
///
/// Invariant: a view built by [`Packet::new_checked`] satisfies
/// `buffer.len() >= 40 + payload_len()` and version 6, so getters never
/// panic. `payload` is clamped and never panics. Jumbograms (payload length 0
/// with a jumbo option) are not supported: their payload appears empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (fixed-field getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after validating version and payload length.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Validates: at least 40 bytes, version 6, `40 + payload_len <= buffer length`
    /// (a longer buffer, e.g. Ethernet padding, is accepted).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Consumes the view and returns the underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn ver_tc_flow(&self) -> u32 {
        rd32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    /// IP version (6 for a valid packet).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP + ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// Payload length (bytes after the fixed header, extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Next header (first extension header or upper-layer protocol).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(rdarr::<16>(self.buffer.as_ref(), field::SRC_ADDR))
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(rdarr::<16>(self.buffer.as_ref(), field::DST_ADDR))
    }

    /// Payload bytes (extension headers included), bounded by `payload_len`.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        clamp(self.buffer.as_ref(), HEADER_LEN, end)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    fn set_ver_tc_flow(&mut self, value: u32) {
        wr32(self.buffer.as_mut(), field::VER_TC_FLOW, value);
    }

    /// Sets the version nibble.
    #[inline]
    pub fn set_version(&mut self, value: u8) {
        let v = (self.ver_tc_flow() & 0x0fff_ffff) | (u32::from(value & 0x0f) << 28);
        self.set_ver_tc_flow(v);
    }

    /// Sets the traffic class.
    #[inline]
    pub fn set_traffic_class(&mut self, value: u8) {
        let v = (self.ver_tc_flow() & 0xf00f_ffff) | (u32::from(value) << 20);
        self.set_ver_tc_flow(v);
    }

    /// Sets the flow label (low 20 bits of `value`).
    #[inline]
    pub fn set_flow_label(&mut self, value: u32) {
        let v = (self.ver_tc_flow() & 0xfff0_0000) | (value & 0x000f_ffff);
        self.set_ver_tc_flow(v);
    }

    /// Sets the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the next header.
    #[inline]
    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = value;
    }

    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Mutable payload bytes, bounded by `payload_len`.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        clamp_mut(self.buffer.as_mut(), HEADER_LEN, end)
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

/// High-level representation of the IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Repr {
    /// Parses a packet view (re-validating lengths; never panics).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Header length (40).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the 40-byte fixed header (payload length truncated to 16 bits).
    ///
    /// # Panics
    /// If the buffer is shorter than 40 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_ver_tc_flow(0x6000_0000);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

/// Fragment header information found by [`walk_extension_headers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragInfo {
    /// Fragment offset in bytes.
    pub offset: u16,
    /// More Fragments flag.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl FragInfo {
    /// Whether this is the first fragment (offset 0), which holds the upper-layer header.
    #[inline]
    pub fn is_first(&self) -> bool {
        self.offset == 0
    }
}

/// Walks the extension headers of the IPv6 packet starting at `packet[0]`.
///
/// Follows hop-by-hop (0), routing (43), fragment (44), destination options
/// (60) and AH (51, length in 4-octet units + 2), stopping at any other
/// next-header value (including 59, no next header, and ESP). Returns
/// `(upper protocol, offset of the upper-layer header from the start of the
/// IPv6 header, fragment info)`. For a non-first fragment the walk stops
/// right after the fragment header: the returned protocol is the one named
/// by the fragment header, and the offset points at fragment data, not at a
/// transport header.
///
/// The walk is bounded by `40 + payload_len` and [`MAX_EXTENSION_HEADERS`]
/// (`Unsupported` beyond); it never panics. Header order is not enforced.
pub fn walk_extension_headers(packet: &[u8]) -> Result<(u8, usize, Option<FragInfo>)> {
    let ip = Packet::new_checked(packet)?;
    let end = HEADER_LEN + usize::from(ip.payload_len());
    let data = clamp(packet, 0, end);
    let mut nh = ip.next_header();
    let mut off = HEADER_LEN;
    let mut frag = None;
    for _ in 0..MAX_EXTENSION_HEADERS {
        let len = match nh {
            next_header::HOP_BY_HOP | next_header::IPV6_ROUTE | next_header::IPV6_OPTS => {
                let hdr = data.get(off..off + 2).ok_or(Error::Truncated)?;
                (usize::from(hdr[1]) + 1) * 8
            }
            next_header::AH => {
                let hdr = data.get(off..off + 2).ok_or(Error::Truncated)?;
                (usize::from(hdr[1]) + 2) * 4
            }
            next_header::IPV6_FRAG => 8,
            _ => return Ok((nh, off, frag)),
        };
        let hdr = data.get(off..off + len).ok_or(Error::Truncated)?;
        let next = hdr[0];
        off += len;
        if nh == next_header::IPV6_FRAG {
            let raw = u16::from_be_bytes([hdr[2], hdr[3]]);
            let info = FragInfo {
                offset: raw & 0xfff8,
                more_frags: raw & 0x0001 != 0,
                ident: u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]),
            };
            frag = Some(info);
            if !info.is_first() {
                return Ok((next, off, frag));
            }
        }
        nh = next;
    }
    Err(Error::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv6 UDP 2001:db8::1 -> 2001:db8::2, TC 0x2e, flow 0x12345, "hello fusebox".
    const V6_UDP: [u8; 61] = [
        0x62, 0xe1, 0x23, 0x45, 0x00, 0x15, 0x11, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x13, 0x88, 0x17, 0x70, 0x00,
        0x15, 0x81, 0x1a, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x66, 0x75, 0x73, 0x65, 0x62, 0x6f,
        0x78,
    ];

    const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

    /// IPv6 header with the given next header and extension bytes appended.
    fn with_ext(first: u8, ext: &[u8]) -> Vec<u8> {
        let mut v = V6_UDP[..40].to_vec();
        v[4..6].copy_from_slice(&(ext.len() as u16).to_be_bytes());
        v[6] = first;
        v.extend_from_slice(ext);
        v
    }

    // Hop-by-hop (router alert + padn, 8 bytes) -> routing (type 4 SRH-like,
    // 24 bytes) -> fragment (offset 0, M=1) -> dest opts (8) -> AH (len 4:
    // 24 bytes) -> TCP (20 bytes).
    fn chain() -> Vec<u8> {
        let mut ext = vec![
            43, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00, // HBH
            44, 2, 4, 0, 0, 0, 0, 0, // routing, hdr ext len 2 = 24 bytes
        ];
        ext.extend_from_slice(&[0u8; 16]);
        ext.extend_from_slice(&[60, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]); // fragment
        ext.extend_from_slice(&[51, 0, 0x01, 0x04, 0, 0, 0, 0]); // dest opts (PadN)
        ext.extend_from_slice(&[6, 4, 0, 0, 0, 0, 0x10, 0x01, 0, 0, 0, 1]); // AH
        ext.extend_from_slice(&[0u8; 12]); // ICV
        ext.extend_from_slice(&[0u8; 20]); // TCP header
        with_ext(0, &ext)
    }

    #[test]
    fn parse_fixture() {
        let p = Packet::new_checked(&V6_UDP[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0x2e);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 21);
        assert_eq!(p.next_header(), next_header::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), SRC);
        assert_eq!(p.dst_addr(), DST);
        assert_eq!(p.payload(), &V6_UDP[40..]);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 21);
        assert_eq!(r.buffer_len(), 61);
        assert_eq!(walk_extension_headers(&V6_UDP), Ok((17, 40, None)));
    }

    #[test]
    fn emit_round_trip() {
        let r = Repr::parse(&Packet::new_checked(&V6_UDP[..]).unwrap()).unwrap();
        let mut buf = V6_UDP;
        buf[..40].fill(0xff);
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, V6_UDP);
    }

    #[test]
    fn setters() {
        let mut buf = V6_UDP;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_traffic_class(0xff);
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0xff, 0x12345)
        );
        p.set_flow_label(0xfffff);
        p.set_traffic_class(0);
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0, 0xfffff)
        );
        p.set_hop_limit(1);
        p.set_next_header(next_header::TCP);
        p.set_src_addr(DST);
        p.set_dst_addr(Ipv6Addr::LOCALHOST);
        p.set_payload_len(4);
        p.payload_mut().fill(0);
        assert_eq!(p.hop_limit(), 1);
        assert_eq!(p.next_header(), 6);
        assert_eq!(p.src_addr(), DST);
        assert_eq!(p.dst_addr(), Ipv6Addr::LOCALHOST);
        assert_eq!(p.payload(), &[0, 0, 0, 0]);
        p.set_version(4);
        assert_eq!(p.check_len(), Err(Error::Malformed));
    }

    #[test]
    fn rejects_bad_buffers() {
        assert_eq!(
            Packet::new_checked(&V6_UDP[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&V6_UDP[..60]).unwrap_err(),
            Error::Truncated
        );
        let mut b = V6_UDP;
        b[0] = 0x45;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        let mut padded = V6_UDP.to_vec();
        padded.push(0);
        assert_eq!(
            Packet::new_checked(&padded[..]).unwrap().payload().len(),
            21
        );
    }

    #[test]
    fn walk_full_chain() {
        let pkt = chain();
        let (proto, off, frag) = walk_extension_headers(&pkt).unwrap();
        assert_eq!(proto, next_header::TCP);
        assert_eq!(off, 40 + 8 + 24 + 8 + 8 + 24);
        let frag = frag.unwrap();
        assert!(frag.is_first() && frag.more_frags);
        assert_eq!(frag.ident, 0xdead_beef);
    }

    #[test]
    fn walk_non_first_fragment_stops() {
        // Fragment header: next UDP, offset 1448 (0x5a8 = 181 << 3), M=0.
        let pkt = with_ext(44, &[17, 0, 0x05, 0xa8, 0, 0, 0, 7, 1, 2, 3, 4]);
        let (proto, off, frag) = walk_extension_headers(&pkt).unwrap();
        assert_eq!((proto, off), (17, 48));
        assert_eq!(
            frag,
            Some(FragInfo {
                offset: 1448,
                more_frags: false,
                ident: 7
            })
        );
    }

    #[test]
    fn walk_stops_at_no_next_header_and_esp() {
        let pkt = with_ext(60, &[59, 0, 1, 4, 0, 0, 0, 0]);
        assert_eq!(walk_extension_headers(&pkt), Ok((59, 48, None)));
        let pkt = with_ext(50, &[0; 16]);
        assert_eq!(walk_extension_headers(&pkt), Ok((50, 40, None)));
    }

    #[test]
    fn walk_errors() {
        // Extension header length beyond payload_len.
        let pkt = with_ext(0, &[6, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(walk_extension_headers(&pkt), Err(Error::Truncated));
        // Too many headers: a loop of destination options.
        let mut ext = Vec::new();
        for _ in 0..=MAX_EXTENSION_HEADERS {
            ext.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        assert_eq!(
            walk_extension_headers(&with_ext(60, &ext)),
            Err(Error::Unsupported)
        );
        assert_eq!(walk_extension_headers(&[0x60]), Err(Error::Truncated));
    }

    #[test]
    fn every_truncation_is_safe() {
        for fixture in [V6_UDP.to_vec(), chain()] {
            for n in 0..=fixture.len() {
                let res = Packet::new_checked(&fixture[..n]);
                assert_eq!(res.is_ok(), n == fixture.len());
                if let Ok(p) = res {
                    let _ = (Repr::parse(&p), p.payload());
                }
                let _ = Repr::parse(&Packet::new_unchecked(&fixture[..n]));
                let _ = walk_extension_headers(&fixture[..n]);
                // Also truncate inside the extension chain with a consistent payload_len.
                if n >= 40 {
                    let mut v = fixture[..n].to_vec();
                    v[4..6].copy_from_slice(&((n - 40) as u16).to_be_bytes());
                    let _ = walk_extension_headers(&v);
                }
            }
        }
    }
}
