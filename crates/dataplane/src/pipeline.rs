//! A placement run as a pipeline (`fusebox run --plan`): each stage of
//! [`chain::layout::Placement`] on a worker thread of its own holding only its NFs, packets
//! crossing to another stage handed over in batches through queues, the whole pipeline
//! copied `replicas` times with flows spread over the copies by the [`Dispatcher`].
//!
//! * **A stage is an executor over the sub-chain of its NFs.** Links between two of its NFs
//!   stay links; a link to an NF of another stage becomes an exit whose packets are handed
//!   over ([`chain::ExitSink::Handoff`]: whole packets, annotations kept) and taken in by
//!   the other stage at the link's `FromDevice` ([`chain::Executor::hand_in`]), counted as
//!   the link crossing one executor would count.
//! * **Waves.** The reader numbers inputs as for `--cores N` and sends each replica a batch
//!   of them as one wave. Stage 0 gets the wave, runs the items addressed to it in input
//!   order, adds what it hands over, and passes the wave on; each later stage does the same
//!   with its items: the inputs entering there and what earlier stages handed it, sorted by
//!   (input index, lineage: the order one executor would have run them, depth first). So
//!   every NF sees its packets in the order one executor gives them, and each exit, fed by
//!   one stage, gets its packets in canonical order. A packet handed *back* to an earlier
//!   stage waits in the wave until the last stage sends it round to stage 0 again (another
//!   sweep); [`chain::layout::check_pipeline`] admits such placements only when nothing the
//!   packet can reach from there keeps state or makes packets, so running it after later
//!   inputs changes nothing. The reader writes each batch's outputs once every replica's
//!   wave is back, per exit by input index.
//! * **Bounded.** At most [`DEPTH`] waves per replica are in flight; stages pass waves on
//!   through queues of that size, so a slow stage holds the earlier ones back. A wave
//!   carries at least [`WAVE`] inputs (a hand-over wakes the next stage's thread).
//! * **Accounting.** Per replica the stages' counters are stitched into one summary of the
//!   whole chain (NFs in chain order, the hand-over exits left out, the chain's input
//!   counted where each input entered), then summed over replicas as for `--cores N`.

use crate::dispatch::Dispatcher;
use crate::run::{Feed, Input, Next, Outcome};
use crate::worker::{panic_text, pin, share, Error, Setup, WorkerOutcome};
use chain::exec::Tagged;
use chain::layout::{check_pipeline, Placement};
use chain::summary::{ExitSummary, Summary};
use chain::{ChainFile, Endpoint, Executor, ExitSink};
use packet::{Packet, Precision, Timestamp};
use ports::pcap::Record;
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use synth::Mode;

/// Waves a replica may have in flight.
pub const DEPTH: usize = 4;

/// Fewest inputs a wave carries (more when `--batch` is larger): handing a wave to the
/// next stage wakes its thread, a cost paid once per wave.
pub const WAVE: usize = 256;

/// What a stage's exit is.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// An exit of the chain (index in the whole chain's exit order).
    Exit(usize),
    /// A link to another stage: that stage, and the entry (its NF index, element index).
    Cross(usize, (usize, usize)),
}

/// One stage as planned: its sub-chain, and where its NFs sit in the whole chain.
#[derive(Debug, Clone)]
struct StagePlan {
    chain: ChainFile,
    /// The whole chain's NF index of each of the stage's NFs, in order.
    nfs: Vec<usize>,
    /// Names of the exits that are links to other stages, with the peer endpoint.
    crossing: HashMap<String, Endpoint>,
    processor: usize,
}

/// Everything the stage threads share.
struct Shared {
    setup: Setup,
    stages: Vec<StagePlan>,
    /// Stage of each NF of the whole chain.
    stage_of: Vec<usize>,
    /// The whole chain's entries: endpoint → (NF index, element index).
    entries: BTreeMap<Endpoint, (usize, usize)>,
    /// The whole chain's exit names, in order.
    exits: Vec<String>,
    replicas: usize,
    keep: bool,
}

