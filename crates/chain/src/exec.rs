//! The executor: runs a chain of NFs over packets, in one of three modes.
//!
//! # Shape
//!
//! [`Executor`] holds the chain's elements in one flat table (global indices, NF after
//! NF) with their edges, counters, exits and the work stack: that is the **naive** mode,
//! the reference every other mode must match packet for packet, counter for counter and
//! state line for state line. Each other mode keeps its own state in its own type:
//!
//! * `SynthState` (`Executor::synth`, empty until [`Executor::install`]): the
//!   synthesized program, its per-node counts and compiled classifiers, and the remembered
//!   flows of the `flows` module;
//! * `FastState` (`Executor::fast`, `None` until [`Executor::enable_fastpath`]): the
//!   per-flow fast path of the `fast` module;
//! * `ParallelState` (`Executor::par`, `None` until [`Executor::enable_parallel`]): the
//!   groups of NFs run as branches on copies of a packet and merged by XOR (NFCompass), in
//!   the `parallel` module;
//! * `Measures` (`Executor::measures`): latency, per-flow time sampling and per-element
//!   times (the planner's profile), for
//!   `fusebox bench`.
//!
//! The one place a mode is chosen for a command is `synth::Mode::install` (synthesis
//! lives in the `synth` crate, which builds on this one).
//!
//! # Where a packet goes
//!
//! Packets enter through [`Executor::run`] (streamed pcap sources), [`Executor::replay`]
//! (in-memory records) or [`Executor::inject`] (one packet); all reach `push_in`, then
//! `run_from`. `run_from` is the one dispatch point: every work item names how it resumes
//! (`Resume`: at an element's input port — naive —, into a synthesized segment, as a
//! fork's copy, or into the fast path), and the naive loop itself only steps from element to
//! element. The modes' hooks inside it (a rewriter about to be read, recording for the fast
//! path, an exit) sit behind one flag per element step.
//!
//! # Adding a mode (as the parallel mode was)
//!
//! 1. its state as a type in a module under `exec/`, held in [`Executor`] (as
//!    `Option<Box<…>>`, like `FastState`), with an `enable_…`/`install` method that also
//!    sets `mode_hooks` if it must see naive element steps;
//! 2. a `Resume` variant if its packets enter somewhere other than an element's input,
//!    handled in `run_from` (and chosen in `push_in`/`exit` for fresh packets and replies);
//! 3. its counters folded into [`Executor::summary`] through `folded` if it skips elements;
//! 4. a `synth::Mode` variant and its arm in `synth::Mode::install`.
//!
//! # Adding a port type (e.g. AF_XDP)
//!
//! Input: a [`Source`] is any iterator of pcap-style records ([`Executor::source`]); a
//! live port is another such iterator, or calls [`Executor::inject`] per packet. Output:
//! an exit's packets go to an [`ExitSink`] (`Executor::exit`): a new port type is a new
//! `ExitSink` variant written there, and in [`Executor::finish`].

use crate::file::{ChainFile, Endpoint};
use crate::nf::Nf;
use crate::program::{
    Branch, Event, Finish, IpChecksum, Node, NodeId, Program, Regs, Track, Tuple, Val, NO_MAPPING,
};
use crate::reason::ChainReason;
use crate::reflect;
use crate::summary::{ElementSummary, ExitSummary, NfSummary, PortSummary, Summary, Totals};
use elements::hash::FlowHasher;
use elements::model::Field;
use elements::Element;
use elements::{Context, Role, Verdict};
use packet::{Packet, Precision, Timestamp};
use ports::pcap::{PcapError, PcapWriter, Record};
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;
use wire::checksum::fold;

mod batch;
mod classify;
mod error;
mod fast;
mod firsts;
mod flows;
mod merged;
mod nsh;
mod parallel;

pub use merged::MergeRefused;
pub use nsh::NshCounts;
pub use parallel::{ParallelStats, Refused};

pub use error::{FinishError, SetupError, SinkError};
pub use fast::{FastOptions, FastStats, Initial};

/// A packet crossing more links than this is dropped with reason `loop`.
pub const MAX_HOPS: u8 = 64;

/// How a work item (a packet on the work stack, or one `run_from` follows) resumes: the
/// one place the modes part ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resume {
    /// At this input port of the element (naive).
    Port(u32),
    /// Into the synthesized segment the element starts.
    Synth,
    /// As a copy a fork made, continuing the program at the fork's branch (the
    /// continuation is the last of `SynthState::forks`).
    Fork,
    /// Into the chain through the fast path (a reply).
    Fast,
}

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

/// Packets kept in memory with the index of the input whose processing sent each (the
/// index [`Executor::push_input`] was given), in output order: what a worker hands back
/// so outputs of several workers can be listed in canonical order.
pub type Tagged = Vec<(u64, Timestamp, Precision, Vec<u8>)>;

/// Where the packets of one exit go.
pub enum ExitSink {
    /// Written to a pcap file.
    Pcap(PcapWriter),
    /// Kept in memory (tests, `verify`): bytes with their timestamps.
    Memory(Captured),
    /// Only counted (in-memory replay).
    Count,
    /// Sent to a port (a live device: `--iface`): queued per packet, sent when the run
    /// flushes its ports (after every batch).
    Port(Box<dyn ports::port::TxPort>),
    /// Kept in memory, each packet tagged with its input's index ([`Executor::take_tagged`]).
    Tagged(Tagged),
    /// Handed to another executor: the exit is a link to an NF another executor runs (a
    /// stage of a pipeline, `dataplane::pipeline`). Whole packets, annotations kept, go to
    /// one list shared by every such exit, in the order they left
    /// ([`Executor::take_handoffs`]); the other executor takes them in with
    /// [`Executor::hand_in`].
    Handoff,
}

/// A packet that left by an [`ExitSink::Handoff`] exit, for the executor running the other
/// end of its link.
#[derive(Debug)]
pub struct Handoff {
    /// The exit it left by (index in [`Executor::exit_names`]).
    pub exit: usize,
    /// The index of the chain input whose processing sent it.
    pub input: u64,
    /// The packet, as it crossed (bytes and annotations).
    pub packet: Packet,
}

struct Exit {
    name: String,
    sink: ExitSink,
    packets: u64,
    bytes: u64,
    /// For `--reflect`: the (global) element replies re-enter at.
    reflect_to: Option<u32>,
    /// The counters of the port it sent to, once [`Executor::finish`] has closed it.
    port: Option<ports::port::PortCounters>,
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

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct NfCounters {
    input: u64,
    output: u64,
    created: u64,
    dropped: u64,
}

/// A port whose frames enter the chain at an entry element (NF index, element index), for
/// [`Executor::run_ports`].
pub type PortInput = ((usize, usize), Box<dyn ports::port::RxPort>);

/// One input of a run: packets for an entry element, streamed or in memory.
pub struct Source {
    /// Display name (`NF.IFACE=FILE`).
    pub name: String,
    entry: (usize, usize),
    records: Box<dyn Iterator<Item = Result<Record, PcapError>>>,
    head: Option<Record>,
}

/// The inputs of a run merged into one stream: at every step the source whose next record
/// is earliest (ties: the earlier source) gives it, with the entry it goes to. A source
/// that fails stops there and its error is kept ([`Merge::into_errors`]); every complete
/// record before it was given.
pub struct Merge {
    sources: Vec<Source>,
    errors: Vec<String>,
    primed: bool,
}

impl Merge {
    /// The merge of `sources` (nothing is read yet).
    pub fn new(sources: Vec<Source>) -> Merge {
        Merge {
            sources,
            errors: Vec::new(),
            primed: false,
        }
    }

    fn advance(s: &mut Source, errors: &mut Vec<String>) {
        s.head = match s.records.next() {
            Some(Ok(r)) => Some(r),
            Some(Err(e)) => {
                errors.push(format!("{}: {e}", s.name));
                None
            }
            None => None,
        };
    }

    /// The errors that stopped sources early (`NAME: error`).
    pub fn into_errors(self) -> Vec<String> {
        self.errors
    }
}

impl Iterator for Merge {
    /// A record with its entry (NF index, element index).
    type Item = ((usize, usize), Record);

    /// The earliest record of all sources, or `None` when every source is done.
    fn next(&mut self) -> Option<((usize, usize), Record)> {
        if !self.primed {
            self.primed = true;
            for s in self.sources.iter_mut() {
                Self::advance(s, &mut self.errors);
            }
        }
        let (_, b) = self
            .sources
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.head.as_ref().map(|h| (h.timestamp, i)))
            .min()?;
        let s = &mut self.sources[b];
        let rec = s.head.take()?;
        Self::advance(s, &mut self.errors);
        Some((s.entry, rec))
    }
}

/// The executor of a chain (see the module documentation for its shape).
///
/// Elements of all NFs live in one flat table (global indices) so the hot loop follows a
/// packet from element to element without nested lookups; a packet that goes straight on
/// (the common case) never touches the work stack. Its fields are, in order: the graph,
/// the counters, the inputs and exits, the run's working state, then each mode's state.
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
    /// The naive counters (every mode adds to them, or owes them and pays).
    counts: Counters,
    exits: Vec<Exit>,
    entries: BTreeMap<Endpoint, (usize, usize)>,
    dump_sources: Vec<(String, (usize, usize), PathBuf)>,
    cx: Context,
    stack: Vec<(u32, Resume, Packet)>,
    emitted: Vec<(usize, Packet)>,
    /// Scratch for [`Executor::run_firsts`]: the batch being gone through (its allocation
    /// kept between batches).
    /// Whether the last batch through [`Executor::run_firsts`] held first packets of flows
    /// (see [`Executor::firsts_now`]).
    firsts_likely: bool,
    /// Batches since the run began, for [`Executor::firsts_now`]'s probes.
    firsts_tick: u32,
    firsts_spare: Vec<((usize, usize), Packet)>,
    pool: Vec<Packet>,
    /// The end of the last replay (its last timestamp plus one gap): a later replay starts
    /// there, so virtual time never goes back between calls.
    replayed_until: u64,
    /// The first error of a port an exit sends to (the run stops at the batch's end).
    port_error: Option<ports::port::PortError>,
    next_input: u64,
    batch: usize,
    /// The synthesized mode's state (empty until [`Executor::install`]).
    synth: SynthState,
    /// The per-flow fast path, when running in `fastpath` mode.
    fast: Option<Box<fast::FastState>>,
    /// Whether a mode hooks into the naive element step (a synthesized program with
    /// rewriters, the fast path, parallel groups): naive runs test this flag alone.
    mode_hooks: bool,
    /// Latency and per-flow time sampling (for `fusebox bench`).
    measures: Measures,
    /// How batches go element by element, when the chain allows it (the `batch` module).
    batch_plan: Option<Box<batch::BatchPlan>>,
    /// The NSH-aware run's headers (`Executor::set_nsh`).
    nsh: Option<Box<nsh::NshTable>>,
    /// The parallel mode's groups (`Executor::enable_parallel`).
    par: Option<Box<parallel::ParallelState>>,
    /// Whether an input goes through a hook before the chain (per-flow times, NSH): the
    /// entry tests this flag alone.
    entry_hooks: bool,
    /// Packets that left by [`ExitSink::Handoff`] exits, in order, until taken.
    handoffs: Vec<Handoff>,
    /// The merged mode's wiring (`Executor::enable_merged`): the edges as built and what
    /// the elements stepped over would have counted.
    merged: Option<Box<merged::MergedState>>,
}

