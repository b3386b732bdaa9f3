//! The naive executor: every NF runs its own element graph, run to completion, one input
//! packet at a time; packets cross links by move.

use crate::file::{ChainFile, Endpoint};
use crate::nf::Nf;
use crate::reflect;
use crate::summary::{ElementSummary, ExitSummary, NfSummary, Summary, Totals};
use elements::{Context, Role, Verdict};
use packet::{Packet, Precision, Timestamp};
use ports::pcap::{PcapError, PcapWriter, Record};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A packet crossing more links than this is dropped with reason `loop`.
pub const MAX_HOPS: u8 = 64;

/// Options of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Packets read and processed per batch (32 by default). Results do not depend on it.
    pub batch: usize,
    /// Exits whose packets come back in as replies (`--reflect NF.IFACE`).
    pub reflect: Vec<Endpoint>,
    /// `--define NAME=VALUE` overrides applied to every NF's configuration.
    pub defines: Vec<(String, String)>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { batch: packet::DEFAULT_BATCH_SIZE, reflect: Vec::new(), defines: Vec::new() }
    }
}

/// Where the packets of one exit go.
pub enum ExitSink {
    /// Written to a pcap file.
    Pcap(PcapWriter),
    /// Kept in memory (tests, `verify`): bytes with their timestamps.
    Memory(Vec<(Timestamp, Precision, Vec<u8>)>),
    /// Only counted (in-memory replay).
    Count,
}

struct Exit {
    name: String,
    sink: ExitSink,
    packets: u64,
    bytes: u64,
    /// For `--reflect`: the element replies re-enter at.
    reflect_to: Option<(usize, usize)>,
}

#[derive(Clone, Copy)]
enum Kind {
    Inner,
    /// A `ToDevice` of a linked interface: packets continue at this NF's element.
    Link { nf: usize, element: usize },
    /// A `ToDevice` of an unlinked interface, or a `ToDump`: packets leave the chain here.
    Exit(usize),
}

