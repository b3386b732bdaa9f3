//! FuseBox live between network namespaces: a sender namespace injects a capture, FuseBox
//! forwards it through a chain bound to devices, a receiver namespace captures what comes
//! out. The captured packets must equal what the offline `fusebox run` of the same capture
//! writes, per flow and in order, in every mode and over AF_PACKET and AF_XDP.
//!
//! Each test makes its own namespaces and veth pairs (unique names) and removes them when it
//! ends, also when it fails. Without root (or `ip`) the tests skip, except under `CI=true`.

mod common;

use common::{packets as pcap_packets, root, scratch};
use nic::{Recv, RxPort, TxPort};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// True when the test can make namespaces; otherwise says why and returns false, except
/// under `CI=true`, where it fails.
fn can_run(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if root && ip {
        return true;
    }
    let why = if !root { "root" } else { "iproute2's `ip`" };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: needs {why}, and CI=true"
    );
    eprintln!("skipping {test}: needs {why}");
    false
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// sender namespace `a` (device `sa`) ⇄ FuseBox namespace `f` (`fa`, `fb`) ⇄ receiver
/// namespace `b` (device `rb`): two veth pairs, all ends up, no IPv6 addresses (so the
/// kernel sends nothing on its own). Dropping it deletes the namespaces and so the devices.
struct Net {
    a: String,
    f: String,
    b: String,
    sa: String,
    fa: String,
    fb: String,
    rb: String,
}

impl Net {
    fn new() -> Net {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id() % 100_000;
        let name = |s: &str| format!("fbl{pid}_{n}{s}");
        let net = Net {
            a: name("a"),
            f: name("f"),
            b: name("b"),
            sa: name("sa"),
            fa: name("fa"),
            fb: name("fb"),
            rb: name("rb"),
        };
        let setup = || -> Result<(), String> {
            for ns in [&net.a, &net.f, &net.b] {
                ip(&["netns", "add", ns])?;
            }
            for (x, nx, y, ny) in [
                (&net.sa, &net.a, &net.fa, &net.f),
                (&net.fb, &net.f, &net.rb, &net.b),
            ] {
                ip(&[
                    "link", "add", x, "netns", nx, "type", "veth", "peer", "name", y, "netns", ny,
                ])?;
            }
            for (ns, dev) in [
                (&net.a, &net.sa),
                (&net.f, &net.fa),
                (&net.f, &net.fb),
                (&net.b, &net.rb),
            ] {
                ip(&["-n", ns, "link", "set", dev, "addrgenmode", "none"])?;
                ip(&["-n", ns, "link", "set", dev, "up"])?;
            }
            // Loopback in FuseBox's namespace, for --metrics.
            ip(&["-n", &net.f, "link", "set", "lo", "up"])?;
            Ok(())
        };
        if let Err(e) = setup() {
            drop(net);
            panic!("making the test network: {e}");
        }
        net
    }

    fn in_ns<T: Send>(&self, ns: &str, f: impl FnOnce() -> T + Send) -> T {
        nic::netns::run_in(ns, f).unwrap()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in [&self.a, &self.f, &self.b] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// `fusebox run ARGS` inside namespace `ns`, stderr read until the run says it is live.
struct Live {
    child: Child,
    stderr: std::sync::mpsc::Receiver<String>,
    log: Vec<String>,
}

impl Live {
    fn start(ns: &str, dir: &Path, args: &[&str]) -> Live {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_fusebox")])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut live = Live {
            child,
            stderr: rx,
            log: Vec::new(),
        };
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            match live.stderr.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let ready = l.starts_with("live: running");
                    live.log.push(l);
                    if ready {
                        return live;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(s)) = live.child.try_wait() {
                        panic!("fusebox exited early ({s}):\n{}", live.log.join("\n"));
                    }
                }
                Err(_) => break,
            }
        }
        let _ = live.child.kill();
        panic!("fusebox did not go live:\n{}", live.log.join("\n"));
    }

    /// SIGINT, then the exit status, stdout and the whole stderr; fails if it takes more
    /// than `limit`.
    fn stop(mut self, limit: Duration) -> (std::process::ExitStatus, String, String) {
        let t0 = Instant::now();
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-INT", &pid]).status().unwrap();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "fusebox did not stop within {limit:?} of SIGINT:\n{}",
                    self.log.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut o, &mut out);
        }
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            self.log.push(l);
        }
        (status, out, self.log.join("\n"))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Frames received on `rx` until none came for `quiet` (at most `limit` in all), IPv4 only
