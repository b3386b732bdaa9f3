//! `CheckIPHeader`, `CheckIPHeader2`, `MarkIPHeader`, and `CheckTCPHeader` /
//! `CheckUDPHeader` / `CheckICMPHeader`.

use super::{bad_out, bad_outcome, ihl, ip_header, ip_list, IpHeaderReason};
use crate::args::{parse_bool, parse_uint};
use crate::model::{Case, Effect, Field, FieldSet, Filter, IpAnchor, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use std::net::Ipv4Addr;
use wire::icmpv4::{msg_type as icmp_type, Packet as Icmpv4Packet};
use wire::ipv4::Packet as Ipv4Packet;
use wire::tcp::Packet as TcpPacket;
use wire::udp::Packet as UdpPacket;
use wire::IpProtocol;

reasons! {
    /// Why `CheckIPHeader` rejects a packet (Click's `reason_texts`, as drop reasons), in
    /// Click's order: the order of the checks and of its `stats()` counters.
    pub enum CheckIPReason {
        /// Fewer than 20 bytes after OFFSET.
        Tiny => "tiny-packet",
        /// Version other than 4.
        BadVersion => "bad-ip-version",
        /// Header length below 20.
        BadHeader => IpHeaderReason::Bad.as_str(),
        /// Total length below the header length or beyond the bytes there.
        BadLength => "bad-ip-length",
        /// The header checksum does not verify.
        BadChecksum => "bad-ip-checksum",
        /// A source address in BADSRC, the destination not in GOODDST.
        BadSrc => "bad-ip-src",
    }
}

/// `CheckIPHeader([OFFSET, keywords OFFSET, INTERFACES, BADSRC, GOODDST, CHECKSUM, VERBOSE,
/// DETAILS])` and `CheckIPHeader2` (the same without the checksum test): validates the IPv4
/// header that starts OFFSET bytes into the packet.
///
/// Checks, in Click's order: at least 20 bytes after OFFSET (`tiny-packet`), version 4
/// (`bad-ip-version`), header length ≥ 20 (`bad-ip-header`), header length ≤ total length ≤
/// bytes after OFFSET (`bad-ip-length`), the header checksum unless `CHECKSUM false` or
/// `CheckIPHeader2` (`bad-ip-checksum`), and the source address against BADSRC unless the
/// destination is in GOODDST (`bad-ip-src`). Source addresses are only checked when
/// INTERFACES, BADSRC, GOODDST or the deprecated positional BADSRC2 is given (INTERFACES
/// `a.b.c.d/len …` means BADSRC = the subnet broadcasts + 0.0.0.0 + 255.255.255.255, GOODDST
/// = the addresses; positional BADSRC2 adds 0.0.0.0 and 255.255.255.255 to its list).
///
/// A good packet gets its network header annotation at OFFSET and transport header at
/// OFFSET + header length, is shortened to the IP total length (trailing Ethernet padding is
/// removed), gets the destination IP annotation set to the header's destination, and leaves
/// on output 0. A bad packet leaves on output 1 when it is connected, else is dropped under
/// its reason. `stats()` counts `drops` (all bad packets) and each reason.
pub struct CheckIPHeader {
    class: &'static str,
    offset: usize,
    checksum: bool,
    bad_src: Vec<Ipv4Addr>,
    good_dst: Vec<Ipv4Addr>,
    has_out1: bool,
    reasons: [u64; CheckIPReason::ALL.len()],
}

impl CheckIPHeader {
    /// Builds the element; `checksum` is false for `CheckIPHeader2`.
    pub fn configure(
        args: &Args,
        bcx: &BuildCtx,
        checksum: bool,
    ) -> Result<CheckIPHeader, ConfigError> {
        args.check(
            2,
            &[
                "OFFSET",
                "INTERFACES",
                "BADSRC",
                "GOODDST",
                "CHECKSUM",
                "VERBOSE",
                "DETAILS",
            ],
        )?;
        let mut bad_src = Vec::new();
        let mut good_dst = Vec::new();
        if let Some(s) = args.keyword("INTERFACES") {
            for w in s.split_whitespace() {
                let (ip, len) = bcx.names.prefix(w)?;
                let m = crate::net::mask(len);
                bad_src.push(Ipv4Addr::from((u32::from(ip) & m) | !m));
                good_dst.push(ip);
            }
            bad_src.push(Ipv4Addr::UNSPECIFIED);
            bad_src.push(Ipv4Addr::BROADCAST);
        }
        if let Some(s) = args.keyword("BADSRC") {
            bad_src = ip_list(s, bcx)?;
        }
        if let Some(s) = args.keyword("GOODDST") {
            good_dst = ip_list(s, bcx)?;
        }
        let mut offset = match args.keyword("OFFSET") {
            Some(s) => Some(parse_uint(s, "OFFSET")? as usize),
            None => None,
        };
        let pos = args.positional();
        match pos.as_slice() {
            [] => {}
            [one] if parse_uint(one, "OFFSET").is_ok() => {
                offset = Some(parse_uint(one, "OFFSET")? as usize);
            }
            [list, rest @ ..] => {
                // Deprecated syntax: CheckIPHeader(BADSRC2 [, OFFSET]).
                bad_src = ip_list(list, bcx)?;
                bad_src.push(Ipv4Addr::UNSPECIFIED);
                bad_src.push(Ipv4Addr::BROADCAST);
                if let Some(o) = rest.first() {
                    offset = Some(parse_uint(o, "OFFSET")? as usize);
                }
            }
        }
        let class = if checksum {
            "CheckIPHeader"
        } else {
            "CheckIPHeader2"
        };
        let checksum = match args.keyword("CHECKSUM") {
            Some(s) => parse_bool(s, "CHECKSUM")? && checksum,
            None => checksum,
        };
        for k in ["VERBOSE", "DETAILS"] {
            if let Some(s) = args.keyword(k) {
                parse_bool(s, k)?;
            }
        }
        Ok(CheckIPHeader {
            class,
            offset: offset.unwrap_or(0),
            checksum,
            bad_src,
            good_dst,
            has_out1: bcx.noutputs >= 2,
            reasons: [0; CheckIPReason::ALL.len()],
        })
    }

    /// What `push` does, in place.
    #[inline(always)]
    fn step(&mut self, p: &mut Packet) -> crate::Step {
        match self.validate(p.data()) {
            Ok((len, hl, dst)) => {
                let off = self.offset;
                p.set_network_header(off);
                p.set_transport_header(off + hl);
                p.truncate(off + len);
                p.meta.dst_ip = dst;
                crate::Step::Out(0)
            }
            Err(r) => {
                self.reasons[r as usize] += 1;
                super::bad_step(self.has_out1, r)
            }
        }
    }

    /// Validates the header at `self.offset`; `Ok(total length, header length, dst)` or the
    /// reason.
    #[inline]
    fn validate(&self, data: &[u8]) -> Result<(usize, usize, Ipv4Addr), CheckIPReason> {
        let ip = data
            .get(self.offset..)
            .filter(|ip| ip.len() >= 20)
            .map(Ipv4Packet::new_unchecked)
            .ok_or(CheckIPReason::Tiny)?;
        // The checks in Click's order (not `Ipv4Packet::check_len`'s).
        if ip.version() != 4 {
            return Err(CheckIPReason::BadVersion);
        }
        let hl = ip.header_len();
        if hl < 20 {
            return Err(CheckIPReason::BadHeader);
        }
        let len = usize::from(ip.total_len());
        if len > ip.as_ref().len() || len < hl {
            return Err(CheckIPReason::BadLength);
        }
        // hl <= len <= the bytes there: the checksum covers exactly the header.
        if self.checksum && !ip.verify_checksum() {
            return Err(CheckIPReason::BadChecksum);
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if !self.bad_src.is_empty() && self.bad_src.contains(&src) && !self.good_dst.contains(&dst)
        {
            return Err(CheckIPReason::BadSrc);
        }
        Ok((len, hl, dst))
    }
}

impl Element for CheckIPHeader {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    push_in_place!();
    fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![("drops", self.reasons.iter().sum())];
        v.extend(
            CheckIPReason::TEXTS
                .iter()
                .zip(self.reasons)
                .map(|(r, n)| (*r, n)),
        );
        v
    }
    /// The checks of `validate` in its order, over the header at OFFSET; good packets are
    /// marked, trimmed and get their destination annotation. Opaque for OFFSET > 65535.
    fn model(&self) -> Option<Model> {
        let offset = u16::try_from(self.offset).ok()?;
        use CheckIPReason::*;
        let bad = |f: Filter, r: CheckIPReason| {
            Case::new(f, bad_outcome(self.has_out1, r))
                .stat("drops")
                .stat(r.into())
        };
        let any = Filter::any;
        let mut cases = vec![
            bad(any().with(Field::IpAvail, FieldSet::range(0, 19)), Tiny),
            bad(
                any().with(Field::IpVersion, FieldSet::single(4).complement(4)),
                BadVersion,
            ),
            bad(any().with(Field::IpIhl, FieldSet::range(0, 4)), BadHeader),
            bad(any().with(Field::IpLenOk, FieldSet::single(0)), BadLength),
        ];
        if self.checksum {
            cases.push(bad(
                any().with(Field::IpChecksumOk, FieldSet::single(0)),
                BadChecksum,
            ));
        }
        if !self.bad_src.is_empty() {
            let set = |v: &[Ipv4Addr]| {
                FieldSet::from_intervals(v.iter().map(|a| {
                    let a = u128::from(u32::from(*a));
                    (a, a)
                }))
            };
            cases.push(bad(
                any()
                    .with(Field::IpSrc, set(&self.bad_src))
                    .with(Field::IpDst, set(&self.good_dst).complement(32)),
                BadSrc,
            ));
        }
        cases.push(
            Case::new(any(), Outcome::Out(0))
                .effect(Effect::MarkIp)
                .effect(Effect::TrimToIpLen)
                .effect(Effect::DstAnnoFromIpDst),
        );
        Some(Model {
            ip_at: IpAnchor::Data(offset),
            cases,
        })
    }
}

/// `MarkIPHeader([OFFSET])`: sets the network header annotation OFFSET bytes into the packet
/// (default 0) and the transport header annotation after the IP header (its IHL), without
/// checking anything. 1/1.
pub struct MarkIPHeader {
    offset: usize,
}

impl MarkIPHeader {
    /// Builds the element.
    pub fn configure(args: &Args) -> Result<MarkIPHeader, ConfigError> {
        args.check(1, &["OFFSET"])?;
        let offset = match args.get(0, "OFFSET") {
            Some(s) => parse_uint(s, "OFFSET")? as usize,
            None => 0,
        };
        Ok(MarkIPHeader { offset })
    }
}

impl Element for MarkIPHeader {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "MarkIPHeader"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        let off = self.offset.min(p.len());
        let hl = ihl(p.data().get(off..).unwrap_or(&[]));
        p.set_network_header(off);
        p.set_transport_header((off + hl).min(p.len()));
        Verdict::Out(0, p)
    }
    /// [`Effect::MarkIp`] at OFFSET (which clamps as `push` does). Opaque for OFFSET > 65535.
    fn model(&self) -> Option<Model> {
        Some(Model {
            ip_at: IpAnchor::Data(u16::try_from(self.offset).ok()?),
            cases: vec![Case::new(Filter::any(), Outcome::Out(0)).effect(Effect::MarkIp)],
        })
    }
}

