//! Fixtures of the proxy table's cache, `proxy_slots` (cbox.h), through `BPF_PROG_TEST_RUN`:
//! a slot answers Enc in place of the hash, a key whose slot caches another key falls back to
//! the hash, a slot being written (odd seq) or invalidated (seq past valid) does not answer,
//! an entry user space removes or replaces no longer answers (also when a refill read the
//! generation before user space's write), and an entry a stage changes (Dec's new NSH, Enc's
//! NAT learning) is what the next packet sees. Enc's output (SI − 1 of the entry it found)
//! tells which entry answered. Some fixtures write a slot directly, as a stage would leave
//! it, to take one branch at a time. Root needed: each test skips without it (fails under
//! CI=true); every test has its own pin directory, removed by the instance's Drop.

mod common;

use std::net::Ipv4Addr;

use libbpf_rs::{MapCore, MapFlags, MapHandle};
use stages::maps::{
    proxy_slot, FlowKey, NshMeta, ProxySlot, StageCfg, CFG_ANY_DST, CFG_NAT_LEARN, PROXY_LEARNED,
    PROXY_TOLD,
};
use stages::{Instance, ProxyTable, Stage};
use wire::build::{Frame, Nsh};

use common::{TC_ACT_OK, TC_ACT_UNSPEC, XDP_PASS};

/// The loopback interface: the device of every test run.
const LO: u32 = 1;
const SPI: u32 = 0x0012_3401;
const CTX: [u32; 4] = [0x0a0b_0c0d, 0, 7, 0xffff_0000];
const OUR_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x0b, 0x02];
const PREV_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x0c, 0x03];

/// UDP 10.0.0.1:`sport` -> 10.0.0.2:80.
fn frame(sport: u16) -> Vec<u8> {
    Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], sport, 80)
        .payload(b"cached")
        .build()
}

/// `frame(sport)`'s 5-tuple.
fn flow(sport: u16) -> FlowKey {
    FlowKey {
        saddr: Ipv4Addr::new(10, 0, 0, 1),
        daddr: Ipv4Addr::new(10, 0, 0, 2),
        sport,
        dport: 80,
        proto: 17,
    }
}

/// The MD type 1 entry at `si`.
fn meta(si: u8) -> NshMeta {
    NshMeta::md1(SPI, si, 40, CTX)
}

/// What Enc makes of `frame(sport)` when the entry it found is `meta(si)`.
fn pushed(sport: u16, si: u8) -> Vec<u8> {
    Nsh::md1(SPI, si - 1, CTX)
        .ttl(40)
        .ethernet([0; 6], [0; 6], &frame(sport))
}

/// Runs Enc on `frame(sport)` and returns the SI of the entry it used (the pushed SI + 1), or
/// None when it passed the frame untouched (a proxy miss).
fn enc_si(i: &mut Instance, sport: u16) -> Option<u8> {
    let o = i.test_run(Stage::Enc, &frame(sport), 0).unwrap();
    if o.ret == TC_ACT_OK {
        assert_eq!(o.frame, frame(sport), "a miss passes untouched");
        return None;
    }
    assert_eq!(o.ret, TC_ACT_UNSPEC);
    let si = o.frame[14 + 7] + 1;
    assert_eq!(o.frame, pushed(sport, si));
    Some(si)
}

/// Runs Dec on `frame(sport)` under the NSH `meta(si)` over Ethernet.
fn dec(i: &mut Instance, sport: u16, si: u8) {
    let arriving = Nsh::md1(SPI, si, CTX)
        .ttl(40)
        .ethernet(OUR_MAC, PREV_MAC, &frame(sport));
    let d = i.test_run(Stage::Dec, &arriving, 0).unwrap();
    assert_eq!((d.ret, &d.frame), (XDP_PASS, &frame(sport)));
}

/// A pinned map of `i`.
fn map(i: &Instance, name: &str) -> MapHandle {
    MapHandle::from_pinned_path(i.pin_dir().join(name)).unwrap()
}