impl Shared {
    /// The stage and stage-local entry of the whole chain's entry `(nf, el)`.
    fn local(&self, (nf, el): (usize, usize)) -> (usize, (usize, usize)) {
        let s = self.stage_of[nf];
        let pos = self.stages[s]
            .nfs
            .iter()
            .position(|&n| n == nf)
            .unwrap_or(0);
        (s, (pos, el))
    }
}

/// What an item of a wave carries.
enum What {
    /// A chain input entering at this stage.
    Input(Timestamp, Precision, Vec<u8>),
    /// A packet another stage handed over.
    Packet(Packet),
}

/// Work for one stage: a chain input or a handed-over packet.
struct Item {
    stage: usize,
    /// The chain input it belongs to.
    index: u64,
    /// Its place among the input's packets at this stage: the hand-over positions from the
    /// input down (empty for the input itself).
    key: Vec<u32>,
    /// Virtual time when its input entered the chain.
    now: Timestamp,
    /// Stage-local entry (NF index, element index).
    entry: (usize, usize),
    what: What,
}

/// A batch of one replica on its way through the stages.
struct Wave {
    batch: u64,
    items: Vec<Item>,
    /// What the chain's exits sent (whole-chain exit index).
    outputs: Vec<(usize, Tagged)>,
}

/// Into a stage.
enum In {
    Wave(Box<Wave>),
    /// Replay the replica's share this many times (stage 0 of an in-memory replay).
    Pass(u64),
    End,
}

/// Back to the reader.
enum Back {
    Ready(usize, usize, Result<(), String>),
    Wave(usize, Box<Wave>),
    /// A replay pass's waves, all sent into stage 0 of a replica: (replica, (waves,
    /// packets)).
    Fed(usize, (u64, u64)),
    Done(usize, usize, Box<WorkerOutcome>),
}

/// The stage threads of every replica, running a placement.
pub struct Pipeline {
    shared: Arc<Shared>,
    /// Into stage 0 of each replica.
    heads: Vec<Sender<In>>,
    back: Receiver<Back>,
    handles: Vec<JoinHandle<()>>,
    /// Waves sent so far (batch numbers).
    batches: u64,
}

/// The sub-chain of NFs `nfs` (whole-chain indices, in order) of `chain`, stage `s`.
fn sub_chain(chain: &ChainFile, nfs: &[usize], stage_of: &[usize], s: usize) -> StagePlan {
    let inside = |e: &Endpoint| {
        chain
            .nfs
            .iter()
            .position(|n| n.name == e.nf)
            .is_some_and(|i| stage_of[i] == s)
    };
    let mut crossing = HashMap::new();
    let mut links = Vec::new();
    for (a, b, pos) in &chain.links {
        match (inside(a), inside(b)) {
            (true, true) => links.push((a.clone(), b.clone(), pos.clone())),
            (true, false) => {
                crossing.insert(a.to_string(), b.clone());
            }
            (false, true) => {
                crossing.insert(b.to_string(), a.clone());
            }
            _ => {}
        }
    }
    let names: Vec<&str> = nfs.iter().map(|&i| chain.nfs[i].name.as_str()).collect();
    StagePlan {
        chain: ChainFile {
            path: chain.path.clone(),
            nfs: nfs.iter().map(|&i| chain.nfs[i].clone()).collect(),
            links,
            entries: chain
                .entries
                .iter()
                .filter(|(e, _)| names.contains(&e.nf.as_str()))
                .cloned()
                .collect(),
            devices: Vec::new(),
            nsh: false,
        },
        nfs: nfs.to_vec(),
        crossing,
        processor: 0,
    }
}

/// Why `placement` cannot run on `probe` (the chain of `setup` built once) with `setup`'s
/// options, if it cannot: [`check_pipeline`], and the modes and options that need one
/// stage (synth, fastpath and parallel hook the entries a hand-over bypasses; NSH headers
/// and `--reflect` replies are kept by the stage that made them). Merged runs on any plan:
/// each stage's executor merges its own NFs (what is known never crosses a cut).
pub fn check(setup: &Setup, probe: &Executor, placement: &Placement) -> Result<(), String> {
    if placement.stages.len() > 1 {
        if !matches!(setup.mode, Mode::Naive | Mode::Merged) {
            return Err(format!(
                "a plan of {} stages runs naive (or merged) NFs; --mode {} needs one stage (replicas only)",
                placement.stages.len(),
                setup.mode.name()
            ));
        }
        if setup.chain.nsh {
            return Err("an NSH-aware run (--nsh) needs a plan of one stage".into());
        }
        if !setup.options.reflect.is_empty() {
            return Err("--reflect needs a plan of one stage".into());
        }
    }
    check_pipeline(probe, placement)
}

