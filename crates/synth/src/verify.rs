//! Runs a chain in one mode with every exit kept in memory, and compares two runs: packets
//! per exit (bytes, timestamp, resolution, in order), drops by reason, per-NF and
//! per-element counters, the final state of every NF, and input errors — everything the
//! equivalence contract says every mode must reproduce.
//!
//! ```no_run
//! use synth::verify::{compare, run, Mode};
//! # fn demo(chain: &chain::ChainFile, inputs: &[(chain::Endpoint, std::path::PathBuf)]) -> Result<(), synth::verify::RunError> {
//! let opts = chain::RunOptions::default();
//! let naive = run(chain, inputs, &opts, Mode::Naive)?;
//! let synth = run(chain, inputs, &opts, Mode::Synth)?;
//! for d in compare(&naive, &synth) {
//!     println!("{d}");
//! }
//! # Ok(()) }
//! ```

use chain::exec::{Captured, Source};
use chain::{
    ChainFile, Endpoint, Executor, ExitSink, FinishError, NoInputError, RunOptions, SetupError,
    Summary,
};
use packet::{Precision, Timestamp};
use ports::pcap::{PcapError, PcapReader, Record};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

pub use crate::Mode;

/// Everything a run produced that modes must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    /// Packets of every exit (`NF.IFACE`, or a `ToDump` file), in output order.
    pub exits: BTreeMap<String, Captured>,
    /// Counters per NF and element, drops by reason, totals.
    pub summary: Summary,
    /// Final state per NF (`element: line`), as [`Executor::state_dump`] gives it.
    pub state: BTreeMap<String, Vec<String>>,
    /// Errors that stopped inputs early (truncated files); complete records were processed.
    pub errors: Vec<String>,
}

impl RunResult {
    /// Packets over all exits.
    pub fn packets(&self) -> usize {
        self.exits.values().map(Vec::len).sum()
    }

    /// Lines over all state dumps.
    pub fn state_lines(&self) -> usize {
        self.state.values().map(Vec::len).sum()
    }
}

type Records = Box<dyn Iterator<Item = Result<Record, PcapError>>>;

