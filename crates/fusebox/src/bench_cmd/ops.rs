//! NetBricks §5 on NFs written with operators (`crates/operators`): the TTL NF and the
//! DIR-24-8 router as operator NFs beside their Click configurations (in the `ttl` and
//! `lpm` groups), and chains of 1…8 TTL NFs in one process on one core against one NF per
//! thread joined by rings, with and without a copy per hop (`ops-chain`, the paper's
//! Fig. 7 setting).
//!
//! Mode names in the report:
//! * `operators` — the operator NF as an element of the executor (naive mode), built by
//!   name from a Click configuration, as `fusebox run` runs it; `operators-synth` the same
//!   synthesized (the TTL NF declares its model);
//! * `operators-loop` — the same pipeline without the executor: each batch copied into
//!   recycled buffers (as the reference loop does), then run packet by packet to completion;
//! * `pipeline` — one operator pipeline of k TTL NFs composed at compile time, run as
//!   `operators-loop` (NetBricks' one-core chain: NFs are function calls);
//! * `rings-copy`, `rings-0copy` — one TTL NF per thread, joined by bounded single-producer
//!   single-consumer rings of batches (the feeding thread, the k NF threads and the ring
//!   back to the feeder), each NF copying every packet into a fresh buffer on arrival (the
//!   container-like baseline) or handing the buffers on (the "0-copy SoftNIC" case).

use super::harness::Config;
use super::report::Params;
use super::Bench;
use crate::error::CliError;
use chain::{ChainFile, Endpoint};
use elements::ip::IPLookup;
use elements::registry::{Doc, ElementClass};
use elements::{Args, BuildCtx, ConfigError, Element};
use operators::nf::{class, Leave};
use operators::pipe::Then;
use operators::{pipe, Cx, Ethernet, Ipv4, OperatorNf, Pkt, Raw, Stage};
use packet::Packet;
use ports::pcap::Record;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

/// The operator TTL NF's class (`examples/bricks`, registered at start-up).
const TTL_CLASS: &str = bricks::ttl::NAME;
/// The operator DIR-24-8 router's class name.
const LPM_CLASS: &str = "BenchLpmNF";
/// Next hops of the `lpm` router (its outputs).
const HOPS: usize = 4;

/// One NF's pipeline handing its packets on as the next NF receives them: a fresh
/// [`Pkt<Raw>`] (nothing parsed, the annotations kept), as they cross from NF to NF in a
/// chain.
pub(super) struct Next<A>(A);

impl<A> Stage<Pkt<Raw>> for Next<A>
where
    A: Stage<Pkt<Raw>>,
    A::Out: Leave,
{
    type Out = Pkt<Raw>;
    #[inline(always)]
    fn run(&mut self, p: Pkt<Raw>, cx: &mut Cx) -> Option<Pkt<Raw>> {
        self.0.run(p, cx).map(|out| Pkt::new(out.into_packet()))
    }
}

/// NetBricks' TTL NF (Listing 1), `TTLNF` of `examples/bricks`: parse Ethernet and IPv4,
/// drop when the TTL runs out, decrement it (the bytes `examples/ttl/ttl.click` gives), as
/// a stage k of which compose.
pub(super) fn ttl_nf() -> Next<impl Stage<Pkt<Raw>, Out = impl Leave> + 'static> {
    Next(bricks::ttl::pipeline())
}

/// The source MAC address of the router's outputs, and the destination of next hop `hop`
/// (the `lpm` Click configuration's `EtherEncap`s).
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
fn hop_mac(hop: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 0x01, hop as u8]
}

/// The DIR-24-8 router with operators: parse Ethernet and IPv4, drop bad IPv4 header
/// checksums, look the destination up in `table` (DirectIPLookup's table and route parser,
/// not a second one), rewrite the Ethernet addresses for the next hop and send the packet
/// out of the hop's output (`group_by` by hop, one `send` per branch). A destination
/// without a route is dropped under `no-group`.
fn lpm_nf(table: IPLookup) -> impl Stage<Pkt<Raw>, Out = impl Leave> + 'static {
    let mut g = pipe::<Raw, ()>()
        .parse::<Ethernet>()
        .parse::<Ipv4>()
        .filter("bad-ip-header", |p| p.header().verify_checksum())
        .map(move |p| {
            let hop = table.lookup(p.header().dst_addr()).map_or(HOPS, |(h, _)| h);
            p.with_meta(hop)
        })
        .deparse()
        .transform(|p| {
            let hop = *p.meta();
            let mut eth = p.header_mut();
            eth.set_src_addr(wire::ethernet::Address(SRC_MAC));
            eth.set_dst_addr(wire::ethernet::Address(hop_mac(hop)));
        })
        .group_by(HOPS, |p| *p.meta());
    for hop in 0..HOPS {
        g = g.branch(hop, move |b| b.send(hop));
    }
    g.merge().into_stage()
}

