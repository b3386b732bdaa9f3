//! ARPResponder and ARPQuerier behaviour: replies, hold/release, queries, timeouts, capacity.

use elements::net::Names;
use elements::{build, BuildCtx, Context, Element, Verdict};
use packet::{Packet, Timestamp};
use std::path::Path;
use wire::arp::operation::{REPLY, REQUEST};
use wire::build::{Arp, Frame};
use wire::IpProtocol;

fn mk(class: &str, config: &str, noutputs: usize) -> Box<dyn Element> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/a",
        ninputs: 2,
        noutputs,
        names: &names,
        base_dir: Path::new("."),
    };
    match build(class, config, &bcx) {
        Ok(e) => e,
        Err(e) => panic!("{config}: {e}"),
    }
}

fn mk_err(class: &str, config: &str) -> String {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/a",
        ninputs: 2,
        noutputs: 2,
        names: &names,
        base_dir: Path::new("."),
    };
    build(class, config, &bcx)
        .err()
        .map(|e| e.message)
        .unwrap_or_default()
}

/// An ARP request for `tpa` from `sha`/`spa` with operation `op`, sent from `eth_src` to
/// the broadcast address, with `pad` bytes of padding.
fn arp(op: u16, eth_src: [u8; 6], sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4], pad: usize) -> Packet {
    Packet::from_bytes(
        &Arp::request(sha, spa, tpa)
            .operation(op)
            .macs(eth_src, [0xff; 6])
            .pad_to(wire::arp::FRAME_LEN + pad)
            .build(),
    )
}

/// A 28-byte IPv4 packet (no Ethernet header, no checksums) with next-hop annotation `hop`.
fn ip(hop: [u8; 4], tag: u8) -> Packet {
    let d = Frame::ip([10, 0, 0, 1], [10, 0, 0, 99], IpProtocol::UDP)
        .payload(&[0, 0, 0, 0, 0, 0, 0, tag])
        .no_sums()
        .no_ethernet()
        .build();
    let mut p = Packet::from_bytes(&d);
    p.set_network_header(0);
    p.meta.dst_ip = hop.into();
    p
}

struct Run {
    out: Vec<(usize, Vec<u8>)>,
    drops: Vec<&'static str>,
}

fn push(e: &mut dyn Element, port: usize, p: Packet, secs: f64) -> Run {
    let mut cx = Context::new(Timestamp((secs * 1e9) as u64));
    let v = e.push(port, p, &mut cx);
    let mut out: Vec<(usize, Vec<u8>)> = cx
        .take_emitted()
        .map(|(o, p)| (o, p.data().to_vec()))
        .collect();
    let mut drops: Vec<&'static str> = cx.take_dropped().map(|(_, r)| r).collect();
    match v {
        Verdict::Out(o, p) => out.push((o, p.data().to_vec())),
        Verdict::Drop(_, r) => drops.push(r),
        Verdict::Done => {}
    }
    Run { out, drops }
}

const ME: [u8; 6] = [0, 0, 0, 0, 0, 0x0a];
const PEER: [u8; 6] = [0, 0, 0, 0, 0, 0x0b];

