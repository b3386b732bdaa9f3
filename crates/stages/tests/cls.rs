//! Cls (TC ingress) through BPF_PROG_TEST_RUN, one test per branch: input frame built with
//! `wire` → verdict, output frame compared byte for byte with the NSH frame `wire` builds on
//! its own (outer Ethernet with zero MACs and EtherType NSH, then the NSH, then the frame),
//! counters. A test run's skb sits on the loopback (ifindex 1): the "exact interface"
//! entries use 1.

mod common;

use common::{TC_ACT_OK, TC_ACT_SHOT, TC_ACT_UNSPEC};
use std::net::Ipv4Addr;

use stages::maps::{
    cls_slot, ClsHop, ClsKey, Counter, CounterStage, FlowKey, FwdAction, FwdVal, NshMeta,
};
use stages::{Instance, Stage};
use wire::build::{Frame, Nsh};

const LO: u32 = 1;

fn flow(proto: u8, sport: u16, dport: u16) -> FlowKey {
    common::cls_flow(proto, sport, dport)
}

fn tcp() -> (Vec<u8>, FlowKey) {
    let f = Frame::tcp([172, 16, 0, 1], [172, 16, 9, 9], 5555, 80)
        .payload(b"GET /")
        .build();
    (f, flow(6, 5555, 80))
}

fn counters(i: &Instance) -> Vec<(Counter, u64)> {
    common::nonzero(i, CounterStage::Cls)
}

fn expect_push(i: &mut Instance, frame: &[u8], want: &[u8]) {
    let o = i.test_run(Stage::Cls, frame, 0).unwrap();
    assert_eq!(o.ret, TC_ACT_UNSPEC, "TC_ACT_UNSPEC: Fwd runs next");
    assert_eq!(o.frame, want, "outer Ethernet + NSH + the frame");
    assert_eq!(counters(i), vec![(Counter::Packets, 1), (Counter::Done, 1)]);
}

fn expect_pass(i: &mut Instance, frame: &[u8]) {
    let o = i.test_run(Stage::Cls, frame, 0).unwrap();
    assert_eq!(o.ret, TC_ACT_OK);
    assert_eq!(o.frame, frame, "passed untouched");
    assert_eq!(
        counters(i),
        vec![(Counter::Packets, 1), (Counter::Passed, 1)]
    );
}

#[test]
fn hit_on_the_exact_interface_md1() {
    let Some(mut i) = common::instance("cls-exact") else {
        return;
    };
    let (frame, key) = tcp();
    let entry = NshMeta::md1(0x10, 255, 30, [0x11, 0x22, 0x33, 0x44]);
    i.insert_cls(
        &ClsKey {
            ifindex: LO,
            flow: key,
        },
        &entry,
    )
    .unwrap();
    // A wildcard entry for the same flow on another path: the exact one wins.
    let other = NshMeta::md1(0x20, 255, 30, [0; 4]);
    i.insert_cls(
        &ClsKey {
            ifindex: 0,
            flow: key,
        },
        &other,
    )
    .unwrap();
    let want = Nsh::md1(0x10, 255, [0x11, 0x22, 0x33, 0x44])
        .ttl(30)
        .ethernet([0; 6], [0; 6], &frame);
    expect_push(&mut i, &frame, &want);
}

#[test]
fn hit_on_the_wildcard_md2_with_default_ttl() {
    let Some(mut i) = common::instance("cls-wild") else {
        return;
    };
    let (frame, key) = tcp();
    let (tlvs, ctx) = common::md2_context();
    // TTL 0 in the entry: the stage writes 63.
    let entry = NshMeta::md2(0x345678, 7, 0, &ctx).unwrap();
    i.insert_cls(
        &ClsKey {
            ifindex: 0,
            flow: key,
        },
        &entry,
    )
    .unwrap();
    // An entry for another interface does not apply here.
    let other = NshMeta::md1(0x99, 1, 1, [0; 4]);
    i.insert_cls(
        &ClsKey {
            ifindex: 7,
            flow: key,
        },
        &other,
    )
    .unwrap();
    let want = Nsh::md2(0x345678, 7, &tlvs).ethernet([0; 6], [0; 6], &frame);
    expect_push(&mut i, &frame, &want);
}

