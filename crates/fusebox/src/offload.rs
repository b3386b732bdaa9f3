//! `--parallel-workers N` of `fusebox run` and `fusebox verify` with `--mode parallel`:
//! the planner (`plan::offload`) decides which branches of the parallel groups run on other
//! workers, from a profiling run of the chain over the first packets of the inputs and the
//! measured hand-off cost; the decision is printed on stderr and installed for every
//! executor the command builds in parallel mode (`synth::set_parallel_placement`).

use crate::error::CliError;
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use plan::offload::{offload, Costs, Offload};
use plan::place::measure;
use std::path::PathBuf;

/// Packets per input the profiling run takes.
const SAMPLE: usize = 4096;

/// Milliseconds the profiling run lasts at least.
const PROFILE_MS: u64 = 100;

/// The planner's decision for `chain` on `workers` workers, profiled over the first
/// [`SAMPLE`] packets of each input; installed for the parallel mode.
pub fn place_branches(
    chain: &ChainFile,
    opts: &RunOptions,
    inputs: &[(Endpoint, PathBuf)],
    workers: usize,
) -> Result<Offload, CliError> {
    let build = || Executor::new(chain, opts, |_, _| Ok(ExitSink::Count));
    let probe = build()?;
    let profiles = plan::profile::profiles(&probe);
    let (layout, _) = plan::deps::parallel_with(&probe, &profiles);
    let costs = if workers > 1 && !layout.groups.is_empty() {
        let mut sample = Vec::new();
        for (e, path) in inputs {
            let at = probe
                .entry(e)
                .ok_or_else(|| CliError::Invalid(format!("--input: no entry {e}")))?;
            let mut reader = ports::pcap::PcapReader::open(path)
                .map_err(|err| CliError::context(path.display().to_string(), err))?;
            let mut records = Vec::new();
            while let Some(Ok(r)) = reader.next_record() {
                records.push(r);
                if records.len() == SAMPLE {
                    break;
                }
            }
            if !records.is_empty() {
                sample.push((at, records));
            }
        }
        if sample.is_empty() {
            None
        } else {
            let (mut plain, mut timed) = (build()?, build()?);
            let p = measure::profile(&mut plain, &mut timed, &sample, PROFILE_MS);
            Some(Costs::from_profile(&p, measure::handoff_ns(50_000, 2)))
        }
    } else {
        None
    };
    let decision = offload(&probe, &layout, &profiles, workers, costs.as_ref());
    eprint!("parallel: {}", decision.text());
    synth::set_parallel_placement(decision.placement.clone());
    Ok(decision)
}
