//! `fusebox plan --profile`: the ISP chain profiled over a generated trace and placed on two
//! workers; the PLAN file it writes loads and matches the chain; bad arguments are refused.

mod common;
use common::*;

#[test]
fn plan_profiles_places_and_writes_a_plan() {
    let dir = scratch("plan-place");
    gen_trace(
        &dir,
        "t.pcap",
        &[
            "--packets",
            "3000",
            "--flows",
            "40",
            "--dst",
            "198.51.100.0/24",
        ],
    );
    let chain = root().join("examples/isp/chain.toml");
    let chain_s = chain.to_str().unwrap();
    let o = fusebox_ok(
        &dir,
        &[
            "plan",
            chain_s,
            "--profile",
            "fw.eth0=t.pcap",
            "--workers",
            "2",
            "--cross-ns",
            "20",
            "--profile-ms",
            "20",
            "--out",
            "p.plan",
            "--accelerator",
            "20000,256,50,8,100",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &v["placement"];
    assert_eq!(
        p["profile"]["nfs"],
        serde_json::json!(["fw", "router", "napt"])
    );
    let candidates = p["placement"]["candidates"].as_array().unwrap();
    // Replicas, the exact forward pipeline (and the best using both workers when it uses
    // one: which depends on the measured costs) and the two partitioners' pipelines on two
    // workers.
    let hows: Vec<&str> = candidates
        .iter()
        .map(|c| c["how"].as_str().unwrap())
        .collect();
    let one_stage = candidates[1]["stages"].as_array().unwrap().len() == 1;
    let mut want = vec!["replicas", "pipeline/exact"];
    if one_stage {
        want.push("pipeline/exact-all");
    }
    want.extend(["pipeline/METIS", "pipeline/clustering"]);
    assert_eq!(hows, want, "{p}");
    // No heuristic pipeline is predicted faster than the exact one.
    let exact = candidates[1]["predicted_pps"].as_f64().unwrap();
    for c in &candidates[2..] {
        assert!(
            c["predicted_pps"].as_f64().unwrap() <= exact * (1.0 + 1e-9),
            "{p}"
        );
    }
    let chosen = p["placement"]["chosen"].as_u64().unwrap() as usize;
    assert!(chosen < candidates.len());
    assert!(candidates[chosen]["predicted_pps"].as_f64().unwrap() > 0.0);
    assert_eq!(p["offload"].as_array().unwrap().len(), 2);
    // The PLAN file holds the chosen placement for this chain.
    let plan = plan::file::PlanFile::load(&dir.join("p.plan")).unwrap();
    let file = chain::ChainFile::load(&chain).unwrap();
    plan.check(&file, &dir.join("p.plan")).unwrap();
    assert_eq!(plan.made_by, candidates[chosen]["how"].as_str().unwrap());
    let mut nfs: Vec<usize> = plan
        .placement
        .stages
        .iter()
        .flat_map(|s| s.nfs.clone())
        .collect();
    nfs.sort();
    assert_eq!(nfs, vec![0, 1, 2]);
    assert!(plan.predicted.unwrap().overall > 0.0);
    // The text names every candidate and marks the choice.
    let o = fusebox_ok(
        &dir,
        &[
            "plan",
            chain_s,
            "--profile",
            "t.pcap",
            "--workers",
            "2",
            "--cross-ns",
            "20",
            "--profile-ms",
            "5",
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    for want in [
        "replicas",
        "pipeline/exact",
        "pipeline/METIS",
        "pipeline/clustering",
        "* ",
        "Mpps predicted",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
}

#[test]
fn plan_refuses_bad_placement_arguments() {
    let dir = scratch("plan-place-bad");
    gen_trace(&dir, "t.pcap", &["--packets", "10"]);
    let chain = root().join("examples/isp/chain.toml");
    let chain_s = chain.to_str().unwrap();
    for (args, why) in [
        (vec!["--out", "p.plan"], "--out needs"),
        (
            vec!["--profile", "t.pcap", "--accelerator", "1,2"],
            "--accelerator",
        ),
        (vec!["--profile", "t.pcap", "--workers", "0"], "--workers"),
        (vec!["--profile", "t.pcap", "--cross-ns=-3"], "--cross-ns"),
        (vec!["--profile", "missing.pcap"], "missing.pcap"),
    ] {
        let mut all = vec!["plan", chain_s];
        all.extend(args);
        let o = fusebox(&dir, &all);
        assert!(!o.status.success(), "{all:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(why), "{all:?}: {err}");
    }
}
