//! `fusebox run --cores N` (N > 1): a run on several workers, from files, in memory or live.

use super::{add_rx, conclude, fast_line, mode_json, with_excluded, RunArgs, SynthFlows};
use crate::error::CliError;
use chain::exec::Source;
use packet::Precision;
use ports::pcap::{PcapWriter, Record};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;
use synth::Mode;

/// A run on several workers (`--cores N`, N > 1): what the command set up for it.
pub(super) struct Workers {
    /// `--plan`: the placement the workers run (its replicas are `cores`).
    pub(super) plan: Option<chain::layout::Placement>,
    pub(super) setup: dataplane::Setup,
    pub(super) dispatcher: dataplane::Dispatcher,
    /// Workers.
    pub(super) cores: usize,
    /// The resolution of the output files.
    pub(super) precision: Precision,
    /// Each exit's file, in exit order.
    pub(super) paths: Vec<PathBuf>,
    /// Packets `--filter` kept out.
    pub(super) excluded: Rc<Cell<u64>>,
    pub(super) started: Instant,
    /// Set by SIGINT/SIGTERM: no more input is read.
    pub(super) stop: observe::stop::Flag,
    /// Every worker's latest summary (the workers publish, --metrics and the progress line
    /// read).
    pub(super) board: std::sync::Arc<observe::board::Board>,
    pub(super) server: Option<observe::metrics::Server>,
    pub(super) progress: observe::progress::Progress,
    /// The device ports' counters, for the summary (live runs).
    pub(super) ports: Vec<chain::summary::PortSummary>,
}

impl Workers {
    /// A live run on several workers: this thread receives from the device ports (and any
    /// captures given), dispatches to the workers as offline, and sends what the exits give
    /// to their devices (or files) in canonical order, flushing whenever the ports go idle
    /// and after every batch. A signal or a failed device stops the receiving; every packet
    /// received is finished and sent.
    pub(super) fn live(
        mut self,
        a: &RunArgs,
        mut rx: Vec<chain::exec::PortInput>,
        rx_names: Vec<String>,
        mut tx: BTreeMap<String, Box<dyn ports::port::TxPort>>,
        names: Vec<String>,
        mut errors: Vec<String>,
    ) -> Result<ExitCode, CliError> {
        use std::cell::RefCell;
        use std::collections::VecDeque;
        // Per exit: its device, or its file.
        enum Out {
            Port(String, Box<dyn ports::port::TxPort>),
            File(PcapWriter),
        }
        let mut outs = Vec::new();
        for (name, path) in names.iter().zip(&self.paths) {
            outs.push(match tx.remove(name) {
                Some(port) => Out::Port(name.clone(), port),
                None => Out::File(PcapWriter::create(path, self.precision, 1)?),
            });
        }
        let outs = RefCell::new(outs);
        let failed: RefCell<Option<ports::port::PortError>> = RefCell::new(None);
        let flush = || {
            for o in outs.borrow_mut().iter_mut() {
                if let Out::Port(_, port) = o {
                    if let Err(e) = port.flush() {
                        failed.borrow_mut().get_or_insert(e);
                    }
                }
            }
        };
        let batch = self.setup.options.batch.max(1);
        let mut queue: VecDeque<dataplane::Input> = VecDeque::new();
        let mut rounds = ports::port::Rounds::new(rx.len(), std::time::Duration::from_millis(20));
        let mut since_flush = 0usize;
        let stop = self.stop.clone();
        let mut feed = || {
            if since_flush >= batch {
                flush();
                since_flush = 0;
            }
            if let Some(i) = queue.pop_front() {
                since_flush += 1;
                return dataplane::Next::Input(i);
            }
            if stop.is_set() || failed.borrow().is_some() || rounds.all_ended() {
                return dataplane::Next::End;
            }
            let r = rounds.round(&mut rx, batch, |entry, ts, precision, data| {
                queue.push_back(dataplane::Input {
                    entry,
                    timestamp: ts,
                    precision,
                    data: data.to_vec(),
                })
            });
            if let Err(e) = r {
                failed.borrow_mut().get_or_insert(e);
            }
            match queue.pop_front() {
                Some(i) => {
                    since_flush += 1;
                    dataplane::Next::Input(i)
                }
                None => {
                    flush();
                    since_flush = 0;
                    dataplane::Next::Idle
                }
            }
        };
        eprintln!(
            "live: running on {} workers (SIGINT or SIGTERM stops)",
            self.cores
        );
        let (board, progress) = (&self.board, &mut self.progress);
        let outcome = dataplane::run(
            &self.setup,
            &self.dispatcher,
            &mut feed,
            true,
            |x, ts, _, data| match outs.borrow_mut().get_mut(x) {
                Some(Out::Port(_, port)) => {
                    if let Err(e) = port.send(ts, &data) {
                        failed.borrow_mut().get_or_insert(e);
                    }
                }
                Some(Out::File(w)) => {
                    if let Err(e) = w.write(ts, &data) {
                        eprintln!("fusebox: {e}");
                    }
                }
                None => {}
            },
            |_| progress.tick(board),
        )?;
        flush();
        if let Some(e) = failed.take() {
            errors.push(e.to_string());
        }
        if self.stop.is_set() {
            eprintln!(
                "live: stopped by a signal after {} input packets",
                outcome.summary().totals.input
            );
        }
        let mut ports: Vec<chain::summary::PortSummary> = Vec::new();
        for o in outs.into_inner() {
            match o {
                Out::Port(name, mut port) => {
                    if let Err(e) = port.flush() {
                        errors.push(e.to_string());
                    }
                    ports.push(chain::summary::PortSummary::new(name, &port.counters()));
                }
                Out::File(w) => w.finish()?,
            }
        }
        add_rx(&mut ports, &rx_names, &rx);
        self.ports = ports;
        self.report(a, &outcome, None, errors)
    }

