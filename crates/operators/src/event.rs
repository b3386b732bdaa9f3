//! Scheduled events: a UDF run at a virtual time or periodically (statistics export, state
//! expiry), NetBricks' invocation nodes.
//!
//! Time is the virtual clock ([`Cx::now`]: packet timestamps), never the wall clock, so a run
//! over a capture fires the same events at the same points of the traffic every time, at any
//! speed. An event stage passes every packet on unchanged; when the clock reaches a due time
//! (at [`Stage::tick`], before the packet that moved the clock, or at the latest when a packet
//! reaches the stage) it runs the due UDFs, in order of due time (events due at the same time:
//! in the order they were added).
//!
//! *Decision, gaps:* when the clock jumps over several due times of a periodic event (a quiet
//! spell in the traffic), the UDF runs **once for the gap**, not once per missed period: it
//! is told the latest due time passed ([`Fire::due`]) and how many periods it stands for
//! ([`Fire::periods`]), and the next due time is one period after that. A statistics export
//! then writes one record covering the gap, and a capture with a timestamp years off costs
//! one call, not billions.
//!
//! ```
//! use operators::{pipe, Raw};
//! use std::time::Duration;
//! let mut exported = Vec::new();
//! let nf = pipe::<Raw, ()>().every(Duration::from_secs(1), move |fire, _cx| {
//!     exported.push((fire.due, fire.periods)); // e.g. hand counters to a collector
//! });
//! # let _ = nf;
//! ```

use crate::pipe::{Cx, Pipe, Stage};
use packet::Timestamp;
use std::time::Duration;

/// One run of a scheduled UDF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fire {
    /// The due time it runs for: the latest one the clock passed.
    pub due: Timestamp,
    /// How many due times it stands for: 1, or more when the clock jumped over several
    /// periods (see the module documentation); always 1 for a one-time event.
    pub periods: u64,
    /// The clock's reading when it runs (at or after `due`).
    pub now: Timestamp,
}

/// When an event is due.
#[derive(Debug, Clone, Copy)]
enum When {
    /// Once (at the timer's first `next`).
    At,
    /// Every `period` ns, from `start` (the first reading of the clock when `None`).
    Every { period: u64, start: Option<u64> },
}

/// A scheduled UDF.
type Udf = Box<dyn FnMut(Fire, &mut Cx) + Send>;

/// A scheduled UDF and its next due time.
struct Timer {
    when: When,
    /// The next due time; `None` before the clock was first read (periodic) or after a
    /// one-time event ran.
    next: Option<u64>,
    fired: u64,
    udf: Udf,
}

/// Several scheduled UDFs, run in order of due time (an event stage; see the module
/// documentation). Build it with [`Schedule::at`] and [`Schedule::every`], add it with
/// [`Pipe::schedule`].
#[derive(Default)]
pub struct Schedule {
    timers: Vec<Timer>,
    started: bool,
    /// The earliest next due time of any timer (`u64::MAX`: none).
    earliest: u64,
    order: Vec<(u64, usize)>,
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedule")
            .field("timers", &self.timers.len())
            .field("earliest", &self.earliest)
            .finish()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

impl Schedule {
    /// An empty schedule.
    pub fn new() -> Schedule {
        Schedule {
            earliest: u64::MAX,
            ..Schedule::default()
        }
    }

    /// Runs `udf` once, when the clock first reads `at` or later.
    pub fn at(mut self, at: Timestamp, udf: impl FnMut(Fire, &mut Cx) + Send + 'static) -> Self {
        self.timers.push(Timer {
            when: When::At,
            next: Some(at.0),
            fired: 0,
            udf: Box::new(udf),
        });
        self.earliest = self.earliest.min(at.0);
        self
    }

    /// Runs `udf` every `period` of virtual time (at least 1 ns), the first time one period
    /// after the clock's first reading.
    pub fn every(self, period: Duration, udf: impl FnMut(Fire, &mut Cx) + Send + 'static) -> Self {
        self.every_from(None, period, udf)
    }

    /// Runs `udf` at `start`, `start + period`, `start + 2·period`, … (`start` of `None`:
    /// one period after the clock's first reading).
    pub fn every_from(
        mut self,
        start: Option<Timestamp>,
        period: Duration,
        udf: impl FnMut(Fire, &mut Cx) + Send + 'static,
    ) -> Self {
        let start = start.map(|t| t.0);
        self.timers.push(Timer {
            when: When::Every {
                period: nanos(period),
                start,
            },
            next: start,
            fired: 0,
            udf: Box::new(udf),
        });
        if let Some(s) = start {
            self.earliest = self.earliest.min(s);
        }
        self
    }

