//! Element merging (`plan::merge`): the rules as a table (what is stepped over and what is
//! refused, with the word of the reason), the examples, and naive = merged on each: the
//! same packets, counters and state.

mod common;

use chain::{ChainFile, Endpoint, Executor, ExitSink, RunOptions};
use plan::merge::{analyze, CandidateKind, MergeReport};
use ports::gen::{generate, Anomalies, GenConfig, Mix, Rate};
use ports::pcap::{PcapWriter, DLT_EN10MB};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use synth::verify::{compare, run, run_installed, Mode};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory for one test, removed when dropped.
fn scratch(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("plan-merge-{test}-"))
        .tempdir()
        .unwrap()
}

/// Writes a chain of NFs with these Click configurations (`n0.eth1 -- n1.eth0 ...`,
/// entered at `n0.eth0`); a configuration without `FromDevice` is the body of
/// `FromDevice(eth0) -> BODY -> ToDevice(eth1)`.
fn write_chain(dir: &Path, configs: &[&str]) -> ChainFile {
    let texts: Vec<String> = configs
        .iter()
        .map(|c| {
            if c.contains("FromDevice") {
                c.to_string()
            } else {
                format!("FromDevice(eth0) -> {c} -> ToDevice(eth1);")
            }
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    common::write_chain_file(dir, &refs)
}

fn executor(chain: &ChainFile) -> Executor {
    Executor::new(chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count)).unwrap()
}

/// A trace with expiring TTLs, bad checksums, IP options, cut frames and short lengths.
fn trace(path: &Path, src: (&str, u8), dst: (&str, u8), seed: u64) {
    let cfg = GenConfig {
        packets: 1500,
        flows: 60,
        mix: Mix {
            tcp: 2,
            udp: 2,
            icmp: 1,
        },
        src_prefix: (src.0.parse().unwrap(), src.1),
        dst_prefix: (dst.0.parse().unwrap(), dst.1),
        seed,
        anomalies: Anomalies {
            ttl_range: Some((1, 12)),
            bad_ip_checksum: Rate(50_000),
            ip_options: Rate(50_000),
            truncated: Rate(20_000),
            short_transport: Rate(20_000),
            ..Anomalies::default()
        },
        ..GenConfig::default()
    };
    let mut w = PcapWriter::create(path, packet::Precision::Micro, DLT_EN10MB).unwrap();
    for (ts, frame) in generate(&cfg) {
        w.write(ts, &frame).unwrap();
    }
    w.finish().unwrap();
}

/// Runs `chain` naive and merged (the planner's skips installed, none refused) on `inputs`
/// (and `reflect`): they must not differ. Returns the elements stepped over.
fn naive_is_merged(
    chain: &ChainFile,
    inputs: &[(Endpoint, PathBuf)],
    reflect: &[&str],
) -> Vec<usize> {
    let opts = RunOptions {
        reflect: reflect
            .iter()
            .map(|r| Endpoint::parse(r).unwrap())
            .collect(),
        ..RunOptions::default()
    };
    let naive = run(chain, inputs, &opts, Mode::Naive).unwrap();
    let mut skipped = Vec::new();
    let merged = run_installed(chain, inputs, &opts, |ex| {
        let (m, _) = analyze(ex, None);
        let refused = ex.enable_merged(&m);
        assert!(refused.is_empty(), "{refused:?}");
        skipped = ex.merged_elements();
    })
    .unwrap();
    let d = compare(&naive, &merged);
    assert!(
        d.is_empty(),
        "merged differs from naive: {:?}",
        &d[..d.len().min(5)]
    );
    assert!(naive.packets() > 0 || naive.summary.totals.dropped > 0);
    skipped
}

fn candidate<'a>(r: &'a MergeReport, name: &str) -> Option<&'a plan::merge::Candidate> {
    r.candidates.iter().find(|c| c.name == name)
}

const CHECK: &str = "Strip(14) -> CheckIPHeader -> Unstrip(14)";

