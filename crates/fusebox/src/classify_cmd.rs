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
    /// Write the headers classified (read or drawn) to FILE as a ClassBench trace (src dst
    /// sport dport proto, tab-separated), for other classifiers to read the same headers.
    #[arg(long, value_name = "FILE")]
    pub write_trace: Option<PathBuf>,
    /// Also run DPDK's rte_acl on the same rules and headers through the harness at PATH
    /// (`scripts/rte-acl/run.sh` builds it; not part of the build): every algorithm the
    /// CPU has, the same passes in batches of 64, after FuseBox's in each round. Reports
    /// each algorithm's rate, FuseBox ÷ it, and whether its answers equal FuseBox's (exit
    /// status 1 if not).
    #[arg(long, value_name = "PATH")]
    pub rte_acl: Option<PathBuf>,
    /// With --rte-acl: this many rounds, FuseBox then rte_acl in each; ratios are the
    /// medians of the per-round ratios of fastest passes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
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
    let batch = usize::try_from(a.batch).unwrap_or(usize::MAX).max(1);
    let mut answers: Vec<Option<usize>> = vec![None; trace.len()];
    if let Some(path) = &a.write_trace {
        std::fs::write(path, trace_text(&trace)).map_err(|e| CliError::io(path, "", e))?;
    }
    // Batches read the headers as `u32` fields where they all fit (IPv4 5-tuples): half
    // the bytes of `[u64; 5]` (rte_acl's harness reads 16-byte headers).
    let narrow: Option<Vec<[u32; 5]>> = trace
        .iter()
        .map(|k| {
            let mut n = [0u32; 5];
            for (x, &v) in n.iter_mut().zip(k) {
                *x = u32::try_from(v).ok()?;
            }
            Some(n)
        })
        .collect();
    let keys = Keys {
        wide: &trace,
        narrow: narrow.as_deref(),
    };
    let (secs, fastest, cpu) = timed_passes(&c, keys, batch, passes, &mut answers)?;
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
        } else if narrow.is_some() {
            format!("batches of {batch}, u32 fields")
        } else {
            format!("batches of {batch}")
        }
    );
    let mut same = true;
    if let Some(harness) = &a.rte_acl {
        let rounds = usize::try_from(a.rounds).unwrap_or(1).max(1);
        let rates = |f: f64, c: Option<f64>| Rates {
            wall: answers.len() as f64 / f / 1e6,
            cpu: c.map(|c| answers.len() as f64 / c.max(1e-9) / 1e6),
        };
        let ours = rates(fastest, cpu);
        same = rte_acl::compare(
            harness,
            &a.rules,
            &trace,
            &answers,
            passes,
            rounds,
            ours,
            || {
                let mut again = vec![None; trace.len()];
                let (_, f, c2) = timed_passes(&c, keys, batch, passes, &mut again)?;
                Ok(rates(f, c2))
            },
        )?;
    }
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
    Ok(if same {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The CPU time this thread has run, in seconds (`CLOCK_THREAD_CPUTIME_ID`, the clock the
/// rte_acl harness reads; `/proc/thread-self/schedstat` lags by up to a scheduler tick).
fn thread_cpu() -> Option<f64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Some(t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9)
}

/// The headers to classify: as read, and as `u32` fields where they all fit.
#[derive(Clone, Copy)]
struct Keys<'a> {
    wide: &'a [[u64; 5]],
    narrow: Option<&'a [[u32; 5]]>,
}

/// Classifies `keys` into `answers` `passes` times (in batches of `batch`, from the `u32`
/// headers where there are some, or one key at a time for 1): the whole time, the fastest
/// pass's and the fastest pass's by the thread's CPU time (`None` where that cannot be
/// read), in seconds.
fn timed_passes(
    c: &Classifier,
    keys: Keys<'_>,
    batch: usize,
    passes: usize,
    answers: &mut [Option<usize>],
) -> Result<(f64, f64, Option<f64>), CliError> {
    let t1 = Instant::now();
    let mut fastest = f64::MAX;
    let mut cpu: Option<f64> = None;
    for _ in 0..passes {
        let c0 = thread_cpu();
        let t = Instant::now();
        if batch == 1 {
            for (o, k) in answers.iter_mut().zip(keys.wide) {
                *o = c.classify(&k[..]);
            }
        } else if let Some(narrow) = keys.narrow {
            for (ks, os) in narrow.chunks(batch).zip(answers.chunks_mut(batch)) {
                c.classify_batch(ks, os)?;
            }
        } else {
            for (ks, os) in keys.wide.chunks(batch).zip(answers.chunks_mut(batch)) {
                c.classify_batch(ks, os)?;
            }
        }
        fastest = fastest.min(t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (c0, thread_cpu()) {
            if b > a {
                cpu = Some(cpu.map_or(b - a, |x: f64| x.min(b - a)));
            }
        }
    }
    Ok((t1.elapsed().as_secs_f64().max(1e-9), fastest.max(1e-9), cpu))
}

/// Headers as ClassBench trace lines (src dst sport dport proto).
fn trace_text(trace: &[[u64; 5]]) -> String {
    let mut s = String::with_capacity(trace.len() * 32);
    for k in trace {
        let _ = writeln!(s, "{}\t{}\t{}\t{}\t{}", k[0], k[1], k[2], k[3], k[4]);
    }
    s
}

/// Fastest-pass rates, M lookups/s: by the wall clock and by the thread's CPU time.
#[derive(Debug, Clone, Copy)]
struct Rates {
    wall: f64,
    cpu: Option<f64>,
}

/// The same-run comparison with DPDK's rte_acl (`--rte-acl`).
mod rte_acl {
    use super::{trace_text, CliError, Rates};
    use std::path::Path;
    use std::process::Command;

    /// FNV-1a (64-bit) over the answers, each a little-endian `i64` (-1 for none): what the
    /// harness prints as `digest=`.
    pub fn digest(answers: &[Option<usize>]) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for a in answers {
            let v = a.map_or(-1i64, |i| i64::try_from(i).unwrap_or(i64::MAX));
            for b in v.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }

    /// One algorithm's line of harness output: name, fastest-pass rates, digest.
    pub fn parse_line(line: &str) -> Option<(String, Rates, u64)> {
        let (mut name, mut best, mut cpu, mut dig) = (None, None, None, None);
        let num = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0);
        for w in line.split_whitespace() {
            match w.split_once('=')? {
                ("alg", v) => name = Some(v.to_string()),
                ("best", v) => best = num(v),
                ("cpu", v) => cpu = num(v),
                ("digest", v) => dig = u64::from_str_radix(v.strip_prefix("0x")?, 16).ok(),
                _ => {}
            }
        }
        Some((name?, Rates { wall: best?, cpu }, dig?))
    }

    fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
        v.sort_by(f64::total_cmp);
        match (v.first(), v.get(v.len() / 2), v.last()) {
            (Some(&lo), Some(&mid), Some(&hi)) => (mid, lo, hi),
            _ => (f64::NAN, f64::NAN, f64::NAN),
        }
    }

    /// Runs the harness `rounds` times on `rules` and `trace` (FuseBox's `first` rates, of
    /// its fastest pass, stand for round 1; `again` measures FuseBox again before each later
    /// round), prints per algorithm its rate, FuseBox ÷ it (median and range over rounds)
    /// and whether its answers equal `answers`, then FuseBox ÷ the best SIMD algorithm of
    /// each round. Rates are by CPU time where both sides report it (time spent
    /// descheduled on a busy machine does not count), else by the wall clock; the output
    /// says which. Whether every algorithm's answers were the same.
    #[allow(clippy::too_many_arguments)]
    pub fn compare(
        harness: &Path,
        rules: &Path,
        trace: &[[u64; 5]],
        answers: &[Option<usize>],
        passes: usize,
        rounds: usize,
        first: Rates,
        mut again: impl FnMut() -> Result<Rates, CliError>,
    ) -> Result<bool, CliError> {
        // Removed when dropped, on every way out of here.
        let tmp = tempfile::Builder::new()
            .prefix("fusebox-rte-acl-")
            .suffix(".trace")
            .tempfile()
            .map_err(|e| CliError::io(std::env::temp_dir(), "cannot create a file in it: ", e))?;
        let file = tmp.path();
        std::fs::write(file, trace_text(trace)).map_err(|e| CliError::io(file, "", e))?;
        let want = digest(answers);
        // Per algorithm, in the harness's order: per-round ratios, rates, answers equal.
        let mut algs: Vec<(String, Vec<f64>, Vec<f64>, bool)> = Vec::new();
        let mut ours = Vec::new();
        // Per round: FuseBox ÷ the fastest SIMD algorithm of that round.
        let mut vs_simd = Vec::new();
        let mut result = Ok(());
        let mut by_wall = false;
        for round in 0..rounds {
            let fb = if round == 0 { first } else { again()? };
            // FuseBox's rate and the other's, by CPU time when both have it.
            let mut pair = |o: Rates| match (fb.cpu, o.cpu) {
                (Some(a), Some(b)) => (a, b),
                _ => {
                    by_wall = true;
                    (fb.wall, o.wall)
                }
            };
            ours.push(fb.cpu.unwrap_or(fb.wall));
            let out = Command::new(harness)
                .arg(rules)
                .arg(file)
                .arg(passes.to_string())
                .output();
            let out = match out {
                Ok(o) if o.status.success() => o,
                Ok(o) => {
                    result = Err(CliError::Invalid(format!(
                        "{}: exit status {}: {}",
                        harness.display(),
                        o.status,
                        String::from_utf8_lossy(&o.stderr).trim()
                    )));
                    break;
                }
                Err(e) => {
                    result = Err(CliError::io(harness, "running", e));
                    break;
                }
            };
            let (mut simd, mut simd_us) = (0f64, 0f64);
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if !line.starts_with("alg=") {
                    if round == 0 {
                        eprintln!("rte-acl: {line}");
                    }
                    continue;
                }
                let Some((name, best, dig)) = parse_line(line) else {
                    eprintln!("rte-acl: unreadable line `{line}`");
                    continue;
                };
                let k = match algs.iter().position(|a| a.0 == name) {
                    Some(k) => k,
                    None => {
                        algs.push((name, Vec::new(), Vec::new(), true));
                        algs.len() - 1
                    }
                };
                let (us, them) = pair(best);
                algs[k].1.push(us / them.max(1e-9));
                algs[k].2.push(them);
                algs[k].3 &= dig == want;
                if algs[k].0 != "scalar" && them > simd {
                    simd = them;
                    simd_us = us;
                }
            }
            if simd > 0.0 {
                vs_simd.push(simd_us / simd);
            }
        }
        drop(tmp);
        result?;
        let (f, flo, fhi) = median(ours);
        let clock = if by_wall {
            "wall clock"
        } else {
            "thread CPU time"
        };
        eprintln!(
            "rte-acl: rates of fastest passes by {clock}, in M lookups/s; median of {rounds} rounds (range)"
        );
        eprintln!("rte-acl: FuseBox    {f:>7.2} ({flo:.2}-{fhi:.2})");
        let mut same = true;
        let mut best_simd: Option<(&str, f64)> = None;
        for (name, ratios, rates, eq) in &algs {
            let (r, rlo, rhi) = median(rates.clone());
            let q = median(ratios.clone());
            eprintln!(
                "rte-acl: {name:<10} {r:>7.2} ({rlo:.2}-{rhi:.2}); FuseBox ÷ {name} {:.2} ({:.2}-{:.2}); answers {}",
                q.0,
                q.1,
                q.2,
                if *eq { "equal" } else { "DIFFER" }
            );
            same &= eq;
            if name != "scalar" && best_simd.is_none_or(|b| r > b.1) {
                best_simd = Some((name, r));
            }
        }
        match best_simd {
            Some((name, _)) => {
                let q = median(vs_simd);
                eprintln!(
                    "rte-acl: FuseBox ÷ best SIMD of each round (mostly {name}): {:.2} ({:.2}-{:.2})",
                    q.0, q.1, q.2
                );
            }
            None => eprintln!("rte-acl: no SIMD algorithm ran"),
        }
        Ok(same)
    }
}