/// The raw slot of `key` and its generation.
fn slot(i: &Instance, key: &FlowKey) -> (ProxySlot, u64) {
    let idx = proxy_slot(key).to_ne_bytes();
    let s = map(i, "proxy_slots")
        .lookup(&idx, MapFlags::ANY)
        .unwrap()
        .unwrap();
    let g = map(i, "proxy_gen")
        .lookup(&idx, MapFlags::ANY)
        .unwrap()
        .unwrap();
    (
        ProxySlot::from_bytes(&s).unwrap(),
        u64::from_ne_bytes(g[..8].try_into().unwrap()),
    )
}

/// Writes slot `s` at the slot of `key`, as a stage would leave it.
fn poke(i: &Instance, key: &FlowKey, s: &ProxySlot) {
    map(i, "proxy_slots")
        .update(&proxy_slot(key).to_ne_bytes(), &s.to_bytes(), MapFlags::ANY)
        .unwrap();
}

/// A source port other than `sport` whose flow has the same slot.
fn same_slot(sport: u16) -> u16 {
    let want = proxy_slot(&flow(sport));
    (1..=u16::MAX)
        .find(|&p| p != sport && proxy_slot(&flow(p)) == want)
        .expect("two of 65535 flows share one of 8192 slots")
}

/// The slot answers in place of the hash: after the first packet fills it from the hash, a
/// slot holding another entry for the key (written here) is what Enc uses; a slot being
/// written (odd seq), invalidated (seq past valid) or of an older generation is not, and the
/// hash answers.
#[test]
fn a_slot_hit_answers_in_place_of_the_hash() {
    let Some(mut i) = common::instance("proxy_slot_hit") else {
        return;
    };
    i.insert_proxy(&flow(1000), &meta(20)).unwrap();
    assert_eq!(i.proxy_cached(&flow(1000)).unwrap(), None, "not cached yet");
    assert_eq!(enc_si(&mut i, 1000), Some(20), "from the hash");
    assert_eq!(
        i.proxy_cached(&flow(1000)).unwrap(),
        Some(meta(20)),
        "the hash hit filled the slot"
    );
    assert_eq!(enc_si(&mut i, 1000), Some(20));

    // The slot, not the hash, answers: make them differ (nothing else ever does).
    let (s, gen) = slot(&i, &flow(1000));
    assert!(s.valid != 0 && s.seq == s.valid && s.gen == gen, "{s:?}");
    poke(
        &i,
        &flow(1000),
        &ProxySlot {
            meta: meta(30),
            ..s
        },
    );
    assert_eq!(enc_si(&mut i, 1000), Some(30), "the slot answered");

    // A slot a stage is writing (odd seq) does not answer, nor fills.
    let busy = ProxySlot {
        seq: s.seq + 1,
        meta: meta(30),
        ..s
    };
    poke(&i, &flow(1000), &busy);
    assert_eq!(enc_si(&mut i, 1000), Some(20), "odd seq: the hash");
    assert_eq!(slot(&i, &flow(1000)).0, busy, "left to its writer");
    // An invalidation came in while the copy was written: seq moved past valid.
    let stale = ProxySlot {
        seq: s.seq + 4,
        meta: meta(30),
        ..s
    };
    poke(&i, &flow(1000), &stale);
    assert_eq!(enc_si(&mut i, 1000), Some(20), "seq past valid: the hash");
    assert_eq!(
        i.proxy_cached(&flow(1000)).unwrap(),
        Some(meta(20)),
        "and the hash hit refilled the slot"
    );
    // A copy of an older generation.
    let (s, gen) = slot(&i, &flow(1000));
    poke(
        &i,
        &flow(1000),
        &ProxySlot {
            gen: gen.wrapping_sub(1),
            meta: meta(30),
            ..s
        },
    );
    assert_eq!(enc_si(&mut i, 1000), Some(20), "older generation: the hash");
    assert_eq!(i.list_proxy().unwrap(), vec![(flow(1000), meta(20))]);
}