/// (NF configurations, element, stepped over?, a word of the reason).
const RULES: &[(&[&str], &str, bool, &str)] = &[
    // (a) the same check twice: the second never drops.
    (&[CHECK, CHECK], "n1/CheckIPHeader@3", true, "never drop"),
    // DecIPTTL keeps a valid checksum valid.
    (
        &["Strip(14) -> CheckIPHeader -> DecIPTTL -> Unstrip(14)", CHECK],
        "n1/CheckIPHeader@3",
        true,
        "bad-ip-checksum",
    ),
    // A weaker check after a stronger one (no checksum test) is redundant...
    (
        &[CHECK, "Strip(14) -> CheckIPHeader(CHECKSUM false) -> Unstrip(14)"],
        "n1/CheckIPHeader@3",
        true,
        "never drop",
    ),
    // ... a stronger after a weaker is not: the checksum was never checked.
    (
        &["Strip(14) -> CheckIPHeader(CHECKSUM false) -> Unstrip(14)", CHECK],
        "n1/CheckIPHeader@3",
        false,
        "bad-ip-checksum",
    ),
    // A write over IPv4 header bytes (frame bytes 20..26: flags to checksum) in between.
    (
        &[
            CHECK,
            "StoreEtherAddress(00:00:00:00:00:01, 20) -> Strip(14) -> CheckIPHeader -> Unstrip(14)",
        ],
        "n1/CheckIPHeader@4",
        false,
        "StoreEtherAddress",
    ),
    // The checksum rewritten in between (conservative: its effect is not modelled as valid).
    (
        &[
            "Strip(14) -> CheckIPHeader -> SetIPChecksum -> Unstrip(14)",
            CHECK,
        ],
        "n1/CheckIPHeader@3",
        false,
        "SetIPChecksum",
    ),
    // An element declaring it reads and writes nothing (`RoundRobinSwitch`) in between:
    // the check is stepped over.
    (
        &[
            CHECK,
            "Strip(14) -> RoundRobinSwitch -> CheckIPHeader -> Unstrip(14)",
        ],
        "n1/CheckIPHeader@4",
        true,
        "equal or stronger",
    ),
    // A stateful element in between does not matter to a check (it counts either way).
    (
        &[CHECK, "Strip(14) -> Counter -> CheckIPHeader -> Unstrip(14)"],
        "n1/CheckIPHeader@4",
        true,
        "never drop",
    ),
    // A check at another offset reads other bytes.
    (
        &[CHECK, "CheckIPHeader(0)"],
        "n1/CheckIPHeader@2",
        false,
        "still possible",
    ),
    // (b) the same lookup twice, the first's answer the only way on.
    (
        &[
            "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1); rt[0] -> Discard; rt[1] -> Unstrip(14) -> ToDevice(eth1);",
            "FromDevice(eth0) -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1); rt[0] -> Discard; rt[1] -> ToDevice(eth1);",
        ],
        "n1/rt",
        true,
        "never drop `no-route`, output 0",
    ),
    // Both answers reach the second: it must look again.
    (
        &[
            "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1); rt[0] -> Unstrip(14) -> ToDevice(eth1); rt[1] -> Unstrip(14) -> ToDevice(eth1);",
            "FromDevice(eth0) -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1); rt[0] -> Discard; rt[1] -> ToDevice(eth1);",
        ],
        "n1/rt",
        false,
        "still possible here: output 0, output 1",
    ),
    // A classifier never crosses a writer of what it reads (the destination annotation).
    (
        &[
            "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1); rt[0] -> Discard; rt[1] -> Unstrip(14) -> ToDevice(eth1);",
            "FromDevice(eth0) -> SetIPAddress(10.9.9.9) -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 1); rt[0] -> Discard; rt[1] -> ToDevice(eth1);",
        ],
        "n1/rt",
        false,
        "dst_ip_anno by n1/SetIPAddress",
    ),
    // A pass-through does nothing: stepped over.
    (&[CHECK, "Null"], "n1/Null@2", true, "unchanged"),
];

