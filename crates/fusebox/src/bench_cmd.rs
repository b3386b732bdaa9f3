//! `fusebox bench`: the papers' experiments replayed in memory on one core, naive and
//! synthesized, with a reference loop as the practical upper bound; within a repetition the
//! configurations of a group take turns pass by pass, so that the ratios are taken under the
//! same load.
//!
//! The machines are shared and noisy: absolute rates move from run to run; the ratio of two
//! configurations measured one right after the other, repetition by repetition, moves much
//! less. The report gives min / median / max of the rates and the median (and spread) of the
//! per-repetition ratios.
//!
//! Conventions (also printed in the output's header):
//! * **Gbit/s** counts every frame as its size including the 4-byte FCS (the trace captures
//!   the frame without it) plus 20 bytes of preamble and inter-frame gap, as line-rate figures
//!   do: a 64-byte frame is 84 bytes on the wire.
//! * **cycles/packet** is ns/packet times the nominal frequency `/proc/cpuinfo` reports
//!   (`cpu MHz`, first CPU): the time-stamp counter is not read, because reading it needs
//!   `unsafe`, which this crate forbids. Omitted when the file does not say.
//! * **latency** is measured in one extra pass per configuration, apart from the timed
//!   passes: from the instant a batch's buffers are filled to the instant each of its packets
//!   leaves by an exit (so the packets at the end of a batch wait for those before them).
//! * the **reference loop** copies each frame into a recycled buffer as the executor does,
//!   reads its Ethernet and IPv4 headers and decrements the TTL (with the checksum update).
//!
//! With `--fastclick PATH`, the `routers`, `napts` and `isp` scenarios also run each chain
//! in FastClick ([`fastclick`]), checked to send the same packets, and report FuseBox ÷
//! FastClick.
//!
//! The code: [`harness`] times configurations, [`scenarios`] builds them (one entry per
//! scenario in [`scenarios::SCENARIOS`]), [`report`] prints and draws what was measured.

use crate::error::CliError;
use clap::Args;
use harness::cpu_mhz;
use report::{Report, RunShape};
use scenarios::SCENARIOS;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

mod fastclick;
mod harness;
mod live;
mod ops;
mod parallel;
mod placement;
mod report;
mod scenarios;
mod sfc;
mod stages;

