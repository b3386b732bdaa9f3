//! IEEE 802.1Q VLAN tags and 802.1ad (QinQ) tag stacks.
//!
//! A tag view covers the 4 bytes that follow a TPID (0x8100 or 0x88a8):
//! the TCI and the inner EtherType. [`walk`] skips a whole tag stack in an
//! Ethernet frame.

use crate::ethernet::{self, ethertype};
use crate::{clamp, clamp_mut, rd16, wr16, Error, Result};

/// Byte ranges of a VLAN tag, relative to the byte after the TPID.
pub mod field {
    use core::ops::Range;
    /// Tag control information (PCP 3 bits, DEI 1 bit, VID 12 bits).
    pub const TCI: Range<usize> = 0..2;
    /// EtherType of the encapsulated payload (or the next TPID).
    pub const ETHERTYPE: Range<usize> = 2..4;
}

/// Length of a VLAN tag after the TPID (TCI + inner EtherType).
pub const HEADER_LEN: usize = 4;

/// Maximum number of stacked tags [`walk`] accepts.
pub const MAX_TAGS: usize = 8;

/// Whether `ethertype` is a VLAN TPID handled by [`walk`] (0x8100 or 0x88a8).
pub fn is_tpid(ethertype: u16) -> bool {
    ethertype == ethertype::VLAN || ethertype == ethertype::QINQ
}

/// A read/write view of a VLAN tag (TCI + inner EtherType).
///
/// Invariant: a view built by [`Packet::new_checked`] holds at least 4
/// bytes, so getters never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without validation (getters may panic if it is short).
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds the 4-byte tag.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the 4-byte tag.
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

    /// Raw tag control information.
    pub fn tci(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of what follows the tag (may be another TPID).
    pub fn ethertype(&self) -> u16 {
        rd16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Bytes after the tag.
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        clamp(d, HEADER_LEN, d.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the raw TCI.
    pub fn set_tci(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::TCI, value);
    }

    /// Sets the priority code point (low 3 bits of `value`).
    pub fn set_pcp(&mut self, value: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(value & 0x07) << 13);
        self.set_tci(tci);
    }

    /// Sets the drop eligible indicator.
    pub fn set_dei(&mut self, value: bool) {
        let tci = (self.tci() & !0x1000) | if value { 0x1000 } else { 0 };
        self.set_tci(tci);
    }

    /// Sets the VLAN identifier (low 12 bits of `value`).
    pub fn set_vid(&mut self, value: u16) {
        let tci = (self.tci() & 0xf000) | (value & 0x0fff);
        self.set_tci(tci);
    }

    /// Sets the inner EtherType.
    pub fn set_ethertype(&mut self, value: u16) {
        wr16(self.buffer.as_mut(), field::ETHERTYPE, value);
    }

    /// Mutable bytes after the tag.
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

/// High-level representation of a VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..=4095).
    pub vid: u16,
    /// Inner EtherType.
    pub ethertype: u16,
}

impl Repr {
    /// Parses a tag view (re-validating length; never panics).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            pcp: packet.pcp(),
            dei: packet.dei(),
            vid: packet.vid(),
            ethertype: packet.ethertype(),
        })
    }

    /// Tag length after the TPID (4).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Bytes written by `emit` (4).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the TCI and inner EtherType.
    ///
    /// # Panics
    /// If the buffer is shorter than 4 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_tci(0);
        packet.set_pcp(self.pcp);
        packet.set_dei(self.dei);
        packet.set_vid(self.vid);
        packet.set_ethertype(self.ethertype);
    }
}

/// Result of [`walk`]: the L2 tag stack of an Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L2Info {
    /// Number of VLAN tags (0 for an untagged frame).
    pub tags: u8,
    /// EtherType of the outermost header (a TPID when tagged).
    pub outer_ethertype: u16,
    /// Final EtherType after all tags.
    pub ethertype: u16,
    /// VID of the outermost tag, if any.
    pub outer_vid: Option<u16>,
    /// VID of the innermost tag, if any.
    pub inner_vid: Option<u16>,
    /// Offset of the L3 header from the start of the frame (14 + 4 * tags).
    pub l3_offset: usize,
}

/// Walks the VLAN tag stack (0x8100 / 0x88a8, any order, up to [`MAX_TAGS`])
/// of an Ethernet frame; never panics.
///
/// Returns `Truncated` if the frame ends inside the header or a tag, and
/// `Unsupported` for more than [`MAX_TAGS`] tags.
pub fn walk(frame: &[u8]) -> Result<L2Info> {
    let eth = ethernet::Frame::new_checked(frame)?;
    let outer_ethertype = eth.ethertype();
    let mut info = L2Info {
        tags: 0,
        outer_ethertype,
        ethertype: outer_ethertype,
        outer_vid: None,
        inner_vid: None,
        l3_offset: ethernet::HEADER_LEN,
    };
    while is_tpid(info.ethertype) {
        if usize::from(info.tags) == MAX_TAGS {
            return Err(Error::Unsupported);
        }
        let rest = frame.get(info.l3_offset..).ok_or(Error::Truncated)?;
        let tag = Packet::new_checked(rest)?;
        info.outer_vid = info.outer_vid.or(Some(tag.vid()));
        info.inner_vid = Some(tag.vid());
        info.ethertype = tag.ethertype();
        info.tags += 1;
        info.l3_offset += HEADER_LEN;
    }
    Ok(info)
}

