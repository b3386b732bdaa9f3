//! `fusebox classify`: first-match classification of a ClassBench header trace.

use crate::error::CliError;
use clap::Args;
use classify::classbench::{parse_rules, parse_trace};
use classify::Classifier;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `fusebox classify`.
#[derive(Args, Debug)]
pub struct ClassifyArgs {
    /// ClassBench filter set (one rule per line, highest priority first).
    #[arg(long, value_name = "FILE")]
    pub rules: PathBuf,
    /// ClassBench header trace (src dst sport dport proto [flags rule]).
    #[arg(long, value_name = "FILE", required_unless_present = "draw")]
    pub trace: Option<PathBuf>,
    /// Instead of a trace, draw this many headers as random corners of random rules (each
    /// field at its rule's low or high end), as ClassBench's trace generator does.
    #[arg(long, value_name = "N", conflicts_with = "trace")]
    pub draw: Option<usize>,
    /// Seed of --draw.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also answer every header by a linear scan of the rules: report its rate, the ratio,
    /// and the headers where the two differ (exit status 1 if any).
    #[arg(long)]
    pub check: bool,
    /// Classify the headers this many times (the rate is over all passes).
    #[arg(long, default_value_t = 1)]
    pub passes: usize,
    /// Look headers up this many at a time (`Classifier::classify_batch`: keys walk the
    /// trees together, which overlaps their memory accesses); 1 looks each header up on
    /// its own (`Classifier::classify`).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Before classifying, remove this many random rules (drawn with --seed) from the
    /// compiled classifier and insert each back at its place (`Classifier::remove` and
    /// `insert`, no full rebuild): report the mean and longest time of each against the
    /// full build's. The rules end as they were, so the answers must not change.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub updates: usize,
}

fn read(p: &PathBuf) -> Result<String, CliError> {
    std::fs::read_to_string(p).map_err(|e| CliError::io(p, "", e))
}

/// `fusebox classify`: one line per header with the 0-based index of the first matching
/// rule (-1 for none), the format of the `.firstmatch` files; the lookup rate on stderr.
pub fn run(a: &ClassifyArgs) -> Result<ExitCode, CliError> {
    let rules = parse_rules(&read(&a.rules)?, &a.rules.display().to_string())?;
    let trace = match (&a.trace, a.draw) {
        (Some(t), _) => parse_trace(&read(t)?, &t.display().to_string())?,
        (None, Some(n)) => classify::classbench::corners(&rules, n, a.seed),
        (None, None) => {
            return Err(CliError::Invalid(
                "expected --trace FILE or --draw N".into(),
            ))
        }
    };
    let t0 = Instant::now();
    let c = Classifier::new(rules, 5)?;
    let build = t0.elapsed().as_secs_f64();
    let mut c = c;
    if a.updates > 0 && !c.rules().is_empty() {
        let mut x = a.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let (mut rm, mut ins) = (Vec::with_capacity(a.updates), Vec::with_capacity(a.updates));
        for _ in 0..a.updates {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x % c.rules().len() as u64) as usize;
            let t = Instant::now();
            let rule = c.remove(at)?;
            rm.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            c.insert(at, rule)?;
            ins.push(t.elapsed().as_secs_f64());
        }
        let us = |v: &[f64]| {
            let mean = v.iter().sum::<f64>() / v.len() as f64 * 1e6;
            let max = v.iter().copied().fold(0f64, f64::max) * 1e6;
            format!("mean {mean:.1} µs, max {max:.0} µs")
        };
        eprintln!(
            "updates: {} removes ({}) and re-inserts ({}); {} trees recompiled on the way; full build {:.0} µs",
            a.updates,
            us(&rm),
            us(&ins),
            c.rebuilds(),
            build * 1e6
        );
    }
    let passes = a.passes.max(1);
    let t1 = Instant::now();
    let batch = usize::try_from(a.batch).unwrap_or(usize::MAX).max(1);
    let mut answers: Vec<Option<usize>> = vec![None; trace.len()];
    for _ in 0..passes {
        if batch == 1 {
            for (o, k) in answers.iter_mut().zip(&trace) {
                *o = c.classify(&k[..]);
            }
        } else {
            for (ks, os) in trace.chunks(batch).zip(answers.chunks_mut(batch)) {
                c.classify_batch(ks, os)?;
            }
        }
    }
    let secs = t1.elapsed().as_secs_f64().max(1e-9);
    let rate = (answers.len() * passes) as f64 / secs / 1e6;
    let mut out = String::with_capacity(answers.len() * 6);
    for x in &answers {
        let _ = match x {
            Some(i) => writeln!(out, "{i}"),
            None => writeln!(out, "-1"),
        };
    }
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    let s = c.stats();
    eprintln!(
        "classify: {} rules in {} trees ({} nodes, {} leaf rule references, depth {}, {:.1} MB) built in {:.3} s; {} headers in {:.4} s, {:.2} M lookups/s (one core, {})",
        s.rules,
        s.trees,
        s.nodes,
        s.leaf_rules,
        s.depth,
        s.memory as f64 / 1e6,
        build,
        answers.len() * passes,
        secs,
        rate,
        if batch == 1 {
            "single-key lookups".to_string()
        } else {
            format!("batches of {batch}")
        }
    );
    if a.check {
        let t2 = Instant::now();
        let linear: Vec<Option<usize>> = trace.iter().map(|k| c.classify_linear(&k[..])).collect();
        let lsecs = t2.elapsed().as_secs_f64().max(1e-9);
        let lrate = linear.len() as f64 / lsecs / 1e6;
        let wrong: Vec<usize> = (0..linear.len())
            .filter(|&i| linear[i] != answers[i])
            .collect();
        eprintln!(
            "check: linear scan {lrate:.3} M lookups/s (tree / scan {:.0}x); {} of {} headers differ{}",
            rate / lrate.max(1e-9),
            wrong.len(),
            linear.len(),
            wrong
                .first()
                .map_or(String::new(), |i| format!(" (first: header {i})"))
        );
        if !wrong.is_empty() {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}
