//! Device and dump-file elements: where packets enter and leave an NF.
//!
//! Click: `FromDevice(DEVNAME [, keywords])` reads packets from a network interface and
//! pushes them out of its single output; on reception it sets the MAC header annotation to
//! the start of the frame and the packet-type annotation from the destination MAC
//! (broadcast, multicast, host). `ToDevice(DEVNAME)` sends the packets it receives on its
//! single input to the interface. `FromDump(FILENAME [, keywords])` reads a pcap file and
//! emits its packets like a device would; `ToDump(FILENAME [, keywords])` writes the packets
//! it receives to a pcap file.
//!
//! In FuseBox the executor does the I/O: it reads the [`Role`] of these elements, pushes
//! arriving packets into input port 0 of `FromDevice`/`FromDump` (although Click gives them
//! no inputs, the port count is `0/1` and the push on port 0 is accepted), and intercepts
//! packets that reach `ToDevice`/`ToDump` before their `push` is called. Device keywords
//! (`SNIFFER`, `PROMISC`, `BURST`, `QUEUE`, ...) have no meaning here and are accepted
//! without checking. `PollDevice`, `FromNetmapDevice` and `FromDPDKDevice` are synonyms of
//! `FromDevice`; `ToNetmapDevice` and `ToDPDKDevice` of `ToDevice`.
//!
//! `FORCE_IP true` (on `FromDump` and `FromDevice`) keeps only IP packets (Click's
//! `fake_pcap_force_ip`): frames whose EtherType (after at most one 802.1Q tag) is IPv4 or
//! IPv6 get their network and transport header annotations set; others leave on output 1
//! when it is connected (Click's `0/1-2`) and are dropped as `not-ip` otherwise.
//!
//! Only `FromDevice` sets the packet-type annotation from the destination MAC; `FromDump`
//! leaves it `HOST`, as Click's does (so `FromDump(f) -> DropBroadcasts` drops nothing in
//! both).

use crate::args::{parse_bool, parse_uint, unquote};
use crate::model::{Case, Effect, Filter, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Role, Verdict};
use packet::{Packet, PacketType};
use std::path::PathBuf;

reasons! {
    /// Why `FromDump` and `FromDevice` drop a packet.
    pub enum FromDumpReason {
        /// FORCE_IP is set and the frame holds no IP packet.
        NotIp => "not-ip",
    }
}

/// What a receiving element does to every arriving frame: MAC header at the start (and in
/// `FromDevice`, the packet type from the destination MAC, which the caller sets), then
/// FORCE_IP's check when `force_ip`: IP frames get their header annotations, others leave
/// on output 1 or are dropped as `not-ip`.
#[inline]
fn receive(p: &mut Packet, force_ip: bool, has_out1: bool) -> crate::Step {
    p.set_mac_header(0);
    if force_ip {
        match ip_header(p.data()) {
            Some((off, hl)) => {
                p.set_network_header(off);
                p.set_transport_header(off + hl);
            }
            None => return crate::ip::bad_step(has_out1, FromDumpReason::NotIp),
        }
    }
    crate::Step::Out(0)
}

/// `FORCE_IP` (default false).
fn force_ip(args: &Args) -> Result<bool, ConfigError> {
    args.keyword("FORCE_IP")
        .map_or(Ok(false), |v| parse_bool(v, "FORCE_IP"))
}

fn devname(args: &Args) -> Result<String, ConfigError> {
    let d = args.require(0, "DEVNAME", "interface name")?;
    let d = unquote(d);
    if d.is_empty() {
        return Err(ConfigError::new(
            "expected DEVNAME (an interface name), found an empty string",
        ));
    }
    Ok(d)
}

fn filename(args: &Args, bcx: &BuildCtx) -> Result<PathBuf, ConfigError> {
    let f = unquote(args.require(0, "FILENAME", "pcap file name")?);
    if f.is_empty() {
        return Err(ConfigError::new(
            "expected FILENAME (a pcap file name), found an empty string",
        ));
    }
    Ok(bcx.base_dir.join(f))
}