/// Why [`run`] could not run a chain (one line each; the messages name the file, the
/// interface or the NF at fault).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The chain does not build or wire.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// Neither an `--input` nor a `FromDump`.
    #[error(transparent)]
    NoInput(#[from] NoInputError),
    /// An input's interface has no `FromDevice`.
    #[error("--input {0}: NF `{nf}` has no FromDevice({iface}) (entries need one)", nf = .0.nf, iface = .0.iface)]
    NoEntry(Endpoint),
    /// An input capture cannot be opened (or is not Ethernet).
    #[error(transparent)]
    Input(#[from] PcapError),
    /// The capture of a `FromDump` element (`name`: `NF/element`) cannot be opened.
    #[error("{name}: {source}")]
    Dump {
        /// The element (`NF/element`).
        name: String,
        /// Why its file cannot be read.
        source: PcapError,
    },
    /// An exit's sink could not be finished.
    #[error(transparent)]
    Finish(#[from] FinishError),
}

fn open(path: &Path) -> Result<Records, PcapError> {
    let mut r = PcapReader::open_ethernet(path)?;
    Ok(Box::new(std::iter::from_fn(move || r.next_record())))
}

/// Runs `chain` over the pcap `inputs` (`NF.IFACE`, file) and the configurations' own
/// `FromDump` files in `mode`, merged on timestamps as `fusebox run` merges them, with every
/// exit (`ToDump` files included) kept in memory. Nothing is written.
///
/// Errors (one line): an unreadable or non-Ethernet input, an input whose interface has no
/// `FromDevice`, no input at all, a configuration that does not build, synthesis failing.
/// A truncated input is not an error here: its complete records run and the reason is in
/// [`RunResult::errors`].
pub fn run(
    chain: &ChainFile,
    inputs: &[(Endpoint, PathBuf)],
    options: &RunOptions,
    mode: Mode,
) -> Result<RunResult, RunError> {
    run_with(chain, inputs, options, mode, chain::FastOptions::default())
}

/// [`run`] with these fast-path settings (used in `fastpath` mode only): a small table
/// makes every flow's entry come and go.
pub fn run_with(
    chain: &ChainFile,
    inputs: &[(Endpoint, PathBuf)],
    options: &RunOptions,
    mode: Mode,
    fast: chain::FastOptions,
) -> Result<RunResult, RunError> {
    run_installed(chain, inputs, options, |ex| {
        mode.install(ex, fast);
    })
}

/// [`run`] with the mode set up by `install` on the freshly built (naive) executor instead:
/// for callers that run many inputs through one mode and set it up from parts made once
/// (a synthesized program laid out once, [`chain::PreparedProgram`], installed with
/// [`Executor::install_prepared`], or the fast path with other [`chain::FastOptions`]).
pub fn run_installed(
    chain: &ChainFile,
    inputs: &[(Endpoint, PathBuf)],
    options: &RunOptions,
    install: impl FnOnce(&mut Executor),
) -> Result<RunResult, RunError> {
    let mut ex = Executor::new(chain, options, |_, _| Ok(ExitSink::Memory(Vec::new())))?;
    install(&mut ex);
    if inputs.is_empty() && ex.dump_sources().is_empty() {
        return Err(chain.no_input_error().into());
    }
    let mut sources: Vec<Source> = Vec::new();
    for (ep, file) in inputs {
        let entry = ex.entry(ep).ok_or_else(|| RunError::NoEntry(ep.clone()))?;
        let records = open(file)?;
        sources.push(ex.source(format!("{ep}={}", file.display()), entry, records));
    }
    for (name, entry, path) in ex.dump_sources().to_vec() {
        let records = open(&path).map_err(|source| RunError::Dump {
            name: name.clone(),
            source,
        })?;
        sources.push(ex.source(format!("{name}={}", path.display()), entry, records));
    }
    let errors = ex.run(sources, |_| {});
    let exits = ex.finish()?;
    Ok(RunResult {
        exits,
        summary: ex.summary(),
        state: ex.state_dump(),
        errors,
    })
}

/// One packet as captured: timestamp, resolution, bytes.
pub type CapturedPacket = (Timestamp, Precision, Vec<u8>);

/// Differences of one exit or one NF listed before the rest are only counted.
pub const LISTED: usize = 16;

/// One way two runs differ. Displayed on one line, except packets: a header line, both
/// packets decoded (`a`, `b`) and a hex dump of where their bytes first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// An exit's packet counts differ.
    Count {
        /// The exit.
        exit: String,
        /// Packets in run a.
        a: usize,
        /// Packets in run b.
        b: usize,
    },
    /// Packet `index` (0-based) of `exit` differs in bytes, timestamp or resolution;
    /// `None` when that run has no such packet.
    Packet {
        /// The exit.
        exit: String,
        /// Position in the exit's output.
        index: usize,
        /// Run a's packet.
        a: Option<CapturedPacket>,
        /// Run b's packet.
        b: Option<CapturedPacket>,
    },
    /// A counter differs (`what` names it: `chain drops[filter-deny]`,
    /// `nf fw element c (Counter) output[1]`, ...). An absent drop reason or stat counts 0.
    Counter {
        /// Which counter.
        what: String,
        /// Run a's value.
        a: u64,
        /// Run b's value.
        b: u64,
    },
    /// Something that is not a counter differs: an NF or element name or class, the number
    /// of output ports, an exit only one run has, a `balanced` flag.
    Value {
        /// What.
        what: String,
        /// Run a's value.
        a: String,
        /// Run b's value.
        b: String,
    },
    /// Line `line` (0-based) of NF `nf`'s state dump; `None` when that run has fewer lines.
    State {
        /// The NF.
        nf: String,
        /// Line number.
        line: usize,
        /// Run a's line.
        a: Option<String>,
        /// Run b's line.
        b: Option<String>,
    },
    /// Input error `index` differs.
    InputError {
        /// Position in the list of errors.
        index: usize,
        /// Run a's error.
        a: Option<String>,
        /// Run b's error.
        b: Option<String>,
    },
    /// More differences of the same kind in one place than [`LISTED`]; only counted.
    More {
        /// Where (`exit lb.eth1 packets`, `nf napt state lines`).
        what: String,
        /// How many more.
        count: usize,
    },
}

fn opt_str(v: &Option<String>) -> String {
    match v {
        Some(v) => format!("\"{v}\""),
        None => "(none)".to_string(),
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Count { exit, a, b } => {
                write!(f, "exit {exit}: a has {a} packets, b has {b}")
            }
            Difference::Packet { exit, index, a, b } => {
                writeln!(f, "exit {exit} packet {index} differs:")?;
                writeln!(f, "  a: {}", describe(a.as_ref()))?;
                write!(f, "  b: {}", describe(b.as_ref()))?;
                if let (Some(a), Some(b)) = (a, b) {
                    if let Some(dump) = hex_diff(&a.2, &b.2) {
                        write!(f, "\n{dump}")?;
                    }
                }
                Ok(())
            }
            Difference::Counter { what, a, b } => write!(f, "{what}: a {a}, b {b}"),
            Difference::Value { what, a, b } => write!(f, "{what}: a {a}, b {b}"),
            Difference::State { nf, line, a, b } => write!(
                f,
                "nf {nf} state line {line}: a {}, b {}",
                opt_str(a),
                opt_str(b)
            ),
            Difference::InputError { index, a, b } => {
                write!(f, "input error {index}: a {}, b {}", opt_str(a), opt_str(b))
            }
            Difference::More { what, count } => {
                write!(f, "{what}: {count} more differences not listed")
            }
        }
    }
}

