//! The packet operators see: an owned FuseBox packet, its parsed headers as a type, and
//! metadata of the NF's own type.

use crate::header::{Annotation, Header, Over, Raw, Stack, MAX_DEPTH};
use packet::{FlowKey, Packet, Timestamp};
use std::marker::PhantomData;

/// A packet with the header stack `S` parsed (see [`crate::header`]) and metadata `M`
/// computed by the NF's UDFs.
///
/// A `Pkt` is owned, never shared or cloned: handing it to the next operator, to another NF
/// or to another worker moves it, so the sender can no longer read or write it (NetBricks'
/// zero-copy software isolation, checked by the compiler). Header views borrow the packet,
/// so they cannot be kept across a send. An NF that must keep bytes after sending copies
/// them ([`Pkt::payload`]`.to_vec()`).
pub struct Pkt<S: Stack = Raw, M = ()> {
    packet: Packet,
    /// `ends[d - 1]`: where the payload starts when `d ≥ 1` headers are parsed (with none,
    /// at 0); header `d` (1-based) spans from the end of header `d - 1` to `ends[d - 1]`.
    /// Sixteen bits each keep a packet four words long (headers start within 64 KiB).
    ends: [u16; MAX_DEPTH],
    meta: M,
    _stack: PhantomData<fn() -> S>,
}

impl<S: Stack, M: std::fmt::Debug> std::fmt::Debug for Pkt<S, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkt")
            .field("top", &S::Top::NAME)
            .field("depth", &S::DEPTH)
            .field("len", &self.packet.len())
            .field("meta", &self.meta)
            .finish()
    }
}

impl Pkt<Raw, ()> {
    /// A packet with nothing parsed yet.
    #[inline(always)]
    pub fn new(packet: Packet) -> Pkt<Raw, ()> {
        Pkt {
            packet,
            ends: [0; MAX_DEPTH],
            meta: (),
            _stack: PhantomData,
        }
    }
}

impl<S: Stack, M> Pkt<S, M> {
    /// Where the payload starts with `d` headers parsed.
    #[inline(always)]
    fn end_of(&self, d: usize) -> usize {
        match d.checked_sub(1) {
            None => 0,
            Some(i) => self.ends.get(i).map_or(0, |&e| usize::from(e)),
        }
    }

    /// Where the top header starts in the data.
    #[inline(always)]
    fn top_start(&self) -> usize {
        self.end_of(S::DEPTH.saturating_sub(1))
    }

    /// Where the payload (what follows the top header) starts in the data.
    #[inline(always)]
    fn payload_start(&self) -> usize {
        self.end_of(S::DEPTH)
    }

    /// The top header, read-only (for [`Raw`], the whole packet).
    #[inline(always)]
    pub fn header(&self) -> <S::Top as Header>::View<'_> {
        let at = self.top_start();
        S::Top::view(self.packet.data().get(at..).unwrap_or_default())
    }

    /// The top header, writable.
    #[inline(always)]
    pub fn header_mut(&mut self) -> <S::Top as Header>::ViewMut<'_> {
        let at = self.top_start();
        S::Top::view_mut(self.packet.data_mut().get_mut(at..).unwrap_or_default())
    }

    /// The bytes after the top header.
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        self.packet
            .data()
            .get(self.payload_start()..)
            .unwrap_or_default()
    }

    /// The bytes after the top header, writable.
    #[inline(always)]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let at = self.payload_start();
        self.packet.data_mut().get_mut(at..).unwrap_or_default()
    }

    /// Cuts the payload to `len` bytes (nothing happens if it is not longer). Length fields
    /// in the headers are the UDF's to update.
    pub fn truncate_payload(&mut self, len: usize) {
        self.packet
            .truncate(self.payload_start().saturating_add(len));
    }

    /// Appends `bytes` to the payload. Length fields in the headers are the UDF's to update.
    pub fn extend_payload(&mut self, bytes: &[u8]) {
        let at = self.packet.len();
        self.packet.put(bytes.len()).copy_from_slice(bytes);
        debug_assert_eq!(self.packet.len(), at + bytes.len());
    }

    /// The FuseBox packet underneath, read-only (for readers of whole packets, such as
    /// [`crate::stream::Window::observe`]).
    #[inline]
    pub fn packet(&self) -> &Packet {
        &self.packet
    }

    /// The whole frame.
    #[inline]
    pub fn data(&self) -> &[u8] {
        self.packet.data()
    }

    /// The frame's length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.packet.len()
    }

    /// Whether the frame is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.packet.is_empty()
    }

    /// The capture timestamp (the virtual clock's reading when the packet arrived).
    #[inline]
    pub fn timestamp(&self) -> Timestamp {
        self.packet.meta.timestamp
    }

    /// Click's annotations and FuseBox's bookkeeping (paint, timestamp, ingress).
    #[inline]
    pub fn anno(&self) -> &packet::Meta {
        &self.packet.meta
    }

    /// Writable annotations.
    #[inline]
    pub fn anno_mut(&mut self) -> &mut packet::Meta {
        &mut self.packet.meta
    }

    /// The NF's metadata for this packet.
    #[inline]
    pub fn meta(&self) -> &M {
        &self.meta
    }

    /// The NF's metadata, writable.
    #[inline]
    pub fn meta_mut(&mut self) -> &mut M {
        &mut self.meta
    }

    /// The packet with metadata `meta` instead (of another type, perhaps).
    #[inline]
    pub fn with_meta<M2>(self, meta: M2) -> Pkt<S, M2> {
        Pkt {
            packet: self.packet,
            ends: self.ends,
            meta,
            _stack: PhantomData,
        }
    }

    /// The packet's 5-tuple, read from the frame (Ethernet, VLAN tags, IPv4 or IPv6), ports
    /// as FuseBox's flow tables take them; `None` for frames that are not IP.
    #[inline]
    pub fn flow(&self) -> Option<FlowKey> {
        FlowKey::from_ethernet(self.packet.data())
    }

    /// Parses header `H` on top of the stack, or gives the packet back unchanged if the
    /// bytes do not announce or hold one, or it would end past 64 KiB (the operator drops
    /// it under `H::PARSE_REASON`).
    #[inline(always)]
    pub fn parse<H: Over<S::Top>>(mut self) -> Result<Pkt<(H, S), M>, Pkt<S, M>> {
        let top = self.top_start();
        let at = self.payload_start();
        let data = self.packet.data();
        let len = match (
            S::DEPTH < MAX_DEPTH,
            data.get(top..).is_some_and(H::follows),
            data.get(at..).and_then(H::length),
        ) {
            (true, true, Some(len)) => len,
            _ => return Err(self),
        };
        let (Ok(end), Some(slot)) = (u16::try_from(at + len), self.ends.get_mut(S::DEPTH)) else {
            return Err(self);
        };
        *slot = end;
        match H::ANNOTATION {
            Annotation::None => {}
            Annotation::Mac => self.packet.set_mac_header(at),
            Annotation::Network => self.packet.set_network_header(at),
            Annotation::Transport => self.packet.set_transport_header(at),
        }
        Ok(Pkt {
            packet: self.packet,
            ends: self.ends,
            meta: self.meta,
            _stack: PhantomData,
        })
    }

    /// Hands the packet back as a FuseBox packet (its annotations set for the headers that
    /// were parsed), ending its life as an operator packet.
    #[inline(always)]
    pub fn into_packet(self) -> Packet {
        self.packet
    }

    /// Forgets every parsed header (the bytes stay as they are).
    #[inline]
    pub fn reset(self) -> Pkt<Raw, M> {
        Pkt {
            packet: self.packet,
            ends: [0; MAX_DEPTH],
            meta: self.meta,
            _stack: PhantomData,
        }
    }
}

