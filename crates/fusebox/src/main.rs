//! `fusebox`: run chains of network functions written as Click configurations.
#![forbid(unsafe_code)]

/// `println!` that ignores a closed standard output (`fusebox ... | head` is not an error).
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// mimalloc instead of the system allocator (see the README's performance section).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod agent_cmd;
mod bench_cmd;
mod chain_cmd;
mod classify_cmd;
mod controller_cmd;
mod elements_cmd;
mod error;
mod etcd_args;
mod explain_cmd;
mod gen_cmd;
mod offload;
mod pki_cmd;
mod plan_cmd;
mod run_cmd;
mod synth_cmd;
mod verify_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// FuseBox runs chains of network functions (Click configurations wired together by a chain
/// file) and gives the same packets as running each NF on its own — only faster.
#[derive(Parser, Debug)]
#[command(
    name = "fusebox",
    version,
    after_help = "Examples:
  fusebox gen -o trace.pcap --packets 10000 --flows 100 --mix tcp=1,udp=1
  fusebox check examples/fig5/chain.toml
  fusebox run examples/fig5/chain.toml --input napt.eth0=trace.pcap
  fusebox run examples/fig5/chain.toml --input napt.eth0=trace.pcap --reflect lb.eth1 --json
  fusebox run examples/routers/chain.toml --input r1.eth0=trace.pcap --replay 20
  fusebox run examples/fig5/chain.toml --input napt.eth0=trace.pcap --mode synth
  fusebox verify examples/fig5/chain.toml --input napt.eth0=trace.pcap --reflect lb.eth1
  fusebox run router.click --input eth0=trace.pcap --output eth1=out.pcap
  fusebox plan examples/fig5/chain.toml
  fusebox elements DecIPTTL
  fusebox controller examples/sfc/fig5-10.json --dry-run
  fusebox pki --dir pki --hosts server1,server2"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a chain (or a single Click configuration) over pcap inputs.
    Run(run_cmd::RunArgs),
    /// Parse and validate a chain; print it and its NFs' element graphs.
    Check(run_cmd::CheckArgs),
    /// Synthesize a chain (SNF): print its traffic classes, their writes and where they end.
    Synth(synth_cmd::SynthArgs),
    /// Explain which traffic class a packet falls in and what the chain does to it.
    Explain(explain_cmd::ExplainArgs),
    /// Plan a chain after NFCompass: the NFs' action profiles (Table II), their dependencies
    /// field by field (Table III) and the groups that may run side by side; with --profile,
    /// the placement on workers from measured costs (pipeline stages or replicas, predicted
    /// rates); or a placement by hand; either written as a PLAN file for `fusebox run --plan`.
    Plan(plan_cmd::PlanArgs),
    /// Generate a synthetic trace (pcap).
    Gen(gen_cmd::GenArgs),
    /// Run a chain in several modes (naive, synth) and compare outputs, drops, counters and
    /// state: exit 0 when identical, 4 when different, 1 on errors.
    Verify(verify_cmd::VerifyArgs),
    /// Replay the papers' experiments in memory on one core (SNF Fig. 7 and 8, NetBricks'
    /// TTL and LPM NFs), naive and synthesized, against a reference loop: rates, latency
    /// percentiles, same-run ratios, JSON records and PNG charts.
    Bench(bench_cmd::BenchArgs),
    /// Classify a ClassBench header trace against a ClassBench filter set: one line per
    /// header with the first matching rule (0-based, -1 for none); the rate on stderr.
    Classify(classify_cmd::ClassifyArgs),
    /// List the element classes (one line each), or describe one: arguments, what it does,
    /// ports, drop reasons, synthesis model and fast-path handling.
    Elements(elements_cmd::ElementsArgs),
    /// Chains across hosts (NSH, after Chaining-Box): validate a chain file (--check),
    /// print the stages and map entries each host's agent would install (--dry-run), or run
    /// the controller on etcd (--etcd URL --ca --cert --key [--once]).
    Controller(controller_cmd::ControllerArgs),
    /// Make a CA and the certificates of the control plane's mutual TLS (etcd, controller,
    /// etcd's root user for `chain access`, one per agent).
    Pki(pki_cmd::PkiArgs),
    /// One host's agent of the chains across hosts: registers its SFs in etcd under a lease,
    /// keeps its data plane matching its plan, publishes its status.
    Agent(agent_cmd::AgentArgs),
    /// The chains across hosts: `fusebox chain status` shows paths, entries and counters.
    Chain(chain_cmd::ChainArgs),
}

fn main() -> ExitCode {
    // The NFs written with operators (examples/bricks) are element classes like Click's:
    // configurations and chain files name them.
    if let Err(e) = bricks::register() {
        eprintln!("fusebox: error: {e}");
        return ExitCode::from(1);
    }
    // `--mode parallel` asks the planner for its groups (synth cannot call plan itself).
    synth::set_parallel_planner(|ex| plan::deps::parallel(ex).0);
    // `--mode merged` asks it for the elements to step over.
    synth::set_merge_planner(plan::merge::merged);
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Run(a) => run_cmd::run(a),
        Command::Check(a) => run_cmd::check(a),
        Command::Synth(a) => synth_cmd::run(a),
        Command::Explain(a) => explain_cmd::run(a),
        Command::Plan(a) => plan_cmd::run(a),
        Command::Verify(a) => verify_cmd::verify(a),
        Command::Bench(a) => bench_cmd::run(a),
        Command::Classify(a) => classify_cmd::run(a),
        Command::Elements(a) => elements_cmd::run(a),
        Command::Controller(a) => controller_cmd::run(a),
        Command::Pki(a) => pki_cmd::run(a),
        Command::Agent(a) => agent_cmd::run(a),
        Command::Chain(a) => chain_cmd::run(a),
        Command::Gen(a) => gen_cmd::run(a).map(|s| {
            eprintln!("{s}");
            ExitCode::SUCCESS
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fusebox: error: {e}");
            ExitCode::from(1)
        }
    }
}
