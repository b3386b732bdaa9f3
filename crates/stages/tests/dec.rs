//! Dec (XDP) through BPF_PROG_TEST_RUN, one test per branch: input frame built with `wire` →
//! verdict, output frame (compared byte for byte with the inner frame built on its own),
//! proxy table and last_dec contents, counters. Without BPF_PROG_TEST_RUN's context the
//! ingress interface is the loopback (ifindex 1), so the configuration entries use 1.

mod common;

use common::{XDP_DROP, XDP_PASS};
use stages::maps::{Counter, CounterStage, FlowKey, NshMeta, StageCfg, CFG_ANY_DST, CFG_TO_HOST};
use stages::{Instance, Stage};
use wire::build::{Frame, Gpe, Nsh};
use wire::nsh::Tlv;

const LO: u32 = 1;
const OUR_MAC: [u8; 6] = [0x02, 0xcb, 0, 0, 0, 0x11];
const OTHER_MAC: [u8; 6] = [0x02, 0xcb, 0, 0, 0, 0x99];
const PEER_MAC: [u8; 6] = [0x02, 0xcb, 0, 0, 0, 0x22];

fn inner_tcp() -> (Vec<u8>, FlowKey) {
    let f = Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 40000, 443)
        .payload(b"inner payload")
        .build();
    let k = FlowKey {
        saddr: [10, 0, 0, 1].into(),
        daddr: [10, 0, 0, 2].into(),
        sport: 40000,
        dport: 443,
        proto: 6,
    };
    (f, k)
}

fn configure(i: &Instance, flags: u16) {
    let c = StageCfg {
        mac: OUR_MAC,
        flags,
        ifindex: LO,
    };
    i.insert_cfg(LO, &c).unwrap();
}

fn counters(i: &Instance) -> Vec<(Counter, u64)> {
    common::nonzero(i, CounterStage::Dec)
}

/// Runs Dec on `frame` twice, as a flow's first packet and as a later one (its proxy entry
/// then already there: dec.bpf.c `dec_fast` for the common frame), and checks a
/// decapsulation each time: verdict, output = `inner`, the proxy entry under `key` and this
/// CPU's last_dec equal `meta`, counters packets + done.
fn expect_decap(i: &mut Instance, frame: &[u8], inner: &[u8], key: FlowKey, meta: NshMeta) {
    common::pin_cpu();
    for n in 1..=2 {
        let o = i.test_run(Stage::Dec, frame, 0).unwrap();
        assert_eq!(o.ret, XDP_PASS, "packet {n}");
        assert_eq!(
            o.frame, inner,
            "packet {n}: output frame is the inner frame"
        );
        assert_eq!(i.list_proxy().unwrap(), vec![(key, meta)], "packet {n}");
        assert!(
            i.last_dec().unwrap().contains(&meta),
            "packet {n}: last_dec holds the NSH"
        );
        assert_eq!(
            counters(i),
            vec![(Counter::Packets, n), (Counter::Done, n)],
            "packet {n}"
        );
    }
}

/// Runs Dec on `frame` and checks it was left alone (passed) or dropped with `drop`; then
/// again with the 5-tuple and NSH such a frame would have put in the proxy table already
/// there (a flow's later packet, `dec_fast`'s case when the frame is the common one): the
/// same outcome.
fn expect_untouched(i: &mut Instance, frame: &[u8], drop: Option<Counter>) {
    expect_untouched_once(i, frame, drop, 1);
    let (_, key) = inner_tcp();
    let entry = NshMeta::md1(1, 2, 63, [0; 4]);
    i.insert_proxy(&key, &entry).unwrap();
    expect_untouched_once(i, frame, drop, 2);
    assert_eq!(i.list_proxy().unwrap(), vec![(key, entry)]);
    i.delete_proxy(&key).unwrap();
}

fn expect_untouched_once(i: &mut Instance, frame: &[u8], drop: Option<Counter>, n: u64) {
    let o = i.test_run(Stage::Dec, frame, 0).unwrap();
    match drop {
        None => {
            assert_eq!(o.ret, XDP_PASS);
            assert_eq!(o.frame, frame, "passed untouched");
            assert_eq!(
                counters(i),
                vec![(Counter::Packets, n), (Counter::Passed, n)]
            );
        }
        Some(c) => {
            assert_eq!(o.ret, XDP_DROP);
            assert_eq!(counters(i), vec![(Counter::Packets, n), (c, n)]);
        }
    }
    if n == 1 {
        assert_eq!(i.list_proxy().unwrap(), vec![], "no proxy entry");
    }
    assert!(i.last_dec().unwrap().iter().all(|m| m.md_type == 0));
}

