//! Random chains and traces for the differential harness: every mode must give the naive
//! executor's bytes on chains nobody wrote by hand.
//!
//! [`random_chain`] writes a chain of 1–5 NFs (one Click file each, plus `chain.toml`) linked
//! in a line, `eth1` of one to `eth0` of the next; traffic enters at the first NF's `eth0`
//! and the last NF's `eth1` is the exit to `--reflect`, so replies travel the chain
//! backwards. NFs are drawn from:
//!
//! * **routers**: `Strip → CheckIPHeader → RadixIPLookup` (or its `StaticIPLookup` /
//!   `LinearIPLookup` / `DirectIPLookup` spellings) with routes over the addresses the
//!   traffic has at that point (sources back out of `eth0`, destinations on through `eth1`,
//!   plus random more-specific routes to either side, gateways and sometimes a default route)
//!   `→ DecIPTTL → EtherEncap`; sometimes `IPGWOptions`, `IPFragmenter` and `ICMPError`s for
//!   expired TTLs, bad options and needed fragmentation, routed back through the table;
//! * **firewalls**: an `IPFilter` per direction (after a `Paint` in half of them) with random
//!   allow/deny/drop rules over the traffic's prefixes, hosts, ports, protocols, TCP flags,
//!   ICMP types and TTLs (`&&`, `||`, `!`, parentheses), ending in `allow all`, `deny all`
//!   or nothing;
//! * **NAPTs**: `IPRewriter` (or `TCPRewriter` / `UDPRewriter`) with `pattern EXT LO-HI - -
//!   0 1` (a port range with or without `#`/`?`, or a source prefix), replies through a `drop`
//!   or `pass 1` input, sometimes short timeouts or a small mapping capacity, sometimes an
//!   `IPClassifier` that lets ICMP by untranslated;
//! * **load balancers**: `IPRewriter(rr, drop)` over a `RoundRobinIPMapper` of 2–3 backends
//!   (sometimes also changing the destination port);
//! * **TTL and encapsulation changes**: extra `DecIPTTL`s, `Strip`/`Unstrip` pairs,
//!   `EtherRewrite`, `EtherEncap`, or a pure layer-2 path that lets anything through;
//!   `SetPacketType` → `DropBroadcasts` (broadcasts dropped or sent out of its output 1 to
//!   `Discard`); `SetUDPChecksum` → `SetTCPChecksum` (Click's rules, output 1 sometimes
//!   connected); sometimes `FromDevice(…, FORCE_IP true)` with its output 1 to `Discard`;
//! * **branches**: an `IPClassifier` splitting TCP / UDP / the rest to `eth1`, an extra
//!   exit `eth2` or `Discard`, directly (sometimes one class copied by a `Tee` to `eth2`
//!   too) or through `Paint` / `PaintSwitch`;
//!
//! and `Counter`s dropped in anywhere. What an NF does to addresses is tracked along the line
//! (a NAPT's public address becomes the source, a load balancer's backends the
//! destinations), so that later routes and rules hit the traffic. The returned [`TraceSpec`]
//! describes traffic that exercises the rules; [`random_trace`] writes it with the
//! generator's anomalies (expiring TTLs, bad checksums, IP options, ARP, truncated lengths,
//! short transport parts).
//!
//! With [`Options::operator_nfs`] ([`try_random_chain_with`]), NFs written with operators
//! (the element classes of `examples/bricks`, registered at run time: the caller must have
//! registered them, e.g. with `bricks::register()`) are inserted between those NFs, drawn
//! from a second random stream so the Click NFs stay as the seed makes them: a Click
//! configuration naming two of `TTLNF`, `MacSwapNF`, `MonitorNF(CAPACITY N)` and
//! `FirewallNF(RULES)` (one per direction), or a chain-file `rust = "NatNF"` entry (two
//! inputs: inside `eth0`, outside `eth1`, its external address inside the traffic's source
//! prefix).
//!
//! With [`Options::ipsec`], IPsec gateways (`IPsecGCMEncap` / `IPsecGCMDecap`, ESP tunnel
//! mode with AES-GCM) are inserted, from a stream of their own as well: a tunnel (one NF
//! encrypting towards the far end and decrypting the replies, a later NF doing the
//! opposite, one security association per direction, so the NFs between them see ESP
//! from and to addresses of the traffic's prefixes), or one NF encrypting and decrypting
//! again, sometimes through a `Tee` into the same decapsulation (every copy a replay).
//! Keys of 16 or 32 bytes, extended sequence numbers, sequence numbers that run out or
//! wrap their low half, replay windows of 0 to 1024 packets, a wrong key on the receiving
//! side and unchecked headers (`MarkIPHeader`) are drawn at random.
//!
//! With [`Options::opaque_nfs`], a run of two or three NFs built from the elements without
//! a model that declare what they do (`elements::Element::declared`, what the planner's
//! parallel groups rest on) is inserted, from a stream of its own: a `Monitor`, a
//! `SnortIDS` (a rules file of drop and alert rules on the trace's counting payloads,
//! written beside the chain), a `MazuNAT` (inside on `eth0`, its external address in the
//! sources' prefix), a two-way `Maglev` (backends in the destinations' prefix), a
//! `HashSwitch` or `RoundRobinSwitch` whose outputs all lead on; a few behind a
//! `MarkIPHeader(14)`, most reading the network header where an earlier NF left it; the
//! run starts with a monitor more often than not (an NF that only
//! reads, which later NFs may run beside).
//!
//! Everything is a function of the seed: the same seed writes the same files.

use chain::{Endpoint, RunOptions};
use ports::gen::{
    generate, Anomalies, AnomalyCounts, GenConfig, GenError, Mix, PortSpec, Rate, SizeDist,
};
use ports::pcap::{PcapError, PcapWriter, DLT_EN10MB};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use wire::ethernet::Address;

/// A chain [`random_chain`] wrote.
#[derive(Debug, Clone)]
pub struct GeneratedChain {
    /// The seed it was made from.
    pub seed: u64,
    /// The chain file (`chain.toml` in the directory given).
    pub chain: PathBuf,
    /// Every file written (the chain file and the Click configurations).
    pub files: Vec<PathBuf>,
    /// Where traffic enters (the first NF's `eth0`).
    pub entries: Vec<Endpoint>,
    /// Exits to give to `--reflect` (the last NF's `eth1`).
    pub reflect: Vec<Endpoint>,
    /// Every exit: the entry (replies leave there), the reflected one, branch exits.
    pub exits: Vec<Endpoint>,
    /// What each NF is, in chain order (`name: kind, details`).
    pub nfs: Vec<String>,
    /// Traffic that exercises the chain's rules.
    pub trace: TraceSpec,
}

impl GeneratedChain {
    /// The inputs of a run over `trace`: every entry fed from that file.
    pub fn inputs(&self, trace: &Path) -> Vec<(Endpoint, PathBuf)> {
        self.entries
            .iter()
            .map(|e| (e.clone(), trace.to_path_buf()))
            .collect()
    }

    /// Run options with the reflected exits.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            reflect: self.reflect.clone(),
            ..RunOptions::default()
        }
    }

    /// Every file written, with its contents, for a failure report.
    pub fn listing(&self) -> String {
        let mut s = String::new();
        for f in &self.files {
            let text = std::fs::read_to_string(f).unwrap_or_else(|e| format!("<{e}>"));
            let _ = writeln!(s, "==> {} <==\n{}", f.display(), text.trim_end());
        }
        s
    }
}

/// The traffic a generated chain expects (see [`random_trace`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSpec {
    /// Prefix of the sources.
    pub src: (Ipv4Addr, u8),
    /// Prefix of the destinations.
    pub dst: (Ipv4Addr, u8),
    /// Source ports.
    pub sports: PortSpec,
    /// Destination ports (the ones the rules name, and a few others).
    pub dports: PortSpec,
    /// Protocol weights.
    pub mix: Mix,
    /// Frame sizes.
    pub size: SizeDist,
    /// Number of flows.
    pub flows: u32,
    /// Time-to-live of the packets (unless `anomalies.ttl_range` is set).
    pub ttl: u8,
    /// Anomalies mixed in.
    pub anomalies: Anomalies,
    /// Nanoseconds between packets (large gaps let rewriter mappings time out).
    pub gap_ns: u64,
    /// Source MAC of the frames (the first NF's peer).
    pub src_mac: Address,
    /// Destination MAC of the frames (the first NF's `eth0`).
    pub dst_mac: Address,
}

