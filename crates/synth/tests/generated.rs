//! The differential harness on random chains: for every seed, a chain from
//! `synth::testgen::random_chain` and a few hundred packets from `random_trace` (with
//! expiring TTLs, bad checksums, IP options, ARP, truncated lengths and short transport
//! parts) run in naive and in
//! synth mode, and in fastpath mode (one seed in four with a fast-path table of 1 to 4
//! flows, which fills at once), with the far end reflected; the runs must not differ in anything `compare`
//! looks at. Every naive run must also balance and repeat exactly.
//!
//! `FUSEBOX_GEN_SEEDS=N` runs seeds 0..N (256 by default); `FUSEBOX_GEN_SEED=S` runs seed S
//! only and keeps its files (the path is printed). The files of failing seeds are kept. A
//! crash that kills the process (a stack overflow) cannot be reported per seed:
//! `FUSEBOX_GEN_VERBOSE=1 cargo test --release -p synth --test generated -- --nocapture`
//! prints every seed as it starts.

use chain::ChainFile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use synth::testgen::{random_trace, try_random_chain_with, GeneratedChain, Options};
use synth::verify::{compare, run, run_installed, run_with, Mode, RunResult};

const DEFAULT_SEEDS: u64 = 256;
const PACKETS: u64 = 300;
/// Differences shown per failing seed.
const SHOWN: usize = 10;

fn seeds() -> (Vec<u64>, bool) {
    synth::testgen::seeds_from_env(DEFAULT_SEEDS)
}

/// The test's scratch directory, removed when dropped unless its cleanup is turned off
/// (files to keep).
fn root(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fusebox-generated-{test}-"))
        .tempdir()
        .unwrap()
}

/// Generates seed `seed`'s chain and trace under `root`.
fn setup(root: &Path, seed: u64) -> Result<(GeneratedChain, ChainFile, PathBuf), String> {
    setup_with(root, seed, &Options::default())
}

/// [`setup`] with generator options.
fn setup_with(
    root: &Path,
    seed: u64,
    options: &Options,
) -> Result<(GeneratedChain, ChainFile, PathBuf), String> {
    let dir = root.join(seed.to_string());
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let g = try_random_chain_with(seed, &dir, options).map_err(|e| e.to_string())?;
    let trace = dir.join("trace.pcap");
    random_trace(seed, &g.trace, PACKETS, &trace).map_err(|e| e.to_string())?;
    let chain = ChainFile::load(&g.chain).map_err(|e| e.to_string())?;
    Ok((g, chain, trace))
}

fn report(
    seed: u64,
    g: &GeneratedChain,
    trace: &Path,
    what: &str,
    details: &dyn std::fmt::Display,
) -> String {
    format!(
        "seed {seed}: {what}\n  reproduce: FUSEBOX_GEN_SEED={seed} cargo test --release -p synth --test generated\n  NFs: {}\n  trace ({PACKETS} packets, {}): {:?}\n{details}\n{}",
        g.nfs.join(" | "),
        trace.display(),
        g.trace,
        g.listing()
    )
}

/// Synth and fastpath (one seed in four with a table of 1 to 4 flows, full at once) give
/// `naive`'s bytes, counters and state on generated chain `g`.
fn synth_and_fastpath_match(
    seed: u64,
    g: &GeneratedChain,
    trace: &Path,
    chain: &ChainFile,
    inputs: &[(chain::Endpoint, PathBuf)],
    opts: &chain::RunOptions,
    naive: &RunResult,
) -> Result<(), String> {
    let synth = run(chain, inputs, opts, Mode::Synth)
        .map_err(|e| report(seed, g, trace, "synth run failed", &e))?;
    if let Some(d) = differences(naive, &synth) {
        return Err(report(seed, g, trace, "synth differs from naive", &d));
    }
    let fast_opts = if seed % 4 == 3 {
        chain::FastOptions {
            max_flows: 1 + (seed / 4 % 4) as usize,
            ..chain::FastOptions::default()
        }
    } else {
        chain::FastOptions::default()
    };
    let fast = run_with(chain, inputs, opts, Mode::Fastpath, fast_opts)
        .map_err(|e| report(seed, g, trace, "fastpath run failed", &e))?;
    if let Some(d) = differences(naive, &fast) {
        return Err(report(seed, g, trace, "fastpath differs from naive", &d));
    }
    Ok(())
}

