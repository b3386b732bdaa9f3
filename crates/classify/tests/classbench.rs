//! The decision tree against ClassBench: every header of the shared traces gets the
//! first-matching rule the `.firstmatch` answers give (flags ignored), one key at a time
//! and in batches; on every 1k and 10k set, drawn headers (rule corners and random
//! values) get the linear scan's answers both ways; and the trees stay small.
//!
//! When `../shared/data` is absent the test is skipped with a message, unless `CI=true`.

use classify::classbench::{corners, parse_answers, parse_rules, parse_trace};
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

/// Batch answers for `keys`, in uneven slices (to cross block and lane-group boundaries).
fn batch(c: &Classifier, keys: &[[u64; 5]]) -> Vec<Option<usize>> {
    let mut out = vec![Some(usize::MAX); keys.len()];
    let mut at = 0;
    for len in [1, 3, 64, 65, 200, 1000].iter().cycle() {
        if at == keys.len() {
            break;
        }
        let end = (at + len).min(keys.len());
        c.classify_batch(&keys[at..end], &mut out[at..end]).unwrap();
        at = end;
    }
    out
}

fn first_wrong(got: &[Option<usize>], want: &[Option<usize>]) -> Option<usize> {
    got.iter().zip(want).position(|(g, w)| g != w)
}