#[test]
fn md1_over_ethernet_for_our_mac() {
    let Some(mut i) = common::instance("dec-md1-eth") else {
        return;
    };
    configure(&i, 0);
    let (inner, key) = inner_tcp();
    let frame = Nsh::md1(0x1234, 255, [1, 2, 3, 0xdeadbeef])
        .ttl(17)
        .ethernet(OUR_MAC, PEER_MAC, &inner);
    let meta = NshMeta::md1(0x1234, 255, 17, [1, 2, 3, 0xdeadbeef]);
    expect_decap(&mut i, &frame, &inner, key, meta);
}

#[test]
fn md2_with_tlvs_over_vxlan_gpe() {
    let Some(mut i) = common::instance("dec-md2-gpe") else {
        return;
    };
    configure(&i, 0);
    let (inner, key) = inner_tcp();
    let tlvs = [
        Tlv {
            class: 0x0101,
            tlv_type: 7,
            value: &[9, 9, 9],
        },
        Tlv {
            class: 0xfff6,
            tlv_type: 0x22,
            value: &[1, 2, 3, 4, 5, 6, 7, 8],
        },
    ];
    let mut gpe = Gpe::new([192, 168, 1, 1], [192, 168, 1, 2], 77);
    gpe.dst_mac = OUR_MAC;
    let frame = Nsh::md2(0xabcdef, 9, &tlvs).ttl(40).vxlan_gpe(&gpe, &inner);
    // The TLVs as RFC 8300 §2.5.1 lays them out: class, type, length, value padded to 4.
    let ctx = [
        0x01, 0x01, 7, 3, 9, 9, 9, 0, 0xff, 0xf6, 0x22, 8, 1, 2, 3, 4, 5, 6, 7, 8,
    ];
    let meta = NshMeta::md2(0xabcdef, 9, 40, &ctx).unwrap();
    expect_decap(&mut i, &frame, &inner, key, meta);
}

#[test]
fn md2_over_tagged_ethernet_to_a_tagged_inner_frame() {
    let Some(mut i) = common::instance("dec-md2-vlan") else {
        return;
    };
    configure(&i, 0);
    let (plain, key) = inner_tcp();
    // The inner frame with one 802.1Q tag (VLAN 12) between the MACs and the IPv4 header.
    let inner = wire::build::ethernet(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        &[(0x8100, 12)],
        0x0800,
        &plain[14..],
    );
    let tlv = [Tlv {
        class: 0x0102,
        tlv_type: 1,
        value: &[0xaa, 0xbb, 0xcc, 0xdd],
    }];
    let nsh = Nsh::md2(5, 200, &tlv).header(&inner);
    let frame = wire::build::ethernet(OUR_MAC, PEER_MAC, &[(0x8100, 3)], 0x894f, &nsh);
    let ctx = [0x01, 0x02, 1, 4, 0xaa, 0xbb, 0xcc, 0xdd];
    let meta = NshMeta::md2(5, 200, 63, &ctx).unwrap();
    expect_decap(&mut i, &frame, &inner, key, meta);
}

#[test]
fn md2_without_context() {
    let Some(mut i) = common::instance("dec-md2-empty") else {
        return;
    };
    let (inner, key) = inner_tcp();
    let frame = Nsh::md2(6, 1, &[]).ethernet(OUR_MAC, PEER_MAC, &inner);
    expect_decap(
        &mut i,
        &frame,
        &inner,
        key,
        NshMeta::md2(6, 1, 63, &[]).unwrap(),
    );
}

#[test]
fn without_configuration_any_destination_is_taken() {
    let Some(mut i) = common::instance("dec-nocfg") else {
        return;
    };
    let (inner, key) = inner_tcp();
    let frame = Nsh::md1(1, 2, [0; 4]).ethernet(OTHER_MAC, PEER_MAC, &inner);
    expect_decap(&mut i, &frame, &inner, key, NshMeta::md1(1, 2, 63, [0; 4]));
}

#[test]
fn any_dst_flag_takes_other_destinations() {
    let Some(mut i) = common::instance("dec-anydst") else {
        return;
    };
    configure(&i, CFG_ANY_DST);
    let (inner, key) = inner_tcp();
    let frame = Nsh::md1(1, 2, [0; 4]).ethernet(OTHER_MAC, PEER_MAC, &inner);
    expect_decap(&mut i, &frame, &inner, key, NshMeta::md1(1, 2, 63, [0; 4]));
}