fn differences(a: &RunResult, b: &RunResult) -> Option<String> {
    let d = compare(a, b);
    if d.is_empty() {
        return None;
    }
    let mut s = format!(
        "  {} differences; the first {}:\n",
        d.len(),
        d.len().min(SHOWN)
    );
    for x in d.iter().take(SHOWN) {
        s.push_str(&format!("  - {x}\n"));
    }
    Some(s)
}

/// What the naive runs exercised, over all seeds.
#[derive(Default)]
struct Tally {
    chains: u64,
    nfs: u64,
    input: u64,
    created: u64,
    output: u64,
    drops: BTreeMap<String, u64>,
    /// Chains where packets reached the reflected exit.
    reached_far_end: u64,
    /// Chains where replies came back out of the entry.
    came_back: u64,
    /// Chains whose naive runs (without replies) take batches element by element.
    batched: u64,
}

/// Adds a naive run's summary to the tally.
fn add(tally: &Mutex<Tally>, g: &GeneratedChain, s: &chain::Summary) {
    let Ok(mut t) = tally.lock() else { return };
    t.chains += 1;
    t.nfs += s.nfs.len() as u64;
    t.input += s.totals.input;
    t.created += s.totals.created;
    t.output += s.totals.output;
    for (r, n) in &s.totals.drops {
        *t.drops.entry(r.clone()).or_default() += n;
    }
    let at = |e: &chain::Endpoint| {
        let name = e.to_string();
        s.exits.iter().any(|x| x.name == name && x.packets > 0)
    };
    t.reached_far_end += u64::from(g.reflect.iter().any(at));
    t.came_back += u64::from(g.entries.iter().any(at));
}

/// Runs `check` on every seed over a few threads; fails with the reports of the failing
/// seeds (files of failing seeds are kept).
fn for_seeds(
    test: &str,
    check: impl Fn(u64, &Path, &Mutex<Tally>) -> Result<(), String> + Sync,
) -> Tally {
    let (seeds, keep) = seeds();
    let verbose = std::env::var("FUSEBOX_GEN_VERBOSE").is_ok_and(|v| v == "1");
    let mut scratch = root(test);
    let root = scratch.path().to_path_buf();
    let tally = Mutex::new(Tally::default());
    let failures = Mutex::new(Vec::new());
    let next = Mutex::new(seeds.iter().copied());
    let started = std::time::Instant::now();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                // The guard is dropped inside `map`: seeds run in parallel.
                let take = || next.lock().map(|mut it| it.next()).unwrap_or(None);
                while let Some(seed) = take() {
                    if verbose {
                        eprintln!("{test}: seed {seed}");
                    }
                    match check(seed, &root, &tally) {
                        Ok(()) if !keep => {
                            let _ = std::fs::remove_dir_all(root.join(seed.to_string()));
                        }
                        Ok(()) => {}
                        Err(r) => {
                            if let Ok(mut f) = failures.lock() {
                                f.push((seed, r));
                            }
                        }
                    }
                }
            });
        }
    });
    let t = tally.into_inner().unwrap_or_default();
    eprintln!(
        "{test}: {} seeds in {:.1?} ({} chains, {} batched, {} NFs, {} reaching the far end, {} with replies back; naive totals: {} in, {} created, {} out; drops {:?})",
        seeds.len(),
        started.elapsed(),
        t.chains,
        t.batched,
        t.nfs,
        t.reached_far_end,
        t.came_back,
        t.input,
        t.created,
        t.output,
        t.drops
    );
    if keep {
        scratch.disable_cleanup(true);
        eprintln!("files kept in {}", root.display());
    }
    let mut failures = failures.into_inner().unwrap_or_default();
    failures.sort_by_key(|f| f.0);
    if failures.is_empty() {
        return t;
    }
    // The report names the failing seeds' files: they stay.
    scratch.disable_cleanup(true);
    let list: Vec<String> = failures.iter().map(|f| f.0.to_string()).collect();
    let mut msg = format!(
        "{} of {} seeds failed: {}\n(files kept under {})\n\n",
        failures.len(),
        seeds.len(),
        list.join(", "),
        root.display()
    );
    for (_, r) in failures.iter().take(3) {
        msg.push_str(r);
        msg.push('\n');
    }
    panic!("{msg}");
}

