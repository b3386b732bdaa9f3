//! The execution modes of a chain, and the one place a mode is installed in an executor.
//!
//! Every command that runs a chain (`run`, `verify`, `bench`, `explain`, the tests) builds
//! an [`Executor`] in naive mode and calls [`Mode::install`]. A new mode is one variant
//! here, its name in [`Mode::name`]/[`FromStr`], and its set-up in [`Mode::install`] (the
//! executor side: see the `chain::exec` module documentation).

use crate::Report;
use chain::layout::{Merged, Parallel, Placement};
use chain::{Executor, FastOptions};
use std::fmt;
use std::str::FromStr;
use std::sync::RwLock;

/// An execution mode a chain can run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Every NF as written, one after the other (the reference all modes must match).
    Naive,
    /// SNF synthesis ([`crate::install`]): one classifier and one write set per traffic
    /// class.
    Synth,
    /// SpeedyBox runtime consolidation ([`chain::Executor::enable_fastpath`]): a flow's
    /// first packet walks the chain, later ones get one consolidated action.
    Fastpath,
    /// NFCompass' parallel branches ([`chain::Executor::enable_parallel`]): the groups the
    /// registered planner ([`set_parallel_planner`]) finds run side by side on copies of
    /// each packet, merged by XOR; every other NF runs as written.
    Parallel,
    /// NFCompass' element merging ([`chain::Executor::enable_merged`]): the elements the
    /// registered planner ([`set_merge_planner`]) finds redundant (a header check already
    /// passed, a lookup already answered) are stepped over; everything else runs as
    /// written.
    Merged,
}

/// What [`Mode::Parallel`] asks for a chain's groups: a function of the executor (built
/// naive) returning the layout. `synth` cannot call the planner itself (`plan` depends on
/// `synth`), so the program that links `plan` registers it at start-up (`fusebox`, the
/// tests), as operator NF classes are registered in `elements::registry`.
pub type ParallelPlanner = fn(&Executor) -> Parallel;

static PLANNER: RwLock<Option<ParallelPlanner>> = RwLock::new(None);

/// Registers the planner [`Mode::Parallel`] asks for groups (replacing an earlier one).
/// Without one, [`Mode::Parallel`] installs no group: the chain runs as written, which is
/// always correct.
pub fn set_parallel_planner(planner: ParallelPlanner) {
    if let Ok(mut p) = PLANNER.write() {
        *p = Some(planner);
    }
}

static PLACEMENT: RwLock<Option<Placement>> = RwLock::new(None);

/// Sets where [`Mode::Parallel`]'s branches run: `Some` puts each NF on the placement's
/// processor, a branch on another processor than its group's first NF running on a helper
/// thread (`chain::Executor::enable_parallel_placed`; the planner's `plan::offload` decides,
/// for the chain the program runs); `None` (the default) runs every branch in the
/// executor's thread.
pub fn set_parallel_placement(placement: Option<Placement>) {
    if let Ok(mut p) = PLACEMENT.write() {
        *p = placement;
    }
}

/// The placement [`Mode::Parallel`] installs ([`set_parallel_placement`]).
pub fn parallel_placement() -> Option<Placement> {
    PLACEMENT.read().ok().and_then(|p| p.clone())
}

/// The groups the registered planner finds for `ex`'s chain (none without a planner).
pub fn parallel_layout(ex: &Executor) -> Parallel {
    let planner = PLANNER.read().ok().and_then(|p| *p);
    planner.map(|f| f(ex)).unwrap_or_default()
}

/// What [`Mode::Merged`] asks for the elements to step over: a function of the executor
/// (built naive), registered as [`ParallelPlanner`] is (`plan::merge`).
pub type MergePlanner = fn(&Executor) -> Merged;

static MERGE_PLANNER: RwLock<Option<MergePlanner>> = RwLock::new(None);

/// Registers the planner [`Mode::Merged`] asks (replacing an earlier one). Without one,
/// [`Mode::Merged`] steps over nothing: the chain runs as written.
pub fn set_merge_planner(planner: MergePlanner) {
    if let Ok(mut p) = MERGE_PLANNER.write() {
        *p = Some(planner);
    }
}

/// The elements the registered merge planner steps over in `ex`'s chain (none without one).
pub fn merge_layout(ex: &Executor) -> Merged {
    let planner = MERGE_PLANNER.read().ok().and_then(|p| *p);
    planner.map(|f| f(ex)).unwrap_or_default()
}

impl Mode {
    /// Every mode, the reference first.
    pub const ALL: [Mode; 5] = [
        Mode::Naive,
        Mode::Synth,
        Mode::Fastpath,
        Mode::Parallel,
        Mode::Merged,
    ];

    /// The modes the throughput benchmarks compare chain by chain (parallel branches have
    /// their own scenario, `fusebox bench --scenario parallel`).
    pub const BENCHED: [Mode; 3] = [Mode::Naive, Mode::Synth, Mode::Fastpath];

    /// The mode's name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Naive => "naive",
            Mode::Synth => "synth",
            Mode::Fastpath => "fastpath",
            Mode::Parallel => "parallel",
            Mode::Merged => "merged",
        }
    }

    /// Installs the mode in `ex` (built naive by [`Executor::new`]): synthesis for
    /// [`Mode::Synth`] (its report returned; its established-flow table bounded by
    /// `fast.max_flows`), the fast path with `fast` for [`Mode::Fastpath`], the planner's
    /// groups for [`Mode::Parallel`] (groups the executor refuses run as written; branches
    /// placed as [`set_parallel_placement`] says), the merge planner's bypasses for
    /// [`Mode::Merged`] (likewise), nothing for [`Mode::Naive`]. It cannot fail.
    pub fn install(self, ex: &mut Executor, fast: FastOptions) -> Option<Report> {
        match self {
            Mode::Naive => None,
            Mode::Synth => {
                ex.limit_flows(fast.max_flows);
                Some(crate::install(ex))
            }
            Mode::Fastpath => {
                ex.enable_fastpath(fast);
                None
            }
            Mode::Parallel => {
                let layout = parallel_layout(ex);
                ex.enable_parallel_placed(&layout, parallel_placement().as_ref());
                None
            }
            Mode::Merged => {
                let merged = merge_layout(ex);
                ex.enable_merged(&merged);
                None
            }
        }
    }
}

impl From<bool> for Mode {
    /// `true` is [`Mode::Synth`], `false` [`Mode::Naive`].
    fn from(synth: bool) -> Mode {
        if synth {
            Mode::Synth
        } else {
            Mode::Naive
        }
    }
}

/// A mode name that is none of [`Mode::ALL`]'s (the text given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode `{0}`: expected naive, synth, fastpath, parallel or merged")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        match s.trim() {
            "naive" => Ok(Mode::Naive),
            "synth" => Ok(Mode::Synth),
            "fastpath" => Ok(Mode::Fastpath),
            "parallel" => Ok(Mode::Parallel),
            "merged" => Ok(Mode::Merged),
            _ => Err(UnknownMode(s.to_string())),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
