//! AF_PACKET ports between two namespaces joined by a veth pair.

mod common;

use std::time::Duration;

use common::{can_run, frames, receive, send_all, until_error, Net};
use nic::afpacket::{AfPacketRx, AfPacketTx};
use nic::{Kind, PortError, RxPort, TxPort};

#[test]
fn frames_arrive_with_their_bytes_in_order_and_counted() {
    if !can_run("frames_arrive_with_their_bytes_in_order_and_counted") {
        return;
    }
    let net = Net::new();
    let mut rx = net.in_b(|| AfPacketRx::open(&net.dev_b)).unwrap();
    // Both ports of namespace a's device: what it sends must not come back on its own rx.
    let mut a = net.in_a(|| nic::open(&net.dev_a, Kind::AfPacket)).unwrap();
    assert_eq!(a.kind, Kind::AfPacket);
    assert!(a.note.is_none());
    assert_eq!(a.tx.name(), net.dev_a);

    let sent = frames(300);
    assert_eq!(send_all(a.tx.as_mut(), &sent), sent.len());
    let (got, all) = receive(&mut rx, sent.len(), Duration::from_secs(5));
    assert_eq!(got.len(), sent.len(), "frames lost");
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g, s, "frame {i} differs");
    }
    let bytes: u64 = sent.iter().map(|f| f.len() as u64).sum();
    let tc = a.tx.counters();
    assert_eq!((tc.tx_packets, tc.tx_bytes, tc.tx_full), (300, bytes, 0));
    let rc = rx.counters();
    assert_eq!(rc.rx_packets, all);
    assert!(rc.rx_bytes >= bytes);
    assert_eq!(rc.rx_kernel_drops, 0);

    // The sender's own receive port saw none of its frames go out.
    let (echo, _) = receive(a.rx.as_mut(), 1, Duration::from_millis(200));
    assert!(echo.is_empty(), "{} sent frames read back", echo.len());

    // And the other way round.
    let mut tx_b = net.in_b(|| AfPacketTx::open(&net.dev_b)).unwrap();
    let back = frames(50);
    send_all(&mut tx_b, &back);
    let (got, _) = receive(a.rx.as_mut(), back.len(), Duration::from_secs(5));
    assert_eq!(got, back);
}

#[test]
fn a_missing_device_is_named() {
    for kind in [Kind::AfPacket, Kind::AfXdp, Kind::Auto] {
        let e = nic::open("fbnic-missing0", kind).unwrap_err();
        assert!(matches!(e, PortError::NoDevice { .. }), "{e:?}");
        assert_eq!(e.to_string(), "fbnic-missing0: no such device");
    }
    let e = AfPacketRx::open("").unwrap_err();
    assert!(matches!(e, PortError::NoDevice { .. }), "{e:?}");
    let e = AfPacketTx::open("a-name-far-too-long-for-linux").unwrap_err();
    assert!(matches!(e, PortError::NoDevice { .. }), "{e:?}");
}

#[test]
fn a_device_deleted_mid_receive_is_gone() {
    if !can_run("a_device_deleted_mid_receive_is_gone") {
        return;
    }
    let net = Net::new();
    let mut rx = net.in_b(|| AfPacketRx::open(&net.dev_b)).unwrap();
    let mut tx = net.in_b(|| AfPacketTx::open(&net.dev_b)).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            net.delete_b();
        });
        let (e, took) = until_error(&mut rx, Duration::from_secs(5));
        let e = e.expect("no error after the device was deleted");
        assert!(
            matches!(e, PortError::Gone { .. } | PortError::Down { .. }),
            "{e:?}"
        );
        assert!(e.to_string().starts_with(&net.dev_b), "{e}");
        assert!(took < Duration::from_secs(2), "took {took:?}");
    });
    let f = common::frame(1, 60, None);
    let r = tx.send(packet::Timestamp(0), &f).and_then(|_| tx.flush());
    let e = r.expect_err("sending to a deleted device");
    assert!(
        matches!(e, PortError::Gone { .. } | PortError::Down { .. }),
        "{e:?}"
    );
}

#[test]
fn a_device_taken_down_mid_receive_is_down() {
    if !can_run("a_device_taken_down_mid_receive_is_down") {
        return;
    }
    let net = Net::new();
    let mut rx = net.in_b(|| AfPacketRx::open(&net.dev_b)).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            net.down_b();
        });
        let (e, took) = until_error(&mut rx, Duration::from_secs(5));
        let e = e.expect("no error after the device went down");
        assert!(matches!(e, PortError::Down { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("{}: went down", net.dev_b));
        assert!(took < Duration::from_secs(2), "took {took:?}");
    });
}

#[test]
fn a_device_down_at_open_says_so() {
    if !can_run("a_device_down_at_open_says_so") {
        return;
    }
    let net = Net::new();
    net.down_b();
    for kind in [Kind::AfPacket, Kind::AfXdp, Kind::Auto] {
        let e = net.in_b(|| nic::open(&net.dev_b, kind)).unwrap_err();
        assert!(matches!(e, PortError::NotUp { .. }), "{kind}: {e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "{0}: is down (bring it up first: ip link set {0} up)",
                net.dev_b
            )
        );
    }
}

/// Packets the queueing discipline of `dev` in `ns` has sent (`tc -s qdisc`).
fn qdisc_sent(ns: &str, dev: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", dev])
        .output()
        .expect("tc");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .skip_while(|w| *w != "Sent")
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `Sent … pkt` in {text:?}"))
}

#[test]
fn afpacket_tc_sends_through_the_queueing_discipline_and_afpacket_does_not() {
    if !can_run("afpacket_tc_sends_through_the_queueing_discipline_and_afpacket_does_not") {
        return;
    }
    let net = Net::new();
    // A counting root qdisc (veth has none of its own).
    let out = std::process::Command::new("ip")
        .args([
            "netns", "exec", &net.a, "tc", "qdisc", "add", "dev", &net.dev_a, "root", "pfifo",
        ])
        .output()
        .expect("tc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rx = net.in_b(|| AfPacketRx::open(&net.dev_b)).unwrap();
    let before = qdisc_sent(&net.a, &net.dev_a);
    let mut direct = net.in_a(|| nic::open(&net.dev_a, Kind::AfPacket)).unwrap();
    send_all(direct.tx.as_mut(), &frames(20));
    let (got, _) = receive(&mut rx, 20, Duration::from_secs(5));
    assert_eq!(got.len(), 20);
    assert_eq!(
        qdisc_sent(&net.a, &net.dev_a),
        before,
        "afpacket went through the qdisc"
    );
    let mut tc = net
        .in_a(|| nic::open(&net.dev_a, Kind::AfPacketTc))
        .unwrap();
    assert_eq!(tc.kind, Kind::AfPacketTc);
    let sent = frames(30);
    send_all(tc.tx.as_mut(), &sent);
    let (got, _) = receive(&mut rx, 30, Duration::from_secs(5));
    assert_eq!(got, sent);
    assert_eq!(qdisc_sent(&net.a, &net.dev_a), before + 30);
}