/// Naive mode is the reference: every generated chain balances (per NF and in total), no
/// input stops early, and a second run gives exactly the same result.
#[test]
fn naive_runs_balance_and_repeat() {
    let t = for_seeds("naive", |seed, root, tally| {
        let (g, chain, trace) = setup(root, seed).map_err(|e| format!("seed {seed}: {e}"))?;
        let inputs = g.inputs(&trace);
        let opts = g.options();
        let a = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "naive run failed", &e))?;
        let s = &a.summary;
        if !s.balanced() {
            let nfs: Vec<String> = s
                .nfs
                .iter()
                .filter(|n| !n.balanced)
                .map(|n| {
                    format!(
                        "  nf {}: {} in + {} created != {} out + {} dropped + {} held",
                        n.name, n.input, n.created, n.output, n.dropped, n.held
                    )
                })
                .collect();
            return Err(report(
                seed,
                &g,
                &trace,
                "naive run does not balance",
                &format!("{}\n{}", nfs.join("\n"), s.to_text()),
            ));
        }
        if !a.errors.is_empty() {
            return Err(report(
                seed,
                &g,
                &trace,
                "input errors",
                &a.errors.join("\n"),
            ));
        }
        if s.totals.input != PACKETS {
            return Err(report(
                seed,
                &g,
                &trace,
                "not every packet was read",
                &format!("{} inputs", s.totals.input),
            ));
        }
        let b = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "second naive run failed", &e))?;
        if let Some(d) = differences(&a, &b) {
            return Err(report(seed, &g, &trace, "two naive runs differ", &d));
        }
        // Without replies (which make a chain run packet by packet), a chain whose elements
        // allow it runs naive in batches element by element: it must give what packet by
        // packet gives.
        let mut one_way = opts.clone();
        one_way.reflect.clear();
        let mut batched = false;
        let c = run_installed(&chain, &inputs, &one_way, |ex| {
            batched = ex.batches_elements();
        })
        .map_err(|e| report(seed, &g, &trace, "naive run without replies failed", &e))?;
        let d = run_installed(&chain, &inputs, &one_way, |ex| ex.batch_elements(false))
            .map_err(|e| report(seed, &g, &trace, "packet-by-packet naive run failed", &e))?;
        if let Some(diff) = differences(&c, &d) {
            return Err(report(
                seed,
                &g,
                &trace,
                "batched and packet-by-packet naive runs differ (without replies)",
                &diff,
            ));
        }
        if batched {
            if let Ok(mut t) = tally.lock() {
                t.batched += 1;
            }
        }
        add(tally, &g, s);
        Ok(())
    });
    // The generator stays useful: traffic gets through most chains, and the anomalies reach
    // the elements that reject them.
    if t.chains >= 100 {
        assert!(
            t.reached_far_end * 2 >= t.chains,
            "only {} of {} chains deliver to the far end",
            t.reached_far_end,
            t.chains
        );
        assert!(t.came_back * 2 >= t.chains);
        for reason in [
            "ttl-expired",
            "bad-ip-checksum",
            "bad-ip-length",
            "bad-ip-version",
            "filter-deny",
            "not-tcp-udp",
            "ip-fragment",
            "no-output",
            "loop",
        ] {
            assert!(
                t.drops.get(reason).copied().unwrap_or(0) > 0,
                "no `{reason}` drop in {} chains: {:?}",
                t.chains,
                t.drops
            );
        }
        assert!(t.created > 0, "no packet created");
        assert!(
            t.batched * 4 >= t.chains,
            "only {} of {} chains run naive in batches",
            t.batched,
            t.chains
        );
    }
}

/// Synth mode gives the naive bytes, counters and state on every generated chain.
#[test]
fn synth_matches_naive() {
    let _ = for_seeds("synth", |seed, root, tally| {
        let (g, chain, trace) = setup(root, seed).map_err(|e| format!("seed {seed}: {e}"))?;
        let inputs = g.inputs(&trace);
        let opts = g.options();
        let naive = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "naive run failed", &e))?;
        let synth = run(&chain, &inputs, &opts, Mode::Synth)
            .map_err(|e| report(seed, &g, &trace, "synth run failed", &e))?;
        if let Some(d) = differences(&naive, &synth) {
            return Err(report(seed, &g, &trace, "synth differs from naive", &d));
        }
        add(tally, &g, &naive.summary);
        Ok(())
    });
}

