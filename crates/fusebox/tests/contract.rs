//! The equivalence contract of the naive executor: batching does not change results, inputs
//! merge on timestamps, timestamps and their resolution are kept, loops end at 64 hops, and
//! every packet is accounted for.

mod common;
use common::*;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn batch_size_does_not_change_outputs_or_state() {
    let d = scratch("batch");
    let ex = root().join("examples/fig5/chain.toml");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "t.pcap",
            "--packets",
            "1500",
            "--flows",
            "50",
            "--mix",
            "tcp=1,udp=2,icmp=1",
            "--src",
            "192.168.0.0/24",
            "--dst",
            "10.0.2.0/24",
            "--dport",
            "1234,53",
            "--seed",
            "11",
        ],
    );
    let mut runs = Vec::new();
    for batch in ["1", "7", "32", "1000"] {
        let out = d.join(format!("b{batch}"));
        std::fs::create_dir_all(&out).unwrap();
        let o = fusebox_ok(
            &d,
            &[
                "run",
                ex.to_str().unwrap(),
                "--input",
                "napt.eth0=t.pcap",
                "--reflect",
                "lb.eth1",
                "--batch",
                batch,
                "--out-dir",
                out.to_str().unwrap(),
                "--json",
            ],
        );
        let s = json(&o);
        let files: Vec<Vec<u8>> = ["napt.eth0", "napt.eth2", "lb.eth1"]
            .iter()
            .map(|f| std::fs::read(out.join(format!("{f}.pcap"))).unwrap())
            .collect();
        runs.push((s, files));
    }
    for r in &runs[1..] {
        assert_eq!(
            r.1, runs[0].1,
            "outputs are byte-identical whatever the batch size"
        );
        assert_eq!(r.0, runs[0].0, "counters and element state are identical");
    }
    assert!(
        !packets(&d.join("b1/napt.eth0.pcap")).is_empty(),
        "replies came back"
    );
}

