//! Batched naive execution: a batch of chain inputs moves element by element, each element
//! taking the whole batch in one call ([`Element::push_batch`]), instead of each packet
//! running to completion before the next starts.
//!
//! One input at a time stays the semantics; a batch is only another order of the same work,
//! used only where that order provably gives the same packets, counters and state:
//!
//! * every element says how it may be batched ([`Batching`]): `Free` (what it does to a
//!   packet depends on the packet and its configuration alone; its state is counters whose
//!   sums do not depend on order), `Ordered` (it keeps state, such as a NAT's mappings, or
//!   reads the clock) or `Never` (it emits, creates or holds packets, or shares state);
//! * the element graph (links between NFs, and replies of `--reflect` exits, included) is
//!   cut into strongly connected components, in topological order. The **batched part** is
//!   the components whose elements allow it (no `Never`, no `Ordered` element on a cycle,
//!   no reflecting exit) and whose predecessors are all batched: nothing outside it can
//!   ever send a packet into it;
//! * batched elements create no packets, so each input is one packet following one path.
//!   When a batched component is reached, every component before it is done and none after
//!   it can send it anything, so an element outside any cycle holds all the arrivals it
//!   will get from this batch: sorted by input index, they are the arrivals of sequential
//!   execution in sequential order. Elements of a cycle (all `Free`) run from a work list until
//!   their queues are empty, in any order, which does not matter to them. Packets reaching
//!   an exit leave when the batched part is done, all exits' together in input order (an
//!   exit is batched only if every exit element sending to it is); an `Ordered` element
//!   sees [`elements::Context::now`] as it was when its packet's input entered;
//! * a run that leaves an element for one that does not need input order (a `Free`
//!   element, a link, an exit) is handed to it at once rather than queued: such an
//!   element may be given its arrivals in several runs, in any order, so a path of them
//!   is one loop, with no queue, work list or pending bit between its steps (10 routers:
//!   4,091 → 3,508 instructions per packet). Elements that need input order are still
//!   queued, and take their runs sorted by input index;
//! * packets reaching an element outside the batched part wait at the **frontier**; when
//!   the batched part is done, they run packet by packet in input order, each to
//!   completion at the virtual time of its input, exactly as sequential execution would
//!   run the rest of their path (the batched part is upstream of all of it).
//!
//! So a chain of routers runs wholly in batches; a chain of NATs batches up to its first
//! rewriter (whose mappings a reply could reach again) and runs the rest packet by packet;
//! a firewall in front batches its filter. `--mode synth`/`fastpath` and per-flow time
//! measurement run packet by packet.
//!
//! Drops are counted per element and reason as in sequential execution (the summary keeps
//! them by reason name, so the order reasons first occurred in does not show).
//!
//! [`Element::push_batch`]: elements::Element::push_batch

use super::{Executor, Kind, Resume, MAX_HOPS};
use crate::reason::ChainReason;
use elements::{BatchClock, BatchOut, Batching};
use packet::{Packet, Timestamp};

/// How a batchable chain's elements are taken: components in topological order, and a
/// queue per element input port.
pub(super) struct BatchPlan {
    /// Strongly connected components of the element graph, in topological order.
    comps: Vec<Comp>,
    /// First queue of each element (its input port 0); one more entry at the end.
    port_base: Vec<u32>,
    /// Per element input port, the packets waiting for it (always `Some` between steps).
    queues: Vec<Vec<Option<Packet>>>,
    /// Per element, whether its packets must come in input order (`Ordered` elements,
    /// exits).
    ordered: Vec<bool>,
    /// Per element, whether it is in the batched part of the graph; packets reaching an
    /// element outside it wait in `frontier`.
    batched: Vec<bool>,
    /// Per element of the batched part, the index of its component in `comps`.
    comp_of: Vec<u32>,
    /// Per element, whether a run may be handed to it at once instead of queued
    /// ([`Executor::batch_port`]): a batched element that does not need input order
    /// (`Free` elements and links), or an exit (whose packets are put in input order when
    /// the batched part is done).
    at_once: Vec<bool>,
    /// Components that have packets waiting, one bit each by index in `comps`: a batch
    /// visits only those (a chain of ten routers has some 140 components, most of them on
    /// paths a given batch never takes).
    pending: Vec<u64>,
    /// Per element, whether it is on a cycle of the batched part.
    on_cycle: Vec<bool>,
    /// Per component on a cycle, its elements with packets waiting, each once (`ready_el`):
    /// a cycle runs from this work list, most recent first, so a batch moves along its path
    /// without every element of the cycle being looked at (two-way links make a whole
    /// chain of routers one cycle).
    ready: Vec<Vec<u32>>,
    /// Per element, whether it is in its cycle's `ready` list.
    ready_el: Vec<bool>,
    /// Packets that reached the part run packet by packet: (element, input port, packet).
    frontier: Vec<(u32, u32, Packet)>,
    /// Packets that reached a batched exit: (exit, packet). Several exit elements may send
    /// to one exit (two `ToDevice(out)`), so they leave together, in input order, once
    /// the batched part is done.
    exited: Vec<(u32, Packet)>,
    /// Scratch: what an element did with packets that did not leave by output 0.
    side: BatchOut,
    /// Scratch: a queue being worked on.
    spare: Vec<Option<Packet>>,
    /// The virtual time each input of the batch entered at (by input index from the
    /// batch's first).
    nows: Vec<Timestamp>,
}