/// Fastpath mode gives the naive bytes, counters and state on every generated chain.
#[test]
fn fastpath_matches_naive() {
    let _ = for_seeds("fastpath", |seed, root, tally| {
        let (g, chain, trace) = setup(root, seed).map_err(|e| format!("seed {seed}: {e}"))?;
        let inputs = g.inputs(&trace);
        let opts = g.options();
        let naive = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "naive run failed", &e))?;
        // One seed in four runs the fast path with a table of 1 to 4 flows: full at once,
        // so entries are evicted all the time (the result must not change).
        let fast_opts = if seed % 4 == 3 {
            chain::FastOptions {
                max_flows: 1 + (seed / 4 % 4) as usize,
                ..chain::FastOptions::default()
            }
        } else {
            chain::FastOptions::default()
        };
        let fast = run_with(&chain, &inputs, &opts, Mode::Fastpath, fast_opts)
            .map_err(|e| report(seed, &g, &trace, "fastpath run failed", &e))?;
        if let Some(d) = differences(&naive, &fast) {
            return Err(report(seed, &g, &trace, "fastpath differs from naive", &d));
        }
        add(tally, &g, &naive.summary);
        Ok(())
    });
}

/// Chains with NFs written with operators (examples/bricks) between the generated Click
/// NFs: naive balances, and synth and fastpath give the naive bytes, counters and state.
/// The Click NFs are those of the same seed without operator NFs.
#[test]
fn operator_nfs_in_generated_chains_match_naive() {
    bricks::register().expect("the operator NF classes register");
    let with_ops = Options {
        operator_nfs: true,
        ..Options::default()
    };
    let t = for_seeds("operators", |seed, root, tally| {
        let (g, chain, trace) =
            setup_with(root, seed, &with_ops).map_err(|e| format!("seed {seed}: {e}"))?;
        // The same Click NFs as without operator NFs.
        let plain = root.join(format!("{seed}-plain"));
        std::fs::create_dir_all(&plain).map_err(|e| e.to_string())?;
        let p =
            try_random_chain_with(seed, &plain, &Options::default()).map_err(|e| e.to_string())?;
        for f in p.files.iter().skip(1) {
            let name = f.file_name().unwrap_or_default();
            let ours = std::fs::read(g.chain.with_file_name(name)).ok();
            if ours != std::fs::read(f).ok() {
                return Err(report(
                    seed,
                    &g,
                    &trace,
                    "a Click NF changed",
                    &name.to_string_lossy(),
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&plain);
        if !g.nfs.iter().any(|n| n.contains("operator NF")) {
            return Err(report(seed, &g, &trace, "no operator NF", &""));
        }
        let inputs = g.inputs(&trace);
        let opts = g.options();
        let naive = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "naive run failed", &e))?;
        if !naive.summary.balanced() || naive.summary.totals.input != PACKETS {
            return Err(report(
                seed,
                &g,
                &trace,
                "naive run does not balance",
                &naive.summary.to_text(),
            ));
        }
        synth_and_fastpath_match(seed, &g, &trace, &chain, &inputs, &opts, &naive)?;
        add(tally, &g, &naive.summary);
        Ok(())
    });
    if t.chains >= 100 {
        // The operator NFs see traffic and act on it.
        for reason in ["ttl-expired", "filter-deny", "rewriter-drop", "parse-ipv4"] {
            assert!(
                t.drops.get(reason).copied().unwrap_or(0) > 0,
                "no `{reason}` drop in {} chains: {:?}",
                t.chains,
                t.drops
            );
        }
        assert!(
            t.reached_far_end * 3 >= t.chains,
            "{} of {}",
            t.reached_far_end,
            t.chains
        );
    }
}

/// Chains with IPsec gateways (ESP tunnel mode, AES-GCM: opaque to synthesis, opaque for
/// the fast path) among the generated NFs: naive balances, and synth and fastpath give the
/// naive bytes, counters and state (sequence numbers and replay windows included). The
/// other NFs are those of the same seed without IPsec.
#[test]
fn ipsec_in_generated_chains_match_naive() {
    let with_ipsec = Options {
        ipsec: true,
        ..Options::default()
    };
    let t = for_seeds("ipsec", |seed, root, tally| {
        let (g, chain, trace) =
            setup_with(root, seed, &with_ipsec).map_err(|e| format!("seed {seed}: {e}"))?;
        if !g.nfs.iter().any(|n| n.contains("IPsec gateway")) {
            return Err(report(seed, &g, &trace, "no IPsec gateway", &""));
        }
        let plain = root.join(format!("{seed}-plain"));
        std::fs::create_dir_all(&plain).map_err(|e| e.to_string())?;
        let p =
            try_random_chain_with(seed, &plain, &Options::default()).map_err(|e| e.to_string())?;
        for f in p.files.iter().skip(1) {
            let name = f.file_name().unwrap_or_default();
            if std::fs::read(g.chain.with_file_name(name)).ok() != std::fs::read(f).ok() {
                return Err(report(
                    seed,
                    &g,
                    &trace,
                    "a Click NF changed",
                    &name.to_string_lossy(),
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&plain);
        let inputs = g.inputs(&trace);
        let opts = g.options();
        let naive = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "naive run failed", &e))?;
        if !naive.summary.balanced() || naive.summary.totals.input != PACKETS {
            return Err(report(
                seed,
                &g,
                &trace,
                "naive run does not balance",
                &naive.summary.to_text(),
            ));
        }
        let again = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "second naive run failed", &e))?;
        if let Some(d) = differences(&naive, &again) {
            return Err(report(seed, &g, &trace, "naive does not repeat", &d));
        }
        synth_and_fastpath_match(seed, &g, &trace, &chain, &inputs, &opts, &naive)?;
        add(tally, &g, &naive.summary);
        Ok(())
    });
    if t.chains >= 100 {
        // The gateways see traffic and every drop path is taken somewhere.
        for reason in [
            "replay",
            "bad-icv",
            "seq-overflow",
            "not-esp",
            "unknown-spi",
        ] {
            assert!(
                t.drops.get(reason).copied().unwrap_or(0) > 0,
                "no `{reason}` drop in {} chains: {:?}",
                t.chains,
                t.drops
            );
        }
        assert!(
            t.reached_far_end * 2 >= t.chains,
            "{} of {}",
            t.reached_far_end,
            t.chains
        );
    }
}

