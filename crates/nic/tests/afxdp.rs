//! AF_XDP ports between two namespaces joined by a veth pair: generic and native XDP, copy
//! mode (veth has no zero-copy; where a driver has it, the default configuration uses it).

mod common;

use std::time::Duration;

use common::{can_run, frames, has_xdp, receive, send_all, until_error, Net};
use nic::afpacket::{AfPacketRx, AfPacketTx};
use nic::afxdp::{self, Config};
use nic::{Kind, PortError, RxPort, TxPort};

fn both_ways(cfg: Config) {
    let net = Net::new();
    let (mut rx, mut tx, mode) = net.in_b(|| afxdp::open(&net.dev_b, &cfg)).unwrap();
    assert!(has_xdp(&net.b, &net.dev_b), "no XDP program attached");
    assert_eq!(mode.native, cfg.native, "{mode:?}");
    if !mode.zero_copy && cfg.zero_copy {
        let note = mode.note.as_deref().unwrap_or("");
        assert!(
            note.starts_with(&format!("{}: ", net.dev_b)) && note.contains("copy mode"),
            "{note}"
        );
    }
    assert_eq!(rx.name(), net.dev_b);

    // Into the AF_XDP port.
    let mut tx_a = net.in_a(|| AfPacketTx::open(&net.dev_a)).unwrap();
    let sent = frames(300);
    let (mut got, mut all) = (Vec::new(), 0);
    // In bursts the receive ring holds.
    for chunk in sent.chunks(cfg.frames as usize / 2) {
        send_all(&mut tx_a, chunk);
        let (g, a) = receive(&mut rx, chunk.len(), Duration::from_secs(5));
        got.extend(g);
        all += a;
    }
    assert_eq!(got.len(), sent.len(), "frames lost");
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g, s, "frame {i} differs");
    }
    let rc = rx.counters();
    assert_eq!(rc.rx_packets, all);
    assert!(rc.rx_bytes >= sent.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!(rc.rx_kernel_drops, 0);

    // A burst larger than the ring: what the kernel could not deliver is counted.
    let burst = frames(cfg.frames * 2);
    send_all(&mut tx_a, &burst);
    let (got, _) = receive(&mut rx, burst.len(), Duration::from_millis(500));
    let dropped = rx.counters().rx_kernel_drops;
    assert!(dropped > 0, "a burst of twice the ring lost nothing");
    assert_eq!(got.len() as u64 + dropped, burst.len() as u64);
    assert_eq!(got.as_slice(), &burst[..got.len()]);

    // Out of the AF_XDP port, more than its ring holds, flushing now and then.
    let mut rx_a = net.in_a(|| AfPacketRx::open(&net.dev_a)).unwrap();
    let out = frames(cfg.frames * 3);
    let mut accepted = 0;
    for chunk in out.chunks(cfg.frames as usize / 2) {
        accepted += send_all(&mut tx, chunk);
    }
    assert_eq!(accepted, out.len());
    let (got, _) = receive(&mut rx_a, out.len(), Duration::from_secs(5));
    assert_eq!(got.len(), out.len(), "frames lost");
    for (i, (g, s)) in got.iter().zip(&out).enumerate() {
        assert_eq!(g, s, "frame {i} differs");
    }
    let tc = tx.counters();
    assert_eq!(tc.tx_packets, out.len() as u64);
    assert_eq!(tc.tx_bytes, out.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!(tc.tx_full, 0);

    // Dropping the ports detaches the program.
    drop(rx);
    assert!(
        has_xdp(&net.b, &net.dev_b),
        "detached while the transmit port lives"
    );
    drop(tx);
    assert!(!has_xdp(&net.b, &net.dev_b), "XDP program left attached");
}

#[test]
fn generic_xdp_copy_mode_both_ways() {
    if !can_run("generic_xdp_copy_mode_both_ways") {
        return;
    }
    both_ways(Config {
        native: false,
        zero_copy: false,
        ..Config::default()
    });
}

#[test]
fn native_xdp_best_mode_both_ways() {
    if !can_run("native_xdp_best_mode_both_ways") {
        return;
    }
    // veth runs XDP in its driver; zero-copy is tried and, on veth, falls back to copy.
    both_ways(Config {
        frames: 256,
        ..Config::default()
    });
}

#[test]
fn open_prefers_af_xdp_and_falls_back_to_af_packet() {
    if !can_run("open_prefers_af_xdp_and_falls_back_to_af_packet") {
        return;
    }
    let net = Net::new();
    let first = net.in_b(|| nic::open(&net.dev_b, Kind::Auto)).unwrap();
    assert_eq!(first.kind, Kind::AfXdp, "{:?}", first.note);
    // The device's XDP hook is taken: the second opening says so and uses AF_PACKET.
    let mut second = net.in_b(|| nic::open(&net.dev_b, Kind::AfXdp)).unwrap();
    assert_eq!(second.kind, Kind::AfPacket);
    let note = second.note.clone().unwrap_or_default();
    assert_eq!(
        note,
        format!(
            "{}: XDP not available (another XDP program is attached), using AF_PACKET",
            net.dev_b
        )
    );
    drop(first);
    assert!(!has_xdp(&net.b, &net.dev_b));
    // The fallback port works.
    let mut tx_a = net.in_a(|| AfPacketTx::open(&net.dev_a)).unwrap();
    let sent = frames(20);
    send_all(&mut tx_a, &sent);
    let (got, _) = receive(second.rx.as_mut(), sent.len(), Duration::from_secs(5));
    assert_eq!(got, sent);
}

#[test]
fn a_full_transmit_ring_counts_every_refused_frame() {
    if !can_run("a_full_transmit_ring_counts_every_refused_frame") {
        return;
    }
    let net = Net::new();
    let cfg = Config {
        frames: 64,
        tx_batch: 0,
        ..Config::default()
    };
    let (_rx, mut tx, _) = net.in_b(|| afxdp::open(&net.dev_b, &cfg)).unwrap();
    let mut rx_a = net.in_a(|| AfPacketRx::open(&net.dev_a)).unwrap();
    let out = frames(100);
    let mut refused = 0;
    for f in &out {
        if !tx.send(packet::Timestamp(0), f).unwrap() {
            refused += 1;
        }
    }
    assert_eq!(refused, 36);
    let c = tx.counters();
    assert_eq!((c.tx_packets, c.tx_full), (64, 36));
    tx.flush().unwrap();
    let (got, _) = receive(&mut rx_a, 64, Duration::from_secs(5));
    assert_eq!(got.as_slice(), &out[..64]);
    // Once flushed, the ring takes frames again.
    assert!(tx.send(packet::Timestamp(0), &out[0]).unwrap());
}

#[test]
fn a_device_deleted_mid_receive_is_gone_and_the_program_goes_with_the_ports() {
    if !can_run("a_device_deleted_mid_receive_is_gone_and_the_program_goes_with_the_ports") {
        return;
    }
    let net = Net::new();
    let (mut rx, mut tx, _) = net
        .in_b(|| afxdp::open(&net.dev_b, &Config::default()))
        .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            net.delete_b();
        });
        let (e, took) = until_error(&mut rx, Duration::from_secs(5));
        let e = e.expect("no error after the device was deleted");
        assert!(matches!(e, PortError::Gone { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("{}: disappeared", net.dev_b));
        assert!(took < Duration::from_secs(2), "took {took:?}");
    });
    let f = common::frame(1, 60, None);
    let r = tx.send(packet::Timestamp(0), &f).and_then(|_| tx.flush());
    let e = r.expect_err("sending to a deleted device");
    assert!(matches!(e, PortError::Gone { .. }), "{e:?}");
}