    /// Streams the inputs through the workers; outputs written in canonical order. A
    /// signal stops the reading; every packet read is finished and written.
    pub(super) fn run(
        mut self,
        a: &RunArgs,
        sources: Vec<Source>,
        mut errors: Vec<String>,
    ) -> Result<ExitCode, CliError> {
        let mut writers = Vec::new();
        for p in &self.paths {
            writers.push(PcapWriter::create(p, self.precision, 1)?);
        }
        let mut merge = chain::Merge::new(sources);
        let stop = self.stop.clone();
        let mut feed = || {
            if stop.is_set() {
                dataplane::Next::End
            } else {
                dataplane::Feed::next_input(&mut merge)
            }
        };
        let probe = match self.plan {
            Some(_) => Some(self.probe()?),
            None => None,
        };
        let (board, progress) = (&self.board, &mut self.progress);
        let write = |x: usize, ts: packet::Timestamp, _, data: Vec<u8>| {
            if let Some(w) = writers.get_mut(x) {
                if let Err(e) = w.write(ts, &data) {
                    eprintln!("fusebox: {e}");
                }
            }
        };
        let outcome =
            match (&self.plan, &probe) {
                (Some(placement), Some(probe)) => {
                    dataplane::Pipeline::start(&self.setup, probe, placement, true, Vec::new())?
                        .run(&self.dispatcher, &mut feed, write, |_| progress.tick(board))?
                }
                _ => dataplane::run(
                    &self.setup,
                    &self.dispatcher,
                    &mut feed,
                    true,
                    write,
                    |_| progress.tick(board),
                )?,
            };
        errors.extend(merge.into_errors());
        for w in writers {
            w.finish()?;
        }
        if self.stop.is_set() {
            eprintln!(
                "run: stopped by a signal after {} input packets",
                outcome.summary().totals.input
            );
        }
        self.report(a, &outcome, None, errors)
    }

    /// The in-memory replay: the trace dispatched once, each worker replays its share, pass
    /// after pass (a signal stops every worker at its next batch); a pass's time is its
    /// slowest worker's, the rate every packet over the sum of those times.
    pub(super) fn replay(
        mut self,
        a: &RunArgs,
        memory: &[((usize, usize), Vec<Record>)],
        passes: u64,
        errors: Vec<String>,
    ) -> Result<ExitCode, CliError> {
        let shares = dataplane::predispatch(&self.dispatcher, memory);
        let (mut n, mut secs, mut done) = (0, 0.0, 0);
        let outcome = match &self.plan {
            Some(placement) => {
                let probe = self.probe()?;
                let mut pipe =
                    dataplane::Pipeline::start(&self.setup, &probe, placement, false, shares)?;
                while done < passes && !self.stop.is_set() {
                    let (k, t) = pipe.pass(1)?;
                    n += k;
                    secs += t.as_secs_f64();
                    done += 1;
                    self.progress.tick(&self.board);
                }
                pipe.finish()?
            }
            None => {
                let mut crew = dataplane::ReplayWorkers::start(&self.setup, shares)?;
                while done < passes && !self.stop.is_set() {
                    let (k, slowest, _) = crew.pass(1)?;
                    n += k;
                    secs += slowest.as_secs_f64();
                    done += 1;
                    self.progress.tick(&self.board);
                }
                crew.finish()?
            }
        };
        // The filter ran once over the trace: each pass, or the part of one a stop left
        // done, counts its share of the excluded packets.
        let kept: u64 = memory.iter().map(|(_, r)| r.len() as u64).sum();
        let per_pass = self.excluded.get();
        self.excluded.set(match kept {
            0 => per_pass * done,
            k => (u128::from(per_pass) * u128::from(n) / u128::from(k)) as u64,
        });
        let pps = n as f64 / f64::max(secs, 1e-9);
        let stopped = if self.stop.is_set() {
            ", stopped by a signal"
        } else {
            ""
        };
        eprintln!(
            "replay: {n} packets in {done} passes{stopped}, {secs:.3} s (each pass: its slowest of {} workers), {:.3} Mpps (in memory, no I/O)",
            self.cores,
            pps / 1e6
        );
        self.report(a, &outcome, Some((n, done, secs, pps)), errors)
    }