/// The counters of a run, as the naive mode keeps them: per element, per edge, per NF and
/// for the whole chain.
struct Counters {
    /// Arrivals that did not come through a counted edge (inputs, link crossings,
    /// replies); an element's input count is this plus its incoming edges' counts.
    arrivals: Vec<u64>,
    /// Packets sent along each edge.
    out_count: Vec<u64>,
    /// Drops per element, by reason.
    drops: Vec<Vec<(&'static str, u64)>>,
    /// Per NF: packets in, out, created, dropped.
    nf_counters: Vec<NfCounters>,
    /// Packets that entered the chain.
    chain_in: u64,
    /// Replies the chain made (`--reflect`).
    chain_created: u64,
}

/// The state of the synthesized mode ([`Executor::install`]): the program, what it
/// counted, the remembered flows (the `flows` module) and the scratch of the packet being
/// classified.
#[derive(Default)]
struct SynthState {
    /// The synthesized program, when running in `synth` mode.
    program: Option<Box<Program>>,
    /// How many packets reached each node of the program.
    node_counts: Vec<u64>,
    /// For nodes whose events count bytes: the sums of the frames' lengths and of their
    /// IPv4 total lengths, as they arrived.
    node_bytes: Vec<(u64, u64)>,
    /// Which nodes count bytes.
    byte_nodes: Vec<bool>,
    /// Whether any does.
    any_bytes: bool,
    /// Scratch: field values of the packet being classified.
    vals: Vec<u128>,
    /// Which of `vals` (the first 64) have been read for the packet being classified.
    valid: u64,
    regs: Regs,
    /// What the packet being run notes on its walk (to remember its flow's path).
    track: Track,
    /// For each element, its segment in the program when it is a synthesized entry.
    start_of: Vec<Option<crate::program::Segment>>,
    /// Established flows, by (entry element, protocol, addresses and ports) of the packet
    /// as it arrived: their rewriter decisions and, while it is sure to repeat, their whole
    /// path (see the `flows` module).
    flows: flows::FlowTable,
    /// Keys of the entries that owe the rewriters packets.
    flows_dirty: Vec<u128>,
    /// The regions remembered paths check.
    regions: flows::Regions,
    /// What holds for every remembered path while rewriters are left alone: the earliest
    /// time one reaps and the sum of their mapping changes (`None`: to be recomputed).
    guards: Option<(u64, u64)>,
    /// The rewriters the program decides through (global indices).
    rewriters: Vec<u32>,
    /// Per element: whether it is a stateful rewriter.
    is_rewriter: Vec<bool>,
    /// Continuations of the copies forks made, waiting on the work stack.
    forks: Vec<ForkCopy>,
    /// Per node of the program: its classes laid out for evaluation (classification nodes).
    compiled: Vec<Option<classify::Classes>>,
    /// Per node of the program: its header action compiled for remembered paths (exits).
    quick_exits: Vec<Option<fast::QuickExit>>,
    /// Packets served by remembered paths (one lookup each).
    flow_hits: u64,
    /// Times the established-flow table was emptied because its regions reached their
    /// bound (`flows::MAX_REGIONS`).
    flow_resets: u64,
    /// The most flows the established-flow table holds (`--max-flows`; 0 until a program
    /// is installed, which sets the default).
    max_flows: usize,
    /// The table's keys, oldest first: at the bound the oldest flow is forgotten.
    flow_order: std::collections::VecDeque<u128>,
    /// Flows forgotten at the bound (one by one, or all with the regions).
    flow_evictions: u64,
    /// Whether the flow of the packet being run has an entry (read once, by the remembered
    /// path's lookup).
    known: bool,
    /// Fingerprints of flows seen once (direct-mapped by hash, `flows::seen_slots`): a flow
    /// is remembered from its second slow packet on, so traffic of one-packet flows adds
    /// nothing to the table.
    seen: Vec<u64>,
    /// Whether a flow's first packets run naive, batched (`exec::firsts`): the chain has
    /// no filter whose rules the program's classes replace (a filter's rule scan would
    /// cost a first packet more than the walk).
    firsts_naive: bool,
    /// Whether frames entering synthesized entries carry their class in a VLAN tag a switch
    /// pushed (`Executor::trust_switch_tags`).
    trust_tags: bool,
    /// The class the switch tag of the packet being classified names.
    tag_hint: Option<u32>,
    /// Tagged frames whose class held, and those classified again.
    tag_counts: [u64; 2],
}

/// A copy a fork made, waiting on the work stack: where it continues the program.
struct ForkCopy {
    /// The start element of the segment.
    start: u32,
    /// The branch node it continues at.
    node: NodeId,
    /// The registers the packet had at the fork.
    regs: Regs,
    /// And what it had noted on its walk.
    track: Track,
}

/// Measurements a benchmark asks for, off by default.
#[derive(Default)]
struct Measures {
    /// Latency recording (`Executor::record_latency`).
    latency: Option<Box<Latency>>,
    /// Per-flow processing times (`Executor::record_flow_times`).
    flow_times: Option<HashMap<u64, u64, BuildHasherDefault<FlowHasher>>>,
    /// Per-element times (`Executor::profile_elements`).
    clock: Option<Box<ElementClock>>,
    /// The flows the chain rewrites, told as they are found (`Executor::tell_translations`).
    translations: Option<Box<Translations>>,
}

/// What a chain rewrites, for a NAT-aware proxy beside it (`Executor::tell_translations`).
struct Translations {
    /// The chain input being run and its flow as it arrived.
    input: u64,
    key: Option<packet::FlowKey>,
    /// The (arrived, sent) pairs told so far (cleared when it grows past [`TOLD_MAX`]).
    told: std::collections::HashSet<(packet::FlowKey, packet::FlowKey)>,
    tell: TranslationSink,
}

impl Translations {
    /// Tells a packet chain input `input` caused, leaving with `frame`, if its flow differs
    /// from the input's.
    #[cold]
    fn check(&mut self, input: u64, frame: &[u8]) {
        let (Some(k), true) = (self.key, self.input == input) else {
            return;
        };
        let Some(o) = packet::FlowKey::from_ethernet(frame) else {
            return;
        };
        if o == k {
            return;
        }
        if self.told.len() >= TOLD_MAX {
            self.told.clear();
        }
        if self.told.insert((k, o)) {
            (self.tell)(&k, &o);
        }
    }
}

/// How many translations [`Translations`] remembers before it forgets them all (and tells
/// again as they recur).
const TOLD_MAX: usize = 1 << 16;

/// Told a flow as it arrived and the flow a packet it caused leaves with, when they differ
/// (see [`Executor::tell_translations`]).
pub type TranslationSink = Box<dyn FnMut(&packet::FlowKey, &packet::FlowKey) + Send>;

/// Time spent in each element's `push` and the pushes timed, for the planner's profile.
struct ElementClock {
    /// ns per element (global index), clock reads included.
    ns: Vec<u64>,
    /// Pushes per element.
    calls: Vec<u64>,
}

/// Builds every NF of `chain`, with `options`' defines over each NF's own.
fn build_nfs(chain: &ChainFile, options: &RunOptions) -> Result<Vec<Nf>, SetupError> {
    let mut nfs = Vec::new();
    for spec in &chain.nfs {
        let mut defines = spec.defines.clone();
        defines.extend(options.defines.iter().cloned());
        let config = spec.config(&defines)?;
        let base = spec.click.parent().map(PathBuf::from).unwrap_or_default();
        nfs.push(Nf::build(&spec.name, &config, &base, spec.scoped)?);
    }
    Ok(nfs)
}

/// Every link and entry of `chain` must name a real interface of `nfs`.
fn check_interfaces(chain: &ChainFile, nfs: &[Nf]) -> Result<(), SetupError> {
    let has_iface = |e: &Endpoint| {
        nfs.iter()
            .find(|n| n.name == e.nf)
            .is_some_and(|n| n.interfaces().contains(&e.iface))
    };
    for (a, b, pos) in &chain.links {
        for e in [a, b] {
            if !has_iface(e) {
                let n = nfs.iter().find(|n| n.name == e.nf);
                let interfaces = n.map(|n| n.interfaces()).unwrap_or_default();
                return Err(SetupError::UnknownLinkInterface {
                    pos: pos.clone(),
                    endpoint: e.clone(),
                    interfaces,
                });
            }
        }
    }
    for (e, pos) in &chain.entries {
        if !has_iface(e) {
            return Err(SetupError::UnknownEntryInterface {
                pos: pos.clone(),
                endpoint: e.clone(),
            });
        }
    }
    Ok(())
}

/// Where packets come in: every `FromDevice` by endpoint, and every `FromDump` (name,
/// element, file), as (NF index, element index).
#[allow(clippy::type_complexity)]
fn entry_points(
    nfs: &[Nf],
) -> (
    BTreeMap<Endpoint, (usize, usize)>,
    Vec<(String, (usize, usize), PathBuf)>,
) {
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
    (entries, dump_sources)
}

/// What each element is in the stitched graph (inner, a link to another NF's
/// `FromDevice`, an exit), and the exits with their sinks (`sink`) and reflection targets.
fn element_kinds(
    chain: &ChainFile,
    options: &RunOptions,
    nfs: &[Nf],
    base: &[u32],
    entries: &BTreeMap<Endpoint, (usize, usize)>,
    sink: &mut impl FnMut(&str, Option<&PathBuf>) -> Result<ExitSink, SinkError>,
) -> Result<(Vec<Kind>, Vec<Exit>), SetupError> {
    let global = |(n, e): (usize, usize)| base[n] + e as u32;
    let mut exits: Vec<Exit> = Vec::new();
    let mut kinds = Vec::new();
    for nf in nfs {
        for role in &nf.roles {
            kinds.push(match role {
                Role::ToDevice(d) => {
                    let here = Endpoint {
                        nf: nf.name.clone(),
                        iface: d.clone(),
                    };
                    match chain.peer(&here) {
                        Some(peer) => match entries.get(peer) {
                            Some(&target) => Kind::Link(global(target)),
                            None => {
                                return Err(SetupError::NoReceiver {
                                    here,
                                    peer: peer.clone(),
                                })
                            }
                        },
                        None => {
                            let name = here.to_string();
                            let idx = match exits.iter().position(|x| x.name == name) {
                                Some(i) => i,
                                None => {
                                    let reflect_to = if options.reflect.contains(&here) {
                                        Some(global(*entries.get(&here).ok_or_else(|| {
                                            SetupError::ReflectNoEntry(here.clone())
                                        })?))
                                    } else {
                                        None
                                    };
                                    let sink = sink(&name, None)?;
                                    exits.push(Exit {
                                        name,
                                        sink,
                                        packets: 0,
                                        bytes: 0,
                                        reflect_to,
                                        port: None,
                                    });
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
                    exits.push(Exit {
                        name,
                        sink,
                        packets: 0,
                        bytes: 0,
                        reflect_to: None,
                        port: None,
                    });
                    Kind::Exit(exits.len() as u32 - 1)
                }
                _ => Kind::Inner,
            });
        }
    }
    Ok((kinds, exits))
}

/// The elements of every NF in one flat table (global indices), with their edges.
struct Flat {
    elements: Vec<Box<dyn Element>>,
    nf_of: Vec<u32>,
    edge_base: Vec<u32>,
    edges: Vec<Edge>,
    info: Vec<Info>,
}

/// Moves the elements of `nfs` into one flat table and resolves their edges to global
/// indices (`base`: each NF's first); `kinds`: each element's place.
fn flatten(nfs: &mut [Nf], base: &[u32], kinds: &[Kind]) -> Flat {
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
    Flat {
        elements,
        nf_of,
        edge_base,
        edges,
        info,
    }
}

/// Latency samples: the instant the current batch entered, and for every packet that left
/// since recording began, the nanoseconds from its batch's entry to its exit.
struct Latency {
    start: Instant,
    samples: Vec<u64>,
}

/// What the synthesizer needs to know about one element of the stitched chain graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// An ordinary element.
    Inner,
    /// A `ToDevice` of a linked interface: packets continue at this (global) `FromDevice`.
    Link(u32),
    /// A `ToDevice` of an unlinked interface, or a `ToDump`: packets leave the chain here.
    Exit,
}

impl Executor {
    /// Builds every NF of `chain` and wires them. `sink` makes the sink of each exit, given
    /// its name (`NF.IFACE`, or the file of a `ToDump`).
    pub fn new(
        chain: &ChainFile,
        options: &RunOptions,
        mut sink: impl FnMut(&str, Option<&PathBuf>) -> Result<ExitSink, SinkError>,
    ) -> Result<Executor, SetupError> {
        let mut nfs = build_nfs(chain, options)?;
        check_interfaces(chain, &nfs)?;
        let mut base = Vec::new();
        let mut total = 0u32;
        for nf in &nfs {
            base.push(total);
            total += nf.elements.len() as u32;
        }
        let (entries, dump_sources) = entry_points(&nfs);
        let (kinds, exits) = element_kinds(chain, options, &nfs, &base, &entries, &mut sink)?;
        let nf_index = |name: &str| nfs.iter().position(|n| n.name == name);
        for r in &options.reflect {
            if nf_index(&r.nf).is_none() || !exits.iter().any(|x| x.name == r.to_string()) {
                return Err(SetupError::ReflectNotExit(r.clone()));
            }
        }
        let g = flatten(&mut nfs, &base, &kinds);
        let (n, nnf) = (g.elements.len(), nfs.len());
        Ok(Executor {
            nfs,
            base,
            elements: g.elements,
            nf_of: g.nf_of,
            counts: Counters {
                arrivals: vec![0; n],
                out_count: vec![0; g.edges.len()],
                drops: vec![Vec::new(); n],
                nf_counters: vec![NfCounters::default(); nnf],
                chain_in: 0,
                chain_created: 0,
            },
            edge_base: g.edge_base,
            info: g.info,
            edges: g.edges,
            exits,
            entries,
            dump_sources,
            cx: Context::new(Timestamp(0)),
            stack: Vec::new(),
            emitted: Vec::new(),
            firsts_likely: true,
            firsts_tick: 0,
            firsts_spare: Vec::new(),
            pool: Vec::new(),
            replayed_until: 0,
            port_error: None,
            next_input: 0,
            batch: options.batch.max(1),
            synth: SynthState::default(),
            fast: None,
            mode_hooks: false,
            measures: Measures::default(),
            batch_plan: None,
            nsh: None,
            par: None,
            entry_hooks: false,
            handoffs: Vec::new(),
            merged: None,
        }
        .with_batch_plan()
        .with_nsh(chain.nsh))
    }

    fn with_nsh(mut self, on: bool) -> Executor {
        self.set_nsh(on);
        self
    }

    /// Makes the run NSH-aware (`nsh = true` in the chain file, `fusebox run --nsh`): a frame
    /// arriving with an NSH (over Ethernet transport or VXLAN-GPE, carrying Ethernet) enters
    /// the chain without its transport and NSH, and every packet the chain sends out because
    /// of it leaves with them put back (same SPI, context and TTL, SI − 1, the transport's
    /// addresses swapped). Frames without an NSH run as they are. See [`NshCounts`].
    pub fn set_nsh(&mut self, on: bool) {
        match (on, self.nsh.is_some()) {
            (true, false) => self.nsh = Some(Box::new(nsh::NshTable::new())),
            (false, true) => self.nsh = None,
            _ => {}
        }
        self.entry_hooks = self.wants_entry_hooks();
    }

    /// The NSH-aware run's counters, when [`Executor::set_nsh`] is on.
    pub fn nsh_counts(&self) -> Option<NshCounts> {
        self.nsh.as_ref().map(|t| t.counts)
    }

    fn with_batch_plan(mut self) -> Executor {
        self.batch_plan = batch::BatchPlan::new(&self).ok().map(Box::new);
        self
    }

    /// Whether naive runs take batches element by element (the default where the chain
    /// allows it: see [`Executor::batch_elements`]).
    pub fn batches_elements(&self) -> bool {
        self.batch_plan.is_some()
    }

    /// Turns element-by-element batches on (where the chain allows it, the default) or off
    /// (every packet runs to completion before the next). Results are the same either way.
    pub fn batch_elements(&mut self, on: bool) {
        self.batch_plan = if on {
            batch::BatchPlan::new(self).ok().map(Box::new)
        } else {
            None
        };
    }

    /// Why naive runs of this chain go packet by packet, if they do.
    pub fn batch_refusal(&self) -> Option<&'static str> {
        batch::BatchPlan::new(self).err()
    }

    /// Element `g` (global index), to change at set-up (a worker's share of a NAT's ports:
    /// [`elements::WorkerShare`]); before a mode is installed.
    pub fn element_mut(&mut self, g: usize) -> &mut dyn Element {
        &mut *self.elements[g]
    }

    /// The NFs of the chain (names, classes, roles and connections of their elements; the
    /// elements themselves run inside the executor).
    pub fn nfs(&self) -> &[Nf] {
        &self.nfs
    }

    /// The entry element for `NF.IFACE`, if the NF has a `FromDevice` for it. In the merged
    /// mode ([`Executor::enable_merged`]) an interface a link joins is no entry: what was
    /// stepped over was found for packets coming in by the chain's unlinked interfaces.
    pub fn entry(&self, e: &Endpoint) -> Option<(usize, usize)> {
        let at = self.entries.get(e).copied()?;
        match &self.merged {
            Some(m) if m.linked.contains(&(self.base[at.0] + at.1 as u32)) => None,
            _ => Some(at),
        }
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
    pub fn run(&mut self, sources: Vec<Source>, mut progress: impl FnMut(u64)) -> Vec<String> {
        self.run_until(sources, |ex| {
            progress(ex.counts.chain_in);
            ControlFlow::Continue(())
        })
    }

    /// [`Executor::run`] that asks `each_batch` after every batch whether to go on (it sees
    /// the executor: counters, [`Executor::summary`]). On `Break` the run stops reading its
    /// sources; every packet already read has been run to completion (a batch is never cut),
    /// and the established flows' debts are paid, so the counters balance.
    pub fn run_until(
        &mut self,
        sources: Vec<Source>,
        mut each_batch: impl FnMut(&Executor) -> ControlFlow<()>,
    ) -> Vec<String> {
        let mut merge = Merge::new(sources);
        // Read a batch of packets (with the entry each goes to), then run them one by one.
        let mut batch = packet::Batch::with_capacity(self.batch);
        let mut entries: Vec<(usize, usize)> = Vec::with_capacity(self.batch);
        loop {
            while !batch.is_full() {
                let Some((entry, rec)) = merge.next() else {
                    break;
                };
                let p = self.packet_from(&rec.data, rec.timestamp, rec.precision);
                if batch.push(p).is_ok() {
                    entries.push(entry);
                }
            }
            if batch.is_empty() {
                break;
            }
            if self.batched() {
                let mut b: Vec<_> = entries.drain(..).zip(batch.drain()).collect();
                self.run_batch(&mut b);
            } else if self.firsts_now() {
                let mut b: Vec<_> = entries.drain(..).zip(batch.drain()).collect();
                self.run_firsts(&mut b);
            } else {
                self.push_all(entries.drain(..).zip(batch.drain()));
            }
            if each_batch(self).is_break() {
                break;
            }
        }
        // What established flows owe the rewriters is paid when a rewriter is about to
        // decide or be read, and here: a flow's packets between two such moments cost one
        // update per mapping, not one each.
        self.settle_flows();
        merge.into_errors()
    }

    /// Pushes one chain input packet (`data`, at `timestamp` with `precision`) in at
    /// `entry` as input number `index` of the run, and runs it and everything it causes to
    /// completion. A worker's replica gets the run's own indices (increasing), so packets
    /// an exit keeps as [`ExitSink::Tagged`] name the input that sent them and elements that
    /// act on input indices (a Maglev's failure schedule) see the run's. Established flows'
    /// debts are paid later ([`Executor::settle_flows`]), as in [`Executor::run`].
    pub fn push_input(
        &mut self,
        entry: (usize, usize),
        index: u64,
        data: &[u8],
        timestamp: Timestamp,
        precision: Precision,
    ) {
        let p = self.packet_from(data, timestamp, precision);
        self.next_input = index;
        self.push_in(entry, p);
    }

    /// Pays what established flows owe the rewriters and takes back the NFs parallel branches
    /// ran on a helper thread (done at the end of [`Executor::run`], [`Executor::replay`] and
    /// [`Executor::run_ports`]; call it after the last [`Executor::push_input`]).
    pub fn settle_flows(&mut self) {
        self.flush_flows();
        self.unpark_parallel();
    }

    /// The packets every [`ExitSink::Tagged`] exit kept since the last call, by exit index
    /// (the order of [`Executor::exit_names`]), emptied.
    pub fn take_tagged(&mut self) -> Vec<(usize, Tagged)> {
        let mut out = Vec::new();
        for (i, x) in self.exits.iter_mut().enumerate() {
            if let ExitSink::Tagged(v) = &mut x.sink {
                if !v.is_empty() {
                    out.push((i, std::mem::take(v)));
                }
            }
        }
        out
    }

    /// The packets [`ExitSink::Handoff`] exits sent since the last call, in the order they
    /// left (drained: the list keeps its allocation).
    pub fn take_handoffs(&mut self) -> std::vec::Drain<'_, Handoff> {
        self.handoffs.drain(..)
    }

    /// Takes in a packet that crossed a link from an NF another executor runs (a pipeline
    /// stage's [`Handoff`]), at `entry` (the link's `FromDevice`: NF index, element index),
    /// as part of chain input number `input`, and runs it and everything it causes to
    /// completion, as the link crossing would have in one executor: the receiving NF counts
    /// an input, the chain does not (the input was counted where it entered), exits tag what
    /// it causes with `input`, and virtual time moves on to `now` (the time of the chain
    /// input: the latest timestamp the whole chain had seen when it entered). A packet that
    /// has crossed [`MAX_HOPS`] links is dropped (`loop`) at `entry`. Naive mode only: modes
    /// that hook entries (synth, fastpath, NSH) are not installed on pipeline stages.
    pub fn hand_in(&mut self, entry: (usize, usize), input: u64, now: Timestamp, mut p: Packet) {
        self.next_input = input.wrapping_add(1);
        if now > self.cx.now {
            self.cx.now = now;
        }
        let el = self.base[entry.0] + entry.1 as u32;
        self.counts.nf_counters[entry.0].input += 1;
        self.counts.arrivals[el as usize] += 1;
        if p.meta.hops >= MAX_HOPS {
            self.count_drop(el, ChainReason::Loop.into());
            self.recycle(p);
            return;
        }
        p.meta.hops += 1;
        self.run_from(el, Resume::Port(0), p);
    }

    /// Moves virtual time on to `now` if it is later (a pipeline stage learns the time of
    /// chain inputs that entered at other stages).
    pub fn advance_time(&mut self, now: Timestamp) {
        if now > self.cx.now {
            self.cx.now = now;
        }
    }

    /// Starts (`true`) or stops recording, for [`Executor::replay`], the time from the
    /// instant each batch enters to the instant each of its packets leaves by an exit.
    /// Off by default: then the only cost is one test per exit.
    pub fn record_latency(&mut self, on: bool) {
        self.measures.latency = on.then(|| {
            Box::new(Latency {
                start: Instant::now(),
                samples: Vec::new(),
            })
        });
    }

    /// Trusts the class a switch marked (`fusebox synth --openflow`: a VLAN tag whose id is
    /// 1 + the class's index at the entry's root): a frame entering a synthesized entry with
    /// a VLAN tag loses the tag, and when the frame is in the class it names, the entry's
    /// classification is skipped (the switch matched no earlier class, so the frame is in
    /// that class if it passes that class's tests). A frame outside its tagged class is
    /// classified as usual. Decision: every tagged frame at a synthesized entry is taken as
    /// tagged by the switch (the exported flows tag untagged IPv4 frames only).
    pub fn trust_switch_tags(&mut self, on: bool) {
        self.synth.trust_tags = on;
    }

    /// Switch-tagged frames so far: (whose class held, classified again).
    pub fn switch_tag_counts(&self) -> (u64, u64) {
        (self.synth.tag_counts[0], self.synth.tag_counts[1])
    }

    /// Times every element's `push` from now on, for the planner's profile
    /// (`fusebox plan --profile`): the run goes packet by packet through the modes' hook of
    /// the element step, so a run that does not profile pays nothing. Read the times with
    /// [`Executor::element_times`]. There is no way back: profile on an executor of its own.
    pub fn profile_elements(&mut self) {
        let n = self.elements.len();
        self.measures.clock = Some(Box::new(ElementClock {
            ns: vec![0; n],
            calls: vec![0; n],
        }));
        self.mode_hooks = true;
    }

    /// Per element (global index): ns spent in its `push` (each push's two clock reads
    /// included) and pushes timed, since [`Executor::profile_elements`]; `None` before.
    pub fn element_times(&self) -> Option<(&[u64], &[u64])> {
        self.measures
            .clock
            .as_deref()
            .map(|c| (c.ns.as_slice(), c.calls.as_slice()))
    }

    /// Starts (`true`) or stops measuring, per flow of the input (entry and 5-tuple as it
    /// arrived), the time its packets take to be processed, each from entering the chain to
    /// the end of everything it caused (replies included). Off by default.
    pub fn record_flow_times(&mut self, on: bool) {
        self.measures.flow_times = on.then(HashMap::default);
        self.entry_hooks = self.wants_entry_hooks();
    }

    /// Whether a packet entering the chain goes through [`Executor::push_in_hooked`].
    fn wants_entry_hooks(&self) -> bool {
        self.measures.flow_times.is_some()
            || self.nsh.is_some()
            || self.measures.translations.is_some()
    }

    /// Tells `sink` the flows the chain rewrites, as it finds them: for each chain input
    /// (its flow as it arrived, after an NSH-aware run's header is off) and each packet it
    /// causes at an exit (its flow as it leaves, before it is sent) whose 5-tuple differs,
    /// once per pair. A NAT run as a service function knows its own rewrites this way and
    /// tells the NAT-aware proxy beside it before the translated packet reaches it
    /// (`fusebox run --tell-proxy`). `None` stops.
    pub fn tell_translations(&mut self, sink: Option<TranslationSink>) {
        self.measures.translations = sink.map(|tell| {
            Box::new(Translations {
                input: u64::MAX,
                key: None,
                told: Default::default(),
                tell,
            })
        });
        self.entry_hooks = self.wants_entry_hooks();
    }

    /// The processing time of every flow measured so far (nanoseconds, in no order), emptied.
    pub fn take_flow_times(&mut self) -> Vec<u64> {
        self.measures
            .flow_times
            .as_mut()
            .map(|m| m.drain().map(|(_, v)| v).collect())
            .unwrap_or_default()
    }

    /// The latency samples recorded so far (nanoseconds, in exit order), emptied.
    pub fn take_latency(&mut self) -> Vec<u64> {
        self.measures
            .latency
            .as_mut()
            .map(|l| std::mem::take(&mut l.samples))
            .unwrap_or_default()
    }

    /// Replays `inputs` (already in memory) `passes` times without I/O. Each pass shifts
    /// timestamps by the trace's span plus one inter-packet gap (1 µs when all packets share
    /// one timestamp), so virtual time keeps moving, also from one call to the next (a call
    /// starts where the previous one ended); every pass restores the original bytes.
    /// Packets go in batches of `RunOptions::batch`, as in [`Executor::run`]: the batch's
    /// buffers (recycled from a pool) are filled, then run one by one, then the established
    /// flows' debts are paid. Returns the number of packets pushed.
    pub fn replay(&mut self, inputs: &[((usize, usize), Vec<Record>)], passes: u64) -> u64 {
        self.replay_until(inputs, passes, |_| ControlFlow::Continue(()))
    }

    /// [`Executor::replay`] that asks `each_batch` after every batch whether to go on (as
    /// [`Executor::run_until`]): on `Break` it stops between two batches, pays the flows'
    /// debts and returns the packets pushed so far. A later call continues the virtual time
    /// from the last pass begun.
    pub fn replay_until(
        &mut self,
        inputs: &[((usize, usize), Vec<Record>)],
        passes: u64,
        mut each_batch: impl FnMut(&Executor) -> ControlFlow<()>,
    ) -> u64 {
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
        let base = self.replayed_until.saturating_sub(first.0 .0);
        let mut n = 0;
        let mut batch: Vec<((usize, usize), Packet)> = Vec::with_capacity(self.batch);
        // Passes begun (all of them unless `each_batch` stops the replay).
        let mut begun = passes;
        'passes: for pass in 0..passes {
            let off = base.saturating_add(shift.saturating_mul(pass));
            for chunk in order.chunks(self.batch) {
                for &(ts, i, j) in chunk {
                    let (entry, recs) = &inputs[i];
                    let r = &recs[j];
                    let p = self.packet_from(&r.data, ts.add_nanos(off), r.precision);
                    batch.push((*entry, p));
                }
                if let Some(l) = &mut self.measures.latency {
                    l.start = Instant::now();
                }
                n += batch.len() as u64;
                if self.batched() {
                    self.run_batch(&mut batch);
                } else if self.firsts_now() {
                    self.run_firsts(&mut batch);
                } else {
                    self.push_all(batch.drain(..));
                }
                if each_batch(self).is_break() {
                    begun = pass + 1;
                    break 'passes;
                }
            }
        }
        self.replayed_until = (last.0 .0)
            .saturating_add(base)
            .saturating_add(shift.saturating_mul(begun.saturating_sub(1)))
            .saturating_add(gap);
        // As in `run`: the flows' debts are paid when needed and at the end.
        self.settle_flows();
        n
    }

    #[inline]
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

    /// Pushes a batch of chain inputs one by one (in input order), each run to completion;
    /// with the parallel mode, groups with branches on helpers hand the batch off together.
    #[inline]
    fn push_all(&mut self, batch: impl Iterator<Item = ((usize, usize), Packet)>) {
        if self.par.is_some() {
            return self.push_all_parallel(batch);
        }
        for (entry, p) in batch {
            self.push_in(entry, p);
        }
    }

    /// Pushes one chain input packet in at `entry` (NF index, element index) and runs it, and
    /// everything it causes, to completion; counters and state are up to date afterwards.
    pub fn inject(&mut self, entry: (usize, usize), p: Packet) {
        self.push_in(entry, p);
        self.flush_flows();
    }

    /// [`Executor::inject`] without paying the established flows' debts (a run or replay
    /// pays them when a rewriter is about to decide or be read, and at its end).
    #[inline]
    fn push_in(&mut self, entry: (usize, usize), p: Packet) {
        if self.entry_hooks {
            self.push_in_hooked(entry, p);
        } else {
            self.push_in_timed(entry, p);
        }
    }

    /// [`Executor::push_in`] through the entry's hooks: the NSH taken off, the time the
    /// input's flow takes measured.
    #[inline(never)]
    fn push_in_hooked(&mut self, entry: (usize, usize), mut p: Packet) {
        if let Some(t) = self.nsh.as_mut() {
            t.strip(&mut p);
        }
        if let Some(t) = self.measures.translations.as_mut() {
            t.input = self.next_input;
            t.key = packet::FlowKey::from_ethernet(p.data());
        }
        if self.measures.flow_times.is_some() {
            let el = self.base[entry.0] + entry.1 as u32;
            let key = fast::flow_hash(el, p.data());
            let t0 = Instant::now();
            self.push_in_timed(entry, p);
            let ns = t0.elapsed().as_nanos() as u64;
            if let Some(m) = self.measures.flow_times.as_mut() {
                *m.entry(key).or_default() += ns;
            }
        } else {
            self.push_in_timed(entry, p);
        }
    }

    fn push_in_timed(&mut self, entry: (usize, usize), p: Packet) {
        self.push_in_keyed(entry, p, None);
    }

    /// [`Executor::push_in_timed`], with the fast path's reading of the packet's flow key
    /// (`entered`) when it was read already.
    #[inline]
    fn push_in_keyed(
        &mut self,
        entry: (usize, usize),
        mut p: Packet,
        entered: Option<fast::Entered>,
    ) {
        p.meta.input_index = self.next_input;
        self.next_input += 1;
        self.counts.chain_in += 1;
        if p.meta.timestamp > self.cx.now {
            self.cx.now = p.meta.timestamp;
        }
        self.counts.nf_counters[entry.0].input += 1;
        let el = self.base[entry.0] + entry.1 as u32;
        self.counts.arrivals[el as usize] += 1;
        if self.fast.is_some() {
            let q = match entered {
                Some(k) => self.fast_enter_keyed(p, k),
                None => self.fast_enter(el, p),
            };
            match q {
                Some(q) => p = q,
                None => {
                    // Replies of the packet, if any, run now (depth first).
                    if let Some((e2, at, q)) = self.stack.pop() {
                        self.run_from(e2, at, q);
                    }
                    return;
                }
            }
        }
        let at = if self.synthesized(el) {
            Resume::Synth
        } else {
            Resume::Port(0)
        };
        self.run_from(el, at, p);
    }

    #[inline]
    fn synthesized(&self, el: u32) -> bool {
        self.synth
            .start_of
            .get(el as usize)
            .is_some_and(|s| s.is_some())
    }

    fn count_drop(&mut self, el: u32, reason: &'static str) {
        if self.cx.recorder.active {
            if let Some(fp) = self.fast.as_mut() {
                fp.drops.push((el, reason));
            }
        }
        self.counts.nf_counters[self.nf_of[el as usize] as usize].dropped += 1;
        let d = &mut self.counts.drops[el as usize];
        match d.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => d.push((reason, 1)),
        }
    }

    /// Follows a packet from element to element until it leaves, is dropped or is kept;
    /// then continues with the work stack (copies and other emissions), depth first.
    ///
    /// The one dispatch point of the modes: each work item says how it resumes
    /// (`Resume`); the naive step below it only follows edges, with the modes' hooks
    /// behind the one `mode_hooks` test.
    fn run_from(&mut self, mut el: u32, mut at: Resume, mut p: Packet) {
        loop {
            let port = match at {
                Resume::Port(port) => port,
                Resume::Fast => match self.fast_enter(el, p) {
                    Some(q) => {
                        p = q;
                        0
                    }
                    None => match self.stack.pop() {
                        Some((e2, a2, q)) => {
                            (el, at, p) = (e2, a2, q);
                            continue;
                        }
                        None => return,
                    },
                },
                Resume::Synth | Resume::Fork => {
                    let r = if at == Resume::Synth {
                        self.run_program(el, p)
                    } else {
                        self.run_fork(p)
                    };
                    match r.or_else(|| self.stack.pop()) {
                        Some((e2, a2, q)) => {
                            (el, at, p) = (e2, a2, q);
                            continue;
                        }
                        None => return,
                    }
                }
            };
            let e = el as usize;
            let Some(&info) = self.info.get(e) else {
                return;
            };
            match info.kind {
                Kind::Inner => {
                    let v = if self.mode_hooks {
                        self.push_hooked(el, port, p)
                    } else {
                        self.elements[e].push(port as usize, p, &mut self.cx)
                    };
                    if self.cx.has_pending() {
                        self.settle(el);
                    }
                    match v {
                        Verdict::Out(o, q) => {
                            let k = info.edge_base as usize + o;
                            if o < info.outputs as usize {
                                if let (Some(&next), Some(c)) =
                                    (self.edges.get(k), self.counts.out_count.get_mut(k))
                                {
                                    if next.element != u32::MAX {
                                        *c += 1;
                                        (el, at, p) = (next.element, Resume::Port(next.port), q);
                                        continue;
                                    }
                                }
                            }
                            self.count_drop(el, ChainReason::UnconnectedOutput.into());
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
                        self.count_drop(el, ChainReason::Loop.into());
                        self.recycle(p);
                    } else {
                        p.meta.hops += 1;
                        self.counts.nf_counters[nf].output += 1;
                        self.counts.nf_counters[self.nf_of[target as usize] as usize].input += 1;
                        self.counts.arrivals[target as usize] += 1;
                        (el, at) = (target, Resume::Port(0));
                        continue;
                    }
                }
                Kind::Exit(x) => {
                    if self.cx.recorder.active {
                        self.fast_end(Some(el), Some(&p));
                    }
                    self.counts.nf_counters[info.nf as usize].output += 1;
                    self.exit(x as usize, p);
                }
            }
            if self.cx.recorder.active {
                self.fast_end(None, None);
            }
            match self.stack.pop() {
                Some((e2, a2, q)) => (el, at, p) = (e2, a2, q),
                None => return,
            }
        }
    }

    /// The element step with the modes' hooks: a rewriter's table is about to be read (the
    /// remembered flows pay what they owe it), or the fast path records the packet.
    #[inline]
    fn push_hooked(&mut self, el: u32, port: u32, p: Packet) -> Verdict {
        if let Some(g) = self.parallel_group(el) {
            // The group's branches, the merge and the merged packet onwards.
            self.run_group(g, el, port, p);
            return Verdict::Done;
        }
        let e = el as usize;
        if self.synth.is_rewriter.get(e) == Some(&true) {
            self.flush_flows();
            self.synth.guards = None;
        }
        let recording = self.cx.recorder.active;
        if recording {
            self.fast_pre(el, &p);
        }
        let v = if self.measures.clock.is_some() {
            self.push_clocked(e, port, p)
        } else {
            self.elements[e].push(port as usize, p, &mut self.cx)
        };
        if recording {
            self.fast_post(el, &v);
        }
        v
    }

    /// The element step timed (`Executor::profile_elements`).
    #[inline(never)]
    fn push_clocked(&mut self, e: usize, port: u32, p: Packet) -> Verdict {
        let t0 = Instant::now();
        let v = self.elements[e].push(port as usize, p, &mut self.cx);
        let ns = t0.elapsed().as_nanos() as u64;
        if let Some(c) = self.measures.clock.as_mut() {
            if let (Some(n), Some(k)) = (c.ns.get_mut(e), c.calls.get_mut(e)) {
                *n += ns;
                *k += 1;
            }
        }
        v
    }

    /// Accounts for what an element did through its context (created, dropped, emitted
    /// packets) and stacks the emissions so the first emitted runs first.
    #[cold]
    fn settle(&mut self, el: u32) {
        let created = self.cx.take_created();
        self.counts.nf_counters[self.nf_of[el as usize] as usize].created += created;
        let dropped: Vec<(Packet, &'static str)> = self.cx.take_dropped().collect();
        for (p, r) in dropped {
            self.count_drop(el, r);
            self.recycle(p);
        }
        let mut em = std::mem::take(&mut self.emitted);
        em.extend(self.cx.take_emitted());
        for (o, p) in em.drain(..).rev() {
            self.stack_emitted(el, o, p);
        }
        self.emitted = em;
        self.cx.settled();
    }

    /// Stacks packet `p`, emitted by element `el` on output `o`, to run along that output's
    /// edge (counted there); on an unconnected output it is dropped (`UnconnectedOutput`)
    /// and its buffer recycled.
    #[inline]
    fn stack_emitted(&mut self, el: u32, o: usize, p: Packet) {
        let e = el as usize;
        let k = self.edge_base[e] as usize + o;
        if o < (self.edge_base[e + 1] - self.edge_base[e]) as usize
            && self.edges[k].element != u32::MAX
        {
            self.counts.out_count[k] += 1;
            self.stack
                .push((self.edges[k].element, Resume::Port(self.edges[k].port), p));
        } else {
            self.count_drop(el, ChainReason::UnconnectedOutput.into());
            self.recycle(p);
        }
    }

    /// Sends `p`, which the chain input being run caused, out by exit `x`.
    #[inline]
    fn exit(&mut self, x: usize, p: Packet) {
        self.exit_as(x, self.next_input.wrapping_sub(1), p)
    }

    /// Sends `p`, which chain input number `input` caused, out by exit `x`.
    #[inline]
    fn exit_as(&mut self, x: usize, input: u64, p: Packet) {
        // The common case in a replay (a counted exit that sends no reply, in a run that
        // measures nothing and restores no NSH): the exit's counters, and the buffer back
        // to the pool.
        if self.measures.latency.is_none()
            && self.measures.translations.is_none()
            && self.nsh.is_none()
        {
            if let Some(exit) = self.exits.get_mut(x) {
                if matches!(exit.sink, ExitSink::Count) && exit.reflect_to.is_none() {
                    exit.packets += 1;
                    exit.bytes += p.len() as u64;
                    self.recycle(p);
                    return;
                }
            }
        }
        self.exit_any(x, input, p)
    }

    /// [`Executor::exit_as`] for every sink, measurement and reply.
    fn exit_any(&mut self, x: usize, input: u64, p: Packet) {
        if let Some(l) = &mut self.measures.latency {
            l.samples.push(l.start.elapsed().as_nanos() as u64);
        }
        if let Some(t) = self.measures.translations.as_mut() {
            t.check(input, p.data());
        }
        // An NSH-aware run puts the transport and NSH back (the one test plain runs pay).
        let data = match self.nsh.as_deref_mut() {
            Some(t) => t.restore(&p),
            None => p.data(),
        };
        let exit = &mut self.exits[x];
        exit.packets += 1;
        exit.bytes += data.len() as u64;
        let reflect_to = exit.reflect_to.filter(|_| !p.meta.reflected);
        match &mut exit.sink {
            ExitSink::Pcap(w) => {
                if let Err(e) = w.write(p.meta.timestamp, data) {
                    eprintln!("fusebox: {}: {e}", exit.name);
                }
            }
            ExitSink::Memory(v) => v.push((p.meta.timestamp, p.meta.precision, data.to_vec())),
            ExitSink::Count => {}
            ExitSink::Port(tx) => {
                // A full ring is counted by the port (`tx-full`); a failed port stops the run.
                if let Err(e) = tx.send(p.meta.timestamp, data) {
                    self.port_error.get_or_insert(e);
                }
            }
            ExitSink::Tagged(v) => {
                v.push((input, p.meta.timestamp, p.meta.precision, data.to_vec()))
            }
            ExitSink::Handoff => {
                self.handoffs.push(Handoff {
                    exit: x,
                    input,
                    packet: p,
                });
                return;
            }
        }
        if let Some(target) = reflect_to {
            let bytes = reflect::reply(&p);
            let mut r = self.packet_from(&bytes, p.meta.timestamp, p.meta.precision);
            r.meta.input_index = p.meta.input_index;
            r.meta.nsh = p.meta.nsh;
            r.meta.reflected = true;
            self.counts.chain_created += 1;
            self.counts.nf_counters[self.nf_of[target as usize] as usize].input += 1;
            self.counts.arrivals[target as usize] += 1;
            let at = if self.synthesized(target) {
                Resume::Synth
            } else if self.fast.is_some() {
                Resume::Fast
            } else {
                Resume::Port(0)
            };
            self.stack.push((target, at, r));
        }
        self.recycle(p);
    }

    /// Finishes the sinks (flushes pcap files) and returns the in-memory outputs by exit name.
    pub fn finish(&mut self) -> Result<BTreeMap<String, Captured>, FinishError> {
        let mut mem = BTreeMap::new();
        for x in &mut self.exits {
            match std::mem::replace(&mut x.sink, ExitSink::Count) {
                ExitSink::Pcap(w) => w.finish().map_err(|source| FinishError {
                    exit: x.name.clone(),
                    source: source.into(),
                })?,
                ExitSink::Memory(v) => {
                    mem.insert(x.name.clone(), v);
                }
                ExitSink::Count | ExitSink::Tagged(_) | ExitSink::Handoff => {}
                ExitSink::Port(mut tx) => {
                    let flushed = tx.flush();
                    x.port = Some(tx.counters());
                    flushed.map_err(|source| FinishError {
                        exit: x.name.clone(),
                        source: source.into(),
                    })?
                }
            }
        }
        Ok(mem)
    }

    /// Sends what the exits bound to ports have queued. The first port error of the run
    /// (a device that went down or disappeared) is returned, here or by a later call.
    pub fn flush_ports(&mut self) -> Result<(), ports::port::PortError> {
        for x in &mut self.exits {
            if let ExitSink::Port(tx) = &mut x.sink {
                if let Err(e) = tx.flush() {
                    self.port_error.get_or_insert(e);
                }
            }
        }
        match self.port_error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The counters of the ports the exits send to, by exit name (live runs).
    pub fn port_counters(&self) -> Vec<(String, ports::port::PortCounters)> {
        self.exits
            .iter()
            .filter_map(|x| match &x.sink {
                ExitSink::Port(tx) => Some((x.name.clone(), tx.counters())),
                _ => x.port.map(|c| (x.name.clone(), c)),
            })
            .collect()
    }

    /// Runs frames received on ports until every port has ended (a file) or `stop` says so
    /// (checked once per batch, never per packet): each round takes up to a batch from
    /// every port in turn (waiting at most `wait` on each while all are idle), runs the
    /// batch's packets one by one to completion, pays the flows' debts, and sends what the
    /// exits bound to ports queued. `rx` pairs each port with the entry element (NF index,
    /// element index) its frames enter at. `after_batch` is called after every batch
    /// (progress, metrics) with the ports. A port error (a device that went down or disappeared) ends the
    /// run: every packet received before it has been run, and the error is returned.
    pub fn run_ports(
        &mut self,
        rx: &mut [PortInput],
        wait: std::time::Duration,
        mut stop: impl FnMut() -> bool,
        mut after_batch: impl FnMut(&mut Executor, &[PortInput]),
    ) -> Result<(), ports::port::PortError> {
        let mut rounds = ports::port::Rounds::new(rx.len(), wait);
        let mut batch: Vec<((usize, usize), Packet)> = Vec::with_capacity(self.batch);
        while !stop() && !rounds.all_ended() {
            let r = rounds.round(rx, self.batch, |entry, ts, precision, data| {
                let p = self.packet_from(data, ts, precision);
                batch.push((entry, p));
            });
            if let Err(e) = r {
                self.port_error.get_or_insert(e);
            }
            for (entry, p) in batch.drain(..) {
                self.push_in(entry, p);
            }
            self.flush_flows();
            let flushed = self.flush_ports();
            after_batch(self, rx);
            flushed?;
        }
        self.settle_flows();
        self.flush_ports()
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
        let (arrivals, out_count, all_drops, nf_counters, derived) = self.folded();
        let mut in_count = arrivals;
        for (k, edge) in self.built_edges().iter().enumerate() {
            if let Some(c) = in_count.get_mut(edge.element as usize) {
                *c += out_count[k];
            }
        }
        let mut nfs = Vec::new();
        let mut t = Totals {
            input: self.counts.chain_in,
            created: self.counts.chain_created,
            ..Totals::default()
        };
        for (ni, nf) in self.nfs.iter().enumerate() {
            let c = nf_counters[ni];
            let mut drops: BTreeMap<String, u64> = BTreeMap::new();
            let mut elements = Vec::new();
            let mut held = 0;
            for li in 0..nf.names.len() {
                let g = self.base[ni] as usize + li;
                let e = &self.elements[g];
                held += e.held();
                for (r, n) in &all_drops[g] {
                    *drops.entry(r.to_string()).or_default() += n;
                    *t.drops.entry(r.to_string()).or_default() += n;
                }
                let outs = self.edge_base[g] as usize..self.edge_base[g + 1] as usize;
                elements.push(ElementSummary {
                    name: nf.names[li].clone(),
                    class: e.class_name().to_string(),
                    input: in_count[g],
                    output: out_count[outs].to_vec(),
                    drops: all_drops[g]
                        .iter()
                        .map(|(r, n)| (r.to_string(), *n))
                        .collect(),
                    stats: e
                        .stats()
                        .into_iter()
                        .map(|(k, v)| {
                            let extra = derived[g]
                                .iter()
                                .find(|(d, _)| *d == k)
                                .map_or(0, |(_, n)| *n);
                            (k.to_string(), v + extra)
                        })
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
        let ports = self
            .port_counters()
            .iter()
            .map(|(name, c)| PortSummary::new(name.as_str(), c))
            .collect();
        Summary {
            nfs,
            exits,
            ports,
            totals: t,
        }
    }
}

/// How a packet left a synthesized program.
enum ProgramEnd {
    /// Dropped (counted by the node's events or already).
    Gone,
    /// Leaves by this exit.
    Exit(u32),
    /// Continues naive at this element and input port.
    Naive(u32, u32),
}

/// What stays the same while one packet walks a program: its start element, the
/// segment's root, whether its path is tracked (remembered flows) and its flow key.
#[derive(Clone, Copy)]
struct Walk {
    el: u32,
    root: NodeId,
    track: bool,
    flow: Option<u128>,
}

/// What a classification node chose.
enum Classified {
    /// The node is not a classification node.
    NotAClassifier,
    /// The class's next node.
    Next(NodeId),
    /// No class holds (the packet is dropped, counted).
    Unclassified,
}

/// The value `v` describes, for a packet whose bytes (as it arrived) are `data`.
#[inline]
fn value(v: &Val, data: &[u8], regs: &Regs) -> u128 {
    match *v {
        Val::Const(c) => c,
        Val::Orig(f, add) => {
            crate::program::frame_value(data, f).wrapping_add(add as u128) & f.max_value()
        }
        Val::Reg(r, t, add) => reg_value(regs, r, t, add),
    }
}

/// Component `t` of the flow in register `r`, plus `add`, modulo the component's width.
#[inline(always)]
fn reg_value(regs: &Regs, r: u8, t: Tuple, add: i128) -> u128 {
    let base = regs.flows.get(usize::from(r)).map_or(0, |fl| fl[t.index()]);
    let w = match t {
        Tuple::Saddr | Tuple::Daddr => u32::MAX as u128,
        Tuple::Sport | Tuple::Dport => 0xffff,
    };
    base.wrapping_add(add as u128) & w
}

/// A synthesized program laid out for running: finishes prepared, tests ordered, every
/// classification node compiled. [`Executor::install`] makes one each time; callers that
/// install one program into many executors of its chain (the fuzz target running every input
/// on a fresh executor) make it once and use [`Executor::install_prepared`].
#[derive(Debug, Clone)]
pub struct PreparedProgram {
    program: Program,
    compiled: Vec<Option<classify::Classes>>,
}

impl PreparedProgram {
    /// Lays `program` out for running.
    pub fn new(mut program: Program) -> PreparedProgram {
        for n in &mut program.nodes {
            match n {
                Node::Exit { finish, .. } | Node::Handoff { finish, .. } => finish.prepare(),
                Node::Classify(classes) => crate::program::order_tests(classes),
                _ => {}
            }
        }
        // Each classification node, laid out with the getters of the segment it is in.
        let mut compiled = vec![None; program.nodes.len()];
        for seg in program.starts.values() {
            let getters: Vec<crate::program::Getter> = seg
                .fields
                .iter()
                .map(|f| crate::program::Getter::of(*f))
                .collect();
            let mut todo = vec![seg.root];
            while let Some(n) = todo.pop() {
                let Some(slot) = compiled.get_mut(n as usize) else {
                    continue;
                };
                match program.nodes.get(n as usize) {
                    Some(Node::Classify(cs)) if slot.is_none() => {
                        let ordered = seg.ordered.contains(&n);
                        *slot = Some(classify::Classes::new(cs, &getters, ordered));
                        todo.extend(cs.iter().map(|c| c.node));
                    }
                    Some(Node::Rewrite { branches, .. }) => {
                        todo.extend(branches.iter().map(|b| b.1));
                    }
                    Some(Node::Check { yes, no, .. }) => todo.extend([*yes, *no]),
                    Some(Node::Fork { branches }) => todo.extend(branches.iter().copied()),
                    Some(Node::Lookup { branches, miss, .. }) => {
                        todo.extend(branches.iter().copied());
                        todo.push(*miss);
                    }
                    _ => {}
                }
            }
        }
        PreparedProgram { program, compiled }
    }
}

impl Executor {
    /// Makes the executor run `program` (synthesized mode) for packets entering its start
    /// elements; everything else (and packets a program hands back) runs naive.
    pub fn install(&mut self, program: Program) {
        self.install_prepared(PreparedProgram::new(program));
    }

    /// [`Executor::install`] of a program already laid out (for an executor of the chain it
    /// was synthesized for).
    pub fn install_prepared(&mut self, prepared: PreparedProgram) {
        let PreparedProgram { program, compiled } = prepared;
        self.synth.node_counts = vec![0; program.nodes.len()];
        self.synth.node_bytes = vec![(0, 0); program.nodes.len()];
        self.synth.byte_nodes = program
            .events
            .iter()
            .map(|ev| ev.iter().any(|e| matches!(e, Event::StatBytes { .. })))
            .collect();
        self.synth.byte_nodes.resize(program.nodes.len(), false);
        self.synth.any_bytes = self.synth.byte_nodes.iter().any(|b| *b);
        self.synth.start_of = vec![None; self.elements.len()];
        for (&g, seg) in &program.starts {
            if let Some(s) = self.synth.start_of.get_mut(g as usize) {
                let mut seg = seg.clone();
                seg.getters = seg
                    .fields
                    .iter()
                    .map(|f| crate::program::Getter::of(*f))
                    .collect();
                *s = Some(seg);
            }
        }
        self.synth.compiled = compiled;
        self.synth.quick_exits = program
            .nodes
            .iter()
            .map(|n| match n {
                Node::Exit { finish, .. } => fast::QuickExit::new(finish),
                _ => None,
            })
            .collect();
        self.synth.rewriters = program
            .nodes
            .iter()
            .filter_map(|n| match n {
                Node::Rewrite { element, .. } => Some(*element),
                _ => None,
            })
            .collect();
        self.synth.rewriters.sort_unstable();
        self.synth.rewriters.dedup();
        self.synth.is_rewriter = self
            .elements
            .iter_mut()
            .map(|e| e.stateful_flow().is_some())
            .collect();
        self.synth.flows.clear();
        self.synth.flow_order.clear();
        self.synth.flows_dirty.clear();
        self.synth.regions.clear();
        self.synth.guards = None;
        if self.synth.max_flows == 0 {
            self.synth.max_flows = flows::DEFAULT_MAX_FLOWS;
        }
        self.synth.seen = if self.synth.rewriters.is_empty() {
            Vec::new()
        } else {
            vec![0; flows::seen_slots(self.synth.max_flows)]
        };
        self.synth.firsts_naive = !self.elements.iter().any(|e| {
            e.model()
                .is_some_and(|m| m.cases.len() > firsts::FILTER_CASES)
        });
        // A rewriter's table is read by the program: naive steps into one pay the
        // remembered flows' debts first.
        self.mode_hooks |= self.synth.is_rewriter.iter().any(|&r| r);
        self.synth.program = Some(Box::new(program));
    }

    /// The global index of element `l` of NF `n`.
    pub fn global(&self, n: usize, l: usize) -> u32 {
        self.base[n] + l as u32
    }

    /// Number of elements of the chain (global indices `0..n`, NF after NF).
    pub fn element_count(&self) -> usize {
        self.elements.len()
    }

    /// The element with global index `g`.
    pub fn element(&self, g: usize) -> &dyn Element {
        self.elements[g].as_ref()
    }

    /// The qualified name (`nf/element`) of element `g`.
    pub fn element_name(&self, g: usize) -> String {
        let ni = self.nf_of[g] as usize;
        let li = g - self.base[ni] as usize;
        format!("{}/{}", self.nfs[ni].name, self.nfs[ni].names[li])
    }

    /// The NF index of element `g`.
    pub fn element_nf(&self, g: usize) -> u32 {
        self.nf_of[g]
    }

    /// Where element `g` sits in the stitched graph.
    pub fn place(&self, g: usize) -> Place {
        match self.info[g].kind {
            Kind::Inner => Place::Inner,
            Kind::Link(t) => Place::Link(t),
            Kind::Exit(_) => Place::Exit,
        }
    }

    /// Number of output ports of element `g` (connected or not).
    pub fn outputs(&self, g: usize) -> usize {
        self.info[g].outputs as usize
    }

    /// Where output `port` of element `g` leads: (edge index, element, input port), or
    /// `None` when it is not connected.
    pub fn edge(&self, g: usize, port: usize) -> Option<(u32, u32, u32)> {
        let k = self.edge_base[g] as usize + port;
        if port >= self.info[g].outputs as usize {
            return None;
        }
        let e = self.edges.get(k)?;
        (e.element != u32::MAX).then_some((k as u32, e.element, e.port))
    }

    /// The entry elements fresh packets are pushed into: `FromDevice`s of the chain (global
    /// index), by endpoint.
    pub fn entry_elements(&self) -> Vec<(Endpoint, u32)> {
        self.entries
            .iter()
            .map(|(e, &(n, l))| (e.clone(), self.base[n] + l as u32))
            .collect()
    }

    /// Established flows: (paths remembered now, packets served by a remembered path with
    /// one lookup since the program was installed).
    pub fn flow_stats(&self) -> (usize, u64) {
        let paths = self
            .synth
            .flows
            .values()
            .filter(|e| e.fast.is_some())
            .count();
        (paths, self.synth.flow_hits)
    }

    /// Times the established-flow table was emptied because its regions reached their
    /// bound (2^16); a forgotten flow's next packet takes the slow path.
    pub fn flow_resets(&self) -> u64 {
        self.synth.flow_resets
    }

    /// Synth mode: flows the established-flow table forgot at its bound (`--max-flows`, the
    /// oldest first, or all of them with the regions); a forgotten flow's next packet takes
    /// the slow path, with the same result.
    pub fn flow_evictions(&self) -> u64 {
        self.synth.flow_evictions
    }

    /// Synth mode: the most flows the established-flow table holds (`--max-flows`, by
    /// default 65,536 as the fast path's table). Set after [`Executor::install`] or before.
    pub fn limit_flows(&mut self, max_flows: usize) {
        self.synth.max_flows = max_flows.max(1);
        if !self.synth.seen.is_empty() {
            self.synth.seen = vec![0; flows::seen_slots(self.synth.max_flows)];
        }
    }

    /// How many packets reached each node of the installed program.
    pub fn node_counts(&self) -> &[u64] {
        &self.synth.node_counts
    }

    /// Runs one packet through the program of start element `el`. Returns where it
    /// continues naive, if it does.
    fn run_program(&mut self, el: u32, mut p: Packet) -> Option<(u32, Resume, Packet)> {
        let Some(mut prog) = self.synth.program.take() else {
            return Some((el, Resume::Port(0), p));
        };
        if self.synth.trust_tags {
            self.synth.tag_hint = pop_switch_tag(&mut p);
        }
        let r = self.run_program_in(&mut prog, el, None, &mut p);
        self.synth.tag_hint = None;
        // A flow is remembered from its second slow packet on (at once while it has an
        // entry): a flow of one packet costs no entry, no region and no eviction.
        let keep = self
            .synth
            .track
            .key
            .is_some_and(|k| self.synth.known || flows::seen_again(&mut self.synth.seen, k));
        if !keep {
            self.synth.program = Some(prog);
            return self.program_end(r, p);
        }
        // Room for what this packet may add to the established-flow table.
        self.bound_flows();
        // Paths through a rewriter, and paths that end (an exit, a hand-off, a drop) without
        // one: a denied flow's packets skip the firewall's ordered tree too.
        let key = self
            .synth
            .track
            .key
            .filter(|_| !self.synth.track.record.is_empty() || self.synth.track.end.is_some());
        let fields = match self.synth.start_of.get(el as usize) {
            Some(Some(seg)) => seg.fields.as_slice(),
            _ => &[],
        };
        // Tests on the bytes the flow key holds (protocol, addresses, ports, and the ICMP
        // type and code that share the ports' bytes) hold for every packet of the flow:
        // regions leave them out (they are also the long lists of intervals).
        let unkeyed = |i: u16| !flows::keyed(fields.get(usize::from(i)));
        if key.is_some() && self.synth.track.cacheable {
            // The box of classes the packet took (what a later packet must be in).
            let regs = &mut self.synth.track;
            regs.region.clear();
            for &(node, index) in &regs.visits {
                if let Some(Node::Classify(cs)) = prog.nodes.get(node as usize) {
                    if let Some(c) = cs.get(index as usize) {
                        flows::narrow(&mut regs.region, &c.tests, unkeyed);
                    }
                }
            }
            for &(i, v) in regs.pinned.iter().filter(|(i, _)| unkeyed(*i)) {
                flows::narrow_point(&mut regs.region, i, v);
            }
        }
        let root = match self.synth.start_of.get(el as usize) {
            Some(Some(seg)) => seg.root,
            _ => 0,
        };
        if let (Some(k), Some(choice)) = (self.synth.track.key, self.synth.track.root) {
            let Executor {
                synth:
                    SynthState {
                        track: regs,
                        regions,
                        flows,
                        flow_order,
                        ..
                    },
                ..
            } = self;
            let table = (flows, flow_order);
            flows::memo_root(regs, regions, table, &prog, (root, k), choice, unkeyed);
        }
        self.synth.program = Some(prog);
        if let Some(k) = key {
            self.remember(k);
        }
        self.program_end(r, p)
    }

    /// Runs a copy a fork made from the fork's branch, with the registers the packet had
    /// there.
    #[cold]
    fn run_fork(&mut self, mut p: Packet) -> Option<(u32, Resume, Packet)> {
        let (Some(fork), Some(mut prog)) = (self.synth.forks.pop(), self.synth.program.take())
        else {
            self.recycle(p);
            return None;
        };
        let ForkCopy {
            start: el,
            node,
            regs,
            track,
        } = fork;
        self.synth.regs = regs;
        self.synth.track = track;
        let r = self.run_program_in(&mut prog, el, Some(node), &mut p);
        self.synth.program = Some(prog);
        self.program_end(r, p)
    }

    /// Where a packet a program ran continues.
    #[inline(always)]
    fn program_end(&mut self, r: ProgramEnd, p: Packet) -> Option<(u32, Resume, Packet)> {
        match r {
            ProgramEnd::Naive(e, port) => Some((e, Resume::Port(port), p)),
            ProgramEnd::Exit(x) => {
                self.exit(x as usize, p);
                None
            }
            ProgramEnd::Gone => {
                self.recycle(p);
                None
            }
        }
    }

    /// Runs `p` through `prog`'s segment of `el`; `Some((element, port))` to continue naive
    /// there, `None` when the packet is gone (left, dropped).
    fn run_program_in(
        &mut self,
        prog: &mut Program,
        el: u32,
        from: Option<NodeId>,
        p: &mut Packet,
    ) -> ProgramEnd {
        let Some(Some(seg)) = self.synth.start_of.get(el as usize) else {
            return ProgramEnd::Naive(el, 0);
        };
        // Field values are read when a class first tests them.
        // `valid` says which values are read; stale ones are never used.
        if self.synth.vals.len() < seg.getters.len() {
            self.synth.vals.resize(seg.getters.len(), 0);
        }
        self.synth.valid = 0;
        let root = seg.root;
        // Paths are remembered for flows through rewriters only (the rest is one
        // classification and its writes already); without rewriters the registers stay
        // as they are (empty).
        let track = !self.synth.rewriters.is_empty() && from.is_none();
        // The root class of a known flow, when the packet is like the one that chose it.
        let mut memo = None;
        // The flow key, read once (classification writes nothing).
        let mut flow = None;
        if track {
            fresh_regs(&mut self.synth.regs, &mut self.synth.track);
            // An established flow: one lookup, then its class's writes.
            let key = flows::flow_key(el, p.data());
            flow = Some(key);
            let known = match self.run_fast(prog, el, key, p) {
                Ok(r) => return r,
                Err(known) => known,
            };
            // A flow without an entry has nothing to look up again (its first packet).
            self.synth.known = known;
            if known && self.synth.tag_hint.is_none() {
                memo = self.root_memo(el, key, p);
            }
        }
        let walk = Walk {
            el,
            root,
            track,
            flow,
        };
        let mut node = from.unwrap_or(root);
        loop {
            if let Some(c) = self.synth.node_counts.get_mut(node as usize) {
                *c += 1;
            }
            if track {
                self.synth.track.path.push(node);
            }
            if self.synth.any_bytes && self.synth.byte_nodes.get(node as usize) == Some(&true) {
                self.count_node_bytes(node, p.data());
            }
            match self.classify_at(&walk, node, &mut memo, p) {
                Classified::Next(next) => {
                    node = next;
                    continue;
                }
                Classified::Unclassified => return ProgramEnd::Gone,
                Classified::NotAClassifier => {}
            }
            let Some(n) = prog.nodes.get(node as usize) else {
                return ProgramEnd::Gone;
            };
            let next = match n {
                Node::Classify(_) => return ProgramEnd::Gone,
                Node::Fork { branches } => self.fork_at(el, branches, p),
                Node::Drop => {
                    self.synth.track.end = Some(node);
                    return ProgramEnd::Gone;
                }
                Node::Lookup { .. } => self.lookup_at(n, p),
                Node::Check { tests, yes, no } => {
                    self.synth.track.cacheable &= flows::flow_determined(tests);
                    let data = p.data();
                    let ok = tests.iter().all(|(v, iv)| {
                        let x = value(v, data, &self.synth.regs);
                        iv.iter().any(|&(lo, hi)| lo <= x && x <= hi)
                    });
                    Ok(if ok { *yes } else { *no })
                }
                Node::Exit { .. } | Node::Handoff { .. } => {
                    self.synth.track.end = Some(node);
                    return leave(n, p, &self.synth.regs, &self.info);
                }
                Node::Rewrite { .. } => self.rewrite_at(&walk, n, node, p),
            };
            match next {
                Ok(next) => node = next,
                Err(end) => return end,
            }
        }
    }

    /// A fork node: copies for the other branches wait on the work stack, in order, with
    /// the registers the packet has here; this packet takes branch 0.
    #[inline]
    fn fork_at(&mut self, el: u32, branches: &[NodeId], p: &Packet) -> Result<NodeId, ProgramEnd> {
        self.synth.track.cacheable = false;
        for &b in branches.iter().skip(1).rev() {
            self.synth.forks.push(ForkCopy {
                start: el,
                node: b,
                regs: self.synth.regs.clone(),
                track: self.synth.track.clone(),
            });
            self.stack.push((0, Resume::Fork, p.duplicate()));
        }
        branches.first().copied().ok_or(ProgramEnd::Gone)
    }

    /// A route lookup node (`n`): the branch of the route the element's table gives the
    /// key, or the miss branch.
    #[inline]
    fn lookup_at(&mut self, n: &Node, p: &Packet) -> Result<NodeId, ProgramEnd> {
        let Node::Lookup {
            element,
            key,
            route_branch,
            branches,
            miss,
        } = n
        else {
            return Err(ProgramEnd::Gone);
        };
        // The route is the flow's as long as the address is.
        self.synth.track.cacheable &= matches!(
            key,
            Val::Const(_) | Val::Reg(..) | Val::Orig(Field::IpDst | Field::IpSrc, _)
        );
        let addr = value(key, p.data(), &self.synth.regs) as u32;
        let route = self
            .elements
            .get(*element as usize)
            .and_then(|e| e.route_table())
            .and_then(|l| l.route_index(addr));
        Ok(route
            .and_then(|r| route_branch.get(r))
            .and_then(|&b| branches.get(b as usize))
            .copied()
            .unwrap_or(*miss))
    }

    /// A rewriter node (`n`, node `node` of the walk): the rewriter decides on the packet's
    /// flow as the program has rewritten it so far; the packet takes the branch of the
    /// decision, its new tuple in the node's register.
    #[inline]
    fn rewrite_at(
        &mut self,
        walk: &Walk,
        n: &Node,
        node: NodeId,
        p: &mut Packet,
    ) -> Result<NodeId, ProgramEnd> {
        let Node::Rewrite {
            element,
            port,
            reg,
            tuple,
            has_ip,
            trimmed,
            branches,
            ..
        } = n
        else {
            return Err(ProgramEnd::Gone);
        };
        // Everything the rewriters owe is paid before one decides.
        if !self.synth.flows_dirty.is_empty() {
            self.flush_flows();
        }
        self.synth.guards = None;
        self.synth.track.cacheable &= flows::tuple_determined(tuple);
        let data = p.data();
        let (cur, input) = self.rewriter_input(tuple, *has_ip, *trimmed, data);
        let now = self.cx.now.0;
        if self.synth.track.key.is_none() {
            let key = walk.flow.unwrap_or_else(|| flows::flow_key(walk.el, data));
            let entry = self.synth.known.then(|| self.synth.flows.get(&key));
            if let Some(e) = entry.flatten() {
                self.synth.track.cached.extend_from_slice(&e.steps);
            }
            self.synth.track.key = Some(key);
        }
        let Some(rw) = self.elements[*element as usize].stateful_flow() else {
            return Err(ProgramEnd::Naive(*element, *port));
        };
        let at = self.synth.track.record.len();
        let step = self
            .synth
            .track
            .cached
            .get(at)
            .copied()
            .filter(|s| s.0 == *element);
        let hint = step
            .filter(|s| s.1 != NO_MAPPING)
            .map(|(_, idx, dir)| (idx, dir));
        let fs = rw.decide_flow(*port as usize, input.as_ref(), now, hint);
        let (d, got) = (fs.decision, fs.mapping);
        let rec = match got {
            Some((idx, dir)) => (*element, idx, dir),
            None => (*element, NO_MAPPING, elements::rewriter::Direction::Forward),
        };
        if step != Some(rec) {
            self.synth.track.dirty = true;
        }
        match (got, input.as_ref()) {
            (Some(_), Some(inp)) => {
                self.synth.track.versions.push(fs.version);
                self.synth.track.info = Some(inp.info);
                match fs.steady {
                    Some(life) => self.synth.track.life = self.synth.track.life.min(life),
                    None => self.synth.track.cacheable = false,
                }
            }
            // A drop every packet of the flow gets (its protocol): the path ends here for
            // all of them.
            _ if matches!(d, elements::rewriter::Decision::Drop(r) if r.per_flow()) => {}
            _ => self.synth.track.cacheable = false,
        }
        self.synth.track.record.push(rec);
        let branch = match d {
            elements::rewriter::Decision::Rewrite { out, new } => {
                // The checksum operands rewrite_ipv4 adds, folded as we go so the sums
                // never overflow.
                let (ip, mut l4) = fast::rewrite_ops(cur, &new);
                // A TCP checksum the rewriter's view ends before stays as it is (the frame
                // may go on past the IPv4 length the view was cut at).
                if input.as_ref().is_some_and(|i| i.short_tcp()) {
                    l4 = 0;
                }
                let regs = &mut self.synth.regs;
                regs.ip_ops = u32::from(fold(regs.ip_ops + ip));
                regs.l4_ops = u32::from(fold(regs.l4_ops + l4));
                regs.rewrote = true;
                let r = usize::from(*reg);
                if regs.flows.len() <= r {
                    regs.flows.resize(r + 1, [0; 4]);
                }
                regs.flows[r] = new.values();
                Branch::Rewrite(out as u32)
            }
            elements::rewriter::Decision::Pass(out) => Branch::Pass(out as u32),
            elements::rewriter::Decision::Drop(reason) => {
                self.count_drop(*element, reason.as_str());
                if reason.per_flow() {
                    self.synth.track.end = Some(node);
                    self.synth.track.drop = Some((*element, reason.as_str()));
                }
                return Err(ProgramEnd::Gone);
            }
        };
        match branches.iter().find(|(b, _)| *b == branch) {
            Some((_, n)) => Ok(*n),
            None => {
                self.count_drop(*element, ChainReason::SynthesisMissedBranch.into());
                Err(ProgramEnd::Gone)
            }
        }
    }

    /// The tuple a rewriter node decides on (source address and port, destination address
    /// and port, as the program has rewritten them so far), and the rewriter's input: the
    /// packet's own header, parsed once per packet (cut or not), with that tuple.
    #[inline]
    fn rewriter_input(
        &mut self,
        tuple: &[Val; 4],
        has_ip: bool,
        trimmed: bool,
        data: &[u8],
    ) -> ([u128; 4], Option<elements::rewriter::FlowInput>) {
        let slot = usize::from(trimmed);
        if self.synth.track.parsed[slot].is_none() {
            self.synth.track.parsed[slot] = Some(flow_input(data, trimmed));
        }
        let base = self.synth.track.parsed[slot].flatten();
        let orig = base.map(|b| b.flow.values());
        let mut cur = [0u128; 4];
        for (k, v) in tuple.iter().enumerate() {
            cur[k] = match (v, orig) {
                (Val::Orig(f, add), Some(o)) if tuple_slot(*f) == Some(k) => {
                    o[k].wrapping_add(*add as u128) & f.max_value()
                }
                _ => value(v, data, &self.synth.regs),
            };
        }
        let input = match base {
            Some(mut i) if has_ip => {
                i.flow.saddr = std::net::Ipv4Addr::from(cur[0] as u32);
                i.flow.sport = cur[1] as u16;
                i.flow.daddr = std::net::Ipv4Addr::from(cur[2] as u32);
                i.flow.dport = cur[3] as u16;
                Some(i)
            }
            _ => None,
        };
        (cur, input)
    }

    /// Classifies `p` at `node` when it is a classification node: the switch's tag, the
    /// flow's remembered root class (`memo`, taken at the root) or the classes themselves
    /// choose; the choice is noted in the registers when paths are tracked.
    #[inline(always)]
    fn classify_at(
        &mut self,
        walk: &Walk,
        node: NodeId,
        memo: &mut Option<(NodeId, u32)>,
        p: &Packet,
    ) -> Classified {
        let Walk {
            el,
            root,
            track,
            flow,
        } = *walk;
        let Some(Some(classes)) = self.synth.compiled.get_mut(node as usize) else {
            return Classified::NotAClassifier;
        };
        let view = crate::program::frame(p.data());
        let (vals, valid) = (&mut self.synth.vals, &mut self.synth.valid);
        // A switch's tag or a known flow's class, if any (most packets have neither).
        let given = if self.synth.tag_hint.is_none() && memo.is_none() {
            None
        } else {
            let hinted = match self.synth.tag_hint.take() {
                Some(h) if node == root => {
                    let r = classes.check(&view, h);
                    self.synth.tag_counts[usize::from(r.is_none())] += 1;
                    r
                }
                _ => None,
            };
            let memoed = memo.take().filter(|_| node == root);
            hinted.or(memoed)
        };
        let fresh = given.is_none();
        let found = match given {
            Some(g) => Some(g),
            None => classes.classify(&view, vals, valid),
        };
        match found {
            Some((next, index)) => {
                if track && classes.ordered() {
                    // A class's box does not account for the classes before it
                    // that overlap it: a later packet of the flow is sure to land
                    // in the same class only if every field the node tests is as
                    // this packet's.
                    let getters = self
                        .synth
                        .start_of
                        .get(el as usize)
                        .and_then(|s| s.as_ref())
                        .map_or(&[][..], |s| s.getters.as_slice());
                    for &i in classes.fields() {
                        let v = getters.get(usize::from(i)).map_or(0, |g| g.get(&view));
                        self.synth.track.pinned.push((i, v));
                    }
                } else if track {
                    self.synth.track.visits.push((node, index));
                }
                if track && self.synth.track.path.len() == 1 {
                    if fresh {
                        self.synth.track.root = Some((next, index, self.synth.track.pinned.len()));
                    }
                    let key = flow.unwrap_or_else(|| flows::flow_key(el, p.data()));
                    self.synth.track.key = Some(key);
                    let entry = self.synth.known.then(|| self.synth.flows.get(&key));
                    if let Some(e) = entry.flatten() {
                        self.synth.track.cached.extend_from_slice(&e.steps);
                    }
                }
                Classified::Next(next)
            }
            None => {
                self.count_drop(el, "synthesis-unclassified");
                Classified::Unclassified
            }
        }
    }

    /// Adds a frame's length and its IPv4 total length (`data` as it arrived) to node
    /// `node`'s byte sums.
    #[cold]
    fn count_node_bytes(&mut self, node: NodeId, d: &[u8]) {
        let ip_len = u64::from(u16::from_be_bytes([
            d.get(16).copied().unwrap_or(0),
            d.get(17).copied().unwrap_or(0),
        ]));
        if let Some(b) = self.synth.node_bytes.get_mut(node as usize) {
            b.0 += d.len() as u64;
            b.1 += ip_len;
        }
    }

    /// Counters with the program's per-node counts folded in.
    #[allow(clippy::type_complexity)]
    fn folded(
        &self,
    ) -> (
        Vec<u64>,
        Vec<u64>,
        Vec<Vec<(&'static str, u64)>>,
        Vec<NfCounters>,
        Vec<Vec<(&'static str, u64)>>,
    ) {
        let mut arrivals = self.counts.arrivals.clone();
        let mut out = self.counts.out_count.clone();
        let mut drops = self.counts.drops.clone();
        let mut nfc = self.counts.nf_counters.clone();
        let mut stats: Vec<Vec<(&'static str, u64)>> = vec![Vec::new(); self.elements.len()];
        let add = |v: &mut Vec<(&'static str, u64)>, r: &'static str, n: u64| match v
            .iter_mut()
            .find(|(x, _)| *x == r)
        {
            Some((_, m)) => *m += n,
            None => v.push((r, n)),
        };
        self.fast_owed(&mut arrivals, &mut out, &mut drops, &mut nfc, &mut stats);
        if let Some(prog) = &self.synth.program {
            for (i, &n) in self.synth.node_counts.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                for ev in prog.events.get(i).map(Vec::as_slice).unwrap_or(&[]) {
                    match *ev {
                        Event::Edge(k) => out[k as usize] += n,
                        Event::Arrival(e) => arrivals[e as usize] += n,
                        Event::NfOut(f) => nfc[f as usize].output += n,
                        Event::NfIn(f) => nfc[f as usize].input += n,
                        Event::Drop(e, r) => {
                            nfc[self.nf_of[e as usize] as usize].dropped += n;
                            add(&mut drops[e as usize], prog.reasons[r as usize], n);
                        }
                        Event::Created(f) => nfc[f as usize].created += n,
                        Event::Stat(e, r) => {
                            add(&mut stats[e as usize], prog.reasons[r as usize], n)
                        }
                        Event::StatBytes {
                            element,
                            name,
                            head,
                            trimmed,
                        } => {
                            let (fb, ib) = self.synth.node_bytes.get(i).copied().unwrap_or((0, 0));
                            let h = u64::from(head);
                            let b = if trimmed {
                                (ib + 14 * n).saturating_sub(h * n)
                            } else {
                                fb.saturating_sub(h * n)
                            };
                            add(&mut stats[element as usize], prog.reasons[name as usize], b);
                        }
                    }
                }
            }
        }
        self.fold_merged(&mut out);
        (arrivals, out, drops, nfc, stats)
    }
}

/// Empties the registers for a packet entering a program (the vectors keep their room).
#[inline]
fn fresh_regs(regs: &mut Regs, track: &mut Track) {
    regs.flows.clear();
    regs.ip_ops = 0;
    regs.l4_ops = 0;
    regs.rewrote = false;
    track.key = None;
    track.cached.clear();
    track.record.clear();
    track.dirty = false;
    track.parsed = [None, None];
    track.path.clear();
    track.end = None;
    track.cacheable = true;
    track.versions.clear();
    track.life = u64::MAX;
    track.info = None;
    track.region.clear();
    track.visits.clear();
    track.pinned.clear();
    track.drop = None;
    track.root = None;
}

/// Takes off the 802.1Q tag a switch pushed (`fusebox synth --openflow`) and returns the
/// class index it names (VLAN id − 1), or `None` for an untagged frame or VLAN id 0.
fn pop_switch_tag(p: &mut Packet) -> Option<u32> {
    let d = p.data_mut();
    if d.len() < 18 || d[12..14] != [0x81, 0x00] {
        return None;
    }
    let vid = u16::from_be_bytes([d[14], d[15]]) & 0x0fff;
    d.copy_within(0..12, 4);
    p.pull(4);
    u32::from(vid).checked_sub(1)
}

/// What a rewriter would read from the packet: the IPv4 header at offset 14 of the frame as
/// it arrived, whole or cut at its IPv4 length (`trimmed`).
fn flow_input(data: &[u8], trimmed: bool) -> Option<elements::rewriter::FlowInput> {
    let ip = data.get(14..)?;
    let view = if trimmed {
        packet::Ipv4Flow::parse_trimmed(ip)?
    } else {
        packet::Ipv4Flow::parse(ip)?
    };
    Some(elements::rewriter::FlowInput::of(view))
}

/// The index in a rewriter tuple (saddr, sport, daddr, dport) of field `f`.
fn tuple_slot(f: Field) -> Option<usize> {
    match f {
        Field::IpSrc => Some(0),
        Field::SrcPort => Some(1),
        Field::IpDst => Some(2),
        Field::DstPort => Some(3),
        _ => None,
    }
}

/// Finishes `p` at an end node (exit, hand-off; anything else drops it) and says where it
/// goes.
fn leave(n: &Node, p: &mut Packet, regs: &Regs, info: &[Info]) -> ProgramEnd {
    match n {
        Node::Exit { element, finish } => {
            finish_packet(p, finish, regs);
            match info[*element as usize].kind {
                Kind::Exit(x) => ProgramEnd::Exit(x),
                _ => ProgramEnd::Gone,
            }
        }
        Node::Handoff {
            element,
            port,
            finish,
        } => {
            finish_packet(p, finish, regs);
            ProgramEnd::Naive(*element, *port)
        }
        _ => ProgramEnd::Gone,
    }
}

/// Adds the operands `l4_ops` (what rewriting addresses and ports changed) to the TCP or UDP
/// checksum of frame `d`, whose IPv4 header is `hl` bytes long; a UDP checksum of 0 (none)
/// stays 0, and a UDP sum that comes to 0 is written 0xFFFF (RFC 768).
#[inline]
fn fix_l4_checksum(d: &mut [u8], hl: usize, l4_ops: u32) {
    use crate::program::{fixed_offset, IP_OFFSET};
    const PROTO: usize = fixed_offset(Field::IpProto);
    const TCP_CHECKSUM: usize = wire::tcp::field::CHECKSUM.start;
    const UDP_CHECKSUM: usize = wire::udp::field::CHECKSUM.start;
    let l4 = IP_OFFSET + hl;
    if d.len() < l4 {
        return;
    }
    let proto = d.get(PROTO).copied().unwrap_or(0);
    let ck = l4
        + if proto == wire::IpProtocol::TCP {
            TCP_CHECKSUM
        } else {
            UDP_CHECKSUM
        };
    if let Some(b) = d.get_mut(ck..ck + 2) {
        let c0 = u16::from_be_bytes([b[0], b[1]]);
        let c = if proto == wire::IpProtocol::UDP && c0 == 0 {
            0
        } else {
            let c = !fold(u32::from(!c0) + l4_ops);
            if proto == wire::IpProtocol::UDP {
                wire::checksum::udp_finish(c)
            } else {
                c
            }
        };
        b.copy_from_slice(&c.to_be_bytes());
    }
}

/// Makes `p` (the frame as it arrived) what the original chain holds at the node: every
/// write once, checksums once, then the layout and annotations.
fn finish_packet(p: &mut Packet, f: &Finish, regs: &Regs) {
    use crate::program::{fixed_offset, store, IP_OFFSET};
    const IHL: usize = fixed_offset(Field::IpIhl);
    const LEN: usize = fixed_offset(Field::IpLen);
    const IP_CHECKSUM: usize = IP_OFFSET + wire::ipv4::field::CHECKSUM.start;
    let base = p.data_offset() as usize;
    let data = p.data();
    let hl = usize::from(data.get(IHL).copied().unwrap_or(0) & 0x0f) * 4;
    let annos = f.annos.as_ref().map(|a| {
        (
            value(&a.dst_ip, data, regs) as u32,
            value(&a.paint, data, regs) as u8,
            value(&a.packet_type, data, regs),
        )
    });
    let ip_len = usize::from(u16::from_be_bytes([
        data.get(LEN).copied().unwrap_or(0),
        data.get(LEN + 1).copied().unwrap_or(0),
    ]));
    let d = p.data_mut();
    for (off, b) in &f.runs {
        let o = usize::from(*off);
        if let Some(t) = d.get_mut(o..o + b.len()) {
            t.copy_from_slice(b);
        }
    }
    // Each write's value depends only on its own field's old value: write in place.
    for &(off, a) in &f.adds {
        if let Some(b) = d.get_mut(usize::from(off)) {
            *b = b.wrapping_add(a);
        }
    }
    for w in &f.placed {
        let (off, len) = w.at(hl);
        let x = match w.val {
            Val::Const(c) => c,
            Val::Orig(_, add) => {
                elements::model::load(d, off, len).wrapping_add(add as u128) & w.field.max_value()
            }
            _ => value(&w.val, d, regs),
        };
        store(d, off, len, x);
    }
    let l4 = IP_OFFSET + hl;
    if regs.rewrote {
        fix_l4_checksum(d, hl, regs.l4_ops);
    }
    match f.ip_checksum {
        IpChecksum::Incremental(k) => {
            let ops = k + regs.ip_ops;
            if ops != 0 {
                if let Some(b) = d.get(IP_CHECKSUM..IP_CHECKSUM + 2) {
                    let c0 = u16::from_be_bytes([b[0], b[1]]);
                    let c = !fold(u32::from(!c0) + fold(ops) as u32);
                    store(d, IP_CHECKSUM, 2, u128::from(c));
                }
            }
        }
        IpChecksum::Recompute => {
            if hl >= 20 && d.len() >= l4 {
                store(d, IP_CHECKSUM, 2, 0);
                let c = wire::checksum::data(&d[IP_OFFSET..l4]);
                store(d, IP_CHECKSUM, 2, u128::from(c));
            }
        }
    }
    if f.trim {
        p.truncate(IP_OFFSET + ip_len);
    }
    p.pull(usize::from(f.head));
    if let (Some(a), Some((dst, paint, pt))) = (&f.annos, annos) {
        let abs = |o: Option<u16>| o.map_or(packet::NO_OFFSET, |o| (base + usize::from(o)) as u32);
        p.meta.mac_offset = abs(a.mac);
        p.meta.network_offset = abs(a.net);
        p.meta.transport_offset = if a.transport && a.net.is_some() {
            (base + IP_OFFSET + hl) as u32
        } else {
            packet::NO_OFFSET
        };
        p.meta.dst_ip = std::net::Ipv4Addr::from(dst);
        p.meta.paint = paint;
        p.meta.packet_type = elements::model::packet_type_of_value(pt);
        p.meta.hops = p.meta.hops.saturating_add(a.hops);
    }
}

#[cfg(test)]
mod replay_tests {
    use super::*;
    use ports::gen::{generate, Anomalies, GenConfig};

    /// A one-NF router with a NAPT (stateful) and a TTL decrement, replayed from memory.
    fn executor(dir: &std::path::Path, batch: usize) -> (Executor, (usize, usize)) {
        let click = dir.join("nf.click");
        std::fs::write(
            &click,
            "rw :: IPRewriter(pattern 10.9.0.1 1024-65535 - - 0 1, drop);\n\
             FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> [0]rw;\n\
             FromDevice(eth1) -> Strip(14) -> CheckIPHeader -> [1]rw;\n\
             rw[0] -> DecIPTTL -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02) -> ToDevice(eth1);\n\
             rw[1] -> DecIPTTL -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:03) -> ToDevice(eth0);\n",
        )
        .unwrap();
        let chain = ChainFile::single(&click);
        let opts = RunOptions {
            batch,
            ..RunOptions::default()
        };
        let ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Memory(Vec::new()))).unwrap();
        let at = ex
            .entry(&Endpoint::parse("nf.eth0").unwrap())
            .expect("entry");
        (ex, at)
    }

    fn records() -> Vec<Record> {
        let cfg = GenConfig {
            packets: 300,
            flows: 20,
            anomalies: Anomalies {
                ttl_range: Some((1, 3)),
                ..Anomalies::default()
            },
            ..GenConfig::default()
        };
        generate(&cfg).records()
    }

    #[test]
    fn replay_results_do_not_depend_on_the_batch_and_latency_counts_exits() {
        let tmp = tempfile::Builder::new()
            .prefix("chain-replay-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        let recs = records();
        type Run = (BTreeMap<String, Captured>, BTreeMap<String, Vec<String>>);
        let mut first: Option<Run> = None;
        for batch in [1, 7, 32, 128] {
            let (mut ex, at) = executor(dir, batch);
            let inputs = vec![(at, recs.clone())];
            assert_eq!(ex.replay(&inputs, 2), 600);
            // Off: nothing is recorded.
            assert!(ex.take_latency().is_empty());
            ex.record_latency(true);
            assert_eq!(ex.replay(&inputs, 1), 300);
            let samples = ex.take_latency();
            ex.record_latency(false);
            ex.replay(&inputs, 1);
            assert!(ex.take_latency().is_empty());
            let state = ex.state_dump();
            let out = ex.finish().unwrap();
            let exited: usize = out.values().map(Vec::len).sum();
            // One sample per packet that left in the recorded pass (a quarter of the
            // passes), none for the dropped ones (TTL 1 expires).
            assert_eq!(samples.len() * 4, exited, "batch {batch}");
            assert!(exited < 1200, "some packets expire");
            match &first {
                None => first = Some((out, state)),
                Some((o, s)) => {
                    assert!(o == &out, "batch {batch}: outputs differ");
                    assert_eq!(s, &state, "batch {batch}");
                }
            }
        }
    }
}
