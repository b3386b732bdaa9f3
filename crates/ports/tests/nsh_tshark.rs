//! Interoperability: Wireshark's dissectors read FuseBox's NSH as FuseBox wrote it.
//!
//! Frames built by `wire::build::Nsh` (the builder the eBPF stages' fixtures and
//! `fusebox run --nsh` use) — MD type 1 and MD type 2 with several TLVs, over Ethernet
//! transport and over VXLAN-GPE — are written to a pcap with `ports::pcap::PcapWriter` and
//! read back with `tshark -T fields`; every NSH field (version, O bit, TTL, length, MD type,
//! next protocol, SPI, SI, context headers, each TLV's class, type, length and value), the
//! VXLAN-GPE header (flags, next protocol, VNI) and the inner frame's IPv4 and UDP fields must
//! be what the builder was asked for. Frames the eBPF stages wrote (Enc, Fwd, Enc+Fwd through
//! `BPF_PROG_TEST_RUN`; first checked byte for byte against the builder's) go through the same
//! checks. Needs `tshark` (Debian package `tshark`): without it the test skips with a message,
//! except under `CI=true`, where it fails; the stages' frames also need root (skipped without,
//! failing under `CI=true`).

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use stages::maps::{FlowKey, FwdAction, FwdVal, NshMeta};
use stages::{Instance, Stage};

use packet::{Precision, Timestamp};
use ports::pcap::{PcapWriter, DLT_EN10MB};
use wire::build::{Frame, Gpe, Nsh};
use wire::nsh::Tlv;

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn tshark_present() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The fields tshark reads, one row per frame, one cell per field; a field that occurs
/// several times in a frame (outer and inner IPv4, TLVs) has its values in order.
const FIELDS: &[&str] = &[
    "nsh.version",
    "nsh.Obit",
    "nsh.ttl",
    "nsh.length",
    "nsh.mdtype",
    "nsh.nextproto",
    "nsh.spi",
    "nsh.si",
    "nsh.contextheader",
    "nsh.metadataclass",
    "nsh.metadatatype",
    "nsh.metadatalen",
    "nsh.metadata",
    "vxlan.flags",
    "vxlan.i_bit",
    "vxlan.p_bit",
    "vxlan.ver",
    "vxlan.next_proto",
    "vxlan.vni",
    "eth.src",
    "eth.dst",
    "eth.type",
    "ip.src",
    "ip.dst",
    "ip.ttl",
    "ip.proto",
    "ip.len",
    "udp.srcport",
    "udp.dstport",
    "udp.length",
    "udp.payload",
];

fn tshark_fields(file: &Path) -> Vec<Vec<Vec<String>>> {
    let mut cmd = Command::new("tshark");
    // Decode UDP 4790 as VXLAN-GPE whatever the local preferences say.
    cmd.args(["-n", "-r"]).arg(file).args([
        "-d",
        "udp.port==4790,vxlan_gpe",
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=|",
        "-E",
        "separator=/t",
    ]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let cells: Vec<Vec<String>> = line
                .split('\t')
                .map(|c| {
                    if c.is_empty() {
                        Vec::new()
                    } else {
                        c.split('|').map(str::to_owned).collect()
                    }
                })
                .collect();
            assert_eq!(cells.len(), FIELDS.len(), "tshark row: {line}");
            cells
        })
        .collect()
}

