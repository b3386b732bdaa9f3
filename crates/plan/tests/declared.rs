//! The property test of declarations against `push`: every element class that declares what
//! it does ([`elements::Element::declared`], the planner's action profile of an opaque
//! element) is pushed random packets and must keep the declaration's promises.
//!
//! For each push the declaration covers (every packet for an element without a model, the
//! packets of its `Runtime` cases for one with a model):
//!
//! * one packet in is one packet out or a drop (a drop only if it declares `drops`): nothing
//!   emitted beside the verdict, nothing created;
//! * the packet keeps its length and its data start;
//! * no bit outside the declared writes (fields, checksums, options, payload) changed, and no
//!   annotation it does not declare writing;
//! * **non-interference for reads**: a packet differing only in bits (and annotations) the
//!   element does not declare reading gives the same verdict (output port, or drop and its
//!   reason) and the same values where it writes, on fresh instances fed the same packets
//!   before (so that state cannot interfere).
//!
//! Classes are taken from the registry (the built-in ones and the operator NFs of
//! `examples/bricks`), each built from its documented example, and some from the extra
//! configurations of [`extra_configs`] (rules that match, a filter with run-time rules), so a
//! class that starts declaring is tested without touching this file. The checker's own unit
//! test shows it fails on deliberately wrong declarations.
//!
//! Positions, as the declaration's vocabulary (`elements::record::Declared`) has them:
//! Ethernet fields at the start of the data; IPv4 fields at the network-header annotation (or
//! the declaration's fixed offset); transport fields at the IPv4 header + IHL × 4; the
//! payload from transport byte 4 on (every byte, without an IPv4 header position); the
//! options at bytes 20 to IHL × 4 of the IPv4 header; checksums at their positions (the
//! transport one at TCP's, UDP's and ICMP's).

use elements::model::{self, Outcome};
use elements::record::{Access, Declared};
use elements::registry;
use elements::{build, BuildCtx, Context, Element, Names, Verdict};
use packet::{Packet, PacketType, Timestamp};
use proptest::prelude::*;
use space::{Base, Field};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use wire::build::Frame;

/// One element configuration under test.
#[derive(Debug, Clone)]
struct Subject {
    class: String,
    config: String,
    inputs: usize,
    outputs: usize,
}

impl Subject {
    fn make(&self) -> Box<dyn Element> {
        let names = Names::new();
        let bcx = BuildCtx {
            name: "nf/e",
            ninputs: self.inputs,
            noutputs: self.outputs,
            names: &names,
            base_dir: Path::new("."),
        };
        build(&self.class, &self.config, &bcx)
            .unwrap_or_else(|e| panic!("{}({}): {e}", self.class, self.config))
    }
}