/// (whatever else a namespace may send is not the chain's).
fn capture(rx: &mut dyn RxPort, quiet: Duration, limit: Duration) -> Vec<Vec<u8>> {
    let t0 = Instant::now();
    let mut last = Instant::now();
    let mut got = Vec::new();
    while t0.elapsed() < limit && last.elapsed() < quiet {
        let r = rx
            .recv(64, Duration::from_millis(20), &mut |_, _, b| {
                if b.get(12..14) == Some(&[0x08, 0x00]) {
                    got.push(b.to_vec());
                }
            })
            .unwrap();
        if matches!(r, Recv::Frames(_)) {
            last = Instant::now();
        }
    }
    got
}

/// Sends `frames` on `tx`, in bursts, and flushes.
fn inject(tx: &mut dyn TxPort, frames: &[Vec<u8>]) {
    for chunk in frames.chunks(32) {
        for f in chunk {
            while !tx.send(packet::Timestamp(0), f).unwrap() {
                tx.flush().unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        tx.flush().unwrap();
        // Paced a little: the veth and FuseBox's ring keep up, nothing is lost to overruns.
        std::thread::sleep(Duration::from_micros(300));
    }
}

/// Asserts `got` equals `want` flow by flow, in order; on a difference, says which flow,
/// which packet and which bytes (not the whole captures).
fn assert_same_flows(got: &[Vec<u8>], want: &[Vec<u8>], what: &str) {
    let (g, w) = (by_flow(got), by_flow(want));
    let gk: Vec<_> = g.keys().collect();
    let wk: Vec<_> = w.keys().collect();
    assert_eq!(gk, wk, "{what}: the flows differ");
    for (k, wp) in &w {
        let gp = &g[k];
        if gp.len() != wp.len() {
            let counts = |m: &BTreeMap<Vec<u8>, Vec<Vec<u8>>>| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.len()))
                    .collect::<Vec<_>>()
            };
            panic!(
                "{what}: flow {k:?}: {} packets, want {}\n got  {:?}\n want {:?}",
                gp.len(),
                wp.len(),
                counts(&g),
                counts(&w)
            );
        }
        for (i, (a, b)) in gp.iter().zip(wp).enumerate() {
            if a != b {
                let at: Vec<usize> = (0..a.len().max(b.len()))
                    .filter(|&j| a.get(j) != b.get(j))
                    .collect();
                panic!(
                    "{what}: flow {k:?} packet {i}: bytes differ at {at:?}\n got  {a:02x?}\n want {b:02x?}"
                );
            }
        }
    }
}

/// Packets grouped by flow (protocol, addresses, ports as they are), each flow in order.
fn by_flow(frames: &[Vec<u8>]) -> BTreeMap<Vec<u8>, Vec<Vec<u8>>> {
    let mut m: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
    for f in frames {
        let hl = usize::from(f.get(14).copied().unwrap_or(0) & 0x0f) * 4;
        let mut key = f.get(23..24).unwrap_or(&[]).to_vec();
        key.extend_from_slice(f.get(26..34).unwrap_or(&[]));
        key.extend_from_slice(f.get(14 + hl..18 + hl).unwrap_or(&[]));
        m.entry(key).or_default().push(f.clone());
    }
    m
}

fn summary_json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("--json: {e}\n{stdout}"))
}

