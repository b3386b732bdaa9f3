//! FastClick as a peer of `fusebox bench` (`--fastclick PATH`): the chain a group measures,
//! written as one FastClick configuration, timed in the same repetitions as FuseBox's
//! configurations, and checked once per chain to send out the same packets.
//!
//! **The configuration** ([`configuration`]) is the chain as the executor wired it
//! ([`chain::Executor`]: every NF's elements with their qualified names `NF/NAME` and their
//! configurations as written): links between NFs become plain connections (a linked
//! `ToDevice`'s inputs go where the linked `FromDevice`'s output goes); the entry's
//! `FromDevice` becomes `FromDump(trace) -> ReplayUnqueue(STOP 1, BURST batch)`, which
//! preloads the trace and replays it in bursts; other unlinked `FromDevice`s become `Idle`;
//! each exit (an unlinked interface) becomes a `Counter` followed by `Discard` (timed runs)
//! or `ToDump` (the check run); outputs the chain leaves unconnected (FuseBox drops what
//! they emit) go to one `Discard`. `IPFilter`'s `FILE` arguments (FuseBox's extension) are
//! replaced by the rules they stand for, as [`elements::ipfilter::rule_texts`] reads them.
//!
//! **Timing** is taken inside FastClick, so that its start-up (parsing, building the
//! `IPFilter`, loading the trace) is not counted: a `DriverManager` waits for the first
//! pass (the warm-up, as FuseBox's configurations get one), reads `now_steady`, starts
//! `passes` more passes (`ReplayUnqueue`'s `stop` and `active` handlers), waits for them to
//! end and prints the time again with the exits' counters. One FastClick process runs per
//! repetition, after FuseBox's configurations have taken their turns for that repetition;
//! its rate is the trace's packets times `passes` over the time between the two readings.
//!
//! **The check** ([`check`]) runs the chain once in FuseBox in every mode (exits kept in
//! memory) and once in FastClick (exits written with `ToDump`) over the same trace, and
//! compares each exit's packets in order, byte for byte, modulo two known differences
//! ([`compare_exit`]): the NAT source ports each side picks (Click and FastClick draw them
//! at random, FuseBox from a seeded hash), and FastClick's UDP checksum once an incremental
//! update made it zero (FastClick writes 0x0000 and stops updating it; FuseBox writes
//! 0xFFFF, RFC 768).

use crate::error::CliError;
use chain::{ChainFile, Endpoint, Executor, ExitSink, Place, RunOptions};
use elements::Role;
use ports::pcap::Record;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use synth::Mode;

/// How long one FastClick run may take before it is killed.
const TIMEOUT: Duration = Duration::from_secs(900);

/// The tag of the line the timed configuration prints.
const TAG: &str = "fusebox-bench-fastclick";

