//! The planner's parallel groups in the differential harness: generated chains with opaque
//! NFs (`synth::testgen` with operator NFs and [`Options::opaque_nfs`]: monitors, an IDS, a
//! NAT, a load balancer, switches, beside the generated routers, firewalls, NAPTs and load
//! balancers), grouped by `plan::deps::parallel`, must run in parallel mode exactly as naive:
//! the same bytes out of every exit, the same counters, drops by reason and state. The same
//! chains also run in synth and fastpath mode against naive.
//!
//! `FUSEBOX_GEN_SEEDS=N` runs seeds 0..N (256 by default, as synth's harness);
//! `FUSEBOX_GEN_SEED=S` runs seed S only and keeps its files. The test reports how many
//! chains got at least one group, and fails if too few did (a generator that stopped making
//! groupable chains would test nothing).

use chain::{ChainFile, Executor, ExitSink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use synth::testgen::{random_trace, try_random_chain_with, GeneratedChain, Options};
use synth::verify::{compare, run, run_installed, Mode, RunResult};

const DEFAULT_SEEDS: u64 = 256;
const PACKETS: u64 = 300;

fn seeds() -> (Vec<u64>, bool) {
    synth::testgen::seeds_from_env(DEFAULT_SEEDS)
}

const OPTIONS: Options = Options {
    operator_nfs: true,
    ipsec: false,
    opaque_nfs: true,
};

/// Seed `seed`'s chain and trace under `root`.
fn setup(root: &Path, seed: u64) -> Result<(GeneratedChain, ChainFile, PathBuf), String> {
    let dir = root.join(seed.to_string());
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let g = try_random_chain_with(seed, &dir, &OPTIONS).map_err(|e| e.to_string())?;
    let trace = dir.join("trace.pcap");
    random_trace(seed, &g.trace, PACKETS, &trace).map_err(|e| e.to_string())?;
    let chain = ChainFile::load(&g.chain).map_err(|e| e.to_string())?;
    Ok((g, chain, trace))
}

fn differences(a: &RunResult, b: &RunResult) -> Option<String> {
    let d = compare(a, b);
    if d.is_empty() {
        return None;
    }
    let shown: Vec<String> = d.iter().take(10).map(|x| format!("  - {x}")).collect();
    Some(format!("  {} differences:\n{}", d.len(), shown.join("\n")))
}

fn report(seed: u64, g: &GeneratedChain, what: &str, details: &dyn std::fmt::Display) -> String {
    format!(
        "seed {seed}: {what}\n  reproduce: FUSEBOX_GEN_SEED={seed} cargo test --release -p plan --test generated\n  NFs: {}\n{details}\n{}",
        g.nfs.join(" | "),
        g.listing()
    )
}

/// One seed: the planner's groups, then naive, parallel, synth and fastpath runs.
/// Returns the number of groups and of NFs in them.
fn check(seed: u64, root: &Path) -> Result<(usize, usize), String> {
    let (g, chain, trace) = setup(root, seed).map_err(|e| format!("seed {seed}: {e}"))?;
    let inputs = g.inputs(&trace);
    let opts = g.options();
    let ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count))
        .map_err(|e| report(seed, &g, "the chain does not build", &e))?;
    let (layout, why) = plan::deps::parallel(&ex);
    if std::env::var("FUSEBOX_GEN_VERBOSE").is_ok_and(|v| v == "1") {
        eprintln!("seed {seed}: {}\n{}", g.nfs.join(" | "), why.text());
    }
    let naive = run(&chain, &inputs, &opts, Mode::Naive)
        .map_err(|e| report(seed, &g, "naive run failed", &e))?;
    let mut refused = Vec::new();
    let par = run_installed(&chain, &inputs, &opts, |ex| {
        refused = ex.enable_parallel(&layout);
    })
    .map_err(|e| report(seed, &g, "parallel run failed", &e))?;
    if !refused.is_empty() {
        let r = format!("{refused:?}\n{}", why.text());
        return Err(report(seed, &g, "the executor refused planned groups", &r));
    }
    if let Some(d) = differences(&naive, &par) {
        let d = format!("{d}\n{}", why.text());
        return Err(report(seed, &g, "parallel differs from naive", &d));
    }
    // The mode as the command line runs it: the registered planner's groups.
    let mode = run(&chain, &inputs, &opts, Mode::Parallel)
        .map_err(|e| report(seed, &g, "--mode parallel run failed", &e))?;
    if let Some(d) = differences(&naive, &mode) {
        return Err(report(seed, &g, "--mode parallel differs from naive", &d));
    }
    for m in [Mode::Synth, Mode::Fastpath] {
        let other = run(&chain, &inputs, &opts, m)
            .map_err(|e| report(seed, &g, &format!("{m:?} run failed"), &e))?;
        if let Some(d) = differences(&naive, &other) {
            return Err(report(seed, &g, &format!("{m:?} differs from naive"), &d));
        }
    }
    let in_groups = layout.groups.iter().map(|g| g.nfs.len()).sum();
    Ok((layout.groups.len(), in_groups))
}

#[test]
fn parallel_matches_naive_with_the_planners_groups() {
    bricks::register().expect("the operator NF classes register");
    synth::set_parallel_planner(|ex| plan::deps::parallel(ex).0);
    let (seeds, keep) = seeds();
    // Removed when the test ends, unless the files are to be kept (one seed asked for, or
    // failing seeds, whose files the report names).
    let mut scratch = tempfile::Builder::new()
        .prefix("fusebox-plan-generated-")
        .tempdir()
        .unwrap();
    let root = scratch.path().to_path_buf();
    let grouped = AtomicU64::new(0);
    let groups = AtomicU64::new(0);
    let nfs_grouped = AtomicU64::new(0);
    let failures = Mutex::new(Vec::new());
    let next = Mutex::new(seeds.iter().copied());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let take = || next.lock().map(|mut it| it.next()).unwrap_or(None);
                while let Some(seed) = take() {
                    match check(seed, &root) {
                        Ok((n, k)) => {
                            grouped.fetch_add(u64::from(n > 0), Ordering::Relaxed);
                            groups.fetch_add(n as u64, Ordering::Relaxed);
                            nfs_grouped.fetch_add(k as u64, Ordering::Relaxed);
                            if !keep {
                                let _ = std::fs::remove_dir_all(root.join(seed.to_string()));
                            }
                        }
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
    let (grouped, groups, nfs) = (
        grouped.into_inner(),
        groups.into_inner(),
        nfs_grouped.into_inner(),
    );
    eprintln!(
        "plan-generated: {} seeds; {grouped} chains with a group ({groups} groups, {nfs} NFs in them)",
        seeds.len()
    );
    let mut failures = failures.into_inner().unwrap_or_default();
    failures.sort_by_key(|f| f.0);
    if let Some((_, r)) = failures.first() {
        scratch.disable_cleanup(true);
        let list: Vec<String> = failures.iter().map(|f| f.0.to_string()).collect();
        panic!(
            "{} of {} seeds failed: {}\n(files kept under {})\n\n{r}",
            failures.len(),
            seeds.len(),
            list.join(", "),
            root.display()
        );
    }
    if keep {
        scratch.disable_cleanup(true);
        eprintln!("files kept in {}", root.display());
    }
    // A healthy fraction of the chains is grouped (the generator makes groupable chains).
    if seeds.len() >= 50 {
        assert!(
            grouped * 4 >= seeds.len() as u64,
            "only {grouped} of {} chains had a group",
            seeds.len()
        );
    }
}