/// `FromDevice(DEVNAME, ...)` and its synonyms: packets arriving on interface `DEVNAME`.
#[derive(Debug, Clone)]
pub struct FromDevice {
    class: &'static str,
    /// The interface name.
    pub devname: String,
    /// `FORCE_IP`: keep only IP frames and set their IP header annotations.
    pub force_ip: bool,
    has_out1: bool,
}

impl FromDevice {
    /// Reads `DEVNAME` and `FORCE_IP`; every other argument is accepted and ignored.
    pub fn configure(
        class: &'static str,
        args: &Args,
        bcx: &BuildCtx,
    ) -> Result<FromDevice, ConfigError> {
        Ok(FromDevice {
            class,
            devname: devname(args)?,
            force_ip: force_ip(args)?,
            has_out1: bcx.noutputs >= 2,
        })
    }

    /// What `push` does, in place.
    #[inline(always)]
    fn step(&mut self, packet: &mut Packet) -> crate::Step {
        packet.meta.packet_type = PacketType::from_dst_mac(packet.data());
        receive(packet, self.force_ip, self.has_out1)
    }
}

impl Element for FromDevice {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(0, 0, 1, 2)
    }
    push_in_place!();
    /// Every frame leaves on output 0 with the MAC header at its start and the packet type
    /// from its destination MAC (what `push` does). Opaque with FORCE_IP.
    fn model(&self) -> Option<Model> {
        if self.force_ip {
            return None;
        }
        Some(Model::new(vec![Case::new(Filter::any(), Outcome::Out(0))
            .effect(Effect::MarkMac)
            .effect(Effect::PacketTypeFromEth)]))
    }
    fn role(&self) -> Role {
        Role::FromDevice(self.devname.clone())
    }
}

/// `ToDevice(DEVNAME, ...)` and its synonyms: packets leaving by interface `DEVNAME`.
#[derive(Debug, Clone)]
pub struct ToDevice {
    class: &'static str,
    /// The interface name.
    pub devname: String,
}

impl ToDevice {
    /// `ToHost([DEVNAME])`: Click delivers these packets to the host's own network stack.
    /// FuseBox runs no host stack, so they leave the NF by the interface `DEVNAME` (default
    /// `host`): an exit like any other, written to `NF.host.pcap` by default.
    pub fn to_host(args: &Args) -> Result<ToDevice, ConfigError> {
        let devname = args.get(0, "DEVNAME").map(unquote).unwrap_or_default();
        Ok(ToDevice {
            class: "ToHost",
            devname: if devname.is_empty() {
                "host".to_string()
            } else {
                devname
            },
        })
    }

    /// Reads `DEVNAME`; every other argument is accepted and ignored.
    pub fn configure(class: &'static str, args: &Args) -> Result<ToDevice, ConfigError> {
        Ok(ToDevice {
            class,
            devname: devname(args)?,
        })
    }
}

impl Element for ToDevice {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 0)
    }
    /// The executor takes packets before they reach a sink; should one arrive anyway it is
    /// consumed (it left the NF).
    fn push(&mut self, _port: usize, _packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Done
    }
    fn role(&self) -> Role {
        Role::ToDevice(self.devname.clone())
    }
}

const FROM_DUMP_KEYWORDS: &[&str] = &[
    "FILENAME",
    "STOP",
    "TIMING",
    "ACTIVE",
    "FORCE_IP",
    "START",
    "START_AFTER",
    "END",
    "END_AFTER",
    "INTERVAL",
    "END_CALL",
    "SAMPLE",
    "FILEPOS",
    "MMAP",
    "TIMING_FUZZ",
    "BURST",
];

