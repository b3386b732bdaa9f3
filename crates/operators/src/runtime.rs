//! `shuffle` and the standalone runtime: FuseBox as a library (NetBricks' Listing 2).
//!
//! A program builds its NF as a pipeline, binds receive and transmit ports
//! ([`ports::port::RxPort`], [`ports::port::TxPort`]: capture files, memory, live devices)
//! and runs it on `N` worker threads. Each worker runs its own replica of the pipeline
//! (NetBricks places a whole chain on one core and replicates it), built by the program's
//! closure with the [`Worker`] it is for; receive port `i` is read by worker `i mod N` (a NIC
//! queue pinned to a core), a packet runs to completion on the worker that read it, and what
//! the pipeline hands on at its end, or [`Cx::send`]s to output `o`, leaves by transmit port
//! `o` (ports are shared by the workers, a lock per frame).
//!
//! ```no_run
//! use operators::runtime::{by_flow, Runtime};
//! use operators::{pipe, Ethernet, Ipv4, Raw};
//! use ports::port::{PcapRx, PcapTx};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut rt = Runtime::new(2);
//! rt.rx(PcapRx::open("in.pcap".as_ref())?);
//! rt.tx(PcapTx::create("out.pcap".as_ref(), packet::Precision::Micro)?);
//! let report = rt.run(|w| {
//!     pipe::<Raw, ()>().shuffle(w, by_flow(), |_, rest| {
//!         rest.parse::<Ethernet>()
//!             .parse::<Ipv4>()
//!             .transform(|p| {
//!                 let mut ip = p.header_mut();
//!                 let ttl = ip.ttl().saturating_sub(1);
//!                 ip.set_ttl(ttl);
//!                 ip.fill_checksum();
//!             })
//!             .filter("ttl-expired", |p| p.header().ttl() != 0)
//!     })
//!     .into_stage()
//! })?;
//! println!("{report:?}");
//! # Ok(()) }
//! ```
//!
//! **Shuffle.** `pipe.shuffle(worker, key, |worker, rest| …)` sends the rest of a packet's
//! processing (the operators `rest` builds) to worker `key(packet) mod N`: the number of
//! branches is the number of workers. The packet moves through a channel to that worker's
//! replica of `rest` (ownership moves: no copy, and the sender cannot touch it again). Every
//! packet with one key goes to one worker through one channel per sending worker, so a flow
//! read by one worker (one port) keeps its order; with [`by_flow`] one flow, both directions,
//! is processed by one worker. A shuffle ends a pipeline: what `rest` hands on leaves by
//! output 0 (its type, [`Shuffled`], takes no more operators). A worker's clock is the latest
//! timestamp it has seen, from its ports or from packets shuffled to it.
//!
//! *Decision, one worker and FuseBox chains:* with one worker, and in a pipeline built with
//! [`Worker::alone`] (what an [`OperatorNf`](crate::OperatorNf) class does: a FuseBox chain
//! has one replica of every element per data plane worker), `rest` runs in line: shuffle is
//! the identity. In a chain the data plane's dispatcher already puts each packet on worker
//! `symmetric RSS hash mod N` of its 5-tuple, the same rule as [`by_flow`], so a shuffle by
//! flow would send every packet to the worker it is already on (replies to a NAT's pool are
//! the dispatcher's one exception: they go to the worker whose slice of the pool made the
//! mapping, where that NAT's state is); a shuffle by another key
//! does not move packets between the chain's replicas, and state they must share uses the
//! bounded or strict levels of [`crate::state`].
//!
//! *Decision, queues:* the channels between workers are unbounded (a slow worker makes the
//! others' queues grow rather than blocking them, which could deadlock two workers shuffling
//! to each other); offline ports bound them by the input's size.

use crate::header::{Raw, Stack};
use crate::nf::{Leave, Start};
use crate::pipe::{pipe, Cx, Identity, Pipe, Stage, Then};
use crate::pkt::Pkt;
use packet::{Packet, Timestamp};
use ports::port::{PortCounters, PortError, Rounds, RxPort, TxPort};
use std::any::Any;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The drop reason of a packet shuffled to a worker that is gone (it failed).
pub const WORKER_GONE: &str = "worker-gone";
/// The drop reason of a packet sent to an output with no transmit port bound.
pub const NO_PORT: &str = "no-tx-port";
/// The drop reason of a frame a transmit port refused (its ring was full).
pub const TX_FULL: &str = "tx-full";