/// Where the network header of an Ethernet frame starts, and its EtherType, looking
/// through at most one 802.1Q (0x8100) tag: `(14, ethertype)` for an untagged frame,
/// `(18, inner ethertype)` for a tagged one; `None` when the frame ends before that
/// EtherType. Unlike [`walk`], an 802.1ad TPID or a second tag is not followed (it is the
/// returned EtherType). Never panics; no loop, for per-packet use where one tag is the
/// documented limit.
#[inline]
pub fn single_tag_l3(frame: &[u8]) -> Option<(usize, u16)> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    match eth.ethertype() {
        ethertype::VLAN => {
            let tag = Packet::new_checked(eth.payload()).ok()?;
            Some((ethernet::HEADER_LEN + HEADER_LEN, tag.ethertype()))
        }
        t => Some((ethernet::HEADER_LEN, t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // QinQ: S-tag 0x88a8 (PCP 3, VID 100), C-tag 0x8100 (PCP 0, DEI, VID 200),
    // then IPv4 (first bytes of the header only).
    const QINQ: [u8; 26] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0xab, 0xcd, 0x88, 0xa8, 0x60,
        0x64, 0x81, 0x00, 0x10, 0xc8, 0x08, 0x00, 0x45, 0x00, 0x00, 0x14,
    ];

    #[test]
    fn tag_view() {
        let t = Packet::new_checked(&QINQ[14..]).unwrap();
        assert_eq!(t.tci(), 0x6064);
        assert_eq!((t.pcp(), t.dei(), t.vid()), (3, false, 100));
        assert_eq!(t.ethertype(), ethertype::VLAN);
        let inner = Packet::new_checked(t.payload()).unwrap();
        assert_eq!((inner.pcp(), inner.dei(), inner.vid()), (0, true, 200));
        assert_eq!(inner.ethertype(), ethertype::IPV4);
    }

    #[test]
    fn emit_round_trip_and_setters() {
        let r = Repr::parse(&Packet::new_checked(&QINQ[18..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                pcp: 0,
                dei: true,
                vid: 200,
                ethertype: 0x0800
            }
        );
        let mut buf = [0xffu8; 4];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, QINQ[18..22]);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_pcp(7);
        p.set_dei(false);
        p.set_vid(0xfff);
        p.set_ethertype(ethertype::IPV6);
        assert_eq!(
            (p.pcp(), p.dei(), p.vid(), p.ethertype()),
            (7, false, 4095, 0x86dd)
        );
        p.set_vid(0x1001);
        assert_eq!((p.pcp(), p.vid()), (7, 1));
        assert_eq!(r.buffer_len(), 4);
    }

    #[test]
    fn walk_qinq() {
        let info = walk(&QINQ).unwrap();
        assert_eq!(info.tags, 2);
        assert_eq!(info.outer_ethertype, ethertype::QINQ);
        assert_eq!(info.ethertype, ethertype::IPV4);
        assert_eq!(info.outer_vid, Some(100));
        assert_eq!(info.inner_vid, Some(200));
        assert_eq!(info.l3_offset, 22);
    }

    #[test]
    fn walk_untagged_and_stacked() {
        let mut f = [0u8; 14];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let info = walk(&f).unwrap();
        assert_eq!((info.tags, info.ethertype, info.l3_offset), (0, 0x86dd, 14));
        assert_eq!(info.outer_vid, None);
        // 8 stacked 0x8100 tags are accepted, 9 are not.
        let mut stacked = vec![0u8; 12];
        for i in 0..8u16 {
            stacked.extend_from_slice(&[0x81, 0x00]);
            stacked.extend_from_slice(&(i + 1).to_be_bytes());
        }
        stacked.extend_from_slice(&[0x08, 0x06]);
        let info = walk(&stacked).unwrap();
        assert_eq!((info.tags, info.ethertype, info.l3_offset), (8, 0x0806, 46));
        assert_eq!((info.outer_vid, info.inner_vid), (Some(1), Some(8)));
        let n = stacked.len();
        stacked[n - 2..].copy_from_slice(&[0x81, 0x00]);
        stacked.extend_from_slice(&[0, 9, 8, 0]);
        assert_eq!(walk(&stacked), Err(Error::Unsupported));
    }

    #[test]
    fn rejects_truncated() {
        assert_eq!(
            Packet::new_checked(&QINQ[..3]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(walk(&QINQ[..13]), Err(Error::Truncated));
        assert_eq!(walk(&QINQ[..17]), Err(Error::Truncated));
        assert_eq!(walk(&QINQ[..21]), Err(Error::Truncated));
        assert!(walk(&QINQ[..22]).is_ok());
    }

    #[test]
    fn every_truncation_is_safe() {
        for n in 0..=QINQ.len() {
            let _ = walk(&QINQ[..n]);
            if let Ok(p) = Packet::new_checked(&QINQ[n.min(14)..n]) {
                let _ = (Repr::parse(&p), p.payload());
            }
        }
    }

    #[test]
    fn single_tag_l3_looks_through_one_dot1q_tag() {
        let mut untagged = [0u8; 14];
        untagged[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(single_tag_l3(&untagged), Some((14, ethertype::ARP)));
        assert_eq!(single_tag_l3(&untagged[..13]), None);
        let mut tagged = [0u8; 18];
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        tagged[16..18].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(single_tag_l3(&tagged), Some((18, ethertype::IPV4)));
        for n in 14..18 {
            assert_eq!(single_tag_l3(&tagged[..n]), None);
        }
        // QinQ: the S-tag's TPID is the answer, not followed.
        assert_eq!(single_tag_l3(&QINQ), Some((14, ethertype::QINQ)));
        // Two 802.1Q tags: only the first is looked through.
        let mut two = [0u8; 22];
        two[12..14].copy_from_slice(&[0x81, 0x00]);
        two[16..18].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(single_tag_l3(&two), Some((18, ethertype::VLAN)));
    }
}
