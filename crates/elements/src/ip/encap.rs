//! `IPEncap`.

use crate::args::{parse_bool, parse_uint_max};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use wire::checksum::update16;
use wire::ip::protocol;
use wire::ipv4::Packet as Ipv4Packet;

reasons! {
    /// Why `IPEncap` drops a packet.
    pub enum IPEncapReason {
        /// With the 20-byte header, the packet would be longer than 65535 bytes.
        TooLong => "too-long",
    }
}

/// Parses an IP protocol: a number 0..=255 or a name Click knows (`tcp`, `udp`, `icmp`, …).
fn parse_proto(s: &str) -> Result<u8, ConfigError> {
    Ok(match s.trim().to_ascii_lowercase().as_str() {
        "icmp" => protocol::ICMP,
        "igmp" => protocol::IGMP,
        "ipip" => protocol::IPIP,
        "tcp" => protocol::TCP,
        "udp" => protocol::UDP,
        "ipv6" => protocol::IPV6,
        "gre" => protocol::GRE,
        "esp" => protocol::ESP,
        "ah" => protocol::AH,
        "icmp6" | "icmpv6" => protocol::ICMPV6,
        "sctp" => protocol::SCTP,
        _ => parse_uint_max(s, 255, "PROTO (an IP protocol number or name)")? as u8,
    })
}

/// `IPEncap(PROTO, SRC, DST [, keywords TOS, TTL, DSCP, ECT, CE, DF])`: prepends a 20-byte IP
/// header. 1/1.
///
/// The header has version 4, IHL 5, TOS from TOS, or DSCP << 2 with the ECT (`true`/`1` =
/// ECT(1), `2` = ECT(0)) or CE bits, total length = the new packet length, an IP ID counting
/// up from 0 per element, DF if `DF true`, TTL (default 250), PROTO, SRC and DST. `DST_ANNO`
/// as DST takes the destination from the destination IP annotation; otherwise the annotation
/// is set to DST. The checksum is computed as Click does: the template's checksum, updated
/// incrementally (RFC 1624) for the length, ID and (DST_ANNO) destination words. Sets the
/// network header annotation at the new header and the transport header after it. Packets
/// that would exceed 65535 bytes are dropped under `too-long`.
pub struct IPEncap {
    template: [u8; 20],
    dst_anno: bool,
    id: u16,
}

impl IPEncap {
    /// Builds the element.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<IPEncap, ConfigError> {
        args.check(
            3,
            &[
                "PROTO", "SRC", "DST", "TOS", "TTL", "DSCP", "ECT", "CE", "DF",
            ],
        )?;
        let proto = parse_proto(args.require(0, "PROTO", "an IP protocol")?)?;
        let src = bcx.names.ipv4(args.require(1, "SRC", "an IP address")?)?;
        let dst_s = args.require(2, "DST", "an IP address or DST_ANNO")?;
        let dst_anno = dst_s == "DST_ANNO";
        let dst = if dst_anno {
            std::net::Ipv4Addr::UNSPECIFIED
        } else {
            bcx.names.ipv4(dst_s).map_err(|_| {
                ConfigError::new(format!(
                    "expected DST to be an IP address or DST_ANNO, found `{dst_s}`"
                ))
            })?
        };
        let tos = args
            .keyword("TOS")
            .map(|s| parse_uint_max(s, 255, "TOS"))
            .transpose()?;
        let dscp = args
            .keyword("DSCP")
            .map(|s| parse_uint_max(s, 63, "DSCP"))
            .transpose()?;
        let ttl = args
            .keyword("TTL")
            .map_or(Ok(250), |s| parse_uint_max(s, 255, "TTL"))?;
        let ect = match args.keyword("ECT") {
            None => 0u8,
            Some("2") => 2,
            Some(s) => u8::from(parse_bool(s, "ECT (true, false or 2)")?),
        };
        let ce = args
            .keyword("CE")
            .map_or(Ok(false), |s| parse_bool(s, "CE"))?;
        let df = args
            .keyword("DF")
            .map_or(Ok(false), |s| parse_bool(s, "DF"))?;
        if tos.is_some() && dscp.is_some() {
            return Err(ConfigError::new("expected at most one of TOS and DSCP"));
        }
        if tos.is_some() && (ect != 0 || ce) {
            return Err(ConfigError::new(
                "expected TOS or ECN bits (ECT, CE), not both",
            ));
        }
        if ect != 0 && ce {
            return Err(ConfigError::new(
                "expected at most one ECN option (ECT or CE)",
            ));
        }
        let mut t = [0u8; 20];
        let mut ip = Ipv4Packet::new_unchecked(&mut t[..]);
        ip.set_version(4);
        ip.set_header_len(20);
        ip.set_tos(
            tos.unwrap_or_else(|| dscp.unwrap_or(0) << 2) as u8
                | match ect {
                    1 => 0x01,
                    2 => 0x02,
                    _ => 0,
                }
                | if ce { 0x03 } else { 0 },
        );
        ip.set_dont_frag(df);
        ip.set_ttl(ttl as u8);
        ip.set_protocol(proto);
        ip.set_src_addr(src);
        ip.set_dst_addr(dst);
        ip.fill_checksum();
        Ok(IPEncap {
            template: t,
            dst_anno,
            id: 0,
        })
    }
}