impl TraceSpec {
    /// The generator configuration for `packets` packets drawn with `seed`.
    pub fn config(&self, seed: u64, packets: u64) -> GenConfig {
        GenConfig {
            packets,
            flows: self.flows,
            mix: self.mix,
            size: self.size,
            src_prefix: self.src,
            dst_prefix: self.dst,
            src_ports: self.sports.clone(),
            dst_ports: self.dports.clone(),
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            seed,
            gap_ns: self.gap_ns,
            ttl: self.ttl,
            anomalies: self.anomalies,
            ..GenConfig::default()
        }
    }
}

/// Why a random trace or chain could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TestgenError {
    /// The trace's generator configuration is not valid.
    #[error(transparent)]
    Gen(#[from] GenError),
    /// The trace's pcap file could not be written (the error names the file).
    #[error(transparent)]
    Pcap(#[from] PcapError),
    /// A chain file could not be written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

/// The seeds a generated-chain harness runs: `FUSEBOX_GEN_SEED=S` alone (then `true`: keep
/// its files), else `0..FUSEBOX_GEN_SEEDS` (`default` when unset or unreadable).
pub fn seeds_from_env(default: u64) -> (Vec<u64>, bool) {
    if let Some(s) = std::env::var("FUSEBOX_GEN_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return (vec![s], true);
    }
    let n = std::env::var("FUSEBOX_GEN_SEEDS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default);
    ((0..n).collect(), false)
}

/// Writes `packets` packets of the traffic `spec` describes to the pcap file `path`
/// (microsecond timestamps), drawn with `seed`. Returns the anomalies written.
pub fn random_trace(
    seed: u64,
    spec: &TraceSpec,
    packets: u64,
    path: &Path,
) -> Result<AnomalyCounts, TestgenError> {
    let cfg = spec.config(seed, packets);
    cfg.validate()?;
    let precision = if spec.gap_ns.is_multiple_of(1000) {
        packet::Precision::Micro
    } else {
        packet::Precision::Nano
    };
    let mut w = PcapWriter::create(path, precision, DLT_EN10MB)?;
    let mut gen = generate(&cfg);
    for (ts, frame) in gen.by_ref() {
        w.write(ts, &frame)?;
    }
    w.finish()?;
    Ok(gen.anomaly_counts())
}

/// The trace generator's SplitMix64, with the draws the chain generator needs.
struct Rng(ports::gen::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        self.0.range(lo, hi)
    }

    /// True with probability `percent` / 100.
    fn pct(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// An IPv4 prefix, host bits clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prefix(u32, u8);

impl Prefix {
    fn new(addr: u32, len: u8) -> Prefix {
        let len = len.min(32);
        Prefix(addr & mask(len), len)
    }

    fn host(addr: Ipv4Addr) -> Prefix {
        Prefix(u32::from(addr), 32)
    }

    fn pair(self) -> (Ipv4Addr, u8) {
        (Ipv4Addr::from(self.0), self.1)
    }

    /// A random address inside, avoiding the all-zeros and all-ones hosts when there are
    /// others.
    fn addr(self, rng: &mut Rng) -> Ipv4Addr {
        let hosts = !mask(self.1);
        let mut h = rng.next() as u32 & hosts;
        if hosts >= 3 && (h == 0 || h == hosts) {
            h = 1 + rng.below(u64::from(hosts - 1)) as u32;
        }
        Ipv4Addr::from(self.0 | h)
    }

    /// A random prefix inside, up to `extra` bits longer.
    fn sub(self, rng: &mut Rng, extra: u8) -> Prefix {
        let len = rng.range(
            u64::from(self.1),
            u64::from(self.1.saturating_add(extra).min(32)),
        );
        Prefix::new(u32::from(self.addr(rng)), len as u8)
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.0), self.1)
    }
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

/// What forward traffic looks like where an NF receives it.
#[derive(Debug, Clone)]
struct View {
    src: Vec<Prefix>,
    dst: Vec<Prefix>,
    dports: Vec<u16>,
    sports: (u16, u16),
}

/// The MAC addresses of NF `i` (1-based) of `n`.
fn macs(i: usize, n: usize) -> [(String, String); 4] {
    let mac = |a: usize, b: u8| format!("02:00:00:00:{:02x}:{b:02x}", a);
    [
        ("MAC0".into(), mac(i, 0x10)),
        ("PEER0".into(), mac(i - 1, 0x11)),
        ("MAC1".into(), mac(i, 0x11)),
        (
            "PEER1".into(),
            if i == n {
                mac(0xfe, 0x10)
            } else {
                mac(i + 1, 0x10)
            },
        ),
    ]
}

/// One NF being written.
struct NfOut {
    name: String,
    kind: String,
    click: String,
    /// Interfaces beyond eth0/eth1 that are exits.
    extra_exits: Vec<String>,
}

/// Sometimes a `Counter` in a pipeline.
fn counter(rng: &mut Rng) -> &'static str {
    if rng.pct(15) {
        " -> Counter"
    } else {
        ""
    }
}

/// The header check after `Strip(14)`.
fn check(rng: &mut Rng) -> &'static str {
    match rng.below(24) {
        0 => "CheckIPHeader(CHECKSUM false)",
        1 => "CheckIPHeader2",
        // Without GetIPAddress the route lookup sees no destination annotation (as in
        // Click): everything takes the default route or is dropped (`no-route`).
        2 => "MarkIPHeader",
        3 => "MarkIPHeader -> GetIPAddress(16)",
        _ => "CheckIPHeader",
    }
}

/// A router: routes over the view, DecIPTTL, EtherEncap; sometimes ICMP errors, options
/// processing and fragmentation.
fn router(rng: &mut Rng, i: usize, v: &View) -> NfOut {
    let mut routes: Vec<(Prefix, Option<Ipv4Addr>, usize)> = Vec::new();
    let add = |routes: &mut Vec<(Prefix, Option<Ipv4Addr>, usize)>, p: Prefix, port| {
        if !routes.iter().any(|r| r.0 == p) {
            routes.push((p, None, port));
        }
    };
    for &p in &v.src {
        add(&mut routes, p, 0);
    }
    for &p in &v.dst {
        add(&mut routes, p, 1);
    }
    for _ in 0..rng.below(5) {
        let from_src = rng.pct(40);
        let base = if from_src {
            rng.pick(&v.src)
        } else {
            rng.pick(&v.dst)
        };
        let natural = usize::from(!from_src);
        let port = if rng.pct(80) { natural } else { 1 - natural };
        add(&mut routes, base.sub(rng, 8), port);
    }
    if rng.pct(60) {
        add(&mut routes, Prefix(0, 0), 1);
    }
    // Longer prefixes and gateways are independent of the order written; shuffle it.
    for k in (1..routes.len()).rev() {
        let j = rng.below(k as u64 + 1) as usize;
        routes.swap(k, j);
    }
    for r in routes.iter_mut() {
        if rng.pct(15) {
            r.1 = Some(Ipv4Addr::new(10, 254, i as u8, rng.range(1, 254) as u8));
        }
    }
    let class = match rng.below(10) {
        0 => "StaticIPLookup",
        1 => "LinearIPLookup",
        2 => "DirectIPLookup",
        _ => "RadixIPLookup",
    };
    let rip = [
        Ipv4Addr::new(192, 0, 2, i as u8),
        Ipv4Addr::new(198, 51, 100, i as u8),
    ];
    let icmp = rng.pct(40);
    let gwopts = rng.pct(25);
    let frag = rng.pct(20);
    let mtu = rng.pick(&[576u64, 1000, 1500]);
    let mut c = String::new();
    let _ = writeln!(c, "rt :: {class}(");
    for (k, (p, gw, port)) in routes.iter().enumerate() {
        let gw = gw.map(|g| format!(" {g}")).unwrap_or_default();
        let sep = if k + 1 == routes.len() { ");" } else { "," };
        let _ = writeln!(c, "    {p}{gw} {port}{sep}");
    }
    let chk0 = check(rng);
    let chk1 = check(rng);
    let _ = writeln!(
        c,
        "FromDevice(eth0) -> Strip(14) -> {chk0}{} -> rt;",
        counter(rng)
    );
    let _ = writeln!(
        c,
        "FromDevice(eth1) -> Strip(14) -> {chk1}{} -> rt;",
        counter(rng)
    );
    for (port, ip) in rip.iter().enumerate() {
        let mut line = format!("rt[{port}]");
        if gwopts {
            let _ = write!(line, " -> gio{port} :: IPGWOptions({ip})");
        }
        let _ = write!(line, "{} -> dt{port} :: DecIPTTL", counter(rng));
        if frag {
            let _ = write!(line, " -> fr{port} :: IPFragmenter({mtu})");
        }
        let _ = write!(
            line,
            " -> EtherEncap(0x0800, $MAC{port}, $PEER{port}){} -> ToDevice(eth{port});",
            counter(rng)
        );
        let _ = writeln!(c, "{line}");
        if icmp {
            let _ = writeln!(c, "dt{port}[1] -> ICMPError({ip}, timeexceeded) -> rt;");
        }
        if gwopts {
            let tail = if rng.pct(50) {
                format!("ICMPError({ip}, parameterproblem) -> rt")
            } else {
                "Discard".to_string()
            };
            let _ = writeln!(c, "gio{port}[1] -> {tail};");
        }
        if frag && rng.pct(60) {
            let _ = writeln!(
                c,
                "fr{port}[1] -> ICMPError({ip}, unreachable, needfrag) -> rt;"
            );
        }
    }
    let mut kind = format!("router ({class}, {} routes", routes.len());
    for (on, what) in [
        (icmp, "ICMP errors"),
        (gwopts, "IPGWOptions"),
        (frag, "IPFragmenter"),
    ] {
        if on {
            kind.push_str(", ");
            kind.push_str(what);
        }
    }
    kind.push(')');
    NfOut {
        name: format!("r{i}"),
        kind,
        click: c,
        extra_exits: Vec::new(),
    }
}

/// One filter primitive over the view (`reverse`: as seen by replies).
fn atom(rng: &mut Rng, v: &View, reverse: bool) -> String {
    let (s, d) = if reverse {
        ("dst", "src")
    } else {
        ("src", "dst")
    };
    let (src, dst) = (&v.src, &v.dst);
    let port_dir = if reverse { "src" } else { "dst" };
    let other_dir = if reverse { "dst" } else { "src" };
    let op = |rng: &mut Rng| rng.pick(&["<", ">", "<=", ">=", "==", "!="]);
    match rng.below(14) {
        0 => format!("{s} net {}", rng.pick(src).sub(rng, 6)),
        1 => format!("{s} host {}", rng.pick(src).addr(rng)),
        2 => format!("{d} net {}", rng.pick(dst).sub(rng, 6)),
        3 => format!("{d} host {}", rng.pick(dst).addr(rng)),
        4 => "tcp".into(),
        5 => "udp".into(),
        6 => "icmp".into(),
        7 | 8 => {
            let p = if rng.pct(85) {
                rng.pick(&v.dports)
            } else {
                rng.range(1, 65535) as u16
            };
            match rng.below(3) {
                0 => format!("{port_dir} port {p}"),
                1 => format!("tcp {port_dir} port {p}"),
                _ => format!("udp {port_dir} port {p}"),
            }
        }
        9 => {
            let p = rng.range(u64::from(v.sports.0), u64::from(v.sports.1));
            format!("{other_dir} port {} {p}", op(rng))
        }
        10 => format!("tcp opt {}", rng.pick(&["syn", "ack", "fin", "psh", "rst"])),
        11 => format!("icmp type {}", rng.pick(&["echo", "echo-reply", "8"])),
        12 => format!("ip ttl {} {}", op(rng), rng.range(1, 12)),
        _ => format!("{s} net {} or {d} net {}", rng.pick(src), rng.pick(dst)),
    }
}

/// A filter rule: 1–3 primitives with `&&`, sometimes negated or an `||` in parentheses.
fn rule(rng: &mut Rng, v: &View, reverse: bool) -> String {
    let n = rng.range(1, 3);
    let mut parts = Vec::new();
    for _ in 0..n {
        let mut a = atom(rng, v, reverse);
        if rng.pct(15) {
            a = format!("({a} || {})", atom(rng, v, reverse));
        }
        if rng.pct(12) {
            a = format!("{} ({a})", rng.pick(&["!", "not"]));
        }
        parts.push(a);
    }
    parts.join(rng.pick(&[" && ", " and "]))
}

/// The rules of one IPFilter.
fn filter_rules(rng: &mut Rng, v: &View, reverse: bool) -> Vec<String> {
    let mut rules = Vec::new();
    for _ in 0..rng.range(1, 5) {
        let action = match rng.below(10) {
            0..=5 => "allow",
            6..=8 => "deny",
            _ => "drop",
        };
        rules.push(format!("{action} {}", rule(rng, v, reverse)));
    }
    // Usually one broad allow somewhere, so that some traffic gets through.
    if rng.pct(70) {
        let (s, d) = if reverse {
            ("dst", "src")
        } else {
            ("src", "dst")
        };
        let broad = match rng.below(4) {
            0 => format!("allow {s} net {}", rng.pick(&v.src)),
            1 => format!("allow {d} net {}", rng.pick(&v.dst)),
            2 => format!("allow {}", rng.pick(&["tcp", "udp", "icmp", "tcp or udp"])),
            _ => format!(
                "allow {s} net {} && {d} net {}",
                rng.pick(&v.src),
                rng.pick(&v.dst)
            ),
        };
        let at = rng.below(rules.len() as u64 + 1) as usize;
        rules.insert(at, broad);
    }
    // Replies mostly get through; forward traffic ends either way.
    let allow_all = if reverse { 70 } else { 45 };
    match rng.below(100) {
        x if x < allow_all => rules.push("allow all".into()),
        x if x < 90 => rules.push("deny all".into()),
        _ => {}
    }
    rules
}

fn firewall(rng: &mut Rng, i: usize, v: &View) -> NfOut {
    let fwd = filter_rules(rng, v, false);
    let back = filter_rules(rng, v, true);
    let mut c = String::new();
    for (name, rules) in [("f0", &fwd), ("f1", &back)] {
        let _ = writeln!(c, "{name} :: IPFilter(\n    {});", rules.join(",\n    "));
    }
    // Half the firewalls paint the packet before the filter (no other element reads the
    // paint there), so the filter's drop test can run before the paint (`plan::merge`'s
    // rule (c)). Chosen without drawing, so the other choices of a seed stay as they were.
    let paint = if (fwd.len() + back.len() + i).is_multiple_of(2) {
        " -> Paint(9)"
    } else {
        ""
    };
    for (from, to, f) in [(0, 1, "f0"), (1, 0, "f1")] {
        let ttl = if rng.pct(60) { " -> DecIPTTL" } else { "" };
        let _ = writeln!(
            c,
            "FromDevice(eth{from}) -> Strip(14) -> {}{}{paint} -> {f}{ttl}{} -> EtherEncap(0x0800, $MAC{to}, $PEER{to}) -> ToDevice(eth{to});",
            check(rng),
            counter(rng),
            counter(rng)
        );
    }
    // Click's IPFilter is `1/-`: an output no rule names may be connected (SNF-style
    // `filter[1] -> Discard`) and gets nothing. Chosen without drawing, so the other
    // choices of a seed stay as they were.
    for (name, rules) in [("f0", &fwd), ("f1", &back)] {
        if rules.len() % 2 == 1 {
            let _ = writeln!(c, "{name}[1] -> Discard;");
        }
    }
    NfOut {
        name: format!("fw{i}"),
        kind: format!("firewall ({} + {} rules)", fwd.len(), back.len()),
        click: c,
        extra_exits: Vec::new(),
    }
}

/// Short timeouts or a small table, sometimes.
fn rewriter_keywords(rng: &mut Rng) -> String {
    let mut k = String::new();
    if rng.pct(25) {
        let _ = write!(
            k,
            ", UDP_TIMEOUT {}, TCP_TIMEOUT {}, TCP_DONE_TIMEOUT {}, GUARANTEE 0, UDP_GUARANTEE 0",
            rng.range(1, 4),
            rng.range(2, 6),
            rng.range(1, 2)
        );
        if rng.pct(50) {
            let _ = write!(k, ", REAP_INTERVAL {}", rng.range(1, 5));
        }
    }
    if rng.pct(15) {
        let _ = write!(k, ", MAPPING_CAPACITY {}", rng.range(2, 12));
    }
    k
}

fn napt(rng: &mut Rng, i: usize, v: &mut View) -> NfOut {
    let class = match rng.below(10) {
        0 => "TCPRewriter",
        1 => "UDPRewriter",
        _ => "IPRewriter",
    };
    let ext = Ipv4Addr::new(100, 64, i as u8, 1);
    let (pattern, new_src, sports) = if rng.pct(20) {
        let p = Prefix::new(u32::from(Ipv4Addr::new(100, 64, i as u8, 0)), 29);
        (format!("{p} - - -"), p, v.sports)
    } else {
        let lo = rng.range(1024, 60000) as u16;
        let hi = lo.saturating_add(rng.pick(&[8u16, 64, 1000, 5000]));
        let suffix = rng.pick(&["", "", "#", "?"]);
        (
            format!("{ext} {lo}-{hi}{suffix} - -"),
            Prefix::host(ext),
            (lo, hi),
        )
    };
    let reply = if rng.pct(75) { "drop" } else { "pass 1" };
    let keywords = rewriter_keywords(rng);
    let icmp_by = rng.pct(30);
    let mut c = String::new();
    let _ = writeln!(
        c,
        "rw :: {class}(pattern {pattern} 0 1, {reply}{keywords});"
    );
    let out1 = format!(
        "DecIPTTL{} -> EtherEncap(0x0800, $MAC1, $PEER1) -> ToDevice(eth1)",
        counter(rng)
    );
    if icmp_by {
        let _ = writeln!(c, "cl :: IPClassifier(tcp or udp, -);");
        let _ = writeln!(
            c,
            "FromDevice(eth0) -> Strip(14) -> {}{} -> cl;",
            check(rng),
            counter(rng)
        );
        let _ = writeln!(c, "cl[0] -> [0]rw;");
        let _ = writeln!(c, "out1 :: {out1};");
        let _ = writeln!(c, "cl[1] -> out1;");
        let _ = writeln!(c, "rw[0] -> out1;");
    } else {
        let _ = writeln!(
            c,
            "FromDevice(eth0) -> Strip(14) -> {}{} -> [0]rw;",
            check(rng),
            counter(rng)
        );
        let _ = writeln!(c, "rw[0] -> {out1};");
    }
    let _ = writeln!(
        c,
        "FromDevice(eth1) -> Strip(14) -> {}{} -> [1]rw;",
        check(rng),
        counter(rng)
    );
    let _ = writeln!(
        c,
        "rw[1] -> DecIPTTL{} -> EtherEncap(0x0800, $MAC0, $PEER0) -> ToDevice(eth0);",
        counter(rng)
    );
    if icmp_by {
        v.src.push(new_src);
    } else {
        v.src = vec![new_src];
    }
    v.sports = sports;
    NfOut {
        name: format!("napt{i}"),
        kind: format!(
            "NAPT ({class}, pattern {pattern}, {reply}{}{})",
            if icmp_by { ", ICMP untranslated" } else { "" },
            keywords
        ),
        click: c,
        extra_exits: Vec::new(),
    }
}

fn load_balancer(rng: &mut Rng, i: usize, v: &mut View) -> NfOut {
    let n = rng.range(2, 3);
    let in_dst = rng.pct(50);
    let new_port = if rng.pct(30) {
        Some(rng.pick(&[8080u16, 8443, 9000]))
    } else {
        None
    };
    let mut backends = Vec::new();
    // Destinations may be a few hosts only (after another load balancer): then fresh ones.
    for k in 0u64.. {
        if backends.len() >= n as usize {
            break;
        }
        let b = if in_dst && k < 16 {
            rng.pick(&v.dst).addr(rng)
        } else {
            Ipv4Addr::new(10, 200, i as u8, (k % 250) as u8 + 1)
        };
        if !backends.contains(&b) {
            backends.push(b);
        }
    }
    let port = new_port.map_or("-".to_string(), |p| p.to_string());
    let patterns: Vec<String> = backends
        .iter()
        .map(|b| format!("- - {b} {port} 0 1"))
        .collect();
    let mut c = String::new();
    let _ = writeln!(c, "rr :: RoundRobinIPMapper({});", patterns.join(", "));
    let _ = writeln!(c, "rw :: IPRewriter(rr, drop{});", rewriter_keywords(rng));
    for (from, to) in [(0, 1), (1, 0)] {
        let _ = writeln!(
            c,
            "FromDevice(eth{from}) -> Strip(14) -> {}{} -> [{from}]rw;",
            check(rng),
            counter(rng)
        );
        let _ = writeln!(
            c,
            "rw[{from}] -> DecIPTTL{} -> EtherEncap(0x0800, $MAC{to}, $PEER{to}) -> ToDevice(eth{to});",
            counter(rng)
        );
    }
    v.dst = backends.iter().map(|&b| Prefix::host(b)).collect();
    if let Some(p) = new_port {
        v.dports = vec![p];
    }
    NfOut {
        name: format!("lb{i}"),
        kind: format!(
            "load balancer ({} backends{})",
            n,
            new_port.map_or(String::new(), |p| format!(", port {p}"))
        ),
        click: c,
        extra_exits: Vec::new(),
    }
}

/// TTL and encapsulation changes, one recipe per direction.
fn mangler(rng: &mut Rng, i: usize) -> NfOut {
    let mut c = String::new();
    let mut recipes = Vec::new();
    for (from, to) in [(0, 1), (1, 0)] {
        let mut extra = String::new();
        let (name, path) = match rng.below(7) {
            0 => {
                let extra = if rng.pct(50) { " -> DecIPTTL" } else { "" };
                (
                    "Strip/DecIPTTL/Unstrip/EtherRewrite",
                    format!(
                        "Strip(14) -> {} -> DecIPTTL{extra}{} -> Unstrip(14) -> EtherRewrite($MAC{to}, $PEER{to})",
                        check(rng),
                        counter(rng)
                    ),
                )
            }
            1 => (
                "Strip/Unstrip/EtherRewrite",
                format!(
                    "Strip(14){} -> Unstrip(14) -> EtherRewrite($MAC{to}, $PEER{to})",
                    counter(rng)
                ),
            ),
            2 => (
                "EtherRewrite",
                format!("EtherRewrite($MAC{to}, $PEER{to}){}", counter(rng)),
            ),
            3 => (
                "Strip/DecIPTTL x2/EtherEncap",
                format!(
                    "Strip(14) -> {} -> DecIPTTL -> DecIPTTL{} -> EtherEncap(0x0800, $MAC{to}, $PEER{to})",
                    check(rng),
                    counter(rng)
                ),
            ),
            4 => (
                "Strip/EtherEncap",
                format!(
                    "Strip(14) -> {}{} -> EtherEncap(0x0800, $MAC{to}, $PEER{to})",
                    check(rng),
                    counter(rng)
                ),
            ),
            5 => {
                // The packet type FromDevice set, or one set on purpose; broadcasts leave
                // on DropBroadcasts' output 1 when it is connected.
                let set = match rng.below(4) {
                    0 => " -> SetPacketType(BROADCAST)",
                    1 => " -> SetPacketType(MULTICAST)",
                    2 => " -> SetPacketType(HOST)",
                    _ => "",
                };
                if rng.pct(50) {
                    let _ = writeln!(extra, "db{from}[1]{} -> Discard;", counter(rng));
                }
                (
                    "SetPacketType/DropBroadcasts/EtherRewrite",
                    format!(
                        "Null{}{set} -> db{from} :: DropBroadcasts -> EtherRewrite($MAC{to}, $PEER{to})",
                        counter(rng)
                    ),
                )
            }
            _ => {
                // Click's transport checksums (opaque to synthesis); fragments and short
                // datagrams leave on SetUDPChecksum's output 1 when it is connected.
                if rng.pct(50) {
                    let _ = writeln!(extra, "uc{from}[1] -> Discard;");
                }
                let fixoff = if rng.pct(50) { "FIXOFF true" } else { "" };
                (
                    "Strip/SetUDPChecksum/SetTCPChecksum/Unstrip/EtherRewrite",
                    format!(
                        "Strip(14) -> {} -> uc{from} :: SetUDPChecksum -> SetTCPChecksum({fixoff}) -> Unstrip(14) -> EtherRewrite($MAC{to}, $PEER{to})",
                        check(rng)
                    ),
                )
            }
        };
        recipes.push(name);
        // Sometimes FORCE_IP: non-IP frames leave on output 1 (to Discard) or are dropped.
        let src = if rng.pct(20) {
            if rng.pct(50) {
                let _ = writeln!(extra, "fd{from}[1] -> Discard;");
            }
            format!("fd{from} :: FromDevice(eth{from}, FORCE_IP true)")
        } else {
            format!("FromDevice(eth{from})")
        };
        let _ = writeln!(c, "{src} -> {path} -> ToDevice(eth{to});\n{extra}");
    }
    NfOut {
        name: format!("mg{i}"),
        kind: format!("mangler ({} | {})", recipes[0], recipes[1]),
        click: c,
        extra_exits: Vec::new(),
    }
}

/// A branch: TCP / UDP / the rest to eth1, an extra exit eth2, or Discard.
fn branch(rng: &mut Rng, i: usize, v: &View) -> NfOut {
    let patterns: Vec<String> = match rng.below(4) {
        0 => vec!["tcp".into(), "udp".into(), "-".into()],
        1 => vec!["tcp or udp".into(), "-".into()],
        2 => vec![format!("dst port {}", rng.pick(&v.dports)), "-".into()],
        _ => vec!["icmp".into(), "ip ttl < 8".into(), "-".into()],
    };
    // 0: eth1, 1: eth2, 2: Discard; at least one class reaches eth1.
    let mut dest: Vec<u64> = patterns
        .iter()
        .map(|_| match rng.below(4) {
            0 | 1 => 0,
            2 => 1,
            _ => 2,
        })
        .collect();
    if !dest.contains(&0) {
        let k = rng.below(dest.len() as u64) as usize;
        dest[k] = 0;
    }
    let paint = rng.pct(40);
    let uses_eth2 = dest.contains(&1);
    let mut c = String::new();
    let _ = writeln!(c, "cl :: IPClassifier({});", patterns.join(", "));
    let _ = writeln!(
        c,
        "FromDevice(eth0) -> Strip(14) -> {}{} -> cl;",
        check(rng),
        counter(rng)
    );
    let _ = writeln!(
        c,
        "out1 :: DecIPTTL -> EtherEncap(0x0800, $MAC1, $PEER1){} -> ToDevice(eth1);",
        counter(rng)
    );
    if uses_eth2 {
        let _ = writeln!(
            c,
            "out2 :: EtherEncap(0x0800, 02:00:00:00:{i:02x}:12, 02:00:00:00:fd:10) -> ToDevice(eth2);"
        );
    }
    let target = |d: u64| match d {
        0 => "out1",
        1 => "out2",
        _ => "Discard",
    };
    if paint {
        // PaintSwitch outputs: 0 -> eth1, 1 -> eth2 or Discard; a paint of 2 has no output.
        let _ = writeln!(c, "ps :: PaintSwitch;");
        let _ = writeln!(c, "ps[0] -> out1;");
        let _ = writeln!(
            c,
            "ps[1] -> {};",
            if uses_eth2 { "out2" } else { "Discard" }
        );
        for (k, d) in dest.iter().enumerate() {
            // Discarded classes: a paint with no output, or output 1 when that is Discard.
            let color = match d {
                0 => 0,
                1 => 1,
                _ if uses_eth2 || rng.pct(50) => 2,
                _ => 1,
            };
            let _ = writeln!(c, "cl[{k}] -> Paint({color}) -> ps;");
        }
    } else {
        // Sometimes one class is copied by a Tee: to its destination and to eth2 (or
        // Discard).
        let copied = rng.pct(30).then(|| rng.below(dest.len() as u64) as usize);
        for (k, d) in dest.iter().enumerate() {
            if copied == Some(k) {
                let _ = writeln!(
                    c,
                    "cl[{k}] -> t{k} :: Tee(2);\nt{k}[0]{} -> {};\nt{k}[1] -> {};",
                    counter(rng),
                    target(*d),
                    if uses_eth2 { "out2" } else { "Discard" }
                );
            } else {
                let _ = writeln!(c, "cl[{k}]{} -> {};", counter(rng), target(*d));
            }
        }
    }
    let _ = writeln!(
        c,
        "FromDevice(eth1) -> Strip(14) -> {}{} -> EtherEncap(0x0800, $MAC0, $PEER0) -> ToDevice(eth0);",
        check(rng),
        counter(rng)
    );
    let routes: Vec<String> = patterns
        .iter()
        .zip(&dest)
        .map(|(p, d)| format!("{p} -> {}", ["eth1", "eth2", "discard"][*d as usize]))
        .collect();
    NfOut {
        name: format!("br{i}"),
        kind: format!(
            "branch ({}{})",
            routes.join("; "),
            if paint { ", PaintSwitch" } else { "" }
        ),
        click: c,
        extra_exits: if uses_eth2 {
            vec!["eth2".into()]
        } else {
            Vec::new()
        },
    }
}

/// The traffic: prefixes, ports, protocols, sizes, anomalies.
fn trace_spec(rng: &mut Rng) -> TraceSpec {
    let src = match rng.below(3) {
        0 => Prefix::new(
            u32::from(Ipv4Addr::new(10, rng.range(0, 127) as u8, 0, 0)),
            16,
        ),
        1 => Prefix::new(
            u32::from(Ipv4Addr::new(192, 168, rng.range(0, 255) as u8, 0)),
            24,
        ),
        _ => Prefix::new(
            u32::from(Ipv4Addr::new(
                10,
                rng.range(0, 127) as u8,
                rng.range(0, 255) as u8,
                0,
            )),
            rng.range(20, 28) as u8,
        ),
    };
    let dst = match rng.below(2) {
        0 => Prefix::new(
            u32::from(Ipv4Addr::new(172, rng.range(16, 31) as u8, 0, 0)),
            rng.range(16, 24) as u8,
        ),
        _ => Prefix::new(
            u32::from(Ipv4Addr::new(10, rng.range(128, 199) as u8, 0, 0)),
            16,
        ),
    };
    let sports = if rng.pct(70) {
        PortSpec::Range(1024, 65535)
    } else {
        let lo = rng.range(1024, 60000) as u16;
        PortSpec::Range(lo, lo + rng.range(4, 200) as u16)
    };
    let mut dports = Vec::new();
    for _ in 0..rng.range(2, 5) {
        let p = rng.pick(&[22u16, 53, 80, 123, 443, 1234, 5000, 8080]);
        if !dports.contains(&p) {
            dports.push(p);
        }
    }
    let mix = loop {
        let m = Mix {
            tcp: rng.range(0, 3) as u32,
            udp: rng.range(0, 3) as u32,
            icmp: rng.range(0, 2) as u32,
        };
        if m.tcp + m.udp + m.icmp > 0 {
            break m;
        }
    };
    let size = match rng.below(4) {
        0 => SizeDist::Uniform(64, 1518),
        1 => SizeDist::Imix,
        _ => SizeDist::Fixed(rng.pick(&[64, 128, 600])),
    };
    let rate = |rng: &mut Rng, p: f64| {
        if rng.pct(50) {
            Rate::from_probability(p)
        } else {
            Rate::NEVER
        }
    };
    let ttl_range = match rng.below(10) {
        0..=2 => Some((1, 12)),
        3 => Some((1, 4)),
        _ => None,
    };
    TraceSpec {
        src: src.pair(),
        dst: dst.pair(),
        sports,
        dports: PortSpec::List(dports),
        mix,
        size,
        flows: rng.range(5, 60) as u32,
        ttl: rng.pick(&[64, 64, 64, 64, 64, 64, 64, 3]),
        anomalies: Anomalies {
            ttl_range,
            bad_ip_checksum: rate(rng, 0.02),
            ip_options: rate(rng, 0.05),
            arp: rate(rng, 0.02),
            truncated: rate(rng, 0.02),
            short_transport: rate(rng, 0.03),
        },
        gap_ns: if rng.pct(25) { 50_000_000 } else { 1000 },
        src_mac: Address([0x02, 0, 0, 0, 0, 0x11]),
        dst_mac: Address([0x02, 0, 0, 0, 0x01, 0x10]),
    }
}

/// Writes a random chain (Click files and `chain.toml`) into `dir`, which must exist; files
/// already there with the same names are overwritten. I/O errors panic (test support).
pub fn random_chain(seed: u64, dir: &Path) -> GeneratedChain {
    match try_random_chain(seed, dir) {
        Ok(g) => g,
        Err(e) => panic!("random_chain({seed}, {}): {e}", dir.display()),
    }
}

/// What [`try_random_chain_with`] may put in a chain besides Click NFs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Insert NFs written with operators (see the module documentation); their classes
    /// must be registered before the chain is run.
    pub operator_nfs: bool,
    /// Insert IPsec gateways (see the module documentation).
    pub ipsec: bool,
    /// Insert a run of NFs of the opaque elements that declare what they do (see the
    /// module documentation).
    pub opaque_nfs: bool,
}

