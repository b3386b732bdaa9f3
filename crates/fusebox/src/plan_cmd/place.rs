//! `fusebox plan --profile TRACE [--workers N] [--out PLAN]`: the placement part of a plan
//! (NFCompass §IV.C): the profiling run, the crossing cost measured, the candidates and
//! their predicted rates, the chosen one written as a PLAN file.

use crate::error::CliError;
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use clap::Args;
use plan::place::{self, measure, Accelerator, Machine};
use std::path::{Path, PathBuf};

/// The placement arguments of `fusebox plan`.
#[derive(Args, Debug, Default)]
pub struct PlaceArgs {
    /// Profile the chain over this trace ([ENTRY=]FILE, e.g. `fw.eth0=trace.pcap`; the
    /// entry may be left out when the chain has one) and place it on the workers: each
    /// element's ns per packet, packets per edge, the cost of crossing cores measured.
    #[arg(long, value_name = "[ENTRY=]TRACE")]
    pub profile: Option<String>,
    /// Workers to place the chain on (default: the machine's cores).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// The cost of handing a packet from one core to another, in ns, instead of measuring it.
    #[arg(long, value_name = "NS")]
    pub cross_ns: Option<f64>,
    /// Milliseconds each profiling run lasts at least (the trace is replayed until then).
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub profile_ms: u64,
    /// Also map the elements on the workers plus an accelerator (model only: no GPU here):
    /// LAUNCH_NS,BATCH,PER_PACKET_NS,SPEEDUP,TRANSFER_NS, e.g. `20000,256,50,8,100`.
    #[arg(long, value_name = "COSTS")]
    pub accelerator: Option<String>,
}

/// What the placement part prints (and `--json` holds).
pub struct PlaceReport {
    /// The profiling run.
    pub profile: measure::Profile,
    /// The candidates and the chosen one.
    pub placement: place::Placing,
    /// With `--accelerator`: the element-level mappings.
    pub offload: Option<Vec<place::Offload>>,
    /// Where the PLAN file went.
    pub written: Option<String>,
}

fn parse_accelerator(s: &str) -> Result<Accelerator, CliError> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::Invalid(format!("--accelerator {s}: {e}")))?;
    let [launch_ns, batch, per_packet_ns, speedup, transfer_ns] = v[..] else {
        return Err(CliError::Invalid(format!(
            "--accelerator {s}: give LAUNCH_NS,BATCH,PER_PACKET_NS,SPEEDUP,TRANSFER_NS"
        )));
    };
    if v.iter().any(|x| !x.is_finite() || *x < 0.0) || batch < 1.0 || speedup <= 0.0 {
        return Err(CliError::Invalid(format!(
            "--accelerator {s}: costs must be finite and non-negative, BATCH at least 1, SPEEDUP positive"
        )));
    }
    Ok(Accelerator {
        launch_ns,
        batch: batch as usize,
        per_packet_ns,
        speedup,
        transfer_ns,
    })
}