/// Two flows of one slot: the one the slot caches answers from the slot, the other from the
/// hash, and the slot stays the first's (a hash hit fills only a slot caching nothing valid);
/// a stage writing the second takes the slot, and the first is then found in the hash. A key
/// in neither is a miss.
#[test]
fn a_key_whose_slot_caches_another_falls_back_to_the_hash() {
    let Some(mut i) = common::instance("proxy_slot_share") else {
        return;
    };
    let (a, b) = (2000, same_slot(2000));
    let c = (1..=u16::MAX)
        .find(|&p| p != a && p != b && proxy_slot(&flow(p)) == proxy_slot(&flow(a)))
        .unwrap();
    i.insert_proxy(&flow(a), &meta(10)).unwrap();
    i.insert_proxy(&flow(b), &meta(11)).unwrap();
    assert_eq!(enc_si(&mut i, a), Some(10));
    assert_eq!(enc_si(&mut i, b), Some(11), "b from the hash");
    assert_eq!(i.proxy_cached(&flow(a)).unwrap(), Some(meta(10)));
    assert_eq!(
        i.proxy_cached(&flow(b)).unwrap(),
        None,
        "the slot stays a's"
    );
    assert_eq!(enc_si(&mut i, c), None, "c: in neither");
    assert_eq!(enc_si(&mut i, a), Some(10));

    // Dec gives b a new NSH: the hash and the slot take it.
    i.insert_cfg(
        LO,
        &StageCfg {
            mac: OUR_MAC,
            flags: CFG_ANY_DST,
            ifindex: LO,
        },
    )
    .unwrap();
    dec(&mut i, b, 12);
    assert_eq!(i.proxy_cached(&flow(b)).unwrap(), Some(meta(12)));
    assert_eq!(i.proxy_cached(&flow(a)).unwrap(), None);
    assert_eq!(enc_si(&mut i, b), Some(12));
    assert_eq!(enc_si(&mut i, a), Some(10), "a from the hash");
    assert_eq!(
        i.list_proxy().unwrap(),
        vec![(flow(a), meta(10)), (flow(b), meta(12))]
    );
}

/// User space deletes or replaces an entry the slot caches (the agent's `insert_proxy` /
/// `delete_proxy`, `fusebox run --tell-proxy`'s `ProxyTable::insert`): the next packet sees
/// the hash as it now is. A refill that read the slot's generation before user space's write
/// (a stage racing with it) does not answer either.
#[test]
fn an_entry_removed_or_replaced_from_user_space_no_longer_answers() {
    let Some(mut i) = common::instance("proxy_slot_user") else {
        return;
    };
    i.insert_proxy(&flow(3000), &meta(40)).unwrap();
    assert_eq!(enc_si(&mut i, 3000), Some(40));
    assert_eq!(i.proxy_cached(&flow(3000)).unwrap(), Some(meta(40)));

    i.delete_proxy(&flow(3000)).unwrap();
    assert_eq!(i.proxy_cached(&flow(3000)).unwrap(), None);
    assert_eq!(enc_si(&mut i, 3000), None, "deleted: a miss");

    i.insert_proxy(&flow(3000), &meta(41)).unwrap();
    assert_eq!(enc_si(&mut i, 3000), Some(41));
    i.insert_proxy(&flow(3000), &meta(42)).unwrap();
    assert_eq!(enc_si(&mut i, 3000), Some(42), "replaced");
    assert_eq!(i.proxy_cached(&flow(3000)).unwrap(), Some(meta(42)));

    // Another process's handle on the table (fusebox run --tell-proxy).
    let told = NshMeta {
        flags: PROXY_TOLD,
        ..meta(43)
    };
    ProxyTable::open(i.name())
        .unwrap()
        .insert(&flow(3000), &told)
        .unwrap();
    assert_eq!(enc_si(&mut i, 3000), Some(43), "told");

    // A stage read the generation and the hash, then user space deleted the entry, then the
    // stage's fill landed: its copy carries the old generation.
    let (s, old_gen) = slot(&i, &flow(3000));
    assert_eq!(s.answer(old_gen), Some((flow(3000), told)));
    i.delete_proxy(&flow(3000)).unwrap();
    let refill = ProxySlot {
        seq: s.seq + 4,
        valid: s.seq + 4,
        gen: old_gen,
        ..s
    };
    poke(&i, &flow(3000), &refill);
    assert_eq!(i.proxy_cached(&flow(3000)).unwrap(), None);
    assert_eq!(
        enc_si(&mut i, 3000),
        None,
        "the late refill does not answer"
    );
    assert_eq!(i.list_proxy().unwrap(), vec![]);
}