#[test]
fn udp_icmp_and_tagged_frames_are_classified() {
    let Some(mut i) = common::instance("cls-protos") else {
        return;
    };
    let udp = Frame::udp([172, 16, 0, 1], [172, 16, 9, 9], 53, 5353).build();
    let icmp = Frame::icmp([172, 16, 0, 1], [172, 16, 9, 9], 8, 0).build();
    let (tcp, tcp_key) = tcp();
    let tagged = wire::build::ethernet(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        &[(0x8100, 44)],
        0x0800,
        &tcp[14..],
    );
    let cases = [
        (udp, flow(17, 53, 5353), 1u32),
        (icmp, flow(1, 0, 0), 2),
        (tagged, tcp_key, 3),
    ];
    for (_, key, spi) in &cases {
        i.insert_cls(
            &ClsKey {
                ifindex: 0,
                flow: *key,
            },
            &NshMeta::md1(*spi, 9, 5, [*spi; 4]),
        )
        .unwrap();
    }
    for (frame, _, spi) in &cases {
        let want = Nsh::md1(*spi, 9, [*spi; 4])
            .ttl(5)
            .ethernet([0; 6], [0; 6], frame);
        expect_push(&mut i, frame, &want);
        i.clear_counters().unwrap();
    }
}

#[test]
fn a_miss_passes_untouched() {
    let Some(mut i) = common::instance("cls-miss") else {
        return;
    };
    let (frame, key) = tcp();
    // Only other flows and another interface.
    let mut other = key;
    other.dport = 81;
    i.insert_cls(
        &ClsKey {
            ifindex: 0,
            flow: other,
        },
        &NshMeta::md1(1, 1, 1, [0; 4]),
    )
    .unwrap();
    i.insert_cls(
        &ClsKey {
            ifindex: 7,
            flow: key,
        },
        &NshMeta::md1(1, 1, 1, [0; 4]),
    )
    .unwrap();
    expect_pass(&mut i, &frame);
}

#[test]
fn frames_that_are_not_ipv4_pass() {
    let Some(mut i) = common::instance("cls-notip") else {
        return;
    };
    let arp = wire::build::Arp::request([2, 0, 0, 0, 0, 5], [10, 0, 0, 1], [10, 0, 0, 2]).build();
    expect_pass(&mut i, &arp);
    // Not a version-4 header behind EtherType IPv4; an IHL below 5; an IHL (60 bytes) past
    // the end of the frame. (The kernel refuses test runs of IPv4 frames shorter than an
    // IPv4 header, so the cut is made by the IHL.)
    let (tcp, key) = tcp();
    i.insert_cls(
        &ClsKey {
            ifindex: 0,
            flow: key,
        },
        &NshMeta::md1(1, 1, 1, [0; 4]),
    )
    .unwrap();
    for first in [0x65, 0x44, 0x4f] {
        let mut f = tcp.clone();
        f[14] = first;
        i.clear_counters().unwrap();
        expect_pass(&mut i, &f);
    }
}

#[test]
fn a_bad_entry_is_dropped() {
    let Some(mut i) = common::instance("cls-bad") else {
        return;
    };
    let (frame, key) = tcp();
    let mut entry = NshMeta::md1(1, 1, 1, [0; 4]);
    entry.md_type = 3;
    i.insert_cls(
        &ClsKey {
            ifindex: 0,
            flow: key,
        },
        &entry,
    )
    .unwrap();
    let o = i.test_run(Stage::Cls, &frame, 0).unwrap();
    assert_eq!(o.ret, TC_ACT_SHOT);
    assert_eq!(
        counters(&i),
        vec![(Counter::Packets, 1), (Counter::DropBadNsh, 1)]
    );
}

