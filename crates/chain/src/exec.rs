//! The naive executor: every NF runs its own element graph, run to completion, one input
//! packet at a time; packets cross links by move.

use crate::file::{ChainFile, Endpoint};
use crate::nf::Nf;
use crate::reflect;
use crate::summary::{ElementSummary, ExitSummary, NfSummary, Summary, Totals};
use elements::Element;
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
        RunOptions {
            batch: packet::DEFAULT_BATCH_SIZE,
            reflect: Vec::new(),
            defines: Vec::new(),
        }
    }
}

/// Packets kept in memory: timestamp, resolution and bytes, in output order.
pub type Captured = Vec<(Timestamp, Precision, Vec<u8>)>;

/// Where the packets of one exit go.
pub enum ExitSink {
    /// Written to a pcap file.
    Pcap(PcapWriter),
    /// Kept in memory (tests, `verify`): bytes with their timestamps.
    Memory(Captured),
    /// Only counted (in-memory replay).
    Count,
}

struct Exit {
    name: String,
    sink: ExitSink,
    packets: u64,
    bytes: u64,
    /// For `--reflect`: the (global) element replies re-enter at.
    reflect_to: Option<u32>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Inner,
    /// A `ToDevice` of a linked interface: packets continue at this (global) element.
    Link(u32),
    /// A `ToDevice` of an unlinked interface, or a `ToDump`: packets leave the chain here.
    Exit(u32),
}

/// What the hot loop reads about an element: one bounds check instead of four.
#[derive(Clone, Copy)]
struct Info {
    kind: Kind,
    nf: u32,
    edge_base: u32,
    outputs: u32,
}

/// Where an output port leads, in global element indices; `u32::MAX` when unconnected.
#[derive(Clone, Copy)]
struct Edge {
    element: u32,
    port: u32,
}

