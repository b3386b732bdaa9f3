//! Chains across hosts, live and end to end: hosts and service functions in network
//! namespaces (`sfc::lab`), etcd with mutual TLS started by the test, `fusebox controller`
//! and one `fusebox agent` per host as real processes, the eBPF stages on the SFs'
//! interfaces, UDP traffic from a source to a sink.
//!
//! The topology is the thesis' Fig. 5.10: chain 100 = sf2 → sf3 and chain 200 = sf1 → sf3,
//! sf1 and sf2 on server1, sf3 on server2. The SFs are Linux routers (`to_host`). The
//! source's route to the sink's service prefix points at a MAC no one has, so a probe only
//! arrives if the chain carried it; the SFs' Dec counters tell which path it took.
//!
//! Needs root, etcd and the BPF objects: skips with a message otherwise, fails under CI=true.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sfc::lab::{self, Endpoint, Lab, Sf};
use sfc::store::TlsFiles;
use sfc::testing::Etcd;
use stages::maps::{Counter, CounterStage};

const SRC: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const DST: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
/// The sink's service address: reached only through a chain.
const SERVICE: Ipv4Addr = Ipv4Addr::new(10, 9, 1, 2);
/// Where the source's route points: a MAC no one has.
const NOWHERE: [u8; 6] = [2, 0, 0, 0, 0, 0xfe];
/// (SPI, source port, destination port) of each chain's probe flow.
const FLOWS: [(u32, u16, u16); 4] = [
    (100, 5100, 7100),
    (200, 5200, 7200),
    (300, 5400, 7400),
    (400, 5500, 7500),
];

/// The classifier rule of chain `spi`'s probe flow (JSON), entering on the source's port.
fn rule(spi: u32) -> String {
    let (_, sport, dport) = FLOWS.iter().find(|f| f.0 == spi).unwrap();
    format!(
        r#"{{"src": "{SRC}", "dst": "{SERVICE}", "proto": "udp", "sport": {sport}, "dport": {dport}, "iface": "src"}}"#
    )
}

/// True when the test can run here; otherwise says why (panics under CI=true).
fn can_run(test: &str) -> bool {
    lab::can_run(test) && stages::require_bpf(test) && {
        if sfc::testing::etcd_available() {
            true
        } else {
            assert!(
                !sfc::testing::in_ci(),
                "{test}: no etcd binary, and CI=true"
            );
            eprintln!("skipping {test}: no etcd binary");
            false
        }
    }
}

/// A child process, killed when dropped.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    /// Still running?
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- {} log ---\n{}", self.name, self.log());
        }
    }
}

fn spawn(name: &str, dir: &Path, args: &[&str]) -> Proc {
    spawn_cmd(name, dir, env!("CARGO_BIN_EXE_fusebox"), args)
}

/// Starts `program ARGS`, its output in `DIR/NAME.log`.
fn spawn_cmd(name: &str, dir: &Path, program: &str, args: &[&str]) -> Proc {
    let log = dir.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    Proc {
        name: name.to_string(),
        child,
        log,
    }
}

fn tls_args(t: &TlsFiles) -> Vec<String> {
    vec![
        "--ca".into(),
        t.ca.display().to_string(),
        "--cert".into(),
        t.cert.display().to_string(),
        "--key".into(),
        t.key.display().to_string(),
    ]
}

/// The world of Fig. 5.10.
struct World {
    // Field order is drop order: processes first, then etcd, then the namespaces.
    /// Other processes the test started (a FuseBox SF).
    extra: Vec<Proc>,
    agents: Vec<Option<Proc>>,
    controller: Option<Proc>,
    etcd: Etcd,
    lab: Lab,
    sfs: Vec<Sf>,
    src: Endpoint,
    dir: PathBuf,
    chains: PathBuf,
    /// The hosts' names as agents and the chain file know them (their namespaces' names).
    hosts: [String; 2],
}

