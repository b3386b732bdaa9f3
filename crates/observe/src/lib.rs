//! Watching and stopping a FuseBox run, offline (pcap, `--replay`) or live, with one or
//! many workers.
//!
//! * [`stop::Flag`]: set by SIGINT or SIGTERM (or by hand); a run loop polls it once per
//!   batch, stops reading input, finishes the packets in flight and reports;
//! * [`board::Board`]: the latest [`Summary`] of every worker. A worker publishes a snapshot
//!   every ~100 ms ([`board::Publisher`], cheap: one clock read per batch); readers (the
//!   metrics server, the progress line) never touch a worker's executor;
//! * [`metrics`]: the board in the Prometheus text exposition format (0.0.4), served over
//!   HTTP by [`metrics::Server`] on its own thread;
//! * [`progress::Progress`]: the one-line display on stderr (rates in and out over the last
//!   second, drops; per worker on request);
//! * [`Watch`]: the three together for a loop that runs one worker on its own thread (the
//!   offline run): `watch.tick(|| ex.summary())` after each batch, `watch.finish(&summary)`
//!   at the end.
//!
//! With several workers, each worker thread owns a [`board::Publisher`] (its index) and
//! calls `publisher.tick(|| ex.summary())` after each batch and `publish_at` with its final
//! summary when it stops; the thread that reads the input calls `progress.tick(&board)` per
//! batch and [`board::Board::mark_stopped`] once every worker has published its last.
//!
//! Counters of several workers are kept apart (label `worker="N"`, the worker's index in the
//! board); a reader sums them when it wants chain-wide numbers.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod board;
pub mod metrics;
pub mod progress;
pub mod scrape;
pub mod stop;

use board::{Board, Publisher};
use chain::summary::Summary;
use progress::Progress;
use std::sync::Arc;
use std::time::Instant;

/// A single-threaded run loop's view of the board and the progress line: publish a snapshot
/// and redraw the line at most every [`board::INTERVAL`], checked once per batch.
pub struct Watch {
    publisher: Publisher,
    progress: Progress,
    /// Whether anyone reads the snapshots before the run ends (a metrics server or a
    /// progress line); when not, [`Watch::tick`] does nothing.
    watched: bool,
}

impl Watch {
    /// Publishes worker `worker`'s snapshots on `board` and shows them on `progress`.
    pub fn new(board: Arc<Board>, worker: usize, progress: Progress) -> Self {
        Self {
            publisher: Publisher::new(board, worker),
            progress,
            watched: true,
        }
    }

    /// The same watch, told whether anyone reads the snapshots while the run goes on (a
    /// `--metrics` server, or a progress line that shows): unwatched, [`Watch::tick`] takes
    /// no snapshots (no clock read, no summary per batch); [`Watch::finish`] still publishes
    /// the final one.
    pub fn watched(mut self, watched: bool) -> Self {
        self.watched = watched || self.progress.is_on();
        self
    }

    /// Call after every batch: when a snapshot is due, takes one (`summary` is called only
    /// then), publishes it and redraws the progress line.
    #[inline]
    pub fn tick(&mut self, summary: impl FnOnce() -> Summary) {
        if !self.watched {
            return;
        }
        if let Some(now) = self.publisher.due() {
            self.publisher.publish_at(now, summary());
            if self.progress.is_on() {
                let board = self.publisher.board().snapshot();
                self.progress.update_at(now, &board);
            }
        }
    }

    /// The run has stopped: publishes the final summary (what the metrics serve from now on),
    /// marks the board stopped and clears the progress line.
    pub fn finish(&mut self, summary: &Summary) {
        self.publisher.publish_at(Instant::now(), summary.clone());
        self.publisher.board().mark_stopped();
        self.progress.finish();
    }
}
