//! `fusebox run` and `fusebox check`.

use crate::error::CliError;
use chain::exec::Source;
use chain::summary::Summary;
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use clap::Args;
use elements::pcapfilter::PcapFilter;
use packet::Precision;
use ports::pcap::Record;
use ports::pcap::{PcapReader, PcapWriter};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

mod workers;
use workers::Workers;

/// Execution mode: [`synth::Mode`], the one mode type every command installs.
pub use synth::Mode;

/// The `--mode` parser: clap's list of possible values (with their help) mapped to
/// [`Mode`].
fn mode_parser() -> impl clap::builder::TypedValueParser<Value = Mode> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new([
        PossibleValue::new("naive")
            .help("Every NF as written, one after the other (the reference all modes must match)"),
        PossibleValue::new("synth")
            .help("SNF synthesis: one classifier and one write set per traffic class"),
        PossibleValue::new("fastpath").help(
            "SpeedyBox runtime consolidation: a flow's first packet walks the chain, later ones get one consolidated action",
        ),
        PossibleValue::new("parallel").help(
            "NFCompass parallel branches: independent NFs run on copies of each packet, merged by XOR",
        ),
        PossibleValue::new("merged").help(
            "NFCompass element merging: header checks already passed and lookups already answered are stepped over",
        ),
    ])
    .map(|s| s.parse::<Mode>().unwrap_or(Mode::Naive))
}

/// Arguments of `fusebox run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Chain file (.toml) or a single Click configuration (.click).
    pub chain: PathBuf,
    /// Input capture for an entry interface: NF.IFACE=FILE (IFACE=FILE for a single Click file). Repeatable.
    #[arg(short, long = "input", value_name = "NF.IFACE=FILE")]
    pub inputs: Vec<String>,
    /// Run live on a Linux network device: NF.IFACE=DEV[,afxdp|afpacket|afpacket-tc] (IFACE=DEV for a
    /// single Click file). Frames received on DEV enter the chain at NF.IFACE (when the NF
    /// reads it), packets leaving by NF.IFACE are sent on DEV (when the NF writes it).
    /// Repeatable; overrides the chain file's `[[device]]` for the same interface. Without a
    /// kind: AF_XDP where the device allows it, else AF_PACKET (the run says which).
    #[arg(long = "iface", value_name = "NF.IFACE=DEV[,KIND]")]
    pub ifaces: Vec<String>,
    /// Output capture for an exit: NF.IFACE=FILE. Exits not named go to NF.IFACE.pcap in --out-dir.
    #[arg(short, long = "output", value_name = "NF.IFACE=FILE")]
    pub outputs: Vec<String>,
    /// Directory for default output files.
    #[arg(long, default_value = ".")]
    pub out_dir: PathBuf,
    /// Execution mode.
    #[arg(long, default_value_t = Mode::Naive, value_parser = mode_parser())]
    pub mode: Mode,
    /// Packets leaving at this exit come back in at the same interface as replies. Repeatable.
    #[arg(long, value_name = "NF.IFACE")]
    pub reflect: Vec<String>,
    /// Load the inputs into memory once and push them through N times without I/O; report packets per second.
    #[arg(long, value_name = "N")]
    pub replay: Option<u64>,
    /// Override a `define` of the Click configurations: NAME=VALUE. Repeatable.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
    /// Packets per batch.
    #[arg(long, default_value_t = packet::DEFAULT_BATCH_SIZE)]
    pub batch: usize,
    /// Worker threads, each with its own replica of the chain (flows kept on one worker by
    /// a symmetric RSS hash; NATs split their port ranges). Outputs stay in canonical order.
    /// Default: 1 offline, every core live (with devices).
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// With --mode parallel: workers the parallel groups' branches may use (the executor's
    /// thread and N-1 helper threads, per replica). The planner profiles the chain over the
    /// inputs' first packets and puts a branch on a helper only where no earlier NF of its
    /// group may drop and its cost is above the hand-off's; it prints why, per branch.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub parallel_workers: usize,
    /// Run a placement (a PLAN file, `fusebox plan --out`): each stage on a worker thread of
    /// its own holding its NFs, packets crossing stages in order, the pipeline copied
    /// `replicas` times (flows spread as with --cores). Outputs as --cores replicas gives.
    #[arg(long, value_name = "PLAN", conflicts_with = "cores")]
    pub plan: Option<PathBuf>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress line (the same as `--progress off`).
    #[arg(short, long)]
    pub quiet: bool,
    /// The progress line on stderr (packets/s in and out over the last second, drops,
    /// totals): `auto` redraws it in place when stderr is a terminal, `lines` prints it once
    /// a second as a plain line (for logs), `off` shows nothing.
    #[arg(long, value_name = "auto|lines|off", default_value = "auto")]
    pub progress: observe::progress::Style,
    /// The progress line also shows each worker's rates (when the run has several).
    #[arg(long)]
    pub progress_workers: bool,
    /// Serve the run's counters (the summary's: chain, per NF, element, drop reason, exit and
    /// worker) in the Prometheus text format at http://ADDR/metrics while it runs and until
    /// it exits. Port 0 picks a free port; the address is printed on stderr.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics: Option<String>,
    /// With --metrics: after the run has stopped and printed its summary, keep serving the
    /// final counters for this many seconds before exiting (a signal ends the wait).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        requires = "metrics"
    )]
    pub metrics_linger: f64,
    /// Only input packets matching this tcpdump expression enter the chain; the others count
    /// as dropped (`filter-excluded`), so in = out + drops still holds.
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Fast path: which packet of a flow is recorded (`second`: a flow's first packet takes
    /// the chain unrecorded and the flow is remembered as seen; `first`; or `handshake`: for
    /// TCP the first after the handshake).
    #[arg(long, value_name = "second|first|handshake", default_value = "second")]
    pub initial: String,
    /// Synth and fast path: most flows in the flow table (synth's remembered flows, the fast
    /// path's global table); the oldest is evicted beyond that, counted as `evicted`.
    #[arg(long, value_name = "N", default_value_t = 1 << 16)]
    pub max_flows: usize,
    /// Fast path: seconds (virtual time) after which an unused flow entry is removed.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub idle: f64,
    /// Fast path: run the state functions of a flow's later NFs on a second core.
    #[arg(long)]
    pub parallel_states: bool,
    /// Synth mode behind a switch programmed with `fusebox synth --openflow`: frames
    /// arriving with a VLAN tag carry their class (id = 1 + class index); the tag is taken
    /// off and, when the frame is in that class, the entry's classification is skipped.
    #[arg(long)]
    pub trust_switch_tags: bool,
    /// NSH-aware service function (also `nsh = true` in the chain file): frames arriving
    /// with an NSH (over Ethernet transport or VXLAN-GPE) enter the chain without it, and
    /// every packet sent because of one leaves with its NSH (SI − 1) and transport put back.
    /// Frames without an NSH run as they are. One core.
    #[arg(long)]
    pub nsh: bool,
    /// NSH-unaware service function beside a NAT-aware proxy: tell the proxy of the eBPF
    /// stages instance INSTANCE (pinned under /sys/fs/bpf/fusebox/INSTANCE, as the agent
    /// names it) each flow the chain rewrites, before the first rewritten packet leaves: the
    /// Enc finds the NSH its Dec kept for the flow as it arrived under the flow as it leaves.
    /// One core; needs root.
    #[arg(long, value_name = "INSTANCE")]
    pub tell_proxy: Option<String>,
}