/// A strongly connected component: its elements and whether they form a cycle.
pub(super) struct Comp {
    pub(super) elements: Vec<u32>,
    pub(super) cyclic: bool,
}

impl BatchPlan {
    /// The plan for `ex`'s chain, or `None` when it must run packet by packet (and why not,
    /// for the log).
    pub(super) fn new(ex: &Executor) -> Result<BatchPlan, &'static str> {
        let n = ex.elements.len();
        // Per element: may it be batched at all, and does it need input order.
        let mut ok = vec![true; n];
        let mut ordered = vec![false; n];
        for (e, el) in ex.elements.iter().enumerate() {
            match ex.info[e].kind {
                Kind::Inner => match el.batching() {
                    Batching::Never => ok[e] = false,
                    Batching::Free => {}
                    Batching::Ordered => ordered[e] = true,
                },
                // Replies of a reflecting exit run at once, depth first.
                Kind::Exit(x) => {
                    ordered[e] = true;
                    ok[e] = ex.exits[x as usize].reflect_to.is_none();
                }
                Kind::Link(_) => {}
            }
        }
        let succ = |e: usize| ex.successors(e);
        let comps = components(n, &succ);
        // The batched part: components whose elements allow it (an element that needs input
        // order not on a cycle) and whose every predecessor is batched too, so nothing the
        // packet-by-packet part does ever reaches it.
        let mut comp_of = vec![0usize; n];
        for (i, c) in comps.iter().enumerate() {
            for &e in &c.elements {
                comp_of[e as usize] = i;
            }
        }
        let mut batched_comp: Vec<bool> = comps
            .iter()
            .map(|c| {
                c.elements
                    .iter()
                    .all(|&e| ok[e as usize] && !(c.cyclic && ordered[e as usize]))
            })
            .collect();
        for (i, c) in comps.iter().enumerate() {
            // Topological order: a component's predecessors are decided before it.
            if !batched_comp[i] {
                for &e in &c.elements {
                    for t in succ(e as usize) {
                        batched_comp[comp_of[t as usize]] = false;
                    }
                }
            }
        }
        let mut batched: Vec<bool> = (0..n).map(|e| batched_comp[comp_of[e]]).collect();
        // An exit is batched only if every exit element sending to it is (its packets must
        // leave in input order, whichever element sends them).
        let exit_of = |e: usize| match ex.info[e].kind {
            Kind::Exit(x) => Some(x),
            _ => None,
        };
        let mut exit_ok = vec![true; ex.exits.len()];
        for (e, &b) in batched.iter().enumerate() {
            if let Some(x) = exit_of(e) {
                exit_ok[x as usize] &= b;
            }
        }
        for (e, b) in batched.iter_mut().enumerate() {
            if let Some(x) = exit_of(e) {
                *b &= exit_ok[x as usize];
            }
        }
        let entries: Vec<u32> = ex
            .entries
            .values()
            .map(|&(nf, el)| ex.base[nf] + el as u32)
            .collect();
        if !entries.iter().any(|&e| batched[e as usize]) {
            return Err(if ok.iter().all(|&o| o) {
                "an element with state on a cycle right at the entry"
            } else {
                "an element that cannot be batched right at the entry"
            });
        }
        let comps: Vec<Comp> = comps
            .into_iter()
            .enumerate()
            .filter(|(i, _)| batched_comp[*i])
            .map(|(_, c)| c)
            .collect();
        let comp_count = comps.len();
        let at_once: Vec<bool> = (0..n)
            .map(|e| batched[e] && (!ordered[e] || matches!(ex.info[e].kind, Kind::Exit(_))))
            .collect();
        let mut comp_of = vec![u32::MAX; n];
        let mut on_cycle = vec![false; n];
        for (i, c) in comps.iter().enumerate() {
            for &e in &c.elements {
                comp_of[e as usize] = i as u32;
                on_cycle[e as usize] = c.cyclic;
            }
        }
        // Input ports in use: entries use port 0, edges name theirs.
        let mut ports = vec![1u32; n];
        for d in ex.edges.iter().filter(|d| d.element != u32::MAX) {
            let p = &mut ports[d.element as usize];
            *p = (*p).max(d.port + 1);
        }
        let mut port_base = Vec::with_capacity(n + 1);
        let mut total = 0u32;
        for p in &ports {
            port_base.push(total);
            total += p;
        }
        port_base.push(total);
        Ok(BatchPlan {
            comps,
            port_base,
            queues: (0..total).map(|_| Vec::new()).collect(),
            ordered,
            batched,
            pending: vec![0; comp_count.div_ceil(64)],
            comp_of,
            at_once,
            on_cycle,
            ready: vec![Vec::new(); comp_count],
            ready_el: vec![false; n],
            frontier: Vec::new(),
            exited: Vec::new(),
            side: BatchOut::default(),
            spare: Vec::new(),
            nows: Vec::new(),
        })
    }

    /// Whether element `e` has packets waiting.
    #[inline]
    fn waiting(&self, e: u32) -> bool {
        let r = self.port_base[e as usize] as usize..self.port_base[e as usize + 1] as usize;
        self.queues[r].iter().any(|q| !q.is_empty())
    }

    /// The queue of element `e`'s input `port` (of the batched part), its component
    /// marked as having packets waiting.
    #[inline]
    fn queue(&mut self, e: u32, port: u32) -> &mut Vec<Option<Packet>> {
        let c = self.comp_of[e as usize] as usize;
        self.pending[c / 64] |= 1 << (c % 64);
        if self.on_cycle[e as usize] && !self.ready_el[e as usize] {
            self.ready_el[e as usize] = true;
            self.ready[c].push(e);
        }
        &mut self.queues[(self.port_base[e as usize] + port) as usize]
    }

    /// Takes the first component at or after `from` that has packets waiting off the
    /// pending set.
    #[inline]
    fn next_pending(&mut self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        let mut bits = *self.pending.get(w)? & (!0u64 << (from % 64));
        loop {
            if bits != 0 {
                let c = w * 64 + bits.trailing_zeros() as usize;
                self.pending[w] &= !(1 << (c % 64));
                return Some(c);
            }
            w += 1;
            bits = *self.pending.get(w)?;
        }
    }

    /// Adds `packets` (in input order) to the queue of element `e`'s input `port`, leaving
    /// `packets` empty.
    #[inline]
    fn enqueue(&mut self, e: u32, port: u32, packets: &mut Vec<Option<Packet>>) {
        if !self.batched[e as usize] {
            self.frontier
                .extend(packets.drain(..).flatten().map(|p| (e, port, p)));
            return;
        }
        let q = self.queue(e, port);
        if q.is_empty() {
            std::mem::swap(q, packets);
        } else {
            q.append(packets);
        }
    }
}