/// How the NSH-aware test wraps an input frame: by its timestamp alone (a trace given at
/// several entries, or a frame reflected back, maps to the same header): left plain, MD
/// type 1 over Ethernet transport, or MD type 2 over VXLAN-GPE, with path, index, TTL and
/// context from the timestamp.
fn nsh_wrap(ts: packet::Timestamp) -> Option<(wire::build::Nsh, Option<wire::build::Gpe>)> {
    use wire::build::{Gpe, Nsh};
    let h = ts.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let spi = (h >> 40) as u32 & 0xff_ffff;
    let si = 1 + (h >> 32) as u8 % 255;
    let ttl = 1 + (h >> 24) as u8 % 63;
    match h >> 62 {
        0 => None,
        1 | 2 => Some((Nsh::md1(spi, si, [h as u32, 1, 2, spi]).ttl(ttl), None)),
        _ => {
            let value = h.to_be_bytes();
            let tlvs = [
                wire::nsh::Tlv {
                    class: 0x0101,
                    tlv_type: 1,
                    value: &value[..3],
                },
                wire::nsh::Tlv {
                    class: 0xfff6,
                    tlv_type: 0x22,
                    value: &value,
                },
            ];
            let mut gpe = Gpe::new([192, 168, 1, 1], [192, 168, 1, 2], spi ^ 0x5a5a);
            gpe.sport = 1024 + (h >> 16) as u16 % 60000;
            Some((Nsh::md2(spi, si, &tlvs).ttl(ttl), Some(gpe)))
        }
    }
}