#[test]
fn rules_as_a_table() {
    let dir = scratch("rules");
    let t = trace_at(dir.path());
    for (i, (configs, element, taken, word)) in RULES.iter().enumerate() {
        let sub = dir.path().join(i.to_string());
        std::fs::create_dir_all(&sub).unwrap();
        let chain = write_chain(&sub, configs);
        let ex = executor(&chain);
        let (m, r) = analyze(&ex, None);
        let c = candidate(&r, element)
            .unwrap_or_else(|| panic!("case {i}: {element} not in the report:\n{}", r.text()));
        assert_eq!(c.taken, *taken, "case {i}: {element}\n{}", r.text());
        let why = c.why.join("; ");
        assert!(
            why.contains(word),
            "case {i}: {element}: `{word}` not in `{why}`"
        );
        let g = c.element;
        let in_skips = m
            .skips
            .iter()
            .any(|s| s.over.iter().any(|b| b.element == g));
        assert_eq!(in_skips, *taken, "case {i}");
        // And whatever was stepped over, the run is naive's.
        let inputs = vec![(Endpoint::parse("n0.eth0").unwrap(), t.clone())];
        let skipped = naive_is_merged(&chain, &inputs, &[]);
        assert_eq!(skipped.contains(&g), *taken, "case {i}");
    }
}

fn trace_at(dir: &Path) -> PathBuf {
    let p = dir.join("trace.pcap");
    trace(&p, ("10.0.0.0", 16), ("0.0.0.0", 0), 7);
    p
}

/// (c) Drops that could run earlier: how far, what stops them, how much of it the merged
/// mode applies; and naive = merged on each chain (the drops moved, counters as written).
#[test]
fn drops_move_back_only_where_the_rules_allow() {
    let dir = scratch("drops");
    // (body, dropper, elements it could run before, what stops it, elements it runs before
    // in the merged mode)
    let cases: &[(&str, &str, usize, &str, usize)] = &[
        // Across a paint (writes an annotation the filter does not read), up to the check
        // (which cuts the packet at its IPv4 length and marks the header the test reads).
        (
            "Strip(14) -> CheckIPHeader -> Paint(3) -> IPFilter(deny src 10.0.0.1, allow all) -> Unstrip(14)",
            "n0/IPFilter@5",
            1,
            "CheckIPHeader@3 (CheckIPHeader) writes what the test reads",
            1,
        ),
        // Across two writers of what it does not read: a paint and the destination annotation.
        (
            "Strip(14) -> CheckIPHeader -> Paint(3) -> SetIPAddress(10.9.9.9) -> IPFilter(deny src 10.0.0.0/30, allow all) -> Unstrip(14)",
            "n0/IPFilter@6",
            2,
            "CheckIPHeader@3 (CheckIPHeader) writes what the test reads",
            2,
        ),
        // Not across a counter: it would no longer see the packets dropped earlier.
        (
            "Strip(14) -> CheckIPHeader -> Counter -> IPFilter(deny src 10.0.0.1, allow all) -> Unstrip(14)",
            "n0/IPFilter@5",
            0,
            "keeps state",
            0,
        ),
        // Never a classifier across a writer of what it reads.
        (
            "Strip(14) -> MarkIPHeader -> DecIPTTL -> IPFilter(deny ttl < 5, allow all) -> Unstrip(14)",
            "n0/IPFilter@5",
            0,
            "writes what the test reads",
            0,
        ),
        // Not before the element packets enter by.
        (
            "CheckIPHeader(14)",
            "n0/CheckIPHeader@2",
            0,
            "FromDevice@1 (FromDevice) is where packets enter",
            0,
        ),
        // Not across a Strip: the test's positions move.
        (
            "Strip(14) -> IPFilter(deny ip[1] = 0, allow all) -> Unstrip(14)",
            "n0/IPFilter@3",
            0,
            "moves the data start",
            0,
        ),
        // Not across the mark of the header it reads.
        (
            "MarkIPHeader(14) -> IPFilter(deny src 10.0.0.1, allow all)",
            "n0/IPFilter@3",
            0,
            "header elsewhere",
            0,
        ),
        // A test that changes the packet itself (a check marks and cuts) is reported, not
        // moved. (It reads at the data start, so a header mark is no obstacle.)
        (
            "Strip(14) -> MarkIPHeader -> Paint(2) -> CheckIPHeader -> Unstrip(14)",
            "n0/CheckIPHeader@5",
            2,
            "Strip@2 (Strip) moves the data start",
            0,
        ),
    ];
    for (i, (body, element, n, word, applied)) in cases.iter().enumerate() {
        let sub = dir.path().join(i.to_string());
        std::fs::create_dir_all(&sub).unwrap();
        let chain = write_chain(&sub, &[body]);
        let ex = executor(&chain);
        let (m, r) = analyze(&ex, None);
        let d = r
            .drops
            .iter()
            .find(|d| d.name == *element)
            .unwrap_or_else(|| panic!("case {i}: {element} not among the drops:\n{}", r.text()));
        assert_eq!(d.across.len(), *n, "case {i}: {d:?}");
        assert!(d.stopped.contains(word), "case {i}: `{word}` not in {d:?}");
        assert_eq!(d.applied, *applied, "case {i}: {d:?}\n{}", r.text());
        let hoists: Vec<_> = m
            .hoists
            .iter()
            .filter(|h| ex.element_name(h.element) == *element)
            .collect();
        assert_eq!(hoists.len(), usize::from(*applied > 0), "case {i}: {m:?}");
        if let Some(h) = hoists.first() {
            assert_eq!(h.before.len(), *applied, "case {i}: {h:?}");
        }
        let p = sub.join("trace.pcap");
        trace(&p, ("10.0.0.0", 28), ("10.1.0.0", 16), i as u64);
        naive_is_merged(&chain, &[(Endpoint::parse("n0.eth0").unwrap(), p)], &[]);
    }
}

