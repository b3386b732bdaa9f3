//! One worker's replica of the chain: built inside its thread, given its share of the NATs'
//! ranges, the mode installed; and what it hands back at the end.

use chain::summary::Summary;
use chain::{ChainFile, Executor, ExitSink, FastOptions, FastStats, RunOptions, SetupError};
use elements::capability::ShareError;
use std::collections::BTreeMap;
use synth::Mode;

/// What every worker builds: the chain, its options and the mode (cloned into each worker).
#[derive(Debug, Clone)]
pub struct Setup {
    /// Where each worker publishes a snapshot of its counters every ~100 ms and its final
    /// summary (worker `w` at index `w`), for `--metrics` and the progress line; `None`:
    /// nowhere.
    pub board: Option<std::sync::Arc<observe::board::Board>>,
    /// A replay worker checks it after each batch and ends its pass early when it is set
    /// (SIGINT/SIGTERM); `None`: passes always run to their end.
    pub stop: Option<observe::stop::Flag>,
    /// The chain.
    pub chain: ChainFile,
    /// Batch size, reflected exits, defines.
    pub options: RunOptions,
    /// The mode every replica runs in.
    pub mode: Mode,
    /// The fast path's settings (used in [`Mode::Fastpath`]).
    pub fast: FastOptions,
    /// [`Executor::trust_switch_tags`] on every replica.
    pub trust_switch_tags: bool,
}

/// Why a run on several workers could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The chain does not build or wire.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A NAT's range is too small to give every worker a slice.
    #[error("{element}: {source}")]
    Share {
        /// The element (`NF/name`).
        element: String,
        /// Why.
        source: ShareError,
    },
    /// A worker failed (its replica did not build, or it panicked).
    #[error("worker {worker}: {message}")]
    Worker {
        /// Which worker.
        worker: usize,
        /// What happened.
        message: String,
    },
    /// A plan that cannot run as asked ([`crate::pipeline::check`]).
    #[error("the plan cannot run: {0}")]
    Plan(String),
    /// A verification run's own error (an input that cannot be opened, no entry, ...).
    #[error(transparent)]
    Run(#[from] synth::verify::RunError),
}

/// What one worker did, for the run's summary.
#[derive(Debug, Clone)]
pub struct WorkerOutcome {
    /// Its counters.
    pub summary: Summary,
    /// Its replica's final state per NF.
    pub state: BTreeMap<String, Vec<String>>,
    /// What its fast path did (fastpath mode).
    pub fast: Option<FastStats>,
    /// Remembered flow paths and the packets they served (synth mode).
    pub flows: (usize, u64),
    /// Flows its established-flow table forgot at its bound (synth mode).
    pub flow_evictions: u64,
    /// Traffic classes of its synthesized program (synth mode).
    pub classes: Option<usize>,
    /// Switch-tagged frames: (whose class held, classified again).
    pub switch_tags: (u64, u64),
}

impl WorkerOutcome {
    /// The outcome of the replica `ex` (whose program had `classes` classes).
    pub(crate) fn of(ex: &Executor, classes: Option<usize>) -> WorkerOutcome {
        WorkerOutcome {
            summary: ex.summary(),
            state: ex.state_dump(),
            fast: ex.fast_stats(),
            flows: ex.flow_stats(),
            flow_evictions: ex.flow_evictions(),
            classes,
            switch_tags: ex.switch_tag_counts(),
        }
    }
}

/// Tells every element with a worker share of `ex` that it is worker `w` of `n` (its NATs
/// then allocate from slice `w` of their ranges). Call it on a replica before a mode is
/// installed; on a probe replica it checks that every range can be split.
pub fn share(ex: &mut Executor, w: usize, n: usize) -> Result<(), Error> {
    for g in 0..ex.element_count() {
        let element = ex.element_name(g);
        if let Some(s) = ex.element_mut(g).worker_share() {
            s.narrow(w, n)
                .map_err(|source| Error::Share { element, source })?;
        }
    }
    Ok(())
}

/// Worker `w` of `n`'s replica: built with `sink` for its exits, narrowed to its share,
/// the mode installed. Returns it with its program's class count (synth).
pub(crate) fn replica(
    setup: &Setup,
    w: usize,
    n: usize,
    sink: fn() -> ExitSink,
) -> Result<(Executor, Option<usize>), Error> {
    let mut ex = Executor::new(&setup.chain, &setup.options, |_, _| Ok(sink()))?;
    if n > 1 {
        share(&mut ex, w, n)?;
    }
    let report = setup.mode.install(&mut ex, setup.fast.clone());
    ex.trust_switch_tags(setup.trust_switch_tags);
    Ok((ex, report.map(|r| r.classes.len())))
}

/// Pins the calling thread to core `w` (modulo the cores there are); best effort.
pub(crate) fn pin(w: usize) {
    if let Some(ids) = core_affinity::get_core_ids() {
        if !ids.is_empty() {
            let _ = core_affinity::set_for_current(ids[w % ids.len()]);
        }
    }
}

/// The text of a worker's panic payload.
pub(crate) fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    format!("panicked: {msg}")
}

/// Sums what the workers did: counters, state (each line prefixed with its worker), the
/// fast path's counts.
pub(crate) fn merged_state(workers: &[WorkerOutcome]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (w, o) in workers.iter().enumerate() {
        for (nf, lines) in &o.state {
            let v = out.entry(nf.clone()).or_default();
            v.extend(lines.iter().map(|l| format!("worker {w}: {l}")));
        }
    }
    out
}

/// The fast path's counts over all workers.
pub(crate) fn merged_fast(workers: &[WorkerOutcome]) -> Option<FastStats> {
    let mut it = workers.iter().filter_map(|o| o.fast.clone());
    let mut s = it.next()?;
    for f in it {
        s.hits += f.hits;
        s.recorded += f.recorded;
        s.consolidated += f.consolidated;
        s.guard_misses += f.guard_misses;
        s.events += f.events;
        s.closed += f.closed;
        s.expired += f.expired;
        s.evictions += f.evictions;
        s.entries += f.entries;
        for (r, n) in f.refused {
            *s.refused.entry(r).or_default() += n;
        }
    }
    Some(s)
}
