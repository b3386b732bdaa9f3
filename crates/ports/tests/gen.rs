//! The synthetic trace generator.

use packet::{FlowKey, Precision};
use ports::gen::{
    generate, parse_mac, parse_mix, parse_ports, parse_prefix, parse_size, GenConfig, GenError,
    Mix, PortSpec, SizeDist,
};
use ports::pcap::{PcapWriter, DLT_EN10MB};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};
use wire::{ethernet, icmpv4, ipv4, tcp, udp};

fn all_protocols() -> GenConfig {
    GenConfig {
        packets: 3000,
        flows: 40,
        mix: Mix {
            tcp: 2,
            udp: 2,
            icmp: 1,
        },
        size: SizeDist::Uniform(64, 1518),
        seed: 7,
        ..GenConfig::default()
    }
}

#[test]
fn same_seed_same_bytes() {
    let cfg = all_protocols();
    let a: Vec<_> = generate(&cfg).collect();
    let b: Vec<_> = generate(&cfg).collect();
    assert_eq!(a.len(), 3000);
    assert_eq!(a, b);
    let other: Vec<_> = generate(&GenConfig { seed: 8, ..cfg }).collect();
    assert_ne!(a, other);
}

/// Checks every header and checksum of a generated frame; returns (protocol, flags).
fn check_frame(cfg: &GenConfig, frame: &[u8]) -> (u8, u8) {
    let eth = ethernet::Frame::new_checked(frame).unwrap();
    assert_eq!(eth.src_addr(), cfg.src_mac);
    assert_eq!(eth.dst_addr(), cfg.dst_mac);
    assert_eq!(eth.ethertype(), ethernet::ethertype::IPV4);
    let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum(), "bad IP checksum");
    assert_eq!(
        usize::from(ip.total_len()),
        frame.len() - 14,
        "IP length covers the frame"
    );
    assert_eq!(ip.ttl(), cfg.ttl);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    assert!(in_prefix(src, cfg.src_prefix), "{src}");
    assert!(in_prefix(dst, cfg.dst_prefix), "{dst}");
    match ip.protocol() {
        ipv4::protocol::TCP => {
            let t = tcp::Packet::new_checked(ip.payload()).unwrap();
            assert!(t.verify_checksum_v4(src, dst), "bad TCP checksum");
            assert!(port_ok(t.src_port(), &cfg.src_ports));
            assert!(port_ok(t.dst_port(), &cfg.dst_ports));
            (6, t.flags())
        }
        ipv4::protocol::UDP => {
            let u = udp::Packet::new_checked(ip.payload()).unwrap();
            assert_ne!(u.checksum(), 0, "UDP checksum is computed");
            assert!(u.verify_checksum_v4(src, dst), "bad UDP checksum");
            assert!(port_ok(u.src_port(), &cfg.src_ports));
            assert!(port_ok(u.dst_port(), &cfg.dst_ports));
            (17, 0)
        }
        ipv4::protocol::ICMP => {
            let i = icmpv4::Packet::new_checked(ip.payload()).unwrap();
            assert!(i.verify_checksum(), "bad ICMP checksum");
            assert_eq!(i.msg_type(), icmpv4::msg_type::ECHO_REQUEST);
            (1, 0)
        }
        p => panic!("unexpected protocol {p}"),
    }
}

fn in_prefix(a: Ipv4Addr, (net, len): (Ipv4Addr, u8)) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(a) & mask == u32::from(net) & mask
}

fn port_ok(p: u16, spec: &PortSpec) -> bool {
    match spec {
        PortSpec::Range(lo, hi) => (*lo..=*hi).contains(&p),
        PortSpec::List(l) => l.contains(&p),
    }
}

#[test]
fn headers_and_checksums_are_valid() {
    let cfg = all_protocols();
    let mut protos = BTreeMap::new();
    let mut sizes = HashSet::new();
    for (i, (ts, frame)) in generate(&cfg).enumerate() {
        assert_eq!(ts, cfg.start.add_nanos(i as u64 * cfg.gap_ns));
        assert!((60..=1514).contains(&frame.len()), "{}", frame.len());
        sizes.insert(frame.len());
        let (p, _) = check_frame(&cfg, &frame);
        *protos.entry(p).or_insert(0u32) += 1;
    }
    assert_eq!(protos.len(), 3, "{protos:?}");
    assert!(
        sizes.contains(&60) || sizes.len() > 500,
        "sizes spread over the range"
    );
}

