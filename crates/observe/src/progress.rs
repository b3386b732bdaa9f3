//! The one-line progress display on stderr: packets per second in and out over the last
//! second, drops, totals; per worker on request.
//!
//! A run loop (or whoever reads the board) calls [`Progress::update`] with the latest
//! snapshots, as often as it likes (the board's ~100 ms is plenty); the line is redrawn in
//! place on a terminal ([`Style::Bar`]), printed once a second as a plain line for logs
//! ([`Style::Lines`]), or not at all ([`Style::Off`]).

use crate::board::{self, Board, Snapshot};
use std::collections::VecDeque;
use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

/// How the line is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Redrawn in place on stderr when it is a terminal; nothing otherwise.
    Bar,
    /// A plain line on stderr once a second (terminal or not: logs, tests).
    Lines,
    /// Nothing.
    Off,
}

impl std::str::FromStr for Style {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" | "bar" => Ok(Style::Bar),
            "lines" => Ok(Style::Lines),
            "off" => Ok(Style::Off),
            o => Err(format!("{o}: expected auto, lines or off")),
        }
    }
}

/// The window rates are measured over.
const WINDOW: Duration = Duration::from_secs(1);

/// One reading of the counters: per worker (index, in, out, dropped).
#[derive(Debug, Clone)]
struct Reading {
    at: Instant,
    workers: Vec<(usize, u64, u64, u64)>,
}

impl Reading {
    fn sum(&self) -> (u64, u64, u64) {
        self.workers
            .iter()
            .fold((0, 0, 0), |(i, o, d), w| (i + w.1, o + w.2, d + w.3))
    }

    /// Worker `w`'s counters (zeros when it had not published).
    fn worker(&self, w: usize) -> (u64, u64, u64) {
        self.workers
            .iter()
            .find(|x| x.0 == w)
            .map_or((0, 0, 0), |x| (x.1, x.2, x.3))
    }
}

/// The progress display.
#[derive(Debug)]
pub struct Progress {
    style: Style,
    per_worker: bool,
    bar: Option<indicatif::ProgressBar>,
    started: Instant,
    /// Readings of the last second, oldest first, plus the newest one before it.
    history: VecDeque<Reading>,
    /// When the last plain line was printed ([`Style::Lines`]).
    printed: Option<Instant>,
    /// When [`Progress::tick`] reads the board next.
    next_tick: Option<Instant>,
}

impl Progress {
    /// A display in `style` (a [`Style::Bar`] on a stderr that is not a terminal shows
    /// nothing); `per_worker` adds each worker's rates.
    pub fn new(style: Style, per_worker: bool) -> Self {
        let style = match style {
            Style::Bar if !std::io::stderr().is_terminal() => Style::Off,
            s => s,
        };
        let bar = (style == Style::Bar).then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            b.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            b
        });
        let started = Instant::now();
        Self {
            style,
            per_worker,
            bar,
            started,
            history: VecDeque::from([Reading {
                at: started,
                workers: Vec::new(),
            }]),
            printed: None,
            next_tick: None,
        }
    }

    /// Whether it shows anything (not `off`, nor a bar on a stderr that is not a terminal):
    /// a reader may skip copying the board when not.
    pub fn is_on(&self) -> bool {
        self.style != Style::Off
    }

    /// A display that shows nothing.
    pub fn off() -> Self {
        Self::new(Style::Off, false)
    }

    /// For a thread that is not a worker (the reader of a multi-worker run): call it as
    /// often as you like (after every batch); at most every [`board::INTERVAL`] it copies
    /// the board's snapshots and redraws (one clock read otherwise, nothing when off).
    #[inline]
    pub fn tick(&mut self, board: &Board) {
        if !self.is_on() {
            return;
        }
        let now = Instant::now();
        if self.next_tick.is_none_or(|t| now >= t) {
            self.next_tick = Some(now + board::INTERVAL);
            self.update_at(now, &board.snapshot());
        }
    }

    /// Takes the counters of `board` (now) and redraws.
    pub fn update(&mut self, board: &Snapshot) {
        self.update_at(Instant::now(), board);
    }

    /// [`Progress::update`] as of `now`.
    pub fn update_at(&mut self, now: Instant, board: &Snapshot) {
        if self.style == Style::Off {
            return;
        }
        let line = self.line_at(now, board);
        match self.style {
            Style::Bar => {
                if let Some(b) = &self.bar {
                    b.set_message(line);
                }
            }
            Style::Lines => {
                if self.printed.is_none_or(|t| now.duration_since(t) >= WINDOW) {
                    self.printed = Some(now);
                    eprintln!("progress: {line}");
                }
            }
            Style::Off => {}
        }
    }

    /// Records the counters of `board` as of `now` and returns the line: rates over the
    /// last second (since the start during the first second), then totals.
    pub fn line_at(&mut self, now: Instant, board: &Snapshot) -> String {
        let reading = Reading {
            at: now,
            workers: board
                .iter()
                .map(|(w, s)| (*w, s.totals.input, s.totals.output, s.totals.dropped))
                .collect(),
        };
        // Keep one reading at least WINDOW old as the base of the rates.
        while self.history.len() > 1 && now.duration_since(self.history[1].at) >= WINDOW {
            self.history.pop_front();
        }
        let base = self.history.front().cloned().unwrap_or_else(|| Reading {
            at: self.started,
            workers: Vec::new(),
        });
        self.history.push_back(reading.clone());
        let secs = now.duration_since(base.at).as_secs_f64();
        let rate = |now: u64, then: u64| {
            if secs > 0.0 {
                now.saturating_sub(then) as f64 / secs
            } else {
                0.0
            }
        };
        let (i, o, d) = reading.sum();
        let (bi, bo, bd) = base.sum();
        let held: u64 = board.iter().map(|(_, s)| s.totals.held).sum();
        let mut line = format!(
            "in {} out {} drop {} | {i} in, {o} out, {d} dropped, {held} held | {:.1} s",
            pps(rate(i, bi)),
            pps(rate(o, bo)),
            pps(rate(d, bd)),
            now.duration_since(self.started).as_secs_f64()
        );
        if self.per_worker && board.len() > 1 {
            for (w, ..) in &reading.workers {
                let (i, o, d) = reading.worker(*w);
                let (bi, bo, bd) = base.worker(*w);
                line.push_str(&format!(
                    " | w{w} in {} out {} drop {}",
                    pps(rate(i, bi)),
                    pps(rate(o, bo)),
                    pps(rate(d, bd))
                ));
            }
        }
        line
    }

    /// Clears the line (the summary follows).
    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A rate in packets per second with an SI prefix: `850 pps`, `12.3 kpps`, `1.52 Mpps`.