#[test]
fn responder_answers_requests_for_its_prefixes() {
    let mut r = mk(
        "ARPResponder",
        "10.0.0.1 00:00:00:00:00:0a, 192.168.0.0/16 00:00:00:00:00:0c",
        2,
    );
    let run = push(
        r.as_mut(),
        0,
        arp(REQUEST, PEER, PEER, [10, 0, 0, 2], [10, 0, 0, 1], 18),
        1.0,
    );
    assert_eq!(run.drops, vec!["arp-answered"]);
    assert_eq!(run.out.len(), 1);
    let (o, f) = &run.out[0];
    assert_eq!(*o, 0);
    assert_eq!(f.len(), 42);
    assert_eq!(&f[0..6], &PEER);
    assert_eq!(&f[6..12], &ME);
    assert_eq!(&f[20..22], &[0, 2]);
    assert_eq!(&f[22..28], &ME);
    assert_eq!(&f[28..32], &[10, 0, 0, 1]);
    assert_eq!(&f[32..38], &PEER);
    assert_eq!(&f[38..42], &[10, 0, 0, 2]);
    assert_eq!(
        f,
        &Arp::reply(ME, [10, 0, 0, 1], PEER, [10, 0, 0, 2]).build()
    );
    let run = push(
        r.as_mut(),
        0,
        arp(REQUEST, PEER, PEER, [10, 0, 0, 2], [192, 168, 7, 7], 0),
        1.0,
    );
    assert_eq!(&run.out[0].1[22..28], &[0, 0, 0, 0, 0, 0x0c]);
    // Not ours, a reply, and a non-ARP frame go to output 1.
    for p in [
        arp(REQUEST, PEER, PEER, [10, 0, 0, 2], [10, 0, 0, 9], 0),
        arp(REPLY, PEER, PEER, [10, 0, 0, 2], [10, 0, 0, 1], 0),
        Packet::from_bytes(&[0u8; 60]),
    ] {
        let run = push(r.as_mut(), 0, p, 1.0);
        assert_eq!(run.out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![1]);
    }
    let mut one = mk("ARPResponder", "10.0.0.1 00:00:00:00:00:0a", 1);
    let run = push(one.as_mut(), 0, Packet::from_bytes(&[0u8; 10]), 1.0);
    assert_eq!(run.drops, vec!["not-arp-request"]);
    // Issue 16: a request for an address it does not own has its own reason.
    let req = arp(REQUEST, PEER, PEER, [10, 0, 0, 2], [10, 0, 0, 9], 0);
    let run = push(one.as_mut(), 0, req, 1.0);
    assert_eq!(run.drops, vec!["not-our-address"]);
    let reply = arp(REPLY, PEER, PEER, [10, 0, 0, 2], [10, 0, 0, 1], 0);
    let run = push(one.as_mut(), 0, reply, 1.0);
    assert_eq!(run.drops, vec!["not-arp-request"]);
}

#[test]
fn responder_config_errors() {
    assert!(mk_err("ARPResponder", "10.0.0.1").contains("missing ETH"));
    assert!(mk_err("ARPResponder", "00:00:00:00:00:01").contains("missing IP"));
    assert!(mk_err(
        "ARPResponder",
        "10.0.0.1 00:00:00:00:00:01 00:00:00:00:00:02"
    )
    .contains("more than one"));
    assert!(mk_err("ARPResponder", "10.0.0 00:00:00:00:00:01").contains("IP/MASK ETH"));
}

#[test]
fn querier_static_broadcast_multicast_and_zero() {
    let mut q = mk(
        "ARPQuerier",
        "10.0.0.1/24, 00:00:00:00:00:0a, STATIC 10.0.0.2 00:00:00:00:00:0b",
        2,
    );
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 2], 1), 1.0);
    assert_eq!(run.out.len(), 1);
    let (o, f) = &run.out[0];
    assert_eq!(*o, 0);
    assert_eq!(f.len(), 42);
    assert_eq!(&f[0..6], &PEER);
    assert_eq!(&f[6..12], &ME);
    assert_eq!(&f[12..14], &[8, 0]);
    assert_eq!(f[14], 0x45);
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 255], 1), 1.0);
    assert_eq!(&run.out[0].1[0..6], &[0xff; 6]);
    let run = push(q.as_mut(), 0, ip([224, 129, 2, 3], 1), 1.0);
    assert_eq!(&run.out[0].1[0..6], &[1, 0, 0x5e, 1, 2, 3]);
    let run = push(q.as_mut(), 0, ip([0, 0, 0, 0], 1), 1.0);
    assert_eq!(run.drops, vec!["arp-zero-address"]);
    assert_eq!(q.held(), 0);
}

