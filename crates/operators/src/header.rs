//! Header types a packet can be parsed into, and the type-level header stack.
//!
//! A packet's parsed headers are part of its type: `Pkt<(Ipv4, (Ethernet, Raw))>` has an
//! Ethernet header and an IPv4 header on it, IPv4 on top. [`Pkt::parse`](crate::Pkt::parse)
//! pushes a header, [`Pkt::deparse`](crate::Pkt::deparse) pops it, and a UDF sees the top
//! header as a `wire` view: read-only through `&Pkt`, writable through `&mut Pkt`.

use wire::{ethernet, ipv4, tcp, udp};

/// A header type: its name (drop reasons say `parse-<name>`), how long it is in given bytes,
/// and its `wire` views.
pub trait Header: 'static {
    /// Short name, e.g. `"ipv4"`.
    const NAME: &'static str;
    /// The drop reason of a packet that does not parse as this header.
    const PARSE_REASON: &'static str;
    /// A read-only view of the header (and what follows it).
    type View<'a>;
    /// A writable view of the header (and what follows it).
    type ViewMut<'a>;
    /// The header's length if `bytes` (from the header's start to the end of the packet)
    /// hold a well-formed one, else `None`.
    fn length(bytes: &[u8]) -> Option<usize>;
    /// The read-only view over `bytes`, which [`Header::length`] accepted.
    fn view(bytes: &[u8]) -> Self::View<'_>;
    /// The writable view over `bytes`, which [`Header::length`] accepted.
    fn view_mut(bytes: &mut [u8]) -> Self::ViewMut<'_>;
    /// Which packet annotation, if any, parsing this header sets (so Click elements after an
    /// operator NF find the header where Click would have marked it).
    const ANNOTATION: Annotation = Annotation::None;
}

/// The packet annotation a parsed header sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotation {
    /// None.
    None,
    /// The MAC header annotation.
    Mac,
    /// The network header annotation.
    Network,
    /// The transport header annotation.
    Transport,
}

/// `H` may be parsed on top of `P`, when the bytes of `P` say so (an EtherType, an IP
/// protocol number).
pub trait Over<P: Header>: Header {
    /// Whether `below` (the bytes of the header under it, from its start to the packet's
    /// end) announce this header.
    fn follows(below: &[u8]) -> bool;
}

/// The null header every packet starts with: zero bytes, nothing to see.
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw;

impl Header for Raw {
    const NAME: &'static str = "raw";
    const PARSE_REASON: &'static str = "parse-raw";
    type View<'a> = &'a [u8];
    type ViewMut<'a> = &'a mut [u8];
    fn length(_: &[u8]) -> Option<usize> {
        Some(0)
    }
    fn view(bytes: &[u8]) -> &[u8] {
        bytes
    }
    fn view_mut(bytes: &mut [u8]) -> &mut [u8] {
        bytes
    }
}

/// An Ethernet II header (14 bytes; VLAN tags are payload).
#[derive(Debug, Clone, Copy, Default)]
pub struct Ethernet;

impl Header for Ethernet {
    const NAME: &'static str = "ethernet";
    const PARSE_REASON: &'static str = "parse-ethernet";
    const ANNOTATION: Annotation = Annotation::Mac;
    type View<'a> = ethernet::Frame<&'a [u8]>;
    type ViewMut<'a> = ethernet::Frame<&'a mut [u8]>;
    #[inline]
    fn length(bytes: &[u8]) -> Option<usize> {
        (bytes.len() >= ethernet::HEADER_LEN).then_some(ethernet::HEADER_LEN)
    }
    #[inline]
    fn view(bytes: &[u8]) -> Self::View<'_> {
        ethernet::Frame::new_unchecked(bytes)
    }
    #[inline]
    fn view_mut(bytes: &mut [u8]) -> Self::ViewMut<'_> {
        ethernet::Frame::new_unchecked(bytes)
    }
}

impl Over<Raw> for Ethernet {
    #[inline]
    fn follows(_: &[u8]) -> bool {
        true
    }
}

/// An IPv4 header with its options: version 4, a header length of at least 20 bytes that
/// fits in the packet, a total length no shorter than the header. The checksum is not
/// checked (as NetBricks' parse does not; filter on it if the NF must).
#[derive(Debug, Clone, Copy, Default)]
pub struct Ipv4;

impl Header for Ipv4 {
    const NAME: &'static str = "ipv4";
    const PARSE_REASON: &'static str = "parse-ipv4";
    const ANNOTATION: Annotation = Annotation::Network;
    type View<'a> = ipv4::Packet<&'a [u8]>;
    type ViewMut<'a> = ipv4::Packet<&'a mut [u8]>;
    #[inline]
    fn length(bytes: &[u8]) -> Option<usize> {
        let first = *bytes.first()?;
        let hl = usize::from(first & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?]));
        (first >> 4 == 4 && hl >= ipv4::HEADER_LEN && hl <= bytes.len() && total >= hl)
            .then_some(hl)
    }
    #[inline]
    fn view(bytes: &[u8]) -> Self::View<'_> {
        ipv4::Packet::new_unchecked(bytes)
    }
    #[inline]
    fn view_mut(bytes: &mut [u8]) -> Self::ViewMut<'_> {
        ipv4::Packet::new_unchecked(bytes)
    }
}

