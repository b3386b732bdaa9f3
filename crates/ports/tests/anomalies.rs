//! Trace anomalies: TTL ranges, bad IP checksums, IP options, ARP frames, truncated
//! lengths and short transport parts appear at the requested rates, are what a header parser sees, and leave plain
//! traces byte for byte as they were.

use packet::Precision;
use ports::gen::{
    generate, parse_rate, parse_ttl, Anomalies, GenConfig, GenError, Mix, Rate, SizeDist, TtlSpec,
};
use ports::pcap::{PcapWriter, DLT_EN10MB};
use wire::{arp, ethernet, icmpv4, ipv4, tcp, udp};

/// FNV-1a over timestamps and frames: pins the bytes of a trace.
fn digest(cfg: &GenConfig) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (ts, f) in generate(cfg) {
        for b in
            ts.0.to_le_bytes()
                .iter()
                .chain(&(f.len() as u32).to_le_bytes())
                .chain(&f)
        {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn mixed(packets: u64, seed: u64) -> GenConfig {
    GenConfig {
        packets,
        flows: 60,
        mix: Mix {
            tcp: 2,
            udp: 2,
            icmp: 1,
        },
        size: SizeDist::Uniform(64, 600),
        seed,
        ..GenConfig::default()
    }
}

/// Plain traces are the ones the generator made before anomalies existed (digests taken
/// from the generator at that commit; `fusebox gen` output is compared by other tests).
#[test]
fn plain_traces_are_unchanged() {
    assert_eq!(Anomalies::default(), GenConfig::default().anomalies);
    assert!(GenConfig::default().anomalies.is_none());
    assert_eq!(digest(&GenConfig::default()), 0x5786_0ff6_2de5_adeb);
    assert_eq!(digest(&mixed(3000, 9)), 0xf1b3_c57a_115f_4004);
    let imix = GenConfig {
        size: SizeDist::Imix,
        ttl: 7,
        ..GenConfig::default()
    };
    assert_eq!(digest(&imix), 0xb7b3_8859_a2d1_89cf);
}

/// What a tcpdump-like reading of one frame found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Seen {
    arp: bool,
    ip: bool,
    ttl: u8,
    bad_checksum: bool,
    options: bool,
    /// The IP total length claims more than the frame holds.
    cut: bool,
    /// The IP packet ends before the frame.
    trailer: bool,
    /// A TCP or UDP packet whose transport part (per the IP total length) is shorter than
    /// its header or than its UDP length says: the generator never makes one but by an
    /// anomaly.
    short: bool,
    /// Transport bytes per the IP total length.
    l4: usize,
    /// The frame is 60 bytes, all zeros after the IP packet.
    padded: bool,
}

/// Checks an options field option by option (RFC 791 layout), as tcpdump prints it.
fn check_options(opts: &[u8]) {
    assert!(!opts.is_empty() && opts.len().is_multiple_of(4) && opts.len() <= 40);
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => {
                // End of list: only End bytes may follow.
                assert!(opts[i..].iter().all(|&b| b == 0), "{opts:?}");
                return;
            }
            1 => i += 1,
            t => {
                let len = usize::from(opts[i + 1]);
                assert!(len >= 2 && i + len <= opts.len(), "{opts:?}");
                match t {
                    7 => {
                        assert_eq!((len - 3) % 4, 0, "record route slots");
                        assert_eq!(opts[i + 2], 4, "record route pointer");
                    }
                    68 => {
                        assert_eq!((len - 4) % 4, 0, "timestamp slots");
                        assert_eq!(opts[i + 2], 5, "timestamp pointer");
                        assert_eq!(opts[i + 3], 0, "timestamps only");
                    }
                    148 => assert_eq!(&opts[i..i + 4], &[148, 4, 0, 0]),
                    _ => panic!("unexpected option {t} in {opts:?}"),
                }
                i += len;
            }
        }
    }
}