#[test]
fn broadcast_is_taken() {
    let Some(mut i) = common::instance("dec-bcast") else {
        return;
    };
    configure(&i, 0);
    let (inner, key) = inner_tcp();
    let frame = Nsh::md1(1, 2, [0; 4]).ethernet([0xff; 6], PEER_MAC, &inner);
    expect_decap(&mut i, &frame, &inner, key, NshMeta::md1(1, 2, 63, [0; 4]));
}

#[test]
fn to_host_writes_our_mac_into_the_inner_frame() {
    let Some(mut i) = common::instance("dec-tohost") else {
        return;
    };
    configure(&i, CFG_TO_HOST);
    let (inner, key) = inner_tcp();
    let frame = Nsh::md1(3, 4, [0; 4]).ethernet(OUR_MAC, PEER_MAC, &inner);
    let mut want = inner.clone();
    want[..6].copy_from_slice(&OUR_MAC);
    expect_decap(&mut i, &frame, &want, key, NshMeta::md1(3, 4, 63, [0; 4]));
}

#[test]
fn other_destination_mac_passes() {
    let Some(mut i) = common::instance("dec-othermac") else {
        return;
    };
    configure(&i, 0);
    let (inner, _) = inner_tcp();
    let frame = Nsh::md1(1, 2, [0; 4]).ethernet(OTHER_MAC, PEER_MAC, &inner);
    expect_untouched(&mut i, &frame, None);
}

#[test]
fn frames_without_nsh_pass() {
    let Some(mut i) = common::instance("dec-plain") else {
        return;
    };
    configure(&i, 0);
    let (inner, _) = inner_tcp();
    let mut plain = inner.clone();
    plain[..6].copy_from_slice(&OUR_MAC);
    expect_untouched(&mut i, &plain, None);
}

#[test]
fn vxlan_gpe_not_carrying_nsh_passes() {
    let Some(mut i) = common::instance("dec-gpe-eth") else {
        return;
    };
    configure(&i, 0);
    let (inner, _) = inner_tcp();
    // VXLAN-GPE with next protocol Ethernet (3), not NSH.
    let mut payload = vec![0x0c, 0, 0, 3, 0, 0, 77, 0];
    payload.extend_from_slice(&inner);
    let frame = Frame::udp([192, 168, 1, 1], [192, 168, 1, 2], 4790, 4790)
        .macs(PEER_MAC, OUR_MAC)
        .payload(&payload)
        .build();
    expect_untouched(&mut i, &frame, None);
    // Plain UDP to another port.
    let frame = Frame::udp([192, 168, 1, 1], [192, 168, 1, 2], 4790, 4789)
        .macs(PEER_MAC, OUR_MAC)
        .payload(&payload)
        .build();
    let o = i.test_run(Stage::Dec, &frame, 0).unwrap();
    assert_eq!((o.ret, o.frame), (XDP_PASS, frame));
}

#[test]
fn truncated_nsh_is_dropped() {
    let Some(mut i) = common::instance("dec-trunc") else {
        return;
    };
    configure(&i, 0);
    let (inner, _) = inner_tcp();
    let whole = Nsh::md1(1, 2, [0; 4]).ethernet(OUR_MAC, PEER_MAC, &inner);
    // Cut inside the base header, then inside the context.
    for cut in [14 + 5, 14 + 8 + 10] {
        expect_untouched(&mut i, &whole[..cut], Some(Counter::DropTruncated));
        i.clear_counters().unwrap();
    }
    // VXLAN-GPE cut inside the GPE header, then inside the NSH.
    let gpe = Gpe {
        dst_mac: OUR_MAC,
        ..Gpe::new([1, 1, 1, 1], [2, 2, 2, 2], 5)
    };
    let whole = Nsh::md1(1, 2, [0; 4]).vxlan_gpe(&gpe, &inner);
    for cut in [14 + 20 + 8 + 4, 14 + 20 + 8 + 8 + 20] {
        expect_untouched(&mut i, &whole[..cut], Some(Counter::DropTruncated));
        i.clear_counters().unwrap();
    }
}

