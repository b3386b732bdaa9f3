//! Planning chains after NFCompass (Hu and Li): what each NF does to a packet (its action
//! profile), which NFs may run side by side on copies of a packet (dependencies and parallel
//! groups), which elements of NFs placed together can be merged, and where the work runs
//! (placement of the element graph on processors).
//!
//! `plan` reads the chain's graphs and the elements' models; what the executor must run is
//! plain data defined in `chain`, produced here (as `synth` produces `chain::program::Program`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod deps;
pub mod file;
pub mod merge;
pub mod offload;
pub mod place;
pub mod profile;
