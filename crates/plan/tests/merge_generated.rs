//! The differential harness for element merging: on the chains `synth::testgen` generates
//! (with operator NFs), naive = merged — the same packets, counters and state — with the
//! skips and drop moves `plan::merge` finds, none refused; and some chains really merged
//! something.
//!
//! `FUSEBOX_GEN_SEEDS=N` runs seeds 0..N (64 by default); `FUSEBOX_GEN_SEED=S` runs seed S
//! only and keeps its files.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use synth::testgen::{random_trace, try_random_chain_with, Options};
use synth::verify::{compare, run, run_installed, Mode};

const DEFAULT_SEEDS: u64 = 64;
const PACKETS: u64 = 300;

fn seeds() -> (Vec<u64>, bool) {
    synth::testgen::seeds_from_env(DEFAULT_SEEDS)
}

fn one(
    seed: u64,
    root: &std::path::Path,
    skipped: &AtomicU64,
    hoisted: &AtomicU64,
) -> Result<(), String> {
    let dir = root.join(seed.to_string());
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let options = Options {
        operator_nfs: seed % 2 == 1,
        ..Options::default()
    };
    let g = try_random_chain_with(seed, &dir, &options).map_err(|e| e.to_string())?;
    let trace = dir.join("trace.pcap");
    random_trace(seed, &g.trace, PACKETS, &trace).map_err(|e| e.to_string())?;
    let chain = chain::ChainFile::load(&g.chain).map_err(|e| e.to_string())?;
    let inputs = g.inputs(&trace);
    let opts = g.options();
    let fail = |what: &str, d: &dyn std::fmt::Display| {
        format!(
            "seed {seed}: {what}\n  reproduce: FUSEBOX_GEN_SEED={seed} cargo test --release -p plan --test merge_generated\n  NFs: {}\n{d}\n{}",
            g.nfs.join(" | "),
            g.listing()
        )
    };
    let naive = run(&chain, &inputs, &opts, Mode::Naive).map_err(|e| fail("naive failed", &e))?;
    let mut report = String::new();
    let merged = run_installed(&chain, &inputs, &opts, |ex| {
        let (m, r) = plan::merge::analyze(ex, None);
        let refused = ex.enable_merged(&m);
        assert!(refused.is_empty(), "seed {seed}: {refused:?}");
        if !m.skips.is_empty() {
            skipped.fetch_add(1, Ordering::Relaxed);
        }
        if !m.hoists.is_empty() {
            hoisted.fetch_add(1, Ordering::Relaxed);
        }
        report = r.text();
    })
    .map_err(|e| fail("merged failed", &e))?;
    let d = compare(&naive, &merged);
    if !d.is_empty() {
        let mut s = format!("  {} differences; the first:\n", d.len());
        for x in d.iter().take(8) {
            s.push_str(&format!("  - {x}\n"));
        }
        s.push_str(&report);
        return Err(fail("merged differs from naive", &s));
    }
    Ok(())
}

#[test]
fn merged_matches_naive_on_generated_chains() {
    bricks::register().expect("the operator NF classes register");
    let (seeds, keep) = seeds();
    // Removed when the test ends, unless the files are to be kept (one seed asked for, or
    // failing seeds, whose files the report names).
    let mut scratch = tempfile::Builder::new()
        .prefix("fusebox-merge-generated-")
        .tempdir()
        .unwrap();
    let root: PathBuf = scratch.path().to_path_buf();
    let skipped = AtomicU64::new(0);
    let hoisted = AtomicU64::new(0);
    let failures = Mutex::new(Vec::new());
    let next = Mutex::new(seeds.iter().copied());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let take = || next.lock().map(|mut it| it.next()).unwrap_or(None);
                while let Some(seed) = take() {
                    match one(seed, &root, &skipped, &hoisted) {
                        Ok(()) if !keep => {
                            let _ = std::fs::remove_dir_all(root.join(seed.to_string()));
                        }
                        Ok(()) => {}
                        Err(r) => {
                            if let Ok(mut f) = failures.lock() {
                                f.push((seed, r));
                            }
                        }
                    }
                }
            });
        }
    });
    let n = skipped.into_inner();
    let h = hoisted.into_inner();
    eprintln!(
        "merge-generated: {} seeds, {n} chains with skips, {h} with drop tests moved earlier",
        seeds.len()
    );
    let mut failures = failures.into_inner().unwrap_or_default();
    failures.sort_by_key(|f| f.0);
    if failures.is_empty() {
        if keep {
            scratch.disable_cleanup(true);
        }
    } else {
        scratch.disable_cleanup(true);
        let list: Vec<String> = failures.iter().map(|f| f.0.to_string()).collect();
        let mut msg = format!(
            "{} of {} seeds failed: {} (files under {})\n\n",
            failures.len(),
            seeds.len(),
            list.join(", "),
            root.display()
        );
        for (_, r) in failures.iter().take(3) {
            msg.push_str(r);
            msg.push('\n');
        }
        panic!("{msg}");
    }
    if seeds.len() >= 32 {
        assert!(n >= 3, "only {n} generated chains merged anything");
        assert!(
            h >= 2,
            "only {h} generated chains moved a drop test earlier"
        );
    }
}
