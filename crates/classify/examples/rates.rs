//! Single-key against batch lookup rates, alternating in one process (the machine this
//! project is measured on is shared, so only same-run ratios are meaningful).
//!
//! `cargo run --release -p classify --example rates -- [--draw N] [--rounds R] FILE...`:
//! for each ClassBench filter set, N headers (default 100,000) drawn as random rule
//! corners (seed 1, as `fusebox classify --draw`), then R rounds (default 20) each timing
//! one pass of [`Classifier::classify`] per header and one pass of
//! [`Classifier::classify_batch`] over all of them (order swapped every round). Prints the
//! fastest pass of each (interference only adds time), the median of the per-round
//! ratios with its range, and checks that both give the same answers.

use classify::classbench::{corners, parse_rules};
use classify::Classifier;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut draw, mut rounds, mut files) = (100_000usize, 20usize, Vec::new());
    while let Some(a) = args.next() {
        match a.as_str() {
            "--draw" => draw = args.next().and_then(|v| v.parse().ok()).unwrap_or(draw),
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()).unwrap_or(rounds),
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
        let mut single = vec![None; keys.len()];
        let mut batch = vec![None; keys.len()];
        let (mut ts, mut tb) = (f64::MAX, f64::MAX);

        let mut ratios = Vec::new();
        for round in 0..rounds {
            let mut t = [0f64; 2];
            for k in 0..2 {
                let which = (k + round) % 2;
                let t0 = Instant::now();
                if which == 0 {
                    for (o, key) in single.iter_mut().zip(&keys) {
                        *o = c.classify(black_box(&key[..]));
                    }
                } else {
                    c.classify_batch(black_box(&keys), &mut batch)
                        .expect("lengths match");
                }
                t[which] = t0.elapsed().as_secs_f64();
            }
            ts = ts.min(t[0]);
            tb = tb.min(t[1]);
            ratios.push(t[0] / t[1]);
        }
        ratios.sort_by(f64::total_cmp);

        let n = keys.len() as f64;
        let differ = single.iter().zip(&batch).filter(|(a, b)| a != b).count();
        println!(
            "{f}: single {:.2} M/s, batch {:.2} M/s (fastest passes); batch / single median {:.2} ({:.2}-{:.2}) over {rounds} rounds; {differ} answers differ",
            n / ts / 1e6,
            n / tb / 1e6,
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1],
        );
    }
}
