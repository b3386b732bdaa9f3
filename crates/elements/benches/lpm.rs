//! Longest-prefix-match micro-benchmarks: the IPv4 16-8-8 table ([`Lpm`]) and the IPv6 radix
//! trie ([`Lpm6`]) on seeded BGP-shaped tables of 16k and 500k prefixes (`ip::tables`):
//! lookups of 1024 addresses per iteration (three quarters inside a random prefix of the
//! table, a quarter random), a linear scan of the 16k tables as the baseline, and the time
//! to build each table.
//!
//! `cargo bench -p elements --bench lpm`; each benchmark measures for about 2 s.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use elements::ip::tables::{bgp_v4, bgp_v6, XorShift};
use elements::ip::{mask6, Lpm, Lpm6};
use elements::net::mask;
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

const BATCH: usize = 1024;
const SIZES: [(usize, &str); 2] = [(16_384, "16k"), (500_000, "500k")];

fn addrs4(t: &[(Ipv4Addr, u8)], seed: u64) -> Vec<u32> {
    let mut r = XorShift::new(seed);
    (0..BATCH)
        .map(|k| {
            let (p, l) = t[r.below(t.len() as u64) as usize];
            if k % 4 == 3 {
                r.next() as u32
            } else {
                u32::from(p) | (r.next() as u32 & !mask(l))
            }
        })
        .collect()
}

fn addrs6(t: &[(Ipv6Addr, u8)], seed: u64) -> Vec<u128> {
    let mut r = XorShift::new(seed);
    (0..BATCH)
        .map(|k| {
            let (p, l) = t[r.below(t.len() as u64) as usize];
            if k % 4 == 3 {
                (r.next128() >> 3) | (1 << 125)
            } else {
                u128::from(p) | (r.next128() & !mask6(l))
            }
        })
        .collect()
}

fn linear4(t: &[(Ipv4Addr, u8)], a: u32) -> Option<usize> {
    let mut best: Option<(usize, u8)> = None;
    for (i, &(p, l)) in t.iter().enumerate() {
        if (a ^ u32::from(p)) & mask(l) == 0 && best.is_none_or(|(_, bl)| l > bl) {
            best = Some((i, l));
        }
    }
    best.map(|b| b.0)
}

fn linear6(t: &[(Ipv6Addr, u8)], a: u128) -> Option<usize> {
    let mut best: Option<(usize, u8)> = None;
    for (i, &(p, l)) in t.iter().enumerate() {
        if (a ^ u128::from(p)) & mask6(l) == 0 && best.is_none_or(|(_, bl)| l > bl) {
            best = Some((i, l));
        }
    }
    best.map(|b| b.0)
}

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("lpm-lookup");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(BATCH as u64));
    for (n, name) in SIZES {
        let t4 = bgp_v4(n, 7);
        let lpm = Lpm::new(&t4);
        let a4 = addrs4(&t4, 1);
        g.bench_with_input(BenchmarkId::new("ipv4-dir-16-8-8", name), &a4, |b, a| {
            b.iter(|| {
                a.iter()
                    .filter_map(|&x| lpm.lookup(black_box(x)))
                    .sum::<usize>()
            })
        });
        let t6 = bgp_v6(n, 7);
        let trie = Lpm6::new(&t6);
        let a6 = addrs6(&t6, 1);
        g.bench_with_input(BenchmarkId::new("ipv6-radix-trie", name), &a6, |b, a| {
            b.iter(|| {
                a.iter()
                    .filter_map(|&x| trie.lookup_u128(black_box(x)))
                    .sum::<usize>()
            })
        });
        if n <= 16_384 {
            g.sample_size(10);
            g.bench_with_input(BenchmarkId::new("ipv4-linear-scan", name), &a4, |b, a| {
                b.iter(|| {
                    a.iter()
                        .filter_map(|&x| linear4(&t4, black_box(x)))
                        .sum::<usize>()
                })
            });
            g.bench_with_input(BenchmarkId::new("ipv6-linear-scan", name), &a6, |b, a| {
                b.iter(|| {
                    a.iter()
                        .filter_map(|&x| linear6(&t6, black_box(x)))
                        .sum::<usize>()
                })
            });
            g.sample_size(100);
        }
    }
    g.finish();
}

fn builds(c: &mut Criterion) {
    let mut g = c.benchmark_group("lpm-build");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    for (n, name) in SIZES {
        let t4 = bgp_v4(n, 7);
        g.bench_with_input(BenchmarkId::new("ipv4-dir-16-8-8", name), &t4, |b, t| {
            b.iter(|| Lpm::new(black_box(t)).memory())
        });
        let t6 = bgp_v6(n, 7);
        g.bench_with_input(BenchmarkId::new("ipv6-radix-trie", name), &t6, |b, t| {
            b.iter(|| Lpm6::new(black_box(t)).memory())
        });
    }
    g.finish();
}

criterion_group!(benches, lookups, builds);
criterion_main!(benches);
