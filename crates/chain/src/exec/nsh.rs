//! NSH-aware runs (`nsh = true` in the chain file, `fusebox run --nsh`): the chain is a
//! service function that reads and rewrites the NSH itself, with no Dec/Enc stages beside it.
//!
//! At the entry a frame carrying an NSH whose next protocol is Ethernet, over Ethernet
//! transport or VXLAN-GPE (`wire::nsh::locate`), loses the transport and the NSH; what the
//! chain needs to put them back (the header it will send, built once per distinct header) is
//! kept in this table and the packet carries its id in `Meta::nsh`, which follows it through
//! the elements and onto the packets they make from it. At the exit every packet with an id
//! leaves with the header put back: the same SPI, context and TTL (the Fwd stage decrements
//! the TTL), SI − 1 (0 stays 0, for Fwd to drop), and the transport it came by, its
//! addresses swapped (outer MACs; for VXLAN-GPE the outer IPv4 addresses; the UDP source
//! port and the VNI kept, the outer IPv4 TTL 64, the UDP checksum zero). Because the id
//! travels with the packet, a NAT's translated packets and replies leave with the NSH of the
//! packet that caused them: no proxy table keyed by 5-tuples.
//!
//! Frames without an NSH (or with one carrying something other than Ethernet) go through
//! the chain as they are and leave as they are, counted as `plain`.

use std::collections::HashMap;

use packet::Packet;
use wire::nsh::{self, Transport};
use wire::{ethernet, ipv4, udp, vxlan};

/// How many distinct headers the table holds: a packet still in the chain when its header
/// has been replaced by this many newer ones leaves without it (counted as `lost`).
const SLOTS: usize = 1 << 16;

/// The counters of an NSH-aware run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NshCounts {
    /// Input frames whose transport and NSH were taken off.
    pub decapsulated: u64,
    /// Input frames without an NSH (or not carrying Ethernet), run as they are.
    pub plain: u64,
    /// Output packets that left with their transport and NSH put back.
    pub encapsulated: u64,
    /// Output packets whose header had been replaced in the table (left without it).
    pub lost: u64,
    /// Distinct headers seen.
    pub headers: u64,
}

/// One header to put back: what goes in front of the inner frame on the way out.
struct Slot {
    id: u32,
    transport: Transport,
    /// Outer Ethernet (+ IPv4, UDP, VXLAN-GPE with their lengths zero) + NSH with SI − 1.
    out: Box<[u8]>,
}

/// The headers of an NSH-aware run (see the module documentation).
pub(crate) struct NshTable {
    slots: Vec<Option<Slot>>,
    ids: HashMap<Box<[u8]>, u32>,
    next_id: u32,
    /// The header being built for the frame at hand (reused: no allocation per frame).
    key: Vec<u8>,
    /// The frame being sent (reused).
    scratch: Vec<u8>,
    pub(crate) counts: NshCounts,
}

impl NshTable {
    pub(crate) fn new() -> NshTable {
        NshTable {
            slots: Vec::new(),
            ids: HashMap::new(),
            next_id: 1,
            key: Vec::new(),
            scratch: Vec::new(),
            counts: NshCounts::default(),
        }
    }

    /// Takes the transport and NSH off `p` when it carries them, and marks it with their id.
    pub(crate) fn strip(&mut self, p: &mut Packet) {
        let Some(id) = self.intern(p.data()) else {
            self.counts.plain += 1;
            return;
        };
        p.meta.nsh = id.0;
        p.pull(id.1);
        self.counts.decapsulated += 1;
    }