/// A rules file for the IDS classes (drop rules on contents the generator puts in payloads).
/// The subjects (built once per process) read it whenever they are made, so it lives as long
/// as the test process: an unnamed temporary file, read through `/proc/self/fd`, that
/// nothing is left of when the process ends, however it ends.
fn rules_file() -> PathBuf {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    static FILE: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    let file = FILE.get_or_init(|| {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(
            b"drop tcp any any -> any any (msg:\"evil\"; content:\"evil\"; sid:1;)\n\
              alert udp any any -> any 53 (msg:\"dns\"; content:\"q\"; sid:2;)\n\
              drop udp any any -> any any (msg:\"bad\"; content:\"bad\"; sid:3;)\n",
        )
        .unwrap();
        f
    });
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// Configurations beside the documented examples: (class, configuration, outputs).
fn extra_configs(rules: &Path) -> Vec<(&'static str, String, usize)> {
    let r = rules.display();
    vec![
        ("SnortIDS", format!("RULES {r}"), 1),
        ("SignatureNF", format!("RULES {r}"), 1),
        (
            "IPFilter",
            "allow ether host 02:00:00:00:00:01, allow src 10.0.0.1, deny all".into(),
            1,
        ),
        (
            "IPClassifier",
            "ether host 02:00:00:00:00:02, tcp, -".into(),
            3,
        ),
        ("HashSwitch", "26, 8".into(), 4),
        ("RoundRobinSwitch", "3".into(), 2),
        ("CheckTCPHeader", String::new(), 2),
        ("SetUDPChecksum", String::new(), 2),
        ("SetTCPChecksum", "true".into(), 1),
        ("FixIPSrc", "192.168.9.9".into(), 1),
        ("IPGWOptions", "10.0.0.9".into(), 2),
        (
            "FirewallNF",
            "allow tcp dst port 80, allow udp, deny all".into(),
            1,
        ),
    ]
}

/// Every declaring class, from its example and the extra configurations.
fn subjects() -> Vec<Subject> {
    bricks::register().unwrap();
    let rules = rules_file();
    let extra = extra_configs(&rules);
    let mut out = Vec::new();
    for c in registry::all() {
        let Ok(e) = c.example() else {
            continue;
        };
        let inputs = e.port_count().min_in.max(1);
        let configs = std::iter::once((c.doc.example.to_string(), c.doc.outputs)).chain(
            extra
                .iter()
                .filter(|(n, _, _)| *n == c.name)
                .map(|(_, config, outputs)| (config.clone(), *outputs)),
        );
        for (config, outputs) in configs {
            let s = Subject {
                class: c.name.into(),
                config,
                inputs,
                outputs,
            };
            if declares(s.make().as_ref()) {
                out.push(s);
            }
        }
    }
    out
}

/// Whether the element declares (for all its packets, or those of its run-time cases).
fn declares(e: &dyn Element) -> bool {
    let d = e.declared();
    match e.model() {
        None => d.is_some(),
        Some(m) => d.is_some() && m.cases.iter().any(|c| c.outcome == Outcome::Runtime),
    }
}

/// Bit masks over a packet's bytes.
#[derive(Debug, Clone)]
struct Mask(Vec<u8>);

impl Mask {
    fn new(len: usize) -> Mask {
        Mask(vec![0; len])
    }
    fn bytes(&mut self, from: usize, to: usize) {
        let to = to.min(self.0.len());
        for b in self.0.iter_mut().take(to).skip(from) {
            *b = 0xff;
        }
    }
    /// The bits of a field with a stored layout, read big-endian from `base`.
    fn layout(&mut self, base: usize, l: space::Layout) {
        let len = usize::from(l.len);
        let bits = l.mask << l.shift;
        for i in 0..len {
            let at = base + usize::from(l.offset) + i;
            let byte = ((bits >> (8 * (len - 1 - i))) & 0xff) as u8;
            if let Some(b) = self.0.get_mut(at) {
                *b |= byte;
            }
        }
    }
}

/// Where the declaration's positions are in one packet.
struct Places {
    ip: Option<usize>,
    hl: usize,
    len: usize,
}

impl Places {
    fn of(p: &Packet, d: &Declared) -> Places {
        let ip = model::ip_offset(p, d.ip_at).filter(|o| *o <= p.len());
        let hl = ip
            .and_then(|o| p.data().get(o))
            .map_or(0, |b| usize::from(b & 0x0f) * 4);
        Places {
            ip,
            hl,
            len: p.len(),
        }
    }
    fn transport(&self) -> Option<usize> {
        self.ip.map(|o| o + self.hl)
    }
    fn base(&self, b: Base) -> Option<usize> {
        match b {
            Base::Frame => Some(0),
            Base::Network => self.ip,
            Base::Transport => self.transport(),
        }
    }
    /// The bits field `f` covers (no bits for lengths and annotations).
    fn field(&self, m: &mut Mask, f: Field) {
        match f {
            Field::HasVlan => m.bytes(12, 14),
            Field::IpOptions => self.field(m, Field::IpIhl),
            Field::IpChecksumOk => {
                if let Some(o) = self.ip {
                    m.bytes(o, o + self.hl.max(20));
                }
            }
            Field::IpLenOk | Field::L4Len => {
                self.field(m, Field::IpLen);
                self.field(m, Field::IpIhl);
            }
            _ => {
                if let Some(l) = f.layout() {
                    if let Some(base) = self.base(l.base) {
                        m.layout(base, l);
                    }
                    if l.base == Base::Transport {
                        self.field(m, Field::IpIhl);
                    }
                }
            }
        }
    }
    fn ip_checksum(&self, m: &mut Mask) {
        if let Some(o) = self.ip {
            m.bytes(o + 10, o + 12);
        }
    }
    fn l4_checksum(&self, m: &mut Mask) {
        if let Some(t) = self.transport() {
            for at in [2, 6, 16] {
                m.bytes(t + at, t + at + 2);
            }
            self.field(m, Field::IpIhl);
        }
    }
    fn options(&self, m: &mut Mask) {
        if let Some(o) = self.ip {
            m.bytes(o + 20, o + self.hl);
            self.field(m, Field::IpIhl);
        }
    }
    fn payload(&self, m: &mut Mask) {
        match self.transport() {
            Some(t) => {
                m.bytes(t + 4, self.len);
                self.field(m, Field::IpIhl);
            }
            None => m.bytes(0, self.len),
        }
    }
    /// What `d` lets the element read (`writes` false) or write, in this packet.
    fn mask(&self, d: &Declared, writes: bool) -> Mask {
        let mut m = Mask::new(self.len);
        let (fields, options, payload) = if writes {
            (
                &d.writes,
                d.ip_options == Access::Write,
                d.payload == Access::Write,
            )
        } else {
            (
                &d.reads,
                d.ip_options != Access::Ignore,
                d.payload != Access::Ignore,
            )
        };
        for f in fields {
            self.field(&mut m, *f);
        }
        // A checksum an element may rewrite is one it may read (an incremental update).
        if d.ip_checksum {
            self.ip_checksum(&mut m);
        }
        if d.l4_checksum {
            self.l4_checksum(&mut m);
        }
        if options {
            self.options(&mut m);
        }
        if payload {
            self.payload(&mut m);
        }
        m
    }
}

/// The annotations a declaration can name, as (field, value) of a packet.
fn annotations(p: &Packet) -> [(Field, u64); 5] {
    [
        (Field::InPort, u64::from(p.meta.ingress)),
        (Field::Paint, u64::from(p.meta.paint)),
        (Field::DstIpAnno, u64::from(u32::from(p.meta.dst_ip))),
        (
            Field::PacketType,
            model::packet_type_value(p.meta.packet_type) as u64,
        ),
        (Field::FixIpSrc, u64::from(p.meta.fix_ip_src)),
    ]
}

/// What one push gave.
#[derive(Debug)]
enum Got {
    Out(usize, Packet),
    Drop(&'static str),
}

/// Pushes `p` on `port` at `now` and checks the one-in-one-out promise.
fn push(e: &mut dyn Element, port: usize, p: Packet, now: u64) -> Result<Got, String> {
    let mut cx = Context::new(Timestamp(now));
    let v = e.push(port, p, &mut cx);
    let emitted = cx.take_emitted().count();
    let dropped = cx.take_dropped().count();
    let created = cx.take_created();
    if emitted + dropped > 0 || created > 0 {
        return Err(format!(
            "not one packet out: {emitted} emitted, {dropped} dropped, {created} created beside the verdict"
        ));
    }
    match v {
        Verdict::Out(o, q) => Ok(Got::Out(o, q)),
        Verdict::Drop(_, r) => Ok(Got::Drop(r)),
        Verdict::Done => Err("no verdict (the packet was held or passed on aside)".into()),
    }
}

/// Whether the declaration covers the push of `p` into `e` (its model leaves it to run time).
fn covered(e: &dyn Element, p: &Packet) -> bool {
    match e.model() {
        None => true,
        Some(m) => m
            .cases
            .iter()
            .find(|c| model::matches(&c.filter, p, m.ip_at))
            .is_none_or(|c| c.outcome == Outcome::Runtime),
    }
}

/// Checks the promises of one covered push: `before` went in, `got` came out.
fn promises(d: &Declared, before: &Packet, got: &Got) -> Result<(), String> {
    let q = match got {
        Got::Drop(r) if !d.drops => return Err(format!("dropped ({r}) but declares no drop")),
        Got::Drop(_) => return Ok(()),
        Got::Out(_, q) => q,
    };
    if q.len() != before.len() || q.headroom() != before.headroom() {
        return Err(format!(
            "length or data start changed: {} bytes at {} -> {} at {}",
            before.len(),
            before.headroom(),
            q.len(),
            q.headroom()
        ));
    }
    let w = Places::of(before, d).mask(d, true);
    for (i, (a, b)) in before.data().iter().zip(q.data()).enumerate() {
        if (a ^ b) & !w.0[i] != 0 {
            return Err(format!(
                "byte {i} changed {a:#04x} -> {b:#04x} outside the declared writes"
            ));
        }
    }
    for ((f, a), (_, b)) in annotations(before).into_iter().zip(annotations(q)) {
        if a != b && !d.writes.contains(&f) {
            return Err(format!("annotation {f} changed {a} -> {b}, not declared"));
        }
    }
    let offsets = |p: &Packet| {
        (
            p.meta.mac_offset,
            p.meta.network_offset,
            p.meta.transport_offset,
        )
    };
    if offsets(before) != offsets(q) && !d.sets_headers {
        return Err("header annotations moved".into());
    }
    Ok(())
}

/// Bits of `a` the element wrote (changed), or that `b` wrote, where they differ: what must
/// agree between two runs that differ only in unread bits.
fn written_differ(w: &Mask, a_in: &[u8], a: &[u8], b_in: &[u8], b: &[u8]) -> Option<usize> {
    (0..a.len()).find(|&i| {
        let wrote = ((a_in[i] ^ a[i]) | (b_in[i] ^ b[i])) & w.0[i];
        (a[i] ^ b[i]) & wrote != 0
    })
}

/// A small deterministic generator for the bits a mutation flips.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `p` with bits the declaration does not read changed (and annotations it does not read),
/// chosen by `seed`; `None` when there is nothing it does not read.
fn mutate(p: &Packet, d: &Declared, seed: u64) -> Option<Packet> {
    let r = Places::of(p, d).mask(d, false);
    let free: Vec<usize> = (0..p.len()).filter(|&i| r.0[i] != 0xff).collect();
    let mut rng = Rng(seed | 1);
    let mut q = p.duplicate();
    let mut changed = false;
    if !free.is_empty() {
        for _ in 0..1 + rng.next() % 6 {
            let i = free[(rng.next() % free.len() as u64) as usize];
            let flip = (rng.next() as u8 | 1).rotate_left((rng.next() % 8) as u32) & !r.0[i];
            q.data_mut()[i] ^= flip;
            changed |= flip != 0;
        }
    }
    let reads = |f: Field| d.reads.contains(&f);
    if !reads(Field::Paint) {
        q.meta.paint = rng.next() as u8;
        changed = true;
    }
    if !reads(Field::DstIpAnno) {
        q.meta.dst_ip = Ipv4Addr::from(rng.next() as u32);
        changed = true;
    }
    if !reads(Field::PacketType) {
        q.meta.packet_type = [
            PacketType::Host,
            PacketType::Broadcast,
            PacketType::OtherHost,
        ][(rng.next() % 3) as usize];
        changed = true;
    }
    if !reads(Field::FixIpSrc) {
        q.meta.fix_ip_src = rng.next().is_multiple_of(2);
        changed = true;
    }
    changed.then_some(q)
}

/// Runs `seq` through fresh instances of `s` on `port` checking every covered push against
/// `d`, then the last packet against a mutation of its unread bits (`seed`).
fn check(s: &Subject, d: &Declared, port: usize, seq: &[Packet], seed: u64) -> Result<(), String> {
    let (mut a, mut b) = (s.make(), s.make());
    let t0 = 1_000_000_000u64;
    let Some((last, before)) = seq.split_last() else {
        return Ok(());
    };
    for (i, p) in before.iter().enumerate() {
        let now = t0 + i as u64 * 1_000_000;
        let cov = covered(a.as_ref(), p);
        let got = push(a.as_mut(), port, p.duplicate(), now)?;
        if cov {
            promises(d, p, &got).map_err(|e| format!("packet {i}: {e}"))?;
        }
        push(b.as_mut(), port, p.duplicate(), now)?;
    }
    let now = t0 + before.len() as u64 * 1_000_000;
    if !covered(a.as_ref(), last) {
        return Ok(());
    }
    let got = push(a.as_mut(), port, last.duplicate(), now)?;
    promises(d, last, &got).map_err(|e| format!("last packet: {e}"))?;
    let Some(other) = mutate(last, d, seed) else {
        return Ok(());
    };
    if !covered(b.as_ref(), &other) {
        return Ok(());
    }
    let got_b = push(b.as_mut(), port, other.duplicate(), now)?;
    promises(d, &other, &got_b).map_err(|e| format!("mutated packet: {e}"))?;
    match (&got, &got_b) {
        (Got::Out(x, p), Got::Out(y, q)) if x == y => {
            let w = Places::of(last, d).mask(d, true);
            if let Some(i) = written_differ(&w, last.data(), p.data(), other.data(), q.data()) {
                return Err(format!(
                    "a change of unread bits changed the value written at byte {i}: {:#04x} vs {:#04x}",
                    p.data()[i],
                    q.data()[i]
                ));
            }
            let (ai, ao) = (annotations(last), annotations(p));
            let (bi, bo) = (annotations(&other), annotations(q));
            for k in 0..ai.len() {
                let f = ai[k].0;
                let wrote = ai[k].1 != ao[k].1 || bi[k].1 != bo[k].1;
                if d.writes.contains(&f) && wrote && ao[k].1 != bo[k].1 {
                    return Err(format!(
                        "a change of unread bits changed annotation {f} written: {} vs {}",
                        ao[k].1, bo[k].1
                    ));
                }
            }
            Ok(())
        }
        (Got::Drop(x), Got::Drop(y)) if x == y => Ok(()),
        _ => Err(format!(
            "a change of unread bits changed the verdict: {} vs {}",
            verdict(&got),
            verdict(&got_b)
        )),
    }
}

fn verdict(g: &Got) -> String {
    match g {
        Got::Out(o, _) => format!("output {o}"),
        Got::Drop(r) => format!("drop ({r})"),
    }
}

/// A packet the generator describes.
#[derive(Debug, Clone)]
struct Spec {
    kind: u8,
    hosts: (u8, u8),
    ports: (u16, u16),
    flags: u8,
    ttl: u8,
    options: u8,
    frag: u8,
    payload: Vec<u8>,
    flips: Vec<(usize, u8)>,
    anno: u8,
    paint: u8,
    fix: bool,
}

const HOSTS: [[u8; 4]; 5] = [
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [192, 168, 1, 5],
    [198, 51, 100, 7],
    [10, 0, 1, 1],
];
const PORTS: [u16; 6] = [53, 80, 1000, 4000, 50000, 12345];

fn spec() -> impl Strategy<Value = Spec> {
    (
        (0u8..6, 0u8..5, 0u8..5, 0usize..6, 0usize..6),
        (any::<u8>(), prop_oneof![Just(64u8), Just(1), any::<u8>()]),
        (0u8..8, 0u8..8),
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            Just(b"evil".to_vec()),
            Just(b"xx bad q".to_vec()),
        ],
        prop_oneof![
            3 => Just(Vec::new()),
            1 => prop::collection::vec((any::<usize>(), any::<u8>()), 1..3),
        ],
        (0u8..8, 0u8..4, any::<bool>()),
    )
        .prop_map(
            |(
                (kind, s, d, sp, dp),
                (flags, ttl),
                (options, frag),
                payload,
                flips,
                (anno, paint, fix),
            )| Spec {
                kind,
                hosts: (s, d),
                ports: (PORTS[sp], PORTS[dp]),
                flags,
                ttl,
                options,
                frag,
                payload,
                flips,
                anno,
                paint,
                fix,
            },
        )
}

impl Spec {
    fn packet(&self) -> Packet {
        let (a, b) = (
            HOSTS[usize::from(self.hosts.0)],
            HOSTS[usize::from(self.hosts.1)],
        );
        let (sp, dp) = self.ports;
        let f = match self.kind {
            0 | 1 => Some(Frame::tcp(a, b, sp, dp).flags(self.flags)),
            2 => Some(Frame::udp(a, b, sp, dp)),
            3 => Some(Frame::icmp(a, b, 8, 0)),
            4 => Some(Frame::ip(a, b, 47)),
            _ => None,
        };
        let mut data = match f {
            Some(mut f) => {
                f = f.payload(&self.payload).ttl(self.ttl);
                f = match self.options {
                    1 => f.ip_options(&[7, 7, 4, 0, 0, 0, 0, 0]),
                    2 => f.ip_options(&[68, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
                    3 => f.ip_options(&[131, 7, 4, 10, 0, 0, 9, 0]),
                    _ => f,
                };
                f = match self.frag {
                    1 => f.fragment(false, true, 0),
                    2 => f.fragment(false, false, 64),
                    3 => f.fragment(true, false, 0),
                    _ => f,
                };
                f.build()
            }
            None => self.payload.clone(),
        };
        for (at, x) in &self.flips {
            if !data.is_empty() {
                let i = at % data.len();
                data[i] ^= x;
            }
        }
        let mut p = Packet::from_bytes(&data);
        p.set_mac_header(0);
        let len = data.len();
        let ihl = |o: usize| data.get(o).map_or(0, |v| usize::from(v & 0x0f) * 4);
        let nh = match self.anno {
            0..=4 => Some(14),
            5 => None,
            6 => Some(0),
            _ => Some(len),
        };
        if let Some(o) = nh.filter(|o| *o <= len) {
            p.set_network_header(o);
            p.set_transport_header((o + ihl(o)).min(len));
        }
        p.meta.paint = self.paint;
        p.meta.fix_ip_src = self.fix;
        p.meta.dst_ip = Ipv4Addr::from(b);
        p
    }
}

/// The subjects, built once per test process.
fn all_subjects() -> &'static [Subject] {
    static S: std::sync::OnceLock<Vec<Subject>> = std::sync::OnceLock::new();
    S.get_or_init(subjects)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn declarations_hold_against_push(
        seq in prop::collection::vec(spec(), 1..5),
        seed in any::<u64>(),
    ) {
        let packets: Vec<Packet> = seq.iter().map(Spec::packet).collect();
        for s in all_subjects() {
            let e = s.make();
            let d = e.declared().unwrap();
            let ports = e.port_count().max_in.clamp(1, 2);
            for port in 0..ports {
                if let Err(m) = check(s, &d, port, &packets, seed) {
                    prop_assert!(false, "{}({}) on input {port}: {m}\n{d:?}", s.class, s.config);
                }
            }
        }
    }
}

/// The classes expected to declare are found (a registry change that lost them fails here).
#[test]
fn the_declaring_classes_are_tested() {
    let names: Vec<&str> = all_subjects().iter().map(|s| s.class.as_str()).collect();
    for c in [
        "SnortIDS",
        "Monitor",
        "Maglev",
        "HashSwitch",
        "IPRewriter",
        "TCPRewriter",
        "UDPRewriter",
        "MazuNAT",
        "SetTCPChecksum",
        "SetUDPChecksum",
        "CheckTCPHeader",
        "FixIPSrc",
        "IPFilter",
        "MonitorNF",
        "NatNF",
        "MaglevNF",
        "SignatureNF",
        "FirewallNF",
        "MacSwapNF",
        "DecIPTTL",
        "TTLNF",
        "EtherRewrite",
    ] {
        assert!(names.contains(&c), "{c} is not tested: {names:?}");
    }
}

/// The checker fails on wrong declarations: an undeclared write, an undeclared drop, an
/// undeclared read that decides the verdict, an undeclared read the written values depend on.
#[test]
fn the_checker_catches_wrong_declarations() {
    bricks::register().unwrap();
    let rules = rules_file();
    let subject = |class: &str, config: String, outputs: usize| Subject {
        class: class.into(),
        config,
        inputs: 1,
        outputs,
    };
    let tcp = |payload: &[u8]| {
        Spec {
            kind: 0,
            hosts: (0, 3),
            ports: (4000, 80),
            flags: 0x18,
            ttl: 64,
            options: 0,
            frag: 0,
            payload: payload.to_vec(),
            flips: Vec::new(),
            anno: 0,
            paint: 0,
            fix: false,
        }
        .packet()
    };
    let fails = |s: &Subject, d: &Declared, seq: &[Packet]| {
        (1..200u64).any(|seed| check(s, d, 0, seq, seed).is_err())
    };
    let holds = |s: &Subject, d: &Declared, seq: &[Packet]| {
        (1..200u64).all(|seed| check(s, d, 0, seq, seed).is_ok())
    };

    // Maglev rewrites the destination: declaring no writes is caught.
    let maglev = subject("Maglev", "BACKEND a 10.0.1.1 02:00:00:00:01:01".into(), 1);
    let right = maglev.make().declared().unwrap();
    let seq = [tcp(b"x")];
    assert!(holds(&maglev, &right, &seq));
    let no_writes = Declared {
        writes: Vec::new(),
        ..right.clone()
    };
    assert!(fails(&maglev, &no_writes, &seq));
    let no_checksums = Declared {
        ip_checksum: false,
        l4_checksum: false,
        ..right.clone()
    };
    assert!(fails(&maglev, &no_checksums, &seq));

    // The IDS drops on its rules' contents: declaring no drop, or no payload read, is caught.
    let ids = subject("SnortIDS", format!("RULES {}", rules.display()), 1);
    let right = ids.make().declared().unwrap();
    let evil = [tcp(b"evil")];
    assert!(holds(&ids, &right, &evil));
    let no_drop = Declared {
        drops: false,
        ..right.clone()
    };
    assert!(fails(&ids, &no_drop, &evil));
    let no_payload = Declared {
        payload: Access::Ignore,
        ..right.clone()
    };
    assert!(fails(&ids, &no_payload, &evil));

    // A NAT's written port depends on the flow: leaving the source port out of the reads is
    // caught (the mapping of a new flow after a first one differs).
    let nat = Subject {
        inputs: 2,
        ..subject(
            "MazuNAT",
            "EXTERNAL 203.0.113.1, PORTS 50000-50010".into(),
            2,
        )
    };
    let right = nat.make().declared().unwrap();
    let seq = [tcp(b"a"), tcp(b"b")];
    assert!(holds(&nat, &right, &seq));
    let no_src = Declared {
        reads: right
            .reads
            .iter()
            .copied()
            .filter(|f| *f != Field::SrcPort && *f != Field::IpSrc)
            .collect(),
        ..right.clone()
    };
    assert!(fails(&nat, &no_src, &seq));
}