#[test]
fn entries_list_and_delete() {
    let Some(i) = common::instance("cls-list") else {
        return;
    };
    let (_, key) = tcp();
    let a = ClsKey {
        ifindex: 0,
        flow: key,
    };
    let b = ClsKey {
        ifindex: 3,
        flow: key,
    };
    let m = NshMeta::md1(4, 4, 4, [4; 4]);
    i.insert_cls(&b, &m).unwrap();
    i.insert_cls(&a, &m).unwrap();
    assert_eq!(i.list_cls().unwrap(), vec![(a, m), (b, m)]);
    i.delete_cls(&a).unwrap();
    i.delete_cls(&a).unwrap(); // absent: no error
    assert_eq!(i.list_cls().unwrap(), vec![(b, m)]);
}

/// Cls+Fwd, what the agents attach at a chain's entry: a classified frame leaves with the
/// forwarding entry's transport for (SPI, 255) and the TTL one less, in one program; a miss
/// passes untouched without reaching Fwd; a classified frame with no forwarding entry is
/// dropped as Fwd drops it (unknown SPI).
#[test]
fn cls_fwd_classifies_and_forwards_at_once() {
    let Some(mut i) = common::instance("cls-fwd") else {
        return;
    };
    let (frame, key) = tcp();
    let ctx = [1, 2, 3, 4];
    i.insert_cls(
        &ClsKey {
            ifindex: 0,
            flow: key,
        },
        &NshMeta::md1(0x10, 255, 30, ctx),
    )
    .unwrap();
    let (next, ours) = ([2, 0, 0, 0, 0, 0x22], [2, 0, 0, 0, 0, 0x11]);
    let hop = FwdVal {
        action: FwdAction::Ethernet,
        flags: 0,
        dmac: next,
        smac: ours,
        udp_sport: 0,
        ifindex: 0,
        saddr: Ipv4Addr::UNSPECIFIED,
        daddr: Ipv4Addr::UNSPECIFIED,
        vni: 0,
    };
    i.insert_fwd(0x10 << 8 | 255, &hop).unwrap();
    let o = i.test_run(Stage::ClsFwd, &frame, 0).unwrap();
    assert_eq!(o.ret, TC_ACT_OK, "stays on the interface (entry ifindex 0)");
    assert_eq!(
        o.frame,
        Nsh::md1(0x10, 255, ctx)
            .ttl(29)
            .ethernet(next, ours, &frame)
    );
    assert_eq!(
        common::nonzero(&i, CounterStage::Cls),
        vec![(Counter::Packets, 1), (Counter::Done, 1)]
    );
    assert_eq!(
        common::nonzero(&i, CounterStage::Fwd),
        vec![(Counter::Packets, 1), (Counter::Done, 1)]
    );

    // A miss: untouched, Fwd never sees it.
    i.clear_counters().unwrap();
    let other = Frame::udp([172, 16, 0, 1], [172, 16, 9, 9], 1, 2).build();
    let o = i.test_run(Stage::ClsFwd, &other, 0).unwrap();
    assert_eq!((o.ret, o.frame.as_slice()), (TC_ACT_OK, other.as_slice()));
    assert_eq!(common::nonzero(&i, CounterStage::Fwd), vec![]);

    // No forwarding entry: dropped by Fwd's rule.
    i.clear_counters().unwrap();
    i.delete_fwd(0x10 << 8 | 255).unwrap();
    let o = i.test_run(Stage::ClsFwd, &frame, 0).unwrap();
    assert_eq!(o.ret, TC_ACT_SHOT);
    assert_eq!(
        common::nonzero(&i, CounterStage::Fwd),
        vec![(Counter::Packets, 1), (Counter::DropUnknownSpi, 1)]
    );
}