fn build_lpm(
    name: &'static str,
    args: &Args,
    bcx: &BuildCtx<'_>,
) -> Result<Box<dyn Element>, ConfigError> {
    let table = IPLookup::configure("DirectIPLookup", args, bcx)
        .map_err(|e| ConfigError::new(format!("{name}: {}", e.message)))?;
    Ok(Box::new(
        OperatorNf::<_, ()>::new(name, HOPS, lpm_nf(table)).stateless(),
    ))
}

/// The bench's operator NF classes (the TTL NF is `examples/bricks`' `TTLNF`).
const CLASSES: [ElementClass; 1] = [class(
        LPM_CLASS,
        build_lpm,
        Doc::new(
            "",
            "fusebox bench: NetBricks' DIR-24-8 router written with operators (DirectIPLookup's arguments).",
            "",
        ),
)];

/// Registers the bench's operator NF classes and `examples/bricks`' (again is a no-op).
fn register() -> Result<(), CliError> {
    bricks::register().map_err(|e| CliError::Invalid(e.to_string()))?;
    operators::nf::register(&CLASSES).map_err(|e| CliError::Invalid(e.to_string()))
}

/// Writes `text` as `name` in the bench's output directory.
fn write(b: &Bench, name: &str, text: &str) -> Result<PathBuf, CliError> {
    std::fs::create_dir_all(&b.out_dir)
        .map_err(|e| CliError::io(&b.out_dir, "cannot create: ", e))?;
    let p = b.out_dir.join(name);
    std::fs::write(&p, text).map_err(|e| CliError::io(&p, "cannot write: ", e))?;
    Ok(p)
}

/// Runs `stage` over `records` the way the reference loop runs: each batch of `batch`
/// frames copied into recycled buffers, then every packet run to completion. One call of
/// the returned closure is one pass.
fn stage_loop<St>(mut stage: St, records: &[Record], batch: usize) -> Box<dyn FnMut() -> u64>
where
    St: Stage<Pkt<Raw>> + 'static,
    St::Out: Leave,
{
    let records = records.to_vec();
    let batch = batch.max(1);
    let mut free: Vec<Packet> = (0..batch).map(|_| Packet::from_bytes(&[])).collect();
    let mut full: Vec<Packet> = Vec::with_capacity(batch);
    let mut cx = Cx::default();
    Box::new(move || {
        let mut n = 0u64;
        for chunk in records.chunks(batch) {
            for r in chunk {
                let mut p = free.pop().unwrap_or_else(|| Packet::from_bytes(&[]));
                p.reset(&r.data);
                full.push(p);
            }
            for p in full.drain(..) {
                if let Some(out) = stage.run(Pkt::new(p), &mut cx) {
                    free.push(out.into_packet());
                }
                n += 1;
            }
            free.extend(cx.take_sent().map(|(_, p)| p));
            free.extend(cx.take_dropped().map(|(p, _)| p));
        }
        std::hint::black_box(&free);
        n
    })
}

/// NetBricks' "native" TTL NF: the same work as `TTLNF` (EtherType, IPv4 version, header
/// length and total length checked, TTL above 1, decremented with the checksum updated
/// incrementally, the three header annotations set), written by hand over the packet's
/// bytes. False: the packet is dropped.
fn ttl_native(p: &mut Packet) -> bool {
    let d = p.data_mut();
    if d.len() < 14 || d[12] != 0x08 || d[13] != 0 {
        return false;
    }
    let ip = &mut d[14..];
    let (Some(&b0), Some(&[t0, t1])) = (ip.first(), ip.get(2..4).map(|t| [t[0], t[1]]).as_ref())
    else {
        return false;
    };
    let hl = usize::from(b0 & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([t0, t1]));
    if b0 >> 4 != 4 || hl < 20 || hl > ip.len() || total < hl || ip[8] <= 1 {
        return false;
    }
    ip[8] -= 1;
    let sum = wire::checksum::ttl_decremented(u16::from_be_bytes([ip[10], ip[11]]));
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    p.set_mac_header(0);
    p.set_network_header(14);
    p.set_transport_header(14 + hl);
    true
}

