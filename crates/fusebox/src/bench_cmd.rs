//! `fusebox bench`: SNF Fig. 7's chains (1 and 10 routers, 1 and 10 NAPTs) replayed in
//! memory on one core, naive and synthesized; within a repetition the configurations take
//! turns pass by pass, so that the ratios are taken under the same load.
//!
//! The machines are shared and noisy: absolute rates move from run to run; the ratio of two
//! configurations measured one right after the other, repetition by repetition, moves much
//! less. The report gives min / median / max of the rates and the median of the per-rep
//! ratios.

use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use clap::Args;
use packet::Precision;
use ports::gen::{generate, GenConfig, Mix, SizeDist};
use ports::pcap::Record;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `fusebox bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Scenarios to run, comma-separated: routers, napts.
    #[arg(long, value_delimiter = ',', default_value = "routers,napts")]
    pub scenario: Vec<String>,
    /// A short run (seconds), to check that the command works; its numbers mean little.
    #[arg(long)]
    pub quick: bool,
    /// Repetitions (after one warm-up pass that is not counted).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Passes over the trace per repetition.
    #[arg(long)]
    pub passes: Option<u64>,
    /// Directory of the bundled examples.
    #[arg(long, default_value = "examples")]
    pub examples: PathBuf,
    /// Print one JSON record per scenario, configuration and ratio on stdout.
    #[arg(long)]
    pub json: bool,
}

/// One configuration of a scenario.
struct Config {
    nfs: usize,
    synth: bool,
    ex: Executor,
    /// The trace, at the entry.
    inputs: Vec<((usize, usize), Vec<Record>)>,
    mpps: Vec<f64>,
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => (0.0, 0.0, 0.0),
        n => (s[0], s[n / 2], s[n - 1]),
    }
}

/// The trace: 64-byte UDP frames from 10.0.0.0/16 to 10.1.0.0/16 over 1,000 flows.
fn trace(packets: u64) -> Vec<Record> {
    let cfg = GenConfig {
        packets,
        flows: 1000,
        mix: Mix {
            tcp: 0,
            udp: 1,
            icmp: 0,
        },
        size: SizeDist::Fixed(64),
        ..GenConfig::default()
    };
    generate(&cfg)
        .map(|(timestamp, data)| Record {
            timestamp,
            precision: Precision::Nano,
            orig_len: data.len() as u32,
            data,
        })
        .collect()
}

/// `fusebox bench`.
pub fn run(a: &BenchArgs) -> Result<ExitCode, String> {
    let reps = a.reps.unwrap_or(if a.quick { 2 } else { 7 }).max(1);
    let passes = a.passes.unwrap_or(if a.quick { 1 } else { 20 }).max(1);
    let packets = if a.quick { 20_000 } else { 100_000 };
    let records = trace(packets);
    let mut out = Vec::new();
    for sc in &a.scenario {
        let (dir, nf) = match sc.as_str() {
            "routers" => ("routers", "r1"),
            "napts" => ("napts", "n1"),
            other => return Err(format!("--scenario {other}: expected routers or napts")),
        };
        let entry = Endpoint {
            nf: nf.to_string(),
            iface: "eth0".to_string(),
        };
        let mut configs = Vec::new();
        for (file, nfs, synth) in [
            ("one.toml", 1, false),
            ("chain.toml", 10, false),
            ("chain.toml", 10, true),
        ] {
            let path = a.examples.join(dir).join(file);
            let chain = ChainFile::load(&path).map_err(|e| e.to_string())?;
            let mut ex = Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count))?;
            if synth {
                synth::install(&mut ex)?;
            }
            let at = ex
                .entry(&entry)
                .ok_or_else(|| format!("{}: no entry {entry}", path.display()))?;
            configs.push(Config {
                nfs,
                synth,
                ex,
                inputs: vec![(at, records.clone())],
                mpps: Vec::new(),
            });
        }
        // Warm-up (caches, flow tables), then the repetitions. Within a repetition the
        // configurations take turns pass by pass, so that a change in the machine's load
        // falls on all of them alike.
        for c in &mut configs {
            c.ex.replay(&c.inputs, 1);
        }
        for _ in 0..reps {
            let mut secs = vec![0f64; configs.len()];
            let mut packets = vec![0u64; configs.len()];
            for _ in 0..passes {
                for (k, c) in configs.iter_mut().enumerate() {
                    let t0 = Instant::now();
                    packets[k] += c.ex.replay(&c.inputs, 1);
                    secs[k] += t0.elapsed().as_secs_f64();
                }
            }
            for (k, c) in configs.iter_mut().enumerate() {
                c.mpps.push(packets[k] as f64 / secs[k].max(1e-9) / 1e6);
            }
        }
        let name = |c: &Config| {
            format!(
                "{} {}{}",
                c.nfs,
                if c.nfs == 1 {
                    dir.trim_end_matches('s')
                } else {
                    dir
                },
                if c.synth { " synth" } else { " naive" }
            )
        };
        for c in &configs {
            let (lo, med, hi) = stats(&c.mpps);
            if a.json {
                out.push(format!(
                    "{{\"scenario\": \"{sc}\", \"nfs\": {}, \"mode\": \"{}\", \"frame\": 64, \"packets\": {packets}, \"passes\": {passes}, \"mpps\": {{\"min\": {lo:.4}, \"median\": {med:.4}, \"max\": {hi:.4}}}, \"gbps_median\": {:.4}}}",
                    c.nfs,
                    if c.synth { "synth" } else { "naive" },
                    med * 64.0 * 8.0 / 1e3
                ));
            } else {
                out.push(format!(
                    "{:<18} min {lo:6.2}  median {med:6.2}  max {hi:6.2} Mpps",
                    name(c)
                ));
            }
        }
        let ratio = |x: usize, y: usize| -> (f64, f64, f64) {
            let r: Vec<f64> = configs[x]
                .mpps
                .iter()
                .zip(&configs[y].mpps)
                .map(|(a, b)| a / b.max(1e-9))
                .collect();
            stats(&r)
        };
        for (what, x, y) in [
            ("synth 10 / naive 1", 2, 0),
            ("naive 10 / naive 1", 1, 0),
            ("synth 10 / naive 10", 2, 1),
        ] {
            let (lo, med, hi) = ratio(x, y);
            if a.json {
                out.push(format!(
                    "{{\"scenario\": \"{sc}\", \"ratio\": \"{what}\", \"median\": {med:.4}, \"min\": {lo:.4}, \"max\": {hi:.4}}}"
                ));
            } else {
                out.push(format!(
                    "  {sc}: {what}: median {med:.2} (per-rep {lo:.2}–{hi:.2})"
                ));
            }
        }
    }
    if !a.json {
        outln!(
            "fusebox bench: {packets} 64-byte frames x {passes} passes, {reps} reps, one core, in memory (shared machine: compare ratios)"
        );
    }
    for l in out {
        outln!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}