/// The fig5 chain live, `via` one kind of port, in `mode`: the receiver captures what the
/// offline run writes to lb.eth1, flow by flow in order; SIGINT stops it within a second
/// with exit 0 and a balanced summary.
fn fig5_live(via: &str, mode: &str, cores: usize) {
    let test = format!("fig5_live_{via}_{mode}_{cores}");
    let cores = cores.to_string();
    if !can_run(&test) {
        return;
    }
    let dir = scratch(&test);
    let chain = root().join("examples/fig5/chain.toml");
    let chain = chain.to_str().unwrap();
    common::fusebox_ok(
        &dir,
        &[
            "gen",
            "-o",
            "trace.pcap",
            "--packets",
            "600",
            "--flows",
            "30",
            "--mix",
            "tcp=1,udp=2,icmp=1",
            "--src",
            "192.168.0.0/24",
            "--dst",
            "10.0.2.0/24",
            "--dport",
            "1234,53",
        ],
    );
    std::fs::create_dir_all(dir.join("offline")).unwrap();
    common::fusebox_ok(
        &dir,
        &[
            "run",
            chain,
            "--input",
            "napt.eth0=trace.pcap",
            "--mode",
            mode,
            "--cores",
            &cores,
            "--out-dir",
            "offline",
        ],
    );
    let want = pcap_packets(&dir.join("offline/lb.eth1.pcap"));
    assert!(want.len() > 100, "the offline run forwards: {}", want.len());
    let trace = pcap_packets(&dir.join("trace.pcap"));

    let net = Net::new();
    let kind: nic::Kind = via.parse().unwrap();
    let mut rx = net.in_ns(&net.b, || nic::open(&net.rb, nic::Kind::AfPacket).unwrap());
    let mut tx = net.in_ns(&net.a, || nic::open(&net.sa, nic::Kind::AfPacket).unwrap());
    std::fs::create_dir_all(dir.join("live")).unwrap();
    let fa = format!("napt.eth0={},{kind}", net.fa);
    let fb = format!("lb.eth1={},{kind}", net.fb);
    let live = Live::start(
        &net.f,
        &dir,
        &[
            "run",
            chain,
            "--iface",
            &fa,
            "--iface",
            &fb,
            "--mode",
            mode,
            "--out-dir",
            "live",
            "--json",
            "--progress",
            "off",
            "--cores",
            &cores,
        ],
    );
    inject(tx.tx.as_mut(), &trace);
    let got = capture(
        rx.rx.as_mut(),
        Duration::from_millis(700),
        Duration::from_secs(30),
    );
    let (status, out, err) = live.stop(Duration::from_secs(1));
    assert!(status.success(), "{status}\n{err}");
    assert_eq!(got.len(), want.len(), "packets captured\n{err}");
    assert_same_flows(&got, &want, "captured at the receiver");
    let s = summary_json(&out);
    let t = &s["totals"];
    let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("totals.{k}: {s}"));
    assert_eq!(n("input"), trace.len() as u64, "{err}");
    assert_eq!(
        n("input") + n("created"),
        n("output") + n("dropped") + n("held"),
        "{s}"
    );
}

#[test]
fn fig5_live_afpacket_every_mode() {
    for mode in ["naive", "synth", "fastpath"] {
        fig5_live("afpacket", mode, 1);
    }
}

/// On two workers (the NAPT's ports split between them), live equals the offline run on two
/// workers, every mode.
#[test]
fn fig5_live_on_two_workers_every_mode() {
    for mode in ["naive", "synth", "fastpath"] {
        fig5_live("afpacket", mode, 2);
    }
    fig5_live("afxdp", "fastpath", 2);
}

#[test]
fn fig5_live_afxdp_every_mode() {
    for mode in ["naive", "synth", "fastpath"] {
        fig5_live("afxdp", mode, 1);
    }
}