/// Compares two lists item by item: the first [`LISTED`] differences are made by `make`
/// (index, left item, right item), the rest counted in one [`Difference::More`] about `what`.
fn diff_lists<T: Clone + PartialEq>(
    a: &[T],
    b: &[T],
    what: String,
    out: &mut Vec<Difference>,
    make: impl Fn(usize, Option<T>, Option<T>) -> Difference,
) {
    let mut listed = 0;
    let mut more = 0;
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        if x == y {
            continue;
        }
        if listed < LISTED {
            listed += 1;
            out.push(make(i, x.cloned(), y.cloned()));
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push(Difference::More { what, count: more });
    }
}

/// Compares two runs; empty when they are identical. Order: exits (by name: packet count,
/// then packets in order), chain totals, per NF (counters, drops by reason, then per element:
/// input, outputs per port, drops by reason, stats, held), exits' counters when neither run
/// captured them, state dumps (per NF, line by line), input errors.
pub fn compare(a: &RunResult, b: &RunResult) -> Vec<Difference> {
    let mut out = Vec::new();
    let none = Vec::new();
    let no_lines: Vec<String> = Vec::new();
    let names: BTreeSet<&String> = a.exits.keys().chain(b.exits.keys()).collect();
    for name in names {
        let (pa, pb) = (a.exits.get(name), b.exits.get(name));
        if pa.is_none() || pb.is_none() {
            let present = |p: Option<&Captured>| match p {
                Some(p) => format!("present ({} packets)", p.len()),
                None => "absent".to_string(),
            };
            out.push(Difference::Value {
                what: format!("exit {name}"),
                a: present(pa),
                b: present(pb),
            });
        }
        let (pa, pb) = (pa.unwrap_or(&none), pb.unwrap_or(&none));
        if pa.len() != pb.len() {
            out.push(Difference::Count {
                exit: name.clone(),
                a: pa.len(),
                b: pb.len(),
            });
        }
        diff_lists(
            pa,
            pb,
            format!("exit {name} packets"),
            &mut out,
            |i, a, b| Difference::Packet {
                exit: name.clone(),
                index: i,
                a,
                b,
            },
        );
    }

    let (sa, sb) = (&a.summary, &b.summary);
    let (ta, tb) = (&sa.totals, &sb.totals);
    for (what, x, y) in [
        ("input", ta.input, tb.input),
        ("created", ta.created, tb.created),
        ("output", ta.output, tb.output),
        ("dropped", ta.dropped, tb.dropped),
        ("held", ta.held, tb.held),
    ] {
        counter(&mut out, format!("chain {what}"), x, y);
    }
    compare_maps(&mut out, "chain drops", &ta.drops, &tb.drops);
    value(&mut out, "chain balanced", &ta.balanced, &tb.balanced);

    for i in 0..sa.nfs.len().max(sb.nfs.len()) {
        let (na, nb) = (sa.nfs.get(i), sb.nfs.get(i));
        let (Some(na), Some(nb)) = (na, nb) else {
            value(
                &mut out,
                &format!("nf #{i}"),
                &na.map_or("(none)", |n| &n.name),
                &nb.map_or("(none)", |n| &n.name),
            );
            continue;
        };
        if na.name != nb.name {
            value(&mut out, &format!("nf #{i} name"), &na.name, &nb.name);
            continue;
        }
        let nf = format!("nf {}", na.name);
        for (what, x, y) in [
            ("input", na.input, nb.input),
            ("output", na.output, nb.output),
            ("created", na.created, nb.created),
            ("dropped", na.dropped, nb.dropped),
            ("held", na.held, nb.held),
        ] {
            counter(&mut out, format!("{nf} {what}"), x, y);
        }
        compare_maps(&mut out, &format!("{nf} drops"), &na.drops, &nb.drops);
        value(
            &mut out,
            &format!("{nf} balanced"),
            &na.balanced,
            &nb.balanced,
        );
        for j in 0..na.elements.len().max(nb.elements.len()) {
            let (ea, eb) = (na.elements.get(j), nb.elements.get(j));
            let (Some(ea), Some(eb)) = (ea, eb) else {
                value(
                    &mut out,
                    &format!("{nf} element #{j}"),
                    &ea.map_or("(none)", |e| &e.name),
                    &eb.map_or("(none)", |e| &e.name),
                );
                continue;
            };
            if ea.name != eb.name || ea.class != eb.class {
                value(
                    &mut out,
                    &format!("{nf} element #{j}"),
                    &format!("{} ({})", ea.name, ea.class),
                    &format!("{} ({})", eb.name, eb.class),
                );
                continue;
            }
            let el = format!("{nf} element {} ({})", ea.name, ea.class);
            counter(&mut out, format!("{el} input"), ea.input, eb.input);
            if ea.output.len() != eb.output.len() {
                value(
                    &mut out,
                    &format!("{el} output ports"),
                    &ea.output.len(),
                    &eb.output.len(),
                );
            }
            for (k, (x, y)) in ea.output.iter().zip(&eb.output).enumerate() {
                counter(&mut out, format!("{el} output[{k}]"), *x, *y);
            }
            compare_maps(&mut out, &format!("{el} drops"), &ea.drops, &eb.drops);
            compare_maps(&mut out, &format!("{el} stats"), &ea.stats, &eb.stats);
            counter(&mut out, format!("{el} held"), ea.held, eb.held);
        }
    }

    // Exit counters, for exits neither run captured (the captures say more).
    let xa: BTreeMap<&String, _> = sa.exits.iter().map(|x| (&x.name, x)).collect();
    let xb: BTreeMap<&String, _> = sb.exits.iter().map(|x| (&x.name, x)).collect();
    let names: BTreeSet<&String> = xa.keys().chain(xb.keys()).copied().collect();
    for name in names {
        if a.exits.contains_key(name) || b.exits.contains_key(name) {
            continue;
        }
        let (x, y) = (xa.get(name), xb.get(name));
        counter(
            &mut out,
            format!("exit {name} packets"),
            x.map_or(0, |x| x.packets),
            y.map_or(0, |y| y.packets),
        );
        counter(
            &mut out,
            format!("exit {name} bytes"),
            x.map_or(0, |x| x.bytes),
            y.map_or(0, |y| y.bytes),
        );
    }

    let nfs: BTreeSet<&String> = a.state.keys().chain(b.state.keys()).collect();
    for nf in nfs {
        let (la, lb) = (
            a.state.get(nf).unwrap_or(&no_lines),
            b.state.get(nf).unwrap_or(&no_lines),
        );
        diff_lists(
            la,
            lb,
            format!("nf {nf} state lines"),
            &mut out,
            |i, a, b| Difference::State {
                nf: nf.clone(),
                line: i,
                a,
                b,
            },
        );
    }

    for i in 0..a.errors.len().max(b.errors.len()) {
        let (x, y) = (a.errors.get(i), b.errors.get(i));
        if x != y {
            out.push(Difference::InputError {
                index: i,
                a: x.cloned(),
                b: y.cloned(),
            });
        }
    }
    out
}

