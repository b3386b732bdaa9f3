//! `fusebox bench --scenario stages --quick`: the NSH stages' benchmark runs (root: it loads
//! BPF programs; skipped with a message otherwise, failing under CI=true) and prints, per
//! stage built, a FuseBox record with ns per packet net of the no-op program, and the
//! baseline record. Never a speed threshold: the machines are shared.

mod common;
use common::*;
use serde_json::Value;

#[test]
fn stages_bench_prints_a_record_per_stage() {
    if !stages::require_bpf("stages_bench_prints_a_record_per_stage") {
        return;
    }
    let dir = scratch("bench-stages");
    let out = dir.join("out");
    let o = fusebox_ok(
        &root(),
        &[
            "bench",
            "--scenario",
            "stages",
            "--quick",
            "--json",
            "--reps",
            "2",
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
    let base = records
        .iter()
        .find(|r| r["scenario"] == "stages" && r["baseline"] == "noop")
        .expect("baseline record");
    for hook in ["xdp_ns", "tc_ns"] {
        let v = &base[hook];
        assert!(v["min"].as_f64().unwrap() > 0.0, "{base}");
        assert!(v["min"].as_f64() <= v["median"].as_f64(), "{base}");
    }
    for stage in [
        "cls",
        "cls-any",
        "cls-xdp",
        "cls-any-xdp",
        "dec",
        "enc",
        "fwd",
        "enc+fwd",
    ] {
        let obj = match stage {
            "enc+fwd" => "enc_fwd",
            "cls-any" => "cls",
            "cls-xdp" | "cls-any-xdp" => "cls_xdp",
            s => s,
        };
        let r = records
            .iter()
            .find(|r| r["stage"] == stage && r["impl"] == "fusebox");
        if stages::object_bytes(obj).is_none() {
            assert!(r.is_none(), "{stage} is not built but was measured");
            continue;
        }
        let r = r.unwrap_or_else(|| panic!("no record for {stage}: {text}"));
        let ns = &r["ns_per_packet"];
        let (lo, med, hi) = (
            ns["min"].as_f64().unwrap(),
            ns["median"].as_f64().unwrap(),
            ns["max"].as_f64().unwrap(),
        );
        assert!(0.0 <= lo && lo <= med && med <= hi, "{r}");
        assert_eq!(r["reps"], 2, "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
