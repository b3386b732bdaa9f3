//! The timing harness of `fusebox bench`: how a configuration runs (a chain in the executor,
//! or the reference loop), how a group of configurations is timed (a warm-up pass, then
//! repetitions in which they take turns pass by pass, then one latency pass each), and the
//! summaries of the samples (min / median / max, nearest-rank percentiles).

use super::report::Params;
use super::Bench;
use crate::error::CliError;
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use packet::Packet;
use ports::pcap::Record;
use std::time::Instant;
use synth::Mode;

/// Bytes counted per frame besides the frame itself: FCS (not in the trace), preamble and
/// start delimiter (8), inter-frame gap (12).
const WIRE_EXTRA: u64 = 4 + 20;

/// How a configuration runs.
pub(super) enum Runner {
    /// A chain in the executor, over the trace at its entry.
    Chain {
        ex: Box<Executor>,
        inputs: Vec<((usize, usize), Vec<Record>)>,
    },
    /// The reference loop over the trace, with one recycled buffer per batch slot.
    Reference {
        records: Vec<Record>,
        bufs: Vec<Packet>,
    },
    /// Replicas of a chain on worker threads, each over its share of the trace.
    Workers(Box<dataplane::ReplayWorkers>),
    /// The same chain in FastClick (`--fastclick`): a process per repetition that runs all
    /// of the repetition's passes at once, timed inside FastClick.
    FastClick(Box<super::fastclick::Timed>),
    /// A loop of its own (an operator pipeline without the executor, NFs on threads joined
    /// by rings): one call is one pass over its trace, returning the packets it pushed.
    Loop(Box<dyn FnMut() -> u64>),
    /// A chain built afresh for every pass (untimed), so that state kept between passes
    /// (remembered flows, NAPT mappings) does not turn a trace of new flows into hits; only
    /// the replay is timed.
    Fresh(Box<Fresh>),
}

/// A trace at a chain's entry, shared by the [`Runner::Fresh`] configurations of a group.
pub(super) type FreshInputs = std::rc::Rc<Vec<((usize, usize), Vec<Record>)>>;

/// A [`Runner::Fresh`] chain: how to build it, and what it is fed (shared between the
/// configurations of a group: a million frames of 1500 bytes are 1.5 GB).
pub(super) struct Fresh {
    pub(super) chain: ChainFile,
    pub(super) entry: Endpoint,
    pub(super) mode: Mode,
    pub(super) batch: usize,
    /// The trace at the entry the chain's naive build gave.
    pub(super) inputs: FreshInputs,
}

impl Fresh {
    /// One pass on a new executor: the packets pushed and the seconds the replay took
    /// (building and dropping the executor are not timed).
    fn pass(&self) -> Result<(u64, f64), CliError> {
        let opts = RunOptions {
            batch: self.batch,
            ..RunOptions::default()
        };
        let mut ex = Executor::new(&self.chain, &opts, |_, _| Ok(ExitSink::Count))?;
        self.mode.install(&mut ex, chain::FastOptions::default());
        let at = ex.entry(&self.entry);
        if self.inputs.iter().any(|(a, _)| Some(*a) != at) {
            return Err(CliError::Invalid(format!(
                "{}: entry {} moved in {}",
                self.chain.path.display(),
                self.entry,
                self.mode.name()
            )));
        }
        let t0 = Instant::now();
        let n = ex.replay(&self.inputs, 1);
        let secs = t0.elapsed().as_secs_f64();
        drop(ex);
        Ok((n, secs))
    }
}

impl Runner {
    /// One pass: the packets pushed, and for workers the time of the slowest (the harness
    /// times the others itself).
    pub(super) fn pass(&mut self) -> Result<(u64, Option<f64>), CliError> {
        Ok(match self {
            Runner::Chain { ex, inputs } => (ex.replay(inputs, 1), None),
            Runner::Reference { records, bufs } => (reference_pass(records, bufs), None),
            Runner::Workers(crew) => {
                let (n, slowest, _) = crew.pass(1)?;
                (n, Some(slowest.as_secs_f64()))
            }
            Runner::FastClick(peer) => {
                let (n, secs) = peer.rep()?;
                (n, Some(secs))
            }
            Runner::Loop(pass) => (pass(), None),
            Runner::Fresh(f) => {
                let (n, secs) = f.pass()?;
                (n, Some(secs))
            }
        })
    }

