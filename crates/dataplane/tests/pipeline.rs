//! `fusebox run --plan`'s executor (`dataplane::pipeline`): a placement's stages on threads,
//! outputs, counters and state identical to one naive executor on the example chains, for
//! one stage, one NF per stage, mixed stages and replicas; placements a packet could cross
//! back through to state are refused; the in-memory replay pushes every packet.

use chain::layout::{Placement, Stage};
use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use dataplane::{verify_plan, Pipeline, Setup};
use ports::gen::{generate, Anomalies, GenConfig};
use ports::pcap::{PcapWriter, Record};
use std::path::{Path, PathBuf};
use synth::Mode;

fn example(path: &str) -> ChainFile {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(path);
    ChainFile::load(&p).unwrap()
}

/// A placement from stage specs by NF name (`"fw,router|napt"`), stage `s` on processor `s`.
fn placement(chain: &ChainFile, spec: &str, replicas: usize) -> Placement {
    let stages = spec
        .split('|')
        .enumerate()
        .map(|(s, part)| Stage {
            nfs: part
                .split(',')
                .map(|n| chain.nfs.iter().position(|x| x.name == n).unwrap())
                .collect(),
            processor: s,
        })
        .collect();
    Placement { stages, replicas }
}

/// A scratch directory for one test, removed when dropped.
fn dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fusebox-pipeline-{name}-"))
        .tempdir()
        .unwrap()
}

/// A trace mixing flows to everywhere, flows back to the sources' side (a router sends them
/// out the way they came) and short TTLs, written to `path`.
fn trace(path: &Path, src: &str, seed: u64) -> Vec<Record> {
    let mut records = Vec::new();
    for (i, dst) in ["0.0.0.0/0", "192.168.0.0/16", "10.0.0.0/16"]
        .iter()
        .enumerate()
    {
        let cfg = GenConfig {
            packets: 700,
            flows: 60,
            seed: seed + i as u64,
            src_prefix: ports::gen::parse_prefix(src).unwrap(),
            dst_prefix: ports::gen::parse_prefix(dst).unwrap(),
            anomalies: Anomalies {
                ttl_range: Some((1, 64)),
                ..Anomalies::default()
            },
            ..GenConfig::default()
        };
        records.extend(generate(&cfg).records());
    }
    // Interleave the three by position so each batch mixes them.
    let n = records.len() / 3;
    let mut mixed = Vec::new();
    for k in 0..n {
        for part in 0..3 {
            let mut r = records[part * n + k].clone();
            r.timestamp = packet::Timestamp(1_000_000_000 + (mixed.len() as u64) * 1_000);
            mixed.push(r);
        }
    }
    let mut w = PcapWriter::create(path, packet::Precision::Micro, 1).unwrap();
    for r in &mixed {
        w.write(r.timestamp, &r.data).unwrap();
    }
    w.finish().unwrap();
    mixed
}

/// The placement's run equals one naive executor's: every exit's packets in order,
/// counters, state; and every packet is accounted for.
fn same_as_naive(chain: &ChainFile, inputs: &[(Endpoint, PathBuf)], spec: &str) {
    let opts = RunOptions::default();
    let want = synth::verify::run(chain, inputs, &opts, Mode::Naive).unwrap();
    assert!(want.packets() > 0, "{spec}: the trace reaches an exit");
    let got = verify_plan(chain, inputs, &opts, &placement(chain, spec, 1)).unwrap();
    for (x, packets) in &want.exits {
        let g = got
            .exits
            .get(x)
            .unwrap_or_else(|| panic!("{spec}: exit {x}"));
        assert_eq!(g.len(), packets.len(), "{spec}: exit {x}");
        assert!(g == packets, "{spec}: exit {x} differs");
    }
    assert_eq!(got.exits.len(), want.exits.len(), "{spec}");
    assert_eq!(got.summary, want.summary, "{spec}");
    assert_eq!(got.state, want.state, "{spec}");
    assert!(got.summary.balanced(), "{spec}");
}

#[test]
fn routers_in_any_stages_run_as_one_executor() {
    let chain = example("routers/chain.toml");
    let d = dir("routers");
    let f = d.path().join("t.pcap");
    trace(&f, "10.0.0.0/16", 1);
    let inputs = vec![(Endpoint::parse("r1.eth0").unwrap(), f)];
    for spec in [
        "r1,r2,r3,r4,r5,r6,r7,r8,r9,r10",
        "r1|r2|r3|r4|r5|r6|r7|r8|r9|r10",
        "r1,r2,r3|r4,r5,r6,r7|r8,r9,r10",
        "r1,r2,r3,r4,r5|r6,r7,r8,r9,r10",
    ] {
        same_as_naive(&chain, &inputs, spec);
    }
}

#[test]
fn isp_pipelines_run_as_one_executor() {
    let chain = example("isp/chain.toml");
    let d = dir("isp");
    let f = d.path().join("t.pcap");
    trace(&f, "10.0.0.0/16", 7);
    let inputs = vec![(Endpoint::parse("fw.eth0").unwrap(), f)];
    for spec in ["fw,router,napt", "fw|router,napt"] {
        same_as_naive(&chain, &inputs, spec);
    }
    // The router sends packets for the customers' side back through the firewall: the
    // firewall's way back runs on stage 0 after later inputs, which changes nothing.
    let want = synth::verify::run(&chain, &inputs, &RunOptions::default(), Mode::Naive).unwrap();
    assert!(
        want.exits.get("fw.eth0").is_some_and(|v| !v.is_empty()),
        "the trace crosses back"
    );
}