/// The NAPT answers: the receiver sends every packet back as the server's reply (FuseBox's
/// own `--reflect` reply), and what comes out at the sender's side equals what the offline
/// `--reflect lb.eth1` run writes to napt.eth0: replies translated back to the original
/// addresses and ports.
#[test]
fn fig5_live_replies_are_translated_back() {
    let test = "fig5_live_replies";
    if !can_run(test) {
        return;
    }
    let dir = scratch(test);
    let chain = root().join("examples/fig5/chain.toml");
    let chain = chain.to_str().unwrap();
    common::fusebox_ok(
        &dir,
        &[
            "gen",
            "-o",
            "trace.pcap",
            "--packets",
            "300",
            "--flows",
            "20",
            "--mix",
            "udp=1",
            "--src",
            "192.168.0.0/24",
            // One server address: the NAPT gives every flow its own port, so each reply has
            // one mapping to follow back whenever it comes (with several servers two flows
            // may share a port, and which mapping a late reply follows depends on timing).
            "--dst",
            "10.0.2.1/32",
            "--dport",
            "1234",
        ],
    );
    std::fs::create_dir_all(dir.join("offline")).unwrap();
    common::fusebox_ok(
        &dir,
        &[
            "run",
            chain,
            "--input",
            "napt.eth0=trace.pcap",
            "--reflect",
            "lb.eth1",
            "--out-dir",
            "offline",
        ],
    );
    let want = pcap_packets(&dir.join("offline/napt.eth0.pcap"));
    assert!(
        want.len() > 100,
        "replies come back offline: {}",
        want.len()
    );
    let trace = pcap_packets(&dir.join("trace.pcap"));

    let net = Net::new();
    let mut a = net.in_ns(&net.a, || nic::open(&net.sa, nic::Kind::AfPacket).unwrap());
    let mut b = net.in_ns(&net.b, || nic::open(&net.rb, nic::Kind::AfPacket).unwrap());
    std::fs::create_dir_all(dir.join("live")).unwrap();
    let fa = format!("napt.eth0={},afpacket", net.fa);
    let fb = format!("lb.eth1={},afpacket", net.fb);
    let live = Live::start(
        &net.f,
        &dir,
        &[
            "run",
            chain,
            "--iface",
            &fa,
            "--iface",
            &fb,
            "--out-dir",
            "live",
            "--json",
        ],
    );
    inject(a.tx.as_mut(), &trace);
    let forwarded = capture(
        b.rx.as_mut(),
        Duration::from_millis(700),
        Duration::from_secs(30),
    );
    let replies: Vec<Vec<u8>> = forwarded
        .iter()
        .map(|f| chain::reflect::reply(&packet::Packet::from_bytes(f)))
        .collect();
    inject(b.tx.as_mut(), &replies);
    let back = capture(
        a.rx.as_mut(),
        Duration::from_millis(700),
        Duration::from_secs(30),
    );
    let (status, _, err) = live.stop(Duration::from_secs(1));
    if std::env::var("FUSEBOX_LIVE_DEBUG").is_ok() {
        let mut w =
            ports::pcap::PcapWriter::create(&dir.join("back.pcap"), packet::Precision::Micro, 1)
                .unwrap();
        for f in &back {
            w.write(packet::Timestamp(0), f).unwrap();
        }
        w.finish().unwrap();
        let mut w = ports::pcap::PcapWriter::create(
            &dir.join("forwarded.pcap"),
            packet::Precision::Micro,
            1,
        )
        .unwrap();
        for f in &forwarded {
            w.write(packet::Timestamp(0), f).unwrap();
        }
        w.finish().unwrap();
        eprintln!("debug captures in {}", dir.display());
    }
    assert!(status.success(), "{status}\n{err}");
    assert_eq!(back.len(), want.len(), "replies back\n{err}");
    assert_same_flows(&back, &want, "replies back at the sender");
}