#[derive(Default, Clone)]
struct ElementCounters {
    input: u64,
    output: Vec<u64>,
    drops: Vec<(&'static str, u64)>,
}

#[derive(Default, Clone, Copy)]
struct NfCounters {
    input: u64,
    output: u64,
    created: u64,
    dropped: u64,
}

/// One input of a run: packets for an entry element, streamed or in memory.
pub struct Source {
    /// Display name (`NF.IFACE=FILE`).
    pub name: String,
    entry: (usize, usize),
    records: Box<dyn Iterator<Item = Result<Record, PcapError>>>,
    head: Option<Record>,
}

/// The naive executor of a chain.
pub struct Executor {
    nfs: Vec<Nf>,
    kinds: Vec<Vec<Kind>>,
    counters: Vec<Vec<ElementCounters>>,
    nf_counters: Vec<NfCounters>,
    exits: Vec<Exit>,
    entries: BTreeMap<Endpoint, (usize, usize)>,
    dump_sources: Vec<(String, (usize, usize), PathBuf)>,
    cx: Context,
    stack: Vec<(usize, usize, usize, Packet)>,
    emitted: Vec<(usize, Packet)>,
    pool: Vec<Vec<u8>>,
    chain_in: u64,
    chain_created: u64,
    next_input: u64,
    batch: usize,
    keep_buffers: bool,
}

impl Executor {
    /// Builds every NF of `chain` and wires them. `sink` makes the sink of each exit, given
    /// its name (`NF.IFACE`, or the file of a `ToDump`).
    pub fn new(
        chain: &ChainFile,
        options: &RunOptions,
        mut sink: impl FnMut(&str, Option<&PathBuf>) -> Result<ExitSink, String>,
    ) -> Result<Executor, String> {
        let mut nfs = Vec::new();
        for spec in &chain.nfs {
            let mut defines = spec.defines.clone();
            defines.extend(options.defines.iter().cloned());
            let config = click::parse_file(&spec.click, &defines).map_err(|e| e.to_string())?;
            let base = spec.click.parent().map(PathBuf::from).unwrap_or_default();
            nfs.push(Nf::build(&spec.name, &config, &base).map_err(|e| e.to_string())?);
        }
        // Every link and entry must name a real interface.
        let has_iface = |e: &Endpoint, nfs: &[Nf]| {
            nfs.iter().find(|n| n.name == e.nf).is_some_and(|n| n.interfaces().contains(&e.iface))
        };
        for (a, b, pos) in &chain.links {
            for e in [a, b] {
                if !has_iface(e, &nfs) {
                    let n = nfs.iter().find(|n| n.name == e.nf);
                    let list = n.map(|n| n.interfaces().join(", ")).unwrap_or_default();
                    return Err(format!(
                        "{pos}: unknown interface `{e}`: NF `{}` has interfaces [{list}] (its FromDevice/ToDevice names)",
                        e.nf
                    ));
                }
            }
        }
        for (e, pos) in &chain.entries {
            if !has_iface(e, &nfs) {
                return Err(format!("{pos}: unknown interface `{e}` in entry"));
            }
        }
        let nf_index = |name: &str| nfs.iter().position(|n| n.name == name);
        let mut entries = BTreeMap::new();
        let mut dump_sources = Vec::new();
        for (ni, nf) in nfs.iter().enumerate() {
            for (ei, e) in nf.elements.iter().enumerate() {
                match e.role() {
                    Role::FromDevice(d) => {
                        entries.insert(Endpoint { nf: nf.name.clone(), iface: d }, (ni, ei));
                    }
                    Role::FromDump(p) => dump_sources.push((format!("{}/{}", nf.name, nf.names[ei]), (ni, ei), p)),
                    _ => {}
                }
            }
        }
        let mut exits: Vec<Exit> = Vec::new();
        let mut kinds = Vec::new();
        for nf in &nfs {
            let mut k = Vec::new();
            for e in &nf.elements {
                k.push(match e.role() {
                    Role::ToDevice(d) => {
                        let here = Endpoint { nf: nf.name.clone(), iface: d };
                        match chain.peer(&here) {
                            Some(peer) => match entries.get(peer) {
                                Some(&(pn, pe)) => Kind::Link { nf: pn, element: pe },
                                None => {
                                    return Err(format!(
                                        "link `{here}` ↔ `{peer}`: NF `{}` has no FromDevice({}) to receive packets",
                                        peer.nf, peer.iface
                                    ))
                                }
                            },
                            None => {
                                let name = here.to_string();
                                let idx = match exits.iter().position(|x| x.name == name) {
                                    Some(i) => i,
                                    None => {
                                        let reflect_to = if options.reflect.contains(&here) {
                                            Some(*entries.get(&here).ok_or_else(|| {
                                                format!("--reflect {here}: NF `{}` has no FromDevice({}) for the replies", here.nf, here.iface)
                                            })?)
                                        } else {
                                            None
                                        };
                                        exits.push(Exit { name: name.clone(), sink: sink(&name, None)?, packets: 0, bytes: 0, reflect_to });
                                        exits.len() - 1
                                    }
                                };
                                Kind::Exit(idx)
                            }
                        }
                    }
                    Role::ToDump(p) => {
                        let name = p.display().to_string();
                        exits.push(Exit { name: name.clone(), sink: sink(&name, Some(&p))?, packets: 0, bytes: 0, reflect_to: None });
                        Kind::Exit(exits.len() - 1)
                    }
                    _ => Kind::Inner,
                });
            }
            kinds.push(k);
        }
        for r in &options.reflect {
            if nf_index(&r.nf).is_none() || !exits.iter().any(|x| x.name == r.to_string()) {
                return Err(format!("--reflect {r}: not an exit of the chain (exits are unlinked interfaces with a ToDevice)"));
            }
        }
        let counters = nfs
            .iter()
            .map(|nf| nf.edges.iter().map(|o| ElementCounters { output: vec![0; o.len()], ..Default::default() }).collect())
            .collect();
        Ok(Executor {
            nf_counters: vec![NfCounters::default(); nfs.len()],
            nfs,
            kinds,
            counters,
            exits,
            entries,
            dump_sources,
            cx: Context::new(Timestamp(0)),
            stack: Vec::new(),
            emitted: Vec::new(),
            pool: Vec::new(),
            chain_in: 0,
            chain_created: 0,
            next_input: 0,
            batch: options.batch.max(1),
            keep_buffers: true,
        })
    }