impl RunArgs {
    /// The fast-path settings of `--initial`, `--max-flows` and `--idle`.
    pub fn fast_options(&self) -> Result<chain::FastOptions, CliError> {
        let initial = match self.initial.as_str() {
            "first" => chain::Initial::First,
            "second" => chain::Initial::Second,
            "handshake" => chain::Initial::AfterHandshake,
            o => {
                return Err(CliError::Invalid(format!(
                    "--initial {o}: expected second, first or handshake"
                )))
            }
        };
        if self.idle.is_nan() || self.idle < 0.0 {
            return Err(CliError::Invalid(format!(
                "--idle {}: expected seconds >= 0",
                self.idle
            )));
        }
        Ok(chain::FastOptions {
            max_flows: self.max_flows.max(1),
            idle_ns: (self.idle * 1e9) as u64,
            initial,
            parallel: self.parallel_states,
        })
    }
}

/// Arguments of `fusebox check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Chain file (.toml) or a single Click configuration (.click).
    pub chain: PathBuf,
    /// Override a `define` of the Click configurations: NAME=VALUE. Repeatable.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
}

pub(crate) fn load_chain(path: &Path) -> Result<ChainFile, CliError> {
    if path.extension().is_some_and(|e| e == "click") {
        if !path.exists() {
            return Err(CliError::Invalid(format!(
                "{}: no such file",
                path.display()
            )));
        }
        Ok(ChainFile::single(path))
    } else {
        ChainFile::load(path).map_err(CliError::from)
    }
}

pub(crate) fn parse_defines(d: &[String]) -> Result<Vec<(String, String)>, CliError> {
    d.iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.trim_start_matches('$').to_string(), v.to_string()))
                .ok_or_else(|| CliError::Invalid(format!("--define {s}: expected NAME=VALUE")))
        })
        .collect()
}

/// `--reflect NF.IFACE` arguments.
pub(crate) fn parse_reflect(r: &[String]) -> Result<Vec<Endpoint>, CliError> {
    r.iter()
        .map(|r| {
            Endpoint::parse(r)
                .ok_or_else(|| CliError::Invalid(format!("--reflect {r}: expected NF.IFACE")))
        })
        .collect()
}