/// `FromDump(FILENAME, ...)`: the packets of a pcap file enter here.
#[derive(Debug, Clone)]
pub struct FromDump {
    /// The capture, resolved against the configuration's directory.
    pub path: PathBuf,
    /// `STOP`: stop the driver when the file is exhausted (default false).
    pub stop: bool,
    /// `TIMING`: replay with the capture's inter-packet gaps (default false).
    pub timing: bool,
    /// `ACTIVE`: emit packets at all (default true).
    pub active: bool,
    /// `FORCE_IP`: keep only IP packets and set their IP header annotations (default false).
    pub force_ip: bool,
    has_out1: bool,
}

impl FromDump {
    /// Reads `FILENAME` and the boolean keywords; Click's other keywords are accepted.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<FromDump, ConfigError> {
        args.check(1, FROM_DUMP_KEYWORDS)?;
        let b = |k: &str, d: bool| args.keyword(k).map_or(Ok(d), |v| parse_bool(v, k));
        if let Some(v) = args.keyword("SAMPLE") {
            v.trim().parse::<f64>().map_err(|_| {
                ConfigError::new(format!(
                    "expected SAMPLE (a probability between 0 and 1), found `{v}`"
                ))
            })?;
        }
        if let Some(v) = args.keyword("BURST") {
            parse_uint(v, "BURST")?;
        }
        Ok(FromDump {
            path: filename(args, bcx)?,
            stop: b("STOP", false)?,
            timing: b("TIMING", false)?,
            active: b("ACTIVE", true)?,
            force_ip: force_ip(args)?,
            has_out1: bcx.noutputs >= 2,
        })
    }
}

/// Where the IP header of an Ethernet frame starts, and its header length, if the frame
/// carries IPv4 or IPv6 (after at most one 802.1Q tag).
fn ip_header(frame: &[u8]) -> Option<(usize, usize)> {
    let (off, ty) = wire::vlan::single_tag_l3(frame)?;
    let ip = frame.get(off..)?;
    let version = ip.first()? >> 4;
    match ty {
        // 20 <= header length <= the bytes there.
        wire::ethernet::ethertype::IPV4 if version == 4 => {
            packet::Ipv4Flow::parse(ip).map(|v| (off, v.header_len()))
        }
        wire::ethernet::ethertype::IPV6 if version == 6 => {
            (ip.len() >= wire::ipv6::HEADER_LEN).then_some((off, wire::ipv6::HEADER_LEN))
        }
        _ => None,
    }
}

impl Element for FromDump {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "FromDump"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(0, 0, 1, 2)
    }
    fn push(&mut self, _port: usize, mut packet: Packet, _cx: &mut Context) -> Verdict {
        receive(&mut packet, self.force_ip, self.has_out1).verdict(packet)
    }
    fn role(&self) -> Role {
        Role::FromDump(self.path.clone())
    }
}

const TO_DUMP_KEYWORDS: &[&str] = &[
    "FILENAME",
    "SNAPLEN",
    "ENCAP",
    "USE_ENCAP_FROM",
    "EXTRA_LENGTH",
    "UNBUFFERED",
    "NANO",
];

/// `ToDump(FILENAME, ...)`: packets reaching this element are written to a pcap file.
#[derive(Debug, Clone)]
pub struct ToDump {
    /// The capture, resolved against the configuration's directory.
    pub path: PathBuf,
    /// `SNAPLEN`: bytes of each packet written (Click's default 2000; 0 means no limit).
    pub snaplen: u32,
    /// `ENCAP`: the link type written (`ETHER` by default, or `IP`).
    pub encap: String,
    /// `NANO`: write nanosecond timestamps.
    pub nano: Option<bool>,
}