/// The input index of a queued packet (queues hold only `Some` between steps).
#[inline]
fn index_of(slot: &Option<Packet>) -> u64 {
    slot.as_ref().map_or(u64::MAX, |p| p.meta.input_index)
}

/// Tarjan's strongly connected components of the graph on `0..n` with successors `succ`,
/// iteratively (no recursion depth limit), in topological order of the condensation.
pub(super) fn components(n: usize, succ: &impl Fn(usize) -> Vec<u32>) -> Vec<Comp> {
    const NONE: usize = usize::MAX;
    let adj: Vec<Vec<u32>> = (0..n).map(succ).collect();
    let mut index = vec![NONE; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut comps = Vec::new();
    let mut next = 0usize;
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        // (node, next successor to look at)
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if let Some(&w) = adj[v].get(*i) {
                *i += 1;
                let w = w as usize;
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut elements = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    elements.push(w as u32);
                    if w == v {
                        break;
                    }
                }
                let cyclic = elements.len() > 1 || adj[v].contains(&(v as u32));
                elements.reverse();
                comps.push(Comp { elements, cyclic });
            }
        }
    }
    // Tarjan finishes a component after every component it reaches.
    comps.reverse();
    comps
}

impl Executor {
    /// Whether this run may take batches through [`Executor::run_batch`]: the chain allows it
    /// and no mode or measurement needs packets one by one.
    #[inline]
    pub(super) fn batched(&self) -> bool {
        self.batch_plan.is_some()
            && !self.mode_hooks
            && self.fast.is_none()
            && self.synth.program.is_none()
            && !self.entry_hooks
    }

