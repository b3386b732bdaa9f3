//! The scenarios of `fusebox bench`: the configurations each experiment compares (chains of
//! routers and NAPTs, frame sizes, the TTL NF, the DIR-24-8 router, the ISP chain, the
//! SpeedyBox chains), the traces they run over and the ratios they report.

use super::harness::{nearest_rank, stats};
use super::report::Params;
use super::Bench;
use crate::error::CliError;
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use ports::gen::{generate, GenConfig, Mix, SizeDist};
use ports::pcap::Record;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use synth::Mode;

/// A scenario: its name, what it reproduces, and how to run it.
pub(super) struct Scenario {
    /// Its name on the command line.
    pub(super) name: &'static str,
    /// What it reproduces.
    pub(super) about: &'static str,
    /// Runs it, adding what it measures to the run's report.
    pub(super) run: fn(&mut Bench) -> Result<(), CliError>,
}

/// Every scenario, in the order they run. Add one here.
pub(super) const SCENARIOS: &[Scenario] = &[
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
        name: "merge",
        about: "NFCompass element merging: 10 routers and 10 NAPTs, naive against merged (the routers' later checks and lookups stepped over; nothing merges across the NAPTs' rewriters)",
        run: merge,
    },
    Scenario {
        name: "workers",
        about: "In-memory replay on 1 and 2 workers (one chain replica each, the trace dispatched once by symmetric RSS): 1 and 10 routers and NAPTs, every mode",
        run: workers,
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
        name: "ops-chain",
        about: "NetBricks Fig. 7: chains of 1..8 TTL NFs written with operators, in one process on one core (naive chain, one pipeline) against one NF per thread joined by rings, with and without a copy per hop",
        run: super::ops::chain,
    },
    Scenario {
        name: "bricks",
        about: "NetBricks §5: the NFs of examples/bricks alone, naive, on 1 and 2 workers (Mpps per worker)",
        run: super::ops::bricks,
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
    Scenario {
        name: "newflows",
        about: "Issue 17: a trace where every packet is a new UDP flow (10 x the packets of the other scenarios: 1,000,000) through one NAPT and the ISP chain, 64- and 1500-byte frames, naive, synth and fastpath, each pass on a chain built afresh (not in the default list)",
        run: newflows,
    },
    Scenario {
        name: "parallel",
        about: "NFCompass Fig. 13/14: four identical NFs (firewall, IDS, IPsec) sequential, and as parallel branches merged by XOR in one group of four (b) and two groups of two (c), branches placed by the planner on two workers; latency and throughput",
        run: super::parallel::parallel,
    },
    Scenario {
        name: "live",
        about: "FuseBox forwarding one router over AF_XDP and AF_PACKET vs the kernel, between veth pairs in namespaces (root)",
        run: super::live::live,
    },
    Scenario {
        name: "stages",
        about: "The NSH stages (crates/stages) through BPF_PROG_TEST_RUN, ns per packet net of a no-op program; with --chaining-box, against Chaining-Box's own stages (root)",
        run: super::stages::stages,
    },
    Scenario {
        name: "placement",
        about: "NFCompass §V.C: examples/isp and a DPI chain (firewall, router, SnortIDS with the Snort community rules) placed on two workers by fusebox plan --profile over the scenario's trace and run by fusebox run --plan, against one core, two run-to-completion replicas and one NF per core; the planner's predicted rates beside the measured ones",
        run: super::placement::placement,
    },
    Scenario {
        name: "sfc",
        about: "Round-trip time of UDP probes through chains of 0..4 Linux-router SFs on two hosts (namespaces), the NSH stages placed by the planner, without and with direct links, with --chaining-box also Chaining-Box's stages, and one FuseBox hop of 1..4 NFs (fusebox run --nsh); added RTT per SF and per NF in the hop (root)",
        run: super::sfc::sfc,
    },
];

/// Frame sizes of the `frame-sizes` scenario (with the FCS).
const FRAME_SIZES: [u32; 6] = [64, 128, 256, 512, 1024, 1500];

/// Routes of the `lpm` scenario and the seed they are drawn from.
const LPM_ROUTES: usize = 16_384;
const LPM_SEED: u64 = 0x4c50_4d31_3662_6e63;