#[test]
fn a_device_taken_down_mid_receive_is_down() {
    if !can_run("a_device_taken_down_mid_receive_is_down") {
        return;
    }
    let net = Net::new();
    let (mut rx, _tx, _) = net
        .in_b(|| afxdp::open(&net.dev_b, &Config::default()))
        .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            net.down_b();
        });
        let (e, took) = until_error(&mut rx, Duration::from_secs(5));
        let e = e.expect("no error after the device went down");
        assert!(matches!(e, PortError::Down { .. }), "{e:?}");
        assert!(took < Duration::from_secs(2), "took {took:?}");
    });
}

#[test]
fn a_failed_open_leaves_no_program_attached() {
    if !can_run("a_failed_open_leaves_no_program_attached") {
        return;
    }
    let net = Net::new();
    // veth has one receive queue: binding queue 5 fails after the program was attached.
    let cfg = Config {
        queue: 5,
        ..Config::default()
    };
    let e = net.in_b(|| afxdp::open(&net.dev_b, &cfg)).unwrap_err();
    assert!(matches!(e, PortError::NoXdp { .. }), "{e:?}");
    assert!(e.to_string().starts_with(&net.dev_b), "{e}");
    assert!(!has_xdp(&net.b, &net.dev_b), "XDP program left attached");
    let e = afxdp::open("fbnic-missing0", &Config::default()).unwrap_err();
    assert_eq!(e.to_string(), "fbnic-missing0: no such device");
    let e = net
        .in_b(|| {
            afxdp::open(
                &net.dev_b,
                &Config {
                    frames: 100,
                    ..Config::default()
                },
            )
        })
        .unwrap_err();
    assert!(matches!(e, PortError::Unsupported { .. }), "{e:?}");
}

