//! `placement` (issue 20, NFCompass §V.C): the chain placed by the planner from a profile of
//! the scenario's own trace (`fusebox plan --profile TRACE --workers 2 --out PLAN`, then the
//! PLAN run by `fusebox run --plan`'s pipeline), against run-to-completion on one core and
//! as two replicas (`--cores 2`) and a naive one-NF-per-core pipeline (a third stage shares
//! core 0; where the executor admits it). When the planner chooses replicas, its best
//! pipeline (`plan-pipe`) is timed too, written to a PLAN file of its own. Chains:
//! `examples/isp` (firewall, router, NAPT) and a DPI-heavy one (firewall, router, `SnortIDS`
//! with the Snort community rules of `../shared/data`).
//!
//! The predicted rates are the planner's (the model fed by the profiling run and the measured
//! crossing cost); after timing, each configuration's measured median is printed beside its
//! prediction.

use super::harness::Config;
use super::report::Params;
use super::scenarios::{default_trace, tcp_trace};
use super::Bench;
use crate::error::CliError;
use crate::plan_cmd::place::{self as placing, PlaceArgs};
use chain::layout::Placement;
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use plan::place::{rate, Machine};
use ports::pcap::Record;
use serde_json::json;
use std::path::Path;

/// The scenario.
pub(super) fn placement(b: &mut Bench) -> Result<(), CliError> {
    std::fs::create_dir_all(&b.out_dir)
        .map_err(|e| CliError::io(&b.out_dir, "cannot create: ", e))?;
    let isp = ChainFile::load(&b.examples.join("isp").join("chain.toml"))?;
    let packets = b.packets;
    run_chain(b, "isp", &isp, &default_trace(packets), "fw|router|napt")?;
    let rules = b
        .examples
        .join("../../shared/data/ids/snort-community-rules");
    let simple = rules.join("community-simple-content.rules");
    if !simple.exists() {
        let msg = format!(
            "fusebox bench: placement dpi skipped: no {} (the Snort community rules, see ../shared/data/MANIFEST.md)",
            simple.display()
        );
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            return Err(CliError::Invalid(msg));
        }
        eprintln!("{msg}");
        return Ok(());
    }
    let dpi = dpi_chain(b, &rules)?;
    run_chain(
        b,
        "dpi",
        &dpi,
        &tcp_trace(packets / 4, 512),
        "fw|router|ids",
    )
}

/// Firewall and router of `examples/isp`, then an IDS with the community rules: a chain
/// file written to the output folder.
fn dpi_chain(b: &Bench, rules: &Path) -> Result<ChainFile, CliError> {
    let abs = |p: &Path| std::fs::canonicalize(p).map_err(|e| CliError::io(p, "", e));
    let isp = abs(&b.examples.join("isp"))?;
    let routers = abs(&b.examples.join("routers"))?;
    let rules = abs(rules)?;
    let ids = b.out_dir.join("placement-ids.click");
    let click = format!(
        "// The DPI NF of the placement benchmark: Snort's community content rules.\n\
         FromDevice(eth0) -> CheckIPHeader(14)\n  \
         -> SnortIDS(RULES {}, CONF {})\n  -> ToDevice(eth1);\n",
        rules.join("community-simple-content.rules").display(),
        rules.join("snort.conf").display()
    );
    std::fs::write(&ids, click).map_err(|e| CliError::io(&ids, "cannot write: ", e))?;
    let toml = format!(
        "# The placement benchmark's DPI-heavy chain: firewall -> router -> IDS.\n\
         [nf.fw]\nclick = \"{}\"\n\
         [nf.router]\nclick = \"{}\"\n\
         define = {{ MAC0 = \"02:00:00:00:0e:10\", PEER0 = \"02:00:00:00:0f:11\", MAC1 = \"02:00:00:00:0e:11\", PEER1 = \"02:00:00:00:0d:10\" }}\n\
         [nf.ids]\nclick = \"{}\"\n\
         [[link]]\nbetween = [\"fw.eth1\", \"router.eth0\"]\n\
         [[link]]\nbetween = [\"router.eth1\", \"ids.eth0\"]\n\
         [[entry]]\nto = \"fw.eth0\"\n",
        isp.join("fw.click").display(),
        routers.join("router.click").display(),
        std::fs::canonicalize(&ids)
            .map_err(|e| CliError::io(&ids, "", e))?
            .display()
    );
    let path = b.out_dir.join("placement-dpi.toml");
    std::fs::write(&path, toml).map_err(|e| CliError::io(&path, "cannot write: ", e))?;
    Ok(ChainFile::load(&path)?)
}

/// The placement `spec` (`fw|router,napt`) of `chain`, stage `s` on core `s`.
fn placement_of(chain: &ChainFile, spec: &str) -> Result<Placement, CliError> {
    plan::file::pipeline(chain, spec, 1).map_err(|e| CliError::Invalid(e.to_string()))
}