/// Arguments of `fusebox bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Scenarios to run, comma-separated: routers, napts (SNF Fig. 7), frame-sizes (SNF
    /// Fig. 8), ttl, lpm (NetBricks' TTL NF and DIR-24-8 router, each also written with
    /// operators), ops-chain (NetBricks Fig. 7: 1..8 operator TTL NFs on one core against
    /// NFs on threads joined by rings, with and without copies), bricks (the NFs of
    /// examples/bricks on 1 and 2 workers), isp (SNF Fig. 10),
    /// speedybox (SpeedyBox's BlacklistFilter chains and real chains, naive vs fastpath),
    /// workers (in-memory replay on 1 and 2 worker threads); placement (NFCompass: run to
    /// completion, replicas and pipelines of examples/isp and a DPI chain, with the model's
    /// predictions); parallel (NFCompass Fig. 13: four identical firewalls or IDSes
    /// sequential and in parallel branches); live (not in the default
    /// list: FuseBox over AF_XDP and AF_PACKET against the kernel forwarding between veth
    /// pairs in namespaces it makes; needs root); stages (not in the default list: ns per
    /// packet of the NSH stages through BPF_PROG_TEST_RUN, with `--chaining-box` against
    /// Chaining-Box's; needs root); sfc (not in the default list: round-trip time through
    /// chains of 0..4 Linux-router SFs on two hosts in namespaces, with the NSH stages,
    /// without and with direct links, with `--chaining-box` also Chaining-Box's stages,
    /// and through one FuseBox hop of 1..4 NFs; needs root); newflows (not in the default
    /// list: one NAPT and the ISP chain over 1,000,000 one-packet UDP flows at 64 and 1500
    /// bytes, every mode, each pass on a chain built afresh; `--quick`: 100,000).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "routers,napts,workers,frame-sizes,ttl,lpm,ops-chain,bricks,isp,speedybox,placement,parallel"
    )]
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
    /// Batch sizes for routers and napts, comma-separated; the other scenarios use the first
    /// (`live`: FuseBox's `--batch`).
    #[arg(long, value_delimiter = ',', default_value = "32,128")]
    pub batch: Vec<usize>,
    /// Directory of the bundled examples.
    #[arg(long, default_value = "examples")]
    pub examples: PathBuf,
    /// Print one JSON record per scenario, configuration and parameter (and per ratio) on
    /// stdout, one per line, instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where the PNG charts, the JSON records (`bench.json`) and generated configurations
    /// go.
    #[arg(long, default_value = "bench-out")]
    pub charts: PathBuf,
    /// Write no charts (the JSON records and generated configurations are still written).
    #[arg(long)]
    pub no_charts: bool,
    /// Where the ClassBench filter sets of the `isp` scenario are (`fw1_1k`, `fw1_10k`).
    #[arg(long, default_value = "../shared/data/classbench/neurocuts")]
    pub classbench: PathBuf,
    /// The `isp` scenario's rule lists to run, comma-separated, of `250`, `1k` and `10k`
    /// (all three by default; `--quick`: `250`).
    #[arg(long, value_delimiter = ',')]
    pub isp_lists: Vec<String>,
    /// The `isp` scenario's frame sizes in bytes, comma-separated (64, 128, 256 and 1500
    /// by default; `--quick`: 64).
    #[arg(long, value_delimiter = ',')]
    pub isp_frames: Vec<u32>,
    /// `live`: seconds per measured phase (default 2; `--quick`: 0.3).
    #[arg(long)]
    pub live_seconds: Option<f64>,
    /// `live`: frame size in bytes with the FCS (64..=1518).
    #[arg(long, default_value_t = 64)]
    pub live_frame: u32,
    /// `live`: offered rate of the fixed-rate phase, packets/s (0: no such phase).
    #[arg(long, default_value_t = 100_000)]
    pub live_rate: u64,
    /// `live`: the ports of the sender and the receiver (afxdp, afpacket or auto).
    #[arg(long, default_value = "afpacket")]
    pub live_ports: nic::Kind,
    /// `live`: FuseBox's execution mode (naive, synth, fastpath).
    #[arg(long, default_value = "naive")]
    pub live_mode: String,
    /// `live`: pin the sender to CPU 0, FuseBox and the receiver to CPU 1 (with `taskset`),
    /// and steer the kernel's forwarding to CPU 1 (RPS on the forwarder's entry device),
    /// instead of leaving the threads to the scheduler.
    #[arg(long)]
    pub live_pin: bool,
    /// `live`: FuseBox's worker count (`fusebox run --cores`; 1 by default: the sender
    /// and the receiver need the machine's other cores).
    #[arg(long, default_value_t = 1)]
    pub live_cores: usize,
    /// FastClick's userlevel binary (`userlevel/click`): in `routers`, `napts` and `isp`,
    /// run the same chains as one FastClick configuration each, in the same repetitions,
    /// check once per chain that its exits send the same packets, and report FuseBox ÷
    /// FastClick per mode and chain length (see docs/benchmarks.md).
    #[arg(long, value_name = "PATH")]
    pub fastclick: Option<PathBuf>,
    /// `stages` and `sfc`: a directory holding Chaining-Box's own stages (`sfc_stages_kern.o`,
    /// `sfc_classifier_kern.o`, built by scripts/build-chaining-box.sh): measure them on
    /// the same frames and report FuseBox ÷ Chaining-Box per stage (`stages`), and in the
    /// same chains across namespaces (`sfc`).
    #[arg(long, value_name = "DIR")]
    pub chaining_box: Option<PathBuf>,
}

/// A run of `fusebox bench`: settings and what has been measured so far.
struct Bench {
    quick: bool,
    classbench: PathBuf,
    isp_lists: Vec<String>,
    isp_frames: Vec<u32>,
    reps: usize,
    passes: u64,
    packets: u64,
    batches: Vec<usize>,
    examples: PathBuf,
    out_dir: PathBuf,
    live: live::LiveOpts,
    /// FastClick's binary (`--fastclick`), checked to run.
    fastclick: Option<PathBuf>,
    /// Chains FastClick was checked on: name -> packets its exits send per pass.
    fastclick_checked: std::collections::BTreeMap<String, u64>,
    /// Chaining-Box's stages (`--chaining-box`).
    chaining_box: Option<PathBuf>,
    report: Report,
}