    /// Runs `batch` (entries and packets, in input order) to completion, element by element
    /// (see the module documentation). Only when [`Executor::batched`].
    pub(super) fn run_batch(&mut self, batch: &mut Vec<((usize, usize), Packet)>) {
        let Some(mut plan) = self.batch_plan.take() else {
            for (entry, p) in batch.drain(..) {
                self.push_in(entry, p);
            }
            return;
        };
        let first = self.next_input;
        plan.nows.clear();
        for (entry, mut p) in batch.drain(..) {
            p.meta.input_index = self.next_input;
            self.next_input += 1;
            self.counts.chain_in += 1;
            if p.meta.timestamp > self.cx.now {
                self.cx.now = p.meta.timestamp;
            }
            plan.nows.push(self.cx.now);
            self.counts.nf_counters[entry.0].input += 1;
            let el = self.base[entry.0] + entry.1 as u32;
            self.counts.arrivals[el as usize] += 1;
            if plan.batched[el as usize] {
                plan.queue(el, 0).push(Some(p));
            } else {
                plan.frontier.push((el, 0, p));
            }
        }
        let end = self.next_input;
        let now = self.cx.now;
        // Components in topological order, only those with packets waiting: a step only
        // sends packets to later components (or, on a cycle, to its own).
        let mut from = 0;
        while let Some(c) = plan.next_pending(from) {
            from = c + 1;
            if !plan.comps[c].cyclic {
                let e = plan.comps[c].elements[0];
                if plan.waiting(e) {
                    self.batch_step(&mut plan, e, first);
                }
                continue;
            }
            // A cycle (of `Free` elements only): its elements with packets waiting, in any
            // order, until none is left.
            while let Some(e) = plan.ready[c].pop() {
                plan.ready_el[e as usize] = false;
                if plan.waiting(e) {
                    self.batch_step(&mut plan, e, first);
                }
            }
            // Its own steps marked it again; its queues are empty now.
            plan.pending[c / 64] &= !(1 << (c % 64));
        }
        if !plan.exited.is_empty() {
            let mut exited = std::mem::take(&mut plan.exited);
            if !exited
                .windows(2)
                .all(|w| w[0].1.meta.input_index < w[1].1.meta.input_index)
            {
                exited.sort_by_key(|(_, p)| p.meta.input_index);
            }
            for (x, p) in exited.drain(..) {
                let input = p.meta.input_index;
                self.exit_as(x as usize, input, p);
            }
            plan.exited = exited;
        }
        // The rest of the graph, packet by packet in input order, each to completion at the
        // virtual time of its input.
        if !plan.frontier.is_empty() {
            let mut frontier = std::mem::take(&mut plan.frontier);
            frontier.sort_by_key(|f| f.2.meta.input_index);
            for (el, port, p) in frontier.drain(..) {
                let i = p.meta.input_index;
                let k = i.wrapping_sub(first) as usize;
                self.cx.now = plan.nows.get(k).copied().unwrap_or(now);
                self.next_input = i.wrapping_add(1);
                self.run_from(el, Resume::Port(port), p);
            }
            plan.frontier = frontier;
            self.next_input = end;
        }
        self.cx.now = now;
        self.batch_plan = Some(plan);
    }