pub fn pps(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2} Mpps", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1} kpps", r / 1e3)
    } else {
        format!("{r:.0} pps")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chain::summary::{Summary, Totals};

    fn summary(input: u64, output: u64, dropped: u64) -> Summary {
        Summary {
            nfs: Vec::new(),
            exits: Vec::new(),
            ports: Vec::new(),
            totals: Totals {
                input,
                output,
                dropped,
                balanced: input == output + dropped,
                ..Totals::default()
            },
        }
    }

    #[test]
    fn rates_are_over_the_last_second() {
        let mut p = Progress::new(Style::Lines, true);
        let t0 = p.started;
        let l = p.line_at(
            t0 + Duration::from_millis(500),
            &vec![(0, summary(1000, 900, 100))],
        );
        // 1000 packets in half a second since the start.
        assert!(
            l.starts_with("in 2.0 kpps out 1.8 kpps drop 200 pps |"),
            "{l}"
        );
        assert!(
            l.contains("| 1000 in, 900 out, 100 dropped, 0 held |"),
            "{l}"
        );
        p.line_at(
            t0 + Duration::from_millis(1000),
            &vec![(0, summary(2000, 1900, 100))],
        );
        let l = p.line_at(
            t0 + Duration::from_millis(2000),
            &vec![(0, summary(3_002_000, 3_001_900, 100))],
        );
        // Over the last second: 3 Mpps in and out, no new drops.
        assert!(
            l.starts_with("in 3.00 Mpps out 3.00 Mpps drop 0 pps |"),
            "{l}"
        );
        assert!(l.ends_with("| 2.0 s"), "{l}");
    }

    #[test]
    fn per_worker_rates_on_request() {
        let board = vec![(0, summary(100, 100, 0)), (1, summary(300, 200, 100))];
        let mut p = Progress::new(Style::Lines, true);
        let l = p.line_at(p.started + Duration::from_secs(1), &board);
        assert!(l.contains("| 400 in, 300 out, 100 dropped"), "{l}");
        assert!(l.contains("| w0 in 100 pps out 100 pps drop 0 pps"), "{l}");
        assert!(
            l.contains("| w1 in 300 pps out 200 pps drop 100 pps"),
            "{l}"
        );
        let mut q = Progress::new(Style::Lines, false);
        let l = q.line_at(q.started + Duration::from_secs(1), &board);
        assert!(!l.contains("w0"), "{l}");
    }

    #[test]
    fn tick_reads_the_board_at_most_every_interval() {
        let b = Board::new(2);
        let mut p = Progress::new(Style::Lines, false);
        p.tick(&b);
        assert_eq!(p.history.len(), 2, "the first tick reads the board");
        b.publish(1, summary(5, 5, 0));
        p.tick(&b);
        assert_eq!(p.history.len(), 2, "not again within the interval");
        std::thread::sleep(board::INTERVAL);
        p.tick(&b);
        assert_eq!(p.history.len(), 3);
        assert_eq!(p.history[2].workers, vec![(1, 5, 5, 0)]);
        let mut off = Progress::off();
        off.tick(&b);
        assert_eq!(off.history.len(), 1, "off reads nothing");
    }

    #[test]
    fn styles_parse() {
        assert_eq!("lines".parse::<Style>(), Ok(Style::Lines));
        assert_eq!("auto".parse::<Style>(), Ok(Style::Bar));
        assert_eq!("off".parse::<Style>(), Ok(Style::Off));
        assert!("loud".parse::<Style>().is_err());
    }

    #[test]
    fn rates_read_well() {
        assert_eq!(pps(0.0), "0 pps");
        assert_eq!(pps(12_345.0), "12.3 kpps");
        assert_eq!(pps(1_520_000.0), "1.52 Mpps");
    }
}