    /// How many times each UDF ran, in the order they were added.
    pub fn fired(&self) -> Vec<u64> {
        self.timers.iter().map(|t| t.fired).collect()
    }

    /// Runs every UDF due at `cx.now`, in order of due time.
    fn run_due(&mut self, cx: &mut Cx) {
        let now = cx.now.0;
        if !self.started {
            self.started = true;
            for t in &mut self.timers {
                if let When::Every {
                    period,
                    start: None,
                } = t.when
                {
                    t.next = Some(now.saturating_add(period));
                }
            }
            self.earliest = self.next_due();
        }
        if now < self.earliest {
            return;
        }
        self.order.clear();
        for (i, t) in self.timers.iter().enumerate() {
            if let Some(n) = t.next.filter(|&n| n <= now) {
                let due = match t.when {
                    When::At => n,
                    When::Every { period, .. } => n + (now - n) / period * period,
                };
                self.order.push((due, i));
            }
        }
        self.order.sort_unstable();
        for k in 0..self.order.len() {
            let (due, i) = self.order[k];
            let t = &mut self.timers[i];
            let periods = match t.when {
                When::At => {
                    t.next = None;
                    1
                }
                When::Every { period, .. } => {
                    let first = t.next.unwrap_or(due);
                    t.next = due.checked_add(period);
                    (due - first) / period + 1
                }
            };
            t.fired += 1;
            (t.udf)(
                Fire {
                    due: Timestamp(due),
                    periods,
                    now: cx.now,
                },
                cx,
            );
        }
        self.earliest = self.next_due();
    }

    fn next_due(&self) -> u64 {
        self.timers
            .iter()
            .filter_map(|t| t.next)
            .min()
            .unwrap_or(u64::MAX)
    }
}

impl<P> Stage<P> for Schedule {
    type Out = P;
    #[inline]
    fn run(&mut self, p: P, cx: &mut Cx) -> Option<P> {
        if !self.started || cx.now.0 >= self.earliest {
            self.run_due(cx);
        }
        Some(p)
    }
    fn tick(&mut self, cx: &mut Cx) {
        self.run_due(cx);
    }
}

impl<I, St: Stage<I>> Pipe<I, St> {
    /// Runs the events of `schedule` as the virtual clock reaches them (packets pass on
    /// unchanged).
    pub fn schedule(self, schedule: Schedule) -> Pipe<I, crate::pipe::Then<St, Schedule>> {
        self.then(schedule)
    }

    /// Runs `udf` every `period` of virtual time, the first time one period after the
    /// clock's first reading; once for a gap of several periods ([`Fire::periods`]).
    pub fn every(
        self,
        period: Duration,
        udf: impl FnMut(Fire, &mut Cx) + Send + 'static,
    ) -> Pipe<I, crate::pipe::Then<St, Schedule>> {
        self.then(Schedule::new().every(period, udf))
    }

