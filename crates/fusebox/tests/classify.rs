//! `fusebox classify`: ClassBench traces get the first-match answers (`.firstmatch`
//! format), on a small fixture and on the shared ClassBench sets; bad input names its
//! place.

mod common;
use common::*;
use std::path::Path;

#[test]
fn fixture_headers_get_their_first_match() {
    let d = scratch("classify-fixture");
    // Rule 0: UDP 10.0.0.0/8 -> any, dport 53; rule 1: anything to 192.168.1.0/24 TCP;
    // rule 2: any TCP/UDP from 10.1.0.0/16 with sport 1024-65535.
    std::fs::write(
        d.join("rules"),
        "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t53 : 53\t0x11/0xFF\t0x0000/0x0000\t\n\
         @0.0.0.0/0\t192.168.1.0/24\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n\
         @10.1.0.0/16\t0.0.0.0/0\t1024 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n",
    )
    .unwrap();
    let ip = |a: u8, b: u8, c: u8, e: u8| u32::from(std::net::Ipv4Addr::new(a, b, c, e));
    let trace = [
        (ip(10, 1, 2, 3), ip(8, 8, 8, 8), 5000, 53, 17), // 0 (also 2)
        (ip(10, 1, 2, 3), ip(192, 168, 1, 9), 80, 80, 6), // 1
        (ip(10, 1, 2, 3), ip(1, 1, 1, 1), 2000, 443, 6), // 2
        (ip(11, 0, 0, 1), ip(8, 8, 8, 8), 5000, 53, 17), // none
        (ip(10, 1, 0, 1), ip(192, 168, 2, 1), 80, 80, 6), // none (sport < 1024)
    ];
    let text: String = trace
        .iter()
        .map(|(s, t, sp, dp, p)| format!("{s}\t{t}\t{sp}\t{dp}\t{p}\t0\t0\n"))
        .collect();
    std::fs::write(d.join("trace"), text).unwrap();
    let o = fusebox_ok(&d, &["classify", "--rules", "rules", "--trace", "trace"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "0\n1\n2\n-1\n-1\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("3 rules") && err.contains("lookups/s") && err.contains("batches of 64"),
        "{err}"
    );
    // One key at a time, and odd batch sizes: the same answers.
    for b in ["1", "2", "3"] {
        let o = fusebox_ok(
            &d,
            &[
                "classify", "--rules", "rules", "--trace", "trace", "--batch", b,
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "0\n1\n2\n-1\n-1\n",
            "{b}"
        );
        let err = String::from_utf8_lossy(&o.stderr);
        let how = if b == "1" {
            "single-key lookups"
        } else {
            "batches of"
        };
        assert!(err.contains(how), "{b}: {err}");
    }
    let o = fusebox(
        &d,
        &[
            "classify", "--rules", "rules", "--trace", "trace", "--batch", "0",
        ],
    );
    assert_ne!(o.status.code(), Some(0));
    // Headers drawn from the rules' corners, checked against a linear scan: every drawn
    // header matches its rule or an earlier one, so none is -1.
    let o = fusebox_ok(
        &d,
        &[
            "classify", "--rules", "rules", "--draw", "2000", "--seed", "4", "--check",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), 2000);
    assert!(out.lines().all(|l| ["0", "1", "2"].contains(&l)), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("0 of 2000 headers differ"), "{err}");
    // Updates (remove and re-insert) before classifying: same answers, figures reported.
    let o2 = fusebox_ok(
        &d,
        &[
            "classify",
            "--rules",
            "rules",
            "--draw",
            "2000",
            "--seed",
            "4",
            "--check",
            "--updates",
            "50",
        ],
    );
    assert_eq!(o2.stdout, o.stdout);
    let err = String::from_utf8_lossy(&o2.stderr);
    assert!(
        err.contains("updates: 50 removes (mean") && err.contains("0 of 2000 headers differ"),
        "{err}"
    );

    std::fs::write(
        d.join("bad"),
        "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t53 : 5\t0x11/0xFF\n",
    )
    .unwrap();
    let o = fusebox(&d, &["classify", "--rules", "bad", "--trace", "trace"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad:1:") && err.contains("expected a destination port range"),
        "{err}"
    );
}

/// FNV-1a over answers as little-endian i64s (-1 for none): the digest the rte_acl harness
/// prints (scripts/rte-acl/bench.c).
fn digest(answers: &[i64]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for v in answers {
        for b in v.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// `--write-trace` writes the headers classified; `--rte-acl` runs a harness on the rules
/// and those headers, reports each algorithm against FuseBox, and fails when an
/// algorithm's answers differ. The harness here is a stand-in script printing what the
/// real one (scripts/rte-acl/bench.c, built outside CI) prints.
#[cfg(unix)]
#[test]
fn rte_acl_comparison_reads_the_harness_and_checks_its_answers() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("classify-rte-acl");
    std::fs::write(
        d.join("rules"),
        "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t53 : 53\t0x11/0xFF\t0x0000/0x0000\t\n\
         @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\t0x0000/0x0000\t\n",
    )
    .unwrap();
    let o = fusebox_ok(
        &d,
        &[
            "classify",
            "--rules",
            "rules",
            "--draw",
            "50",
            "--seed",
            "3",
            "--write-trace",
            "drawn",
        ],
    );
    let answers: Vec<i64> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let drawn = std::fs::read_to_string(d.join("drawn")).unwrap();
    assert_eq!(drawn.lines().count(), 50);
    assert!(drawn.lines().all(|l| l.split('\t').count() == 5), "{drawn}");
    // The drawn headers read back as a trace give the same answers.
    let o2 = fusebox_ok(&d, &["classify", "--rules", "rules", "--trace", "drawn"]);
    assert_eq!(o2.stdout, o.stdout);

    let good = digest(&answers);
    let script = |name: &str, avx: u64| {
        let p = d.join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\ncp \"$2\" seen-trace\necho \"$1 $3\" > seen-args\n\
                 echo rules=2 headers=50 build_s=0.001\n\
                 echo alg=scalar rate=1.0 best=2.0 digest=0x{good:016x}\n\
                 echo alg=avx2 rate=3.0 best=4.0 digest=0x{avx:016x}\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let ok = script("harness-ok", good);
    let args = [
        "classify",
        "--rules",
        "rules",
        "--draw",
        "50",
        "--seed",
        "3",
        "--passes",
        "3",
        "--rounds",
        "2",
        "--rte-acl",
    ];
    let mut a = args.to_vec();
    a.push(ok.to_str().unwrap());
    let o3 = fusebox_ok(&d, &a);
    assert_eq!(o3.stdout, o.stdout);
    let err = String::from_utf8_lossy(&o3.stderr);
    assert!(
        err.contains("rte-acl: rules=2 headers=50")
            && err.contains("scalar")
            && err.contains("FuseBox ÷ avx2")
            && err.contains("answers equal")
            && err.contains("FuseBox ÷ best SIMD of each round (mostly avx2)")
            && !err.contains("DIFFER"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("seen-trace")).unwrap(),
        drawn
    );
    assert_eq!(
        std::fs::read_to_string(d.join("seen-args")).unwrap(),
        "rules 3\n"
    );

    let bad = script("harness-bad", good ^ 1);
    let mut a = args.to_vec();
    a.push(bad.to_str().unwrap());
    let o4 = fusebox(&d, &a);
    assert_eq!(o4.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o4.stderr).contains("answers DIFFER"));
    // A harness that fails or is missing is an error, not a silent skip.
    let mut a = args.to_vec();
    a.push("/nonexistent/rte-acl-bench");
    assert_ne!(fusebox(&d, &a).status.code(), Some(0));
}

#[test]
fn classbench_traces_match_their_firstmatch_files() {
    let data =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/classbench/cutsplit");
    if !data.is_dir() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "ClassBench data missing at {} (required under CI=true)",
            data.display()
        );
        eprintln!("skipping: no ClassBench data at {}", data.display());
        return;
    }
    for set in ["acl_1k", "fw_1k", "ipc_1k"] {
        let rules = data.join(set);
        let trace = data.join(format!("{set}_trace"));
        let want = std::fs::read(data.join(format!("{set}_trace.firstmatch"))).unwrap();
        for batch in ["64", "1"] {
            let o = fusebox_ok(
                &root(),
                &[
                    "classify",
                    "--rules",
                    rules.to_str().unwrap(),
                    "--trace",
                    trace.to_str().unwrap(),
                    "--batch",
                    batch,
                ],
            );
            assert!(
                o.stdout == want,
                "{set}, batch {batch}: answers differ from the .firstmatch file"
            );
        }
        let o = fusebox_ok(
            &root(),
            &[
                "classify",
                "--rules",
                rules.to_str().unwrap(),
                "--trace",
                trace.to_str().unwrap(),
                "--updates",
                "300",
            ],
        );
        assert!(
            o.stdout == want,
            "{set}, after 300 updates: answers differ from the .firstmatch file"
        );
    }
}
