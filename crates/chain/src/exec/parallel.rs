//! The parallel mode (NFCompass §IV.B.1): the NFs of each group of a
//! [`crate::layout::Parallel`] run side by side on copies of a packet, and their results are
//! merged by XOR against the original.
//!
//! A group is NFs `n1 … nk` consecutive along the chain's links. A packet reaching `n1` by
//! any of its interfaces but the one linked to `n2` (its *trigger*) is copied once per NF;
//! branch `i` runs `ni` from the interface `n(i-1)` is linked to, on the original bytes,
//! until the copy reaches a `ToDevice`. The merge is NFCompass': every output XOR the
//! original, OR-ed, XOR the original again; the merged packet leaves by the `ToDevice` the
//! last branch reached, as the naive chain's packet would.
//!
//! Branches run in the executor's thread or, for NFs a [`Placement`] puts on another
//! processor than the group's first NF, on a helper thread per processor that owns those
//! NFs' elements while a run lasts (parked there at the first packet, given back at the end
//! of [`Executor::run`], [`Executor::replay`], [`Executor::run_ports`] and
//! [`Executor::settle_flows`]). The executor's thread runs its branches while the helpers
//! run theirs, then waits for them.
//!
//! **Batched hand-off.** Handing one packet to a helper and waiting for it costs a thread
//! wake-up per packet, far more than a branch. So, within a batch of chain inputs
//! ([`Executor::run`], [`Executor::replay`]; `RunOptions::batch`), a packet reaching a group
//! with branches on helpers *waits at the group's trigger*; when the batch's inputs have all
//! been pushed, each helper gets the copies of all waiting packets for its branches in one
//! hand-off, the executor's thread runs its own branches of all of them meanwhile, and then,
//! packet by packet in arrival order, the results are merged and the merged packet runs on
//! to completion at the virtual time (and input index) of its chain input, as sequential
//! execution would run it. Groups met on the way on wait likewise and are handed off next.
//! This is another order of the same work, so a group is batched only when that order
//! cannot show ([`Executor::group_batching`]): a packet's way *to* the group must not depend
//! on what a later part of an earlier packet's way did. The rule: no element of the group's
//! NFs lies on a cycle of the element graph, and nothing that leaves the group's NFs (but by
//! the link from one of its NFs to the next) can come back to them; then nothing a waiting
//! packet does after the trigger reaches the group again or anything before it. A chain
//! input entering where it could reach the group's NFs or what follows the trigger other
//! than through the trigger (a reply entering at the far end) first lets the waiting
//! packets run on. So everything after the trigger sees the sequential packets in
//! sequential order, and everything before it never sees a waiting packet. Other groups
//! with helper branches hand off packet by packet (slow, but the same results), as do
//! single pushes ([`Executor::inject`], [`Executor::push_input`], live ports).
//! Copies, logs and hand-off buffers are reused from batch to batch: no allocation per packet.
//!
//! A branch's counters (edges, drops, created packets) are logged, not applied, and
//! committed in chain order; what stays exactly the naive run's, given what the planner
//! checked (no NF of a group reads or writes a byte an earlier NF of the group writes):
//!
//! * **Drops.** The first branch in chain order that drops the packet stops the group: its
//!   drop is counted with its reason, and the later branches' logs are discarded, so later
//!   NFs never saw the packet in the counters. In-thread, later branches do not even run
//!   (their state is the naive one). A branch on a helper may have run already: its NF's
//!   own state then saw a packet the naive chain would not have given it
//!   ([`ParallelStats::discarded`]); the planner puts a branch on a helper only when no
//!   earlier NF of its group can drop.
//! * **State.** Each NF's elements see the group's packets in input order, on one thread.
//! * **Counters.** Link crossings between the group's NFs are counted when a branch reaches
//!   its way on (NF output, next NF input, the next `FromDevice`'s arrival), and the hop
//!   limit applies there as on a real crossing.
//! * **Irregular branches.** A branch whose copy leaves by another `ToDevice` than its way
//!   on, or changes the packet's length, ends the group there: the packet (with what the
//!   earlier branches wrote merged in, when the lengths allow) continues from where that
//!   branch left it, so the rest runs as written. A branch that keeps its copy (a queue)
//!   ends the group too. Packets a branch emits or creates continue naive after the merged
//!   packet's path. These are counted ([`ParallelStats::irregular`]); the planner does not
//!   group NFs that do this, so a planned group never meets one.
//!
//! Annotations (paint, destination address, header offsets) that leave the group are the
//! last branch's: the merge is over bytes, as NFCompass' is.

use super::batch::components;
use super::{Edge, Executor, Info, Kind, Resume, MAX_HOPS};
use crate::layout::{Parallel, Placement};
use crate::reason::ChainReason;
use elements::{Context, Element, PortCount, Role, Verdict};
use packet::{Packet, Timestamp};
use std::sync::mpsc;

/// No group starts at this element.
const NONE: u32 = u32::MAX;

/// An [`Outcome`] whose log is in the executor's own buffer (not a helper's batch).
const LOCAL: u32 = u32::MAX;

/// Spins on an empty channel before blocking on it (a helper between batches, the
/// executor waiting for its helpers): a blocked thread takes tens of microseconds to wake.
const SPINS: u32 = 1 << 14;

/// Of [`SPINS`], how many are busy spins before the waiting thread yields its core.
const SPIN_HOT: u32 = 1 << 10;

