//! `fusebox bench --scenario sfc --quick --reps 1`: UDP probes through chains of 0..3
//! Linux-router SFs on two hosts (namespaces, the NSH stages placed by the planner), without
//! and with direct links (sf1 and sf2 of three share host 1), and through one FuseBox hop
//! of 1..3 NFs (`fusebox run --nsh`).
//! Root only (skipped with a message otherwise, failing under CI=true). Asserts that every
//! probe came back and that every stage handled every probe (the path went through the
//! chain); never a speed threshold: the machines are shared. Chaining-Box's stages are not
//! built here (the variant needs `--chaining-box DIR`).

mod common;
use common::*;
use serde_json::Value;

#[test]
fn sfc_bench_probes_go_through_every_sf_and_come_back() {
    let name = "sfc_bench_probes_go_through_every_sf_and_come_back";
    if !stages::require_bpf(name) {
        return;
    }
    if std::process::Command::new("ethtool")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{name}: no ethtool, and CI=true"
        );
        eprintln!("skipping {name}: needs ethtool");
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
            "--reps",
            "1",
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
    let find = |variant: &str, key: &str, n: u64| {
        records
            .iter()
            .find(|r| r["scenario"] == "sfc" && r["variant"] == variant && r[key] == n)
            .unwrap_or_else(|| panic!("no record for {variant} with {n} {key} in {text}"))
    };
    let mut cases = Vec::new();
    for n in 0..=3u64 {
        cases.push(("fusebox", "sfs", n));
        cases.push(("fusebox+links", "sfs", n));
        if n > 0 {
            cases.push(("fusebox-hop", "nfs", n));
        }
    }
    for (variant, key, n) in cases {
        let r = find(variant, key, n);
        let probes = r["probes"].as_u64().unwrap();
        assert!(probes > 0);
        assert_eq!(r["lost"], 0, "{r}");
        assert_eq!(r["stages"], "fusebox", "{r}");
        // Every stage of the plan counted every probe (and the warm-up), and the source
        // and the SFs sent them encapsulated.
        let checks = r["checks"].as_array().unwrap();
        for c in checks {
            let (got, min) = (
                c["count"].as_u64().unwrap(),
                c["at_least"].as_u64().unwrap(),
            );
            assert!(min >= probes && got >= min, "{c} in {r}");
        }
        let what: Vec<&str> = checks.iter().map(|c| c["what"].as_str().unwrap()).collect();
        let has = |s: &str| what.iter().filter(|w| w.contains(s)).count();
        let dec = r["dec_done"].as_array().unwrap();
        match (variant, n) {
            (_, 0) => assert!(checks.is_empty(), "{r}"),
            // Up to two SFs, one per host: no link.
            ("fusebox", n) | ("fusebox+links", n @ 1..=2) => {
                // Every SF decapsulates; the classifier and every SF but the last encapsulate.
                assert_eq!(dec.len() as u64, n, "{r}");
                assert_eq!(has("cls on src"), 1, "{r}");
                assert_eq!(has("enc on eth0"), n as usize, "{r}");
                assert_eq!(has("bytes sent"), n as usize, "{r}");
            }
            ("fusebox+links", 3) => {
                // sf1 → dl0 → sf2 on host 1, then sf3 on host 2: no Enc/Fwd before the
                // link, no Dec after it; sf2's Enc works from static proxy entries.
                assert_eq!(dec.len(), 2, "{r}");
                assert_eq!(has("bytes sent"), 2, "{r}");
                assert_eq!(has("sf1 dec on eth0"), 1, "{r}");
                assert_eq!(has("sf2 enc on eth0"), 1, "{r}");
                assert_eq!(has("sf1 enc"), 0, "{r}");
                assert_eq!(has("sf2 dec"), 0, "{r}");
            }
            ("fusebox-hop", _) => {
                // NSH-aware: Fwd alone, after the hop's own NSH handling.
                assert!(dec.is_empty(), "{r}");
                assert_eq!(has("hop fwd on eth1"), 1, "{r}");
            }
            _ => unreachable!(),
        }
        let p50 = r["rtt_p50_us"].as_f64().unwrap();
        let p99 = r["rtt_p99_us"].as_f64().unwrap();
        assert!(p50 > 0.0 && p99 >= p50, "{r}");
    }
    for (variant, slope) in [
        ("fusebox", "per_sf"),
        ("fusebox+links", "per_sf"),
        ("fusebox-hop", "per_nf"),
    ] {
        assert!(
            records.iter().any(|r| r["scenario"] == "sfc"
                && r["slope"] == slope
                && r["variant"] == variant
                && r["rtt_p50_us_per_sf"].is_f64()),
            "no {slope} slope record for {variant} in {text}"
        );
    }
    assert!(
        !records.iter().any(|r| r["stages"] == "chaining-box"),
        "Chaining-Box measured without --chaining-box: {text}"
    );
}
