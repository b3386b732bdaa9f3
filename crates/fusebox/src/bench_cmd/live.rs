//! `--scenario live`: FuseBox forwarding one router (`examples/routers/one.toml`) between
//! two veth pairs, over AF_XDP and over AF_PACKET, against the Linux kernel forwarding the
//! same path, measured in the same run.
//!
//! The bench makes three network namespaces (sender ⇄ forwarder ⇄ receiver, names unique to
//! the process) and removes them when it ends, on an error and on SIGINT/SIGTERM (the first
//! signal; a second one exits at once). In the forwarder's namespace, either the kernel
//! forwards (`ip_forward=1`, a route to the receiver's side and a permanent neighbour entry,
//! so no ARP is needed) or `fusebox run one.toml --iface r1.eth0=… --iface r1.eth1=…`
//! does (`ip_forward=0`), started with `ip netns exec`, stopped with SIGINT and its `--json`
//! summary checked for balance. The sender and the receiver are threads of the bench with
//! `nic` ports opened in their namespaces; the sender writes its send time into each UDP
//! payload, the receiver takes receive − send on the same host clock. The clock is
//! `CLOCK_REALTIME`, not the monotonic one, because it is the clock the kernel stamps a
//! received frame with in AF_PACKET's ring: the receiver's own hand-over delay (a TPACKET_V3
//! block is handed over when full or after 1 ms) is then not counted. AF_XDP's receive port
//! reads the same clock when it takes the frame.
//!
//! Per path and repetition: a **max-load phase** (the sender sends as fast as it can for
//! `--live-seconds`; delivered packets/s at the receiver, latency under that load) and a
//! **fixed-rate phase** (`--live-rate` packets/s, paced in bursts of 32: latency when the
//! path keeps up). The three paths take turns within a repetition, in a rotating order.

use super::harness::{nearest_rank, stats};
use super::Bench;
use crate::error::CliError;
use nic::{Kind, RxPort, TxPort};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// MACs of `examples/routers/one.toml`: r1.eth0 (`MAC0`), its peer (`PEER0`, the sender),
/// r1.eth1 (`MAC1`) and its peer (`PEER1`, the receiver). The devices get them, so the
/// kernel writes the same Ethernet header FuseBox's router does.
const MAC0: [u8; 6] = [2, 0, 0, 0, 1, 0x10];
const PEER0: [u8; 6] = [2, 0, 0, 0, 0, 0x11];
const MAC1: [u8; 6] = [2, 0, 0, 0, 1, 0x11];
const PEER1: [u8; 6] = [2, 0, 0, 0, 2, 0x10];

/// Magic in the first payload bytes: the bench's frames, and which phase sent them.
const MAGIC: u32 = 0x4642_0000;

/// Frames sent per burst (one `flush` each).
const BURST: usize = 32;

/// Flows in the offered traffic: sources 10.0.0.0/16 (the router's eth0 side), destinations
/// in 10.1.0.0/16 (routed out of eth1 by `router.click`, and by the kernel's route).
const FLOWS: u32 = 256;

/// The live scenario's settings (from `fusebox bench`'s `--live-*` options).
#[derive(Debug, Clone)]
pub(super) struct LiveOpts {
    /// Seconds per measured phase.
    pub(super) seconds: f64,
    /// Frame size with the FCS (64 = 60 bytes sent).
    pub(super) frame: u32,
    /// Offered rate of the fixed-rate phase, packets/s (0: no fixed-rate phase).
    pub(super) rate: u64,
    /// The sender's and the receiver's ports.
    pub(super) ports: Kind,
    /// FuseBox's `--mode`.
    pub(super) mode: String,
    /// FuseBox's `--cores` (workers).
    pub(super) cores: usize,
    /// FuseBox's `--batch`.
    pub(super) batch: usize,
    /// Pin the sender to CPU 0, FuseBox and the receiver to CPU 1 (`taskset`).
    pub(super) pin: bool,
}

/// One of the paths compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Kernel,
    FuseBox(Kind),
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Kernel => "kernel",
            Path::FuseBox(Kind::AfXdp) => "afxdp",
            Path::FuseBox(_) => "afpacket",
        }
    }
}

