//! ICMP: `ICMPError` builds ICMP error messages about the packets it receives.

use crate::args::{parse_bool, parse_uint, parse_uint_max};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::{Packet, PacketType};
use std::net::Ipv4Addr;
use wire::icmpv4::{dest_unreachable, msg_type, Packet as Icmpv4Packet};
use wire::ipv4::Packet as Ipv4Packet;
use wire::IpProtocol;

reasons! {
    /// Why `ICMPError` drops a packet.
    pub enum ICMPErrorReason {
        /// The packet it answered with an error (the error is a new packet).
        Sent => "icmp-error",
        /// No error may answer it (an ICMP error, a broadcast, a bad source, a fragment, a
        /// redirect with a source route).
        Suppressed => "icmp-error-suppressed",
        /// No whole IPv4 header at the network header annotation (or no annotation).
        BadIpHeader => crate::reason::IpHeaderReason::Bad.as_str(),
    }
}

/// True for the ICMP error types (unreachable, source quench, redirect, time exceeded,
/// parameter problem).
#[inline]
pub fn is_error_type(t: u8) -> bool {
    msg_type::is_error(t)
}

/// Parses an ICMP type: a number or one of Click's names.
pub fn parse_icmp_type(s: &str) -> Result<u8, ConfigError> {
    let t = match s.trim() {
        "echo-reply" | "echoreply" => msg_type::ECHO_REPLY,
        "unreachable" => msg_type::DEST_UNREACHABLE,
        "sourcequench" => msg_type::SOURCE_QUENCH,
        "redirect" => msg_type::REDIRECT,
        "echo" => msg_type::ECHO_REQUEST,
        "routeradvert" => msg_type::ROUTER_ADVERT,
        "routersolicit" => msg_type::ROUTER_SOLICIT,
        "timeexceeded" => msg_type::TIME_EXCEEDED,
        "parameterproblem" => msg_type::PARAMETER_PROBLEM,
        "timestamp" => msg_type::TIMESTAMP,
        "timestamp-reply" => msg_type::TIMESTAMP_REPLY,
        other => parse_uint_max(
            other,
            255,
            "ICMP type (a number or a name such as unreachable)",
        )? as u8,
    };
    Ok(t)
}

/// Parses an ICMP code for `ty`: a number or one of Click's names for that type.
pub fn parse_icmp_code(ty: u8, s: &str) -> Result<u8, ConfigError> {
    let s = s.trim();
    let named = match (ty, s) {
        (msg_type::DEST_UNREACHABLE, "net") => Some(0),
        (msg_type::DEST_UNREACHABLE, "host") => Some(1),
        (msg_type::DEST_UNREACHABLE, "protocol" | "proto") => Some(2),
        (msg_type::DEST_UNREACHABLE, "port") => Some(3),
        (msg_type::DEST_UNREACHABLE, "needfrag") => Some(4),
        (msg_type::DEST_UNREACHABLE, "srcroutefail") => Some(5),
        (msg_type::DEST_UNREACHABLE, "net-unknown") => Some(6),
        (msg_type::DEST_UNREACHABLE, "host-unknown") => Some(7),
        (msg_type::DEST_UNREACHABLE, "isolated") => Some(8),
        (msg_type::DEST_UNREACHABLE, "net-prohibited") => Some(9),
        (msg_type::DEST_UNREACHABLE, "host-prohibited") => Some(10),
        (msg_type::DEST_UNREACHABLE, "tos-net") => Some(11),
        (msg_type::DEST_UNREACHABLE, "tos-host") => Some(12),
        (msg_type::DEST_UNREACHABLE, "filter-prohibited") => Some(13),
        (msg_type::DEST_UNREACHABLE, "host-precedence") => Some(14),
        (msg_type::DEST_UNREACHABLE, "precedence-cutoff") => Some(15),
        (msg_type::REDIRECT, "net") => Some(0),
        (msg_type::REDIRECT, "host") => Some(1),
        (msg_type::REDIRECT, "tos-net") => Some(2),
        (msg_type::REDIRECT, "tos-host") => Some(3),
        (msg_type::TIME_EXCEEDED, "transit") => Some(0),
        (msg_type::TIME_EXCEEDED, "reassembly") => Some(1),
        (msg_type::PARAMETER_PROBLEM, "erroratptr") => Some(0),
        (msg_type::PARAMETER_PROBLEM, "missingopt") => Some(1),
        (msg_type::PARAMETER_PROBLEM, "length") => Some(2),
        _ => None,
    };
    match named {
        Some(c) => Ok(c),
        None => parse_uint_max(
            s,
            255,
            &format!("ICMP code for type {ty} (a number 0-255 or a code name)"),
        )
        .map(|v| v as u8),
    }
}

