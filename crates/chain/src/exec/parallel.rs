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

use super::{Edge, Executor, Info, Kind, Resume, MAX_HOPS};
use crate::layout::{Parallel, Placement};
use crate::reason::ChainReason;
use elements::{Context, Element, PortCount, Role, Verdict};
use packet::{Packet, Timestamp};
use std::sync::mpsc;

/// No group starts at this element.
const NONE: u32 = u32::MAX;

/// Spins on an empty channel before blocking on it (a helper between packets, the
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
    log: Vec<Ev>,
    created: u64,
    /// Packets emitted on the way (element, output, packet), in emission order.
    emitted: Vec<(u32, usize, Packet)>,
}

impl Outcome {
    /// Whether it stops the group's branches that come after it (anything but a copy
    /// reaching some `ToDevice` with nothing else happening).
    fn stops(&self) -> bool {
        !matches!(self.end, BranchEnd::Reached(..)) || !self.emitted.is_empty()
    }
}

/// Work for a helper: branches of one packet (branch index, NF, start element, copy).
enum Job {
    Run {
        now: Timestamp,
        branches: Vec<(usize, u32, u32, Packet)>,
    },
    Stop,
}

/// The NFs a helper owns while it runs: (NF index, its elements).
type Owned = Vec<(u32, Vec<Box<dyn Element>>)>;

/// A helper thread and its channels.
struct Helper {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<Vec<(usize, Outcome)>>,
    thread: std::thread::JoinHandle<Owned>,
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
    pub(super) stats: ParallelStats,
}

/// Follows one branch's copy from element `el` (input `port`) inside its NF, whose elements
/// are `els` (global indices from `lo`), until it reaches a `ToDevice`, is dropped or
/// kept; logs the counters it would change. Runs on any thread.
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
) -> Outcome {
    let mut out = Outcome {
        end: BranchEnd::Held,
        log: Vec::new(),
        created: 0,
        emitted: Vec::new(),
    };
    loop {
        let (Some(&inf), Some(elem)) = (
            info.get(el as usize),
            el.checked_sub(lo).and_then(|i| els.get_mut(i as usize)),
        ) else {
            return out;
        };
        if inf.kind != Kind::Inner {
            out.end = BranchEnd::Reached(el, p);
            return out;
        }
        let v = elem.push(port as usize, p, cx);
        if cx.has_pending() {
            out.created += cx.take_created();
            for (_, r) in cx.take_dropped() {
                out.log.push(Ev::Drop(el, r));
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
                            out.log.push(Ev::Edge(k as u32));
                            (el, port, p) = (next.element, next.port, q);
                            continue;
                        }
                    }
                }
                out.log
                    .push(Ev::Drop(el, ChainReason::UnconnectedOutput.into()));
                out.end = BranchEnd::Dropped;
                return out;
            }
            Verdict::Drop(_, reason) => {
                out.log.push(Ev::Drop(el, reason));
                out.end = BranchEnd::Dropped;
                return out;
            }
            Verdict::Done => return out,
        }
    }
}