#[test]
fn each_queue_gets_its_frames_and_open_serves_them_all() {
    if !can_run("each_queue_gets_its_frames_and_open_serves_them_all") {
        return;
    }
    let net = Net::with_queues(2);
    assert_eq!(net.in_b(|| afxdp::rx_queues(&net.dev_b)).unwrap(), 2);
    let cfg = Config::default();
    // Sent from queue q of one end, a frame arrives on queue q of the other (veth keeps the
    // queue), so each of b's sockets sees exactly what a's socket of the same queue sent.
    let (mut a, _) = net
        .in_a(|| afxdp::open_queues(&net.dev_a, &cfg, 2))
        .unwrap();
    let (mut b, mode) = net
        .in_b(|| afxdp::open_queues(&net.dev_b, &cfg, 2))
        .unwrap();
    assert!(mode.native, "{mode:?}");
    let batches: Vec<Vec<Vec<u8>>> = (0..2u32)
        .map(|q| {
            (0..40)
                .map(|i| common::frame(q * 1000 + i, 60 + i as usize, None))
                .collect()
        })
        .collect();
    for q in 0..2 {
        assert_eq!(b[q].0.queue(), q as u32);
        send_all(&mut a[q].1, &batches[q]);
        let (got, _) = receive(&mut b[q].0, 40, Duration::from_secs(5));
        assert_eq!(got, batches[q], "queue {q}");
        let (other, _) = receive(&mut b[1 - q].0, 1, Duration::from_millis(100));
        assert!(
            other.is_empty(),
            "queue {q}'s frames reached queue {}",
            1 - q
        );
    }
    drop(b);
    assert!(!has_xdp(&net.b, &net.dev_b), "XDP program left attached");

    // nic::open takes every queue into one receive port; each queue's frames keep order.
    let mut d = net.in_b(|| nic::open(&net.dev_b, Kind::AfXdp)).unwrap();
    assert_eq!(d.kind, Kind::AfXdp);
    for q in 0..2 {
        send_all(&mut a[q].1, &batches[q]);
    }
    let (got, all) = receive(d.rx.as_mut(), 80, Duration::from_secs(5));
    assert_eq!(got.len(), 80);
    for (q, batch) in batches.iter().enumerate() {
        let mine: Vec<Vec<u8>> = got.iter().filter(|f| batch.contains(f)).cloned().collect();
        assert_eq!(&mine, batch, "queue {q}");
    }
    assert_eq!(d.rx.counters().rx_packets, all);
}

#[test]
fn a_device_without_driver_xdp_runs_generic_and_says_so() {
    if !can_run("a_device_without_driver_xdp_runs_generic_and_says_so") {
        return;
    }
    let net = Net::new();
    // The namespace's own loopback: its driver has no XDP, the kernel's generic XDP does.
    let dummy = "lo".to_string();
    net.loopback_up_b();
    let (rx, tx, mode) = net
        .in_b(|| afxdp::open(&dummy, &Config::default()))
        .unwrap();
    assert!(!mode.native && !mode.zero_copy, "{mode:?}");
    let note = mode.note.clone().unwrap_or_default();
    assert!(
        note.starts_with(&format!("{dummy}: no native XDP (")) && note.contains("generic mode"),
        "{note}"
    );
    assert!(note.contains("copy mode"), "{note}");
    assert!(has_xdp(&net.b, &dummy));
    drop((rx, tx));
    assert!(!has_xdp(&net.b, &dummy), "XDP program left attached");
    // nic::open passes the note on.
    let d = net.in_b(|| nic::open(&dummy, Kind::Auto)).unwrap();
    assert_eq!(d.kind, Kind::AfXdp, "{:?}", d.note);
    assert_eq!(d.note, mode.note);
}