/// [`random_chain`], returning I/O errors instead of panicking.
pub fn try_random_chain(seed: u64, dir: &Path) -> Result<GeneratedChain, TestgenError> {
    try_random_chain_with(seed, dir, &Options::default())
}

/// One NF of the line: a generated Click NF (with its position among them), or an
/// operator NF (a Click file naming operator classes, or a chain-file `rust` entry).
enum Slot {
    Click(usize),
    Operators(NfOut),
    Rust {
        name: String,
        kind: String,
        toml: String,
    },
}

/// An NF of operator NFs (see the module documentation), drawn from `rng`.
fn operator_nf(rng: &mut Rng, j: usize, v: &View, ext: Ipv4Addr) -> Slot {
    if rng.pct(25) {
        let ports = rng.pick(&["1024-1100", "50000-65535", "4000-4003"]);
        let timeout = rng.pick(&["1", "30", "300"]);
        return Slot::Rust {
            name: format!("nat{j}"),
            kind: format!("operator NF NatNF({ext}, {ports}, {timeout} s)"),
            toml: format!(
                "rust = \"NatNF\"\nargs = \"EXTERNAL {ext}, PORTS {ports}, TIMEOUT {timeout}\"\ninputs = 2"
            ),
        };
    }
    let one = |rng: &mut Rng, reverse: bool| match rng.below(4) {
        0 => "TTLNF".to_string(),
        1 => "MacSwapNF".to_string(),
        2 => format!("MonitorNF(CAPACITY {})", rng.range(1, 300)),
        _ => format!("FirewallNF({})", filter_rules(rng, v, reverse).join(", ")),
    };
    let (a, b) = (one(rng, false), one(rng, true));
    let class = |x: &str| x.split('(').next().unwrap_or_default().to_string();
    NfOut {
        name: format!("op{j}"),
        kind: format!("operator NFs {} / {}", class(&a), class(&b)),
        click: format!(
            "FromDevice(eth0) -> {a} -> ToDevice(eth1);\nFromDevice(eth1) -> {b} -> ToDevice(eth0);\n"
        ),
        extra_exits: Vec::new(),
    }
    .into()
}