#[test]
fn querier_holds_queries_and_releases_in_order() {
    let mut q = mk("ARPQuerier", "10.0.0.1, 00:00:00:00:00:0a", 2);
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 7], 1), 1.0);
    assert_eq!(run.out.len(), 1);
    let (o, f) = &run.out[0];
    assert_eq!(*o, 1, "queries go to output 1 when it is connected");
    assert_eq!(&f[0..6], &[0xff; 6]);
    assert_eq!(&f[6..12], &ME);
    assert_eq!(&f[20..22], &[0, 1]);
    assert_eq!(&f[22..28], &ME);
    assert_eq!(&f[28..32], &[10, 0, 0, 1]);
    assert_eq!(&f[32..38], &[0; 6]);
    assert_eq!(&f[38..42], &[10, 0, 0, 7]);
    assert_eq!(f, &Arp::request(ME, [10, 0, 0, 1], [10, 0, 0, 7]).build());
    // A second packet within 100 ms: held, no new query; after 100 ms: a new query.
    assert!(push(q.as_mut(), 0, ip([10, 0, 0, 7], 2), 1.05)
        .out
        .is_empty());
    assert_eq!(push(q.as_mut(), 0, ip([10, 0, 0, 7], 3), 1.2).out.len(), 1);
    assert_eq!(q.held(), 3);
    // The reply releases the three packets in order, then is consumed.
    let run = push(
        q.as_mut(),
        1,
        arp(REPLY, PEER, PEER, [10, 0, 0, 7], [10, 0, 0, 1], 18),
        1.3,
    );
    assert_eq!(run.drops, vec!["arp-consumed"]);
    let tags: Vec<u8> = run
        .out
        .iter()
        .map(|(o, f)| {
            assert_eq!(*o, 0);
            assert_eq!(&f[0..6], &PEER);
            f[41]
        })
        .collect();
    assert_eq!(tags, vec![1, 2, 3]);
    assert_eq!(q.held(), 0);
    // Now known: sent at once.
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 7], 4), 2.0);
    assert_eq!(run.out.len(), 1);
    assert_eq!(&run.out[0].1[0..6], &PEER);
    // After POLL_TIMEOUT (60 s) a use also sends a unicast poll (on output 1, after the data).
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 7], 5), 62.0);
    assert_eq!(run.out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(&run.out[1].1[0..6], &PEER);
    // A request on input 1 is just consumed.
    let run = push(
        q.as_mut(),
        1,
        arp(REQUEST, PEER, PEER, [10, 0, 0, 9], [10, 0, 0, 1], 0),
        63.0,
    );
    assert_eq!(run.drops, vec!["arp-consumed"]);
    assert!(run.out.is_empty());
}

#[test]
fn querier_single_output_and_timeout() {
    let mut q = mk("ARPQuerier", "10.0.0.1, 00:00:00:00:00:0a, TIMEOUT 10", 1);
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 7], 1), 0.0);
    assert_eq!(run.out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![0]);
    assert_eq!(q.held(), 1);
    // Still alive at 10 s; gone (with its packet) after.
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 8], 2), 10.0);
    assert!(run.drops.is_empty());
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 9], 3), 10.5);
    assert_eq!(run.drops, vec!["arp-timeout"]);
    assert_eq!(q.held(), 2);
}

#[test]
fn querier_capacity_drops_oldest() {
    let mut q = mk("ARPQuerier", "10.0.0.1, 00:00:00:00:00:0a, CAPACITY 2", 2);
    push(q.as_mut(), 0, ip([10, 0, 0, 7], 1), 0.0);
    push(q.as_mut(), 0, ip([10, 0, 0, 8], 2), 0.0);
    let run = push(q.as_mut(), 0, ip([10, 0, 0, 7], 3), 0.01);
    assert_eq!(run.drops, vec!["arp-queue-full"]);
    assert_eq!(q.held(), 2);
    let run = push(
        q.as_mut(),
        1,
        arp(REPLY, PEER, PEER, [10, 0, 0, 7], [10, 0, 0, 1], 0),
        0.02,
    );
    // Packet 1 (oldest) was dropped; 3 is released.
    let tags: Vec<u8> = run.out.iter().map(|(_, f)| f[41]).collect();
    assert_eq!(tags, vec![3]);

    let mut e = mk(
        "ARPQuerier",
        "10.0.0.1, 00:00:00:00:00:0a, ENTRY_PACKET_CAPACITY 1",
        2,
    );
    push(e.as_mut(), 0, ip([10, 0, 0, 7], 1), 0.0);
    let run = push(e.as_mut(), 0, ip([10, 0, 0, 7], 2), 0.01);
    assert_eq!(run.drops, vec!["arp-queue-full"]);
    assert_eq!(e.held(), 1);
}

#[test]
fn querier_default_eth_and_errors() {
    let mut q = mk(
        "ARPQuerier",
        "10.0.0.1, 00:00:00:00:00:0a, DEFAULT_ETH 00:00:00:00:00:0b",
        2,
    );
    let run = push(q.as_mut(), 0, ip([8, 8, 8, 8], 1), 0.0);
    assert_eq!(run.out.len(), 1);
    assert_eq!(&run.out[0].1[0..6], &PEER);
    assert!(
        mk_err("ARPQuerier", "10.0.0.1, 00:00:00:00:00:0a, STATIC 10.0.0.2").contains("STATIC")
    );
    assert!(mk_err("ARPQuerier", "10.0.0.1, 00:00:00:00:00:0a, TABLE t").contains("TABLE"));
    assert!(mk_err("ARPQuerier", "").contains("IP"));
    assert!(mk_err("ARPQuerier", "10.0.0.1, 00:00:00:00:00").contains("Ethernet"));
}
