//! `--cores N`: runs on several workers, each with its own replica of the chain. Every mode
//! gives the same outputs, counters and state at N workers; a flow's two directions run on
//! one worker; NATs split their port ranges and their replies are translated back; outputs
//! are in canonical order.

mod common;
use common::*;
use packet::{Precision, Timestamp};
use ports::pcap::PcapWriter;
use std::path::Path;
use wire::build::Frame;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// `fusebox verify CHAIN ARGS --cores N --modes naive,synth,fastpath` is identical; returns
/// its line.
fn identical_on(dir: &Path, cores: &str, chain: &str, args: &[&str]) -> String {
    let chain = root().join(chain);
    let mut all = vec!["verify", chain.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--cores", cores, "--modes", "naive,synth,fastpath"]);
    let o = fusebox(dir, &all);
    let out = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{all:?}: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.starts_with("identical: "), "{all:?}: {out}");
    out
}

#[test]
fn every_example_is_identical_in_every_mode_on_two_cores() {
    let d = scratch("workers-examples");
    gen_trace(
        &d,
        "fig5.pcap",
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
    gen_trace(
        &d,
        "routed.pcap",
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
            "--ttl",
            "1-12",
        ],
    );
    gen_trace(
        &d,
        "isp.pcap",
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
    gen_trace(
        &d,
        "router.pcap",
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
            "--arp",
            "0.05",
        ],
    );
    gen_trace(
        &d,
        "sbox.pcap",
        &[
            "--packets",
            "4000",
            "--flows",
            "100",
            "--mix",
            "tcp=1,udp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "198.51.100.0/24",
            "--dport",
            "80,443,53,23",
        ],
    );
    let cases: &[(&str, &[&str])] = &[
        (
            "examples/fig5/chain.toml",
            &["--input", "napt.eth0=fig5.pcap", "--reflect", "lb.eth1"],
        ),
        (
            "examples/fig5/chain.toml",
            &["--input", "napt.eth0=fig5.pcap"],
        ),
        (
            "examples/routers/chain.toml",
            &["--input", "r1.eth0=routed.pcap"],
        ),
        (
            "examples/napts/chain.toml",
            &["--input", "n1.eth0=routed.pcap", "--reflect", "n10.eth1"],
        ),
        (
            "examples/isp/chain.toml",
            &["--input", "fw.eth0=isp.pcap", "--reflect", "napt.eth1"],
        ),
        (
            "examples/click-router/router.click",
            &["--input", "eth0=router.pcap", "--reflect", "router.eth1"],
        ),
        (
            "examples/speedybox/chain1.toml",
            &["--input", "nat.eth0=sbox.pcap", "--reflect", "bl.eth1"],
        ),
        (
            "examples/speedybox/chain2.toml",
            &["--input", "bl.eth0=sbox.pcap"],
        ),
        ("examples/ttl/ttl.click", &["--input", "eth0=routed.pcap"]),
    ];
    for (chain, args) in cases {
        let two = identical_on(&d, "2", chain, args);
        // The same packets, exits and drops as on one core (the state lines differ: each
        // worker lists its own).
        let one = identical_on(&d, "1", chain, args);
        let head = |l: &str| l.split(" drops").next().unwrap_or_default().to_string();
        if !chain.contains("napts") && !chain.contains("speedybox/chain1") {
            assert_eq!(head(&one), head(&two), "{chain} {args:?}");
        }
    }
}

/// A capture of the given frames, 1 µs apart.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::create(path, Precision::Micro, 1).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(Timestamp(1_000_000_000 + i as u64 * 1000), f)
            .unwrap();
    }
    w.finish().unwrap();
}

/// `fusebox run ... --json` on `cores` workers: the JSON.
fn run_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let o = fusebox_ok(dir, args);
    serde_json::from_slice(&o.stdout).expect("JSON summary")
}

/// Per-worker input counts of a `--json` summary.
fn per_worker_input(j: &serde_json::Value) -> Vec<u64> {
    j["workers"]
        .as_array()
        .expect("workers listed")
        .iter()
        .map(|w| w["input"].as_u64().unwrap())
        .collect()
}