/// A moved drop test really runs first: the elements it now runs before see only the
/// packets it lets through (their own stats would say so; the summary adds the drops back),
/// and the counters as written come out of the summary unchanged.
#[test]
fn a_moved_drop_runs_first_and_the_counts_are_as_written() {
    let dir = scratch("hoist-counts");
    let chain = write_chain(
        dir.path(),
        &["Strip(14) -> CheckIPHeader -> Paint(3) -> IPFilter(deny src 10.0.0.0/29, allow all) -> Unstrip(14)"],
    );
    let p = dir.path().join("trace.pcap");
    trace(&p, ("10.0.0.0", 28), ("10.1.0.0", 16), 3);
    let inputs = [(Endpoint::parse("n0.eth0").unwrap(), p)];
    let opts = RunOptions::default();
    let naive = run(&chain, &inputs, &opts, Mode::Naive).unwrap();
    let mut hoists = 0;
    let merged = run_installed(&chain, &inputs, &opts, |ex| {
        let (m, _) = analyze(ex, None);
        hoists = m.hoists.len();
        assert!(ex.enable_merged(&m).is_empty());
    })
    .unwrap();
    assert_eq!(hoists, 1);
    assert!(compare(&naive, &merged).is_empty());
    let nf = &naive.summary.nfs[0];
    let el = |name: &str| nf.elements.iter().find(|e| e.name == name).unwrap();
    let filter = el("IPFilter@5");
    let dropped: u64 = filter.drops.values().sum();
    assert!(dropped > 0 && filter.output[0] > 0, "{filter:?}");
    // As written, the paint sees every packet the filter sees.
    assert_eq!(el("Paint@4").input, filter.input);
    // Merged, the paint is pushed only the packets the filter lets through (the pushes
    // counted by the profiling clock), and the summary still says every packet.
    let mut ex = executor(&chain);
    let (m, _) = analyze(&ex, None);
    assert!(ex.enable_merged(&m).is_empty());
    ex.profile_elements();
    let mut r = ports::pcap::PcapReader::open_ethernet(&inputs[0].1).unwrap();
    let records = Box::new(std::iter::from_fn(move || r.next_record()));
    let entry = ex.entry(&inputs[0].0).unwrap();
    let source = ex.source("trace".to_string(), entry, records);
    assert!(ex.run(vec![source], |_| {}).is_empty());
    let (paint, filt) = (ex.global(0, 3) as usize, ex.global(0, 4) as usize);
    assert_eq!(ex.element_name(paint), "n0/Paint@4");
    let (_, calls) = ex.element_times().unwrap();
    assert_eq!(calls[filt], filter.input);
    assert_eq!(calls[paint], filter.output[0]);
    let s = ex.summary();
    let paint_in = s.nfs[0]
        .elements
        .iter()
        .find(|e| e.name == "Paint@4")
        .unwrap()
        .input;
    assert_eq!(paint_in, filter.input);
    // Moves the executor cannot run are refused, each with why: before nothing, a path
    // that does not lead to the test, a test with another way on, the same edges twice.
    let mut ex = executor(&chain);
    let (m, _) = analyze(&ex, None);
    let good = m.hoists[0].clone();
    let mut bad = chain::layout::Merged::default();
    bad.hoists.push(good.clone());
    bad.hoists.push(chain::layout::Hoist {
        before: Vec::new(),
        ..good.clone()
    });
    let mut astray = good.clone();
    astray.before[0].element = paint + 7;
    bad.hoists.push(astray);
    bad.hoists.push(chain::layout::Hoist {
        output: 1,
        ..good.clone()
    });
    bad.hoists.push(good);
    let refused = ex.enable_merged(&bad);
    assert_eq!(refused.len(), 4, "{refused:?}");
    assert!(refused
        .iter()
        .all(|r| r.why.starts_with("the drop test stays")));
}

