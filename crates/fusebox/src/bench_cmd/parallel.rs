//! `fusebox bench --scenario parallel`: NFCompass Fig. 13/14 — chains of four identical NFs
//! (a firewall, an IDS, an IPsec gateway) run sequentially and in the two parallel
//! re-organisations of Fig. 13: (b) one group of four (effective length 1) and (c) two
//! groups of two (effective length 2), on two workers.
//!
//! * `sequential`: the chain as written on one worker; `sequential … x2`: two RSS replicas
//!   (what two cores give without re-organising).
//! * `parallel-b`/`parallel-c`: the layout with the branches where the planner puts them
//!   (`plan::offload`, from a profiling run and the measured hand-off cost); the planner's
//!   reasons are printed. Only when the planner groups the NFs (`plan::deps`); otherwise its
//!   reason is printed and the row left out (IPsec: ESP tunnel mode changes the length).
//! * `parallel-b-halves`/`parallel-c-halves`: NFs 2 and 4 on a helper thread whatever the
//!   planner says (the cost of the batched hand-off itself), when the parallel mode runs the
//!   layout with the sequential results; `parallel-b-1thread`: every branch in one thread
//!   (the cost of copying and merging alone).
//!
//! The firewall's and the IDS's NFs never drop (NFCompass: "the rules of firewall are
//! modified to never drop packets"): a classifier whose every output goes on, and no header
//! check, so that the planner may put later branches on another worker. Batch 1 (a
//! packet's latency is its own time; the hand-off is per packet) and batch 32 (branches
//! handed off 32 packets at a time; latency from the batch's entry).

use super::harness::{wire_bytes, Config, Runner};
use super::report::Params;
use super::Bench;
use crate::error::CliError;
use chain::layout::{Group, Parallel, Placement, Stage};
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use plan::offload::{offload, Costs};
use plan::place::measure;
use ports::gen::{generate, GenConfig, Mix, SizeDist};
use ports::pcap::Record;
use std::path::{Path, PathBuf};
use synth::Mode;

/// NFs per chain (Fig. 13).
const NFS: usize = 4;

/// Rules of the firewall that never match the trace (NFCompass: "the rules of firewall are
/// modified to never drop packets"), before the default.
const FW_RULES: usize = 100;