    /// The id of the header of `frame` and where its inner frame starts.
    fn intern(&mut self, frame: &[u8]) -> Option<(u32, usize)> {
        let at = nsh::locate(frame)?;
        let hdr = nsh::Packet::new_checked(frame.get(at.nsh..at.inner)?).ok()?;
        if hdr.next_protocol() != nsh::next_protocol::ETHERNET {
            return None;
        }
        let key = &mut self.key;
        key.clear();
        // Outer Ethernet, addresses swapped.
        key.extend_from_slice(&frame[6..12]);
        key.extend_from_slice(&frame[0..6]);
        match at.transport {
            Transport::Ethernet => key.extend_from_slice(&ethernet::ethertype::NSH.to_be_bytes()),
            Transport::VxlanGpe => {
                let ip = ipv4::Packet::new_checked(&frame[ethernet::HEADER_LEN..]).ok()?;
                let u = udp::Packet::new_checked(ip.payload()).ok()?;
                let g = vxlan::Packet::new_checked(u.payload()).ok()?;
                key.extend_from_slice(&ethernet::ethertype::IPV4.to_be_bytes());
                let mut h = [0u8; ipv4::HEADER_LEN + udp::HEADER_LEN];
                ipv4::Repr {
                    src_addr: ip.dst_addr(),
                    dst_addr: ip.src_addr(),
                    protocol: wire::ip::protocol::UDP,
                    payload_len: 0,
                    ttl: 64,
                    tos: 0,
                    ident: 0,
                    dont_frag: false,
                    more_frags: false,
                    frag_offset: 0,
                }
                .emit(&mut ipv4::Packet::new_unchecked(&mut h[..]));
                let mut uh = udp::Packet::new_unchecked(&mut h[ipv4::HEADER_LEN..]);
                uh.set_src_port(u.src_port());
                uh.set_dst_port(vxlan::VXLAN_GPE_PORT);
                key.extend_from_slice(&h);
                key.extend_from_slice(&g.as_ref()[..vxlan::HEADER_LEN]);
            }
        }
        let n = key.len();
        key.extend_from_slice(hdr.as_ref());
        let si = key[n + nsh::field::SI];
        key[n + nsh::field::SI] = si.saturating_sub(1);
        if let Some(&id) = self.ids.get(&key[..]) {
            return Some((id, at.inner));
        }
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        if self.slots.len() < SLOTS {
            self.slots.resize_with(SLOTS, || None);
        }
        let slot = &mut self.slots[id as usize % SLOTS];
        if let Some(old) = slot.take() {
            self.ids.remove(&old.out);
        }
        let out: Box<[u8]> = key[..].into();
        self.ids.insert(out.clone(), id);
        *slot = Some(Slot {
            id,
            transport: at.transport,
            out,
        });
        self.counts.headers += 1;
        Some((id, at.inner))
    }

    /// The bytes `p` leaves with: its header put back when it carries an id.
    #[inline]
    pub(crate) fn restore<'a>(&'a mut self, p: &'a Packet) -> &'a [u8] {
        let id = p.meta.nsh;
        if id == 0 {
            return p.data();
        }
        let Some(slot) = self.slots.get(id as usize % SLOTS).and_then(Option::as_ref) else {
            self.counts.lost += 1;
            return p.data();
        };
        if slot.id != id {
            self.counts.lost += 1;
            return p.data();
        }
        self.counts.encapsulated += 1;
        let s = &mut self.scratch;
        s.clear();
        s.extend_from_slice(&slot.out);
        s.extend_from_slice(p.data());
        if slot.transport == Transport::VxlanGpe {
            let ip_len = (s.len() - ethernet::HEADER_LEN).min(usize::from(u16::MAX)) as u16;
            let mut ip = ipv4::Packet::new_unchecked(&mut s[ethernet::HEADER_LEN..]);
            ip.set_total_len(ip_len);
            ip.fill_checksum();
            let mut u =
                udp::Packet::new_unchecked(&mut s[ethernet::HEADER_LEN + ipv4::HEADER_LEN..]);
            u.set_len(ip_len - ipv4::HEADER_LEN as u16);
        }
        &self.scratch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::build::{Frame, Gpe, Nsh};

    fn inner() -> Vec<u8> {
        Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53)
            .payload(b"abc")
            .build()
    }