/// The predefined shuffle key by flow: the symmetric RSS hash of the packet's 5-tuple (both
/// directions alike), 0 for packets that are not IP; the data plane's dispatcher rule.
pub fn by_flow<S: Stack, M>() -> impl FnMut(&Pkt<S, M>) -> usize + Send + Clone {
    |p| p.flow().map_or(0, |k| k.rss_hash() as usize)
}

/// A message on one shuffle's channels.
enum Msg<P> {
    /// A packet to finish.
    Pkt(P),
    /// The sending worker will send nothing more on this shuffle.
    End,
}

/// One shuffle's channels: worker `w` receives on `receivers[w]`.
struct Chans<P> {
    senders: Vec<Sender<Msg<P>>>,
    receivers: Vec<Option<Receiver<Msg<P>>>>,
}

/// The channels of a run's shuffles, by shuffle number (shuffles are numbered in the order
/// a replica's build reaches them, the same on every worker).
struct Mesh {
    workers: usize,
    shuffles: Mutex<Vec<Option<Box<dyn Any + Send>>>>,
}

/// The worker a pipeline replica is built for: its number, how many there are, and what its
/// shuffles need. The runtime hands one to the program's build closure per worker.
pub struct Worker {
    index: usize,
    count: usize,
    mesh: Option<Arc<Mesh>>,
    shuffles: usize,
    inboxes: Vec<Option<Box<dyn Inbox>>>,
    error: Option<String>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("index", &self.index)
            .field("count", &self.count)
            .field("shuffles", &self.shuffles)
            .finish()
    }
}

impl Worker {
    /// The only worker: shuffles run in line (the identity). What a pipeline built outside
    /// the runtime (an operator NF in a FuseBox chain) uses.
    pub fn alone() -> Worker {
        Worker {
            index: 0,
            count: 1,
            mesh: None,
            shuffles: 0,
            inboxes: Vec::new(),
            error: None,
        }
    }

    /// This worker's number, below [`Worker::count`].
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many workers run the pipeline.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The route of a shuffle numbered `id` whose rest is `tail`: in line without a mesh,
    /// else through the mesh's channels, the tail kept as this worker's inbox `id`.
    fn route<S: Stack, M: Send + 'static, T>(&mut self, id: usize, tail: T) -> Route<Pkt<S, M>, T>
    where
        T: Stage<Pkt<S, M>> + 'static,
        T::Out: Leave,
    {
        let Some(mesh) = self.mesh.clone() else {
            return Route::Inline(tail);
        };
        let mut sets = lock(&mesh.shuffles);
        if sets.len() <= id {
            sets.resize_with(id + 1, || None);
        }
        let n = mesh.workers;
        let set = sets[id].get_or_insert_with(|| {
            let (senders, receivers) = (0..n).map(|_| channel()).map(|(s, r)| (s, Some(r))).unzip();
            Box::new(Chans::<Pkt<S, M>> { senders, receivers })
        });
        let Some(chans) = set.downcast_mut::<Chans<Pkt<S, M>>>() else {
            self.error = Some(format!(
                "shuffle {id} of worker {} carries packets of another type than on the workers \
                 before it (build every worker's pipeline the same way)",
                self.index
            ));
            return Route::Inline(tail);
        };
        let Some(rx) = chans.receivers.get_mut(self.index).and_then(Option::take) else {
            self.error = Some(format!("shuffle {id} built twice on worker {}", self.index));
            return Route::Inline(tail);
        };
        let to = chans.senders.clone();
        if self.inboxes.len() <= id {
            self.inboxes.resize_with(id + 1, || None);
        }
        self.inboxes[id] = Some(Box::new(InboxOf {
            rx,
            to: to.clone(),
            tail,
            ends: 0,
            workers: n,
        }));
        Route::Mesh {
            to,
            _tail: PhantomData,
        }
    }
}

/// What a shuffle's rest hands on: it leaves the NF by output 0 (no operator follows a
/// shuffle; see the module documentation).
#[derive(Debug)]
pub struct Shuffled<T>(pub T);

