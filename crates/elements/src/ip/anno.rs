//! Annotation elements: `GetIPAddress`, `SetIPAddress`, `SetPacketType`, `DropBroadcasts`,
//! `FixIPSrc`.

use super::{ip_header, ip_header_mut, IpHeaderReason};
use crate::args::parse_uint;
use crate::model::{
    packet_type_value, Case, Effect, Field, FieldSet, Filter, IpAnchor, Model, Op, Outcome,
};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::{Meta, Packet, PacketType};
use std::net::Ipv4Addr;
use wire::bytes::read_u32;

reasons! {
    /// Why `GetIPAddress` drops a packet (besides [`IpHeaderReason::Missing`] for its
    /// `IP src` / `IP dst` forms).
    pub enum GetIPAddressReason {
        /// The 4 bytes at OFFSET are not all there.
        ShortPacket => "short-packet",
    }
}

reasons! {
    /// Why `DropBroadcasts` drops a packet.
    pub enum DropBroadcastsReason {
        /// Its packet type annotation is broadcast or multicast.
        Broadcast => "broadcast",
    }
}

/// Checks an `ANNO` argument: FuseBox has one 4-byte address annotation, the destination IP
/// (Click's `DST_IP`, at annotation offset 0).
fn check_anno(s: Option<&str>) -> Result<(), ConfigError> {
    match s.map(str::trim) {
        None | Some("DST_IP" | "DST_IP_ANNO" | "dst_ip" | "0") => Ok(()),
        Some(o) => Err(ConfigError::new(format!(
            "expected ANNO to be the destination IP annotation (DST_IP), found `{o}`"
        ))),
    }
}

/// Where `GetIPAddress` reads the address from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Byte offset into the packet data.
    Offset(usize),
    /// The IP header's source address (`IP src`).
    Src,
    /// The IP header's destination address (`IP dst`).
    Dst,
}

/// `GetIPAddress(OFFSET [, ANNO])` or `GetIPAddress(IP src|dst [, ANNO])`: copies the 4 bytes
/// at OFFSET of the packet data (Click: relative to `p->data()`, not the IP header; the usual
/// use is `GetIPAddress(16)` on a packet starting with its IP header) into the destination IP
/// annotation. With `IP src`/`IP dst` it copies that address of the IP header the network
/// header annotation points at. 1/1.
///
/// Packets shorter than OFFSET + 4 (Click would read past the end) are dropped under
/// `short-packet`; `IP src|dst` without a network header: `no-ip-header`.
pub struct GetIPAddress {
    source: Source,
}

impl GetIPAddress {
    /// Builds the element.
    pub fn configure(args: &Args) -> Result<GetIPAddress, ConfigError> {
        args.check(2, &["OFFSET", "ANNO", "IP"])?;
        check_anno(args.get(1, "ANNO"))?;
        let off = args.get(0, "OFFSET");
        let source = match (off, args.keyword("IP")) {
            (Some(o), None) => Source::Offset(parse_uint(o, "OFFSET")? as usize),
            (None, Some("src")) => Source::Src,
            (None, Some("dst")) => Source::Dst,
            (None, Some(o)) => {
                return Err(ConfigError::new(format!(
                    "expected IP `src` or `dst`, found `{o}`"
                )))
            }
            _ => {
                return Err(ConfigError::new(
                    "expected exactly one of OFFSET or IP (src, dst)",
                ))
            }
        };
        Ok(GetIPAddress { source })
    }
}

impl Element for GetIPAddress {
    fn class_name(&self) -> &'static str {
        "GetIPAddress"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        let a = match self.source {
            Source::Offset(o) => match read_u32(p.data(), o).map(Ipv4Addr::from) {
                Some(a) => a,
                None => return Verdict::Drop(p, GetIPAddressReason::ShortPacket.into()),
            },
            Source::Src | Source::Dst => match ip_header(&p) {
                Some((ip, _)) if self.source == Source::Src => ip.src_addr(),
                Some((ip, _)) => ip.dst_addr(),
                None => return Verdict::Drop(p, IpHeaderReason::Missing.into()),
            },
        };
        p.meta.dst_ip = a;
        Verdict::Out(0, p)
    }
    /// `GetIPAddress(16)` only: the address at data offset 16 is the destination of an IPv4
    /// header at data offset 0 ([`Effect::DstAnnoFromIpDst`]), present when the data holds
    /// 20 bytes (`ip_avail` ≥ 20); shorter packets are `short-packet`. Other forms are opaque.
    fn model(&self) -> Option<Model> {
        if self.source != Source::Offset(16) {
            return None;
        }
        let short = Filter::any().with(Field::IpAvail, FieldSet::range(0, 19));
        Some(Model {
            ip_at: IpAnchor::Data(0),
            cases: vec![
                Case::new(short, Outcome::Drop(GetIPAddressReason::ShortPacket.into())),
                Case::new(Filter::any(), Outcome::Out(0)).effect(Effect::DstAnnoFromIpDst),
            ],
        })
    }
}

