//! The parallel mode (NFCompass' parallel branches merged by XOR) on hand-written chains
//! whose groups are sound by construction: the naive run and the parallel run must not
//! differ in anything `synth::verify::compare` looks at, with branches in the executor's
//! thread and on a helper thread, and the merge must really have happened.

use chain::layout::{Group, Parallel, Placement, Stage};
use chain::{ChainFile, Endpoint, Executor, ExitSink, ParallelStats, RunOptions};
use std::path::{Path, PathBuf};
use synth::verify::{compare, RunResult};
use wire::build::{Arp, Frame, Sum};

/// A fresh directory for one test, removed when dropped.
fn dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fusebox-parallel-{name}-"))
        .tempdir()
        .expect("temp dir")
}

/// Writes the NFs (name, forward path) as a line `n1 -> n2 -> …` entered at the first
/// NF's eth0; every NF passes replies straight back.
fn line(d: &Path, nfs: &[(&str, &str)]) -> PathBuf {
    let mut toml = String::new();
    for (name, fwd) in nfs {
        let click = format!(
            "FromDevice(eth0) -> {fwd} -> ToDevice(eth1);\nFromDevice(eth1) -> ToDevice(eth0);\n"
        );
        std::fs::write(d.join(format!("{name}.click")), click).expect("write");
        toml.push_str(&format!("[nf.{name}]\nclick = \"{name}.click\"\n"));
    }
    for w in nfs.windows(2) {
        toml.push_str(&format!(
            "[[link]]\nbetween = [\"{}.eth1\", \"{}.eth0\"]\n",
            w[0].0, w[1].0
        ));
    }
    toml.push_str(&format!("[[entry]]\nto = \"{}.eth0\"\n", nfs[0].0));
    let p = d.join("chain.toml");
    std::fs::write(&p, toml).expect("write");
    p
}

/// UDP and TCP flows, with expiring TTLs, bad checksums and ARP when `anomalies`.
fn trace(anomalies: bool) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for i in 0..400u32 {
        let src = [192, 168, 0, (i % 7) as u8 + 1];
        let dst = [10, 0, 2, (i % 5) as u8 + 1];
        let sport = 1000 + (i % 13) as u16;
        let mut f = if i % 3 == 0 {
            Frame::tcp(src, dst, sport, 80).payload(b"GET / HTTP/1.0")
        } else {
            Frame::udp(src, dst, sport, 53).payload(&[i as u8; 24])
        };
        if anomalies {
            if i % 17 == 0 {
                f = f.ttl(1);
            }
            if i % 23 == 0 {
                f = f.ip_sum(Sum::Wrong);
            }
            if i % 29 == 0 {
                v.push(
                    Arp::request([2, 0, 0, 0, 0, 9], [192, 168, 0, 9], [192, 168, 0, 1]).build(),
                );
                continue;
            }
        }
        v.push(f.build());
    }
    v
}

/// Runs `chain` over `frames` entered at `entry`, with `install` setting the mode up.
fn run(
    chain: &Path,
    entry: &str,
    frames: &[Vec<u8>],
    install: impl FnOnce(&mut Executor),
) -> (RunResult, Option<ParallelStats>) {
    run_with(chain, entry, frames, &RunOptions::default(), install)
}

/// [`run`] with run options (replies reflected).
fn run_with(
    chain: &Path,
    entry: &str,
    frames: &[Vec<u8>],
    opts: &RunOptions,
    install: impl FnOnce(&mut Executor),
) -> (RunResult, Option<ParallelStats>) {
    let c = ChainFile::load(chain).expect("chain file");
    let mut ex =
        Executor::new(&c, opts, |_, _| Ok(ExitSink::Memory(Vec::new()))).expect("executor");
    install(&mut ex);
    let (nf, iface) = entry.split_once('.').expect("NF.IFACE");
    let at = ex
        .entry(&Endpoint {
            nf: nf.into(),
            iface: iface.into(),
        })
        .expect("entry");
    let records: Vec<ports::pcap::Record> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| ports::pcap::Record {
            timestamp: packet::Timestamp(1_000_000 * (i as u64 + 1)),
            precision: packet::Precision::Micro,
            data: f.clone(),
            orig_len: f.len() as u32,
        })
        .collect();
    ex.replay(&[(at, records)], 2);
    let exits = ex.finish().expect("finish");
    let stats = ex.parallel_stats();
    (
        RunResult {
            exits,
            summary: ex.summary(),
            state: ex.state_dump(),
            errors: Vec::new(),
        },
        stats,
    )
}

