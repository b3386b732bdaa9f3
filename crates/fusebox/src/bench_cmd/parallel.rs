//! `fusebox bench --scenario parallel`: NFCompass Fig. 13/14 — chains of four identical NFs
//! (a firewall, an IDS) run sequentially and in the two parallel re-organisations of
//! Fig. 13: (b) one group of four (effective length 1) and (c) two groups of two
//! (effective length 2), each with half its branches on a helper thread (two workers:
//! the executor's thread and the helper), and (b) with every branch in one thread (the
//! cost of copying and merging alone). The sequential chain also runs on two workers as
//! RSS replicas (the throughput two cores give without re-organising). Batch 1, so a
//! packet's latency is its own time through the chain.

use super::harness::{wire_bytes, Config, Runner};
use super::report::Params;
use super::Bench;
use crate::error::CliError;
use chain::layout::{Group, Parallel, Placement, Stage};
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use ports::gen::{generate, GenConfig, Mix, SizeDist};
use ports::pcap::Record;
use std::path::{Path, PathBuf};
use synth::Mode;

/// NFs per chain (Fig. 13).
const NFS: usize = 4;

/// Rules of the firewall that never match the trace (NFCompass: "the rules of firewall are
/// modified to never drop packets"), before `allow all`.
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

/// NFs 0 and 2 on the executor's thread, 1 and 3 on a helper: in (b) two branches on
/// each, in (c) one of each group's two.
fn placement() -> Placement {
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

/// Writes a line of `NFS` copies of `fwd` (forward path; replies pass straight back) and
/// returns its chain file.
fn write_line(dir: &Path, kind: &str, fwd: &str) -> Result<PathBuf, CliError> {
    let click = dir.join(format!("{kind}.click"));
    let text = format!(
        "FromDevice(eth0) -> {fwd} -> ToDevice(eth1);\nFromDevice(eth1) -> ToDevice(eth0);\n"
    );
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

/// A configuration of `chain` in parallel mode with `layout` (and `placement`), checked
/// against the sequential run first: one pass must merge every packet in every group, drop none and
/// leave by the exits the sequential run uses, as many.
fn parallel_config(
    chain: &ChainFile,
    entry: &Endpoint,
    mode: &'static str,
    layout: &Parallel,
    placement: Option<&Placement>,
    records: &[Record],
    expect: &chain::Summary,
) -> Result<Config, CliError> {
    let opts = RunOptions {
        batch: 1,
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
        workers: 1 + usize::from(placement.is_some()),
        packets: records.len() as u64,
        wire_bytes: wire_bytes(records),
        mpps: Vec::new(),
        gbps: Vec::new(),
        latency: None,
    })
}

/// The scenario (see the module documentation).
pub(super) fn parallel(b: &mut Bench) -> Result<(), CliError> {
    let dir = b.out_dir.join("parallel");
    std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir, "cannot create: ", e))?;
    let deny: Vec<String> = (0..FW_RULES)
        .map(|i| {
            format!(
                "deny src net 172.{}.{}.0/24 && dst port {}",
                16 + i / 250,
                i % 250,
                1000 + i
            )
        })
        .collect();
    let firewall = format!(
        "Strip(14) -> CheckIPHeader -> IPFilter({}, allow all) -> Unstrip(14)",
        deny.join(", ")
    );
    let rules = ids_rules(b);
    eprintln!("fusebox bench: parallel: IDS rules {}", rules.display());
    let conf = rules.with_file_name("snort.conf");
    let conf = if conf.exists() {
        format!("CONF {}, ", conf.display())
    } else {
        String::new()
    };
    let ids = format!(
        "CheckIPHeader(14) -> SnortIDS(RULES {}, {conf}SKIP_UNSUPPORTED true, VAR HOME_NET 10.0.0.0/8, VAR HTTP_PORTS [80,8080])",
        rules.display()
    );
    let kinds = [("fw", firewall), ("ids", ids)];
    let frames: &[u32] = if b.quick { &[64] } else { &[64, 1024] };
    for (kind, fwd) in &kinds {
        let path = write_line(&dir, kind, fwd)?;
        let chain = ChainFile::load(&path)?;
        let entry = Endpoint::parse(&format!("{kind}1.eth0"))
            .ok_or_else(|| CliError::Invalid("bad entry".into()))?;
        for &frame in frames {
            let records = generate(&GenConfig {
                packets: b.packets.min(if b.quick { 2_000 } else { 100_000 }),
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
            // The sequential run: what every parallel configuration is checked against.
            let seq = b.chain_config(&chain, &entry, Mode::Naive, 1, &records)?;
            let expect = {
                let mut ex = Executor::new(
                    &chain,
                    &RunOptions {
                        batch: 1,
                        ..RunOptions::default()
                    },
                    |_, _| Ok(ExitSink::Count),
                )?;
                let at = ex
                    .entry(&entry)
                    .ok_or_else(|| CliError::Invalid(format!("no entry {entry}")))?;
                ex.replay(&[(at, records.clone())], 1);
                ex.summary()
            };
            let mut configs = vec![Config {
                mode: "sequential",
                ..seq
            }];
            let mut x2 = b.workers_config(&chain, &entry, Mode::Naive, 1, &records, 2)?;
            x2.mode = "sequential";
            configs.push(x2);
            let pl = placement();
            for (name, layout) in layouts() {
                let (mode, one) = match name {
                    "b" => ("parallel-b", "parallel-b-1thread"),
                    _ => ("parallel-c", "parallel-c-1thread"),
                };
                configs.push(parallel_config(
                    &chain,
                    &entry,
                    mode,
                    &layout,
                    Some(&pl),
                    &records,
                    &expect,
                )?);
                if name == "b" {
                    configs.push(parallel_config(
                        &chain, &entry, one, &layout, None, &records, &expect,
                    )?);
                }
            }
            let p = Params {
                scenario: "parallel",
                frame,
                batch: 1,
                passes: b.passes,
                extra: Some(("nf", serde_json::Value::String(kind.to_string()))),
            };
            b.measure(
                &p,
                configs,
                &[
                    ("parallel-b 4 x2", "sequential 4"),
                    ("parallel-c 4 x2", "sequential 4"),
                    ("parallel-b-1thread 4", "sequential 4"),
                    ("sequential 4 x2", "sequential 4"),
                ],
            )?;
        }
    }
    Ok(())
}