/// An NF of an opaque, declaring element (see the module documentation), drawn from `rng`,
/// with the rules file it reads (name, text) if it is an IDS.
fn opaque_nf(rng: &mut Rng, j: usize, v: &View, first: bool) -> (NfOut, Option<(String, String)>) {
    // Most read the network header where an earlier NF left it (none at the chain's entry):
    // an NF that marks it writes an annotation the next NF reads, which keeps them apart.
    let ip = if rng.pct(30) {
        "MarkIPHeader(14) -> "
    } else {
        ""
    };
    let back = "FromDevice(eth1) -> ToDevice(eth0);";
    let kind = if first && rng.pct(60) {
        0
    } else {
        rng.below(6)
    };
    let mut rules = None;
    let (what, click) = match kind {
        0 => (
            "monitor".to_string(),
            format!(
                "FromDevice(eth0) -> {ip}Monitor(CAPACITY {}) -> ToDevice(eth1);\n{back}\n",
                rng.pick(&[4u64, 64, 4096])
            ),
        ),
        1 => {
            let file = format!("ids{j}.rules");
            let mut text = String::new();
            let contents = [
                "|fe ff 00|",
                "|10 11|",
                "|40 41 42|",
                "|07|",
                "|80 81 82 83|",
            ];
            for sid in 1..=rng.range(1, 4) {
                let action = rng.pick(&["drop", "drop", "alert"]);
                let proto = rng.pick(&["tcp", "udp", "ip", "icmp"]);
                let content = rng.pick(&contents);
                let _ = writeln!(
                    text,
                    "{action} {proto} any any -> any any (msg:\"gen {sid}\"; content:\"{content}\"; sid:{sid};)"
                );
            }
            let click = format!(
                "FromDevice(eth0) -> {ip}SnortIDS(RULES {file}) -> ToDevice(eth1);\n{back}\n"
            );
            rules = Some((file, text));
            ("IDS".to_string(), click)
        }
        2 => {
            let ext = v.src[0].addr(rng);
            let ports = rng.pick(&["50000-50999", "1024-1100", "4000-4003"]);
            (
                format!("NAT {ext}"),
                format!(
                    "nat :: MazuNAT(EXTERNAL {ext}, PORTS {ports});\n\
                     FromDevice(eth0) -> {ip}[0]nat[0] -> ToDevice(eth1);\n\
                     FromDevice(eth1) -> {ip}[1]nat[1] -> ToDevice(eth0);\n"
                ),
            )
        }
        3 => {
            let d = v.dst[v.dst.len() - 1];
            let n = rng.range(1, 3);
            let backends: Vec<String> = (0..n)
                .map(|b| format!("BACKEND b{b} {} 02:00:00:00:b0:{b:02x}", d.addr(rng)))
                .collect();
            (
                format!("load balancer ({n} backends)"),
                format!(
                    "lb :: Maglev({});\n\
                     FromDevice(eth0) -> {ip}[0]lb[0] -> ToDevice(eth1);\n\
                     FromDevice(eth1) -> {ip}[1]lb[1] -> ToDevice(eth0);\n",
                    backends.join(", ")
                ),
            )
        }
        _ => {
            let sw = if rng.pct(50) {
                format!(
                    "HashSwitch({}, {})",
                    rng.pick(&[26u64, 30, 34]),
                    rng.range(1, 8)
                )
            } else {
                "RoundRobinSwitch".to_string()
            };
            (
                format!("switch {}", sw.split('(').next().unwrap_or_default()),
                format!(
                    "FromDevice(eth0) -> {ip}sw :: {sw};\n\
                     sw[0] -> ToDevice(eth1);\nsw[1] -> Counter -> ToDevice(eth1);\n{back}\n"
                ),
            )
        }
    };
    let nf = NfOut {
        name: format!("opq{j}"),
        kind: format!("opaque {what}"),
        click,
        extra_exits: Vec::new(),
    };
    (nf, rules)
}

