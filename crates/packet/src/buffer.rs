//! The owned packet buffer with headroom.

use crate::meta::{Meta, NO_OFFSET};
use wire::ethernet::{self, Frame as EthernetFrame};
use wire::icmpv4::{self, Packet as Icmpv4Packet};
use wire::ipv4::{self, Packet as Ipv4Packet};
use wire::tcp::{self, Packet as TcpPacket};
use wire::udp::{self, Packet as UdpPacket};

/// Bytes reserved in front of the data so headers can be pushed without copying the payload.
pub const DEFAULT_HEADROOM: usize = 128;

/// Why a typed header accessor ([`Packet::ipv4`], [`Packet::tcp_mut`], …) found no header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderError {
    /// The header annotation is unset or points outside the data.
    Missing,
    /// Fewer bytes follow the annotation than the header's fixed part needs.
    Truncated,
}

/// `h` when it holds at least `len` bytes.
#[inline]
fn fixed(h: &[u8], len: usize) -> Result<&[u8], HeaderError> {
    if h.len() >= len {
        Ok(h)
    } else {
        Err(HeaderError::Truncated)
    }
}

/// Writable [`fixed`].
#[inline]
fn fixed_mut(h: &mut [u8], len: usize) -> Result<&mut [u8], HeaderError> {
    if h.len() >= len {
        Ok(h)
    } else {
        Err(HeaderError::Truncated)
    }
}

/// An owned packet: bytes with headroom in front, plus metadata.
///
/// The data lives in `buf[head..tail]`. Header offsets in [`Meta`] are absolute offsets into
/// the buffer, so they stay valid when headers are pulled off or pushed on (as Click's
/// header annotations do).
///
/// The packet lives in one heap allocation, so moving a `Packet` between elements moves a
/// pointer; executors recycle whole packets ([`Packet::reset`]) instead of allocating.
#[derive(Debug, PartialEq, Eq)]
pub struct Packet(Box<PacketData>);

/// The contents of a [`Packet`]: bytes and metadata. Reached through `Deref` (`packet.meta`).
#[derive(Debug, PartialEq, Eq)]
pub struct PacketData {
    buf: Vec<u8>,
    head: usize,
    tail: usize,
    /// Annotations and bookkeeping.
    pub meta: Meta,
}

impl std::ops::Deref for Packet {
    type Target = PacketData;
    #[inline]
    fn deref(&self) -> &PacketData {
        &self.0
    }
}

impl std::ops::DerefMut for Packet {
    #[inline]
    fn deref_mut(&mut self) -> &mut PacketData {
        &mut self.0
    }
}

impl Packet {
    /// Copies `data` into a new packet with [`DEFAULT_HEADROOM`] bytes of headroom.
    pub fn from_bytes(data: &[u8]) -> Packet {
        Packet::from_bytes_in(Vec::new(), data)
    }

    /// Copies `data` into a packet that reuses `buf`'s allocation (a recycled buffer).
    pub fn from_bytes_in(mut buf: Vec<u8>, data: &[u8]) -> Packet {
        // The headroom's old contents do not matter: reuse them instead of zeroing.
        if buf.len() >= DEFAULT_HEADROOM {
            buf.truncate(DEFAULT_HEADROOM);
        } else {
            buf.clear();
            buf.resize(DEFAULT_HEADROOM, 0);
        }
        buf.extend_from_slice(data);
        let tail = buf.len();
        Packet(Box::new(PacketData {
            buf,
            head: DEFAULT_HEADROOM,
            tail,
            meta: Meta::default(),
        }))
    }

    /// Reuses this packet for new contents: `data` with fresh metadata, keeping the
    /// allocations (how executors recycle packets without touching the allocator).
    #[inline]
    pub fn reset(&mut self, data: &[u8]) {
        let d = &mut *self.0;
        if d.buf.len() >= DEFAULT_HEADROOM {
            d.buf.truncate(DEFAULT_HEADROOM);
        } else {
            d.buf.clear();
            d.buf.resize(DEFAULT_HEADROOM, 0);
        }
        d.buf.extend_from_slice(data);
        d.head = DEFAULT_HEADROOM;
        d.tail = d.buf.len();
        d.meta = Meta::default();
    }

