//! Shared by the stage fixtures: a unique instance per test (removed by its Drop even when
//! the test fails) and frame builders independent of the stages.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use stages::maps::{Counter, CounterStage};
use stages::{Instance, Stage};

/// A fresh instance named after the test and the process, or `None` (after printing why)
/// where BPF cannot run; under CI=true that panics instead.
pub fn instance(test: &str) -> Option<Instance> {
    static N: AtomicU32 = AtomicU32::new(0);
    if !stages::require_bpf(test) {
        return None;
    }
    let name = format!(
        "test-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        test
    );
    Some(Instance::create(&name).expect("create instance"))
}

pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const TC_ACT_OK: u32 = 0;
pub const TC_ACT_SHOT: u32 = 2;
pub const TC_ACT_UNSPEC: u32 = u32::MAX;

/// The NSH EtherType.
pub const ETH_NSH: u16 = 0x894f;

/// Pins the calling test thread to the first CPU it may run on, so that the per-CPU
/// `last_dec` slot one test run writes (Dec) is the one the next reads (Enc), as when the
/// kernel runs both in one softirq.
pub fn pin_cpu() {
    let core = core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().next())
        .expect("CPU ids");
    assert!(core_affinity::set_for_current(core), "pin to {core:?}");
}

/// The counters of `stage` that are not zero, in index order.
pub fn nonzero(i: &Instance, stage: CounterStage) -> Vec<(Counter, u64)> {
    let c = i.counters(stage).unwrap();
    Counter::ALL
        .iter()
        .map(|&k| (k, c.get(k)))
        .filter(|&(_, v)| v != 0)
        .collect()
}

/// The classifier fixtures' flow: 172.16.0.1 → 172.16.9.9 with this protocol and ports.
pub fn cls_flow(proto: u8, sport: u16, dport: u16) -> stages::maps::FlowKey {
    stages::maps::FlowKey {
        saddr: [172, 16, 0, 1].into(),
        daddr: [172, 16, 9, 9].into(),
        sport,
        dport,
        proto,
    }
}

/// Two MD type 2 context headers of the classifier fixtures, and the context bytes they
/// make (each value padded to 4 bytes), as an entry holds them.
pub fn md2_context() -> ([wire::nsh::Tlv<'static>; 2], [u8; 20]) {
    let tlvs = [
        wire::nsh::Tlv {
            class: 0x0200,
            tlv_type: 5,
            value: &[1, 2, 3, 4, 5],
        },
        wire::nsh::Tlv {
            class: 0x0201,
            tlv_type: 6,
            value: &[6, 7],
        },
    ];
    let ctx = [
        0x02, 0x00, 5, 5, 1, 2, 3, 4, 5, 0, 0, 0, 0x02, 0x01, 6, 2, 6, 7, 0, 0,
    ];
    (tlvs, ctx)
}

/// Three source ports whose classifier keys (`key` of the port) share one slot of
/// `cls_slots` (cbox.h).
pub fn ports_sharing_a_slot(key: impl Fn(u16) -> stages::maps::ClsKey) -> (u16, u16, u16) {
    let mut by_slot = std::collections::BTreeMap::<u32, Vec<u16>>::new();
    for sport in 1..=u16::MAX {
        let v = by_slot
            .entry(stages::maps::cls_slot(&key(sport)))
            .or_default();
        v.push(sport);
        if let [a, b, c] = v[..] {
            return (a, b, c);
        }
    }
    panic!("4096 slots: three of 65535 keys share one")
}

/// Two fresh instances for a program that does two stages' work (`one`) and the two stages
/// run one after the other (`split`), filled alike by `fill`; `None` where BPF cannot run.
pub fn split_and_one(test: &str, fill: impl Fn(&Instance)) -> Option<(Instance, Instance)> {
    let split = instance(&format!("{test}_split"))?;
    let one = instance(&format!("{test}_one"))?;
    fill(&split);
    fill(&one);
    Some((split, one))
}

/// Runs `stages.0` on `frame` in `split`, then `stages.1` on its output when it says "next
/// filter" (TC_ACT_UNSPEC), and `stages.2` (the two in one program) on `frame` in `one`;
/// asserts both give the verdict `ret`, the same frame unless dropped (what a dropped frame
/// holds is nobody's), and the same counters of `counted`. Returns the frame.
pub fn assert_one_equals_two(
    (split, one): (&mut Instance, &mut Instance),
    stages: (Stage, Stage, Stage),
    counted: [CounterStage; 2],
    frame: &[u8],
    ret: u32,
    case: &str,
) -> Vec<u8> {
    let a = split.test_run(stages.0, frame, 0).unwrap();
    let b = if a.ret == TC_ACT_UNSPEC {
        split.test_run(stages.1, &a.frame, 0).unwrap()
    } else {
        a
    };
    let o = one.test_run(stages.2, frame, 0).unwrap();
    assert_eq!((o.ret, b.ret), (ret, ret), "{case}");
    if ret != TC_ACT_SHOT {
        assert_eq!(o.frame, b.frame, "{case}");
    }
    for stage in counted {
        assert_eq!(
            one.counters(stage).unwrap(),
            split.counters(stage).unwrap(),
            "{case} {}",
            stage.name()
        );
    }
    o.frame
}

/// Leaves `sph`'s forwarding slot in the middle of a rewrite: its entry in version 1, live,
/// and in version 0 the entry being replaced, another next hop (destination MAC
/// 02:00:00:00:00:99), which a stage reading the slot must not use.
pub fn fwd_slot_mid_rewrite(i: &Instance, sph: u32) {
    let idx = stages::maps::fwd_slot(sph);
    let mut slot = i.fwd_slot_read(idx).unwrap();
    let Some((owner, val)) = slot.current() else {
        panic!("slot {idx} holds no entry for {sph:#x}");
    };
    assert_eq!(owner, sph, "slot {idx}");
    let old = stages::maps::FwdVal {
        dmac: [2, 0, 0, 0, 0, 0x99],
        ..val
    };
    slot.ent[1] = slot.ent[0];
    slot.ent[0] = Some((sph, old));
    slot.live = 1;
    i.fwd_slot_write(idx, &slot).unwrap();
}