impl Drop for World {
    fn drop(&mut self) {
        for a in self.agents.iter_mut() {
            a.take();
        }
        self.controller.take();
        // The agents keep their stages' pins for a restart; the test removes them.
        for h in &self.hosts {
            let prefix = sfc::kernel::pin_name(h, "");
            if let Ok(dir) = std::fs::read_dir("/sys/fs/bpf/fusebox") {
                for e in dir.flatten() {
                    if e.file_name().to_string_lossy().starts_with(&prefix) {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
        }
    }
}

/// The lab's names of the two hosts (their namespaces are named after them).
const HOSTS: [&str; 2] = ["server1", "server2"];

/// The chain file of Fig. 5.10 with classifiers, chain 100 through `c100`, 200 through
/// `c200`; `hosts`: the host names (unique per test: the agents' pins are named by them).
fn chain_file(hosts: &[String; 2], c100: &[&str], c200: &[&str]) -> String {
    let nodes = |n: &[&str]| {
        n.iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        r#"{{
  "chains": [
    {{"id": 100, "nodes": [{}], "entry": "{h1}", "classifier": [{}]}},
    {{"id": 200, "nodes": [{}], "entry": "{h1}", "classifier": [{}]}}
  ],
  "functions": [
    {{"tag": "sf1", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "sf2", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "sf3", "type": "linux-router", "host": "{h2}", "to_host": true}}
  ],
  "direct_links": false
}}
"#,
        nodes(c100),
        rule(100),
        nodes(c200),
        rule(200),
        h1 = hosts[0],
        h2 = hosts[1],
    )
}

/// A topology on the two hosts: its SFs, direct links and chain file.
struct Topo {
    /// (host index, tag, address on the fabric) of every SF (Linux routers, `to_host`).
    sfs: Vec<(usize, &'static str, Ipv4Addr)>,
    /// Direct links (from tag, to tag) between SFs of one host: `from` sends the service
    /// prefix over it (its `iface_out`), `to` receives on it (its `iface_in`).
    links: Vec<(&'static str, &'static str)>,
    /// An SF that is a FuseBox chain rather than a Linux router: it gets a second
    /// interface `eth1` (its `iface_out`) and its kernel does not forward.
    napt: Option<&'static str>,
    /// The chain file, given the hosts' names.
    file: fn(&[String; 2]) -> String,
}

impl Topo {
    /// Fig. 5.10: sf1 and sf2 on server1, sf3 on server2.
    fn fig_5_10() -> Topo {
        Topo {
            sfs: vec![
                (0, "sf1", Ipv4Addr::new(10, 9, 0, 11)),
                (0, "sf2", Ipv4Addr::new(10, 9, 0, 12)),
                (1, "sf3", Ipv4Addr::new(10, 9, 0, 13)),
            ],
            links: Vec::new(),
            napt: None,
            file: |h| chain_file(h, &["sf2", "sf3"], &["sf1", "sf3"]),
        }
    }
}

impl World {
    fn new() -> World {
        World::with(Topo::fig_5_10())
    }

    fn with(topo: Topo) -> World {
        let etcd = Etcd::start().expect("etcd");
        let dir = etcd.dir().join("world");
        std::fs::create_dir_all(&dir).unwrap();
        let mut lab = Lab::new().unwrap();
        for h in HOSTS {
            lab.host(h).unwrap();
        }
        lab.join("server1", "server2").unwrap();
        let sfs: Vec<Sf> = topo
            .sfs
            .iter()
            .map(|&(h, tag, ip)| lab.sf(HOSTS[h], tag, ip).unwrap())
            .collect();
        let src = lab.endpoint("server1", "src", SRC).unwrap();
        let dst = lab.endpoint("server2", "dst", DST).unwrap();
        let (sns, dns) = (lab.netns("src"), lab.netns("dst"));
        lab::exec_in(
            &dns,
            "ip",
            &["addr", "add", &format!("{SERVICE}/24"), "dev", "eth0"],
        )
        .unwrap();
        lab.route(
            &sns,
            "10.9.1.0/24",
            Ipv4Addr::new(10, 9, 0, 254),
            &NOWHERE,
            "eth0",
        )
        .unwrap();
        for sf in &sfs {
            lab.route(
                &lab.netns(&sf.tag),
                "10.9.1.0/24",
                DST,
                &dst.eth0.mac,
                "eth0",
            )
            .unwrap();
        }
        // Direct links: /30s out of 10.9.200.0/24, the sender's route over the link.
        let mut link_in: Vec<&str> = Vec::new();
        let mut link_out: Vec<&str> = Vec::new();
        for (k, &(a, b)) in topo.links.iter().enumerate() {
            let sf = |t: &str| sfs.iter().find(|s| s.tag == t).unwrap().clone();
            let (sa, sb) = (sf(a), sf(b));
            let base = 4 * k as u8;
            let (ia, ib) = (
                Ipv4Addr::new(10, 9, 200, base + 1),
                Ipv4Addr::new(10, 9, 200, base + 2),
            );
            let (_, eb) = lab.direct_link(&sa, &sb, ia, ib).unwrap();
            lab.route(&lab.netns(a), "10.9.1.0/24", ib, &eb.mac, "dl0")
                .unwrap();
            link_out.push(a);
            link_in.push(b);
        }
        if let Some(t) = topo.napt {
            let sf = sfs.iter().find(|s| s.tag == t).unwrap().clone();
            let (eth1, port1) = lab.sf_iface(&sf, "eth1").unwrap();
            // It reads every frame its interfaces get: only its own, no floods.
            lab.unflooded(&sf.host, &sf.port.name, &sf.eth0.mac)
                .unwrap();
            lab.unflooded(&sf.host, &port1.name, &eth1.mac).unwrap();
            lab::exec_in(&lab.netns(t), "sysctl", &["-qw", "net.ipv4.ip_forward=0"]).unwrap();
        }
        let hosts = [lab.netns(HOSTS[0]), lab.netns(HOSTS[1])];
        let chains = dir.join("chains.json");
        std::fs::write(&chains, (topo.file)(&hosts)).unwrap();
        for h in HOSTS {
            let mut conf = format!("namespace = \"{}\"\n", lab.netns(h));
            for sf in sfs.iter().filter(|s| s.host == h) {
                let iface_in = if link_in.contains(&sf.tag.as_str()) {
                    "dl0"
                } else {
                    "eth0"
                };
                let iface_out = if topo.napt == Some(sf.tag.as_str()) {
                    "eth1"
                } else if link_out.contains(&sf.tag.as_str()) {
                    "dl0"
                } else {
                    "eth0"
                };
                conf += &format!(
                    "\n[[sf]]\ntag = \"{}\"\nnamespace = \"{}\"\niface_in = {{ name = \"{iface_in}\" }}\niface_out = {{ name = \"{iface_out}\" }}\n",
                    sf.tag,
                    lab.netns(&sf.tag)
                );
            }
            if h == "server1" {
                conf += "\n[[iface]]\nname = \"src\"\n";
            }
            std::fs::write(dir.join(format!("{h}.toml")), conf).unwrap();
        }
        let mut w = World {
            extra: Vec::new(),
            agents: vec![None, None],
            controller: None,
            etcd,
            lab,
            sfs,
            src,
            dir,
            chains,
            hosts,
        };
        w.controller = Some(w.spawn_controller());
        for i in 0..HOSTS.len() {
            w.agents[i] = Some(w.spawn_agent(i, None));
        }
        w
    }