#[test]
fn trees_give_the_first_match_answers() {
    let Some(d) = data() else { return };
    // Every trace with `.firstmatch` answers.
    let mut traces: Vec<String> = std::fs::read_dir(d.join("cutsplit"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter_map(|n| n.strip_suffix(".firstmatch").map(str::to_string))
        .collect();
    traces.sort();
    assert!(traces.len() >= 4, "{traces:?}");
    for trace in traces {
        let rules = format!("cutsplit/{}", trace.trim_end_matches("_trace"));
        let trace = format!("cutsplit/{trace}");
        let rf = d.join(&rules);
        let tf = d.join(&trace);
        let af = d.join(format!("{trace}.firstmatch"));
        let r = parse_rules(&read(&rf), &rules).unwrap();
        let t = parse_trace(&read(&tf), &trace).unwrap();
        let a = parse_answers(&read(&af), &trace).unwrap();
        assert_eq!(t.len(), a.len(), "{trace}");
        let c = Classifier::new(r, 5).unwrap();
        let single: Vec<Option<usize>> = t.iter().map(|k| c.classify(&k[..])).collect();
        let wrong = single.iter().zip(&a).filter(|(g, w)| g != w).count();
        assert!(
            wrong == 0,
            "{rules}: {wrong} of {} headers differ, first at line {}",
            t.len(),
            first_wrong(&single, &a).unwrap_or(0) + 1
        );
        let b = batch(&c, &t);
        assert_eq!(
            first_wrong(&b, &a),
            None,
            "{rules}: batch answers differ (first at line)"
        );
        let s = c.stats();
        eprintln!(
            "{rules}: {} rules, {} nodes, {} leaf rule references, depth {}; {} trace headers",
            s.rules,
            s.nodes,
            s.leaf_rules,
            s.depth,
            t.len()
        );
        // Bounded: rules are replicated a few times at most, not exponentially.
        assert!(s.leaf_rules < 40 * s.rules.max(1), "{rules}: {s:?}");
    }
}

/// Every ClassBench set (neurocuts and cutsplit, 1k and 10k): rule corners and random
/// headers (random values, and random values inside a random rule's box) get the linear
/// scan's answers from `classify` and `classify_batch`.
#[test]
fn every_set_agrees_with_the_linear_scan() {
    let Some(d) = data() else { return };
    let mut sets = Vec::new();
    for dir in ["neurocuts", "cutsplit"] {
        let mut names: Vec<String> = std::fs::read_dir(d.join(dir))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.ends_with("_1k") || n.ends_with("_10k"))
            .collect();
        names.sort();
        sets.extend(names.into_iter().map(|n| format!("{dir}/{n}")));
    }
    assert!(sets.len() >= 30, "{sets:?}");
    for (si, n) in sets.iter().enumerate() {
        let r = parse_rules(&read(&d.join(n)), n).unwrap();
        let draws = if n.ends_with("_10k") { 1500 } else { 3000 };
        let mut keys = corners(&r, draws, si as u64 + 1);
        let mut x = si as u64 * 0x9e37_79b9 + 7;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..draws / 3 {
            keys.push([
                next() & 0xffff_ffff,
                next() & 0xffff_ffff,
                next() & 0xffff,
                next() & 0xffff,
                next() & 0xff,
            ]);
            let rule = &r[(next() % r.len() as u64) as usize];
            let mut k = [0u64; 5];
            for (v, &(lo, hi)) in k.iter_mut().zip(&rule.ranges) {
                *v = lo + next() % (hi - lo + 1);
            }
            keys.push(k);
        }
        let c = Classifier::new(r, 5).unwrap();
        let want: Vec<Option<usize>> = keys.iter().map(|k| c.classify_linear(k)).collect();
        let single: Vec<Option<usize>> = keys.iter().map(|k| c.classify(k)).collect();
        assert_eq!(first_wrong(&single, &want), None, "{n}: single-key answers");
        assert_eq!(
            first_wrong(&batch(&c, &keys), &want),
            None,
            "{n}: batch answers"
        );
        assert!(want.iter().filter(|w| w.is_some()).count() >= draws, "{n}");
    }
}

/// Updates on the 10k sets: a few hundred rules removed (one at a time, answers checked
/// against the linear scan of the remaining rules now and then), some inserted at other
/// places, then all put back where they were: the answers equal the linear scan
/// throughout and the fresh classifier's at the end (on drawn headers, and on
/// `.firstmatch` answers where there is a trace).
#[test]
fn updates_on_the_10k_sets_agree_with_the_linear_scan() {
    let Some(d) = data() else { return };
    for (si, n) in [
        "cutsplit/acl_10k",
        "cutsplit/fw_10k",
        "cutsplit/ipc_10k",
        "neurocuts/fw1_10k",
    ]
    .iter()
    .enumerate()
    {
        let rules = parse_rules(&read(&d.join(n)), n).unwrap();
        let mut keys = corners(&rules, 1500, si as u64 + 11);
        let mut x = si as u64 + 0x5eed;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..500 {
            let rule = &rules[(next() % rules.len() as u64) as usize];
            let mut k = [0u64; 5];
            for (v, &(lo, hi)) in k.iter_mut().zip(&rule.ranges) {
                *v = lo + next() % (hi - lo + 1);
            }
            keys.push(k);
        }
        let mut model = rules.clone();
        let mut c = Classifier::new(rules.clone(), 5).unwrap();
        let check = |c: &Classifier, model: &[classify::Rule], what: &str| {
            let want: Vec<Option<usize>> = keys
                .iter()
                .map(|k| model.iter().position(|r| r.matches(k)))
                .collect();
            let single: Vec<Option<usize>> = keys.iter().map(|k| c.classify(k)).collect();
            assert_eq!(first_wrong(&single, &want), None, "{n} {what}: single");
            assert_eq!(
                first_wrong(&batch(c, &keys), &want),
                None,
                "{n} {what}: batch"
            );
        };
        // Remove 300 rules, remembering where they were.
        let mut removed = Vec::new();
        for i in 0..300 {
            let at = (next() % model.len() as u64) as usize;
            let r = c.remove(at).unwrap();
            assert_eq!(r, model.remove(at));
            removed.push((at, r));
            if i % 100 == 99 {
                check(&c, &model, &format!("after {} removes", i + 1));
            }
        }
        // Insert 100 of them somewhere else, then take them out again.
        let mut moved = Vec::new();
        for (_, r) in removed.iter().take(100) {
            let at = (next() % (model.len() as u64 + 1)) as usize;
            c.insert(at, r.clone()).unwrap();
            model.insert(at, r.clone());
            moved.push(at);
        }
        check(&c, &model, "after moved inserts");
        for &at in moved.iter().rev() {
            assert_eq!(c.remove(at).unwrap(), model.remove(at));
        }
        // Put everything back: the original rule list.
        for (at, r) in removed.into_iter().rev() {
            c.insert(at, r.clone()).unwrap();
            model.insert(at, r);
        }
        assert!(model == rules, "{n}: the rules are back");
        assert!(
            c.rules() == &rules[..],
            "{n}: the classifier's rules are back"
        );
        check(&c, &model, "after putting everything back");
        if n.ends_with("fw_10k") {
            let t = parse_trace(&read(&d.join("cutsplit/fw_10k_trace")), n).unwrap();
            let a = parse_answers(&read(&d.join("cutsplit/fw_10k_trace.firstmatch")), n).unwrap();
            assert_eq!(
                first_wrong(&batch(&c, &t), &a),
                None,
                "{n}: trace after updates"
            );
        }
        eprintln!("{n}: {:?}, {} trees recompiled", c.stats(), c.rebuilds());
    }
}