#[test]
fn bad_version_length_or_md_type_is_dropped() {
    let Some(mut i) = common::instance("dec-bad") else {
        return;
    };
    configure(&i, 0);
    let (inner, _) = inner_tcp();
    let good = Nsh::md1(1, 2, [0; 4]).ethernet(OUR_MAC, PEER_MAC, &inner);
    let mut version = good.clone();
    version[14] |= 0x40; // version 1
    let mut md1_len = good.clone();
    md1_len[15] = (md1_len[15] & 0xc0) | 7; // MD type 1 with length 7
    let mut md_type = good.clone();
    md_type[16] = 3; // MD type 3
                     // MD type 2 with 36 context bytes: more than NSH_MAX_CTX.
    let big = [Tlv {
        class: 1,
        tlv_type: 1,
        value: &[0; 32],
    }];
    let md2_long = Nsh::md2(1, 2, &big).ethernet(OUR_MAC, PEER_MAC, &inner);
    for f in [version, md1_len, md_type, md2_long] {
        expect_untouched(&mut i, &f, Some(Counter::DropBadNsh));
        i.clear_counters().unwrap();
    }
}

#[test]
fn inner_frame_not_ipv4_is_dropped() {
    let Some(mut i) = common::instance("dec-inner") else {
        return;
    };
    configure(&i, 0);
    let arp = wire::build::Arp::request(PEER_MAC, [10, 0, 0, 1], [10, 0, 0, 2]).build();
    let f = Nsh::md1(1, 2, [0; 4]).ethernet(OUR_MAC, PEER_MAC, &arp);
    expect_untouched(&mut i, &f, Some(Counter::DropInner));
    i.clear_counters().unwrap();
    // An inner IPv4 packet without Ethernet (NSH next protocol IPv4).
    let (inner, _) = inner_tcp();
    let f = Nsh::md1(1, 2, [0; 4])
        .next_protocol(wire::nsh::next_protocol::IPV4)
        .ethernet(OUR_MAC, PEER_MAC, &inner[14..]);
    expect_untouched(&mut i, &f, Some(Counter::DropInner));
    i.clear_counters().unwrap();
    // An inner frame cut inside its IPv4 header.
    let f = Nsh::md1(1, 2, [0; 4]).ethernet(OUR_MAC, PEER_MAC, &inner[..14 + 12]);
    expect_untouched(&mut i, &f, Some(Counter::DropInner));
}

/// A later packet of a flow (its entry already in the proxy table: `dec_fast`) is what this
/// CPU's last_dec remembers, after another flow's packet came in between, for NAT-aware Enc.
#[test]
fn a_later_packet_of_a_flow_is_the_last_decapsulation() {
    let Some(mut i) = common::instance("dec-last") else {
        return;
    };
    configure(&i, 0);
    common::pin_cpu();
    let (inner, _) = inner_tcp();
    let other = Frame::tcp([10, 0, 0, 3], [10, 0, 0, 2], 40001, 443)
        .payload(b"inner payload")
        .build();
    let a = NshMeta::md1(5, 9, 63, [5; 4]);
    let b = NshMeta::md1(6, 9, 63, [6; 4]);
    let frame_a = Nsh::md1(5, 9, [5; 4]).ethernet(OUR_MAC, PEER_MAC, &inner);
    let frame_b = Nsh::md1(6, 9, [6; 4]).ethernet(OUR_MAC, PEER_MAC, &other);
    for (f, m) in [(&frame_a, a), (&frame_b, b), (&frame_a, a)] {
        let o = i.test_run(Stage::Dec, f, 0).unwrap();
        assert_eq!(o.ret, XDP_PASS);
        assert!(i.last_dec().unwrap().contains(&m));
    }
    assert_eq!(
        counters(&i),
        vec![(Counter::Packets, 3), (Counter::Done, 3)]
    );
}

#[test]
fn a_flow_whose_nsh_changes_gets_the_new_entry() {
    let Some(mut i) = common::instance("dec-change") else {
        return;
    };
    configure(&i, 0);
    let (inner, key) = inner_tcp();
    for (spi, si) in [(1, 9), (1, 9), (2, 8)] {
        let frame = Nsh::md1(spi, si, [spi; 4]).ethernet(OUR_MAC, PEER_MAC, &inner);
        let o = i.test_run(Stage::Dec, &frame, 0).unwrap();
        assert_eq!((o.ret, &o.frame), (XDP_PASS, &inner));
        assert_eq!(
            i.list_proxy().unwrap(),
            vec![(key, NshMeta::md1(spi, si, 63, [spi; 4]))]
        );
    }
    assert_eq!(
        counters(&i),
        vec![(Counter::Packets, 3), (Counter::Done, 3)]
    );
}