/// A configuration running `placement` of `chain` in the pipeline runtime over `records`
/// (split over its replicas by the dispatcher); `Err` with the reason when the executor
/// refuses it.
fn pipeline_config(
    b: &Bench,
    mode: &'static str,
    chain: &ChainFile,
    records: &[Record],
    placement: &Placement,
) -> Result<Result<Config, String>, CliError> {
    let opts = RunOptions {
        batch: b.batches[0],
        ..RunOptions::default()
    };
    let mut probe = Executor::new(chain, &opts, |_, _| Ok(ExitSink::Count))?;
    let setup = dataplane::Setup {
        chain: chain.clone(),
        options: opts,
        mode: synth::Mode::Naive,
        fast: chain::FastOptions::default(),
        trust_switch_tags: false,
        board: None,
        stop: None,
    };
    if let Err(why) = dataplane::pipeline::check(&setup, &probe, placement) {
        return Ok(Err(why));
    }
    let entry = Endpoint {
        nf: "fw".into(),
        iface: "eth0".into(),
    };
    let at = probe
        .entry(&entry)
        .ok_or_else(|| CliError::Invalid("placement: no entry fw.eth0".into()))?;
    let dispatcher = dataplane::Dispatcher::for_chain(&mut probe, placement.replicas.max(1));
    let shares = dataplane::predispatch(&dispatcher, &[(at, records.to_vec())]);
    let mut pipe = dataplane::Pipeline::start(&setup, &probe, placement, false, shares)?;
    let pass = Box::new(move || pipe.pass(1).map(|(n, _)| n).unwrap_or(0));
    Ok(Ok(b.loop_config(mode, chain.nfs.len(), records, pass)))
}