/// The ten routers: every router after the first steps over its check and its lookup on
/// the way out (nine checks fewer), the way back likewise; naive = merged.
#[test]
fn routers_merge_nine_checks_each_way() {
    let chain = ChainFile::load(&root().join("examples/routers/chain.toml")).unwrap();
    let ex = executor(&chain);
    let (m, r) = analyze(&ex, None);
    for i in 1..=10 {
        let out = candidate(&r, &format!("r{i}/CheckIPHeader@4")).is_some_and(|c| c.taken);
        let back = candidate(&r, &format!("r{i}/CheckIPHeader@7")).is_some_and(|c| c.taken);
        assert_eq!(out, i > 1, "r{i} out\n{}", r.text());
        assert_eq!(back, i < 10, "r{i} back\n{}", r.text());
        let rt = candidate(&r, &format!("r{i}/rt")).unwrap();
        assert!(rt.taken && rt.kind == CandidateKind::Classifier);
    }
    assert_eq!(r.checks_removed, 18);
    assert_eq!(r.lookups_reused, 10);
    // The way out of r2..r10: Strip -> (check, lookup) -> DecIPTTL.
    let outward = m
        .skips
        .iter()
        .filter(|s| s.over.len() == 2 && ex.element_name(s.from).ends_with("/Strip@3"))
        .count();
    assert_eq!(outward, 9);
    let dir = scratch("routers");
    let t = dir.path().join("t.pcap");
    trace(&t, ("10.0.0.0", 16), ("0.0.0.0", 0), 3);
    let inputs = vec![(Endpoint::parse("r1.eth0").unwrap(), t)];
    assert_eq!(naive_is_merged(&chain, &inputs, &[]).len(), 28);
}

/// The ISP chain: the router's check after the firewall's is stepped over; the NAT's
/// check after the router's TTL decrement and rewrites of ... is kept where a writer is in
/// between. The NAPT chain: each NAT rewrites what the next checks (as it declares):
/// nothing merges. Both naive = merged.
#[test]
fn isp_and_napts() {
    let dir = scratch("isp");
    let isp = ChainFile::load(&root().join("examples/isp/chain.toml")).unwrap();
    let (_, r) = analyze(&executor(&isp), None);
    assert!(candidate(&r, "router/CheckIPHeader@4").is_some_and(|c| c.taken));
    assert_eq!(r.checks_removed, 3, "{}", r.text());
    let t = dir.path().join("t.pcap");
    trace(&t, ("192.168.0.0", 24), ("10.0.2.0", 24), 5);
    let inputs = vec![(Endpoint::parse("fw.eth0").unwrap(), t.clone())];
    // With the rewriters' declarations, the way back steps over two more checks.
    assert_eq!(naive_is_merged(&isp, &inputs, &["napt.eth1"]).len(), 3);

    let napts = ChainFile::load(&root().join("examples/napts/chain.toml")).unwrap();
    let (m, r) = analyze(&executor(&napts), None);
    assert!(m.skips.is_empty(), "{}", r.text());
    let c = candidate(&r, "n2/CheckIPHeader@4").unwrap();
    assert!(!c.taken);
    assert!(c.why.join(" ").contains("IPRewriter"), "{:?}", c.why);
    let inputs = vec![(Endpoint::parse("n1.eth0").unwrap(), t)];
    assert!(naive_is_merged(&napts, &inputs, &[]).is_empty());
}