/// The frame an NSH-aware chain sends for `inner` when the input it came from had the
/// header `nsh_wrap` gave its timestamp: the same NSH with SI − 1, the transport's
/// addresses swapped (the outer IPv4 TTL 64).
fn nsh_expected(ts: packet::Timestamp, inner: &[u8]) -> Vec<u8> {
    match nsh_wrap(ts) {
        None => inner.to_vec(),
        Some((nsh, gpe)) => {
            let r = nsh.repr();
            let back = match r.metadata {
                wire::nsh::Metadata::Type1(ctx) => wire::build::Nsh::md1(r.spi, r.si - 1, ctx),
                wire::nsh::Metadata::Type2(md) => {
                    let tlvs: Vec<_> = wire::nsh::TlvIter::new(md).map(Result::unwrap).collect();
                    wire::build::Nsh::md2(r.spi, r.si - 1, &tlvs)
                }
            }
            .ttl(r.ttl);
            match gpe {
                None => back.ethernet([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], inner),
                Some(g) => {
                    let mut b = g;
                    (b.src_ip, b.dst_ip) = (g.dst_ip, g.src_ip);
                    (b.src_mac, b.dst_mac) = (g.dst_mac, g.src_mac);
                    b.ttl = 64;
                    back.vxlan_gpe(&b, inner)
                }
            }
        }
    }
}

/// NSH-aware runs (`nsh = true`): every generated chain, given its trace with most frames
/// wrapped in an NSH (MD type 1 over Ethernet, MD type 2 over VXLAN-GPE) and some left
/// plain, sends exactly the plain run's packets, each wrapped in the NSH of the input it
/// came from (SI − 1, transport swapped) — replies of the reflected far end included — and
/// the naive, synth and fastpath modes agree on everything.
#[test]
fn nsh_runs_wrap_the_plain_outputs_in_every_mode() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let wrapped_out = AtomicU64::new(0);
    let plain_out = AtomicU64::new(0);
    let t = for_seeds("nsh", |seed, root, tally| {
        let (g, mut chain, trace) = setup(root, seed).map_err(|e| format!("seed {seed}: {e}"))?;
        let opts = g.options();
        let plain = run(&chain, &g.inputs(&trace), &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "plain naive run failed", &e))?;
        let wrapped = trace.with_file_name("trace-nsh.pcap");
        let (recs, err) = ports::pcap::read_all(&trace).map_err(|e| e.to_string())?;
        if let Some(e) = err {
            return Err(format!("seed {seed}: {e}"));
        }
        let precision = recs
            .first()
            .map_or(packet::Precision::Micro, |r| r.precision);
        let mut w = ports::pcap::PcapWriter::create(&wrapped, precision, ports::pcap::DLT_EN10MB)
            .map_err(|e| e.to_string())?;
        for r in &recs {
            let frame = match nsh_wrap(r.timestamp) {
                None => r.data.clone(),
                Some((nsh, None)) => nsh.ethernet([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], &r.data),
                Some((nsh, Some(gpe))) => nsh.vxlan_gpe(&gpe, &r.data),
            };
            w.write(r.timestamp, &frame).map_err(|e| e.to_string())?;
        }
        w.finish().map_err(|e| e.to_string())?;
        chain.nsh = true;
        let inputs = g.inputs(&wrapped);
        let naive = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "NSH naive run failed", &e))?;
        for (exit, packets) in &plain.exits {
            let got = naive.exits.get(exit).map_or(&[][..], Vec::as_slice);
            if got.len() != packets.len() {
                return Err(report(
                    seed,
                    &g,
                    &trace,
                    "NSH run differs from plain",
                    &format!("  {exit}: {} packets, plain {}", got.len(), packets.len()),
                ));
            }
            for (i, ((ts, _, inner), (ts2, _, out))) in packets.iter().zip(got).enumerate() {
                let c = if nsh_wrap(*ts).is_some() {
                    &wrapped_out
                } else {
                    &plain_out
                };
                c.fetch_add(1, Ordering::Relaxed);
                if ts != ts2 || *out != nsh_expected(*ts, inner) {
                    return Err(report(seed, &g, &trace, "NSH run differs from plain", &format!("  {exit} packet {i}: not the plain packet in its input's NSH\n  got  {out:02x?}\n  want {:02x?}", nsh_expected(*ts, inner))));
                }
            }
        }
        let t = &naive.summary.totals;
        if *t != plain.summary.totals || !t.balanced {
            return Err(report(
                seed,
                &g,
                &trace,
                "NSH run's totals differ from plain",
                &format!("  {t:?}\n  {:?}", plain.summary.totals),
            ));
        }
        for mode in [Mode::Synth, Mode::Fastpath] {
            let other = run(&chain, &inputs, &opts, mode)
                .map_err(|e| report(seed, &g, &trace, "NSH run failed", &e))?;
            if let Some(d) = differences(&naive, &other) {
                return Err(report(
                    seed,
                    &g,
                    &trace,
                    &format!("NSH {mode:?} differs from naive"),
                    &d,
                ));
            }
        }
        add(tally, &g, &naive.summary);
        Ok(())
    });
    // The test saw both kinds of outputs (it cannot pass on chains that send nothing).
    let (w, p) = (wrapped_out.into_inner(), plain_out.into_inner());
    eprintln!(
        "nsh: {w} outputs in their input's NSH, {p} plain, over {} chains",
        t.chains
    );
    assert!(w > 0 && p > 0, "{w} wrapped and {p} plain outputs");
}

