//! `SetIPChecksum`, `SetTCPChecksum`, `SetUDPChecksum`: full checksum recomputation.

use super::ip_header_mut;
use crate::args::parse_bool;
use crate::model::{Case, Effect, Filter, Model, Outcome};
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use wire::checksum::{combine, fold, pseudo_header_v4, sum};
use wire::ipv4::Packet as Ipv4Packet;
use wire::tcp::Packet as TcpPacket;
use wire::udp::Packet as UdpPacket;
use wire::IpProtocol;

reasons! {
    /// Why `SetTCPChecksum` and `SetUDPChecksum` drop a packet (besides
    /// [`super::IpHeaderReason`]).
    pub enum SetL4ChecksumReason {
        /// The IP payload (total length − IHL) is shorter than the transport header or not
        /// all there.
        BadIpLength => super::CheckIPReason::BadLength.as_str(),
        /// `SetTCPChecksum` without FIXOFF: a TCP data offset below 5 or beyond the segment.
        BadTcpHeader => "bad-tcp-header",
    }
}

/// The Internet checksum of transport segment `seg` (checksum field included as it is)
/// with the IPv4 pseudo header: 0 when a filled-in checksum verifies.
pub(crate) fn l4_checksum(src: [u8; 4], dst: [u8; 4], proto: u8, seg: &[u8]) -> u16 {
    let len = seg.len() as u16;
    !fold(combine(&[pseudo_header_v4(src, dst, proto, len), sum(seg)]))
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

/// The IP packet at the network header whose transport segment (the IP payload: total
/// length − IHL bytes, which [`Ipv4Packet::payload_mut`] returns) is at least `min` bytes
/// and all present, or the drop reason.
fn segment(p: &mut Packet, min: usize) -> Result<Ipv4Packet<&mut [u8]>, &'static str> {
    let (ip, hl) = ip_header_mut(p)?;
    match usize::from(ip.total_len()).checked_sub(hl) {
        Some(plen) if plen >= min && hl + plen <= ip.as_ref().len() => Ok(ip),
        _ => Err(SetL4ChecksumReason::BadIpLength.into()),
    }
}

/// `SetTCPChecksum([FIXOFF])`: recomputes the TCP checksum (pseudo header + the IP payload,
/// whose length is total length − IHL). 1/1. With `FIXOFF true`, a data offset below 5 or
/// beyond the segment is reset to 5 (Click's FIXOFF); otherwise such a packet is dropped
/// under `bad-tcp-header`. No network header: `no-ip-header`; bad IP lengths:
/// `bad-ip-header` / `bad-ip-length` (payload shorter than 20 bytes or truncated).
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
        let mut ip = match segment(&mut p, 20) {
            Ok(ip) => ip,
            Err(r) => return Verdict::Drop(p, r),
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        // The segment holds at least the 20 bytes of a TCP header.
        let mut tcp = TcpPacket::new_unchecked(ip.payload_mut());
        let off = tcp.header_len();
        if off < 20 || off > tcp.as_ref().len() {
            if !fixoff {
                return Verdict::Drop(p, SetL4ChecksumReason::BadTcpHeader.into());
            }
            tcp.set_header_len(20);
        }
        // Over the whole segment, its length in the pseudo header.
        tcp.fill_checksum_v4(src, dst);
        Verdict::Out(0, p)
    }
}

/// `SetUDPChecksum()`: recomputes the UDP checksum (pseudo header + the IP payload, length
/// total length − IHL); a computed 0 is sent as 0xFFFF. Click always computes it, even when
/// the field was 0. 1/1. Drops as [`SetTCPChecksum`] (payload shorter than 8 bytes:
/// `bad-ip-length`).
pub struct SetUDPChecksum;

impl SetUDPChecksum {
    /// Builds the element (no arguments).
    pub fn configure(args: &Args) -> Result<SetUDPChecksum, ConfigError> {
        args.check(0, &[])?;
        Ok(SetUDPChecksum)
    }
}

impl Element for SetUDPChecksum {
    fn class_name(&self) -> &'static str {
        "SetUDPChecksum"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        let mut ip = match segment(&mut p, 8) {
            Ok(ip) => ip,
            Err(r) => return Verdict::Drop(p, r),
        };
        let (src, dst) = (ip.src_addr().octets(), ip.dst_addr().octets());
        // The segment holds at least the 8 bytes of a UDP header. The checksum covers the
        // whole IP payload (not the UDP length field, as `fill_checksum_v4` would).
        let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
        udp.set_checksum(0);
        let c = l4_checksum(src, dst, IpProtocol::UDP, udp.as_ref());
        udp.set_checksum(wire::checksum::udp_finish(c));
        Verdict::Out(0, p)
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
        assert_ne!(&d[36..38], &[0, 0]);
        let mut bad = b.clone();
        bad[32] = 0x20;
        assert_eq!(push(e.as_mut(), pkt(&bad)).drops, vec!["bad-tcp-header"]);
        let mut e = build("SetTCPChecksum", "FIXOFF true", 1).unwrap();
        let o = push(e.as_mut(), pkt(&bad));
        assert_eq!(o.out[0].1.data()[32], 0x50);
        let short = ipv4([1, 1, 1, 1], [2, 2, 2, 2], 6, 64, &[], &[0; 10]);
        assert_eq!(push(e.as_mut(), pkt(&short)).drops, vec!["bad-ip-length"]);
    }
}