/// [`stage_loop`] with [`ttl_native`] in place of the pipeline: the same buffers, batches
/// and hand-offs, only the NF differs.
fn native_loop(records: &[Record], batch: usize) -> Box<dyn FnMut() -> u64> {
    let records = records.to_vec();
    let batch = batch.max(1);
    let mut free: Vec<Packet> = (0..batch).map(|_| Packet::from_bytes(&[])).collect();
    let mut full: Vec<Packet> = Vec::with_capacity(batch);
    let mut dropped: Vec<Packet> = Vec::with_capacity(batch);
    Box::new(move || {
        let mut n = 0u64;
        for chunk in records.chunks(batch) {
            for r in chunk {
                let mut p = free.pop().unwrap_or_else(|| Packet::from_bytes(&[]));
                p.reset(&r.data);
                full.push(p);
            }
            for mut p in full.drain(..) {
                if ttl_native(&mut p) {
                    free.push(p);
                } else {
                    dropped.push(p);
                }
                n += 1;
            }
            free.append(&mut dropped);
        }
        std::hint::black_box(&free);
        n
    })
}

/// Configurations added to a group, with the ratios (numerator, denominator) they bring.
pub(super) type Extra = (Vec<Config>, Vec<(&'static str, &'static str)>);

/// The operator NF configurations of the `ttl` group: the TTL NF with operators in the
/// executor (naive, and synthesized from its declared model) and in a loop of its own. Ratios: against `examples/ttl` naive and synthesized
/// and against the reference loop.
pub(super) fn ttl_configs(b: &Bench, records: &[Record]) -> Result<Extra, CliError> {
    register()?;
    let batch = b.batches[0];
    let click = write(
        b,
        "ops-ttl.click",
        &format!("// Generated by `fusebox bench --scenario ttl`: the TTL NF written with operators.\nFromDevice(eth0) -> {TTL_CLASS} -> ToDevice(eth1);\n"),
    )?;
    let chain = ChainFile::single(&click);
    let entry = entry(&chain.nfs[0].name);
    let mut ops = b.chain_config(&chain, &entry, false, batch, records)?;
    ops.mode = "operators";
    // TTLNF declares its model: synthesis folds it as it folds the Click configuration.
    let mut folded = b.chain_config(&chain, &entry, true, batch, records)?;
    folded.mode = "operators-synth";
    let configs = vec![
        ops,
        folded,
        b.loop_config(
            "operators-loop",
            1,
            records,
            stage_loop(ttl_nf(), records, batch),
        ),
        b.loop_config("native", 1, records, native_loop(records, batch)),
    ];
    let ratios = vec![
        ("operators-loop 1", "native 1"),
        ("operators 1", "naive 1"),
        ("operators 1", "synth 1"),
        ("operators-synth 1", "synth 1"),
        ("operators 1", "reference"),
        ("operators-loop 1", "reference"),
        ("operators-loop 1", "operators 1"),
    ];
    Ok((configs, ratios))
}

/// The operator NF configurations of the `lpm` group: the DIR-24-8 router with operators
/// over the same routes (`lpm-16k-ops.click`), in the executor and in a loop of its own.
/// Ratios: against the Click `DirectIPLookup` configuration, naive and synthesized.
pub(super) fn lpm_configs(
    b: &Bench,
    routes: &[(std::net::Ipv4Addr, u8, u64)],
    records: &[Record],
) -> Result<Extra, CliError> {
    register()?;
    let batch = b.batches[0];
    let mut text = format!(
        "// Generated by `fusebox bench --scenario lpm`: the DIR-24-8 router written with\n\
         // operators, over the routes of lpm-16k.click.\nrt :: {LPM_CLASS}(\n"
    );
    for (a, len, port) in routes {
        let _ = writeln!(text, "    {a}/{len} {port},");
    }
    text.push_str("    0.0.0.0/0 0);\nFromDevice(eth0) -> rt;\n");
    for hop in 0..HOPS {
        let _ = writeln!(text, "rt[{hop}] -> ToDevice(eth{});", hop + 1);
    }
    let click = write(b, "lpm-16k-ops.click", &text)?;
    let chain = ChainFile::single(&click);
    let entry = entry(&chain.nfs[0].name);
    let mut ops = b.chain_config(&chain, &entry, false, batch, records)?;
    ops.mode = "operators";
    let mut args = String::new();
    for (a, len, port) in routes {
        let _ = write!(args, "{a}/{len} {port}, ");
    }
    args.push_str("0.0.0.0/0 0");
    let table = route_table(&args, &click)?;
    let configs = vec![
        ops,
        b.loop_config(
            "operators-loop",
            1,
            records,
            stage_loop(lpm_nf(table), records, batch),
        ),
    ];
    let ratios = vec![
        ("operators 1", "naive 1"),
        ("operators 1", "synth 1"),
        ("operators-loop 1", "operators 1"),
    ];
    Ok((configs, ratios))
}