/// Checks that `path` is a FastClick (or Click) userlevel binary that runs: it exists and
/// runs a configuration that does nothing (`-e 'DriverManager(stop)'`; FastClick's
/// `--version` crashes at this snapshot). The error names the path.
pub(super) fn binary(path: &Path) -> Result<PathBuf, CliError> {
    let bad = |why: String| CliError::Invalid(format!("--fastclick {}: {why}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot use it: {e}")))?;
    if !meta.is_file() {
        return Err(bad(
            "not a file (expected FastClick's userlevel/click)".into()
        ));
    }
    let out = Command::new(path)
        .args(["-e", "DriverManager(stop)"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| bad(format!("does not run: {e}")))?;
    if !out.status.success() {
        return Err(bad(format!(
            "an empty configuration failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(path.to_path_buf())
}

/// Where the generated configuration's exits go.
#[derive(Clone, Copy, Debug)]
pub(super) enum Exits<'a> {
    /// Counted, then discarded (timed runs; a `DriverManager` does the timing).
    Count {
        /// Passes timed after the warm-up pass.
        passes: u64,
    },
    /// Counted, then written with `ToDump` into this folder, one file per exit (the check
    /// run: one pass, no timing).
    Dump(&'a Path),
}

/// One exit of a generated configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ExitInfo {
    /// The exit's name as FuseBox's executor gives it (`NF.IFACE`).
    pub(super) name: String,
    /// The `Counter` that counts it.
    pub(super) counter: String,
    /// The capture it is written to (the check run).
    pub(super) dump: Option<PathBuf>,
}

/// A generated FastClick configuration.
#[derive(Clone, Debug)]
pub(super) struct Generated {
    /// The configuration's text.
    pub(super) text: String,
    /// Its exits, in the order of their names.
    pub(super) exits: Vec<ExitInfo>,
}

/// A string as a Click configuration argument: double-quoted, `\` and `"` escaped.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Where a packet pushed into input `port` of element `g` is processed.
enum Target {
    /// An element's input.
    Element(u32, u32),
    /// An exit, by name.
    Exit(String),
    /// Nowhere: a link whose receiving `FromDevice` has no successor (dropped).
    Drop,
}

/// The name of exit element `g` (as the executor names exits).
fn exit_name(ex: &Executor, g: u32) -> String {
    let nf = &ex.nfs()[ex.element_nf(g as usize) as usize].name;
    match ex.element(g as usize).role() {
        Role::ToDevice(iface) => format!("{nf}.{iface}"),
        Role::ToDump(p) => p.display().to_string(),
        _ => ex.element_name(g as usize),
    }
}

fn target(ex: &Executor, g: u32, port: u32) -> Target {
    let (mut g, mut port) = (g, port);
    for _ in 0..=ex.element_count() {
        match ex.place(g as usize) {
            Place::Link(from) => match ex.edge(from as usize, 0) {
                Some((_, n, np)) => (g, port) = (n, np),
                None => return Target::Drop,
            },
            Place::Exit => return Target::Exit(exit_name(ex, g)),
            Place::Inner => return Target::Element(g, port),
        }
    }
    Target::Drop
}

/// The configuration string FastClick gets for element `g`: as written, except an
/// `IPFilter`'s `FILE` arguments, replaced by their rules.
fn element_config(ex: &Executor, chain: &ChainFile, g: u32) -> Result<String, CliError> {
    let ni = ex.element_nf(g as usize) as usize;
    let nf = &ex.nfs()[ni];
    let l = (g - ex.global(ni, 0)) as usize;
    let config = &nf.configs[l];
    if nf.classes[l] != "IPFilter" {
        return Ok(config.clone());
    }
    let args = elements::Args::parse(config)
        .map_err(|e| CliError::Invalid(format!("{}: {e}", ex.element_name(g as usize))))?;
    if !args
        .all()
        .iter()
        .any(|a| a.keyword.as_deref() == Some("FILE"))
    {
        return Ok(config.clone());
    }
    let base = chain
        .nfs
        .iter()
        .find(|s| s.name == nf.name)
        .and_then(|s| s.click.parent())
        .unwrap_or(Path::new("."));
    let rules = elements::ipfilter::rule_texts(&args, base)
        .map_err(|e| CliError::Invalid(format!("{}: {e}", ex.element_name(g as usize))))?;
    Ok(rules
        .iter()
        .map(|(text, _)| text.as_str())
        .collect::<Vec<_>>()
        .join(",\n    "))
}

/// `chain` (as `ex` wired it) as one FastClick configuration fed `trace` at `entry` in bursts
/// of `burst`, its exits as `exits` says (see the module documentation).
pub(super) fn configuration(
    ex: &Executor,
    chain: &ChainFile,
    entry: &Endpoint,
    trace: &Path,
    burst: usize,
    exits: Exits<'_>,
) -> Result<Generated, CliError> {
    let (ni, l) = ex
        .entry(entry)
        .ok_or_else(|| CliError::Invalid(format!("{}: no entry {entry}", chain.path.display())))?;
    let entry_g = ex.global(ni, l);
    let n = ex.element_count() as u32;
    let linked: BTreeSet<u32> = (0..n)
        .filter_map(|g| match ex.place(g as usize) {
            Place::Link(t) => Some(t),
            _ => None,
        })
        .collect();
    let exit_names: BTreeSet<String> = (0..n)
        .filter(|&g| matches!(ex.place(g as usize), Place::Exit))
        .map(|g| exit_name(ex, g))
        .collect();
    let exit_infos: Vec<ExitInfo> = exit_names
        .iter()
        .enumerate()
        .map(|(i, name)| ExitInfo {
            name: name.clone(),
            counter: format!("fcb_exit{i}"),
            dump: match exits {
                Exits::Dump(dir) => Some(dir.join(format!("exit{i}.pcap"))),
                Exits::Count { .. } => None,
            },
        })
        .collect();
    let counter_of: BTreeMap<&str, &str> = exit_infos
        .iter()
        .map(|x| (x.name.as_str(), x.counter.as_str()))
        .collect();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Generated by `fusebox bench --fastclick`: {} ({} NFs) as one FastClick configuration.\n\
         // Elements keep their qualified names (NF/NAME); links between NFs are plain connections;\n\
         // the entry {entry} is the trace replayed in bursts of {burst}; exits are counted.",
        chain.path.display(),
        ex.nfs().len()
    );
    let _ = writeln!(
        s,
        "fcb_src :: FromDump({}, STOP false, TIMING false);\nfcb_replay :: ReplayUnqueue(STOP 1, BURST {burst}, ACTIVE true);\nfcb_src -> fcb_replay;",
        quoted(&trace.display().to_string())
    );
    let mut drop_used = false;
    let mut conns = Vec::new();
    // `from` is the source written as `NAME[PORT]`.
    let mut connect = |from: String, t: Target, conns: &mut Vec<String>| match t {
        Target::Element(g, p) => {
            conns.push(format!("{from} -> [{p}]{};", ex.element_name(g as usize)));
        }
        Target::Exit(name) => {
            if let Some(c) = counter_of.get(name.as_str()) {
                conns.push(format!("{from} -> {c};"));
            }
        }
        Target::Drop => {
            drop_used = true;
            conns.push(format!("{from} -> fcb_drop;"));
        }
    };
    for g in 0..n {
        let name = ex.element_name(g as usize);
        let role = ex.element(g as usize).role();
        match (&role, ex.place(g as usize)) {
            (_, Place::Link(_) | Place::Exit) => continue,
            (Role::FromDevice(_), _) if g == entry_g => {
                if let Some((_, t, tp)) = ex.edge(g as usize, 0) {
                    connect("fcb_replay".into(), target(ex, t, tp), &mut conns);
                }
                continue;
            }
            (Role::FromDevice(_), _) if linked.contains(&g) => continue,
            (Role::FromDevice(_), _) => {
                let _ = writeln!(s, "{name} :: Idle;");
            }
            (Role::FromDump(_), _) => {
                return Err(CliError::Invalid(format!(
                    "--fastclick: {name} reads a capture (FromDump inside an NF): not supported"
                )))
            }
            _ => {
                let class = ex.element(g as usize).class_name();
                let cfg = element_config(ex, chain, g)?;
                let _ = writeln!(s, "{name} :: {class}({cfg});");
            }
        }
        for p in 0..ex.outputs(g as usize) {
            let from = format!("{name}[{p}]");
            match ex.edge(g as usize, p) {
                Some((_, t, tp)) => connect(from, target(ex, t, tp), &mut conns),
                None => connect(from, Target::Drop, &mut conns),
            }
        }
    }
    if drop_used {
        s.push_str("fcb_drop :: Discard;\n");
    }
    for x in &exit_infos {
        match &x.dump {
            Some(f) => {
                let _ = writeln!(
                    s,
                    "{} :: Counter -> ToDump({}, ENCAP ETHER);",
                    x.counter,
                    quoted(&f.display().to_string())
                );
            }
            None => {
                let _ = writeln!(s, "{} :: Counter -> Discard;", x.counter);
            }
        }
    }
    // Connections last: Click wants elements declared before they are connected.
    for c in &conns {
        s.push_str(c);
        s.push('\n');
    }
    if let Exits::Count { passes } = exits {
        let counts: Vec<String> = (0..exit_infos.len())
            .map(|i| format!("$(fcb_exit{i}.count)"))
            .collect();
        let counts = counts.join(" ");
        let _ = writeln!(
            s,
            "// The first pass warms up; then {passes} passes are timed with the steady clock\n\
             // (each line: the clock, then the exits' counters).\n\
             fcb_driver :: DriverManager(\n    wait_stop,\n    print \"{TAG} start $(now_steady) {counts}\",\n    \
             write fcb_replay.stop {passes},\n    write fcb_replay.active true,\n    wait_stop,\n    \
             print \"{TAG} end $(now_steady) {counts}\",\n    stop);"
        );
    }
    Ok(Generated {
        text: s,
        exits: exit_infos,
    })
}

/// What one FastClick process printed and how it ended.
struct Ran {
    stdout: String,
}

/// Runs `bin` on `config`, killing it after [`TIMEOUT`]. Fails with FastClick's own message
/// when it exits with an error.
fn run_click(bin: &Path, config: &Path) -> Result<Ran, CliError> {
    let fail = |why: String| {
        CliError::Invalid(format!(
            "--fastclick {} on {}: {why}",
            bin.display(),
            config.display()
        ))
    };
    let mut child = Command::new(bin)
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("does not start: {e}")))?;
    // Read both pipes on threads so that a chatty FastClick cannot block on a full pipe.
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if t0.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!(
                    "still running after {} s: killed",
                    TIMEOUT.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(fail(format!("cannot wait for it: {e}"))),
        }
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(fail(format!("failed ({status}):\n{}", tail.join("\n"))));
    }
    Ok(Ran { stdout })
}

