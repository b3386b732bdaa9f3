//! Workers, dispatch and the run loop: inputs → dispatcher → one chain replica per worker.
//!
//! A run on `N` workers ([`run`], [`verify_run`], [`ReplayWorkers`]) builds `N` replicas of
//! the chain, one inside each worker thread (an [`chain::Executor`] is not `Send`; each
//! worker builds its own, tells its NATs which slice of their ranges is theirs
//! ([`elements::WorkerShare`]), then installs the mode), pinned to a core where the system
//! allows. One thread reads the inputs (any [`Feed`]: pcap files merged on timestamps, or a
//! live port), numbers them (the run's input index), and the [`Dispatcher`] picks each
//! packet's worker: the symmetric RSS hash of its 5-tuple modulo `N`, so both directions of
//! a flow meet on one worker, except replies to a NAT's public pool, which go to the worker
//! whose slice holds their destination port. A worker runs its packets one at a time to
//! completion, exactly as a single-core run does; outputs come back tagged with their input
//! index and are written in canonical order (input index, then the order its processing
//! produced them). With `N == 1` the callers keep the single-core path (no threads, no
//! copies).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod dispatch;
pub mod pipeline;
mod replay;
mod run;
mod worker;

pub use dispatch::Dispatcher;
pub use pipeline::{verify_plan, Pipeline};
pub use replay::{predispatch, ReplayWorkers, Share};
pub use run::{run, verify_run, Feed, Input, Next, Outcome};
pub use worker::{share, Error, Setup, WorkerOutcome};