#[test]
fn fixed_sizes_exclude_the_fcs() {
    for (size, captured) in [(64, 60), (128, 124), (1518, 1514)] {
        let cfg = GenConfig {
            packets: 30,
            mix: Mix {
                tcp: 1,
                udp: 1,
                icmp: 1,
            },
            size: SizeDist::Fixed(size),
            ..GenConfig::default()
        };
        for (_, f) in generate(&cfg) {
            assert_eq!(f.len(), captured);
            check_frame(&cfg, &f);
        }
    }
}

#[test]
fn imix_proportions() {
    let cfg = GenConfig {
        packets: 12_000,
        flows: 100,
        size: SizeDist::Imix,
        ..GenConfig::default()
    };
    let mut counts: BTreeMap<usize, i64> = BTreeMap::new();
    for (_, f) in generate(&cfg) {
        *counts.entry(f.len()).or_default() += 1;
    }
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        vec![60, 572, 1496]
    );
    // Expected 7000 / 4000 / 1000; a tolerance of about 4.5 standard deviations.
    for (len, want, tol) in [(60, 7000, 250), (572, 4000, 240), (1496, 1000, 140)] {
        let got = counts[&len];
        assert!((got - want).abs() <= tol, "{len}: {got} vs {want}");
    }
}

#[test]
fn tcp_flows_open_with_syn_and_close_with_fin() {
    let cfg = GenConfig {
        packets: 2000,
        flows: 60,
        mix: Mix {
            tcp: 1,
            udp: 0,
            icmp: 0,
        },
        size: SizeDist::Uniform(64, 300),
        ..GenConfig::default()
    };
    let mut per_flow: HashMap<FlowKey, Vec<(u8, u32, usize)>> = HashMap::new();
    for (_, f) in generate(&cfg) {
        let key = FlowKey::from_ethernet(&f).unwrap();
        let t = tcp::Packet::new_checked(&f[34..]).unwrap();
        per_flow
            .entry(key)
            .or_default()
            .push((t.flags(), t.seq_number(), t.payload().len()));
    }
    assert_eq!(per_flow.len(), 60);
    let mut single = 0;
    for (key, pkts) in &per_flow {
        assert_eq!(pkts[0].0, tcp::flags::SYN, "{key:?} starts with a SYN");
        if pkts.len() >= 2 {
            assert_eq!(
                pkts.last().unwrap().0,
                tcp::flags::FIN | tcp::flags::ACK,
                "{key:?}"
            );
            for p in &pkts[1..pkts.len() - 1] {
                assert_eq!(p.0, tcp::flags::PSH | tcp::flags::ACK);
            }
        } else {
            single += 1;
        }
        // Sequence numbers advance by the payload (and one for the SYN).
        for w in pkts.windows(2) {
            let syn = u32::from(w[0].0 & tcp::flags::SYN != 0);
            assert_eq!(w[1].1, w[0].1.wrapping_add(w[0].2 as u32 + syn), "{key:?}");
        }
    }
    assert!(single < 60);
}

#[test]
fn flow_count_is_respected() {
    for (packets, flows, want) in [(1000u64, 50u32, 50usize), (5, 10, 5), (300, 1, 1)] {
        let cfg = GenConfig {
            packets,
            flows,
            mix: Mix {
                tcp: 1,
                udp: 1,
                icmp: 1,
            },
            ..GenConfig::default()
        };
        let gen = generate(&cfg);
        assert_eq!(gen.flow_count(), want);
        let frames: Vec<_> = gen.collect();
        assert_eq!(frames.len() as u64, packets);
        let keys: HashSet<FlowKey> = frames
            .iter()
            .map(|(_, f)| FlowKey::from_ethernet(f).unwrap())
            .collect();
        assert_eq!(keys.len(), want, "packets {packets} flows {flows}");
    }
}

#[test]
fn icmp_echo_flows() {
    let cfg = GenConfig {
        packets: 200,
        flows: 4,
        mix: Mix {
            tcp: 0,
            udp: 0,
            icmp: 1,
        },
        src_prefix: (Ipv4Addr::new(192, 168, 7, 9), 32),
        ..GenConfig::default()
    };
    let mut seqs: HashMap<u16, Vec<u16>> = HashMap::new();
    for (_, f) in generate(&cfg) {
        check_frame(&cfg, &f);
        let i = icmpv4::Packet::new_checked(&f[34..]).unwrap();
        assert_eq!(&f[26..30], &[192, 168, 7, 9]);
        seqs.entry(i.ident()).or_default().push(i.seq_no());
        let key = FlowKey::from_ethernet(&f).unwrap();
        assert_eq!(key.src, IpAddr::V4(Ipv4Addr::new(192, 168, 7, 9)));
        assert_eq!((key.src_port, key.dst_port), (i.ident(), i.ident()));
    }
    assert_eq!(seqs.len(), 4);
    for s in seqs.values() {
        let want: Vec<u16> = (1..=s.len() as u16).collect();
        assert_eq!(s, &want);
    }
}