/// Which transport header a [`CheckL4Header`] validates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4Kind {
    /// `CheckTCPHeader`.
    Tcp,
    /// `CheckUDPHeader`.
    Udp,
    /// `CheckICMPHeader`.
    Icmp,
}

impl L4Kind {
    fn class(self) -> &'static str {
        match self {
            L4Kind::Tcp => "CheckTCPHeader",
            L4Kind::Udp => "CheckUDPHeader",
            L4Kind::Icmp => "CheckICMPHeader",
        }
    }
    /// The drop reason of `fault` for this kind.
    #[inline]
    fn reason(self, fault: L4Fault) -> &'static str {
        use L4Fault::*;
        match (self, fault) {
            (L4Kind::Tcp, Protocol) => CheckTCPReason::NotTcp.into(),
            (L4Kind::Tcp, Length) => CheckTCPReason::BadLength.into(),
            (L4Kind::Tcp, Checksum) => CheckTCPReason::BadChecksum.into(),
            (L4Kind::Udp, Protocol) => CheckUDPReason::NotUdp.into(),
            (L4Kind::Udp, Length) => CheckUDPReason::BadLength.into(),
            (L4Kind::Udp, Checksum) => CheckUDPReason::BadChecksum.into(),
            (L4Kind::Icmp, Protocol) => CheckICMPReason::NotIcmp.into(),
            (L4Kind::Icmp, Length) => CheckICMPReason::BadLength.into(),
            (L4Kind::Icmp, Checksum) => CheckICMPReason::BadChecksum.into(),
        }
    }
}