impl Pipeline {
    /// Starts the stage threads of `placement` (refused unless [`check`] passes) for
    /// `setup`'s chain, `probe` being that chain built once (for its entries and exits).
    /// With `keep`, exits keep their packets for [`Pipeline::run`]'s `out`; otherwise they
    /// only count. `shares`: for an in-memory replay ([`Pipeline::pass`]), each replica's
    /// inputs (empty for a streamed run).
    pub fn start(
        setup: &Setup,
        probe: &Executor,
        placement: &Placement,
        keep: bool,
        shares: Vec<crate::Share>,
    ) -> Result<Pipeline, Error> {
        check(setup, probe, placement).map_err(Error::Plan)?;
        let chain = &setup.chain;
        let mut stage_of = vec![0; chain.nfs.len()];
        for (s, st) in placement.stages.iter().enumerate() {
            for &n in &st.nfs {
                if let Some(x) = stage_of.get_mut(n) {
                    *x = s;
                }
            }
        }
        let stages: Vec<StagePlan> = placement
            .stages
            .iter()
            .enumerate()
            .map(|(s, st)| {
                let mut nfs = st.nfs.clone();
                nfs.sort_unstable();
                StagePlan {
                    processor: st.processor,
                    ..sub_chain(chain, &nfs, &stage_of, s)
                }
            })
            .collect();
        let replicas = placement.replicas.max(1);
        let shared = Arc::new(Shared {
            setup: setup.clone(),
            stages,
            stage_of,
            entries: probe
                .entry_elements()
                .into_iter()
                .filter_map(|(e, _)| probe.entry(&e).map(|at| (e, at)))
                .collect(),
            exits: probe.exit_names(),
            replicas,
            keep,
        });
        let n = shared.stages.len();
        let procs = shared.stages.iter().map(|s| s.processor).max().unwrap_or(0) + 1;
        let (btx, back) = channel::<Back>();
        let mut heads = Vec::new();
        let mut handles = Vec::new();
        let mut shares = shares.into_iter();
        for r in 0..replicas {
            let (htx, hrx) = channel::<In>();
            heads.push(htx.clone());
            let mut rx: Vec<Receiver<In>> = vec![hrx];
            let mut tx: Vec<Option<SyncSender<In>>> = vec![None];
            for _ in 1..n {
                let (t, x) = sync_channel::<In>(DEPTH + 1);
                tx.push(Some(t));
                rx.push(x);
            }
            let mut share = shares.next().unwrap_or_default();
            for (s, rx) in rx.into_iter().enumerate() {
                let ctx = StageCtx {
                    sh: Arc::clone(&shared),
                    r,
                    s,
                    core: shared.stages[s].processor + r * procs,
                    rx,
                    to: tx.get_mut(s + 1).and_then(Option::take),
                    wrap: htx.clone(),
                    back: btx.clone(),
                    share: if s == 0 {
                        std::mem::take(&mut share)
                    } else {
                        Vec::new()
                    },
                };
                handles.push(std::thread::spawn(move || stage_thread(ctx)));
            }
        }
        drop(btx);
        let mut p = Pipeline {
            shared,
            heads,
            back,
            handles,
            batches: 0,
        };
        let mut failed = None;
        for _ in 0..replicas * n {
            match p.recv() {
                Ok(Back::Ready(_, _, Ok(()))) => {}
                Ok(Back::Ready(r, s, Err(message))) => {
                    failed.get_or_insert(Error::Worker {
                        worker: r * n + s,
                        message: format!("stage {s}: {message}"),
                    });
                }
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(p),
        }
    }

    /// How many replicas and stages.
    pub fn shape(&self) -> (usize, usize) {
        (self.shared.replicas, self.shared.stages.len())
    }

    /// The next message from the stages; a stage that stopped (panicked) is an error.
    fn recv(&mut self) -> Result<Back, Error> {
        loop {
            match self.back.recv_timeout(Duration::from_millis(100)) {
                Ok(m) => return Ok(m),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if self.handles.iter().any(|h| h.is_finished()) {
                        return Err(self.failure());
                    }
                }
                Err(_) => return Err(self.failure()),
            }
        }
    }

