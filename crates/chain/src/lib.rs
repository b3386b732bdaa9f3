//! Chains of network functions: the chain file (NFs, links, entries), NF element graphs
//! built from Click configurations, and the naive executor that runs every NF as written.
//!
//! The naive executor defines FuseBox's equivalence contract (see the README): one input
//! packet at a time, depth first, lower output port first; a virtual clock that is the latest
//! packet timestamp seen; every packet accounted for (in + created = out + drops + held).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod exec;
pub mod file;
pub mod layout;
pub mod nf;
pub mod program;
pub mod reason;
pub mod reflect;
pub mod summary;

pub use exec::{
    Executor, ExitSink, FastOptions, FastStats, FinishError, Handoff, Initial, Merge, MergeRefused,
    NshCounts, ParallelStats, Place, PreparedProgram, Refused, RunOptions, SetupError,
    TranslationSink,
};
pub use file::{
    Attach, ChainError, ChainErrorKind, ChainFile, Device, DeviceSpecError, Endpoint, NoInputError,
};
pub use nf::{BuildError, BuildErrorKind, Nf, PortFault};
pub use reason::ChainReason;
pub use summary::Summary;