/// `naive` and `other` agree on everything.
fn same(naive: &RunResult, other: &RunResult) {
    let d = compare(naive, other);
    assert!(
        d.is_empty(),
        "{} differences: {:#?}",
        d.len(),
        &d[..d.len().min(8)]
    );
    assert!(naive.summary.balanced());
    assert!(naive.packets() > 0);
}

/// A group of every NF of the line.
fn all(n: usize) -> Parallel {
    Parallel {
        groups: vec![Group {
            nfs: (0..n).collect(),
        }],
    }
}

const MAC: &str = "EtherRewrite(02:00:00:00:00:aa, 02:00:00:00:00:bb)";
const TTL: &str = "Strip(14) -> CheckIPHeader -> DecIPTTL -> Unstrip(14)";
const FW: &str = "Strip(14) -> CheckIPHeader -> IPFilter(allow udp, deny all) -> Unstrip(14)";
const COUNT: &str = "Counter";

/// MACs, TTL and a firewall that drops TCP, and a counter: four NFs whose writes are on
/// disjoint bytes and whose reads are not written before them (the firewall's header check
/// reads the checksum the TTL NF updates, valid either way). Drops by the TTL NF and the
/// firewall stop the group as in the naive chain, with the same reasons.
#[test]
fn writers_on_disjoint_bytes_merge_as_the_naive_chain() {
    let scratch = dir("disjoint");
    let d = scratch.path();
    let chain = line(
        d,
        &[("mac", MAC), ("ttl", TTL), ("fw", FW), ("count", COUNT)],
    );
    let frames = trace(true);
    let (naive, none) = run(&chain, "mac.eth0", &frames, |_| {});
    assert_eq!(none, None);
    let (par, stats) = run(&chain, "mac.eth0", &frames, |ex| {
        assert!(ex.enable_parallel(&all(4)).is_empty());
    });
    same(&naive, &par);
    let s = stats.expect("parallel stats");
    assert_eq!(s.groups, 1);
    assert!(s.merged > 0 && s.dropped > 0, "{s:?}");
    assert_eq!(s.discarded, 0);
    // The drop reasons the branches met are the naive ones.
    for r in ["ttl-expired", "bad-ip-checksum", "filter-deny"] {
        assert!(naive.summary.totals.drops.contains_key(r), "{r}");
    }
    // Two groups of two, and every NF of the group of three, give the same too.
    for layout in [
        Parallel {
            groups: vec![Group { nfs: vec![0, 1] }, Group { nfs: vec![2, 3] }],
        },
        Parallel {
            groups: vec![Group { nfs: vec![1, 2, 3] }],
        },
    ] {
        let (par, stats) = run(&chain, "mac.eth0", &frames, |ex| {
            assert!(ex.enable_parallel(&layout).is_empty());
        });
        same(&naive, &par);
        assert!(stats.is_some_and(|s| s.merged > 0));
    }
}