/// A device deleted mid-run: one clear error naming it, a balanced summary, no panic.
#[test]
fn a_device_deleted_mid_run_stops_the_run_with_an_error() {
    let test = "live_device_deleted";
    if !can_run(test) {
        return;
    }
    let dir = scratch(test);
    let chain = root().join("examples/fig5/chain.toml");
    let net = Net::new();
    let fa = format!("napt.eth0={},afpacket", net.fa);
    let fb = format!("lb.eth1={},afpacket", net.fb);
    let mut live = Live::start(
        &net.f,
        &dir,
        &[
            "run",
            chain.to_str().unwrap(),
            "--iface",
            &fa,
            "--iface",
            &fb,
            "--json",
        ],
    );
    ip(&["-n", &net.b, "link", "del", &net.rb]).unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = live.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "still running after its device was deleted"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    while let Ok(l) = live.stderr.recv_timeout(Duration::from_millis(200)) {
        live.log.push(l);
    }
    let err = live.log.join("\n");
    assert!(!status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(&net.fb), "the error names the device:\n{err}");
    let mut out = String::new();
    if let Some(mut o) = live.child.stdout.take() {
        std::io::Read::read_to_string(&mut o, &mut out).unwrap();
    }
    let s = summary_json(&out);
    let t = &s["totals"];
    let n = |k: &str| t[k].as_u64().unwrap();
    assert_eq!(
        n("input") + n("created"),
        n("output") + n("dropped") + n("held"),
        "{s}"
    );
}

