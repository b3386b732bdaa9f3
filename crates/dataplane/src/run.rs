//! A streamed run on several workers: one thread reads and dispatches, each worker runs its
//! packets to completion on its own replica, outputs come back tagged with their input's
//! index and are handed on in canonical order.

use crate::dispatch::Dispatcher;
use crate::worker::{
    merged_fast, merged_state, panic_text, pin, replica, share, Error, Setup, WorkerOutcome,
};
use chain::exec::{Captured, Source, Tagged};
use chain::summary::Summary;
use chain::{ChainFile, Endpoint, Executor, ExitSink, FastStats, Merge, RunOptions};
use observe::board::Publisher;
use packet::{Precision, Timestamp};
use ports::pcap::PcapReader;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use synth::verify::{RunError, RunResult};
use synth::Mode;

/// One input packet: the entry it goes to (NF index, element index of its `FromDevice` or
/// `FromDump`, as [`Executor::entry`] gives it), its timestamp and resolution, its bytes.
#[derive(Debug, Clone)]
pub struct Input {
    /// The entry element (NF index, element index).
    pub entry: (usize, usize),
    /// When it arrived.
    pub timestamp: Timestamp,
    /// The resolution of `timestamp`.
    pub precision: Precision,
    /// The frame, from its Ethernet header.
    pub data: Vec<u8>,
}

/// What a [`Feed`] has next.
#[derive(Debug, Clone)]
pub enum Next {
    /// A packet.
    Input(Input),
    /// Nothing now (a live port with no frame waiting): the packets read so far are
    /// dispatched and their outputs handed on without waiting for a full batch.
    Idle,
    /// The input is done (end of the files, or a live run told to stop).
    End,
}

/// Where a run's packets come from, in the order they are to be numbered: pcap files
/// merged on timestamps ([`chain::Merge`]), or live ports. Any `FnMut() -> Next` is one.
pub trait Feed {
    /// The next packet, or why there is none.
    fn next_input(&mut self) -> Next;
}

impl Feed for Merge {
    fn next_input(&mut self) -> Next {
        match self.next() {
            Some((entry, r)) => Next::Input(Input {
                entry,
                timestamp: r.timestamp,
                precision: r.precision,
                data: r.data,
            }),
            None => Next::End,
        }
    }
}

impl<F: FnMut() -> Next> Feed for F {
    fn next_input(&mut self) -> Next {
        self()
    }
}

/// Batches a worker may be behind the reader before the reader waits for its outputs.
const DEPTH: usize = 4;

/// From the reader to a worker.
enum Cmd {
    /// Inputs with their run-wide index, in order (possibly none).
    Batch(Vec<(u64, Input)>),
    /// No more inputs.
    End,
}

/// From a worker to the reader.
enum Msg {
    /// The replica is built (or why not).
    Ready(Result<(), String>),
    /// What the exits kept while the worker ran one batch.
    Outputs(Vec<(usize, Tagged)>),
    /// The end of the run.
    Done(Box<WorkerOutcome>),
}

/// What every worker of a run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Per worker, in worker order.
    pub workers: Vec<WorkerOutcome>,
}

impl Outcome {
    /// The counters of all workers added up (per NF, element, drop reason, exit, totals).
    pub fn summary(&self) -> Summary {
        Summary::sum(self.workers.iter().map(|w| &w.summary)).unwrap_or_else(|| Summary {
            nfs: Vec::new(),
            exits: Vec::new(),
            ports: Vec::new(),
            totals: Default::default(),
        })
    }

    /// Every replica's final state per NF, each line prefixed `worker W: `.
    pub fn state(&self) -> BTreeMap<String, Vec<String>> {
        merged_state(&self.workers)
    }

    /// What the workers' fast paths did, added up (fastpath mode).
    pub fn fast_stats(&self) -> Option<FastStats> {
        merged_fast(&self.workers)
    }

    /// Remembered flow paths and the packets they served, added up (synth mode).
    pub fn flow_stats(&self) -> (usize, u64) {
        self.workers
            .iter()
            .fold((0, 0), |(p, h), w| (p + w.flows.0, h + w.flows.1))
    }

    /// Flows the workers' established-flow tables forgot at their bound, added up (synth
    /// mode).
    pub fn flow_evictions(&self) -> u64 {
        self.workers.iter().map(|w| w.flow_evictions).sum()
    }

    /// Switch-tagged frames over all workers: (whose class held, classified again).
    pub fn switch_tags(&self) -> (u64, u64) {
        self.workers.iter().fold((0, 0), |(a, b), w| {
            (a + w.switch_tags.0, b + w.switch_tags.1)
        })
    }

    /// The traffic classes of worker 0's synthesized program (synth mode).
    pub fn classes(&self) -> Option<usize> {
        self.workers.first().and_then(|w| w.classes)
    }
}

