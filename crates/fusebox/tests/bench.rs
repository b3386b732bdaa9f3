//! `fusebox bench --quick` runs every scenario, prints well-formed JSON records (also written
//! to the output directory) with the figures the issue asks for, and draws the charts when
//! the font exists. Never a speed threshold: the machines are shared.

mod common;
use common::*;
use serde_json::Value;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn parse(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn find<'a>(records: &'a [Value], what: &[(&str, Value)]) -> &'a Value {
    records
        .iter()
        .find(|r| what.iter().all(|(k, v)| &r[*k] == v))
        .unwrap_or_else(|| panic!("no record {what:?}"))
}

/// min <= median <= max, all positive.
fn triple(v: &Value) -> f64 {
    let (lo, med, hi) = (
        v["min"].as_f64().unwrap(),
        v["median"].as_f64().unwrap(),
        v["max"].as_f64().unwrap(),
    );
    assert!(lo > 0.0 && lo <= med && med <= hi, "{v}");
    med
}

/// A configuration's record: rates consistent with each other and the Gbit/s convention
/// (frame with FCS + 20 bytes), latency percentiles ordered for chains, none for the
/// reference loop.
fn check_config(r: &Value, frame: u64) {
    let mpps = triple(&r["mpps"]);
    let gbps = triple(&r["gbps"]);
    let ns = triple(&r["ns_per_packet"]);
    let per_bit = gbps / (mpps * (frame + 20) as f64 * 8.0 / 1e3);
    assert!((per_bit - 1.0).abs() < 0.01, "Gbit/s convention: {r}");
    assert!((ns * mpps / 1e3 - 1.0).abs() < 1e-6, "ns/packet: {r}");
    if let Some(c) = r["cycles_per_packet"].as_f64() {
        assert!(c > 0.0, "{r}");
    }
    // Loops of their own (the reference, an operator pipeline, NFs on threads joined by
    // rings) have no latency pass.
    let loops = [
        "reference",
        "operators-loop",
        "pipeline",
        "rings-copy",
        "rings-0copy",
    ];
    if loops.iter().any(|m| r["mode"] == *m) {
        assert!(r["latency_ns"].is_null(), "{r}");
    } else {
        let l = &r["latency_ns"];
        let (a, b, c) = (
            l["p50"].as_f64().unwrap(),
            l["p99"].as_f64().unwrap(),
            l["p99_9"].as_f64().unwrap(),
        );
        assert!(a > 0.0 && a <= b && b <= c, "{r}");
    }
}