impl<T: Leave> Leave for Shuffled<T> {
    #[inline]
    fn into_packet(self) -> Packet {
        self.0.into_packet()
    }
}

enum Route<P, T> {
    /// One worker: the rest runs here.
    Inline(T),
    /// Several: the packet goes to worker `key mod N`, whose replica of the rest finishes it.
    Mesh {
        to: Vec<Sender<Msg<P>>>,
        _tail: PhantomData<fn() -> T>,
    },
}

/// The `shuffle` operator (see the module documentation).
pub struct Shuffle<K, P, T> {
    key: K,
    route: Route<P, T>,
}

impl<K, S: Stack, M: Send + 'static, T> Stage<Pkt<S, M>> for Shuffle<K, Pkt<S, M>, T>
where
    K: FnMut(&Pkt<S, M>) -> usize + Send,
    T: Stage<Pkt<S, M>>,
    T::Out: Leave,
{
    type Out = Shuffled<T::Out>;
    #[inline]
    fn run(&mut self, p: Pkt<S, M>, cx: &mut Cx) -> Option<Self::Out> {
        match &mut self.route {
            Route::Inline(tail) => tail.run(p, cx).map(Shuffled),
            Route::Mesh { to, .. } => {
                let w = (self.key)(&p) % to.len().max(1);
                if let Some(Err(e)) = to.get(w).map(|s| s.send(Msg::Pkt(p))) {
                    if let Msg::Pkt(p) = e.0 {
                        cx.drop(p, WORKER_GONE);
                    }
                }
                None
            }
        }
    }
    fn tick(&mut self, cx: &mut Cx) {
        if let Route::Inline(tail) = &mut self.route {
            tail.tick(cx);
        }
    }
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        if let Route::Inline(tail) = &self.route {
            tail.stats(out);
        }
    }
    fn state(&self, out: &mut Vec<String>) {
        if let Route::Inline(tail) = &self.route {
            tail.state(out);
        }
    }
}

impl<I, S: Stack, M: Send + 'static, St: Stage<I, Out = Pkt<S, M>>> Pipe<I, St> {
    /// Sends the rest of each packet's processing (what `rest` builds, given the worker) to
    /// worker `key(packet) mod N` ([`by_flow`] for flows); see the module documentation.
    /// With one worker, or a pipeline built with [`Worker::alone`], the rest runs in line.
    pub fn shuffle<K, T, F>(
        self,
        worker: &mut Worker,
        key: K,
        rest: F,
    ) -> Shuffling<I, St, K, Pkt<S, M>, T>
    where
        K: FnMut(&Pkt<S, M>) -> usize + Send,
        T: Stage<Pkt<S, M>> + 'static,
        T::Out: Leave,
        F: FnOnce(&mut Worker, Pipe<Pkt<S, M>, Identity>) -> Pipe<Pkt<S, M>, T>,
    {
        let id = worker.shuffles;
        worker.shuffles += 1;
        let tail = rest(worker, pipe()).into_stage();
        let route = worker.route(id, tail);
        self.then(Shuffle { key, route })
    }
}

/// The pipeline after a `shuffle` (nothing follows it).
pub type Shuffling<I, St, K, P, T> = Pipe<I, Then<St, Shuffle<K, P, T>>>;