#[test]
fn port_lists_and_prefixes() {
    let cfg = GenConfig {
        packets: 500,
        flows: 100,
        src_prefix: (Ipv4Addr::new(172, 16, 5, 0), 24),
        dst_prefix: (Ipv4Addr::new(8, 8, 8, 8), 32),
        src_ports: PortSpec::Range(5000, 5010),
        dst_ports: PortSpec::List(vec![53]),
        ttl: 3,
        mix: Mix {
            tcp: 0,
            udp: 1,
            icmp: 0,
        },
        ..GenConfig::default()
    };
    for (_, f) in generate(&cfg) {
        check_frame(&cfg, &f);
        // Network and broadcast addresses of the /24 are avoided.
        assert!(f[29] != 0 && f[29] != 255, "{}", f[29]);
    }
}

#[test]
fn parse_helpers() {
    assert_eq!(parse_size("64"), Ok(SizeDist::Fixed(64)));
    assert_eq!(
        parse_size("uniform:64-1500"),
        Ok(SizeDist::Uniform(64, 1500))
    );
    assert_eq!(parse_size("IMIX"), Ok(SizeDist::Imix));
    assert_eq!(parse_size("60"), Err(GenError::FrameSize(60)));
    assert_eq!(
        parse_size("60").unwrap_err().to_string(),
        "expected a frame size in 64..=9018, found 60"
    );
    assert!(parse_size("uniform:1500-64").is_err());
    assert!(parse_size("uniform:64").is_err());
    assert_eq!(
        parse_size("big").unwrap_err().to_string(),
        "expected a frame size in bytes, found `big`"
    );

    assert_eq!(
        parse_mix("tcp=1,udp=1,icmp=0"),
        Ok(Mix {
            tcp: 1,
            udp: 1,
            icmp: 0
        })
    );
    assert_eq!(
        parse_mix("icmp=3"),
        Ok(Mix {
            tcp: 0,
            udp: 0,
            icmp: 3
        })
    );
    assert_eq!(
        parse_mix("tcp=0").unwrap_err().to_string(),
        "expected a protocol mix with a non-zero weight, found `tcp=0`"
    );
    assert!(matches!(
        parse_mix("sctp=1"),
        Err(GenError::Syntax { found, .. }) if found == "sctp"
    ));
    assert!(parse_mix("tcp").is_err());
    assert!(parse_mix("tcp=x").is_err());

    assert_eq!(
        parse_prefix("10.0.0.0/16"),
        Ok((Ipv4Addr::new(10, 0, 0, 0), 16))
    );
    assert_eq!(
        parse_prefix("10.0.0.1"),
        Ok((Ipv4Addr::new(10, 0, 0, 1), 32))
    );
    assert_eq!(
        parse_prefix("10.0.0/8").unwrap_err().to_string(),
        "expected IP prefix, found `10.0.0/8`"
    );
    assert!(parse_prefix("10.0.0.0/33").is_err());

    assert_eq!(parse_ports("1024-65535"), Ok(PortSpec::Range(1024, 65535)));
    assert_eq!(
        parse_ports("80,443,1234"),
        Ok(PortSpec::List(vec![80, 443, 1234]))
    );
    assert_eq!(parse_ports("80"), Ok(PortSpec::List(vec![80])));
    assert!(parse_ports("9-1").is_err());
    assert!(parse_ports("70000").is_err());

    assert_eq!(
        parse_mac("02:00:00:00:00:0a").unwrap().0,
        [2, 0, 0, 0, 0, 10]
    );
    assert!(parse_mac("02:00").is_err());
}