/// Branches on a helper thread (a placement puts the TTL NF and the counter on processor
/// 1): on traffic none of the group's NFs drops, the same as naive, with the merge done.
#[test]
fn branches_on_a_helper_thread_merge_as_the_naive_chain() {
    let scratch = dir("helper");
    let d = scratch.path();
    let chain = line(
        d,
        &[("mac", MAC), ("ttl", TTL), ("fw", FW), ("count", COUNT)],
    );
    let frames: Vec<Vec<u8>> = trace(false)
        .into_iter()
        .filter(|f| f.get(23) == Some(&wire::ip::protocol::UDP))
        .collect();
    let placement = Placement {
        stages: vec![
            Stage {
                nfs: vec![0, 2],
                processor: 0,
            },
            Stage {
                nfs: vec![1, 3],
                processor: 1,
            },
        ],
        replicas: 1,
    };
    let (naive, _) = run(&chain, "mac.eth0", &frames, |_| {});
    let (par, stats) = run(&chain, "mac.eth0", &frames, |ex| {
        assert!(ex
            .enable_parallel_placed(&all(4), Some(&placement))
            .is_empty());
    });
    same(&naive, &par);
    let s = stats.expect("parallel stats");
    assert_eq!(s.remote_branches, 2);
    let n = 2 * frames.len() as u64;
    assert_eq!(
        (s.merged, s.dropped, s.irregular, s.discarded),
        (n, 0, 0, 0),
        "{s:?}"
    );
    // Handed off in batches (one hand-off per batch of inputs), not packet by packet.
    assert_eq!((s.batched_groups, s.batched), (1, n), "{s:?}");
    assert!(s.handoffs > 0 && s.handoffs * 8 <= n, "{s:?}");
    // The helper's NFs are home again: their counters are in the summary.
    let count = par
        .summary
        .nfs
        .iter()
        .find(|n| n.name == "count")
        .expect("count");
    assert_eq!(count.input, n);
}

/// A branch that leaves by another way (ARP to an exit of its own) ends the group for that
/// packet: the rest runs as written, and the result is still the naive one.
#[test]
fn a_branch_leaving_by_another_way_runs_on_as_written() {
    let scratch = dir("irregular");
    let d = scratch.path();
    let chain = line(
        d,
        &[
            (
                "cls",
                "c :: Classifier(12/0806, -); c[0] -> ToDevice(arp); c[1]",
            ),
            ("ttl", TTL),
            ("mac", MAC),
        ],
    );
    let frames = trace(true);
    let (naive, _) = run(&chain, "cls.eth0", &frames, |_| {});
    let (par, stats) = run(&chain, "cls.eth0", &frames, |ex| {
        assert!(ex.enable_parallel(&all(3)).is_empty());
    });
    same(&naive, &par);
    let s = stats.expect("parallel stats");
    assert!(s.irregular > 0 && s.merged > 0, "{s:?}");
    assert!(naive.exits.get("cls.arp").is_some_and(|v| !v.is_empty()));
}

/// Groups that are not NFs consecutive along links are refused and run as written.
#[test]
fn groups_not_along_links_are_refused() {
    let scratch = dir("refused");
    let d = scratch.path();
    let chain = line(d, &[("mac", MAC), ("ttl", TTL), ("count", COUNT)]);
    let frames = trace(true);
    let (naive, _) = run(&chain, "mac.eth0", &frames, |_| {});
    let (par, stats) = run(&chain, "mac.eth0", &frames, |ex| {
        let refused = ex.enable_parallel(&Parallel {
            groups: vec![
                Group { nfs: vec![0, 2] },
                Group { nfs: vec![1] },
                Group { nfs: vec![1, 9] },
                Group { nfs: vec![0, 1, 0] },
            ],
        });
        assert_eq!(refused.len(), 4, "{refused:?}");
    });
    same(&naive, &par);
    assert_eq!(stats, None);
}

/// NFs 0 and 2 at home, 1 and 3 on processor 1.
fn halves() -> Placement {
    Placement {
        stages: vec![
            Stage {
                nfs: vec![0, 2],
                processor: 0,
            },
            Stage {
                nfs: vec![1, 3],
                processor: 1,
            },
        ],
        replicas: 1,
    }
}