/// A trace of UDP frames of `frame` bytes (with the FCS) from 10.0.0.0/16 to `dst` over
/// `flows` flows.
fn trace(packets: u64, frame: u32, flows: u32, dst: (std::net::Ipv4Addr, u8)) -> Vec<Record> {
    generated(
        packets,
        frame,
        flows,
        dst,
        Mix {
            tcp: 0,
            udp: 1,
            icmp: 0,
        },
    )
}

/// `packets` frames of `frame` bytes over `flows` flows of `mix` to `dst`.
fn generated(
    packets: u64,
    frame: u32,
    flows: u32,
    dst: (std::net::Ipv4Addr, u8),
    mix: Mix,
) -> Vec<Record> {
    let cfg = GenConfig {
        packets,
        flows,
        mix,
        size: SizeDist::Fixed(frame),
        dst_prefix: dst,
        ..GenConfig::default()
    };
    generate(&cfg).records()
}

/// The default trace: `packets` 64-byte UDP frames over 1000 flows to [`default_dst`].
pub(super) fn default_trace(packets: u64) -> Vec<Record> {
    trace(packets, 64, 1000, default_dst())
}

/// `packets` TCP segments of `frame` bytes over 100 connections to [`default_dst`] (the
/// generator's streams: sequence numbers continue, payload bytes count up).
pub(super) fn tcp_trace(packets: u64, frame: u32) -> Vec<Record> {
    let tcp = Mix {
        tcp: 1,
        udp: 0,
        icmp: 0,
    };
    generated(packets, frame, 100, default_dst(), tcp)
}

/// The default trace's destinations (routed out of eth1 by the routers, as in SNF Fig. 7).
fn default_dst() -> (std::net::Ipv4Addr, u8) {
    GenConfig::default().dst_prefix
}