/// DirectIPLookup's table over the routes `args` (its argument text).
fn route_table(args: &str, base: &Path) -> Result<IPLookup, CliError> {
    let parsed =
        Args::parse(args).map_err(|e| CliError::Invalid(format!("lpm routes: {}", e.message)))?;
    let names = elements::Names::default();
    let bcx = BuildCtx {
        name: "rt",
        ninputs: 1,
        noutputs: HOPS,
        names: &names,
        base_dir: base.parent().unwrap_or(Path::new(".")),
    };
    IPLookup::configure("DirectIPLookup", &parsed, &bcx)
        .map_err(|e| CliError::Invalid(format!("lpm routes: {}", e.message)))
}

fn entry(nf: &str) -> Endpoint {
    Endpoint {
        nf: nf.to_string(),
        iface: "eth0".to_string(),
    }
}

/// Chain lengths of `ops-chain`.
fn chain_lengths(quick: bool) -> Vec<usize> {
    if quick {
        vec![1, 2, 4]
    } else {
        (1..=8).collect()
    }
}

/// One pipeline of `k` TTL NFs (k ≤ 8), composed at compile time, as a pass over `records`.
fn pipeline_loop(k: usize, records: &[Record], batch: usize) -> Box<dyn FnMut() -> u64> {
    let t = ttl_nf;
    match k {
        0 | 1 => stage_loop(t(), records, batch),
        2 => stage_loop(Then(t(), t()), records, batch),
        3 => stage_loop(Then(Then(t(), t()), t()), records, batch),
        4 => stage_loop(Then(Then(t(), t()), Then(t(), t())), records, batch),
        5 => stage_loop(
            Then(Then(Then(t(), t()), Then(t(), t())), t()),
            records,
            batch,
        ),
        6 => stage_loop(
            Then(Then(Then(t(), t()), Then(t(), t())), Then(t(), t())),
            records,
            batch,
        ),
        7 => stage_loop(
            Then(
                Then(Then(t(), t()), Then(t(), t())),
                Then(Then(t(), t()), t()),
            ),
            records,
            batch,
        ),
        _ => stage_loop(
            Then(
                Then(Then(t(), t()), Then(t(), t())),
                Then(Then(t(), t()), Then(t(), t())),
            ),
            records,
            batch,
        ),
    }
}

/// A batch on a ring: the packets still going, and those an NF dropped (carried back to
/// the feeder for reuse).
type Batch = (Vec<Packet>, Vec<Packet>);

/// Batches on each ring at most.
const RING: usize = 4;
/// Batches the feeder may have in flight.
const IN_FLIGHT: usize = 16;

/// `k` TTL NFs on `k` threads joined by bounded rings of batches; the calling thread feeds
/// the first ring and takes the batches back from the last.
struct Rings {
    records: Vec<Record>,
    batch: usize,
    first: Option<SyncSender<Batch>>,
    back: Receiver<Batch>,
    threads: Vec<JoinHandle<()>>,
    /// Empty batches and packet buffers ready for reuse.
    batches: Vec<Batch>,
    free: Vec<Packet>,
}

impl Rings {
    fn start(k: usize, copy: bool, records: &[Record], batch: usize) -> Rings {
        let (back_tx, back): (Sender<Batch>, Receiver<Batch>) = channel();
        let (first, rx) = sync_channel::<Batch>(RING);
        let mut rx = Some(rx);
        let k = k.max(1);
        let mut threads = Vec::new();
        for i in 0..k {
            let Some(this_rx) = rx.take() else { break };
            if i + 1 < k {
                let (tx, next_rx) = sync_channel::<Batch>(RING);
                rx = Some(next_rx);
                threads.push(spawn_nf(this_rx, Ok(tx), copy));
            } else {
                threads.push(spawn_nf(this_rx, Err(back_tx.clone()), copy));
            }
        }
        Rings {
            records: records.to_vec(),
            batch: batch.max(1),
            first: Some(first),
            back,
            threads,
            batches: (0..IN_FLIGHT)
                .map(|_| (Vec::with_capacity(batch), Vec::new()))
                .collect(),
            free: Vec::new(),
        }
    }

