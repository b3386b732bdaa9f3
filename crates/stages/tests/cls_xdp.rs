//! Cls's XDP form (`cls_xdp`) against its TC form (`cls`) over the same inputs: every branch
//! the TC fixtures (`tests/cls.rs`) cover — hit on the exact interface and on any interface
//! (MD type 1 and 2, default TTL, UDP, ICMP, a tagged frame), miss, frames that are not IPv4,
//! a bad entry, keys sharing a slot (the hash behind a busy slot, replace, delete), the
//! fast-parse edges, the largest MD type 2 context, frames cut short at every length. Each
//! form runs in its own instance filled alike; for every frame the output frames must be
//! byte-identical, the verdicts correspond (TC_ACT_UNSPEC and TC_ACT_OK ↔ XDP_PASS,
//! TC_ACT_SHOT ↔ XDP_DROP) and every counter and the classifier entries must be equal. The
//! XDP test run's frame arrives on the loopback (ingress_ifindex 1), where the TC test run's
//! skb sits, so "exact interface" entries use 1 for both. The expected frames are also
//! checked against `wire`'s own NSH frames where the TC fixtures check them.

mod common;

use common::{TC_ACT_OK, TC_ACT_SHOT, TC_ACT_UNSPEC, XDP_DROP, XDP_PASS};

use stages::maps::{
    cls_slot, ClsKey, ClsSlot, ClsVersion, Counter, CounterStage, FlowKey, NshMeta,
};
use stages::{Instance, Stage};
use wire::build::{Frame, Nsh};
use wire::nsh::Tlv;

const LO: u32 = 1;

/// The two forms, each in its own instance.
struct Pair {
    tc: Instance,
    xdp: Instance,
}

impl Pair {
    fn new(test: &str) -> Option<Pair> {
        let tc = common::instance(&format!("{test}-tc"))?;
        let xdp = common::instance(&format!("{test}-xdp"))?;
        Some(Pair { tc, xdp })
    }

    fn insert(&self, key: ClsKey, m: &NshMeta) {
        self.tc.insert_cls(&key, m).unwrap();
        self.xdp.insert_cls(&key, m).unwrap();
    }

    fn delete(&self, key: ClsKey) {
        self.tc.delete_cls(&key).unwrap();
        self.xdp.delete_cls(&key).unwrap();
    }

    /// Writes classifier slot `idx` as `slot` in both (a slot in the middle of a rewrite).
    fn slot_write(&self, idx: u32, slot: &ClsSlot) {
        self.tc.cls_slot_write(idx, slot).unwrap();
        self.xdp.cls_slot_write(idx, slot).unwrap();
    }

    fn clear(&self) {
        self.tc.clear_counters().unwrap();
        self.xdp.clear_counters().unwrap();
    }

    /// Runs both forms on `frame` (counters cleared first), checks they agree, and returns
    /// the TC form's verdict, the frame out and Cls's nonzero counters.
    fn run(&mut self, frame: &[u8]) -> (u32, Vec<u8>, Vec<(Counter, u64)>) {
        self.clear();
        let t = self.tc.test_run(Stage::Cls, frame, 0).unwrap();
        let x = self.xdp.test_run_on(Stage::ClsXdp, frame, LO, 0).unwrap();
        let want_xdp = match t.ret {
            TC_ACT_UNSPEC | TC_ACT_OK => XDP_PASS,
            TC_ACT_SHOT => XDP_DROP,
            other => panic!("TC verdict {other}"),
        };
        assert_eq!(x.ret, want_xdp, "verdicts correspond (TC {})", t.ret);
        if t.ret != TC_ACT_SHOT {
            assert_eq!(x.frame, t.frame, "the same frame out of both forms");
        }
        for stage in CounterStage::ALL {
            assert_eq!(
                common::nonzero(&self.xdp, stage),
                common::nonzero(&self.tc, stage),
                "{} counters",
                stage.name()
            );
        }
        assert_eq!(self.xdp.list_cls().unwrap(), self.tc.list_cls().unwrap());
        (t.ret, t.frame, common::nonzero(&self.tc, CounterStage::Cls))
    }