#[test]
fn both_directions_of_a_flow_run_on_one_worker() {
    let d = scratch("workers-directions");
    let chain = root().join("examples/routers/chain.toml");
    let chain = chain.to_str().unwrap();
    let mut seen = [false; 2];
    for i in 0..16u8 {
        let (a, b) = ([10, 0, i, 1], [10, 1, 7, i]);
        let (sp, dp) = (1000 + u16::from(i) * 7, 53);
        let mut frames = Vec::new();
        for k in 0..6 {
            frames.push(if k % 2 == 0 {
                Frame::udp(a, b, sp, dp).payload(b"ping").build()
            } else {
                Frame::udp(b, a, dp, sp).payload(b"pong").build()
            });
        }
        let tcp = i % 2 == 1;
        if tcp {
            frames = (0..6)
                .map(|k| {
                    if k % 2 == 0 {
                        Frame::tcp(a, b, sp, 80).build()
                    } else {
                        Frame::tcp(b, a, 80, sp).build()
                    }
                })
                .collect();
        }
        write_pcap(&d.join("flow.pcap"), &frames);
        let j = run_json(
            &d,
            &[
                "run",
                chain,
                "--input",
                "r1.eth0=flow.pcap",
                "--cores",
                "2",
                "--json",
                "--out-dir",
                ".",
            ],
        );
        let per = per_worker_input(&j);
        assert_eq!(per.len(), 2, "{j}");
        assert_eq!(per.iter().sum::<u64>(), 6);
        assert!(
            per.contains(&6),
            "flow {i}: both directions on one worker: {per:?}"
        );
        seen[usize::from(per[1] == 6)] = true;
        assert_eq!(j["totals"]["balanced"], true);
    }
    assert_eq!(seen, [true, true], "flows spread over both workers");
}

#[test]
fn napt_replies_are_translated_back_on_two_cores() {
    let d = scratch("workers-napt");
    gen_trace(
        &d,
        "trace.pcap",
        &[
            "--packets",
            "3000",
            "--flows",
            "300",
            "--mix",
            "udp=1,tcp=1",
        ],
    );
    let chain = root().join("examples/napts/chain.toml");
    let chain = chain.to_str().unwrap();
    let j = run_json(
        &d,
        &[
            "run",
            chain,
            "--input",
            "n1.eth0=trace.pcap",
            "--reflect",
            "n10.eth1",
            "--cores",
            "2",
            "--json",
            "--out-dir",
            ".",
        ],
    );
    assert_eq!(j["totals"]["balanced"], true, "{j}");
    let per = per_worker_input(&j);
    assert!(per.iter().all(|&n| n > 500), "both workers busy: {per:?}");
    let inputs = packets(&d.join("trace.pcap"));
    let outside = packets(&d.join("n10.eth1.pcap"));
    let replies = packets(&d.join("n1.eth0.pcap"));
    assert_eq!(outside.len(), inputs.len());
    assert_eq!(replies.len(), inputs.len());
    // In canonical order: the i-th reply answers the i-th input, addresses and ports back
    // to the original ones.
    for (i, (q, r)) in inputs.iter().zip(&replies).enumerate() {
        let (q, r) = (v4(q), v4(r));
        assert_eq!((r.src, r.sport), (q.dst, q.dport), "reply {i}");
        assert_eq!((r.dst, r.dport), (q.src, q.sport), "reply {i}");
    }
    // Each worker's NATs allocate from their own half of the range (1024-65535: worker 0
    // gets 1024-33279), and the worker is the one the flow's RSS hash names.
    let mut halves = [0u64; 2];
    for (q, o) in inputs.iter().zip(&outside) {
        let w = packet::FlowKey::from_ethernet(q).unwrap().rss_hash() as usize % 2;
        let port = v4(o).sport;
        let half = usize::from(port > 33279);
        assert!(port >= 1024, "{port}");
        assert_eq!(half, w, "port {port} allocated by worker {w}");
        halves[half] += 1;
    }
    assert!(halves.iter().all(|&n| n > 500), "{halves:?}");
    // The same with every mode.
    identical_on(
        &d,
        "2",
        "examples/napts/chain.toml",
        &["--input", "n1.eth0=trace.pcap", "--reflect", "n10.eth1"],
    );
}

/// Replies coming in from outside (a second input at the NAT's outer interface) reach
/// the worker that made the mapping: every reply is translated back, none dropped for want
/// of a mapping.
#[test]
fn replies_from_outside_find_their_mapping() {
    let d = scratch("workers-outside");
    let chain = root().join("examples/napts/one.toml");
    let chain = chain.to_str().unwrap();
    // Flows out, to learn which public ports they get (one core is enough for that).
    let mut out = Vec::new();
    for i in 0..40u8 {
        out.push(Frame::udp([192, 168, 0, i + 1], [10, 9, 0, 1], 4000, 53).build());
    }
    write_pcap(&d.join("out.pcap"), &out);
    // Run the flows out at 2 cores, then their replies in from outside, later.
    let o = fusebox_ok(
        &d,
        &[
            "run",
            chain,
            "--input",
            "n1.eth0=out.pcap",
            "--cores",
            "2",
            "--out-dir",
            ".",
            "--json",
        ],
    );
    let _: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let public = packets(&d.join("n1.eth1.pcap"));
    assert_eq!(public.len(), 40);
    let mut frames = out.clone();
    for p in &public {
        let f = v4(p);
        frames.push(Frame::udp(f.dst.octets(), f.src.octets(), f.dport, f.sport).build());
    }
    // One file: the flows first, then their replies (timestamps order them).
    let (fwd, back) = frames.split_at(40);
    write_pcap(&d.join("fwd.pcap"), fwd);
    let mut w = PcapWriter::create(&d.join("back.pcap"), Precision::Micro, 1).unwrap();
    for (i, f) in back.iter().enumerate() {
        w.write(Timestamp(2_000_000_000 + i as u64 * 1000), f)
            .unwrap();
    }
    w.finish().unwrap();
    let j = run_json(
        &d,
        &[
            "run",
            chain,
            "--input",
            "n1.eth0=fwd.pcap",
            "--input",
            "n1.eth1=back.pcap",
            "--cores",
            "2",
            "--json",
            "--out-dir",
            ".",
        ],
    );
    assert_eq!(j["totals"]["input"], 80, "{j}");
    assert_eq!(
        j["totals"]["dropped"], 0,
        "every reply found its mapping: {j}"
    );
    let back_in = packets(&d.join("n1.eth0.pcap"));
    assert_eq!(back_in.len(), 40);
    for (q, r) in out.iter().zip(&back_in) {
        let (q, r) = (v4(q), v4(r));
        assert_eq!((r.dst, r.dport), (q.src, q.sport));
    }
}