fn read(frame: &[u8]) -> Seen {
    let layers = wire::parse::layers(frame);
    let eth = ethernet::Frame::new_checked(frame).expect("an Ethernet header");
    let mut s = Seen::default();
    match eth.ethertype() {
        ethernet::ethertype::ARP => {
            let a = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).unwrap()).unwrap();
            assert_eq!(a.operation, arp::operation::REQUEST);
            assert_eq!(eth.dst_addr(), ethernet::Address([0xff; 6]));
            assert!(layers.is_ok());
            s.arp = true;
        }
        ethernet::ethertype::IPV4 => {
            s.ip = true;
            let raw = ipv4::Packet::new_unchecked(eth.payload());
            s.ttl = raw.ttl();
            let avail = eth.payload().len();
            s.cut = usize::from(raw.total_len()) > avail;
            s.trailer = usize::from(raw.total_len()) < avail;
            s.l4 = usize::from(raw.total_len()).saturating_sub(raw.header_len());
            s.short = match raw.next_header() {
                ipv4::protocol::TCP => s.l4 < tcp::HEADER_LEN,
                // Header-only datagrams occur (options take the payload): their UDP length
                // says 8.
                ipv4::protocol::UDP => {
                    let at = ethernet::HEADER_LEN + raw.header_len() + 4;
                    let ulen = frame
                        .get(at..at + 2)
                        .map(|b| u16::from_be_bytes([b[0], b[1]]));
                    s.l4 < udp::HEADER_LEN || (s.l4 == udp::HEADER_LEN && ulen != Some(8))
                }
                _ => false,
            };
            let end = ethernet::HEADER_LEN + usize::from(raw.total_len());
            s.padded = frame.len() == 60
                && s.trailer
                && frame.get(end..).is_some_and(|t| t.iter().all(|&b| b == 0));
            // A cut frame still has its whole IP header; only the length check fails.
            assert!(raw.header_len() <= avail);
            s.bad_checksum = !raw.verify_checksum();
            s.options = raw.header_len() > ipv4::HEADER_LEN;
            if s.options {
                check_options(raw.options());
            }
            match ipv4::Packet::new_checked(eth.payload()) {
                Ok(ip) => {
                    assert!(!s.cut);
                    if !s.short {
                        assert!(layers.is_ok());
                    }
                    if !s.trailer && !s.short {
                        // Whole packets keep right transport checksums, options or not.
                        let (src, dst) = (ip.src_addr(), ip.dst_addr());
                        match ip.protocol() {
                            ipv4::protocol::TCP => assert!(tcp::Packet::new_checked(ip.payload())
                                .unwrap()
                                .verify_checksum_v4(src, dst)),
                            ipv4::protocol::UDP => assert!(udp::Packet::new_checked(ip.payload())
                                .unwrap()
                                .verify_checksum_v4(src, dst)),
                            _ => assert!(icmpv4::Packet::new_checked(ip.payload())
                                .unwrap()
                                .verify_checksum()),
                        }
                    }
                }
                Err(_) => {
                    assert!(s.cut, "only cut frames fail the length check");
                    assert!(layers.is_err());
                }
            }
        }
        t => panic!("unexpected ethertype {t:#x}"),
    }
    s
}

fn read_all(cfg: &GenConfig) -> Vec<Seen> {
    generate(cfg).map(|(_, f)| read(&f)).collect()
}

/// `n` successes out of `trials` are within five standard deviations of `rate`.
fn about(n: usize, trials: usize, rate: f64, what: &str) {
    let mean = trials as f64 * rate;
    let sd = (trials as f64 * rate * (1.0 - rate)).sqrt();
    assert!(
        (n as f64 - mean).abs() <= 5.0 * sd + 1.0,
        "{what}: {n} of {trials}, expected about {mean:.0}"
    );
}