/// Parses the timed configuration's two lines: (seconds between the clock readings,
/// packets counted at the exits in between).
fn parse_timing(stdout: &str) -> Option<(f64, u64)> {
    let reading = |what: &str| -> Option<(f64, u64)> {
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(TAG)?.trim().strip_prefix(what))?;
        let mut w = line.split_whitespace();
        let t: f64 = w.next()?.parse().ok()?;
        let n = w.map(|x| x.parse::<u64>().ok()).sum::<Option<u64>>()?;
        Some((t, n))
    };
    let (t0, n0) = reading("start")?;
    let (t1, n1) = reading("end")?;
    Some(((t1 - t0).max(0.0), n1.checked_sub(n0)?))
}

/// A FastClick configuration timed once per repetition.
pub(super) struct Timed {
    bin: PathBuf,
    config: PathBuf,
    /// Packets in the trace.
    packets: u64,
    passes: u64,
    /// Packets the exits send per pass (from the check run), when known.
    exit_per_pass: Option<u64>,
}

impl Timed {
    /// One repetition: a FastClick process that replays the trace once (warm-up) and then
    /// `passes` times, timed inside FastClick. Returns (packets replayed, seconds).
    pub(super) fn rep(&mut self) -> Result<(u64, f64), CliError> {
        let ran = run_click(&self.bin, &self.config)?;
        let (secs, exited) = parse_timing(&ran.stdout).ok_or_else(|| {
            CliError::Invalid(format!(
                "--fastclick {} on {}: no timing line in its output: {}",
                self.bin.display(),
                self.config.display(),
                ran.stdout.trim()
            ))
        })?;
        if let Some(per) = self.exit_per_pass {
            if exited != per * self.passes {
                return Err(CliError::Invalid(format!(
                    "--fastclick on {}: its exits counted {exited} packets over {} timed passes, expected {} ({per} per pass, as in the check run)",
                    self.config.display(),
                    self.passes,
                    per * self.passes
                )));
            }
        }
        Ok((self.packets * self.passes, secs))
    }
}