/// Cls+Fwd gives what Cls then Fwd give (verdict, frame, counters of both stages) on every
/// branch, those of its steady-state path (cls_fwd.bpf.c `cls_fwd_fast`: MD type 1 entries on
/// the exact or any interface towards a redirecting Ethernet next hop) and those it leaves to
/// the general code: a next hop staying on the interface, over VXLAN-GPE or at the end of the
/// path, MD type 2, TTL 1 and 2, no next hop, a tagged frame, IP options, a miss.
#[test]
fn cls_fwd_equals_cls_then_fwd() {
    const TC_ACT_REDIRECT: u32 = 7;
    let (next, ours) = ([2, 0, 0, 0, 0, 0x22], [2, 0, 0, 0, 0, 0x11]);
    let hop = |action: FwdAction, ifindex: u32| FwdVal {
        action,
        flags: 0,
        dmac: next,
        smac: ours,
        udp_sport: 0,
        ifindex,
        saddr: Ipv4Addr::new(192, 168, 0, 1),
        daddr: Ipv4Addr::new(192, 168, 0, 2),
        vni: 7,
    };
    let (frame, key) = tcp();
    let tagged = wire::build::ethernet(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        &[(0x8100, 44)],
        0x0800,
        &frame[14..],
    );
    let mut options = frame.clone();
    {
        // IHL 6 with a 4-byte NOP option in front of the same TCP header: another 5-tuple
        // path (not the fixed one), the same key.
        let mut o = options[..14].to_vec();
        let mut ip = options[14..34].to_vec();
        ip[0] = 0x46;
        let total = u16::from_be_bytes([ip[2], ip[3]]) + 4;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[10] = 0;
        ip[11] = 0;
        o.extend_from_slice(&ip);
        o.extend_from_slice(&[1, 1, 1, 1]);
        o.extend_from_slice(&options[34..]);
        options = o;
    }
    let md1 = |ttl: u8| NshMeta::md1(0x10, 255, ttl, [1, 2, 3, 4]);
    let md2 = NshMeta::md2(0x10, 255, 30, &[0, 1, 2, 4, 9, 9, 9, 9]).unwrap();
    struct Case {
        name: &'static str,
        iface: u32,
        entry: NshMeta,
        hop: Option<FwdVal>,
        frame: Vec<u8>,
        ret: u32,
        /// Another path's next hop (other MACs) takes the slot first: this one lives in the
        /// hash.
        slot_taken: bool,
    }
    let eth = FwdAction::Ethernet;
    let cases = [
        Case {
            name: "exact interface, redirect",
            iface: LO,
            entry: md1(30),
            hop: Some(hop(eth, LO)),
            frame: frame.clone(),
            ret: TC_ACT_REDIRECT,
            slot_taken: false,
        },
        Case {
            name: "any interface, redirect",
            iface: 0,
            entry: md1(0),
            hop: Some(hop(eth, LO)),
            frame: frame.clone(),
            ret: TC_ACT_REDIRECT,
            slot_taken: false,
        },
        Case {
            name: "ttl 2",
            iface: LO,
            entry: md1(2),
            hop: Some(hop(eth, LO)),
            frame: frame.clone(),
            ret: TC_ACT_REDIRECT,
            slot_taken: false,
        },
        Case {
            name: "ttl 1",
            iface: LO,
            entry: md1(1),
            hop: Some(hop(eth, LO)),
            frame: frame.clone(),
            ret: TC_ACT_SHOT,
            slot_taken: false,
        },
        Case {
            name: "stays on the interface",
            iface: LO,
            entry: md1(30),
            hop: Some(hop(eth, 0)),
            frame: frame.clone(),
            ret: TC_ACT_OK,
            slot_taken: false,
        },
        Case {
            name: "vxlan-gpe",
            iface: LO,
            entry: md1(30),
            hop: Some(hop(FwdAction::VxlanGpe, LO)),
            frame: frame.clone(),
            ret: TC_ACT_REDIRECT,
            slot_taken: false,
        },
        Case {
            name: "end of path",
            iface: LO,
            entry: md1(30),
            hop: Some(hop(FwdAction::End, LO)),
            frame: frame.clone(),
            ret: TC_ACT_REDIRECT,
            slot_taken: false,
        },
        Case {
            name: "md2",
            iface: LO,
            entry: md2,
            hop: Some(hop(eth, LO)),
            frame: frame.clone(),
            ret: TC_ACT_REDIRECT,
            slot_taken: false,
        },
        Case {
            name: "no next hop",
            iface: LO,
            entry: md1(30),
            hop: None,
            frame: frame.clone(),
            ret: TC_ACT_SHOT,
            slot_taken: false,
        },
        Case {
            name: "tagged",
            iface: LO,
            entry: md1(30),
            hop: Some(hop(eth, LO)),
            frame: tagged,
            ret: TC_ACT_REDIRECT,
            slot_taken: false,
        },
        Case {
            name: "ip options",
            iface: LO,
            entry: md1(30),
            hop: Some(hop(eth, LO)),
            frame: options,
            ret: TC_ACT_REDIRECT,
            slot_taken: false,
        },
        Case {
            name: "next hop in the hash",
            iface: LO,
            entry: md1(30),
            hop: Some(hop(eth, LO)),
            frame: frame.clone(),
            ret: TC_ACT_REDIRECT,
            slot_taken: true,
        },
        Case {
            name: "miss",
            iface: 2,
            entry: md1(30),
            hop: Some(hop(eth, LO)),
            frame: frame.clone(),
            ret: TC_ACT_OK,
            slot_taken: false,
        },
    ];
    // Each case at rest, then the first (the steady state) with its classifier slot and
    // with its forwarding slot in the middle of a rewrite: version 1 live, version 0 holding
    // what is being replaced (another path; other MACs), which the steady-state paths must
    // not read.
    // Then the first again with its next hop (which the classifier slot caches for Cls+Fwd,
    // cbox.h cls_hop) written before the entry, moved to other MACs and another interface,
    // deleted, or made one that leaves the frame on its interface after the entry.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Mid {
        AtRest,
        ClsSlot,
        FwdSlot,
        HopFirst,
        HopMoved,
        HopGone,
        HopStays,
    }
    impl Mid {
        fn hop_changed(self) -> bool {
            matches!(
                self,
                Mid::HopFirst | Mid::HopMoved | Mid::HopGone | Mid::HopStays
            )
        }
    }
    let sph = 0x10 << 8 | 255;
    let moved = FwdVal {
        dmac: [2, 0, 0, 0, 0, 0x33],
        smac: [2, 0, 0, 0, 0, 0x44],
        ifindex: 2,
        ..hop(eth, LO)
    };
    let runs = cases.iter().map(|c| (c, Mid::AtRest)).chain(
        [
            Mid::ClsSlot,
            Mid::FwdSlot,
            Mid::HopFirst,
            Mid::HopMoved,
            Mid::HopGone,
            Mid::HopStays,
        ]
        .map(|m| (&cases[0], m)),
    );
    for (c, mid) in runs {
        let name = format!("{} ({mid:?})", c.name);
        let Some((mut split, mut one)) = common::split_and_one("cls_fwd", |i| {
            if let (Some(h), Mid::HopFirst) = (&c.hop, mid) {
                i.insert_fwd(sph, h).unwrap();
            }
            i.insert_cls(
                &ClsKey {
                    ifindex: c.iface,
                    flow: key,
                },
                &c.entry,
            )
            .unwrap();
            if c.slot_taken {
                let other = FwdVal {
                    dmac: [2, 0, 0, 0, 0, 0x99],
                    ..hop(eth, LO)
                };
                let sph = (0x10 + 64) << 8 | 255;
                assert_eq!(
                    stages::maps::fwd_slot(sph),
                    stages::maps::fwd_slot(0x10 << 8 | 255)
                );
                i.insert_fwd(sph, &other).unwrap();
            }
            if let (Some(h), false) = (&c.hop, mid == Mid::HopFirst) {
                i.insert_fwd(sph, h).unwrap();
            }
            match mid {
                Mid::HopMoved => i.insert_fwd(sph, &moved).unwrap(),
                Mid::HopGone => i.delete_fwd(sph).unwrap(),
                Mid::HopStays => i.insert_fwd(sph, &hop(eth, 0)).unwrap(),
                _ => {}
            }
            if mid == Mid::ClsSlot {
                let key = ClsKey {
                    ifindex: c.iface,
                    flow: key,
                };
                let idx = cls_slot(&key);
                let mut slot = i.cls_slot_read(idx).unwrap();
                slot.ent[1] = slot.ent[0];
                slot.ent[0].entry = Some((key, NshMeta::md1(0x10 + 64, 255, 30, [1, 2, 3, 4])));
                slot.live = 1;
                i.cls_slot_write(idx, &slot).unwrap();
            }
            if mid == Mid::FwdSlot {
                common::fwd_slot_mid_rewrite(i, 0x10 << 8 | 255);
            }
        }) else {
            return;
        };
        let (ret, cached) = match mid {
            Mid::HopGone => (TC_ACT_SHOT, None),
            Mid::HopStays => (TC_ACT_OK, None),
            Mid::HopMoved => (c.ret, ClsHop::of(&moved)),
            _ => (c.ret, c.hop.as_ref().and_then(ClsHop::of)),
        };
        if matches!(mid, Mid::AtRest | Mid::FwdSlot) || mid.hop_changed() {
            // What the instance cached with a steady-state entry.
            let idx = cls_slot(&ClsKey {
                ifindex: c.iface,
                flow: key,
            });
            let v0 = one.cls_slot_read(idx).unwrap().ent[0];
            let md1 = c.entry.md_type == 1;
            assert_eq!(v0.hop, cached.filter(|_| md1), "{name}: the cached hop");
            assert_eq!(
                v0.entry.map(|e| e.1),
                Some(c.entry),
                "{name}: the entry as written"
            );
        }
        let out = common::assert_one_equals_two(
            (&mut split, &mut one),
            (Stage::Cls, Stage::Fwd, Stage::ClsFwd),
            [CounterStage::Cls, CounterStage::Fwd],
            &c.frame,
            ret,
            &name,
        );
        if ret == TC_ACT_REDIRECT && c.hop.map(|h| h.action) == Some(FwdAction::Ethernet) {
            let want = if mid == Mid::HopMoved {
                moved
            } else {
                hop(eth, LO)
            };
            assert_eq!(
                &out[..12],
                [want.dmac, want.smac].concat(),
                "{name}: the next hop's MACs"
            );
            assert_eq!(&out[18..22], [0, 0, 0x10, 255], "{name}: the entry's path");
        }
    }
}