/// `ICMPError(SRC, TYPE [, CODE, BADADDRS, keywords MTU, PMTU, SET_FIX_ANNO])`: produces the
/// ICMP error message about each input packet (Click 1/1).
///
/// The input packet must have its network header annotation set. The error is a new packet:
/// an IPv4 header (TOS 0, ID counting up from 1 per element — Click shares one counter among
/// all ICMPError elements of a process; FuseBox keeps it per element so an element's output
/// does not depend on which other NFs run beside it —, TTL 200, protocol ICMP, source
/// SRC, destination the original source; carrying the reversed source route if the
/// original had a valid LSRR/SSRR option) and an ICMP header (TYPE, CODE; a redirect's
/// gateway is the original's destination IP annotation; an unreachable/needfrag error
/// carries PMTU as next-hop MTU; a parameter problem's pointer is 0, as FuseBox has no
/// parameter-offset annotation), followed by as much of the original packet from its IP
/// header as fits in MTU bytes (default 576, RFC 1812 4.3.2.3). Both checksums are
/// computed. The new packet's network and transport header annotations and its destination
/// IP annotation (the original source) are set; it is emitted on output 0 and the original
/// is consumed (dropped, `icmp-error`).
///
/// No error is produced (the packet is dropped, `icmp-error-suppressed`) for ICMP error
/// messages (or ICMP packets too short to tell), packets to 255.255.255.255, a multicast
/// address or one of BADADDRS, link-level broadcasts or multicasts (packet type annotation),
/// packets from an invalid source (broadcast, multicast, BADADDRS, net 0, net 127, class E),
/// fragments other than the first, and, for redirects, source-routed packets. Packets
/// without a usable IP header are dropped (`bad-ip-header`).
///
/// TYPE and CODE take numbers or Click's names: types `unreachable` (3), `sourcequench`
/// (4), `redirect` (5), `timeexceeded` (11), `parameterproblem` (12); codes `net`, `host`,
/// `protocol`, `port`, `needfrag`, ... for unreachable, `net`, `host` for redirect,
/// `transit`, `reassembly` for timeexceeded, `erroratptr`, `missingopt`, `length` for
/// parameterproblem. SET_FIX_ANNO (default true) sets the generated error's "fix IP source"
/// annotation, which a later `FixIPSrc` reads.
#[derive(Debug)]
pub struct ICMPError {
    set_fix_anno: bool,
    src: Ipv4Addr,
    icmp_type: u8,
    code: u8,
    bad_addrs: Vec<Ipv4Addr>,
    mtu: usize,
    pmtu: u16,
    next_id: u16,
    sent: u64,
    suppressed: u64,
}

