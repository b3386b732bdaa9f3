//! ICMPError: message bytes, checksums, annotations and suppression rules.

use elements::net::Names;
use elements::{build, BuildCtx, Context, Element, Verdict};
use packet::{Packet, PacketType, Timestamp};
use std::net::Ipv4Addr;
use std::path::Path;
use wire::build::{quote, Frame};
use wire::icmpv4::{dest_unreachable, msg_type, time_exceeded};
use wire::{checksum, IpProtocol};

fn mk(config: &str) -> Result<Box<dyn Element>, String> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/e",
        ninputs: 1,
        noutputs: 1,
        names: &names,
        base_dir: Path::new("."),
    };
    build("ICMPError", config, &bcx).map_err(|e| e.message)
}

/// An IPv4 datagram of `proto` with TTL 1 and 48 payload bytes (0, 1, 2, …) from `src` to
/// `dst`, fragment word `frag` (flags and offset as on the wire); network header annotation
/// at 0.
fn datagram(src: [u8; 4], dst: [u8; 4], proto: u8, frag: u16) -> Packet {
    let payload: Vec<u8> = (0..48).collect();
    let (df, mf, offset) = (frag & 0x4000 != 0, frag & 0x2000 != 0, (frag & 0x1fff) * 8);
    let d = Frame::ip(src, dst, proto)
        .ttl(1)
        .fragment(df, mf, offset)
        .payload(&payload)
        .no_ethernet()
        .build();
    let mut p = Packet::from_bytes(&d);
    p.set_network_header(0);
    p
}

fn run(e: &mut dyn Element, p: Packet) -> (Vec<Packet>, Vec<&'static str>) {
    let mut cx = Context::new(Timestamp(5));
    let v = e.push(0, p, &mut cx);
    let out: Vec<Packet> = cx
        .take_emitted()
        .map(|(o, p)| {
            assert_eq!(o, 0);
            p
        })
        .collect();
    let mut drops: Vec<&'static str> = cx.take_dropped().map(|(_, r)| r).collect();
    if let Verdict::Drop(_, r) = v {
        drops.push(r);
    }
    (out, drops)
}

#[test]
fn time_exceeded_message_bytes() {
    let mut e = mk("10.0.0.254, timeexceeded, transit").unwrap();
    let orig = datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::UDP, 0);
    let orig_bytes = orig.data().to_vec();
    let (out, drops) = run(e.as_mut(), orig);
    assert_eq!(drops, vec!["icmp-error"]);
    let q = &out[0];
    let d = q.data();
    // 20 IP + 8 ICMP + the whole 68-byte original (it fits in 576).
    assert_eq!(d.len(), 96);
    assert_eq!(&d[0..4], &[0x45, 0, 0, 96]);
    assert_eq!(&d[4..6], &[0, 1], "IP ID counts from 1");
    assert_eq!(&d[6..10], &[0, 0, 200, 1]);
    assert_eq!(&d[12..16], &[10, 0, 0, 254]);
    assert_eq!(&d[16..20], &[192, 168, 0, 5]);
    assert_eq!(checksum::data(&d[..20]), 0);
    assert_eq!(&d[20..22], &[11, 0]);
    assert_eq!(&d[24..28], &[0, 0, 0, 0]);
    assert_eq!(&d[28..], &orig_bytes[..]);
    assert_eq!(checksum::data(&d[20..]), 0);
    // The whole message, as the shared builder writes it.
    let want = Frame::icmp_error(
        [10, 0, 0, 254],
        [192, 168, 0, 5],
        msg_type::TIME_EXCEEDED,
        time_exceeded::TTL_EXCEEDED,
        &orig_bytes,
    )
    .ttl(200)
    .ident(1)
    .no_ethernet()
    .build();
    assert_eq!(d, &want[..]);
    assert_eq!(q.meta.dst_ip, Ipv4Addr::new(192, 168, 0, 5));
    assert_eq!(q.network_offset_in_data(), Some(0));
    assert_eq!(q.transport_header().map(|t| t[0]), Some(11));
    // The next error gets ID 2.
    let (out, _) = run(
        e.as_mut(),
        datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::TCP, 0),
    );
    assert_eq!(&out[0].data()[4..6], &[0, 2]);
}

#[test]
fn mtu_truncates_and_needfrag_carries_pmtu() {
    let mut e = mk("10.0.0.254, unreachable, needfrag, MTU 56, PMTU 1400").unwrap();
    let orig = datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::UDP, 0);
    let orig_bytes = orig.data().to_vec();
    let (out, _) = run(e.as_mut(), orig);
    let d = out[0].data();
    assert_eq!(d.len(), 56);
    assert_eq!(&d[20..22], &[3, 4]);
    assert_eq!(&d[26..28], &1400u16.to_be_bytes());
    assert_eq!(checksum::data(&d[20..]), 0);
    // 56 bytes leave room for RFC 792's quote: the IP header and 8 bytes.
    let want = Frame::icmp_error(
        [10, 0, 0, 254],
        [192, 168, 0, 5],
        msg_type::DEST_UNREACHABLE,
        dest_unreachable::FRAG_NEEDED,
        quote(&orig_bytes),
    )
    .icmp_rest(1400)
    .ttl(200)
    .ident(1)
    .no_ethernet()
    .build();
    assert_eq!(d, &want[..]);
    let mut r = mk("10.0.0.254, redirect, host").unwrap();
    let mut p = datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::UDP, 0);
    p.meta.dst_ip = Ipv4Addr::new(192, 168, 0, 1);
    let (out, _) = run(r.as_mut(), p);
    assert_eq!(
        &out[0].data()[20..28],
        &[5, 1, out[0].data()[22], out[0].data()[23], 192, 168, 0, 1]
    );
}