    /// Takes a batch back from the last NF: its buffers go to the free list.
    fn take_back(&mut self) -> bool {
        match self.back.recv() {
            Ok((mut live, mut dropped)) => {
                self.free.append(&mut live);
                self.free.append(&mut dropped);
                self.batches.push((live, dropped));
                true
            }
            Err(_) => false,
        }
    }

    /// One pass over the trace: every batch fed in and taken back.
    fn pass(&mut self) -> u64 {
        let mut in_flight = 0usize;
        let mut n = 0u64;
        let records = std::mem::take(&mut self.records);
        for chunk in records.chunks(self.batch) {
            while self.batches.is_empty() {
                if !self.take_back() {
                    self.records = records;
                    return n;
                }
                in_flight -= 1;
            }
            let Some((mut live, dropped)) = self.batches.pop() else {
                break;
            };
            for r in chunk {
                let mut p = self.free.pop().unwrap_or_else(|| Packet::from_bytes(&[]));
                p.reset(&r.data);
                live.push(p);
            }
            let Some(first) = &self.first else { break };
            if first.send((live, dropped)).is_err() {
                break;
            }
            in_flight += 1;
            n += chunk.len() as u64;
        }
        while in_flight > 0 && self.take_back() {
            in_flight -= 1;
        }
        self.records = records;
        n
    }
}

impl Drop for Rings {
    fn drop(&mut self) {
        // Closing the first ring ends every NF thread in turn.
        self.first = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One TTL NF on a thread of its own: batches from `rx`, run packet by packet (each first
/// copied into a fresh buffer when `copy`), handed to the next NF (`Ok`) or back to the
/// feeder (`Err`).
fn spawn_nf(
    rx: Receiver<Batch>,
    out: Result<SyncSender<Batch>, Sender<Batch>>,
    copy: bool,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut nf = ttl_nf();
        let mut cx = Cx::default();
        let mut spare: Vec<Packet> = Vec::new();
        while let Ok((mut live, mut dropped)) = rx.recv() {
            for p in live.drain(..) {
                let p = if copy {
                    Packet::from_bytes(p.data())
                } else {
                    p
                };
                if let Some(p) = nf.run(Pkt::new(p), &mut cx) {
                    spare.push(p.into_packet());
                }
            }
            dropped.extend(cx.take_dropped().map(|(p, _)| p));
            std::mem::swap(&mut live, &mut spare);
            let sent = match &out {
                Ok(tx) => tx.send((live, dropped)).is_ok(),
                Err(tx) => tx.send((live, dropped)).is_ok(),
            };
            if !sent {
                return;
            }
        }
    })
}

/// `ops-chain`: chains of k TTL NFs (k = 1…8; `--quick`: 1, 2, 4). FuseBox in one process
/// on one core — a chain file of k operator NFs in naive mode (`naive k`) and one pipeline
/// of k TTL NFs (`pipeline k`) — against one NF per thread joined by rings, with a copy
/// per hop (`rings-copy k`) and without (`rings-0copy k`); the reference loop beside them.
pub(super) fn chain(b: &mut Bench) -> Result<(), CliError> {
    register()?;
    let batch = b.batches[0];
    let records = super::scenarios::default_trace(b.packets);
    let dir = b.out_dir.join("ops-chain");
    std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir, "cannot create: ", e))?;
    let nf = dir.join("ttl.click");
    std::fs::write(
        &nf,
        format!("// Generated by `fusebox bench --scenario ops-chain`.\nFromDevice(eth0) -> {TTL_CLASS} -> ToDevice(eth1);\n"),
    )
    .map_err(|e| CliError::io(&nf, "cannot write: ", e))?;
    let ks = chain_lengths(b.quick);
    let mut configs = vec![b.reference_config(batch, &records)];
    let mut ratios: Vec<(String, String)> = Vec::new();
    for &k in &ks {
        let mut text = String::from("# Generated by `fusebox bench --scenario ops-chain`.\n");
        for i in 1..=k {
            let _ = writeln!(text, "[nf.t{i}]\nclick = \"ttl.click\"");
        }
        for i in 1..k {
            let _ = writeln!(
                text,
                "[[link]]\nbetween = [\"t{i}.eth1\", \"t{}.eth0\"]",
                i + 1
            );
        }
        text.push_str("[[entry]]\nto = \"t1.eth0\"\n");
        let path = dir.join(format!("chain-{k}.toml"));
        std::fs::write(&path, text).map_err(|e| CliError::io(&path, "cannot write: ", e))?;
        let chain = ChainFile::load(&path)?;
        configs.push(b.chain_config(&chain, &entry("t1"), false, batch, &records)?);
        configs.push(b.loop_config("pipeline", k, &records, pipeline_loop(k, &records, batch)));
        for (mode, copy) in [("rings-copy", true), ("rings-0copy", false)] {
            let mut rings = Rings::start(k, copy, &records, batch);
            configs.push(b.loop_config(mode, k, &records, Box::new(move || rings.pass())));
        }
        for (num, den) in [
            ("pipeline", "rings-copy"),
            ("pipeline", "rings-0copy"),
            ("rings-0copy", "rings-copy"),
            ("naive", "rings-copy"),
            ("pipeline", "naive"),
        ] {
            ratios.push((format!("{num} {k}"), format!("{den} {k}")));
        }
    }
    let last = ks.last().copied().unwrap_or(1);
    ratios.push(("pipeline 1".to_string(), "reference".to_string()));
    ratios.push((format!("pipeline {last}"), "pipeline 1".to_string()));
    ratios.push((format!("rings-copy {last}"), "rings-copy 1".to_string()));
    let p = Params {
        scenario: "ops-chain",
        frame: 64,
        batch,
        passes: b.passes,
        extra: None,
    };
    b.measure(&p, configs, &ratios)
}