/// A device that does not exist: a clear error before anything runs, exit status non-zero.
#[test]
fn a_missing_device_is_named() {
    let dir = scratch("live_missing");
    let chain = root().join("examples/fig5/chain.toml");
    let o = common::fusebox(
        &dir,
        &[
            "run",
            chain.to_str().unwrap(),
            "--iface",
            "napt.eth0=fbnosuchdev0",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("fbnosuchdev0: no such device"), "{err}");
}

/// `--metrics` on a live run: a scrape while it forwards parses as the Prometheus text
/// format and counts the device ports; after SIGINT the scrape of the final counters equals
/// the printed summary (chain totals, and per port what was received and sent).
#[test]
fn live_metrics_scrape_equals_the_summary() {
    let test = "live_metrics";
    if !can_run(test) {
        return;
    }
    let dir = scratch(test);
    let chain = root().join("examples/fig5/chain.toml");
    common::fusebox_ok(
        &dir,
        &[
            "gen",
            "-o",
            "trace.pcap",
            "--packets",
            "400",
            "--flows",
            "20",
            "--mix",
            "udp=1",
            "--src",
            "192.168.0.0/24",
            "--dst",
            "10.0.2.1/32",
            "--dport",
            "1234",
        ],
    );
    let trace = pcap_packets(&dir.join("trace.pcap"));
    let net = Net::new();
    let mut a = net.in_ns(&net.a, || nic::open(&net.sa, nic::Kind::AfPacket).unwrap());
    let mut b = net.in_ns(&net.b, || nic::open(&net.rb, nic::Kind::AfPacket).unwrap());
    let fa = format!("napt.eth0={},afpacket", net.fa);
    let fb = format!("lb.eth1={},afpacket", net.fb);
    let mut live = Live::start(
        &net.f,
        &dir,
        &[
            "run",
            chain.to_str().unwrap(),
            "--iface",
            &fa,
            "--iface",
            &fb,
            "--json",
            "--cores",
            "1",
            "--metrics",
            "127.0.0.1:0",
            "--metrics-linger",
            "2",
        ],
    );
    let addr: std::net::SocketAddr = live
        .log
        .iter()
        .find_map(|l| l.strip_prefix("metrics: serving http://"))
        .and_then(|l| l.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics address:\n{}", live.log.join("\n")))
        .parse()
        .unwrap();
    // The server lives in FuseBox's namespace: scrape from there.
    let scrape = |net: &Net| net.in_ns(&net.f, || observe::scrape::get(addr, "/metrics").unwrap());
    inject(a.tx.as_mut(), &trace);
    let got = capture(
        b.rx.as_mut(),
        Duration::from_millis(500),
        Duration::from_secs(30),
    );
    assert!(!got.is_empty());
    let during = scrape(&net);
    assert_eq!(during.status, 200);
    let during = observe::scrape::parse(&during.body).unwrap();
    assert!(during.family("fusebox_port_rx_packets_total").is_some());
    // Stop; the run prints its summary, then serves the final counters while it lingers.
    Command::new("kill")
        .args(["-INT", &live.child.id().to_string()])
        .status()
        .unwrap();
    let t0 = Instant::now();
    while !live
        .log
        .iter()
        .any(|l| l.contains("serving the final counters"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{}",
            live.log.join("\n")
        );
        if let Ok(l) = live.stderr.recv_timeout(Duration::from_millis(50)) {
            live.log.push(l);
        }
    }
    let last = observe::scrape::parse(&scrape(&net).body).unwrap();
    // The lingering ends by itself (a second signal would exit at once, status 130).
    let status = live.child.wait().unwrap();
    assert!(status.success(), "{}", live.log.join("\n"));
    let mut out = String::new();
    std::io::Read::read_to_string(&mut live.child.stdout.take().unwrap(), &mut out).unwrap();
    let s = summary_json(&out);
    let t = &s["totals"];
    let w = [("worker", "0")];
    for (family, key) in [
        ("fusebox_chain_input_packets_total", "input"),
        ("fusebox_chain_output_packets_total", "output"),
        ("fusebox_chain_dropped_packets_total", "dropped"),
    ] {
        let v = last
            .value(family, &w)
            .or_else(|| last.value(family, &[]))
            .unwrap_or_else(|| panic!("{family} missing"));
        assert_eq!(v as u64, t[key].as_u64().unwrap(), "{family}");
    }
    assert_eq!(t["input"].as_u64().unwrap(), trace.len() as u64);
    for p in s["ports"].as_array().expect("ports in the summary") {
        let name = p["name"].as_str().unwrap();
        for what in ["rx_packets", "tx_packets", "tx_full"] {
            let v = last
                .value(
                    &format!("fusebox_port_{what}_total"),
                    &[("worker", "0"), ("port", name)],
                )
                .unwrap_or_else(|| panic!("{what} of {name}"));
            assert_eq!(v as u64, p[what].as_u64().unwrap(), "{what} of {name}");
        }
    }
    let napt = s["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "napt.eth0")
        .unwrap();
    assert_eq!(napt["rx_packets"].as_u64().unwrap(), trace.len() as u64);
}

/// `fusebox bench --scenario live --quick`: the plumbing of the live benchmark. It makes its
/// namespaces, measures the kernel, FuseBox over AF_XDP and over AF_PACKET, prints the three
/// rows and the two ratios, writes balanced FuseBox summaries in its records, and removes
/// its namespaces. Never a speed threshold.
#[test]
fn live_bench_quick_prints_three_rows_and_cleans_up() {
    let test = "live_bench_quick";
    if !can_run(test) {
        return;
    }
    let dir = scratch(test);
    let examples = root().join("examples");
    let o = common::fusebox_ok(
        &dir,
        &[
            "bench",
            "--scenario",
            "live",
            "--quick",
            "--live-seconds",
            "0.2",
            "--reps",
            "1",
            "--no-charts",
            "--charts",
            "out",
            "--examples",
            examples.to_str().unwrap(),
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    for path in ["kernel", "afxdp", "afpacket"] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("live {path} "))),
            "no {path} row:\n{out}\n{err}"
        );
    }
    for ratio in ["afxdp / kernel", "afpacket / kernel"] {
        assert!(out.contains(ratio), "no {ratio}:\n{out}");
    }
    // Its namespaces, as it named them, are gone.
    let names: Vec<&str> = err
        .lines()
        .find_map(|l| l.strip_prefix("fusebox bench: live: namespaces "))
        .and_then(|l| l.split(" (").next())
        .unwrap_or_else(|| panic!("no namespace names:\n{err}"))
        .split_whitespace()
        .collect();
    assert_eq!(names.len(), 3, "{err}");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for n in &names {
        assert!(
            !list.split_whitespace().any(|w| w == *n),
            "{n} left behind:\n{list}"
        );
    }
    // The records: one per path, FuseBox's summaries balanced, frames delivered.
    let records = std::fs::read_to_string(dir.join("out/bench.json")).unwrap();
    let records: Vec<serde_json::Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for path in ["kernel", "afxdp", "afpacket"] {
        let r = records
            .iter()
            .find(|r| r["scenario"] == "live" && r["path"] == path)
            .unwrap_or_else(|| panic!("no {path} record"));
        let d = r["max_load"]["delivered_mpps"]["median"].as_f64().unwrap();
        assert!(d > 0.0, "{r}");
        let l = &r["fixed_rate"]["latency_ns"];
        assert!(
            l["p50"].as_f64().unwrap() <= l["p99"].as_f64().unwrap(),
            "{r}"
        );
        if path != "kernel" {
            for t in r["fusebox"]["totals"].as_array().unwrap() {
                assert_eq!(t["balanced"], true, "{r}");
                assert!(t["output"].as_u64().unwrap() > 0, "{r}");
            }
        }
    }
}

/// A single Click file runs live as it does offline: `--iface IFACE=DEV` binds its own
/// interfaces (NetBricks' TTL NF between the veths).
#[test]
fn a_single_click_file_runs_live() {
    let test = "live_single_click";
    if !can_run(test) {
        return;
    }
    let dir = scratch(test);
    let click = root().join("examples/ttl/ttl.click");
    let click = click.to_str().unwrap();
    common::fusebox_ok(
        &dir,
        &[
            "gen",
            "-o",
            "trace.pcap",
            "--packets",
            "300",
            "--flows",
            "30",
            "--ttl",
            "1-5",
        ],
    );
    std::fs::create_dir_all(dir.join("offline")).unwrap();
    common::fusebox_ok(
        &dir,
        &[
            "run",
            click,
            "--input",
            "eth0=trace.pcap",
            "--out-dir",
            "offline",
        ],
    );
    let want = pcap_packets(&dir.join("offline/ttl.eth1.pcap"));
    let trace = pcap_packets(&dir.join("trace.pcap"));
    assert!(!want.is_empty() && want.len() < trace.len(), "some expire");
    let net = Net::new();
    let mut a = net.in_ns(&net.a, || nic::open(&net.sa, nic::Kind::AfPacket).unwrap());
    let mut b = net.in_ns(&net.b, || nic::open(&net.rb, nic::Kind::AfPacket).unwrap());
    let e0 = format!("eth0={}", net.fa);
    let e1 = format!("eth1={}", net.fb);
    let live = Live::start(
        &net.f,
        &dir,
        &["run", click, "--iface", &e0, "--iface", &e1, "--json"],
    );
    inject(a.tx.as_mut(), &trace);
    let got = capture(
        b.rx.as_mut(),
        Duration::from_millis(500),
        Duration::from_secs(30),
    );
    let (status, out, err) = live.stop(Duration::from_secs(1));
    assert!(status.success(), "{status}\n{err}");
    assert_same_flows(&got, &want, "the TTL NF live");
    let s = summary_json(&out);
    assert_eq!(s["totals"]["input"].as_u64().unwrap(), trace.len() as u64);
    let drops = s["totals"]["drops"].as_object().unwrap();
    assert_eq!(
        drops.values().map(|v| v.as_u64().unwrap()).sum::<u64>(),
        (trace.len() - want.len()) as u64,
        "every packet not forwarded is a drop with a reason: {drops:?}"
    );
}
