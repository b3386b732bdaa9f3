//! SpeedyBox's first chain (`examples/speedybox/chain1.toml`: MazuNAT → Maglev → Monitor →
//! BlacklistFilter) end to end, with the backends' replies reflected back through it.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::Path;

fn summary(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("JSON summary on stdout")
}

/// The stats of element `element` of NF `nf`.
fn stats(s: &serde_json::Value, nf: &str, element: &str) -> BTreeMap<String, u64> {
    let nf = s["nfs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == nf)
        .unwrap_or_else(|| panic!("no NF {nf}"));
    let e = nf["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["class"] == element)
        .unwrap_or_else(|| panic!("no {element} in {nf}"));
    e["stats"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

/// (timestamp, frame) of every packet of a capture.
fn records(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let (recs, err) = ports::pcap::read_all(path).unwrap();
    assert!(err.is_none(), "{err:?}");
    recs.into_iter().map(|r| (r.timestamp.0, r.data)).collect()
}

const FAIL_AT: usize = 3000; // examples/speedybox/schedule.txt
const BACK_AT: usize = 7000;
const WEB3: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 3);

fn run_chain(d: &Path, dports: &str) -> serde_json::Value {
    let ex = root().join("examples/speedybox/chain1.toml");
    gen_trace(
        d,
        "trace.pcap",
        &[
            "--packets",
            "10000",
            "--flows",
            "200",
            "--mix",
            "tcp=1,udp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "198.51.100.0/24",
            "--dport",
            dports,
            "--seed",
            "5",
        ],
    );
    let o = fusebox_ok(
        d,
        &[
            "run",
            ex.to_str().unwrap(),
            "--input",
            "nat.eth0=trace.pcap",
            "--reflect",
            "bl.eth1",
            "--json",
        ],
    );
    summary(&o)
}

#[test]
fn chain1_balances_and_maglev_fails_over_at_the_scheduled_packet() {
    let d = scratch("speedybox-chain1");
    let s = run_chain(&d, "80,443,53");
    assert_eq!(s["totals"]["balanced"], true, "{s}");
    let input = records(&d.join("trace.pcap"));
    let index_of: BTreeMap<u64, usize> = input
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (*t, i))
        .collect();
    assert_eq!(index_of.len(), input.len(), "distinct timestamps");
    let out = records(&d.join("bl.eth1.pcap"));
    let back = records(&d.join("nat.eth0.pcap"));
    assert_eq!(
        out.len(),
        input.len(),
        "no packet of these ports is blacklisted"
    );
    assert_eq!(
        back.len(),
        out.len(),
        "every reply comes back out of the NAT"
    );

    // Every packet reaches a backend, rewritten with valid checksums, from the NAT's address.
    let mut per_backend: BTreeMap<Ipv4Addr, u64> = BTreeMap::new();
    let mut flow_backends: BTreeMap<(u8, u16), Vec<(usize, Ipv4Addr)>> = BTreeMap::new();
    let mut tuples = BTreeSet::new();
    let mut bytes = 0u64;
    for (t, f) in &out {
        let p = v4(f);
        assert!(p.ip_ok && p.l4_ok, "checksums: {p:?}");
        assert_eq!(p.src, Ipv4Addr::new(203, 0, 113, 1));
        let n = p.dst.octets()[3];
        assert_eq!(&p.dst.octets()[..3], &[10, 0, 1]);
        assert!((1..=5).contains(&n));
        assert_eq!(p.dst_mac, [2, 0, 0, 0, 1, n], "backend MAC");
        *per_backend.entry(p.dst).or_default() += 1;
        flow_backends
            .entry((p.proto, p.sport))
            .or_default()
            .push((index_of[t], p.dst));
        tuples.insert((p.proto, p.sport, p.dst, p.dport));
        bytes += f.len() as u64;
    }
    // Replies leave the NAT towards the original hosts, with the original service address.
    for (_, f) in &back {
        let p = v4(f);
        assert!(p.ip_ok && p.l4_ok);
        assert_eq!(&p.src.octets()[..3], &[198, 51, 100]);
        assert_eq!(&p.dst.octets()[..2], &[10, 0]);
    }

    // Failover: a flow changes backend only at the failure, only from web3, and nothing
    // reaches web3 while it is down.
    let mut moved = 0;
    for (flow, seq) in &flow_backends {
        for w in seq.windows(2) {
            let ((_, a), (i, b)) = (w[0], w[1]);
            if a != b {
                assert_eq!(a, WEB3, "flow {flow:?} left a live backend at {i}");
                assert!(
                    (FAIL_AT..BACK_AT).contains(&i),
                    "flow {flow:?} moved at {i}"
                );
                moved += 1;
            }
        }
        for (i, b) in seq {
            assert!(
                !(*b == WEB3 && (FAIL_AT..BACK_AT).contains(i)),
                "web3 used at {i}"
            );
        }
    }
    let on_web3 = flow_backends
        .values()
        .filter(|s| s.iter().any(|(i, b)| *b == WEB3 && *i < FAIL_AT))
        .count();
    assert!(
        on_web3 * 100 >= flow_backends.len() * 10 && on_web3 * 100 <= flow_backends.len() * 30,
        "{on_web3} of {} flows on web3",
        flow_backends.len()
    );

    // The load balancer's and the monitor's counters agree with what left the chain.
    let lb = stats(&s, "lb", "Maglev");
    for (ip, n) in &per_backend {
        let name = format!("packets_web{}", ip.octets()[3]);
        assert_eq!(lb[&name], *n, "{name}");
    }
    assert_eq!(lb["forwarded"], out.len() as u64);
    assert_eq!(lb["replies"], back.len() as u64);
    assert_eq!(lb["rebuilds"], 2);
    assert!(lb["evicted"] >= moved, "{lb:?} moved {moved}");
    let mon = stats(&s, "mon", "Monitor");
    assert_eq!(mon["packets"], out.len() as u64);
    assert_eq!(mon["bytes"], bytes);
    assert_eq!(mon["flows"], tuples.len() as u64);
    assert_eq!(mon["flows"], flow_backends.len() as u64 + moved);
    let nat = stats(&s, "nat", "MazuNAT");
    assert_eq!(nat["mappings_created"], flow_backends.len() as u64);
}

#[test]
fn chain1_blacklists_and_verifies_against_synthesis() {
    let d = scratch("speedybox-chain1-bl");
    let s = run_chain(&d, "80,443,23");
    assert_eq!(s["totals"]["balanced"], true, "{s}");
    let input = packets(&d.join("trace.pcap"));
    let telnet = input
        .iter()
        .filter(|f| {
            let p = v4(f);
            p.proto == wire::IpProtocol::TCP && p.dport == 23
        })
        .count() as u64;
    assert!(telnet > 500, "{telnet}");
    let bl = stats(&s, "bl", "BlacklistFilter");
    assert_eq!(bl["blacklisted"], telnet);
    assert_eq!(bl["passed"], input.len() as u64 - telnet);
    assert_eq!(packets(&d.join("nat.eth0.pcap")).len() as u64, bl["passed"]);

    let ex = root().join("examples/speedybox/chain1.toml");
    let o = fusebox_ok(
        &d,
        &[
            "verify",
            ex.to_str().unwrap(),
            "--input",
            "nat.eth0=trace.pcap",
            "--reflect",
            "bl.eth1",
            "--modes",
            "naive,synth,fastpath,parallel",
        ],
    );
    let line = String::from_utf8_lossy(&o.stdout);
    assert!(line.starts_with("identical:"), "{line}");
}

/// The fast path serves most packets of chain 1 from consolidated entries and stays
/// identical to the naive run, also with malformed packets, ICMP, and a short Maglev idle
/// timeout that makes connection entries expire between a flow's packets.
#[test]
fn chain1_fast_path_is_identical_to_naive() {
    let d = scratch("speedybox-chain1-fast");
    let ex = root().join("examples/speedybox/chain1.toml");
    gen_trace(
        &d,
        "t.pcap",
        &[
            "--packets",
            "8000",
            "--flows",
            "300",
            "--mix",
            "tcp=2,udp=2,icmp=1",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "198.51.100.0/24",
            "--dport",
            "80,443,53,23",
            "--truncate",
            "0.02",
            "--bad-ip-checksum",
            "0.02",
            "--ip-options",
            "0.02",
            "--gap-ns",
            "2000000",
            "--seed",
            "9",
        ],
    );
    for timeout in ["60s", "500ms"] {
        let define = format!("TIMEOUT={timeout}");
        let base = [
            ex.to_str().unwrap(),
            "--input",
            "nat.eth0=t.pcap",
            "--reflect",
            "bl.eth1",
            "--define",
            &define,
        ];
        let mut args = vec!["verify"];
        args.extend(base);
        args.extend(["--modes", "naive,fastpath"]);
        let o = fusebox_ok(&d, &args);
        let line = String::from_utf8_lossy(&o.stdout);
        assert!(line.starts_with("identical:"), "{timeout}: {line}");
        let mut args = vec!["run"];
        args.extend(base);
        args.extend(["--mode", "fastpath"]);
        let o = fusebox_ok(&d, &args);
        let out =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        let fp = out
            .lines()
            .find(|l| l.starts_with("fastpath:"))
            .unwrap_or_else(|| panic!("no fastpath line: {out}"));
        let served: u64 = fp
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{fp}"));
        let events: u64 = fp
            .split(", ")
            .find(|w| w.ends_with(" events"))
            .and_then(|w| w.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{fp}"));
        assert!(events > 0, "the backend failure re-records flows: {fp}");
        if timeout == "60s" {
            assert!(served > 8000, "{fp}");
        }
    }
}
