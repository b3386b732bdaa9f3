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

use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use clap::Args;
use packet::Packet;
use ports::gen::{generate, GenConfig, Mix, SizeDist};
use ports::pcap::Record;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use synth::verify::Mode;

mod charts;

/// Arguments of `fusebox bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Scenarios to run, comma-separated: routers, napts (SNF Fig. 7), frame-sizes (SNF
    /// Fig. 8), ttl, lpm (NetBricks' TTL NF and DIR-24-8 router), isp (SNF Fig. 10),
    /// speedybox (SpeedyBox's BlacklistFilter chains and real chains, naive vs fastpath).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "routers,napts,frame-sizes,ttl,lpm,isp,speedybox"
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
    /// Batch sizes for routers and napts, comma-separated; the other scenarios use the first.
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
}

/// A scenario: its name, what it reproduces, and how to run it.
struct Scenario {
    name: &'static str,
    about: &'static str,
    run: fn(&mut Bench) -> Result<(), String>,
}

/// Every scenario, in the order they run. Add one here.
const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "routers",
        about: "SNF Fig. 7: chains of 1..10 routers, naive and synthesized",
        run: |b| chains(b, "routers", "r"),
    },
    Scenario {
        name: "napts",
        about: "SNF Fig. 7: chains of 1..10 NAPTs, naive and synthesized",
        run: |b| chains(b, "napts", "n"),
    },
    Scenario {
        name: "frame-sizes",
        about: "SNF Fig. 8: the 10-NF chains over frames of 64..1500 bytes",
        run: frame_sizes,
    },
    Scenario {
        name: "ttl",
        about: "NetBricks' TTL NF (examples/ttl/ttl.click)",
        run: ttl,
    },
    Scenario {
        name: "lpm",
        about: "NetBricks' DIR-24-8 router with 16k seeded random routes",
        run: lpm,
    },
    Scenario {
        name: "speedybox",
        about: "SpeedyBox: 1..9 BlacklistFilters naive and fastpath (forward/forward/drop too); its two real chains' per-flow processing times, with state functions on one and two cores",
        run: speedybox,
    },
    Scenario {
        name: "isp",
        about: "SNF Fig. 10: examples/isp (firewall -> router -> NAPT) with the 250-, 1k- and 10k-rule ClassBench lists, frames of 64..1500 bytes",
        run: isp,
    },
];

/// Frame sizes of the `frame-sizes` scenario (with the FCS).
const FRAME_SIZES: [u32; 6] = [64, 128, 256, 512, 1024, 1500];

/// Routes of the `lpm` scenario and the seed they are drawn from.
const LPM_ROUTES: usize = 16_384;
const LPM_SEED: u64 = 0x4c50_4d31_3662_6e63;

/// Bytes counted per frame besides the frame itself: FCS (not in the trace), preamble and
/// start delimiter (8), inter-frame gap (12).
const WIRE_EXTRA: u64 = 4 + 20;

/// How a configuration runs.
enum Runner {
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
}

impl Runner {
    fn pass(&mut self) -> u64 {
        match self {
            Runner::Chain { ex, inputs } => ex.replay(inputs, 1),
            Runner::Reference { records, bufs } => reference_pass(records, bufs),
        }
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
struct Config {
    /// `naive`, `synth` or `reference`.
    mode: &'static str,
    /// NFs in the chain (0 for the reference loop).
    nfs: usize,
    runner: Runner,
    /// Packets and wire bytes (frames + FCS + preamble + gap) per pass.
    packets: u64,
    wire_bytes: u64,
    mpps: Vec<f64>,
    gbps: Vec<f64>,
    latency: Option<[f64; 3]>,
}

impl Config {
    fn key(&self) -> String {
        match self.mode {
            "reference" => "reference".to_string(),
            m => format!("{m} {}", self.nfs),
        }
    }
}

/// What a group of configurations was measured with.
#[derive(Clone)]
struct Params {
    scenario: &'static str,
    frame: u32,
    batch: usize,
    passes: u64,
    extra: Option<(&'static str, Value)>,
}

/// One measured configuration, as reported.
struct Measured {
    scenario: &'static str,
    mode: &'static str,
    nfs: usize,
    frame: u32,
    batch: usize,
    /// The parameter's value when it is a string (`frame-sizes`: the chain).
    tag: Option<String>,
    mpps: (f64, f64, f64),
    gbps: (f64, f64, f64),
    ns: (f64, f64, f64),
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
    mhz: Option<f64>,
    records: Vec<Value>,
    measured: Vec<Measured>,
    lines: Vec<String>,
    /// Per-flow processing times of the `speedybox` scenario: (label, sorted ns).
    flow_cdfs: Vec<(String, Vec<u64>)>,
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => (0.0, 0.0, 0.0),
        n => (s[0], s[n / 2], s[n - 1]),
    }
}

/// p50, p99 and p99.9 of nanosecond samples (nearest rank).
fn percentiles(mut v: Vec<u64>) -> Option<[f64; 3]> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let at = |p: f64| {
        let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[i.clamp(1, v.len()) - 1] as f64
    };
    Some([at(50.0), at(99.0), at(99.9)])
}

/// The nominal frequency, in MHz, of the first CPU `/proc/cpuinfo` lists.
fn cpu_mhz() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|m| *m > 0.0)
}