#[test]
fn nat_chains_run_on_one_stage_with_replicas() {
    let chain = example("napts/chain.toml");
    let d = dir("napts");
    let f = d.path().join("t.pcap");
    trace(&f, "10.0.0.0/16", 3);
    let inputs = vec![(Endpoint::parse("n1.eth0").unwrap(), f)];
    let one = (1..=10)
        .map(|i| format!("n{i}"))
        .collect::<Vec<_>>()
        .join(",");
    same_as_naive(&chain, &inputs, &one);
    // Replicas are `--cores N` (each replica's NATs take their slice of the ports).
    let opts = RunOptions::default();
    let want = dataplane::verify_run(&chain, &inputs, &opts, Mode::Naive, 2).unwrap();
    let got = verify_plan(&chain, &inputs, &opts, &placement(&chain, &one, 2)).unwrap();
    assert!(got.exits == want.exits);
    assert_eq!(got.summary, want.summary);
    assert_eq!(got.state, want.state);
}

#[test]
fn replicas_of_a_pipeline_are_cores_n_of_its_stages() {
    let chain = example("isp/chain.toml");
    let d = dir("isp-replicas");
    let f = d.path().join("t.pcap");
    trace(&f, "10.0.0.0/16", 11);
    let inputs = vec![(Endpoint::parse("fw.eth0").unwrap(), f)];
    let opts = RunOptions::default();
    let want = dataplane::verify_run(&chain, &inputs, &opts, Mode::Naive, 2).unwrap();
    for spec in ["fw,router,napt", "fw|router,napt"] {
        let got = verify_plan(&chain, &inputs, &opts, &placement(&chain, spec, 2)).unwrap();
        assert!(got.exits == want.exits, "{spec}");
        assert_eq!(got.summary, want.summary, "{spec}");
        assert_eq!(got.state, want.state, "{spec}");
        assert!(got.summary.balanced());
    }
}

#[test]
fn placements_that_cross_back_into_state_are_refused() {
    let chain = example("isp/chain.toml");
    let opts = RunOptions::default();
    let probe = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count)).unwrap();
    let setup = Setup {
        chain: chain.clone(),
        options: opts,
        mode: Mode::Naive,
        fast: chain::FastOptions::default(),
        trust_switch_tags: false,
        board: None,
        stop: None,
    };
    for spec in ["fw|router|napt", "fw,router|napt"] {
        let e =
            dataplane::pipeline::check(&setup, &probe, &placement(&chain, spec, 1)).unwrap_err();
        assert!(
            e.contains("napt/rw") && e.contains("one stage"),
            "{spec}: {e}"
        );
        let Err(e) = Pipeline::start(&setup, &probe, &placement(&chain, spec, 1), false, vec![])
        else {
            panic!("{spec} started");
        };
        assert!(e.to_string().contains("the plan cannot run"), "{e}");
    }
    let synth = Setup {
        mode: Mode::Synth,
        ..setup.clone()
    };
    let e = dataplane::pipeline::check(&synth, &probe, &placement(&chain, "fw|router,napt", 1))
        .unwrap_err();
    assert!(e.contains("naive"), "{e}");
    assert!(
        dataplane::pipeline::check(&synth, &probe, &placement(&chain, "fw,router,napt", 2)).is_ok()
    );
}

#[test]
fn an_in_memory_replay_pushes_every_packet_through_every_stage() {
    let chain = example("routers/chain.toml");
    let d = dir("replay");
    let records = trace(&d.path().join("t.pcap"), "10.0.0.0/16", 5);
    let opts = RunOptions::default();
    let mut probe = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count)).unwrap();
    let at = probe.entry(&Endpoint::parse("r1.eth0").unwrap()).unwrap();
    let setup = Setup {
        chain: chain.clone(),
        options: opts.clone(),
        mode: Mode::Naive,
        fast: chain::FastOptions::default(),
        trust_switch_tags: false,
        board: None,
        stop: None,
    };
    // The same replay on one executor, for the counters.
    let mut one = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count)).unwrap();
    one.replay(&[(at, records.clone())], 3);
    let want = one.summary();
    for (spec, replicas) in [
        ("r1,r2,r3,r4,r5|r6,r7,r8,r9,r10", 1),
        ("r1,r2,r3,r4,r5,r6,r7,r8,r9,r10", 2),
    ] {
        let p = placement(&chain, spec, replicas);
        let dispatcher = dataplane::Dispatcher::for_chain(&mut probe, replicas);
        let shares = dataplane::predispatch(&dispatcher, &[(at, records.clone())]);
        let mut pipe = Pipeline::start(&setup, &probe, &p, false, shares).unwrap();
        let (n, t) = pipe.pass(2).unwrap();
        assert_eq!(n, 2 * records.len() as u64);
        assert!(t.as_nanos() > 0);
        let (n, _) = pipe.pass(1).unwrap();
        assert_eq!(n, records.len() as u64);
        let s = pipe.finish().unwrap().summary();
        assert!(s.balanced(), "{}", s.to_text());
        assert_eq!(s.totals, want.totals, "{spec}");
        assert_eq!(s.exits, want.exits, "{spec}");
        if replicas == 1 {
            assert_eq!(s, want, "{spec}");
        }
    }
}
