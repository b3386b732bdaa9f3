//! What the planner (`plan`, after NFCompass) decides and the executor runs, as plain data:
//! NFs run side by side on copies of a packet ([`Parallel`]) and the chain cut into stages on
//! workers ([`Placement`]). `plan` produces them; `chain` and `dataplane` run them. They are
//! serde data: `plan::file` writes them into PLAN files (`fusebox run --plan`).

use serde::{Deserialize, Serialize};

/// NFs of the chain run side by side on copies of each packet, their results merged by XOR
/// against the original (NFCompass §IV.B).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parallel {
    /// The groups; an NF is in at most one. NFs in no group run as written.
    pub groups: Vec<Group>,
}

/// NFs that run side by side: consecutive along the chain's links, each one's only way on
/// being the link to the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// Indices into the executor's NFs ([`crate::Executor::nfs`]), in chain order.
    pub nfs: Vec<usize>,
}

/// The chain cut into stages, each on a processor, packets crossing between them in order
/// (a pipeline); with one stage, run-to-completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// The stages in pipeline order; every NF is in exactly one.
    pub stages: Vec<Stage>,
    /// Copies of the whole pipeline, flows spread over them by RSS (1: one pipeline; the
    /// default when a plan file leaves it out).
    #[serde(default = "one")]
    pub replicas: usize,
}

/// One stage of a [`Placement`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Indices into the executor's NFs, in chain order.
    pub nfs: Vec<usize>,
    /// The processor (worker) it runs on.
    pub processor: usize,
}

fn one() -> usize {
    1
}