fn counter(out: &mut Vec<Difference>, what: String, a: u64, b: u64) {
    if a != b {
        out.push(Difference::Counter { what, a, b });
    }
}

fn value<T: fmt::Display + PartialEq + ?Sized>(
    out: &mut Vec<Difference>,
    what: &str,
    a: &T,
    b: &T,
) {
    if a != b {
        out.push(Difference::Value {
            what: what.to_string(),
            a: a.to_string(),
            b: b.to_string(),
        });
    }
}

/// Counters by key; a key only one side has counts 0 on the other.
fn compare_maps(
    out: &mut Vec<Difference>,
    what: &str,
    a: &BTreeMap<String, u64>,
    b: &BTreeMap<String, u64>,
) {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for k in keys {
        let (x, y) = (
            a.get(k).copied().unwrap_or(0),
            b.get(k).copied().unwrap_or(0),
        );
        if x != y {
            out.push(Difference::Counter {
                what: format!("{what}[{k}]"),
                a: x,
                b: y,
            });
        }
    }
}

/// `SECS.NANOS us|ns LEN bytes  DECODED`, or `(none)`.
fn describe(p: Option<&CapturedPacket>) -> String {
    match p {
        None => "(none)".to_string(),
        Some((ts, precision, data)) => format!(
            "{}.{:09} {} {} bytes  {}",
            ts.secs(),
            ts.subsec_nanos(),
            match precision {
                Precision::Micro => "us",
                Precision::Nano => "ns",
            },
            data.len(),
            decode(data)
        ),
    }
}

