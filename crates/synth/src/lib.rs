//! SNF synthesis: stitch the NF graphs of a chain into one graph, walk it from every entry
//! (SNF Algorithms 1 and 2, with an exact intersect), and run the chain as one classifier plus
//! one write set per traffic class.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
pub mod export;
mod mode;
pub mod openflow;
pub mod testgen;
pub mod verify;

pub mod show;
mod walk;

use chain::Executor;
pub use mode::{
    merge_layout, parallel_layout, parallel_placement, set_merge_planner, set_parallel_placement,
    set_parallel_planner, MergePlanner, Mode, ParallelPlanner, UnknownMode,
};
pub use walk::{synthesize, ClassReport, Synthesis};

/// What synthesis made of a chain (for `fusebox synth` and `explain`).
pub type Report = Synthesis;

/// Synthesizes the chain `ex` runs and installs the result in it, so that `ex` then runs in
/// `synth` mode: entries whose traffic classes could be derived run their program, the rest
/// (and packets handed to opaque elements) run naive. Synthesis cannot fail: what it cannot
/// derive runs naive, as the report says.
pub fn install(ex: &mut Executor) -> Report {
    let s = synthesize(ex);
    ex.install(s.program.clone());
    s
}