/// Whether this process runs as root (namespaces, XDP and raw sockets need it).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// `ip ARGS`, its error output in the error.
fn ip(args: &[&str]) -> Result<(), CliError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| CliError::Invalid(format!("live: running `ip`: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(CliError::Invalid(format!(
            "live: ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The three namespaces and two veth pairs: sender `s` (device `s0`) ⇄ forwarder `f` (`f0`,
/// `f1`) ⇄ receiver `r` (`r0`). Dropping it deletes the namespaces, and with them the
/// devices.
struct Net {
    s: String,
    f: String,
    r: String,
    s0: String,
    f0: String,
    f1: String,
    r0: String,
}

impl Net {
    fn new() -> Result<Net, CliError> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let name = |x: &str| format!("fbb{pid}{x}{n}");
        let net = Net {
            s: name("s"),
            f: name("f"),
            r: name("r"),
            s0: name("s0_"),
            f0: name("f0_"),
            f1: name("f1_"),
            r0: name("r0_"),
        };
        // On an error `net` is dropped, which removes what was made.
        for ns in [&net.s, &net.f, &net.r] {
            ip(&["netns", "add", ns])?;
        }
        for (x, nx, y, ny) in [
            (&net.s0, &net.s, &net.f0, &net.f),
            (&net.f1, &net.f, &net.r0, &net.r),
        ] {
            ip(&[
                "link", "add", x, "netns", nx, "type", "veth", "peer", "name", y, "netns", ny,
            ])?;
        }
        for (ns, dev, m) in [
            (&net.s, &net.s0, PEER0),
            (&net.f, &net.f0, MAC0),
            (&net.f, &net.f1, MAC1),
            (&net.r, &net.r0, PEER1),
        ] {
            ip(&["-n", ns, "link", "set", dev, "addrgenmode", "none"])?;
            ip(&["-n", ns, "link", "set", dev, "address", &mac(m)])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        // The kernel's forwarding state (used only while ip_forward is 1): the sources'
        // subnet on f0, a next hop on f1 with a permanent neighbour entry (the receiver's
        // MAC), the route for the destinations through it.
        ip(&[
            "-n",
            &net.f,
            "addr",
            "add",
            "10.0.255.254/16",
            "dev",
            &net.f0,
        ])?;
        ip(&["-n", &net.f, "addr", "add", "192.0.2.1/24", "dev", &net.f1])?;
        ip(&[
            "-n",
            &net.f,
            "neigh",
            "replace",
            "192.0.2.2",
            "lladdr",
            &mac(PEER1),
            "dev",
            &net.f1,
            "nud",
            "permanent",
        ])?;
        ip(&[
            "-n",
            &net.f,
            "route",
            "add",
            "10.1.0.0/16",
            "via",
            "192.0.2.2",
            "dev",
            &net.f1,
        ])?;
        net.sysctl("net/ipv4/conf/all/rp_filter", "0")?;
        net.sysctl(&format!("net/ipv4/conf/{}/rp_filter", net.f0), "0")?;
        net.forward(false)?;
        Ok(net)
    }

    /// Writes `value` to `/proc/sys/KEY` in the forwarder's namespace.
    fn sysctl(&self, key: &str, value: &str) -> Result<(), CliError> {
        let path = format!("/proc/sys/{key}");
        nic::netns::run_in(&self.f, || std::fs::write(&path, value))?
            .map_err(|e| CliError::io(&path, "cannot write: ", e))
    }

    /// Steers the frames f0 receives to the CPUs of `mask` (RPS; "0": off), so the kernel
    /// forwards them there rather than in the sender's softirq.
    fn rps(&self, mask: &str) -> Result<(), CliError> {
        let file = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", self.f0);
        let out = Command::new("ip")
            .args(["netns", "exec", &self.f, "sh", "-c"])
            .arg(format!("echo {mask} > {file}"))
            .output()
            .map_err(|e| CliError::Invalid(format!("live: setting {file}: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(CliError::Invalid(format!(
                "live: setting {file}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// The kernel forwards between f0 and f1 (`ip_forward`), or not.
    fn forward(&self, on: bool) -> Result<(), CliError> {
        self.sysctl("net/ipv4/ip_forward", if on { "1" } else { "0" })
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in [&self.s, &self.f, &self.r] {
            // A namespace that was never made fails here: nothing to undo.
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// The frames the sender sends: one per flow, a payload of MAGIC, sequence, send time.
struct Frames {
    templates: Vec<Vec<u8>>,
    /// Where the payload starts.
    at: usize,
}

impl Frames {
    /// Frames of `frame` bytes with the FCS (so `frame - 4` sent).
    fn new(frame: u32) -> Frames {
        let len = (frame as usize).saturating_sub(4).max(60);
        let at = 14 + 20 + 8;
        let templates = (0..FLOWS)
            .map(|i| {
                let src = std::net::Ipv4Addr::new(10, 0, (i >> 8) as u8, (i & 0xff) as u8 + 1);
                let dst = std::net::Ipv4Addr::new(10, 1, 0, (i % 250) as u8 + 1);
                wire::build::Frame::udp(src, dst, 1024 + i as u16, 9)
                    .macs(PEER0, MAC0)
                    .payload(&vec![0u8; len - at])
                    .l4_sum(wire::build::Sum::Zero)
                    .build()
            })
            .collect();
        Frames { templates, at }
    }

    /// Frame `seq` of phase `phase`, stamped `ns`, into `buf`.
    #[inline]
    fn fill(&self, buf: &mut Vec<u8>, phase: u16, seq: u32, ns: u64) {
        buf.clear();
        buf.extend_from_slice(&self.templates[seq as usize % self.templates.len()]);
        let at = self.at;
        buf[at..at + 4].copy_from_slice(&(MAGIC | u32::from(phase)).to_be_bytes());
        buf[at + 4..at + 8].copy_from_slice(&seq.to_be_bytes());
        buf[at + 8..at + 16].copy_from_slice(&ns.to_be_bytes());
    }
}

/// The phase and send time of a frame the sender made, if it is one (IPv4, UDP, the magic).
#[inline]
fn stamp_of(f: &[u8]) -> Option<(u16, u64)> {
    if f.get(12..14)? != [0x08, 0x00] || *f.get(23)? != 17 {
        return None;
    }
    let at = 14 + usize::from(f.get(14)? & 0x0f) * 4 + 8;
    let magic = u32::from_be_bytes(f.get(at..at + 4)?.try_into().ok()?);
    if magic & 0xffff_0000 != MAGIC {
        return None;
    }
    let ns = u64::from_be_bytes(f.get(at + 8..at + 16)?.try_into().ok()?);
    Some(((magic & 0xffff) as u16, ns))
}

/// Now on the realtime clock, in ns since 1970: the clock the kernel stamps received frames
/// with (AF_PACKET's ring) and `nic`'s AF_XDP port reads on receipt.
#[inline]
fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Pins the calling thread to `cpu` (`taskset -pc CPU TID`; the thread id from
/// `/proc/thread-self`).
fn pin_thread(cpu: usize) -> Result<(), CliError> {
    let link = std::fs::read_link("/proc/thread-self")
        .map_err(|e| CliError::io("/proc/thread-self", "cannot read: ", e))?;
    let tid = link
        .file_name()
        .and_then(|t| t.to_str())
        .unwrap_or_default()
        .to_string();
    let out = Command::new("taskset")
        .args(["-pc", &cpu.to_string(), &tid])
        .output()
        .map_err(|e| CliError::Invalid(format!("live: --live-pin: running taskset: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(CliError::Invalid(format!(
            "live: --live-pin: taskset -pc {cpu} {tid}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// What one phase measured.
#[derive(Debug, Clone, Default)]
struct PhaseResult {
    /// Frames the sender's port accepted, and the seconds it sent for.
    sent: u64,
    secs: f64,
    /// Frames the sender's full ring refused.
    refused: u64,
    /// Frames of this phase the receiver got.
    received: u64,
    /// Latencies (ns), p50 and p99.
    p50: u64,
    p99: u64,
}

impl PhaseResult {
    fn offered_mpps(&self) -> f64 {
        self.sent as f64 / self.secs.max(1e-9) / 1e6
    }
    fn delivered_mpps(&self) -> f64 {
        self.received as f64 / self.secs.max(1e-9) / 1e6
    }
}

/// The sender's and receiver's ports, opened once in their namespaces.
struct Ends {
    tx: Box<dyn TxPort>,
    rx: Box<dyn RxPort>,
    note: Vec<String>,
}

/// Sends phase `phase` for `secs` (at `rate` packets/s, or as fast as possible when 0) while
/// the receiver counts and times it; the receiver goes on for `drain` after the sender ends.
fn phase(
    ends: &mut Ends,
    frames: &Frames,
    phase: u16,
    secs: f64,
    rate: u64,
    stop: &observe::stop::Flag,
    pin: bool,
) -> Result<PhaseResult, CliError> {
    let drain = Duration::from_millis(300);
    let sending = AtomicBool::new(true);
    let Ends { tx, rx, .. } = ends;
    let (sent, refused, secs, lat) = std::thread::scope(|s| {
        let receiver = s.spawn(|| -> Result<Vec<u64>, CliError> {
            if pin {
                pin_thread(1)?;
            }
            let mut lat = Vec::with_capacity(1 << 20);
            let mut last = None::<Instant>;
            loop {
                rx.recv(256, Duration::from_millis(10), &mut |ts, _, f| {
                    if let Some((p, t)) = stamp_of(f) {
                        if p == phase {
                            lat.push(ts.0.saturating_sub(t));
                        }
                    }
                })?;
                if sending.load(Ordering::Relaxed) {
                    continue;
                }
                let l = *last.get_or_insert_with(Instant::now);
                if l.elapsed() > drain {
                    return Ok(lat);
                }
            }
        });
        let sender = s.spawn(|| -> Result<(u64, u64, f64), CliError> {
            if pin {
                pin_thread(0)?;
            }
            let c0 = tx.counters();
            let mut buf = Vec::with_capacity(2048);
            let t0 = Instant::now();
            let end = t0 + Duration::from_secs_f64(secs);
            let mut seq = 0u32;
            let per_burst = if rate > 0 {
                Some(Duration::from_secs_f64(BURST as f64 / rate as f64))
            } else {
                None
            };
            let mut next = t0;
            while Instant::now() < end && !stop.is_set() {
                for _ in 0..BURST {
                    frames.fill(&mut buf, phase, seq, realtime_ns());
                    seq = seq.wrapping_add(1);
                    tx.send(packet::Timestamp(0), &buf)?;
                }
                tx.flush()?;
                if let Some(d) = per_burst {
                    next += d;
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                }
            }
            let secs = t0.elapsed().as_secs_f64();
            let c1 = tx.counters();
            Ok((c1.tx_packets - c0.tx_packets, c1.tx_full - c0.tx_full, secs))
        });
        let r = sender
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        sending.store(false, Ordering::Relaxed);
        let lat = receiver
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        r.map(|(a, b, c)| (a, b, c, lat))
    })
    .and_then(|(a, b, c, lat)| Ok((a, b, c, lat?)))?;
    let mut lat = lat;
    lat.sort_unstable();
    Ok(PhaseResult {
        sent,
        secs,
        refused,
        received: lat.len() as u64,
        p50: nearest_rank(&lat, 50.0),
        p99: nearest_rank(&lat, 99.0),
    })
}

/// `fusebox run one.toml` in the forwarder's namespace, bound to f0 and f1 `via`.
struct FuseBox {
    child: Child,
    log: Vec<String>,
    lines: mpsc::Receiver<String>,
}

impl FuseBox {
    fn start(
        net: &Net,
        chain: &std::path::Path,
        via: Kind,
        o: &LiveOpts,
    ) -> Result<Self, CliError> {
        let exe = std::env::current_exe()
            .map_err(|e| CliError::Invalid(format!("live: the fusebox binary: {e}")))?;
        let a = format!("r1.eth0={},{via}", net.f0);
        let b = format!("r1.eth1={},{via}", net.f1);
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &net.f]);
        if o.pin {
            cmd.args(["taskset", "-c", "1"]);
        }
        cmd.arg(exe)
            .arg("run")
            .arg(chain)
            .args(["--iface", &a, "--iface", &b, "--mode", &o.mode])
            .args(["--batch", &o.batch.to_string()])
            .args(["--json", "--progress", "off"]);
        cmd.args(["--cores", &o.cores.to_string()]);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| CliError::Invalid(format!("live: starting fusebox run: {e}")))?;
        let (tx, lines) = mpsc::channel();
        if let Some(err) = child.stderr.take() {
            std::thread::spawn(move || {
                for l in BufReader::new(err).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
        }
        let mut fb = FuseBox {
            child,
            log: Vec::new(),
            lines,
        };
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            match fb.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(l) => {
                    let ready = l.starts_with("live: running");
                    fb.log.push(l);
                    if ready {
                        return Ok(fb);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(s)) = fb.child.try_wait() {
                        return Err(CliError::Invalid(format!(
                            "live: fusebox run exited before going live ({s}):\n{}",
                            fb.log.join("\n")
                        )));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        Err(CliError::Invalid(format!(
            "live: fusebox run did not go live:\n{}",
            fb.log.join("\n")
        )))
    }

    /// What it said about its devices (`live: r1.eth0 on … via afxdp`, notes).
    fn devices(&self) -> Vec<String> {
        self.log
            .iter()
            .filter(|l| {
                l.starts_with("live: r1.")
                    || l.contains("copy mode")
                    || l.contains("using AF_PACKET")
            })
            .cloned()
            .collect()
    }

    /// SIGINT, then its `--json` summary, checked: it exits 0 and in + created = out +
    /// dropped + held.
    fn stop(mut self) -> Result<Value, CliError> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self
                .child
                .try_wait()
                .map_err(|e| CliError::Invalid(format!("live: waiting for fusebox run: {e}")))?
            {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(CliError::Invalid(
                    "live: fusebox run did not stop within 10 s of SIGINT".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut o, &mut out);
        }
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(100)) {
            self.log.push(l);
        }
        if !status.success() {
            return Err(CliError::Invalid(format!(
                "live: fusebox run ended with {status}:\n{}",
                self.log.join("\n")
            )));
        }
        let s: Value = serde_json::from_str(&out).map_err(|e| {
            CliError::Invalid(format!("live: fusebox run's --json summary: {e}\n{out}"))
        })?;
        let t = &s["totals"];
        let n = |k: &str| t[k].as_u64().unwrap_or(u64::MAX);
        if n("input").saturating_add(n("created"))
            != n("output")
                .saturating_add(n("dropped"))
                .saturating_add(n("held"))
            || n("input") == u64::MAX
        {
            return Err(CliError::Invalid(format!(
                "live: fusebox run's summary does not balance: {t}"
            )));
        }
        Ok(s)
    }
}

impl Drop for FuseBox {
    fn drop(&mut self) {
        // Stopped already (`stop`), or an error path: do not leave it running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// One path's measurements over the repetitions.
#[derive(Default)]
struct Series {
    max: Vec<PhaseResult>,
    fixed: Vec<PhaseResult>,
    /// FuseBox's summaries' totals (input, output, dropped) and tx-full summed over runs.
    fusebox: Vec<Value>,
    devices: Vec<String>,
}

/// `--scenario live`.
pub(super) fn live(b: &mut Bench) -> Result<(), CliError> {
    if !is_root() {
        eprintln!("fusebox bench: live skipped: it needs root (network namespaces: CAP_SYS_ADMIN; the ports: CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF)");
        return Ok(());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("fusebox bench: live skipped: it needs iproute2's `ip`");
        return Ok(());
    }
    let o = b.live.clone();
    let chain = b.examples.join("routers/one.toml");
    if !chain.exists() {
        return Err(CliError::Invalid(format!(
            "live: {} not found (--examples)",
            chain.display()
        )));
    }
    let stop = observe::stop::Flag::on_signals()
        .map_err(|e| CliError::Invalid(format!("live: signal handlers: {e}")))?;
    let net = Net::new()?;
    eprintln!(
        "fusebox bench: live: namespaces {} {} {} (removed at the end)",
        net.s, net.f, net.r
    );
    let open = |ns: &str, dev: &str| -> Result<nic::Device, CliError> {
        Ok(nic::netns::run_in(ns, || nic::open(dev, o.ports))??)
    };
    let sender = open(&net.s, &net.s0)?;
    let receiver = open(&net.r, &net.r0)?;
    let mut ends = Ends {
        note: [sender.note.clone(), receiver.note.clone()]
            .into_iter()
            .flatten()
            .collect(),
        tx: sender.tx,
        rx: receiver.rx,
    };
    let mut ends_kind = format!("sender {}, receiver {}", sender.kind, receiver.kind);
    for n in &ends.note {
        ends_kind.push_str(&format!(" ({n})"));
    }
    let frames = Frames::new(o.frame);
    let paths = [
        Path::Kernel,
        Path::FuseBox(Kind::AfXdp),
        Path::FuseBox(Kind::AfPacket),
    ];
    let mut series: Vec<Series> = paths.iter().map(|_| Series::default()).collect();
    let mut phase_no = 0u16;
    let mut next_phase = || {
        phase_no = phase_no.wrapping_add(1);
        phase_no
    };
    for rep in 0..b.reps {
        for k in 0..paths.len() {
            if stop.is_set() {
                return Err(CliError::Invalid("live: interrupted".into()));
            }
            let i = (k + rep) % paths.len();
            let path = paths[i];
            let fb = match path {
                Path::Kernel => {
                    net.forward(true)?;
                    if o.pin {
                        net.rps("2")?;
                    }
                    None
                }
                Path::FuseBox(via) => {
                    net.forward(false)?;
                    Some(FuseBox::start(&net, &chain, via, &o)?)
                }
            };
            // A short warm-up, not counted.
            phase(&mut ends, &frames, next_phase(), 0.1, 0, &stop, o.pin)?;
            let max = phase(&mut ends, &frames, next_phase(), o.seconds, 0, &stop, o.pin)?;
            let fixed = if o.rate > 0 {
                Some(phase(
                    &mut ends,
                    &frames,
                    next_phase(),
                    o.seconds,
                    o.rate,
                    &stop,
                    o.pin,
                )?)
            } else {
                None
            };
            let s = &mut series[i];
            match fb {
                Some(fb) => {
                    if s.devices.is_empty() {
                        s.devices = fb.devices();
                    }
                    s.fusebox.push(fb.stop()?);
                }
                None => {
                    net.forward(false)?;
                    if o.pin {
                        net.rps("0")?;
                    }
                }
            }
            s.max.push(max);
            s.fixed.extend(fixed);
        }
    }
    if stop.is_set() {
        return Err(CliError::Invalid("live: interrupted".into()));
    }
    drop(ends);
    drop(net);
    report(b, &o, &paths, &series, &ends_kind);
    Ok(())
}

/// The table's lines and the JSON records of the live scenario.
fn report(b: &mut Bench, o: &LiveOpts, paths: &[Path], series: &[Series], ends: &str) {
    let r = &mut b.report;
    r.lines.push(format!(
        "live: one router (examples/routers/one.toml, fusebox --mode {} --batch {} --cores {}) between veth pairs in three namespaces; {}-byte frames, {} flows, {:.1} s per phase, {} reps; {ends}{}",
        o.mode,
        o.batch,
        o.cores,
        o.frame,
        FLOWS,
        o.seconds,
        b.reps,
        if o.pin {
            "; pinned: sender on CPU 0, FuseBox and the receiver on CPU 1, the kernel's forwarding steered to CPU 1 (RPS on f0)"
        } else {
            ""
        }
    ));
    r.lines.push(format!(
        "{:<19} {:>23} {:>23} {:>6} {:>9} {:>9}   {:>23} {:>9} {:>9}",
        "live path",
        "delivered Mpps (max)",
        "offered Mpps (max)",
        "loss",
        "p50 µs",
        "p99 µs",
        format!("at {} kpps: delivered", o.rate / 1000),
        "p50 µs",
        "p99 µs"
    ));
    let tri = |v: Vec<f64>| {
        let (lo, med, hi) = stats(&v);
        (lo, med, hi)
    };
    for (p, s) in paths.iter().zip(series) {
        let d = tri(s.max.iter().map(PhaseResult::delivered_mpps).collect());
        let off = tri(s.max.iter().map(PhaseResult::offered_mpps).collect());
        let sent: u64 = s.max.iter().map(|x| x.sent).sum();
        let got: u64 = s.max.iter().map(|x| x.received).sum();
        let loss = 1.0 - got as f64 / sent.max(1) as f64;
        let med_u64 = |v: Vec<u64>| {
            let f: Vec<f64> = v.into_iter().map(|x| x as f64).collect();
            stats(&f).1
        };
        let p50 = med_u64(s.max.iter().map(|x| x.p50).collect());
        let p99 = med_u64(s.max.iter().map(|x| x.p99).collect());
        let fd = tri(s.fixed.iter().map(PhaseResult::delivered_mpps).collect());
        let f50 = med_u64(s.fixed.iter().map(|x| x.p50).collect());
        let f99 = med_u64(s.fixed.iter().map(|x| x.p99).collect());
        let refused: u64 = s.max.iter().map(|x| x.refused).sum();
        r.lines.push(format!(
            "live {:<14} {:>7.3} ({:.3}–{:.3}) {:>7.3} ({:.3}–{:.3}) {:>5.1}% {:>9.1} {:>9.1}   {:>7.3} ({:.3}–{:.3}) {:>9.1} {:>9.1}",
            p.name(),
            d.1,
            d.0,
            d.2,
            off.1,
            off.0,
            off.2,
            loss * 100.0,
            p50 / 1e3,
            p99 / 1e3,
            fd.1,
            fd.0,
            fd.2,
            f50 / 1e3,
            f99 / 1e3
        ));
        let trip = |(lo, med, hi): (f64, f64, f64)| json!({"min": lo, "median": med, "max": hi});
        let totals: Vec<Value> = s.fusebox.iter().map(|v| v["totals"].clone()).collect();
        let ports: Vec<Value> = s.fusebox.iter().map(|v| v["ports"].clone()).collect();
        r.records.push(json!({
            "scenario": "live",
            "path": p.name(),
            "frame": o.frame,
            "flows": FLOWS,
            "seconds": o.seconds,
            "reps": s.max.len(),
            "ports": ends,
            "pinned": o.pin,
            "max_load": {
                "delivered_mpps": trip(d),
                "offered_mpps": trip(off),
                "loss": loss,
                "sender_ring_full": refused,
                "latency_ns": {"p50": p50, "p99": p99},
            },
            "fixed_rate": if s.fixed.is_empty() { Value::Null } else { json!({
                "pps": o.rate,
                "delivered_mpps": trip(fd),
                "latency_ns": {"p50": f50, "p99": f99},
            })},
            "fusebox": if matches!(p, Path::Kernel) { Value::Null } else { json!({
                "mode": o.mode,
                "batch": o.batch,
                "cores": o.cores,
                "devices": s.devices,
                "totals": totals,
                "ports": ports,
            })},
        }));
        if !s.devices.is_empty() {
            r.lines
                .push(format!("  {}: {}", p.name(), s.devices.join("; ")));
        }
    }
    let kernel = &series[0];
    for (p, s) in paths.iter().zip(series).skip(1) {
        let v: Vec<f64> = s
            .max
            .iter()
            .zip(&kernel.max)
            .map(|(a, k)| a.delivered_mpps() / k.delivered_mpps().max(1e-9))
            .collect();
        let (lo, med, hi) = stats(&v);
        let what = format!("{} / kernel", p.name());
        r.records.push(json!({
            "scenario": "live",
            "ratio": what,
            "frame": o.frame,
            "median": med,
            "min": lo,
            "max": hi,
        }));
        r.lines.push(format!(
            "  live, {}-byte frames, delivered at max load: {what} = {med:.3} (per-rep {lo:.3}–{hi:.3})",
            o.frame
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_carries_its_phase_and_stamp() {
        for size in [64, 65, 128, 1518] {
            let f = Frames::new(size);
            let mut buf = Vec::new();
            f.fill(&mut buf, 7, 300, 123_456_789);
            assert_eq!(buf.len(), size as usize - 4);
            assert_eq!(stamp_of(&buf), Some((7, 123_456_789)));
            // The IPv4 header checks (the router and the kernel both verify it).
            assert_eq!(wire::checksum::data(&buf[14..34]), 0, "{size}");
        }
        assert_eq!(stamp_of(&[0u8; 60]), None);
        assert_eq!(stamp_of(&[0x08; 20]), None);
    }
}