/// Hex dump of both packets around their first differing byte (32 bytes from the 16-byte
/// line it is on, `^^` under the bytes that differ); `None` when the bytes are equal.
fn hex_diff(a: &[u8], b: &[u8]) -> Option<String> {
    let first = match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => i,
        None if a.len() == b.len() => return None,
        None => a.len().min(b.len()),
    };
    let start = first & !15;
    let end = start + 32;
    let mut s = format!("  bytes differ from offset {first:#06x}:");
    for (label, p) in [("a", a), ("b", b)] {
        let _ = write!(s, "\n  {label} {start:04x}:");
        match p.get(start..end.min(p.len())) {
            Some(bytes) if !bytes.is_empty() => {
                for byte in bytes {
                    let _ = write!(s, " {byte:02x}");
                }
            }
            _ => s.push_str(" (ends)"),
        }
    }
    let marks: String = (start..end.min(a.len().max(b.len())))
        .map(|i| if a.get(i) != b.get(i) { " ^^" } else { "   " })
        .collect();
    let _ = write!(s, "\n         {}", marks.trim_end());
    Some(s)
}

fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn ok(valid: bool) -> &'static str {
    if valid {
        "ok"
    } else {
        "BAD"
    }
}

/// A one-line decoding of an Ethernet frame: `SRC>DST`, then IPv4 (addresses, protocol,
/// TTL, total length, id, header checksum), TCP/UDP (ports, flags, checksum), ICMP (type,
/// code) or ARP; other EtherTypes by number. Never panics, whatever the bytes.
pub fn decode(frame: &[u8]) -> String {
    use wire::ethernet::{ethertype, Frame};
    let Ok(eth) = Frame::new_checked(frame) else {
        return format!("truncated Ethernet ({} bytes)", frame.len());
    };
    let mut s = format!("{}>{}", eth.src_addr(), eth.dst_addr());
    match eth.ethertype() {
        ethertype::IPV4 => decode_ipv4(&mut s, eth.payload()),
        ethertype::ARP => decode_arp(&mut s, eth.payload()),
        ethertype::IPV6 => s.push_str(" IPv6"),
        t => {
            let _ = write!(s, " type {t:#06x}");
        }
    }
    s
}

fn decode_arp(s: &mut String, b: &[u8]) {
    use wire::arp::{operation, Packet};
    let Ok(p) = Packet::new_checked(b) else {
        s.push_str(" ARP truncated");
        return;
    };
    let (spa, tpa) = (p.sender_protocol_addr(), p.target_protocol_addr());
    let _ = match p.operation() {
        operation::REQUEST => write!(s, " ARP who-has {tpa} tell {spa}"),
        operation::REPLY => write!(
            s,
            " ARP reply {spa} is-at {}",
            mac(&p.sender_hardware_addr().0)
        ),
        op => write!(s, " ARP op {op} {spa}>{tpa}"),
    };
}

fn decode_ipv4(s: &mut String, b: &[u8]) {
    use wire::ipv4::{protocol, Packet};
    let ip = match Packet::new_checked(b) {
        Ok(ip) => ip,
        Err(e) => {
            let _ = write!(s, " IPv4 {e} ({} bytes)", b.len());
            return;
        }
    };
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let proto = ip.protocol();
    let name = match proto {
        protocol::TCP => "TCP".to_string(),
        protocol::UDP => "UDP".to_string(),
        protocol::ICMP => "ICMP".to_string(),
        p => format!("proto {p}"),
    };
    let _ = write!(
        s,
        " IPv4 {src}>{dst} {name} ttl {} len {} id {} cksum {}",
        ip.ttl(),
        ip.total_len(),
        ip.ident(),
        ok(ip.verify_checksum())
    );
    if ip.is_fragment() {
        let _ = write!(
            s,
            " frag off {}{}",
            ip.frag_offset(),
            if ip.more_frags() { " MF" } else { "" }
        );
        if ip.frag_offset() != 0 {
            return;
        }
    }
    let l4 = ip.payload();
    match proto {
        protocol::TCP => decode_tcp(s, l4, src, dst),
        protocol::UDP => decode_udp(s, l4, src, dst),
        protocol::ICMP => decode_icmp(s, l4),
        _ => {}
    }
}

fn decode_tcp(s: &mut String, b: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    use wire::tcp::{flags, Packet};
    let Ok(t) = Packet::new_checked(b) else {
        s.push_str(" | TCP truncated");
        return;
    };
    let f = t.flags();
    let mut fl = String::new();
    for (bit, c) in [
        (flags::SYN, 'S'),
        (flags::FIN, 'F'),
        (flags::RST, 'R'),
        (flags::PSH, 'P'),
        (flags::URG, 'U'),
        (flags::ECE, 'E'),
        (flags::CWR, 'W'),
        (flags::ACK, '.'),
    ] {
        if f & bit != 0 {
            fl.push(c);
        }
    }
    let _ = write!(
        s,
        " | TCP {}>{} [{fl}] seq {} ack {} cksum {}",
        t.src_port(),
        t.dst_port(),
        t.seq_number(),
        t.ack_number(),
        ok(t.verify_checksum_v4(src, dst))
    );
}