/// A helper thread's loop: runs the branches of each job in order on `nfs` (NF index, first
/// global element, its elements), stopping at the first that stops the group; gives the
/// elements back on `Stop`.
fn helper_loop(
    mut nfs: Owned,
    los: Vec<u32>,
    info: Vec<Info>,
    edges: Vec<Edge>,
    jobs: mpsc::Receiver<Job>,
    done: mpsc::Sender<Vec<(usize, Outcome)>>,
) -> Owned {
    let mut cx = Context::new(Timestamp(0));
    loop {
        let job = match wait(&jobs) {
            Some(j) => j,
            None => return nfs,
        };
        let Job::Run { now, branches } = job else {
            return nfs;
        };
        cx.now = now;
        let mut outs = Vec::with_capacity(branches.len());
        for (i, nf, start, p) in branches {
            let Some(slot) = nfs.iter().position(|(f, _)| *f == nf) else {
                continue;
            };
            let lo = los[slot];
            let o = walk(&mut nfs[slot].1, lo, &info, &edges, &mut cx, start, 0, p);
            let stop = o.stops();
            outs.push((i, o));
            if stop {
                break;
            }
        }
        if done.send(outs).is_err() {
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
                        st.stats.remote_branches += 1;
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
            let (jobs, rx) = mpsc::channel();
            let (tx, done) = mpsc::channel();
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

    /// Runs group `g` for packet `p`, which arrived at its trigger `el` (input `port`; the
    /// arrival is counted): the branches, the merge, and the merged packet onwards.
    pub(super) fn run_group(&mut self, g: u32, el: u32, port: u32, orig: Packet) {
        let Some(mut par) = self.par.take() else {
            return self.run_from(el, Resume::Port(port), orig);
        };
        let next = self.branches(&mut par, g as usize, el, port, orig);
        self.par = Some(par);
        if let Some((t, q)) = next {
            // The merged packet leaves by the last branch's ToDevice, as it would naive.
            self.run_from(t, Resume::Port(0), q);
        }
    }

    /// Runs branch `i` of group `g` (NF `f`) in this thread.
    fn local_branch(&mut self, f: u32, s: u32, sp: u32, c: Packet) -> Outcome {
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
        )
    }

    /// Applies a committed branch's counters; its emissions go on the work stack.
    fn commit(&mut self, f: u32, o: &mut Outcome) {
        for ev in o.log.drain(..) {
            match ev {
                Ev::Edge(k) => self.counts.out_count[k as usize] += 1,
                Ev::Drop(el, r) => self.count_drop(el, r),
            }
        }
        self.counts.nf_counters[f as usize].created += o.created;
        for (el, port, p) in o.emitted.drain(..).rev() {
            let e = el as usize;
            let k = self.edge_base[e] as usize + port;
            if port < (self.edge_base[e + 1] - self.edge_base[e]) as usize
                && self.edges[k].element != u32::MAX
            {
                self.counts.out_count[k] += 1;
                self.stack
                    .push((self.edges[k].element, Resume::Port(self.edges[k].port), p));
            } else {
                self.count_drop(el, ChainReason::UnconnectedOutput.into());
            }
        }
    }

    /// The branches of group `g` and the merge; returns where the packet goes on, or
    /// `None` when it is gone (dropped or kept).
    fn branches(
        &mut self,
        par: &mut ParallelState,
        g: usize,
        el: u32,
        port: u32,
        orig: Packet,
    ) -> Option<(u32, Packet)> {
        let k = par.groups[g].nfs.len();
        par.acc.clear();
        par.acc.resize(orig.len(), 0);
        let start_of = |group: &GroupRun, i: usize| {
            if i == 0 {
                (el, port)
            } else {
                (group.start[i], 0)
            }
        };
        let copy = |i: usize| {
            let mut c = orig.duplicate();
            c.meta.hops = orig.meta.hops.saturating_add(i as u8);
            c
        };
        // Branches on helpers start first; they run while this thread runs its own.
        let remote = par.groups[g].helper.iter().any(Option::is_some);
        let mut outcomes: Vec<Option<Outcome>> = Vec::new();
        if remote {
            if par.helpers.is_empty() {
                self.park(par);
            }
            let group = &par.groups[g];
            let mut jobs: Vec<Vec<(usize, u32, u32, Packet)>> =
                (0..par.helpers.len()).map(|_| Vec::new()).collect();
            for i in 0..k {
                if let Some(h) = group.helper[i] {
                    jobs[h].push((i, group.nfs[i], start_of(group, i).0, copy(i)));
                }
            }
            let now = self.cx.now;
            let mut waiting = Vec::new();
            for (h, branches) in jobs.into_iter().enumerate() {
                if !branches.is_empty() {
                    let _ = par.helpers[h].jobs.send(Job::Run { now, branches });
                    waiting.push(h);
                }
            }
            outcomes = (0..k).map(|_| None).collect();
            for (i, slot) in outcomes.iter_mut().enumerate() {
                if group.helper[i].is_some() {
                    continue;
                }
                let (s, sp) = start_of(group, i);
                let o = self.local_branch(group.nfs[i], s, sp, copy(i));
                let stop = o.stops();
                *slot = Some(o);
                if stop {
                    break;
                }
            }
            for h in waiting {
                for (i, o) in wait(&par.helpers[h].done).unwrap_or_default() {
                    if let Some(slot) = outcomes.get_mut(i) {
                        *slot = Some(o);
                    }
                }
            }
        }
        let group = &par.groups[g];
        for i in 0..k {
            let f = group.nfs[i];
            let o = if remote {
                outcomes[i].take()
            } else {
                let (s, sp) = start_of(group, i);
                Some(self.local_branch(f, s, sp, copy(i)))
            };
            let Some(mut o) = o else {
                // A helper stopped early or failed: nothing more to commit.
                self.recycle(orig);
                par.stats.irregular += 1;
                return None;
            };
            let emitted = !o.emitted.is_empty();
            self.commit(f, &mut o);
            let (t, out) = match o.end {
                BranchEnd::Reached(t, out) => (t, out),
                BranchEnd::Dropped | BranchEnd::Held => {
                    if matches!(o.end, BranchEnd::Dropped) {
                        par.stats.dropped += 1;
                    } else {
                        par.stats.irregular += 1;
                    }
                    par.stats.discarded += outcomes.iter().filter(|x| x.is_some()).count() as u64;
                    self.recycle(orig);
                    return None;
                }
            };
            let onward = match group.start.get(i + 1) {
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
                par.stats.discarded += outcomes.iter().filter(|x| x.is_some()).count() as u64;
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
                par.stats.discarded += outcomes.iter().filter(|x| x.is_some()).count() as u64;
                return None;
            }
            let next = group.start[i + 1];
            self.counts.nf_counters[f as usize].output += 1;
            self.counts.nf_counters[group.nfs[i + 1] as usize].input += 1;
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