    /// Runs `udf` once, when the virtual clock first reads `at` or later.
    pub fn at(
        self,
        at: Timestamp,
        udf: impl FnMut(Fire, &mut Cx) + Send + 'static,
    ) -> Pipe<I, crate::pipe::Then<St, Schedule>> {
        self.then(Schedule::new().at(at, udf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Raw;
    use crate::pipe::pipe;
    use crate::pkt::Pkt;
    use crate::state::{bounded, Strict};
    use packet::Packet;
    use proptest::prelude::*;

    const S: u64 = 1_000_000_000;

    fn at(t: u64) -> Pkt {
        let mut p = Packet::from_bytes(&[0; 60]);
        p.meta.timestamp = Timestamp(t);
        Pkt::new(p)
    }

    /// Drives `stage` as an operator NF does: tick when the clock moves, then the packet.
    fn drive<St: Stage<Pkt>>(stage: &mut St, times: &[u64]) -> usize {
        let mut cx = Cx::new(Timestamp(u64::MAX));
        let mut passed = 0;
        for &t in times {
            if cx.now.0 != t {
                cx.now = Timestamp(t);
                stage.tick(&mut cx);
            }
            passed += usize::from(stage.run(at(t), &mut cx).is_some());
        }
        passed
    }

    #[test]
    fn periodic_export_reads_counters_once_per_period_and_once_for_a_gap() {
        // A monitor counts packets in a bounded-inconsistency partition; the export event
        // reads the counters at every period boundary of virtual time.
        let (mut w, mut r) = bounded(1, 0u64);
        let log = Strict::new(Vec::new());
        let out = log.clone();
        let mut nf = pipe::<Raw, ()>()
            .every(Duration::from_secs(1), move |f, cx| {
                let n = r.get().value;
                out.write(|v| v.push((f.due.0 / S, f.periods, f.now.0 * 10 / S, n, cx.now)));
            })
            .transform(move |_| w.update(|n| *n += 1))
            .into_stage();
        let t0 = 100 * S;
        let times = [
            t0,
            t0 + S / 2,
            t0 + 12 * S / 10,
            t0 + 37 * S / 10,
            t0 + 4 * S,
        ];
        assert_eq!(drive(&mut nf, &times), 5);
        let got: Vec<_> = log.read(|v| v.iter().map(|x| (x.0, x.1, x.2, x.3)).collect());
        // Due at 101 s (run at 101.2 s, 2 packets counted before), 102 and 103 s missed
        // together (run once at 103.7 s for 2 periods), 104 s (run at 104 s, before the
        // packet at 104 s is counted).
        assert_eq!(
            got,
            [(101, 1, 1012, 2), (103, 2, 1037, 3), (104, 1, 1040, 4)]
        );
    }

    #[test]
    fn events_run_in_due_order_across_a_gap() {
        let log = Strict::new(Vec::new());
        let (a, b, c) = (log.clone(), log.clone(), log.clone());
        let mut nf = pipe::<Raw, ()>()
            .schedule(
                Schedule::new()
                    .at(Timestamp(5 * S), move |f, _| {
                        a.write(|v| v.push(("at5", f.due.0 / S)))
                    })
                    .every_from(
                        Some(Timestamp(2 * S)),
                        Duration::from_secs(2),
                        move |f, _| b.write(|v| v.push(("every2", f.due.0 / S))),
                    )
                    .at(Timestamp(3 * S), move |f, _| {
                        c.write(|v| v.push(("at3", f.due.0 / S)))
                    }),
            )
            .into_stage();
        drive(&mut nf, &[0, S, 10 * S, 11 * S, 12 * S]);
        assert_eq!(
            log.read(|v| v.clone()),
            [("at3", 3), ("at5", 5), ("every2", 10), ("every2", 12)]
        );
    }

    #[test]
    fn a_stage_without_ticks_fires_when_packets_reach_it() {
        let log = Strict::new(Vec::new());
        let l = log.clone();
        let mut nf = pipe::<Raw, ()>()
            .every(Duration::from_millis(10), move |f, _| {
                l.write(|v| v.push(f.due.0))
            })
            .into_stage();
        let mut cx = Cx::default();
        for t in [0u64, 5, 10, 25].map(|ms| ms * 1_000_000) {
            cx.now = Timestamp(t);
            nf.run(at(t), &mut cx);
        }
        assert_eq!(log.read(|v| v.clone()), [10_000_000, 20_000_000]);
    }

    proptest! {
        /// A periodic event's runs are deterministic, on the grid of its period from the
        /// clock's first reading, strictly increasing, each at most one period before the
        /// clock, and together they stand for every period boundary the clock passed.
        #[test]
        fn periodic_runs_cover_every_boundary_once(
            period in 1u64..1000,
            steps in prop::collection::vec(0u64..3000, 1..60),
        ) {
            let times: Vec<u64> = steps.iter().scan(1_000u64, |t, d| { *t += d; Some(*t) }).collect();
            let run = || {
                let log = Strict::new(Vec::new());
                let l = log.clone();
                let mut nf = pipe::<Raw, ()>()
                    .every(Duration::from_nanos(period), move |f, _| l.write(|v| v.push(f)))
                    .into_stage();
                drive(&mut nf, &times);
                log.read(|v| v.clone())
            };
            let fires = run();
            prop_assert_eq!(&fires, &run());
            let (t0, last) = (times[0], *times.last().unwrap());
            let mut prev = t0;
            for f in &fires {
                prop_assert!(f.due.0 > prev && (f.due.0 - t0) % period == 0);
                prop_assert!(f.due.0 <= f.now.0 && f.now.0 - f.due.0 < period);
                prop_assert_eq!(f.periods, (f.due.0 - prev) / period);
                prev = f.due.0;
            }
            prop_assert_eq!(fires.iter().map(|f| f.periods).sum::<u64>(), (last - t0) / period);
        }
    }
}
