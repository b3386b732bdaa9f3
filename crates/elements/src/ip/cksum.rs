//! `SetIPChecksum`, `SetTCPChecksum`, `SetUDPChecksum`: full checksum recomputation.

use super::bad_out;
use super::ip_header_mut;
use crate::args::parse_bool;
use crate::model::{Case, Effect, Filter, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use wire::checksum::{combine, fold, pseudo_header_v4, sum};

reasons! {
    /// Why `SetTCPChecksum` and `SetUDPChecksum` drop a packet (besides
    /// [`super::IpHeaderReason`]).
    pub enum SetL4ChecksumReason {
        /// `SetTCPChecksum`: the IP payload (total length − IHL) is shorter than 20 bytes or
        /// longer than the bytes there (Click: "bad lengths").
        BadIpLength => super::CheckIPReason::BadLength.as_str(),
        /// `SetUDPChecksum` with output 1 unconnected: the packet is an IP fragment.
        Fragment => "ip-fragment",
        /// `SetUDPChecksum` with output 1 unconnected: fewer than 8 bytes after the IP
        /// header, or a UDP length field larger than the bytes there.
        BadUdpLength => "bad-udp-length",
    }
}

/// The Internet checksum of transport segment `seg` (checksum field included as it is)
/// with the IPv4 pseudo header: 0 when a filled-in checksum verifies.
pub(crate) fn l4_checksum(src: [u8; 4], dst: [u8; 4], proto: u8, seg: &[u8]) -> u16 {
    let len = seg.len() as u16;
    !fold(combine(&[pseudo_header_v4(src, dst, proto, len), sum(seg)]))
}

/// The destination address Click puts in a transport pseudo header for IP header `ip` of
/// length `hl` (`click_in_cksum_pseudohdr`): the last address of the first strict or loose
/// source route option of at least 7 bytes, else the header's destination. Options are
/// walked as Click does: NOP skips a byte, EOL or a malformed length ends the walk.
fn pseudo_dst(ip: &[u8], hl: usize) -> [u8; 4] {
    let mut dst = [ip[16], ip[17], ip[18], ip[19]];
    let mut o = 20;
    while o < hl {
        match ip[o] {
            1 => {
                o += 1;
                continue;
            }
            0 => break,
            _ => {}
        }
        let len = match ip.get(o + 1) {
            Some(&l) if o + 1 < hl && l >= 2 && o + usize::from(l) <= hl => usize::from(l),
            _ => break,
        };
        if (ip[o] == 131 || ip[o] == 137) && len >= 7 {
            dst.copy_from_slice(&ip[o + len - 4..o + len]);
            break;
        }
        o += len;
    }
    dst
}

/// Recomputes the checksum at transport offset `at` over the first `len` transport bytes
/// after the IP header of length `hl` in `ip`, as Click does: the field is zeroed first
/// (it may lie beyond `len`, which is summed as it is), and the pseudo header carries
/// `len`, the header's own protocol number and [`pseudo_dst`]. A computed 0 is written as
/// 0xFFFF when `udp`. The caller guarantees `hl + max(len, at + 2) <= ip.len()`.
fn fill_l4(ip: &mut [u8], hl: usize, len: usize, at: usize, udp: bool) {
    let src = [ip[12], ip[13], ip[14], ip[15]];
    let (dst, proto) = (pseudo_dst(ip, hl), ip[9]);
    ip[hl + at..hl + at + 2].fill(0);
    let c = l4_checksum(src, dst, proto, &ip[hl..hl + len]);
    let c = if udp {
        wire::checksum::udp_finish(c)
    } else {
        c
    };
    ip[hl + at..hl + at + 2].copy_from_slice(&c.to_be_bytes());
}

/// `SetIPChecksum()`: recomputes the IP header checksum of the header the network header
/// annotation points at. 1/1. Packets without a network header are dropped under
/// `no-ip-header`; a header length below 20 or beyond the packet under `bad-ip-header`
/// (Click: "bad lengths", killed).
pub struct SetIPChecksum;

impl SetIPChecksum {
    /// Builds the element (no arguments).
    pub fn configure(args: &Args) -> Result<SetIPChecksum, ConfigError> {
        args.check(0, &[])?;
        Ok(SetIPChecksum)
    }
}

impl Element for SetIPChecksum {
    fn class_name(&self) -> &'static str {
        "SetIPChecksum"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        match ip_header_mut(&mut p) {
            Ok((mut ip, _)) => ip.fill_checksum(),
            Err(r) => return Verdict::Drop(p, r.into()),
        }
        Verdict::Out(0, p)
    }
    /// Bad headers as `push` finds them (`ip_header_cases` in the module), then
    /// [`Effect::SetIpChecksum`].
    fn model(&self) -> Option<Model> {
        let mut cases = super::ip_header_cases();
        cases.push(Case::new(Filter::any(), Outcome::Out(0)).effect(Effect::SetIpChecksum));
        Some(Model::new(cases))
    }
}