    /// Whether a call to [`Runner::pass`] runs all of a repetition's passes (and its own
    /// warm-up) at once: FastClick, a separate process.
    fn whole_rep(&self) -> bool {
        matches!(self, Runner::FastClick(_))
    }
}

/// The reference loop: each batch's frames are copied into recycled buffers (as the
/// executor's replay does), then every packet's Ethernet and IPv4 headers are read and its
/// TTL decremented with the checksum updated (RFC 1624). Returns the packets touched.
fn reference_pass(records: &[Record], bufs: &mut [Packet]) -> u64 {
    let mut n = 0u64;
    let mut acc = 0u32;
    let batch = bufs.len().max(1);
    for chunk in records.chunks(batch) {
        for (r, p) in chunk.iter().zip(bufs.iter_mut()) {
            p.reset(&r.data);
        }
        for p in bufs.iter_mut().take(chunk.len()) {
            let d = p.data_mut();
            if d.len() >= 34 && d[12] == 0x08 && d[13] == 0 && d[14] >> 4 == 4 && d[22] > 1 {
                d[22] -= 1;
                // TTL is the high byte of its 16-bit word: the sum gains 0x0100.
                let c = u32::from(u16::from_be_bytes([d[24], d[25]])) + 0x0100;
                let c = (c & 0xffff) + (c >> 16);
                d[24..26].copy_from_slice(&(c as u16).to_be_bytes());
                acc = acc.wrapping_add(u32::from_be_bytes([d[30], d[31], d[32], d[33]]));
            }
            n += 1;
        }
    }
    std::hint::black_box(acc);
    n
}

/// One configuration of a group.
pub(super) struct Config {
    /// `naive`, `synth` or `reference`.
    pub(super) mode: &'static str,
    /// NFs in the chain (0 for the reference loop).
    pub(super) nfs: usize,
    /// Worker threads (1: the executor on the calling thread).
    pub(super) workers: usize,
    pub(super) runner: Runner,
    /// Packets and wire bytes (frames + FCS + preamble + gap) per pass.
    pub(super) packets: u64,
    pub(super) wire_bytes: u64,
    pub(super) mpps: Vec<f64>,
    pub(super) gbps: Vec<f64>,
    pub(super) latency: Option<[f64; 3]>,
}

impl Config {
    pub(super) fn key(&self) -> String {
        match self.mode {
            "reference" => "reference".to_string(),
            m if self.workers > 1 => format!("{m} {} x{}", self.nfs, self.workers),
            m => format!("{m} {}", self.nfs),
        }
    }
}

/// Min, median and max of samples (zeros when there are none).
pub(super) fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => (0.0, 0.0, 0.0),
        n => (s[0], s[n / 2], s[n - 1]),
    }
}

/// p50, p99 and p99.9 of nanosecond samples (nearest rank).
pub(super) fn percentiles(mut v: Vec<u64>) -> Option<[f64; 3]> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some([50.0, 99.0, 99.9].map(|p| nearest_rank(&v, p) as f64))
}

/// The `p`-th percentile of sorted samples, nearest rank (0 when there are none).
pub(super) fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted
        .get(i.clamp(1, sorted.len().max(1)) - 1)
        .copied()
        .unwrap_or(0)
}

/// The nominal frequency, in MHz, of the first CPU `/proc/cpuinfo` lists.
pub(super) fn cpu_mhz() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|m| *m > 0.0)
}