impl ICMPError {
    /// Builds the element from its arguments.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<ICMPError, ConfigError> {
        args.check(
            4,
            &[
                "SRC",
                "TYPE",
                "CODE",
                "BADADDRS",
                "MTU",
                "PMTU",
                "SET_FIX_ANNO",
            ],
        )?;
        let src = bcx
            .names
            .ipv4(args.require(0, "SRC", "source IP address")?)?;
        let icmp_type = parse_icmp_type(args.require(1, "TYPE", "ICMP type")?)?;
        if !is_error_type(icmp_type) {
            return Err(ConfigError::new(format!(
                "expected an ICMP error type (unreachable, sourcequench, redirect, timeexceeded, parameterproblem), found type {icmp_type}"
            )));
        }
        let code = parse_icmp_code(icmp_type, args.get(2, "CODE").unwrap_or("0"))?;
        let mut bad_addrs = Vec::new();
        if let Some(list) = args.get(3, "BADADDRS") {
            for w in list.split_whitespace() {
                bad_addrs.push(bcx.names.ipv4(w)?);
            }
        }
        let mtu = args
            .keyword("MTU")
            .map(|v| parse_uint(v, "MTU"))
            .transpose()?
            .unwrap_or(576);
        if mtu < 28 {
            return Err(ConfigError::new(format!(
                "expected MTU at least 28, found {mtu}"
            )));
        }
        let pmtu = args
            .keyword("PMTU")
            .map(|v| parse_uint_max(v, 65535, "PMTU"))
            .transpose()?
            .unwrap_or(0);
        let set_fix_anno = match args.keyword("SET_FIX_ANNO") {
            Some(v) => parse_bool(v, "SET_FIX_ANNO")?,
            None => true,
        };
        Ok(ICMPError {
            src,
            icmp_type,
            code,
            bad_addrs,
            mtu: usize::try_from(mtu).unwrap_or(usize::MAX).min(65535),
            pmtu: pmtu as u16,
            next_id: 1,
            set_fix_anno,
            sent: 0,
            suppressed: 0,
        })
    }

    /// The configured source address, type and code.
    pub fn params(&self) -> (Ipv4Addr, u8, u8) {
        (self.src, self.icmp_type, self.code)
    }

    fn unicast(&self, a: Ipv4Addr) -> bool {
        let h = u32::from(a);
        h != u32::MAX && h & 0xf000_0000 != 0xe000_0000 && !self.bad_addrs.contains(&a)
    }

    fn valid_source(&self, a: Ipv4Addr) -> bool {
        let net = a.octets()[0];
        self.unicast(a) && net != 0 && net != 127 && net & 0xf0 != 0xf0
    }

    /// Offset of a valid LSRR/SSRR option in header `ip` of length `hl`.
    fn source_route(ip: &[u8], hl: usize) -> Option<usize> {
        let mut oi = 20;
        while oi < hl {
            let t = *ip.get(oi)?;
            match t {
                1 => {
                    oi += 1;
                    continue;
                }
                0 => return None,
                _ => {}
            }
            let xlen = usize::from(*ip.get(oi + 1)?);
            if xlen < 2 || oi + xlen > hl {
                return None;
            }
            if t == 131 || t == 137 {
                if let Some(&ptr) = ip.get(oi + 2) {
                    let ptr = usize::from(ptr);
                    if ptr >= 4 && ptr % 4 == 0 && ptr <= xlen + 1 {
                        return Some(oi);
                    }
                }
            }
            oi += xlen;
        }
        None
    }

    /// The suppression check and the error message bytes, or the drop reason.
    fn make(&mut self, p: &Packet) -> Result<Vec<u8>, ICMPErrorReason> {
        // A missing network header is `bad-ip-header` here too.
        let (h, hl) = crate::ip::ip_header(p).ok_or(ICMPErrorReason::BadIpHeader)?;
        let (src, dst) = (h.src_addr(), h.dst_addr());
        let ip = h.into_inner();
        let icmp_error_in = h.protocol() == IpProtocol::ICMP
            && (hl + 4 > ip.len() || ip.get(hl).is_none_or(|t| is_error_type(*t)));
        let suppressed = icmp_error_in
            || !self.unicast(dst)
            || matches!(
                p.meta.packet_type,
                PacketType::Broadcast | PacketType::Multicast
            )
            || !self.valid_source(src)
            || h.frag_offset() != 0;
        if suppressed {
            return Err(ICMPErrorReason::Suppressed);
        }
        // (Click leaves the route out of a parameter problem about the route itself; the
        // pointer is always 0 here, so that never applies.)
        let sr = Self::source_route(ip, hl);
        if sr.is_some() && self.icmp_type == msg_type::REDIRECT {
            return Err(ICMPErrorReason::Suppressed);
        }
        // IP options: the reversed source route.
        let mut opts = Vec::new();
        if let Some(o) = sr {
            let ptr = usize::from(ip.get(o + 2).copied().unwrap_or(4));
            let olen = ptr - 1;
            opts = vec![0u8; (olen + 1).div_ceil(4) * 4];
            opts[0] = ip[o];
            opts[1] = olen as u8;
            opts[2] = 4;
            let mut w = 3;
            let mut r = o + ptr - 5;
            while r >= o + 3 {
                if let (Some(src4), Some(dst4)) = (ip.get(r..r + 4), opts.get_mut(w..w + 4)) {
                    dst4.copy_from_slice(src4);
                }
                w += 4;
                r -= 4;
            }
        }
        let nhl = 20 + opts.len();
        let room = self.mtu.saturating_sub(nhl + 8);
        let xlen = room.min(ip.len());
        let total = nhl + 8 + xlen;
        let mut d = vec![0u8; total];
        // The options are a whole number of 4-byte words: the IHL says nhl exactly.
        let mut out = Ipv4Packet::new_unchecked(&mut d[..]);
        out.set_version(4);
        out.set_header_len(nhl);
        out.set_total_len(total as u16);
        out.set_ident(self.next_id);
        out.set_ttl(200);
        out.set_protocol(IpProtocol::ICMP);
        out.set_src_addr(self.src);
        out.set_dst_addr(src);
        out.options_mut().copy_from_slice(&opts);
        out.fill_checksum();
        let mut icmp = Icmpv4Packet::new_unchecked(&mut d[nhl..]);
        icmp.set_msg_type(self.icmp_type);
        icmp.set_msg_code(self.code);
        if self.icmp_type == msg_type::REDIRECT {
            // The gateway address: the whole word after the checksum.
            icmp.set_rest_of_header(u32::from(p.meta.dst_ip));
        }
        if self.icmp_type == msg_type::DEST_UNREACHABLE
            && self.code == dest_unreachable::FRAG_NEEDED
        {
            icmp.set_next_hop_mtu(self.pmtu);
        }
        icmp.data_mut().copy_from_slice(&ip[..xlen]);
        icmp.fill_checksum();
        self.next_id = self.next_id.wrapping_add(1);
        Ok(d)
    }
}

// ICMPError makes a new packet per packet: it declares nothing (`Element::declared`).
impl Element for ICMPError {
    fn class_name(&self) -> &'static str {
        "ICMPError"
    }

    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }

    fn push(&mut self, _port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        match self.make(&packet) {
            Ok(bytes) => {
                let mut q = cx.new_packet(&bytes, &packet.meta);
                q.meta.fix_ip_src = self.set_fix_anno;
                let out = Ipv4Packet::new_unchecked(&bytes[..]);
                q.set_network_header(0);
                q.set_transport_header(out.header_len());
                q.meta.dst_ip = out.dst_addr();
                self.sent += 1;
                cx.drop(packet, ICMPErrorReason::Sent.into());
                cx.emit(0, q);
                Verdict::Done
            }
            Err(reason) => {
                if reason == ICMPErrorReason::Suppressed {
                    self.suppressed += 1;
                }
                Verdict::Drop(packet, reason.into())
            }
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("sent", self.sent), ("suppressed", self.suppressed)]
    }
}