impl Over<Ethernet> for Ipv4 {
    #[inline]
    fn follows(below: &[u8]) -> bool {
        below.get(12..14) == Some(&[0x08, 0x00])
    }
}

impl Over<Raw> for Ipv4 {
    #[inline]
    fn follows(_: &[u8]) -> bool {
        true
    }
}

/// Whether an IPv4 header (`below`) carries protocol `proto` in its first fragment.
#[inline]
fn ipv4_carries(below: &[u8], proto: u8) -> bool {
    below.get(9) == Some(&proto)
        && below
            .get(6..8)
            .is_some_and(|f| u16::from_be_bytes([f[0], f[1]]) & 0x1fff == 0)
}

/// A TCP header with its options (data offset at least 5 words, inside the packet).
#[derive(Debug, Clone, Copy, Default)]
pub struct Tcp;

impl Header for Tcp {
    const NAME: &'static str = "tcp";
    const PARSE_REASON: &'static str = "parse-tcp";
    const ANNOTATION: Annotation = Annotation::Transport;
    type View<'a> = tcp::Packet<&'a [u8]>;
    type ViewMut<'a> = tcp::Packet<&'a mut [u8]>;
    #[inline]
    fn length(bytes: &[u8]) -> Option<usize> {
        let hl = usize::from(*bytes.get(12)? >> 4) * 4;
        (hl >= tcp::HEADER_LEN && hl <= bytes.len()).then_some(hl)
    }
    #[inline]
    fn view(bytes: &[u8]) -> Self::View<'_> {
        tcp::Packet::new_unchecked(bytes)
    }
    #[inline]
    fn view_mut(bytes: &mut [u8]) -> Self::ViewMut<'_> {
        tcp::Packet::new_unchecked(bytes)
    }
}

impl Over<Ipv4> for Tcp {
    #[inline]
    fn follows(below: &[u8]) -> bool {
        ipv4_carries(below, 6)
    }
}

/// A UDP header (8 bytes).
#[derive(Debug, Clone, Copy, Default)]
pub struct Udp;

impl Header for Udp {
    const NAME: &'static str = "udp";
    const PARSE_REASON: &'static str = "parse-udp";
    const ANNOTATION: Annotation = Annotation::Transport;
    type View<'a> = udp::Packet<&'a [u8]>;
    type ViewMut<'a> = udp::Packet<&'a mut [u8]>;
    #[inline]
    fn length(bytes: &[u8]) -> Option<usize> {
        (bytes.len() >= udp::HEADER_LEN).then_some(udp::HEADER_LEN)
    }
    #[inline]
    fn view(bytes: &[u8]) -> Self::View<'_> {
        udp::Packet::new_unchecked(bytes)
    }
    #[inline]
    fn view_mut(bytes: &mut [u8]) -> Self::ViewMut<'_> {
        udp::Packet::new_unchecked(bytes)
    }
}

impl Over<Ipv4> for Udp {
    #[inline]
    fn follows(below: &[u8]) -> bool {
        ipv4_carries(below, 17)
    }
}

/// A stack of parsed headers, as a type: [`Raw`] at the bottom, `(H, Below)` for `H` parsed
/// on top of `Below`.
pub trait Stack: 'static {
    /// The header on top.
    type Top: Header;
    /// How many headers are parsed (not counting [`Raw`]).
    const DEPTH: usize;
}

impl Stack for Raw {
    type Top = Raw;
    const DEPTH: usize = 0;
}

impl<H: Header, S: Stack> Stack for (H, S) {
    type Top = H;
    const DEPTH: usize = S::DEPTH + 1;
}

/// The deepest header stack a packet may carry.
pub const MAX_DEPTH: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_length_checks_version_ihl_and_total() {
        let mut h = [0u8; 24];
        h[0] = 0x46;
        h[3] = 24;
        assert_eq!(Ipv4::length(&h), Some(24));
        assert_eq!(Ipv4::length(&h[..23]), None, "options past the end");
        h[0] = 0x44;
        assert_eq!(Ipv4::length(&h), None, "IHL below 5");
        h[0] = 0x65;
        assert_eq!(Ipv4::length(&h), None, "version 6");
        h[0] = 0x45;
        h[3] = 19;
        assert_eq!(Ipv4::length(&h), None, "total length below the header");
        assert_eq!(Ipv4::length(&[]), None);
    }

    #[test]
    fn transport_follows_only_first_fragments_of_its_protocol() {
        let mut ip = [0u8; 20];
        ip[9] = 6;
        assert!(<Tcp as Over<Ipv4>>::follows(&ip));
        assert!(!<Udp as Over<Ipv4>>::follows(&ip));
        ip[7] = 1; // fragment offset 8
        assert!(!<Tcp as Over<Ipv4>>::follows(&ip));
        assert_eq!(<(Tcp, (Ipv4, (Ethernet, Raw))) as Stack>::DEPTH, 3);
    }
}
