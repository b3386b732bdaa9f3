//! `fusebox verify`: run a chain in several modes and compare everything the equivalence
//! contract covers (packets per exit, drops, counters, final state, input errors).

use crate::error::CliError;
use crate::run_cmd::{load_chain, parse_binding, parse_defines, parse_reflect};
use chain::{Endpoint, RunOptions};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use synth::verify::{compare, compare_export, exported_chain, run, Difference, RunResult};
use synth::Mode;

/// Differences printed at most.
const SHOWN: usize = 10;

/// Exit status when the modes differ.
const DIFFERENT: u8 = 4;

/// Arguments of `fusebox verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Chain file (.toml) or a single Click configuration (.click).
    pub chain: PathBuf,
    /// Input capture for an entry interface: NF.IFACE=FILE (IFACE=FILE for a single Click file). Repeatable.
    #[arg(short, long = "input", value_name = "NF.IFACE=FILE")]
    pub inputs: Vec<String>,
    /// Packets leaving at this exit come back in at the same interface as replies. Repeatable.
    #[arg(long, value_name = "NF.IFACE")]
    pub reflect: Vec<String>,
    /// Override a `define` of the Click configurations: NAME=VALUE. Repeatable.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
    /// Modes to run, comma-separated; each is compared with the first.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "naive,synth",
        value_name = "MODE,MODE"
    )]
    pub modes: Vec<String>,
    /// Worker threads each mode runs on (each with its own replica of the chain; flows kept
    /// on one worker, outputs merged in canonical order, counters summed, state per worker).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub cores: usize,
    /// With the parallel mode: workers its groups' branches may use (as `fusebox run
    /// --parallel-workers`: the planner decides which branches go to helper threads).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub parallel_workers: usize,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Compare the chain (naive) with this configuration instead of modes: one that
    /// `fusebox synth --click` wrote for it. Packets per exit, packets in/out/dropped and the
    /// stateful elements' state must agree.
    #[arg(long, value_name = "FILE.click", conflicts_with = "modes")]
    pub against: Option<PathBuf>,
    /// Run the chain NSH-aware in every mode (as `fusebox run --nsh`; also `nsh = true` in
    /// the chain file). One core.
    #[arg(long)]
    pub nsh: bool,
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `fusebox verify`.
pub fn verify(a: &VerifyArgs) -> Result<ExitCode, CliError> {
    let modes: Vec<Mode> = a
        .modes
        .iter()
        .map(|m| {
            m.parse::<Mode>()
                .map_err(|e| CliError::context("--modes", e))
        })
        .collect::<Result<_, CliError>>()?;
    if modes.len() < 2 {
        return Err(CliError::Invalid(format!(
            "--modes {}: give at least two modes to compare (e.g. naive,synth)",
            a.modes.join(",")
        )));
    }
    if a.cores == 0 {
        return Err(CliError::Invalid("--cores 0: expected 1 or more".into()));
    }
    let mut chain = load_chain(&a.chain)?;
    chain.nsh |= a.nsh;
    if chain.nsh && a.cores > 1 {
        return Err(CliError::Invalid(format!(
            "--cores {}: an NSH-aware chain (--nsh, or nsh = true in the chain file) runs on one core",
            a.cores
        )));
    }
    let opts = RunOptions {
        reflect: parse_reflect(&a.reflect)?,
        defines: parse_defines(&a.defines)?,
        ..RunOptions::default()
    };
    let inputs: Vec<(Endpoint, PathBuf)> = a
        .inputs
        .iter()
        .map(|s| parse_binding(s, &chain, "--input"))
        .collect::<Result<_, _>>()?;
    if let Some(file) = &a.against {
        return against(a, &chain, &inputs, &opts, file);
    }
    if a.parallel_workers != 1 {
        if !modes.contains(&Mode::Parallel) || a.parallel_workers == 0 {
            return Err(CliError::Invalid(format!(
                "--parallel-workers {}: 1 or more, with the parallel mode in --modes",
                a.parallel_workers
            )));
        }
        crate::offload::place_branches(&chain, &opts, &inputs, a.parallel_workers)?;
    }
    let mut results: Vec<RunResult> = Vec::new();
    for (i, &m) in modes.iter().enumerate() {
        // Input and configuration errors show in the first run; later ones are the mode's.
        let r = dataplane::verify_run(&chain, &inputs, &opts, m, a.cores);
        results.push(r.map_err(|e| {
            if i == 0 {
                CliError::from(e)
            } else {
                CliError::context(format!("--mode {m}"), e)
            }
        })?);
    }
    let reference = &results[0];
    // (mode compared with the first, its differences)
    let diffs: Vec<(Mode, Vec<Difference>)> = modes
        .iter()
        .zip(&results)
        .skip(1)
        .map(|(m, r)| (*m, compare(reference, r)))
        .collect();
    let identical = diffs.iter().all(|(_, d)| d.is_empty());
    let (packets, exits) = (reference.packets(), reference.exits.len());
    let drops = reference.summary.totals.dropped;
    let state = reference.state_lines();
    if a.json {
        let mut per_mode = Vec::new();
        for (m, d) in &diffs {
            let listed: Vec<String> = d
                .iter()
                .take(SHOWN)
                .map(|d| json_str(&d.to_string()))
                .collect();
            per_mode.push(format!(
                "{{\"mode\": \"{m}\", \"differences\": {}, \"first\": [{}]}}",
                d.len(),
                listed.join(", ")
            ));
        }
        let errors: Vec<String> = reference.errors.iter().map(|e| json_str(e)).collect();
        outln!(
            "{{\"identical\": {identical}, \"reference\": \"{}\", \"packets\": {packets}, \"exits\": {exits}, \"drops\": {drops}, \"state_lines\": {state}, \"compared\": [{}], \"input_errors\": [{}]}}",
            modes[0],
            per_mode.join(", "),
            errors.join(", ")
        );
    } else if identical {
        outln!("identical: {packets} packets on {exits} exits, {drops} drops, {state} state lines");
    } else {
        let mut shown = 0;
        for (m, d) in diffs.iter().filter(|(_, d)| !d.is_empty()) {
            outln!(
                "different: {} (a) vs {m} (b): {} differences",
                modes[0],
                d.len()
            );
            for d in d.iter().take(SHOWN - shown) {
                outln!("{d}");
                shown += 1;
            }
            if shown >= SHOWN {
                break;
            }
        }
        let total: usize = diffs.iter().map(|(_, d)| d.len()).sum();
        if total > shown {
            outln!("... and {} more differences", total - shown);
        }
    }
    if !identical {
        return Ok(ExitCode::from(DIFFERENT));
    }
    if !reference.errors.is_empty() {
        for e in &reference.errors {
            eprintln!("fusebox: error: {e}");
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `fusebox verify CHAIN --against FILE`: the chain, naive, against an exported
/// configuration of it, naive, on the same inputs (endpoints renamed `STEM.NF_IFACE`).
fn against(
    a: &VerifyArgs,
    chain: &chain::ChainFile,
    inputs: &[(Endpoint, PathBuf)],
    opts: &RunOptions,
    file: &std::path::Path,
) -> Result<ExitCode, CliError> {
    let (exported, map) = exported_chain(file);
    let stem = exported
        .nfs
        .first()
        .map(|n| n.name.clone())
        .unwrap_or_default();
    let x_inputs: Vec<(Endpoint, PathBuf)> =
        inputs.iter().map(|(e, f)| (map(e), f.clone())).collect();
    let x_opts = RunOptions {
        reflect: opts.reflect.iter().map(&map).collect(),
        defines: Vec::new(),
        ..opts.clone()
    };
    let ra = run(chain, inputs, opts, Mode::Naive)?;
    let rb = run(&exported, &x_inputs, &x_opts, Mode::Naive)
        .map_err(|e| CliError::context(file.display().to_string(), e))?;
    let d = compare_export(&ra, &rb, &stem);
    if a.json {
        let listed: Vec<String> = d
            .iter()
            .take(SHOWN)
            .map(|d| json_str(&d.to_string()))
            .collect();
        outln!(
            "{{\"identical\": {}, \"against\": {}, \"packets\": {}, \"exits\": {}, \"drops\": {}, \"state_lines\": {}, \"differences\": {}, \"first\": [{}]}}",
            d.is_empty(),
            json_str(&file.display().to_string()),
            ra.packets(),
            ra.exits.len(),
            ra.summary.totals.dropped,
            ra.state_lines(),
            d.len(),
            listed.join(", ")
        );
    } else if d.is_empty() {
        outln!(
            "identical: {} packets on {} exits, {} drops, {} state lines (chain vs {})",
            ra.packets(),
            ra.exits.len(),
            ra.summary.totals.dropped,
            ra.state_lines(),
            file.display()
        );
    } else {
        outln!(
            "different: chain (a) vs {} (b): {} differences",
            file.display(),
            d.len()
        );
        for x in d.iter().take(SHOWN) {
            outln!("{x}");
        }
    }
    Ok(if d.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(DIFFERENT)
    })
}