    fn expect_push(&mut self, frame: &[u8], want: &[u8]) {
        let (ret, out, ctrs) = self.run(frame);
        assert_eq!(ret, TC_ACT_UNSPEC);
        assert_eq!(out, want, "outer Ethernet + NSH + the frame");
        assert_eq!(ctrs, vec![(Counter::Packets, 1), (Counter::Done, 1)]);
    }

    fn expect_pass(&mut self, frame: &[u8]) {
        let (ret, out, ctrs) = self.run(frame);
        assert_eq!(ret, TC_ACT_OK);
        assert_eq!(out, frame, "passed untouched");
        assert_eq!(ctrs, vec![(Counter::Packets, 1), (Counter::Passed, 1)]);
    }
}

fn flow(proto: u8, sport: u16, dport: u16) -> FlowKey {
    common::cls_flow(proto, sport, dport)
}

fn tcp_port(sport: u16) -> Vec<u8> {
    Frame::tcp([172, 16, 0, 1], [172, 16, 9, 9], sport, 80)
        .payload(b"GET /")
        .build()
}

/// Frame `tcp` with an 802.1Q tag (VLAN 44) after its MAC addresses.
fn tagged(tcp: &[u8]) -> Vec<u8> {
    wire::build::ethernet(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        &[(0x8100, 44)],
        0x0800,
        &tcp[14..],
    )
}

fn any(flow: FlowKey) -> ClsKey {
    ClsKey { ifindex: 0, flow }
}

fn exact(flow: FlowKey) -> ClsKey {
    ClsKey { ifindex: LO, flow }
}

#[test]
fn hits_misses_and_bad_entries_alike() {
    let Some(mut p) = Pair::new("clsx-hits") else {
        return;
    };
    let frame = tcp_port(5555);
    let key = flow(6, 5555, 80);
    // Exact MD type 1 before a wildcard for the same flow.
    p.insert(
        exact(key),
        &NshMeta::md1(0x10, 255, 30, [0x11, 0x22, 0x33, 0x44]),
    );
    p.insert(any(key), &NshMeta::md1(0x20, 255, 30, [0; 4]));
    let want = Nsh::md1(0x10, 255, [0x11, 0x22, 0x33, 0x44])
        .ttl(30)
        .ethernet([0; 6], [0; 6], &frame);
    p.expect_push(&frame, &want);

    // Any interface, MD type 2, TTL 0 → 63; an entry of another interface does not apply.
    p.delete(exact(key));
    p.insert(
        exact(FlowKey { dport: 81, ..key }),
        &NshMeta::md1(9, 9, 9, [9; 4]),
    );
    p.insert(
        ClsKey {
            ifindex: 7,
            flow: key,
        },
        &NshMeta::md1(0x99, 1, 1, [0; 4]),
    );
    let (tlvs, ctx) = common::md2_context();
    p.insert(any(key), &NshMeta::md2(0x345678, 7, 0, &ctx).unwrap());
    let want = Nsh::md2(0x345678, 7, &tlvs).ethernet([0; 6], [0; 6], &frame);
    p.expect_push(&frame, &want);

    // The largest MD type 2 context (32 bytes: one TLV of 28).
    let value: Vec<u8> = (1..=28).collect();
    let mut big = vec![0x03, 0x00, 9, 28];
    big.extend_from_slice(&value);
    p.insert(any(key), &NshMeta::md2(0x77, 200, 12, &big).unwrap());
    let want = Nsh::md2(
        0x77,
        200,
        &[Tlv {
            class: 0x0300,
            tlv_type: 9,
            value: &value,
        }],
    )
    .ttl(12)
    .ethernet([0; 6], [0; 6], &frame);
    p.expect_push(&frame, &want);

    // No context at all (MD type 2, length 0).
    p.insert(any(key), &NshMeta::md2(0x78, 100, 1, &[]).unwrap());
    p.expect_push(
        &frame,
        &Nsh::md2(0x78, 100, &[])
            .ttl(1)
            .ethernet([0; 6], [0; 6], &frame),
    );

    // A miss: other flows and another interface only.
    p.delete(any(key));
    p.expect_pass(&frame);

    // A bad entry (MD type 3) is dropped, counted alike.
    let mut bad = NshMeta::md1(1, 1, 1, [0; 4]);
    bad.md_type = 3;
    p.insert(any(key), &bad);
    let (ret, _, ctrs) = p.run(&frame);
    assert_eq!(ret, TC_ACT_SHOT);
    assert_eq!(ctrs, vec![(Counter::Packets, 1), (Counter::DropBadNsh, 1)]);
    // A context length that is not whole words.
    let mut odd = NshMeta::md2(1, 1, 1, &[1, 2, 3, 4]).unwrap();
    odd.ctx_len = 6;
    p.insert(any(key), &odd);
    let (ret, _, ctrs) = p.run(&frame);
    assert_eq!(ret, TC_ACT_SHOT);
    assert_eq!(ctrs, vec![(Counter::Packets, 1), (Counter::DropBadNsh, 1)]);
}

