//! Single-key against batch lookup rates, alternating in one process (the machine this
//! project is measured on is shared, so only same-run ratios are meaningful).
//!
//! `cargo run --release -p classify --example rates -- [--draw N] [--rounds R]
//! [--updates U] FILE...`: for each ClassBench filter set, N headers (default 100,000)
//! drawn as random rule corners (seed 1, as `fusebox classify --draw`), then R rounds
//! (default 20) each timing one pass of [`Classifier::classify`] per header and one pass of
//! [`Classifier::classify_batch`] over all of them (and, with `--updates`, one batch pass
//! of a copy of the classifier that has had U random rules removed and put back with
//! [`Classifier::remove`] and [`Classifier::insert`]), in an order rotated every round.
//! Prints the fastest pass of each (interference only adds time), the medians of the
//! per-round ratios with their ranges, and checks that all give the same answers.

use classify::classbench::{corners, parse_rules};
use classify::Classifier;
use std::hint::black_box;
use std::time::Instant;

fn ratio(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:.2} ({:.2}-{:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut draw, mut rounds, mut updates, mut files) = (100_000usize, 20usize, 0, Vec::new());
    while let Some(a) = args.next() {
        let mut num = |d: usize| args.next().and_then(|v| v.parse().ok()).unwrap_or(d);
        match a.as_str() {
            "--draw" => draw = num(draw),
            "--rounds" => rounds = num(rounds).max(1),
            "--updates" => updates = num(updates),
            _ => files.push(a),
        }
    }
    for f in files {
        let text = match std::fs::read_to_string(&f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{f}: {e}");
                continue;
            }
        };
        let rules = match parse_rules(&text, &f) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                continue;
            }
        };
        let keys = corners(&rules, draw, 1);
        let c = match Classifier::new(rules, 5) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{f}: {e}");
                continue;
            }
        };
        let mut u = c.clone();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..updates {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x % u.rules().len().max(1) as u64) as usize;
            if let Ok(r) = u.remove(at) {
                u.insert(at, r).expect("put back");
            }
        }
        let ways = if updates > 0 { 3 } else { 2 };
        let mut answers = vec![vec![None; keys.len()]; ways];
        let mut best = [f64::MAX; 3];
        let (mut r_batch, mut r_upd) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let mut t = [0f64; 3];
            for k in 0..ways {
                let which = (k + round) % ways;
                let out = &mut answers[which];
                let t0 = Instant::now();
                match which {
                    0 => {
                        for (o, key) in out.iter_mut().zip(&keys) {
                            *o = c.classify(black_box(&key[..]));
                        }
                    }
                    1 => c.classify_batch(black_box(&keys), out).expect("lengths"),
                    _ => u.classify_batch(black_box(&keys), out).expect("lengths"),
                }
                t[which] = t0.elapsed().as_secs_f64();
                best[which] = best[which].min(t[which]);
            }
            r_batch.push(t[0] / t[1]);
            r_upd.push(t[1] / t[2]);
        }
        let n = keys.len() as f64;
        let differ = (1..ways)
            .map(|w| {
                answers[0]
                    .iter()
                    .zip(&answers[w])
                    .filter(|(a, b)| a != b)
                    .count()
            })
            .sum::<usize>();
        println!(
            "{f}: single {:.2} M/s, batch {:.2} M/s (fastest passes); batch / single median {} over {rounds} rounds; {differ} answers differ",
            n / best[0] / 1e6,
            n / best[1] / 1e6,
            ratio(r_batch),
        );
        if updates > 0 {
            println!(
                "  after {updates} removes and re-inserts ({:?}): batch {:.2} M/s; ÷ fresh batch median {}",
                u.stats(),
                n / best[2] / 1e6,
                ratio(r_upd),
            );
        }
    }
}