/// A trace of UDP frames of `frame` bytes (with the FCS) from 10.0.0.0/16 to `dst` over
/// `flows` flows.
fn trace(packets: u64, frame: u32, flows: u32, dst: (std::net::Ipv4Addr, u8)) -> Vec<Record> {
    let cfg = GenConfig {
        packets,
        flows,
        mix: Mix {
            tcp: 0,
            udp: 1,
            icmp: 0,
        },
        size: SizeDist::Fixed(frame),
        dst_prefix: dst,
        ..GenConfig::default()
    };
    generate(&cfg).records()
}

/// The default trace's destinations (routed out of eth1 by the routers, as in SNF Fig. 7).
fn default_dst() -> (std::net::Ipv4Addr, u8) {
    GenConfig::default().dst_prefix
}

/// The first `k` NFs of a chain file, with the links among them (the k-th NF's far
/// interface becomes an exit).
fn first_nfs(chain: &ChainFile, k: usize) -> ChainFile {
    let mut c = chain.clone();
    c.nfs.truncate(k);
    let names: Vec<String> = c.nfs.iter().map(|n| n.name.clone()).collect();
    let kept = |e: &Endpoint| names.contains(&e.nf);
    c.links.retain(|(a, b, _)| kept(a) && kept(b));
    c.entries.retain(|(e, _)| kept(e));
    c
}

impl Bench {
    /// A chain configuration: `chain` built with `batch`, run in `mode` (`synth` true: the
    /// synthesized mode, false: naive), fed `records` at `entry`.
    fn chain_config(
        &self,
        chain: &ChainFile,
        entry: &Endpoint,
        synth: impl Into<Mode>,
        batch: usize,
        records: &[Record],
    ) -> Result<Config, String> {
        let mode: Mode = synth.into();
        let opts = RunOptions {
            batch,
            ..RunOptions::default()
        };
        let mut ex = Executor::new(chain, &opts, |_, _| Ok(ExitSink::Count))?;
        match mode {
            Mode::Synth => {
                synth::install(&mut ex)?;
            }
            Mode::Fastpath => ex.enable_fastpath(chain::FastOptions::default()),
            Mode::Naive => {}
        }
        let at = ex
            .entry(entry)
            .ok_or_else(|| format!("{}: no entry {entry}", chain.path.display()))?;
        Ok(Config {
            mode: mode.name(),
            nfs: chain.nfs.len(),
            runner: Runner::Chain {
                ex: Box::new(ex),
                inputs: vec![(at, records.to_vec())],
            },
            packets: records.len() as u64,
            wire_bytes: wire_bytes(records),
            mpps: Vec::new(),
            gbps: Vec::new(),
            latency: None,
        })
    }

    /// The reference loop over `records`, `batch` packets at a time.
    fn reference_config(&self, batch: usize, records: &[Record]) -> Config {
        Config {
            mode: "reference",
            nfs: 0,
            runner: Runner::Reference {
                records: records.to_vec(),
                bufs: (0..batch.max(1)).map(|_| Packet::from_bytes(&[])).collect(),
            },
            packets: records.len() as u64,
            wire_bytes: wire_bytes(records),
            mpps: Vec::new(),
            gbps: Vec::new(),
            latency: None,
        }
    }

