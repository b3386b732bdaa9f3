//! `dataplane::run` from a generic feed (as a live loop would call it): outputs in canonical
//! order, equal to one executor's on a stateless chain, whatever the feed's idle moments;
//! per-worker counts add up; a NAT chain's modes agree at two workers.

use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use dataplane::{Dispatcher, Input, Next, Setup};
use ports::gen::{generate, GenConfig};
use std::collections::BTreeMap;
use std::path::PathBuf;
use synth::Mode;

fn example(path: &str) -> ChainFile {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(path);
    ChainFile::load(&p).unwrap()
}

type Out = BTreeMap<String, Vec<(u64, Vec<u8>)>>;

/// The chain on `workers` workers over `records` at `entry`, the feed idle every `idle`
/// packets: outputs per exit (timestamp, bytes) and the outcome.
fn on_workers(
    chain: &ChainFile,
    entry: &Endpoint,
    records: &[ports::pcap::Record],
    mode: Mode,
    workers: usize,
    idle: usize,
) -> (Out, dataplane::Outcome) {
    let opts = RunOptions::default();
    let mut probe = Executor::new(chain, &opts, |_, _| Ok(ExitSink::Count)).unwrap();
    let at = probe.entry(entry).unwrap();
    let names = probe.exit_names();
    let dispatcher = Dispatcher::for_chain(&mut probe, workers);
    let setup = Setup {
        chain: chain.clone(),
        options: opts,
        mode,
        fast: chain::FastOptions::default(),
        trust_switch_tags: false,
        board: None,
        stop: None,
    };
    let mut next = 0usize;
    let mut idled = false;
    let mut feed = || {
        if next % idle == idle - 1 && !idled {
            idled = true;
            return Next::Idle;
        }
        idled = false;
        let Some(r) = records.get(next) else {
            return Next::End;
        };
        next += 1;
        Next::Input(Input {
            entry: at,
            timestamp: r.timestamp,
            precision: r.precision,
            data: r.data.clone(),
        })
    };
    let mut out: Out = BTreeMap::new();
    let outcome = dataplane::run(
        &setup,
        &dispatcher,
        &mut feed,
        true,
        |x, ts, _, d| out.entry(names[x].clone()).or_default().push((ts.0, d)),
        |_| {},
    )
    .unwrap();
    (out, outcome)
}

#[test]
fn a_stateless_chain_gives_one_executors_outputs_at_any_worker_count() {
    let chain = example("routers/chain.toml");
    let entry = Endpoint::parse("r1.eth0").unwrap();
    let cfg = GenConfig {
        packets: 3000,
        flows: 200,
        ..GenConfig::default()
    };
    let records = generate(&cfg).records();
    let mut ex = Executor::new(&chain, &RunOptions::default(), |_, _| {
        Ok(ExitSink::Memory(Vec::new()))
    })
    .unwrap();
    let at = ex.entry(&entry).unwrap();
    for (i, r) in records.iter().enumerate() {
        ex.push_input(at, i as u64, &r.data, r.timestamp, r.precision);
    }
    ex.settle_flows();
    let want: Out = ex
        .finish()
        .unwrap()
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k, v.into_iter().map(|(ts, _, d)| (ts.0, d)).collect()))
        .collect();
    assert!(!want.is_empty());
    for workers in [1, 2, 3] {
        for idle in [5, 1000] {
            for mode in Mode::ALL {
                let (got, outcome) = on_workers(&chain, &entry, &records, mode, workers, idle);
                assert!(got == want, "{workers} workers, idle every {idle}, {mode}");
                let per: Vec<u64> = outcome
                    .workers
                    .iter()
                    .map(|w| w.summary.totals.input)
                    .collect();
                assert_eq!(per.len(), workers);
                assert_eq!(per.iter().sum::<u64>(), 3000);
                assert!(per.iter().all(|&n| n > 0), "{per:?}");
                let s = outcome.summary();
                assert!(s.balanced());
                assert_eq!(s.totals.input, 3000);
            }
        }
    }
}

#[test]
fn nat_modes_agree_on_two_workers_from_a_feed() {
    let chain = example("fig5/chain.toml");
    let entry = Endpoint::parse("napt.eth0").unwrap();
    let cfg = GenConfig {
        packets: 2000,
        flows: 100,
        ..GenConfig::default()
    };
    let records = generate(&cfg).records();
    let (naive, a) = on_workers(&chain, &entry, &records, Mode::Naive, 2, 9);
    for mode in [Mode::Synth, Mode::Fastpath] {
        let (got, b) = on_workers(&chain, &entry, &records, mode, 2, 9);
        assert!(got == naive, "{mode}");
        assert_eq!(a.summary(), b.summary(), "{mode}");
        assert_eq!(a.state(), b.state(), "{mode}");
    }
}

#[test]
fn a_stop_ends_every_replay_worker_at_its_next_batch() {
    let chain = example("fig5/chain.toml");
    let entry = Endpoint::parse("napt.eth0").unwrap();
    let cfg = GenConfig {
        packets: 4000,
        flows: 100,
        ..GenConfig::default()
    };
    let records = generate(&cfg).records();
    let opts = RunOptions::default();
    let batch = opts.batch as u64;
    let mut probe = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count)).unwrap();
    let at = probe.entry(&entry).unwrap();
    let dispatcher = Dispatcher::for_chain(&mut probe, 2);
    let shares = dataplane::predispatch(&dispatcher, &[(at, records)]);
    let sizes: Vec<u64> = shares
        .iter()
        .map(|s| s.iter().map(|(_, r)| r.len() as u64).sum())
        .collect();
    assert!(sizes.iter().all(|&n| n > batch), "{sizes:?}");
    let stop = observe::stop::Flag::new();
    let setup = Setup {
        chain: chain.clone(),
        options: opts,
        mode: Mode::Fastpath,
        fast: chain::FastOptions::default(),
        trust_switch_tags: false,
        board: None,
        stop: Some(stop.clone()),
    };
    let mut crew = dataplane::ReplayWorkers::start(&setup, shares).unwrap();
    // Not set: whole passes.
    let (n, _, each) = crew.pass(2).unwrap();
    assert_eq!(n, 8000);
    assert_eq!(each, sizes.iter().map(|n| 2 * n).collect::<Vec<_>>());
    // Set: each worker runs the batch it is in (here its first) and ends the pass there.
    stop.set();
    let (n, _, each) = crew.pass(1000).unwrap();
    assert_eq!(each, vec![batch, batch]);
    let s = crew.finish().unwrap().summary();
    assert!(s.balanced(), "{}", s.to_text());
    assert_eq!(s.totals.input, 8000 + n);
}