/// What a [`CheckL4Header`] found wrong, in the order of its `stats()` counters (one per
/// fault, `fault as usize`); [`L4Kind::reason`] names it for the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L4Fault {
    /// No network header, or another protocol.
    Protocol,
    /// A length check failed.
    Length,
    /// The checksum does not verify.
    Checksum,
}

impl L4Fault {
    const ALL: [L4Fault; 3] = [L4Fault::Protocol, L4Fault::Length, L4Fault::Checksum];
}

reasons! {
    /// Why `CheckTCPHeader` rejects a packet.
    pub enum CheckTCPReason {
        /// No network header, or not TCP.
        NotTcp => "not-tcp",
        /// Data offset below 20, or the IP payload shorter than it or not all there.
        BadLength => "bad-tcp-length",
        /// The checksum does not verify.
        BadChecksum => "bad-tcp-checksum",
    }
}

reasons! {
    /// Why `CheckUDPHeader` rejects a packet.
    pub enum CheckUDPReason {
        /// No network header, or not UDP.
        NotUdp => "not-udp",
        /// UDP length below 8 or beyond the bytes there.
        BadLength => "bad-udp-length",
        /// A nonzero checksum does not verify.
        BadChecksum => "bad-udp-checksum",
    }
}

reasons! {
    /// Why `CheckICMPHeader` rejects a packet.
    pub enum CheckICMPReason {
        /// No network header, or not ICMP.
        NotIcmp => "not-icmp",
        /// Fewer than 8 bytes, or not Click's length for the message type.
        BadLength => "bad-icmp-length",
        /// The checksum does not verify.
        BadChecksum => "bad-icmp-checksum",
    }
}

