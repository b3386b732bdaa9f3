//! The element registry: every class builds from its documented example, under its own
//! name, once; its documentation lists the drop reasons its model gives and those its
//! `push` gives on a corpus of good, broken and odd frames.

use elements::model::Outcome;
use elements::registry::{class, ElementClass, CLASSES};
use elements::{build, BuildCtx, Context, Element, Names, Verdict};
use packet::{Packet, PacketType, Timestamp};
use std::collections::{BTreeSet, HashSet};
use std::net::Ipv4Addr;
use std::path::Path;
use wire::build::{Arp, Frame, Sum};

#[test]
fn every_class_builds_from_its_example_under_its_name() {
    let mut seen = HashSet::new();
    for c in CLASSES {
        assert!(seen.insert(c.name), "{}: listed twice", c.name);
        let e = c
            .example()
            .unwrap_or_else(|err| panic!("{}({}): {err}", c.name, c.doc.example));
        assert_eq!(e.class_name(), c.name);
        assert!(!c.doc.about.is_empty(), "{}: no description", c.name);
        assert!(class(c.name).is_some());
    }
    assert!(class("NoSuchElement").is_none());
}

/// The class built from its example, and from its example with output 1 unconnected
/// (where that makes it drop what it sent there), when that builds.
fn builds(c: &ElementClass) -> Vec<Box<dyn Element>> {
    let names = Names::new();
    let one = BuildCtx {
        name: c.name,
        ninputs: 1,
        noutputs: 1,
        names: &names,
        base_dir: Path::new("."),
    };
    [c.example(), build(c.name, c.doc.example, &one)]
        .into_iter()
        .flatten()
        .collect()
}

#[test]
fn documented_drop_reasons_cover_the_models() {
    for c in CLASSES {
        for m in builds(c).iter().filter_map(|e| e.model()) {
            for case in &m.cases {
                if let Outcome::Drop(reason) = case.outcome {
                    assert!(
                        c.doc.documents_drop(reason),
                        "{}: its model drops under `{reason}`, which its Doc does not list",
                        c.name
                    );
                }
            }
        }
    }
}

#[test]
fn descriptions_say_what_was_derived() {
    for c in CLASSES {
        let d = c.describe();
        assert!(d.starts_with(c.name), "{d}");
        for k in ["ports", "drops", "model", "fast path"] {
            assert!(d.contains(k), "{}: no `{k}` in\n{d}", c.name);
        }
    }
    let strip = class("Strip").map(|c| c.describe()).unwrap_or_default();
    assert!(
        strip.contains("1/1") && strip.contains("model      yes"),
        "{strip}"
    );
}