/// What a parallel run did (`fusebox run --mode parallel` prints it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParallelStats {
    /// Groups installed.
    pub groups: u64,
    /// Branches that run on helper threads (per group packet).
    pub remote_branches: u64,
    /// Groups with branches on helpers whose packets are handed off in batches (see the
    /// module documentation; the others hand off packet by packet).
    pub batched_groups: u64,
    /// Packets that ran through a group as parallel branches and were merged.
    pub merged: u64,
    /// Packets a branch dropped (the group stopped there).
    pub dropped: u64,
    /// Packets whose group ended early because a branch left by another way, changed the
    /// length, kept its copy or emitted packets (the rest ran as written).
    pub irregular: u64,
    /// Branches a helper ran for a packet an earlier branch dropped: their counters were
    /// discarded, but their NF's own state saw the packet (0 in a sound placement).
    pub discarded: u64,
    /// Hand-offs to helper threads (one per helper and batch when batched).
    pub handoffs: u64,
    /// Packets whose group's helper branches were handed off in a batch.
    pub batched: u64,
}

/// A group [`Executor::enable_parallel`] refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The NF indices of the group as given.
    pub nfs: Vec<usize>,
    /// Why it runs as written instead.
    pub why: String,
}

/// One group laid out for running.
struct GroupRun {
    /// Its NFs, in chain order.
    nfs: Vec<u32>,
    /// Per branch, the element it starts at (for the first: the trigger, given per packet).
    start: Vec<u32>,
    /// Per branch, the helper that runs it (`None`: the executor's thread).
    helper: Vec<Option<usize>>,
    /// Whether a branch runs on a helper.
    remote: bool,
    /// Whether its packets wait for a batched hand-off ([`Executor::group_batching`]).
    batched: bool,
}

/// A counter a branch would change, applied when the branch is committed.
#[derive(Debug, Clone, Copy)]
enum Ev {
    /// A packet sent along edge `k`.
    Edge(u32),
    /// A drop at an element, with its reason.
    Drop(u32, &'static str),
}

/// How a branch's copy ended.
enum BranchEnd {
    /// It reached this `ToDevice` (not yet crossed or sent).
    Reached(u32, Packet),
    /// An element dropped it (logged).
    Dropped,
    /// An element kept it (or it left its NF's elements).
    Held,
}

/// A branch's result: how it ended and what it would count.
struct Outcome {
    end: BranchEnd,
    /// Its counter changes: this range of the log it was run with.
    log: (u32, u32),
    created: u64,
    /// Packets emitted on the way (element, output, packet), in emission order.
    emitted: Vec<(u32, usize, Packet)>,
    /// Whose log holds it: [`LOCAL`] (the executor's) or a helper's batch.
    src: u32,
}

impl Outcome {
    /// Whether it stops the group's branches that come after it (anything but a copy
    /// reaching some `ToDevice` with nothing else happening).
    fn stops(&self) -> bool {
        !matches!(self.end, BranchEnd::Reached(..)) || !self.emitted.is_empty()
    }
}

/// A branch of a waiting packet for a helper to run.
struct Item {
    /// Where its outcome goes ([`Flush::slots`]).
    slot: u32,
    /// Which waiting packet it belongs to (a stopping branch skips the packet's later ones).
    pkt: u32,
    nf: u32,
    start: u32,
    port: u32,
    now: Timestamp,
    copy: Packet,
}

/// A hand-off to a helper, sent back with the results; its buffers are reused.
#[derive(Default)]
struct Batch {
    items: Vec<Item>,
    /// (slot, outcome) per branch run.
    outs: Vec<(u32, Outcome)>,
    /// The outcomes' counter logs.
    log: Vec<Ev>,
    /// Copies of branches not run (an earlier branch of their packet stopped).
    spare: Vec<Packet>,
}

/// Work for a helper.
enum Job {
    Run(Box<Batch>),
    Stop,
}

/// The NFs a helper owns while it runs: (NF index, its elements).
type Owned = Vec<(u32, Vec<Box<dyn Element>>)>;

/// A helper thread and its channels.
struct Helper {
    jobs: mpsc::SyncSender<Job>,
    done: mpsc::Receiver<Box<Batch>>,
    thread: std::thread::JoinHandle<Owned>,
}

/// A packet waiting at its group's trigger for the batch's hand-off.
struct Pending {
    g: u32,
    el: u32,
    port: u32,
    orig: Option<Packet>,
    /// Its chain input and the virtual time it entered at.
    input: u64,
    now: Timestamp,
    /// Its first slot in [`Flush::slots`].
    off: u32,
}

/// One hand-off's working space, taken out of the state while its packets run on (a group
/// met on the way waits in a fresh list).
#[derive(Default)]
struct Flush {
    pending: Vec<Pending>,
    /// Per waiting packet and branch, its outcome.
    slots: Vec<Option<Outcome>>,
    /// The counter logs of the executor's branches.
    log: Vec<Ev>,
    /// Per helper, its batch while it is home.
    batches: Vec<Option<Box<Batch>>>,
    /// Per helper, whether it was sent work.
    waiting: Vec<bool>,
}

/// Where [`Executor::merge`] gets a packet's branch outcomes.
enum Src<'a> {
    /// Runs each branch in this thread when its turn comes (the packet came in at `el`,
    /// input `port`).
    Lazy { el: u32, port: u32 },
    /// Already run, in `w.slots[off..]`.
    Slots { w: &'a mut Flush, off: usize },
}

/// An element whose NF runs on a helper thread meanwhile (never pushed).
struct Parked {
    class: &'static str,
    ports: PortCount,
}

impl Element for Parked {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        self.ports
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Drop(packet, ChainReason::UnconnectedOutput.into())
    }
}

