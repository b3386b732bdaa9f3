//! Every element model agrees with the element's `push`: for random Ethernet/IPv4 packets
//! and annotations, `model::apply` on a copy gives the same output port or drop reason, the
//! same bytes, the same annotations and the same `stats()` increments as pushing the packet
//! through a freshly built element (cases whose outcome is `Runtime` are left to the element
//! and skipped). The checks are shown to fail on wrong models (`comparison_catches_...`).

use elements::model::{self, Case, Effect, Field, FieldSet, Filter, IpAnchor, Model, Op, Outcome};
use elements::{build, BuildCtx, Context, Element, Names, Verdict};
use packet::{Packet, PacketType, Timestamp, NO_OFFSET};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::path::Path;
use wire::ethernet::ethertype;
use wire::IpProtocol;

fn make(class: &str, config: &str, noutputs: usize) -> Box<dyn Element> {
    make_in(class, config, 1, noutputs)
}

/// `make` with `ninputs` connected inputs.
fn make_in(class: &str, config: &str, ninputs: usize, noutputs: usize) -> Box<dyn Element> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/e",
        ninputs,
        noutputs,
        names: &names,
        base_dir: Path::new("."),
    };
    match build(class, config, &bcx) {
        Ok(e) => e,
        Err(e) => panic!("{class}({config}): {e}"),
    }
}

/// Pushes `p` through `e` and `model::apply`s `m` to a copy, and compares: `Ok(true)` when
/// they agree, `Ok(false)` when the model leaves the packet to the element (`Runtime`),
/// `Err(why)` when they differ.
fn compare(e: &mut dyn Element, m: &Model, p: Packet) -> Result<bool, String> {
    compare_at(e, m, p, Timestamp(0))
}

/// `compare` with the push at virtual time `now` (for elements whose state ages).
fn compare_at(e: &mut dyn Element, m: &Model, p: Packet, now: Timestamp) -> Result<bool, String> {
    let before = e.stats();
    let applied = model::apply(m, p.duplicate());
    let input = format!("{:02x?} (head {}, {:?})", p.data(), p.data_offset(), p.meta);
    let mut cx = Context::new(now);
    let v = e.push(0, p, &mut cx);
    if applied.outcome == Outcome::Runtime {
        return Ok(false);
    }
    let mut emitted: Vec<(usize, Packet)> = cx.take_emitted().collect();
    let mut dropped: Vec<(Packet, &'static str)> = cx.take_dropped().collect();
    let (n_emitted, n_dropped) = (emitted.len(), dropped.len());
    let created = cx.take_created();
    if let Outcome::Copies(n) = applied.outcome {
        // Every output in order, each the model's packet; n - 1 of them made.
        let ports: Vec<usize> = emitted.iter().map(|(o, _)| *o).collect();
        let ok = matches!(v, Verdict::Done)
            && n_dropped == 0
            && created == n as u64 - 1
            && ports == (0..n).collect::<Vec<_>>()
            && emitted
                .iter()
                .all(|(_, q)| q.data() == applied.packet.data() && q.meta == applied.packet.meta);
        return if ok {
            Ok(true)
        } else {
            Err(format!(
                "{}: copies to {ports:?} ({created} made), the model says {n}; input {input}",
                e.class_name()
            ))
        };
    }
    // An element may hand its one packet on through the context instead (`ARPQuerier`);
    // anything more (another packet emitted, dropped or made) is not what the model says.
    let v = match (v, n_emitted, n_dropped, created) {
        (Verdict::Done, 1, 0, 0) => emitted.pop().map(|(o, q)| Verdict::Out(o, q)),
        (Verdict::Done, 0, 1, 0) => dropped.pop().map(|(q, r)| Verdict::Drop(q, r)),
        (v @ (Verdict::Out(..) | Verdict::Drop(..)), 0, 0, 0) => Some(v),
        _ => None,
    };
    let Some(v) = v else {
        return Err(format!(
            "{}: the element emitted {n_emitted}, dropped {n_dropped}, created {created} \
             through the context, the model says {:?}; input {input}",
            e.class_name(),
            applied.outcome
        ));
    };
    let (outcome, q) = match v {
        Verdict::Out(port, q) => (Outcome::Out(port), q),
        Verdict::Drop(q, r) => (Outcome::Drop(r), q),
        Verdict::Done => return Err(format!("{}: Done; input {input}", e.class_name())),
    };
    let name = e.class_name();
    if outcome != applied.outcome {
        return Err(format!(
            "{name}: push {outcome:?}, model {:?}; input {input}",
            applied.outcome
        ));
    }
    let r = &applied.packet;
    if q.data() != r.data() || q.data_offset() != r.data_offset() {
        return Err(format!(
            "{name}: bytes differ\n push  {:02x?} (head {})\n model {:02x?} (head {})\n input {input}",
            q.data(),
            q.data_offset(),
            r.data(),
            r.data_offset()
        ));
    }
    if q.meta != r.meta {
        return Err(format!(
            "{name}: annotations differ\n push  {:?}\n model {:?}\n input {input}",
            q.meta, r.meta
        ));
    }
    let after = e.stats();
    for s in applied
        .stats
        .iter()
        .chain(applied.bytes.iter().map(|(n, _)| n))
    {
        if !after.iter().any(|(n, _)| n == s) {
            return Err(format!(
                "{name}: the model counts `{s}`, not a stat of the element"
            ));
        }
    }
    for (n, v) in &after {
        let old = before.iter().find(|(b, _)| b == n).map_or(0, |(_, v)| *v);
        let want = applied.stats.iter().filter(|s| *s == n).count() as u64
            + applied
                .bytes
                .iter()
                .filter(|(s, _)| s == n)
                .map(|(_, b)| *b)
                .sum::<u64>();
        if v - old != want {
            return Err(format!(
                "{name}: stat `{n}` went up by {}, the model says {want}; input {input}",
                v - old
            ));
        }
    }
    Ok(true)
}

/// Builds `class(config)` with `noutputs` outputs, takes its model and compares on `p`.
fn check(class: &str, config: &str, noutputs: usize, p: &Packet) -> Result<bool, String> {
    let mut e = make(class, config, noutputs);
    let Some(m) = e.model() else {
        return Err(format!("{class}({config}) has no model"));
    };
    compare(e.as_mut(), &m, p.duplicate()).map_err(|err| format!("{class}({config}): {err}"))
}

/// Addresses that matter to the configurations below (routes, INTERFACES, multicast,
/// broadcast).
const POOL: [[u8; 4]; 16] = [
    [10, 0, 0, 1],
    [10, 0, 0, 255],
    [10, 0, 0, 254],
    [10, 1, 2, 3],
    [10, 1, 9, 9],
    [10, 9, 9, 9],
    [192, 168, 1, 1],
    [192, 168, 1, 7],
    [192, 168, 200, 1],
    [192, 168, 255, 255],
    [18, 26, 4, 7],
    [0, 0, 0, 0],
    [255, 255, 255, 255],
    [224, 0, 0, 5],
    [239, 1, 1, 1],
    [8, 8, 8, 8],
];

fn addr() -> impl Strategy<Value = [u8; 4]> {
    prop_oneof![3 => proptest::sample::select(&POOL[..]), 1 => any::<[u8; 4]>()]
}

/// The IPv4 part of a test packet.
#[derive(Debug, Clone)]
struct Ip {
    version: u8,
    ihl: u8,
    tos: u8,
    /// `None`: the true total length; else this value.
    len: Option<u16>,
    id: u16,
    flags: u8,
    frag: u16,
    ttl: u8,
    proto: u8,
    good_checksum: bool,
    src: [u8; 4],
    dst: [u8; 4],
    /// Option bytes (as many as IHL asks for are taken, zero-padded).
    opts: Vec<u8>,
    payload: Vec<u8>,
}

prop_compose! {
    fn arb_ip()(
        version in prop_oneof![9 => Just(4u8), 1 => 0u8..16],
        ihl in prop_oneof![6 => Just(5u8), 3 => 6u8..=15, 1 => 0u8..5],
        tos in any::<u8>(),
        len in prop_oneof![
            6 => Just(None),
            1 => any::<u16>().prop_map(Some),
            2 => (0u16..120).prop_map(Some),
        ],
        id in any::<u16>(),
        flags in prop_oneof![2 => Just(0u8), 2 => Just(2u8), 1 => Just(1u8), 1 => 0u8..8],
        frag in prop_oneof![3 => Just(0u16), 1 => 0u16..0x2000],
        ttl in prop_oneof![1 => 0u8..=3, 1 => any::<u8>()],
        proto in prop_oneof![Just(6u8), Just(17u8), Just(1u8), any::<u8>()],
        good_checksum in prop::bool::weighted(0.8),
        src in addr(),
        dst in addr(),
        opts in proptest::collection::vec(any::<u8>(), 40),
        payload in proptest::collection::vec(any::<u8>(), 0..100),
    ) -> Ip {
        Ip { version, ihl, tos, len, id, flags, frag, ttl, proto, good_checksum, src, dst, opts, payload }
    }
}

impl Ip {
    fn bytes(&self) -> Vec<u8> {
        let hl = usize::from(self.ihl.max(5)) * 4;
        let mut h = vec![0u8; 20];
        h[0] = (self.version << 4) | (self.ihl & 0x0f);
        h[1] = self.tos;
        let total = self.len.unwrap_or((hl + self.payload.len()) as u16);
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&self.id.to_be_bytes());
        let ff = (u16::from(self.flags & 7) << 13) | (self.frag & 0x1fff);
        h[6..8].copy_from_slice(&ff.to_be_bytes());
        h[8] = self.ttl;
        h[9] = self.proto;
        h[12..16].copy_from_slice(&self.src);
        h[16..20].copy_from_slice(&self.dst);
        h.extend(self.opts.iter().copied().take(hl - 20));
        let ck = wire::checksum::data(&h[..hl]);
        let ck = if self.good_checksum { ck } else { ck ^ 0x0101 };
        h[10..12].copy_from_slice(&ck.to_be_bytes());
        h.extend(&self.payload);
        h
    }
}