    /// The error of a stage that stopped: its panic's message once every stage is joined.
    fn failure(&mut self) -> Error {
        self.heads.clear();
        let n = self.shared.stages.len();
        let mut out = Error::Worker {
            worker: 0,
            message: "stopped".into(),
        };
        for (i, h) in std::mem::take(&mut self.handles).into_iter().enumerate() {
            if let Err(p) = h.join() {
                if matches!(&out, Error::Worker { message, .. } if message == "stopped") {
                    out = Error::Worker {
                        worker: i,
                        message: format!("replica {} stage {}: {}", i / n, i % n, panic_text(p)),
                    };
                }
            }
        }
        out
    }

    /// Runs the packets of `feed` through the pipeline: numbered in feed order, each replica
    /// given its packets (by `dispatcher`, over [`Pipeline::shape`]'s replicas) a batch at a
    /// time. With `keep` (see [`Pipeline::start`]), every packet an exit sends is handed to
    /// `out` (exit index in [`Executor::exit_names`] order, timestamp, resolution, bytes) in
    /// canonical order. `progress` gets the packets read so far after every batch. Then
    /// the stages stop and their counters are stitched per replica.
    pub fn run(
        mut self,
        dispatcher: &Dispatcher,
        feed: &mut dyn Feed,
        mut out: impl FnMut(usize, Timestamp, Precision, Vec<u8>),
        mut progress: impl FnMut(u64),
    ) -> Result<Outcome, Error> {
        let batch = self.shared.setup.options.batch.max(WAVE);
        let replicas = self.shared.replicas;
        let mut index = 0u64;
        let mut now = Timestamp(0);
        let mut in_flight = 0usize;
        let mut pending: BTreeMap<u64, (usize, BTreeMap<usize, Tagged>)> = BTreeMap::new();
        let mut next_out = self.batches;
        let mut end = false;
        while !end {
            let mut parts: Vec<Vec<Item>> = (0..replicas).map(|_| Vec::new()).collect();
            let mut got = 0;
            let mut idle = false;
            while got < batch {
                match feed.next_input() {
                    Next::Input(Input {
                        entry,
                        timestamp,
                        precision,
                        data,
                    }) => {
                        now = now.max(timestamp);
                        let (stage, entry) = self.shared.local(entry);
                        let r = dispatcher.worker(&data) % replicas;
                        parts[r].push(Item {
                            stage,
                            index,
                            key: Vec::new(),
                            now,
                            entry,
                            what: What::Input(timestamp, precision, data),
                        });
                        index += 1;
                        got += 1;
                    }
                    Next::Idle => {
                        idle = true;
                        break;
                    }
                    Next::End => {
                        end = true;
                        break;
                    }
                }
            }
            if got > 0 {
                let b = self.batches;
                self.batches += 1;
                for (r, items) in parts.into_iter().enumerate() {
                    let w = Box::new(Wave {
                        batch: b,
                        items,
                        outputs: Vec::new(),
                    });
                    if self.heads[r].send(In::Wave(w)).is_err() {
                        return Err(self.failure());
                    }
                }
                in_flight += 1;
                progress(index);
            }
            while in_flight > 0 && (in_flight > DEPTH || idle || end) {
                self.collect(&mut pending, &mut next_out, &mut out)?;
                in_flight -= 1;
            }
        }
        self.finish()
    }