    /// The chain built once (its entries and exits), for a `--plan` run's stages.
    fn probe(&self) -> Result<chain::Executor, CliError> {
        Ok(chain::Executor::new(
            &self.setup.chain,
            &self.setup.options,
            |_, _| Ok(chain::ExitSink::Count),
        )?)
    }

    /// The summary (counters summed over the workers, and per worker), the mode's line and
    /// the exit status.
    fn report(
        &mut self,
        a: &RunArgs,
        outcome: &dataplane::Outcome,
        replay: Option<(u64, u64, f64, f64)>,
        errors: Vec<String>,
    ) -> Result<ExitCode, CliError> {
        let mut summary = with_excluded(outcome.summary(), self.excluded.get());
        if !self.ports.is_empty() {
            summary.ports = self.ports.clone();
        }
        // The metrics serve the final counters from now on (the packets --filter kept out
        // with worker 0's).
        for (w, o) in outcome.workers.iter().enumerate() {
            let excluded = if w == 0 { self.excluded.get() } else { 0 };
            let mut s = with_excluded(o.summary.clone(), excluded);
            if w == 0 {
                // The device ports are the reader's, listed once.
                s.ports = self.ports.clone();
            }
            self.board.publish(w, s);
        }
        self.board.mark_stopped();
        self.progress.finish();
        let fast = outcome.fast_stats();
        let per_worker: Vec<String> = outcome
            .workers
            .iter()
            .enumerate()
            .map(|(w, o)| {
                let t = &o.summary.totals;
                format!(
                    "{{\"worker\": {w}, \"input\": {}, \"created\": {}, \"output\": {}, \"dropped\": {}, \"held\": {}}}",
                    t.input, t.created, t.output, t.dropped, t.held
                )
            })
            .collect();
        let synth = (self.setup.mode == Mode::Synth).then(|| {
            let (paths, served) = outcome.flow_stats();
            SynthFlows {
                classes: outcome.classes().unwrap_or(0),
                served,
                paths,
                evicted: outcome.flow_evictions(),
            }
        });
        if let Some(f) = &synth {
            eprintln!("{}", f.line(summary.totals.input));
        }
        if a.json {
            let mode = mode_json(synth.as_ref(), fast.as_ref())
                .map(|m| format!(" {m}"))
                .unwrap_or_default();
            let workers = format!("\"workers\": [{}],", per_worker.join(", "));
            let s = summary.to_json();
            match replay {
                Some((n, passes, secs, pps)) => outln!(
                    "{{\"replay\": {{\"packets\": {n}, \"passes\": {passes}, \"stopped\": {}, \"seconds\": {secs}, \"pps\": {pps}, \"cores\": {}}},{mode} {workers} \"summary\": {s}}}",
                    self.stop.is_set(),
                    self.cores
                ),
                None => match s.strip_prefix("{\n") {
                    Some(rest) => outln!("{{\n {mode} {workers}\n{rest}"),
                    None => outln!("{s}"),
                },
            }
        }
        if let Some(f) = &fast {
            eprintln!("{}", fast_line(f));
        }
        if a.trust_switch_tags {
            let (held, again) = outcome.switch_tags();
            eprintln!("switch tags: {held} frames in their tagged class (classification skipped), {again} classified again");
        }
        if !a.json {
            eprint!("{}", summary.to_text());
            for (w, o) in outcome.workers.iter().enumerate() {
                let t = &o.summary.totals;
                eprintln!(
                    "worker {w}: {} in + {} created = {} out + {} dropped + {} held",
                    t.input, t.created, t.output, t.dropped, t.held
                );
            }
            eprintln!("time: {:.3} s", self.started.elapsed().as_secs_f64());
        }
        Ok(conclude(
            self.server.as_ref(),
            a.metrics_linger,
            &self.stop,
            &errors,
            &summary,
        ))
    }
}
