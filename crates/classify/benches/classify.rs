//! Classification micro-benchmarks: lookups per second of the HyperSplit trees one key at a
//! time ([`Classifier::classify`], `hypersplit`) and in batches of 64
//! ([`Classifier::classify_batch`], `hypersplit-batch64`) against the linear scan of the
//! rules ([`Classifier::classify_linear`]) on the same 1024 headers.
//!
//! Always on a generated 1000-rule 5-tuple set (seeded; headers are random corners of its
//! rules, as ClassBench's trace generator draws them), and on the ClassBench 10k sets in
//! `../shared/data/classbench` when present (neurocuts acl1/fw1/ipc1, cutsplit acl/fw/ipc;
//! headers from the set's trace when there is one, else corners of its rules). Missing sets
//! are skipped with a message. `cargo bench -p classify`; about 2 s per benchmark.

use classify::classbench::{corners, parse_rules, parse_trace};
use classify::{Classifier, Rule};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

const HEADERS: usize = 1024;

/// A seeded 5-tuple rule set shaped roughly like a ClassBench ACL: address prefixes of
/// length 0/8/16/24/32 (mostly long), source ports mostly any, destination ports well-known
/// values, ranges or any, protocol TCP, UDP or any.
fn generated(n: usize, seed: u64) -> Vec<Rule> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let prefix = |next: &mut dyn FnMut() -> u64| {
        let len = [0u32, 8, 16, 24, 24, 28, 32, 32][(next() % 8) as usize];
        let a = next() & 0xffff_ffff;
        let size = 1u64 << (32 - len);
        let lo = a & !(size - 1);
        (lo, lo + size - 1)
    };
    (0..n)
        .map(|_| {
            let src = prefix(&mut next);
            let dst = prefix(&mut next);
            let sport = match next() % 10 {
                0..=6 => (0, 65535),
                7 | 8 => (1024, 65535),
                _ => {
                    let p = next() % 65536;
                    (p, p)
                }
            };
            let dport = match next() % 10 {
                0..=4 => {
                    let p = [22u64, 25, 53, 80, 443, 8080, 3306, 161][(next() % 8) as usize];
                    (p, p)
                }
                5..=7 => {
                    let lo = next() % 65000;
                    (lo, lo + next() % 500)
                }
                _ => (0, 65535),
            };
            let proto = match next() % 4 {
                0 | 1 => (6, 6),
                2 => (17, 17),
                _ => (0, 255),
            };
            Rule {
                ranges: vec![src, dst, sport, dport, proto],
            }
        })
        .collect()
}

/// (name, rules, headers) of every set to measure.
fn sets() -> Vec<(String, Vec<Rule>, Vec<[u64; 5]>)> {
    let g = generated(1000, 42);
    let h = corners(&g, HEADERS, 1);
    let mut out = vec![("generated-1k".to_string(), g, h)];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench");
    for name in [
        "neurocuts/acl1_10k",
        "neurocuts/fw1_10k",
        "neurocuts/ipc1_10k",
        "cutsplit/acl_10k",
        "cutsplit/fw_10k",
        "cutsplit/ipc_10k",
    ] {
        let Ok(text) = std::fs::read_to_string(dir.join(name)) else {
            eprintln!("skipping {name}: not found under {}", dir.display());
            continue;
        };
        let rules = match parse_rules(&text, name) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("skipping {name}: {e}");
                continue;
            }
        };
        let trace = std::fs::read_to_string(dir.join(format!("{name}_trace")))
            .ok()
            .and_then(|t| parse_trace(&t, name).ok())
            .filter(|t| !t.is_empty());
        let headers = match trace {
            // Spread over the whole trace.
            Some(t) => (0..HEADERS).map(|i| t[i * t.len() / HEADERS]).collect(),
            None => corners(&rules, HEADERS, 1),
        };
        out.push((name.replace('/', "-"), rules, headers));
    }
    out
}

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("classify");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(HEADERS as u64));
    for (name, rules, headers) in sets() {
        let c = match Classifier::new(rules, 5) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipping {name}: {e}");
                continue;
            }
        };
        g.sample_size(50);
        g.bench_with_input(BenchmarkId::new("hypersplit", &name), &headers, |b, h| {
            b.iter(|| {
                h.iter()
                    .filter_map(|k| c.classify(black_box(&k[..])))
                    .sum::<usize>()
            })
        });
        let mut out = vec![None; HEADERS];
        g.bench_with_input(
            BenchmarkId::new("hypersplit-batch64", &name),
            &headers,
            |b, h| {
                b.iter(|| {
                    for (ks, os) in h.chunks(64).zip(out.chunks_mut(64)) {
                        c.classify_batch(black_box(ks), os).expect("lengths match");
                    }
                    out.iter().flatten().sum::<usize>()
                })
            },
        );
        g.sample_size(10);
        g.bench_with_input(BenchmarkId::new("linear-scan", &name), &headers, |b, h| {
            b.iter(|| {
                h.iter()
                    .filter_map(|k| c.classify_linear(black_box(&k[..])))
                    .sum::<usize>()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