    /// Waits for batch `next_out` to be back from every replica and hands its outputs on in
    /// canonical order.
    fn collect(
        &mut self,
        pending: &mut BTreeMap<u64, (usize, BTreeMap<usize, Tagged>)>,
        next_out: &mut u64,
        out: &mut impl FnMut(usize, Timestamp, Precision, Vec<u8>),
    ) -> Result<(), Error> {
        let replicas = self.shared.replicas;
        while pending.get(next_out).is_none_or(|(n, _)| *n < replicas) {
            match self.recv()? {
                Back::Wave(_, w) => {
                    let slot = pending.entry(w.batch).or_default();
                    slot.0 += 1;
                    for (x, tagged) in w.outputs {
                        slot.1.entry(x).or_default().extend(tagged);
                    }
                }
                _ => return Err(self.failure()),
            }
        }
        if let Some((_, per_exit)) = pending.remove(next_out) {
            for (x, mut v) in per_exit {
                // Stable: one input's packets at one exit come from one stage, in its order.
                v.sort_by_key(|t| t.0);
                for (_, ts, pr, d) in v {
                    out(x, ts, pr, d);
                }
            }
        }
        *next_out += 1;
        Ok(())
    }

    /// Every replica replays its share `passes` times (stage 0 feeding its waves as fast as
    /// the stages take them). Returns the packets replayed and the time until the last
    /// wave of every replica was through.
    pub fn pass(&mut self, passes: u64) -> Result<(u64, Duration), Error> {
        let t0 = Instant::now();
        for r in 0..self.heads.len() {
            if self.heads[r].send(In::Pass(passes)).is_err() {
                return Err(self.failure());
            }
        }
        let replicas = self.shared.replicas;
        let mut fed: Vec<Option<u64>> = vec![None; replicas];
        let mut back = vec![0u64; replicas];
        let mut packets = 0u64;
        while (0..replicas).any(|r| fed[r] != Some(back[r])) {
            match self.recv()? {
                Back::Wave(r, _) => back[r] += 1,
                Back::Fed(r, (waves, n)) => {
                    fed[r] = Some(waves);
                    packets += n;
                }
                _ => return Err(self.failure()),
            }
        }
        Ok((packets, t0.elapsed()))
    }

    /// Stops the stages and returns what each replica did (its stages' counters stitched
    /// into one summary of the chain, their state).
    pub fn finish(mut self) -> Result<Outcome, Error> {
        for r in 0..self.heads.len() {
            if self.heads[r].send(In::End).is_err() {
                return Err(self.failure());
            }
        }
        let (replicas, n) = self.shape();
        let mut parts: Vec<Vec<Option<WorkerOutcome>>> = vec![vec![None; n]; replicas];
        for _ in 0..replicas * n {
            match self.recv()? {
                Back::Done(r, s, o) => parts[r][s] = Some(*o),
                _ => return Err(self.failure()),
            }
        }
        let workers = parts
            .into_iter()
            .map(|stages| stitch(&self.shared, stages.into_iter().flatten().collect()))
            .collect();
        for h in std::mem::take(&mut self.handles) {
            let _ = h.join();
        }
        Ok(Outcome { workers })
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        for h in &self.heads {
            let _ = h.send(In::End);
        }
        self.heads.clear();
        // Stages stop at `End` or when their queues close; draining lets them finish.
        while self.back.recv_timeout(Duration::from_millis(10)).is_ok() {}
        for h in std::mem::take(&mut self.handles) {
            let _ = h.join();
        }
    }
}