#[test]
fn quick_bench_runs_every_scenario_and_prints_json_records() {
    let dir = scratch("bench");
    let out = dir.join("out");
    let o = fusebox_ok(
        &root(),
        &[
            "bench",
            "--quick",
            "--json",
            "--reps",
            "1",
            "--charts",
            out.to_str().unwrap(),
        ],
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let records = parse(&text);
    // The same records are in the output directory.
    let file = std::fs::read_to_string(out.join("bench.json")).unwrap();
    assert_eq!(parse(&file), records);
    for sc in ["routers", "napts"] {
        for batch in [32, 128] {
            for (nfs, mode) in [
                (0, "reference"),
                (1, "naive"),
                (2, "naive"),
                (5, "naive"),
                (10, "naive"),
                (1, "synth"),
                (10, "synth"),
            ] {
                let r = find(
                    &records,
                    &[
                        ("scenario", sc.into()),
                        ("batch", batch.into()),
                        ("nfs", nfs.into()),
                        ("mode", mode.into()),
                    ],
                );
                check_config(r, 64);
            }
            for ratio in ["synth 10 / naive 1", "naive 1 / reference"] {
                let r = find(
                    &records,
                    &[
                        ("scenario", sc.into()),
                        ("batch", batch.into()),
                        ("ratio", ratio.into()),
                    ],
                );
                triple(r);
            }
        }
    }
    for chain in ["routers", "napts"] {
        for frame in [64u64, 128, 256, 512, 1024, 1500] {
            for (nfs, mode) in [(1, "naive"), (10, "naive"), (10, "synth")] {
                let r = find(
                    &records,
                    &[
                        ("scenario", "frame-sizes".into()),
                        ("chain", chain.into()),
                        ("frame", frame.into()),
                        ("nfs", nfs.into()),
                        ("mode", mode.into()),
                    ],
                );
                check_config(r, frame);
            }
        }
    }
    for chain in ["routers", "napts"] {
        for mode in ["naive", "synth", "fastpath"] {
            for nfs in [1, 10] {
                for workers in [1, 2] {
                    let r = find(
                        &records,
                        &[
                            ("scenario", "workers".into()),
                            ("chain", chain.into()),
                            ("nfs", nfs.into()),
                            ("mode", mode.into()),
                            ("workers", workers.into()),
                        ],
                    );
                    check_config(r, 64);
                }
                let ratio = format!("{mode} {nfs} x2 / {mode} {nfs}");
                triple(find(
                    &records,
                    &[
                        ("scenario", "workers".into()),
                        ("chain", chain.into()),
                        ("ratio", ratio.into()),
                    ],
                ));
            }
        }
    }
    for sc in ["ttl", "lpm"] {
        for mode in ["reference", "naive", "synth", "operators", "operators-loop"] {
            check_config(
                find(&records, &[("scenario", sc.into()), ("mode", mode.into())]),
                64,
            );
        }
        for ratio in [
            "synth 1 / naive 1",
            "operators 1 / naive 1",
            "operators 1 / synth 1",
        ] {
            triple(find(
                &records,
                &[("scenario", sc.into()), ("ratio", ratio.into())],
            ));
        }
    }
    for ratio in ["operators 1 / reference", "operators-synth 1 / synth 1"] {
        triple(find(
            &records,
            &[("scenario", "ttl".into()), ("ratio", ratio.into())],
        ));
    }
    // NetBricks Fig. 7: operator TTL NFs on one core against NFs on threads joined by rings.
    for k in [1, 2, 4] {
        for mode in ["naive", "pipeline", "rings-copy", "rings-0copy"] {
            check_config(
                find(
                    &records,
                    &[
                        ("scenario", "ops-chain".into()),
                        ("nfs", k.into()),
                        ("mode", mode.into()),
                    ],
                ),
                64,
            );
        }
        for ratio in [
            format!("pipeline {k} / rings-copy {k}"),
            format!("rings-0copy {k} / rings-copy {k}"),
        ] {
            triple(find(
                &records,
                &[("scenario", "ops-chain".into()), ("ratio", ratio.into())],
            ));
        }
    }
    // NetBricks §5: the NFs of examples/bricks and their Click counterparts on one and two
    // workers.
    for nf in ["TTLNF", "FirewallNF", "MonitorNF", "NatNF", "MaglevNF"] {
        for mode in ["operators", "click"] {
            for workers in [1, 2] {
                check_config(
                    find(
                        &records,
                        &[
                            ("scenario", "bricks".into()),
                            ("nf", nf.into()),
                            ("mode", mode.into()),
                            ("workers", workers.into()),
                        ],
                    ),
                    64,
                );
            }
        }
        for ratio in ["operators 1 x2 / operators 1", "operators 1 / click 1"] {
            triple(find(
                &records,
                &[
                    ("scenario", "bricks".into()),
                    ("nf", nf.into()),
                    ("ratio", ratio.into()),
                ],
            ));
        }
    }
    check_config(
        find(
            &records,
            &[
                ("scenario", "bricks".into()),
                ("nf", "MacSwapNF".into()),
                ("mode", "operators".into()),
            ],
        ),
        64,
    );
    // SpeedyBox: blacklists naive and fastpath, the early drop, the real chains' flow times.
    for (nfs, mode) in [(1, "naive"), (3, "naive"), (1, "fastpath"), (3, "fastpath")] {
        check_config(
            find(
                &records,
                &[
                    ("scenario", "blacklist".into()),
                    ("nfs", nfs.into()),
                    ("mode", mode.into()),
                ],
            ),
            64,
        );
    }
    triple(find(
        &records,
        &[
            ("scenario", "blacklist-ffd".into()),
            ("ratio", "fastpath 3 / naive 3".into()),
        ],
    ));
    for chain in ["chain1.toml", "chain2.toml"] {
        for mode in ["naive", "fastpath", "fastpath-2cores"] {
            let r = find(
                &records,
                &[
                    ("scenario", "speedybox-flows".into()),
                    ("chain", chain.into()),
                    ("mode", mode.into()),
                ],
            );
            let (p10, p99) = (
                r["ns"]["p10"].as_u64().unwrap(),
                r["ns"]["p99"].as_u64().unwrap(),
            );
            assert!(p10 > 0 && p10 <= p99, "{r}");
            assert!(r["flows"].as_u64().unwrap() >= 100, "{r}");
        }
    }
    // NFCompass Fig. 13: four firewalls, IDSes and IPsec gateways, sequential and in
    // parallel branches (NFs 2 and 4 on a helper, or all in one thread).
    for nf in ["fw", "ids", "ipsec"] {
        for (mode, workers) in [
            ("sequential", 1),
            ("sequential", 2),
            ("parallel-b-halves", 2),
            ("parallel-c-halves", 2),
            ("parallel-b-1thread", 1),
        ] {
            for batch in [1, 32] {
                let r = find(
                    &records,
                    &[
                        ("scenario", "parallel".into()),
                        ("nf", nf.into()),
                        ("mode", mode.into()),
                        ("workers", workers.into()),
                        ("batch", batch.into()),
                    ],
                );
                assert_eq!(r["nfs"], 4, "{r}");
                check_config(r, 64);
            }
        }
        for ratio in [
            "parallel-b-halves 4 x2 / sequential 4",
            "parallel-c-halves 4 x2 / sequential 4",
            "parallel-b-1thread 4 / sequential 4",
        ] {
            triple(find(
                &records,
                &[
                    ("scenario", "parallel".into()),
                    ("nf", nf.into()),
                    ("ratio", ratio.into()),
                ],
            ));
        }
    }
    // The planner groups the firewalls (they never drop): its layouts run, with the branches
    // where it puts them, and each branch's reason is noted.
    for mode in ["parallel-b", "parallel-c"] {
        let r = find(
            &records,
            &[
                ("scenario", "parallel".into()),
                ("nf", "fw".into()),
                ("mode", mode.into()),
            ],
        );
        check_config(r, 64);
    }
    let fw_notes: Vec<&str> = records
        .iter()
        .filter(|r| r["scenario"] == "parallel" && r["nf"] == "fw")
        .filter_map(|r| r["note"].as_str())
        .collect();
    assert!(
        fw_notes
            .iter()
            .any(|n| n.contains("fw2") && n.contains("worker")),
        "{fw_notes:?}"
    );
    // IPsec stays sequential in the plan, and the bench says why.
    let why = records
        .iter()
        .filter(|r| r["scenario"] == "parallel" && r["nf"] == "ipsec")
        .filter_map(|r| r["note"].as_str())
        .find(|n| n.starts_with("parallel-b:"))
        .expect("the planner's reason for IPsec");
    assert!(
        why.contains("keeps the NFs sequential") && why.contains("length"),
        "{why}"
    );
    // Placement: the plan `fusebox plan --profile` made from the scenario's trace, run by the
    // pipeline runtime, beside one core and two replicas, each with the planner's prediction.
    for (mode, workers) in [("naive", 1), ("naive", 2)] {
        let r = find(
            &records,
            &[
                ("scenario", "placement".into()),
                ("chain", "isp".into()),
                ("mode", mode.into()),
                ("workers", workers.into()),
            ],
        );
        check_config(r, 64);
    }
    let plan = find(
        &records,
        &[
            ("scenario", "placement".into()),
            ("chain", "isp".into()),
            ("mode", "plan".into()),
        ],
    );
    triple(&plan["mpps"]);
    for key in ["naive 3", "naive 3 x2", "plan 3"] {
        let r = find(
            &records,
            &[
                ("scenario", "placement".into()),
                ("chain", "isp".into()),
                ("prediction", key.into()),
            ],
        );
        for k in ["predicted_mpps", "measured_mpps", "measured_over_one_core"] {
            assert!(r[k].as_f64().unwrap() > 0.0, "{k}: {r}");
        }
    }
    triple(find(
        &records,
        &[
            ("scenario", "placement".into()),
            ("chain", "isp".into()),
            ("ratio", "plan 3 / naive 3 x2".into()),
        ],
    ));
    let written = plan::file::PlanFile::load(&out.join("placement-isp.plan")).unwrap();
    let isp = chain::ChainFile::load(&root().join("examples/isp/chain.toml")).unwrap();
    written
        .check(&isp, &out.join("placement-isp.plan"))
        .unwrap();
    assert!(written.predicted.unwrap().overall > 0.0);
    assert_eq!(
        find(
            &records,
            &[("scenario", "lpm".into()), ("mode", "naive".into())]
        )["routes"]["count"],
        16384
    );
    // The generated LPM configuration is kept, with its 16k routes and a default.
    let lpm = std::fs::read_to_string(out.join("lpm-16k.click")).unwrap();
    assert!(lpm.contains("DirectIPLookup("), "{lpm}");
    assert_eq!(
        lpm.lines().filter(|l| l.trim().ends_with(',')).count(),
        16384
    );
    // Charts, when the font is there (the set-up and CI scripts install it).
    let charts = [
        "fig7-routers.png",
        "fig7-napts.png",
        "fig8-routers.png",
        "fig8-napts.png",
        "ttl-lpm.png",
        "speedybox-blacklist.png",
        "speedybox-flows-cdf.png",
    ];
    let font = std::path::Path::new(FONT).exists();
    for c in charts {
        let png = std::fs::read(out.join(c)).ok();
        if font {
            let png = png.unwrap_or_else(|| panic!("{c} not written"));
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{c}");
        } else {
            assert!(png.is_none(), "{c} written without the font");
        }
    }
}

#[test]
fn bench_picks_the_batch_and_refuses_bad_arguments() {
    let dir = scratch("bench-args");
    let o = fusebox_ok(
        &dir,
        &[
            "bench",
            "--quick",
            "--json",
            "--reps",
            "1",
            "--scenario",
            "ttl",
            "--batch",
            "16",
            "--no-charts",
            "--examples",
            root().join("examples").to_str().unwrap(),
            "--charts",
            "o",
        ],
    );
    let records = parse(&String::from_utf8(o.stdout).unwrap());
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(r["scenario"], "ttl", "{r}");
        assert_eq!(r["batch"], 16, "{r}");
    }
    assert!(dir.join("o/bench.json").exists());
    assert!(!dir.join("o/ttl-lpm.png").exists(), "--no-charts drew");
    for (args, expect) in [
        (&["bench", "--scenario", "nope"][..], "--scenario nope"),
        (&["bench", "--batch", "0"][..], "--batch"),
    ] {
        let o = fusebox(&dir, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expect), "{err}");
    }
}