/// How the `bricks` scenario runs an NF of `examples/bricks`.
enum Setup {
    /// Its chain file in `examples/bricks`, the NF's name there, and its Click counterpart
    /// in `examples/bricks/click` (devices named `NF_IFACE`), if it has one.
    File {
        chain: &'static str,
        nf: &'static str,
        click: Option<&'static str>,
    },
    /// A configuration written by the bench: `body` with `@NF@` replaced by the class, and
    /// by the Click counterpart's class, if there is one.
    Text {
        body: &'static str,
        click: Option<&'static str>,
    },
}

/// The `examples/bricks` NFs the `bricks` scenario measures, and how.
const BRICKS: &[(&str, Setup)] = &[
    (
        bricks::ttl::NAME,
        Setup::File {
            chain: "ttl.toml",
            nf: "ttl",
            click: Some("ttl.click"),
        },
    ),
    (
        bricks::macswap::NAME,
        Setup::Text {
            body: "FromDevice(eth0) -> @NF@ -> ToDevice(eth1);\n",
            click: None,
        },
    ),
    (
        bricks::firewall::NAME,
        Setup::File {
            chain: "firewall.toml",
            nf: "fw",
            click: Some("firewall.click"),
        },
    ),
    (
        bricks::monitor::NAME,
        Setup::File {
            chain: "monitor.toml",
            nf: "mon",
            click: Some("monitor.click"),
        },
    ),
    (
        bricks::nat::NAME,
        Setup::File {
            chain: "nat.toml",
            nf: "nat",
            click: Some("nat.click"),
        },
    ),
    (
        bricks::maglev::NAME,
        Setup::File {
            chain: "maglev.toml",
            nf: "lb",
            click: Some("maglev.click"),
        },
    ),
    (
        bricks::signature::NAME,
        Setup::File {
            chain: "signature.toml",
            nf: "sig",
            click: Some("signature.click"),
        },
    ),
];

/// Classes measured over TCP streams (256-byte frames: 202 payload bytes each) instead of
/// the UDP trace, with their frame size.
const TCP_NFS: &[(&str, u32)] = &[(bricks::signature::NAME, 256)];

/// The NFs of NetBricks' Table 1 and §5 (by a word of their class name), reported when no
/// class of `examples/bricks` has it.
const PAPER_NFS: &[&str] = &["Maglev", "Monitor", "Firewall", "NAT", "Signature"];

