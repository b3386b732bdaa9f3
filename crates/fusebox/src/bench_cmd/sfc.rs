//! The `sfc` scenario: round-trip time of UDP probes through chains of 0..4 SFs across two
//! hosts (namespaces made by `sfc::lab`), the NSH stages placed by the planner (`sfc::plan`)
//! from a generated chain file and registry, and installed here directly (no etcd).
//!
//! Variants, measured in one run, taking turns per chain length and repetition:
//! - `fusebox`: n Linux-router SFs, FuseBox's stages (`stages::Instance`), no direct links;
//! - `fusebox+links`: the same with `direct_links: true`: consecutive SFs of one host joined
//!   by a veth pair (`dl0`), as the planner plans them (no Enc/Fwd before the link, no Dec
//!   after it; the second SF's Enc works from static proxy entries);
//! - `chaining-box`, `chaining-box+links` (with `--chaining-box DIR`): the same two plans with
//!   Chaining-Box's own stages (built outside the tree by scripts/build-chaining-box.sh)
//!   attached at the same hooks, their maps filled from the same plan;
//! - `fusebox-hop`: one NSH-aware SF on host 1 that is a FuseBox chain of n TTL NFs
//!   synthesized together (`fusebox run --nsh --mode synth`), FuseBox's stages.
//!
//! Layout: a source on host 1, a sink on host 2 that echoes every probe straight back (the
//! reply bypasses the chain), the first ⌈n/2⌉ SFs on host 1 and the rest on host 2. The
//! classifier sits at TC egress of the source's `eth0`; each SF gets Dec at XDP of its
//! receiving interface and Enc+Fwd at TC egress of its sending interface (`eth0`, or `dl0`
//! for a direct link). Every SF's route to the sink goes to the next SF of the chain (the
//! inner frame is addressed to it: Chaining-Box's Dec does not readdress the inner frame to
//! the SF as FuseBox's `to_host` does, and a Linux router only takes frames addressed to
//! it). Probes go one at a time at a fixed rate, a send timestamp in the payload; a lost
//! probe fails the run, and so does a stage that did not handle every probe (FuseBox: the
//! stages' counters; Chaining-Box, which has none: the bytes the source and each SF sent,
//! which count the NSH only when the stages encapsulated every probe).

use super::Bench;
use crate::error::CliError;
use serde_json::{json, Value};
use sfc::file::{ChainFile, Format};
use sfc::lab::{exec_in, udp_socket, Iface, Lab};
use sfc::plan::{plan, Instance as PlannedInstance, Plan, Stage as PlanStage};
use sfc::registry::{Hello, Iface as RegIface, Registry, SfPorts};
use stages::maps::{Counter, CounterStage, FwdAction};
use stages::{Hook, Instance, Standalone};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SRC_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const DST_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const SRC_PORT: u16 = 40_000;
const DST_PORT: u16 = 7_000;
const SPI: u32 = 77;
/// Time between two probes (a fixed rate of 2,000 probes/s).
const INTERVAL: Duration = Duration::from_micros(500);
/// Probes sent and not counted before each measurement.
const WARMUP: usize = 50;
/// A probe on the wire: Ethernet, IPv4, UDP and the 16-byte payload.
const PROBE_FRAME: u64 = 14 + 20 + 8 + 16;
/// What the stages add to it between SFs: an outer Ethernet header and an MD type 1 NSH.
const ENCAP: u64 = 14 + 24;

fn lab_err(e: impl std::fmt::Display) -> CliError {
    CliError::Invalid(format!("--scenario sfc: {e}"))
}

/// Where an interface of an instance is: (instance, interface) → (namespace, device).
type WhereIs<'a> = &'a dyn Fn(&str, &str) -> Result<(String, Iface), CliError>;

/// Whose stages a variant installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    FuseBox,
    ChainingBox,
}

/// One way of building the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// n Linux-router SFs with `imp`'s stages, direct links on or off.
    Sfs { imp: Impl, direct: bool },
    /// One NSH-aware FuseBox SF holding n NFs synthesized together.
    Hop,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Sfs {
                imp: Impl::FuseBox,
                direct: false,
            } => "fusebox",
            Variant::Sfs {
                imp: Impl::FuseBox,
                direct: true,
            } => "fusebox+links",
            Variant::Sfs {
                imp: Impl::ChainingBox,
                direct: false,
            } => "chaining-box",
            Variant::Sfs {
                imp: Impl::ChainingBox,
                direct: true,
            } => "chaining-box+links",
            Variant::Hop => "fusebox-hop",
        }
    }

    /// The smallest n measured: a hop holds at least one NF.
    fn first_n(self) -> usize {
        match self {
            Variant::Hop => 1,
            Variant::Sfs { .. } => 0,
        }
    }

    /// What n counts.
    fn unit(self) -> &'static str {
        match self {
            Variant::Hop => "NF",
            Variant::Sfs { .. } => "SF",
        }
    }
}

/// What one lab measured.
struct Row {
    /// Round-trip times of the measured probes, µs.
    rtts: Vec<f64>,
    /// Per SF with a Dec (FuseBox's stages): packets it decapsulated.
    dec_done: Vec<u64>,
    /// What was checked: (what, counted, at least).
    checks: Vec<(String, u64, u64)>,
}