impl Bench {
    /// A chain configuration: `chain` built with `batch`, run in `mode` (a `bool` stands
    /// for synthesized (`true`) or naive), fed `records` at `entry`.
    pub(super) fn chain_config(
        &self,
        chain: &ChainFile,
        entry: &Endpoint,
        mode: impl Into<Mode>,
        batch: usize,
        records: &[Record],
    ) -> Result<Config, CliError> {
        let mode: Mode = mode.into();
        let opts = RunOptions {
            batch,
            ..RunOptions::default()
        };
        let mut ex = Executor::new(chain, &opts, |_, _| Ok(ExitSink::Count))?;
        mode.install(&mut ex, chain::FastOptions::default());
        let at = ex.entry(entry).ok_or_else(|| {
            CliError::Invalid(format!("{}: no entry {entry}", chain.path.display()))
        })?;
        Ok(Config {
            mode: mode.name(),
            nfs: chain.nfs.len(),
            runner: Runner::Chain {
                ex: Box::new(ex),
                inputs: vec![(at, records.to_vec())],
            },
            workers: 1,
            packets: records.len() as u64,
            wire_bytes: wire_bytes(records),
            mpps: Vec::new(),
            gbps: Vec::new(),
            latency: None,
        })
    }

    /// `chain` on `workers` worker threads in `mode`, the trace `records` at `entry`
    /// dispatched among them once (each worker replays its share; a pass's time is the
    /// slowest worker's).
    pub(super) fn workers_config(
        &self,
        chain: &ChainFile,
        entry: &Endpoint,
        mode: Mode,
        batch: usize,
        records: &[Record],
        workers: usize,
    ) -> Result<Config, CliError> {
        let opts = RunOptions {
            batch,
            ..RunOptions::default()
        };
        let mut probe = Executor::new(chain, &opts, |_, _| Ok(ExitSink::Count))?;
        let at = probe.entry(entry).ok_or_else(|| {
            CliError::Invalid(format!("{}: no entry {entry}", chain.path.display()))
        })?;
        let dispatcher = dataplane::Dispatcher::for_chain(&mut probe, workers);
        let shares = dataplane::predispatch(&dispatcher, &[(at, records.to_vec())]);
        let setup = dataplane::Setup {
            chain: chain.clone(),
            options: opts,
            mode,
            fast: chain::FastOptions::default(),
            trust_switch_tags: false,
            board: None,
            stop: None,
        };
        let crew = dataplane::ReplayWorkers::start(&setup, shares)?;
        Ok(Config {
            mode: mode.name(),
            nfs: chain.nfs.len(),
            runner: Runner::Workers(Box::new(crew)),
            workers,
            packets: records.len() as u64,
            wire_bytes: wire_bytes(records),
            mpps: Vec::new(),
            gbps: Vec::new(),
            latency: None,
        })
    }

    /// The trace `records` at `entry` of `chain`, shared by [`Bench::fresh_config`]s.
    pub(super) fn fresh_inputs(
        &self,
        chain: &ChainFile,
        entry: &Endpoint,
        records: Vec<Record>,
    ) -> Result<FreshInputs, CliError> {
        let probe = Executor::new(chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count))?;
        let at = probe.entry(entry).ok_or_else(|| {
            CliError::Invalid(format!("{}: no entry {entry}", chain.path.display()))
        })?;
        Ok(std::rc::Rc::new(vec![(at, records)]))
    }

    /// A chain configuration built afresh for every pass (see [`Runner::Fresh`]): `chain`
    /// in `mode`, fed `inputs` (from [`Bench::fresh_inputs`]), `batch` packets at a time.
    pub(super) fn fresh_config(
        &self,
        chain: &ChainFile,
        entry: &Endpoint,
        mode: Mode,
        batch: usize,
        inputs: &FreshInputs,
    ) -> Config {
        let records: &[Record] = inputs.first().map_or(&[], |(_, r)| r);
        Config {
            mode: mode.name(),
            nfs: chain.nfs.len(),
            packets: records.len() as u64,
            wire_bytes: wire_bytes(records),
            runner: Runner::Fresh(Box::new(Fresh {
                chain: chain.clone(),
                entry: entry.clone(),
                mode,
                batch,
                inputs: inputs.clone(),
            })),
            workers: 1,
            mpps: Vec::new(),
            gbps: Vec::new(),
            latency: None,
        }
    }

    /// A configuration run by its own loop: `pass` pushes `records` once (see
    /// [`Runner::Loop`]); `mode` names it, `nfs` is how many NFs it chains.
    pub(super) fn loop_config(
        &self,
        mode: &'static str,
        nfs: usize,
        records: &[Record],
        pass: Box<dyn FnMut() -> u64>,
    ) -> Config {
        Config {
            mode,
            nfs,
            runner: Runner::Loop(pass),
            workers: 1,
            packets: records.len() as u64,
            wire_bytes: wire_bytes(records),
            mpps: Vec::new(),
            gbps: Vec::new(),
            latency: None,
        }
    }

    /// The reference loop over `records`, `batch` packets at a time.
    pub(super) fn reference_config(&self, batch: usize, records: &[Record]) -> Config {
        Config {
            mode: "reference",
            nfs: 0,
            runner: Runner::Reference {
                records: records.to_vec(),
                bufs: (0..batch.max(1)).map(|_| Packet::from_bytes(&[])).collect(),
            },
            workers: 1,
            packets: records.len() as u64,
            wire_bytes: wire_bytes(records),
            mpps: Vec::new(),
            gbps: Vec::new(),
            latency: None,
        }
    }

    /// Measures a group: one warm-up pass each, then `reps` repetitions in which the
    /// configurations take turns pass by pass; then one latency pass per chain. Records
    /// every configuration and the `ratios` (numerator key, denominator key).
    pub(super) fn measure<R: AsRef<str>>(
        &mut self,
        p: &Params,
        mut configs: Vec<Config>,
        ratios: &[(R, R)],
    ) -> Result<(), CliError> {
        eprintln!(
            "fusebox bench: {}, {}-byte frames, batch {}: {}",
            p.label(),
            p.frame,
            p.batch,
            configs
                .iter()
                .map(Config::key)
                .collect::<Vec<_>>()
                .join(", ")
        );
        time_group(&mut configs, self.reps, p.passes)?;
        self.report.group(p, &configs, ratios, self.reps);
        Ok(())
    }
}