/// Stage specs (`fw|router,napt`) of a placement.
fn spec(chain: &ChainFile, p: &Placement) -> String {
    let stages: Vec<String> = p
        .stages
        .iter()
        .map(|s| {
            s.nfs
                .iter()
                .filter_map(|&i| chain.nfs.get(i).map(|n| n.name.clone()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let r = if p.replicas > 1 {
        format!(" ×{}", p.replicas)
    } else {
        String::new()
    };
    format!("{}{r}", stages.join("|"))
}

/// Times one chain: the profiled plan (and its best pipeline when it chose replicas), one
/// core, two replicas and the one-NF-per-core pipeline `one_nf`; prints each one's
/// predicted and measured rate.
fn run_chain(
    b: &mut Bench,
    name: &str,
    chain: &ChainFile,
    records: &[Record],
    one_nf: &str,
) -> Result<(), CliError> {
    let batch = b.batches[0];
    let n = chain.nfs.len();
    let entry = Endpoint {
        nf: "fw".into(),
        iface: "eth0".into(),
    };
    let opts = RunOptions {
        batch,
        ..RunOptions::default()
    };
    // `fusebox plan CHAIN --profile fw.eth0=TRACE --workers 2 --out PLAN`.
    let trace = b.out_dir.join(format!("placement-{name}.pcap"));
    super::fastclick::write_trace(&trace, records)?;
    let plan_path = b.out_dir.join(format!("placement-{name}.plan"));
    let args = PlaceArgs {
        profile: Some(format!("fw.eth0={}", trace.display())),
        workers: Some(2),
        profile_ms: 200,
        ..PlaceArgs::default()
    };
    let report = placing::run(&args, chain, &opts, Some(&plan_path))?;
    let placed = &report.placement;
    eprintln!("fusebox bench: placement {name}: the planner's profile and candidates:");
    for line in placed.to_string().lines() {
        eprintln!("  {line}");
    }
    let file =
        plan::file::PlanFile::load(&plan_path).map_err(|e| CliError::Invalid(e.to_string()))?;
    file.check(chain, &plan_path)
        .map_err(|e| CliError::Invalid(e.to_string()))?;
    // What each configuration is predicted to do (packets per second).
    let mut predicted: Vec<(String, String, f64)> = vec![
        (
            format!("naive {n}"),
            "one core".into(),
            rate(placed.one_core_ns),
        ),
        (
            format!("naive {n} x2"),
            "replicas ×2".into(),
            placed.candidates.first().map_or(0.0, |c| c.predicted_pps),
        ),
    ];
    let mut configs: Vec<Config> = vec![
        b.chain_config(chain, &entry, synth::Mode::Naive, batch, records)?,
        b.workers_config(chain, &entry, synth::Mode::Naive, batch, records, 2)?,
    ];
    let mut timed: Vec<&'static str> = Vec::new();
    let mut add = |b: &Bench,
                   configs: &mut Vec<Config>,
                   mode: &'static str,
                   p: &Placement,
                   how: &str,
                   pps: f64|
     -> Result<(), CliError> {
        let label = format!("{how}: {}", spec(chain, p));
        match pipeline_config(b, mode, chain, records, p)? {
            Ok(c) => {
                configs.push(c);
                predicted.push((format!("{mode} {n}"), label, pps));
                timed.push(mode);
            }
            Err(why) => {
                eprintln!("fusebox bench: placement {name}: {mode} ({label}) not run: {why}")
            }
        }
        Ok(())
    };
    let overall = file.predicted.as_ref().map_or(0.0, |p| p.overall);
    add(
        b,
        &mut configs,
        "plan",
        &file.placement,
        &file.made_by,
        overall,
    )?;
    // The planner's best pipeline, when what it chose is not one.
    if file.placement.stages.len() < 2 {
        // The fastest predicted, the first listed on ties (the exact search's).
        let best = placed
            .candidates
            .iter()
            .filter(|c| c.runnable && c.stages.len() > 1)
            .fold(
                None,
                |best: Option<&plan::place::Candidate>, c| match best {
                    Some(b) if b.predicted_pps >= c.predicted_pps => Some(b),
                    _ => Some(c),
                },
            );
        if let Some(c) = best {
            let pipe = c.placement();
            let mut f = plan::file::PlanFile::new(chain, pipe.clone(), &c.how)
                .map_err(|e| CliError::Invalid(e.to_string()))?;
            f.predicted = Some(plan::file::Prediction {
                stages: c.stages.iter().map(|s| rate(s.ns)).collect(),
                overall: c.predicted_pps,
            });
            f.note = c.note.clone();
            let path = b.out_dir.join(format!("placement-{name}-pipe.plan"));
            f.save(&path)
                .map_err(|e| CliError::Invalid(e.to_string()))?;
            add(b, &mut configs, "plan-pipe", &pipe, &c.how, c.predicted_pps)?;
        }
    }
    // One NF per core, stage s on core s mod 2, predicted by the same model.
    let naive = placement_of(chain, one_nf)?;
    let g = report.profile.graph().by_nf();
    let mut assign = vec![0usize; g.nodes.len()];
    for (s, st) in naive.stages.iter().enumerate() {
        for &v in &st.nfs {
            if let Some(a) = assign.get_mut(v) {
                *a = s % 2;
            }
        }
    }
    let one_nf_pps = rate(Machine::cores(2, placed.cross_ns).bottleneck(&g, &assign));
    add(
        b,
        &mut configs,
        "pipe-1nf",
        &naive,
        "one NF per core",
        one_nf_pps,
    )?;
    let mut ratios: Vec<(String, String)> = vec![(format!("naive {n} x2"), format!("naive {n}"))];
    for mode in &timed {
        ratios.push((format!("{mode} {n}"), format!("naive {n}")));
        ratios.push((format!("{mode} {n}"), format!("naive {n} x2")));
    }
    if timed.contains(&"plan-pipe") {
        ratios.push((format!("plan-pipe {n}"), format!("plan {n}")));
    }
    let frame = records.first().map_or(64, |r| r.data.len() as u32 + 4);
    let p = Params {
        scenario: "placement",
        frame,
        batch,
        passes: b.passes,
        extra: Some(("chain", json!(name))),
    };
    b.measure(&p, configs, &ratios)?;
    // Predicted against measured: absolute (the profile and the timing ran at different
    // moments of a shared machine's load) and as ratios to one core (each side's own run).
    let median = |key: &str| -> Option<f64> {
        b.report.records.iter().rev().find_map(|r| {
            let workers = match r["workers"].as_u64() {
                Some(w) if w > 1 => format!(" x{w}"),
                _ => String::new(),
            };
            let k = format!("{} {}{workers}", r["mode"].as_str()?, r["nfs"]);
            (r["scenario"] == "placement" && r["chain"] == name && k == key)
                .then(|| r["mpps"]["median"].as_f64())
                .flatten()
        })
    };
    let ratio = |num: &str| -> Option<f64> {
        let what = format!("{num} / naive {n}");
        b.report.records.iter().rev().find_map(|r| {
            (r["scenario"] == "placement" && r["chain"] == name && r["ratio"] == what.as_str())
                .then(|| r["median"].as_f64())
                .flatten()
        })
    };
    let one = format!("naive {n}");
    let (Some(one_measured), Some(&(_, _, one_predicted))) = (median(&one), predicted.first())
    else {
        return Ok(());
    };
    let mut lines = Vec::new();
    let mut records = Vec::new();
    for (key, what, pps) in &predicted {
        let Some(mpps) = median(key) else { continue };
        let measured_x = if *key == one {
            1.0
        } else {
            ratio(key).unwrap_or(mpps / one_measured.max(f64::MIN_POSITIVE))
        };
        let predicted_x = pps / one_predicted.max(f64::MIN_POSITIVE);
        lines.push(format!(
            "  placement {name}: {key} ({what}): predicted {:.3} Mpps = {predicted_x:.2}× one core; measured {mpps:.3} Mpps = {measured_x:.2}× one core ({:.2}× predicted)",
            pps / 1e6,
            mpps * 1e6 / pps.max(f64::MIN_POSITIVE)
        ));
        records.push(json!({
            "scenario": "placement",
            "chain": name,
            "prediction": key,
            "what": what,
            "predicted_mpps": pps / 1e6,
            "predicted_over_one_core": predicted_x,
            "measured_mpps": mpps,
            "measured_over_one_core": measured_x,
            "crossing_ns": placed.cross_ns,
        }));
    }
    b.report.lines.extend(lines);
    b.report.records.extend(records);
    Ok(())
}