/// One replica's counters and state from its stages' (in stage order): the NFs in chain
/// order, the chain's exits only (hand-overs left out), totals recomputed.
fn stitch(sh: &Shared, stages: Vec<WorkerOutcome>) -> WorkerOutcome {
    let mut nfs = vec![None; sh.setup.chain.nfs.len()];
    let mut exits: BTreeMap<String, ExitSummary> = BTreeMap::new();
    let mut totals = chain::summary::Totals::default();
    let mut state = BTreeMap::new();
    for (s, o) in stages.into_iter().enumerate() {
        let t = &o.summary.totals;
        totals.input += t.input;
        totals.created += t.created;
        totals.dropped += t.dropped;
        totals.held += t.held;
        for (k, v) in &t.drops {
            *totals.drops.entry(k.clone()).or_default() += v;
        }
        for (k, nf) in o.summary.nfs.into_iter().enumerate() {
            if let Some(&g) = sh.stages[s].nfs.get(k) {
                nfs[g] = Some(nf);
            }
        }
        for x in o.summary.exits {
            if !sh.stages[s].crossing.contains_key(&x.name) {
                exits.insert(x.name.clone(), x);
            }
        }
        state.extend(o.state);
    }
    let exits: Vec<ExitSummary> = sh
        .exits
        .iter()
        .map(|name| {
            exits.remove(name).unwrap_or(ExitSummary {
                name: name.clone(),
                packets: 0,
                bytes: 0,
            })
        })
        .collect();
    totals.output = exits.iter().map(|x| x.packets).sum();
    totals.balanced = totals.input + totals.created == totals.output + totals.dropped + totals.held;
    WorkerOutcome {
        summary: Summary {
            nfs: nfs.into_iter().flatten().collect(),
            exits,
            ports: Vec::new(),
            totals,
        },
        state,
        fast: None,
        flows: (0, 0),
        flow_evictions: 0,
        classes: None,
        switch_tags: (0, 0),
    }
}

/// What a stage thread holds.
struct StageCtx {
    sh: Arc<Shared>,
    r: usize,
    s: usize,
    core: usize,
    rx: Receiver<In>,
    /// The next stage (`None` for the last).
    to: Option<SyncSender<In>>,
    /// Stage 0 of this replica (waves going round again).
    wrap: Sender<In>,
    back: Sender<Back>,
    /// Stage 0 of an in-memory replay: this replica's inputs.
    share: crate::Share,
}

/// A stage's executor and where its exits lead.
struct Stage {
    ex: Executor,
    s: usize,
    routes: Vec<Route>,
    keep: bool,
}

impl Stage {
    /// Moves what the executor handed over while running item (`index`, `key`) into
    /// `items`, each for the stage and entry its link leads to.
    fn handed(&mut self, index: u64, key: &[u32], now: Timestamp, items: &mut Vec<Item>) {
        for (j, h) in self.ex.take_handoffs().enumerate() {
            if let Some(&Route::Cross(stage, entry)) = self.routes.get(h.exit) {
                let mut k = Vec::with_capacity(key.len() + 1);
                k.extend_from_slice(key);
                k.push(j as u32);
                items.push(Item {
                    stage,
                    index: h.input.max(index),
                    key: k,
                    now,
                    entry,
                    what: What::Packet(h.packet),
                });
            }
        }
    }

    /// Runs the wave's items addressed to this stage, in (input, lineage) order.
    fn process(&mut self, w: &mut Wave) {
        let (mut mine, mut rest): (Vec<Item>, Vec<Item>) = std::mem::take(&mut w.items)
            .into_iter()
            .partition(|i| i.stage == self.s);
        mine.sort_by(|a, b| (a.index, &a.key).cmp(&(b.index, &b.key)));
        for it in mine {
            match it.what {
                What::Input(ts, pr, data) => {
                    self.ex.advance_time(it.now);
                    self.ex.push_input(it.entry, it.index, &data, ts, pr);
                }
                What::Packet(p) => self.ex.hand_in(it.entry, it.index, it.now, p),
            }
            self.handed(it.index, &it.key, it.now, &mut rest);
        }
        w.items = rest;
        self.outputs(w);
    }

    /// Moves what the chain's exits kept into the wave.
    fn outputs(&mut self, w: &mut Wave) {
        if self.keep {
            for (x, t) in self.ex.take_tagged() {
                if let Some(&Route::Exit(g)) = self.routes.get(x) {
                    w.outputs.push((g, t));
                }
            }
        }
    }
}

impl StageCtx {
    /// Sends the wave on: to the next stage while it has work for a later one, round to
    /// stage 0 while it has work for this one or an earlier one, else back to the reader.
    fn forward(&self, w: Box<Wave>) -> bool {
        let later = w.items.iter().any(|i| i.stage > self.s);
        match (&self.to, later) {
            (Some(to), true) => to.send(In::Wave(w)).is_ok(),
            _ if !w.items.is_empty() => self.wrap.send(In::Wave(w)).is_ok(),
            _ => self.back.send(Back::Wave(self.r, w)).is_ok(),
        }
    }

