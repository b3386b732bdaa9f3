//! Every input fuzzing found (`fuzz/regressions/TARGET/`: panics, mismatches between
//! modes, hangs), replayed through the check its target runs, so a fixed bug stays fixed.
//! The committed seeds (`fuzz/seeds/TARGET/`) run too. A file's name says what it found.

use std::path::{Path, PathBuf};

type Check = fn(&[u8]);

const TARGETS: &[(&str, Check)] = &[
    ("pcap", fuzzing::pcap),
    ("wire", fuzzing::wire),
    ("click", fuzzing::click),
    ("chain_file", fuzzing::chain_file),
    ("filter", fuzzing::filter),
    ("classbench", fuzzing::classbench),
    ("snort", fuzzing::snort),
    ("chains", fuzzing::chains),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Runs every file of `fuzz/KIND/TARGET/` through the target's check; returns how many.
fn replay(kind: &str) -> usize {
    let mut n = 0;
    for (name, check) in TARGETS {
        let dir = fuzz_dir().join(kind).join(name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            eprintln!("{name}: {}", f.display());
            check(&data);
            n += 1;
        }
    }
    n
}

#[test]
fn found_inputs_stay_fixed() {
    let n = replay("regressions");
    assert!(
        n > 0,
        "no inputs under {}",
        fuzz_dir().join("regressions").display()
    );
}

#[test]
fn committed_seeds_pass() {
    let n = replay("seeds");
    assert!(
        n > 0,
        "no seeds under {}",
        fuzz_dir().join("seeds").display()
    );
}