/// Frames meant to reach the drop branches of the elements' examples: good TCP, UDP, ICMP
/// and other IPv4, fragments, TTL 1, options, wrong checksums and lengths, truncations at
/// every header boundary, big packets with and without DF, IPv6, ARP, and random bytes.
fn corpus() -> Vec<Vec<u8>> {
    let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let tcp = || Frame::tcp(a, b, 1234, 80).flags(wire::tcp::flags::SYN);
    let udp = || Frame::udp(a, b, 53, 53).payload(b"query");
    let frames = [
        tcp(),
        tcp().payload(&[7; 30]),
        udp(),
        Frame::icmp(a, b, 8, 0).payload(&[1; 8]),
        Frame::icmp(a, b, 3, 1).payload(&[0x45; 28]),
        Frame::icmp(a, b, 13, 0),
        Frame::ip(a, b, 47).payload(&[0; 12]),
        tcp().fragment(false, true, 0),
        udp().fragment(false, false, 64),
        udp().fragment(true, false, 0),
        tcp().ttl(1),
        udp().ttl(0),
        tcp().ip_sum(Sum::Wrong),
        tcp().l4_sum(Sum::Wrong),
        udp().l4_sum(Sum::Wrong),
        Frame::icmp(a, b, 8, 0).l4_sum(Sum::Wrong),
        udp().ip_options(&[7, 7, 4, 0, 0, 0, 0, 0]),
        udp().ip_options(&[7, 7, 9, 0, 0, 0, 0, 0]),
        udp().ip_options(&[68, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        udp().ip_options(&[68, 3, 1, 0]),
        udp().ip_options(&[130, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        udp().total_len(1000),
        udp().total_len(10),
        udp().pad_to(80),
        Frame::udp(a, b, 1, 2).payload(&[0; 1400]),
        Frame::udp(a, b, 1, 2)
            .payload(&[0; 1400])
            .fragment(true, false, 0),
        Frame::udp([0, 0, 0, 0], [255, 255, 255, 255], 68, 67),
        Frame::udp(a, [224, 0, 0, 1], 1, 2),
        Frame::udp(a, [10, 0, 0, 5], 1, 2),
        Frame::tcp([192, 168, 1, 1], [203, 0, 113, 1], 5555, 80),
        Frame::tcp(a, b, 4444, 23),
        tcp().no_ethernet(),
        udp().no_ethernet(),
    ];
    let mut out: Vec<Vec<u8>> = Vec::new();
    for f in &frames {
        let d = f.build();
        for cut in [0, 1, 13, 14, 15, 33, 34, 35, 41, 42, 53, 54] {
            if cut < d.len() {
                out.push(d[..cut].to_vec());
            }
        }
        out.push(d);
    }
    let good = tcp().build();
    for (at, v) in [
        (14, 0x65),
        (14, 0x44),
        (14, 0x4f),
        (14, 0x40),
        (46, 0x10),
        (46, 0xf0),
    ] {
        let mut d = good.clone();
        d[at] = v;
        out.push(d);
    }
    let mut v6 = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd, 0x60];
    v6.extend([0; 39]);
    v6[14 + 24] = 0x20;
    out.push(v6.clone());
    out.push(v6[..40].to_vec());
    let sha = [2, 0, 0, 0, 0, 9];
    out.push(Arp::request(sha, [10, 0, 0, 9], [10, 0, 0, 1]).build());
    out.push(Arp::request(sha, [10, 0, 0, 9], [10, 9, 9, 9]).build());
    out.push(Arp::reply(sha, [10, 0, 0, 9], [2, 0, 0, 0, 0, 1], [10, 0, 0, 1]).build());
    out.push(Arp::reply(sha, [10, 0, 0, 5], [0; 6], [10, 0, 0, 1]).build());
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for len in (0..120).step_by(7) {
        out.push(
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect(),
        );
    }
    out
}

/// The corpus frame `d` with the annotations of variant `k`: none, the network header at 14
/// or 0 (transport after its IHL), or at the end of the data; paint, packet type and
/// destination annotation vary with `k` too.
fn annotated(d: &[u8], k: usize) -> Packet {
    let mut p = Packet::from_bytes(d);
    let len = d.len();
    let ihl = |o: usize| d.get(o).map_or(0, |v| usize::from(v & 0x0f) * 4);
    let nh = match k % 4 {
        0 => None,
        1 => Some(14),
        2 => Some(0),
        _ => Some(len),
    };
    if let Some(o) = nh.filter(|o| *o <= len) {
        p.set_network_header(o);
        p.set_transport_header((o + ihl(o)).min(len));
    }
    p.meta.paint = (k % 5) as u8;
    p.meta.packet_type = match k % 3 {
        0 => PacketType::Host,
        1 => PacketType::Broadcast,
        _ => PacketType::Multicast,
    };
    p.meta.dst_ip = match k % 6 {
        0 | 1 => Ipv4Addr::new(10, 0, 0, 5),
        2 | 3 => Ipv4Addr::UNSPECIFIED,
        _ => Ipv4Addr::new(192, 168, 7, 7),
    };
    p
}

#[test]
fn documented_drop_reasons_cover_what_push_gives() {
    let corpus = corpus();
    let (mut seen, mut missing) = (BTreeSet::new(), BTreeSet::new());
    for c in CLASSES {
        for mut e in builds(c) {
            let inputs = e.port_count().max_in.clamp(1, 2);
            let mut now = 1_000_000_000u64;
            for (i, d) in corpus.iter().enumerate() {
                for k in 0..12 {
                    for port in 0..inputs {
                        // Mostly a millisecond apart, now and then minutes (timeouts).
                        now += if (i + k) % 97 == 0 {
                            600_000_000_000
                        } else {
                            1_000_000
                        };
                        let mut cx = Context::new(Timestamp(now));
                        let v = e.push(port, annotated(d, i + k), &mut cx);
                        let mut reasons: Vec<&'static str> =
                            cx.take_dropped().map(|(_, r)| r).collect();
                        if let Verdict::Drop(_, r) = v {
                            reasons.push(r);
                        }
                        for r in reasons {
                            if !c.doc.documents_drop(r) {
                                missing.insert((c.name, r));
                            }
                            seen.insert(r);
                        }
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "push drops under reasons the Doc does not list: {missing:?}"
    );
    // The corpus does reach the drop branches (not a test that cannot fail).
    assert!(
        seen.len() >= 40,
        "only {} reasons reached: {seen:?}",
        seen.len()
    );
}

#[test]
fn documented_drop_reasons_are_short_distinct_words() {
    for c in CLASSES {
        let mut seen = HashSet::new();
        for r in c.doc.drop_reasons() {
            assert!(
                !r.is_empty()
                    && r.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !r.starts_with('-')
                    && !r.ends_with('-'),
                "{}: drop reason `{r}` is not a kebab-case word",
                c.name
            );
            assert!(seen.insert(r), "{}: `{r}` listed twice", c.name);
        }
    }
}