/// The parallel mode's state ([`Executor::enable_parallel`]).
pub(super) struct ParallelState {
    /// Per element: the group a packet arriving there runs (`NONE`: none).
    trigger: Vec<u32>,
    /// Per element: it is a `ToDevice` by which the last NF of a group goes back towards
    /// the one before it (not the group's way on).
    backward: Vec<bool>,
    groups: Vec<GroupRun>,
    /// Per helper (by index), the NFs it runs.
    helper_nfs: Vec<Vec<u32>>,
    /// The running helpers (empty while their NFs' elements are home).
    helpers: Vec<Helper>,
    /// Scratch: the OR of every branch's output XOR the original.
    acc: Vec<u8>,
    /// Scratch: the counter log of the packet being merged in this thread.
    log: Vec<Ev>,
    /// Whether a batch of inputs is being pushed (batched groups' packets wait).
    batching: bool,
    /// Per element: a chain input entering here must wait until the waiting packets have
    /// run on ([`Executor::flush_entries`]).
    flush_at: Vec<bool>,
    /// Packets waiting for a hand-off.
    pending: Vec<Pending>,
    /// The hand-off's working space while idle.
    scratch: Option<Box<Flush>>,
    pub(super) stats: ParallelStats,
}

/// Follows one branch's copy from element `el` (input `port`) inside its NF, whose elements
/// are `els` (global indices from `lo`), until it reaches a `ToDevice`, is dropped or
/// kept; logs the counters it would change at the end of `log`. Runs on any thread.
#[allow(clippy::too_many_arguments)]
fn walk(
    els: &mut [Box<dyn Element>],
    lo: u32,
    info: &[Info],
    edges: &[Edge],
    cx: &mut Context,
    mut el: u32,
    mut port: u32,
    mut p: Packet,
    log: &mut Vec<Ev>,
) -> Outcome {
    let first = log.len() as u32;
    let mut out = Outcome {
        end: BranchEnd::Held,
        log: (first, first),
        created: 0,
        emitted: Vec::new(),
        src: LOCAL,
    };
    while let (Some(&inf), Some(elem)) = (
        info.get(el as usize),
        el.checked_sub(lo).and_then(|i| els.get_mut(i as usize)),
    ) {
        if inf.kind != Kind::Inner {
            out.end = BranchEnd::Reached(el, p);
            break;
        }
        let v = elem.push(port as usize, p, cx);
        if cx.has_pending() {
            out.created += cx.take_created();
            for (_, r) in cx.take_dropped() {
                log.push(Ev::Drop(el, r));
            }
            out.emitted
                .extend(cx.take_emitted().map(|(o, q)| (el, o, q)));
            cx.settled();
        }
        match v {
            Verdict::Out(o, q) => {
                let k = inf.edge_base as usize + o;
                if o < inf.outputs as usize {
                    if let Some(&next) = edges.get(k) {
                        if next.element != u32::MAX {
                            log.push(Ev::Edge(k as u32));
                            (el, port, p) = (next.element, next.port, q);
                            continue;
                        }
                    }
                }
                log.push(Ev::Drop(el, ChainReason::UnconnectedOutput.into()));
                out.end = BranchEnd::Dropped;
                break;
            }
            Verdict::Drop(_, reason) => {
                log.push(Ev::Drop(el, reason));
                out.end = BranchEnd::Dropped;
                break;
            }
            Verdict::Done => break,
        }
    }
    out.log.1 = log.len() as u32;
    out
}

/// A helper thread's loop: runs the items of each batch in order on `nfs` (NF index, first
/// global element, its elements), skipping a packet's later branches once one stops the
/// group, and sends the batch back; gives the elements back on `Stop`.
fn helper_loop(
    mut nfs: Owned,
    los: Vec<u32>,
    info: Vec<Info>,
    edges: Vec<Edge>,
    jobs: mpsc::Receiver<Job>,
    done: mpsc::SyncSender<Box<Batch>>,
) -> Owned {
    let mut cx = Context::new(Timestamp(0));
    loop {
        let Some(Job::Run(mut b)) = wait(&jobs) else {
            return nfs;
        };
        b.outs.clear();
        b.log.clear();
        let mut stopped = NONE;
        let Batch {
            items,
            outs,
            log,
            spare,
        } = &mut *b;
        for it in items.drain(..) {
            let slot = nfs.iter().position(|(f, _)| *f == it.nf);
            let (true, Some(slot)) = (it.pkt != stopped, slot) else {
                spare.push(it.copy);
                continue;
            };
            cx.now = it.now;
            let lo = los[slot];
            let els = &mut nfs[slot].1;
            let o = walk(
                els, lo, &info, &edges, &mut cx, it.start, it.port, it.copy, log,
            );
            if o.stops() {
                stopped = it.pkt;
            }
            outs.push((it.slot, o));
        }
        if done.send(b).is_err() {
            return nfs;
        }
    }
}

/// The next message of `rx`, spinning a little, then yielding the core (on a shared
/// machine the thread it waits for may need it), then blocking (`None`: disconnected).
fn wait<T>(rx: &mpsc::Receiver<T>) -> Option<T> {
    for i in 0..SPINS {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(mpsc::TryRecvError::Empty) if i < SPIN_HOT => std::hint::spin_loop(),
            Err(mpsc::TryRecvError::Empty) => std::thread::yield_now(),
            Err(mpsc::TryRecvError::Disconnected) => return None,
        }
    }
    rx.recv().ok()
}

impl Executor {
    /// Makes the executor run the groups of `layout` as parallel branches merged by XOR
    /// (the parallel mode; see the `parallel` module of `chain::exec`), every branch in the
    /// executor's thread. Groups that are not NFs consecutive along the chain's links (each
    /// linked to the next by exactly one link), that overlap another group or name no NF
    /// are refused — they run as written — and returned with the reason. Everything else
    /// runs naive.
    pub fn enable_parallel(&mut self, layout: &Parallel) -> Vec<Refused> {
        self.enable_parallel_placed(layout, None)
    }

