//! Golden-pcap tests: for every case under `tests/golden/<case>/`, run `fusebox run
//! config.click` (a `FromDump(input.pcap) -> ... -> ToDump(outN.pcap)` configuration) in a
//! scratch copy of the case directory, decode each output with tcpdump (an independent
//! decoder) and compare with `expected.txt`, whose lines were derived from Click's documented
//! behaviour of the element under test. Drops by reason are compared too.
//!
//! `expected.txt` sections: `== outN.pcap` followed by the lines of
//! `tcpdump -t -nn -vv -e -r outN.pcap`, and `== drops` followed by `reason count` lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tcpdump_available() -> bool {
    Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn sections(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("== ") {
            cur = Some(name.trim().to_string());
            out.entry(name.trim().to_string()).or_default();
        } else if let Some(c) = &cur {
            if !line.trim().is_empty() {
                out.get_mut(c).unwrap().push(line.trim_end().to_string());
            }
        }
    }
    out
}

fn decode(pcap: &Path) -> Vec<String> {
    let o = Command::new("tcpdump")
        .args(["-t", "-nn", "-vv", "-e", "-r"])
        .arg(pcap)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn run_case(dir: &Path, scratch: &Path) -> Result<(), String> {
    copy_dir(dir, scratch);
    let out = Command::new(env!("CARGO_BIN_EXE_fusebox"))
        .args(["run", "config.click", "--quiet", "--json"])
        .current_dir(scratch)
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "fusebox failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            stdout
        ));
    }
    let summary: serde_json::Value =
        serde_json::from_str(&stdout).map_err(|e| format!("bad JSON: {e}"))?;
    let expected = std::fs::read_to_string(dir.join("expected.txt")).map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    for (name, want) in sections(&expected) {
        if name == "drops" {
            let got: BTreeMap<String, u64> = summary["totals"]["drops"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default();
            let want: BTreeMap<String, u64> = want
                .iter()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    Some((w.next()?.to_string(), w.next()?.parse().ok()?))
                })
                .collect();
            if got != want {
                problems.push(format!("drops: expected {want:?}, got {got:?}"));
            }
            continue;
        }
        let path = scratch.join(&name);
        if !path.exists() {
            problems.push(format!("{name}: not written"));
            continue;
        }
        let got = decode(&path);
        if got != want {
            problems.push(format!(
                "{name}:\n--- expected\n{}\n--- tcpdump says\n{}",
                want.join("\n"),
                got.join("\n")
            ));
        }
    }
    if summary["totals"]["balanced"] != serde_json::Value::Bool(true) {
        problems.push("packet accounting does not balance".into());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[test]
fn golden_cases() {
    if !tcpdump_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tcpdump is required under CI"
        );
        eprintln!("skipping golden tests: tcpdump not installed");
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("config.click").exists())
        .collect();
    cases.sort();
    let only = std::env::var("GOLDEN").ok();
    let scratch_root = tempfile::Builder::new()
        .prefix("fusebox-golden-")
        .tempdir()
        .unwrap();
    let mut failures = Vec::new();
    let mut ran = 0;
    for c in &cases {
        let name = c.file_name().unwrap().to_string_lossy().to_string();
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        ran += 1;
        if let Err(e) = run_case(c, &scratch_root.path().join(&name)) {
            failures.push(format!("[{name}]\n{e}"));
        }
    }
    drop(scratch_root);
    eprintln!("golden: {ran} cases, {} failed", failures.len());
    assert!(ran > 0 || only.is_some(), "no golden cases found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