/// `SetTCPChecksum([FIXOFF])`: recomputes the TCP checksum over the IP payload (total
/// length − IHL bytes) as Click does. 1/1. The protocol is not checked: the checksum is
/// written at transport offset 16 of any IP packet, its pseudo header carrying the IP
/// header's protocol and, with a source route option, the route's final destination. With
/// `FIXOFF true`, a TCP data offset below 5 is set to 5 and one beyond the payload (in a
/// packet that is not a fragment) to payload length / 4; without it the offset is not
/// read. No network header: `no-ip-header`; a bad header: `bad-ip-header`; a payload
/// shorter than 20 bytes or longer than the bytes there: `bad-ip-length` (Click: "bad
/// lengths", killed).
pub struct SetTCPChecksum {
    fixoff: bool,
}

impl SetTCPChecksum {
    /// Builds the element.
    pub fn configure(args: &Args) -> Result<SetTCPChecksum, ConfigError> {
        args.check(1, &["FIXOFF"])?;
        let fixoff = match args.get(0, "FIXOFF") {
            Some(s) => parse_bool(s, "FIXOFF")?,
            None => false,
        };
        Ok(SetTCPChecksum { fixoff })
    }
}

impl Element for SetTCPChecksum {
    fn class_name(&self) -> &'static str {
        "SetTCPChecksum"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        let fixoff = self.fixoff;
        let (ip, hl) = match ip_header_mut(&mut p) {
            Ok(h) => h,
            Err(r) => return Verdict::Drop(p, r.into()),
        };
        let frag = ip.more_frags() || ip.frag_offset() != 0;
        let ip = ip.into_inner();
        let plen = match usize::from(u16::from_be_bytes([ip[2], ip[3]])).checked_sub(hl) {
            Some(n) if n >= 20 && hl + n <= ip.len() => n,
            _ => return Verdict::Drop(p, SetL4ChecksumReason::BadIpLength.into()),
        };
        if fixoff {
            let off = usize::from(ip[hl + 12] >> 4) * 4;
            let fixed = if off < 20 {
                Some(20)
            } else if off > plen && !frag {
                Some(plen)
            } else {
                None
            };
            if let Some(n) = fixed {
                ip[hl + 12] = (ip[hl + 12] & 0x0f) | (((n / 4) as u8) << 4);
            }
        }
        fill_l4(ip, hl, plen, 16, false);
        Verdict::Out(0, p)
    }
    /// Reads the header, options (a source route's destination) and every transport byte
    /// the checksum covers; writes the checksum (and, with `FIXOFF`, the data offset).
    fn declared(&self) -> Option<crate::record::Declared> {
        let mut d = l4_checksum_declared();
        if self.fixoff {
            d.writes.push(space::Field::TcpDataOff);
        }
        Some(d)
    }
}

/// What `SetTCPChecksum` and `SetUDPChecksum` declare: they read the IPv4 header and its
/// options (the pseudo header, a source route's final destination) and every transport byte
/// (the checksum is over them), write the transport checksum, and drop bad headers.
fn l4_checksum_declared() -> crate::record::Declared {
    use crate::record::{Access, Declared};
    Declared {
        l4_checksum: true,
        ip_options: Access::Read,
        payload: Access::Read,
        drops: true,
        ..Default::default()
    }
    .read(&Declared::IP_HEADER)
    .read(&Declared::L4_HEADER)
}