    /// Builds the stage's executor and its routes.
    fn build(&self) -> Result<Stage, String> {
        let sh = &self.sh;
        let plan = &sh.stages[self.s];
        let mut options = sh.setup.options.clone();
        let names: Vec<&str> = plan.chain.nfs.iter().map(|n| n.name.as_str()).collect();
        options.reflect.retain(|e| names.contains(&e.nf.as_str()));
        let keep = sh.keep;
        let mut ex = Executor::new(&plan.chain, &options, |name, _| {
            Ok(if plan.crossing.contains_key(name) {
                ExitSink::Handoff
            } else if keep {
                ExitSink::Tagged(Vec::new())
            } else {
                ExitSink::Count
            })
        })
        .map_err(|e| e.to_string())?;
        if sh.replicas > 1 {
            share(&mut ex, self.r, sh.replicas).map_err(|e| e.to_string())?;
        }
        sh.setup.mode.install(&mut ex, sh.setup.fast.clone());
        let mut routes = Vec::new();
        for name in ex.exit_names() {
            routes.push(match plan.crossing.get(&name) {
                Some(peer) => {
                    let at = sh
                        .entries
                        .get(peer)
                        .ok_or_else(|| format!("{name}: {peer} has no FromDevice"))?;
                    let (t, entry) = sh.local(*at);
                    Route::Cross(t, entry)
                }
                None => Route::Exit(
                    sh.exits
                        .iter()
                        .position(|x| *x == name)
                        .ok_or_else(|| format!("exit {name} is not the chain's"))?,
                ),
            });
        }
        Ok(Stage {
            ex,
            s: self.s,
            routes,
            keep,
        })
    }

    /// Stage 0's in-memory replay: the share `passes` times, a wave per batch, timestamps
    /// moved on by the trace's span every pass (as [`Executor::replay`]). Waves coming
    /// round again are run between batches. Returns (waves sent, packets).
    fn replay(
        &self,
        st: &mut Stage,
        passes: u64,
        clock: &mut (u64, Timestamp, u64, u64),
    ) -> Option<(u64, u64)> {
        let sh = &self.sh;
        let mut order: Vec<(Timestamp, usize, usize)> = Vec::new();
        for (i, (_, recs)) in self.share.iter().enumerate() {
            order.extend(recs.iter().enumerate().map(|(j, r)| (r.timestamp, i, j)));
        }
        order.sort();
        let (Some(first), Some(last)) = (order.first(), order.last()) else {
            return Some((0, 0));
        };
        let span = last.0 .0 - first.0 .0;
        let gap = order
            .windows(2)
            .map(|w| w[1].0 .0 - w[0].0 .0)
            .filter(|&g| g > 0)
            .min()
            .unwrap_or(1_000);
        let base = clock.0.saturating_sub(first.0 .0);
        let batch = sh.setup.options.batch.max(WAVE);
        let (mut waves, mut packets) = (0u64, 0u64);
        for pass in 0..passes {
            let off = base.saturating_add((span + gap).saturating_mul(pass));
            for chunk in order.chunks(batch) {
                // Waves that came round again first.
                while let Ok(m) = self.rx.try_recv() {
                    match m {
                        In::Wave(mut w) => {
                            st.process(&mut w);
                            if !self.forward(w) {
                                return None;
                            }
                        }
                        _ => return None,
                    }
                }
                let mut w = Box::new(Wave {
                    batch: clock.3,
                    items: Vec::new(),
                    outputs: Vec::new(),
                });
                clock.3 += 1;
                for &(ts, i, j) in chunk {
                    let (entry, recs) = &self.share[i];
                    let rec: &Record = &recs[j];
                    let ts = ts.add_nanos(off);
                    clock.1 = clock.1.max(ts);
                    let index = clock.2;
                    clock.2 += 1;
                    let (stage, at) = sh.local(*entry);
                    if stage == 0 {
                        st.ex.advance_time(clock.1);
                        st.ex.push_input(at, index, &rec.data, ts, rec.precision);
                        st.handed(index, &[], clock.1, &mut w.items);
                    } else {
                        w.items.push(Item {
                            stage,
                            index,
                            key: Vec::new(),
                            now: clock.1,
                            entry: at,
                            what: What::Input(ts, rec.precision, rec.data.clone()),
                        });
                    }
                }
                packets += chunk.len() as u64;
                st.outputs(&mut w);
                waves += 1;
                if !self.forward(w) {
                    return None;
                }
            }
        }
        clock.0 = (last.0 .0)
            .saturating_add(base)
            .saturating_add((span + gap).saturating_mul(passes.saturating_sub(1)))
            .saturating_add(gap);
        Some((waves, packets))
    }
}