    /// Takes the packets waiting for element `el` through it and sends each on (`first`:
    /// the batch's first input index).
    fn batch_step(&mut self, plan: &mut BatchPlan, el: u32, first: u64) {
        let e = el as usize;
        let (p0, p1) = (plan.port_base[e], plan.port_base[e + 1]);
        let busy = (p0..p1)
            .filter(|&q| !plan.queues[q as usize].is_empty())
            .count();
        if plan.ordered[e] && busy > 1 {
            // Several inputs of an element that needs input order: one run at a time of
            // packets from the same input, in input order.
            let mut all: Vec<(u32, Option<Packet>)> = Vec::new();
            for q in p0..p1 {
                all.extend(plan.queues[q as usize].drain(..).map(|slot| (q - p0, slot)));
            }
            all.sort_by_key(|(_, slot)| index_of(slot));
            let mut i = 0;
            while i < all.len() {
                let port = all[i].0;
                let mut run = std::mem::take(&mut plan.spare);
                while i < all.len() && all[i].0 == port {
                    run.push(all[i].1.take());
                    i += 1;
                }
                self.batch_port(plan, el, port, run, first);
            }
            return;
        }
        for q in p0..p1 {
            if plan.queues[q as usize].is_empty() {
                continue;
            }
            let mut run = std::mem::take(&mut plan.queues[q as usize]);
            if plan.ordered[e] && !run.windows(2).all(|w| index_of(&w[0]) < index_of(&w[1])) {
                run.sort_by_key(index_of);
            }
            self.batch_port(plan, el, q - p0, run, first);
        }
    }

    /// Takes `run` (packets arriving on input `port` of element `el`, in the order the
    /// element must see them) through the element and sends each on.
    ///
    /// What leaves by the main output goes on at once, in the same call, when the element
    /// it reaches takes runs at once (`BatchPlan::at_once`: it does not need input order,
    /// so being given this run now rather than with whatever else reaches it later in the
    /// batch changes nothing): a path of such elements is one loop, with no queue, work
    /// list or pending bit between its steps. Otherwise the run is queued.
    fn batch_port(
        &mut self,
        plan: &mut BatchPlan,
        mut el: u32,
        mut port: u32,
        mut run: Vec<Option<Packet>>,
        first: u64,
    ) {
        loop {
            let e = el as usize;
            let info = self.info[e];
            // Where `run` goes next in this call, if anywhere.
            let next = match info.kind {
                Kind::Inner => {
                    let clock = BatchClock {
                        first,
                        nows: &plan.nows,
                    };
                    plan.side.main = 0;
                    self.elements[e].push_batch(
                        port,
                        &mut run,
                        &clock,
                        &mut plan.side,
                        &mut self.cx,
                    );
                    // What left by the main output is still in `run`, in order.
                    let mut next = None;
                    if !run.is_empty() {
                        let main = plan.side.main;
                        let k = info.edge_base as usize + main as usize;
                        match self
                            .edges
                            .get(k)
                            .filter(|d| main < info.outputs && d.element != u32::MAX)
                        {
                            Some(&d) => {
                                self.counts.out_count[k] += run.len() as u64;
                                if plan.at_once[d.element as usize] {
                                    next = Some((d.element, d.port));
                                } else {
                                    plan.enqueue(d.element, d.port, &mut run);
                                }
                            }
                            None => {
                                for p in run.drain(..).flatten() {
                                    self.count_drop(el, ChainReason::UnconnectedOutput.into());
                                    self.recycle(p);
                                }
                            }
                        }
                    }
                    self.route_side(plan, el, info.edge_base, info.outputs);
                    next
                }
                Kind::Link(target) => {
                    let mut looped = false;
                    for p in run.iter_mut().flatten() {
                        looped |= p.meta.hops >= MAX_HOPS;
                        p.meta.hops = p.meta.hops.saturating_add(1);
                    }
                    if looped {
                        for slot in run.iter_mut() {
                            if slot.as_ref().is_some_and(|p| p.meta.hops > MAX_HOPS) {
                                if let Some(p) = slot.take() {
                                    self.count_drop(el, ChainReason::Loop.into());
                                    self.recycle(p);
                                }
                            }
                        }
                        run.retain(Option::is_some);
                    }
                    let n = run.len() as u64;
                    let t = target as usize;
                    self.counts.nf_counters[info.nf as usize].output += n;
                    self.counts.nf_counters[self.nf_of[t] as usize].input += n;
                    self.counts.arrivals[t] += n;
                    if plan.at_once[t] {
                        Some((target, 0))
                    } else {
                        plan.enqueue(target, 0, &mut run);
                        None
                    }
                }
                Kind::Exit(x) => {
                    self.counts.nf_counters[info.nf as usize].output += run.len() as u64;
                    plan.exited.extend(run.drain(..).flatten().map(|p| (x, p)));
                    None
                }
            };
            match next {
                Some((t, p)) if !run.is_empty() => (el, port) = (t, p),
                _ => break,
            }
        }
        // Keep the allocation for the next run.
        run.clear();
        if plan.spare.capacity() < run.capacity() {
            plan.spare = run;
        }
    }