    /// The NFs of the chain.
    pub fn nfs(&self) -> &[Nf] {
        &self.nfs
    }

    /// The entry element for `NF.IFACE`, if the NF has a `FromDevice` for it.
    pub fn entry(&self, e: &Endpoint) -> Option<(usize, usize)> {
        self.entries.get(e).copied()
    }

    /// Names of the exits, in order.
    pub fn exit_names(&self) -> Vec<String> {
        self.exits.iter().map(|x| x.name.clone()).collect()
    }

    /// A streamed input for `NF.IFACE`.
    pub fn source(
        &self,
        name: String,
        entry: (usize, usize),
        records: Box<dyn Iterator<Item = Result<Record, PcapError>>>,
    ) -> Source {
        Source { name, entry, records, head: None }
    }

    /// Inputs declared inside the NFs by `FromDump` elements (name, entry, file).
    pub fn dump_sources(&self) -> &[(String, (usize, usize), PathBuf)] {
        &self.dump_sources
    }

    /// Runs every source to its end, merged on timestamps (ties: the earlier source).
    /// Returns the errors that stopped sources early (every complete record before the error
    /// was processed). `progress` is called after every batch with the packets done so far.
    pub fn run(&mut self, mut sources: Vec<Source>, mut progress: impl FnMut(u64)) -> Vec<String> {
        let mut errors = Vec::new();
        let advance = |s: &mut Source, errors: &mut Vec<String>| {
            s.head = match s.records.next() {
                Some(Ok(r)) => Some(r),
                Some(Err(e)) => {
                    errors.push(format!("{}: {e}", s.name));
                    None
                }
                None => None,
            };
        };
        for s in sources.iter_mut() {
            advance(s, &mut errors);
        }
        let mut batch: Vec<((usize, usize), Record)> = Vec::with_capacity(self.batch);
        loop {
            while batch.len() < self.batch {
                let mut best: Option<usize> = None;
                for (i, s) in sources.iter().enumerate() {
                    if let Some(h) = &s.head {
                        if best.is_none_or(|b| h.timestamp < sources[b].head.as_ref().map_or(Timestamp(u64::MAX), |r| r.timestamp)) {
                            best = Some(i);
                        }
                    }
                }
                let Some(b) = best else { break };
                let rec = sources[b].head.take();
                advance(&mut sources[b], &mut errors);
                if let Some(rec) = rec {
                    batch.push((sources[b].entry, rec));
                }
            }
            if batch.is_empty() {
                break;
            }
            for (entry, rec) in batch.drain(..) {
                let p = self.packet_from(&rec.data, rec.timestamp, rec.precision);
                self.inject(entry, p);
            }
            progress(self.chain_in);
        }
        errors
    }