/// Writes the timed configuration of `chain` into `dir` (file `NAME.click`).
#[allow(clippy::too_many_arguments)]
pub(super) fn timed(
    bin: &Path,
    chain: &ChainFile,
    entry: &Endpoint,
    trace: &Path,
    packets: u64,
    batch: usize,
    passes: u64,
    dir: &Path,
    name: &str,
    exit_per_pass: Option<u64>,
) -> Result<Timed, CliError> {
    let ex = executor(chain, batch, |_| ExitSink::Count)?;
    let g = configuration(&ex, chain, entry, trace, batch, Exits::Count { passes })?;
    let config = dir.join(format!("{name}.click"));
    std::fs::write(&config, &g.text).map_err(|e| CliError::io(&config, "cannot write: ", e))?;
    Ok(Timed {
        bin: bin.to_path_buf(),
        config,
        packets,
        passes,
        exit_per_pass,
    })
}

fn executor(
    chain: &ChainFile,
    batch: usize,
    sink: impl Fn(&str) -> ExitSink,
) -> Result<Executor, CliError> {
    let opts = RunOptions {
        batch,
        ..RunOptions::default()
    };
    Ok(Executor::new(chain, &opts, |name, _| Ok(sink(name)))?)
}

/// Writes `records` as a pcap file (what FastClick's `FromDump` and `fusebox plan --profile`
/// read).
pub(super) fn write_trace(path: &Path, records: &[Record]) -> Result<(), CliError> {
    let mut w =
        ports::pcap::PcapWriter::create(path, packet::Precision::Micro, ports::pcap::DLT_EN10MB)?;
    for r in records {
        w.write(r.timestamp, &r.data)?;
    }
    w.finish()?;
    Ok(())
}

/// What a check run found: per exit, how the packets agreed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Agreement {
    /// Packets compared (all exits).
    pub(super) packets: usize,
    /// Of those, packets whose NAT source port differed (FuseBox's and FastClick's ports in
    /// a one-to-one correspondence, the checksum as the port change accounts for).
    pub(super) ports_remapped: usize,
    /// Of those, UDP packets whose checksum FastClick left at 0x0000 where FuseBox has one.
    pub(super) udp_zero: usize,
}

/// The IPv4 transport header of an Ethernet frame: (offset, protocol), for TCP and UDP
/// first fragments whose header (through the checksum) is there.
fn transport(f: &[u8]) -> Option<(usize, u8)> {
    if f.len() < 34 || f[12] != 0x08 || f[13] != 0x00 || f[14] >> 4 != 4 {
        return None;
    }
    let l4 = 14 + usize::from(f[14] & 0x0f) * 4;
    let frag = u16::from_be_bytes([f[20], f[21]]) & 0x1fff;
    let proto = f[23];
    let need = match proto {
        6 => 18,
        17 => 8,
        _ => return None,
    };
    (frag == 0 && f.len() >= l4 + need).then_some((l4, proto))
}

