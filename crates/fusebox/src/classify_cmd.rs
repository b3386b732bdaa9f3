//! `fusebox classify`: first-match classification of a ClassBench header trace.

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
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
}

fn read(p: &PathBuf) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// `fusebox classify`: one line per header with the 0-based index of the first matching
/// rule (-1 for none), the format of the `.firstmatch` files; the lookup rate on stderr.
pub fn run(a: &ClassifyArgs) -> Result<ExitCode, String> {
    let rules =
        parse_rules(&read(&a.rules)?, &a.rules.display().to_string()).map_err(|e| e.to_string())?;
    let trace =
        parse_trace(&read(&a.trace)?, &a.trace.display().to_string()).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let c = Classifier::new(rules, 5).map_err(|e| e.to_string())?;
    let build = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let answers: Vec<Option<usize>> = trace.iter().map(|k| c.classify(&k[..])).collect();
    let secs = t1.elapsed().as_secs_f64().max(1e-9);
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
        "classify: {} rules in {} trees ({} nodes, {} leaf rule references, depth {}, {:.1} MB) built in {:.3} s; {} headers in {:.4} s, {:.2} M lookups/s (one core)",
        s.rules,
        s.trees,
        s.nodes,
        s.leaf_rules,
        s.depth,
        s.memory as f64 / 1e6,
        build,
        answers.len(),
        secs,
        answers.len() as f64 / secs / 1e6
    );
    Ok(ExitCode::SUCCESS)
}