    /// Measures a group: one warm-up pass each, then `reps` repetitions in which the
    /// configurations take turns pass by pass; then one latency pass per chain. Records
    /// every configuration and the `ratios` (name, numerator key, denominator key).
    fn measure(
        &mut self,
        p: &Params,
        mut configs: Vec<Config>,
        ratios: &[(&str, &str)],
    ) -> Result<(), String> {
        let label = match p.extra.as_ref().and_then(|(_, v)| v.as_str()) {
            Some(tag) => format!("{} {tag}", p.scenario),
            None => p.scenario.to_string(),
        };
        eprintln!(
            "fusebox bench: {label}, {}-byte frames, batch {}: {}",
            p.frame,
            p.batch,
            configs
                .iter()
                .map(Config::key)
                .collect::<Vec<_>>()
                .join(", ")
        );
        for c in &mut configs {
            c.runner.pass();
        }
        for _ in 0..self.reps {
            let mut secs = vec![0f64; configs.len()];
            let mut packets = vec![0u64; configs.len()];
            for _ in 0..p.passes {
                for (k, c) in configs.iter_mut().enumerate() {
                    let t0 = Instant::now();
                    packets[k] += c.runner.pass();
                    secs[k] += t0.elapsed().as_secs_f64();
                }
            }
            for (k, c) in configs.iter_mut().enumerate() {
                let s = secs[k].max(1e-9);
                let passes = packets[k] as f64 / c.packets.max(1) as f64;
                c.mpps.push(packets[k] as f64 / s / 1e6);
                c.gbps.push(c.wire_bytes as f64 * passes * 8.0 / s / 1e9);
            }
        }
        for c in &mut configs {
            if let Runner::Chain { ex, inputs } = &mut c.runner {
                ex.record_latency(true);
                ex.replay(inputs, 1);
                c.latency = percentiles(ex.take_latency());
                ex.record_latency(false);
            }
        }
        for c in &configs {
            let m = Measured {
                scenario: p.scenario,
                mode: c.mode,
                nfs: c.nfs,
                frame: p.frame,
                batch: p.batch,
                tag: p
                    .extra
                    .as_ref()
                    .and_then(|(_, v)| v.as_str())
                    .map(str::to_string),
                mpps: stats(&c.mpps),
                gbps: stats(&c.gbps),
                ns: {
                    let (lo, med, hi) = stats(&c.mpps);
                    (1e3 / hi.max(1e-9), 1e3 / med.max(1e-9), 1e3 / lo.max(1e-9))
                },
            };
            let cycles = self.mhz.map(|mhz| m.ns.1 * mhz / 1e3);
            let mut r = json!({
                "scenario": p.scenario,
                "mode": c.mode,
                "nfs": c.nfs,
                "frame": p.frame,
                "batch": p.batch,
                "packets": c.packets,
                "passes": p.passes,
                "reps": self.reps,
                "mpps": triple(m.mpps),
                "gbps": triple(m.gbps),
                "ns_per_packet": triple(m.ns),
                "cycles_per_packet": cycles,
                "latency_ns": c.latency.map(|[a, b, c]| json!({"p50": a, "p99": b, "p99_9": c})),
            });
            if let (Some((k, v)), Some(o)) = (&p.extra, r.as_object_mut()) {
                o.insert(k.to_string(), v.clone());
            }
            self.records.push(r);
            let mut line = format!(
                "{label:<19} {:<10} {:>5} {:>5}  {:>7.3} ({:.3}–{:.3})  {:>7.3}  {:>8.1}  {:>8}",
                c.key(),
                p.frame,
                p.batch,
                m.mpps.1,
                m.mpps.0,
                m.mpps.2,
                m.gbps.1,
                m.ns.1,
                cycles.map_or("-".to_string(), |c| format!("{c:.0}")),
            );
            match c.latency {
                Some([a, b, d]) => {
                    let _ = write!(line, "  {:>8.2} {:>8.2} {:>8.2}", a / 1e3, b / 1e3, d / 1e3);
                }
                None => line.push_str("         -        -        -"),
            }
            self.lines.push(line);
            self.measured.push(m);
        }
        for (num, den) in ratios {
            let find = |k: &str| configs.iter().find(|c| c.key() == k);
            let (Some(x), Some(y)) = (find(num), find(den)) else {
                continue;
            };
            let r: Vec<f64> = x
                .mpps
                .iter()
                .zip(&y.mpps)
                .map(|(a, b)| a / b.max(1e-9))
                .collect();
            let (lo, med, hi) = stats(&r);
            let what = format!("{num} / {den}");
            let mut rec = json!({
                "scenario": p.scenario,
                "ratio": what,
                "frame": p.frame,
                "batch": p.batch,
                "median": med,
                "min": lo,
                "max": hi,
            });
            if let (Some((k, v)), Some(o)) = (&p.extra, rec.as_object_mut()) {
                o.insert(k.to_string(), v.clone());
            }
            self.records.push(rec);
            self.lines.push(format!(
                "  {label}, {}-byte frames, batch {}: {what} = {med:.3} (per-rep {lo:.3}–{hi:.3})",
                p.frame, p.batch
            ));
        }
        Ok(())
    }
}

fn triple((lo, med, hi): (f64, f64, f64)) -> Value {
    json!({"min": lo, "median": med, "max": hi})
}

fn wire_bytes(records: &[Record]) -> u64 {
    records
        .iter()
        .map(|r| r.data.len() as u64 + WIRE_EXTRA)
        .sum()
}

/// Chain lengths measured in `routers` and `napts`.
fn lengths(quick: bool) -> Vec<usize> {
    if quick {
        vec![1, 2, 5, 10]
    } else {
        (1..=10).collect()
    }
}