/// `CheckTCPHeader([keywords VERBOSE, DETAILS])`, `CheckUDPHeader(…)`, `CheckICMPHeader(…)`:
/// validate the transport header after the IP header (network header annotation). 1/1-2.
///
/// As in Click: a packet without a network header or with another protocol is
/// `not-tcp`/`not-udp`/`not-icmp` (fragments are checked like other packets). TCP: data offset ≥ 20, IP payload
/// length (total length − IHL) ≥ data offset and all bytes present, else `bad-tcp-length`;
/// checksum over the IP payload with the pseudo header, else `bad-tcp-checksum`. UDP: UDP
/// length ≥ 8 and present, else `bad-udp-length`; a nonzero checksum must verify over the
/// UDP length, else `bad-udp-checksum` (0 means "no checksum"). ICMP: IP payload ≥ 8 bytes
/// and present, and Click's per-type lengths (errors ≥ 36 bytes, timestamps 20,
/// information messages 8), else `bad-icmp-length`; checksum over the payload, else `bad-icmp-checksum`.
/// Bad packets go to output 1 if connected, else are dropped under the reason.
pub struct CheckL4Header {
    kind: L4Kind,
    has_out1: bool,
    reasons: [u64; L4Fault::ALL.len()],
}

impl CheckL4Header {
    /// Builds the checker of `kind`.
    pub fn configure(
        kind: L4Kind,
        args: &Args,
        bcx: &BuildCtx,
    ) -> Result<CheckL4Header, ConfigError> {
        args.check(0, &["VERBOSE", "DETAILS"])?;
        for k in ["VERBOSE", "DETAILS"] {
            if let Some(s) = args.keyword(k) {
                parse_bool(s, k)?;
            }
        }
        Ok(CheckL4Header {
            kind,
            has_out1: bcx.noutputs >= 2,
            reasons: [0; L4Fault::ALL.len()],
        })
    }