/// `NF.IFACE=FILE` (or `IFACE=FILE` when the chain has one NF).
pub(crate) fn parse_binding(
    s: &str,
    chain: &ChainFile,
    flag: &str,
) -> Result<(Endpoint, PathBuf), CliError> {
    let (ep, file) = s
        .split_once('=')
        .ok_or_else(|| CliError::Invalid(format!("{flag} {s}: expected NF.IFACE=FILE")))?;
    let ep = match Endpoint::parse(ep) {
        Some(e) if chain.nfs.iter().any(|n| n.name == e.nf) => e,
        _ if chain.nfs.len() == 1 => Endpoint {
            nf: chain.nfs[0].name.clone(),
            iface: ep.to_string(),
        },
        _ => {
            return Err(CliError::Invalid(format!(
                "{flag} {s}: expected NF.IFACE=FILE with a known NF"
            )))
        }
    };
    Ok((ep, PathBuf::from(file)))
}

/// Where the exit `name` (a `ToDump`'s own file when `dump`) is written.
fn exit_path(
    name: &str,
    dump: Option<&PathBuf>,
    outputs: &[(Endpoint, PathBuf)],
    out_dir: &Path,
) -> PathBuf {
    match dump {
        Some(p) => p.clone(),
        None => outputs
            .iter()
            .find(|(e, _)| e.to_string() == name)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| out_dir.join(format!("{name}.pcap"))),
    }
}

/// The executor of a run. Exits bound to a device (`tx`) send there, the others are written
/// to their pcap files; with `paths`, exits only count and the files they would be written
/// to are listed there, in exit order (a replay, or a run on several workers, which writes
/// them itself).
fn build(
    chain: &ChainFile,
    opts: &RunOptions,
    outputs: &[(Endpoint, PathBuf)],
    out_dir: &Path,
    precision: Precision,
    paths: Option<&mut Vec<PathBuf>>,
    tx: &mut BTreeMap<String, Box<dyn ports::port::TxPort>>,
) -> Result<Executor, CliError> {
    let mut paths = paths;
    Executor::new(chain, opts, |name, dump| {
        let path = exit_path(name, dump, outputs, out_dir);
        if let Some(paths) = paths.as_deref_mut() {
            paths.push(path);
            return Ok(ExitSink::Count);
        }
        if let Some(port) = tx.remove(name) {
            return Ok(ExitSink::Port(port));
        }
        PcapWriter::create(&path, precision, 1)
            .map(ExitSink::Pcap)
            .map_err(Into::into)
    })
    .map_err(CliError::from)
}

/// The sink of `--tell-proxy NAME`: for a flow that arrived as `k` and leaves as `o`, the
/// proxy entry Dec made under `k` (the NSH the packet came with) copied under `o`, where
/// Enc looks the translated packet up; a flow Dec did not decapsulate (a reply coming back
/// plain) has none and is left alone. Errors of the map go to standard error.
fn proxy_teller(name: &str) -> Result<chain::TranslationSink, CliError> {
    let table = stages::ProxyTable::open(name)
        .map_err(|e| CliError::Invalid(format!("--tell-proxy {name}: {e}")))?;
    let key = |f: &packet::FlowKey| match (f.src, f.dst) {
        (std::net::IpAddr::V4(saddr), std::net::IpAddr::V4(daddr)) => Some(stages::maps::FlowKey {
            saddr,
            daddr,
            sport: f.src_port,
            dport: f.dst_port,
            proto: f.protocol,
        }),
        _ => None,
    };
    Ok(Box::new(move |k, o| {
        let (Some(k), Some(o)) = (key(k), key(o)) else {
            return;
        };
        match table.get(&k) {
            Ok(Some(mut nsh)) => {
                nsh.flags |= stages::maps::PROXY_TOLD;
                if let Err(e) = table.insert(&o, &nsh) {
                    eprintln!("fusebox: --tell-proxy: {e}");
                }
            }
            Ok(None) => {}
            Err(e) => eprintln!("fusebox: --tell-proxy: {e}"),
        }
    }))
}

