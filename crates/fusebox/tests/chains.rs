//! End-to-end runs of the bundled example chains.

mod common;
use common::*;
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use wire::ethernet::ethertype;
use wire::IpProtocol;

fn summary(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("JSON summary on stdout")
}

#[test]
fn fig5_chain_does_what_the_figure_says() {
    let d = scratch("fig5");
    let ex = root().join("examples/fig5/chain.toml");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "trace.pcap",
            "--packets",
            "3000",
            "--flows",
            "60",
            "--mix",
            "tcp=1,udp=2,icmp=1",
            "--src",
            "192.168.0.0/24",
            "--dst",
            "10.0.2.0/24",
            "--dport",
            "1234,53",
            "--seed",
            "7",
        ],
    );
    let o = fusebox_ok(
        &d,
        &[
            "run",
            ex.to_str().unwrap(),
            "--input",
            "napt.eth0=trace.pcap",
            "--json",
        ],
    );
    let s = summary(&o);
    assert_eq!(s["totals"]["balanced"], true, "{s}");
    let input = packets(&d.join("trace.pcap"));
    let originals: Vec<V4> = input.iter().map(|f| v4(f)).collect();
    let udp1234 = originals
        .iter()
        .filter(|p| p.proto == IpProtocol::UDP && p.dport == 1234)
        .count();
    let tcp = originals
        .iter()
        .filter(|p| p.proto == IpProtocol::TCP)
        .count();
    assert!(
        udp1234 > 100 && tcp > 100,
        "trace lacks variety: {udp1234} {tcp}"
    );

    // UDP to port 1234 leaves the load balancer.
    let lb = packets(&d.join("lb.eth1.pcap"));
    assert_eq!(
        lb.len(),
        udp1234,
        "every UDP datagram to port 1234 passes the chain"
    );
    let mut backend_of_flow: HashMap<(u16, Ipv4Addr), Ipv4Addr> = HashMap::new();
    let mut order = Vec::new();
    for f in &lb {
        let p = v4(f);
        assert_eq!(p.src, Ipv4Addr::new(10, 0, 0, 1));
        assert!((1000..=9000).contains(&p.sport), "source port {}", p.sport);
        assert!(p.dst == Ipv4Addr::new(10, 0, 1, 1) || p.dst == Ipv4Addr::new(10, 0, 1, 2));
        assert_eq!(p.ttl, 64 - 3, "three DecIPTTLs");
        assert!(p.ip_ok && p.l4_ok, "checksums");
        assert_eq!(p.src_mac, [2, 0, 0, 0, 0, 5]);
        assert_eq!(p.dst_mac, [2, 0, 0, 0, 0, 6]);
        let key = (p.sport, p.src);
        match backend_of_flow.get(&key) {
            Some(b) => assert_eq!(*b, p.dst, "a flow keeps its backend"),
            None => {
                backend_of_flow.insert(key, p.dst);
                order.push(p.dst);
            }
        }
    }
    assert!(order.len() > 2);
    for w in order.windows(2) {
        assert_ne!(
            w[0], w[1],
            "backends alternate from one new flow to the next"
        );
    }
    // TCP leaves the NAPT's other interface with destination 10.1.1.2.
    let napt2 = packets(&d.join("napt.eth2.pcap"));
    assert_eq!(napt2.len(), tcp);
    for f in &napt2 {
        let p = v4(f);
        assert_eq!((p.proto, p.dst, p.ttl), (6, Ipv4Addr::new(10, 1, 1, 2), 63));
        assert!(p.ip_ok && p.l4_ok);
    }
    // The rest is dropped, by reason.
    let drops: BTreeMap<String, u64> =
        serde_json::from_value(s["totals"]["drops"].clone()).unwrap();
    let dropped: u64 = drops.values().sum();
    assert_eq!(dropped as usize, input.len() - udp1234 - tcp, "{drops:?}");
    assert!(
        drops.contains_key("filter-deny"),
        "the firewall denies UDP to other ports: {drops:?}"
    );
    if have_tcpdump() {
        for f in ["lb.eth1.pcap", "napt.eth2.pcap"] {
            let t = tcpdump(&d.join(f));
            assert!(
                !t.contains("incorrect") && !t.contains("bad cksum"),
                "{f}: {t}"
            );
            assert!(t.lines().count() >= 100);
        }
    }
}

#[test]
fn napt_chain_reflects_replies_back_to_the_original_addresses() {
    let d = scratch("napts");
    let ex = root().join("examples/napts/chain.toml");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "t.pcap",
            "--packets",
            "500",
            "--flows",
            "25",
            "--mix",
            "tcp=1,udp=1",
            "--seed",
            "3",
        ],
    );
    let o = fusebox_ok(
        &d,
        &[
            "run",
            ex.to_str().unwrap(),
            "--input",
            "n1.eth0=t.pcap",
            "--reflect",
            "n10.eth1",
            "--json",
        ],
    );
    let s = summary(&o);
    assert_eq!(s["totals"]["balanced"], true);
    let input: Vec<V4> = packets(&d.join("t.pcap")).iter().map(|f| v4(f)).collect();
    let out: Vec<V4> = packets(&d.join("n10.eth1.pcap"))
        .iter()
        .map(|f| v4(f))
        .collect();
    let back: Vec<V4> = packets(&d.join("n1.eth0.pcap"))
        .iter()
        .map(|f| v4(f))
        .collect();
    assert_eq!(out.len(), input.len());
    assert_eq!(
        back.len(),
        input.len(),
        "every reply comes back out of the entry"
    );
    for ((i, o), b) in input.iter().zip(&out).zip(&back) {
        assert_eq!(
            o.src,
            Ipv4Addr::new(10, 0, 110, 1),
            "translated by the last NAPT"
        );
        assert_eq!(o.ttl, i.ttl - 10);
        // The reply is addressed to the original source, from the original destination.
        assert_eq!(
            (b.src, b.dst, b.sport, b.dport, b.proto),
            (i.dst, i.src, i.dport, i.sport, i.proto)
        );
        assert!(b.ip_ok && b.l4_ok);
        assert_eq!(b.src_mac, [2, 0, 0, 0, 1, 0x10], "n1's eth0 MAC");
    }
}

