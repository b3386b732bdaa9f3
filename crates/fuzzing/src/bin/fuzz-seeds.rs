//! `fuzz-seeds`: turns captures and rule files into seed inputs for the fuzz targets (used by
//! `fuzz/seed.sh`; one file per seed, named by a hash of its bytes, so reruns add nothing).
//!
//! ```text
//! fuzz-seeds frames OUT MAX CAPTURE...          each frame (up to MAX per capture)
//! fuzz-seeds pair OUT HEX TEXTS MAX CAPTURE...  HEX bytes, a line of TEXTS, 0, a frame
//! fuzz-seeds chains OUT MAX CAPTURE...          for every example chain, both reflect
//!                                                flags, the first MAX records
//! ```
//! A capture that cannot be read is skipped with a message.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use ports::pcap::{read_all, Record};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: fuzz-seeds frames OUT MAX CAPTURE... | pair OUT HEX TEXTS MAX CAPTURE... | chains OUT MAX CAPTURE...");
    ExitCode::from(2)
}

fn records(files: &[String], max: usize) -> Vec<Vec<Record>> {
    files
        .iter()
        .filter_map(|f| match read_all(Path::new(f)) {
            Ok((mut r, _)) => {
                r.truncate(max);
                Some(r)
            }
            Err(e) => {
                eprintln!("fuzz-seeds: skipped {f}: {e}");
                None
            }
        })
        .collect()
}

fn write(out: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut h);
    std::fs::write(out.join(format!("seed-{:016x}", h.finish())), data)
}

fn hex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A capture's records as the records part of a little-endian microsecond pcap file.
fn pcap_records(recs: &[Record]) -> Vec<u8> {
    let mut v = Vec::new();
    for r in recs {
        let ns = r.timestamp.0;
        let (sec, usec) = (
            (ns / 1_000_000_000) as u32,
            (ns % 1_000_000_000 / 1000) as u32,
        );
        let cap = r.data.len().min(65535);
        v.extend_from_slice(&sec.to_le_bytes());
        v.extend_from_slice(&usec.to_le_bytes());
        v.extend_from_slice(&(cap as u32).to_le_bytes());
        v.extend_from_slice(&r.orig_len.max(cap as u32).to_le_bytes());
        v.extend_from_slice(&r.data[..cap]);
    }
    v
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        return usage();
    }
    let out = PathBuf::from(&args[1]);
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("fuzz-seeds: {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    let num = |s: &str| s.parse::<usize>().ok();
    let result = match (args[0].as_str(), &args[2..]) {
        ("frames", [max, files @ ..]) => {
            let Some(max) = num(max) else { return usage() };
            records(files, max)
                .iter()
                .flatten()
                .try_for_each(|r| write(&out, &r.data))
        }
        ("pair", [prefix, texts, max, files @ ..]) => {
            let (Some(prefix), Some(max)) = (hex(prefix), num(max)) else {
                return usage();
            };
            let frames: Vec<Vec<u8>> = records(files, 64)
                .into_iter()
                .flatten()
                .map(|r| r.data)
                .collect();
            let text = match std::fs::read(texts) {
                Ok(t) => String::from_utf8_lossy(&t).into_owned(),
                Err(e) => {
                    eprintln!("fuzz-seeds: {texts}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let lines = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'));
            lines.take(max).enumerate().try_for_each(|(i, l)| {
                let mut v = prefix.clone();
                v.extend_from_slice(l.as_bytes());
                v.push(0);
                if !frames.is_empty() {
                    v.extend_from_slice(&frames[i % frames.len()]);
                }
                write(&out, &v)
            })
        }
        ("chains", [max, files @ ..]) => {
            let Some(max) = num(max) else { return usage() };
            let caps = records(files, max);
            (0..fuzzing::CHAINS.len()).try_for_each(|c| {
                // The ISP chain (0) is slow to set up: one capture in eight for it.
                let step = if fuzzing::chain_of(c as u8) == 0 {
                    8
                } else {
                    1
                };
                caps.iter().step_by(step).try_for_each(|recs| {
                    let body = pcap_records(recs);
                    (0..2u8).try_for_each(|flags| {
                        let mut v = vec![c as u8, flags];
                        v.extend_from_slice(&body);
                        write(&out, &v)
                    })
                })
            })
        }
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fuzz-seeds: {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}