#[test]
fn suppressed_cases() {
    let mut e = mk("10.0.0.254, 3, 1, BADADDRS 9.9.9.9").unwrap();
    let mut icmp_err = datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::ICMP, 0);
    icmp_err.data_mut()[20] = msg_type::DEST_UNREACHABLE;
    let mut echo = datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::ICMP, 0);
    echo.data_mut()[20] = msg_type::ECHO_REQUEST;
    let mut link_bcast = datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::UDP, 0);
    link_bcast.meta.packet_type = PacketType::Broadcast;
    for (p, why) in [
        (icmp_err, "ICMP error"),
        (
            datagram([192, 168, 0, 5], [255, 255, 255, 255], IpProtocol::UDP, 0),
            "broadcast dst",
        ),
        (
            datagram([192, 168, 0, 5], [239, 1, 1, 1], IpProtocol::UDP, 0),
            "multicast dst",
        ),
        (
            datagram([192, 168, 0, 5], [9, 9, 9, 9], IpProtocol::UDP, 0),
            "bad dst",
        ),
        (
            datagram([0, 1, 2, 3], [8, 8, 8, 8], IpProtocol::UDP, 0),
            "net 0 src",
        ),
        (
            datagram([127, 0, 0, 1], [8, 8, 8, 8], IpProtocol::UDP, 0),
            "loopback src",
        ),
        (
            datagram([240, 0, 0, 1], [8, 8, 8, 8], IpProtocol::UDP, 0),
            "class E src",
        ),
        (
            datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::UDP, 0x0010),
            "later fragment",
        ),
        (link_bcast, "link broadcast"),
    ] {
        let (out, drops) = run(e.as_mut(), p);
        assert!(out.is_empty(), "{why}");
        assert_eq!(drops, vec!["icmp-error-suppressed"], "{why}");
    }
    // An echo request is not an error: answered.
    let (out, _) = run(e.as_mut(), echo);
    assert_eq!(out.len(), 1);
    // First fragment (MF set, offset 0) is answered.
    let (out, _) = run(
        e.as_mut(),
        datagram([192, 168, 0, 5], [8, 8, 8, 8], IpProtocol::UDP, 0x2000),
    );
    assert_eq!(out.len(), 1);
    let mut bare = Packet::from_bytes(&[0x45; 12]);
    bare.set_network_header(0);
    assert_eq!(run(e.as_mut(), bare).1, vec!["bad-ip-header"]);
}

#[test]
fn source_route_is_reversed() {
    let mut e = mk("10.0.0.254, unreachable, host").unwrap();
    // LSRR with two recorded hops (pointer 12) and one to go.
    let mut d = vec![0u8; 24 + 16 + 8];
    d[0] = 0x46 + 3; // 36-byte header
    let total = d.len() as u16;
    d[2..4].copy_from_slice(&total.to_be_bytes());
    d[8] = 9;
    d[9] = 17;
    d[12..16].copy_from_slice(&[192, 168, 0, 5]);
    d[16..20].copy_from_slice(&[8, 8, 8, 8]);
    d[20..36].copy_from_slice(&[131, 15, 12, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 0]);
    let mut p = Packet::from_bytes(&d);
    p.set_network_header(0);
    let (out, _) = run(e.as_mut(), p);
    let q = out[0].data();
    // Option length = pointer - 1 = 11, padded with EOL to a 32-byte header.
    assert_eq!(q[0], 0x48);
    assert_eq!(&q[20..32], &[131, 11, 4, 2, 2, 2, 2, 1, 1, 1, 1, 0]);
    assert_eq!(checksum::data(&q[..32]), 0);
    // Redirects are not sent for source-routed packets.
    let mut r = mk("10.0.0.254, redirect, host").unwrap();
    let mut p = Packet::from_bytes(&d);
    p.set_network_header(0);
    assert_eq!(run(r.as_mut(), p).1, vec!["icmp-error-suppressed"]);
}

#[test]
fn config_errors() {
    assert!(mk("10.0.0.254, echo")
        .err()
        .unwrap_or_default()
        .contains("error type"));
    assert!(mk("10.0.0.254, unreachable, sideways")
        .err()
        .unwrap_or_default()
        .contains("ICMP code"));
    assert!(mk("10.0.0, 3")
        .err()
        .unwrap_or_default()
        .contains("IP address"));
    assert!(mk("10.0.0.254").err().unwrap_or_default().contains("TYPE"));
    assert!(mk("10.0.0.254, 3, 0, MTU 10")
        .err()
        .unwrap_or_default()
        .contains("MTU"));
    assert!(mk("10.0.0.254, 300")
        .err()
        .unwrap_or_default()
        .contains("ICMP type"));
}
