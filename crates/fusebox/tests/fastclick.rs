//! `fusebox bench --fastclick PATH`: FastClick as a peer.
//!
//! FastClick is built outside the repository (docs/benchmarks.md says how) and is not
//! available in CI. The run against the real FastClick happens only when the environment
//! variable `FUSEBOX_FASTCLICK` names its binary; otherwise that test prints a skip message
//! and passes — also under `CI=true`, on purpose: CI does not build FastClick, and its
//! absence is not a failure. The errors for a bad `--fastclick` path need no FastClick and
//! always run. Never a speed threshold: the machines are shared.

mod common;
use common::*;
use serde_json::Value;

fn records(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_fastclick_path_that_does_not_run_is_named() {
    let dir = scratch("fastclick-bad");
    let examples = root().join("examples");
    let examples = examples.to_str().unwrap();
    for (path, says) in [
        ("/nonexistent/fastclick/userlevel/click", "cannot use it"),
        ("/", "not a file"),
        ("/bin/false", "failed"),
    ] {
        let o = fusebox(
            &dir,
            &[
                "bench",
                "--quick",
                "--scenario",
                "routers",
                "--examples",
                examples,
                "--fastclick",
                path,
                "--no-charts",
            ],
        );
        assert!(!o.status.success(), "{path}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--fastclick {path}")) && err.contains(says),
            "{path}: {err}"
        );
        // Refused before anything was measured.
        assert!(o.stdout.is_empty(), "{path}");
    }
}

#[test]
fn routers_and_napts_run_beside_the_real_fastclick() {
    let Some(bin) = std::env::var_os("FUSEBOX_FASTCLICK") else {
        eprintln!(
            "skipped: FUSEBOX_FASTCLICK is not set (FastClick's userlevel/click, built outside \
             the repository; CI does not have it and does not need it)"
        );
        return;
    };
    let bin = std::path::PathBuf::from(bin);
    let dir = scratch("fastclick-run");
    let examples = root().join("examples");
    let o = fusebox_ok(
        &dir,
        &[
            "bench",
            "--quick",
            "--scenario",
            "routers,napts",
            "--reps",
            "2",
            "--batch",
            "32",
            "--examples",
            examples.to_str().unwrap(),
            "--fastclick",
            bin.to_str().unwrap(),
            "--no-charts",
            "--json",
        ],
    );
    let recs = records(&String::from_utf8_lossy(&o.stdout));
    for (scenario, ks) in [("routers", [1, 2, 5, 10]), ("napts", [1, 2, 5, 10])] {
        for k in ks {
            // The check run compared every exit packet with FuseBox's.
            let name = format!("{scenario}-{k}");
            let c = recs
                .iter()
                .find(|r| r["fastclick_check"] == name.as_str())
                .unwrap_or_else(|| panic!("no check of {name}"));
            assert!(c["packets"].as_u64().unwrap() > 0, "{c}");
            // FastClick measured, two repetitions.
            let fc = recs
                .iter()
                .find(|r| r["scenario"] == scenario && r["mode"] == "fastclick" && r["nfs"] == k)
                .unwrap_or_else(|| panic!("no fastclick {k} in {scenario}"));
            assert!(fc["mpps"]["min"].as_f64().unwrap() > 0.0, "{fc}");
            for mode in ["naive", "synth", "fastpath"] {
                let what = format!("{mode} {k} / fastclick {k}");
                let r = recs
                    .iter()
                    .find(|r| r["scenario"] == scenario && r["ratio"] == what.as_str())
                    .unwrap_or_else(|| panic!("no ratio {what} in {scenario}"));
                let per_rep = r["per_rep"].as_array().unwrap();
                assert_eq!(per_rep.len(), 2, "{r}");
                assert!(per_rep.iter().all(|v| v.as_f64().unwrap() > 0.0), "{r}");
            }
        }
    }
    // A NAPT chain's check had ports to remap or not, but the records say how many.
    let c = recs
        .iter()
        .find(|r| r["fastclick_check"] == "napts-10")
        .unwrap();
    assert!(c["nat_ports_remapped"].is_u64() && c["udp_checksum_zero"].is_u64());
    // The configurations and traces FastClick ran are kept.
    assert!(dir
        .join("bench-out/fastclick/routers-10-b32.click")
        .exists());
    assert!(dir.join("bench-out/fastclick/napts.pcap").exists());
}