    /// Replays `inputs` (already in memory) `passes` times without I/O. Each pass shifts
    /// timestamps by the trace's span plus one inter-packet gap (1 µs when all packets share
    /// one timestamp), so virtual time keeps moving; every pass restores the original bytes.
    /// Returns the number of packets pushed.
    pub fn replay(&mut self, inputs: &[((usize, usize), Vec<Record>)], passes: u64) -> u64 {
        self.keep_buffers = true;
        // Merge once: (timestamp, input order) gives the canonical order.
        let mut order: Vec<(Timestamp, usize, usize)> = Vec::new();
        for (i, (_, recs)) in inputs.iter().enumerate() {
            order.extend(recs.iter().enumerate().map(|(j, r)| (r.timestamp, i, j)));
        }
        order.sort();
        let (Some(first), Some(last)) = (order.first(), order.last()) else { return 0 };
        let span = last.0 .0 - first.0 .0;
        let gap = order.windows(2).map(|w| w[1].0 .0 - w[0].0 .0).filter(|&g| g > 0).min().unwrap_or(1_000);
        let shift = span + gap;
        let mut n = 0;
        for pass in 0..passes {
            let off = shift.saturating_mul(pass);
            for &(ts, i, j) in &order {
                let (entry, recs) = &inputs[i];
                let r = &recs[j];
                let p = self.packet_from(&r.data, ts.add_nanos(off), r.precision);
                self.inject(*entry, p);
                n += 1;
            }
        }
        n
    }

    fn packet_from(&mut self, data: &[u8], ts: Timestamp, precision: Precision) -> Packet {
        let mut p = Packet::from_bytes_in(self.pool.pop().unwrap_or_default(), data);
        p.meta.timestamp = ts;
        p.meta.precision = precision;
        p
    }

    fn recycle(&mut self, p: Packet) {
        if self.keep_buffers && self.pool.len() < 4096 {
            self.pool.push(p.into_buffer());
        }
    }

    /// Pushes one chain input packet in at `entry` and runs it, and everything it causes, to
    /// completion.
    pub fn inject(&mut self, entry: (usize, usize), mut p: Packet) {
        p.meta.input_index = self.next_input;
        self.next_input += 1;
        self.chain_in += 1;
        if p.meta.timestamp > self.cx.now {
            self.cx.now = p.meta.timestamp;
        }
        self.nf_counters[entry.0].input += 1;
        self.stack.push((entry.0, entry.1, 0, p));
        self.drain();
    }

    fn count_drop(&mut self, nf: usize, el: usize, reason: &'static str) {
        self.nf_counters[nf].dropped += 1;
        let d = &mut self.counters[nf][el].drops;
        match d.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => d.push((reason, 1)),
        }
    }

