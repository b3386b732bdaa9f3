//! `placement` (issue 20, NFCompass §V.C): a chain run to completion on one core and as
//! two replicas (`--cores 2`), against pipelines of its NFs on two cores
//! (`fusebox run --plan`): the best pipeline written by hand and, where the executor admits
//! it, one NF per core; and the whole chain as one stage (`pipe-1stage`: what the pipeline's
//! machinery costs against the plain executor). Chains: `examples/isp` (firewall, router, NAPT) and a DPI-heavy one
//! (firewall, router, `SnortIDS` with the Snort community rules of `../shared/data`).
//!
//! Before timing, each chain's prefixes of 1..n NFs are replayed on one core: the
//! differences give each NF's nanoseconds per packet, from which the NFCompass model
//! predicts each configuration's rate (a pipeline: its slowest stage; replicas: the whole
//! chain's rate times the replicas), printed beside the measured one.

use super::harness::Config;
use super::report::Params;
use super::scenarios::{default_trace, first_nfs, tcp_trace};
use super::Bench;
use crate::error::CliError;
use chain::layout::{Placement, Stage};
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use ports::pcap::Record;
use serde_json::json;
use std::path::Path;
use std::time::Instant;

/// The scenario.
pub(super) fn placement(b: &mut Bench) -> Result<(), CliError> {
    std::fs::create_dir_all(&b.out_dir)
        .map_err(|e| CliError::io(&b.out_dir, "cannot create: ", e))?;
    let isp = ChainFile::load(&b.examples.join("isp").join("chain.toml"))?;
    let packets = b.packets;
    run_chain(
        b,
        "isp",
        &isp,
        &default_trace(packets),
        &[
            ("pipe-1stage", "fw,router,napt"),
            ("pipe-best", "fw|router,napt"),
            ("pipe-1nf", "fw|router|napt"),
        ],
    )?;
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
        &[
            ("pipe-1stage", "fw,router,ids"),
            ("pipe-best", "fw,router|ids"),
            ("pipe-1nf", "fw|router|ids"),
        ],
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

/// Nanoseconds per packet of the first 1..n NFs of `chain` on one core over `records`
/// (the fastest of a few passes each).
fn prefix_costs(b: &Bench, chain: &ChainFile, records: &[Record]) -> Result<Vec<f64>, CliError> {
    let opts = RunOptions {
        batch: b.batches[0],
        ..RunOptions::default()
    };
    let mut out = Vec::new();
    for k in 1..=chain.nfs.len() {
        let c = first_nfs(chain, k);
        let mut ex = Executor::new(&c, &opts, |_, _| Ok(ExitSink::Count))?;
        let entry = ex
            .entry(&Endpoint::parse("fw.eth0").unwrap_or(Endpoint {
                nf: "fw".into(),
                iface: "eth0".into(),
            }))
            .ok_or_else(|| CliError::Invalid("placement: no entry fw.eth0".into()))?;
        let inputs = [(entry, records.to_vec())];
        ex.replay(&inputs, 1);
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t0 = Instant::now();
            let n = ex.replay(&inputs, 2);
            best = best.min(t0.elapsed().as_nanos() as f64 / n.max(1) as f64);
        }
        out.push(best);
    }
    Ok(out)
}

/// Times one chain: one core, two replicas, and each pipeline of `pipes` (mode name,
/// placement) the executor admits; prints the model's predictions.
fn run_chain(
    b: &mut Bench,
    name: &str,
    chain: &ChainFile,
    records: &[Record],
    pipes: &[(&'static str, &str)],
) -> Result<(), CliError> {
    let batch = b.batches[0];
    let entry = Endpoint {
        nf: "fw".into(),
        iface: "eth0".into(),
    };
    let n = chain.nfs.len();
    let prefix = prefix_costs(b, chain, records)?;
    let cost: Vec<f64> = (0..n)
        .map(|k| (prefix[k] - if k == 0 { 0.0 } else { prefix[k - 1] }).max(1.0))
        .collect();
    let total = prefix[n - 1];
    eprintln!(
        "fusebox bench: placement {name}: ns per packet per NF (one core, prefix differences): {}; whole chain {total:.0}",
        chain
            .nfs
            .iter()
            .zip(&cost)
            .map(|(nf, c)| format!("{} {c:.0}", nf.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mpps = |ns: f64| 1e3 / ns;
    eprintln!(
        "fusebox bench: placement {name}: predicted naive {n} {:.2} Mpps, naive {n} x2 {:.2} Mpps",
        mpps(total),
        2.0 * mpps(total)
    );
    let mut configs: Vec<Config> = vec![
        b.chain_config(chain, &entry, synth::Mode::Naive, batch, records)?,
        b.workers_config(chain, &entry, synth::Mode::Naive, batch, records, 2)?,
    ];
    let mut ratios: Vec<(String, String)> = vec![(format!("naive {n} x2"), format!("naive {n}"))];
    let opts = RunOptions {
        batch,
        ..RunOptions::default()
    };
    for (mode, spec) in pipes {
        let p = placement_of(chain, spec)?;
        let probe = Executor::new(chain, &opts, |_, _| Ok(ExitSink::Count))?;
        let setup = dataplane::Setup {
            chain: chain.clone(),
            options: opts.clone(),
            mode: synth::Mode::Naive,
            fast: chain::FastOptions::default(),
            trust_switch_tags: false,
            board: None,
            stop: None,
        };
        if let Err(why) = dataplane::pipeline::check(&setup, &probe, &p) {
            eprintln!("fusebox bench: placement {name}: {spec} not run: {why}");
            continue;
        }
        let stage_ns: Vec<f64> = p
            .stages
            .iter()
            .map(|st: &Stage| st.nfs.iter().map(|&i| cost[i]).sum())
            .collect();
        let slowest = stage_ns.iter().cloned().fold(0.0, f64::max);
        // Stages beyond the cores share them: the busiest core bounds the rate.
        let cores = 2usize;
        let mut per_core = vec![0.0; cores];
        for (st, ns) in p.stages.iter().zip(&stage_ns) {
            per_core[st.processor % cores] += ns;
        }
        let busiest = per_core.iter().cloned().fold(slowest, f64::max);
        eprintln!(
            "fusebox bench: placement {name}: {mode} = {spec}: stages {} ns per packet, predicted {:.2} Mpps",
            stage_ns
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(" | "),
            mpps(busiest)
        );
        let at = probe
            .entry(&entry)
            .ok_or_else(|| CliError::Invalid("placement: no entry fw.eth0".into()))?;
        let shares = vec![vec![(at, records.to_vec())]];
        let mut pipe = dataplane::Pipeline::start(&setup, &probe, &p, false, shares)?;
        let pass = Box::new(move || pipe.pass(1).map(|(n, _)| n).unwrap_or(0));
        configs.push(b.loop_config(mode, n, records, pass));
        ratios.push((format!("{mode} {n}"), format!("naive {n} x2")));
        ratios.push((format!("{mode} {n}"), format!("naive {n}")));
    }
    let p = Params {
        scenario: "placement",
        frame: records.first().map_or(64, |r| r.data.len() as u32 + 4),
        batch,
        passes: b.passes,
        extra: Some(("chain", json!(name))),
    };
    b.measure(&p, configs, &ratios)
}