/// The classifier's two parts (cbox.h, `cls_slots`): three keys of one slot, the first in the
/// slot and the next in the hash (counted in the slot's `spill`), the third in neither; an
/// any-interface entry behind a busy slot; replace and delete in the hash; an entry that
/// moves from the hash into its freed slot and is deleted there (no copy left behind); the
/// count going back to 0.
#[test]
fn classifier_entries_sharing_a_slot() {
    let Some(mut i) = common::instance("cls-slots") else {
        return;
    };
    let key = |ifindex: u32, sport: u16| ClsKey {
        ifindex,
        flow: flow(6, sport, 80),
    };
    let (s1, s2, s3) = common::ports_sharing_a_slot(|sport| key(LO, sport));
    assert_ne!(cls_slot(&key(LO, s3)), cls_slot(&key(0, s3)));
    let frame = |sport: u16| {
        Frame::tcp([172, 16, 0, 1], [172, 16, 9, 9], sport, 80)
            .payload(b"GET /")
            .build()
    };
    let run = |i: &mut Instance, sport: u16| {
        let o = i.test_run(Stage::Cls, &frame(sport), 0).unwrap();
        (o.ret, o.frame)
    };
    let pushed = |spi: u32, sport: u16| {
        (
            TC_ACT_UNSPEC,
            Nsh::md1(spi, 255, [spi; 4])
                .ttl(20)
                .ethernet([0; 6], [0; 6], &frame(sport)),
        )
    };
    let passed = |sport: u16| (TC_ACT_OK, frame(sport));
    let nsh = |spi: u32| NshMeta::md1(spi, 255, 20, [spi; 4]);

    i.insert_cls(&key(LO, s1), &nsh(1)).unwrap(); // the slot
    i.insert_cls(&key(LO, s2), &nsh(2)).unwrap(); // the hash
    assert_eq!(run(&mut i, s1), pushed(1, s1));
    assert_eq!(run(&mut i, s2), pushed(2, s2));
    assert_eq!(run(&mut i, s3), passed(s3), "in neither part");
    // The exact key misses in a busy slot; the any-interface entry still applies.
    i.insert_cls(&key(0, s3), &nsh(3)).unwrap();
    assert_eq!(run(&mut i, s3), pushed(3, s3));
    // Replace in the hash.
    i.insert_cls(&key(LO, s2), &nsh(4)).unwrap();
    assert_eq!(run(&mut i, s2), pushed(4, s2));
    assert_eq!(
        i.list_cls().unwrap(),
        vec![
            (key(0, s3), nsh(3)),
            (key(LO, s1), nsh(1)),
            (key(LO, s2), nsh(4))
        ]
    );
    // The slot's key goes: the hash's is still found.
    i.delete_cls(&key(LO, s1)).unwrap();
    assert_eq!(run(&mut i, s1), passed(s1));
    assert_eq!(run(&mut i, s2), pushed(4, s2));
    // Inserted again, the hash's key moves into the freed slot; deleted there, nothing is
    // left of it.
    i.insert_cls(&key(LO, s2), &nsh(5)).unwrap();
    assert_eq!(run(&mut i, s2), pushed(5, s2));
    i.delete_cls(&key(LO, s2)).unwrap();
    assert_eq!(run(&mut i, s2), passed(s2));
    assert_eq!(i.list_cls().unwrap(), vec![(key(0, s3), nsh(3))]);
    // Back to one key in the slot and one in the hash, then the hash's deleted.
    i.insert_cls(&key(LO, s1), &nsh(1)).unwrap();
    i.insert_cls(&key(LO, s3), &nsh(6)).unwrap();
    assert_eq!(
        run(&mut i, s3),
        pushed(6, s3),
        "the exact key before the any key"
    );
    i.delete_cls(&key(LO, s3)).unwrap();
    assert_eq!(run(&mut i, s3), pushed(3, s3));
    assert_eq!(run(&mut i, s1), pushed(1, s1));
    i.delete_cls(&key(0, s3)).unwrap();
    assert_eq!(run(&mut i, s3), passed(s3));
    assert_eq!(i.list_cls().unwrap(), vec![(key(LO, s1), nsh(1))]);
}