/// The first `k` NFs of a chain file, with the links among them (the k-th NF's far
/// interface becomes an exit).
pub(super) fn first_nfs(chain: &ChainFile, k: usize) -> ChainFile {
    let mut c = chain.clone();
    c.nfs.truncate(k);
    let names: Vec<String> = c.nfs.iter().map(|n| n.name.clone()).collect();
    let kept = |e: &Endpoint| names.contains(&e.nf);
    c.links.retain(|(a, b, _)| kept(a) && kept(b));
    c.entries.retain(|(e, _)| kept(e));
    c.devices.retain(|(e, _, _)| kept(e));
    c
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
/// for every chain length and batch size, with the reference loop (and, with
/// `--fastclick`, each chain in FastClick).
fn chains(b: &mut Bench, dir: &'static str, prefix: &str) -> Result<(), CliError> {
    let scenario: &'static str = dir;
    let path = b.examples.join(dir).join("chain.toml");
    let chain = ChainFile::load(&path)?;
    let entry = Endpoint {
        nf: format!("{prefix}1"),
        iface: "eth0".to_string(),
    };
    let records = trace(b.packets, 64, 1000, default_dst());
    let peer_trace = b.fastclick_trace(scenario, &records)?;
    for batch in b.batches.clone() {
        let mut configs = vec![b.reference_config(batch, &records)];
        for mode in [Mode::Naive, Mode::Synth, Mode::Fastpath] {
            for k in lengths(b.quick) {
                let c = first_nfs(&chain, k.min(chain.nfs.len()));
                configs.push(b.chain_config(&c, &entry, mode, batch, &records)?);
            }
        }
        let mut ratios: Vec<(String, String)> = [
            ("synth 10", "naive 1"),
            ("naive 10", "naive 1"),
            ("synth 10", "naive 10"),
            ("synth 1", "naive 1"),
            ("naive 1", "reference"),
            ("synth 10", "reference"),
            ("fastpath 10", "naive 10"),
            ("fastpath 10", "naive 1"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        if let Some(t) = &peer_trace {
            for k in lengths(b.quick) {
                let k = k.min(chain.nfs.len());
                let c = first_nfs(&chain, k);
                let name = format!("{scenario}-{k}");
                configs.push(b.fastclick_config(&c, &entry, batch, &records, t, &name, b.passes)?);
            }
            ratios.extend(peer_ratios(&lengths(b.quick)));
        }
        let p = Params {
            scenario,
            frame: 64,
            batch,
            passes: b.passes,
            extra: None,
        };
        b.measure(&p, configs, &ratios)?;
    }
    Ok(())
}

/// FuseBox ÷ FastClick in every mode at every chain length of `ks`.
fn peer_ratios(ks: &[usize]) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for mode in Mode::BENCHED {
        for &k in ks {
            v.push((format!("{mode} {k}"), format!("fastclick {k}")));
        }
    }
    v
}

impl Bench {
    /// With `--fastclick`: `records` written as `fastclick/NAME.pcap` in the output folder,
    /// for FastClick's `FromDump`; `None` without.
    fn fastclick_trace(&self, name: &str, records: &[Record]) -> Result<Option<PathBuf>, CliError> {
        if self.fastclick.is_none() {
            return Ok(None);
        }
        let dir = self.out_dir.join("fastclick");
        std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir, "cannot create: ", e))?;
        let path = dir.join(format!("{name}.pcap"));
        super::fastclick::write_trace(&path, records)?;
        // FastClick runs in its own folder: give it an absolute path.
        Ok(Some(std::path::absolute(&path).unwrap_or(path)))
    }

    /// `chain` in FastClick fed `trace` (the file of `records`) at `entry` in bursts of
    /// `batch`, `passes` passes per repetition. The first time a chain `name` is met, the
    /// check run compares its exits with FuseBox's (a difference beyond the known ones
    /// fails the bench) and says what agreed.
    #[allow(clippy::too_many_arguments)]
    fn fastclick_config(
        &mut self,
        chain: &ChainFile,
        entry: &Endpoint,
        batch: usize,
        records: &[Record],
        trace: &Path,
        name: &str,
        passes: u64,
    ) -> Result<super::harness::Config, CliError> {
        let Some(bin) = self.fastclick.clone() else {
            return Err(CliError::Invalid("--fastclick: not given".into()));
        };
        let dir = self.out_dir.join("fastclick");
        let per_pass = match self.fastclick_checked.get(name) {
            Some(&n) => n,
            None => {
                eprintln!("fusebox bench: fastclick: checking {name} against FuseBox's exits");
                let (ag, n) =
                    super::fastclick::check(&bin, chain, entry, trace, records, batch, &dir, name)?;
                self.report.lines.push(format!(
                    "  fastclick check {name}: {} packets at the exits, the same as FuseBox's in every mode (naive, synth, fastpath) byte for byte, modulo {} NAT source ports (one to one, checksums as the ports account for) and {} UDP checksums FastClick left at 0x0000",
                    ag.packets, ag.ports_remapped, ag.udp_zero
                ));
                self.report.records.push(json!({
                    "fastclick_check": name,
                    "packets": ag.packets,
                    "nat_ports_remapped": ag.ports_remapped,
                    "udp_checksum_zero": ag.udp_zero,
                    "modes": ["naive", "synth", "fastpath"],
                }));
                self.fastclick_checked.insert(name.to_string(), n);
                n
            }
        };
        let peer = super::fastclick::timed(
            &bin,
            chain,
            entry,
            trace,
            records.len() as u64,
            batch,
            passes,
            &dir,
            &format!("{name}-b{batch}"),
            Some(per_pass),
        )?;
        Ok(super::harness::Config {
            mode: "fastclick",
            nfs: chain.nfs.len(),
            workers: 1,
            runner: super::harness::Runner::FastClick(Box::new(peer)),
            packets: records.len() as u64,
            wire_bytes: super::harness::wire_bytes(records),
            mpps: Vec::new(),
            gbps: Vec::new(),
            latency: None,
        })
    }
}

/// Worker counts of the `workers` scenario.
const WORKERS: [usize; 2] = [1, 2];