/// One direction of a generated IPsec tunnel: its security association as both
/// elements' arguments take it.
struct GenSa {
    spi: u32,
    /// Key and salt in hex (20 or 36 bytes, as `ip xfrm` takes them).
    key: String,
    esn: bool,
}

impl GenSa {
    fn new(rng: &mut Rng) -> GenSa {
        let len = if rng.pct(50) { 16 } else { 32 };
        GenSa {
            spi: 0x100 + rng.below(0xffff) as u32,
            key: (0..len + 4)
                .map(|_| format!("{:02x}", rng.below(256)))
                .collect(),
            esn: rng.pct(30),
        }
    }

    /// `IPsecGCMEncap(…)` from `src` to `dst`; sometimes starting near the end of the
    /// 32-bit sequence numbers (they run out, or wrap with ESN).
    fn encap(&self, rng: &mut Rng, src: Ipv4Addr, dst: Ipv4Addr) -> String {
        let seq = if rng.pct(20) {
            format!(", SEQ {}", u64::from(u32::MAX) - rng.range(0, 200))
        } else {
            String::new()
        };
        let ttl = if rng.pct(30) { ", TTL 3" } else { "" };
        format!(
            "IPsecGCMEncap(SPI {:#x}, KEY {}, SRC {src}, DST {dst}{}{seq}{ttl})",
            self.spi,
            self.key,
            if self.esn { ", ESN true" } else { "" }
        )
    }