/// One worker: builds its replica, then runs what it is sent.
fn worker(setup: &Setup, w: usize, n: usize, keep: bool, rx: Receiver<Cmd>, tx: SyncSender<Msg>) {
    pin(w);
    let sink = if keep {
        || ExitSink::Tagged(Vec::new())
    } else {
        || ExitSink::Count
    };
    let (mut ex, classes) = match replica(setup, w, n, sink) {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Msg::Ready(Err(e.to_string())));
            return;
        }
    };
    if tx.send(Msg::Ready(Ok(()))).is_err() {
        return;
    }
    let mut publisher = setup.board.clone().map(|b| Publisher::new(b, w));
    while let Ok(cmd) = rx.recv() {
        match cmd {
            Cmd::Batch(inputs) => {
                for (index, i) in &inputs {
                    ex.push_input(i.entry, *index, &i.data, i.timestamp, i.precision);
                }
                if let Some(p) = &mut publisher {
                    p.tick(|| ex.summary());
                }
                if tx.send(Msg::Outputs(ex.take_tagged())).is_err() {
                    return;
                }
            }
            Cmd::End => {
                ex.settle_flows();
                if let Some(p) = &mut publisher {
                    p.publish_at(std::time::Instant::now(), ex.summary());
                }
                let _ = tx.send(Msg::Done(Box::new(WorkerOutcome::of(&ex, classes))));
                return;
            }
        }
    }
}

/// The reader's side of the workers: their channels.
struct Crew {
    tx: Vec<SyncSender<Cmd>>,
    rx: Vec<Receiver<Msg>>,
}

impl Crew {
    /// The next message of worker `w`, or `None` when it stopped.
    fn recv(&self, w: usize) -> Option<Msg> {
        self.rx[w].recv().ok()
    }

    /// Collects one batch's outputs from every worker and hands them on in canonical order
    /// (per exit: input index, then the order the worker produced them). `false` when a
    /// worker stopped.
    fn collect(&self, out: &mut impl FnMut(usize, Timestamp, Precision, Vec<u8>)) -> bool {
        let mut per_exit: BTreeMap<usize, Tagged> = BTreeMap::new();
        for w in 0..self.rx.len() {
            match self.recv(w) {
                Some(Msg::Outputs(v)) => {
                    for (x, tagged) in v {
                        per_exit.entry(x).or_default().extend(tagged);
                    }
                }
                _ => return false,
            }
        }
        for (x, mut v) in per_exit {
            // Stable: one input runs on one worker, whose list is already in its order.
            v.sort_by_key(|t| t.0);
            for (_, ts, pr, d) in v {
                out(x, ts, pr, d);
            }
        }
        true
    }
}