#[test]
fn stateless_outputs_are_the_one_core_outputs_in_canonical_order() {
    let d = scratch("workers-order");
    gen_trace(
        &d,
        "trace.pcap",
        &[
            "--packets",
            "3000",
            "--flows",
            "300",
            "--mix",
            "udp=1,tcp=1,icmp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "10.1.0.0/16",
            "--ttl",
            "1-12",
            "--arp",
            "0.02",
        ],
    );
    let chain = root().join("examples/routers/chain.toml");
    let chain = chain.to_str().unwrap();
    for cores in ["1", "2", "3"] {
        for mode in ["naive", "synth", "fastpath"] {
            let dir = format!("c{cores}-{mode}");
            std::fs::create_dir_all(d.join(&dir)).unwrap();
            fusebox_ok(
                &d,
                &[
                    "run",
                    chain,
                    "--input",
                    "r1.eth0=trace.pcap",
                    "--cores",
                    cores,
                    "--mode",
                    mode,
                    "--out-dir",
                    &dir,
                    "--quiet",
                ],
            );
        }
    }
    let exits: Vec<String> = std::fs::read_dir(d.join("c1-naive"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(!exits.is_empty());
    for x in &exits {
        let want = std::fs::read(d.join("c1-naive").join(x)).unwrap();
        for cores in ["1", "2", "3"] {
            for mode in ["naive", "synth", "fastpath"] {
                let got = std::fs::read(d.join(format!("c{cores}-{mode}")).join(x)).unwrap();
                assert!(got == want, "{x} at {cores} cores, {mode}");
            }
        }
    }
    // The replay on two workers counts every packet once, split over the workers.
    let j = run_json(
        &d,
        &[
            "run",
            chain,
            "--input",
            "r1.eth0=trace.pcap",
            "--cores",
            "2",
            "--replay",
            "3",
            "--mode",
            "synth",
            "--json",
        ],
    );
    assert_eq!(j["replay"]["packets"], 9000, "{j}");
    assert_eq!(j["replay"]["cores"], 2);
    assert_eq!(j["summary"]["totals"]["input"], 9000);
    assert_eq!(j["summary"]["totals"]["balanced"], true);
    let per = per_worker_input(&j);
    assert_eq!(per.iter().sum::<u64>(), 9000);
    assert!(per.iter().all(|&n| n > 0), "{per:?}");
}

#[test]
fn worker_errors_are_one_line() {
    let d = scratch("workers-errors");
    std::fs::write(
        d.join("tiny.click"),
        "FromDevice(eth0) -> rw :: IPRewriter(pattern 10.0.0.1 1000-1002 - - 0 1, drop) -> ToDevice(eth1);\nFromDevice(eth1) -> [1]rw; rw[1] -> ToDevice(eth0);\n",
    )
    .unwrap();
    gen_trace(&d, "t.pcap", &["--packets", "10"]);
    for (args, want) in [
        (
            vec![
                "run",
                "tiny.click",
                "--input",
                "eth0=t.pcap",
                "--cores",
                "4",
            ],
            "cannot give each of 4 workers a slice",
        ),
        (
            vec![
                "run",
                "tiny.click",
                "--input",
                "eth0=t.pcap",
                "--cores",
                "0",
            ],
            "--cores 0",
        ),
        (
            vec![
                "verify",
                "tiny.click",
                "--input",
                "eth0=t.pcap",
                "--cores",
                "4",
            ],
            "cannot give each of 4 workers a slice",
        ),
    ] {
        let o = fusebox(&d, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // Three ports are enough for three workers.
    fusebox_ok(
        &d,
        &[
            "run",
            "tiny.click",
            "--input",
            "eth0=t.pcap",
            "--cores",
            "3",
            "--quiet",
        ],
    );
}