    /// [`Executor::enable_parallel`] with branches placed: a branch whose NF `placement`
    /// puts on another processor than its group's first NF runs on a helper thread for that
    /// processor (one per processor), at the same time as the branches of the executor's
    /// thread. Sound only when no NF of the group before it can drop (see the module
    /// documentation); the planner decides.
    pub fn enable_parallel_placed(
        &mut self,
        layout: &Parallel,
        placement: Option<&Placement>,
    ) -> Vec<Refused> {
        self.unpark_parallel();
        let n = self.elements.len();
        let mut st = ParallelState {
            trigger: vec![NONE; n],
            backward: vec![false; n],
            groups: Vec::new(),
            helper_nfs: Vec::new(),
            helpers: Vec::new(),
            acc: Vec::new(),
            log: Vec::new(),
            batching: false,
            flush_at: vec![false; n],
            pending: Vec::new(),
            scratch: None,
            stats: ParallelStats::default(),
        };
        let processor = |f: usize| {
            placement
                .and_then(|p| p.stages.iter().find(|s| s.nfs.contains(&f)))
                .map(|s| s.processor)
        };
        let mut procs: Vec<usize> = Vec::new();
        let mut refused = Vec::new();
        let mut taken = vec![false; self.nfs.len()];
        for g in &layout.groups {
            match self.lay_out(&g.nfs, &taken) {
                Ok((mut run, triggers, backward)) => {
                    for &f in &g.nfs {
                        taken[f] = true;
                    }
                    let home = processor(g.nfs[0]);
                    for (i, &f) in g.nfs.iter().enumerate() {
                        let Some(p) = processor(f).filter(|&p| Some(p) != home) else {
                            continue;
                        };
                        let h = match procs.iter().position(|&q| q == p) {
                            Some(h) => h,
                            None => {
                                procs.push(p);
                                st.helper_nfs.push(Vec::new());
                                procs.len() - 1
                            }
                        };
                        st.helper_nfs[h].push(f as u32);
                        run.helper[i] = Some(h);
                        run.remote = true;
                        st.stats.remote_branches += 1;
                    }
                    if run.remote {
                        run.batched = self.batchable(&g.nfs, &run.start, &triggers).is_ok();
                        st.stats.batched_groups += u64::from(run.batched);
                        if run.batched {
                            for x in self.flush_entries(&g.nfs, &triggers) {
                                st.flush_at[x as usize] = true;
                            }
                        }
                    }
                    let gi = st.groups.len() as u32;
                    for t in triggers {
                        st.trigger[t as usize] = gi;
                    }
                    for b in backward {
                        st.backward[b as usize] = true;
                    }
                    st.groups.push(run);
                }
                Err(why) => refused.push(Refused {
                    nfs: g.nfs.clone(),
                    why,
                }),
            }
        }
        st.stats.groups = st.groups.len() as u64;
        if st.groups.is_empty() {
            self.par = None;
        } else {
            self.par = Some(Box::new(st));
            self.mode_hooks = true;
        }
        refused
    }

    /// Whether the packets of the group `nfs` (NF indices in chain order, as in a
    /// [`Parallel`] layout) may wait at its trigger for a batched hand-off to helper threads
    /// (see the module documentation), and if not, why.
    pub fn group_batching(&self, nfs: &[usize]) -> Result<(), String> {
        let taken = vec![false; self.nfs.len()];
        let (run, triggers, _) = self.lay_out(nfs, &taken)?;
        self.batchable(nfs, &run.start, &triggers)
    }

    /// The successors of element `e` in the element graph (edges, link crossings,
    /// reflected replies).
    pub(super) fn successors(&self, e: usize) -> Vec<u32> {
        match self.info[e].kind {
            Kind::Inner => {
                let r = self.edge_base[e] as usize..self.edge_base[e + 1] as usize;
                self.edges[r]
                    .iter()
                    .filter(|d| d.element != u32::MAX)
                    .map(|d| d.element)
                    .collect()
            }
            Kind::Link(t) => vec![t],
            Kind::Exit(x) => self.exits[x as usize].reflect_to.into_iter().collect(),
        }
    }

    /// [`Executor::group_batching`] for a laid-out group with these triggers.
    fn batchable(&self, nfs: &[usize], start: &[u32], triggers: &[u32]) -> Result<(), String> {
        let n = self.elements.len();
        let succ: Vec<Vec<u32>> = (0..n).map(|e| self.successors(e)).collect();
        let name = |e: usize| {
            let f = self.nf_of[e] as usize;
            format!("{} ({})", self.nfs[f].name, self.elements[e].class_name())
        };
        let in_group = |e: usize| nfs.contains(&(self.nf_of[e] as usize));
        for c in components(n, &|e| succ[e].clone()) {
            if let Some(&e) = c
                .elements
                .iter()
                .find(|&&e| c.cyclic && in_group(e as usize))
            {
                return Err(format!(
                    "{} lies on a cycle: packets come back to the group",
                    name(e as usize)
                ));
            }
        }
        let reach = |from: &mut dyn Iterator<Item = u32>| {
            let mut seen = vec![false; n];
            let mut work: Vec<u32> = from.collect();
            for &e in &work {
                seen[e as usize] = true;
            }
            while let Some(e) = work.pop() {
                for &t in &succ[e as usize] {
                    if !seen[t as usize] {
                        seen[t as usize] = true;
                        work.push(t);
                    }
                }
            }
            seen
        };
        let after = reach(&mut triggers.iter().copied());
        // What leaves the group's NFs (but by the link from one to the next) must never
        // come back to them: it would meet their state after later packets' branches.
        let internal = |e: usize| match self.info[e].kind {
            Kind::Link(t) => nfs
                .windows(2)
                .zip(&start[1..])
                .any(|(w, &s)| s == t && self.nf_of[e] as usize == w[0]),
            _ => false,
        };
        let left = reach(
            &mut (0..n)
                .filter(|&e| {
                    after[e] && in_group(e) && self.info[e].kind != Kind::Inner && !internal(e)
                })
                .flat_map(|e| succ[e].clone()),
        );
        if let Some(e) = (0..n).find(|&e| in_group(e) && left[e]) {
            return Err(format!(
                "packets that left the group come back to {}",
                name(e)
            ));
        }
        Ok(())
    }