    /// `IPsecGCMDecap(…)` for packets to `dst`; sometimes with a wrong key.
    fn decap(&self, rng: &mut Rng, dst: Ipv4Addr) -> String {
        let replay = match rng.below(5) {
            0 if !self.esn => 0,
            0 | 1 => 1,
            2 => 32,
            3 => 64,
            _ => 1024,
        };
        let mut key = self.key.clone();
        // Sometimes another SPI (every packet `unknown-spi`) or a wrong key.
        let spi = if rng.pct(5) { self.spi + 1 } else { self.spi };
        if rng.pct(10) {
            // The last salt digit changed: every ICV fails.
            let last = if key.ends_with('0') { "1" } else { "0" };
            key.replace_range(key.len() - 1.., last);
        }
        let dst = if rng.pct(30) {
            format!(", DST {dst}")
        } else {
            String::new()
        };
        format!(
            "IPsecGCMDecap(SPI {spi:#x}, KEY {key}, REPLAY {replay}{}{dst})",
            if self.esn { ", ESN true" } else { "" }
        )
    }
}

/// How a generated gateway takes frames in and hands them on: (before, after) an IPsec
/// element; the Ethernet header stays in front unless stripped and encapsulated again.
fn ipsec_io(rng: &mut Rng) -> (&'static str, &'static str) {
    match rng.below(4) {
        0 => (
            "Strip(14) -> CheckIPHeader",
            " -> EtherEncap(0x0800, 02:00:00:00:ee:01, 02:00:00:00:ee:02)",
        ),
        1 => ("MarkIPHeader(14)", ""),
        _ => ("CheckIPHeader(14)", ""),
    }
}