/// A layout sound by construction for chains with operator NFs: every NF whose forward
/// path (`eth0` to `eth1`) is a `MonitorNF` alone (it reads, never writes nor drops) is
/// grouped with the NF its `eth1` is linked to. Whatever that NF does, it sees the bytes
/// the naive chain gives it, so every generated chain must run as naive.
fn monitor_first(ex: &chain::Executor) -> chain::layout::Parallel {
    use elements::Role;
    let mut groups = Vec::new();
    let mut used = vec![false; ex.nfs().len()];
    for (i, nf) in ex.nfs().iter().enumerate() {
        let device = |want: &str, to: bool| {
            nf.roles.iter().position(|r| match r {
                Role::FromDevice(d) => !to && d == want,
                Role::ToDevice(d) => to && d == want,
                _ => false,
            })
        };
        let next = |l: usize| {
            nf.edges
                .get(l)
                .and_then(|o| o.first())
                .and_then(|e| e.as_ref())
                .map(|e| e.element)
        };
        let (Some(from), Some(to)) = (device("eth0", false), device("eth1", true)) else {
            continue;
        };
        let Some(m) = next(from) else { continue };
        if nf.classes.get(m) != Some(&"MonitorNF") || next(m) != Some(to) {
            continue;
        }
        let chain::Place::Link(t) = ex.place(ex.global(i, to) as usize) else {
            continue;
        };
        let j = ex.element_nf(t as usize) as usize;
        if used[i] || used[j] || i == j {
            continue;
        }
        used[i] = true;
        used[j] = true;
        groups.push(chain::layout::Group { nfs: vec![i, j] });
    }
    chain::layout::Parallel { groups }
}

/// Parallel mode on generated chains with operator NFs, with the groups of
/// [`monitor_first`]: the same bytes, counters and state as naive; and some chains really
/// had a group.
#[test]
fn parallel_matches_naive_with_monitor_groups() {
    use std::sync::atomic::{AtomicU64, Ordering};
    bricks::register().expect("the operator NF classes register");
    let with_ops = Options {
        operator_nfs: true,
        ..Options::default()
    };
    let grouped = AtomicU64::new(0);
    let _ = for_seeds("parallel-monitors", |seed, root, tally| {
        let (g, chain, trace) =
            setup_with(root, seed, &with_ops).map_err(|e| format!("seed {seed}: {e}"))?;
        let inputs = g.inputs(&trace);
        let opts = g.options();
        let naive = run(&chain, &inputs, &opts, Mode::Naive)
            .map_err(|e| report(seed, &g, &trace, "naive run failed", &e))?;
        let par = run_installed(&chain, &inputs, &opts, |ex| {
            let layout = monitor_first(ex);
            if !layout.groups.is_empty() {
                grouped.fetch_add(1, Ordering::Relaxed);
            }
            let refused = ex.enable_parallel(&layout);
            assert!(refused.is_empty(), "{refused:?}");
        })
        .map_err(|e| report(seed, &g, &trace, "parallel run failed", &e))?;
        if let Some(d) = differences(&naive, &par) {
            return Err(report(seed, &g, &trace, "parallel differs from naive", &d));
        }
        add(tally, &g, &naive.summary);
        Ok(())
    });
    let n = grouped.into_inner();
    eprintln!("parallel-monitors: {n} chains with a group");
    if seeds().0.len() >= 100 {
        assert!(n >= 10, "only {n} chains had a MonitorNF group");
    }
}
