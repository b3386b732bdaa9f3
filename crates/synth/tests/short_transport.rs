//! TCP and UDP packets with a short transport part (`fusebox gen --short-transport`: 7 to
//! 19 TCP bytes, 7 or 8 UDP bytes, with and without an Ethernet trailer) through the NAPTs:
//! synth and fastpath give what naive gives, and naive rewrites them as Click does (checked
//! byte by byte in the rewriter's unit tests): under 8 bytes refused, TCP with 8 to 17
//! bytes mapped with its ports kept by `IPRewriter`/`TCPRewriter`/`MazuNAT` and rewritten
//! by `UDPRewriter`, from 18 bytes rewritten in full.

use chain::{ChainFile, Endpoint, RunOptions};
use ports::gen::{generate, Anomalies, GenConfig, Mix, PortSpec, Rate};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use synth::verify::{compare, run, Mode, RunResult};
use tempfile::TempDir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory, removed when dropped.
fn scratch(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("short-transport-{name}-"))
        .tempdir()
        .unwrap()
}

/// A trace from `src` to `dst` where 30 % of the TCP and UDP packets are cut short: its
/// scratch directory (removed when dropped) and its path in it.
fn trace(name: &str, src: (Ipv4Addr, u8), dst: (Ipv4Addr, u8)) -> (TempDir, PathBuf) {
    let dir = scratch(name);
    let path = dir.path().join("t.pcap");
    let cfg = GenConfig {
        packets: 2000,
        flows: 40,
        mix: Mix {
            tcp: 3,
            udp: 1,
            icmp: 0,
        },
        src_prefix: src,
        dst_prefix: dst,
        dst_ports: PortSpec::List(vec![1234, 53, 80]),
        seed: 5,
        anomalies: Anomalies {
            short_transport: Rate::from_probability(0.3),
            ..Anomalies::default()
        },
        ..GenConfig::default()
    };
    let mut w = ports::pcap::PcapWriter::create(&path, packet::Precision::Micro, 1).unwrap();
    let mut gen = generate(&cfg);
    for (ts, frame) in gen.by_ref() {
        w.write(ts, &frame).unwrap();
    }
    w.finish().unwrap();
    assert!(gen.anomaly_counts().short_transport > 300);
    (dir, path)
}

/// Runs `chain` in every mode on `input` at `entry` (replies reflected at `reflect`: the
/// reflector answers a TCP segment shorter than its header with the addresses swapped
/// only, so such replies meet no mapping);
/// asserts synth and fastpath match naive and returns the naive run.
fn all_modes(chain: &Path, entry: &str, input: &Path, reflect: &str) -> RunResult {
    let chain = ChainFile::load(chain).unwrap();
    let opts = RunOptions {
        reflect: vec![Endpoint::parse(reflect).unwrap()],
        ..RunOptions::default()
    };
    let inputs = [(Endpoint::parse(entry).unwrap(), input.to_path_buf())];
    let naive = run(&chain, &inputs, &opts, Mode::Naive).unwrap();
    assert!(naive.packets() > 0);
    for mode in [Mode::Synth, Mode::Fastpath] {
        let other = run(&chain, &inputs, &opts, mode).unwrap();
        let d = compare(&naive, &other);
        assert!(d.is_empty(), "{} {mode:?}: {d:?}", chain.path.display());
    }
    naive
}

/// The IPv4 packets of exit `exit` (Ethernet frames) whose transport part, cut at the IP
/// total length, has `lo..=hi` bytes and protocol `proto`: (source, source port) of each.
fn short_out(r: &RunResult, exit: &str, proto: u8, lo: usize, hi: usize) -> Vec<(Ipv4Addr, u16)> {
    let Some(frames) = r.exits.get(exit) else {
        return Vec::new();
    };
    frames
        .iter()
        .filter_map(|(_, _, d)| {
            let ip = d.get(14..)?;
            let hl = usize::from(ip.first()? & 0x0f) * 4;
            let len = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            let t = len.checked_sub(hl)?;
            (ip.get(9) == Some(&proto) && (lo..=hi).contains(&t)).then(|| {
                (
                    Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
                    u16::from_be_bytes([ip[hl], ip[hl + 1]]),
                )
            })
        })
        .collect()
}