/// IPsec NFs to insert among `n` NFs, each with the position it takes (in insertion
/// order): a tunnel's two gateways, or one gateway that encrypts and decrypts again.
fn ipsec_nfs(rng: &mut Rng, n: usize, (a, b): (Ipv4Addr, Ipv4Addr)) -> Vec<(usize, NfOut)> {
    let (fwd, back) = (GenSa::new(rng), GenSa::new(rng));
    if rng.pct(65) {
        let at = rng.below(n as u64 + 1) as usize;
        let later = at + 1 + rng.below((n - at) as u64 + 1) as usize;
        let near = {
            let (i0, o0) = ipsec_io(rng);
            let (i1, o1) = ipsec_io(rng);
            format!(
                "FromDevice(eth0) -> {i0} -> {}{o0} -> ToDevice(eth1);\nFromDevice(eth1) -> {i1} -> {}{o1} -> ToDevice(eth0);\n",
                fwd.encap(rng, a, b),
                back.decap(rng, a),
            )
        };
        let far = {
            let (i0, o0) = ipsec_io(rng);
            let (i1, o1) = ipsec_io(rng);
            format!(
                "FromDevice(eth0) -> {i0} -> {}{o0} -> ToDevice(eth1);\nFromDevice(eth1) -> {i1} -> {}{o1} -> ToDevice(eth0);\n",
                fwd.decap(rng, b),
                back.encap(rng, b, a),
            )
        };
        let nf = |name: &str, kind: &str, click: String| NfOut {
            name: name.to_string(),
            kind: kind.to_string(),
            click,
            extra_exits: Vec::new(),
        };
        return vec![
            (at, nf("esp1", "IPsec gateway (tunnel start)", near)),
            (later, nf("esp2", "IPsec gateway (tunnel end)", far)),
        ];
    }
    let at = rng.below(n as u64 + 1) as usize;
    let (i0, o0) = ipsec_io(rng);
    let tee = rng.pct(30);
    // Encapsulation is drawn before decapsulation whatever the layout.
    let (enc, dec) = (fwd.encap(rng, a, b), fwd.decap(rng, b));
    // Replies pass in clear, or meet a decapsulation that finds them not ESP.
    let replies = if rng.pct(40) {
        format!("MarkIPHeader(14) -> {} -> ", back.decap(rng, a))
    } else {
        String::new()
    };
    let click = if tee {
        format!(
            "d :: {dec}{o0} -> ToDevice(eth1);\nFromDevice(eth0) -> {i0} -> {enc} -> t :: Tee(2);\nt[0] -> d;\nt[1] -> d;\nFromDevice(eth1) -> {replies}ToDevice(eth0);\n"
        )
    } else {
        format!(
            "FromDevice(eth0) -> {i0} -> {enc} -> {dec}{o0} -> ToDevice(eth1);\nFromDevice(eth1) -> {replies}ToDevice(eth0);\n"
        )
    };
    vec![(
        at,
        NfOut {
            name: "esp1".into(),
            kind: format!(
                "IPsec gateway (encrypt and decrypt{})",
                if tee { ", every packet twice" } else { "" }
            ),
            click,
            extra_exits: Vec::new(),
        },
    )]
}

impl From<NfOut> for Slot {
    fn from(nf: NfOut) -> Slot {
        Slot::Operators(nf)
    }
}