/// `fusebox run`.
pub fn run(a: &RunArgs) -> Result<ExitCode, CliError> {
    let mut chain = load_chain(&a.chain)?;
    chain.nsh |= a.nsh;
    let opts = RunOptions {
        batch: a.batch,
        reflect: parse_reflect(&a.reflect)?,
        defines: parse_defines(&a.defines)?,
    };
    let inputs: Vec<(Endpoint, PathBuf)> = a
        .inputs
        .iter()
        .map(|s| parse_binding(s, &chain, "--input"))
        .collect::<Result<_, _>>()?;
    let outputs: Vec<(Endpoint, PathBuf)> = a
        .outputs
        .iter()
        .map(|s| parse_binding(s, &chain, "--output"))
        .collect::<Result<_, _>>()?;
    // Outputs keep their inputs' timestamp resolution: nanosecond files if any input is.
    let mut precision = Precision::Micro;
    let mut readers = Vec::new();
    for (ep, file) in &inputs {
        let r = PcapReader::open_ethernet(file)?;
        if r.precision() == Precision::Nano {
            precision = Precision::Nano;
        }
        readers.push((ep.clone(), file.clone(), r));
    }
    let filter = match &a.filter {
        Some(text) => {
            Some(Rc::new(PcapFilter::from_expr(text).map_err(|e| {
                CliError::context(format!("--filter `{text}`"), e)
            })?))
        }
        None => None,
    };
    let excluded = Rc::new(Cell::new(0u64));
    let keep = |r: &Record| {
        filter
            .as_ref()
            .is_none_or(|f| f.pred().accepts(&r.data, r.orig_len))
    };
    let devices = open_devices(a, &chain)?;
    if !devices.is_empty() {
        if a.replay.is_some() {
            return Err(CliError::Invalid(
                "--replay: not with devices (--iface or [[device]]): a live run forwards what arrives".into(),
            ));
        }
        if a.filter.is_some() {
            return Err(CliError::Invalid(
                "--filter: applies to capture inputs, not yet to devices (--iface or [[device]])"
                    .into(),
            ));
        }
    }
    let mut tx: BTreeMap<String, Box<dyn ports::port::TxPort>> = BTreeMap::new();
    let mut rx: Vec<(Endpoint, Box<dyn ports::port::RxPort>)> = Vec::new();
    for (ep, d) in devices {
        tx.insert(ep.to_string(), d.tx);
        rx.push((ep, d.rx));
    }
    if a.metrics_linger.is_nan() || a.metrics_linger < 0.0 {
        return Err(CliError::Invalid(format!(
            "--metrics-linger {}: expected seconds >= 0",
            a.metrics_linger
        )));
    }
    let started = Instant::now();
    let placement = match &a.plan {
        Some(path) => {
            if !rx.is_empty() {
                return Err(CliError::Invalid(
                    "--plan: capture inputs only, not yet devices (--iface or [[device]])".into(),
                ));
            }
            let plan =
                ::plan::file::PlanFile::load(path).map_err(|e| CliError::Invalid(e.to_string()))?;
            plan.check(&chain, path)
                .map_err(|e| CliError::Invalid(e.to_string()))?;
            Some(plan.placement)
        }
        None => None,
    };
    let cores = placement
        .as_ref()
        .map(|p| p.replicas.max(1))
        .or(a.cores)
        .unwrap_or(if rx.is_empty() {
            1
        } else {
            std::thread::available_parallelism().map_or(1, usize::from)
        });
    if cores == 0 {
        return Err(CliError::Invalid("--cores 0: expected 1 or more".into()));
    }
    let workers = cores > 1 || placement.is_some();
    if workers && chain.nsh {
        return Err(CliError::Invalid(format!(
            "--cores {cores}: an NSH-aware run (--nsh, or nsh = true in the chain file) runs on one core (--cores 1)"
        )));
    }
    if workers && a.tell_proxy.is_some() {
        return Err(CliError::Invalid(format!(
            "--cores {cores}: --tell-proxy runs on one core (--cores 1)"
        )));
    }
    // Like tcpdump-style tools and Click's ToDump: a missing output folder is made, quietly.
    std::fs::create_dir_all(&a.out_dir)
        .map_err(|e| CliError::io(&a.out_dir, "cannot create: ", e))?;
    let mut paths = Vec::new();
    let mut ex = build(
        &chain,
        &opts,
        &outputs,
        &a.out_dir,
        precision,
        (a.replay.is_some() || workers).then_some(&mut paths),
        &mut tx,
    )?;
    if let Some(name) = &a.tell_proxy {
        ex.tell_translations(Some(proxy_teller(name)?));
    }
    if a.trust_switch_tags && a.mode != Mode::Synth {
        return Err(CliError::Invalid(
            "--trust-switch-tags: only with --mode synth".into(),
        ));
    }
    // The fast path's options are read (and checked) only in that mode; synth takes its
    // flow table's bound from them.
    let fast = match a.mode {
        Mode::Fastpath => a.fast_options()?,
        Mode::Synth => chain::FastOptions {
            max_flows: a.max_flows.max(1),
            ..chain::FastOptions::default()
        },
        _ => chain::FastOptions::default(),
    };
    if a.parallel_workers != 1 {
        if a.mode != Mode::Parallel || a.parallel_workers == 0 {
            return Err(CliError::Invalid(format!(
                "--parallel-workers {}: 1 or more, with --mode parallel",
                a.parallel_workers
            )));
        }
        crate::offload::place_branches(&chain, &opts, &inputs, a.parallel_workers)?;
    }
    // On several workers this executor only checks the set-up and reads the inputs'
    // entries; each worker builds its own replica.
    let dispatcher = if workers {
        let d = dataplane::Dispatcher::for_chain(&mut ex, cores);
        dataplane::share(&mut ex, 0, cores)?;
        Some(d)
    } else {
        None
    };
    let synth = if workers {
        None
    } else {
        a.mode.install(&mut ex, fast.clone())
    };
    ex.trust_switch_tags(a.trust_switch_tags);
    for (e, _) in &outputs {
        if !ex.exit_names().contains(&e.to_string()) {
            return Err(CliError::Invalid(format!(
                "--output {e}: not an exit of the chain (exits: {})",
                ex.exit_names().join(", ")
            )));
        }
    }
    // Every bound interface is an entry or an exit; frames of an interface the NF only
    // writes are not read (its receive half is closed).
    let live = !rx.is_empty();
    let mut rx_ports: Vec<chain::exec::PortInput> = Vec::new();
    let mut rx_names: Vec<String> = Vec::new();
    for (ep, port) in rx {
        let name = ep.to_string();
        match ex.entry(&ep) {
            Some(entry) => {
                rx_ports.push((entry, port));
                rx_names.push(name);
            }
            None if ex.exit_names().contains(&name) => {}
            None => {
                return Err(CliError::Invalid(format!(
                    "--iface {ep}: not an interface of the chain (entries: {}; exits: {})",
                    chain
                        .entries
                        .iter()
                        .map(|(e, _)| e.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    ex.exit_names().join(", ")
                )))
            }
        }
    }
    if inputs.is_empty() && ex.dump_sources().is_empty() && !live {
        return Err(chain.no_input_error().into());
    }
    let mut errors = Vec::new();
    let mut sources: Vec<Source> = Vec::new();
    let mut memory = Vec::new();
    for (ep, file, r) in readers {
        let entry = ex
            .entry(&ep)
            .ok_or_else(|| synth::verify::RunError::NoEntry(ep.clone()))?;
        if a.replay.is_some() {
            let (mut recs, err) = ports::pcap::read_all(&file)?;
            if let Some(e) = err {
                errors.push(e.to_string());
            }
            let before = recs.len();
            recs.retain(keep);
            excluded.set(excluded.get() + (before - recs.len()) as u64);
            memory.push((entry, recs));
        } else if live {
            // Captures given to a live run enter as ports too, as fast as they are read.
            rx_ports.push((entry, Box::new(ports::port::PcapRx::new(r))));
            rx_names.push(format!("{ep}={}", file.display()));
        } else {
            let recs = filtered(records(r), filter.clone(), excluded.clone());
            sources.push(ex.source(format!("{ep}={}", file.display()), entry, recs));
        }
    }
    for (name, entry, path) in ex.dump_sources().to_vec() {
        if a.replay.is_some() {
            let (mut recs, err) =
                ports::pcap::read_all(&path).map_err(|e| CliError::context(&name, e))?;
            if let Some(e) = err {
                errors.push(e.to_string());
            }
            let before = recs.len();
            recs.retain(keep);
            excluded.set(excluded.get() + (before - recs.len()) as u64);
            memory.push((entry, recs));
        } else {
            let r = PcapReader::open(&path).map_err(|e| CliError::context(&name, e))?;
            let recs = filtered(records(r), filter.clone(), excluded.clone());
            sources.push(ex.source(format!("{name}={}", path.display()), entry, recs));
        }
    }
    // SIGINT or SIGTERM stops the run between two batches; the counters are published for
    // --metrics and the progress line every ~100 ms.
    let stop = observe::stop::Flag::on_signals()
        .map_err(|e| CliError::Invalid(format!("cannot handle SIGINT/SIGTERM: {e}")))?;
    let board = observe::board::Board::new(cores);
    let server = match &a.metrics {
        Some(addr) => {
            let s = observe::metrics::Server::start(addr, board.clone())
                .map_err(|e| CliError::Invalid(format!("--metrics {addr}: {e}")))?;
            eprintln!("metrics: serving http://{}/metrics", s.addr());
            Some(s)
        }
        None => None,
    };
    let style = if a.quiet {
        observe::progress::Style::Off
    } else {
        a.progress
    };
    if let Some(d) = dispatcher {
        let setup = dataplane::Setup {
            chain: chain.clone(),
            options: opts.clone(),
            mode: a.mode,
            fast,
            trust_switch_tags: a.trust_switch_tags,
            board: Some(board.clone()),
            stop: Some(stop.clone()),
        };
        let w = Workers {
            plan: placement,
            setup,
            dispatcher: d,
            cores,
            precision,
            paths,
            excluded,
            started,
            stop,
            board,
            server,
            progress: observe::progress::Progress::new(style, a.progress_workers),
            ports: Vec::new(),
        };
        return match a.replay {
            Some(passes) => w.replay(a, &memory, passes, errors),
            None if live => w.live(a, rx_ports, rx_names, tx, ex.exit_names(), errors),
            None => w.run(a, sources, errors),
        };
    }
    let mut watch = observe::Watch::new(
        board,
        0,
        observe::progress::Progress::new(style, a.progress_workers),
    )
    .watched(server.is_some());
    let go_on = |stop: &observe::stop::Flag| {
        if stop.is_set() {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    };
    if let Some(passes) = a.replay {
        // The filter ran once over the trace; each pass (or the part of one a stop left
        // done) counts its share of the excluded packets.
        let kept: u64 = memory.iter().map(|(_, r)| r.len() as u64).sum();
        let per_pass = excluded.get();
        let excluded_at = |n: u64| match kept {
            0 => per_pass * passes,
            k => (u128::from(per_pass) * u128::from(n) / u128::from(k)) as u64,
        };
        let t0 = Instant::now();
        let n = ex.replay_until(&memory, passes, |ex| {
            watch.tick(|| {
                let s = ex.summary();
                let n = s.totals.input;
                with_excluded(s, excluded_at(n))
            });
            go_on(&stop)
        });
        excluded.set(excluded_at(n));
        let secs = t0.elapsed().as_secs_f64();
        let pps = n as f64 / secs.max(1e-9);
        let stopped = if stop.is_set() {
            ", stopped by a signal"
        } else {
            ""
        };
        eprintln!("replay: {n} packets in {passes} passes{stopped}, {secs:.3} s, {:.3} Mpps (one core, in memory, no I/O)", pps / 1e6);
        if a.json {
            let mut s = with_excluded(ex.summary(), excluded.get()).to_json();
            s = format!("{{\"replay\": {{\"packets\": {n}, \"passes\": {passes}, \"stopped\": {}, \"seconds\": {secs}, \"pps\": {pps}}},{} \"summary\": {s}}}", stop.is_set(), mode_json(synth.as_ref().map(|r| SynthFlows::of(&ex, r.classes.len())).as_ref(), ex.fast_stats().as_ref()).map(|s| format!(" {s}")).unwrap_or_default());
            outln!("{s}");
        }
    } else if live {
        eprintln!("live: running (SIGINT or SIGTERM stops)");
        let names = &rx_names;
        let r = ex.run_ports(
            &mut rx_ports,
            std::time::Duration::from_millis(20),
            || stop.is_set(),
            |ex, rx| watch.tick(|| with_rx(ex.summary(), names, rx)),
        );
        if let Err(e) = r {
            errors.push(e.to_string());
        }
        if stop.is_set() {
            eprintln!(
                "live: stopped by a signal after {} input packets",
                ex.summary().totals.input
            );
        }
        if let Err(e) = ex.finish() {
            errors.push(e.to_string());
        }
        if a.json {
            let s = with_rx(ex.summary(), &rx_names, &rx_ports).to_json();
            match (
                s.strip_prefix("{\n"),
                mode_json(
                    synth
                        .as_ref()
                        .map(|r| SynthFlows::of(&ex, r.classes.len()))
                        .as_ref(),
                    ex.fast_stats().as_ref(),
                ),
            ) {
                (Some(rest), Some(m)) => outln!("{{\n  {m}\n{rest}"),
                _ => outln!("{s}"),
            }
        }
    } else {
        errors.extend(ex.run_until(sources, |ex| {
            watch.tick(|| with_excluded(ex.summary(), excluded.get()));
            go_on(&stop)
        }));
        if stop.is_set() {
            eprintln!(
                "run: stopped by a signal after {} input packets",
                ex.summary().totals.input
            );
        }
        ex.finish()?;
        if a.json {
            let s = with_excluded(ex.summary(), excluded.get()).to_json();
            match (
                s.strip_prefix("{\n"),
                mode_json(
                    synth
                        .as_ref()
                        .map(|r| SynthFlows::of(&ex, r.classes.len()))
                        .as_ref(),
                    ex.fast_stats().as_ref(),
                ),
            ) {
                (Some(rest), Some(m)) => outln!("{{\n  {m}\n{rest}"),
                _ => outln!("{s}"),
            }
        }
    }
    let summary = with_rx(
        with_excluded(ex.summary(), excluded.get()),
        &rx_names,
        &rx_ports,
    );
    if let Some(f) = ex.fast_stats() {
        eprintln!("{}", fast_line(&f));
    }
    if let Some(p) = ex.parallel_stats() {
        eprintln!(
            "parallel: {} groups; {} packets merged, {} dropped in a branch, {} ran on as written (irregular)",
            p.groups, p.merged, p.dropped, p.irregular
        );
        if p.remote_branches > 0 {
            eprintln!(
                "parallel: {} branches on helper threads; {} hand-offs, {} packets handed off in batches, {} branches' work discarded",
                p.remote_branches, p.handoffs, p.batched, p.discarded
            );
        }
    }
    if let Some(n) = ex.nsh_counts() {
        eprintln!("{}", nsh_line(&n));
    }
    if let Some(r) = &synth {
        eprintln!(
            "{}",
            SynthFlows::of(&ex, r.classes.len()).line(summary.totals.input)
        );
    }
    if a.trust_switch_tags {
        let (held, again) = ex.switch_tag_counts();
        eprintln!("switch tags: {held} frames in their tagged class (classification skipped), {again} classified again");
    }
    // From here on the metrics serve the final summary.
    watch.finish(&summary);
    if !a.json {
        eprint!("{}", summary.to_text());
        eprintln!("time: {:.3} s", started.elapsed().as_secs_f64());
    }
    Ok(conclude(
        server.as_ref(),
        a.metrics_linger,
        &stop,
        &errors,
        &summary,
    ))
}

/// The NSH-aware run's line: frames decapsulated at the entry and run as they are, packets
/// encapsulated at the exit (and those whose header was replaced before they left).
pub fn nsh_line(n: &chain::NshCounts) -> String {
    format!(
        "nsh: {} frames decapsulated, {} without NSH (run as they are), {} packets encapsulated, {} left without their header (replaced), {} distinct headers",
        n.decapsulated, n.plain, n.encapsulated, n.lost, n.headers
    )
}

/// The end of a run, one or several workers: `--metrics-linger` (see [`linger`]), then the
/// exit status: 1 after errors (each printed), 3 when the packet accounting does not
/// balance, else success.
fn conclude(
    server: Option<&observe::metrics::Server>,
    linger_s: f64,
    stop: &observe::stop::Flag,
    errors: &[String],
    summary: &Summary,
) -> ExitCode {
    if let Some(server) = server {
        linger(server, linger_s, stop);
    }
    if !errors.is_empty() {
        for e in errors {
            eprintln!("fusebox: error: {e}");
        }
        return ExitCode::from(1);
    }
    if !summary.balanced() {
        eprintln!("fusebox: error: packet accounting does not balance (in + created != out + drops + held)");
        return ExitCode::from(3);
    }
    ExitCode::SUCCESS
}

/// `--metrics-linger`: keeps `server` serving the final counters for `seconds`, or until a
/// signal asks to stop (after a run a signal stopped, a second signal exits at once).
fn linger(server: &observe::metrics::Server, seconds: f64, stop: &observe::stop::Flag) {
    if seconds <= 0.0 {
        return;
    }
    eprintln!(
        "metrics: serving the final counters at http://{}/metrics for {seconds} s",
        server.addr()
    );
    let until = Instant::now() + std::time::Duration::from_secs_f64(seconds.min(1e9));
    let was_set = stop.is_set();
    while Instant::now() < until && (was_set || !stop.is_set()) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What the fast path did, as (JSON name, count, how the text line says it).
fn fast_counts(f: &chain::FastStats) -> [(&'static str, u64, &'static str); 10] {
    [
        ("served", f.hits, "packets served by consolidated entries"),
        ("first_seen", f.first_seen, "first packets unrecorded"),
        ("recorded", f.recorded, "recorded"),
        ("entries_made", f.consolidated, "entries made"),
        ("entries", f.entries, "in the table"),
        ("guard_misses", f.guard_misses, "guard misses"),
        ("events", f.events, "events"),
        ("closed", f.closed, "closed (FIN/RST)"),
        ("expired", f.expired, "expired"),
        ("evicted", f.evictions, "evicted"),
    ]
}

/// One line on what the fast path did.
pub fn fast_line(f: &chain::FastStats) -> String {
    let refused: Vec<String> = f.refused.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let counts: Vec<String> = fast_counts(f)
        .iter()
        .map(|(_, n, text)| format!("{n} {text}"))
        .collect();
    format!(
        "fastpath: {}; full chain by reason: {}",
        counts.join(", "),
        if refused.is_empty() {
            "none".to_string()
        } else {
            refused.join(", ")
        }
    )
}

/// What a synth run's program and established-flow table did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SynthFlows {
    /// Traffic classes of the program.
    pub(crate) classes: usize,
    /// Packets served by remembered flow paths (one lookup each).
    pub(crate) served: u64,
    /// Paths remembered at the end.
    pub(crate) paths: usize,
    /// Flows the table forgot at its bound (`--max-flows`).
    pub(crate) evicted: u64,
}

impl SynthFlows {
    /// What `ex`'s program (of `classes` classes) and flow table did.
    fn of(ex: &chain::Executor, classes: usize) -> SynthFlows {
        let (paths, served) = ex.flow_stats();
        SynthFlows {
            classes,
            served,
            paths,
            evicted: ex.flow_evictions(),
        }
    }

    /// One line on it, for a run of `input` packets.
    pub(crate) fn line(&self, input: u64) -> String {
        format!(
            "synth: {} of {input} packets took a remembered flow path (one lookup); {} paths remembered; {} flows evicted at the bound (--max-flows)",
            self.served, self.paths, self.evicted
        )
    }
}

/// `"synth": {"classes": N, "served": S, "paths": P, "evicted": E},` for the JSON outputs
/// of a synth run, or `"fastpath": {...},` (what the fast path did) for a fastpath run.
fn mode_json(synth: Option<&SynthFlows>, fast: Option<&chain::FastStats>) -> Option<String> {
    if let Some(f) = synth {
        return Some(format!(
            "\"synth\": {{\"classes\": {}, \"served\": {}, \"paths\": {}, \"evicted\": {}}},",
            f.classes, f.served, f.paths, f.evicted
        ));
    }
    let f = fast?;
    let mut m = serde_json::Map::new();
    for (name, n, _) in fast_counts(f) {
        m.insert(name.into(), n.into());
    }
    let refused: serde_json::Map<String, serde_json::Value> = f
        .refused
        .iter()
        .map(|(r, n)| (r.to_string(), (*n).into()))
        .collect();
    m.insert("full_chain".into(), refused.into());
    Some(format!("\"fastpath\": {},", serde_json::Value::Object(m)))
}

type Records = Box<dyn Iterator<Item = Result<ports::pcap::Record, ports::pcap::PcapError>>>;

/// A reader as a stream of records.
fn records(mut r: PcapReader) -> Records {
    Box::new(std::iter::from_fn(move || r.next_record()))
}

/// `records` without those `filter` rejects, counted in `excluded`.
fn filtered(records: Records, filter: Option<Rc<PcapFilter>>, excluded: Rc<Cell<u64>>) -> Records {
    let Some(f) = filter else { return records };
    Box::new(records.filter(move |r| match r {
        Ok(rec) if !f.pred().accepts(&rec.data, rec.orig_len) => {
            excluded.set(excluded.get() + 1);
            false
        }
        _ => true,
    }))
}

/// The summary with the packets `--filter` kept out counted as input dropped for
/// `filter-excluded` (at chain level: no NF saw them).
/// `s` with the receive counters of the ports frames came in by (`names[i]` is the
/// interface of `rx[i]`), merged into the port of the same interface when it also sends.
fn with_rx(mut s: Summary, names: &[String], rx: &[chain::exec::PortInput]) -> Summary {
    add_rx(&mut s.ports, names, rx);
    s
}

/// Adds the receive counters of `rx` (`names[i]` is the interface of `rx[i]`) to `ports`,
/// into the port of the same interface when it also sends.
fn add_rx(
    ports: &mut Vec<chain::summary::PortSummary>,
    names: &[String],
    rx: &[chain::exec::PortInput],
) {
    for (name, (_, port)) in names.iter().zip(rx) {
        let c = port.counters();
        match ports.iter_mut().find(|p| &p.name == name) {
            Some(p) => {
                p.rx_packets = c.rx_packets;
                p.rx_bytes = c.rx_bytes;
                p.rx_kernel_drops = c.rx_kernel_drops;
            }
            None => ports.push(chain::summary::PortSummary::new(name.as_str(), &c)),
        }
    }
}

/// The devices the chain file's `[[device]]` and `--iface` bind (`--iface` wins for the same
/// interface), opened, in that order. Says on stderr what each runs on and why it is less
/// than asked for (AF_XDP in copy mode, or AF_PACKET where XDP cannot run).
fn open_devices(a: &RunArgs, chain: &ChainFile) -> Result<Vec<(Endpoint, nic::Device)>, CliError> {
    let mut want: Vec<(Endpoint, chain::Device)> = chain
        .devices
        .iter()
        .map(|(e, d, _)| (e.clone(), d.clone()))
        .collect();
    for s in &a.ifaces {
        let (ep, dev) = parse_binding(s, chain, "--iface")?;
        let dev = chain::Device::parse(&dev.to_string_lossy())
            .map_err(|e| CliError::Invalid(format!("--iface {s}: {e}")))?;
        want.retain(|(e, _)| *e != ep);
        want.push((ep, dev));
    }
    let mut open = Vec::new();
    for (ep, d) in want {
        let dev = nic::open(&d.dev, d.via).map_err(|e| CliError::context(ep.to_string(), e))?;
        eprintln!("live: {ep} on {} via {}", d.dev, dev.kind);
        if let Some(note) = &dev.note {
            eprintln!("live: {note}");
        }
        open.push((ep, dev));
    }
    Ok(open)
}

fn with_excluded(mut s: Summary, excluded: u64) -> Summary {
    if excluded > 0 {
        s.totals.input += excluded;
        s.totals.dropped += excluded;
        *s.totals.drops.entry("filter-excluded".into()).or_default() += excluded;
    }
    s
}

/// `fusebox check`.
pub fn check(a: &CheckArgs) -> Result<ExitCode, CliError> {
    let chain = load_chain(&a.chain)?;
    let opts = RunOptions {
        defines: parse_defines(&a.defines)?,
        ..RunOptions::default()
    };
    let ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count))?;
    outln!("chain {}", chain.path.display());
    for nf in ex.nfs() {
        let spec = chain.nfs.iter().find(|n| n.name == nf.name);
        outln!(
            "nf {} ({}): interfaces [{}]",
            nf.name,
            spec.map(|s| s.source()).unwrap_or_default(),
            nf.interfaces().join(", ")
        );
        print!("{}", nf.describe());
    }
    for (a, b, _) in &chain.links {
        outln!("link {a} <-> {b}");
    }
    for (e, _) in &chain.entries {
        outln!("entry {e}");
    }
    for x in ex.exit_names() {
        outln!("exit {x}");
    }
    outln!("ok");
    Ok(ExitCode::SUCCESS)
}