/// A worker's end of one shuffle: its channel and its replica of the shuffle's rest.
trait Inbox: Send {
    /// Finishes up to `max` packets received; returns how many.
    fn drain(&mut self, cx: &mut Cx, max: usize) -> usize;
    /// Tells every worker this one sends nothing more on the shuffle.
    fn end(&mut self);
    /// Whether every worker said so and everything they sent was finished.
    fn ended(&self) -> bool;
    /// The rest's counters.
    fn stats(&self, out: &mut Vec<(&'static str, u64)>);
    /// The rest's state.
    fn state(&self, out: &mut Vec<String>);
}

struct InboxOf<P, T> {
    rx: Receiver<Msg<P>>,
    to: Vec<Sender<Msg<P>>>,
    tail: T,
    ends: usize,
    workers: usize,
}

impl<S: Stack, M: Send + 'static, T> Inbox for InboxOf<Pkt<S, M>, T>
where
    T: Stage<Pkt<S, M>> + 'static,
    T::Out: Leave,
{
    fn drain(&mut self, cx: &mut Cx, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            match self.rx.try_recv() {
                Ok(Msg::Pkt(p)) => {
                    n += 1;
                    let ts = p.timestamp();
                    if ts > cx.now {
                        cx.now = ts;
                        self.tail.tick(cx);
                    }
                    if let Some(out) = self.tail.run(p, cx) {
                        cx.send(0, Pkt::new(out.into_packet()));
                    }
                }
                Ok(Msg::End) => self.ends += 1,
                Err(_) => break,
            }
        }
        n
    }
    fn end(&mut self) {
        for s in self.to.drain(..) {
            // A worker that is gone needs no notice.
            let _ = s.send(Msg::End);
        }
    }
    fn ended(&self) -> bool {
        self.ends >= self.workers
    }
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        self.tail.stats(out);
    }
    fn state(&self, out: &mut Vec<String>) {
        self.tail.state(out);
    }
}

/// Frames a [`MemoryTx`] was sent: `(timestamp, bytes)` in order, shared.
pub type Frames = Arc<Mutex<Vec<(Timestamp, Vec<u8>)>>>;

/// A transmit port that keeps what it is sent in memory (tests, programs that look at their
/// output): `(timestamp, frame)` in the order sent, shared with whoever holds a clone of
/// [`MemoryTx::frames`].
#[derive(Debug, Clone, Default)]
pub struct MemoryTx {
    frames: Frames,
    counters: PortCounters,
}

impl MemoryTx {
    /// An empty port.
    pub fn new() -> MemoryTx {
        MemoryTx::default()
    }

    /// The frames sent so far (shared: read them after the run).
    pub fn frames(&self) -> Frames {
        Arc::clone(&self.frames)
    }
}

impl TxPort for MemoryTx {
    fn name(&self) -> &str {
        "memory"
    }
    fn send(&mut self, ts: Timestamp, frame: &[u8]) -> Result<bool, PortError> {
        lock(&self.frames).push((ts, frame.to_vec()));
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += frame.len() as u64;
        Ok(true)
    }
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }
    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// What one worker did.
#[derive(Debug, Clone, Default)]
pub struct WorkerReport {
    /// Frames it read from its receive ports.
    pub received: u64,
    /// Packets other workers (or itself) shuffled to it, which it finished.
    pub shuffled_in: u64,
    /// Frames it sent, per output (transmit port).
    pub sent: Vec<u64>,
    /// Packets it dropped, by reason.
    pub drops: BTreeMap<&'static str, u64>,
    /// Its replica's counters (every stage's, then every shuffle's rest).
    pub stats: Vec<(&'static str, u64)>,
    /// Its replica's state lines, in the same order.
    pub state: Vec<String>,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Per worker.
    pub workers: Vec<WorkerReport>,
    /// Per receive port, in the order bound.
    pub rx: Vec<PortCounters>,
    /// Per transmit port, in the order bound.
    pub tx: Vec<PortCounters>,
    /// Port errors (a receive error ends that port; a send error loses that frame).
    pub errors: Vec<String>,
}

impl Report {
    /// Frames sent on every output, all workers together.
    pub fn sent(&self) -> u64 {
        self.workers.iter().flat_map(|w| &w.sent).sum()
    }

    /// Drops by reason, all workers together.
    pub fn drops(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for w in &self.workers {
            for (r, n) in &w.drops {
                *out.entry(*r).or_default() += n;
            }
        }
        out
    }
}

/// Why a run could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The build closure built the workers' replicas differently.
    #[error("building the pipelines: {0}")]
    Build(String),
    /// A worker panicked.
    #[error("worker {0} panicked")]
    Worker(usize),
}

/// A standalone run: ports bound, then [`Runtime::run`] (see the module documentation).
pub struct Runtime {
    workers: usize,
    batch: usize,
    rx: Vec<Box<dyn RxPort>>,
    tx: Vec<Box<dyn TxPort>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.workers)
            .field("rx", &self.rx.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("tx", &self.tx.iter().map(|p| p.name()).collect::<Vec<_>>())
            .finish()
    }
}