// IPEncap pushes a header: the packet's length and data start change, so it declares nothing (`Element::declared`).
impl Element for IPEncap {
    fn class_name(&self) -> &'static str {
        "IPEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        let total = p.len() + 20;
        let Ok(total) = u16::try_from(total) else {
            return Verdict::Drop(p, IPEncapReason::TooLong.into());
        };
        let mut h = self.template;
        let mut ip = Ipv4Packet::new_unchecked(&mut h[..]);
        // The template's zero fields change one 16-bit word at a time (as Click does).
        let mut sum = ip.checksum();
        if self.dst_anno {
            let d = p.meta.dst_ip;
            ip.set_dst_addr(d);
            let d = u32::from(d);
            sum = update16(sum, 0, (d >> 16) as u16);
            sum = update16(sum, 0, d as u16);
        } else {
            p.meta.dst_ip = ip.dst_addr();
        }
        let id = self.id;
        self.id = self.id.wrapping_add(1);
        ip.set_total_len(total);
        ip.set_ident(id);
        sum = update16(sum, 0, total);
        sum = update16(sum, 0, id);
        ip.set_checksum(sum);
        p.prepend(&h);
        p.set_network_header(0);
        p.set_transport_header(20);
        Verdict::Out(0, p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use packet::Packet;
    use std::net::Ipv4Addr;

    #[test]
    fn encapsulates() {
        let mut e = build("IPEncap", "udp, 1.1.1.1, 2.2.2.2, TTL 9, DF true", 1).unwrap();
        for id in 0..2u8 {
            let o = push(e.as_mut(), Packet::from_bytes(&[7; 12]));
            let p = &o.out[0].1;
            let d = p.data();
            assert_eq!(d.len(), 32);
            assert_eq!(&d[..10], &[0x45, 0, 0, 32, 0, id, 0x40, 0, 9, 17]);
            assert_eq!(&d[12..20], &[1, 1, 1, 1, 2, 2, 2, 2]);
            assert!(ip_ok(d));
            assert_eq!(p.network_offset_in_data(), Some(0));
            assert_eq!(p.meta.dst_ip, Ipv4Addr::new(2, 2, 2, 2));
        }
        let mut e = build("IPEncap", "4, 1.1.1.1, DST_ANNO, DSCP 10, CE true", 1).unwrap();
        let mut p = Packet::from_bytes(&[0; 4]);
        p.meta.dst_ip = Ipv4Addr::new(9, 8, 7, 6);
        let o = push(e.as_mut(), p);
        let d = o.out[0].1.data();
        assert_eq!((d[1], d[9], &d[16..20]), (43, 4, &[9u8, 8, 7, 6][..]));
        assert!(ip_ok(d));
        for bad in [
            "udp, 1.1.1.1",
            "300, 1.1.1.1, 2.2.2.2",
            "udp, 1.1.1.1, x",
            "udp, 1.1.1.1, 2.2.2.2, TOS 1, DSCP 1",
        ] {
            assert!(build("IPEncap", bad, 1).is_err(), "{bad}");
        }
    }
}
