//! `fusebox verify` on the bundled examples: every mode gives the naive run's packets,
//! drops, counters and state; and `--mode synth` runs.

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// A verify that takes longer than this is a failure (a synthesis that blows up), not a hang.
const DEADLINE: Duration = Duration::from_secs(120);

/// Runs `fusebox ARGS` in `dir`, killing it after [`DEADLINE`].
fn fusebox_deadline(dir: &Path, args: &[&str]) -> Output {
    let (out, err) = (dir.join("verify.stdout"), dir.join("verify.stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_fusebox"))
        .args(args)
        .current_dir(dir)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fusebox {args:?} did not finish in {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(out).unwrap(),
        stderr: std::fs::read(err).unwrap(),
    }
}

/// Runs `fusebox verify EXAMPLE ARGS`, asserts exit 0 and the "identical" line, and returns
/// that line.
fn verify_identical(dir: &Path, example: &str, args: &[&str]) -> String {
    let chain = root().join(example);
    let mut all = vec!["verify", chain.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = fusebox_deadline(dir, &all);
    let out = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "fusebox {all:?}:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = out.lines().next().unwrap_or_default().to_string();
    assert!(
        line.starts_with("identical: ")
            && line.contains(" packets on ")
            && line.ends_with(" state lines"),
        "{out}"
    );
    line
}

/// `identical: N packets on M exits, K drops, S state lines` → (N, M, K, S).
fn numbers(line: &str) -> (u64, u64, u64, u64) {
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(n.len(), 4, "{line}");
    (n[0], n[1], n[2], n[3])
}

fn fig5_trace(dir: &Path) {
    gen_trace(
        dir,
        "trace.pcap",
        &[
            "--packets",
            "2000",
            "--flows",
            "40",
            "--mix",
            "tcp=1,udp=2,icmp=1",
            "--src",
            "192.168.0.0/24",
            "--dst",
            "10.0.2.0/24",
            "--dport",
            "1234,53",
            "--seed",
            "3",
        ],
    );
}

#[test]
fn fig5_is_identical_in_every_mode() {
    let d = scratch("verify-fig5");
    fig5_trace(&d);
    let line = verify_identical(
        &d,
        "examples/fig5/chain.toml",
        &["--input", "napt.eth0=trace.pcap"],
    );
    let (packets, exits, drops, state) = numbers(&line);
    assert_eq!(exits, 3, "napt.eth0, napt.eth2, lb.eth1: {line}");
    assert!(packets > 500 && drops > 500 && state > 0, "{line}");
    assert_eq!(packets + drops, 2000, "{line}");

    let line = verify_identical(
        &d,
        "examples/fig5/chain.toml",
        &["--input", "napt.eth0=trace.pcap", "--reflect", "lb.eth1"],
    );
    // NFCompass' parallel branches on the groups the planner finds.
    verify_identical(
        &d,
        "examples/fig5/chain.toml",
        &[
            "--input",
            "napt.eth0=trace.pcap",
            "--reflect",
            "lb.eth1",
            "--modes",
            "naive,parallel",
        ],
    );
    let (reflected, _, _, _) = numbers(&line);
    assert!(
        reflected > packets,
        "replies leave at napt.eth0 too: {line}"
    );

    // Three modes, and the JSON form.
    let chain = root().join("examples/fig5/chain.toml");
    let o = fusebox_ok(
        &d,
        &[
            "verify",
            chain.to_str().unwrap(),
            "--input",
            "napt.eth0=trace.pcap",
            "--reflect",
            "lb.eth1",
            "--modes",
            "naive,synth,naive",
            "--json",
        ],
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(j["identical"], true, "{j}");
    assert_eq!(j["reference"], "naive");
    assert_eq!(j["packets"], reflected, "{j}");
    assert_eq!(j["compared"].as_array().unwrap().len(), 2, "{j}");
    assert_eq!(j["compared"][0]["mode"], "synth");
    assert_eq!(j["compared"][0]["differences"], 0);
}

#[test]
fn routers_are_identical() {
    let d = scratch("verify-routers");
    gen_trace(
        &d,
        "trace.pcap",
        &[
            "--packets",
            "2000",
            "--flows",
            "100",
            "--mix",
            "udp=1,tcp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "10.1.0.0/16",
        ],
    );
    let line = verify_identical(
        &d,
        "examples/routers/chain.toml",
        &["--input", "r1.eth0=trace.pcap"],
    );
    // NFCompass' parallel branches on the groups the planner finds.
    verify_identical(
        &d,
        "examples/routers/chain.toml",
        &["--input", "r1.eth0=trace.pcap", "--modes", "naive,parallel"],
    );
    // NFCompass' element merging: routers 2-10 step over their check and lookup.
    verify_identical(
        &d,
        "examples/routers/chain.toml",
        &["--input", "r1.eth0=trace.pcap", "--modes", "naive,merged"],
    );
    let (packets, _, _, _) = numbers(&line);
    assert!(packets > 0, "{line}");
}

#[test]
fn napts_with_replies_are_identical() {
    let d = scratch("verify-napts");
    gen_trace(
        &d,
        "trace.pcap",
        &[
            "--packets",
            "2000",
            "--flows",
            "200",
            "--mix",
            "udp=1,tcp=1",
        ],
    );
    let line = verify_identical(
        &d,
        "examples/napts/chain.toml",
        &["--input", "n1.eth0=trace.pcap", "--reflect", "n10.eth1"],
    );
    // NFCompass' parallel branches on the groups the planner finds.
    verify_identical(
        &d,
        "examples/napts/chain.toml",
        &[
            "--input",
            "n1.eth0=trace.pcap",
            "--reflect",
            "n10.eth1",
            "--modes",
            "naive,parallel",
        ],
    );
    let (packets, _, _, state) = numbers(&line);
    assert!(
        packets >= 4000,
        "every packet out at n10.eth1 and its reply at n1.eth0: {line}"
    );
    assert!(
        state >= 10 * 200,
        "every NAPT keeps a mapping per flow: {line}"
    );
}

#[test]
fn isp_is_identical() {
    let d = scratch("verify-isp");
    gen_trace(
        &d,
        "trace.pcap",
        &[
            "--packets",
            "3000",
            "--flows",
            "200",
            "--mix",
            "tcp=2,udp=2,icmp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "10.1.0.0/16",
            "--dport",
            "80,443,53,23,1234,8080",
        ],
    );
    let line = verify_identical(
        &d,
        "examples/isp/chain.toml",
        &["--input", "fw.eth0=trace.pcap"],
    );
    let (packets, _, drops, _) = numbers(&line);
    assert!(packets > 0 && drops > 0, "{line}");
    verify_identical(
        &d,
        "examples/isp/chain.toml",
        &["--input", "fw.eth0=trace.pcap", "--reflect", "napt.eth1"],
    );
    // NFCompass' parallel branches on the groups the planner finds.
    verify_identical(
        &d,
        "examples/isp/chain.toml",
        &[
            "--input",
            "fw.eth0=trace.pcap",
            "--reflect",
            "napt.eth1",
            "--modes",
            "naive,parallel",
        ],
    );
}

#[test]
fn click_router_with_arp_is_identical() {
    let d = scratch("verify-click-router");
    gen_trace(
        &d,
        "fwd.pcap",
        &[
            "--packets",
            "500",
            "--flows",
            "20",
            "--mix",
            "udp=1,tcp=1",
            "--src",
            "18.26.4.0/24",
            "--dst",
            "1.0.0.0/8",
        ],
    );
    verify_identical(
        &d,
        "examples/click-router/router.click",
        &["--input", "eth0=fwd.pcap", "--reflect", "router.eth1"],
    );
}

#[test]
fn verify_errors_are_one_line_and_exit_1() {
    let d = scratch("verify-errors");
    fig5_trace(&d);
    let chain = root().join("examples/fig5/chain.toml");
    let chain = chain.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--input", "napt.eth0=trace.pcap", "--modes", "naive,fast"],
            "unknown mode `fast`",
        ),
        (
            &["--input", "napt.eth0=trace.pcap", "--modes", "naive"],
            "at least two modes",
        ),
        (&["--input", "napt.eth0=missing.pcap"], "missing.pcap"),
        (
            &[],
            "no input: give --input NF.IFACE=FILE (entries: napt.eth0)",
        ),
        (
            &["--input", "napt.eth0=trace.pcap", "--reflect", "fw.eth1"],
            "--reflect fw.eth1",
        ),
        (
            &["--input", "nope.eth0=trace.pcap"],
            "--input nope.eth0=trace.pcap",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["verify", chain];
        all.extend_from_slice(args);
        let o = fusebox(&d, &all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {err}");
        assert!(err.contains(want), "{all:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{all:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }

    // A truncated input: every complete record runs in both modes, they agree, exit 1.
    let full = std::fs::read(d.join("trace.pcap")).unwrap();
    std::fs::write(d.join("cut.pcap"), &full[..full.len() / 2 + 7]).unwrap();
    let o = fusebox(&d, &["verify", chain, "--input", "napt.eth0=cut.pcap"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(stdout(&o).starts_with("identical: "), "{}", stdout(&o));
    assert!(
        err.contains("cut.pcap") && err.contains("truncated"),
        "{err}"
    );
}

#[test]
fn run_mode_synth_gives_the_naive_outputs() {
    let d = scratch("run-synth");
    fig5_trace(&d);
    let chain = root().join("examples/fig5/chain.toml");
    let chain = chain.to_str().unwrap();
    for mode in ["naive", "synth"] {
        std::fs::create_dir_all(d.join(mode)).unwrap();
        let o = fusebox_ok(
            &d,
            &[
                "run",
                chain,
                "--input",
                "napt.eth0=trace.pcap",
                "--reflect",
                "lb.eth1",
                "--mode",
                mode,
                "--out-dir",
                mode,
                "--json",
            ],
        );
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON summary");
        assert_eq!(j["totals"]["balanced"], true);
        assert_eq!(j.get("synth").is_some(), mode == "synth", "{mode}");
        let o = fusebox_ok(
            &d,
            &[
                "run",
                chain,
                "--input",
                "napt.eth0=trace.pcap",
                "--mode",
                mode,
                "--replay",
                "2",
                "--json",
            ],
        );
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON replay");
        assert_eq!(j["replay"]["packets"], 4000);
        assert_eq!(j["summary"]["totals"]["input"], 4000);
    }
    for exit in ["lb.eth1.pcap", "napt.eth0.pcap", "napt.eth2.pcap"] {
        let (a, b) = (d.join("naive").join(exit), d.join("synth").join(exit));
        assert_eq!(
            std::fs::read(a).unwrap(),
            std::fs::read(b).unwrap(),
            "{exit}"
        );
    }
}

/// Issue 16: Click's `IPFilter`, `IPClassifier` and `Classifier` are `1/-`: outputs no rule
/// names may be connected and get nothing (SNF-style `filter[1] -> Discard`), and so may a
/// rewriter's (`1-/1-`). Such a
/// configuration loads and every mode gives the naive run's result.
#[test]
fn filter_with_unused_outputs_connected_is_identical() {
    let d = scratch("verify-unused-outputs");
    gen_trace(
        &d,
        "trace.pcap",
        &[
            "--packets",
            "600",
            "--flows",
            "30",
            "--mix",
            "udp=1,tcp=1,icmp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "10.1.0.0/16",
            "--dport",
            "53,80",
            "--seed",
            "5",
        ],
    );
    let click = d.join("snf.click");
    std::fs::write(
        &click,
        "FromDevice(eth0) -> c :: Classifier(12/0800);\n\
         c[0] -> Strip(14) -> CheckIPHeader -> filter :: IPFilter(allow udp);\n\
         c[1] -> Discard;\n\
         filter[0] -> cl :: IPClassifier(dst port 53);\n\
         filter[1] -> Discard;\n\
         cl[0] -> rw :: IPRewriter(pattern 192.0.2.1 - - - 0 0);\n\
         rw[0] -> Unstrip(14) -> ToDevice(eth1);\n\
         rw[1] -> Discard;\n\
         cl[1] -> Discard;\n\
         cl[2] -> Discard;\n",
    )
    .unwrap();
    let line = verify_identical(&d, click.to_str().unwrap(), &["--input", "eth0=trace.pcap"]);
    let (_, _, drops, _) = numbers(&line);
    assert!(drops > 0, "{line}");
}

/// Issue 16: `fusebox run --out-dir DIR` makes a missing DIR (and its parents), quietly, as
/// tcpdump-style tools and Click's `ToDump` do.
#[test]
fn run_makes_a_missing_out_dir() {
    let d = scratch("run-missing-out-dir");
    gen_trace(
        &d,
        "t.pcap",
        &["--packets", "50", "--mix", "udp=1", "--seed", "2"],
    );
    let out = d.join("new/nested");
    assert!(!out.exists());
    let click = root().join("examples/ttl/ttl.click");
    let o = fusebox_ok(
        &d,
        &[
            "run",
            click.to_str().unwrap(),
            "--input",
            "eth0=t.pcap",
            "--out-dir",
            out.to_str().unwrap(),
        ],
    );
    // Quietly: the run's usual summary, nothing about the folder.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("nested"), "{err}");
    assert!(!packets(&out.join("ttl.eth1.pcap")).is_empty());
}