    /// The entries (`FromDevice` elements) from which a packet can reach the group `nfs`'s
    /// NFs or what follows its triggers other than through a trigger: a chain input there
    /// must wait until the waiting packets have run on (they come before it).
    fn flush_entries(&self, nfs: &[usize], triggers: &[u32]) -> Vec<u32> {
        let n = self.elements.len();
        let succ: Vec<Vec<u32>> = (0..n).map(|e| self.successors(e)).collect();
        let mut inside = vec![false; n];
        let mut work: Vec<u32> = triggers.to_vec();
        while let Some(e) = work.pop() {
            for &t in &succ[e as usize] {
                if !inside[t as usize] {
                    inside[t as usize] = true;
                    work.push(t);
                }
            }
        }
        for (e, i) in inside.iter_mut().enumerate() {
            *i |= nfs.contains(&(self.nf_of[e] as usize));
        }
        let mut out = Vec::new();
        for &(f, l) in self.entries.values() {
            let x = self.base[f] + l as u32;
            if triggers.contains(&x) {
                continue;
            }
            let mut seen = vec![false; n];
            let mut work = vec![x];
            seen[x as usize] = true;
            let mut bad = false;
            while let Some(e) = work.pop() {
                if inside[e as usize] {
                    bad = true;
                    break;
                }
                for &t in &succ[e as usize] {
                    if !seen[t as usize] && !triggers.contains(&t) {
                        seen[t as usize] = true;
                        work.push(t);
                    }
                }
            }
            if bad {
                out.push(x);
            }
        }
        out
    }

    /// What the parallel mode did so far (`None` unless [`Executor::enable_parallel`]
    /// installed a group).
    pub fn parallel_stats(&self) -> Option<ParallelStats> {
        self.par.as_ref().map(|p| p.stats)
    }

    /// Gives the elements of NFs running on helper threads back to the executor and stops
    /// the helpers (they start again at the next group packet). Done at the end of every
    /// run and replay; call it after [`Executor::inject`]s before reading the summary or
    /// the state of such NFs.
    pub fn unpark_parallel(&mut self) {
        let Some(par) = self.par.as_deref_mut() else {
            return;
        };
        for h in std::mem::take(&mut par.helpers) {
            let _ = h.jobs.send(Job::Stop);
            let Ok(nfs) = h.thread.join() else {
                continue;
            };
            for (f, els) in nfs {
                let lo = self.base[f as usize] as usize;
                for (j, e) in els.into_iter().enumerate() {
                    if let Some(slot) = self.elements.get_mut(lo + j) {
                        *slot = e;
                    }
                }
            }
        }
    }

    /// Starts the helpers, moving their NFs' elements to them.
    fn park(&mut self, par: &mut ParallelState) {
        for nfs in &par.helper_nfs {
            let mut owned = Vec::new();
            let mut los = Vec::new();
            for &f in nfs {
                let lo = self.base[f as usize] as usize;
                let hi = self
                    .base
                    .get(f as usize + 1)
                    .map_or(self.elements.len(), |&b| b as usize);
                let els: Vec<Box<dyn Element>> = self.elements[lo..hi]
                    .iter_mut()
                    .map(|e| {
                        let stub: Box<dyn Element> = Box::new(Parked {
                            class: e.class_name(),
                            ports: e.port_count(),
                        });
                        std::mem::replace(e, stub)
                    })
                    .collect();
                owned.push((f, els));
                los.push(lo as u32);
            }
            let (jobs, rx) = mpsc::sync_channel(1);
            let (tx, done) = mpsc::sync_channel(1);
            let (info, edges) = (self.info.clone(), self.edges.clone());
            let thread = std::thread::spawn(move || helper_loop(owned, los, info, edges, rx, tx));
            par.helpers.push(Helper { jobs, done, thread });
        }
    }