/// `fusebox bench`.
pub fn run(a: &BenchArgs) -> Result<ExitCode, CliError> {
    let t0 = Instant::now();
    for s in &a.scenario {
        if !SCENARIOS.iter().any(|x| x.name == s) {
            let names: Vec<&str> = SCENARIOS.iter().map(|x| x.name).collect();
            return Err(CliError::Invalid(format!(
                "--scenario {s}: expected one of {}",
                names.join(", ")
            )));
        }
    }
    if let Some(l) = a
        .isp_lists
        .iter()
        .find(|l| !["250", "1k", "10k"].contains(&l.as_str()))
    {
        return Err(CliError::Invalid(format!(
            "--isp-lists {l}: expected 250, 1k or 10k"
        )));
    }
    if let Some(f) = a.isp_frames.iter().find(|&&f| !(64..=1514).contains(&f)) {
        return Err(CliError::Invalid(format!(
            "--isp-frames {f}: expected sizes in 64..=1514"
        )));
    }
    if a.batch.is_empty() || a.batch.iter().any(|&b| b == 0 || b > 4096) {
        return Err(CliError::Invalid(
            "--batch: expected sizes in 1..=4096".into(),
        ));
    }
    if !(64..=1518).contains(&a.live_frame) {
        return Err(CliError::Invalid(format!(
            "--live-frame {}: expected a size in 64..=1518",
            a.live_frame
        )));
    }
    if a.live_mode.parse::<synth::Mode>().is_err() {
        return Err(CliError::Invalid(format!(
            "--live-mode {}: expected naive, synth, fastpath, parallel or merged",
            a.live_mode
        )));
    }
    if a.live_cores == 0 || a.live_cores > 1024 {
        return Err(CliError::Invalid(format!(
            "--live-cores {}: expected 1..=1024",
            a.live_cores
        )));
    }
    let live_seconds = a.live_seconds.unwrap_or(if a.quick { 0.3 } else { 2.0 });
    if !(live_seconds > 0.0 && live_seconds <= 3600.0) {
        return Err(CliError::Invalid(format!(
            "--live-seconds {live_seconds}: expected a duration in (0, 3600]"
        )));
    }
    let fastclick = a.fastclick.as_deref().map(fastclick::binary).transpose()?;
    let mut b = Bench {
        quick: a.quick,
        classbench: a.classbench.clone(),
        isp_lists: a.isp_lists.clone(),
        isp_frames: a.isp_frames.clone(),
        reps: a.reps.unwrap_or(if a.quick { 2 } else { 7 }).max(1),
        passes: a.passes.unwrap_or(if a.quick { 1 } else { 10 }).max(1),
        packets: if a.quick { 10_000 } else { 100_000 },
        batches: a.batch.clone(),
        examples: a.examples.clone(),
        out_dir: a.charts.clone(),
        live: live::LiveOpts {
            seconds: live_seconds,
            frame: a.live_frame,
            rate: a.live_rate,
            ports: a.live_ports,
            mode: a.live_mode.clone(),
            cores: a.live_cores,
            batch: a.batch[0],
            pin: a.live_pin,
        },
        fastclick,
        fastclick_checked: std::collections::BTreeMap::new(),
        chaining_box: a.chaining_box.clone(),
        report: Report::new(cpu_mhz()),
    };
    for s in SCENARIOS {
        if a.scenario.iter().any(|x| x == s.name) {
            eprintln!("fusebox bench: {} — {}", s.name, s.about);
            (s.run)(&mut b)?;
        }
    }
    let shape = RunShape {
        packets: b.packets,
        passes: b.passes,
        reps: b.reps,
    };
    b.report
        .finish(&b.out_dir, &shape, a.json, a.no_charts, t0)?;
    Ok(ExitCode::SUCCESS)
}
