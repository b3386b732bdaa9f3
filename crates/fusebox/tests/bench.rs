//! `fusebox bench --quick` runs and prints well-formed JSON (never a speed threshold: the
//! machines are shared).

mod common;
use common::*;

#[test]
fn quick_bench_runs_and_prints_json_records() {
    let o = fusebox_ok(&root(), &["bench", "--quick", "--json", "--reps", "1"]);
    let text = String::from_utf8(o.stdout).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for sc in ["routers", "napts"] {
        for (nfs, mode) in [(1, "naive"), (10, "naive"), (10, "synth")] {
            let r = records
                .iter()
                .find(|r| r["scenario"] == sc && r["nfs"] == nfs && r["mode"] == mode)
                .unwrap_or_else(|| panic!("no {sc} {nfs} {mode} record: {text}"));
            let m = &r["mpps"];
            let (lo, med, hi) = (
                m["min"].as_f64().unwrap(),
                m["median"].as_f64().unwrap(),
                m["max"].as_f64().unwrap(),
            );
            assert!(lo > 0.0 && lo <= med && med <= hi, "{r}");
        }
        let ratio = records
            .iter()
            .find(|r| r["scenario"] == sc && r["ratio"] == "synth 10 / naive 1")
            .unwrap_or_else(|| panic!("no {sc} ratio: {text}"));
        assert!(ratio["median"].as_f64().unwrap() > 0.0, "{ratio}");
    }
    // A scenario it does not know is refused in one line.
    let o = fusebox(&root(), &["bench", "--scenario", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--scenario nope"), "{err}");
}