/// A number tshark printed in decimal or `0x` hex.
fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// Bytes tshark printed as hex, with or without `:` separators.
fn bytes(s: &str) -> Vec<u8> {
    let h: String = s.chars().filter(|c| *c != ':').collect();
    assert!(h.len().is_multiple_of(2), "odd hex: {s:?}");
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// One case: what was asked of the builder, and the frame it made.
struct Case {
    name: &'static str,
    nsh: Nsh,
    tlvs: Vec<(u16, u8, Vec<u8>)>,
    outer_macs: ([u8; 6], [u8; 6]),
    gpe: Option<Gpe>,
    inner: Inner,
    /// The stage that writes the frame into the pcap (`None`: the builder).
    by: Option<Stage>,
}

/// The inner frame's fields.
struct Inner {
    macs: ([u8; 6], [u8; 6]),
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    ttl: u8,
    payload: Vec<u8>,
}

impl Inner {
    fn frame(&self) -> Vec<u8> {
        Frame::udp(self.src, self.dst, self.sport, self.dport)
            .macs(self.macs.0, self.macs.1)
            .ttl(self.ttl)
            .payload(&self.payload)
            .build()
    }
}

impl Case {
    /// The frame as the builder writes it.
    fn frame(&self) -> Vec<u8> {
        let inner = self.inner.frame();
        match &self.gpe {
            Some(g) => self.nsh.vxlan_gpe(g, &inner),
            None => self
                .nsh
                .ethernet(self.outer_macs.1, self.outer_macs.0, &inner),
        }
    }
}

/// The frame as `stage` writes it through `BPF_PROG_TEST_RUN`, on maps set up for the case:
/// Enc gets the NSH one SI earlier in its proxy table (TTL as is), Enc+Fwd also one TTL more
/// and the next hop in its forwarding table, Fwd the case's NSH one TTL more over the other
/// transport. Checked equal to the builder's frame.
fn stage_frame(c: &Case, stage: Stage, n: usize) -> Vec<u8> {
    let name = format!("tshark-{}-{n}", std::process::id());
    let mut i = Instance::create(&name).expect("stage instance");
    let r = c.nsh.repr();
    let meta = |si: u8, ttl: u8| match r.metadata {
        wire::nsh::Metadata::Type1(ctx) => NshMeta::md1(r.spi, si, ttl, ctx),
        wire::nsh::Metadata::Type2(md) => NshMeta::md2(r.spi, si, ttl, md).expect("MD2 fits"),
    };
    let inner = c.inner.frame();
    let flow = FlowKey {
        saddr: c.inner.src,
        daddr: c.inner.dst,
        sport: c.inner.sport,
        dport: c.inner.dport,
        proto: 17,
    };
    let (smac, dmac) = c.outer_macs;
    let hop = match &c.gpe {
        None => FwdVal {
            action: FwdAction::Ethernet,
            flags: 0,
            dmac,
            smac,
            udp_sport: 0,
            ifindex: 0,
            saddr: Ipv4Addr::UNSPECIFIED,
            daddr: Ipv4Addr::UNSPECIFIED,
            vni: 0,
        },
        Some(g) => FwdVal {
            action: FwdAction::VxlanGpe,
            flags: 0,
            dmac: g.dst_mac,
            smac: g.src_mac,
            udp_sport: g.sport,
            ifindex: 0,
            saddr: g.src_ip,
            daddr: g.dst_ip,
            vni: g.vni,
        },
    };
    let sph = r.spi << 8 | u32::from(r.si);
    let (input, ret) = match stage {
        Stage::Enc => {
            i.insert_proxy(&flow, &meta(r.si + 1, r.ttl)).unwrap();
            (inner, u32::MAX)
        }
        Stage::EncFwd => {
            i.insert_proxy(&flow, &meta(r.si + 1, r.ttl + 1)).unwrap();
            i.insert_fwd(sph, &hop).unwrap();
            (inner, 0)
        }
        _ => {
            i.insert_fwd(sph, &hop).unwrap();
            let before = c.nsh.clone().ttl(r.ttl + 1);
            let input = match &c.gpe {
                Some(_) => before.ethernet(dmac, [0x0e, 0, 0, 0, 0, 1], &inner),
                None => before.vxlan_gpe(&Gpe::new([1, 1, 1, 1], [1, 1, 1, 2], 5), &inner),
            };
            (input, 0)
        }
    };
    let out = i.test_run(stage, &input, 0).expect("test run");
    assert_eq!(out.ret, ret, "{}: verdict", c.name);
    assert_eq!(
        hex(&out.frame),
        hex(&c.frame()),
        "{}: the stage wrote what the builder writes",
        c.name
    );
    out.frame
}

fn cases() -> Vec<Case> {
    let inner = |n: u8| Inner {
        macs: ([2, 0, 0, 0, 1, n], [2, 0, 0, 0, 2, n]),
        src: Ipv4Addr::new(10, 0, n, 1),
        dst: Ipv4Addr::new(10, 9, n, 2),
        sport: 1000 + u16::from(n),
        dport: 53,
        ttl: 30 + n,
        payload: (0..20 + n).collect(),
    };
    let tlvs_a: Vec<(u16, u8, Vec<u8>)> = vec![
        (0x0101, 0x01, vec![0xde, 0xad, 0xbe, 0xef]),
        (0xfff6, 0x22, vec![1, 2, 3, 4, 5]),
        (0x0000, 0x7f, vec![0xa5; 12]),
    ];
    let tlvs_b: Vec<(u16, u8, Vec<u8>)> =
        vec![(0x0102, 0x05, vec![9, 8]), (0x1234, 0x80, vec![0x11; 7])];
    let md2 = |spi, si, tlvs: &[(u16, u8, Vec<u8>)]| {
        let t: Vec<Tlv<'_>> = tlvs
            .iter()
            .map(|(class, tlv_type, value)| Tlv {
                class: *class,
                tlv_type: *tlv_type,
                value,
            })
            .collect();
        Nsh::md2(spi, si, &t)
    };
    let mut gpe = Gpe::new([192, 168, 10, 1], [192, 168, 10, 2], 0xab_cdef);
    gpe.sport = 49_152;
    gpe.src_mac = [0x0a, 0, 0, 0, 0, 1];
    gpe.dst_mac = [0x0a, 0, 0, 0, 0, 2];
    let mut gpe2 = Gpe::new([172, 16, 0, 9], [172, 16, 0, 10], 1);
    gpe2.ttl = 3;
    // The stages' tunnels: outer TTL 64 and DF, the UDP source port from the hop.
    let mut gpe3 = Gpe::new([192, 168, 20, 1], [192, 168, 20, 2], 0x00_0777);
    gpe3.sport = 50_001;
    gpe3.dont_frag = true;
    gpe3.src_mac = [0x0a, 0, 0, 0, 1, 1];
    gpe3.dst_mac = [0x0a, 0, 0, 0, 1, 2];
    let mut gpe4 = Gpe::new([192, 168, 30, 1], [192, 168, 30, 2], 0x12_3456);
    gpe4.sport = 61_000;
    gpe4.dont_frag = true;
    vec![
        Case {
            name: "MD1 over Ethernet",
            nsh: Nsh::md1(0x12_3456, 255, [1, 2, 3, 0xdead_beef]),
            tlvs: Vec::new(),
            outer_macs: ([0x06, 0, 0, 0, 0, 1], [0x06, 0, 0, 0, 0, 2]),
            gpe: None,
            inner: inner(1),
            by: None,
        },
        Case {
            name: "MD1 over Ethernet, OAM, TTL 1, SI 1",
            nsh: Nsh::md1(1, 1, [0xffff_ffff, 0, 0x8000_0001, 7])
                .ttl(1)
                .oam(true),
            tlvs: Vec::new(),
            outer_macs: ([0x06, 0, 0, 0, 0, 3], [0xff; 6]),
            gpe: None,
            inner: inner(2),
            by: None,
        },
        Case {
            name: "MD2 (three TLVs) over Ethernet",
            nsh: md2(0xff_fffe, 200, &tlvs_a).ttl(17),
            tlvs: tlvs_a.clone(),
            outer_macs: ([0x06, 0, 0, 0, 0, 4], [0x06, 0, 0, 0, 0, 5]),
            gpe: None,
            inner: inner(3),
            by: None,
        },
        Case {
            name: "MD2 without TLVs over Ethernet",
            nsh: md2(77, 9, &[]),
            tlvs: Vec::new(),
            outer_macs: ([0x06, 0, 0, 0, 0, 6], [0x06, 0, 0, 0, 0, 7]),
            gpe: None,
            inner: inner(4),
            by: None,
        },
        Case {
            name: "MD1 over VXLAN-GPE",
            nsh: Nsh::md1(0x00_0042, 254, [0x0102_0304, 0x0506_0708, 0, 0xcafe_f00d]),
            tlvs: Vec::new(),
            outer_macs: (gpe.src_mac, gpe.dst_mac),
            gpe: Some(gpe),
            inner: inner(5),
            by: None,
        },
        Case {
            name: "MD2 (two TLVs) over VXLAN-GPE",
            nsh: md2(0x80_0000, 3, &tlvs_b).ttl(62).oam(true),
            tlvs: tlvs_b.clone(),
            outer_macs: (gpe2.src_mac, gpe2.dst_mac),
            gpe: Some(gpe2),
            inner: inner(6),
            by: None,
        },
        Case {
            name: "MD1 over Ethernet, written by Enc",
            nsh: Nsh::md1(0x00_0a0b, 41, [5, 6, 7, 0x8000_0000]).ttl(20),
            tlvs: Vec::new(),
            outer_macs: ([0; 6], [0; 6]),
            gpe: None,
            inner: inner(7),
            by: Some(Stage::Enc),
        },
        Case {
            name: "MD2 (two TLVs) over Ethernet, written by Enc+Fwd",
            nsh: md2(0x00_0c0d, 100, &tlvs_b).ttl(9),
            tlvs: tlvs_b.clone(),
            outer_macs: ([0x0a, 0, 0, 0, 2, 1], [0x0a, 0, 0, 0, 2, 2]),
            gpe: None,
            inner: inner(8),
            by: Some(Stage::EncFwd),
        },
        Case {
            name: "MD1 over VXLAN-GPE, written by Fwd",
            nsh: Nsh::md1(0x00_0012, 7, [0xffff_0000, 1, 2, 3]).ttl(33),
            tlvs: Vec::new(),
            outer_macs: (gpe3.src_mac, gpe3.dst_mac),
            gpe: Some(gpe3),
            inner: inner(9),
            by: Some(Stage::Fwd),
        },
        Case {
            name: "MD2 (two TLVs) over VXLAN-GPE, written by Enc+Fwd",
            nsh: md2(0xab_cdef, 2, &tlvs_b).ttl(62),
            tlvs: tlvs_b.clone(),
            outer_macs: (gpe4.src_mac, gpe4.dst_mac),
            gpe: Some(gpe4),
            inner: inner(10),
            by: Some(Stage::EncFwd),
        },
    ]
}

#[test]
fn tshark_decodes_fusebox_nsh_field_by_field() {
    if !tshark_present() {
        assert!(!ci(), "tshark is not installed (CI=true: not skipping)");
        println!("SKIP: tshark is not installed (Debian package tshark)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nsh.pcap");
    let mut cases = cases();
    if !stages::require_bpf("tshark_decodes_fusebox_nsh_field_by_field (the stages' frames)") {
        cases.retain(|c| c.by.is_none());
    }
    let mut w = PcapWriter::create(&path, Precision::Micro, DLT_EN10MB).unwrap();
    for (i, c) in cases.iter().enumerate() {
        let frame = match c.by {
            None => c.frame(),
            Some(stage) => stage_frame(c, stage, i),
        };
        w.write(Timestamp::from_parts(1_700_000_000 + i as u64, 0), &frame)
            .unwrap();
    }
    w.finish().unwrap();

    let rows = tshark_fields(&path);
    assert_eq!(rows.len(), cases.len());
    for (c, row) in cases.iter().zip(&rows) {
        let get = |field: &str| -> &Vec<String> {
            let i = FIELDS.iter().position(|f| *f == field).unwrap();
            &row[i]
        };
        let one = |field: &str| -> u64 {
            let v = get(field);
            assert_eq!(v.len(), 1, "{}: {field} = {v:?}", c.name);
            num(&v[0])
        };
        let nums = |field: &str| -> Vec<u64> { get(field).iter().map(|s| num(s)).collect() };
        let r = c.nsh.repr();
        let what = c.name;
        // The base header and the service path header.
        assert_eq!(one("nsh.version"), 0, "{what}");
        assert_eq!(one("nsh.Obit"), u64::from(r.o_bit), "{what}");
        assert_eq!(one("nsh.ttl"), u64::from(r.ttl), "{what}");
        assert_eq!(one("nsh.length") as usize * 4, r.header_len(), "{what}");
        let md_type = match r.metadata {
            wire::nsh::Metadata::Type1(_) => 1,
            wire::nsh::Metadata::Type2(_) => 2,
        };
        assert_eq!(one("nsh.mdtype"), md_type, "{what}");
        assert_eq!(one("nsh.nextproto"), 3, "{what}: next protocol Ethernet");
        assert_eq!(one("nsh.spi"), u64::from(r.spi), "{what}");
        assert_eq!(one("nsh.si"), u64::from(r.si), "{what}");
        // Context: MD type 1's four fixed words, or MD type 2's TLVs in order.
        match r.metadata {
            wire::nsh::Metadata::Type1(ctx) => {
                let words: Vec<u8> = get("nsh.contextheader")
                    .iter()
                    .flat_map(|s| bytes(s))
                    .collect();
                let want: Vec<u8> = ctx.iter().flat_map(|w| w.to_be_bytes()).collect();
                assert_eq!(hex(&words), hex(&want), "{what}: context headers");
                assert!(get("nsh.metadataclass").is_empty(), "{what}");
            }
            wire::nsh::Metadata::Type2(_) => {
                assert!(get("nsh.contextheader").is_empty(), "{what}");
                let classes: Vec<u64> = c.tlvs.iter().map(|t| u64::from(t.0)).collect();
                let types: Vec<u64> = c.tlvs.iter().map(|t| u64::from(t.1)).collect();
                let lens: Vec<u64> = c.tlvs.iter().map(|t| t.2.len() as u64).collect();
                assert_eq!(nums("nsh.metadataclass"), classes, "{what}: TLV classes");
                assert_eq!(nums("nsh.metadatatype"), types, "{what}: TLV types");
                assert_eq!(nums("nsh.metadatalen"), lens, "{what}: TLV lengths");
                let values: Vec<String> =
                    get("nsh.metadata").iter().map(|s| hex(&bytes(s))).collect();
                let want: Vec<String> = c.tlvs.iter().map(|t| hex(&t.2)).collect();
                assert_eq!(values, want, "{what}: TLV values");
            }
        }
        // The transport.
        let inner = &c.inner;
        let (outer_src, outer_dst) = c.outer_macs;
        assert_eq!(
            get("eth.src"),
            &[mac(outer_src), mac(inner.macs.0)],
            "{what}: outer then inner Ethernet source"
        );
        assert_eq!(
            get("eth.dst"),
            &[mac(outer_dst), mac(inner.macs.1)],
            "{what}"
        );
        let mut ip_src = Vec::new();
        let mut ip_dst = Vec::new();
        let mut ip_ttl = Vec::new();
        let mut ip_proto = vec![];
        let mut ip_len = vec![];
        let mut ports = vec![];
        let inner_ip_len = 20 + 8 + inner.payload.len() as u64;
        match &c.gpe {
            None => {
                assert_eq!(nums("eth.type"), [0x894f, 0x0800], "{what}");
                assert!(get("vxlan.vni").is_empty(), "{what}");
            }
            Some(g) => {
                assert_eq!(nums("eth.type"), [0x0800, 0x0800], "{what}");
                assert_eq!(
                    one("vxlan.flags"),
                    0x0c,
                    "{what}: I and P flags (the GPE flags byte)"
                );
                assert_eq!(one("vxlan.i_bit"), 1, "{what}");
                assert_eq!(one("vxlan.p_bit"), 1, "{what}");
                assert_eq!(one("vxlan.ver"), 0, "{what}");
                assert_eq!(one("vxlan.next_proto"), 4, "{what}: next protocol NSH");
                assert_eq!(one("vxlan.vni"), u64::from(g.vni), "{what}");
                ip_src.push(g.src_ip.to_string());
                ip_dst.push(g.dst_ip.to_string());
                ip_ttl.push(u64::from(g.ttl));
                ip_proto.push(17);
                let outer_len = 20 + 8 + 8 + r.header_len() as u64 + 14 + inner_ip_len;
                ip_len.push(outer_len);
                ports.push((u64::from(g.sport), 4790, outer_len - 20));
            }
        }
        ip_src.push(inner.src.to_string());
        ip_dst.push(inner.dst.to_string());
        ip_ttl.push(u64::from(inner.ttl));
        ip_proto.push(17);
        ip_len.push(inner_ip_len);
        ports.push((
            u64::from(inner.sport),
            u64::from(inner.dport),
            8 + inner.payload.len() as u64,
        ));
        assert_eq!(get("ip.src"), &ip_src, "{what}");
        assert_eq!(get("ip.dst"), &ip_dst, "{what}");
        assert_eq!(nums("ip.ttl"), ip_ttl, "{what}");
        assert_eq!(nums("ip.proto"), ip_proto, "{what}");
        assert_eq!(nums("ip.len"), ip_len, "{what}");
        let got: Vec<(u64, u64, u64)> = nums("udp.srcport")
            .into_iter()
            .zip(nums("udp.dstport"))
            .zip(nums("udp.length"))
            .map(|((s, d), l)| (s, d, l))
            .collect();
        assert_eq!(got, ports, "{what}: UDP ports and lengths");
        let payload = get("udp.payload")
            .last()
            .map(|s| bytes(s))
            .unwrap_or_default();
        assert_eq!(hex(&payload), hex(&inner.payload), "{what}: inner payload");
    }
}