/// `workers`: the first 1 and 10 NFs of `examples/routers` and `examples/napts`, in every
/// mode, on one worker (the executor on the calling thread, as `--cores 1` runs) and on two
/// worker threads, each replaying its share of the trace (dispatched once); a pass's rate
/// is its packets over the slowest worker's time. Ratios: two workers over one, per mode and
/// length.
fn workers(b: &mut Bench) -> Result<(), CliError> {
    let batch = b.batches[0];
    let records = trace(b.packets, 64, 1000, default_dst());
    for (dir, prefix) in [("routers", "r"), ("napts", "n")] {
        let chain = ChainFile::load(&b.examples.join(dir).join("chain.toml"))?;
        let entry = Endpoint {
            nf: format!("{prefix}1"),
            iface: "eth0".to_string(),
        };
        let mut configs = Vec::new();
        let mut ratios: Vec<(String, String)> = Vec::new();
        for mode in Mode::BENCHED {
            for k in [1, 10] {
                let c = first_nfs(&chain, k.min(chain.nfs.len()));
                for w in WORKERS {
                    configs.push(if w == 1 {
                        b.chain_config(&c, &entry, mode, batch, &records)?
                    } else {
                        b.workers_config(&c, &entry, mode, batch, &records, w)?
                    });
                }
                ratios.push((format!("{mode} {k} x2"), format!("{mode} {k}")));
            }
        }
        let p = Params {
            scenario: "workers",
            frame: 64,
            batch,
            passes: b.passes,
            extra: Some(("chain", json!(dir))),
        };
        b.measure(&p, configs, &ratios)?;
    }
    Ok(())
}