const UNCONNECTED: Edge = Edge {
    element: u32::MAX,
    port: 0,
};

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
///
/// Elements of all NFs live in one flat table (global indices) so the hot loop follows a
/// packet from element to element without nested lookups; a packet that goes straight on
/// (the common case) never touches the work stack.
pub struct Executor {
    nfs: Vec<Nf>,
    /// First global index of each NF's elements.
    base: Vec<u32>,
    elements: Vec<Box<dyn Element>>,
    nf_of: Vec<u32>,
    /// First index into `edges` / `out_count` of each element's outputs.
    edge_base: Vec<u32>,
    /// What the hot loop needs about each element, in one place.
    info: Vec<Info>,
    edges: Vec<Edge>,
    /// Arrivals that did not come through a counted edge (inputs, link crossings,
    /// replies); an element's input count is this plus its incoming edges' counts.
    arrivals: Vec<u64>,
    out_count: Vec<u64>,
    drops: Vec<Vec<(&'static str, u64)>>,
    nf_counters: Vec<NfCounters>,
    exits: Vec<Exit>,
    entries: BTreeMap<Endpoint, (usize, usize)>,
    dump_sources: Vec<(String, (usize, usize), PathBuf)>,
    cx: Context,
    stack: Vec<(u32, u32, Packet)>,
    emitted: Vec<(usize, Packet)>,
    pool: Vec<Packet>,
    chain_in: u64,
    chain_created: u64,
    next_input: u64,
    batch: usize,
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
            nfs.iter()
                .find(|n| n.name == e.nf)
                .is_some_and(|n| n.interfaces().contains(&e.iface))
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
        let mut base = Vec::new();
        let mut total = 0u32;
        for nf in &nfs {
            base.push(total);
            total += nf.elements.len() as u32;
        }
        let mut entries = BTreeMap::new();
        let mut dump_sources = Vec::new();
        for (ni, nf) in nfs.iter().enumerate() {
            for (ei, role) in nf.roles.iter().enumerate() {
                match role {
                    Role::FromDevice(d) => {
                        entries.insert(
                            Endpoint {
                                nf: nf.name.clone(),
                                iface: d.clone(),
                            },
                            (ni, ei),
                        );
                    }
                    Role::FromDump(p) => dump_sources.push((
                        format!("{}/{}", nf.name, nf.names[ei]),
                        (ni, ei),
                        p.clone(),
                    )),
                    _ => {}
                }
            }
        }
        let global = |(n, e): (usize, usize)| base[n] + e as u32;
        let mut exits: Vec<Exit> = Vec::new();
        let mut kinds = Vec::new();
        for nf in &nfs {
            for role in &nf.roles {
                kinds.push(match role {
                    Role::ToDevice(d) => {
                        let here = Endpoint { nf: nf.name.clone(), iface: d.clone() };
                        match chain.peer(&here) {
                            Some(peer) => match entries.get(peer) {
                                Some(&target) => Kind::Link(global(target)),
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
                                            Some(global(*entries.get(&here).ok_or_else(|| {
                                                format!(
                                                    "--reflect {here}: NF `{}` has no FromDevice({}) for the replies",
                                                    here.nf, here.iface
                                                )
                                            })?))
                                        } else {
                                            None
                                        };
                                        let sink = sink(&name, None)?;
                                        exits.push(Exit { name, sink, packets: 0, bytes: 0, reflect_to });
                                        exits.len() - 1
                                    }
                                };
                                Kind::Exit(idx as u32)
                            }
                        }
                    }
                    Role::ToDump(p) => {
                        let name = p.display().to_string();
                        let sink = sink(&name, Some(p))?;
                        exits.push(Exit { name, sink, packets: 0, bytes: 0, reflect_to: None });
                        Kind::Exit(exits.len() as u32 - 1)
                    }
                    _ => Kind::Inner,
                });
            }
        }
        for r in &options.reflect {
            if nf_index(&r.nf).is_none() || !exits.iter().any(|x| x.name == r.to_string()) {
                return Err(format!(
                    "--reflect {r}: not an exit of the chain (exits are unlinked interfaces with a ToDevice)"
                ));
            }
        }
        let mut elements = Vec::new();
        let mut nf_of = Vec::new();
        let mut edge_base = Vec::new();
        let mut edges = Vec::new();
        for (ni, nf) in nfs.iter_mut().enumerate() {
            for outs in &nf.edges {
                edge_base.push(edges.len() as u32);
                nf_of.push(ni as u32);
                edges.extend(outs.iter().map(|e| match e {
                    Some(e) => Edge {
                        element: base[ni] + e.element as u32,
                        port: e.port as u32,
                    },
                    None => UNCONNECTED,
                }));
            }
            elements.append(&mut nf.elements);
        }
        edge_base.push(edges.len() as u32);
        let n = elements.len();
        let info = (0..n)
            .map(|i| Info {
                kind: kinds[i],
                nf: nf_of[i],
                edge_base: edge_base[i],
                outputs: edge_base[i + 1] - edge_base[i],
            })
            .collect();
        Ok(Executor {
            nf_counters: vec![NfCounters::default(); nfs.len()],
            nfs,
            base,
            elements,
            nf_of,
            arrivals: vec![0; n],
            out_count: vec![0; edges.len()],
            drops: vec![Vec::new(); n],
            edge_base,
            info,
            edges,
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
        })
    }

    /// The NFs of the chain (names, classes, roles and connections of their elements; the
    /// elements themselves run inside the executor).
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

    /// A streamed input for the entry element `entry` (NF index, element index).
    pub fn source(
        &self,
        name: String,
        entry: (usize, usize),
        records: Box<dyn Iterator<Item = Result<Record, PcapError>>>,
    ) -> Source {
        Source {
            name,
            entry,
            records,
            head: None,
        }
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
        // Read a batch of packets (with the entry each goes to), then run them one by one.
        let mut batch = packet::Batch::with_capacity(self.batch);
        let mut entries: Vec<(usize, usize)> = Vec::with_capacity(self.batch);
        loop {
            while !batch.is_full() {
                // The earliest head; ties go to the earlier source.
                let best = sources
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.head.as_ref().map(|h| (h.timestamp, i)))
                    .min();
                let Some((_, b)) = best else { break };
                if let Some(rec) = sources[b].head.take() {
                    let p = self.packet_from(&rec.data, rec.timestamp, rec.precision);
                    if batch.push(p).is_ok() {
                        entries.push(sources[b].entry);
                    }
                }
                advance(&mut sources[b], &mut errors);
            }
            if batch.is_empty() {
                break;
            }
            for (entry, p) in entries.drain(..).zip(batch.drain()) {
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
        // Merge once: (timestamp, input order) gives the canonical order.
        let mut order: Vec<(Timestamp, usize, usize)> = Vec::new();
        for (i, (_, recs)) in inputs.iter().enumerate() {
            order.extend(recs.iter().enumerate().map(|(j, r)| (r.timestamp, i, j)));
        }
        order.sort();
        let (Some(first), Some(last)) = (order.first(), order.last()) else {
            return 0;
        };
        let span = last.0 .0 - first.0 .0;
        let gap = order
            .windows(2)
            .map(|w| w[1].0 .0 - w[0].0 .0)
            .filter(|&g| g > 0)
            .min()
            .unwrap_or(1_000);
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
        let mut p = self.pool.pop().unwrap_or_else(|| Packet::from_bytes(&[]));
        p.reset(data);
        p.meta.timestamp = ts;
        p.meta.precision = precision;
        p
    }

    #[inline]
    fn recycle(&mut self, p: Packet) {
        if self.pool.len() < 4096 {
            self.pool.push(p);
        }
    }

    /// Pushes one chain input packet in at `entry` (NF index, element index) and runs it, and
    /// everything it causes, to completion.
    pub fn inject(&mut self, entry: (usize, usize), mut p: Packet) {
        p.meta.input_index = self.next_input;
        self.next_input += 1;
        self.chain_in += 1;
        if p.meta.timestamp > self.cx.now {
            self.cx.now = p.meta.timestamp;
        }
        self.nf_counters[entry.0].input += 1;
        let el = self.base[entry.0] + entry.1 as u32;
        self.arrivals[el as usize] += 1;
        self.run_from(el, 0, p);
    }

    fn count_drop(&mut self, el: u32, reason: &'static str) {
        self.nf_counters[self.nf_of[el as usize] as usize].dropped += 1;
        let d = &mut self.drops[el as usize];
        match d.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => d.push((reason, 1)),
        }
    }

    /// Follows a packet from element to element until it leaves, is dropped or is kept;
    /// then continues with the work stack (copies and other emissions), depth first.
    fn run_from(&mut self, mut el: u32, mut port: u32, mut p: Packet) {
        loop {
            let e = el as usize;
            let Some(&info) = self.info.get(e) else {
                return;
            };
            match info.kind {
                Kind::Inner => {
                    let v = self.elements[e].push(port as usize, p, &mut self.cx);
                    if self.cx.has_pending() {
                        self.settle(el);
                    }
                    match v {
                        Verdict::Out(o, q) => {
                            let k = info.edge_base as usize + o;
                            if o < info.outputs as usize {
                                if let (Some(&next), Some(c)) =
                                    (self.edges.get(k), self.out_count.get_mut(k))
                                {
                                    if next.element != u32::MAX {
                                        *c += 1;
                                        (el, port, p) = (next.element, next.port, q);
                                        continue;
                                    }
                                }
                            }
                            self.count_drop(el, "unconnected-output");
                            self.recycle(q);
                        }
                        Verdict::Drop(q, reason) => {
                            self.count_drop(el, reason);
                            self.recycle(q);
                        }
                        Verdict::Done => {}
                    }
                }
                Kind::Link(target) => {
                    let nf = info.nf as usize;
                    if p.meta.hops >= MAX_HOPS {
                        self.count_drop(el, "loop");
                        self.recycle(p);
                    } else {
                        p.meta.hops += 1;
                        self.nf_counters[nf].output += 1;
                        self.nf_counters[self.nf_of[target as usize] as usize].input += 1;
                        self.arrivals[target as usize] += 1;
                        (el, port) = (target, 0);
                        continue;
                    }
                }
                Kind::Exit(x) => {
                    self.nf_counters[info.nf as usize].output += 1;
                    self.exit(x as usize, p);
                }
            }
            match self.stack.pop() {
                Some((e2, p2, q)) => (el, port, p) = (e2, p2, q),
                None => return,
            }
        }
    }

    /// Accounts for what an element did through its context (created, dropped, emitted
    /// packets) and stacks the emissions so the first emitted runs first.
    #[cold]
    fn settle(&mut self, el: u32) {
        let created = self.cx.take_created();
        self.nf_counters[self.nf_of[el as usize] as usize].created += created;
        let dropped: Vec<(Packet, &'static str)> = self.cx.take_dropped().collect();
        for (p, r) in dropped {
            self.count_drop(el, r);
            self.recycle(p);
        }
        let mut em = std::mem::take(&mut self.emitted);
        em.extend(self.cx.take_emitted());
        for (o, p) in em.drain(..).rev() {
            let e = el as usize;
            let k = self.edge_base[e] as usize + o;
            if o < (self.edge_base[e + 1] - self.edge_base[e]) as usize
                && self.edges[k].element != u32::MAX
            {
                self.out_count[k] += 1;
                self.stack
                    .push((self.edges[k].element, self.edges[k].port, p));
            } else {
                self.count_drop(el, "unconnected-output");
                self.recycle(p);
            }
        }
        self.emitted = em;
        self.cx.settled();
    }

    fn exit(&mut self, x: usize, p: Packet) {
        let exit = &mut self.exits[x];
        exit.packets += 1;
        exit.bytes += p.len() as u64;
        let reflect_to = exit.reflect_to.filter(|_| !p.meta.reflected);
        match &mut exit.sink {
            ExitSink::Pcap(w) => {
                if let Err(e) = w.write(p.meta.timestamp, p.data()) {
                    eprintln!("fusebox: {}: {e}", exit.name);
                }
            }
            ExitSink::Memory(v) => v.push((p.meta.timestamp, p.meta.precision, p.data().to_vec())),
            ExitSink::Count => {}
        }
        if let Some(target) = reflect_to {
            let bytes = reflect::reply(&p);
            let mut r = self.packet_from(&bytes, p.meta.timestamp, p.meta.precision);
            r.meta.input_index = p.meta.input_index;
            r.meta.reflected = true;
            self.chain_created += 1;
            self.nf_counters[self.nf_of[target as usize] as usize].input += 1;
            self.arrivals[target as usize] += 1;
            self.stack.push((target, 0, r));
        }
        self.recycle(p);
    }

    /// Finishes the sinks (flushes pcap files) and returns the in-memory outputs by exit name.
    pub fn finish(&mut self) -> Result<BTreeMap<String, Captured>, String> {
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

    /// The state of every stateful element, per NF: `element: line` entries in one format
    /// shared by every execution mode (NAT mappings, round-robin positions, ...), so that
    /// runs can be compared.
    pub fn state_dump(&self) -> BTreeMap<String, Vec<String>> {
        let mut out = BTreeMap::new();
        for (ni, nf) in self.nfs.iter().enumerate() {
            let mut lines = Vec::new();
            for li in 0..nf.names.len() {
                let g = self.base[ni] as usize + li;
                for l in self.elements[g].state_dump() {
                    lines.push(format!("{}: {l}", nf.names[li]));
                }
            }
            out.insert(nf.name.clone(), lines);
        }
        out
    }

    /// Counters of the run so far, per NF and element, with the accounting check.
    pub fn summary(&self) -> Summary {
        let mut in_count = self.arrivals.clone();
        for (k, edge) in self.edges.iter().enumerate() {
            if let Some(c) = in_count.get_mut(edge.element as usize) {
                *c += self.out_count[k];
            }
        }
        let mut nfs = Vec::new();
        let mut t = Totals {
            input: self.chain_in,
            created: self.chain_created,
            ..Totals::default()
        };
        for (ni, nf) in self.nfs.iter().enumerate() {
            let c = self.nf_counters[ni];
            let mut drops: BTreeMap<String, u64> = BTreeMap::new();
            let mut elements = Vec::new();
            let mut held = 0;
            for li in 0..nf.names.len() {
                let g = self.base[ni] as usize + li;
                let e = &self.elements[g];
                held += e.held();
                for (r, n) in &self.drops[g] {
                    *drops.entry(r.to_string()).or_default() += n;
                    *t.drops.entry(r.to_string()).or_default() += n;
                }
                let outs = self.edge_base[g] as usize..self.edge_base[g + 1] as usize;
                elements.push(ElementSummary {
                    name: nf.names[li].clone(),
                    class: e.class_name().to_string(),
                    input: in_count[g],
                    output: self.out_count[outs].to_vec(),
                    drops: self.drops[g]
                        .iter()
                        .map(|(r, n)| (r.to_string(), *n))
                        .collect(),
                    stats: e
                        .stats()
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
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
        let exits: Vec<ExitSummary> = self
            .exits
            .iter()
            .map(|x| ExitSummary {
                name: x.name.clone(),
                packets: x.packets,
                bytes: x.bytes,
            })
            .collect();
        t.output = exits.iter().map(|x| x.packets).sum();
        t.balanced = t.input + t.created == t.output + t.dropped + t.held;
        Summary {
            nfs,
            exits,
            totals: t,
        }
    }
}