/// Runs the packets of `feed` on `dispatcher.workers()` replicas of `setup`'s chain, each
/// in a thread of its own (pinned to a core where the system allows). Packets are numbered
/// in feed order and dispatched by `dispatcher`; each worker runs its packets one at a time
/// to completion, in order. With `keep_outputs`, every packet an exit sends is handed to
/// `out` (exit index in [`Executor::exit_names`] order, timestamp, resolution, bytes) in
/// canonical order, batch by batch as the workers finish them; otherwise exits only count.
/// `progress` gets the packets read so far after every batch. A batch is dispatched when it
/// is full, when the feed is idle ([`Next::Idle`]: then every batch in flight is finished
/// and handed on, so a live port's packets do not wait for more), and at its end.
///
/// Errors: a replica that does not build ([`Error::Worker`]: the first worker's message), a
/// worker that panics (the run stops, every worker is joined, nothing hangs).
pub fn run(
    setup: &Setup,
    dispatcher: &Dispatcher,
    feed: &mut dyn Feed,
    keep_outputs: bool,
    mut out: impl FnMut(usize, Timestamp, Precision, Vec<u8>),
    mut progress: impl FnMut(u64),
) -> Result<Outcome, Error> {
    let n = dispatcher.workers();
    let batch = setup.options.batch.max(1);
    std::thread::scope(|sc| {
        let mut crew = Crew {
            tx: Vec::new(),
            rx: Vec::new(),
        };
        let mut handles = Vec::new();
        for w in 0..n {
            let (ctx, crx) = sync_channel::<Cmd>(DEPTH + 1);
            let (rtx, rrx) = sync_channel::<Msg>(DEPTH + 2);
            crew.tx.push(ctx);
            crew.rx.push(rrx);
            handles.push(sc.spawn(move || worker(setup, w, n, keep_outputs, crx, rtx)));
        }
        let mut failed: Option<(usize, String)> = None;
        for w in 0..n {
            match crew.recv(w) {
                Some(Msg::Ready(Ok(()))) => {}
                Some(Msg::Ready(Err(e))) => {
                    failed.get_or_insert((w, e));
                }
                _ => {
                    failed.get_or_insert((w, "stopped while starting".into()));
                }
            }
        }
        let mut outcomes = Vec::new();
        if failed.is_none() {
            let mut index = 0u64;
            let mut in_flight = 0usize;
            let mut ok = true;
            let mut end = false;
            'read: while !end {
                let mut parts: Vec<Vec<(u64, Input)>> = (0..n).map(|_| Vec::new()).collect();
                let mut got = 0;
                let mut idle = false;
                while got < batch {
                    match feed.next_input() {
                        Next::Input(i) => {
                            parts[dispatcher.worker(&i.data)].push((index, i));
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
                if got == 0 {
                    // Idle with nothing read: hand on what is in flight.
                    while idle && in_flight > 0 {
                        if !crew.collect(&mut out) {
                            ok = false;
                            break 'read;
                        }
                        in_flight -= 1;
                    }
                    continue;
                }
                for (w, part) in parts.into_iter().enumerate() {
                    if crew.tx[w].send(Cmd::Batch(part)).is_err() {
                        ok = false;
                        break 'read;
                    }
                }
                in_flight += 1;
                progress(index);
                while in_flight > DEPTH || (idle && in_flight > 0) {
                    if !crew.collect(&mut out) {
                        ok = false;
                        break 'read;
                    }
                    in_flight -= 1;
                }
            }
            while ok && in_flight > 0 {
                ok = crew.collect(&mut out);
                in_flight -= 1;
            }
            if ok {
                for tx in &crew.tx {
                    let _ = tx.send(Cmd::End);
                }
                for w in 0..n {
                    match crew.recv(w) {
                        Some(Msg::Done(o)) => outcomes.push(*o),
                        _ => {
                            failed.get_or_insert((w, "stopped before the end".into()));
                        }
                    }
                }
            } else {
                failed = Some((0, "stopped".into()));
            }
        }
        // Unblock and join every worker; a panic's message is the error.
        drop(crew);
        for (w, h) in handles.into_iter().enumerate() {
            if let Err(p) = h.join() {
                if failed
                    .as_ref()
                    .is_none_or(|(_, m)| !m.starts_with("panicked"))
                {
                    failed = Some((w, panic_text(p)));
                }
            }
        }
        match failed {
            Some((worker, message)) => Err(Error::Worker { worker, message }),
            None => Ok(Outcome { workers: outcomes }),
        }
    })
}

/// A probe executor of `chain` (counting exits) and the sources of a verification run: the
/// pcap `inputs` at their entries and the chain's own `FromDump` files.
pub(crate) fn open_sources(
    chain: &ChainFile,
    inputs: &[(Endpoint, PathBuf)],
    options: &RunOptions,
) -> Result<(Executor, Vec<Source>), Error> {
    let probe = Executor::new(chain, options, |_, _| Ok(ExitSink::Count))?;
    if inputs.is_empty() && probe.dump_sources().is_empty() {
        return Err(RunError::NoInput(chain.no_input_error()).into());
    }
    let mut sources: Vec<Source> = Vec::new();
    for (ep, file) in inputs {
        let entry = probe
            .entry(ep)
            .ok_or_else(|| RunError::NoEntry(ep.clone()))?;
        let mut r = PcapReader::open_ethernet(file).map_err(RunError::from)?;
        let records = Box::new(std::iter::from_fn(move || r.next_record()));
        sources.push(probe.source(format!("{ep}={}", file.display()), entry, records));
    }
    for (name, entry, path) in probe.dump_sources().to_vec() {
        let mut r = PcapReader::open(&path).map_err(|source| RunError::Dump {
            name: name.clone(),
            source,
        })?;
        let records = Box::new(std::iter::from_fn(move || r.next_record()));
        sources.push(probe.source(format!("{name}={}", path.display()), entry, records));
    }
    Ok((probe, sources))
}

/// [`synth::verify::run`] on `workers` workers: the chain over the pcap `inputs` and its
/// `FromDump` files in `mode`, every exit kept in memory in canonical order, the counters
/// summed over the workers and the state listed per worker, so two modes' results compare
/// as a single-core run's do. One worker is exactly [`synth::verify::run`].
pub fn verify_run(
    chain: &ChainFile,
    inputs: &[(Endpoint, PathBuf)],
    options: &RunOptions,
    mode: Mode,
    workers: usize,
) -> Result<RunResult, Error> {
    if workers <= 1 {
        return Ok(synth::verify::run(chain, inputs, options, mode)?);
    }
    let (mut probe, sources) = open_sources(chain, inputs, options)?;
    let dispatcher = Dispatcher::for_chain(&mut probe, workers);
    share(&mut probe, 0, workers)?;
    let names = probe.exit_names();
    let mut lists: Vec<Captured> = vec![Vec::new(); names.len()];
    let setup = Setup {
        chain: chain.clone(),
        options: options.clone(),
        mode,
        fast: chain::FastOptions::default(),
        trust_switch_tags: false,
        board: None,
        stop: None,
    };
    let mut merge = Merge::new(sources);
    let outcome = run(
        &setup,
        &dispatcher,
        &mut merge,
        true,
        |x, ts, pr, d| {
            if let Some(l) = lists.get_mut(x) {
                l.push((ts, pr, d));
            }
        },
        |_| {},
    )?;
    Ok(RunResult {
        exits: names.into_iter().zip(lists).collect(),
        summary: outcome.summary(),
        state: outcome.state(),
        errors: merge.into_errors(),
    })
}