#[test]
fn validate_reports_bad_settings() {
    assert!(GenConfig::default().validate().is_ok());
    let bad = [
        GenConfig {
            flows: 0,
            ..GenConfig::default()
        },
        GenConfig {
            mix: Mix {
                tcp: 0,
                udp: 0,
                icmp: 0,
            },
            ..GenConfig::default()
        },
        GenConfig {
            size: SizeDist::Fixed(20),
            ..GenConfig::default()
        },
        GenConfig {
            src_prefix: (Ipv4Addr::UNSPECIFIED, 40),
            ..GenConfig::default()
        },
        GenConfig {
            dst_ports: PortSpec::List(vec![]),
            ..GenConfig::default()
        },
    ];
    let expected = [
        "expected at least 1 flow, found 0",
        "expected a protocol mix with a non-zero weight",
        "expected a frame size in 64..=9018, found 20",
        "expected a source prefix length of at most 32, found 40",
        "expected at least one destination port",
    ];
    for (cfg, want) in bad.into_iter().zip(expected) {
        assert_eq!(cfg.validate().map_err(|e| e.to_string()), Err(want.into()));
        // generate() still never panics on them.
        let n = generate(&GenConfig { packets: 20, ..cfg }).count();
        assert_eq!(n, 20);
    }
}

/// tcpdump agrees that every checksum is right.
#[test]
fn tcpdump_finds_no_bad_checksum() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if std::process::Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(!ci, "tcpdump is required under CI=true");
        eprintln!("skipping: tcpdump not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("gen.pcap");
    let cfg = GenConfig {
        packets: 400,
        ..all_protocols()
    };
    let mut w = PcapWriter::create(&p, Precision::Micro, DLT_EN10MB).unwrap();
    for (ts, f) in generate(&cfg) {
        w.write(ts, &f).unwrap();
    }
    w.finish().unwrap();
    let out = std::process::Command::new("tcpdump")
        .args(["-nn", "-vv", "-r"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("incorrect"), "tcpdump found a bad checksum");
    assert!(!text.contains("bad cksum"), "tcpdump found a bad checksum");
    // tcpdump -vv reports "incorrect" TCP sums, "bad udp cksum", "bad cksum" IP sums and
    // "wrong icmp cksum"; it confirms right TCP sums with "(correct)" and UDP ones with
    // "[udp sum ok]".
    assert!(!text.contains("wrong"), "tcpdump found a bad ICMP checksum");
    assert!(
        !text.contains("bad udp"),
        "tcpdump found a bad UDP checksum"
    );
    let transport = generate(&cfg)
        .filter(|(_, f)| f[23] == ipv4::protocol::TCP || f[23] == ipv4::protocol::UDP)
        .count();
    assert!(transport > 100);
    let confirmed = text.matches("(correct)").count() + text.matches("[udp sum ok]").count();
    assert_eq!(confirmed, transport);
    assert_eq!(text.matches(" IP (tos").count(), 400);
    assert!(text.contains("Flags [S]") && text.contains("Flags [F.]"));
    assert!(text.contains("ICMP echo request"));
}

/// The reply of a generated frame: addresses and ports swapped (checksums are not needed
/// for flow keys).
fn reply(frame: &[u8]) -> Vec<u8> {
    let mut r = frame.to_vec();
    r[0..6].copy_from_slice(&frame[6..12]);
    r[6..12].copy_from_slice(&frame[0..6]);
    r[26..30].copy_from_slice(&frame[30..34]);
    r[30..34].copy_from_slice(&frame[26..30]);
    if frame[23] != ipv4::protocol::ICMP {
        r[34..36].copy_from_slice(&frame[36..38]);
        r[36..38].copy_from_slice(&frame[34..36]);
    }
    r
}

#[test]
fn symmetric_rss_on_generated_flows() {
    let cfg = GenConfig {
        packets: 4000,
        flows: 400,
        mix: Mix {
            tcp: 2,
            udp: 2,
            icmp: 1,
        },
        ..GenConfig::default()
    };
    let mut queues = [0u32; 4];
    let mut keys = HashSet::new();
    for (_, f) in generate(&cfg) {
        let k = FlowKey::from_ethernet(&f).unwrap();
        let r = FlowKey::from_ethernet(&reply(&f)).unwrap();
        assert_eq!(r, k.reversed());
        let h = packet::symmetric_rss(&k);
        assert_eq!(h, packet::symmetric_rss(&r), "{k:?}");
        if keys.insert(k) {
            queues[(h % 4) as usize] += 1;
        }
    }
    assert_eq!(keys.len(), 400);
    // Flows spread over the queues (each gets at least 15% of them).
    assert!(queues.iter().all(|&q| q >= 60), "{queues:?}");
}
