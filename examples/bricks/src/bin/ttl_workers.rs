//! NetBricks' Listing 2 with FuseBox as a library: build the TTL NF's graph, bind a capture
//! file as the receive port and another as the transmit port, run on worker threads.
//!
//! ```text
//! ttl_workers IN.pcap OUT.pcap [WORKERS]     (WORKERS: default 2)
//! ```
//!
//! One worker reads the capture (a port is read by one worker, as a NIC queue is pinned to
//! one core); a shuffle by flow sends each packet to worker `RSS hash mod WORKERS`, which runs
//! the TTL NF (`bricks::ttl`, Listing 1) on it, so a flow is processed by one worker and keeps
//! its order. Output frames keep their capture timestamps (nanoseconds); the order between
//! flows depends on the workers' timing. Prints what each worker did.

use bricks::ttl;
use operators::runtime::{by_flow, Runtime};
use operators::{pipe, Raw};
use ports::port::{PcapRx, PcapTx};
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (input, output, workers) = match &args[..] {
        [i, o] => (i, o, Ok(2)),
        [i, o, n] => (i, o, n.parse::<usize>()),
        _ => {
            eprintln!("usage: ttl_workers IN.pcap OUT.pcap [WORKERS]");
            return ExitCode::from(2);
        }
    };
    let Ok(workers @ 1..) = workers else {
        eprintln!("ttl_workers: WORKERS: expected a whole number of 1 or more");
        return ExitCode::from(2);
    };
    match run(Path::new(input), Path::new(output), workers) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ttl_workers: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(input: &Path, output: &Path, workers: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut rt = Runtime::new(workers);
    rt.rx(PcapRx::open(input)?);
    rt.tx(PcapTx::create(output, packet::Precision::Nano)?);
    // The graph: receive → shuffle by flow → TTL NF → transmit port 0.
    let report = rt.run(|w| {
        pipe::<Raw, ()>()
            .shuffle(w, by_flow(), |_, rest| rest.then(ttl::pipeline()))
            .into_stage()
    })?;
    for (i, w) in report.workers.iter().enumerate() {
        println!(
            "worker {i}: read {}, processed {}, sent {}, dropped {:?}",
            w.received,
            w.shuffled_in,
            w.sent.iter().sum::<u64>(),
            w.drops
        );
    }
    println!(
        "in {} out {} dropped {:?}",
        report.rx.iter().map(|c| c.rx_packets).sum::<u64>(),
        report.sent(),
        report.drops()
    );
    if let Some(e) = report.errors.first() {
        return Err(e.clone().into());
    }
    Ok(())
}
