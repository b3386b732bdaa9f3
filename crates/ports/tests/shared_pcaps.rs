//! Robustness over the shared captures: every capture under `../shared/data/pcaps` (and
//! `../shared/data/ids`) next to the workspace is read to its end and every Ethernet frame
//! is walked with `wire::parse::layers`. Nothing may panic, every record must be accounted
//! for as parsed or dropped, and reading errors must name their file.
//!
//! When the shared folder is absent the test is skipped with a message, unless `CI=true`.

use ports::pcap::{PcapReader, DLT_EN10MB};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Extensions of files that are captures whatever their first bytes say.
const CAPTURE_EXTENSIONS: &[&str] = &["pcap", "pcapng", "cap", "dmp", "ntar", "trace"];

/// Magic numbers (as the first four bytes) of pcap and pcapng files.
const MAGICS: &[[u8; 4]] = &[
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
    [0x34, 0xcd, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xcd, 0x34],
    [0x0a, 0x0d, 0x0d, 0x0a],
];

#[derive(Default, Debug)]
struct FileStats {
    records: u64,
    parsed: u64,
    dropped: BTreeMap<String, u64>,
    error: Option<String>,
    reported_records: u64,
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if is_capture(&p) {
            out.push(p);
        }
    }
}

fn is_capture(p: &Path) -> bool {
    let ext = p
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if ext.is_some_and(|e| CAPTURE_EXTENSIONS.contains(&e.as_str())) {
        return true;
    }
    let mut head = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && MAGICS.contains(&head)
}

fn read_file(path: &Path) -> FileStats {
    let mut st = FileStats::default();
    let mut reader = match PcapReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            st.error = Some(e.to_string());
            return st;
        }
    };
    while let Some(item) = reader.next_record() {
        match item {
            Ok(rec) => {
                st.records += 1;
                if reader.linktype() != DLT_EN10MB {
                    *st.dropped.entry("unsupported-linktype".into()).or_default() += 1;
                    continue;
                }
                match wire::parse::layers(&rec.data) {
                    Ok(_) => st.parsed += 1,
                    Err(e) => *st.dropped.entry(format!("{e:?}")).or_default() += 1,
                }
            }
            Err(e) => st.error = Some(e.to_string()),
        }
    }
    st.reported_records = reader.records_read();
    st
}

#[test]
fn shared_captures_are_read_without_panic() {
    // <workspace root>/../shared/data
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let data = data.canonicalize().unwrap_or(data);
    let dirs = [data.join("pcaps"), data.join("ids")];
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if !dirs[0].is_dir() {
        assert!(
            !ci,
            "shared captures missing at {} (required under CI=true)",
            dirs[0].display()
        );
        eprintln!("skipping: no shared captures at {}", dirs[0].display());
        return;
    }
    let mut files = Vec::new();
    for d in &dirs {
        walk(d, &mut files);
    }
    assert!(!files.is_empty(), "no capture files found");

    // Silence the default panic message; panics are collected and reported below.
    let mut panicked = Vec::new();
    let mut errors = Vec::new();
    let (mut records, mut parsed) = (0u64, 0u64);
    let mut dropped: BTreeMap<String, u64> = BTreeMap::new();
    let mut per_dir: BTreeMap<String, (u64, u64, u64, u64)> = BTreeMap::new();
    for f in &files {
        let st = match catch_unwind(AssertUnwindSafe(|| read_file(f))) {
            Ok(st) => st,
            Err(_) => {
                panicked.push(f.clone());
                continue;
            }
        };
        let drops: u64 = st.dropped.values().sum();
        assert_eq!(
            st.parsed + drops,
            st.records,
            "{}: records not accounted for",
            f.display()
        );
        assert_eq!(
            st.reported_records,
            st.records,
            "{}: records_read disagrees",
            f.display()
        );
        records += st.records;
        parsed += st.parsed;
        for (k, v) in &st.dropped {
            *dropped.entry(k.clone()).or_default() += v;
        }
        let group = f
            .strip_prefix(&data)
            .ok()
            .and_then(|p| {
                let mut c = p.components();
                let a = c.next()?.as_os_str().to_string_lossy().into_owned();
                let b = c.next()?.as_os_str().to_string_lossy().into_owned();
                Some(format!("{a}/{b}"))
            })
            .unwrap_or_else(|| "?".into());
        let e = per_dir.entry(group).or_default();
        e.0 += 1;
        e.1 += st.records;
        e.2 += st.parsed;
        if let Some(msg) = st.error {
            e.3 += 1;
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            assert!(
                msg.contains(&f.display().to_string()) && msg.contains(&name),
                "error message does not name the file: {msg}"
            );
            errors.push(msg);
        }
    }

    println!(
        "{:<40} {:>6} {:>9} {:>9} {:>7}",
        "folder", "files", "records", "parsed", "errors"
    );
    for (g, (n, r, p, e)) in &per_dir {
        println!("{g:<40} {n:>6} {r:>9} {p:>9} {e:>7}");
    }
    println!(
        "{:<40} {:>6} {:>9} {:>9} {:>7}",
        "total",
        files.len(),
        records,
        parsed,
        errors.len()
    );
    println!("dropped by reason:");
    for (k, v) in &dropped {
        println!("  {k:<30} {v:>9}");
    }
    println!("files that stopped with an error:");
    for e in &errors {
        println!("  {e}");
    }

    assert!(panicked.is_empty(), "panicked on: {panicked:?}");
    assert!(
        parsed >= 5_000,
        "only {parsed} packets parsed: the test would pass vacuously"
    );
}