fn decode_udp(s: &mut String, b: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    use wire::udp::Packet;
    let Ok(u) = Packet::new_checked(b) else {
        s.push_str(" | UDP truncated");
        return;
    };
    let _ = write!(
        s,
        " | UDP {}>{} len {} cksum {}",
        u.src_port(),
        u.dst_port(),
        u.len(),
        ok(u.verify_checksum_v4(src, dst))
    );
}

fn decode_icmp(s: &mut String, b: &[u8]) {
    use wire::icmpv4::Packet;
    let Ok(i) = Packet::new_checked(b) else {
        s.push_str(" | ICMP truncated");
        return;
    };
    let _ = write!(
        s,
        " | ICMP type {} code {} cksum {}",
        i.msg_type(),
        i.msg_code(),
        ok(i.verify_checksum())
    );
    if matches!(
        i.msg_type(),
        wire::icmpv4::msg_type::ECHO_REPLY | wire::icmpv4::msg_type::ECHO_REQUEST
    ) {
        let _ = write!(s, " echo id {} seq {}", i.ident(), i.seq_no());
    }
}

/// The chain an exported configuration (`fusebox synth --click`) runs as, and the names its
/// runs use for the original chain's endpoints: `NF.IFACE` becomes `STEM.NF_IFACE`.
pub fn exported_chain(path: &Path) -> (ChainFile, impl Fn(&Endpoint) -> Endpoint) {
    let chain = ChainFile::single(path);
    let stem = chain
        .nfs
        .first()
        .map(|n| n.name.clone())
        .unwrap_or_default();
    let map = move |e: &Endpoint| Endpoint {
        nf: stem.clone(),
        iface: crate::export::device(&e.nf, &e.iface),
    };
    (chain, map)
}