/// Runs the placement part (`--profile` given): profiles the chain, places it, and writes
/// the chosen placement to `out` as a PLAN file when given.
pub fn run(
    a: &PlaceArgs,
    chain: &ChainFile,
    opts: &RunOptions,
    out: Option<&Path>,
) -> Result<PlaceReport, CliError> {
    let Some(spec) = &a.profile else {
        return Err(CliError::Invalid(
            "--profile TRACE is needed to place a chain".into(),
        ));
    };
    let accel = a
        .accelerator
        .as_deref()
        .map(parse_accelerator)
        .transpose()?;
    let workers = a
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if workers == 0 {
        return Err(CliError::Invalid("--workers must be at least 1".into()));
    }
    let build = || Executor::new(chain, opts, |_, _| Ok(ExitSink::Count));
    let mut plain = build()?;
    let mut timed = build()?;
    // [ENTRY=]TRACE: the entry named, or the chain's only one.
    let (entry, file) = match spec.split_once('=') {
        Some((e, f)) if Endpoint::parse(e).is_some_and(|e| timed.entry(&e).is_some()) => {
            (Endpoint::parse(e), PathBuf::from(f))
        }
        _ => (None, PathBuf::from(spec)),
    };
    let entry = match entry {
        Some(e) => e,
        None => match &chain.entries[..] {
            [(e, _)] => e.clone(),
            all => {
                let names: Vec<String> = all.iter().map(|(e, _)| e.to_string()).collect();
                return Err(CliError::Invalid(format!(
                    "--profile {spec}: the chain has {} entries ({}); name one: ENTRY=TRACE",
                    names.len(),
                    names.join(", ")
                )));
            }
        },
    };
    let at = timed
        .entry(&entry)
        .ok_or_else(|| CliError::Invalid(format!("--profile: no entry {entry}")))?;
    let (records, err) = ports::pcap::read_all(&file)
        .map_err(|e| CliError::context(file.display().to_string(), e))?;
    if let Some(e) = err {
        eprintln!("fusebox: {}: {e}", file.display());
    }
    if records.is_empty() {
        return Err(CliError::Invalid(format!(
            "--profile: {} holds no packet",
            file.display()
        )));
    }
    // How the dispatcher spreads the trace's flows over r replicas.
    let mut probe = build()?;
    let mut skews = vec![1.0; workers + 1];
    for (r, s) in skews.iter_mut().enumerate().skip(2) {
        let d = dataplane::Dispatcher::for_chain(&mut probe, r);
        let mut per = vec![0u64; r];
        for rec in &records {
            if let Some(c) = per.get_mut(d.worker(&rec.data)) {
                *c += 1;
            }
        }
        let max = per.iter().copied().max().unwrap_or(0) as f64;
        *s = (max * r as f64 / records.len() as f64).max(1.0);
    }
    let inputs = vec![(at, records)];
    let profile = measure::profile(&mut plain, &mut timed, &inputs, a.profile_ms);
    let cross_ns = match a.cross_ns {
        Some(c) if c.is_finite() && c >= 0.0 => c,
        Some(c) => return Err(CliError::Invalid(format!("--cross-ns {c}: not a cost"))),
        None => measure::handoff_ns(200_000, 3),
    };
    let graph = profile.graph();
    let skew = |r: usize| skews.get(r).copied().unwrap_or(r as f64);
    let admit = |p: &chain::layout::Placement| chain::layout::check_pipeline(&timed, p);
    let placing = place::place(&graph, workers, cross_ns, &skew, &admit);
    let offload = accel.map(|acc| {
        let m = Machine::cores(workers, cross_ns).with_accelerator("accelerator", acc);
        place::offload(&graph, &m, 0.1)
    });
    let mut written = None;
    if let (Some(out), Some(best)) = (out, placing.best()) {
        let mut file = plan::file::PlanFile::new(chain, best.placement(), &best.how)
            .map_err(|e| CliError::Invalid(e.to_string()))?;
        file.predicted = Some(plan::file::Prediction {
            stages: best.stages.iter().map(|s| place::rate(s.ns)).collect(),
            overall: best.predicted_pps,
        });
        file.note = best.note.clone();
        file.save(out)
            .map_err(|e| CliError::Invalid(e.to_string()))?;
        written = Some(out.display().to_string());
    }
    Ok(PlaceReport {
        profile,
        placement: placing,
        offload,
        written,
    })
}

impl PlaceReport {
    /// What `--json` holds.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "profile": self.profile,
            "placement": self.placement,
            "offload": self.offload,
            "written": self.written,
        })
    }

    /// The text `fusebox plan` prints.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let p = &self.profile;
        let _ = writeln!(
            s,
            "Profile: {} packets, {:.1} ns/packet on one core (clock reads of {:.1} ns subtracted per element)",
            p.input_packets, p.one_core_ns, p.clock_ns
        );
        let g = self.profile.graph();
        let mut rows: Vec<(usize, &measure::ElementProfile)> = p
            .elements
            .iter()
            .enumerate()
            .filter(|(_, e)| e.packets > 0)
            .collect();
        rows.sort_by(|a, b| g.nodes[b.0].cpu_ns.total_cmp(&g.nodes[a.0].cpu_ns));
        let _ = writeln!(
            s,
            "  {:<32} {:<16} {:>10} {:>9} {:>12}",
            "element", "class", "packets", "ns/pkt", "ns/input pkt"
        );
        for (i, e) in rows {
            let _ = writeln!(
                s,
                "  {:<32} {:<16} {:>10} {:>9.1} {:>12.1}{}",
                e.name,
                e.class,
                e.packets,
                e.ns_per_packet,
                g.nodes[i].cpu_ns,
                if e.offloadable { "  offloadable" } else { "" }
            );
        }
        let _ = writeln!(s);
        let _ = write!(s, "{}", self.placement);
        if let Some(off) = &self.offload {
            let _ = writeln!(
                s,
                "\nWith an accelerator (model only), elements offloaded in 10 % steps:"
            );
            for o in off {
                let ratios: Vec<String> = o
                    .ratio
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| **r > 0.0)
                    .map(|(i, r)| format!("{} {:.0} %", p.elements[i].name, r * 100.0))
                    .collect();
                let _ = writeln!(
                    s,
                    "  {:<11} {:>10.3} Mpps predicted; offloaded: {}",
                    o.how,
                    o.predicted_pps / 1e6,
                    if ratios.is_empty() {
                        "nothing".to_string()
                    } else {
                        ratios.join(", ")
                    }
                );
            }
        }
        if let Some(w) = &self.written {
            let _ = writeln!(s, "\nwrote {w}");
        }
        s
    }
}