/// The checksum `sum` after a 16-bit word changed from `old` to `new` (RFC 1624, eqn. 3).
fn adjust(sum: u16, old: u16, new: u16) -> u16 {
    let s = u32::from(!sum) + u32::from(!old) + u32::from(new);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

/// Compares the packets one exit sent in FuseBox (`fb`) and in FastClick (`fc`), in order.
/// Equal bytes, except: a TCP or UDP source port may differ if the ports correspond one to
/// one (per destination and protocol) over the exit, with the transport checksum differing
/// exactly as the port change accounts for (0x0000 and 0xFFFF taken as the same sum); and a
/// UDP checksum FastClick left at 0x0000 (no checksum) matches any checksum FuseBox wrote.
/// The error says which packet differs first and how.
pub(super) fn compare_exit(
    name: &str,
    fb: &[Vec<u8>],
    fc: &[Vec<u8>],
) -> Result<Agreement, String> {
    if fb.len() != fc.len() {
        return Err(format!(
            "exit {name}: FuseBox sent {} packets, FastClick {}",
            fb.len(),
            fc.len()
        ));
    }
    let mut ag = Agreement {
        packets: fb.len(),
        ..Agreement::default()
    };
    // (proto, dst addr, dst port, port) -> the other side's port, both ways.
    type Key = (u8, [u8; 4], u16, u16);
    let mut fwd: HashMap<Key, u16> = HashMap::new();
    let mut back: HashMap<Key, u16> = HashMap::new();
    for (i, (a, b)) in fb.iter().zip(fc).enumerate() {
        if a == b {
            if let Some((l4, proto)) = transport(a) {
                let sp = u16::from_be_bytes([a[l4], a[l4 + 1]]);
                let key = |p| {
                    (
                        proto,
                        [a[30], a[31], a[32], a[33]],
                        u16::from_be_bytes([a[l4 + 2], a[l4 + 3]]),
                        p,
                    )
                };
                if fwd.insert(key(sp), sp).is_some_and(|o| o != sp)
                    || back.insert(key(sp), sp).is_some_and(|o| o != sp)
                {
                    return Err(format!("exit {name}, packet {i}: source port {sp} maps to two ports across the exit"));
                }
            }
            continue;
        }
        let differ = || {
            let at = a
                .iter()
                .zip(b)
                .position(|(x, y)| x != y)
                .unwrap_or(a.len().min(b.len()));
            format!(
                "exit {name}, packet {i} of {}: differs at byte {at} (FuseBox {} bytes, FastClick {} bytes; FuseBox {:02x?} FastClick {:02x?})",
                fb.len(),
                a.len(),
                b.len(),
                &a[at.min(a.len())..(at + 8).min(a.len())],
                &b[at.min(b.len())..(at + 8).min(b.len())],
            )
        };
        let (Some((l4, proto)), Some((l4b, _))) = (transport(a), transport(b)) else {
            return Err(differ());
        };
        if a.len() != b.len() || l4 != l4b {
            return Err(differ());
        }
        let ck = if proto == 6 { l4 + 16 } else { l4 + 6 };
        let word = |f: &[u8], at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
        let (pa, pb) = (word(a, l4), word(b, l4));
        let (ca, cb) = (word(a, ck), word(b, ck));
        // FastClick's packet with FuseBox's port.
        let mut b2 = b.clone();
        b2[l4..l4 + 2].copy_from_slice(&pa.to_be_bytes());
        let udp_zero = proto == 17 && cb == 0 && ca != 0;
        if !udp_zero {
            let c2 = if pa == pb { cb } else { adjust(cb, pb, pa) };
            let same = c2 == ca || (c2 | ca == 0xffff && c2 & ca == 0);
            if !same {
                return Err(differ());
            }
        }
        b2[ck..ck + 2].copy_from_slice(&ca.to_be_bytes());
        if *a != b2 {
            return Err(differ());
        }
        let dst = [a[30], a[31], a[32], a[33]];
        let dport = word(a, l4 + 2);
        if fwd
            .insert((proto, dst, dport, pa), pb)
            .is_some_and(|o| o != pb)
            || back
                .insert((proto, dst, dport, pb), pa)
                .is_some_and(|o| o != pa)
        {
            return Err(format!(
                "exit {name}, packet {i}: source ports do not correspond one to one (FuseBox {pa}, FastClick {pb}, not as earlier packets to the same destination)"
            ));
        }
        ag.ports_remapped += usize::from(pa != pb);
        ag.udp_zero += usize::from(udp_zero);
    }
    Ok(ag)
}

/// The check run of `chain` (see the module documentation), in folder `dir`: FastClick's
/// exits against FuseBox's in every mode. Returns what agreed and the packets the exits
/// send per pass; a difference beyond the known ones is an error naming the exit and packet.
#[allow(clippy::too_many_arguments)]
pub(super) fn check(
    bin: &Path,
    chain: &ChainFile,
    entry: &Endpoint,
    trace: &Path,
    records: &[Record],
    batch: usize,
    dir: &Path,
    name: &str,
) -> Result<(Agreement, u64), CliError> {
    let dumps = dir.join(format!("{name}-check"));
    std::fs::create_dir_all(&dumps).map_err(|e| CliError::io(&dumps, "cannot create: ", e))?;
    let probe = executor(chain, batch, |_| ExitSink::Count)?;
    let g = configuration(&probe, chain, entry, trace, batch, Exits::Dump(&dumps))?;
    let config = dir.join(format!("{name}-check.click"));
    std::fs::write(&config, &g.text).map_err(|e| CliError::io(&config, "cannot write: ", e))?;
    run_click(bin, &config)?;
    let mut theirs: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for x in &g.exits {
        let Some(f) = &x.dump else { continue };
        let (recs, err) = ports::pcap::read_all(f)?;
        if let Some(e) = err {
            return Err(e.into());
        }
        theirs.insert(x.name.clone(), recs.into_iter().map(|r| r.data).collect());
    }
    let mut total = Agreement::default();
    let mut per_pass = 0;
    for mode in Mode::BENCHED {
        let mut ex = executor(chain, batch, |_| ExitSink::Memory(Vec::new()))?;
        mode.install(&mut ex, chain::FastOptions::default());
        let at = ex.entry(entry).ok_or_else(|| {
            CliError::Invalid(format!("{}: no entry {entry}", chain.path.display()))
        })?;
        ex.replay(&[(at, records.to_vec())], 1);
        let ours = ex.finish()?;
        let names: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
        let mut ag = Agreement::default();
        for n in names {
            let a: Vec<Vec<u8>> = ours
                .get(n)
                .map(|v| v.iter().map(|(_, _, d)| d.clone()).collect())
                .unwrap_or_default();
            let b = theirs.get(n).cloned().unwrap_or_default();
            let r = compare_exit(n, &a, &b).map_err(|e| {
                CliError::Invalid(format!(
                    "--fastclick: {name}: FastClick and FuseBox ({mode}) send different packets: {e} (configuration {}, captures in {})",
                    config.display(),
                    dumps.display()
                ))
            })?;
            ag.packets += r.packets;
            ag.ports_remapped += r.ports_remapped;
            ag.udp_zero += r.udp_zero;
        }
        per_pass = ag.packets as u64;
        total = ag;
    }
    Ok((total, per_pass))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn examples() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
    }

    fn generated(dir: &str, k: usize, exits: Exits<'_>) -> (ChainFile, Generated) {
        let chain = ChainFile::load(&examples().join(dir).join("chain.toml")).unwrap();
        let chain = super::super::scenarios::first_nfs(&chain, k);
        let ex = executor(&chain, 32, |_| ExitSink::Count).unwrap();
        let entry = Endpoint::parse(&format!("{}.eth0", chain.nfs[0].name)).unwrap();
        let g = configuration(&ex, &chain, &entry, Path::new("/tmp/t.pcap"), 32, exits).unwrap();
        (chain, g)
    }

    /// The connections of a parsed configuration as (from name, port, to name, port).
    fn edges(cfg: &click::Config) -> BTreeSet<(String, usize, String, usize)> {
        cfg.connections
            .iter()
            .map(|c| {
                (
                    cfg.elements[c.from].name.clone(),
                    c.from_port,
                    cfg.elements[c.to].name.clone(),
                    c.to_port,
                )
            })
            .collect()
    }

    #[test]
    fn routers_become_one_configuration_with_links_as_connections() {
        let (_, g) = generated("routers", 3, Exits::Count { passes: 7 });
        let cfg = click::parse_str(&g.text, "gen.click", &[]).unwrap();
        for name in [
            "r1/rt",
            "r2/rt",
            "r3/rt",
            "fcb_src",
            "fcb_replay",
            "fcb_driver",
        ] {
            assert!(cfg.find(name).is_some(), "{name} missing:\n{}", g.text);
        }
        let class = |n: &str| cfg.elements[cfg.find(n).unwrap()].class.clone();
        assert_eq!(class("fcb_replay"), "ReplayUnqueue");
        assert_eq!(class("fcb_src"), "FromDump");
        // No devices are left: FastClick would open them.
        assert!(cfg
            .elements
            .iter()
            .all(|e| e.class != "FromDevice" && e.class != "ToDevice"));
        let e = edges(&cfg);
        // The replay feeds r1's eth0 path (its FromDevice's successor).
        let succ = |from: &str| -> Vec<String> {
            e.iter()
                .filter(|(f, _, _, _)| f == from)
                .map(|(_, _, t, _)| t.clone())
                .collect()
        };
        assert_eq!(succ("fcb_src"), ["fcb_replay"]);
        let first = succ("fcb_replay");
        assert_eq!(first.len(), 1);
        assert!(first[0].starts_with("r1/Strip"), "{first:?}");
        // r1 -> r2: r1's eth1 EtherEncap leads straight into r2's eth0 Strip; r2's eth0
        // EtherEncap back into r1's eth1 Strip.
        let encap_to = |nf: &str, peer: &str| {
            e.iter().any(|(f, _, t, _)| {
                f.starts_with(&format!("{nf}/EtherEncap"))
                    && t.starts_with(&format!("{peer}/Strip"))
            })
        };
        assert!(encap_to("r1", "r2") && encap_to("r2", "r1") && encap_to("r2", "r3"));
        assert!(!encap_to("r1", "r3"));
        // Exits: r1.eth0 and r3.eth1, counted; r3's unlinked eth1 input is Idle.
        let names: Vec<&str> = g.exits.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["r1.eth0", "r3.eth1"]);
        for x in &g.exits {
            assert_eq!(class(&x.counter), "Counter");
            assert_eq!(succ(&x.counter).len(), 1);
        }
        let idle: Vec<&str> = cfg
            .elements
            .iter()
            .filter(|e| e.class == "Idle")
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(idle.len(), 1, "{idle:?}");
        assert!(idle[0].starts_with("r3/FromDevice"));
        // Every element but the sources has an input, and every output is connected once.
        for (i, el) in cfg.elements.iter().enumerate() {
            let ins = cfg.connections.iter().filter(|c| c.to == i).count();
            if !["FromDump", "Idle", "DriverManager"].contains(&el.class.as_str()) {
                assert!(ins > 0, "{} has no input", el.name);
            }
        }
        assert!(g.text.contains("write fcb_replay.stop 7"));
        let driver = &cfg.elements[cfg.find("fcb_driver").unwrap()];
        assert_eq!(driver.class, "DriverManager");
        assert!(
            driver.config.contains("$(fcb_exit1.count)"),
            "{}",
            driver.config
        );
        assert!(g.text.contains("BURST 32"));
    }

    #[test]
    fn napts_keep_their_rewriters_and_dump_their_exits() {
        let dir = Path::new("/tmp/dumps");
        let (_, g) = generated("napts", 2, Exits::Dump(dir));
        let cfg = click::parse_str(&g.text, "gen.click", &[]).unwrap();
        for nf in ["n1", "n2"] {
            let rw = &cfg.elements[cfg.find(&format!("{nf}/rw")).unwrap()];
            assert_eq!(rw.class, "IPRewriter");
            assert!(rw.config.contains("1024-65535"), "{}", rw.config);
        }
        assert!(cfg.find("fcb_driver").is_none());
        let dumps = cfg.elements.iter().filter(|e| e.class == "ToDump").count();
        assert_eq!(dumps, g.exits.len());
        assert!(g
            .exits
            .iter()
            .all(|x| x.dump.as_ref().is_some_and(|d| d.starts_with(dir))));
        // n1's rewriter output 0 goes (through DecIPTTL, EtherEncap) to n2's eth0 path.
        let e = edges(&cfg);
        assert!(e
            .iter()
            .any(|(f, _, t, _)| f.starts_with("n1/EtherEncap") && t.starts_with("n2/Strip")));
    }

    #[test]
    fn ipfilter_files_are_written_out_as_rules() {
        let chain = ChainFile::load(&examples().join("isp").join("chain.toml")).unwrap();
        let ex = executor(&chain, 32, |_| ExitSink::Count).unwrap();
        let entry = Endpoint::parse("fw.eth0").unwrap();
        let g = configuration(
            &ex,
            &chain,
            &entry,
            Path::new("t.pcap"),
            32,
            Exits::Count { passes: 1 },
        )
        .unwrap();
        let cfg = click::parse_str(&g.text, "gen.click", &[]).unwrap();
        let acl = &cfg.elements[cfg.find("fw/acl").unwrap()];
        assert_eq!(acl.class, "IPFilter");
        assert!(!acl.config.contains("FILE"), "{}", acl.config);
        let rules = std::fs::read_to_string(examples().join("isp/acl.rules")).unwrap();
        let first = rules
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap();
        assert!(acl.config.starts_with(first), "{}", acl.config);
        for n in ["fw/acl", "router/rt", "napt/rw"] {
            assert!(cfg.find(n).is_some(), "{n}");
        }
    }

    #[test]
    fn timing_lines_parse() {
        let out = format!("noise\n{TAG} start 10.5 3 4\n{TAG} end 12.0 103 1004\n");
        assert_eq!(parse_timing(&out), Some((1.5, 1100)));
        assert_eq!(parse_timing("nothing"), None);
        assert_eq!(
            parse_timing(&format!("{TAG} start 1 5\n{TAG} end 2 4")),
            None
        );
        assert_eq!(parse_timing(&format!("{TAG} start 1 5")), None);
    }

    /// A UDP frame from 10.0.0.1:`sport` to 10.1.0.1:53 with a correct checksum, or
    /// `csum` when given.
    fn udp(sport: u16, ttl: u8, csum: Option<u16>) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12] = 0x08;
        f[14] = 0x45;
        f[17] = 32;
        f[22] = ttl;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 1, 0, 1]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&12u16.to_be_bytes());
        f[42..46].copy_from_slice(b"data");
        let c = csum.unwrap_or_else(|| {
            let mut s: u32 = 17 + 12;
            for w in f[26..34].chunks(2).chain(f[34..46].chunks(2)) {
                s += u32::from(u16::from_be_bytes([w[0], w[1]]));
            }
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            match !(s as u16) {
                0 => 0xffff,
                c => c,
            }
        });
        f[40..42].copy_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn exits_compare_modulo_nat_ports_and_zero_udp_checksums() {
        let same = compare_exit("x", &[udp(1, 9, None)], &[udp(1, 9, None)]).unwrap();
        assert_eq!(
            same,
            Agreement {
                packets: 1,
                ports_remapped: 0,
                udp_zero: 0
            }
        );
        // Other ports, consistently, with their checksums: agreed, counted.
        let fb = vec![udp(1000, 9, None), udp(2000, 9, None), udp(1000, 9, None)];
        let fc = vec![udp(4000, 9, None), udp(5000, 9, None), udp(4000, 9, None)];
        let ag = compare_exit("x", &fb, &fc).unwrap();
        assert_eq!(ag.ports_remapped, 3);
        // Not one to one: refused.
        let fc_bad = vec![udp(4000, 9, None), udp(5000, 9, None), udp(6000, 9, None)];
        assert!(compare_exit("x", &fb, &fc_bad)
            .unwrap_err()
            .contains("one to one"));
        // A checksum the port change does not account for: refused.
        let wrong = vec![udp(4000, 9, Some(0x1234))];
        assert!(compare_exit("x", &fb[..1], &wrong).is_err());
        // FastClick's 0x0000: agreed, counted; FuseBox's 0x0000 against FastClick's sum: not.
        let ag = compare_exit("x", &[udp(7, 9, None)], &[udp(7, 9, Some(0))]).unwrap();
        assert_eq!(ag.udp_zero, 1);
        assert!(compare_exit("x", &[udp(7, 9, Some(0))], &[udp(7, 9, None)]).is_err());
        // Any other byte: refused, naming the packet and byte.
        let e = compare_exit("x", &[udp(7, 9, None)], &[udp(7, 8, None)]).unwrap_err();
        assert!(e.contains("packet 0") && e.contains("byte 22"), "{e}");
        // Counts differ: refused.
        assert!(compare_exit("x", &fb, &fb[..2]).is_err());
        // Non-IP frames must be equal.
        assert!(compare_exit("x", &[vec![1, 2, 3]], &[vec![1, 2, 4]]).is_err());
    }

    #[test]
    fn checksum_adjustment_matches_a_full_recomputation() {
        for (from, to) in [(1u16, 2u16), (1000, 65535), (65535, 0), (1234, 1234)] {
            let a = udp(from, 9, None);
            let b = udp(to, 9, None);
            let ca = u16::from_be_bytes([a[40], a[41]]);
            let cb = u16::from_be_bytes([b[40], b[41]]);
            let adj = adjust(ca, from, to);
            assert!(
                adj == cb || (adj | cb == 0xffff && adj & cb == 0),
                "{from}->{to}: {adj:#x} {cb:#x}"
            );
        }
    }

    #[test]
    fn a_missing_binary_is_named() {
        let e = binary(Path::new("/nonexistent/fastclick/click"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/fastclick/click"), "{e}");
        let e = binary(Path::new("/")).unwrap_err().to_string();
        assert!(e.contains("not a file"), "{e}");
    }
}