/// Batched hand-off to a helper, whatever the batch (one packet, a few, more than a
/// pass), with one group of four and with two groups of two (the second group's packets
/// wait while the first's run on): the naive results, every packet merged, one hand-off per
/// helper and batch.
#[test]
fn batched_hand_off_is_the_naive_chain_whatever_the_batch() {
    let scratch = dir("batched");
    let d = scratch.path();
    let chain = line(
        d,
        &[("mac", MAC), ("ttl", TTL), ("fw", FW), ("count", COUNT)],
    );
    let frames: Vec<Vec<u8>> = trace(false)
        .into_iter()
        .filter(|f| f.get(23) == Some(&wire::ip::protocol::UDP))
        .collect();
    let n = 2 * frames.len() as u64;
    for batch in [1, 7, 64, 1000] {
        let opts = RunOptions {
            batch,
            ..RunOptions::default()
        };
        let (naive, _) = run_with(&chain, "mac.eth0", &frames, &opts, |_| {});
        for layout in [
            all(4),
            Parallel {
                groups: vec![Group { nfs: vec![0, 1] }, Group { nfs: vec![2, 3] }],
            },
        ] {
            let groups = layout.groups.len() as u64;
            let (par, stats) = run_with(&chain, "mac.eth0", &frames, &opts, |ex| {
                for g in &layout.groups {
                    assert_eq!(ex.group_batching(&g.nfs), Ok(()));
                }
                assert!(ex
                    .enable_parallel_placed(&layout, Some(&halves()))
                    .is_empty());
            });
            same(&naive, &par);
            let s = stats.expect("parallel stats");
            assert_eq!(s.batched_groups, groups, "{s:?}");
            assert_eq!((s.merged, s.batched), (n * groups, n * groups), "{s:?}");
            assert_eq!((s.dropped, s.irregular, s.discarded), (0, 0, 0), "{s:?}");
            // Per pass, one hand-off per group and batch.
            let per_pass = (frames.len() as u64).div_ceil(batch as u64);
            assert_eq!(s.handoffs, 2 * per_pass * groups, "batch {batch}: {s:?}");
        }
    }
}

/// A branch on a helper that drops (the TTL NF): the group stops there; the later branches
/// (an NF keeping no state, as the planner requires after one that may drop) ran meanwhile
/// in this thread, and their work is discarded. The results are still the naive ones, drops
/// and reasons included.
#[test]
fn a_helper_branch_that_drops_discards_the_later_work() {
    let scratch = dir("helper-drop");
    let d = scratch.path();
    let chain = line(d, &[("mac", MAC), ("ttl", TTL), ("null", "Null")]);
    let frames = trace(true);
    let (naive, _) = run(&chain, "mac.eth0", &frames, |_| {});
    let placement = Placement {
        stages: vec![
            Stage {
                nfs: vec![0, 2],
                processor: 0,
            },
            Stage {
                nfs: vec![1],
                processor: 1,
            },
        ],
        replicas: 1,
    };
    let (par, stats) = run(&chain, "mac.eth0", &frames, |ex| {
        assert!(ex
            .enable_parallel_placed(&all(3), Some(&placement))
            .is_empty());
    });
    same(&naive, &par);
    let s = stats.expect("parallel stats");
    assert!(s.dropped > 0 && s.discarded > 0 && s.merged > 0, "{s:?}");
    assert!(naive.summary.totals.drops.contains_key("ttl-expired"));
}

/// Replies reflected back through the group's last NF (they would meet its state after
/// later packets' branches): the group is not batched — its helper gets packets one by one —
/// and the results are the naive ones.
#[test]
fn a_group_replies_come_back_to_is_handed_off_packet_by_packet() {
    let scratch = dir("helper-reflect");
    let d = scratch.path();
    let chain = line(
        d,
        &[("mac", MAC), ("ttl", TTL), ("fw", FW), ("count", COUNT)],
    );
    let frames: Vec<Vec<u8>> = trace(false)
        .into_iter()
        .filter(|f| f.get(23) == Some(&wire::ip::protocol::UDP))
        .collect();
    let opts = RunOptions {
        reflect: vec![Endpoint::parse("count.eth1").expect("endpoint")],
        ..RunOptions::default()
    };
    let (naive, _) = run_with(&chain, "mac.eth0", &frames, &opts, |_| {});
    let (par, stats) = run_with(&chain, "mac.eth0", &frames, &opts, |ex| {
        let why = ex.group_batching(&[0, 1, 2, 3]).expect_err("not batchable");
        assert!(why.contains("come back"), "{why}");
        assert!(ex
            .enable_parallel_placed(&all(4), Some(&halves()))
            .is_empty());
    });
    same(&naive, &par);
    let s = stats.expect("parallel stats");
    let n = 2 * frames.len() as u64;
    assert_eq!((s.batched_groups, s.batched), (0, 0), "{s:?}");
    assert_eq!((s.merged, s.handoffs), (n, n), "{s:?}");
}