/// A placement cuts what is known: the routers in two stages merge nothing across the
/// cut (r6's check on the way out is kept), the rest as before.
#[test]
fn stages_are_merged_apart() {
    let chain = ChainFile::load(&root().join("examples/routers/chain.toml")).unwrap();
    let ex = executor(&chain);
    let placement = chain::layout::Placement {
        stages: vec![
            chain::layout::Stage {
                nfs: (0..5).collect(),
                processor: 0,
            },
            chain::layout::Stage {
                nfs: (5..10).collect(),
                processor: 1,
            },
        ],
        replicas: 1,
    };
    let (_, r) = analyze(&ex, Some(&placement));
    assert_eq!(r.stages.len(), 2);
    assert!(!candidate(&r, "r6/CheckIPHeader@4").is_some_and(|c| c.taken));
    assert!(candidate(&r, "r7/CheckIPHeader@4").is_some_and(|c| c.taken));
    assert_eq!(r.checks_removed, 16);
}

/// The merged mode refuses an input in the middle of a link (what was stepped over holds
/// for packets coming in by the chain's entries), and bad skips.
#[test]
fn enable_merged_refuses_what_it_cannot_run() {
    let dir = scratch("refuse");
    let chain = write_chain(dir.path(), &[CHECK, CHECK]);
    let mut ex = executor(&chain);
    let (m, _) = analyze(&ex, None);
    assert!(!m.skips.is_empty());
    let mut bad = m.clone();
    bad.skips.push(chain::layout::Skip {
        from: 0,
        output: 7,
        over: vec![chain::layout::Bypass {
            element: 1,
            output: 0,
        }],
    });
    bad.skips.push(m.skips[0].clone());
    let refused = ex.enable_merged(&bad);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(ex.entry(&Endpoint::parse("n0.eth0").unwrap()).is_some());
    assert!(ex.entry(&Endpoint::parse("n1.eth0").unwrap()).is_none());
}

/// The report is serde data and text.
#[test]
fn report_prints_and_serializes() {
    let chain = ChainFile::load(&root().join("examples/routers/chain.toml")).unwrap();
    let (_, r) = analyze(&executor(&chain), None);
    let text = r.text();
    assert!(text.contains("18 header check(s) removed"), "{text}");
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["checks_removed"], 18);
    assert!(v["candidates"].as_array().is_some_and(|a| !a.is_empty()));
}

proptest! {
    /// What rule (a) relies on: DecIPTTL's incremental update (the element's and the
    /// model's) keeps a valid IPv4 header checksum valid, for any header and TTL > 1.
    #[test]
    fn ttl_decrement_keeps_a_valid_checksum_valid(
        mut h in proptest::collection::vec(any::<u8>(), 20),
        ttl in 2u8..=255,
    ) {
        h[0] = 0x45;
        h[8] = ttl;
        h[10] = 0;
        h[11] = 0;
        let c = wire::checksum::data(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        prop_assert!(wire::checksum::ipv4_header_ok(&h));
        // The element's update.
        let mut e = h.clone();
        e[8] -= 1;
        let c2 = wire::checksum::ttl_decremented(u16::from_be_bytes([e[10], e[11]]));
        e[10..12].copy_from_slice(&c2.to_be_bytes());
        prop_assert!(wire::checksum::ipv4_header_ok(&e));
        // The model's.
        use elements::model::{apply, Case, Effect, Filter, IpAnchor, Model, Outcome};
        let m = Model {
            ip_at: IpAnchor::Data(0),
            cases: vec![Case::new(Filter::any(), Outcome::Out(0)).effect(Effect::DecTtl)],
        };
        let out = apply(&m, packet::Packet::from_bytes(&h));
        prop_assert!(wire::checksum::ipv4_header_ok(&out.packet.data()[..20]));
        prop_assert_eq!(out.packet.data()[8], ttl - 1);
    }
}
