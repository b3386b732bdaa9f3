//! The `sfc` scenario: round-trip time of UDP probes through a chain of 0..4 Linux-router
//! SFs across two hosts (namespaces made by `sfc::lab`), the NSH stages placed by the
//! planner (`sfc::plan`) from a generated chain file and registry, and installed here
//! directly through `stages::Instance`, its maps filled by `sfc::kernel::fill` as the
//! agent's data plane fills them (no etcd, no agent).
//!
//! Layout: a source on host 1, a sink on host 2 that echoes every probe straight back
//! (the reply bypasses the chain), the first ⌈n/2⌉ SFs on host 1 and the rest on host 2.
//! The classifier (Cls+Fwd) sits at TC egress of the source's `eth0`; each SF gets Dec
//! (XDP on its `eth0`, with `to_host`: the kernel routes the decapsulated frame) and
//! Enc+Fwd at TC egress of the same `eth0`. (Placed at TC ingress of the bridge ports
//! instead, as `sfc::lab` suggests, the classified NSH frames never reached the SF's port
//! on this kernel: an open point for the stages.) Probes go one at a time at a fixed rate, a send timestamp in
//! the payload; the scenario fails when a probe is lost or an SF's Dec did not see every
//! probe (the path did not go through the chain).

use super::Bench;
use crate::error::CliError;
use serde_json::json;
use sfc::file::{ChainFile, Format};
use sfc::lab::{udp_socket, Lab};
use sfc::plan::{plan, Instance as PlannedInstance, Stage as PlanStage};
use sfc::registry::{Hello, Iface as RegIface, Registry, SfPorts};
use stages::maps::{Counter, CounterStage};
use stages::{Hook, Instance};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
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

fn lab_err(e: impl std::fmt::Display) -> CliError {
    CliError::Invalid(format!("--scenario sfc: {e}"))
}

/// What one chain length measured.
struct Row {
    n: usize,
    p50: f64,
    p99: f64,
    /// Per SF: packets its Dec decapsulated.
    dec_done: Vec<u64>,
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
    let (max_n, probes) = if b.quick { (2, 300) } else { (4, 3000) };
    let mut rows = Vec::new();
    for n in 0..=max_n {
        let row = measure(n, probes)?;
        b.report.lines.push(format!(
            "sfc: {n} SF(s): RTT p50 {:.1} µs, p99 {:.1} µs ({probes} probes, none lost; Dec per SF: {:?})",
            row.p50, row.p99, row.dec_done
        ));
        b.report.records.push(json!({
            "scenario": "sfc",
            "sfs": n,
            "direct_links": false,
            "probes": probes,
            "lost": 0,
            "rtt_p50_us": row.p50,
            "rtt_p99_us": row.p99,
            "dec_done": row.dec_done,
        }));
        rows.push(row);
    }
    let pts: Vec<(f64, f64)> = rows.iter().map(|r| (r.n as f64, r.p50)).collect();
    let per_sf = slope(&pts);
    let pts99: Vec<(f64, f64)> = rows.iter().map(|r| (r.n as f64, r.p99)).collect();
    let per_sf99 = slope(&pts99);
    b.report.lines.push(format!(
        "sfc: added RTT per SF (least-squares slope over 0..{max_n} SFs): p50 {per_sf:.2} µs, p99 {per_sf99:.2} µs"
    ));
    b.report.records.push(json!({
        "scenario": "sfc",
        "slope": "per_sf",
        "direct_links": false,
        "rtt_p50_us_per_sf": per_sf,
        "rtt_p99_us_per_sf": per_sf99,
    }));
    Ok(())
}

/// The least-squares slope of `pts` (0 with fewer than two distinct x).
fn slope(pts: &[(f64, f64)]) -> f64 {
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

/// The chain file for `n` SFs: one chain through sf1..sfn, classifying the probe flow at
/// the source's port on host 1.
fn chain_file(n: usize) -> Result<ChainFile, CliError> {
    let functions: Vec<_> = (1..=n)
        .map(|i| {
            json!({"tag": format!("sf{i}"), "type": "linux-router",
                   "host": host_of(i, n), "to_host": true})
        })
        .collect();
    let nodes: Vec<String> = (1..=n).map(|i| format!("sf{i}")).collect();
    let text = json!({
        "chains": [{
            "id": SPI,
            "nodes": nodes,
            "classifier": [{"src": SRC_IP.to_string(), "dst": DST_IP.to_string(),
                            "proto": "udp", "sport": SRC_PORT, "dport": DST_PORT,
                            "host": "h1", "iface": "src"}],
        }],
        "functions": functions,
        // Consecutive SFs on one host talk through the fabric here (no direct link).
        "direct_links": false,
    })
    .to_string();
    ChainFile::parse(&text, Format::Json, "sfc-bench.json").map_err(lab_err)
}

/// SF i of n runs on h1 for the first ⌈n/2⌉, on h2 for the rest.
fn host_of(i: usize, n: usize) -> &'static str {
    if i <= n.div_ceil(2) {
        "h1"
    } else {
        "h2"
    }
}