    /// Sends on what element `el` did not send by output 0 (`plan.side`): each packet to
    /// the queue its output leads to (or dropped as unconnected), each drop counted.
    fn route_side(&mut self, plan: &mut BatchPlan, el: u32, edge_base: u32, outputs: u32) {
        if !plan.side.dropped.is_empty() {
            let mut dropped = std::mem::take(&mut plan.side.dropped);
            for (q, reason) in dropped.drain(..) {
                self.count_drop(el, reason);
                self.recycle(q);
            }
            plan.side.dropped = dropped;
        }
        if plan.side.sent.is_empty() {
            return;
        }
        let mut sent = std::mem::take(&mut plan.side.sent);
        for (o, q) in sent.drain(..) {
            let k = edge_base as usize + o as usize;
            match self
                .edges
                .get(k)
                .filter(|d| o < outputs && d.element != u32::MAX)
            {
                Some(&d) if plan.batched[d.element as usize] => {
                    self.counts.out_count[k] += 1;
                    plan.queue(d.element, d.port).push(Some(q));
                }
                Some(&d) => {
                    self.counts.out_count[k] += 1;
                    plan.frontier.push((d.element, d.port, q));
                }
                None => {
                    self.count_drop(el, ChainReason::UnconnectedOutput.into());
                    self.recycle(q);
                }
            }
        }
        plan.side.sent = sent;
    }
}

#[cfg(test)]
mod tests {
    use super::components;

    fn comps(n: usize, edges: &[(u32, u32)]) -> Vec<(Vec<u32>, bool)> {
        components(n, &|v: usize| {
            edges
                .iter()
                .filter(|e| e.0 as usize == v)
                .map(|e| e.1)
                .collect::<Vec<u32>>()
        })
        .into_iter()
        .map(|c| (c.elements, c.cyclic))
        .collect()
    }

    #[test]
    fn components_come_in_topological_order_with_their_cycles() {
        // 0 -> 1 -> 2 -> 1, 2 -> 3; 4 alone; 5 -> 5.
        let c = comps(6, &[(0, 1), (1, 2), (2, 1), (2, 3), (5, 5)]);
        let pos = |e: u32| c.iter().position(|(v, _)| v.contains(&e)).unwrap();
        assert!(pos(0) < pos(1) && pos(1) < pos(3));
        assert_eq!(pos(1), pos(2));
        let cyc = |e: u32| c[pos(e)].1;
        assert!(!cyc(0) && cyc(1) && !cyc(3) && !cyc(4) && cyc(5));
        assert_eq!(c.iter().map(|(v, _)| v.len()).sum::<usize>(), 6);
    }

    #[test]
    fn a_long_path_needs_no_recursion() {
        let n = 200_000;
        let edges: Vec<(u32, u32)> = (0..n as u32 - 1).map(|i| (i, i + 1)).collect();
        let adj = |v: usize| -> Vec<u32> {
            edges
                .get(v)
                .filter(|e| e.0 as usize == v)
                .map(|e| vec![e.1])
                .unwrap_or_default()
        };
        let c = components(n, &adj);
        assert_eq!(c.len(), n);
        assert_eq!(c[0].elements, vec![0]);
        assert_eq!(c[n - 1].elements, vec![n as u32 - 1]);
    }
}