    fn spawn_controller(&self) -> Proc {
        let tls = self.etcd.client_tls("fusebox-controller").unwrap();
        let mut args: Vec<String> = vec![
            "controller".into(),
            self.chains.display().to_string(),
            "--etcd".into(),
            self.etcd.endpoint().to_string(),
        ];
        args.extend(tls_args(&tls));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        spawn("controller", &self.dir, &args)
    }

    /// Host `i`'s agent; `tls`: other certificates than the CA's own for that host.
    fn spawn_agent(&self, i: usize, tls: Option<TlsFiles>) -> Proc {
        let h = &self.hosts[i];
        let tls = tls.unwrap_or_else(|| self.etcd.client_tls(h).unwrap());
        let conf = self.dir.join(format!("{}.toml", HOSTS[i]));
        let mut args: Vec<String> = vec![
            "agent".into(),
            "--host".into(),
            h.clone(),
            "--config".into(),
            conf.display().to_string(),
            "--ledger".into(),
            self.dir
                .join(format!("{}.ledger.json", HOSTS[i]))
                .display()
                .to_string(),
            "--etcd".into(),
            self.etcd.endpoint().to_string(),
            "--ttl".into(),
            "3".into(),
        ];
        args.extend(tls_args(&tls));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        spawn(&format!("agent-{}", HOSTS[i]), &self.dir, &args)
    }

    /// A sender in the source's namespace on the probe port of chain `spi`.
    fn sender(&self, spi: u32) -> UdpSocket {
        let (_, sport, _) = FLOWS.iter().find(|f| f.0 == spi).unwrap();
        lab::udp_socket(&self.lab.netns("src"), SocketAddrV4::new(SRC, *sport))
            .unwrap_or_else(|e| panic!("the sender of chain {spi}: {e}"))
    }

    /// A receiver in the sink's namespace on the probe port of chain `spi`.
    fn receiver(&self, spi: u32) -> UdpSocket {
        let (_, _, dport) = FLOWS.iter().find(|f| f.0 == spi).unwrap();
        let s = lab::udp_socket(
            &self.lab.netns("dst"),
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, *dport),
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        s
    }

    /// The decapsulations SF `tag`'s Dec has done (its pinned counters).
    fn dec_done(&self, tag: &str) -> u64 {
        self.counter(tag, CounterStage::Dec, Counter::Done)
    }