/// `SetIPAddress(IP [, ANNO])`: sets the destination IP annotation to IP. 1/1.
pub struct SetIPAddress {
    addr: Ipv4Addr,
}

impl SetIPAddress {
    /// Builds the element.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<SetIPAddress, ConfigError> {
        args.check(2, &["IP", "ANNO"])?;
        check_anno(args.get(1, "ANNO"))?;
        let addr = bcx.names.ipv4(args.require(0, "IP", "an IP address")?)?;
        Ok(SetIPAddress { addr })
    }
}

impl Element for SetIPAddress {
    fn class_name(&self) -> &'static str {
        "SetIPAddress"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        p.meta.dst_ip = self.addr;
        Verdict::Out(0, p)
    }
    fn model(&self) -> Option<Model> {
        let a = u128::from(u32::from(self.addr));
        Some(Model::new(vec![Case::new(Filter::any(), Outcome::Out(0))
            .effect(Effect::Write(Field::DstIpAnno, Op::Set(a)))]))
    }
}

/// `SetPacketType(TYPE)`: sets the packet-type annotation to TYPE (`HOST`, `BROADCAST`,
/// `MULTICAST`, `OTHERHOST`, `OUTGOING` or `LOOPBACK`, any case, as Click reads it). 1/1.
pub struct SetPacketType {
    t: PacketType,
}

impl SetPacketType {
    /// Builds the element.
    pub fn configure(args: &Args) -> Result<SetPacketType, ConfigError> {
        args.check(1, &["TYPE"])?;
        let v = args.require(0, "TYPE", "packet type")?;
        let t = match v.trim().to_ascii_uppercase().as_str() {
            "HOST" => PacketType::Host,
            "BROADCAST" => PacketType::Broadcast,
            "MULTICAST" => PacketType::Multicast,
            "OTHERHOST" => PacketType::OtherHost,
            "OUTGOING" => PacketType::Outgoing,
            "LOOPBACK" => PacketType::Loopback,
            _ => {
                return Err(ConfigError::new(format!(
                    "expected TYPE (HOST, BROADCAST, MULTICAST, OTHERHOST, OUTGOING or \
                     LOOPBACK), found `{}`",
                    v.trim()
                )))
            }
        };
        Ok(SetPacketType { t })
    }
}

impl Element for SetPacketType {
    fn class_name(&self) -> &'static str {
        "SetPacketType"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        p.meta.packet_type = self.t;
        Verdict::Out(0, p)
    }
    fn model(&self) -> Option<Model> {
        let v = packet_type_value(self.t);
        Some(Model::new(vec![Case::new(Filter::any(), Outcome::Out(0))
            .effect(Effect::Write(Field::PacketType, Op::Set(v)))]))
    }
}

/// `DropBroadcasts`: drops packets whose packet type annotation (set from the destination
/// MAC on reception by `FromDevice`) is broadcast or multicast, under `broadcast`, or sends
/// them to output 1 when it is connected (Click's `1/1-2`); others pass. `drops` counts
/// them either way.
pub struct DropBroadcasts {
    drops: u64,
    has_out1: bool,
}

impl DropBroadcasts {
    /// Builds the element (no arguments).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<DropBroadcasts, ConfigError> {
        args.check(0, &[])?;
        Ok(DropBroadcasts {
            drops: 0,
            has_out1: bcx.noutputs >= 2,
        })
    }
}

