//! `fusebox bench --scenario sfc --quick`: UDP probes through chains of 0..2 Linux-router
//! SFs on two hosts (namespaces, the NSH stages placed by the planner). Root only (skipped
//! with a message otherwise, failing under CI=true). Asserts that every probe came back
//! and that each SF's Dec decapsulated every probe (the path went through the chain);
//! never a speed threshold: the machines are shared.

mod common;
use common::*;
use serde_json::Value;

#[test]
fn sfc_bench_probes_go_through_every_sf_and_come_back() {
    if !stages::require_bpf("sfc_bench_probes_go_through_every_sf_and_come_back") {
        return;
    }
    let dir = scratch("bench-sfc");
    let out = dir.join("out");
    let o = fusebox_ok(
        &root(),
        &[
            "bench",
            "--scenario",
            "sfc",
            "--quick",
            "--json",
            "--no-charts",
            "--charts",
            out.to_str().unwrap(),
        ],
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for n in 0..=2u64 {
        let r = records
            .iter()
            .find(|r| r["scenario"] == "sfc" && r["sfs"] == n)
            .unwrap_or_else(|| panic!("no record for {n} SFs in {text}"));
        let probes = r["probes"].as_u64().unwrap();
        assert!(probes > 0);
        assert_eq!(r["lost"], 0, "{r}");
        let dec = r["dec_done"].as_array().unwrap();
        assert_eq!(dec.len() as u64, n, "{r}");
        for d in dec {
            assert!(d.as_u64().unwrap() >= probes, "an SF skipped: {r}");
        }
        let p50 = r["rtt_p50_us"].as_f64().unwrap();
        let p99 = r["rtt_p99_us"].as_f64().unwrap();
        assert!(p50 > 0.0 && p99 >= p50, "{r}");
    }
    assert!(
        records
            .iter()
            .any(|r| r["scenario"] == "sfc" && r["slope"] == "per_sf"),
        "no slope record in {text}"
    );
}