impl Runtime {
    /// A run on `workers` worker threads (at least one).
    pub fn new(workers: usize) -> Runtime {
        Runtime {
            workers: workers.max(1),
            batch: 32,
            rx: Vec::new(),
            tx: Vec::new(),
        }
    }

    /// Frames read from a port, or finished from a shuffle, at a time (default 32).
    pub fn batch(mut self, n: usize) -> Runtime {
        self.batch = n.max(1);
        self
    }

    /// Binds receive port number `n` (returned), read by worker `n mod N`; its packets start
    /// with metadata `I::start(n)` ([`crate::Input`] tells the pipeline the port).
    pub fn rx(&mut self, port: impl RxPort + 'static) -> usize {
        self.rx.push(Box::new(port));
        self.rx.len() - 1
    }

    /// Binds transmit port number `n` (returned): the pipeline's output `n`.
    pub fn tx(&mut self, port: impl TxPort + 'static) -> usize {
        self.tx.push(Box::new(port));
        self.tx.len() - 1
    }

    /// Builds one replica of the pipeline per worker with `build` and runs them until every
    /// receive port has ended and every shuffled packet is finished; flushes the transmit
    /// ports.
    pub fn run<I, P, B>(self, mut build: B) -> Result<Report, RunError>
    where
        I: Start,
        P: Stage<Pkt<Raw, I>> + 'static,
        P::Out: Leave,
        B: FnMut(&mut Worker) -> P,
    {
        let n = self.workers;
        let mesh = (n > 1).then(|| {
            Arc::new(Mesh {
                workers: n,
                shuffles: Mutex::new(Vec::new()),
            })
        });
        let mut replicas = Vec::with_capacity(n);
        for index in 0..n {
            let mut w = Worker {
                index,
                count: n,
                mesh: mesh.clone(),
                ..Worker::alone()
            };
            let stage = build(&mut w);
            if let Some(e) = w.error.take() {
                return Err(RunError::Build(e));
            }
            let inboxes: Option<Vec<Box<dyn Inbox>>> = w.inboxes.into_iter().collect();
            let Some(inboxes) = inboxes else {
                return Err(RunError::Build(format!(
                    "worker {index} has a gap in its shuffles' numbering"
                )));
            };
            replicas.push((stage, inboxes, Vec::new()));
        }
        let nrx = self.rx.len();
        for (i, port) in self.rx.into_iter().enumerate() {
            replicas[i % n].2.push((i, port));
        }
        let tx: Vec<Mutex<Box<dyn TxPort>>> = self.tx.into_iter().map(Mutex::new).collect();
        let batch = self.batch;
        let mut report = Report {
            rx: vec![PortCounters::default(); nrx],
            ..Report::default()
        };
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = replicas
                .into_iter()
                .map(|(stage, inboxes, rx)| {
                    let tx = &tx;
                    s.spawn(move || work::<I, P>(stage, inboxes, rx, tx, batch))
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        for (w, r) in results.into_iter().enumerate() {
            let (wr, rx, errors) = r.map_err(|_| RunError::Worker(w))?;
            for (i, c) in rx {
                report.rx[i] = c;
            }
            report.errors.extend(errors);
            report.workers.push(wr);
        }
        for t in &tx {
            let mut t = lock(t);
            if let Err(e) = t.flush() {
                report.errors.push(format!("{}: {e}", t.name()));
            }
            report.tx.push(t.counters());
        }
        Ok(report)
    }
}

/// A worker's receive ports, each with its number.
type RxPorts = Vec<(usize, Box<dyn RxPort>)>;

/// One worker's loop: its ports in rounds, its shuffles' inboxes, until everything ended.
fn work<I: Start, P>(
    mut stage: P,
    mut inboxes: Vec<Box<dyn Inbox>>,
    mut rx: RxPorts,
    tx: &[Mutex<Box<dyn TxPort>>],
    batch: usize,
) -> (WorkerReport, Vec<(usize, PortCounters)>, Vec<String>)
where
    P: Stage<Pkt<Raw, I>>,
    P::Out: Leave,
{
    let mut cx = Cx::new(Timestamp(0));
    let mut rep = WorkerReport {
        sent: vec![0; tx.len()],
        ..WorkerReport::default()
    };
    let mut errors = Vec::new();
    let mut rounds = Rounds::new(rx.len(), Duration::from_millis(1));
    let mut rx_done = rx.is_empty();
    let mut closed = 0;
    loop {
        let mut busy = 0;
        if !rx_done {
            let got = rounds.round(&mut rx, batch, |port, ts, precision, data| {
                let mut packet = Packet::from_bytes(data);
                packet.meta.timestamp = ts;
                packet.meta.precision = precision;
                if ts > cx.now {
                    cx.now = ts;
                    stage.tick(&mut cx);
                }
                rep.received += 1;
                let p = Pkt::new(packet).with_meta(I::start(port));
                if let Some(out) = stage.run(p, &mut cx) {
                    cx.send(0, Pkt::new(out.into_packet()));
                }
            });
            match got {
                Ok(n) => busy += n,
                Err(e) => {
                    errors.push(e.to_string());
                    rx_done = true;
                }
            }
            rx_done |= rounds.all_ended();
            flush(&mut cx, tx, &mut rep, &mut errors);
        }
        // A shuffle is closed (this worker sends nothing more on it) once the ports ended
        // and every shuffle before it, whose rests may send into it, ended.
        while rx_done && closed < inboxes.len() && inboxes[..closed].iter().all(|i| i.ended()) {
            inboxes[closed].end();
            closed += 1;
        }
        for ib in &mut inboxes {
            let n = ib.drain(&mut cx, batch);
            rep.shuffled_in += n as u64;
            busy += n;
        }
        flush(&mut cx, tx, &mut rep, &mut errors);
        if rx_done && closed == inboxes.len() && inboxes.iter().all(|i| i.ended()) {
            break;
        }
        if busy == 0 {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    stage.stats(&mut rep.stats);
    stage.state(&mut rep.state);
    for ib in &inboxes {
        ib.stats(&mut rep.stats);
        ib.state(&mut rep.state);
    }
    let counters = rx.iter().map(|(i, p)| (*i, p.counters())).collect();
    (rep, counters, errors)
}

/// Hands what the worker's pipeline sent to the transmit ports and counts its drops.
fn flush(
    cx: &mut Cx,
    tx: &[Mutex<Box<dyn TxPort>>],
    rep: &mut WorkerReport,
    errors: &mut Vec<String>,
) {
    for (port, p) in cx.take_sent() {
        let Some(t) = tx.get(port) else {
            *rep.drops.entry(NO_PORT).or_default() += 1;
            continue;
        };
        let mut t = lock(t);
        match t.send(p.meta.timestamp, p.data()) {
            Ok(true) => rep.sent[port] += 1,
            Ok(false) => *rep.drops.entry(TX_FULL).or_default() += 1,
            Err(e) => errors.push(format!("{}: {e}", t.name())),
        }
    }
    for (_, reason) in cx.take_dropped() {
        *rep.drops.entry(reason).or_default() += 1;
    }
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Ethernet, Ipv4, Udp};
    use crate::state::Strict;
    use ports::pcap::Record;
    use ports::port::MemoryRx;
    use proptest::prelude::*;

    /// `flows` UDP flows of `per` packets each, interleaved; packet `i` of flow `f` carries
    /// `i` as payload and TTL 1 (expires) when `i % 5 == 4`.
    fn records(flows: u16, per: u16, first_port: u16) -> Vec<Record> {
        let mut out = Vec::new();
        for i in 0..per {
            for f in 0..flows {
                let data =
                    wire::build::Frame::udp([10, 0, 0, 1], [10, 0, 9, 9], first_port + f, 53)
                        .ttl(if i % 5 == 4 { 1 } else { 64 })
                        .payload(&i.to_be_bytes())
                        .build();
                out.push(Record {
                    timestamp: Timestamp(1_000 + out.len() as u64),
                    precision: packet::Precision::Nano,
                    orig_len: data.len() as u32,
                    data,
                });
            }
        }
        out
    }

    /// What the TTL NF makes of a frame (`None`: dropped).
    fn expected(frame: &[u8]) -> Option<Vec<u8>> {
        let mut f = frame.to_vec();
        let mut ip = wire::ipv4::Packet::new_unchecked(&mut f[14..]);
        let ttl = ip.ttl().saturating_sub(1);
        ip.set_ttl(ttl);
        ip.fill_checksum();
        (ttl != 0).then_some(f)
    }

    type Seen = Strict<Vec<(usize, u16, u16)>>;

    /// The TTL NF behind a shuffle by flow; the rest notes (worker, source port, sequence).
    fn ttl(w: &mut Worker, seen: &Seen) -> impl Stage<Pkt<Raw, ()>, Out = impl Leave> + 'static {
        let seen = seen.clone();
        pipe::<Raw, ()>()
            .shuffle(w, by_flow(), move |w, rest| {
                let me = w.index();
                rest.parse::<Ethernet>()
                    .parse::<Ipv4>()
                    .transform(|p| {
                        let mut ip = p.header_mut();
                        let ttl = ip.ttl().saturating_sub(1);
                        ip.set_ttl(ttl);
                        ip.fill_checksum();
                    })
                    .filter("ttl-expired", |p| p.header().ttl() != 0)
                    .parse::<Udp>()
                    .transform(move |p| {
                        let seq = u16::from_be_bytes([p.payload()[0], p.payload()[1]]);
                        let port = p.header().src_port();
                        seen.write(|v| v.push((me, port, seq)));
                    })
            })
            .into_stage()
    }

    fn check_run(workers: usize, ports: &[Vec<Record>]) {
        let seen = Seen::new(Vec::new());
        let out = MemoryTx::new();
        let frames = out.frames();
        let mut rt = Runtime::new(workers).batch(7);
        for (i, recs) in ports.iter().enumerate() {
            rt.rx(MemoryRx::new(format!("in{i}"), recs.clone()));
        }
        rt.tx(out);
        let report = rt.run(|w| ttl(w, &seen)).unwrap();
        let input: Vec<&Record> = ports.iter().flatten().collect();
        let mut want: Vec<Vec<u8>> = input.iter().filter_map(|r| expected(&r.data)).collect();
        let mut got: Vec<Vec<u8>> = lock(&frames).iter().map(|(_, f)| f.clone()).collect();
        let expired = (input.len() - want.len()) as u64;
        // Every packet once, transformed as the NF says; the drops counted by reason.
        assert_eq!(report.sent(), want.len() as u64);
        assert_eq!(
            report.drops().get("ttl-expired").copied().unwrap_or(0),
            expired
        );
        assert_eq!(report.drops().len(), usize::from(expired > 0));
        assert_eq!(
            report.workers.iter().map(|w| w.received).sum::<u64>(),
            input.len() as u64
        );
        assert_eq!(
            report.rx.iter().map(|c| c.rx_packets).sum::<u64>(),
            input.len() as u64
        );
        assert_eq!(report.tx[0].tx_packets, want.len() as u64);
        // A flow's packets leave in the order they came (each port holds whole flows).
        let order: Vec<(u16, u16)> = lock(&frames)
            .iter()
            .map(|(_, f)| {
                (
                    u16::from_be_bytes([f[34], f[35]]),
                    u16::from_be_bytes([f[42], f[43]]),
                )
            })
            .collect();
        let mut last: BTreeMap<u16, u16> = BTreeMap::new();
        for (port, seq) in order {
            if let Some(&prev) = last.get(&port) {
                assert!(seq > prev, "flow {port}: {seq} after {prev}");
            }
            last.insert(port, seq);
        }
        want.sort();
        got.sort();
        assert_eq!(got, want);
        // Each flow was finished by worker `rss % N` alone.
        for (w, port, _) in seen.read(|v| v.clone()) {
            let frame = input
                .iter()
                .find(|r| u16::from_be_bytes([r.data[34], r.data[35]]) == port)
                .unwrap();
            let key = packet::FlowKey::from_ethernet(&frame.data).unwrap();
            assert_eq!(w, key.rss_hash() as usize % workers);
        }
        if workers > 1 && !input.is_empty() {
            let moved: u64 = report.workers.iter().map(|w| w.shuffled_in).sum();
            assert_eq!(moved, input.len() as u64);
            assert!(
                report.workers.iter().all(|w| w.shuffled_in > 0),
                "{report:?}"
            );
        } else {
            assert_eq!(report.workers[0].shuffled_in, 0);
        }
    }

    #[test]
    fn shuffle_by_flow_keeps_a_flow_on_one_worker_and_in_order() {
        for workers in [1, 2, 3] {
            check_run(workers, &[records(16, 20, 1000)]);
        }
    }

    #[test]
    fn every_worker_reads_its_ports_and_shuffles() {
        check_run(
            2,
            &[
                records(8, 10, 1000),
                records(8, 10, 2000),
                records(3, 4, 3000),
            ],
        );
        check_run(3, &[]);
    }

    #[test]
    fn nested_shuffles_end_and_finish_every_packet() {
        let recs = records(12, 10, 1000);
        let out = MemoryTx::new();
        let mut rt = Runtime::new(3);
        rt.rx(MemoryRx::new("in", recs.clone()));
        rt.tx(MemoryTx::new());
        rt.tx(out.clone());
        let report = rt
            .run(|w| {
                pipe::<Raw, ()>()
                    .parse::<Ethernet>()
                    .shuffle(w, by_flow(), |w, rest| {
                        rest.parse::<Ipv4>().shuffle(
                            w,
                            |p| usize::from(p.header().ttl()),
                            |_, r| r.filter("ttl-1", |p| p.header().ttl() != 1).send(1),
                        )
                    })
                    .into_stage()
            })
            .unwrap();
        let expired = recs.iter().filter(|r| expected(&r.data).is_none()).count() as u64;
        assert_eq!(report.tx[1].tx_packets, recs.len() as u64 - expired);
        assert_eq!(report.drops().get("ttl-1"), Some(&expired));
        let moved: u64 = report.workers.iter().map(|w| w.shuffled_in).sum();
        assert_eq!(moved, 2 * recs.len() as u64);
        assert_eq!(
            lock(&out.frames()).len() as u64,
            recs.len() as u64 - expired
        );
    }

    #[test]
    fn alone_a_shuffle_is_the_identity() {
        let seen = Seen::new(Vec::new());
        let mut with = ttl(&mut Worker::alone(), &seen);
        let mut cx = Cx::default();
        for r in records(4, 10, 1000) {
            let out = with.run(Pkt::new(Packet::from_bytes(&r.data)), &mut cx);
            assert_eq!(
                out.map(|o| o.into_packet().data().to_vec()),
                expected(&r.data)
            );
        }
        assert!(seen.read(|v| v.iter().all(|(w, _, _)| *w == 0)));
        assert_eq!(cx.take_dropped().count(), 8);
    }

    #[test]
    fn replicas_built_differently_are_refused() {
        let mut rt = Runtime::new(2);
        rt.rx(MemoryRx::new("in", records(1, 1, 1)));
        let r = rt.run(|w| {
            let p = pipe::<Raw, ()>();
            if w.index() == 0 {
                p.shuffle(w, by_flow(), |_, r| r).boxed().into_stage()
            } else {
                // The same output, but the shuffle carries packets of another type.
                p.parse::<Ethernet>()
                    .shuffle(w, by_flow(), |_, r| r.deparse())
                    .boxed()
                    .into_stage()
            }
        });
        assert!(matches!(r, Err(RunError::Build(_))), "{r:?}");
    }

    proptest! {
        /// In a FuseBox chain the data plane's dispatcher already puts every packet on the
        /// worker a shuffle by flow would send it to: there, shuffle by flow is the identity.
        #[test]
        fn the_dispatcher_places_packets_where_a_shuffle_by_flow_would(
            s in any::<[u8; 4]>(), d in any::<[u8; 4]>(), sp in any::<u16>(), dp in any::<u16>(),
            tcp in any::<bool>(), n in 1usize..9, junk in prop::collection::vec(any::<u8>(), 0..60),
        ) {
            let disp = dataplane::Dispatcher::new(n, Vec::new());
            let mut key = by_flow::<Raw, ()>();
            let frames = [
                if tcp { wire::build::Frame::tcp(s, d, sp, dp).build() } else { wire::build::Frame::udp(s, d, sp, dp).build() },
                junk,
            ];
            for f in frames {
                prop_assert_eq!(disp.worker(&f), key(&Pkt::new(Packet::from_bytes(&f))) % n);
            }
        }
    }
}
