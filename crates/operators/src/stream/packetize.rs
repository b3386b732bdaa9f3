//! `packetize`: bytes back into TCP packets behind a template's headers.

use packet::{Packet, Timestamp};
use wire::ip::protocol::TCP;
use wire::{ipv4, tcp};

/// Why a template cannot packetize.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PacketizeError {
    /// The template is not an Ethernet frame (VLAN tags allowed) carrying IPv4.
    #[error("the template is not an Ethernet frame carrying IPv4")]
    NotIpv4,
    /// The template's IPv4 packet is not TCP, or is a fragment.
    #[error("the template's IPv4 packet does not carry an unfragmented TCP segment")]
    NotTcp,
    /// The template ends inside its IPv4 or TCP header.
    #[error("the template ends inside its IPv4 or TCP header")]
    Truncated,
    /// The MSS is 0, or so large an IPv4 packet could not hold it.
    #[error("MSS {mss} is not between 1 and {max} (65535 minus the IPv4 and TCP headers)")]
    BadMss {
        /// The MSS asked for.
        mss: usize,
        /// The largest MSS the template's headers allow.
        max: usize,
    },
}

/// The `packetize` operator (NetBricks §3.1): turns bytes into TCP packets that continue a
/// stream, each a copy of a template's headers (Ethernet, VLAN tags, IPv4 with options,
/// TCP with options) followed by at most `mss` payload bytes.
///
/// Per packet: the TCP sequence number continues from the template's (or
/// [`Packetizer::set_seq`]) by the bytes sent, modulo 2^32; SYN, FIN and RST are cleared
/// and PSH set on the last packet of each [`Packetizer::packetize`] call only; the IPv4
/// total length is the packet's, the identification counts up from the template's
/// (modulo 2^16), fragment offset and More Fragments are cleared (Don't Fragment is
/// kept); the IPv4 header checksum and the TCP checksum (over the IPv4 pseudo header) are
/// computed. The packets' MAC, network and transport header annotations are set, and
/// their timestamp is [`Packetizer::set_timestamp`]'s.
#[derive(Debug, Clone)]
pub struct Packetizer {
    /// The template's headers, payload cut off.
    headers: Vec<u8>,
    l3: usize,
    l4: usize,
    mss: usize,
    seq: u32,
    ident: u16,
    timestamp: Timestamp,
}

impl Packetizer {
    /// A packetizer over `template`, an Ethernet frame with IPv4 and TCP headers (its
    /// payload, if any, is ignored), cutting payloads at `mss` bytes.
    pub fn new(template: &[u8], mss: usize) -> Result<Packetizer, PacketizeError> {
        let l2 = wire::vlan::walk(template).map_err(|_| PacketizeError::NotIpv4)?;
        if l2.ethertype != wire::ethernet::ethertype::IPV4 {
            return Err(PacketizeError::NotIpv4);
        }
        let l3 = l2.l3_offset;
        let ip_bytes = template.get(l3..).ok_or(PacketizeError::Truncated)?;
        if ip_bytes.len() < ipv4::HEADER_LEN {
            return Err(PacketizeError::Truncated);
        }
        let ip = ipv4::Packet::new_unchecked(ip_bytes);
        let ihl = ip.header_len();
        if ip.version() != 4 || ihl < ipv4::HEADER_LEN {
            return Err(PacketizeError::NotIpv4);
        }
        if ip.protocol() != TCP || ip.is_fragment() {
            return Err(PacketizeError::NotTcp);
        }
        let l4 = l3 + ihl;
        let t = template
            .get(l4..)
            .and_then(|b| tcp::Packet::new_checked(b).ok())
            .ok_or(PacketizeError::Truncated)?;
        let end = l4 + t.header_len();
        let max = usize::from(u16::MAX) - (end - l3);
        if mss == 0 || mss > max {
            return Err(PacketizeError::BadMss { mss, max });
        }
        Ok(Packetizer {
            seq: t.seq_number(),
            ident: ip.ident(),
            headers: template[..end].to_vec(),
            l3,
            l4,
            mss,
            timestamp: Timestamp(0),
        })
    }

    /// A packetizer over a packet's headers (see [`Packetizer::new`]).
    pub fn from_packet(template: &Packet, mss: usize) -> Result<Packetizer, PacketizeError> {
        let mut p = Packetizer::new(template.data(), mss)?;
        p.timestamp = template.meta.timestamp;
        Ok(p)
    }

    /// The sequence number of the next byte.
    pub fn next_seq(&self) -> u32 {
        self.seq
    }

    /// Sets the sequence number of the next byte.
    pub fn set_seq(&mut self, seq: u32) {
        self.seq = seq;
    }

    /// The IPv4 identification of the next packet.
    pub fn next_ident(&self) -> u16 {
        self.ident
    }

    /// Sets the timestamp of the packets made from now on.
    pub fn set_timestamp(&mut self, ts: Timestamp) {
        self.timestamp = ts;
    }

    /// The MSS.
    pub fn mss(&self) -> usize {
        self.mss
    }

    /// Segments `bytes` into packets (none for no bytes), handing each to `out` in order.
    pub fn packetize_into<O: FnMut(Packet)>(&mut self, bytes: &[u8], out: &mut O) {
        let n = bytes.len().div_ceil(self.mss);
        for (i, chunk) in bytes.chunks(self.mss).enumerate() {
            let last = i + 1 == n;
            let flags = if last { tcp::flags::PSH } else { 0 };
            out(self.segment(chunk, flags));
        }
    }

    /// [`Packetizer::packetize_into`] collected.
    pub fn packetize(&mut self, bytes: &[u8]) -> Vec<Packet> {
        let mut v = Vec::with_capacity(bytes.len().div_ceil(self.mss));
        self.packetize_into(bytes, &mut |p| v.push(p));
        v
    }

    /// A FIN without payload: ends the stream (takes one sequence number).
    pub fn fin(&mut self) -> Packet {
        let p = self.segment(&[], tcp::flags::FIN);
        self.seq = self.seq.wrapping_add(1);
        p
    }

    /// One packet: the headers, `payload`, fields and checksums filled in; `add` are flags
    /// set beside the template's (SYN, FIN, RST, PSH cleared).
    fn segment(&mut self, payload: &[u8], add: u8) -> Packet {
        let mut p = Packet::from_bytes(&self.headers);
        p.put(payload.len()).copy_from_slice(payload);
        p.meta.timestamp = self.timestamp;
        p.set_mac_header(0);
        p.set_network_header(self.l3);
        p.set_transport_header(self.l4);
        let (l3, l4) = (self.l3, self.l4);
        let data = p.data_mut();
        let total = (data.len() - l3) as u16;
        let (src, dst) = {
            let mut ip = ipv4::Packet::new_unchecked(&mut data[l3..l4]);
            ip.set_total_len(total);
            ip.set_ident(self.ident);
            ip.set_more_frags(false);
            ip.set_frag_offset(0);
            ip.fill_checksum();
            (ip.src_addr(), ip.dst_addr())
        };
        let mut t = tcp::Packet::new_unchecked(&mut data[l4..]);
        t.set_seq_number(self.seq);
        let keep = !(tcp::flags::SYN | tcp::flags::FIN | tcp::flags::RST | tcp::flags::PSH);
        t.set_flags((t.flags() & keep) | add);
        t.fill_checksum_v4(src, dst);
        self.seq = self.seq.wrapping_add(payload.len() as u32);
        self.ident = self.ident.wrapping_add(1);
        p
    }
}