impl ToDump {
    /// Reads `FILENAME`, `SNAPLEN`, `ENCAP` and `NANO`; Click's other keywords are accepted.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<ToDump, ConfigError> {
        args.check(1, TO_DUMP_KEYWORDS)?;
        let snaplen = match args.keyword("SNAPLEN") {
            Some(v) => crate::args::parse_uint_max(v, u64::from(u32::MAX), "SNAPLEN")? as u32,
            None => 2000,
        };
        let encap = args
            .keyword("ENCAP")
            .map_or("ETHER".to_string(), |e| e.trim().to_ascii_uppercase());
        if !matches!(
            encap.as_str(),
            "ETHER" | "IP" | "RAW" | "LINUX_SLL" | "802_11" | "PRISM"
        ) {
            return Err(ConfigError::new(format!(
                "expected ENCAP ETHER or IP, found `{encap}`"
            )));
        }
        let nano = args
            .keyword("NANO")
            .map(|v| parse_bool(v, "NANO"))
            .transpose()?;
        if let Some(v) = args.keyword("UNBUFFERED") {
            parse_bool(v, "UNBUFFERED")?;
        }
        Ok(ToDump {
            path: filename(args, bcx)?,
            snaplen,
            encap,
            nano,
        })
    }
}

impl Element for ToDump {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "ToDump"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 0)
    }
    /// The executor takes packets before they reach a sink; should one arrive anyway it is
    /// consumed (it was written).
    fn push(&mut self, _port: usize, _packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Done
    }
    fn role(&self) -> Role {
        Role::ToDump(self.path.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use std::path::Path;

    #[test]
    fn from_device_sets_mac_header_and_packet_type() {
        for class in [
            "FromDevice",
            "PollDevice",
            "FromNetmapDevice",
            "FromDPDKDevice",
        ] {
            let mut e = ok(class, "eth0, SNIFFER false, PROMISC true, BURST 32", 1);
            assert_eq!(e.class_name(), class);
            assert_eq!(e.role(), Role::FromDevice("eth0".into()));
            assert_eq!(e.port_count().describe(), "0/1-2");
            let mut f = frame();
            f[..6].copy_from_slice(&[0xff; 6]);
            let o = run(e.as_mut(), pkt(&f));
            assert_eq!(o.ports(), vec![0]);
            let p = &o.out[0].1;
            assert_eq!(p.data(), &f[..]);
            assert_eq!(p.meta.packet_type, PacketType::Broadcast);
            assert_eq!(p.mac_header().map(<[u8]>::len), Some(60));
        }
        let mut e = ok("FromDevice", "eth1", 1);
        let mut f = frame();
        f[0] = 0x01;
        assert_eq!(
            run(e.as_mut(), pkt(&f)).out[0].1.meta.packet_type,
            PacketType::Multicast
        );
        assert_eq!(
            run(e.as_mut(), pkt(&frame())).out[0].1.meta.packet_type,
            PacketType::Host
        );
        // An empty frame is still forwarded (nothing to classify).
        assert_eq!(run(e.as_mut(), pkt(&[])).ports(), vec![0]);
    }

    #[test]
    fn to_host_is_an_exit_named_host() {
        assert_eq!(ok("ToHost", "", 0).role(), Role::ToDevice("host".into()));
        assert_eq!(
            ok("ToHost", "tap0", 0).role(),
            Role::ToDevice("tap0".into())
        );
    }

    #[test]
    fn device_names_required() {
        assert!(err("FromDevice", "", 1).contains("DEVNAME"));
        assert!(err("ToDevice", "\"\"", 0).contains("DEVNAME"));
        let e = ok("ToDPDKDevice", "0", 0);
        assert_eq!(e.role(), Role::ToDevice("0".into()));
        assert_eq!(e.port_count().describe(), "1/0");
    }

    #[test]
    fn dumps_resolve_paths_against_base_dir() {
        let e = ok("FromDump", "in.pcap, STOP true, TIMING false", 1);
        assert_eq!(
            e.role(),
            Role::FromDump(Path::new("/cases/x/in.pcap").into())
        );
        let d = e
            .as_any()
            .downcast_ref::<FromDump>()
            .map(|d| (d.stop, d.timing, d.active, d.force_ip));
        assert_eq!(d, Some((true, false, true, false)));
        let e = ok("ToDump", "\"/tmp/out.pcap\", SNAPLEN 96, ENCAP IP", 0);
        assert_eq!(e.role(), Role::ToDump(Path::new("/tmp/out.pcap").into()));
        let t = e
            .as_any()
            .downcast_ref::<ToDump>()
            .map(|t| (t.snaplen, t.encap.clone()));
        assert_eq!(t, Some((96, "IP".to_string())));
        assert!(err("FromDump", "", 1).contains("FILENAME"));
        assert!(err("FromDump", "a.pcap, STOP maybe", 1).contains("STOP"));
        assert!(err("ToDump", "a.pcap, SNAPLEN lots", 0).contains("SNAPLEN"));
        assert!(err("ToDump", "a.pcap, COLOR 3", 0).contains("unknown keyword `COLOR`"));
        assert!(err("ToDump", "a.pcap, ENCAP FDDI", 0).contains("ENCAP"));
    }

    #[test]
    fn from_dump_force_ip() {
        let mut e = ok("FromDump", "in.pcap, FORCE_IP true", 1);
        let o = run(e.as_mut(), pkt(&frame()));
        assert_eq!(o.ports(), vec![0]);
        let p = &o.out[0].1;
        assert_eq!(p.network_offset_in_data(), Some(14));
        assert_eq!(p.transport_header().map(<[u8]>::len), Some(60 - 34));
        let mut arp = frame();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(run(e.as_mut(), pkt(&arp)).drops, vec!["not-ip"]);
        assert_eq!(run(e.as_mut(), pkt(&frame()[..20])).drops, vec!["not-ip"]);
        let mut vlan = vec![0u8; 64];
        vlan[12..14].copy_from_slice(&[0x81, 0x00]);
        vlan[16..18].copy_from_slice(&[0x08, 0x00]);
        vlan[18] = 0x46;
        let o = run(e.as_mut(), pkt(&vlan));
        assert_eq!(o.out[0].1.network_offset_in_data(), Some(18));
        assert_eq!(
            o.out[0].1.transport_header().map(<[u8]>::len),
            Some(64 - 18 - 24)
        );
        // Without FORCE_IP everything passes.
        let mut e = ok("FromDump", "in.pcap", 1);
        assert_eq!(run(e.as_mut(), pkt(&arp)).ports(), vec![0]);
        // With output 1 connected, non-IP frames leave there (Click's 0/1-2); FromDevice
        // has the same keyword.
        for (class, config) in [("FromDump", "in.pcap"), ("FromDevice", "eth0")] {
            let mut e = ok(class, &format!("{config}, FORCE_IP true"), 2);
            assert_eq!(run(e.as_mut(), pkt(&arp)).ports(), vec![1]);
            assert_eq!(run(e.as_mut(), pkt(&frame())).ports(), vec![0]);
            let mut e = ok(class, &format!("{config}, FORCE_IP true"), 1);
            assert_eq!(run(e.as_mut(), pkt(&arp)).drops, vec!["not-ip"]);
        }
    }

    #[test]
    fn from_dump_leaves_the_packet_type_alone() {
        // Click's FromDump sets no packet type (only FromDevice reads the destination MAC),
        // so a broadcast frame from a dump is HOST.
        let mut e = ok("FromDump", "in.pcap", 1);
        let mut f = frame();
        f[..6].copy_from_slice(&[0xff; 6]);
        let o = run(e.as_mut(), pkt(&f));
        assert_eq!(o.out[0].1.meta.packet_type, PacketType::Host);
        assert_eq!(o.out[0].1.mac_header().map(<[u8]>::len), Some(60));
    }

    #[test]
    fn sinks_consume() {
        let mut e = ok("ToDump", "o.pcap", 0);
        let o = run(e.as_mut(), pkt(&frame()));
        assert!(o.out.is_empty() && o.drops.is_empty());
    }
}
