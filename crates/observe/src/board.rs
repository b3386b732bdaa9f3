//! The latest summary of every worker, shared between the workers (writers) and the
//! metrics server and progress line (readers).
//!
//! A worker's executor is single-threaded and not `Sync`: it never lends itself to a reader.
//! Instead it copies its counters ([`Summary`]) onto the board every [`INTERVAL`] through a
//! [`Publisher`], and once more, final, when it stops. A reader takes a copy of every
//! worker's latest snapshot ([`Board::snapshot`]).

use chain::summary::Summary;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a worker publishes a snapshot while it runs.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// Summaries with the index of the worker each is from (the `worker` label).
pub type Snapshot = Vec<(usize, Summary)>;

/// Every worker's latest snapshot.
#[derive(Debug)]
pub struct Board {
    slots: Mutex<Vec<Option<Summary>>>,
    stopped: AtomicBool,
}

impl Board {
    /// A board for `workers` workers (at least one), none published yet.
    pub fn new(workers: usize) -> Arc<Self> {
        Arc::new(Self {
            slots: Mutex::new(vec![None; workers.max(1)]),
            stopped: AtomicBool::new(false),
        })
    }

    /// The slots; a writer that panicked while holding the lock left a whole summary or
    /// none (a slot is replaced in one move), so a poisoned lock is still read.
    fn slots(&self) -> MutexGuard<'_, Vec<Option<Summary>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces worker `worker`'s snapshot (a board grows to fit a new worker index).
    pub fn publish(&self, worker: usize, summary: Summary) {
        let mut slots = self.slots();
        if slots.len() <= worker {
            slots.resize(worker + 1, None);
        }
        slots[worker] = Some(summary);
    }

    /// Every worker's latest snapshot with its index, in index order; workers that have
    /// published nothing yet are left out.
    pub fn snapshot(&self) -> Snapshot {
        self.slots()
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.clone().map(|s| (i, s)))
            .collect()
    }

    /// Marks the run stopped: the snapshots are final.
    pub fn mark_stopped(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Whether the run has stopped (the snapshots are the final summaries).
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// One worker's side of the board: knows when the next snapshot is due.
#[derive(Debug)]
pub struct Publisher {
    board: Arc<Board>,
    worker: usize,
    next: Instant,
}

impl Publisher {
    /// Publishes as worker `worker`; the first snapshot is due at once.
    pub fn new(board: Arc<Board>, worker: usize) -> Self {
        Self {
            board,
            worker,
            next: Instant::now(),
        }
    }

    /// The board.
    pub fn board(&self) -> &Arc<Board> {
        &self.board
    }

    /// `Some(now)` when a snapshot is due (one clock read; call once per batch).
    #[inline]
    pub fn due(&self) -> Option<Instant> {
        let now = Instant::now();
        (now >= self.next).then_some(now)
    }

    /// Publishes `summary` as of `now`; the next one is due [`INTERVAL`] later.
    pub fn publish_at(&mut self, now: Instant, summary: Summary) {
        self.board.publish(self.worker, summary);
        self.next = now + INTERVAL;
    }

    /// Publishes the summary `summary` makes when a snapshot is due (it is called only then).
    #[inline]
    pub fn tick(&mut self, summary: impl FnOnce() -> Summary) {
        if let Some(now) = self.due() {
            self.publish_at(now, summary());
        }
    }
}