    #[test]
    fn ethernet_transport_round_trip() {
        let mut t = NshTable::new();
        let md1 = Nsh::md1(0x42, 7, [1, 2, 3, 4]).ttl(9);
        let f = md1.ethernet([1; 6], [2; 6], &inner());
        let mut p = Packet::from_bytes(&f);
        t.strip(&mut p);
        assert_eq!(p.data(), &inner()[..]);
        assert_ne!(p.meta.nsh, 0);
        let want = Nsh::md1(0x42, 6, [1, 2, 3, 4])
            .ttl(9)
            .ethernet([2; 6], [1; 6], &inner());
        assert_eq!(t.restore(&p), &want[..]);
        // The same header again is the same id.
        let mut q = Packet::from_bytes(&f);
        t.strip(&mut q);
        assert_eq!(q.meta.nsh, p.meta.nsh);
        assert_eq!(t.counts.headers, 1);
        // A plain frame stays as it is, in and out.
        let mut r = Packet::from_bytes(&inner());
        t.strip(&mut r);
        assert_eq!((r.meta.nsh, r.data()), (0, &inner()[..]));
        assert_eq!(t.restore(&r), &inner()[..]);
        assert_eq!(
            (t.counts.decapsulated, t.counts.plain, t.counts.encapsulated),
            (2, 1, 1)
        );
    }

    #[test]
    fn vxlan_gpe_round_trip_with_md2_and_a_longer_output() {
        let mut t = NshTable::new();
        let tlv = wire::nsh::Tlv {
            class: 0x0101,
            tlv_type: 3,
            value: &[1, 2, 3, 4, 5],
        };
        let mut gpe = Gpe::new([192, 168, 0, 1], [192, 168, 0, 2], 99);
        gpe.sport = 5555;
        gpe.ttl = 3;
        let f = Nsh::md2(0x42, 200, &[tlv]).vxlan_gpe(&gpe, &inner());
        let mut p = Packet::from_bytes(&f);
        t.strip(&mut p);
        assert_eq!(p.data(), &inner()[..]);
        // The chain made the packet longer: the outer lengths follow.
        let longer = Frame::udp([10, 0, 0, 9], [10, 0, 0, 2], 1, 53)
            .payload(&[7; 100])
            .build();
        let mut q = Packet::from_bytes(&longer);
        q.meta.nsh = p.meta.nsh;
        let mut back = gpe;
        (back.src_ip, back.dst_ip) = (gpe.dst_ip, gpe.src_ip);
        (back.src_mac, back.dst_mac) = (gpe.dst_mac, gpe.src_mac);
        back.ttl = 64;
        let want = Nsh::md2(0x42, 199, &[tlv]).vxlan_gpe(&back, &longer);
        assert_eq!(t.restore(&q), &want[..]);
    }

    #[test]
    fn replaced_headers_are_lost_not_wrong() {
        let mut t = NshTable::new();
        let first = Nsh::md1(1, 9, [0; 4]).ethernet([1; 6], [2; 6], &inner());
        let mut p = Packet::from_bytes(&first);
        t.strip(&mut p);
        for i in 0..SLOTS as u32 {
            let f = Nsh::md1(2, 9, [i, 0, 0, 0]).ethernet([1; 6], [2; 6], &inner());
            t.strip(&mut Packet::from_bytes(&f));
        }
        assert_eq!(t.restore(&p), &inner()[..]);
        assert_eq!(t.counts.lost, 1);
    }

    #[test]
    fn bad_nsh_and_other_payloads_are_plain() {
        let mut t = NshTable::new();
        let ip = Nsh::md1(1, 9, [0; 4])
            .next_protocol(wire::nsh::next_protocol::IPV4)
            .ethernet([1; 6], [2; 6], &inner()[14..]);
        let mut cut = Nsh::md1(1, 9, [0; 4]).ethernet([1; 6], [2; 6], &inner());
        cut.truncate(30);
        for f in [ip, cut] {
            let mut p = Packet::from_bytes(&f);
            t.strip(&mut p);
            assert_eq!((p.meta.nsh, p.data()), (0, &f[..]));
        }
        assert_eq!(t.counts.plain, 2);
    }
}