/// Fig. 13 (b): one group of four; (c): two groups of two.
fn layouts() -> [(&'static str, Parallel); 2] {
    [
        (
            "b",
            Parallel {
                groups: vec![Group {
                    nfs: (0..NFS).collect(),
                }],
            },
        ),
        (
            "c",
            Parallel {
                groups: vec![Group { nfs: vec![0, 1] }, Group { nfs: vec![2, 3] }],
            },
        ),
    ]
}

/// NFs 1 and 3 (0-based) on a helper: in (b) two branches on each thread, in (c) one of
/// each group's two.
fn halves() -> Placement {
    Placement {
        stages: vec![
            Stage {
                nfs: vec![0, 2],
                processor: 0,
            },
            Stage {
                nfs: vec![1, 3],
                processor: 1,
            },
        ],
        replicas: 1,
    }
}

/// The IDS's rules: Snort's community rules when the shared data has them, else
/// SpeedyBox's few rules from the examples.
fn ids_rules(b: &Bench) -> PathBuf {
    let community = b
        .classbench
        .ancestors()
        .map(|d| d.join("ids/snort-community-rules/community-simple-content.rules"))
        .find(|p| p.exists());
    match community {
        Some(p) => std::path::absolute(&p).unwrap_or(p),
        None => {
            let p = b.examples.join("speedybox/ids.rules");
            std::path::absolute(&p).unwrap_or(p)
        }
    }
}

/// Writes a line of `NFS` copies of `fwd` (forward path only, a Click fragment from
/// `FromDevice(eth0)` on, ending at the element that goes on to `ToDevice(eth1)`: each
/// NF's one way on is the next) and returns its chain file.
fn write_line(dir: &Path, kind: &str, fwd: &str) -> Result<PathBuf, CliError> {
    let click = dir.join(format!("{kind}.click"));
    let text = format!("FromDevice(eth0) -> {fwd} -> ToDevice(eth1);\n");
    std::fs::write(&click, text).map_err(|e| CliError::io(&click, "cannot write: ", e))?;
    let mut toml = String::new();
    for i in 1..=NFS {
        toml.push_str(&format!("[nf.{kind}{i}]\nclick = \"{kind}.click\"\n"));
    }
    for i in 1..NFS {
        toml.push_str(&format!(
            "[[link]]\nbetween = [\"{kind}{i}.eth1\", \"{kind}{}.eth0\"]\n",
            i + 1
        ));
    }
    toml.push_str(&format!("[[entry]]\nto = \"{kind}1.eth0\"\n"));
    let path = dir.join(format!("{kind}-x{NFS}.toml"));
    std::fs::write(&path, toml).map_err(|e| CliError::io(&path, "cannot write: ", e))?;
    Ok(path)
}

/// A configuration of `chain` in parallel mode with `layout` (branches placed by
/// `placement`), checked against the sequential run first: one pass must merge every
/// packet in every group, drop none and leave by the exits the sequential run uses, as
/// many. `Err` says how it differs.
#[allow(clippy::too_many_arguments)]
fn parallel_config(
    chain: &ChainFile,
    entry: &Endpoint,
    mode: &'static str,
    layout: &Parallel,
    placement: Option<&Placement>,
    batch: usize,
    records: &[Record],
    expect: &chain::Summary,
) -> Result<Config, CliError> {
    let opts = RunOptions {
        batch,
        ..RunOptions::default()
    };
    let mut ex = Executor::new(chain, &opts, |_, _| Ok(ExitSink::Count))?;
    let refused = ex.enable_parallel_placed(layout, placement);
    if !refused.is_empty() {
        return Err(CliError::Invalid(format!(
            "{mode}: groups refused: {refused:?}"
        )));
    }
    let at = ex
        .entry(entry)
        .ok_or_else(|| CliError::Invalid(format!("no entry {entry}")))?;
    let inputs = vec![(at, records.to_vec())];
    ex.replay(&inputs, 1);
    let s = ex.parallel_stats().unwrap_or_default();
    let sum = ex.summary();
    let exits = |s: &chain::Summary| -> Vec<(String, u64)> {
        s.exits
            .iter()
            .map(|x| (x.name.clone(), x.packets))
            .collect()
    };
    if s.merged != records.len() as u64 * s.groups
        || s.dropped + s.irregular + s.discarded > 0
        || exits(&sum) != exits(expect)
    {
        return Err(CliError::Invalid(format!(
            "{mode}: the check pass differs from the sequential run: {s:?}, exits {:?}, sequential {:?}",
            exits(&sum),
            exits(expect)
        )));
    }
    Ok(Config {
        mode,
        nfs: chain.nfs.len(),
        runner: Runner::Chain {
            ex: Box::new(ex),
            inputs,
        },
        workers: 1 + usize::from(s.remote_branches > 0),
        packets: records.len() as u64,
        wire_bytes: wire_bytes(records),
        mpps: Vec::new(),
        gbps: Vec::new(),
        latency: None,
    })
}

/// Prints a note of the scenario and keeps it in the report (table and JSON).
fn note(b: &mut Bench, kind: &str, text: &str) {
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        eprintln!("fusebox bench: parallel {kind}: {line}");
        b.report.lines.push(format!("  parallel {kind}: {line}"));
    }
    b.report.records.push(serde_json::json!({
        "scenario": "parallel",
        "nf": kind,
        "note": text,
    }));
}

