//! Shared by the stage fixtures: a unique instance per test (removed by its Drop even when
//! the test fails) and frame builders independent of the stages.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use stages::maps::{Counter, CounterStage};
use stages::Instance;

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