#[test]
fn napts_rewrite_short_segments_alike_in_every_mode() {
    let (_t, t) = trace(
        "napts",
        (Ipv4Addr::new(10, 0, 0, 0), 16),
        (Ipv4Addr::new(10, 1, 0, 0), 16),
    );
    let r = all_modes(
        &root().join("examples/napts/chain.toml"),
        "n1.eth0",
        &t,
        "n10.eth1",
    );
    // Ten IPRewriters: a segment of 8 to 17 bytes leaves with the last NAPT's address and
    // its own source port; from 18 bytes its port is the last NAPT's choice.
    let short = short_out(&r, "n10.eth1", 6, 8, 17);
    assert!(short.len() > 20, "{} short segments out", short.len());
    assert!(short
        .iter()
        .all(|(a, _)| *a == Ipv4Addr::new(10, 0, 110, 1)));
    assert!(!short_out(&r, "n10.eth1", 6, 18, 19).is_empty());
    assert!(short_out(&r, "n10.eth1", 6, 0, 7).is_empty(), "refused");

    let (_t, t) = trace(
        "fig5",
        (Ipv4Addr::new(192, 168, 0, 0), 24),
        (Ipv4Addr::new(10, 0, 2, 0), 24),
    );
    all_modes(
        &root().join("examples/fig5/chain.toml"),
        "napt.eth0",
        &t,
        "lb.eth1",
    );
    let (_t, t) = trace(
        "mazunat",
        (Ipv4Addr::new(192, 168, 0, 0), 24),
        (Ipv4Addr::new(10, 0, 0, 0), 24),
    );
    all_modes(
        &root().join("examples/speedybox/chain1.toml"),
        "nat.eth0",
        &t,
        "bl.eth1",
    );
}

/// Each rewriter class, with the packet cut at its IP length (`CheckIPHeader`) and as it
/// arrived (`MarkIPHeader`: an Ethernet trailer counts as transport bytes, as Click's
/// `transport_length()` counts it).
#[test]
fn every_rewriter_class_with_and_without_trimming() {
    let (_t, t) = trace(
        "classes",
        (Ipv4Addr::new(10, 0, 0, 0), 16),
        (Ipv4Addr::new(10, 1, 0, 0), 16),
    );
    for class in ["IPRewriter", "TCPRewriter", "UDPRewriter"] {
        for (check, ports) in [
            ("CheckIPHeader", "900-999"),
            ("MarkIPHeader", "900-999"),
            ("CheckIPHeader", "999"),
        ] {
            let nf_dir = scratch(&format!("{class}-{check}-{ports}"));
            let dir = nf_dir.path();
            // After the rewriter a classifier on the source port: synthesis must not take
            // a short segment's port for one of the pattern's.
            std::fs::write(
                dir.join("n.click"),
                format!(
                    "rw :: {class}(pattern 10.9.0.1 {ports} - - 0 1, pass 1);\n\
                     FromDevice(eth0) -> Strip(14) -> {check} -> [0]rw;\n\
                     FromDevice(eth1) -> Strip(14) -> {check} -> [1]rw;\n\
                     rw[0] -> c :: IPClassifier(src port < 1000, -);\n\
                     c[0] -> EtherEncap(0x0800, 02:00:00:00:00:01, 02:00:00:00:00:02) -> ToDevice(eth1);\n\
                     c[1] -> EtherEncap(0x0800, 02:00:00:00:00:03, 02:00:00:00:00:02) -> ToDevice(eth1);\n\
                     rw[1] -> EtherEncap(0x0800, 02:00:00:00:00:02, 02:00:00:00:00:01) -> ToDevice(eth0);\n"
                ),
            )
            .unwrap();
            std::fs::write(
                dir.join("chain.toml"),
                "[nf.n]\nclick = \"n.click\"\n[[entry]]\nto = \"n.eth0\"\n",
            )
            .unwrap();
            let r = all_modes(&dir.join("chain.toml"), "n.eth0", &t, "n.eth1");
            if check == "CheckIPHeader" {
                // The pattern's ports (900-999, or 999) are not the generator's (1024-65535): a
                // short segment keeps its own under the TCP rewriters and gets one of
                // the pattern's under UDPRewriter; from 18 bytes every class renumbers.
                let short = short_out(&r, "n.eth1", 6, 8, 17);
                assert!(!short.is_empty(), "{class}");
                assert!(
                    short.iter().all(|(a, _)| *a == Ipv4Addr::new(10, 9, 0, 1)),
                    "{class}"
                );
                let kept = class != "UDPRewriter";
                assert!(
                    short.iter().all(|(_, p)| (*p >= 1024) == kept),
                    "{class}: {short:?}"
                );
                let whole = short_out(&r, "n.eth1", 6, 18, 19);
                assert!(!whole.is_empty(), "{class}");
                assert!(
                    whole.iter().all(|(_, p)| (900..=999).contains(p)),
                    "{class}"
                );
                assert!(short_out(&r, "n.eth1", 6, 0, 7).is_empty(), "{class}");
            }
        }
    }
}
