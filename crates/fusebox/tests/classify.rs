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
