//! Running a loaded stage on one frame through `BPF_PROG_TEST_RUN`: the verdict, the frame
//! as the program left it and the kernel's time per run.

use libbpf_rs::{ProgramInput, ProgramMut};

use crate::load::{Error, Instance, Result};
use crate::Stage;

/// What one test run gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    /// The program's return value (XDP_* or TC_ACT_*; TC_ACT_UNSPEC is `u32::MAX`).
    pub ret: u32,
    /// The frame after the program.
    pub frame: Vec<u8>,
    /// Mean time per run in nanoseconds, as the kernel measured it.
    pub duration_ns: u64,
}

/// Room for what a stage may add to a frame (outer headers, NSH).
const GROWTH: usize = 512;

/// Runs `prog` on `frame`, `repeat` times (0 = once).
pub fn run_program(prog: &ProgramMut<'_>, frame: &[u8], repeat: u32) -> Result<RunOutput> {
    let mut out = vec![0u8; frame.len() + GROWTH];
    let input = ProgramInput {
        data_in: Some(frame),
        data_out: Some(&mut out),
        repeat,
        ..Default::default()
    };
    let o = prog.test_run(input).map_err(|source| Error::Bpf {
        what: format!("test run of {:?}", prog.name()),
        source,
    })?;
    let frame = o.data.map(|d| d.to_vec()).unwrap_or_default();
    Ok(RunOutput {
        ret: o.return_value,
        frame,
        duration_ns: u64::try_from(o.duration.as_nanos()).unwrap_or(u64::MAX),
    })
}

impl Instance {
    /// Runs `stage` (loading it if needed) on `frame` through `BPF_PROG_TEST_RUN`, `repeat`
    /// times (0 = once). Maps are the instance's: the run reads and writes them.
    pub fn test_run(&mut self, stage: Stage, frame: &[u8], repeat: u32) -> Result<RunOutput> {
        self.load(stage)?;
        let prog = self.program(stage)?;
        run_program(&prog, frame, repeat)
    }
}