/// `frame-sizes`: naive 1, naive 10 and synth 10 routers and NAPTs over frames of every
/// size in [`FRAME_SIZES`]. Larger frames use a proportionally shorter trace (the same
/// bytes) and proportionally more passes (the same packets).
fn frame_sizes(b: &mut Bench) -> Result<(), CliError> {
    let batch = b.batches[0];
    for (dir, prefix) in [("routers", "r"), ("napts", "n")] {
        let path = b.examples.join(dir).join("chain.toml");
        let chain = ChainFile::load(&path)?;
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
    more: super::ops::Extra,
) -> Result<(), CliError> {
    let batch = b.batches[0];
    let chain = ChainFile::single(click);
    let entry = Endpoint {
        nf: chain.nfs[0].name.clone(),
        iface: "eth0".to_string(),
    };
    let mut configs = vec![
        b.reference_config(batch, records),
        b.chain_config(&chain, &entry, false, batch, records)?,
        b.chain_config(&chain, &entry, true, batch, records)?,
    ];
    configs.extend(more.0);
    let mut ratios = vec![
        ("synth 1", "naive 1"),
        ("naive 1", "reference"),
        ("synth 1", "reference"),
    ];
    ratios.extend(more.1);
    let p = Params {
        scenario,
        frame: 64,
        batch,
        passes: b.passes,
        extra,
    };
    b.measure(&p, configs, &ratios)
}

/// `merge`: the 10-NF routers and NAPTs chains naive, merged (`plan::merge`'s skips) and
/// synthesized, for every batch size.
fn merge(b: &mut Bench) -> Result<(), CliError> {
    for (dir, prefix) in [("routers", "r"), ("napts", "n")] {
        let chain = ChainFile::load(&b.examples.join(dir).join("chain.toml"))?;
        let entry = Endpoint {
            nf: format!("{prefix}1"),
            iface: "eth0".to_string(),
        };
        let records = trace(b.packets, 64, 1000, default_dst());
        for batch in b.batches.clone() {
            let mut configs = Vec::new();
            for mode in [Mode::Naive, Mode::Merged, Mode::Synth] {
                configs.push(b.chain_config(&chain, &entry, mode, batch, &records)?);
            }
            let ratios: Vec<(String, String)> =
                [("merged 10", "naive 10"), ("synth 10", "naive 10")]
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect();
            let p = Params {
                scenario: if dir == "routers" {
                    "merge-routers"
                } else {
                    "merge-napts"
                },
                frame: 64,
                batch,
                passes: b.passes,
                extra: None,
            };
            b.measure(&p, configs, &ratios)?;
        }
    }
    Ok(())
}

/// `ttl`: NetBricks' TTL NF, the bundled `examples/ttl/ttl.click`.
fn ttl(b: &mut Bench) -> Result<(), CliError> {
    let records = trace(b.packets, 64, 1000, default_dst());
    let click = b.examples.join("ttl").join("ttl.click");
    let ops = super::ops::ttl_configs(b, &records)?;
    single(b, "ttl", &click, &records, None, ops)
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
fn lpm(b: &mut Bench) -> Result<(), CliError> {
    std::fs::create_dir_all(&b.out_dir)
        .map_err(|e| CliError::io(&b.out_dir, "cannot create: ", e))?;
    let click = b.out_dir.join("lpm-16k.click");
    std::fs::write(&click, lpm_click(LPM_ROUTES, LPM_SEED))
        .map_err(|e| CliError::io(&click, "cannot write: ", e))?;
    let records = trace(
        b.packets,
        64,
        16_384,
        (std::net::Ipv4Addr::new(0, 0, 0, 0), 0),
    );
    let ops = super::ops::lpm_configs(b, &lpm_routes(LPM_ROUTES, LPM_SEED), &records)?;
    single(
        b,
        "lpm",
        &click,
        &records,
        Some((
            "routes",
            json!({"count": LPM_ROUTES, "seed": format!("{LPM_SEED:#x}")}),
        )),
        ops,
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
        b.report.lines.push(format!(
            "  lpm table alone ({routes} routes, 16-8-8 trie): {:.1} MiB, built in {build:.3} s, {med:.1} M lookups/s (min {lo:.1}, max {hi:.1}); {found} hits",
            table.memory() as f64 / (1 << 20) as f64
        ));
        b.report.records.push(json!({
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
fn isp(b: &mut Bench) -> Result<(), CliError> {
    let (fw1k, fw10k) = (b.classbench.join("fw1_1k"), b.classbench.join("fw1_10k"));
    if !fw1k.exists() || !fw10k.exists() {
        eprintln!(
            "fusebox bench: isp skipped: no fw1_1k and fw1_10k in {} (--classbench DIR)",
            b.classbench.display()
        );
        return Ok(());
    }
    std::fs::create_dir_all(&b.out_dir)
        .map_err(|e| CliError::io(&b.out_dir, "cannot create: ", e))?;
    let open = b.out_dir.join("allow-all.rules");
    std::fs::write(&open, "allow all\n").map_err(|e| CliError::io(&open, "cannot write: ", e))?;
    let path = b.examples.join("isp").join("chain.toml");
    let base = ChainFile::load(&path)?;
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
        let text =
            std::fs::read_to_string(rules).map_err(|e| CliError::io(rules, "cannot read: ", e))?;
        let mut set = classify::classbench::parse_rules(&text, &rules.display().to_string())?;
        set.truncate(first.unwrap_or(usize::MAX));
        let tuples: Vec<packet::Ipv4FlowKey> = classify::classbench::corners(&set, 2000, 1)
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
            let mut ratios = vec![
                ("synth 3", "naive 3"),
                ("synth 3", "synth-open 3"),
                ("naive 3", "naive-open 3"),
                ("synth 3", "reference"),
            ];
            // With FastClick: the fast path too, and FastClick with the same rules. The
            // chain is checked on every trace.
            if let Some(t) = b.fastclick_trace(&format!("isp-{label}-{frame}"), &records)? {
                configs.push(b.chain_config(&chain, &entry, Mode::Fastpath, batch, &records)?);
                let name = format!("isp-{label}-{frame}");
                let passes = b.passes * scale;
                configs
                    .push(b.fastclick_config(&chain, &entry, batch, &records, &t, &name, passes)?);
                ratios.extend([
                    ("naive 3", "fastclick 3"),
                    ("synth 3", "fastclick 3"),
                    ("fastpath 3", "fastclick 3"),
                ]);
            }
            let p = Params {
                scenario: "isp",
                frame,
                batch,
                passes: b.passes * scale,
                extra: Some(("rules", json!(label))),
            };
            b.measure(&p, configs, &ratios)?;
        }
    }
    Ok(())
}

/// `newflows`: one NAPT (`napts/one.toml`) and the ISP chain (`isp/chain.toml`, its own
/// rules) over `10 x packets` one-packet UDP flows, at 64 and 1500 bytes; naive, synth and
/// fastpath, each pass on a new executor so that no pass sees a flow twice (one pass per
/// repetition). Reports synth ÷ naive and fastpath ÷ naive.
fn newflows(b: &mut Bench) -> Result<(), CliError> {
    let batch = b.batches[0];
    let n = b.packets * 10;
    let chains = [
        ("napt", b.examples.join("napts").join("one.toml"), "n1"),
        ("isp", b.examples.join("isp").join("chain.toml"), "fw"),
    ];
    for frame in [64u32, 1500] {
        let cfg = GenConfig {
            packets: n,
            flows: u32::try_from(n).unwrap_or(u32::MAX),
            mix: Mix {
                tcp: 0,
                udp: 1,
                icmp: 0,
            },
            size: SizeDist::Fixed(frame),
            ..GenConfig::default()
        };
        let mut records = Some(generate(&cfg).records());
        for (i, (label, path, nf)) in chains.iter().enumerate() {
            let chain = ChainFile::load(path)?;
            let entry = Endpoint {
                nf: (*nf).to_string(),
                iface: "eth0".to_string(),
            };
            // The last chain takes the trace; the others share a copy.
            let recs = if i + 1 == chains.len() {
                records.take().unwrap_or_default()
            } else {
                records.clone().unwrap_or_default()
            };
            let inputs = b.fresh_inputs(&chain, &entry, recs)?;
            let configs = Mode::BENCHED
                .iter()
                .map(|&m| b.fresh_config(&chain, &entry, m, batch, &inputs))
                .collect();
            let k = chain.nfs.len();
            let (naive, synth, fast) = (
                format!("naive {k}"),
                format!("synth {k}"),
                format!("fastpath {k}"),
            );
            let p = Params {
                scenario: "newflows",
                frame,
                batch,
                passes: 1,
                extra: Some(("chain", json!(label))),
            };
            b.measure(
                &p,
                configs,
                &[
                    (synth.as_str(), naive.as_str()),
                    (fast.as_str(), naive.as_str()),
                ],
            )?;
        }
    }
    Ok(())
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
fn speedybox(b: &mut Bench) -> Result<(), CliError> {
    let dir = b.out_dir.join("speedybox");
    std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir, "cannot create: ", e))?;
    let write = |name: &str, text: &str| -> Result<PathBuf, CliError> {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| CliError::io(&p, "cannot write: ", e))?;
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
    let entry = Endpoint::parse("bl1.eth0").ok_or_else(|| CliError::Invalid("bad entry".into()))?;
    let max = if b.quick { 3 } else { 9 };
    let mut configs = vec![b.reference_config(batch, &records)];
    for mode in [Mode::Naive, Mode::Fastpath] {
        for k in 1..=max {
            let path = write(
                &format!("blacklist-{k}.toml"),
                &blacklist_chain(k, "bl.click"),
            )?;
            let chain = ChainFile::load(&path)?;
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
    let chain = ChainFile::load(&path)?;
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
fn flow_times(b: &mut Bench, batch: usize) -> Result<(), CliError> {
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
        let chain = ChainFile::load(&path)?;
        let at = Endpoint::parse(entry).ok_or_else(|| CliError::Invalid("bad entry".into()))?;
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
            let mode = if fast.is_some() {
                Mode::Fastpath
            } else {
                Mode::Naive
            };
            let parallel = fast.unwrap_or_default();
            mode.install(
                &mut ex,
                chain::FastOptions {
                    parallel,
                    ..chain::FastOptions::default()
                },
            );
            let e = ex.entry(&at).ok_or_else(|| {
                CliError::Invalid(format!("{}: no entry {entry}", path.display()))
            })?;
            let inputs = vec![(e, records.clone())];
            ex.replay(&inputs, 1);
            ex.record_flow_times(true);
            let mut times = Vec::new();
            for _ in 0..b.reps.max(1) {
                ex.replay(&inputs, 1);
                times.extend(ex.take_flow_times());
            }
            times.sort_unstable();
            let pct: Vec<(u32, u64)> = [10u32, 25, 50, 75, 90, 99]
                .iter()
                .map(|&p| (p, nearest_rank(&times, f64::from(p))))
                .collect();
            let text: Vec<String> = pct
                .iter()
                .map(|(p, v)| format!("p{p} {:.1}", *v as f64 / 1000.0))
                .collect();
            let name = file.trim_end_matches(".toml");
            b.report
                .flow_cdfs
                .push((format!("{name} {label}"), times.clone()));
            b.report.lines.push(format!(
                "  speedybox {file} per-flow processing time, {label}: {} µs ({} flow samples)",
                text.join(", "),
                times.len()
            ));
            b.report.records.push(json!({
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