#[test]
fn protocols_tags_non_ip_and_parse_edges_alike() {
    let Some(mut p) = Pair::new("clsx-protos") else {
        return;
    };
    let (a, b) = ([172, 16, 0, 1], [172, 16, 9, 9]);
    let tcp = tcp_port(5555);
    let tagged = tagged(&tcp);
    let cases = [
        (Frame::udp(a, b, 53, 5353).build(), flow(17, 53, 5353)),
        (Frame::icmp(a, b, 8, 0).build(), flow(1, 0, 0)),
        (tagged, flow(6, 5555, 80)),
        (
            Frame::tcp(a, b, 5556, 80)
                .ip_options(&[1, 1, 1, 0])
                .payload(b"with options")
                .build(),
            flow(6, 5556, 80),
        ),
        (
            Frame::udp(a, b, 54, 5353)
                .fragment(false, false, 16)
                .payload(b"later fragment")
                .build(),
            flow(17, 0, 0),
        ),
        (
            Frame::udp(a, b, 55, 5353)
                .fragment(false, true, 0)
                .payload(b"first fragment")
                .build(),
            flow(17, 55, 5353),
        ),
    ];
    for (n, (_, key)) in cases.iter().enumerate() {
        let spi = 1 + n as u32;
        // Half on the exact interface, half on any.
        let k = if n % 2 == 0 { exact(*key) } else { any(*key) };
        p.insert(k, &NshMeta::md1(spi, 9, 5, [spi; 4]));
    }
    for (n, (frame, _)) in cases.iter().enumerate() {
        let spi = 1 + n as u32;
        let want = Nsh::md1(spi, 9, [spi; 4])
            .ttl(5)
            .ethernet([0; 6], [0; 6], frame);
        p.expect_push(frame, &want);
    }
    // Not IPv4: ARP; not version 4, an IHL below 5, an IHL past the end.
    let arp = wire::build::Arp::request([2, 0, 0, 0, 0, 5], [10, 0, 0, 1], [10, 0, 0, 2]).build();
    p.expect_pass(&arp);
    p.insert(any(flow(6, 5555, 80)), &NshMeta::md1(1, 1, 1, [0; 4]));
    for first in [0x65, 0x44, 0x4f] {
        let mut f = tcp.clone();
        f[14] = first;
        p.expect_pass(&f);
    }
}