/// A test packet: an optional Ethernet header, an IPv4 packet, padding, a cut, and the
/// annotations it arrives with.
#[derive(Debug, Clone)]
struct Spec {
    /// Ethernet destination kind (0 random, 1 broadcast, 2 multicast, 3 unicast), random
    /// address bytes, EtherType; `None`: the data starts with the IPv4 header.
    eth: Option<(u8, [u8; 6], [u8; 6], u16)>,
    ip: Ip,
    padding: usize,
    /// Cut the data to this many bytes (tiny and truncated packets).
    cut: Option<usize>,
    /// Bytes in front of the data (pulled off: annotations may point there).
    pulled: usize,
    paint: u8,
    dst_ip: [u8; 4],
    packet_type: u8,
    /// Network header annotation: 0 none, 1 at the IPv4 header, 2 at the end of the data,
    /// 3 at `anno_at` (relative to the data start, may be outside it).
    net: u8,
    /// Transport header annotation: 0 none, 1 after the IPv4 header, 2 at `anno_at` + 3.
    trans: u8,
    /// MAC header annotation: 0 none, 1 at the data start, 2 at `anno_at`.
    mac: u8,
    anno_at: i64,
}

prop_compose! {
    fn arb_spec()(
        eth in prop_oneof![
            4 => (0u8..4, any::<[u8; 6]>(), any::<[u8; 6]>(), prop_oneof![
                6 => Just(ethertype::IPV4), 1 => Just(ethertype::ARP), 1 => Just(ethertype::VLAN), 1 => any::<u16>()
            ]).prop_map(Some),
            1 => Just(None),
        ],
        ip in arb_ip(),
        padding in prop_oneof![3 => Just(0usize), 1 => 0usize..12],
        cut in prop_oneof![4 => Just(None), 1 => (0usize..70).prop_map(Some)],
        pulled in prop_oneof![2 => Just(0usize), 1 => 0usize..20],
        paint in prop_oneof![1 => 0u8..5, 1 => Just(255u8), 1 => any::<u8>()],
        dst_ip in addr(),
        packet_type in 0u8..6,
        net in prop_oneof![1 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
        trans in 0u8..3,
        mac in 0u8..3,
        anno_at in -25i64..80,
    ) -> Spec {
        Spec { eth, ip, padding, cut, pulled, paint, dst_ip, packet_type, net, trans, mac, anno_at }
    }
}

const TYPES: [PacketType; 6] = [
    PacketType::Host,
    PacketType::Broadcast,
    PacketType::Multicast,
    PacketType::OtherHost,
    PacketType::Outgoing,
    PacketType::Loopback,
];

impl Spec {
    fn packet(&self) -> Packet {
        let mut data = Vec::new();
        if let Some((kind, dst, src, et)) = self.eth {
            let dst = match kind {
                1 => [0xff; 6],
                2 => [0x01, 0x00, 0x5e, dst[3] & 0x7f, dst[4], dst[5]],
                3 => [0x02, dst[1], dst[2], dst[3], dst[4], dst[5]],
                _ => dst,
            };
            data.extend(dst);
            data.extend(src);
            data.extend(et.to_be_bytes());
        }
        let ip_off = data.len();
        data.extend(self.ip.bytes());
        data.extend(std::iter::repeat_n(0u8, self.padding));
        if let Some(c) = self.cut {
            data.truncate(c);
        }
        let mut buf = vec![0xa5u8; self.pulled];
        buf.extend(&data);
        let mut p = Packet::from_bytes(&buf);
        p.pull(self.pulled);
        let head = i64::from(p.data_offset());
        let abs = |rel: i64| (head + rel).clamp(0, i64::from(u32::MAX - 1)) as u32;
        p.meta.paint = self.paint;
        p.meta.dst_ip = Ipv4Addr::from(self.dst_ip);
        p.meta.packet_type = TYPES[usize::from(self.packet_type) % 6];
        p.meta.ingress = 1;
        let ip_rel = ip_off as i64;
        p.meta.network_offset = match self.net {
            0 => NO_OFFSET,
            1 => abs(ip_rel),
            2 => abs(data.len() as i64),
            _ => abs(self.anno_at),
        };
        p.meta.transport_offset = match self.trans {
            0 => NO_OFFSET,
            1 => abs(ip_rel + i64::from(self.ip.ihl) * 4),
            _ => abs(self.anno_at + 3),
        };
        p.meta.mac_offset = match self.mac {
            0 => NO_OFFSET,
            1 => abs(0),
            _ => abs(self.anno_at),
        };
        p
    }
}

/// (class, configuration, connected outputs) of every configuration whose model is tested.
const BASIC: &[(&str, &str, usize)] = &[
    ("FromDevice", "eth0", 1),
    ("FromDevice", "eth0", 2),
    ("PollDevice", "eth0", 1),
    ("FromNetmapDevice", "netmap:eth0", 1),
    ("FromDPDKDevice", "0", 1),
    ("Discard", "", 0),
    ("Idle", "", 0),
    ("Null", "", 1),
    ("Queue", "", 1),
    ("Queue", "", 2),
    ("SimpleQueue", "20", 1),
    ("ThreadSafeQueue", "", 1),
    ("FullNoteQueue", "", 1),
    ("NotifierQueue", "", 1),
    ("Unqueue", "", 1),
    ("Unqueue2", "", 1),
    ("Paint", "7", 1),
    ("Paint", "0", 1),
    ("Paint", "COLOR 255", 1),
    ("PaintSwitch", "", 1),
    ("PaintSwitch", "", 3),
    ("PaintSwitch", "ANNO PAINT", 5),
    ("CheckPaint", "3", 1),
    ("Counter", "", 1),
    ("PaintTee", "3", 2),
    ("PaintTee", "0", 2),
    ("Print", "hello", 1),
    ("IPPrint", "hi", 1),
    ("FixIPSrc", "10.0.0.1", 1),
    ("CheckPaint", "255", 2),
    ("Strip", "14", 1),
    ("Strip", "0", 1),
    ("Strip", "100", 1),
    ("Unstrip", "14", 1),
    ("Unstrip", "10", 1),
    ("Unstrip", "200", 1),
    ("EtherEncap", "0x0800, 0:1:2:3:4:5, ff:ff:ff:ff:ff:ff", 1),
    (
        "EtherEncap",
        "ETHERTYPE 0x86dd, SRC 2:0:0:0:0:1, DST 1:0:5e:0:0:1",
        1,
    ),
    ("EtherRewrite", "0:1:2:3:4:5, 6:7:8:9:a:b", 1),
    ("Tee", "", 3),
    ("Tee", "2", 2),
    ("PullTee", "", 1),
    ("StoreEtherAddress", "0:0:0:0:0:9, src", 1),
    ("StoreEtherAddress", "0:0:0:0:0:9, dst", 2),
    ("StoreEtherAddress", "a:b:c:d:e:f, 30", 1),
    ("StoreEtherAddress", "a:b:c:d:e:f, 70", 2),
    ("StaticSwitch", "1", 2),
    ("StaticSwitch", "-1", 2),
    ("StaticSwitch", "3", 2),
    ("Switch", "", 2),
    ("Switch", "OUTPUT 2", 3),
    ("Switch", "-1", 2),
];

const CHECKS: &[(&str, &str, usize)] = &[
    ("CheckIPHeader", "", 1),
    ("CheckIPHeader", "14", 1),
    ("CheckIPHeader", "OFFSET 14", 2),
    ("CheckIPHeader", "OFFSET 14, CHECKSUM false", 1),
    (
        "CheckIPHeader",
        "INTERFACES 10.0.0.1/24 192.168.1.1/16, OFFSET 14",
        1,
    ),
    (
        "CheckIPHeader",
        "BADSRC 10.0.0.255 0.0.0.0, GOODDST 10.0.0.1, OFFSET 14",
        2,
    ),
    ("CheckIPHeader", "10.0.0.255 192.168.1.1, 14", 1),
    ("CheckIPHeader", "200", 1),
    ("CheckIPHeader2", "14", 2),
    ("CheckIPHeader2", "OFFSET 14, BADSRC 255.255.255.255", 1),
    ("MarkIPHeader", "", 1),
    ("MarkIPHeader", "14", 1),
    ("MarkIPHeader", "60", 1),
    ("GetIPAddress", "16", 1),
    ("GetIPAddress", "OFFSET 16, ANNO DST_IP", 1),
    ("SetIPAddress", "10.0.0.9", 1),
    ("PcapFilter", "\"tcp port 80 or udp\"", 2),
    (
        "PcapFilter",
        "\"vlan or ip[8] < 64 and not host 10.0.0.1\"",
        1,
    ),
    (
        "PcapFilter",
        "\"ip and tcp[((tcp[12] & 0xf0) >> 2):1] = 0 or ether multicast\"",
        2,
    ),
];

const IP: &[(&str, &str, usize)] = &[
    ("DecIPTTL", "", 1),
    ("DecIPTTL", "", 2),
    ("DecIPTTL", "MULTICAST false", 1),
    ("DecIPTTL", "MULTICAST false, ACTIVE true", 2),
    ("DecIPTTL", "ACTIVE false", 1),
    ("DropBroadcasts", "", 1),
    ("DropBroadcasts", "", 2),
    ("SetPacketType", "BROADCAST", 1),
    ("SetPacketType", "HOST", 1),
    ("SetPacketType", "loopback", 1),
    ("IPGWOptions", "10.0.0.1", 1),
    ("IPGWOptions", "10.0.0.1, 192.168.1.1", 2),
    ("IPFragmenter", "8", 1),
    ("IPFragmenter", "40", 1),
    ("IPFragmenter", "64", 2),
    ("IPFragmenter", "68, false", 1),
    ("IPFragmenter", "MTU 100, HONOR_DF true", 2),
    ("IPFragmenter", "1500", 1),
    ("IPFragmenter", "70000", 1),
    ("SetIPChecksum", "", 1),
];

const LOOKUPS: &[(&str, &str, usize)] = &[
    (
        "RadixIPLookup",
        "10.0.0.0/8 1, 10.1.0.0/16 10.0.0.254 2, 10.1.2.3/32 3, 0.0.0.0/0 192.168.1.1 0",
        4,
    ),
    ("StaticIPLookup", "10.0.0.0/8 - 0, 10.0.0.0/8 1", 2),
    (
        "StaticIPLookup",
        "10.0.0.0/8 10.0.0.254 1, 10.0.0.0/8 0, 10.0.0.1 0.0.0.0 2",
        3,
    ),
    (
        "LinearIPLookup",
        "192.168.0.0/16 0, 192.168.1.0/24 10.0.0.1 1, 192.168.1.7/32 2",
        3,
    ),
    ("DirectIPLookup", "224.0.0.0/4 0, 0.0.0.0/1 1", 2),
    ("DirectIPLookup", "", 1),
    (
        "LookupIPRoute",
        "18.26.4.0 255.255.255.0 0.0.0.0 0, 0.0.0.0 0.0.0.0 18.26.4.1 1",
        2,
    ),
    (
        "RadixIPLookup",
        "255.255.255.255/32 0, 10.0.0.0/24 1, 0.0.0.0/0 8.8.8.8 2",
        3,
    ),
];

/// The SpeedyBox network functions with a model.
const NFS: &[(&str, &str, usize)] = &[
    (
        "BlacklistFilter",
        "deny tcp && dst port 23, src net 10/8",
        1,
    ),
    (
        "BlacklistFilter",
        "deny udp, icmp, dst host 10.0.0.1 && tcp dst port 80",
        1,
    ),
];

/// `ARPQuerier` with pre-loaded next hops and input 1 unconnected, and `ARPResponder`.
const ARP: &[(&str, &str, usize)] = &[
    // STATIC alone has a model when nothing expires (TIMEOUT 0).
    (
        "ARPQuerier",
        "10.0.0.1, 00:00:00:00:00:0a, STATIC 10.0.0.2 00:00:00:00:00:0b, TIMEOUT 0",
        1,
    ),
    (
        "ARPQuerier",
        "10.0.0.1/24, 0:0:0:0:0:a, STATIC 10.0.0.254 0:0:0:0:0:b 192.168.1.1 0:0:0:0:0:c, \
         STATIC 10.1.2.3 2:0:0:0:0:d, TIMEOUT 0",
        2,
    ),
    (
        "ARPQuerier",
        "10.0.0.1, 00:00:00:00:00:0a, DEFAULT_ETH 00:00:00:00:00:0b",
        1,
    ),
    (
        "ARPQuerier",
        "10.0.0.1/24, 0:0:0:0:0:a, STATIC 10.0.0.254 0:0:0:0:0:b 8.8.8.8 0:0:0:0:0:c, \
         DEFAULT_ETH 2:0:0:0:0:1",
        2,
    ),
    // Static entries come before the zero, broadcast and multicast next hops.
    (
        "ARPQuerier",
        "10.0.0.1/24, 0:0:0:0:0:a, STATIC 0.0.0.0 0:0:0:0:0:b 10.0.0.255 0:0:0:0:0:c, \
         STATIC 224.0.0.5 1:0:5e:0:0:5 255.255.255.255 0:0:0:0:0:d, DEFAULT_ETH 2:0:0:0:0:1",
        1,
    ),
    (
        "ARPResponder",
        "10.0.0.1 00:00:00:00:00:0a, 192.168.0.0/16 00:00:00:00:00:0c",
        1,
    ),
    (
        "ARPResponder",
        "10.0.0.1 00:00:00:00:00:0a, 192.168.0.0/16 00:00:00:00:00:0c",
        2,
    ),
    (
        "ARPResponder",
        "0.0.0.0/0 2:0:0:0:0:1, 10.0.0.0/8 2:0:0:0:0:2",
        2,
    ),
];

/// `ARP` configurations that leave the ordinary packets (next hop 0.0.0.0) to run time: the
/// BROADCAST address is tried before the zero address.
const ARP_ORDER: &[(&str, &str, usize)] = &[(
    "ARPQuerier",
    "10.0.0.1, 0:0:0:0:0:a, BROADCAST 0.0.0.0, STATIC 10.0.0.2 0:0:0:0:0:b, TIMEOUT 0",
    1,
)];

/// An Ethernet/IPv4 ARP frame with these fields (42 bytes): sent from `sha` to the
/// broadcast address, target hardware address zero.
fn arp_frame(
    ethertype: u16,
    htype: u16,
    ptype: u16,
    op: u16,
    sha: [u8; 6],
    spa: [u8; 4],
    tpa: [u8; 4],
) -> Vec<u8> {
    wire::build::Arp::request(sha, spa, tpa)
        .operation(op)
        .ethertype(ethertype)
        .hardware_type(htype)
        .protocol_type(ptype)
        .build()
}

prop_compose! {
    /// An ARP frame: mostly a well-formed request, sometimes a reply, another type, a short
    /// or padded frame; with bytes pulled off in front and the usual annotations.
    fn arb_arp()(
        ethertype in prop_oneof![6 => Just(ethertype::ARP), 1 => Just(ethertype::IPV4), 1 => any::<u16>()],
        htype in prop_oneof![6 => Just(1u16), 1 => any::<u16>()],
        ptype in prop_oneof![6 => Just(ethertype::IPV4), 1 => any::<u16>()],
        op in prop_oneof![4 => Just(1u16), 1 => Just(2u16), 1 => any::<u16>()],
        sha in any::<[u8; 6]>(),
        spa in addr(),
        tpa in addr(),
        len in prop_oneof![4 => Just(42usize), 1 => 0usize..42, 1 => 43usize..70],
        pulled in prop_oneof![2 => Just(0usize), 1 => 1usize..20],
        dst_ip in addr(),
        paint in any::<u8>(),
    ) -> Packet {
        let mut f = vec![0xa5u8; pulled];
        f.extend(arp_frame(ethertype, htype, ptype, op, sha, spa, tpa));
        f.resize(pulled + len, 0);
        let mut p = Packet::from_bytes(&f);
        p.pull(pulled);
        p.meta.dst_ip = Ipv4Addr::from(dst_ip);
        p.meta.paint = paint;
        p.set_mac_header(0);
        p
    }
}

fn check_all(configs: &[(&str, &str, usize)], spec: &Spec) -> Result<(), TestCaseError> {
    let p = spec.packet();
    for &(class, config, n) in configs {
        check(class, config, n, &p).map_err(TestCaseError::fail)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn basic_models_agree_with_push(spec in arb_spec()) {
        check_all(BASIC, &spec)?;
    }

    #[test]
    fn check_and_annotation_models_agree_with_push(spec in arb_spec()) {
        check_all(CHECKS, &spec)?;
    }

    #[test]
    fn ip_models_agree_with_push(spec in arb_spec()) {
        check_all(IP, &spec)?;
    }

    #[test]
    fn lookup_models_agree_with_push(spec in arb_spec()) {
        check_all(LOOKUPS, &spec)?;
    }

    #[test]
    fn nf_models_agree_with_push(mut spec in arb_spec()) {
        // BlacklistFilter's rules are IPFilter patterns, whose model puts the transport header
        // at the IPv4 header plus IHL × 4 (see `ipfilter::space`), where CheckIPHeader,
        // MarkIPHeader and every element that sets an IP header put the annotation. Packets
        // with the annotation anywhere else (spec.trans 2), or with IHL < 5 and no annotation
        // (`View::of` then finds no transport header at all), do not reach a filter; the
        // IPFilter property tests (filter_models.rs) set the annotation there for the same
        // reason. (A transport annotation at the IP header itself made `push` read the IP
        // length as the port: found by this test before the condition excluded it.)
        if !(spec.trans == 0 && spec.ip.ihl >= 5) {
            spec.trans = 1;
        }
        check_all(NFS, &spec)?;
    }

    #[test]
    fn arp_models_agree_with_push(spec in arb_spec(), frame in arb_arp()) {
        check_all(ARP, &spec)?;
        check_all(ARP_ORDER, &spec)?;
        for &(class, config, n) in ARP.iter().chain(ARP_ORDER) {
            check(class, config, n, &frame).map_err(TestCaseError::fail)?;
        }
    }

    /// One `ARPQuerier` for a whole sequence of next hops over minutes of virtual time: the
    /// modelled packets agree whatever the element holds and queries for the others (the
    /// pushes the model stands for change nothing else).
    #[test]
    fn arp_querier_models_agree_over_time(
        hops in proptest::collection::vec((addr(), 0u64..100), 1..40),
    ) {
        for &(class, config, n) in ARP.iter().chain(ARP_ORDER).filter(|c| c.0 == "ARPQuerier") {
            let mut e = make(class, config, n);
            let m = e.model().ok_or_else(|| TestCaseError::fail(format!("{config}: no model")))?;
            let mut now = 0;
            for &(hop, secs) in &hops {
                now += secs * 1_000_000_000;
                compare_at(e.as_mut(), &m, next_hop(hop), Timestamp(now))
                    .map_err(|err| TestCaseError::fail(format!("{config}: {err}")))?;
            }
        }
    }

    /// Lookups on every address of the pool and random ones, nothing else varying.
    #[test]
    fn lookups_agree_on_any_destination(dst in addr(), bits in any::<u32>()) {
        for d in [Ipv4Addr::from(dst), Ipv4Addr::from(bits)] {
            let mut p = Packet::from_bytes(&[0u8; 40]);
            p.meta.dst_ip = d;
            for &(class, config, n) in LOOKUPS {
                prop_assert_eq!(check(class, config, n, &p), Ok(true));
            }
        }
    }
}

/// An Ethernet/IPv4/UDP frame to `dst` with TTL `ttl`, valid checksum, 6 bytes of padding,
/// with its network header annotation at 14.
fn frame(dst: [u8; 4], ttl: u8) -> Packet {
    let spec = Spec {
        eth: Some((3, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], ethertype::IPV4)),
        ip: Ip {
            version: 4,
            ihl: 5,
            tos: 0,
            len: None,
            id: 1,
            flags: 0,
            frag: 0,
            ttl,
            proto: IpProtocol::UDP,
            good_checksum: true,
            src: [10, 0, 0, 1],
            dst,
            opts: Vec::new(),
            payload: vec![0, 53, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4],
        },
        padding: 6,
        cut: None,
        pulled: 0,
        paint: 1,
        dst_ip: [0, 0, 0, 0],
        packet_type: 0,
        net: 1,
        trans: 1,
        mac: 1,
        anno_at: 0,
    };
    spec.packet()
}

/// The models decide the common packets themselves (the proptests would pass vacuously if a
/// model left everything to run time).
#[test]
fn models_decide_ordinary_packets() {
    let mut broadcast = frame([10, 0, 0, 2], 64);
    broadcast.meta.packet_type = PacketType::Broadcast;
    let packets = [
        frame([10, 1, 2, 3], 64),
        frame([192, 168, 1, 7], 1),
        frame([18, 26, 4, 7], 2),
        broadcast,
    ];
    for configs in [BASIC, CHECKS, IP, LOOKUPS, ARP] {
        for &(class, config, n) in configs {
            let decided = packets
                .iter()
                .map(|p| check(class, config, n, p))
                .collect::<Result<Vec<bool>, String>>();
            match decided {
                Ok(d) => assert!(
                    d.iter().any(|x| *x),
                    "{class}({config}) leaves every ordinary packet to run time"
                ),
                Err(e) => panic!("{e}"),
            }
        }
    }
}

/// An IPv4 packet as `ARPQuerier` gets it (the data and the network header annotation at the
/// IPv4 header), with next hop `hop`.
fn next_hop(hop: [u8; 4]) -> Packet {
    let mut p = frame([10, 1, 2, 3], 64);
    p.pull(14);
    p.meta.dst_ip = Ipv4Addr::from(hop);
    p
}

/// `ARPQuerier`'s models decide the pre-loaded next hops themselves: statics, `DEFAULT_ETH`
/// and the zero address; broadcast, multicast and unknown next hops are left to the element.
#[test]
fn arp_querier_models_decide_preloaded_hops() {
    let decided = |config: &str, hop: [u8; 4]| check("ARPQuerier", config, 1, &next_hop(hop));
    let statics = "10.0.0.1/24, 0:0:0:0:0:a, STATIC 10.0.0.2 0:0:0:0:0:b 10.0.0.3 0:0:0:0:0:c, \
                   TIMEOUT 0";
    let default = "10.0.0.1/24, 0:0:0:0:0:a, STATIC 10.0.0.2 0:0:0:0:0:b, \
                   DEFAULT_ETH 2:0:0:0:0:1";
    for (config, hop, want) in [
        (statics, [10, 0, 0, 2], true),
        (statics, [10, 0, 0, 3], true),
        (statics, [0, 0, 0, 0], true),
        (statics, [10, 0, 0, 4], false),
        (statics, [10, 0, 0, 255], false),
        (statics, [255, 255, 255, 255], false),
        (statics, [224, 0, 0, 5], false),
        (default, [10, 0, 0, 2], true),
        (default, [8, 8, 8, 8], true),
        (default, [0, 0, 0, 0], true),
        (default, [10, 0, 0, 255], false),
        (default, [239, 1, 1, 1], false),
    ] {
        assert_eq!(decided(config, hop), Ok(want), "{config}: {hop:?}");
    }
    // The encapsulation: type 0x0800 from ETH to the entry, the annotations at the headers.
    let m = make("ARPQuerier", default, 1).model().unwrap();
    let a = model::apply(&m, next_hop([10, 0, 0, 2]));
    assert_eq!(a.outcome, Outcome::Out(0));
    let d = a.packet.data();
    assert_eq!(&d[..14], &[0, 0, 0, 0, 0, 0xb, 0, 0, 0, 0, 0, 0xa, 8, 0]);
    assert_eq!(a.packet.network_offset_in_data(), Some(14));
}

/// Where `ARPQuerier` has no model: input 1 connected (a reply makes a known entry, which
/// comes before `DEFAULT_ETH`, and a model does not see the input port), no pre-loaded entry
/// (nothing to decide), and STATIC alone with a TIMEOUT (a push for a static next hop first
/// expires the packets held for an unanswered one, which a model skipping that push cannot).
#[test]
fn arp_querier_without_model() {
    let static_only = "10.0.0.1, 0:0:0:0:0:a, STATIC 10.0.0.2 0:0:0:0:0:b";
    let default = "10.0.0.1, 0:0:0:0:0:a, DEFAULT_ETH 2:0:0:0:0:1";
    for config in [
        "10.0.0.1, 0:0:0:0:0:a, STATIC 10.0.0.2 0:0:0:0:0:b, TIMEOUT 0",
        default,
        "10.0.0.1, 0:0:0:0:0:a, STATIC 10.0.0.2 0:0:0:0:0:b, DEFAULT_ETH 2:0:0:0:0:1",
    ] {
        assert!(make("ARPQuerier", config, 1).model().is_some(), "{config}");
        assert!(
            make_in("ARPQuerier", config, 2, 2).model().is_none(),
            "{config} with input 1"
        );
    }
    for config in [
        "10.0.0.1, 0:0:0:0:0:a",
        "10.0.0.1, 0:0:0:0:0:a, TIMEOUT 0",
        static_only,
        "10.0.0.1, 0:0:0:0:0:a, STATIC 10.0.0.2 0:0:0:0:0:b, TIMEOUT 30",
    ] {
        assert!(make("ARPQuerier", config, 1).model().is_none(), "{config}");
    }
    // Input 1: after a reply from 10.0.0.7, DEFAULT_ETH's model is wrong for that next hop.
    let m = make("ARPQuerier", default, 1).model().unwrap();
    let mut e = make_in("ARPQuerier", default, 2, 1);
    let hop = next_hop([10, 0, 0, 7]);
    assert_eq!(compare(e.as_mut(), &m, hop.duplicate()), Ok(true));
    let reply = arp_frame(
        ethertype::ARP,
        wire::arp::HARDWARE_ETHERNET,
        ethertype::IPV4,
        wire::arp::operation::REPLY,
        [2, 0, 0, 0, 0, 7],
        [10, 0, 0, 7],
        [10, 0, 0, 1],
    );
    let mut cx = Context::new(Timestamp(0));
    e.push(1, Packet::from_bytes(&reply), &mut cx);
    let err = compare(e.as_mut(), &m, hop).unwrap_err();
    assert!(err.contains("bytes differ"), "{err}");
    // STATIC alone: the TIMEOUT 0 model, run against the element with the default TIMEOUT.
    let sec = 1_000_000_000;
    let m = make("ARPQuerier", &format!("{static_only}, TIMEOUT 0"), 1)
        .model()
        .unwrap();
    let mut e = make("ARPQuerier", static_only, 1);
    let unknown = compare_at(e.as_mut(), &m, next_hop([10, 0, 0, 9]), Timestamp(0));
    assert_eq!(unknown, Ok(false));
    let known = next_hop([10, 0, 0, 2]);
    assert_eq!(
        compare_at(e.as_mut(), &m, known.duplicate(), Timestamp(sec)),
        Ok(true)
    );
    let err = compare_at(e.as_mut(), &m, known, Timestamp(301 * sec)).unwrap_err();
    assert!(err.contains("dropped 1"), "{err}");
}

/// `ARPResponder` leaves exactly the requests it answers to the element.
#[test]
fn arp_responder_model_leaves_answered_requests() {
    let config = "10.0.0.1 00:00:00:00:00:0a, 192.168.0.0/16 00:00:00:00:00:0c";
    let ask = |op: u16, tpa: [u8; 4], len: usize| {
        let mut f = arp_frame(
            ethertype::ARP,
            wire::arp::HARDWARE_ETHERNET,
            ethertype::IPV4,
            op,
            [2, 0, 0, 0, 0, 9],
            [10, 0, 0, 9],
            tpa,
        );
        f.resize(len, 0);
        Packet::from_bytes(&f)
    };
    for (p, want) in [
        (ask(1, [10, 0, 0, 1], 42), Ok(false)),
        (ask(1, [192, 168, 7, 7], 60), Ok(false)),
        (ask(1, [10, 0, 0, 2], 42), Ok(true)),
        (ask(2, [10, 0, 0, 1], 42), Ok(true)),
        (ask(1, [10, 0, 0, 1], 41), Ok(true)),
        (frame([10, 0, 0, 1], 64), Ok(true)),
    ] {
        for n in [1, 2] {
            assert_eq!(
                check("ARPResponder", config, n, &p),
                want,
                "{:02x?}",
                p.data()
            );
        }
    }
}

#[test]
fn opaque_configurations_have_no_model() {
    for (class, config, n) in [
        ("GetIPAddress", "30", 1),
        ("GetIPAddress", "IP dst", 1),
        ("Strip", "70000", 1),
        ("Unstrip", "65536", 1),
        ("CheckIPHeader", "OFFSET 70000", 1),
        ("MarkIPHeader", "70000", 1),
        ("StoreEtherAddress", "0:0:0:0:0:9, 65530", 1),
    ] {
        assert!(
            make(class, config, n).model().is_none(),
            "{class}({config})"
        );
    }
}

/// Runs `m` against `e` over the proptest-free sample `packets`; the first disagreement.
fn first_disagreement(
    class: &str,
    config: &str,
    n: usize,
    m: &Model,
    packets: &[Packet],
) -> Option<String> {
    packets.iter().find_map(|p| {
        let mut e = make(class, config, n);
        compare(e.as_mut(), m, p.duplicate()).err()
    })
}

/// Every way a model can be wrong is caught: outcome, drop reason, bytes, annotations and
/// counters.
#[test]
fn comparison_catches_wrong_models() {
    let good = frame([10, 1, 2, 3], 64);
    let mut bad_ck = frame([10, 1, 2, 3], 64);
    bad_ck.data_mut()[24] ^= 0xff;
    let ttl1 = frame([10, 1, 2, 3], 1);
    let sample = [good.duplicate(), bad_ck, ttl1.duplicate()];
    let right = make("CheckIPHeader", "14", 1).model().unwrap();
    assert_eq!(
        first_disagreement("CheckIPHeader", "14", 1, &right, &sample),
        None
    );
    let mutate = |f: &dyn Fn(&mut Model)| {
        let mut m = right.clone();
        f(&mut m);
        first_disagreement("CheckIPHeader", "14", 1, &m, &sample)
    };
    // A wrong drop reason.
    let wrong = mutate(&|m| {
        for c in &mut m.cases {
            if c.outcome == Outcome::Drop("bad-ip-checksum") {
                c.outcome = Outcome::Drop("bad-ip-length");
            }
        }
    });
    assert!(wrong.is_some_and(|w| w.contains("bad-ip-length")));
    // A missing counter.
    let wrong = mutate(&|m| {
        for c in &mut m.cases {
            c.stats.retain(|s| *s != "drops");
        }
    });
    assert!(wrong.is_some_and(|w| w.contains("stat `drops`")));
    // Padding not removed.
    let wrong = mutate(&|m| {
        if let Some(c) = m.cases.last_mut() {
            c.effects.retain(|e| *e != Effect::TrimToIpLen);
        }
    });
    assert!(wrong.is_some_and(|w| w.contains("bytes differ")));
    // The destination annotation not set.
    let wrong = mutate(&|m| {
        if let Some(c) = m.cases.last_mut() {
            c.effects.retain(|e| *e != Effect::DstAnnoFromIpDst);
        }
    });
    assert!(wrong.is_some_and(|w| w.contains("annotations differ")));
    // The wrong anchor.
    let wrong = mutate(&|m| m.ip_at = IpAnchor::Data(0));
    assert!(wrong.is_some());
    // A TTL model that forgets the checksum update.
    let ttl = make("DecIPTTL", "", 2).model().unwrap();
    let mut m = ttl.clone();
    if let Some(c) = m.cases.last_mut() {
        c.effects = vec![Effect::Write(Field::IpTtl, Op::Add(-1))];
    }
    let sample = [good, ttl1];
    assert_eq!(first_disagreement("DecIPTTL", "", 2, &ttl, &sample), None);
    assert!(first_disagreement("DecIPTTL", "", 2, &m, &sample)
        .is_some_and(|w| w.contains("bytes differ")));
    // A wrong port.
    let mut m = ttl;
    for c in &mut m.cases {
        if c.outcome == Outcome::Out(1) {
            c.outcome = Outcome::Out(0);
        }
    }
    assert!(first_disagreement("DecIPTTL", "", 2, &m, &sample).is_some());
}

/// `apply`'s own semantics on a few hand-made models.
#[test]
fn apply_interprets_effects() {
    let p = frame([10, 1, 2, 3], 0);
    let run = |cases: Vec<Case>, ip_at: IpAnchor, p: &Packet| {
        model::apply(&Model { ip_at, cases }, p.duplicate())
    };
    let any = || Case::new(Filter::any(), Outcome::Out(0));
    // Add wraps modulo the width; sub-byte fields keep their neighbours.
    let a = run(
        vec![any()
            .effect(Effect::Write(Field::IpTtl, Op::Add(-1)))
            .effect(Effect::Write(Field::IpFlags, Op::Set(2)))
            .effect(Effect::Write(Field::IpIhl, Op::Add(1)))
            .effect(Effect::Write(Field::DstPort, Op::Set(80)))
            .effect(Effect::Write(
                Field::Raw { offset: 2, len: 2 },
                Op::Set(0xabcd),
            ))
            .effect(Effect::Write(Field::Paint, Op::Add(255)))
            .effect(Effect::Write(Field::PacketType, Op::Set(3)))
            .effect(Effect::Write(Field::DstIpAnno, Op::Set(0x0a00_0001)))
            .stat("x")],
        IpAnchor::Annotation,
        &p,
    );
    let d = a.packet.data();
    assert_eq!(a.outcome, Outcome::Out(0));
    assert_eq!(a.stats, vec!["x"]);
    assert_eq!(d[14 + 8], 255);
    assert_eq!(&d[14 + 6..14 + 8], &[0x40, 0]);
    assert_eq!(d[14], 0x46);
    // The transport header moved with the new IHL: 24 bytes after the IPv4 header.
    assert_eq!(&d[14 + 24 + 2..14 + 24 + 4], &[0, 80]);
    assert_eq!(&d[2..4], &[0xab, 0xcd]);
    assert_eq!(a.packet.meta.paint, 0);
    assert_eq!(a.packet.meta.packet_type, PacketType::OtherHost);
    assert_eq!(a.packet.meta.dst_ip, Ipv4Addr::new(10, 0, 0, 1));
    // The TCP data offset is the high nibble of transport byte 12.
    let mut q = frame([10, 1, 2, 3], 9);
    q.data_mut()[14 + 20 + 12] = 0x35;
    let a = run(
        vec![any().effect(Effect::Write(Field::TcpDataOff, Op::Set(6)))],
        IpAnchor::Data(14),
        &q,
    );
    assert_eq!(a.packet.data()[14 + 20 + 12], 0x65);
    // Writes past the end do nothing; the packet never grows.
    let short = Packet::from_bytes(&[1, 2, 3]);
    let a = run(
        vec![any().effect(Effect::Write(Field::EthSrc, Op::Set(7)))],
        IpAnchor::Data(0),
        &short,
    );
    assert_eq!(a.packet.data(), &[1, 2, 3]);
    // Run-time operations and run-time cases leave the packet to the element.
    let a = run(
        vec![any()
            .effect(Effect::Write(Field::IpTtl, Op::Set(9)))
            .effect(Effect::Write(Field::SrcPort, Op::Stateful { id: 1 }))
            .stat("x")],
        IpAnchor::Annotation,
        &p,
    );
    assert_eq!((a.outcome, a.stats.len()), (Outcome::Runtime, 0));
    assert_eq!(a.packet.data(), p.data());
    // No matching case: run time.
    let only_tcp = Case::new(
        Filter::any().with(Field::IpProto, FieldSet::single(6)),
        Outcome::Drop("x"),
    );
    let a = run(vec![only_tcp], IpAnchor::Annotation, &p);
    assert_eq!(a.outcome, Outcome::Runtime);
    // SetIpChecksum repairs the checksum a plain write broke.
    let a = run(
        vec![any()
            .effect(Effect::Write(Field::IpTtl, Op::Set(33)))
            .effect(Effect::SetIpChecksum)],
        IpAnchor::Data(14),
        &p,
    );
    assert_eq!(wire::checksum::data(&a.packet.data()[14..34]), 0);
}

/// Classes whose models are property-tested in another file of this directory, with that
/// file's text (the check below finds the class named there).
const TESTED_ELSEWHERE: &[(&str, &str)] = &[
    ("Classifier", include_str!("filter_models.rs")),
    ("IPClassifier", include_str!("filter_models.rs")),
    ("IPFilter", include_str!("filter_models.rs")),
];

/// Every registered class whose example configuration has a model has property-test cases:
/// a configuration in one of this file's lists, or cases in the file [`TESTED_ELSEWHERE`]
/// names. Adding a modelled element without cases fails here.
#[test]
fn every_modelled_class_has_property_cases() {
    let lists: [&[(&str, &str, usize)]; 7] = [BASIC, CHECKS, IP, LOOKUPS, NFS, ARP, ARP_ORDER];
    let mut missing = Vec::new();
    for c in elements::registry::CLASSES {
        let e = c
            .example()
            .unwrap_or_else(|err| panic!("{}({}): {err}", c.name, c.doc.example));
        if e.model().is_none() {
            continue;
        }
        let here = lists.iter().any(|l| l.iter().any(|(n, ..)| *n == c.name));
        let elsewhere = TESTED_ELSEWHERE
            .iter()
            .any(|(n, text)| *n == c.name && text.contains(&format!("\"{n}\"")));
        if !here && !elsewhere {
            missing.push(c.name);
        }
    }
    assert!(
        missing.is_empty(),
        "modelled classes without property-test cases in tests/models.rs: {missing:?}"
    );
}