    fn drain(&mut self) {
        while let Some((nf, el, port, p)) = self.stack.pop() {
            match self.kinds[nf][el] {
                Kind::Inner => {}
                Kind::Link { nf: pn, element: pe } => {
                    self.counters[nf][el].input += 1;
                    let mut p = p;
                    if p.meta.hops >= MAX_HOPS {
                        self.count_drop(nf, el, "loop");
                        self.recycle(p);
                        continue;
                    }
                    p.meta.hops += 1;
                    self.nf_counters[nf].output += 1;
                    self.nf_counters[pn].input += 1;
                    self.stack.push((pn, pe, 0, p));
                    continue;
                }
                Kind::Exit(x) => {
                    self.counters[nf][el].input += 1;
                    self.nf_counters[nf].output += 1;
                    self.exit(x, p);
                    continue;
                }
            }
            self.counters[nf][el].input += 1;
            let v = self.nfs[nf].elements[el].push(port, p, &mut self.cx);
            let created = self.cx.take_created();
            if created > 0 {
                self.nf_counters[nf].created += created;
            }
            match v {
                Verdict::Out(o, p) => self.forward(nf, el, o, p),
                Verdict::Drop(p, reason) => {
                    self.count_drop(nf, el, reason);
                    self.recycle(p);
                }
                Verdict::Done => {}
            }
            if self.cx.has_pending() {
                let dropped: Vec<(Packet, &'static str)> = self.cx.take_dropped().collect();
                for (p, r) in dropped {
                    self.count_drop(nf, el, r);
                    self.recycle(p);
                }
                let mut em = std::mem::take(&mut self.emitted);
                em.extend(self.cx.take_emitted());
                // Depth first in emission order: the first emitted is processed first.
                for (o, p) in em.drain(..).rev() {
                    self.forward(nf, el, o, p);
                }
                self.emitted = em;
            }
        }
    }

    fn forward(&mut self, nf: usize, el: usize, port: usize, p: Packet) {
        match self.nfs[nf].edges[el].get(port).copied().flatten() {
            Some(edge) => {
                self.counters[nf][el].output[port] += 1;
                self.stack.push((nf, edge.element, edge.port, p));
            }
            None => {
                self.count_drop(nf, el, "unconnected-output");
                self.recycle(p);
            }
        }
    }

    fn exit(&mut self, x: usize, p: Packet) {
        let exit = &mut self.exits[x];
        exit.packets += 1;
        exit.bytes += p.len() as u64;
        let reflect_to = exit.reflect_to.filter(|_| !p.meta.reflected);
        let reply = reflect_to.map(|_| reflect::reply(&p));
        match &mut exit.sink {
            ExitSink::Pcap(w) => {
                if let Err(e) = w.write(p.meta.timestamp, p.data()) {
                    eprintln!("fusebox: {}: {e}", exit.name);
                }
            }
            ExitSink::Memory(v) => v.push((p.meta.timestamp, p.meta.precision, p.data().to_vec())),
            ExitSink::Count => {}
        }
        if let (Some((nf, el)), Some(bytes)) = (reflect_to, reply) {
            let mut r = self.packet_from(&bytes, p.meta.timestamp, p.meta.precision);
            r.meta.input_index = p.meta.input_index;
            r.meta.reflected = true;
            self.chain_created += 1;
            self.nf_counters[nf].input += 1;
            self.stack.push((nf, el, 0, r));
        }
        self.recycle(p);
    }

    /// Finishes the sinks (flushes pcap files) and returns the in-memory outputs by exit name.
    pub fn finish(&mut self) -> Result<BTreeMap<String, Vec<(Timestamp, Precision, Vec<u8>)>>, String> {
        let mut mem = BTreeMap::new();
        for x in &mut self.exits {
            match std::mem::replace(&mut x.sink, ExitSink::Count) {
                ExitSink::Pcap(w) => w.finish().map_err(|e| format!("{}: {e}", x.name))?,
                ExitSink::Memory(v) => {
                    mem.insert(x.name.clone(), v);
                }
                ExitSink::Count => {}
            }
        }
        Ok(mem)
    }

    /// Counters of the run so far, per NF and element, with the accounting check.
    pub fn summary(&self) -> Summary {
        let mut nfs = Vec::new();
        let mut t = Totals { input: self.chain_in, created: self.chain_created, ..Totals::default() };
        for (ni, nf) in self.nfs.iter().enumerate() {
            let c = self.nf_counters[ni];
            let held: u64 = nf.elements.iter().map(|e| e.held()).sum();
            let mut drops: BTreeMap<String, u64> = BTreeMap::new();
            let mut elements = Vec::new();
            for (ei, e) in nf.elements.iter().enumerate() {
                let ec = &self.counters[ni][ei];
                for (r, n) in &ec.drops {
                    *drops.entry(r.to_string()).or_default() += n;
                    *t.drops.entry(r.to_string()).or_default() += n;
                }
                elements.push(ElementSummary {
                    name: nf.names[ei].clone(),
                    class: e.class_name().to_string(),
                    input: ec.input,
                    output: ec.output.clone(),
                    drops: ec.drops.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
                    stats: e.stats().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                    held: e.held(),
                });
            }
            t.created += c.created;
            t.dropped += c.dropped;
            t.held += held;
            nfs.push(NfSummary {
                name: nf.name.clone(),
                input: c.input,
                output: c.output,
                created: c.created,
                dropped: c.dropped,
                held,
                balanced: c.input + c.created == c.output + c.dropped + held,
                drops,
                elements,
            });
        }
        let exits: Vec<ExitSummary> =
            self.exits.iter().map(|x| ExitSummary { name: x.name.clone(), packets: x.packets, bytes: x.bytes }).collect();
        t.output = exits.iter().map(|x| x.packets).sum();
        t.balanced = t.input + t.created == t.output + t.dropped + t.held;
        Summary { nfs, exits, totals: t }
    }
}