/// `bricks`: each NF of `examples/bricks` alone (its chain file there, or a configuration of
/// [`BRICKS`]), in naive mode on one
/// worker and on two (NetBricks §5: Mpps per worker, `operators 1`, `operators 1 x2`), and
/// its Click counterpart the same way (`click 1`, `click 1 x2`); says which NFs were left
/// out and which of the paper's are not there yet.
pub(super) fn bricks(b: &mut Bench) -> Result<(), CliError> {
    register()?;
    let batch = b.batches[0];
    let udp = super::scenarios::default_trace(b.packets);
    let dir = b.out_dir.join("bricks");
    std::fs::create_dir_all(&dir).map_err(|e| CliError::io(&dir, "cannot create: ", e))?;
    let home = b.examples.join("bricks");
    for c in bricks::CLASSES {
        let Some((_, setup)) = BRICKS.iter().find(|(n, _)| *n == c.name) else {
            b.report.lines.push(format!(
                "  bricks: {} not measured: no configuration in the bench's BRICKS table",
                c.name
            ));
            continue;
        };
        // The NF's chain and entry, and its Click counterpart's, if any.
        let (chain, at, peer) = match setup {
            Setup::File { chain, nf, click } => {
                let peer = match click {
                    Some(x) => {
                        let peer = ChainFile::single(&home.join("click").join(x));
                        let at = Endpoint {
                            nf: peer.nfs[0].name.clone(),
                            iface: format!("{nf}_eth0"),
                        };
                        Some((peer, at))
                    }
                    None => None,
                };
                (ChainFile::load(&home.join(chain))?, entry(nf), peer)
            }
            Setup::Text { body, click } => {
                let write = |class: &str| -> Result<(ChainFile, Endpoint), CliError> {
                    let path = dir.join(format!("{class}.click"));
                    let text = format!(
                        "// Generated by `fusebox bench --scenario bricks`.\n{}",
                        body.replace("@NF@", class)
                    );
                    std::fs::write(&path, text)
                        .map_err(|e| CliError::io(&path, "cannot write: ", e))?;
                    let chain = ChainFile::single(&path);
                    let at = entry(&chain.nfs[0].name);
                    Ok((chain, at))
                };
                let (chain, at) = write(c.name)?;
                (chain, at, click.map(write).transpose()?)
            }
        };
        let tcp = TCP_NFS.iter().find(|(n, _)| *n == c.name).map(|&(_, f)| f);
        let tcp_records;
        let (records, frame) = match tcp {
            Some(frame) => {
                tcp_records = super::scenarios::tcp_trace(b.packets, frame);
                (&tcp_records, frame)
            }
            None => (&udp, 64),
        };
        let mut ratios = vec![("operators 1 x2", "operators 1")];
        let naive = synth::Mode::Naive;
        let mut configs = vec![
            b.chain_config(&chain, &at, naive, batch, records)?,
            b.workers_config(&chain, &at, naive, batch, records, 2)?,
        ];
        for c in configs.iter_mut() {
            c.mode = "operators";
        }
        if let Some((peer, at)) = peer {
            let mut one = b.chain_config(&peer, &at, naive, batch, records)?;
            let mut two = b.workers_config(&peer, &at, naive, batch, records, 2)?;
            one.mode = "click";
            two.mode = "click";
            configs.extend([one, two]);
            ratios.extend([
                ("operators 1", "click 1"),
                ("operators 1 x2", "click 1 x2"),
                ("click 1 x2", "click 1"),
            ]);
        }
        let p = Params {
            scenario: "bricks",
            frame,
            batch,
            passes: b.passes,
            extra: Some(("nf", serde_json::json!(c.name))),
        };
        b.measure(&p, configs, &ratios)?;
    }
    let missing: Vec<&str> = PAPER_NFS
        .iter()
        .copied()
        .filter(|w| {
            !bricks::CLASSES.iter().any(|c| {
                c.name
                    .to_ascii_lowercase()
                    .contains(&w.to_ascii_lowercase())
            })
        })
        .collect();
    if !missing.is_empty() {
        b.report.lines.push(format!(
            "  bricks: not in examples/bricks yet: {}",
            missing.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ttl: u8, dst: [u8; 4]) -> Vec<u8> {
        wire::build::Frame::udp([10, 0, 0, 1], dst, 1000, 53)
            .ttl(ttl)
            .build()
    }

    fn records(frames: &[Vec<u8>]) -> Vec<Record> {
        let mut out = Vec::new();
        for f in frames {
            out.push(Record {
                timestamp: packet::Timestamp::default(),
                precision: packet::Precision::Nano,
                orig_len: f.len() as u32,
                data: f.clone(),
            });
        }
        out
    }

    /// The IPv4 header of a frame: TTL and whether its checksum holds.
    fn ip(d: &[u8]) -> (u8, bool) {
        let ip = wire::ipv4::Packet::new_unchecked(&d[14..]);
        (ip.ttl(), ip.verify_checksum())
    }

    #[test]
    fn the_native_ttl_nf_does_what_the_operator_one_does() {
        let mut ops = ttl_nf();
        let mut cx = Cx::default();
        let mut arp = frame(64, [10, 1, 0, 1]);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut frames = vec![arp, frame(64, [10, 1, 0, 1])[..30].to_vec()];
        frames.extend([0u8, 1, 2, 64, 255].map(|t| frame(t, [10, 1, 0, 1])));
        for f in frames {
            let mut native = Packet::from_bytes(&f);
            let kept = ttl_native(&mut native);
            let out = ops.run(Pkt::new(Packet::from_bytes(&f)), &mut cx);
            match out.map(|p| p.into_packet()) {
                Some(p) => {
                    assert!(kept);
                    assert_eq!(p.data(), native.data());
                    assert_eq!(
                        (p.meta.network_offset, p.meta.transport_offset),
                        (native.meta.network_offset, native.meta.transport_offset)
                    );
                }
                None => assert!(!kept, "{f:?}"),
            }
        }
    }

    #[test]
    fn ttl_nfs_compose_and_keep_the_checksum() {
        let mut two = Then(ttl_nf(), ttl_nf());
        let mut cx = Cx::default();
        let out = two.run(
            Pkt::new(Packet::from_bytes(&frame(64, [10, 1, 0, 1]))),
            &mut cx,
        );
        let out = out.map(|p| p.into_packet());
        assert_eq!(out.as_ref().map(|p| ip(p.data())), Some((62, true)));
        assert!(two
            .run(
                Pkt::new(Packet::from_bytes(&frame(2, [10, 1, 0, 1]))),
                &mut cx
            )
            .is_none());
        let reasons: Vec<_> = cx.take_dropped().map(|(_, r)| r).collect();
        assert_eq!(reasons, ["ttl-expired"]);
    }

    #[test]
    fn rings_run_every_packet_through_every_nf() {
        let frames: Vec<Vec<u8>> = (0..100u8).map(|i| frame(64, [10, 1, 0, i])).collect();
        let recs = records(&frames);
        for copy in [false, true] {
            for k in [1, 3] {
                let mut rings = Rings::start(k, copy, &recs, 8);
                for _ in 0..3 {
                    assert_eq!(rings.pass(), 100);
                    // Every buffer the feeder got back went through the k NFs.
                    let mut seen: Vec<(u8, bool)> =
                        rings.free.iter().map(|p| ip(p.data())).collect();
                    seen.dedup();
                    assert_eq!(seen, [(64 - k as u8, true)], "k {k} copy {copy}");
                }
            }
        }
    }

    #[test]
    fn the_operator_router_sends_by_longest_prefix_with_the_hop_addresses() {
        let table = route_table(
            "10.0.0.0/8 1, 10.1.0.0/16 2, 10.1.2.0/24 3, 0.0.0.0/0 0",
            Path::new("x"),
        )
        .unwrap();
        let mut nf = lpm_nf(table);
        let mut cx = Cx::default();
        for (dst, hop) in [
            ([10, 1, 2, 3], 3),
            ([10, 1, 3, 3], 2),
            ([10, 9, 9, 9], 1),
            ([11, 0, 0, 1], 0),
        ] {
            assert!(nf
                .run(Pkt::new(Packet::from_bytes(&frame(64, dst))), &mut cx)
                .is_none());
            let sent: Vec<_> = cx.take_sent().collect();
            assert_eq!(sent.len(), 1);
            assert_eq!(sent[0].0, hop, "{dst:?}");
            let d = sent[0].1.data();
            assert_eq!(d[..6], hop_mac(hop));
            assert_eq!(d[6..12], SRC_MAC);
        }
        let mut bad = frame(64, [10, 1, 2, 3]);
        bad[24] ^= 1;
        assert!(nf
            .run(Pkt::new(Packet::from_bytes(&bad)), &mut cx)
            .is_none());
        let reasons: Vec<_> = cx.take_dropped().map(|(_, r)| r).collect();
        assert_eq!(reasons, ["bad-ip-header"]);
    }
}