#[test]
fn each_anomaly_at_its_rate() {
    let n = 20_000;
    let base = mixed(n, 3);
    let with = |a: Anomalies| GenConfig {
        anomalies: a,
        ..base.clone()
    };
    let plain = read_all(&base);
    assert!(plain.iter().all(|s| s.ip
        && !s.bad_checksum
        && !s.options
        && !s.cut
        && !s.trailer
        && s.ttl == 64));

    let seen = read_all(&with(Anomalies {
        bad_ip_checksum: Rate::from_probability(0.01),
        ..Anomalies::default()
    }));
    let bad = seen.iter().filter(|s| s.bad_checksum).count();
    about(bad, n as usize, 0.01, "bad checksums");
    assert!(seen
        .iter()
        .all(|s| !s.options && !s.cut && !s.trailer && !s.arp));

    let seen = read_all(&with(Anomalies {
        ip_options: Rate::from_probability(0.02),
        ..Anomalies::default()
    }));
    about(
        seen.iter().filter(|s| s.options).count(),
        n as usize,
        0.02,
        "IP options",
    );
    assert!(
        seen.iter().all(|s| !s.bad_checksum),
        "options keep a valid checksum"
    );

    let seen = read_all(&with(Anomalies {
        arp: Rate::from_probability(0.05),
        ..Anomalies::default()
    }));
    assert_eq!(seen.len(), n as usize, "ARP frames take packet slots");
    about(
        seen.iter().filter(|s| s.arp).count(),
        n as usize,
        0.05,
        "ARP",
    );

    let seen = read_all(&with(Anomalies {
        truncated: Rate::from_probability(0.04),
        ..Anomalies::default()
    }));
    let cut = seen.iter().filter(|s| s.cut).count();
    let trailer = seen.iter().filter(|s| s.trailer).count();
    about(cut + trailer, n as usize, 0.04, "truncated");
    about(cut, n as usize, 0.02, "cut frames");
    assert!(seen.iter().all(|s| !s.bad_checksum));

    let seen = read_all(&with(Anomalies {
        short_transport: Rate::from_probability(0.04),
        ..Anomalies::default()
    }));
    // Only TCP and UDP packets are cut (4 of the 5 parts of the mix).
    let short: Vec<&Seen> = seen.iter().filter(|s| s.short).collect();
    about(short.len(), n as usize, 0.04 * 0.8, "short transport parts");
    about(
        short.iter().filter(|s| s.padded).count(),
        n as usize,
        0.02 * 0.8,
        "padded",
    );
    assert!(short
        .iter()
        .all(|s| (7..=19).contains(&s.l4) && (s.padded || !s.trailer)));
    assert!(seen
        .iter()
        .all(|s| !s.bad_checksum && !s.cut && (s.short || !s.trailer) && !s.options));

    let seen = read_all(&with(Anomalies {
        ttl_range: Some((1, 12)),
        ..Anomalies::default()
    }));
    assert!(seen.iter().all(|s| (1..=12).contains(&s.ttl)));
    for t in 1..=12 {
        about(
            seen.iter().filter(|s| s.ttl == t).count(),
            n as usize,
            1.0 / 12.0,
            &format!("TTL {t}"),
        );
    }
    assert!(seen.iter().all(|s| !s.bad_checksum));
}

#[test]
fn anomalies_combine_and_are_counted() {
    let cfg = GenConfig {
        anomalies: Anomalies {
            ttl_range: Some((1, 3)),
            bad_ip_checksum: Rate::from_probability(0.3),
            ip_options: Rate::from_probability(0.3),
            arp: Rate::from_probability(0.1),
            truncated: Rate::from_probability(0.2),
            short_transport: Rate::NEVER,
        },
        ..mixed(5000, 11)
    };
    let a: Vec<_> = generate(&cfg).collect();
    assert_eq!(
        a,
        generate(&cfg).collect::<Vec<_>>(),
        "same seed, same bytes"
    );
    let mut gen = generate(&cfg);
    let seen: Vec<Seen> = gen.by_ref().map(|(_, f)| read(&f)).collect();
    let c = gen.anomaly_counts();
    let count = |f: fn(&Seen) -> bool| seen.iter().filter(|s| f(s)).count() as u64;
    assert_eq!(c.arp, count(|s| s.arp));
    assert_eq!(c.ip_options, count(|s| s.options));
    assert_eq!(c.bad_ip_checksum, count(|s| s.bad_checksum));
    assert_eq!(c.cut_frames, count(|s| s.cut));
    assert_eq!(c.short_ip_length, count(|s| s.trailer));
    assert_eq!(c.ttl_at_most_1, count(|s| s.ip && s.ttl <= 1));
    // Independent choices meet: options with a bad checksum, cut frames with options.
    assert!(count(|s| s.options && s.bad_checksum) > 100);
    assert!(count(|s| s.options && s.cut) > 50);
    assert!(count(|s| s.options && s.trailer) > 50);
}