    /// Counter `c` of stage `stage` in SF `tag`'s instance (0 when it has none).
    fn counter(&self, tag: &str, stage: CounterStage, c: Counter) -> u64 {
        let sf = self.sfs.iter().find(|s| s.tag == tag).unwrap();
        let host = self.lab.netns(&sf.host);
        // Reopens the agent's pinned maps, and leaves them as they are (an instance the
        // agent removed has done nothing since).
        let pin = sfc::kernel::pin_name(&host, tag);
        if !Path::new(stages::load::PIN_ROOT).join(&pin).exists() {
            return 0;
        }
        let Ok(mut i) = stages::Instance::create(&pin) else {
            return 0;
        };
        i.keep();
        i.counters(stage).map(|k| k.get(c)).unwrap_or(0)
    }
}

/// Sends `n` numbered probes on `tx` towards the service and returns the numbers `rx` got.
fn probes(tx: &UdpSocket, rx: &UdpSocket, spi: u32, first: u32, n: u32) -> BTreeSet<u32> {
    let (_, _, dport) = FLOWS.iter().find(|f| f.0 == spi).unwrap();
    let to = SocketAddrV4::new(SERVICE, *dport);
    let mut got = BTreeSet::new();
    let mut buf = [0u8; 64];
    for i in first..first + n {
        tx.send_to(&i.to_be_bytes(), to).unwrap();
        std::thread::sleep(Duration::from_micros(500));
        while let Ok(k) = rx.recv(&mut buf) {
            if k == 4 {
                got.insert(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
            }
            rx.set_nonblocking(true).unwrap();
        }
        rx.set_nonblocking(false).unwrap();
    }
    let end = Instant::now() + Duration::from_millis(500);
    while Instant::now() < end {
        match rx.recv(&mut buf) {
            Ok(4) => {
                got.insert(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    got
}

/// Waits until a probe of chain `spi` gets through (the control plane has converged).
fn wait_path(w: &World, spi: u32, limit: Duration) {
    let (tx, rx) = (w.sender(spi), w.receiver(spi));
    let end = Instant::now() + limit;
    let mut k = 1_000_000;
    while Instant::now() < end {
        if !probes(&tx, &rx, spi, k, 1).is_empty() {
            return;
        }
        k += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("chain {spi} never carried a probe within {limit:?}");
}

#[test]
fn fig_5_10_two_chains_over_three_sfs_on_two_hosts() {
    if !can_run("fig_5_10_two_chains_over_three_sfs_on_two_hosts") {
        return;
    }
    let w = World::new();
    wait_path(&w, 100, Duration::from_secs(30));
    wait_path(&w, 200, Duration::from_secs(30));
    let before: Vec<u64> = ["sf1", "sf2", "sf3"]
        .iter()
        .map(|t| w.dec_done(t))
        .collect();
    for spi in [100, 200] {
        let got = probes(&w.sender(spi), &w.receiver(spi), spi, 0, 200);
        assert_eq!(
            got.len(),
            200,
            "chain {spi}: {} of 200 probes arrived",
            got.len()
        );
    }
    let after: Vec<u64> = ["sf1", "sf2", "sf3"]
        .iter()
        .map(|t| w.dec_done(t))
        .collect();
    let d: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // Chain 200 through sf1, chain 100 through sf2, both through sf3.
    assert_eq!(d, vec![200, 200, 400], "decapsulations at sf1, sf2, sf3");
    // Traffic no chain classifies is left alone: the source's port passes it untouched
    // (to nowhere), and the SFs never see it.
    let stray = lab::udp_socket(&w.lab.netns("src"), SocketAddrV4::new(SRC, 5300)).unwrap();
    let rx = w.receiver(100);
    stray
        .send_to(b"stray", SocketAddrV4::new(SERVICE, 7100))
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(
        rx.recv(&mut buf).is_err(),
        "an unclassified packet went through"
    );
    assert_eq!(w.dec_done("sf3"), after[2]);
    let _ = &w.src;
}

#[test]
fn an_agent_killed_mid_traffic_restarts_and_nothing_is_lost() {
    if !can_run("an_agent_killed_mid_traffic_restarts_and_nothing_is_lost") {
        return;
    }
    let mut w = World::new();
    wait_path(&w, 100, Duration::from_secs(30));
    let (tx, rx) = (w.sender(100), w.receiver(100));
    // The agent of server1 dies (no clean-up): the pinned maps and attached stages stay,
    // traffic goes on.
    w.agents[0].take().unwrap().kill();
    let got = probes(&tx, &rx, 100, 0, 200);
    assert_eq!(got.len(), 200, "with the agent dead: {} of 200", got.len());
    // Back: it reopens its instances, reconciles, and nothing is lost after it is back.
    let mut agent = w.spawn_agent(0, None);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        agent.alive(),
        "the restarted agent exited:\n{}",
        agent.log()
    );
    let got = probes(&tx, &rx, 100, 1000, 300);
    assert_eq!(got.len(), 300, "after the restart: {} of 300", got.len());
    w.agents[0] = Some(agent);
}

#[test]
fn a_changed_chain_file_moves_traffic_to_the_new_path() {
    if !can_run("a_changed_chain_file_moves_traffic_to_the_new_path") {
        return;
    }
    let w = World::new();
    wait_path(&w, 100, Duration::from_secs(30));
    let (tx, rx) = (w.sender(100), w.receiver(100));
    let sf2 = w.dec_done("sf2");
    assert_eq!(probes(&tx, &rx, 100, 0, 50).len(), 50);
    assert_eq!(w.dec_done("sf2") - sf2, 50, "chain 100 runs through sf2");
    // Chain 100 now goes through sf1 instead of sf2.
    std::fs::write(
        &w.chains,
        chain_file(&w.hosts, &["sf1", "sf3"], &["sf1", "sf3"]),
    )
    .unwrap();
    let sf1 = w.dec_done("sf1");
    let end = Instant::now() + Duration::from_secs(30);
    let mut k = 100;
    loop {
        assert!(Instant::now() < end, "chain 100 never moved to sf1");
        probes(&tx, &rx, 100, k, 1);
        k += 1;
        if w.dec_done("sf1") > sf1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let (sf1, sf2b) = (w.dec_done("sf1"), w.dec_done("sf2"));
    assert_eq!(probes(&tx, &rx, 100, 10_000, 100).len(), 100);
    assert_eq!(
        w.dec_done("sf1") - sf1,
        100,
        "chain 100 runs through sf1 now"
    );
    assert_eq!(w.dec_done("sf2"), sf2b, "and no longer through sf2");
}

#[test]
fn an_agent_with_a_forged_certificate_is_refused() {
    if !can_run("an_agent_with_a_forged_certificate_is_refused") {
        return;
    }
    let w = World::new();
    wait_path(&w, 200, Duration::from_secs(30));
    // A certificate for "server2" from a CA etcd does not trust.
    let rogue = sfc::testing::TestCa::new(&w.dir.join("rogue"), "rogue-ca").unwrap();
    let mut forged = rogue.issue("server2", false).unwrap();
    forged.ca = w.etcd.ca().expect("etcd made its own CA").ca_file.clone();
    let mut agent = w.spawn_agent(1, Some(forged));
    std::thread::sleep(Duration::from_secs(5));
    let log = agent.log();
    assert!(
        !log.contains("registered"),
        "an agent with a forged certificate registered:\n{log}"
    );
    // With TLS 1.3 etcd checks the client's certificate after the client has finished its
    // side of the handshake: the agent sees either the bad certificate alert or, when the
    // connection is torn down first (seen on a loaded machine), only the closed connection.
    let low = log.to_lowercase();
    assert!(
        low.contains("certificate") || low.contains("tls") || low.contains("connection closed"),
        "the refusal says why:\n{log}"
    );
    // And the chains still run on the real agents.
    let got = probes(&w.sender(200), &w.receiver(200), 200, 0, 50);
    assert_eq!(got.len(), 50);
    let _ = agent.alive();
}

/// Packets interface `dev` of namespace `ns` received (its kernel statistics).
fn rx_packets(ns: &str, dev: &str) -> u64 {
    lab::exec_in(
        ns,
        "cat",
        &[&format!("/sys/class/net/{dev}/statistics/rx_packets")],
    )
    .unwrap()
    .trim()
    .parse()
    .unwrap()
}

/// Sends `n` payloads of `len` bytes (each distinct) of chain `spi` and checks that each
/// arrives whole.
fn whole_payloads(w: &World, spi: u32, n: u32, len: usize) {
    let (tx, rx) = (w.sender(spi), w.receiver(spi));
    let (_, _, dport) = FLOWS.iter().find(|f| f.0 == spi).unwrap();
    let mut buf = vec![0u8; 2048];
    for i in 0..n {
        let p: Vec<u8> = (0..len).map(|k| (k as u32 * 7 + i) as u8).collect();
        tx.send_to(&p, SocketAddrV4::new(SERVICE, *dport)).unwrap();
        let k = rx
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("payload {i} of {len} bytes did not arrive: {e}"));
        assert_eq!(&buf[..k], &p[..], "payload {i} arrived changed");
    }
}

/// Chain 300 = sf1 → sf2 → sf3 with sf1 and sf2 on server1 joined by a direct link.
fn direct_link_file(h: &[String; 2]) -> String {
    format!(
        r#"{{
  "chains": [
    {{"id": 300, "nodes": ["sf1", "sf2", "sf3"], "entry": "{h1}", "classifier": [{}]}}
  ],
  "functions": [
    {{"tag": "sf1", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "sf2", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "sf3", "type": "linux-router", "host": "{h2}", "to_host": true}}
  ],
  "direct_links": true
}}
"#,
        rule(300),
        h1 = h[0],
        h2 = h[1],
    )
}

#[test]
fn a_direct_link_carries_traffic_between_two_sfs_of_one_host() {
    if !can_run("a_direct_link_carries_traffic_between_two_sfs_of_one_host") {
        return;
    }
    let mut topo = Topo::fig_5_10();
    topo.links = vec![("sf1", "sf2")];
    topo.file = direct_link_file;
    let w = World::with(topo);
    wait_path(&w, 300, Duration::from_secs(30));
    let stat = |tag: &str, st: CounterStage, c: Counter| w.counter(tag, st, c);
    let dl0 = |tag: &str| rx_packets(&w.lab.netns(tag), "dl0");
    let before = (
        stat("sf1", CounterStage::Dec, Counter::Done),
        stat("sf2", CounterStage::Enc, Counter::Done),
        stat("sf2", CounterStage::Fwd, Counter::Done),
        stat("sf3", CounterStage::Dec, Counter::Done),
        dl0("sf2"),
    );
    let got = probes(&w.sender(300), &w.receiver(300), 300, 0, 200);
    assert_eq!(got.len(), 200, "{} of 200 probes arrived", got.len());
    let after = (
        stat("sf1", CounterStage::Dec, Counter::Done),
        stat("sf2", CounterStage::Enc, Counter::Done),
        stat("sf2", CounterStage::Fwd, Counter::Done),
        stat("sf3", CounterStage::Dec, Counter::Done),
        dl0("sf2"),
    );
    // sf1 decapsulates; sf2's Enc re-encapsulates from its static proxy entries (§5.5:
    // Enc without Dec, a remote SF follows) and its Fwd sends to sf3.
    assert_eq!(after.0 - before.0, 200, "sf1's Dec");
    assert_eq!(after.1 - before.1, 200, "sf2's Enc (static proxy entries)");
    assert_eq!(after.2 - before.2, 200, "sf2's Fwd");
    assert_eq!(after.3 - before.3, 200, "sf3's Dec");
    assert!(
        after.4 - before.4 >= 200,
        "sf2's end of the direct link received {} packets",
        after.4 - before.4
    );
    // Between sf1 and sf2 no stage ran: sf1 has no Enc or Fwd, sf2 no Dec.
    for (tag, st) in [
        ("sf1", CounterStage::Enc),
        ("sf1", CounterStage::Fwd),
        ("sf2", CounterStage::Dec),
    ] {
        assert_eq!(
            stat(tag, st, Counter::Packets),
            0,
            "{tag}'s {} saw packets",
            st.name()
        );
    }
    // Whole payloads of several sizes arrive unchanged.
    for len in [1, 200, 1200] {
        whole_payloads(&w, 300, 20, len);
    }
}

/// Chain 100 = sf2 → (sf3, or sf1 when sf3's host is gone), direct links off.
fn alternative_file(h: &[String; 2]) -> String {
    format!(
        r#"{{
  "chains": [
    {{"id": 100, "nodes": ["sf2", ["sf3", "sf1"]], "entry": "{h1}", "classifier": [{}]}}
  ],
  "functions": [
    {{"tag": "sf1", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "sf2", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "sf3", "type": "linux-router", "host": "{h2}", "to_host": true}}
  ],
  "direct_links": false
}}
"#,
        rule(100),
        h1 = h[0],
        h2 = h[1],
    )
}

#[test]
fn a_dead_hosts_lease_expires_and_traffic_goes_around_it() {
    if !can_run("a_dead_hosts_lease_expires_and_traffic_goes_around_it") {
        return;
    }
    let mut topo = Topo::fig_5_10();
    topo.file = alternative_file;
    let mut w = World::with(topo);
    wait_path(&w, 100, Duration::from_secs(30));
    let (tx, rx) = (w.sender(100), w.receiver(100));
    let (sf1, sf3) = (w.dec_done("sf1"), w.dec_done("sf3"));
    assert_eq!(probes(&tx, &rx, 100, 0, 50).len(), 50);
    assert_eq!(w.dec_done("sf3") - sf3, 50, "the path takes sf3 first");
    assert_eq!(w.dec_done("sf1"), sf1, "and not sf1");
    // server2's agent dies for good (SIGKILL: no clean-up, its lease is not revoked) and
    // sf3 becomes unreachable (its port on server2's bridge goes down).
    w.agents[1].take().unwrap().kill();
    lab::exec_in(
        &w.lab.netns("server2"),
        "ip",
        &["link", "set", "sf3", "down"],
    )
    .unwrap();
    let dead = Instant::now();
    assert!(
        probes(&tx, &rx, 100, 100, 10).is_empty(),
        "probes still arrive through an unreachable sf3"
    );
    // The lease (3 s) expires, the controller replans with sf1, server1's agent installs it.
    let end = dead + Duration::from_secs(30);
    let mut k = 1000;
    loop {
        assert!(
            Instant::now() < end,
            "traffic never went around the dead host"
        );
        if !probes(&tx, &rx, 100, k, 1).is_empty() {
            break;
        }
        k += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    let waited = dead.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "the path moved after {waited:?}, before the lease could expire"
    );
    let (sf1, sf3) = (w.dec_done("sf1"), w.dec_done("sf3"));
    let got = probes(&tx, &rx, 100, 10_000, 200);
    assert_eq!(got.len(), 200, "around the dead host: {} of 200", got.len());
    assert_eq!(w.dec_done("sf1") - sf1, 200, "through sf1 now");
    assert_eq!(w.dec_done("sf3"), sf3, "and no longer through sf3");
}

/// Chain 400 = sf1 → napt → sf3: napt is a FuseBox NAPT (examples/napts/napt.click) run
/// live in its namespace, receiving on `eth0` and sending on `eth1`: NSH-aware (`--nsh`,
/// no Dec or Enc) or NSH-unaware behind a NAT-aware proxy (`"nat": true`: Dec before it,
/// Enc after it, told each translation by the NAPT with `--tell-proxy`).
fn napt_file_for(h: &[String; 2], aware: bool) -> String {
    let mode = if aware {
        r#""nsh_aware": true"#
    } else {
        r#""nat": true"#
    };
    format!(
        r#"{{
  "chains": [
    {{"id": 400, "nodes": ["sf1", "napt", "sf3"], "entry": "{h1}", "classifier": [{}]}}
  ],
  "functions": [
    {{"tag": "sf1", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "napt", "type": "fusebox-napt", "host": "{h1}", {mode}}},
    {{"tag": "sf3", "type": "linux-router", "host": "{h2}", "to_host": true}}
  ],
  "direct_links": false
}}
"#,
        rule(400),
        h1 = h[0],
        h2 = h[1],
    )
}

fn napt_file(h: &[String; 2]) -> String {
    napt_file_for(h, true)
}

fn napt_nat_file(h: &[String; 2]) -> String {
    napt_file_for(h, false)
}

/// The NAPT's external address.
const EXT: Ipv4Addr = Ipv4Addr::new(10, 9, 2, 1);

#[test]
fn a_fusebox_napt_in_the_middle_of_a_path_translates_and_its_replies_come_back() {
    napt_in_the_middle(
        "a_fusebox_napt_in_the_middle_of_a_path_translates_and_its_replies_come_back",
        true,
    );
}

#[test]
fn a_fusebox_napt_behind_a_nat_aware_proxy_tells_it_its_rewrites() {
    napt_in_the_middle(
        "a_fusebox_napt_behind_a_nat_aware_proxy_tells_it_its_rewrites",
        false,
    );
}

/// 100 probes through the NAPT in the middle of chain 400 arrive from its external
/// address, each reply comes back translated; `aware`: NSH-aware, else NSH-unaware behind
/// Dec and a NAT-aware Enc it tells its rewrites.
fn napt_in_the_middle(test: &str, aware: bool) {
    if !can_run(test) {
        return;
    }
    if Command::new("ethtool").arg("--version").output().is_err() {
        assert!(!sfc::testing::in_ci(), "no ethtool, and CI=true");
        eprintln!("skipping: no ethtool");
        return;
    }
    let topo = Topo {
        sfs: vec![
            (0, "sf1", Ipv4Addr::new(10, 9, 0, 11)),
            (0, "napt", Ipv4Addr::new(10, 9, 0, 12)),
            (1, "sf3", Ipv4Addr::new(10, 9, 0, 13)),
        ],
        links: Vec::new(),
        napt: Some("napt"),
        file: if aware { napt_file } else { napt_nat_file },
    };
    let mut w = World::with(topo);
    // Both ends' checksums complete, as on a wire: the NAPT rewrites them.
    w.lab.full_checksums("src").unwrap();
    w.lab.full_checksums("dst").unwrap();
    let sf = |t: &str| w.sfs.iter().find(|s| s.tag == t).unwrap().clone();
    let (napt, sf3) = (sf("napt"), sf("sf3"));
    let nns = w.lab.netns("napt");
    let eth1 = lab::iface(&nns, "eth1").unwrap();
    let src_mac = lab::iface(&w.lab.netns("src"), "eth0").unwrap().mac;
    // The sink answers the NAPT's external address through the NAPT's eth1 (plain IP).
    w.lab
        .route(
            &w.lab.netns("dst"),
            "10.9.2.0/24",
            Ipv4Addr::new(10, 9, 0, 253),
            &eth1.mac,
            "eth0",
        )
        .unwrap();
    let click = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/napts/napt.click");
    let conf = w.dir.join("napt.toml");
    let m = |mac: &[u8; 6]| lab::mac_string(mac);
    std::fs::write(
        &conf,
        format!(
            "[nf.n1]\nclick = \"{}\"\ndefine = {{ EXT = \"{EXT}\", MAC0 = \"{}\", PEER0 = \"{}\", MAC1 = \"{}\", PEER1 = \"{}\" }}\n[[entry]]\nto = \"n1.eth0\"\n[[entry]]\nto = \"n1.eth1\"\n",
            click.display(),
            m(&napt.eth0.mac),
            m(&src_mac),
            m(&eth1.mac),
            m(&sf3.eth0.mac),
        ),
    )
    .unwrap();
    // Frames the NAPT sends on eth1 must cross its TC egress, where Fwd sits: AF_PACKET
    // through the queueing layer there.
    let bin = env!("CARGO_BIN_EXE_fusebox");
    let conf_s = conf.display().to_string();
    // NSH-unaware: the agent's stages instance of the NAPT, whose proxy the NAPT tells.
    let pin = sfc::kernel::pin_name(&w.lab.netns(&napt.host), "napt");
    let mode: &[&str] = if aware {
        &["--nsh"]
    } else {
        &["--tell-proxy", &pin]
    };
    if !aware {
        // The agent makes the instance; the NAPT opens its proxy table when it starts.
        let table = Path::new(stages::load::PIN_ROOT)
            .join(&pin)
            .join("proxy_table");
        let end = Instant::now() + Duration::from_secs(30);
        while !table.exists() {
            assert!(Instant::now() < end, "no {} after 30 s", table.display());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // In the SF's network namespace, with the host's /sys (and the agent's pins under its
    // bpffs) still in view: `nsenter --net`, where `ip netns exec` would mount a /sys of its
    // own.
    let netns = format!("--net=/run/netns/{nns}");
    let mut args = vec![netns.as_str(), bin, "run", &conf_s];
    args.extend_from_slice(mode);
    args.extend_from_slice(&[
        "--cores",
        "1",
        "--iface",
        "n1.eth0=eth0,afpacket",
        "--iface",
        "n1.eth1=eth1,afpacket-tc",
        "--progress",
        "off",
    ]);
    let run = spawn_cmd("napt", &w.dir, "nsenter", &args);
    w.extra.push(run);
    wait_path(&w, 400, Duration::from_secs(30));
    let (_, _, dport) = *FLOWS.iter().find(|f| f.0 == 400).unwrap();
    let tx = w.sender(400);
    tx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // The sink answers from the service address, the one the source sent to.
    let rx = lab::udp_socket(&w.lab.netns("dst"), SocketAddrV4::new(SERVICE, dport)).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let (sf1_dec, sf3_dec) = (w.dec_done("sf1"), w.dec_done("sf3"));
    let napt_dec = w.dec_done("napt");
    let fwd = w.counter("napt", CounterStage::Fwd, Counter::Done);
    let mut buf = [0u8; 64];
    let mut ext_ports = BTreeSet::new();
    let n = 100u32;
    for i in 0..n {
        tx.send_to(&i.to_be_bytes(), SocketAddrV4::new(SERVICE, dport))
            .unwrap();
        let (k, from) = loop {
            let (k, from) = rx
                .recv_from(&mut buf)
                .unwrap_or_else(|e| panic!("probe {i} did not reach the sink: {e}"));
            // Convergence probes sent before may still trickle in.
            if k == 4 && buf[..4] == i.to_be_bytes() {
                break (k, from);
            }
        };
        let std::net::SocketAddr::V4(from) = from else {
            panic!("{from}")
        };
        assert_eq!(*from.ip(), EXT, "probe {i} arrived untranslated");
        ext_ports.insert(from.port());
        // The reply goes back to the NAPT's external address and reaches the source
        // translated back.
        let reply = [&buf[..k], b"-re"].concat();
        rx.send_to(&reply, from).unwrap();
        let mut back = [0u8; 64];
        let (k, from) = tx
            .recv_from(&mut back)
            .unwrap_or_else(|e| panic!("the reply to probe {i} did not come back: {e}"));
        assert_eq!(&back[..k], &reply[..]);
        assert_eq!(
            from,
            std::net::SocketAddr::V4(SocketAddrV4::new(SERVICE, dport)),
            "the reply is translated back"
        );
    }
    assert_eq!(ext_ports.len(), 1, "one flow, one external port");
    assert_eq!(w.dec_done("sf1") - sf1_dec, n as u64, "through sf1");
    assert_eq!(
        w.counter("napt", CounterStage::Fwd, Counter::Done) - fwd,
        n as u64,
        "the NAPT's NSH went on by its Fwd"
    );
    assert_eq!(w.dec_done("sf3") - sf3_dec, n as u64, "through sf3");
    if aware {
        assert_eq!(
            w.counter("napt", CounterStage::Dec, Counter::Packets),
            0,
            "an NSH-aware SF has no Dec"
        );
    } else {
        assert_eq!(
            w.dec_done("napt") - napt_dec,
            n as u64,
            "Dec before the NAPT"
        );
        assert_eq!(
            w.counter("napt", CounterStage::Enc, Counter::Learned),
            0,
            "told, Enc never had to learn"
        );
        // The proxy holds the translated flow, told, with the NSH Dec kept for the flow
        // as it arrived.
        let mut inst = stages::Instance::create(&pin).unwrap();
        inst.keep();
        let proxy = inst.list_proxy().unwrap();
        let told: Vec<_> = proxy
            .iter()
            .filter(|(k, m)| k.saddr == EXT && m.flags & stages::maps::PROXY_TOLD != 0)
            .collect();
        assert_eq!(told.len(), 1, "{proxy:?}");
        let (k, m) = told[0];
        assert!(ext_ports.contains(&k.sport), "{k:?}");
        assert!(
            proxy
                .iter()
                .any(|(k2, m2)| k2.daddr == k.daddr && k2.saddr != EXT && m2.sph == m.sph),
            "Dec's entry for the flow as it arrived: {proxy:?}"
        );
    }
    let mut run = w.extra.pop().unwrap();
    assert!(run.alive(), "the NAPT exited:\n{}", run.log());
}

/// Chain 200 = sf1 → sf3 with both hosts on VXLAN-GPE (underlay addresses in the file).
fn vxlan_file(h: &[String; 2]) -> String {
    format!(
        r#"{{
  "chains": [
    {{"id": 200, "nodes": ["sf1", "sf3"], "entry": "{h1}", "classifier": [{}]}}
  ],
  "functions": [
    {{"tag": "sf1", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "sf2", "type": "linux-router", "host": "{h1}", "to_host": true}},
    {{"tag": "sf3", "type": "linux-router", "host": "{h2}", "to_host": true}}
  ],
  "hosts": [
    {{"name": "{h1}", "transport": "vxlan-gpe", "underlay": "10.9.250.1"}},
    {{"name": "{h2}", "transport": "vxlan-gpe", "underlay": "10.9.250.2"}}
  ],
  "direct_links": false
}}
"#,
        rule(200),
        h1 = h[0],
        h2 = h[1],
    )
}

#[test]
fn a_vxlan_gpe_hop_between_hosts_carries_the_chain() {
    if !can_run("a_vxlan_gpe_hop_between_hosts_carries_the_chain") {
        return;
    }
    if Command::new("tcpdump").arg("--version").output().is_err() {
        assert!(!sfc::testing::in_ci(), "no tcpdump, and CI=true");
        eprintln!("skipping: no tcpdump");
        return;
    }
    let mut topo = Topo::fig_5_10();
    topo.file = vxlan_file;
    let w = World::with(topo);
    wait_path(&w, 200, Duration::from_secs(30));
    // Count what crosses server2's end of the hosts' link as VXLAN-GPE (UDP 4790).
    let cap = spawn_cmd(
        "tcpdump",
        &w.dir,
        "ip",
        &[
            "netns",
            "exec",
            &w.lab.netns("server2"),
            "tcpdump",
            "-i",
            "to-server1",
            "-nn",
            "-c",
            "100",
            "udp dst port 4790 and dst host 10.9.250.2 and src host 10.9.250.1",
        ],
    );
    std::thread::sleep(Duration::from_secs(1));
    let sf3 = w.dec_done("sf3");
    let got = probes(&w.sender(200), &w.receiver(200), 200, 0, 100);
    assert_eq!(got.len(), 100, "{} of 100 probes arrived", got.len());
    assert_eq!(w.dec_done("sf3") - sf3, 100, "sf3 decapsulated them");
    let mut cap = cap;
    let end = Instant::now() + Duration::from_secs(5);
    while cap.alive() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = cap.log();
    assert!(
        !cap.alive() && log.contains("100 packets captured"),
        "100 VXLAN-GPE packets from server1's underlay to server2's crossed:\n{log}"
    );
}
