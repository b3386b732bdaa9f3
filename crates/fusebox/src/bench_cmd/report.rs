//! What `fusebox bench` reports: one text line and one JSON record per measured
//! configuration and per ratio, the table's header, the records file (`bench.json`) and
//! the PNG charts ([`charts`]).

use super::harness::{stats, Config};
use crate::error::CliError;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

mod charts;

/// What a group of configurations was measured with.
#[derive(Clone)]
pub(super) struct Params {
    pub(super) scenario: &'static str,
    pub(super) frame: u32,
    pub(super) batch: usize,
    pub(super) passes: u64,
    pub(super) extra: Option<(&'static str, Value)>,
}

impl Params {
    /// The scenario's name, with the parameter's value when it is a string.
    pub(super) fn label(&self) -> String {
        match self.extra.as_ref().and_then(|(_, v)| v.as_str()) {
            Some(tag) => format!("{} {tag}", self.scenario),
            None => self.scenario.to_string(),
        }
    }
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

/// How the run was measured, as the table's header says.
pub(super) struct RunShape {
    /// Packets per trace (64-byte frames).
    pub(super) packets: u64,
    /// Passes per repetition.
    pub(super) passes: u64,
    /// Repetitions.
    pub(super) reps: usize,
}

/// What has been measured so far: JSON records, table lines, chart rows and the per-flow
/// processing times of the `speedybox` scenario.
pub(super) struct Report {
    /// The nominal CPU frequency (MHz), for cycles per packet.
    pub(super) mhz: Option<f64>,
    /// One JSON record per configuration, ratio or extra figure.
    pub(super) records: Vec<Value>,
    measured: Vec<Measured>,
    /// The table's lines.
    pub(super) lines: Vec<String>,
    /// Per-flow processing times of the `speedybox` scenario: (label, sorted ns).
    pub(super) flow_cdfs: Vec<(String, Vec<u64>)>,
}

impl Report {
    /// An empty report; cycles are given at `mhz`.
    pub(super) fn new(mhz: Option<f64>) -> Self {
        Report {
            mhz,
            records: Vec::new(),
            measured: Vec::new(),
            lines: Vec::new(),
            flow_cdfs: Vec::new(),
        }
    }

    /// Records a timed group (`reps` repetitions): every configuration and the `ratios`
    /// (numerator key, denominator key) of their per-repetition rates.
    pub(super) fn group<R: AsRef<str>>(
        &mut self,
        p: &Params,
        configs: &[Config],
        ratios: &[(R, R)],
        reps: usize,
    ) {
        let label = p.label();
        for c in configs {
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
                "workers": c.workers,
                "frame": p.frame,
                "batch": p.batch,
                "packets": c.packets,
                "passes": p.passes,
                "reps": reps,
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
            let (num, den) = (num.as_ref(), den.as_ref());
            let find = |k: &str| configs.iter().find(|c| c.key() == k);
            let (Some(x), Some(y)) = (find(num), find(den)) else {
                continue;
            };
            let r = per_rep(x, y);
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
                "per_rep": r,
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
        self.peer_table(p, configs);
    }

    /// With FastClick in the group: FuseBox ÷ FastClick per chain length (rows) and mode
    /// (columns), median of the per-repetition ratios (min–max).
    fn peer_table(&mut self, p: &Params, configs: &[Config]) {
        let mut ks: Vec<usize> = configs
            .iter()
            .filter(|c| c.mode == "fastclick")
            .map(|c| c.nfs)
            .collect();
        ks.dedup();
        if ks.is_empty() {
            return;
        }
        let modes = ["naive", "synth", "fastpath"];
        self.lines.push(format!(
            "  {}, {}-byte frames, batch {}: FuseBox ÷ FastClick, median of the per-repetition ratios (min–max)",
            p.label(),
            p.frame,
            p.batch
        ));
        self.lines.push(format!(
            "    {:>4}  {:>22}  {:>22}  {:>22}",
            "NFs", modes[0], modes[1], modes[2]
        ));
        for k in ks {
            let Some(fc) = configs.iter().find(|c| c.mode == "fastclick" && c.nfs == k) else {
                continue;
            };
            let cells: Vec<String> = modes
                .iter()
                .map(|m| {
                    match configs
                        .iter()
                        .find(|c| c.mode == *m && c.nfs == k && c.workers == 1)
                    {
                        Some(c) => {
                            let (lo, med, hi) = stats(&per_rep(c, fc));
                            format!("{med:.2} ({lo:.2}–{hi:.2})")
                        }
                        None => "-".to_string(),
                    }
                })
                .collect();
            self.lines.push(format!(
                "    {k:>4}  {:>22}  {:>22}  {:>22}",
                cells[0], cells[1], cells[2]
            ));
        }
    }

    /// Writes the records (`bench.json`) and, unless `no_charts`, the charts into `out_dir`;
    /// prints the records (`json`) or the table. `t0`: when the run began.
    pub(super) fn finish(
        &self,
        out_dir: &Path,
        run: &RunShape,
        json: bool,
        no_charts: bool,
        t0: Instant,
    ) -> Result<(), CliError> {
        std::fs::create_dir_all(out_dir)
            .map_err(|e| CliError::io(out_dir, "cannot create: ", e))?;
        let json_path = out_dir.join("bench.json");
        let jsonl: String = self.records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&json_path, &jsonl)
            .map_err(|e| CliError::io(&json_path, "cannot write: ", e))?;
        let charts = if no_charts {
            Vec::new()
        } else {
            match charts::draw(&self.measured, out_dir).and_then(|mut files| {
                if !self.flow_cdfs.is_empty() {
                    let f = out_dir.join("speedybox-flows-cdf.png");
                    charts::cdf(&self.flow_cdfs, &f)?;
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
        if json {
            outln!("{}", jsonl.trim_end());
        } else {
            outln!(
                "fusebox bench: {} packets per trace (64-byte frames; larger frames: the same bytes), {} passes x {} reps after a warm-up, one core, in memory; shared machine: compare the ratios",
                run.packets,
                run.passes,
                run.reps
            );
            outln!("Gbit/s: frame with FCS + 20 bytes of preamble and inter-frame gap (64-byte frame = 84 bytes); {}; latency: from a batch's entry to each packet's exit, one extra pass", match self.mhz {
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
            for l in &self.lines {
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
        Ok(())
    }
}

/// The per-repetition ratios of `x`'s rates to `y`'s.
fn per_rep(x: &Config, y: &Config) -> Vec<f64> {
    x.mpps
        .iter()
        .zip(&y.mpps)
        .map(|(a, b)| a / b.max(1e-9))
        .collect()
}

fn triple((lo, med, hi): (f64, f64, f64)) -> Value {
    json!({"min": lo, "median": med, "max": hi})
}
