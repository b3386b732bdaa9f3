//! `fusebox run --filter EXPR` and the `PcapFilter` element in a chain: only matching
//! packets enter, the others are counted as `filter-excluded`, the accounting balances, and
//! naive and synth give byte-identical outputs.

mod common;
use common::*;

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

fn is_udp(f: &[u8]) -> bool {
    f.len() > 23
        && f[12..14] == wire::ethernet::ethertype::IPV4.to_be_bytes()
        && f[23] == wire::IpProtocol::UDP
}

fn trace(d: &std::path::Path) {
    fusebox_ok(
        d,
        &[
            "gen",
            "-o",
            "t.pcap",
            "--packets",
            "600",
            "--flows",
            "30",
            "--mix",
            "tcp=2,udp=1,icmp=1",
            "--seed",
            "5",
        ],
    );
}

#[test]
fn run_filter_admits_only_matching_packets() {
    let d = scratch("pcapfilter-run");
    trace(&d);
    std::fs::write(
        d.join("pass.click"),
        "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> Unstrip(14) -> ToDevice(eth1);\n",
    )
    .unwrap();
    let input = packets(&d.join("t.pcap"));
    let udp = input.iter().filter(|f| is_udp(f)).count();
    assert!(udp > 50 && udp < input.len(), "{udp} of {}", input.len());
    let mut outs = Vec::new();
    for mode in ["naive", "synth"] {
        let out = d.join(mode);
        std::fs::create_dir_all(&out).unwrap();
        let o = fusebox_ok(
            &d,
            &[
                "run",
                "pass.click",
                "--input",
                "eth0=t.pcap",
                "--filter",
                "udp",
                "--mode",
                mode,
                "--out-dir",
                out.to_str().unwrap(),
                "--json",
            ],
        );
        let s = json(&o);
        let s = if s.get("summary").is_some() {
            s["summary"].clone()
        } else {
            s
        };
        assert_eq!(s["totals"]["input"], input.len() as u64, "{mode}");
        assert_eq!(
            s["totals"]["drops"]["filter-excluded"],
            (input.len() - udp) as u64,
            "{mode}"
        );
        assert_eq!(s["totals"]["output"], udp as u64, "{mode}");
        assert_eq!(s["totals"]["balanced"], true, "{mode}");
        let got = packets(&out.join("pass.eth1.pcap"));
        assert!(got.iter().all(|f| is_udp(f)), "{mode}");
        outs.push(got);
    }
    assert_eq!(outs[0], outs[1], "naive and synth differ");
}

#[test]
fn pcapfilter_element_in_a_chain_matches_naive_and_synth() {
    let d = scratch("pcapfilter-element");
    trace(&d);
    std::fs::write(
        d.join("split.click"),
        "FromDevice(eth0) -> f :: PcapFilter(\"udp or tcp[tcpflags] & tcp-syn != 0\");\n\
         f[0] -> ToDevice(eth1);\n\
         f[1] -> ToDevice(eth2);\n",
    )
    .unwrap();
    let mut outs = Vec::new();
    for mode in ["naive", "synth"] {
        let out = d.join(mode);
        std::fs::create_dir_all(&out).unwrap();
        fusebox_ok(
            &d,
            &[
                "run",
                "split.click",
                "--input",
                "eth0=t.pcap",
                "--mode",
                mode,
                "--out-dir",
                out.to_str().unwrap(),
            ],
        );
        let a = packets(&out.join("split.eth1.pcap"));
        let b = packets(&out.join("split.eth2.pcap"));
        assert!(!a.is_empty() && !b.is_empty(), "{mode}");
        outs.push((a, b));
    }
    assert_eq!(outs[0], outs[1], "naive and synth differ");
}

#[test]
fn bad_filter_is_refused_with_its_column() {
    let d = scratch("pcapfilter-bad");
    trace(&d);
    std::fs::write(
        d.join("pass.click"),
        "FromDevice(eth0) -> ToDevice(eth1);\n",
    )
    .unwrap();
    let o = fusebox(
        &d,
        &[
            "run",
            "pass.click",
            "--input",
            "eth0=t.pcap",
            "--filter",
            "tcp port",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--filter `tcp port`: column 9"), "{err}");
}

#[test]
fn gen_filter_writes_only_matching_frames() {
    let d = scratch("pcapfilter-gen");
    let o = fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "u.pcap",
            "--packets",
            "400",
            "--flows",
            "20",
            "--mix",
            "tcp=1,udp=1,icmp=1",
            "--seed",
            "9",
            "--filter",
            "udp",
        ],
    );
    let line = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    let got = packets(&d.join("u.pcap"));
    assert!(!got.is_empty() && got.len() < 400, "{line}");
    assert!(got.iter().all(|f| is_udp(f)));
    assert!(
        line.contains(&format!(
            "{} generated frames filtered out",
            400 - got.len()
        )),
        "{line}"
    );
}
