//! Which branches go to other workers (`plan::offload`): only after NFs that never drop,
//! only when the profiled cost is above the hand-off's, only for groups handed off in
//! batches, and spread so the heaviest go first.

mod common;

use chain::layout::{Group, Parallel};
use plan::offload::{offload, Costs};
use plan::profile::profiles;

fn all(n: usize) -> Parallel {
    Parallel {
        groups: vec![Group {
            nfs: (0..n).collect(),
        }],
    }
}

const TTL: &str = "Strip(14) -> CheckIPHeader -> DecIPTTL -> Unstrip(14)";

fn costs(nf_ns: &[f64], handoff_ns: f64) -> Costs {
    Costs {
        nf_ns: nf_ns.to_vec(),
        handoff_ns,
    }
}

#[test]
fn only_branches_after_nfs_that_never_drop_go_and_only_when_they_pay() {
    // The counters never drop; ttl may (expired, bad header); the last counter comes after it.
    let ex = common::linear("offload-rules", &["Counter", "Counter", TTL, "Counter"]);
    let p = profiles(&ex);
    let drops: Vec<(bool, &std::collections::BTreeSet<String>)> =
        p.iter().map(|x| (x.may_drop, &x.drop_reasons)).collect();
    assert!(
        !p[0].may_drop && !p[1].may_drop && p[2].may_drop,
        "{drops:?}"
    );
    let c = costs(&[500.0, 800.0, 900.0, 700.0], 100.0);
    let d = offload(&ex, &all(4), &p, 2, Some(&c));
    let at: Vec<usize> = d.branches.iter().map(|b| b.worker).collect();
    // n0 starts the group; n1 and n2 come after NFs that never drop; n3 after ttl.
    assert_eq!(at[0], 0);
    assert_eq!(at[3], 0, "{}", d.text());
    assert!(d.branches[3].why.contains("n2 may drop"), "{}", d.text());
    // The heaviest movable branch (n2, 900 ns) goes to worker 1; n1 (800 ns) then lands
    // where there is less work: the executor's thread has n0 and n3 (1200 ns), worker 1
    // has 900 ns, so n1 goes to worker 1 too.
    assert_eq!((at[1], at[2]), (1, 1), "{}", d.text());
    let pl = d.placement.expect("a placement");
    let worker1 = pl
        .stages
        .iter()
        .find(|s| s.processor == 1)
        .expect("stage 1");
    assert_eq!(worker1.nfs, vec![1, 2]);
    // One worker, no costs, or branches lighter than the hand-off: everything stays home.
    for (workers, c) in [
        (1, Some(c.clone())),
        (2, None),
        (2, Some(costs(&[50.0; 4], 100.0))),
    ] {
        let d = offload(&ex, &all(4), &p, workers, c.as_ref());
        assert!(d.placement.is_none(), "{}", d.text());
        assert!(d.branches.iter().all(|b| b.worker == 0));
    }
    let light = offload(&ex, &all(4), &p, 2, Some(&costs(&[50.0; 4], 100.0)));
    assert!(light.branches[1].why.contains("not above the hand-off"));
}

#[test]
fn a_group_packets_come_back_to_stays_in_one_thread() {
    // n2 sends everything back to n1, whose reverse path leads out by n0: the group n0|n1
    // cannot wait for batched hand-offs.
    let ex = common::chain_of(
        "offload-back",
        &[
            "FromDevice(eth0) -> Counter -> ToDevice(eth1); FromDevice(eth1) -> ToDevice(eth0);",
            "FromDevice(eth0) -> Counter -> ToDevice(eth1); FromDevice(eth1) -> Counter -> ToDevice(eth0);",
            "FromDevice(eth0) -> ToDevice(eth0);",
        ],
    );
    let p = profiles(&ex);
    let layout = Parallel {
        groups: vec![Group { nfs: vec![0, 1] }],
    };
    let why = ex.group_batching(&[0, 1]).expect_err("not batchable");
    assert!(why.contains("come back"), "{why}");
    let d = offload(&ex, &layout, &p, 2, Some(&costs(&[1e4; 3], 1.0)));
    assert!(d.placement.is_none(), "{}", d.text());
    assert!(d.branches[1]
        .why
        .contains("cannot be handed off in batches"));
}