/// `routers`, `napts`: the first k NFs of `examples/DIR/chain.toml`, naive and synthesized,
/// for every chain length and batch size, with the reference loop.
fn chains(b: &mut Bench, dir: &'static str, prefix: &str) -> Result<(), String> {
    let scenario: &'static str = dir;
    let path = b.examples.join(dir).join("chain.toml");
    let chain = ChainFile::load(&path).map_err(|e| e.to_string())?;
    let entry = Endpoint {
        nf: format!("{prefix}1"),
        iface: "eth0".to_string(),
    };
    let records = trace(b.packets, 64, 1000, default_dst());
    for batch in b.batches.clone() {
        let mut configs = vec![b.reference_config(batch, &records)];
        for mode in [Mode::Naive, Mode::Synth, Mode::Fastpath] {
            for k in lengths(b.quick) {
                let c = first_nfs(&chain, k.min(chain.nfs.len()));
                configs.push(b.chain_config(&c, &entry, mode, batch, &records)?);
            }
        }
        let p = Params {
            scenario,
            frame: 64,
            batch,
            passes: b.passes,
            extra: None,
        };
        b.measure(
            &p,
            configs,
            &[
                ("synth 10", "naive 1"),
                ("naive 10", "naive 1"),
                ("synth 10", "naive 10"),
                ("synth 1", "naive 1"),
                ("naive 1", "reference"),
                ("synth 10", "reference"),
                ("fastpath 10", "naive 10"),
                ("fastpath 10", "naive 1"),
            ],
        )?;
    }
    Ok(())
}

/// `frame-sizes`: naive 1, naive 10 and synth 10 routers and NAPTs over frames of every
/// size in [`FRAME_SIZES`]. Larger frames use a proportionally shorter trace (the same
/// bytes) and proportionally more passes (the same packets).
fn frame_sizes(b: &mut Bench) -> Result<(), String> {
    let batch = b.batches[0];
    for (dir, prefix) in [("routers", "r"), ("napts", "n")] {
        let path = b.examples.join(dir).join("chain.toml");
        let chain = ChainFile::load(&path).map_err(|e| e.to_string())?;
        let entry = Endpoint {
            nf: format!("{prefix}1"),
            iface: "eth0".to_string(),
        };
        for frame in FRAME_SIZES {
            let scale = u64::from(frame.div_ceil(64));
            let records = trace((b.packets / scale).max(1000), frame, 1000, default_dst());
            let mut configs = vec![b.reference_config(batch, &records)];
            for (k, synth) in [(1, false), (10, false), (10, true)] {
                let c = first_nfs(&chain, k);
                configs.push(b.chain_config(&c, &entry, synth, batch, &records)?);
            }
            let p = Params {
                scenario: "frame-sizes",
                frame,
                batch,
                passes: b.passes * scale,
                extra: Some(("chain", json!(dir))),
            };
            b.measure(
                &p,
                configs,
                &[
                    ("synth 10", "naive 1"),
                    ("synth 10", "naive 10"),
                    ("synth 10", "reference"),
                ],
            )?;
        }
    }
    Ok(())
}