/// [`try_random_chain`] with `options`: the same Click NFs, and operator NFs between them
/// when asked for.
pub fn try_random_chain_with(
    seed: u64,
    dir: &Path,
    options: &Options,
) -> Result<GeneratedChain, TestgenError> {
    let mut rng = Rng(ports::gen::SplitMix64(seed ^ 0x7e57_c4a1_2000_0000));
    let trace = trace_spec(&mut rng);
    let mut view = View {
        src: vec![Prefix::new(u32::from(trace.src.0), trace.src.1)],
        dst: vec![Prefix::new(u32::from(trace.dst.0), trace.dst.1)],
        dports: match &trace.dports {
            PortSpec::List(l) => l.clone(),
            PortSpec::Range(lo, hi) => vec![*lo, *hi],
        },
        sports: match trace.sports {
            PortSpec::Range(lo, hi) => (lo, hi),
            PortSpec::List(_) => (1024, 65535),
        },
    };
    let n = rng.range(1, 5) as usize;
    let mut nfs = Vec::new();
    for i in 1..=n {
        let nf = match rng.below(12) {
            0..=2 => router(&mut rng, i, &view),
            3 | 4 => firewall(&mut rng, i, &view),
            5 | 6 => napt(&mut rng, i, &mut view),
            7 | 8 => load_balancer(&mut rng, i, &mut view),
            9 => mangler(&mut rng, i),
            _ => branch(&mut rng, i, &view),
        };
        nfs.push(nf);
    }
    let mut slots: Vec<Slot> = (0..n).map(Slot::Click).collect();
    if options.operator_nfs {
        // A stream of its own: the Click NFs above are the seed's whatever is inserted.
        let mut ops = Rng(ports::gen::SplitMix64(seed ^ 0x0b5e_b41c_5000_0000));
        let ext = Ipv4Addr::from(u32::from(trace.src.0) | 1);
        let mut at: Vec<usize> = (0..=n).filter(|_| ops.pct(40)).collect();
        if at.is_empty() {
            at.push(ops.below(n as u64 + 1) as usize);
        }
        for (j, pos) in at.into_iter().enumerate().rev() {
            let nf = operator_nf(&mut ops, j + 1, &view, ext);
            slots.insert(pos, nf);
        }
    }
    if options.ipsec {
        // A stream of its own too: the NFs above stay as the seed makes them.
        let mut ips = Rng(ports::gen::SplitMix64(seed ^ 0x1b5e_c0de_7000_0000));
        let ends = (
            Ipv4Addr::from(u32::from(trace.src.0) | 1),
            Ipv4Addr::from(u32::from(trace.dst.0) | 1),
        );
        for (pos, nf) in ipsec_nfs(&mut ips, slots.len(), ends) {
            slots.insert(pos, nf.into());
        }
    }
    let mut extra_files: Vec<(String, String)> = Vec::new();
    if options.opaque_nfs {
        // A stream of its own as well: the NFs above stay as the seed makes them.
        let mut opq = Rng(ports::gen::SplitMix64(seed ^ 0x0da9_0e5d_3c1a_0000));
        let at = opq.below(slots.len() as u64 + 1) as usize;
        let k = opq.range(2, 3) as usize;
        for j in (1..=k).rev() {
            let (nf, rules) = opaque_nf(&mut opq, j, &view, j == 1);
            extra_files.extend(rules);
            slots.insert(at, nf.into());
        }
    }
    let name_of = |s: &Slot| match s {
        Slot::Click(k) => nfs[*k].name.clone(),
        Slot::Operators(nf) => nf.name.clone(),
        Slot::Rust { name, .. } => name.clone(),
    };
    let names: Vec<String> = slots.iter().map(name_of).collect();
    let mut files = Vec::new();
    let mut toml = format!(
        "# synth::testgen::random_chain({seed}): {} NFs in a line; enter at {}.eth0, reflect {}.eth1\n",
        names.len(),
        names[0],
        names[names.len() - 1]
    );
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|source| TestgenError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    for (file, text) in &extra_files {
        let path = dir.join(file);
        write(&path, text)?;
        files.push(path);
    }
    for slot in &slots {
        let (k, nf) = match slot {
            Slot::Click(k) => (*k, &nfs[*k]),
            Slot::Operators(nf) => {
                let file = format!("{}.click", nf.name);
                let path = dir.join(&file);
                write(
                    &path,
                    &format!(
                        "// {}: {}\n// generated by synth::testgen::random_chain_with({seed}, operator NFs)\n{}",
                        nf.name, nf.kind, nf.click
                    ),
                )?;
                files.push(path);
                let _ = writeln!(toml, "[nf.{}]\nclick = \"{file}\"", nf.name);
                continue;
            }
            Slot::Rust { name, toml: t, .. } => {
                let _ = writeln!(toml, "[nf.{name}]\n{t}");
                continue;
            }
        };
        let i = k + 1;
        let defs = macs(i, n);
        let header = format!(
            "// {}: {}\n// generated by synth::testgen::random_chain({seed})\ndefine({});\n",
            nf.name,
            nf.kind,
            defs.iter()
                .map(|(k, v)| format!("${k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let file = format!("{}.click", nf.name);
        let path = dir.join(&file);
        write(&path, &format!("{header}\n{}", nf.click))?;
        files.push(path);
        let _ = writeln!(toml, "[nf.{}]\nclick = \"{file}\"", nf.name);
        // Half the NFs get their addresses from the chain file (the same values).
        if rng.pct(50) {
            let d: Vec<String> = defs.iter().map(|(k, v)| format!("{k} = \"{v}\"")).collect();
            let _ = writeln!(toml, "define = {{ {} }}", d.join(", "));
        }
    }
    for w in names.windows(2) {
        let _ = writeln!(
            toml,
            "[[link]]\nbetween = [\"{}.eth1\", \"{}.eth0\"]",
            w[0], w[1]
        );
    }
    let ep = |nf: &str, iface: &str| Endpoint {
        nf: nf.to_string(),
        iface: iface.to_string(),
    };
    let entry = ep(&names[0], "eth0");
    let far = ep(&names[names.len() - 1], "eth1");
    let _ = writeln!(toml, "[[entry]]\nto = \"{entry}\"");
    let chain = dir.join("chain.toml");
    write(&chain, &toml)?;
    files.insert(0, chain.clone());
    let mut exits = vec![entry.clone(), far.clone()];
    for nf in &nfs {
        for x in &nf.extra_exits {
            exits.push(ep(&nf.name, x));
        }
    }
    Ok(GeneratedChain {
        seed,
        chain,
        files,
        entries: vec![entry],
        reflect: vec![far],
        exits,
        nfs: slots
            .iter()
            .map(|s| match s {
                Slot::Click(k) => format!("{}: {}", nfs[*k].name, nfs[*k].kind),
                Slot::Operators(nf) => format!("{}: {}", nf.name, nf.kind),
                Slot::Rust { name, kind, .. } => format!("{name}: {kind}"),
            })
            .collect(),
        trace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chain::{ChainFile, Executor, ExitSink};

    /// A scratch directory, removed when dropped.
    fn tmp(tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("fusebox-testgen-{tag}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn same_seed_same_files() {
        let (ta, tb) = (tmp("a"), tmp("b"));
        let (a, b) = (ta.path(), tb.path());
        for seed in 0..20 {
            let ga = random_chain(seed, a);
            let gb = random_chain(seed, b);
            assert_eq!(ga.files.len(), gb.files.len());
            for (x, y) in ga.files.iter().zip(&gb.files) {
                assert_eq!(x.file_name(), y.file_name());
                assert_eq!(std::fs::read(x).unwrap(), std::fs::read(y).unwrap());
            }
            assert_eq!(ga.trace, gb.trace);
            for f in &ga.files {
                let _ = std::fs::remove_file(f);
            }
            for f in &gb.files {
                let _ = std::fs::remove_file(f);
            }
        }
    }

    /// Every chain passes what `fusebox check` checks (the executor builds), its exits are
    /// the ones listed, and the NF kinds and lengths all occur.
    #[test]
    fn chains_build_and_cover_the_kinds() {
        let mut kinds = std::collections::BTreeMap::new();
        let mut lengths = [0; 6];
        let mut branch_exits = 0;
        for seed in 0..300 {
            let scratch = tmp(&format!("c{seed}"));
            let dir = scratch.path();
            let g = random_chain(seed, dir);
            let chain = ChainFile::load(&g.chain).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let ex = Executor::new(&chain, &g.options(), |_, _| Ok(ExitSink::Count))
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", g.listing()));
            let mut names = ex.exit_names();
            names.sort();
            let mut want: Vec<String> = g.exits.iter().map(|e| e.to_string()).collect();
            want.sort();
            assert_eq!(names, want, "seed {seed}");
            lengths[g.nfs.len()] += 1;
            branch_exits += usize::from(g.exits.len() > 2);
            for nf in &g.nfs {
                let kind = nf.split(": ").nth(1).unwrap().split(" (").next().unwrap();
                *kinds.entry(kind.to_string()).or_insert(0) += 1;
            }
        }
        assert_eq!(lengths[0], 0);
        assert!(lengths[1..].iter().all(|&n| n > 20), "{lengths:?}");
        assert!(branch_exits > 10, "{branch_exits}");
        for k in [
            "router",
            "firewall",
            "NAPT",
            "load balancer",
            "mangler",
            "branch",
        ] {
            assert!(kinds.get(k).copied().unwrap_or(0) > 20, "{k}: {kinds:?}");
        }
    }

    #[test]
    fn traces_have_what_the_spec_says() {
        let scratch = tmp("trace");
        let dir = scratch.path();
        for seed in 0..10 {
            let g = random_chain(seed, dir);
            let p = dir.join("t.pcap");
            let counts = random_trace(seed, &g.trace, 500, &p).unwrap();
            let mut r = ports::pcap::PcapReader::open(&p).unwrap();
            let mut n = 0;
            let mut arp = 0;
            while let Some(rec) = r.next_record() {
                let rec = rec.unwrap();
                n += 1;
                arp += u64::from(rec.data.get(12..14) == Some(&[0x08, 0x06][..]));
            }
            assert_eq!(n, 500);
            assert_eq!(arp, counts.arp);
            assert_eq!(
                g.trace.anomalies.arp.is_never(),
                arp == 0 || counts.arp == 0
            );
        }
        let bad = dir.join("no-such-dir").join("t.pcap");
        let g = random_chain(1, dir);
        assert!(random_trace(1, &g.trace, 10, &bad).is_err());
    }
}