/// Why the planner does not run `group` side by side, from its dependency report, in
/// short: each reason (up to its details) with the NFs it holds for (`None`: one of the
/// planner's groups holds all of `group`).
fn not_planned(
    planned: &Parallel,
    deps: &plan::deps::DepsReport,
    group: &[usize],
) -> Option<String> {
    if planned
        .groups
        .iter()
        .any(|g| group.iter().all(|f| g.nfs.contains(f)))
    {
        return None;
    }
    let short = |r: &str| r.split(" (").next().unwrap_or(r).to_string();
    let mut why: Vec<(String, Vec<String>)> = Vec::new();
    let add = |why: &mut Vec<(String, Vec<String>)>, reason: String, nf: &str| match why
        .iter_mut()
        .find(|(r, _)| *r == reason)
    {
        Some((_, nfs)) => nfs.push(nf.to_string()),
        None => why.push((reason, vec![nf.to_string()])),
    };
    for &f in group {
        let Some(n) = deps.nfs.get(f) else {
            continue;
        };
        let mut reasons: Vec<String> = n.excluded.iter().map(|r| short(r)).collect();
        if let Some(w) = &n.no_next {
            if f != group[group.len() - 1] {
                reasons.push(format!("no single way on: {}", short(w)));
            }
        }
        if !reasons.is_empty() {
            add(&mut why, reasons.join("; "), &n.nf);
        }
    }
    // Conflicts between pairs, when no NF is out of groups by itself.
    let pairs = if why.is_empty() { &deps.pairs[..] } else { &[] };
    for p in pairs.iter().filter(|p| !p.allowed) {
        let (Some(a), Some(b)) = (
            deps.nfs.iter().position(|n| n.nf == p.earlier_name),
            deps.nfs.iter().position(|n| n.nf == p.later_name),
        ) else {
            continue;
        };
        if group.contains(&a) && group.contains(&b) {
            let c: Vec<String> = p.conflicts.iter().map(|c| short(c)).collect();
            add(
                &mut why,
                c.join("; "),
                &format!("{} -> {}", p.earlier_name, p.later_name),
            );
        }
    }
    Some(if why.is_empty() {
        "no group holds these NFs".to_string()
    } else {
        why.iter()
            .map(|(r, nfs)| format!("{}: {r}", nfs.join(", ")))
            .collect::<Vec<_>>()
            .join(" / ")
    })
}