impl Element for DropBroadcasts {
    fn class_name(&self) -> &'static str {
        "DropBroadcasts"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, p: Packet, _cx: &mut Context) -> Verdict {
        if matches!(
            p.meta.packet_type,
            PacketType::Broadcast | PacketType::Multicast
        ) {
            self.drops += 1;
            super::bad_out(self.has_out1, p, DropBroadcastsReason::Broadcast)
        } else {
            Verdict::Out(0, p)
        }
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("drops", self.drops)]
    }
    fn model(&self) -> Option<Model> {
        let t = |t| (packet_type_value(t), packet_type_value(t));
        let bcast = FieldSet::from_intervals([t(PacketType::Broadcast), t(PacketType::Multicast)]);
        Some(Model::new(vec![
            Case::new(
                Filter::any().with(Field::PacketType, bcast),
                super::bad_outcome(self.has_out1, DropBroadcastsReason::Broadcast),
            )
            .stat("drops"),
            Case::new(Filter::any(), Outcome::Out(0)),
        ]))
    }
}

/// `FixIPSrc(IPADDR)`: Click rewrites the IP source to IPADDR (and recomputes the IP header
/// checksum, clearing the annotation) only for packets carrying the "fix IP source"
/// annotation, which `ICMPError` sets on the errors it generates; every other packet passes
/// untouched. 1/1.
///
/// The annotation is [`Meta::fix_ip_src`]; [`FixIPSrc::fix`] does the rewrite.
pub struct FixIPSrc {
    addr: Ipv4Addr,
    fixed: u64,
}

impl FixIPSrc {
    /// Builds the element.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<FixIPSrc, ConfigError> {
        args.check(1, &["IPADDR"])?;
        let addr = bcx
            .names
            .ipv4(args.require(0, "IPADDR", "an IP address")?)?;
        Ok(FixIPSrc { addr, fixed: 0 })
    }

    /// Whether the packet carries Click's "fix IP source" annotation.
    pub fn flagged(meta: &Meta) -> bool {
        meta.fix_ip_src
    }

    /// Rewrites the source address of the packet's IP header (network header annotation) to
    /// the configured address and recomputes the header checksum. Returns false (packet
    /// unchanged) if it has no valid IP header.
    pub fn fix(&self, p: &mut Packet) -> bool {
        let Ok((mut ip, _)) = ip_header_mut(p) else {
            return false;
        };
        ip.set_src_addr(self.addr);
        ip.fill_checksum();
        true
    }
}