    fn validate(&self, p: &Packet) -> Result<(), L4Fault> {
        let (ip, hl) = ip_header(p).ok_or(L4Fault::Protocol)?;
        let proto = ip.protocol();
        let want = match self.kind {
            L4Kind::Tcp => IpProtocol::TCP,
            L4Kind::Udp => IpProtocol::UDP,
            L4Kind::Icmp => IpProtocol::ICMP,
        };
        // As in Click, fragments are not special: a non-first fragment is checked like any
        // other packet (and almost always fails on length or checksum).
        if proto != want {
            return Err(L4Fault::Protocol);
        }
        let total = usize::from(ip.total_len());
        let (src, dst) = (ip.src_addr().octets(), ip.dst_addr().octets());
        // The transport bytes up to the end of the data (not cut at the total length).
        let l4 = &ip.into_inner()[hl..];
        match self.kind {
            L4Kind::Tcp | L4Kind::Icmp => {
                let len = total.checked_sub(hl).ok_or(L4Fault::Length)?;
                let min = if self.kind == L4Kind::Tcp {
                    // Fewer than 20 bytes there fail on the length whatever the offset says.
                    let off = if l4.len() >= 20 {
                        TcpPacket::new_unchecked(l4).header_len()
                    } else {
                        0
                    };
                    if off < 20 {
                        return Err(L4Fault::Length);
                    }
                    off
                } else {
                    8
                };
                if len < min || l4.len() < len {
                    return Err(L4Fault::Length);
                }
                if self.kind == L4Kind::Icmp {
                    // Click's per-type lengths: errors quote an IP header and 8 bytes,
                    // timestamps are 20 bytes, information messages 8.
                    // len >= 8 bytes are there.
                    let ok = match Icmpv4Packet::new_unchecked(l4).msg_type() {
                        icmp_type::DEST_UNREACHABLE
                        | icmp_type::SOURCE_QUENCH
                        | icmp_type::REDIRECT
                        | icmp_type::TIME_EXCEEDED
                        | icmp_type::PARAMETER_PROBLEM => len >= 36,
                        icmp_type::TIMESTAMP | icmp_type::TIMESTAMP_REPLY => len == 20,
                        icmp_type::INFO_REQUEST | icmp_type::INFO_REPLY => len == 8,
                        _ => true,
                    };
                    if !ok {
                        return Err(L4Fault::Length);
                    }
                }
                let seg = &l4[..len];
                let ok = if self.kind == L4Kind::Tcp {
                    super::cksum::l4_checksum(src, dst, IpProtocol::TCP, seg) == 0
                } else {
                    wire::checksum::data(seg) == 0
                };
                if !ok {
                    return Err(L4Fault::Checksum);
                }
            }
            L4Kind::Udp => {
                if l4.len() < 8 {
                    return Err(L4Fault::Length);
                }
                let udp = UdpPacket::new_unchecked(l4);
                let len = usize::from(udp.len());
                if len < 8 || l4.len() < len {
                    return Err(L4Fault::Length);
                }
                if udp.checksum() != 0
                    && super::cksum::l4_checksum(src, dst, IpProtocol::UDP, &l4[..len]) != 0
                {
                    return Err(L4Fault::Checksum);
                }
            }
        }
        Ok(())
    }
}