/// A single-NF scenario: `click` run naive and synthesized from `iface`, with the reference
/// loop.
fn single(
    b: &mut Bench,
    scenario: &'static str,
    click: &Path,
    records: &[Record],
    extra: Option<(&'static str, Value)>,
) -> Result<(), String> {
    let batch = b.batches[0];
    let chain = ChainFile::single(click);
    let entry = Endpoint {
        nf: chain.nfs[0].name.clone(),
        iface: "eth0".to_string(),
    };
    let configs = vec![
        b.reference_config(batch, records),
        b.chain_config(&chain, &entry, false, batch, records)?,
        b.chain_config(&chain, &entry, true, batch, records)?,
    ];
    let p = Params {
        scenario,
        frame: 64,
        batch,
        passes: b.passes,
        extra,
    };
    b.measure(
        &p,
        configs,
        &[
            ("synth 1", "naive 1"),
            ("naive 1", "reference"),
            ("synth 1", "reference"),
        ],
    )
}

/// `ttl`: NetBricks' TTL NF, the bundled `examples/ttl/ttl.click`.
fn ttl(b: &mut Bench) -> Result<(), String> {
    let records = trace(b.packets, 64, 1000, default_dst());
    let click = b.examples.join("ttl").join("ttl.click");
    single(b, "ttl", &click, &records, None)
}

/// `routes` prefixes drawn from `seed` (lengths as in a BGP table: 60 % /24, 32 % /16–/23,
/// 4 % /8–/15, 4 % /25–/32; addresses uniform) with one of four next hops. The `lpm`
/// configuration: `FromDevice(eth0)`, Ethernet and IPv4 checks, a `DirectIPLookup` with them
/// plus a default route, and one `EtherEncap` → `ToDevice` per next hop.
fn lpm_routes(routes: usize, seed: u64) -> Vec<(std::net::Ipv4Addr, u8, u64)> {
    let mut x = ports::gen::SplitMix64(seed);
    (0..routes)
        .map(|_| {
            let r = x.next_u64() % 100;
            let len: u32 = match r {
                0..=59 => 24,
                60..=91 => 16 + (x.next_u64() % 8) as u32,
                92..=95 => 8 + (x.next_u64() % 8) as u32,
                _ => 25 + (x.next_u64() % 8) as u32,
            };
            let addr = (x.next_u64() as u32) & (u32::MAX << (32 - len));
            let port = x.next_u64() % 4;
            (std::net::Ipv4Addr::from(addr), len as u8, port)
        })
        .collect()
}

/// The `lpm` configuration (see [`lpm_routes`]).
fn lpm_click(routes: usize, seed: u64) -> String {
    let mut s = format!(
        "// Generated by `fusebox bench --scenario lpm`: NetBricks' DIR-24-8 router with {routes}\n\
         // random routes (SplitMix64 seed {seed:#x}; lengths as in a BGP table) and a default.\n\
         rt :: DirectIPLookup(\n"
    );
    for (a, len, port) in lpm_routes(routes, seed) {
        let _ = writeln!(s, "    {a}/{len} {port},");
    }
    s.push_str("    0.0.0.0/0 0);\n");
    s.push_str("FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> rt;\n");
    for port in 0..4 {
        let _ = writeln!(
            s,
            "rt[{port}] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:01:0{port}) -> ToDevice(eth{});",
            port + 1
        );
    }
    s
}

/// `lpm`: the generated DIR-24-8 router (written to the output directory as
/// `lpm-16k.click`) over a trace whose destinations span the whole address space.
fn lpm(b: &mut Bench) -> Result<(), String> {
    std::fs::create_dir_all(&b.out_dir)
        .map_err(|e| format!("{}: cannot create: {e}", b.out_dir.display()))?;
    let click = b.out_dir.join("lpm-16k.click");
    std::fs::write(&click, lpm_click(LPM_ROUTES, LPM_SEED))
        .map_err(|e| format!("{}: cannot write: {e}", click.display()))?;
    let records = trace(
        b.packets,
        64,
        16_384,
        (std::net::Ipv4Addr::new(0, 0, 0, 0), 0),
    );
    single(
        b,
        "lpm",
        &click,
        &records,
        Some((
            "routes",
            json!({"count": LPM_ROUTES, "seed": format!("{LPM_SEED:#x}")}),
        )),
    )?;
    // The table alone: lookups of the trace's destinations, 16k and 500k routes.
    let dsts: Vec<u32> = records
        .iter()
        .filter_map(|r| r.data.get(30..34))
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    for routes in [LPM_ROUTES, 500_000] {
        let prefixes: Vec<(std::net::Ipv4Addr, u8)> = lpm_routes(routes, LPM_SEED)
            .into_iter()
            .map(|(a, l, _)| (a, l))
            .collect();
        let t0 = Instant::now();
        let table = elements::ip::Lpm::new(&prefixes);
        let build = t0.elapsed().as_secs_f64();
        let mut rates = Vec::new();
        let mut found = 0usize;
        for _ in 0..b.reps {
            let t = Instant::now();
            for _ in 0..b.passes {
                found += dsts.iter().filter(|&&d| table.lookup(d).is_some()).count();
            }
            let secs = t.elapsed().as_secs_f64().max(1e-9);
            rates.push((dsts.len() as u64 * b.passes) as f64 / secs / 1e6);
        }
        let (lo, med, hi) = stats(&rates);
        b.lines.push(format!(
            "  lpm table alone ({routes} routes, 16-8-8 trie): {:.1} MiB, built in {build:.3} s, {med:.1} M lookups/s (min {lo:.1}, max {hi:.1}); {found} hits",
            table.memory() as f64 / (1 << 20) as f64
        ));
        b.records.push(json!({
            "scenario": "lpm",
            "table": {"routes": routes, "bytes": table.memory(), "build_s": build,
                      "mlookups": {"min": lo, "median": med, "max": hi}}
        }));
    }
    Ok(())
}

/// `isp`: `examples/isp` with the firewall's rules from a ClassBench list (each rule allowed
/// by the seeded 85 % draw), over flows drawn from the list's corners; beside it, the same
/// chain with a firewall that allows everything (`-open`: SNF's "chain without the
/// firewall's rules"). Skipped, with a message, when the lists are not there.
fn isp(b: &mut Bench) -> Result<(), String> {
    let (fw1k, fw10k) = (b.classbench.join("fw1_1k"), b.classbench.join("fw1_10k"));
    if !fw1k.exists() || !fw10k.exists() {
        eprintln!(
            "fusebox bench: isp skipped: no fw1_1k and fw1_10k in {} (--classbench DIR)",
            b.classbench.display()
        );
        return Ok(());
    }
    std::fs::create_dir_all(&b.out_dir)
        .map_err(|e| format!("{}: cannot create: {e}", b.out_dir.display()))?;
    let open = b.out_dir.join("allow-all.rules");
    std::fs::write(&open, "allow all\n")
        .map_err(|e| format!("{}: cannot write: {e}", open.display()))?;
    let path = b.examples.join("isp").join("chain.toml");
    let base = ChainFile::load(&path).map_err(|e| e.to_string())?;
    let with = |rules: &Path, first: &str| {
        let mut c = base.clone();
        for nf in c.nfs.iter_mut().filter(|n| n.name == "fw") {
            nf.defines
                .push(("RULES".into(), rules.display().to_string()));
            nf.defines.push(("FIRST".into(), first.to_string()));
        }
        c
    };
    let entry = Endpoint {
        nf: "fw".to_string(),
        iface: "eth0".to_string(),
    };
    let all: [(&'static str, &Path, Option<usize>); 3] = [
        ("250", &fw1k, Some(250)),
        ("1k", &fw1k, None),
        ("10k", &fw10k, None),
    ];
    let lists: Vec<_> = match (b.isp_lists.is_empty(), b.quick) {
        (true, true) => all[..1].to_vec(),
        (true, false) => all.to_vec(),
        (false, _) => all
            .iter()
            .filter(|(l, ..)| b.isp_lists.iter().any(|x| x == l))
            .copied()
            .collect(),
    };
    let frames: Vec<u32> = match (b.isp_frames.is_empty(), b.quick) {
        (true, true) => vec![64],
        (true, false) => vec![64, 128, 256, 1500],
        (false, _) => b.isp_frames.clone(),
    };
    let batch = b.batches[0];
    for &(label, rules, first) in &lists {
        let text = std::fs::read_to_string(rules)
            .map_err(|e| format!("{}: cannot read: {e}", rules.display()))?;
        let mut set = classify::classbench::parse_rules(&text, &rules.display().to_string())
            .map_err(|e| e.to_string())?;
        set.truncate(first.unwrap_or(usize::MAX));
        let tuples: Vec<ports::gen::Tuple> = classify::classbench::corners(&set, 2000, 1)
            .into_iter()
            .map(crate::gen_cmd::tuple)
            .collect();
        let first = first.map_or("all".to_string(), |n| n.to_string());
        let (chain, open_chain) = (with(rules, &first), with(&open, "all"));
        for &frame in &frames {
            let scale = u64::from(frame.div_ceil(64));
            let cfg = GenConfig {
                packets: (b.packets / scale).max(1000),
                flows: 2000,
                size: SizeDist::Fixed(frame),
                ..GenConfig::default()
            };
            let records: Vec<Record> = ports::gen::generate_tuples(&cfg, &tuples).records();
            let mut configs = vec![b.reference_config(batch, &records)];
            for synth in [false, true] {
                configs.push(b.chain_config(&chain, &entry, synth, batch, &records)?);
                let mut c = b.chain_config(&open_chain, &entry, synth, batch, &records)?;
                c.mode = if synth { "synth-open" } else { "naive-open" };
                configs.push(c);
            }
            let p = Params {
                scenario: "isp",
                frame,
                batch,
                passes: b.passes * scale,
                extra: Some(("rules", json!(label))),
            };
            b.measure(
                &p,
                configs,
                &[
                    ("synth 3", "naive 3"),
                    ("synth 3", "synth-open 3"),
                    ("naive 3", "naive-open 3"),
                    ("synth 3", "reference"),
                ],
            )?;
        }
    }
    Ok(())
}

/// `fusebox bench`.
pub fn run(a: &BenchArgs) -> Result<ExitCode, String> {
    let t0 = Instant::now();
    for s in &a.scenario {
        if !SCENARIOS.iter().any(|x| x.name == s) {
            let names: Vec<&str> = SCENARIOS.iter().map(|x| x.name).collect();
            return Err(format!(
                "--scenario {s}: expected one of {}",
                names.join(", ")
            ));
        }
    }
    if let Some(l) = a
        .isp_lists
        .iter()
        .find(|l| !["250", "1k", "10k"].contains(&l.as_str()))
    {
        return Err(format!("--isp-lists {l}: expected 250, 1k or 10k"));
    }
    if let Some(f) = a.isp_frames.iter().find(|&&f| !(64..=1514).contains(&f)) {
        return Err(format!("--isp-frames {f}: expected sizes in 64..=1514"));
    }
    if a.batch.is_empty() || a.batch.iter().any(|&b| b == 0 || b > 4096) {
        return Err("--batch: expected sizes in 1..=4096".to_string());
    }
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
        mhz: cpu_mhz(),
        records: Vec::new(),
        measured: Vec::new(),
        lines: Vec::new(),
        flow_cdfs: Vec::new(),
    };
    for s in SCENARIOS {
        if a.scenario.iter().any(|x| x == s.name) {
            eprintln!("fusebox bench: {} — {}", s.name, s.about);
            (s.run)(&mut b)?;
        }
    }
    std::fs::create_dir_all(&b.out_dir)
        .map_err(|e| format!("{}: cannot create: {e}", b.out_dir.display()))?;
    let json_path = b.out_dir.join("bench.json");
    let jsonl: String = b.records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&json_path, &jsonl)
        .map_err(|e| format!("{}: cannot write: {e}", json_path.display()))?;
    let charts = if a.no_charts {
        Vec::new()
    } else {
        match charts::draw(&b.measured, &b.out_dir).and_then(|mut files| {
            if !b.flow_cdfs.is_empty() {
                let f = b.out_dir.join("speedybox-flows-cdf.png");
                charts::cdf(&b.flow_cdfs, &f)?;
                files.push(f);
            }
            Ok(files)
        }) {
            Ok(files) => files,
            Err(e) => {
                eprintln!("fusebox bench: charts skipped: {e}");
                Vec::new()
            }
        }
    };
    if a.json {
        outln!("{}", jsonl.trim_end());
    } else {
        outln!(
            "fusebox bench: {} packets per trace (64-byte frames; larger frames: the same bytes), {} passes x {} reps after a warm-up, one core, in memory; shared machine: compare the ratios",
            b.packets,
            b.passes,
            b.reps
        );
        outln!("Gbit/s: frame with FCS + 20 bytes of preamble and inter-frame gap (64-byte frame = 84 bytes); {}; latency: from a batch's entry to each packet's exit, one extra pass", match b.mhz {
            Some(m) => format!("cycles = ns x {m:.0} MHz, the nominal frequency /proc/cpuinfo reports (the TSC is not read: no unsafe code)"),
            None => "cycles omitted (/proc/cpuinfo gives no frequency; the TSC is not read: no unsafe code)".to_string(),
        });
        outln!(
            "{:<19} {:<10} {:>5} {:>5}  {:>23}  {:>7}  {:>8}  {:>8}  {:>8} {:>8} {:>8}",
            "scenario",
            "config",
            "frame",
            "batch",
            "Mpps median (min–max)",
            "Gbit/s",
            "ns/pkt",
            "cyc/pkt",
            "p50 µs",
            "p99 µs",
            "p99.9 µs"
        );
        for l in &b.lines {
            outln!("{l}");
        }
        outln!(
            "records: {}; charts: {}; {:.0} s",
            json_path.display(),
            if charts.is_empty() {
                "none".to_string()
            } else {
                charts
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Deny rules for the `speedybox` blacklists: `n` rules the bench trace never matches, so
/// every packet is checked against all of them (the paper's linear-scan baseline).
fn blacklist_rules(n: usize) -> String {
    let mut s = String::from("# Generated by `fusebox bench --scenario speedybox`.\n");
    for i in 0..n {
        let _ = writeln!(
            s,
            "deny src net 172.{}.{}.0/24 && udp dst port {}",
            16 + i / 256,
            i % 256,
            1000 + i
        );
    }
    s
}

/// A chain file of `k` blacklist NFs in a row (`bl1` … `blk`), the last one `last`.
fn blacklist_chain(k: usize, last: &str) -> String {
    let mut s = String::from("# Generated by `fusebox bench --scenario speedybox`.\n");
    for i in 1..=k {
        let click = if i == k { last } else { "bl.click" };
        let _ = writeln!(s, "[nf.bl{i}]\nclick = \"{click}\"");
    }
    for i in 1..k {
        let _ = writeln!(
            s,
            "[[link]]\nbetween = [\"bl{i}.eth1\", \"bl{}.eth0\"]",
            i + 1
        );
    }
    s.push_str("[[entry]]\nto = \"bl1.eth0\"\n");
    s
}

/// `speedybox`: SpeedyBox §VII. Chains of 1..9 `BlacklistFilter`s of 100 rules each, naive
/// and with the fast path (ns per packet; the paper: −40.9 % at 2, −57.7 % at 3); three of
/// them forward, forward, drop (early drop; the paper: −65 %); and the two real chains of
/// `examples/speedybox`, whose per-flow processing times (from a flow's packets entering to
/// the end of what they cause) are given as percentiles, naive, fastpath, and fastpath
/// with the state functions of later NFs on a second core.
fn speedybox(b: &mut Bench) -> Result<(), String> {
    let dir = b.out_dir.join("speedybox");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let write = |name: &str, text: &str| -> Result<PathBuf, String> {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: cannot write: {e}", p.display()))?;
        Ok(p)
    };
    write("bl100.rules", &blacklist_rules(100))?;
    write("drop.rules", "deny udp\n")?;
    let nf = |rules: &str| {
        format!("FromDevice(eth0) -> CheckIPHeader(14) -> BlacklistFilter(FILE {rules}) -> ToDevice(eth1);\n")
    };
    write("bl.click", &nf("bl100.rules"))?;
    write("drop.click", &nf("drop.rules"))?;
    let batch = b.batches[0];
    let records = trace(b.packets, 64, 1000, default_dst());
    let entry = Endpoint::parse("bl1.eth0").ok_or("bad entry")?;
    let max = if b.quick { 3 } else { 9 };
    let mut configs = vec![b.reference_config(batch, &records)];
    for mode in [Mode::Naive, Mode::Fastpath] {
        for k in 1..=max {
            let path = write(
                &format!("blacklist-{k}.toml"),
                &blacklist_chain(k, "bl.click"),
            )?;
            let chain = ChainFile::load(&path).map_err(|e| e.to_string())?;
            configs.push(b.chain_config(&chain, &entry, mode, batch, &records)?);
        }
    }
    let p = Params {
        scenario: "blacklist",
        frame: 64,
        batch,
        passes: b.passes,
        extra: None,
    };
    let top = format!("fastpath {max}");
    let top_naive = format!("naive {max}");
    b.measure(
        &p,
        configs,
        &[
            ("fastpath 1", "naive 1"),
            ("fastpath 2", "naive 2"),
            ("fastpath 3", "naive 3"),
            (top.as_str(), top_naive.as_str()),
            (top.as_str(), "fastpath 1"),
            (top_naive.as_str(), "naive 1"),
        ],
    )?;
    let path = write("blacklist-ffd.toml", &blacklist_chain(3, "drop.click"))?;
    let chain = ChainFile::load(&path).map_err(|e| e.to_string())?;
    let configs = vec![
        b.chain_config(&chain, &entry, Mode::Naive, batch, &records)?,
        b.chain_config(&chain, &entry, Mode::Fastpath, batch, &records)?,
    ];
    let p = Params {
        scenario: "blacklist-ffd",
        frame: 64,
        batch,
        passes: b.passes,
        extra: None,
    };
    b.measure(&p, configs, &[("fastpath 3", "naive 3")])?;
    flow_times(b, batch)
}

/// The real chains' per-flow processing times (see [`speedybox`]).
fn flow_times(b: &mut Bench, batch: usize) -> Result<(), String> {
    let cfg = GenConfig {
        packets: b.packets.min(50_000),
        flows: 500,
        mix: Mix {
            tcp: 1,
            udp: 1,
            icmp: 0,
        },
        size: SizeDist::Fixed(512),
        dst_prefix: (std::net::Ipv4Addr::new(10, 0, 0, 0), 24),
        dst_ports: ports::gen::PortSpec::List(vec![53, 80, 443, 1234]),
        ..GenConfig::default()
    };
    let records = generate(&cfg).records();
    for (file, entry) in [("chain1.toml", "nat.eth0"), ("chain2.toml", "bl.eth0")] {
        let path = b.examples.join("speedybox").join(file);
        let chain = ChainFile::load(&path).map_err(|e| e.to_string())?;
        let at = Endpoint::parse(entry).ok_or("bad entry")?;
        for (label, fast) in [
            ("naive", None),
            ("fastpath", Some(false)),
            ("fastpath-2cores", Some(true)),
        ] {
            let opts = RunOptions {
                batch,
                ..RunOptions::default()
            };
            let mut ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count))?;
            if let Some(parallel) = fast {
                ex.enable_fastpath(chain::FastOptions {
                    parallel,
                    ..chain::FastOptions::default()
                });
            }
            let e = ex
                .entry(&at)
                .ok_or_else(|| format!("{}: no entry {entry}", path.display()))?;
            let inputs = vec![(e, records.clone())];
            ex.replay(&inputs, 1);
            ex.record_flow_times(true);
            let mut times = Vec::new();
            for _ in 0..b.reps.max(1) {
                ex.replay(&inputs, 1);
                times.extend(ex.take_flow_times());
            }
            times.sort_unstable();
            let at_pct = |p: f64| {
                let i = ((p / 100.0) * times.len() as f64).ceil() as usize;
                times
                    .get(i.clamp(1, times.len().max(1)) - 1)
                    .copied()
                    .unwrap_or(0)
            };
            let pct: Vec<(u32, u64)> = [10u32, 25, 50, 75, 90, 99]
                .iter()
                .map(|&p| (p, at_pct(f64::from(p))))
                .collect();
            let text: Vec<String> = pct
                .iter()
                .map(|(p, v)| format!("p{p} {:.1}", *v as f64 / 1000.0))
                .collect();
            let name = file.trim_end_matches(".toml");
            b.flow_cdfs.push((format!("{name} {label}"), times.clone()));
            b.lines.push(format!(
                "  speedybox {file} per-flow processing time, {label}: {} µs ({} flow samples)",
                text.join(", "),
                times.len()
            ));
            b.records.push(json!({
                "scenario": "speedybox-flows",
                "chain": file,
                "mode": label,
                "flows": times.len(),
                "ns": pct.iter().map(|(p, v)| (format!("p{p}"), json!(v))).collect::<serde_json::Map<_, _>>(),
            }));
        }
    }
    Ok(())
}