/// Frames cut short at every length from the Ethernet header on (the IPv4 header's total
/// length still the whole frame's): both forms give the same verdict, frame and counters.
/// Lengths the kernel refuses for the TC test run (shorter than an IPv4 header behind
/// EtherType IPv4) are run through XDP alone and must pass untouched.
#[test]
fn frames_cut_short_alike() {
    let Some(mut p) = Pair::new("clsx-cut") else {
        return;
    };
    let tcp = tcp_port(5555);
    let tagged = tagged(&tcp);
    // Classified when the ports are read as 0 too (a cut-off TCP header).
    p.insert(any(flow(6, 5555, 80)), &NshMeta::md1(0x31, 255, 7, [3; 4]));
    p.insert(any(flow(6, 0, 0)), &NshMeta::md1(0x32, 255, 7, [4; 4]));
    let mut pushed = 0;
    for full in [&tcp, &tagged] {
        for len in 14..=full.len() {
            let f = &full[..len];
            p.clear();
            match p.tc.test_run(Stage::Cls, f, 0) {
                Ok(_) => {
                    let (ret, out, _) = p.run(f);
                    if ret == TC_ACT_UNSPEC {
                        pushed += 1;
                        assert_eq!(&out[14 + 24..], f, "the frame behind the NSH");
                    }
                }
                Err(_) => {
                    let x = p.xdp.test_run_on(Stage::ClsXdp, f, LO, 0).unwrap();
                    assert_eq!((x.ret, x.frame.as_slice()), (XDP_PASS, f), "length {len}");
                }
            }
        }
    }
    assert!(pushed > 0, "some cut frames are classified");
}

/// Keys sharing a slot (cbox.h `cls_slots`): the slot's key, a key in the hash behind it, a
/// key in neither, an any-interface entry behind a busy slot, replace and delete in the hash,
/// a key moving into its freed slot — the same sequence as the TC fixture, both forms alike.
#[test]
fn classifier_entries_sharing_a_slot_alike() {
    let Some(mut p) = Pair::new("clsx-slots") else {
        return;
    };
    let key = |ifindex: u32, sport: u16| ClsKey {
        ifindex,
        flow: flow(6, sport, 80),
    };
    let (s1, s2, s3) = common::ports_sharing_a_slot(|sport| key(LO, sport));
    let nsh = |spi: u32| NshMeta::md1(spi, 255, 20, [spi; 4]);
    let pushed = |spi: u32, sport: u16| {
        Nsh::md1(spi, 255, [spi; 4])
            .ttl(20)
            .ethernet([0; 6], [0; 6], &tcp_port(sport))
    };
    p.insert(key(LO, s1), &nsh(1));
    p.insert(key(LO, s2), &nsh(2));
    p.expect_push(&tcp_port(s1), &pushed(1, s1));
    p.expect_push(&tcp_port(s2), &pushed(2, s2));
    p.expect_pass(&tcp_port(s3));
    p.insert(key(0, s3), &nsh(3));
    p.expect_push(&tcp_port(s3), &pushed(3, s3));
    p.insert(key(LO, s2), &nsh(4));
    p.expect_push(&tcp_port(s2), &pushed(4, s2));
    p.delete(key(LO, s1));
    p.expect_pass(&tcp_port(s1));
    p.expect_push(&tcp_port(s2), &pushed(4, s2));
    p.insert(key(LO, s2), &nsh(5));
    p.expect_push(&tcp_port(s2), &pushed(5, s2));
    p.delete(key(LO, s2));
    p.expect_pass(&tcp_port(s2));
    p.insert(key(LO, s1), &nsh(1));
    p.insert(key(LO, s3), &nsh(6));
    p.expect_push(&tcp_port(s3), &pushed(6, s3));
    p.delete(key(LO, s3));
    p.expect_push(&tcp_port(s3), &pushed(3, s3));
    p.delete(key(0, s3));
    p.expect_pass(&tcp_port(s3));
}