/// Frames at the edges of the fixed-offset parse (untagged IPv4 without options, ports
/// present): IPv4 options and a later fragment take the general path or ports 0, and are
/// classified by the same 5-tuple.
#[test]
fn frames_at_the_fast_parse_edges_are_classified_alike() {
    let Some(mut i) = common::instance("cls-edges") else {
        return;
    };
    let (a, b) = ([172, 16, 0, 1], [172, 16, 9, 9]);
    let cases = [
        (
            Frame::tcp(a, b, 5555, 80)
                .ip_options(&[1, 1, 1, 0])
                .payload(b"with options")
                .build(),
            flow(6, 5555, 80),
        ),
        (
            Frame::udp(a, b, 53, 5353)
                .fragment(false, false, 16)
                .payload(b"later fragment")
                .build(),
            flow(17, 0, 0),
        ),
    ];
    for (n, (frame, key)) in cases.into_iter().enumerate() {
        let spi = 0x40 + n as u32;
        i.insert_cls(
            &ClsKey {
                ifindex: 0,
                flow: key,
            },
            &NshMeta::md1(spi, 255, 9, [1; 4]),
        )
        .unwrap();
        let want = Nsh::md1(spi, 255, [1; 4])
            .ttl(9)
            .ethernet([0; 6], [0; 6], &frame);
        expect_push(&mut i, &frame, &want);
        i.clear_counters().unwrap();
    }
}