/// The configuration's two parts (cbox.h, `cfg_slots`): the loopback's entry behind another
/// interface's in its slot (ifindex 1 + 256) lives in the hash and Dec still applies it; an
/// interface whose slot holds another and that the hash lacks has no configuration (every
/// destination taken); replaced and deleted entries take effect; listing shows each once.
#[test]
fn configuration_sharing_a_slot() {
    let Some(mut i) = common::instance("dec-cfgslot") else {
        return;
    };
    let other = LO + 256;
    assert_eq!(stages::maps::cfg_slot(other), stages::maps::cfg_slot(LO));
    let cfg = |mac: [u8; 6], ifindex: u32| StageCfg {
        mac,
        flags: 0,
        ifindex,
    };
    let (inner, _) = inner_tcp();
    let to = |mac: [u8; 6]| Nsh::md1(1, 2, [0; 4]).ethernet(mac, PEER_MAC, &inner);
    // Decapsulated (XDP_PASS and the inner frame) or passed untouched.
    let taken = |i: &mut Instance, mac: [u8; 6]| {
        let o = i.test_run(Stage::Dec, &to(mac), 0).unwrap();
        assert_eq!(o.ret, XDP_PASS);
        o.frame == inner
    };
    // The slot holds the other interface; the loopback has no entry: every frame taken.
    i.insert_cfg(other, &cfg(OTHER_MAC, other)).unwrap();
    assert!(taken(&mut i, OTHER_MAC) && taken(&mut i, OUR_MAC));
    // The loopback's entry goes to the hash: only its MAC is taken.
    i.insert_cfg(LO, &cfg(OUR_MAC, LO)).unwrap();
    assert!(taken(&mut i, OUR_MAC));
    assert!(!taken(&mut i, OTHER_MAC));
    assert_eq!(
        i.list_cfg().unwrap(),
        vec![(LO, cfg(OUR_MAC, LO)), (other, cfg(OTHER_MAC, other))]
    );
    // The slot freed: the loopback's entry stays in force, then moves into the slot when
    // rewritten, and is replaced there (two versions and the flip).
    i.delete_cfg(other).unwrap();
    assert!(!taken(&mut i, OTHER_MAC));
    for mac in [OTHER_MAC, OUR_MAC] {
        i.insert_cfg(LO, &cfg(mac, LO)).unwrap();
        assert!(taken(&mut i, mac));
        let not = if mac == OUR_MAC { OTHER_MAC } else { OUR_MAC };
        assert!(!taken(&mut i, not));
    }
    assert_eq!(i.list_cfg().unwrap(), vec![(LO, cfg(OUR_MAC, LO))]);
    i.delete_cfg(LO).unwrap();
    assert!(i.list_cfg().unwrap().is_empty());
    assert!(taken(&mut i, OTHER_MAC));
    assert_eq!(
        counters(&i),
        vec![
            (Counter::Packets, 10),
            (Counter::Passed, 4),
            (Counter::Done, 6)
        ]
    );
}

/// Inner frames at the edges of Dec's fixed-offset path (MD type 1 over Ethernet, inner IPv4
/// without options): IPv4 options (the general path), a later fragment (ports 0), the first
/// fragment (ports read), ICMP (no ports): the same 5-tuple and NSH either way.
#[test]
fn md1_inner_frames_at_the_fast_path_edges() {
    let Some(mut i) = common::instance("dec-md1-edges") else {
        return;
    };
    configure(&i, 0);
    let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let key = |proto: u8, sport: u16, dport: u16| FlowKey {
        saddr: a.into(),
        daddr: b.into(),
        sport,
        dport,
        proto,
    };
    let cases = [
        (
            Frame::tcp(a, b, 40000, 443)
                .ip_options(&[1, 1, 1, 0])
                .payload(b"with options")
                .build(),
            key(6, 40000, 443),
        ),
        (
            Frame::udp(a, b, 53, 5353)
                .fragment(false, false, 8)
                .payload(b"later fragment")
                .build(),
            key(17, 0, 0),
        ),
        (
            Frame::udp(a, b, 53, 5353)
                .fragment(false, true, 0)
                .payload(b"first fragment")
                .build(),
            key(17, 53, 5353),
        ),
        (Frame::icmp(a, b, 8, 0).build(), key(1, 0, 0)),
    ];
    for (inner, k) in cases {
        let frame = Nsh::md1(0x77, 200, [9, 8, 7, 6])
            .ttl(33)
            .ethernet(OUR_MAC, PEER_MAC, &inner);
        let meta = NshMeta::md1(0x77, 200, 33, [9, 8, 7, 6]);
        expect_decap(&mut i, &frame, &inner, k, meta);
        i.delete_proxy(&k).unwrap();
        i.clear_counters().unwrap();
    }
}