/// `SetUDPChecksum()`: recomputes the UDP checksum as Click does: over the number of bytes
/// the UDP length field gives, measured against the bytes after the IP header (not the IP
/// total length). 1/1-2. The protocol is not checked; the pseudo header carries the IP
/// header's protocol and, with a source route option, the route's final destination. A
/// computed 0 is written as 0xFFFF (RFC 768; Click writes 0x0000). A fragment, fewer than 8
/// bytes after the IP header or a UDP length beyond them go to output 1, or are dropped
/// (`ip-fragment`, `bad-udp-length`) when it is not connected. No network header:
/// `no-ip-header`; a bad header: `bad-ip-header`.
pub struct SetUDPChecksum {
    has_out1: bool,
}

impl SetUDPChecksum {
    /// Builds the element (no arguments).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<SetUDPChecksum, ConfigError> {
        args.check(0, &[])?;
        Ok(SetUDPChecksum {
            has_out1: bcx.noutputs >= 2,
        })
    }
}

impl Element for SetUDPChecksum {
    fn class_name(&self) -> &'static str {
        "SetUDPChecksum"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        let (ip, hl) = match ip_header_mut(&mut p) {
            Ok(h) => h,
            Err(r) => return Verdict::Drop(p, r.into()),
        };
        if ip.more_frags() || ip.frag_offset() != 0 {
            return bad_out(self.has_out1, p, SetL4ChecksumReason::Fragment);
        }
        let ip = ip.into_inner();
        let there = ip.len() - hl;
        let len = match ip.get(hl + 4..hl + 6) {
            Some(l) if there >= 8 => usize::from(u16::from_be_bytes([l[0], l[1]])),
            _ => usize::MAX,
        };
        if len > there {
            return bad_out(self.has_out1, p, SetL4ChecksumReason::BadUdpLength);
        }
        // A length field below 8 sums fewer bytes than the header, as in Click; the
        // checksum field itself is there (8 bytes are).
        fill_l4(ip, hl, len, 6, true);
        Verdict::Out(0, p)
    }
    /// As `SetTCPChecksum` (see `l4_checksum_declared`).
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(l4_checksum_declared())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use packet::Packet;

    #[test]
    fn ip_checksum_is_recomputed() {
        let mut b = udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, b"z");
        let want = [b[10], b[11]];
        b[10] = 0;
        b[11] = 0;
        let mut e = build("SetIPChecksum", "", 1).unwrap();
        let o = push(e.as_mut(), pkt(&b));
        assert_eq!(&o.out[0].1.data()[10..12], &want);
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&b)).drops,
            vec!["no-ip-header"]
        );
        b[0] = 0x43;
        assert_eq!(push(e.as_mut(), pkt(&b)).drops, vec!["bad-ip-header"]);
        assert!(build("SetIPChecksum", "1", 1).is_err());
    }

    #[test]
    fn udp_checksum_matches_and_zero_maps_to_ffff() {
        let good = udp([1, 2, 3, 4], [5, 6, 7, 8], 100, 200, b"payload");
        let mut z = good.clone();
        z[26] = 0;
        z[27] = 0;
        let mut e = build("SetUDPChecksum", "", 1).unwrap();
        let o = push(e.as_mut(), pkt(&z));
        assert_eq!(o.out[0].1.data(), &good[..]);
        // A payload whose checksum computes to 0 gets 0xFFFF: find the 2 bytes that make the
        // sum 0xFFFF by solving for them.
        let mut b = udp([1, 2, 3, 4], [5, 6, 7, 8], 100, 200, &[0, 0]);
        b[26] = 0;
        b[27] = 0;
        let c = l4_checksum([1, 2, 3, 4], [5, 6, 7, 8], 17, &b[20..]);
        // Adding the missing amount as payload makes the sum all ones (checksum 0).
        b[28..30].copy_from_slice(&c.to_be_bytes());
        let o = push(e.as_mut(), pkt(&b));
        assert_eq!(&o.out[0].1.data()[26..28], &[0xff, 0xff]);
    }

    /// The one's-complement checksum of `seg` after a pseudo header (src, dst, proto,
    /// len), computed the long way: 16-bit big-endian words, an odd byte padded, carries
    /// folded. Independent of `wire::checksum`.
    fn reference(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16, seg: &[u8]) -> u16 {
        let mut words: Vec<u32> = vec![
            u32::from(u16::from_be_bytes([src[0], src[1]])),
            u32::from(u16::from_be_bytes([src[2], src[3]])),
            u32::from(u16::from_be_bytes([dst[0], dst[1]])),
            u32::from(u16::from_be_bytes([dst[2], dst[3]])),
            u32::from(proto),
            u32::from(len),
        ];
        for c in seg.chunks(2) {
            words.push(u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)));
        }
        let mut s: u32 = words.iter().sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    fn field(d: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([d[at], d[at + 1]])
    }

    #[test]
    fn tcp_checksum_and_fixoff() {
        let mut seg = vec![0u8; 24];
        seg[12] = 0x50;
        seg[13] = 0x02;
        let b = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 6, 64, &[], &seg);
        let mut e = build("SetTCPChecksum", "", 1).unwrap();
        let o = push(e.as_mut(), pkt(&b));
        let d = o.out[0].1.data();
        assert_eq!(l4_checksum([1, 1, 1, 1], [2, 2, 2, 2], 6, &d[20..]), 0);
        assert_eq!(field(d, 36), reference([1; 4], [2; 4], 6, 24, &seg));
        // A data offset of 2 (8 bytes): Click does not read it without FIXOFF.
        let mut bad = b.clone();
        bad[32] = 0x20;
        let o = push(e.as_mut(), pkt(&bad));
        assert_eq!(o.out[0].1.data()[32], 0x20);
        let mut e = build("SetTCPChecksum", "FIXOFF true", 1).unwrap();
        let o = push(e.as_mut(), pkt(&bad));
        assert_eq!(o.out[0].1.data()[32], 0x50);
        // An offset beyond the 24-byte segment becomes 24 / 4 = 6 words; in a fragment it
        // stays.
        let mut far = b.clone();
        far[32] = 0xf0;
        assert_eq!(push(e.as_mut(), pkt(&far)).out[0].1.data()[32], 0x60);
        far[6] = 0x20; // more fragments
        far[10..12].fill(0);
        let c = wire::checksum::data(&far[..20]);
        far[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(push(e.as_mut(), pkt(&far)).out[0].1.data()[32], 0xf0);
        let short = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 6, 64, &[], &[0; 10]);
        assert_eq!(push(e.as_mut(), pkt(&short)).drops, vec!["bad-ip-length"]);
    }

    #[test]
    fn tcp_checksum_is_written_into_any_protocol_with_its_own_number() {
        // An ICMP packet with 24 bytes of payload: Click writes a "TCP" checksum at offset
        // 16, the pseudo header carrying protocol 1.
        let seg: Vec<u8> = (0..24).collect();
        let b = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 1, 64, &[], &seg);
        let mut e = build("SetTCPChecksum", "", 1).unwrap();
        let o = push(e.as_mut(), pkt(&b));
        let d = o.out[0].1.data();
        let mut zeroed = seg.clone();
        zeroed[16..18].fill(0);
        assert_eq!(field(d, 36), reference([1; 4], [2; 4], 1, 24, &zeroed));
        assert_eq!(&d[..36], &b[..36]);
        assert_eq!(&d[38..], &b[38..]);
    }

    #[test]
    fn source_route_gives_the_pseudo_header_its_final_destination() {
        // NOP, then LSRR (131) of 11 bytes with two addresses; the last, 9.9.9.9, is the
        // final destination Click puts in the pseudo header. EOL pads to 12 bytes.
        let opts = [1, 131, 11, 4, 7, 7, 7, 7, 9, 9, 9, 9];
        let mut seg = vec![0u8; 20];
        seg[12] = 0x50;
        let b = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 6, 64, &opts, &seg);
        let mut e = build("SetTCPChecksum", "", 1).unwrap();
        let d = push(e.as_mut(), pkt(&b)).out[0].1.data().to_vec();
        assert_eq!(field(&d, 32 + 16), reference([1; 4], [9; 4], 6, 20, &seg));
        // A 6-byte route option is too short: the header's destination stays.
        let opts = [137, 6, 4, 9, 9, 9, 0, 0];
        let b = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, 64, &opts, &[0; 8]);
        let mut u = build("SetUDPChecksum", "", 1).unwrap();
        let d = push(u.as_mut(), pkt(&b)).out[0].1.data().to_vec();
        assert_eq!(field(&d, 28 + 6), reference([1; 4], [2; 4], 17, 0, &[0; 0]));
    }

    #[test]
    fn udp_checksum_covers_the_udp_length_not_the_ip_length() {
        // A datagram whose UDP length (12) is shorter than the IP payload (16): Click sums
        // 12 bytes and puts 12 in the pseudo header.
        let mut b = udp(
            [1, 2, 3, 4],
            [5, 6, 7, 8],
            100,
            200,
            &[1, 2, 3, 4, 5, 6, 7, 8],
        );
        b[24..26].copy_from_slice(&12u16.to_be_bytes());
        let mut e = build("SetUDPChecksum", "", 1).unwrap();
        let d = push(e.as_mut(), pkt(&b)).out[0].1.data().to_vec();
        let mut seg = b[20..32].to_vec();
        seg[6..8].fill(0);
        assert_eq!(
            field(&d, 26),
            reference([1, 2, 3, 4], [5, 6, 7, 8], 17, 12, &seg)
        );
        // Frame bytes past the IP total length count when the UDP length reaches them
        // (nothing trimmed the frame): 4 trailer bytes, UDP length 20, IP length 36.
        let mut t = udp([1, 2, 3, 4], [5, 6, 7, 8], 100, 200, &[9; 8]);
        t.extend_from_slice(&[0xaa; 4]);
        t[24..26].copy_from_slice(&20u16.to_be_bytes());
        let d = push(e.as_mut(), pkt(&t)).out[0].1.data().to_vec();
        let mut seg = t[20..40].to_vec();
        seg[6..8].fill(0);
        assert_eq!(
            field(&d, 26),
            reference([1, 2, 3, 4], [5, 6, 7, 8], 17, 20, &seg)
        );
        // A UDP length of 4 sums the ports only.
        let mut s = b.clone();
        s[24..26].copy_from_slice(&4u16.to_be_bytes());
        let d = push(e.as_mut(), pkt(&s)).out[0].1.data().to_vec();
        assert_eq!(
            field(&d, 26),
            reference([1, 2, 3, 4], [5, 6, 7, 8], 17, 4, &s[20..24])
        );
    }

    #[test]
    fn udp_fragments_and_short_packets_take_output_1_or_are_dropped() {
        let good = udp([1, 2, 3, 4], [5, 6, 7, 8], 100, 200, b"payload");
        let mut frag = good.clone();
        frag[6] = 0x20;
        frag[10..12].fill(0);
        let c = wire::checksum::data(&frag[..20]);
        frag[10..12].copy_from_slice(&c.to_be_bytes());
        let mut long = good.clone();
        long[24..26].copy_from_slice(&16u16.to_be_bytes());
        // IP total length 27 (7 payload bytes) but a 30-byte frame: 10 bytes are there, so
        // Click checksums the datagram (UDP length 10 reaches the frame's end).
        let mut seven = udp([1, 2, 3, 4], [5, 6, 7, 8], 100, 200, b"ab");
        seven[2..4].copy_from_slice(&27u16.to_be_bytes());
        seven[10..12].fill(0);
        let c = wire::checksum::data(&seven[..20]);
        seven[10..12].copy_from_slice(&c.to_be_bytes());
        let tiny = ipv4([1, 2, 3, 4], [5, 6, 7, 8], 17, 64, &[], &[0; 7]);
        let mut one = build("SetUDPChecksum", "", 1).unwrap();
        let mut two = build("SetUDPChecksum", "", 2).unwrap();
        for (b, reason) in [
            (&frag, "ip-fragment"),
            (&long, "bad-udp-length"),
            (&tiny, "bad-udp-length"),
        ] {
            assert_eq!(push(one.as_mut(), pkt(b)).drops, vec![reason]);
            let o = push(two.as_mut(), pkt(b));
            assert_eq!(o.out[0].0, 1);
            assert_eq!(o.out[0].1.data(), &b[..]);
        }
        let o = push(one.as_mut(), pkt(&seven));
        assert_eq!(o.out[0].0, 0);
        let mut seg = seven[20..30].to_vec();
        seg[6..8].fill(0);
        assert_eq!(
            field(o.out[0].1.data(), 26),
            reference([1, 2, 3, 4], [5, 6, 7, 8], 17, 10, &seg)
        );
    }
}