/// Times a group of configurations: one warm-up pass each, then `reps` repetitions of
/// `passes` passes in which they take turns pass by pass (each repetition adds one Mpps and
/// one Gbit/s sample per configuration); then one latency pass per chain.
///
/// A peer run as a separate process (FastClick) takes its turn once per repetition, after
/// the others' passes: its process warms up and runs the repetition's passes itself.
fn time_group(configs: &mut [Config], reps: usize, passes: u64) -> Result<(), CliError> {
    for c in configs.iter_mut().filter(|c| !c.runner.whole_rep()) {
        c.runner.pass()?;
    }
    for _ in 0..reps {
        let mut secs = vec![0f64; configs.len()];
        let mut packets = vec![0u64; configs.len()];
        for _ in 0..passes {
            for (k, c) in configs.iter_mut().enumerate() {
                if c.runner.whole_rep() {
                    continue;
                }
                let t0 = Instant::now();
                let (n, slowest) = c.runner.pass()?;
                packets[k] += n;
                secs[k] += slowest.unwrap_or_else(|| t0.elapsed().as_secs_f64());
            }
        }
        for (k, c) in configs.iter_mut().enumerate() {
            if c.runner.whole_rep() {
                let (n, s) = c.runner.pass()?;
                packets[k] += n;
                secs[k] += s.unwrap_or(0.0);
            }
        }
        for (k, c) in configs.iter_mut().enumerate() {
            let s = secs[k].max(1e-9);
            let passes = packets[k] as f64 / c.packets.max(1) as f64;
            c.mpps.push(packets[k] as f64 / s / 1e6);
            c.gbps.push(c.wire_bytes as f64 * passes * 8.0 / s / 1e9);
        }
    }
    for c in configs.iter_mut() {
        match &mut c.runner {
            Runner::Chain { ex, inputs } => {
                ex.record_latency(true);
                ex.replay(inputs, 1);
                c.latency = percentiles(ex.take_latency());
                ex.record_latency(false);
            }
            Runner::Workers(crew) => c.latency = percentiles(crew.latency_pass()?),
            Runner::Reference { .. }
            | Runner::FastClick(_)
            | Runner::Loop(_)
            | Runner::Fresh(_) => {}
        }
    }
    Ok(())
}

/// Wire bytes of a trace: frames + FCS + preamble + gap.
pub(super) fn wire_bytes(records: &[Record]) -> u64 {
    records
        .iter()
        .map(|r| r.data.len() as u64 + WIRE_EXTRA)
        .sum()
}