/// A classifier slot's two versions (cbox.h `cls_slots`): at rest version 0 is live, after
/// an insert and after a replace (the line a frame reads with `live`). In the middle of a
/// rewrite (version 1 live, version 0 holding what is being replaced), both forms classify
/// by version 1, the steady-state path leaving such a slot to the general code: the new
/// entry, no entry (a delete under way: the any-interface entry applies), a slot with spilled
/// keys.
#[test]
fn a_slot_mid_rewrite_is_read_at_its_live_version_alike() {
    let Some(mut p) = Pair::new("clsx-mid") else {
        return;
    };
    let key = exact(flow(6, 7777, 80));
    let idx = cls_slot(&key);
    assert_ne!(idx, cls_slot(&any(key.flow)));
    let nsh = |spi: u32| NshMeta::md1(spi, 255, 20, [spi; 4]);
    let pushed = |spi: u32| {
        Nsh::md1(spi, 255, [spi; 4])
            .ttl(20)
            .ethernet([0; 6], [0; 6], &tcp_port(7777))
    };
    for spi in [1, 2] {
        p.insert(key, &nsh(spi));
        for i in [&p.tc, &p.xdp] {
            let slot = i.cls_slot_read(idx).unwrap();
            assert_eq!(slot.live, 0, "version 0 live at rest");
            assert_eq!(slot.current().entry, Some((key, nsh(spi))));
        }
        p.expect_push(&tcp_port(7777), &pushed(spi));
    }
    let ver = |spi: Option<u32>, spill: u16| ClsVersion {
        entry: spi.map(|spi| (key, nsh(spi))),
        spill,
        hop: None,
    };
    let mid = |old: ClsVersion, new: ClsVersion| ClsSlot {
        live: 1,
        ent: [old, new],
    };
    p.slot_write(idx, &mid(ver(Some(9), 0), ver(Some(3), 0)));
    p.expect_push(&tcp_port(7777), &pushed(3));
    p.insert(any(key.flow), &nsh(4));
    p.slot_write(idx, &mid(ver(Some(9), 0), ver(None, 0)));
    p.expect_push(&tcp_port(7777), &pushed(4));
    // Version 0 (not live) says "spilled keys, none here"; version 1 holds the entry.
    p.slot_write(idx, &mid(ver(None, 1), ver(Some(5), 0)));
    p.expect_push(&tcp_port(7777), &pushed(5));
    p.delete(any(key.flow));
    p.slot_write(idx, &mid(ver(Some(9), 0), ver(None, 0)));
    p.expect_pass(&tcp_port(7777));
}

/// The XDP form reads the ingress interface from the test run's context: the loopback's
/// exact entry applies on the loopback (as without a context: the kernel's XDP test run
/// defaults to the loopback's queue 0); an interface that does not exist is refused, not
/// run.
#[test]
fn the_xdp_ingress_interface_selects_the_exact_entry() {
    let Some(p) = Pair::new("clsx-ifindex") else {
        return;
    };
    let mut x = p.xdp;
    let frame = tcp_port(5555);
    let key = flow(6, 5555, 80);
    x.insert_cls(&any(key), &NshMeta::md1(0x20, 255, 30, [2; 4]))
        .unwrap();
    x.insert_cls(&exact(key), &NshMeta::md1(0x10, 255, 30, [1; 4]))
        .unwrap();
    let exact_nsh = Nsh::md1(0x10, 255, [1; 4])
        .ttl(30)
        .ethernet([0; 6], [0; 6], &frame);
    let o = x.test_run_on(Stage::ClsXdp, &frame, LO, 0).unwrap();
    assert_eq!((o.ret, &o.frame), (XDP_PASS, &exact_nsh));
    let o = x.test_run(Stage::ClsXdp, &frame, 0).unwrap();
    assert_eq!((o.ret, &o.frame), (XDP_PASS, &exact_nsh));
    assert!(x
        .test_run_on(Stage::ClsXdp, &frame, u32::MAX >> 1, 0)
        .is_err());
}