fn stage_thread(ctx: StageCtx) {
    pin(ctx.core);
    let mut st = match ctx.build() {
        Ok(st) => st,
        Err(e) => {
            let _ = ctx.back.send(Back::Ready(ctx.r, ctx.s, Err(e)));
            return;
        }
    };
    if ctx.back.send(Back::Ready(ctx.r, ctx.s, Ok(()))).is_err() {
        return;
    }
    // Replay: (virtual time reached, latest timestamp, next input index, next wave).
    let mut clock = (0u64, Timestamp(0), 0u64, u64::MAX / 2);
    while let Ok(m) = ctx.rx.recv() {
        match m {
            In::Wave(mut w) => {
                st.process(&mut w);
                if !ctx.forward(w) {
                    return;
                }
            }
            In::Pass(passes) => match ctx.replay(&mut st, passes, &mut clock) {
                Some((waves, packets)) => {
                    if ctx.back.send(Back::Fed(ctx.r, (waves, packets))).is_err() {
                        return;
                    }
                }
                None => return,
            },
            In::End => {
                if let Some(to) = &ctx.to {
                    let _ = to.send(In::End);
                }
                st.ex.settle_flows();
                let o = WorkerOutcome::of(&st.ex, None);
                let _ = ctx.back.send(Back::Done(ctx.r, ctx.s, Box::new(o)));
                return;
            }
        }
    }
}

/// [`synth::verify::run`] of `placement`: the chain over the pcap `inputs` and its
/// `FromDump` files run as the pipeline, every exit kept in memory in canonical order, the
/// counters stitched and summed over the replicas, the state per NF (prefixed `worker R: `
/// per replica when there are several), so the result compares with a naive run's.
pub fn verify_plan(
    chain: &ChainFile,
    inputs: &[(Endpoint, std::path::PathBuf)],
    options: &chain::RunOptions,
    placement: &Placement,
) -> Result<synth::verify::RunResult, Error> {
    use chain::exec::Captured;
    let (mut probe, sources) = crate::run::open_sources(chain, inputs, options)?;
    let replicas = placement.replicas.max(1);
    let dispatcher = Dispatcher::for_chain(&mut probe, replicas);
    if replicas > 1 {
        share(&mut probe, 0, replicas)?;
    }
    let names = probe.exit_names();
    let mut lists: Vec<Captured> = vec![Vec::new(); names.len()];
    let setup = Setup {
        chain: chain.clone(),
        options: options.clone(),
        mode: Mode::Naive,
        fast: chain::FastOptions::default(),
        trust_switch_tags: false,
        board: None,
        stop: None,
    };
    let pipeline = Pipeline::start(&setup, &probe, placement, true, Vec::new())?;
    let mut merge = chain::Merge::new(sources);
    let outcome = pipeline.run(
        &dispatcher,
        &mut merge,
        |x, ts, pr, d| {
            if let Some(l) = lists.get_mut(x) {
                l.push((ts, pr, d));
            }
        },
        |_| {},
    )?;
    let state = if replicas == 1 {
        outcome.workers[0].state.clone()
    } else {
        outcome.state()
    };
    Ok(synth::verify::RunResult {
        exits: names.into_iter().zip(lists).collect(),
        summary: outcome.summary(),
        state,
        errors: merge.into_errors(),
    })
}