/// An entry a stage changes is what the next packet sees: Dec's entry, Dec's new NSH for the
/// same flow (the slot cached the old one; also while another CPU's fill of the old entry is
/// under way), and the key Enc learns (NAT-aware).
#[test]
fn an_entry_changed_by_a_stage_is_seen() {
    let Some(mut i) = common::instance("proxy_slot_stage") else {
        return;
    };
    i.insert_cfg(
        LO,
        &StageCfg {
            mac: OUR_MAC,
            flags: CFG_ANY_DST | CFG_NAT_LEARN,
            ifindex: LO,
        },
    )
    .unwrap();
    common::pin_cpu();
    dec(&mut i, 4000, 50);
    assert_eq!(i.proxy_cached(&flow(4000)).unwrap(), Some(meta(50)));
    assert_eq!(enc_si(&mut i, 4000), Some(50));
    dec(&mut i, 4000, 50);
    assert_eq!(enc_si(&mut i, 4000), Some(50));
    dec(&mut i, 4000, 60);
    assert_eq!(i.proxy_cached(&flow(4000)).unwrap(), Some(meta(60)));
    assert_eq!(enc_si(&mut i, 4000), Some(60), "Dec's new NSH");

    // Another CPU is filling the slot (odd seq) with the entry as it read it from the hash
    // before Dec's write; Dec's own fill gives way to it, but its invalidation (seq + 2) makes
    // the other fill's copy, finished after it, not answer.
    let (s, _) = slot(&i, &flow(4000));
    let s0 = s.seq;
    poke(&i, &flow(4000), &ProxySlot { seq: s0 + 1, ..s });
    dec(&mut i, 4000, 65);
    let now = slot(&i, &flow(4000)).0;
    assert_eq!((now.seq, now.meta), (s0 + 3, meta(60)), "Dec gave way");
    poke(
        &i,
        &flow(4000),
        &ProxySlot {
            seq: now.seq + 1,
            valid: s0 + 2,
            ..now
        },
    );
    assert_eq!(i.proxy_cached(&flow(4000)).unwrap(), None);
    assert_eq!(
        enc_si(&mut i, 4000),
        Some(65),
        "the late copy does not answer"
    );
    assert_eq!(i.proxy_cached(&flow(4000)).unwrap(), Some(meta(65)));
    assert_eq!(i.list_proxy().unwrap(), vec![(flow(4000), meta(65))]);

    // Enc learns a translated flow from this CPU's last Dec; then a user-space replacement of
    // the learned key, and Enc learning it again after a user-space delete.
    dec(&mut i, 4000, 70);
    let learned = NshMeta {
        flags: PROXY_LEARNED,
        ..meta(70)
    };
    assert_eq!(enc_si(&mut i, 4001), Some(70), "learned");
    assert_eq!(i.proxy_cached(&flow(4001)).unwrap(), Some(learned));
    assert_eq!(enc_si(&mut i, 4001), Some(70));
    i.delete_proxy(&flow(4001)).unwrap();
    dec(&mut i, 4000, 80);
    assert_eq!(enc_si(&mut i, 4001), Some(80), "learned again");
    assert_eq!(
        i.list_proxy().unwrap(),
        vec![
            (flow(4000), meta(80)),
            (
                flow(4001),
                NshMeta {
                    flags: PROXY_LEARNED,
                    ..meta(80)
                }
            )
        ]
    );
}