#[test]
fn router_chain_replay_reports_rate_and_restores_bytes() {
    let d = scratch("replay");
    let ex = root().join("examples/routers/chain.toml");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "t.pcap",
            "--packets",
            "200",
            "--flows",
            "20",
            "--mix",
            "udp=1",
            "--size",
            "64",
            "--src",
            "10.0.0.0/16",
            "--dst",
            "10.1.0.0/16",
        ],
    );
    let o = fusebox_ok(
        &d,
        &[
            "run",
            ex.to_str().unwrap(),
            "--input",
            "r1.eth0=t.pcap",
            "--replay",
            "5",
            "--json",
        ],
    );
    let s = summary(&o);
    assert_eq!(s["replay"]["packets"], 1000);
    assert!(s["replay"]["pps"].as_f64().unwrap() > 0.0);
    // Every pass restores the original bytes: all 1000 pushes leave r10 (TTL 64 -> 54);
    // without restoring, the TTL would run out after six passes of ten routers.
    let exits = s["summary"]["exits"].as_array().unwrap();
    let r10 = exits.iter().find(|x| x["name"] == "r10.eth1").unwrap();
    assert_eq!(r10["packets"], 1000);
    assert_eq!(s["summary"]["totals"]["balanced"], true);
}

#[test]
fn isp_chain_runs_and_balances() {
    let d = scratch("isp");
    let ex = root().join("examples/isp/chain.toml");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "t.pcap",
            "--packets",
            "2000",
            "--flows",
            "80",
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
    let o = fusebox_ok(
        &d,
        &[
            "run",
            ex.to_str().unwrap(),
            "--input",
            "fw.eth0=t.pcap",
            "--reflect",
            "napt.eth1",
            "--json",
        ],
    );
    let s = summary(&o);
    assert_eq!(s["totals"]["balanced"], true);
    let drops = &s["totals"]["drops"];
    assert!(
        drops["filter-deny"].as_u64().unwrap() > 0,
        "port 23 and 8080 are denied: {drops}"
    );
    let back = packets(&d.join("fw.eth0.pcap"));
    let out = packets(&d.join("napt.eth1.pcap"));
    assert!(!out.is_empty());
    assert_eq!(
        back.len(),
        out.len(),
        "every allowed flow's replies come back"
    );
}

#[test]
fn clicks_own_ip_router_runs_unchanged_with_reflected_arp() {
    let d = scratch("click-router");
    let cfg = root().join("examples/click-router/router.click");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "fwd.pcap",
            "--packets",
            "1000",
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
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "ttl1.pcap",
            "--packets",
            "10",
            "--flows",
            "5",
            "--mix",
            "udp=1",
            "--src",
            "18.26.4.0/24",
            "--dst",
            "1.0.0.0/8",
            "--ttl",
            "1",
            "--gap-ns",
            "333",
        ],
    );
    let o = fusebox_ok(
        &d,
        &[
            "run",
            cfg.to_str().unwrap(),
            "--input",
            "eth0=fwd.pcap",
            "--input",
            "eth0=ttl1.pcap",
            "--reflect",
            "router.eth1",
            "--reflect",
            "router.eth0",
            "--json",
        ],
    );
    let s = summary(&o);
    assert_eq!(s["totals"]["balanced"], true);
    let eth1 = packets(&d.join("router.eth1.pcap"));
    let (arp, ip): (Vec<_>, Vec<_>) = eth1.iter().partition(|f| f[12..14] == [8, 6]);
    assert_eq!(
        ip.len(),
        1000,
        "every packet is forwarded once its next hop resolves"
    );
    for f in &ip {
        let p = v4(f);
        assert_eq!(p.ttl, 63);
        assert!(p.ip_ok && p.l4_ok);
        assert_eq!(p.src_mac, [0, 0, 0xc0, 0xca, 0x68, 0xef]);
        let o = p.dst.octets();
        assert_eq!(
            p.dst_mac,
            [2, 0xfb, o[0], o[1], o[2], o[3]],
            "the MAC the ARP reply gave"
        );
    }
    assert!(!arp.is_empty());
    for f in &arp {
        assert_eq!(&f[0..6], &[0xff; 6]);
        assert_eq!(&f[20..22], &[0, 1], "who-has");
        assert_eq!(&f[28..32], &[1, 0, 0, 1], "tell 1.0.0.1");
    }
    let errors: Vec<V4> = packets(&d.join("router.eth0.pcap"))
        .iter()
        .filter(|f| {
            f[12..14] == ethertype::IPV4.to_be_bytes()
                && f[23] == IpProtocol::ICMP
                && f[34] == wire::icmpv4::msg_type::TIME_EXCEEDED
        })
        .map(|f| v4(f))
        .collect();
    assert_eq!(errors.len(), 10, "one ICMP time exceeded per TTL-1 packet");
    for e in &errors {
        assert_eq!(e.src, Ipv4Addr::new(18, 26, 4, 24));
        assert!(e.ip_ok && e.l4_ok);
        assert_eq!(
            e.ttl, 199,
            "ICMPError's TTL 200, then the forwarding path's DecIPTTL"
        );
    }
}