fn reg_iface(name: &str, i: &sfc::lab::Iface) -> RegIface {
    RegIface {
        name: name.to_string(),
        ifindex: i.ifindex,
        mac: sfc::entries::Mac(i.mac),
    }
}

/// Measures the chain of `n` SFs.
fn measure(n: usize, probes: usize) -> Result<Row, CliError> {
    let mut lab = Lab::new().map_err(lab_err)?;
    for h in ["h1", "h2"] {
        lab.host(h).map_err(lab_err)?;
    }
    lab.join("h1", "h2").map_err(lab_err)?;
    let src = lab.endpoint("h1", "src", SRC_IP).map_err(lab_err)?;
    let dst = lab.endpoint("h2", "dst", DST_IP).map_err(lab_err)?;
    let (sns, dns) = (lab.netns("src"), lab.netns("dst"));
    // The classifier's interface (`src`: the source's eth0) is in the source's namespace.
    lab.neigh(&sns, DST_IP, &dst.eth0.mac, "eth0")
        .map_err(lab_err)?;
    lab.neigh(&dns, SRC_IP, &src.eth0.mac, "eth0")
        .map_err(lab_err)?;
    let mut sfs = Vec::new();
    for i in 1..=n {
        let ip = Ipv4Addr::new(10, 77, 0, 10 + i as u8);
        let sf = lab
            .sf(host_of(i, n), &format!("sf{i}"), ip)
            .map_err(lab_err)?;
        let ns = lab.netns(&sf.tag);
        lab.neigh(&ns, DST_IP, &dst.eth0.mac, "eth0")
            .map_err(lab_err)?;
        sfs.push(sf);
    }
    // Stage instances live until the lab's namespaces are gone (declared after the lab:
    // dropped first, detaching and unpinning).
    let mut installed: Vec<(String, Instance)> = Vec::new();
    if n > 0 {
        let file = chain_file(n)?;
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
            if let Some(h) = hellos.get_mut(sf.host.as_str()) {
                h.functions.insert(
                    sf.tag.clone(),
                    SfPorts {
                        iface_in: reg_iface("eth0", &sf.eth0),
                        iface_out: None,
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
        for hp in p.hosts.values() {
            for (name, inst) in &hp.instances {
                let ns_of = |iface: &str| {
                    if iface == "eth0" {
                        lab.netns(name)
                    } else {
                        sns.clone()
                    }
                };
                let i = apply(n, name, inst, &ns_of)?;
                installed.push((name.clone(), i));
            }
        }
    }
    let rtts = probe(&sns, &dns, probes)?;
    let mut dec_done = Vec::new();
    for sf in &sfs {
        let inst = installed
            .iter()
            .find(|(name, _)| *name == sf.tag)
            .map(|(_, i)| i)
            .ok_or_else(|| lab_err(format!("{}: no stage instance", sf.tag)))?;
        let done = inst.counters(CounterStage::Dec)?.0[Counter::Done as usize];
        if done < (WARMUP + probes) as u64 {
            let seen: Vec<String> = installed
                .iter()
                .map(|(name, i)| {
                    let c = CounterStage::ALL.map(|c| i.counters(c).map(|x| x.0[..4].to_vec()));
                    format!("{name}: {c:?}")
                })
                .collect();
            return Err(lab_err(format!(
                "{} SF(s): {}'s Dec decapsulated {done} of {} probes: the path skipped it (packets, passed, done, delivered per stage: {seen:?})",
                n,
                sf.tag,
                WARMUP + probes
            )));
        }
        dec_done.push(done);
    }
    drop(installed);
    drop(lab);
    let mut us: Vec<f64> = rtts.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let pick = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
    Ok(Row {
        n,
        p50: pick(0.5),
        p99: pick(0.99),
        dec_done,
    })
}

/// Loads and attaches one planned instance's stages and fills its maps (`sfc::kernel::fill`,
/// as the agent's data plane does); `ns_of` tells the namespace of an interface. Every TC
/// stage attaches at TC egress here (the classifier at the source's `eth0`, Enc+Fwd at the
/// SF's `eth0`), Dec at XDP; the planner's `Cls` is loaded as `ClsFwd`
/// (`sfc::kernel::program`).
fn apply(
    n: usize,
    name: &str,
    plan: &PlannedInstance,
    ns_of: &dyn Fn(&str) -> String,
) -> Result<Instance, CliError> {
    let pin: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let pin = format!("sfcb{}-{n}-{pin}", std::process::id());
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
        let ns = ns_of(&a.iface);
        nic::netns::run_in(&ns, || -> Result<(), stages::Error> {
            let mut there = Instance::create(&pin)?;
            there.keep();
            there.attach(stage, a.ifindex, hook)
        })
        .map_err(|e| lab_err(format!("joining {ns}: {e}")))??;
    }
    Ok(inst)
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