#[test]
fn inputs_merge_on_timestamps_and_keep_nanosecond_resolution() {
    let d = scratch("merge");
    // a: timestamps 0, 2000, 4000 ns; b: 1000, 3000, 5000 ns (gaps not whole µs -> nanosecond files).
    fusebox_ok(
        &d,
        &[
            "gen", "-o", "a.pcap", "-n", "3", "--flows", "1", "--mix", "udp=1", "--gap-ns", "2000",
            "--start", "100", "--nano", "--dport", "1",
        ],
    );
    fusebox_ok(
        &d,
        &[
            "gen", "-o", "b.pcap", "-n", "3", "--flows", "1", "--mix", "udp=1", "--gap-ns", "2000",
            "--start", "100", "--nano", "--dport", "2",
        ],
    );
    // Shift b by 1000 ns by rewriting its record timestamps.
    let (recs, _) = ports::pcap::read_all(&d.join("b.pcap")).unwrap();
    let mut w =
        ports::pcap::PcapWriter::create(&d.join("b2.pcap"), packet::Precision::Nano, 1).unwrap();
    for r in &recs {
        w.write(r.timestamp.add_nanos(1000), &r.data).unwrap();
    }
    w.finish().unwrap();
    // Two FromDevice for one interface is refused (where would arriving packets go?).
    write(
        &d,
        "dup.click",
        "FromDevice(a) -> ToDevice(out); FromDevice(a) -> ToDevice(out);\n",
    );
    let o = fusebox(&d, &["check", "dup.click"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("dup.click:1:33"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Several ToDevice for one interface all send out of it.
    write(
        &d,
        "two.click",
        "FromDevice(a) -> ToDevice(out); FromDevice(b) -> ToDevice(out);\n",
    );
    fusebox_ok(
        &d,
        &[
            "run",
            "two.click",
            "--input",
            "a=a.pcap",
            "--input",
            "b=b2.pcap",
            "--output",
            "out=o.pcap",
        ],
    );
    let (out, err) = ports::pcap::read_all(&d.join("o.pcap")).unwrap();
    assert!(err.is_none());
    assert_eq!(out.len(), 6);
    assert!(
        out.iter().all(|r| r.precision == packet::Precision::Nano),
        "nanosecond resolution kept"
    );
    let ts: Vec<u64> = out
        .iter()
        .map(|r| r.timestamp.0 - out[0].timestamp.0)
        .collect();
    assert_eq!(
        ts,
        vec![0, 1000, 2000, 3000, 4000, 5000],
        "merged on timestamps, each keeps its own"
    );
    let dports: Vec<u16> = out.iter().map(|r| v4(&r.data).dport).collect();
    assert_eq!(dports, vec![1, 2, 1, 2, 1, 2]);
    // Ties go to the earlier --input.
    fusebox_ok(
        &d,
        &[
            "run",
            "two.click",
            "--input",
            "b=b.pcap",
            "--input",
            "a=a.pcap",
            "--output",
            "out=t.pcap",
        ],
    );
    let (tie, _) = ports::pcap::read_all(&d.join("t.pcap")).unwrap();
    let dports: Vec<u16> = tie.iter().map(|r| v4(&r.data).dport).collect();
    assert_eq!(dports, vec![2, 1, 2, 1, 2, 1]);
}

#[test]
fn a_packet_bouncing_between_nfs_is_dropped_after_64_links() {
    let d = scratch("loop");
    write(
        &d,
        "a.click",
        "FromDevice(eth0) -> ToDevice(eth1); FromDevice(eth1) -> ToDevice(eth1);\n",
    );
    write(&d, "b.click", "FromDevice(eth0) -> ToDevice(eth0);\n");
    write(
        &d,
        "c.toml",
        "[nf.a]\nclick = \"a.click\"\n[nf.b]\nclick = \"b.click\"\n[[link]]\nbetween = [\"a.eth1\", \"b.eth0\"]\n[[entry]]\nto = \"a.eth0\"\n",
    );
    fusebox_ok(
        &d,
        &[
            "gen", "-o", "t.pcap", "-n", "5", "--flows", "1", "--mix", "udp=1",
        ],
    );
    let o = fusebox_ok(&d, &["run", "c.toml", "--input", "a.eth0=t.pcap", "--json"]);
    let s = json(&o);
    assert_eq!(s["totals"]["drops"]["loop"], 5);
    assert_eq!(s["totals"]["output"], 0);
    assert_eq!(s["totals"]["balanced"], true);
    // 64 crossings allowed: a->b is crossing 1, b->a crossing 2, ...: the 65th is refused.
    let a = &s["nfs"][0];
    assert_eq!(a["name"], "a");
    let b = &s["nfs"][1];
    assert_eq!(
        a["input"].as_u64().unwrap() + b["input"].as_u64().unwrap(),
        5 * 65
    );
}

#[test]
fn human_summary_and_exit_codes() {
    let d = scratch("summary");
    let ex = root().join("examples/routers/one.toml");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "t.pcap",
            "-n",
            "20",
            "--flows",
            "2",
            "--mix",
            "udp=1",
            "--dst",
            "10.1.0.0/16",
        ],
    );
    let o = fusebox_ok(
        &d,
        &["run", ex.to_str().unwrap(), "--input", "r1.eth0=t.pcap"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("chain: 20 in + 0 created = 20 out + 0 dropped + 0 held  [balanced]"),
        "{err}"
    );
    assert!(err.contains("exit r1.eth1"), "{err}");
    assert!(err.contains("RadixIPLookup"), "{err}");
    assert_eq!(packets(&d.join("r1.eth1.pcap")).len(), 20);
    // An unknown --input endpoint is an error, not a silent no-op.
    let o = fusebox(
        &d,
        &["run", ex.to_str().unwrap(), "--input", "r1.eth9=t.pcap"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("r1.eth9"));
}
