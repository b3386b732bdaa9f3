//! `fuzz-seeds`: turns captures and rule files into seed inputs for the fuzz targets (used by
//! `fuzz/seed.sh`; one file per seed, named by a hash of its bytes, so reruns add nothing).
//!
//! ```text
//! fuzz-seeds frames OUT MAX CAPTURE...          each frame (up to MAX per capture)
//! fuzz-seeds pair OUT HEX TEXTS MAX CAPTURE...  HEX bytes, a line of TEXTS, 0, a frame
//! fuzz-seeds chains OUT MAX CAPTURE...          the first MAX records of each capture,
//!                                                for the example chains in turn
//! fuzz-seeds golden OUT MAX                     every golden configuration with the first
//!                                                MAX records of its input.pcap
//! ```
//! A capture that cannot be read is skipped with a message.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use packet::Precision;
use ports::pcap::{read_all, PcapWriter, Record, DLT_EN10MB};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: fuzz-seeds frames OUT MAX CAPTURE... | pair OUT HEX TEXTS MAX CAPTURE... | chains OUT MAX CAPTURE... | golden OUT MAX");
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

/// A capture's records as the records part of a little-endian microsecond pcap file (the
/// writer's output without its 24-byte header).
fn pcap_records(recs: &[Record], scratch: &Path) -> std::io::Result<Vec<u8>> {
    let mut w =
        PcapWriter::create(scratch, Precision::Micro, DLT_EN10MB).map_err(std::io::Error::other)?;
    for r in recs {
        w.write_with_orig_len(r.timestamp, &r.data, r.orig_len)
            .map_err(std::io::Error::other)?;
    }
    w.finish().map_err(std::io::Error::other)?;
    let bytes = std::fs::read(scratch)?;
    let _ = std::fs::remove_file(scratch);
    Ok(bytes.get(24..).unwrap_or(&[]).to_vec())
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
            // One chain per capture, in turn (the first byte's values 0..16 cover every
            // chain: see `fuzzing::pick`), reflecting every other round.
            records(files, max)
                .iter()
                .enumerate()
                .try_for_each(|(k, recs)| {
                    let mut v = vec![(k % 16) as u8, ((k / 16) % 2) as u8];
                    let scratch = out.join(".fuzz-seeds.pcap");
                    v.extend_from_slice(&pcap_records(recs, &scratch)?);
                    write(&out, &v)
                })
        }
        ("golden", [max]) => {
            // Every golden configuration with the records of its own input.pcap.
            let Some(max) = num(max) else { return usage() };
            fuzzing::goldens()
                .iter()
                .enumerate()
                .try_for_each(|(i, config)| {
                    let input = config.with_file_name("input.pcap");
                    let recs = records(&[input.display().to_string()], max);
                    let Some(recs) = recs.first() else {
                        return Ok(());
                    };
                    let mut v = vec![128 + (i % 128) as u8, 0];
                    v.extend_from_slice(&pcap_records(recs, &out.join(".fuzz-seeds.pcap"))?);
                    write(&out, &v)
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