/// The scenario (see the module documentation).
pub(super) fn parallel(b: &mut Bench) -> Result<(), CliError> {
    let dir = b.out_dir.join("parallel");
    std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir, "cannot create: ", e))?;
    let rules: Vec<String> = (0..FW_RULES)
        .map(|i| {
            format!(
                "src net 172.{}.{}.0/24 && dst port {}",
                16 + i / 250,
                i % 250,
                1000 + i
            )
        })
        .collect();
    // Every output of the classifier goes on: the firewall never drops.
    let mut firewall = format!(
        "Strip(14) -> MarkIPHeader -> c :: IPClassifier({}, -);\nu :: Unstrip(14);\n",
        rules.join(", ")
    );
    for i in 0..=FW_RULES {
        firewall.push_str(&format!("c[{i}] -> u;\n"));
    }
    firewall.push('u');
    let ids_file = ids_rules(b);
    eprintln!("fusebox bench: parallel: IDS rules {}", ids_file.display());
    let conf = ids_file.with_file_name("snort.conf");
    let conf = if conf.exists() {
        format!("CONF {}, ", conf.display())
    } else {
        String::new()
    };
    let ids = format!(
        "MarkIPHeader(14) -> SnortIDS(RULES {}, {conf}SKIP_UNSUPPORTED true, VAR HOME_NET 10.0.0.0/8, VAR HTTP_PORTS [80,8080])",
        ids_file.display()
    );
    let mut kinds: Vec<(&str, PathBuf, String)> = Vec::new();
    kinds.push(("fw", write_line(&dir, "fw", &firewall)?, "fw1.eth0".into()));
    kinds.push(("ids", write_line(&dir, "ids", &ids)?, "ids1.eth0".into()));
    let four = b.examples.join("ipsec/four.toml");
    if four.exists() {
        kinds.push(("ipsec", four, "ip1.eth0".into()));
    } else {
        eprintln!(
            "fusebox bench: parallel: {} missing: no IPsec rows",
            four.display()
        );
    }
    let frames: &[u32] = if b.quick { &[64] } else { &[64, 1024] };
    let handoff_ns = measure::handoff_ns(50_000, 2);
    for (kind, path, entry) in &kinds {
        let chain = ChainFile::load(path)?;
        let entry = Endpoint::parse(entry).ok_or_else(|| CliError::Invalid("bad entry".into()))?;
        for &frame in frames {
            let records = generate(&GenConfig {
                packets: b.packets.min(if b.quick { 2_000 } else { 20_000 }),
                flows: 1000,
                mix: Mix {
                    tcp: 1,
                    udp: 0,
                    icmp: 0,
                },
                size: SizeDist::Fixed(frame),
                dst_prefix: (std::net::Ipv4Addr::new(10, 0, 2, 0), 24),
                ..GenConfig::default()
            })
            .records();
            // What the planner makes of the chain: groups, and where branches go.
            let build =
                || Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count));
            let probe = build()?;
            let at = probe
                .entry(&entry)
                .ok_or_else(|| CliError::Invalid(format!("no entry {entry}")))?;
            let profiles = plan::profile::profiles(&probe);
            let (planned, deps) = plan::deps::parallel_with(&probe, &profiles);
            let sample = vec![(at, records.clone())];
            let (mut plain, mut timed) = (build()?, build()?);
            let prof = measure::profile(&mut plain, &mut timed, &sample, 100);
            let costs = Costs::from_profile(&prof, handoff_ns);
            for batch in [1usize, 32] {
                let opts = RunOptions {
                    batch,
                    ..RunOptions::default()
                };
                // The sequential run: what every parallel configuration is checked against.
                let seq = b.chain_config(&chain, &entry, Mode::Naive, batch, &records)?;
                let expect = {
                    let mut ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count))?;
                    ex.replay(&[(at, records.clone())], 1);
                    ex.summary()
                };
                let mut configs = vec![Config {
                    mode: "sequential",
                    ..seq
                }];
                let mut x2 = b.workers_config(&chain, &entry, Mode::Naive, batch, &records, 2)?;
                x2.mode = "sequential";
                configs.push(x2);
                for (name, layout) in layouts() {
                    let (mode, halves_mode) = match name {
                        "b" => ("parallel-b", "parallel-b-halves"),
                        _ => ("parallel-c", "parallel-c-halves"),
                    };
                    let mut why: Vec<String> = layout
                        .groups
                        .iter()
                        .filter_map(|g| not_planned(&planned, &deps, &g.nfs))
                        .collect();
                    why.dedup();
                    if why.is_empty() {
                        let off = offload(&probe, &layout, &profiles, 2, Some(&costs));
                        if batch == 1 && frame == frames[0] {
                            note(b, kind, &format!("{mode}: {}", off.text()));
                        }
                        configs.push(parallel_config(
                            &chain,
                            &entry,
                            mode,
                            &layout,
                            off.placement.as_ref(),
                            batch,
                            &records,
                            &expect,
                        )?);
                    } else if batch == 1 && frame == frames[0] {
                        note(
                            b,
                            kind,
                            &format!(
                                "{mode}: the planner keeps the NFs sequential: {}",
                                why.join(" / ")
                            ),
                        );
                    }
                    let mut forced = vec![(halves_mode, Some(halves()))];
                    if name == "b" {
                        forced.push(("parallel-b-1thread", None));
                    }
                    for (m, pl) in forced {
                        match parallel_config(
                            &chain,
                            &entry,
                            m,
                            &layout,
                            pl.as_ref(),
                            batch,
                            &records,
                            &expect,
                        ) {
                            Ok(c) => configs.push(c),
                            Err(e) if batch == 1 && frame == frames[0] => {
                                note(b, kind, &format!("{m} left out: {e}"))
                            }
                            Err(_) => {}
                        }
                    }
                }
                let p = Params {
                    scenario: "parallel",
                    frame,
                    batch,
                    passes: b.passes,
                    extra: Some(("nf", serde_json::Value::String(kind.to_string()))),
                };
                let base = "sequential 4".to_string();
                let ratios: Vec<(String, String)> = configs
                    .iter()
                    .map(Config::key)
                    .filter(|k| *k != base)
                    .map(|k| (k, base.clone()))
                    .collect();
                b.measure(&p, configs, &ratios)?;
            }
        }
    }
    Ok(())
}