impl Element for CheckL4Header {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        self.kind.class()
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, p: Packet, _cx: &mut Context) -> Verdict {
        match self.validate(&p) {
            Ok(()) => Verdict::Out(0, p),
            Err(f) => {
                self.reasons[f as usize] += 1;
                bad_out(self.has_out1, p, self.kind.reason(f))
            }
        }
    }
    /// Reads the header fields its checks use and every transport byte (length, checksum);
    /// writes nothing; counts and drops (or sends to output 1) what fails.
    fn declared(&self) -> Option<crate::record::Declared> {
        use crate::record::{Access, Declared};
        let d = Declared {
            payload: Access::Read,
            drops: !self.has_out1,
            stateful: true,
            ..Default::default()
        };
        Some(d.read(&Declared::IP_HEADER).read(&Declared::L4_HEADER))
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![("drops", self.reasons.iter().sum())];
        v.extend(
            L4Fault::ALL
                .iter()
                .zip(self.reasons)
                .map(|(f, n)| (self.kind.reason(*f), n)),
        );
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use packet::Packet;

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    #[test]
    fn good_packet_is_annotated_and_trimmed() {
        let mut e = build("CheckIPHeader", "14", 1).unwrap();
        let mut bytes = vec![0u8; 14];
        bytes.extend(udp(A, B, 1, 2, b"hi"));
        bytes.extend([0u8; 6]); // Ethernet padding
        let o = push(e.as_mut(), Packet::from_bytes(&bytes));
        assert_eq!(o.out.len(), 1);
        let (port, p) = &o.out[0];
        assert_eq!(*port, 0);
        assert_eq!(p.len(), 14 + 20 + 10);
        assert_eq!(p.network_offset_in_data(), Some(14));
        assert_eq!(p.transport_header().map(|t| t.len()), Some(10));
        assert_eq!(p.meta.dst_ip.octets(), B);
    }

    #[test]
    fn each_reason_drops_or_goes_to_output_1() {
        let good = udp(A, B, 1, 2, b"hello");
        let mut bad_ck = good.clone();
        bad_ck[10] ^= 0xff;
        let mut bad_ver = good.clone();
        bad_ver[0] = 0x65;
        let mut bad_hl = good.clone();
        bad_hl[0] = 0x44;
        let mut long = good.clone();
        long[3] += 1;
        let cases: [(&[u8], &str); 5] = [
            (&good[..19], "tiny-packet"),
            (&bad_ver, "bad-ip-version"),
            (&bad_hl, "bad-ip-header"),
            (&long, "bad-ip-length"),
            (&bad_ck, "bad-ip-checksum"),
        ];
        let mut e1 = build("CheckIPHeader", "", 1).unwrap();
        let mut e2 = build("CheckIPHeader", "", 2).unwrap();
        for (b, reason) in cases {
            let o = push(e1.as_mut(), Packet::from_bytes(b));
            assert!(o.out.is_empty());
            assert_eq!(o.drops, vec![reason]);
            let o = push(e2.as_mut(), Packet::from_bytes(b));
            assert_eq!(o.out.len(), 1);
            assert_eq!(o.out[0].0, 1);
            assert!(o.drops.is_empty());
        }
        let s = e1.stats();
        assert_eq!(s[0], ("drops", 5));
        assert!(s.contains(&("bad-ip-checksum", 1)));
        // CheckIPHeader2 and CHECKSUM false accept the bad checksum.
        for (c, cfg) in [("CheckIPHeader2", ""), ("CheckIPHeader", "CHECKSUM false")] {
            let mut e = build(c, cfg, 1).unwrap();
            assert_eq!(push(e.as_mut(), Packet::from_bytes(&bad_ck)).out.len(), 1);
        }
    }

    #[test]
    fn bad_sources() {
        let bcast = udp([255, 255, 255, 255], B, 1, 2, b"");
        let zero_to_me = udp([0, 0, 0, 0], [18, 26, 4, 9], 1, 2, b"");
        let subnet_bcast = udp([18, 26, 4, 255], B, 1, 2, b"");
        // No source check by default.
        let mut e = build("CheckIPHeader", "", 1).unwrap();
        assert_eq!(push(e.as_mut(), Packet::from_bytes(&bcast)).out.len(), 1);
        // Old syntax adds 0.0.0.0 and 255.255.255.255.
        let mut e = build("CheckIPHeader", "1.2.3.4, 0", 1).unwrap();
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&bcast)).drops,
            vec!["bad-ip-src"]
        );
        // INTERFACES: subnet broadcast is bad; packets to our address are exempt.
        let mut e = build("CheckIPHeader", "INTERFACES 18.26.4.9/24", 1).unwrap();
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&subnet_bcast)).drops,
            vec!["bad-ip-src"]
        );
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&zero_to_me)).out.len(),
            1
        );
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&bcast)).drops,
            vec!["bad-ip-src"]
        );
        let mut e = build("CheckIPHeader", "BADSRC 10.0.0.1", 1).unwrap();
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&udp(A, B, 1, 2, b""))).drops,
            vec!["bad-ip-src"]
        );
    }

    #[test]
    fn bad_configs() {
        assert!(build("CheckIPHeader", "BADSRC 1.2.3", 1).is_err());
        assert!(build("CheckIPHeader", "OFFSET x", 1).is_err());
        assert!(build("CheckIPHeader", "FOO 1", 1).is_err());
        assert!(build("CheckIPHeader", "1.2.3.4, x", 1).is_err());
        assert!(build("MarkIPHeader", "-3", 1).is_err());
    }

    #[test]
    fn mark_ip_header_sets_annotations() {
        let mut e = build("MarkIPHeader", "4", 1).unwrap();
        let mut b = vec![0u8; 4];
        b.extend(udp(A, B, 1, 2, b"x"));
        let o = push(e.as_mut(), Packet::from_bytes(&b));
        let p = &o.out[0].1;
        assert_eq!(p.network_offset_in_data(), Some(4));
        assert_eq!(p.transport_header().map(|t| t.len()), Some(9));
        // Short packets do not panic.
        let o = push(e.as_mut(), Packet::from_bytes(&[1, 2]));
        assert_eq!(o.out.len(), 1);
    }

    #[test]
    fn udp_and_tcp_checks() {
        let good = udp(A, B, 53, 53, b"abcd");
        let mut e = build("CheckUDPHeader", "", 1).unwrap();
        assert_eq!(push(e.as_mut(), pkt(&good)).out.len(), 1);
        let mut bad = good.clone();
        bad[30] ^= 1;
        assert_eq!(push(e.as_mut(), pkt(&bad)).drops, vec!["bad-udp-checksum"]);
        let mut nock = bad.clone();
        nock[26] = 0;
        nock[27] = 0;
        assert_eq!(push(e.as_mut(), pkt(&nock)).out.len(), 1);
        let mut tcp_e = build("CheckTCPHeader", "", 2).unwrap();
        let o = push(tcp_e.as_mut(), pkt(&good));
        assert_eq!(o.out[0].0, 1);
        assert_eq!(tcp_e.stats()[1], ("not-tcp", 1));
        let o = push(e.as_mut(), Packet::from_bytes(&good));
        assert_eq!(o.drops, vec!["not-udp"]);
    }
}