/// Short transport parts with the other anomalies but the length faults: counted exactly,
/// options and bad checksums on short packets too, each packet cut to 7 to 19 TCP bytes
/// or 7 to 8 UDP bytes.
#[test]
fn short_transport_parts_combine_and_are_counted() {
    let cfg = GenConfig {
        anomalies: Anomalies {
            ttl_range: Some((1, 3)),
            bad_ip_checksum: Rate::from_probability(0.3),
            ip_options: Rate::from_probability(0.3),
            arp: Rate::from_probability(0.1),
            short_transport: Rate::from_probability(0.3),
            ..Anomalies::default()
        },
        ..mixed(5000, 12)
    };
    let mut gen = generate(&cfg);
    let frames: Vec<Vec<u8>> = gen.by_ref().map(|(_, f)| f).collect();
    let c = gen.anomaly_counts();
    let seen: Vec<Seen> = frames.iter().map(|f| read(f)).collect();
    let count = |f: fn(&Seen) -> bool| seen.iter().filter(|s| f(s)).count() as u64;
    assert_eq!(c.short_transport, count(|s| s.short));
    assert_eq!(c.ip_options, count(|s| s.options));
    assert_eq!(c.bad_ip_checksum, count(|s| s.bad_checksum));
    assert_eq!(c.cut_frames + c.short_ip_length, 0);
    assert!(count(|s| s.short && s.options) > 50);
    assert!(count(|s| s.short && s.bad_checksum) > 50);
    assert!(count(|s| s.short && s.padded) > 100);
    assert!(count(|s| s.short && !s.trailer) > 100);
    for (f, s) in frames.iter().zip(&seen).filter(|(_, s)| s.short) {
        let proto = f[ethernet::HEADER_LEN + 9];
        let range = if proto == ipv4::protocol::TCP {
            7..=19
        } else {
            7..=8
        };
        assert!(range.contains(&s.l4), "{} bytes of protocol {proto}", s.l4);
        assert!(!s.cut && (s.padded || !s.trailer));
    }
    // Every length of the range occurs.
    for n in 7..=19 {
        assert!(seen.iter().any(|s| s.short && s.l4 == n), "{n} bytes");
    }
}

/// Turning an anomaly on changes only the packets it touches.
#[test]
fn other_packets_stay_as_they_were() {
    let base = mixed(3000, 5);
    let plain: Vec<_> = generate(&base).collect();
    let bad: Vec<_> = generate(&GenConfig {
        anomalies: Anomalies {
            bad_ip_checksum: Rate::from_probability(0.1),
            ttl_range: Some((64, 64)),
            ..Anomalies::default()
        },
        ..base.clone()
    })
    .collect();
    assert_eq!(plain.len(), bad.len());
    let mut differ = 0;
    for ((t1, a), (t2, b)) in plain.iter().zip(&bad) {
        assert_eq!(t1, t2);
        assert_eq!(a.len(), b.len());
        // Only the checksum bytes (24, 25 of the frame) may differ.
        let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        assert!(diff.iter().all(|&i| i == 24 || i == 25), "{diff:?}");
        differ += usize::from(!diff.is_empty());
    }
    about(differ, 3000, 0.1, "bad checksums");
    // With ARP frames, the flow packets keep their order, shifted by the ARP frames.
    let arp: Vec<_> = generate(&GenConfig {
        anomalies: Anomalies {
            arp: Rate::from_probability(0.1),
            ..Anomalies::default()
        },
        ..base
    })
    .collect();
    let ip: Vec<&Vec<u8>> = arp
        .iter()
        .map(|(_, f)| f)
        .filter(|f| f[12..14] == [0x08, 0x00])
        .collect();
    assert!(ip.len() < 3000);
    for (a, b) in plain.iter().map(|(_, f)| f).zip(ip) {
        assert_eq!(a, b);
    }
}

#[test]
fn options_fit_small_and_large_frames() {
    for size in [SizeDist::Fixed(64), SizeDist::Fixed(1518), SizeDist::Imix] {
        let cfg = GenConfig {
            size,
            anomalies: Anomalies {
                ip_options: Rate::ALWAYS,
                ..Anomalies::default()
            },
            ..mixed(2000, 2)
        };
        let mut kinds = [0usize; 4];
        for (_, f) in generate(&cfg) {
            let s = read(&f);
            assert!(s.options && !s.bad_checksum && !s.cut && !s.trailer);
            let first = f[34];
            let k = match first {
                1 => 0,
                7 => 1,
                68 => 2,
                148 => 3,
                _ => panic!("{first}"),
            };
            kinds[k] += 1;
            // The frame is the drawn size, or larger by what the payload could not give.
            let ihl = usize::from(f[14] & 0x0f) * 4;
            if let SizeDist::Fixed(n) = size {
                let nominal = (n - 4) as usize;
                assert!(f.len() >= nominal && f.len() <= nominal + ihl - 20);
            }
        }
        assert!(kinds.iter().all(|&k| k > 300), "{kinds:?}");
    }
}