/// Compares a run of a chain (`a`) with a run of its exported configuration (`b`, see
/// [`exported_chain`]): packets per exit (`NF.IFACE` ↔ `STEM.NF_IFACE`), packets in, out
/// and dropped, and the state of every stateful element both have (`NF/NAME` in both).
/// Element counters and drop reasons are not compared: the configurations have different
/// elements.
pub fn compare_export(a: &RunResult, b: &RunResult, stem: &str) -> Vec<Difference> {
    let mut renamed = a.clone();
    renamed.exits = a
        .exits
        .iter()
        .map(|(name, p)| {
            let n = match Endpoint::parse(name) {
                Some(e) if !name.contains('/') => {
                    format!("{stem}.{}", crate::export::device(&e.nf, &e.iface))
                }
                _ => name.clone(),
            };
            (n, p.clone())
        })
        .collect();
    let mut out: Vec<Difference> = compare(&renamed, b)
        .into_iter()
        .filter(|d| {
            matches!(
                d,
                Difference::Count { .. } | Difference::Packet { .. } | Difference::More { .. }
            ) || matches!(d, Difference::Value { what, .. } if what.starts_with("exit "))
        })
        .filter(|d| !matches!(d, Difference::More { what, .. } if !what.starts_with("exit ")))
        .collect();
    let (ta, tb) = (&a.summary.totals, &b.summary.totals);
    for (what, x, y) in [
        ("packets in", ta.input, tb.input),
        ("packets out", ta.output, tb.output),
        ("packets dropped", ta.dropped, tb.dropped),
    ] {
        if x != y {
            out.push(Difference::Counter {
                what: format!("chain {what}"),
                a: x,
                b: y,
            });
        }
    }
    // State per element: `NF/NAME` in both runs.
    let per_element = |state: &BTreeMap<String, Vec<String>>, scoped: bool| {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (nf, lines) in state {
            for l in lines {
                let (el, rest) = l.split_once(": ").unwrap_or((l.as_str(), ""));
                let key = if scoped {
                    format!("{nf}/{el}")
                } else {
                    el.to_string()
                };
                m.entry(key).or_default().push(rest.to_string());
            }
        }
        m
    };
    let (sa, sb) = (per_element(&a.state, true), per_element(&b.state, false));
    for (el, la) in &sa {
        if let Some(lb) = sb.get(el) {
            let mut listed = Vec::new();
            diff_lists(
                la,
                lb,
                format!("nf {el} state lines"),
                &mut listed,
                |line, x, y| Difference::State {
                    nf: el.clone(),
                    line,
                    a: x,
                    b: y,
                },
            );
            out.extend(listed);
        } else {
            out.push(Difference::Value {
                what: format!("state of {el}"),
                a: format!("{} lines", la.len()),
                b: "absent".to_string(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// Writes a fig5 trace (TCP, UDP to 1234 and 53, ICMP) to `dir/trace.pcap`.
    fn trace(dir: &Path) -> PathBuf {
        let cfg = ports::gen::GenConfig {
            packets: 600,
            flows: 30,
            mix: ports::gen::Mix {
                tcp: 1,
                udp: 2,
                icmp: 1,
            },
            src_prefix: (Ipv4Addr::new(192, 168, 0, 0), 24),
            dst_prefix: (Ipv4Addr::new(10, 0, 2, 0), 24),
            dst_ports: ports::gen::PortSpec::List(vec![1234, 53]),
            seed: 5,
            ..Default::default()
        };
        let path = dir.join("trace.pcap");
        let mut w = ports::pcap::PcapWriter::create(&path, Precision::Micro, 1).unwrap();
        for (ts, frame) in ports::gen::generate(&cfg) {
            w.write(ts, &frame).unwrap();
        }
        w.finish().unwrap();
        path
    }

    fn fig5(mode: Mode, name: &str) -> RunResult {
        let dir = tempfile::Builder::new()
            .prefix(&format!("synth-verify-{name}-"))
            .tempdir()
            .unwrap();
        let input = trace(dir.path());
        let chain = ChainFile::load(&root().join("examples/fig5/chain.toml")).unwrap();
        let opts = RunOptions {
            reflect: vec![Endpoint::parse("lb.eth1").unwrap()],
            ..RunOptions::default()
        };
        let ep = Endpoint::parse("napt.eth0").unwrap();
        run(&chain, &[(ep, input)], &opts, mode).unwrap()
    }

    #[test]
    fn modes_parse() {
        assert_eq!("naive".parse::<Mode>(), Ok(Mode::Naive));
        assert_eq!("synth".parse::<Mode>(), Ok(Mode::Synth));
        assert_eq!("fastpath".parse::<Mode>(), Ok(Mode::Fastpath));
        assert_eq!("parallel".parse::<Mode>(), Ok(Mode::Parallel));
        assert_eq!("merged".parse::<Mode>(), Ok(Mode::Merged));
        let e = "fast".parse::<Mode>().unwrap_err();
        assert_eq!(e, crate::mode::UnknownMode("fast".into()));
        assert_eq!(
            e.to_string(),
            "unknown mode `fast`: expected naive, synth, fastpath, parallel or merged"
        );
    }

    #[test]
    fn identical_runs_and_each_kind_of_alteration() {
        let a = fig5(Mode::Naive, "a");
        let b = fig5(Mode::Synth, "b");
        assert!(a.packets() > 100, "the run has output: {}", a.packets());
        assert!(a.state_lines() > 0, "NAT mappings in the state");
        assert!(a.summary.totals.dropped > 0);
        assert_eq!(compare(&a, &b), Vec::new());
        assert_eq!(compare(&a, &a.clone()), Vec::new());

        // One byte of one packet.
        let exit = "lb.eth1".to_string();
        let mut c = a.clone();
        c.exits.get_mut(&exit).unwrap()[3].2[30] ^= 0x01;
        let d = compare(&a, &c);
        assert_eq!(d.len(), 1, "{d:?}");
        let Difference::Packet {
            exit: e,
            index,
            a: Some(x),
            b: Some(y),
        } = &d[0]
        else {
            panic!("{d:?}")
        };
        assert_eq!((e.as_str(), *index), ("lb.eth1", 3));
        assert_eq!(x, &a.exits[&exit][3]);
        assert_eq!(y, &c.exits[&exit][3]);
        let text = d[0].to_string();
        assert!(text.starts_with("exit lb.eth1 packet 3 differs:"), "{text}");
        assert!(text.contains("  a: ") && text.contains("  b: "), "{text}");
        assert!(text.contains("IPv4 10.0.0.1>10.0.1."), "{text}");
        assert!(
            text.contains("cksum BAD"),
            "the flipped byte breaks a checksum: {text}"
        );
        assert!(text.contains("bytes differ from offset 0x001e"), "{text}");

        // A timestamp alone.
        let mut c = a.clone();
        c.exits.get_mut(&exit).unwrap()[0].0 .0 += 1;
        let d = compare(&a, &c);
        assert!(
            matches!(&d[..], [Difference::Packet { index: 0, .. }]),
            "{d:?}"
        );
        assert!(!d[0].to_string().contains("bytes differ"));

        // A packet fewer.
        let mut c = a.clone();
        c.exits.get_mut(&exit).unwrap().pop();
        let n = a.exits[&exit].len();
        let d = compare(&a, &c);
        assert_eq!(
            d,
            vec![
                Difference::Count {
                    exit: exit.clone(),
                    a: n,
                    b: n - 1
                },
                Difference::Packet {
                    exit: exit.clone(),
                    index: n - 1,
                    a: a.exits[&exit].last().cloned(),
                    b: None
                }
            ]
        );

        // One element counter.
        let mut c = a.clone();
        let nf = c.summary.nfs.iter_mut().find(|n| n.name == "fw").unwrap();
        let el = &mut nf.elements[1];
        let label = format!("nf fw element {} ({}) output[0]", el.name, el.class);
        el.output[0] += 1;
        let d = compare(&a, &c);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            matches!(&d[0], Difference::Counter { what, a: x, b: y } if *what == label && x + 1 == *y),
            "{d:?}"
        );

        // One drop reason of the chain.
        let mut c = a.clone();
        *c.summary
            .totals
            .drops
            .entry("filter-deny".into())
            .or_default() += 2;
        let d = compare(&a, &c);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].to_string().starts_with("chain drops[filter-deny]: a "),
            "{}",
            d[0]
        );

        // One state line.
        let mut c = a.clone();
        let (nf, lines) = c.state.iter_mut().find(|(_, l)| !l.is_empty()).unwrap();
        let nf = nf.clone();
        let old = lines[0].clone();
        lines[0].push('x');
        let d = compare(&a, &c);
        assert_eq!(
            d,
            vec![Difference::State {
                nf: nf.clone(),
                line: 0,
                a: Some(old.clone()),
                b: Some(format!("{old}x"))
            }]
        );
        assert!(d[0]
            .to_string()
            .starts_with(&format!("nf {nf} state line 0: a \"")));

        // An input error.
        let mut c = a.clone();
        c.errors.push("t.pcap: truncated record".into());
        let d = compare(&a, &c);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            d[0].to_string(),
            "input error 0: a (none), b \"t.pcap: truncated record\""
        );
    }

    #[test]
    fn many_differing_packets_are_counted_past_the_listed_ones() {
        let a = fig5(Mode::Naive, "many");
        let mut c = a.clone();
        let exit = "lb.eth1".to_string();
        let n = a.exits[&exit].len();
        for p in c.exits.get_mut(&exit).unwrap() {
            p.2[0] ^= 0xff;
        }
        let d = compare(&a, &c);
        assert_eq!(d.len(), LISTED + 1);
        assert_eq!(
            d[LISTED],
            Difference::More {
                what: format!("exit {exit} packets"),
                count: n - LISTED
            }
        );
    }

    #[test]
    fn decode_never_panics_and_reads_headers() {
        for len in 0..80 {
            let mut f = vec![0u8; len];
            if len > 14 {
                f[12] = 8;
                f[14] = 0x45;
            }
            let _ = decode(&f);
        }
        let gen = ports::gen::generate(&ports::gen::GenConfig {
            mix: ports::gen::Mix {
                tcp: 1,
                udp: 0,
                icmp: 0,
            },
            packets: 1,
            ..Default::default()
        });
        let (_, f) = gen.into_iter().next().unwrap();
        let s = decode(&f);
        assert!(
            s.starts_with("02:00:00:00:00:01>02:00:00:00:00:02 IPv4 10.0."),
            "{s}"
        );
        assert!(
            s.contains(" TCP ttl 64 len 46 id ") && s.contains("cksum ok | TCP "),
            "{s}"
        );
        assert!(s.contains("[S] seq"), "a one-packet TCP flow is a SYN: {s}");
    }

    #[test]
    fn run_errors_are_one_line() {
        let chain = ChainFile::load(&root().join("examples/fig5/chain.toml")).unwrap();
        let opts = RunOptions::default();
        let e = run(&chain, &[], &opts, Mode::Naive).unwrap_err();
        assert!(matches!(e, RunError::NoInput(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "no input: give --input NF.IFACE=FILE (entries: napt.eth0)"
        );
        let ep = Endpoint::parse("napt.eth0").unwrap();
        let e = run(
            &chain,
            &[(ep, PathBuf::from("/nonexistent/x.pcap"))],
            &opts,
            Mode::Synth,
        )
        .unwrap_err();
        assert!(matches!(e, RunError::Input(PcapError::Io { .. })), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("x.pcap") && !e.contains('\n'), "{e}");
        let ep = Endpoint::parse("fw.eth9").unwrap();
        let e = run(&chain, &[(ep, PathBuf::from("x.pcap"))], &opts, Mode::Naive).unwrap_err();
        assert!(
            matches!(&e, RunError::NoEntry(ep) if ep.iface == "eth9"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "--input fw.eth9: NF `fw` has no FromDevice(eth9) (entries need one)"
        );
    }
}
