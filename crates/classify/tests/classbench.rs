//! The decision tree against ClassBench: every header of the shared traces gets the
//! first-matching rule the `.firstmatch` answers give (flags ignored), and the tree stays
//! small on the 10k-rule sets.
//!
//! When `../shared/data` is absent the test is skipped with a message, unless `CI=true`.

use classify::classbench::{parse_answers, parse_rules, parse_trace};
use classify::Classifier;
use std::path::{Path, PathBuf};

fn data() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench");
    let d = d.canonicalize().unwrap_or(d);
    if d.is_dir() {
        return Some(d);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !ci,
        "ClassBench data missing at {} (required under CI=true)",
        d.display()
    );
    eprintln!("skipping: no ClassBench data at {}", d.display());
    None
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn trees_give_the_first_match_answers() {
    let Some(d) = data() else { return };
    let sets = [
        ("cutsplit/acl_1k", "cutsplit/acl_1k_trace"),
        ("cutsplit/fw_1k", "cutsplit/fw_1k_trace"),
        ("cutsplit/ipc_1k", "cutsplit/ipc_1k_trace"),
        ("cutsplit/fw_10k", "cutsplit/fw_10k_trace"),
    ];
    for (rules, trace) in sets {
        let rf = d.join(rules);
        let tf = d.join(trace);
        let af = d.join(format!("{trace}.firstmatch"));
        let r = parse_rules(&read(&rf), rules).unwrap();
        let t = parse_trace(&read(&tf), trace).unwrap();
        let a = parse_answers(&read(&af), trace).unwrap();
        assert_eq!(t.len(), a.len(), "{trace}");
        let c = Classifier::new(r, 5).unwrap();
        let wrong: Vec<usize> = t
            .iter()
            .zip(&a)
            .enumerate()
            .filter(|(_, (k, want))| c.classify(&k[..]) != **want)
            .map(|(i, _)| i)
            .collect();
        assert!(
            wrong.is_empty(),
            "{rules}: {} of {} headers differ, first at line {}",
            wrong.len(),
            t.len(),
            wrong[0] + 1
        );
        let s = c.stats();
        eprintln!(
            "{rules}: {} rules, {} nodes, {} leaf rule references, depth {}",
            s.rules, s.nodes, s.leaf_rules, s.depth
        );
        // Bounded: rules are replicated a few times at most, not exponentially.
        assert!(s.leaf_rules < 40 * s.rules.max(1), "{rules}: {s:?}");
    }
}

#[test]
fn every_neurocuts_set_parses_and_compiles() {
    let Some(d) = data() else { return };
    let dir = d.join("neurocuts");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with("_1k"))
        .collect();
    names.sort();
    assert!(names.len() >= 12, "{names:?}");
    for n in names {
        let r = parse_rules(&read(&dir.join(&n)), &n).unwrap();
        let c = Classifier::new(r.clone(), 5).unwrap();
        // Corners of rules as headers: the tree agrees with the linear scan.
        for rule in r.iter().step_by(7) {
            let lo: Vec<u64> = rule.ranges.iter().map(|x| x.0).collect();
            let hi: Vec<u64> = rule.ranges.iter().map(|x| x.1).collect();
            assert_eq!(c.classify(&lo), c.classify_linear(&lo), "{n}");
            assert_eq!(c.classify(&hi), c.classify_linear(&hi), "{n}");
        }
    }
}