#[test]
fn parse_ttl_and_rates() {
    assert_eq!(parse_ttl("64"), Ok(TtlSpec::Fixed(64)));
    assert_eq!(parse_ttl(" 1-12 "), Ok(TtlSpec::Range(1, 12)));
    assert_eq!(
        parse_ttl("12-1").unwrap_err().to_string(),
        "expected a TTL range LOW-HIGH, found `12-1`"
    );
    assert!(parse_ttl("300").is_err());
    assert!(parse_ttl("a-b").is_err());
    assert_eq!(parse_rate("0.01"), Ok(Rate(10_000)));
    assert_eq!(parse_rate("2%"), Ok(Rate(20_000)));
    assert_eq!(parse_rate("0"), Ok(Rate::NEVER));
    assert_eq!(parse_rate("1"), Ok(Rate::ALWAYS));
    for bad in ["1.5", "-0.1", "x", "NaN", "inf", "", "%"] {
        assert!(parse_rate(bad).is_err(), "{bad}");
    }
    assert_eq!(Rate::from_probability(f64::NAN), Rate::NEVER);
    assert!((Rate(250_000).probability() - 0.25).abs() < 1e-12);
    let bad = GenConfig {
        anomalies: Anomalies {
            ttl_range: Some((9, 3)),
            ..Anomalies::default()
        },
        ..GenConfig::default()
    };
    assert_eq!(
        bad.validate(),
        Err(GenError::ReversedRange {
            what: "TTL",
            lo: 9,
            hi: 3
        })
    );
    assert_eq!(
        bad.validate().unwrap_err().to_string(),
        "expected a TTL range low-high, found 9-3"
    );
    let bad = GenConfig {
        anomalies: Anomalies {
            arp: Rate(2_000_000),
            ..Anomalies::default()
        },
        ..GenConfig::default()
    };
    assert_eq!(
        bad.validate(),
        Err(GenError::RateAbove {
            what: "ARP",
            rate: Rate(2_000_000)
        })
    );
    assert_eq!(
        bad.validate().unwrap_err().to_string(),
        "expected a ARP probability between 0 and 1, found 2"
    );
}

/// tcpdump reads the anomalies as asked: bad checksums, options, ARP, truncated IP.
#[test]
fn tcpdump_sees_the_anomalies() {
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
    let cfg = GenConfig {
        anomalies: Anomalies {
            ttl_range: Some((1, 12)),
            bad_ip_checksum: Rate::from_probability(0.05),
            ip_options: Rate::from_probability(0.1),
            arp: Rate::from_probability(0.05),
            truncated: Rate::from_probability(0.05),
            short_transport: Rate::from_probability(0.05),
        },
        ..mixed(2000, 4)
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("anomalies.pcap");
    let mut w = PcapWriter::create(&p, Precision::Micro, DLT_EN10MB).unwrap();
    let mut gen = generate(&cfg);
    for (ts, f) in gen.by_ref() {
        w.write(ts, &f).unwrap();
    }
    w.finish().unwrap();
    let c = gen.anomaly_counts();
    let out = std::process::Command::new("tcpdump")
        .args(["-nn", "-v", "-r"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines = |pat: &str| text.lines().filter(|l| l.contains(pat)).count() as u64;
    assert_eq!(lines("ARP, Ethernet"), c.arp);
    assert_eq!(lines("Request who-has"), c.arp);
    assert_eq!(lines("bad cksum"), c.bad_ip_checksum);
    assert_eq!(lines(", options ("), c.ip_options);
    assert_eq!(lines("truncated-ip"), c.cut_frames);
    assert!(c.arp > 0 && c.bad_ip_checksum > 0 && c.ip_options > 0 && c.cut_frames > 0);
    assert!(text.contains("RR 0.0.0.0"));
    assert!(text.contains("TSONLY"));
    assert!(text.contains("(RA)"));
    assert!(text.contains("NOP,"));
}