impl Element for FixIPSrc {
    fn class_name(&self) -> &'static str {
        "FixIPSrc"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut p: Packet, _cx: &mut Context) -> Verdict {
        if FixIPSrc::flagged(&p.meta) {
            p.meta.fix_ip_src = false;
            if self.fix(&mut p) {
                self.fixed += 1;
            }
        }
        Verdict::Out(0, p)
    }
    fn model(&self) -> Option<Model> {
        // Unflagged packets pass unchanged; flagged ones (from ICMPError) are fixed at run
        // time.
        Some(Model::new(vec![
            Case::new(
                Filter::any().with(Field::FixIpSrc, FieldSet::single(0)),
                Outcome::Out(0),
            ),
            Case::new(Filter::any(), Outcome::Runtime),
        ]))
    }
    /// The flagged packets (its model's run-time case): the annotation cleared, the source
    /// rewritten and the header checksum computed afresh (over the whole header and its
    /// options) when there is a header; counted.
    fn declared(&self) -> Option<crate::record::Declared> {
        use crate::record::{Access, Declared};
        let d = Declared {
            writes: vec![Field::FixIpSrc, Field::IpSrc],
            ip_checksum: true,
            ip_options: Access::Read,
            stateful: true,
            ..Default::default()
        };
        Some(d.read(&[Field::FixIpSrc]).read(&Declared::IP_HEADER))
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("fixed", self.fixed)]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn get_ip_address_reads_offset_or_header() {
        let b = udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, b"");
        let mut e = build("GetIPAddress", "16", 1).unwrap();
        let o = push(e.as_mut(), Packet::from_bytes(&b));
        assert_eq!(o.out[0].1.meta.dst_ip, Ipv4Addr::new(5, 6, 7, 8));
        let mut e = build("GetIPAddress", "IP src", 1).unwrap();
        let o = push(e.as_mut(), pkt(&b));
        assert_eq!(o.out[0].1.meta.dst_ip, Ipv4Addr::new(1, 2, 3, 4));
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&b)).drops,
            vec!["no-ip-header"]
        );
        let mut e = build("GetIPAddress", "30", 1).unwrap();
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&b)).drops,
            vec!["short-packet"]
        );
        assert!(build("GetIPAddress", "", 1).is_err());
        assert!(build("GetIPAddress", "16, PAINT", 1).is_err());
        assert!(build("GetIPAddress", "16, IP dst", 1).is_err());
        assert!(build("GetIPAddress", "16, DST_IP", 1).is_ok());
    }

    #[test]
    fn set_ip_address_and_drop_broadcasts() {
        let mut e = build("SetIPAddress", "9.9.9.9", 1).unwrap();
        let o = push(e.as_mut(), Packet::from_bytes(&[0; 4]));
        assert_eq!(o.out[0].1.meta.dst_ip, Ipv4Addr::new(9, 9, 9, 9));
        assert!(build("SetIPAddress", "9.9.9", 1).is_err());
        let mut e = build("DropBroadcasts", "", 1).unwrap();
        let mut two = build("DropBroadcasts", "", 2).unwrap();
        for (t, pass) in [
            (PacketType::Host, true),
            (PacketType::Broadcast, false),
            (PacketType::Multicast, false),
            (PacketType::OtherHost, true),
        ] {
            let mut p = Packet::from_bytes(&[0; 4]);
            p.meta.packet_type = t;
            let o = push(e.as_mut(), p.duplicate());
            assert_eq!(o.out.len(), usize::from(pass));
            assert_eq!(o.drops.len(), usize::from(!pass));
            // With output 1 connected, broadcasts leave there instead of being dropped.
            let o = push(two.as_mut(), p);
            assert_eq!(
                o.out.iter().map(|o| o.0).collect::<Vec<_>>(),
                vec![usize::from(!pass)]
            );
        }
        assert_eq!(e.stats(), vec![("drops", 2)]);
        assert_eq!(two.stats(), vec![("drops", 2)]);
    }

    #[test]
    fn set_packet_type_sets_the_annotation() {
        for (arg, t) in [
            ("HOST", PacketType::Host),
            ("broadcast", PacketType::Broadcast),
            ("MULTICAST", PacketType::Multicast),
            ("OtherHost", PacketType::OtherHost),
            ("OUTGOING", PacketType::Outgoing),
            ("LOOPBACK", PacketType::Loopback),
        ] {
            let mut e = build("SetPacketType", arg, 1).unwrap();
            let o = push(e.as_mut(), Packet::from_bytes(&[0; 4]));
            assert_eq!(o.out[0].1.meta.packet_type, t);
        }
        let err = build("SetPacketType", "FASTROUTE", 1).err().unwrap();
        assert!(err.to_string().contains("expected TYPE"), "{err}");
        assert!(build("SetPacketType", "", 1).is_err());
    }

    #[test]
    fn fix_ip_src_passes_unflagged_and_fixes_on_request() {
        let b = udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, b"");
        let mut e = build("FixIPSrc", "18.26.4.1", 1).unwrap();
        let o = push(e.as_mut(), pkt(&b));
        assert_eq!(o.out[0].1.data(), &b[..]);
        let f = FixIPSrc::configure(&Args::parse("18.26.4.1").unwrap(), &ctx()).unwrap();
        let mut p = pkt(&b);
        assert!(f.fix(&mut p));
        assert_eq!(&p.data()[12..16], &[18, 26, 4, 1]);
        assert!(ip_ok(p.data()));
        assert!(!f.fix(&mut Packet::from_bytes(&b)));
        assert!(build("FixIPSrc", "", 1).is_err());
        // A flagged packet (as ICMPError marks its errors) is rewritten and the flag cleared.
        let mut p = pkt(&b);
        p.meta.fix_ip_src = true;
        let o = push(e.as_mut(), p);
        assert_eq!(&o.out[0].1.data()[12..16], &[18, 26, 4, 1]);
        assert!(ip_ok(o.out[0].1.data()));
        assert!(!o.out[0].1.meta.fix_ip_src);
        assert_eq!(e.stats(), vec![("fixed", 1)]);
    }

    fn ctx() -> BuildCtx<'static> {
        static NAMES: std::sync::OnceLock<crate::Names> = std::sync::OnceLock::new();
        BuildCtx {
            name: "nf/f",
            ninputs: 1,
            noutputs: 1,
            names: NAMES.get_or_init(crate::Names::new),
            base_dir: std::path::Path::new("."),
        }
    }
}
