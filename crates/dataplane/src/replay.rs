//! In-memory replay on several workers: the trace is dispatched once, each worker keeps
//! its share and replays it on command; the rate of a pass is its packets over the time of
//! the slowest worker.

use crate::dispatch::Dispatcher;
use crate::run::Outcome;
use crate::worker::{panic_text, pin, replica, Error, Setup, WorkerOutcome};
use chain::ExitSink;
use observe::board::Publisher;
use ports::pcap::Record;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One worker's share of an in-memory trace: per input, its entry and the records the
/// dispatcher gave this worker, in trace order.
pub type Share = Vec<((usize, usize), Vec<Record>)>;

/// Splits in-memory `inputs` (entry, records) among the dispatcher's workers, once: every
/// worker gets every input, with the records it would be dispatched, in order.
pub fn predispatch(
    dispatcher: &Dispatcher,
    inputs: &[((usize, usize), Vec<Record>)],
) -> Vec<Share> {
    let n = dispatcher.workers();
    let mut shares: Vec<Share> = (0..n)
        .map(|_| inputs.iter().map(|(e, _)| (*e, Vec::new())).collect())
        .collect();
    for (i, (_, recs)) in inputs.iter().enumerate() {
        for r in recs {
            shares[dispatcher.worker(&r.data)][i].1.push(r.clone());
        }
    }
    shares
}

enum Cmd {
    /// Replay the share this many times.
    Pass(u64),
    /// Replay the share once, recording every packet's latency.
    Latency,
    /// Hand back the outcome and stop.
    Finish,
}

enum Msg {
    Ready(Result<(), String>),
    /// Packets pushed and the time the worker took.
    Passed(u64, Duration),
    /// Latency samples (nanoseconds).
    Latency(Vec<u64>),
    Done(Box<WorkerOutcome>),
}

/// Worker threads each holding a replica of the chain and its share of a trace, replaying
/// it on command ([`ReplayWorkers::pass`]).
pub struct ReplayWorkers {
    tx: Vec<SyncSender<Cmd>>,
    rx: Vec<Receiver<Msg>>,
    handles: Vec<JoinHandle<()>>,
}

impl ReplayWorkers {
    /// Starts one worker per share (pinned to a core where possible), each building its
    /// replica of `setup`'s chain (exits only count) with its share of the NATs' ranges.
    pub fn start(setup: &Setup, shares: Vec<Share>) -> Result<ReplayWorkers, Error> {
        let n = shares.len();
        let mut crew = ReplayWorkers {
            tx: Vec::new(),
            rx: Vec::new(),
            handles: Vec::new(),
        };
        for (w, share) in shares.into_iter().enumerate() {
            let (ctx, crx) = sync_channel::<Cmd>(1);
            let (rtx, rrx) = sync_channel::<Msg>(1);
            let setup = setup.clone();
            crew.tx.push(ctx);
            crew.rx.push(rrx);
            crew.handles.push(std::thread::spawn(move || {
                worker(setup, w, n, share, crx, rtx)
            }));
        }
        for w in 0..n {
            match crew.rx[w].recv() {
                Ok(Msg::Ready(Ok(()))) => {}
                Ok(Msg::Ready(Err(message))) => return Err(Error::Worker { worker: w, message }),
                _ => return Err(crew.failure(w)),
            }
        }
        Ok(crew)
    }

    /// How many workers there are.
    pub fn workers(&self) -> usize {
        self.tx.len()
    }

    /// Every worker replays its share `passes` times, all at once. Returns the packets
    /// pushed over all workers, the time of the slowest worker, and each worker's packets.
    pub fn pass(&mut self, passes: u64) -> Result<(u64, Duration, Vec<u64>), Error> {
        for w in 0..self.tx.len() {
            if self.tx[w].send(Cmd::Pass(passes)).is_err() {
                return Err(self.failure(w));
            }
        }
        let (mut total, mut slowest, mut each) = (0, Duration::ZERO, Vec::new());
        for w in 0..self.rx.len() {
            match self.rx[w].recv() {
                Ok(Msg::Passed(n, t)) => {
                    total += n;
                    slowest = slowest.max(t);
                    each.push(n);
                }
                _ => return Err(self.failure(w)),
            }
        }
        Ok((total, slowest, each))
    }

    /// Every worker replays its share once, recording the time from each batch's entry to
    /// each of its packets' exit ([`chain::Executor::record_latency`]); the samples of all
    /// workers.
    pub fn latency_pass(&mut self) -> Result<Vec<u64>, Error> {
        for w in 0..self.tx.len() {
            if self.tx[w].send(Cmd::Latency).is_err() {
                return Err(self.failure(w));
            }
        }
        let mut all = Vec::new();
        for w in 0..self.rx.len() {
            match self.rx[w].recv() {
                Ok(Msg::Latency(v)) => all.extend(v),
                _ => return Err(self.failure(w)),
            }
        }
        Ok(all)
    }

    /// Stops the workers and returns what each did.
    pub fn finish(mut self) -> Result<Outcome, Error> {
        let mut workers = Vec::new();
        for w in 0..self.tx.len() {
            if self.tx[w].send(Cmd::Finish).is_err() {
                return Err(self.failure(w));
            }
        }
        for w in 0..self.rx.len() {
            match self.rx[w].recv() {
                Ok(Msg::Done(o)) => workers.push(*o),
                _ => return Err(self.failure(w)),
            }
        }
        Ok(Outcome { workers })
    }

    /// The error of worker `w`, which stopped: its panic's message once every worker is
    /// joined.
    fn failure(&mut self, w: usize) -> Error {
        self.tx.clear();
        self.rx.clear();
        let mut message = "stopped".to_string();
        for (i, h) in std::mem::take(&mut self.handles).into_iter().enumerate() {
            if let Err(p) = h.join() {
                if i == w || message == "stopped" {
                    message = panic_text(p);
                }
            }
        }
        Error::Worker { worker: w, message }
    }
}

impl Drop for ReplayWorkers {
    fn drop(&mut self) {
        self.tx.clear();
        self.rx.clear();
        for h in std::mem::take(&mut self.handles) {
            let _ = h.join();
        }
    }
}

fn worker(setup: Setup, w: usize, n: usize, share: Share, rx: Receiver<Cmd>, tx: SyncSender<Msg>) {
    pin(w);
    let (mut ex, classes) = match replica(&setup, w, n, || ExitSink::Count) {
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
            Cmd::Pass(passes) => {
                let t0 = Instant::now();
                let n = match (&mut publisher, &setup.stop) {
                    (None, None) => ex.replay(&share, passes),
                    (p, stop) => ex.replay_until(&share, passes, |ex| {
                        if let Some(p) = p {
                            p.tick(|| ex.summary());
                        }
                        match stop {
                            Some(s) if s.is_set() => std::ops::ControlFlow::Break(()),
                            _ => std::ops::ControlFlow::Continue(()),
                        }
                    }),
                };
                if tx.send(Msg::Passed(n, t0.elapsed())).is_err() {
                    return;
                }
            }
            Cmd::Latency => {
                ex.record_latency(true);
                ex.replay(&share, 1);
                let samples = ex.take_latency();
                ex.record_latency(false);
                if tx.send(Msg::Latency(samples)).is_err() {
                    return;
                }
            }
            Cmd::Finish => {
                let _ = tx.send(Msg::Done(Box::new(WorkerOutcome::of(&ex, classes))));
                return;
            }
        }
    }
}