impl<H: Header, B: Stack, M> Pkt<(H, B), M> {
    /// Pops the top header: its bytes become payload again.
    #[inline(always)]
    pub fn deparse(self) -> Pkt<B, M> {
        Pkt {
            packet: self.packet,
            ends: self.ends,
            meta: self.meta,
            _stack: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Ethernet, Ipv4, Tcp, Udp};

    fn udp_frame() -> Vec<u8> {
        wire::build::Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53)
            .payload(b"hello")
            .build()
    }

    #[test]
    fn parse_walks_the_stack_and_deparse_gives_it_back() {
        let p = Pkt::new(Packet::from_bytes(&udp_frame()));
        let p = p.parse::<Ethernet>().unwrap();
        assert_eq!(p.header().ethertype(), 0x0800);
        let p = p.parse::<Ipv4>().unwrap();
        assert_eq!(p.header().ttl(), 64);
        assert_eq!(p.payload().len(), 8 + 5);
        let p = match p.parse::<Tcp>() {
            Ok(_) => panic!("a UDP packet parsed as TCP"),
            Err(p) => p,
        };
        let mut p = p.parse::<Udp>().unwrap();
        assert_eq!(p.payload(), b"hello");
        assert_eq!(p.header().dst_port(), 53);
        p.header_mut().set_dst_port(54);
        let p = p.deparse();
        assert_eq!(p.payload().len(), 8 + 5);
        let packet = p.deparse().deparse().into_packet();
        assert_eq!(packet.data()[14 + 20 + 2..14 + 20 + 4], [0, 54]);
        assert_eq!(
            packet.meta.network_offset as usize,
            packet.data_offset() as usize + 14
        );
    }

    #[test]
    fn a_short_frame_does_not_parse() {
        let frame = udp_frame();
        let p = Pkt::new(Packet::from_bytes(&frame[..30]));
        let p = p.parse::<Ethernet>().unwrap();
        assert!(p.parse::<Ipv4>().is_err());
        let p = Pkt::new(Packet::from_bytes(&frame[..10]));
        assert!(p.parse::<Ethernet>().is_err());
    }

    #[test]
    fn payload_length_changes() {
        let p = Pkt::new(Packet::from_bytes(&udp_frame()));
        let mut p = p
            .parse::<Ethernet>()
            .and_then(|p| p.parse::<Ipv4>().map_err(|_| unreachable!()))
            .unwrap()
            .parse::<Udp>()
            .unwrap();
        p.truncate_payload(2);
        assert_eq!(p.payload(), b"he");
        p.extend_payload(b"y!");
        assert_eq!(p.payload(), b"hey!");
        let p = p.with_meta(7u32);
        assert_eq!(*p.meta(), 7);
    }
}