#[test]
fn newflows_runs_every_mode_on_fresh_chains() {
    let dir = scratch("bench-newflows");
    let o = fusebox_ok(
        &dir,
        &[
            "bench",
            "--quick",
            "--json",
            "--reps",
            "1",
            "--scenario",
            "newflows",
            "--no-charts",
            "--examples",
            root().join("examples").to_str().unwrap(),
            "--charts",
            "o",
        ],
    );
    let records = parse(&String::from_utf8(o.stdout).unwrap());
    for r in &records {
        assert_eq!(r["scenario"], "newflows", "{r}");
    }
    for (chain, nfs) in [("napt", 1), ("isp", 3)] {
        for frame in [64u64, 1500] {
            for mode in ["naive", "synth", "fastpath"] {
                let r = find(
                    &records,
                    &[
                        ("chain", chain.into()),
                        ("frame", frame.into()),
                        ("nfs", nfs.into()),
                        ("mode", mode.into()),
                    ],
                );
                let mpps = triple(&r["mpps"]);
                let ns = triple(&r["ns_per_packet"]);
                assert!((ns * mpps / 1e3 - 1.0).abs() < 1e-6, "ns/packet: {r}");
                assert_eq!(r["packets"], 100_000, "{r}");
                // Each pass on a chain built afresh: no latency pass.
                assert!(r["latency_ns"].is_null(), "{r}");
            }
            for ratio in [
                format!("synth {nfs} / naive {nfs}"),
                format!("fastpath {nfs} / naive {nfs}"),
            ] {
                let r = find(
                    &records,
                    &[
                        ("chain", chain.into()),
                        ("frame", frame.into()),
                        ("ratio", ratio.into()),
                    ],
                );
                triple(r);
            }
        }
    }
}