    /// The packet's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.0.buf[self.0.head..self.0.tail]
    }

    /// The packet's bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.0.buf[self.0.head..self.0.tail]
    }

    /// Length of the data in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.tail - self.0.head
    }

    /// True when the packet holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.tail == self.0.head
    }

    /// Bytes available in front of the data.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.0.head
    }

    /// Absolute buffer offset of the first data byte (what header offsets are relative to).
    #[inline]
    pub fn data_offset(&self) -> u32 {
        self.0.head as u32
    }

    /// Prepends a copy of `bytes` ([`Packet::push`] without zeroing first: an
    /// encapsulation writes every byte anyway).
    #[inline]
    pub fn prepend(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        if n > self.0.head {
            self.push(n).copy_from_slice(bytes);
            return;
        }
        self.0.head -= n;
        let h = self.0.head;
        self.0.buf[h..h + n].copy_from_slice(bytes);
    }

    /// Prepends `n` bytes (zeroed) and returns them. Grows the headroom if needed, moving
    /// header offsets with the data.
    #[inline]
    pub fn push(&mut self, n: usize) -> &mut [u8] {
        if n > self.0.head {
            let grow = (n - self.0.head).max(DEFAULT_HEADROOM);
            let mut nb = Vec::with_capacity(self.0.buf.len() + grow);
            nb.resize(grow, 0);
            nb.extend_from_slice(&self.0.buf);
            self.0.buf = nb;
            self.0.head += grow;
            self.0.tail += grow;
            for off in [
                &mut self.0.meta.mac_offset,
                &mut self.0.meta.network_offset,
                &mut self.0.meta.transport_offset,
            ] {
                if *off != NO_OFFSET {
                    *off += grow as u32;
                }
            }
        }
        self.0.head -= n;
        let s = &mut self.0.buf[self.0.head..self.0.head + n];
        s.fill(0);
        s
    }

    /// Moves the data start back by `n` bytes without clearing them, so bytes removed by
    /// [`Packet::pull`] reappear (Click's `Unstrip`). Falls back to [`Packet::push`] (zeroed
    /// bytes) when the headroom is smaller than `n`.
    #[inline]
    pub fn unpull(&mut self, n: usize) {
        if n <= self.0.head {
            self.0.head -= n;
        } else {
            self.push(n);
        }
    }

    /// Removes `n` bytes from the front. Returns false (and changes nothing) if the packet is
    /// shorter than `n`.
    #[inline]
    pub fn pull(&mut self, n: usize) -> bool {
        if n > self.len() {
            return false;
        }
        self.0.head += n;
        true
    }

    /// Appends `n` zero bytes and returns them.
    #[inline]
    pub fn put(&mut self, n: usize) -> &mut [u8] {
        let old = self.0.tail;
        self.0.buf.truncate(self.0.tail);
        self.0.buf.resize(self.0.tail + n, 0);
        self.0.tail += n;
        &mut self.0.buf[old..self.0.tail]
    }

    /// Removes `n` bytes from the end (saturating at empty).
    #[inline]
    pub fn take(&mut self, n: usize) {
        self.0.tail -= n.min(self.len());
    }

    /// Shortens the data to `len` bytes (no effect if already shorter).
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.0.tail = self.0.head + len;
        }
    }

    /// Replaces the data with `data`, keeping the metadata and the headroom.
    pub fn set_data(&mut self, data: &[u8]) {
        self.0.buf.truncate(self.0.head);
        self.0.buf.extend_from_slice(data);
        self.0.tail = self.0.buf.len();
    }

    /// A deep copy (Click's `clone()` followed by `uniqueify()`), metadata included.
    pub fn duplicate(&self) -> Packet {
        Packet(Box::new(PacketData {
            buf: self.0.buf.clone(),
            head: self.0.head,
            tail: self.0.tail,
            meta: self.0.meta.clone(),
        }))
    }

    /// Makes this packet a deep copy of `src` ([`Packet::duplicate`]'s result: the whole
    /// buffer, headroom bytes included, and the metadata), reusing this packet's allocation.
    pub fn copy_from(&mut self, src: &Packet) {
        let d = &mut *self.0;
        d.buf.clear();
        d.buf.extend_from_slice(&src.0.buf);
        d.head = src.0.head;
        d.tail = src.0.tail;
        d.meta.clone_from(&src.0.meta);
    }

    /// Gives the allocation back for reuse.
    #[inline]
    pub fn into_buffer(self) -> Vec<u8> {
        self.0.buf
    }

    #[inline]
    fn header(&self, off: u32) -> Option<&[u8]> {
        let off = off as usize;
        if off == NO_OFFSET as usize || off < self.0.head || off > self.0.tail {
            None
        } else {
            Some(&self.0.buf[off..self.0.tail])
        }
    }

    #[inline]
    fn header_mut(&mut self, off: u32) -> Option<&mut [u8]> {
        let off = off as usize;
        if off == NO_OFFSET as usize || off < self.0.head || off > self.0.tail {
            None
        } else {
            Some(&mut self.0.buf[off..self.0.tail])
        }
    }

    /// The bytes from the MAC header annotation to the end, if it is set and inside the data.
    #[inline]
    pub fn mac_header(&self) -> Option<&[u8]> {
        self.header(self.0.meta.mac_offset)
    }

    /// Writable bytes from the MAC header annotation to the end.
    #[inline]
    pub fn mac_header_mut(&mut self) -> Option<&mut [u8]> {
        self.header_mut(self.0.meta.mac_offset)
    }

    /// The bytes from the network header annotation to the end, if set and inside the data.
    #[inline]
    pub fn network_header(&self) -> Option<&[u8]> {
        self.header(self.0.meta.network_offset)
    }

    /// Writable bytes from the network header annotation to the end.
    #[inline]
    pub fn network_header_mut(&mut self) -> Option<&mut [u8]> {
        self.header_mut(self.0.meta.network_offset)
    }

    /// The bytes from the transport header annotation to the end, if set and inside the data.
    #[inline]
    pub fn transport_header(&self) -> Option<&[u8]> {
        self.header(self.0.meta.transport_offset)
    }

    /// Writable bytes from the transport header annotation to the end.
    #[inline]
    pub fn transport_header_mut(&mut self) -> Option<&mut [u8]> {
        self.header_mut(self.0.meta.transport_offset)
    }

    /// The IPv4 header at the network header annotation as a `wire` view over the bytes
    /// from there to the end of the data.
    ///
    /// Only the 20-byte fixed header is checked to be there ([`HeaderError::Truncated`]
    /// otherwise; [`HeaderError::Missing`] when the annotation is unset or outside the data):
    /// the view's fixed-field getters are then panic-free, while the version, IHL and length
    /// fields are left to the caller, as Click's elements trust `CheckIPHeader` and accept
    /// (or drop under their own reasons) packets that break them. The view is built with
    /// `new_unchecked` after that one length test, so it costs what indexing the bytes did.
    #[inline]
    pub fn ipv4(&self) -> Result<Ipv4Packet<&[u8]>, HeaderError> {
        let h = self.network_header().ok_or(HeaderError::Missing)?;
        fixed(h, ipv4::HEADER_LEN).map(Ipv4Packet::new_unchecked)
    }

    /// Writable [`Packet::ipv4`].
    #[inline]
    pub fn ipv4_mut(&mut self) -> Result<Ipv4Packet<&mut [u8]>, HeaderError> {
        let h = self.network_header_mut().ok_or(HeaderError::Missing)?;
        fixed_mut(h, ipv4::HEADER_LEN).map(Ipv4Packet::new_unchecked)
    }

    /// The TCP header at the transport header annotation, with its 20-byte fixed part
    /// checked to be there (the data offset is not checked); see [`Packet::ipv4`].
    #[inline]
    pub fn tcp(&self) -> Result<TcpPacket<&[u8]>, HeaderError> {
        let h = self.transport_header().ok_or(HeaderError::Missing)?;
        fixed(h, tcp::HEADER_LEN).map(TcpPacket::new_unchecked)
    }

    /// Writable [`Packet::tcp`].
    #[inline]
    pub fn tcp_mut(&mut self) -> Result<TcpPacket<&mut [u8]>, HeaderError> {
        let h = self.transport_header_mut().ok_or(HeaderError::Missing)?;
        fixed_mut(h, tcp::HEADER_LEN).map(TcpPacket::new_unchecked)
    }

    /// The UDP header at the transport header annotation, with its 8 bytes checked to be
    /// there (the length field is not checked); see [`Packet::ipv4`].
    #[inline]
    pub fn udp(&self) -> Result<UdpPacket<&[u8]>, HeaderError> {
        let h = self.transport_header().ok_or(HeaderError::Missing)?;
        fixed(h, udp::HEADER_LEN).map(UdpPacket::new_unchecked)
    }

    /// Writable [`Packet::udp`].
    #[inline]
    pub fn udp_mut(&mut self) -> Result<UdpPacket<&mut [u8]>, HeaderError> {
        let h = self.transport_header_mut().ok_or(HeaderError::Missing)?;
        fixed_mut(h, udp::HEADER_LEN).map(UdpPacket::new_unchecked)
    }

    /// The ICMP header at the transport header annotation, with its 8 bytes checked to be
    /// there; see [`Packet::ipv4`].
    #[inline]
    pub fn icmpv4(&self) -> Result<Icmpv4Packet<&[u8]>, HeaderError> {
        let h = self.transport_header().ok_or(HeaderError::Missing)?;
        fixed(h, icmpv4::HEADER_LEN).map(Icmpv4Packet::new_unchecked)
    }

    /// Writable [`Packet::icmpv4`].
    #[inline]
    pub fn icmpv4_mut(&mut self) -> Result<Icmpv4Packet<&mut [u8]>, HeaderError> {
        let h = self.transport_header_mut().ok_or(HeaderError::Missing)?;
        fixed_mut(h, icmpv4::HEADER_LEN).map(Icmpv4Packet::new_unchecked)
    }

    /// The Ethernet header at the MAC header annotation, with its 14 bytes checked to be
    /// there; see [`Packet::ipv4`].
    #[inline]
    pub fn ether(&self) -> Result<EthernetFrame<&[u8]>, HeaderError> {
        let h = self.mac_header().ok_or(HeaderError::Missing)?;
        fixed(h, ethernet::HEADER_LEN).map(EthernetFrame::new_unchecked)
    }

    /// Writable [`Packet::ether`].
    #[inline]
    pub fn ether_mut(&mut self) -> Result<EthernetFrame<&mut [u8]>, HeaderError> {
        let h = self.mac_header_mut().ok_or(HeaderError::Missing)?;
        fixed_mut(h, ethernet::HEADER_LEN).map(EthernetFrame::new_unchecked)
    }

    /// Offset of the network header relative to the start of the data, if set and inside.
    #[inline]
    pub fn network_offset_in_data(&self) -> Option<usize> {
        let off = self.0.meta.network_offset as usize;
        (self.0.meta.network_offset != NO_OFFSET && off >= self.0.head && off <= self.0.tail)
            .then(|| off - self.0.head)
    }

    /// Writes `dst` and `src` over the 12 Ethernet address bytes at the MAC-header
    /// annotation (the start of the data without one; bytes in the headroom, as after a
    /// `Strip`, are written there). False, with nothing written, when fewer than 14 bytes
    /// follow the MAC header.
    pub fn write_ether_addrs(&mut self, src: &[u8; 6], dst: &[u8; 6]) -> bool {
        let head = self.data_offset();
        let mac = self.0.meta.mac_offset;
        // Bytes of headroom the MAC header starts before the data (0 if inside the data).
        let back = if mac == NO_OFFSET || mac >= head {
            0
        } else {
            (head - mac) as usize
        };
        let at = if mac == NO_OFFSET || mac < head {
            0
        } else {
            (mac - head) as usize
        };
        self.unpull(back);
        let ok = at.checked_add(14).is_some_and(|end| end <= self.len());
        if ok {
            if let Some(h) = self.data_mut().get_mut(at..) {
                let mut eth = EthernetFrame::new_unchecked(h);
                eth.set_dst_addr(ethernet::Address(*dst));
                eth.set_src_addr(ethernet::Address(*src));
            }
        }
        self.pull(back);
        ok
    }

    /// Sets the MAC header annotation to `offset` bytes into the data.
    #[inline]
    pub fn set_mac_header(&mut self, offset: usize) {
        self.0.meta.mac_offset = (self.0.head + offset) as u32;
    }

    /// Sets the network header annotation to `offset` bytes into the data.
    #[inline]
    pub fn set_network_header(&mut self, offset: usize) {
        self.0.meta.network_offset = (self.0.head + offset) as u32;
    }

    /// Sets the transport header annotation to `offset` bytes into the data.
    #[inline]
    pub fn set_transport_header(&mut self, offset: usize) {
        self.0.meta.transport_offset = (self.0.head + offset) as u32;
    }

    /// All bytes from the network header to the end of the buffer's data, or `None`.
    /// Convenience for `network_header().map(|h| h.len())`-style checks.
    #[inline]
    pub fn network_len(&self) -> usize {
        self.network_header().map_or(0, <[u8]>::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ethernet::ethertype;

    #[test]
    fn push_pull_keep_payload_and_offsets() {
        let mut p = Packet::from_bytes(&[1, 2, 3, 4]);
        p.set_network_header(2);
        assert!(p.pull(2));
        assert_eq!(p.data(), &[3, 4]);
        assert_eq!(p.network_header(), Some(&[3u8, 4][..]));
        p.push(2).copy_from_slice(&[9, 9]);
        assert_eq!(p.data(), &[9, 9, 3, 4]);
        assert!(!p.pull(5));
        // Push more than the headroom: offsets move with the data.
        p.push(500);
        assert_eq!(p.len(), 504);
        assert_eq!(p.network_header(), Some(&[3u8, 4][..]));
        p.put(1)[0] = 7;
        assert_eq!(p.data()[504], 7);
        p.take(3);
        assert_eq!(&p.data()[500..], &[9, 9]);
    }

    #[test]
    fn prepend_copies_in_front_within_and_beyond_the_headroom() {
        let mut p = Packet::from_bytes(&[1, 2]);
        p.set_network_header(0);
        p.prepend(&[7, 8, 9]);
        assert_eq!(p.data(), &[7, 8, 9, 1, 2]);
        assert_eq!(p.network_header(), Some(&[1u8, 2][..]));
        // More than the headroom: it grows, offsets move with the data.
        let big: Vec<u8> = (0..=255u8).cycle().take(700).collect();
        p.prepend(&big);
        assert_eq!(p.len(), 705);
        assert_eq!(&p.data()[..700], &big[..]);
        assert_eq!(&p.data()[700..], &[7, 8, 9, 1, 2]);
        assert_eq!(p.network_header(), Some(&[1u8, 2][..]));
    }

    #[test]
    fn typed_headers_at_the_annotations() {
        // Ethernet, a 20-byte IPv4 header (TTL 64, UDP) and an 8-byte UDP header.
        let mut b = vec![0u8; 14 + 20 + 8];
        b[12] = 0x08;
        b[14] = 0x45;
        b[14 + 8] = 64;
        b[14 + 9] = 17;
        b[34..36].copy_from_slice(&53u16.to_be_bytes());
        let mut p = Packet::from_bytes(&b);
        assert_eq!(p.ipv4().err(), Some(HeaderError::Missing));
        assert_eq!(p.ether().err(), Some(HeaderError::Missing));
        p.set_mac_header(0);
        p.set_network_header(14);
        p.set_transport_header(34);
        assert_eq!(p.ether().unwrap().ethertype(), ethertype::IPV4);
        assert_eq!(p.ipv4().unwrap().ttl(), 64);
        assert_eq!(p.udp().unwrap().src_port(), 53);
        assert_eq!(p.icmpv4().unwrap().msg_type(), 0);
        // TCP needs 20 bytes; only 8 follow the transport annotation.
        assert_eq!(p.tcp().err(), Some(HeaderError::Truncated));
        assert_eq!(p.tcp_mut().err(), Some(HeaderError::Truncated));
        p.ipv4_mut().unwrap().set_ttl(63);
        p.udp_mut().unwrap().set_dst_port(7);
        p.ether_mut().unwrap().set_ethertype(ethertype::IPV6);
        p.icmpv4_mut().unwrap().set_msg_code(9);
        let d = p.data();
        assert_eq!(
            (d[12], d[13], d[14 + 8], d[37], d[35]),
            (0x86, 0xdd, 63, 7, 9)
        );
        // Fewer than 20 bytes at the network annotation: truncated, not missing.
        p.set_network_header(30);
        assert_eq!(p.ipv4_mut().err(), Some(HeaderError::Truncated));
        p.truncate(33);
        assert_eq!(p.udp().err(), Some(HeaderError::Missing));
    }

    #[test]
    fn header_outside_data_is_none() {
        let mut p = Packet::from_bytes(&[1, 2, 3, 4]);
        p.set_network_header(0);
        p.pull(2);
        assert!(p.network_header().is_none());
        assert_eq!(p.mac_header(), None);
    }
}