    /// The `ToDevice` elements of NF `f` named `iface`.
    fn to_devices(&self, f: usize, iface: &str) -> Vec<u32> {
        let nf = &self.nfs[f];
        nf.roles
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Role::ToDevice(d) if d == iface))
            .map(|(l, _)| self.base[f] + l as u32)
            .collect()
    }

    /// A group's branches, triggers and backward `ToDevice`s, or why it cannot run.
    #[allow(clippy::type_complexity)]
    fn lay_out(
        &self,
        nfs: &[usize],
        taken: &[bool],
    ) -> Result<(GroupRun, Vec<u32>, Vec<u32>), String> {
        if nfs.len() < 2 {
            return Err("a group needs two NFs or more".into());
        }
        for (i, &f) in nfs.iter().enumerate() {
            if f >= self.nfs.len() {
                return Err(format!("no NF {f}"));
            }
            if taken[f] || nfs[..i].contains(&f) {
                return Err(format!("{} is in another group", self.nfs[f].name));
            }
        }
        // Per pair: the one FromDevice of the next NF the previous one's links reach.
        let mut start = vec![NONE];
        let mut out_iface = Vec::new();
        for w in nfs.windows(2) {
            let (a, b) = (w[0], w[1]);
            let mut links: Vec<(u32, u32)> = Vec::new();
            for (l, role) in self.nfs[a].roles.iter().enumerate() {
                let g = self.base[a] + l as u32;
                if let (Role::ToDevice(_), Kind::Link(t)) = (role, self.info[g as usize].kind) {
                    if self.nf_of[t as usize] as usize == b && !links.iter().any(|x| x.1 == t) {
                        links.push((g, t));
                    }
                }
            }
            let [(out, target)] = links[..] else {
                return Err(format!(
                    "{} is linked to {} by {} links, not one",
                    self.nfs[a].name,
                    self.nfs[b].name,
                    links.len()
                ));
            };
            let Role::ToDevice(x) = &self.nfs[a].roles[(out - self.base[a]) as usize] else {
                return Err("a link that is not a ToDevice".into());
            };
            out_iface.push(x.clone());
            start.push(target);
        }
        // Triggers: the first NF's FromDevices but the one of its way on.
        let first = nfs[0];
        let triggers: Vec<u32> = self.nfs[first]
            .roles
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Role::FromDevice(d) if *d != out_iface[0]))
            .map(|(l, _)| self.base[first] + l as u32)
            .collect();
        if triggers.is_empty() {
            return Err(format!("{} has no way in", self.nfs[first].name));
        }
        // The last NF going back by the interface it was reached on is not its way on.
        let last = nfs[nfs.len() - 1];
        let back_start = start[start.len() - 1];
        let backward = match &self.nfs[last].roles[(back_start - self.base[last]) as usize] {
            Role::FromDevice(y) => self.to_devices(last, y),
            _ => Vec::new(),
        };
        Ok((
            GroupRun {
                nfs: nfs.iter().map(|&f| f as u32).collect(),
                helper: vec![None; nfs.len()],
                start,
                remote: false,
                batched: false,
            },
            triggers,
            backward,
        ))
    }

    /// Whether a packet arriving at element `el` starts a group (one test per hooked step).
    /// A packet reaching an element of an NF whose elements are on a helper by another way
    /// than a group's branch (a reply going back through it) brings them home first.
    #[inline]
    pub(super) fn parallel_group(&mut self, el: u32) -> Option<u32> {
        let par = self.par.as_deref()?;
        let g = par.trigger.get(el as usize).copied().filter(|&g| g != NONE);
        if g.is_none() && !par.helpers.is_empty() {
            let f = self.nf_of.get(el as usize).copied();
            if par
                .helper_nfs
                .iter()
                .any(|h| f.is_some_and(|f| h.contains(&f)))
            {
                self.unpark_parallel();
            }
        }
        g
    }

    /// Pushes a batch of chain inputs (in input order) with the parallel mode installed:
    /// packets of batched groups wait at their triggers until all are pushed, then go to
    /// the helpers together (see the module documentation).
    pub(super) fn push_all_parallel(
        &mut self,
        batch: impl Iterator<Item = ((usize, usize), Packet)>,
    ) {
        let on = match self.par.as_deref_mut() {
            Some(par) if par.stats.batched_groups > 0 => {
                par.batching = true;
                true
            }
            _ => false,
        };
        for (entry, p) in batch {
            if on {
                let el = self.base[entry.0] as usize + entry.1;
                if self
                    .par
                    .as_deref()
                    .is_some_and(|par| par.flush_at[el] && !par.pending.is_empty())
                {
                    self.flush_parallel();
                }
            }
            self.push_in(entry, p);
        }
        if on {
            self.flush_parallel();
            if let Some(par) = self.par.as_deref_mut() {
                par.batching = false;
            }
        }
    }

    /// Runs group `g` for packet `p`, which arrived at its trigger `el` (input `port`; the
    /// arrival is counted): the branches, the merge, and the merged packet onwards — or,
    /// for a group with branches on helpers, makes it wait for the hand-off.
    pub(super) fn run_group(&mut self, g: u32, el: u32, port: u32, orig: Packet) {
        let Some(mut par) = self.par.take() else {
            return self.run_from(el, Resume::Port(port), orig);
        };
        let group = &par.groups[g as usize];
        if group.remote {
            let defer = par.batching && group.batched;
            par.pending.push(Pending {
                g,
                el,
                port,
                orig: Some(orig),
                input: self.next_input.wrapping_sub(1),
                now: self.cx.now,
                off: 0,
            });
            self.par = Some(par);
            if !defer {
                self.flush_parallel();
            }
            return;
        }
        par.log.clear();
        let next = self.merge(&mut par, g as usize, orig, Src::Lazy { el, port });
        self.par = Some(par);
        if let Some((t, q)) = next {
            // The merged packet leaves by the last branch's ToDevice, as it would naive.
            self.run_from(t, Resume::Port(0), q);
        }
    }

    /// Hands the waiting packets' branches off, runs this thread's, then merges each packet
    /// and runs it on, in arrival order, at its input's time; again for packets that came
    /// to wait meanwhile, until none waits.
    fn flush_parallel(&mut self) {
        loop {
            let Some(mut par) = self.par.take() else {
                return;
            };
            if par.pending.is_empty() {
                self.par = Some(par);
                return;
            }
            let mut w = par.scratch.take().unwrap_or_default();
            std::mem::swap(&mut w.pending, &mut par.pending);
            self.hand_off(&mut par, &mut w);
            self.par = Some(par);
            let (now, next) = (self.cx.now, self.next_input);
            for k in 0..w.pending.len() {
                let (g, input, at, off) = {
                    let p = &w.pending[k];
                    (p.g as usize, p.input, p.now, p.off as usize)
                };
                let Some(orig) = w.pending[k].orig.take() else {
                    continue;
                };
                let Some(mut par) = self.par.take() else {
                    self.recycle(orig);
                    continue;
                };
                self.cx.now = at;
                self.next_input = input.wrapping_add(1);
                let onward = self.merge(&mut par, g, orig, Src::Slots { w: &mut w, off });
                self.par = Some(par);
                if let Some((t, q)) = onward {
                    self.run_from(t, Resume::Port(0), q);
                }
            }
            self.cx.now = now;
            self.next_input = next;
            w.pending.clear();
            w.slots.clear();
            if let Some(par) = self.par.as_deref_mut() {
                if par.scratch.is_none() {
                    par.scratch = Some(w);
                }
            }
        }
    }

    /// A copy of `orig` for branch `i` (from the pool: no allocation once it is warm).
    #[inline]
    fn branch_copy(&mut self, orig: &Packet, i: usize) -> Packet {
        let mut c = self.pool.pop().unwrap_or_else(|| Packet::from_bytes(&[]));
        c.copy_from(orig);
        c.meta.hops = orig.meta.hops.saturating_add(i as u8);
        c
    }

    /// Sends each helper its branches of the waiting packets `w.pending` in one batch,
    /// runs this thread's branches meanwhile (stopping a packet's at the first that stops
    /// its group), and collects every outcome into `w.slots`.
    fn hand_off(&mut self, par: &mut ParallelState, w: &mut Flush) {
        if par.helpers.is_empty() {
            self.park(par);
        }
        let helpers = par.helpers.len();
        w.batches.resize_with(helpers, || None);
        w.waiting.clear();
        w.waiting.resize(helpers, false);
        w.log.clear();
        let mut off = 0u32;
        for p in w.pending.iter_mut() {
            p.off = off;
            off += par.groups[p.g as usize].nfs.len() as u32;
        }
        w.slots.clear();
        w.slots.resize_with(off as usize, || None);
        let mut batched = 0;
        for k in 0..w.pending.len() {
            let p = &w.pending[k];
            let Some(orig) = p.orig.as_ref() else {
                continue;
            };
            let group = &par.groups[p.g as usize];
            batched += u64::from(par.batching && group.batched);
            for (i, h) in group.helper.iter().enumerate() {
                let Some(h) = *h else {
                    continue;
                };
                let mut copy = self.pool.pop().unwrap_or_else(|| Packet::from_bytes(&[]));
                copy.copy_from(orig);
                copy.meta.hops = orig.meta.hops.saturating_add(i as u8);
                let (start, port) = if i == 0 {
                    (p.el, p.port)
                } else {
                    (group.start[i], 0)
                };
                let b = w.batches[h].get_or_insert_with(Box::default);
                b.items.push(Item {
                    slot: p.off + i as u32,
                    pkt: k as u32,
                    nf: group.nfs[i],
                    start,
                    port,
                    now: p.now,
                    copy,
                });
            }
        }
        par.stats.batched += batched;
        for h in 0..helpers {
            if w.batches[h].as_ref().is_some_and(|b| !b.items.is_empty()) {
                if let Some(b) = w.batches[h].take() {
                    if par.helpers[h].jobs.send(Job::Run(b)).is_ok() {
                        w.waiting[h] = true;
                        par.stats.handoffs += 1;
                    }
                }
            }
        }
        let now = self.cx.now;
        for k in 0..w.pending.len() {
            let (g, el, port, at, off) = {
                let p = &w.pending[k];
                (p.g as usize, p.el, p.port, p.now, p.off as usize)
            };
            self.cx.now = at;
            for i in 0..par.groups[g].nfs.len() {
                if par.groups[g].helper[i].is_some() {
                    continue;
                }
                let Some(orig) = w.pending[k].orig.as_ref() else {
                    break;
                };
                let c = self.branch_copy(orig, i);
                let (s, sp) = if i == 0 {
                    (el, port)
                } else {
                    (par.groups[g].start[i], 0)
                };
                let o = self.local_branch(par.groups[g].nfs[i], s, sp, c, &mut w.log);
                let stop = o.stops();
                w.slots[off + i] = Some(o);
                if stop {
                    break;
                }
            }
        }
        self.cx.now = now;
        for h in 0..helpers {
            if !std::mem::take(&mut w.waiting[h]) {
                continue;
            }
            let Some(mut b) = wait(&par.helpers[h].done) else {
                continue;
            };
            for (slot, mut o) in b.outs.drain(..) {
                o.src = h as u32;
                if let Some(s) = w.slots.get_mut(slot as usize) {
                    *s = Some(o);
                }
            }
            for c in b.spare.drain(..) {
                self.recycle(c);
            }
            w.batches[h] = Some(b);
        }
    }

    /// Runs a branch (NF `f`, from element `s`, input `sp`) in this thread, its counter
    /// changes logged at the end of `log`.
    fn local_branch(&mut self, f: u32, s: u32, sp: u32, c: Packet, log: &mut Vec<Ev>) -> Outcome {
        let lo = self.base[f as usize];
        let hi = self
            .base
            .get(f as usize + 1)
            .map_or(self.elements.len(), |&b| b as usize);
        let Executor {
            elements,
            info,
            edges,
            cx,
            ..
        } = self;
        walk(
            &mut elements[lo as usize..hi],
            lo,
            info,
            edges,
            cx,
            s,
            sp,
            c,
            log,
        )
    }

    /// Applies a committed branch's counters (`log` holds them); its emissions go on the
    /// work stack.
    fn commit(&mut self, f: u32, o: &mut Outcome, log: &[Ev]) {
        for ev in log.get(o.log.0 as usize..o.log.1 as usize).unwrap_or(&[]) {
            match *ev {
                Ev::Edge(k) => self.counts.out_count[k as usize] += 1,
                Ev::Drop(el, r) => self.count_drop(el, r),
            }
        }
        self.counts.nf_counters[f as usize].created += o.created;
        for (el, port, p) in o.emitted.drain(..).rev() {
            self.stack_emitted(el, port, p);
        }
    }

    /// Gives back the packets of outcomes not committed (a branch before them stopped the
    /// group) and counts them as discarded.
    fn discard(&mut self, par: &mut ParallelState, rest: &mut [Option<Outcome>]) {
        for o in rest.iter_mut().filter_map(Option::take) {
            par.stats.discarded += 1;
            if let BranchEnd::Reached(_, q) = o.end {
                self.recycle(q);
            }
            for (_, _, q) in o.emitted {
                self.recycle(q);
            }
        }
    }

    /// The branches of group `g` for `orig` (run now, or their outcomes from `src`), their
    /// counters committed in chain order, and the merge; returns where the packet goes on,
    /// or `None` when it is gone (dropped or kept).
    fn merge(
        &mut self,
        par: &mut ParallelState,
        g: usize,
        orig: Packet,
        mut src: Src<'_>,
    ) -> Option<(u32, Packet)> {
        let k = par.groups[g].nfs.len();
        par.acc.clear();
        par.acc.resize(orig.len(), 0);
        for i in 0..k {
            let f = par.groups[g].nfs[i];
            let o = match &mut src {
                Src::Lazy { el, port } => {
                    let (s, sp) = if i == 0 {
                        (*el, *port)
                    } else {
                        (par.groups[g].start[i], 0)
                    };
                    let c = self.branch_copy(&orig, i);
                    let mut log = std::mem::take(&mut par.log);
                    let o = self.local_branch(f, s, sp, c, &mut log);
                    par.log = log;
                    Some(o)
                }
                Src::Slots { w, off } => w.slots.get_mut(*off + i).and_then(Option::take),
            };
            let Some(mut o) = o else {
                // A helper stopped early or failed: nothing more to commit.
                if let Src::Slots { w, off } = &mut src {
                    let hi = (*off + k).min(w.slots.len());
                    self.discard(par, &mut w.slots[(*off + i).min(hi)..hi]);
                }
                self.recycle(orig);
                par.stats.irregular += 1;
                return None;
            };
            let emitted = !o.emitted.is_empty();
            match &src {
                Src::Lazy { .. } => {
                    let log = std::mem::take(&mut par.log);
                    self.commit(f, &mut o, &log);
                    par.log = log;
                }
                Src::Slots { w, .. } => {
                    let log = match w.batches.get(o.src as usize) {
                        Some(Some(b)) if o.src != LOCAL => &b.log[..],
                        _ => &w.log[..],
                    };
                    self.commit(f, &mut o, log);
                }
            }
            let rest = |src: &mut Src<'_>| -> Option<(usize, usize)> {
                match src {
                    Src::Lazy { .. } => None,
                    Src::Slots { w, off } => {
                        let hi = (*off + k).min(w.slots.len());
                        Some(((*off + i + 1).min(hi), hi))
                    }
                }
            };
            let (t, out) = match o.end {
                BranchEnd::Reached(t, out) => (t, out),
                BranchEnd::Dropped | BranchEnd::Held => {
                    if matches!(o.end, BranchEnd::Dropped) {
                        par.stats.dropped += 1;
                    } else {
                        par.stats.irregular += 1;
                    }
                    if let (Some((a, b)), Src::Slots { w, .. }) = (rest(&mut src), &mut src) {
                        self.discard(par, &mut w.slots[a..b]);
                    }
                    self.recycle(orig);
                    return None;
                }
            };
            let onward = match par.groups[g].start.get(i + 1) {
                Some(&s) => self.info[t as usize].kind == Kind::Link(s),
                None => !par.backward[t as usize],
            };
            let same_len = out.len() == orig.len();
            if same_len {
                for ((a, x), y) in par.acc.iter_mut().zip(out.data()).zip(orig.data()) {
                    *a |= x ^ y;
                }
            }
            let mut out = out;
            if !onward || !same_len || emitted {
                // Emissions are on the work stack already (commit): they run after the
                // merged packet's path, as naive.
                par.stats.irregular += 1;
                if let (Some((a, b)), Src::Slots { w, .. }) = (rest(&mut src), &mut src) {
                    self.discard(par, &mut w.slots[a..b]);
                }
                if same_len {
                    merge_into(&mut out, &orig, &par.acc);
                }
                self.recycle(orig);
                return Some((t, out));
            }
            if i + 1 == k {
                merge_into(&mut out, &orig, &par.acc);
                par.stats.merged += 1;
                self.recycle(orig);
                return Some((t, out));
            }
            // The link crossing to the next NF, counted as naive counts it.
            if orig.meta.hops.saturating_add(i as u8) >= MAX_HOPS {
                self.count_drop(t, ChainReason::Loop.into());
                self.recycle(out);
                self.recycle(orig);
                par.stats.dropped += 1;
                if let (Some((a, b)), Src::Slots { w, .. }) = (rest(&mut src), &mut src) {
                    self.discard(par, &mut w.slots[a..b]);
                }
                return None;
            }
            let next = par.groups[g].start[i + 1];
            self.counts.nf_counters[f as usize].output += 1;
            self.counts.nf_counters[par.groups[g].nfs[i + 1] as usize].input += 1;
            self.counts.arrivals[next as usize] += 1;
            self.recycle(out);
        }
        self.recycle(orig);
        None
    }
}

/// Writes the merge into `o` (a branch's output, as long as `orig`): `orig XOR acc`, where
/// `acc` is the OR of every branch's output XOR the original.
#[inline]
fn merge_into(o: &mut Packet, orig: &Packet, acc: &[u8]) {
    for ((b, x), a) in o.data_mut().iter_mut().zip(orig.data()).zip(acc) {
        *b = x ^ a;
    }
}