/// What a variant measured at one n over the repetitions.
#[derive(Default)]
struct Series {
    rtts: Vec<f64>,
    p50_per_rep: Vec<f64>,
    p99_per_rep: Vec<f64>,
    dec_done: Vec<u64>,
    checks: Vec<(String, u64, u64)>,
}

/// The `q` quantile of sorted `v` (nearest rank).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

/// `sfc`.
pub(super) fn sfc(b: &mut Bench) -> Result<(), CliError> {
    if !stages::load::is_root() {
        eprintln!("fusebox bench: sfc skipped: it needs root (namespaces, BPF programs)");
        return Ok(());
    }
    if let Some(why) = stages::unavailable() {
        eprintln!("fusebox bench: sfc skipped: {why}");
        return Ok(());
    }
    if Command::new("ethtool").arg("--version").output().is_err() {
        eprintln!(
            "fusebox bench: sfc skipped: it needs ethtool (the source sends whole checksums)"
        );
        return Ok(());
    }
    // Quick: up to 3 SFs, the first length with a direct link (sf1 and sf2 on host 1).
    let (max_n, probes) = if b.quick { (3, 300) } else { (4, 3000) };
    let mut variants = vec![
        Variant::Sfs {
            imp: Impl::FuseBox,
            direct: false,
        },
        Variant::Sfs {
            imp: Impl::FuseBox,
            direct: true,
        },
    ];
    let cbox = b.chaining_box.clone();
    match &cbox {
        Some(dir) => {
            for f in [super::stages::PEER_STAGES, super::stages::PEER_CLASSIFIER] {
                if !dir.join(f).is_file() {
                    return Err(lab_err(format!(
                        "--chaining-box {}: no {f} (build it with scripts/build-chaining-box.sh)",
                        dir.display()
                    )));
                }
            }
            variants.push(Variant::Sfs {
                imp: Impl::ChainingBox,
                direct: false,
            });
            variants.push(Variant::Sfs {
                imp: Impl::ChainingBox,
                direct: true,
            });
        }
        None => b.report.lines.push(
            "sfc: Chaining-Box's stages not measured (no --chaining-box DIR; see docs/benchmarks.md)"
                .into(),
        ),
    }
    variants.push(Variant::Hop);
    let exe = std::env::current_exe()
        .map_err(|e| lab_err(format!("the fusebox binary (for the hop variant): {e}")))?;
    let mut series: BTreeMap<(&'static str, usize), Series> = BTreeMap::new();
    for rep in 0..b.reps {
        for n in 0..=max_n {
            for &v in &variants {
                if n < v.first_n() {
                    continue;
                }
                let ctx = Ctx {
                    n,
                    probes,
                    tag: format!("{rep}-{n}-{}", v.name().replace('+', "_")),
                    cbox: cbox.as_deref(),
                    exe: &exe,
                };
                let row = measure(v, &ctx)
                    .map_err(|e| lab_err(format!("{} with n = {n}: {e}", v.name())))?;
                let s = series.entry((v.name(), n)).or_default();
                let sorted_rtts = sorted(&row.rtts);
                s.p50_per_rep.push(quantile(&sorted_rtts, 0.5));
                s.p99_per_rep.push(quantile(&sorted_rtts, 0.99));
                s.rtts.extend(row.rtts);
                s.dec_done = row.dec_done;
                s.checks = row.checks;
            }
        }
    }
    b.report.lines.push(format!(
        "sfc: UDP round trips through the chain, {probes} probes per lab at 2,000/s ({WARMUP} warm-up), {} repetition(s) taking turns; p50/p99 over all repetitions' probes, none lost",
        b.reps
    ));
    // Per variant: the table and the slopes (pooled quantiles, and per repetition).
    let mut slopes: BTreeMap<&'static str, (f64, f64, Vec<f64>)> = BTreeMap::new();
    for &v in &variants {
        let mut pts50 = Vec::new();
        let mut pts99 = Vec::new();
        for n in v.first_n()..=max_n {
            let Some(s) = series.get(&(v.name(), n)) else {
                continue;
            };
            let all = sorted(&s.rtts);
            let (p50, p99) = (quantile(&all, 0.5), quantile(&all, 0.99));
            pts50.push((n as f64, p50));
            pts99.push((n as f64, p99));
            let what = if v == Variant::Hop {
                "NF(s) in one hop"
            } else {
                "SF(s)"
            };
            b.report.lines.push(format!(
                "  sfc {:<18} {n} {what}: RTT p50 {p50:.1} µs, p99 {p99:.1} µs (per-rep p50 {:.1}–{:.1})",
                v.name(),
                s.p50_per_rep.iter().copied().fold(f64::INFINITY, f64::min),
                s.p50_per_rep.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ));
            let mut rec = json!({
                "scenario": "sfc",
                "variant": v.name(),
                "direct_links": matches!(v, Variant::Sfs { direct: true, .. }),
                "stages": match v {
                    Variant::Sfs { imp: Impl::ChainingBox, .. } => "chaining-box",
                    _ => "fusebox",
                },
                "probes": probes,
                "reps": b.reps,
                "lost": 0,
                "rtt_p50_us": p50,
                "rtt_p99_us": p99,
                "rtt_p50_us_per_rep": s.p50_per_rep,
                "rtt_p99_us_per_rep": s.p99_per_rep,
                "dec_done": s.dec_done,
                "checks": s.checks.iter().map(|(w, c, m)| json!({"what": w, "count": c, "at_least": m})).collect::<Vec<Value>>(),
            });
            let key = if v == Variant::Hop { "nfs" } else { "sfs" };
            rec[key] = json!(n);
            b.report.records.push(rec);
        }
        let per_rep: Vec<f64> = (0..b.reps)
            .map(|r| {
                let pts: Vec<(f64, f64)> = (v.first_n()..=max_n)
                    .filter_map(|n| {
                        series
                            .get(&(v.name(), n))
                            .and_then(|s| s.p50_per_rep.get(r))
                            .map(|&p| (n as f64, p))
                    })
                    .collect();
                slope(&pts)
            })
            .collect();
        slopes.insert(v.name(), (slope(&pts50), slope(&pts99), per_rep));
    }
    for &v in &variants {
        let Some((s50, s99, per_rep)) = slopes.get(v.name()) else {
            continue;
        };
        let (lo, hi) = min_max(per_rep);
        let med = quantile(&sorted(per_rep), 0.5);
        b.report.lines.push(format!(
            "sfc: {:<18} added RTT per {} (least-squares slope over {}..{max_n}): p50 {s50:.2} µs, p99 {s99:.2} µs (per-rep p50 slope: median {med:.2}, {lo:.2}–{hi:.2})",
            v.name(),
            v.unit(),
            v.first_n(),
        ));
        b.report.records.push(json!({
            "scenario": "sfc",
            "slope": if v == Variant::Hop { "per_nf" } else { "per_sf" },
            "variant": v.name(),
            "direct_links": matches!(v, Variant::Sfs { direct: true, .. }),
            "rtt_p50_us_per_sf": s50,
            "rtt_p99_us_per_sf": s99,
            "rtt_p50_us_per_sf_per_rep": per_rep,
            "rtt_p50_us_per_sf_per_rep_median": med,
        }));
    }
    // FuseBox ÷ Chaining-Box, per n (p50) and per SF (slopes), with and without links.
    for direct in [false, true] {
        let (f, c) = (
            Variant::Sfs {
                imp: Impl::FuseBox,
                direct,
            },
            Variant::Sfs {
                imp: Impl::ChainingBox,
                direct,
            },
        );
        let (Some(fs), Some(cs)) = (slopes.get(f.name()), slopes.get(c.name())) else {
            continue;
        };
        let mut per_n = Vec::new();
        for n in 0..=max_n {
            if let (Some(a), Some(z)) = (series.get(&(f.name(), n)), series.get(&(c.name(), n))) {
                let (a, z) = (sorted(&a.rtts), sorted(&z.rtts));
                per_n.push((n, quantile(&a, 0.5) / quantile(&z, 0.5)));
            }
        }
        let ratio = fs.0 / cs.0;
        b.report.lines.push(format!(
            "sfc: {} ÷ {}: RTT p50 per n {}; added per SF (p50 slope) {:.2} ÷ {:.2} µs = {ratio:.2}",
            f.name(),
            c.name(),
            per_n
                .iter()
                .map(|(n, r)| format!("{n}: {r:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
            fs.0,
            cs.0,
        ));
        b.report.records.push(json!({
            "scenario": "sfc",
            "ratio": "fusebox / chaining-box",
            "direct_links": direct,
            "rtt_p50_per_n": per_n.iter().map(|(n, r)| json!({"sfs": n, "ratio": r})).collect::<Vec<Value>>(),
            "slope_p50": ratio,
        }));
    }
    if let (Some(h), Some(s)) = (slopes.get("fusebox-hop"), slopes.get("fusebox")) {
        b.report.lines.push(format!(
            "sfc: one FuseBox hop adds {:.2} µs per NF inside it (p50 slope), separate SFs {:.2} µs per SF",
            h.0, s.0
        ));
    }
    Ok(())
}

fn min_max(v: &[f64]) -> (f64, f64) {
    (
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

/// The least-squares slope of `pts` (0 with fewer than two distinct x).
fn slope(pts: &[(f64, f64)]) -> f64 {
    if pts.is_empty() {
        return 0.0;
    }
    let k = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / k;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / k;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx > 0.0 {
        sxy / sxx
    } else {
        0.0
    }
}

/// What one measurement needs besides its variant.
struct Ctx<'a> {
    n: usize,
    probes: usize,
    /// Unique within the run (pin directories, temporary files).
    tag: String,
    cbox: Option<&'a Path>,
    exe: &'a Path,
}

/// SF i of n runs on h1 for the first ⌈n/2⌉, on h2 for the rest.
fn host_of(i: usize, n: usize) -> &'static str {
    if i <= n.div_ceil(2) {
        "h1"
    } else {
        "h2"
    }
}

fn reg_iface(name: &str, i: &Iface) -> RegIface {
    RegIface {
        name: name.to_string(),
        ifindex: i.ifindex,
        mac: sfc::entries::Mac(i.mac),
    }
}

/// The chain file: one chain through `functions` (JSON objects), classifying the probe
/// flow at the source's port on host 1.
fn chain_file(functions: Vec<Value>, direct: bool) -> Result<ChainFile, CliError> {
    let nodes: Vec<Value> = functions.iter().map(|f| f["tag"].clone()).collect();
    let text = json!({
        "chains": [{
            "id": SPI,
            "nodes": nodes,
            "classifier": [{"src": SRC_IP.to_string(), "dst": DST_IP.to_string(),
                            "proto": "udp", "sport": SRC_PORT, "dport": DST_PORT,
                            "host": "h1", "iface": "src"}],
        }],
        "functions": functions,
        "direct_links": direct,
    })
    .to_string();
    ChainFile::parse(&text, Format::Json, "sfc-bench.json").map_err(lab_err)
}

/// One SF of the lab with the interfaces it is planned on.
struct LabSf {
    tag: String,
    host: &'static str,
    ns: String,
    /// Interfaces inside the SF by name (`eth0`, `eth1`, `dl0`).
    ifaces: BTreeMap<String, Iface>,
    iface_in: String,
    iface_out: String,
}

/// Measures variant `v` with `ctx.n` SFs (or NFs in one hop).
fn measure(v: Variant, ctx: &Ctx) -> Result<Row, CliError> {
    let n = ctx.n;
    let mut lab = Lab::new().map_err(lab_err)?;
    for h in ["h1", "h2"] {
        lab.host(h).map_err(lab_err)?;
    }
    lab.join("h1", "h2").map_err(lab_err)?;
    let src = lab.endpoint("h1", "src", SRC_IP).map_err(lab_err)?;
    let dst = lab.endpoint("h2", "dst", DST_IP).map_err(lab_err)?;
    let (sns, dns) = (lab.netns("src"), lab.netns("dst"));
    lab.neigh(&dns, SRC_IP, &src.eth0.mac, "eth0")
        .map_err(lab_err)?;
    // Probes with their whole UDP checksum, as on a wire (a veth's socket traffic otherwise
    // carries only the pseudo-header's sum, which the hop's user-space ports would send on
    // as it is): in every variant, so they differ only in the chain.
    lab.full_checksums("src").map_err(lab_err)?;
    let mut sfs: Vec<LabSf> = Vec::new();
    let mut functions = Vec::new();
    let direct = matches!(v, Variant::Sfs { direct: true, .. });
    match v {
        Variant::Sfs { .. } => {
            for i in 1..=n {
                let ip = Ipv4Addr::new(10, 77, 0, 10 + i as u8);
                let tag = format!("sf{i}");
                let sf = lab.sf(host_of(i, n), &tag, ip).map_err(lab_err)?;
                functions.push(json!({"tag": tag, "type": "linux-router",
                                      "host": host_of(i, n), "to_host": true}));
                sfs.push(LabSf {
                    ns: lab.netns(&tag),
                    tag,
                    host: host_of(i, n),
                    ifaces: BTreeMap::from([("eth0".to_string(), sf.eth0.clone())]),
                    iface_in: "eth0".into(),
                    iface_out: "eth0".into(),
                });
            }
            // Direct links between consecutive SFs of one host (each SF in one link at most:
            // the lab names both ends `dl0`).
            let mut linked = vec![false; n];
            for i in 0..n.saturating_sub(1) {
                if !direct || sfs[i].host != sfs[i + 1].host || linked[i] || linked[i + 1] {
                    continue;
                }
                linked[i] = true;
                linked[i + 1] = true;
                let base = 4 * i as u8;
                let (ia, ib) = (
                    Ipv4Addr::new(10, 77, 200, base + 1),
                    Ipv4Addr::new(10, 77, 200, base + 2),
                );
                let sf = |k: usize| sfc::lab::Sf {
                    tag: sfs[k].tag.clone(),
                    host: sfs[k].host.to_string(),
                    eth0: sfs[k].ifaces["eth0"].clone(),
                    port: sfs[k].ifaces["eth0"].clone(),
                    ip: SRC_IP,
                };
                let (ea, eb) = lab
                    .direct_link(&sf(i), &sf(i + 1), ia, ib)
                    .map_err(lab_err)?;
                // The first sends the probes over the link.
                lab.route(&sfs[i].ns, &format!("{DST_IP}/32"), ib, &eb.mac, "dl0")
                    .map_err(lab_err)?;
                sfs[i].ifaces.insert("dl0".into(), ea);
                sfs[i].iface_out = "dl0".into();
                sfs[i + 1].ifaces.insert("dl0".into(), eb);
                sfs[i + 1].iface_in = "dl0".into();
            }
            // The inner frame goes to the next SF (or the sink after the last).
            for i in 0..n {
                if sfs[i].iface_out == "dl0" {
                    continue;
                }
                let next = if i + 1 < n {
                    sfs[i + 1].ifaces["eth0"].mac
                } else {
                    dst.eth0.mac
                };
                lab.neigh(&sfs[i].ns, DST_IP, &next, "eth0")
                    .map_err(lab_err)?;
            }
            let first = sfs.first().map_or(dst.eth0.mac, |s| s.ifaces["eth0"].mac);
            lab.neigh(&sns, DST_IP, &first, "eth0").map_err(lab_err)?;
        }
        Variant::Hop => {
            let tag = "hop".to_string();
            let sf = lab
                .sf("h1", &tag, Ipv4Addr::new(10, 77, 0, 10))
                .map_err(lab_err)?;
            let (eth1, port1) = lab.sf_iface(&sf, "eth1").map_err(lab_err)?;
            // It reads every frame its interfaces get: only its own, no floods; the kernel
            // does not forward beside it.
            lab.unflooded("h1", &sf.port.name, &sf.eth0.mac)
                .map_err(lab_err)?;
            lab.unflooded("h1", &port1.name, &eth1.mac)
                .map_err(lab_err)?;
            let ns = lab.netns(&tag);
            exec_in(&ns, "sysctl", &["-qw", "net.ipv4.ip_forward=0"]).map_err(lab_err)?;
            lab.neigh(&sns, DST_IP, &dst.eth0.mac, "eth0")
                .map_err(lab_err)?;
            functions.push(json!({"tag": tag, "type": "fusebox", "host": "h1", "nsh_aware": true}));
            sfs.push(LabSf {
                tag,
                host: "h1",
                ns,
                ifaces: BTreeMap::from([("eth0".to_string(), sf.eth0), ("eth1".to_string(), eth1)]),
                iface_in: "eth0".into(),
                iface_out: "eth1".into(),
            });
        }
    }
    // The plan, from the chain file and the lab's interfaces.
    let p = if sfs.is_empty() {
        Plan::default()
    } else {
        let file = chain_file(functions, direct)?;
        let mut hellos: BTreeMap<&str, Hello> = BTreeMap::new();
        for h in ["h1", "h2"] {
            hellos.insert(
                h,
                Hello {
                    host: h.to_string(),
                    functions: BTreeMap::new(),
                    ifaces: Vec::new(),
                    underlay: None,
                },
            );
        }
        if let Some(h1) = hellos.get_mut("h1") {
            h1.ifaces.push(reg_iface("src", &src.eth0));
        }
        for sf in &sfs {
            if let Some(h) = hellos.get_mut(sf.host) {
                let out = reg_iface(&sf.iface_out, &sf.ifaces[&sf.iface_out]);
                h.functions.insert(
                    sf.tag.clone(),
                    SfPorts {
                        iface_in: reg_iface(&sf.iface_in, &sf.ifaces[&sf.iface_in]),
                        iface_out: Some(out),
                    },
                );
            }
        }
        let reg = Registry::from_hellos(hellos.into_values());
        let p = plan(&file, &reg);
        if let Some(c) = p.chains.iter().find(|c| !c.installed) {
            return Err(lab_err(format!(
                "the planner did not install the chain: {:?}",
                c.notes
            )));
        }
        let want_links = sfs.iter().filter(|s| s.iface_in == "dl0").count();
        let links: usize = p.hosts.values().map(|h| h.direct_links.len()).sum();
        if links != want_links {
            return Err(lab_err(format!(
                "the planner used {links} direct link(s) of {want_links}: {:?}",
                p.chains.iter().flat_map(|c| &c.notes).collect::<Vec<_>>()
            )));
        }
        p
    };
    // Where an interface of an instance is: the classifier's in the source's namespace.
    let where_is = |inst: &str, iface: &str| -> Result<(String, Iface), CliError> {
        if let Some(sf) = sfs.iter().find(|s| s.tag == inst) {
            if let Some(i) = sf.ifaces.get(iface) {
                return Ok((sf.ns.clone(), i.clone()));
            }
        } else if iface == "src" {
            return Ok((sns.clone(), src.eth0.clone()));
        }
        Err(lab_err(format!("{inst}: no interface {iface} in the lab")))
    };
    // Stages live until the lab's namespaces are gone (declared after the lab: dropped
    // first; their attachments go with the namespaces).
    let mut installed: Vec<(String, Instance)> = Vec::new();
    let mut peers: Vec<Standalone> = Vec::new();
    let imp = match v {
        Variant::Sfs { imp, .. } => imp,
        Variant::Hop => Impl::FuseBox,
    };
    for hp in p.hosts.values() {
        for (name, inst) in &hp.instances {
            match imp {
                Impl::FuseBox => {
                    let i = apply(&ctx.tag, name, inst, &where_is)?;
                    installed.push((name.clone(), i));
                }
                Impl::ChainingBox => {
                    let dir = ctx
                        .cbox
                        .ok_or_else(|| lab_err("Chaining-Box's stages without --chaining-box"))?;
                    peers.extend(apply_peer(dir, name, inst, &where_is)?);
                }
            }
        }
    }
    // The hop: n TTL NFs synthesized into one FuseBox chain, NSH-aware, live on its
    // interfaces (after the stages: it reads what Cls sends it).
    let mut hop = match (v, sfs.first()) {
        (Variant::Hop, Some(sf)) => Some(HopRun::start(ctx, sf, &dst.eth0.mac)?),
        _ => None,
    };
    // Byte counters of the interfaces that send NSH (Chaining-Box's check).
    let encapsulating = encapsulating(&p, &where_is)?;
    let before: Vec<u64> = encapsulating
        .iter()
        .map(|(_, ns, dev)| tx_bytes(ns, dev))
        .collect::<Result<_, _>>()?;
    let rtts = match probe(&sns, &dns, ctx.probes) {
        Ok(r) => r,
        Err(e) => {
            // What each stage saw, and what the hop said.
            let mut seen: Vec<String> = installed
                .iter()
                .map(|(name, i)| {
                    let c = CounterStage::ALL.map(|c| {
                        i.counters(c)
                            .map(|x| format!("{} {:?}", c.name(), &x.0[..12]))
                            .unwrap_or_default()
                    });
                    format!("{name}: {}", c.join("; "))
                })
                .collect();
            if let Some(h) = hop.as_mut() {
                let _ = h.check_alive().map_err(|e| seen.push(e.to_string()));
                seen.push(format!("hop log: {}", h.log.join(" | ")));
            }
            return Err(lab_err(format!(
                "{e} (counters: packets, passed, done, delivered, learned, drops…: {})",
                seen.join("; ")
            )));
        }
    };
    let sent = (WARMUP + ctx.probes) as u64;
    let mut checks = Vec::new();
    let mut dec_done = Vec::new();
    if let Some(h) = hop.as_mut() {
        h.check_alive()?;
    }
    match imp {
        Impl::FuseBox => {
            for (name, inst) in &installed {
                let planned = p
                    .hosts
                    .values()
                    .find_map(|h| h.instances.get(name))
                    .ok_or_else(|| lab_err(format!("{name}: not in the plan")))?;
                for a in &planned.attach {
                    let (stage, what) = match a.stage {
                        PlanStage::Cls => (CounterStage::Cls, "cls"),
                        PlanStage::Dec => (CounterStage::Dec, "dec"),
                        PlanStage::Enc | PlanStage::EncFwd => (CounterStage::Enc, "enc"),
                        PlanStage::Fwd => (CounterStage::Fwd, "fwd"),
                    };
                    let c = inst.counters(stage)?;
                    let done = c.get(Counter::Done) + c.get(Counter::Delivered);
                    if a.stage == PlanStage::Dec {
                        dec_done.push(done);
                    }
                    checks.push((format!("{name} {what} on {}", a.iface), done, sent));
                }
            }
        }
        // No counters: the bytes below.
        Impl::ChainingBox => {}
    }
    for (k, (what, ns, dev)) in encapsulating.iter().enumerate() {
        let bytes = tx_bytes(ns, dev)?.saturating_sub(before[k]);
        checks.push((
            format!("{what}: bytes sent on {dev}"),
            bytes,
            sent * (PROBE_FRAME + ENCAP),
        ));
    }
    if let Some((what, got, want)) = checks.iter().find(|(_, got, want)| got < want) {
        return Err(lab_err(format!(
            "{n} SF(s): {what}: {got} < {want} ({sent} probes): the path skipped the stage (every check: {checks:?})"
        )));
    }
    drop(installed);
    drop(peers);
    drop(lab);
    Ok(Row {
        rtts: rtts.iter().map(|d| d.as_secs_f64() * 1e6).collect(),
        dec_done,
        checks,
    })
}

/// The interfaces on which every probe must leave encapsulated: (what, namespace, device):
/// the classifier's, and each sending interface with Enc+Fwd whose next hop is not the end
/// of the chain.
fn encapsulating(
    p: &Plan,
    where_is: WhereIs<'_>,
) -> Result<Vec<(String, String, String)>, CliError> {
    let mut out = Vec::new();
    for hp in p.hosts.values() {
        for (name, inst) in &hp.instances {
            let end = inst.fwd.iter().all(|f| f.val.action == FwdAction::End);
            for a in &inst.attach {
                let what = match a.stage {
                    PlanStage::Cls => format!("{name} (classifier)"),
                    PlanStage::EncFwd | PlanStage::Fwd if !end => name.clone(),
                    _ => continue,
                };
                let (ns, dev) = where_is(name, &a.iface)?;
                out.push((what, ns, dev.name));
            }
        }
    }
    Ok(out)
}

/// Bytes device `dev` of namespace `ns` sent (its kernel statistics).
fn tx_bytes(ns: &str, dev: &str) -> Result<u64, CliError> {
    let s = exec_in(
        ns,
        "cat",
        &[&format!("/sys/class/net/{dev}/statistics/tx_bytes")],
    )
    .map_err(lab_err)?;
    s.trim()
        .parse()
        .map_err(|e| lab_err(format!("tx_bytes of {dev} in {ns}: {e}: {s:?}")))
}

/// Runs `f` in namespace `ns` on this thread (attaching by interface index goes through
/// netlink in the calling thread's namespace).
fn inside<T>(ns: &str, f: impl FnOnce() -> Result<T, CliError>) -> Result<T, CliError> {
    let _in = nic::netns::enter(ns).map_err(|e| lab_err(format!("joining {ns}: {e}")))?;
    f()
}

/// Loads and attaches one planned instance's stages (FuseBox's) and fills its maps
/// (`sfc::kernel::fill`, as the agent's data plane does); `where_is` tells the namespace of
/// an interface. Every TC stage attaches at TC egress here (the classifier at the source's
/// `eth0`, Enc+Fwd at the SF's sending interface), Dec at XDP; the planner's `Cls` is loaded
/// as `ClsFwd` (`sfc::kernel::program`).
fn apply(
    tag: &str,
    name: &str,
    plan: &PlannedInstance,
    where_is: WhereIs<'_>,
) -> Result<Instance, CliError> {
    let pin: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let pin = format!("sfcb{}-{tag}-{pin}", std::process::id());
    let inst = Instance::create(&pin)?;
    sfc::kernel::fill(&inst, plan)?;
    for a in &plan.attach {
        let stage = sfc::kernel::program(a.stage);
        let hook = match a.stage {
            PlanStage::Dec => Hook::Xdp,
            PlanStage::Cls | PlanStage::Enc | PlanStage::Fwd | PlanStage::EncFwd => Hook::Egress,
        };
        // An instance is not `Send`: the namespace's thread reopens it (same pinned maps),
        // attaches (netlink: the program stays attached after its handle closes) and
        // leaves the maps to `inst`; the attachment goes with the lab's namespaces.
        let (ns, _) = where_is(name, &a.iface)?;
        nic::netns::run_in(&ns, || -> Result<(), stages::Error> {
            let mut there = Instance::create(&pin)?;
            there.keep();
            there.attach(stage, a.ifindex, hook)
        })
        .map_err(|e| lab_err(format!("joining {ns}: {e}")))??;
    }
    Ok(inst)
}

/// The same for Chaining-Box's stages: its classifier object for the planner's `Cls`
/// (`classify_tc` at TC egress of the source's interface, where FuseBox's Cls+Fwd sits),
/// its stage object for an SF (`decap_nsh` at XDP; `encap_nsh` then `sfc_forwarding` at TC
/// egress for Enc+Fwd), with the plan's entries in their layout: classifier entries by
/// 5-tuple with the first SF's MAC, next hops by service path header (end of the chain:
/// flag 1), static proxy entries as whole NSH headers, each interface's MAC in `src_mac`
/// (0: where Dec runs, 1: where the frames leave).
fn apply_peer(
    dir: &Path,
    name: &str,
    plan: &PlannedInstance,
    where_is: WhereIs<'_>,
) -> Result<Vec<Standalone>, CliError> {
    use super::stages::{
        load_peer_object, peer_hop, peer_nsh, peer_sph, peer_tuple, PEER_CLASSIFIER, PEER_STAGES,
    };
    let classifier = plan.attach.iter().any(|a| a.stage == PlanStage::Cls);
    let obj = load_peer_object(
        dir,
        if classifier {
            PEER_CLASSIFIER
        } else {
            PEER_STAGES
        },
    )?;
    if classifier {
        for e in &plan.cls {
            let sph = e.meta.sph;
            let hop = plan
                .fwd
                .iter()
                .find(|f| (f.spi << 8) | u32::from(f.si) == sph)
                .ok_or_else(|| lab_err(format!("{name}: no next hop for the classifier's path")))?;
            let mut val = sph.to_be_bytes().to_vec();
            val.extend_from_slice(&hop.val.dmac);
            obj.update("cls_table", &peer_tuple(e.key.flow), &val)?;
        }
    } else {
        for f in &plan.fwd {
            obj.update(
                "fwd_table",
                &peer_sph(f.spi, f.si),
                &peer_hop(f.val.action == FwdAction::End, &f.val.dmac),
            )?;
        }
        for e in &plan.proxy {
            let (spi, si) = (e.meta.sph >> 8, (e.meta.sph & 0xff) as u8);
            obj.update("nsh_data", &peer_tuple(e.key), &peer_nsh(spi, si, [0; 4]))?;
        }
    }
    for a in &plan.attach {
        let (ns, iface) = where_is(name, &a.iface)?;
        let progs: &[(&str, Hook, u32)] = match a.stage {
            PlanStage::Cls => &[("classify_tc", Hook::Egress, 10)],
            PlanStage::Dec => &[("decap_nsh", Hook::Xdp, 0)],
            PlanStage::EncFwd => &[
                ("encap_nsh", Hook::Egress, 20),
                ("sfc_forwarding", Hook::Egress, 30),
            ],
            PlanStage::Enc => &[("encap_nsh", Hook::Egress, 20)],
            PlanStage::Fwd => &[("sfc_forwarding", Hook::Egress, 30)],
        };
        let mac_slot: u32 = if a.stage == PlanStage::Dec { 0 } else { 1 };
        obj.update("src_mac", &mac_slot.to_ne_bytes(), &iface.mac)?;
        inside(&ns, || {
            for &(prog, hook, prio) in progs {
                obj.attach(prog, a.ifindex, hook, prio)?;
            }
            Ok(())
        })?;
    }
    Ok(vec![obj])
}

/// The hop's NF: Ethernet off, IPv4 checked, TTL − 1, Ethernet on (from the hop's sending
/// interface to the sink), out.
const TTL_NF: &str = "// One NF of the sfc bench's FuseBox hop.
define($MAC1 02:00:00:00:00:01, $PEER1 02:00:00:00:00:02)
FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> DecIPTTL
  -> EtherEncap(0x0800, $MAC1, $PEER1) -> ToDevice(eth1);
";

/// `fusebox run --nsh` of n TTL NFs in the hop's namespace; killed and its files removed
/// on drop.
struct HopRun {
    child: Option<Child>,
    dir: PathBuf,
    log: Vec<String>,
}

impl HopRun {
    fn start(ctx: &Ctx, sf: &LabSf, sink: &[u8; 6]) -> Result<HopRun, CliError> {
        let dir = std::env::temp_dir().join(format!(
            "fusebox-sfc-bench-{}-{}",
            std::process::id(),
            ctx.tag
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir, "cannot create: ", e))?;
        // A guard before anything can fail: the directory goes with it.
        let mut run = HopRun {
            child: None,
            dir,
            log: Vec::new(),
        };
        let click = run.dir.join("ttl.click");
        std::fs::write(&click, TTL_NF).map_err(|e| CliError::io(&click, "cannot write: ", e))?;
        let mac1 = sfc::lab::mac_string(&sf.ifaces["eth1"].mac);
        let peer1 = sfc::lab::mac_string(sink);
        let mut conf = String::new();
        for k in 1..=ctx.n {
            conf += &format!(
                "[nf.t{k}]\nclick = \"{}\"\ndefine = {{ MAC1 = \"{mac1}\", PEER1 = \"{peer1}\" }}\n",
                click.display()
            );
        }
        for k in 1..ctx.n {
            conf += &format!("[[link]]\nbetween = [\"t{k}.eth1\", \"t{}.eth0\"]\n", k + 1);
        }
        conf += "[[entry]]\nto = \"t1.eth0\"\n";
        let chain = run.dir.join("hop.toml");
        std::fs::write(&chain, conf).map_err(|e| CliError::io(&chain, "cannot write: ", e))?;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &sf.ns])
            .arg(ctx.exe)
            .arg("run")
            .arg(&chain)
            .args([
                "--nsh",
                "--mode",
                "synth",
                "--cores",
                "1",
                "--progress",
                "off",
            ])
            .args(["--iface", "t1.eth0=eth0,afxdp"])
            // What it sends on eth1 must cross TC egress, where Fwd sits.
            .args(["--iface", &format!("t{}.eth1=eth1,afpacket-tc", ctx.n)])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| lab_err(format!("starting fusebox run for the hop: {e}")))?;
        let err = child.stderr.take();
        run.child = Some(child);
        let (tx, lines) = mpsc::channel();
        if let Some(err) = err {
            std::thread::spawn(move || {
                for l in BufReader::new(err).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
        }
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            match lines.recv_timeout(Duration::from_millis(20)) {
                Ok(l) => {
                    let ready = l.starts_with("live: running");
                    run.log.push(l);
                    if ready {
                        return Ok(run);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(s) = run.exited() {
                        return Err(lab_err(format!(
                            "the hop's fusebox run exited before going live ({s}):\n{}",
                            run.log.join("\n")
                        )));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        Err(lab_err(format!(
            "the hop's fusebox run did not go live:\n{}",
            run.log.join("\n")
        )))
    }

    /// How the hop's process ended, if it has.
    fn exited(&mut self) -> Option<String> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => None,
            Some(Ok(Some(s))) => Some(s.to_string()),
            Some(Err(e)) => Some(e.to_string()),
            None => Some("not started".into()),
        }
    }

    /// Fails when the hop's process has exited.
    fn check_alive(&mut self) -> Result<(), CliError> {
        match self.exited() {
            None => Ok(()),
            Some(s) => Err(lab_err(format!(
                "the hop's fusebox run exited ({s}):\n{}",
                self.log.join("\n")
            ))),
        }
    }
}

impl Drop for HopRun {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends `WARMUP + probes` UDP probes from the source, one every [`INTERVAL`], each
/// echoed by the sink; returns the measured probes' round-trip times. A lost probe fails.
fn probe(sns: &str, dns: &str, probes: usize) -> Result<Vec<Duration>, CliError> {
    let tx = udp_socket(sns, SocketAddrV4::new(SRC_IP, SRC_PORT)).map_err(lab_err)?;
    let rx = udp_socket(dns, SocketAddrV4::new(DST_IP, DST_PORT)).map_err(lab_err)?;
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(lab_err)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok((k, from)) = rx.recv_from(&mut buf) {
                let _ = rx.send_to(&buf[..k], from);
            }
        }
    });
    let t0 = Instant::now();
    let to = SocketAddrV4::new(DST_IP, DST_PORT);
    let mut rtts = Vec::with_capacity(probes);
    let mut result = Ok(());
    let mut buf = [0u8; 64];
    for seq in 0..(WARMUP + probes) as u64 {
        let due = t0 + INTERVAL * seq as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut payload = [0u8; 16];
        payload[..8].copy_from_slice(&seq.to_be_bytes());
        let sent = t0.elapsed().as_nanos() as u64;
        payload[8..].copy_from_slice(&sent.to_be_bytes());
        if let Err(e) = tx.send_to(&payload, to) {
            result = Err(lab_err(format!("probe {seq}: {e}")));
            break;
        }
        // Wait for this probe's echo (a late echo of an earlier one is skipped).
        let rtt = loop {
            match tx.recv_from(&mut buf) {
                Ok((16, _)) => {
                    let got = u64::from_be_bytes(buf[..8].try_into().unwrap_or([0; 8]));
                    if got == seq {
                        let at = u64::from_be_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
                        break Ok(Duration::from_nanos(
                            (t0.elapsed().as_nanos() as u64).saturating_sub(at),
                        ));
                    }
                }
                Ok(_) => {}
                Err(e) => break Err(lab_err(format!("probe {seq} not echoed: {e}"))),
            }
        };
        match rtt {
            Ok(d) if seq as usize >= WARMUP => rtts.push(d),
            Ok(_) => {}
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = echo.join();
    result.map(|()| rtts)
}
