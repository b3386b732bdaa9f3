//! Unit tests of the ESP elements: round trips, the wire format, the drop reasons, the
//! replay window and ESN inference.

use super::*;
use crate::nfs::testutil::{make_in, push_recording};
use crate::{Context, Element, Verdict};
use packet::{Packet, Timestamp};
use proptest::prelude::*;
use std::path::Path;
use wire::build::Frame;

const KEY: &str = "KEY 000102030405060708090a0b0c0d0e0f, SALT a0a1a2a3";
const KEY256: &str =
    "KEY 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f, SALT a0a1a2a3";

fn build(class: &str, config: &str) -> Box<dyn Element> {
    match make_in(class, config, 1, Path::new(".")) {
        Ok(e) => e,
        Err(err) => panic!("{class}({config}) refused: {err}"),
    }
}

fn encap(extra: &str) -> Box<dyn Element> {
    build(
        "IPsecGCMEncap",
        &format!("SPI 0x1234, {KEY}, SRC 192.0.2.1, DST 192.0.2.2{extra}"),
    )
}

fn decap(extra: &str) -> Box<dyn Element> {
    build("IPsecGCMDecap", &format!("SPI 0x1234, {KEY}{extra}"))
}

/// An Ethernet frame with a UDP datagram of `n` payload bytes; MAC header at 0, network
/// header at 14.
fn frame(n: usize) -> Packet {
    let payload: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
    let f = Frame::udp([10, 0, 0, 1], [10, 0, 1, 1], 4000, 53).payload(&payload);
    let mut p = Packet::from_bytes(&f.build());
    p.set_mac_header(0);
    p.set_network_header(14);
    p
}

fn run(e: &mut dyn Element, p: Packet) -> Result<Packet, &'static str> {
    let mut cx = Context::new(Timestamp(0));
    match e.push(0, p, &mut cx) {
        Verdict::Out(0, p) => Ok(p),
        Verdict::Drop(_, r) => Err(r),
        v => panic!("unexpected verdict {v:?}"),
    }
}

#[test]
fn encrypts_in_the_kernel_format_and_decrypts_back() {
    for (key, size) in [(KEY, 16usize), (KEY256, 32)] {
        let mut e = build(
            "IPsecGCMEncap",
            &format!(
                "0x1234, {}, 192.0.2.1, 192.0.2.2, TTL 9",
                &key[4..].replace(", SALT", ",")
            ),
        );
        let mut d = build("IPsecGCMDecap", &format!("SPI 0x1234, {key}"));
        for n in [0usize, 1, 2, 3, 4, 100] {
            let orig = frame(n);
            let inner_len = orig.len() - 14;
            let out = run(e.as_mut(), orig.duplicate()).unwrap();
            let b = out.data();
            // Ethernet header kept, outer header valid, ESP after it.
            assert_eq!(&b[..14], &orig.data()[..14]);
            let ip = &b[14..];
            let pad = (4 - (inner_len + 2) % 4) % 4;
            assert_eq!(
                ip.len(),
                20 + 8 + 8 + inner_len + pad + 2 + 16,
                "size {size} n {n}"
            );
            assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), ip.len());
            assert_eq!((ip[0], ip[8], ip[9]), (0x45, 9, protocol_esp()));
            assert_eq!(wire::checksum::data(&ip[..20]), 0);
            assert_eq!(&ip[12..20], &[192, 0, 2, 1, 192, 0, 2, 2]);
            assert_eq!(&ip[20..24], &0x1234u32.to_be_bytes());
            assert_eq!(out.network_offset_in_data(), Some(14));
            // The inner datagram is not in clear.
            assert_ne!(&ip[36..36 + inner_len], &orig.data()[14..]);
            let back = run(d.as_mut(), out).unwrap();
            assert_eq!(back.data(), orig.data(), "size {size} n {n}");
            assert_eq!(back.network_offset_in_data(), Some(14));
            assert_eq!(back.meta.dst_ip, std::net::Ipv4Addr::new(10, 0, 1, 1));
        }
        // Sequence numbers 1..=6 were sent: IV and SEQ fields carry them.
        assert_eq!(
            e.stats().iter().find(|s| s.0 == "next_seq").map(|s| s.1),
            Some(7)
        );
    }
}

fn protocol_esp() -> u8 {
    wire::ip::protocol::ESP
}

#[test]
fn sequence_numbers_iv_and_padding() {
    let mut e = encap(", SEQ 0x1fffe");
    let o = run(e.as_mut(), frame(1)).unwrap();
    let ip = &o.data()[14..];
    assert_eq!(&ip[24..28], &0x1fffeu32.to_be_bytes());
    assert_eq!(&ip[28..36], &0x1fffeu64.to_be_bytes());
    assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 0xfffe);
    // The trailer decrypts to padding 1, 2, … and next header 4.
    let mut d = decap("");
    let sa = Sa::configure(&crate::Args::parse(&format!("SPI 0x1234, {KEY}")).unwrap()).unwrap();
    let mut ct = ip[36..ip.len() - 16].to_vec();
    let mut icv = [0u8; 16];
    icv.copy_from_slice(&ip[ip.len() - 16..]);
    assert!(sa.open(0x1fffe, &0x1fffeu64.to_be_bytes(), &mut ct, &icv));
    let n = ct.len();
    let inner = 20 + 8 + 1;
    let pad = (4 - (inner + 2) % 4) % 4;
    assert_eq!(pad, 1);
    assert_eq!(&ct[n - 3..], &[1, 1, 4]);
    assert!(run(d.as_mut(), o).is_ok());
}

#[test]
fn drops_by_reason() {
    let mut e = encap("");
    let mut d = decap(", SRC 192.0.2.1");
    let sealed: Vec<Packet> = (0..4)
        .map(|_| run(e.as_mut(), frame(10)).unwrap())
        .collect();
    // Tampered: bad ICV, and the window does not move.
    let mut t = sealed[0].duplicate();
    let last = t.len() - 20;
    t.data_mut()[last] ^= 1;
    assert_eq!(run(d.as_mut(), t), Err("bad-icv"));
    assert_eq!(run(d.as_mut(), sealed[1].duplicate()).map(|_| ()), Ok(()));
    // Replay of the same packet.
    assert_eq!(run(d.as_mut(), sealed[1].duplicate()), Err("replay"));
    // Out of order inside the window is fine, once.
    assert!(run(d.as_mut(), sealed[3].duplicate()).is_ok());
    assert!(run(d.as_mut(), sealed[0].duplicate()).is_ok());
    assert!(run(d.as_mut(), sealed[2].duplicate()).is_ok());
    assert_eq!(run(d.as_mut(), sealed[2].duplicate()), Err("replay"));
    // Another SPI, another source.
    let mut other = build(
        "IPsecGCMEncap",
        &format!("SPI 0x9999, {KEY}, SRC 192.0.2.1, DST 192.0.2.2"),
    );
    assert_eq!(
        run(d.as_mut(), run(other.as_mut(), frame(3)).unwrap()),
        Err("unknown-spi")
    );
    let mut moved = encap("");
    let mut p = run(moved.as_mut(), frame(3)).unwrap();
    p.data_mut()[14 + 12] = 7; // outer source (checksum is not checked: no matter)
    assert_eq!(run(d.as_mut(), p), Err("unknown-spi"));
    // Wrong key: bad ICV.
    let mut wrong = build(
        "IPsecGCMEncap",
        "SPI 0x1234, KEY ffffffffffffffffffffffffffffffff, SALT a0a1a2a3, SRC 192.0.2.1, DST 192.0.2.2, SEQ 100",
    );
    assert_eq!(
        run(d.as_mut(), run(wrong.as_mut(), frame(3)).unwrap()),
        Err("bad-icv")
    );
    // Not ESP, not IP, truncated, a fragment.
    assert_eq!(run(d.as_mut(), frame(3)), Err("not-esp"));
    let mut raw = Packet::from_bytes(&[1, 2, 3]);
    raw.set_network_header(0);
    assert_eq!(run(d.as_mut(), raw), Err("bad-ip-header"));
    let mut short = run(e.as_mut(), frame(3)).unwrap();
    {
        let b = short.data_mut();
        b[16..18].copy_from_slice(&(20u16 + 30).to_be_bytes());
    }
    assert_eq!(run(d.as_mut(), short), Err("malformed"));
    let mut frag = run(e.as_mut(), frame(3)).unwrap();
    frag.data_mut()[14 + 6] |= 0x20;
    assert_eq!(run(d.as_mut(), frag), Err("malformed"));
    let stats = d.stats();
    let get = |k: &str| stats.iter().find(|s| s.0 == k).map(|s| s.1);
    assert_eq!(get("packets"), Some(4));
    assert_eq!(get("bad_icv"), Some(2));
    assert_eq!(get("replay"), Some(2));
    assert_eq!(get("unknown_spi"), Some(2));
    assert_eq!(get("malformed"), Some(2));
    assert_eq!(get("not_esp"), Some(1));
    assert_eq!(get("bad_ip_header"), Some(1));
    assert_eq!(get("top"), Some(4));
    assert_eq!(
        d.state_dump(),
        vec!["spi 0x00001234 window 64 top 4 seen-below-top [0-3]"]
    );
    // Encap refuses what is not IPv4.
    let mut raw = Packet::from_bytes(&[0x45, 0, 0, 10]);
    raw.set_network_header(0);
    assert_eq!(run(e.as_mut(), raw), Err("bad-ip-header"));
}

#[test]
fn sequence_numbers_run_out_without_esn() {
    let mut e = encap(&format!(", SEQ {}", u32::MAX));
    assert!(run(e.as_mut(), frame(1)).is_ok());
    assert_eq!(run(e.as_mut(), frame(1)), Err("seq-overflow"));
    assert_eq!(run(e.as_mut(), frame(1)), Err("seq-overflow"));
    // With ESN the low half wraps, and the receiver follows it.
    let mut e = encap(&format!(", ESN true, SEQ {}", u64::from(u32::MAX) - 2));
    let mut d = decap(", ESN true, REPLAY 32");
    for i in 0..6u64 {
        let p = run(e.as_mut(), frame(5)).unwrap();
        let ip = &p.data()[14..];
        let seq = u64::from(u32::MAX) - 2 + i;
        assert_eq!(&ip[24..28], &(seq as u32).to_be_bytes());
        assert_eq!(&ip[28..36], &seq.to_be_bytes());
        if i == 0 {
            // The receiver starts at 0: a low half this close to 2^32 would belong below
            // sequence number 0 (RFC 4303 A2.2, case B), so it is refused as a replay.
            assert_eq!(run(d.as_mut(), p), Err("replay"));
        }
    }
    // A receiver whose window is already near the wrap.
    let mut d = decap(", ESN true, REPLAY 32");
    let mut e = encap(&format!(", ESN true, SEQ {}", u64::from(u32::MAX) - 40));
    let all: Vec<Packet> = (0..80)
        .map(|_| run(e.as_mut(), frame(5)).unwrap())
        .collect();
    for (i, p) in all.iter().enumerate() {
        assert!(run(d.as_mut(), p.duplicate()).is_ok(), "packet {i}");
    }
    // Replays across the wrap are still caught, late ones within the window accepted.
    assert_eq!(run(d.as_mut(), all[79].duplicate()), Err("replay"));
    assert_eq!(run(d.as_mut(), all[60].duplicate()), Err("replay"));
}

#[test]
fn configurations_refused() {
    for bad in [
        "SPI 5, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, SRC 1.1.1.1, DST 2.2.2.2",
        "SPI 0x1000, KEY 0001, SALT 01020304, SRC 1.1.1.1, DST 2.2.2.2",
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SRC 1.1.1.1, DST 2.2.2.2",
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 0102, SRC 1.1.1.1, DST 2.2.2.2",
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f01020304, SALT 01020304, SRC 1.1.1.1, DST 2.2.2.2",
        "SPI 0x1000, KEY zz0102030405060708090a0b0c0d0e0f, SALT 01020304, SRC 1.1.1.1, DST 2.2.2.2",
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, SRC 1.1.1.1",
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, SRC 1.1.1.1, DST 2.2.2.2, SEQ 0",
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, SRC 1.1.1.1, DST 2.2.2.2, SEQ 0x100000000",
    ] {
        assert!(make_in("IPsecGCMEncap", bad, 1, Path::new(".")).is_err(), "{bad}");
    }
    for bad in [
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, REPLAY 5000",
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, REPLAY 0, ESN true",
        "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, SEQ 3",
    ] {
        assert!(
            make_in("IPsecGCMDecap", bad, 1, Path::new(".")).is_err(),
            "{bad}"
        );
    }
    // Key and salt together, as `ip xfrm` takes them, is the same SA.
    let mut a = encap("");
    let mut b = build(
        "IPsecGCMEncap",
        "SPI 0x1234, KEY 0x000102030405060708090a0b0c0d0e0fa0a1a2a3, SRC 192.0.2.1, DST 192.0.2.2",
    );
    assert_eq!(
        run(a.as_mut(), frame(9)).unwrap().data(),
        run(b.as_mut(), frame(9)).unwrap().data()
    );
}

#[test]
fn records_opaque_for_the_fast_path() {
    let mut e = encap("");
    let (v, step, _) = push_recording(e.as_mut(), 0, frame(4), 0);
    assert!(v.is_ok());
    assert!(step.opaque.is_some());
    let mut d = decap("");
    let (v, step, _) = push_recording(d.as_mut(), 0, frame(4), 0);
    assert_eq!(v.err(), Some("not-esp"));
    assert!(step.opaque.is_some());
}

#[test]
fn workers_send_disjoint_interleaved_sequence_numbers() {
    let seqs = |w: usize| {
        let mut e = encap(", SEQ 10");
        e.worker_share().unwrap().narrow(w, 3).unwrap();
        (0..3)
            .map(|_| {
                let p = run(e.as_mut(), frame(1)).unwrap();
                u32::from_be_bytes(p.data()[14 + 24..14 + 28].try_into().unwrap())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(seqs(0), vec![10, 13, 16]);
    assert_eq!(seqs(1), vec![11, 14, 17]);
    assert_eq!(seqs(2), vec![12, 15, 18]);
}

/// The window against a plain set of everything accepted.
fn window_matches_a_set(size: u64, seqs: &[u64]) -> Result<(), TestCaseError> {
    let mut w = ReplayWindow::new(size);
    let mut seen = std::collections::BTreeSet::new();
    let mut top = 0u64;
    for &s in seqs {
        let expect = s != 0 && (size == 0 || s > top || (top - s < size && !seen.contains(&s)));
        prop_assert_eq!(w.check(s), expect, "seq {} top {} size {}", s, top, size);
        if expect {
            w.accept(s);
            seen.insert(s);
            top = top.max(s);
        }
    }
    prop_assert_eq!(w.top(), top);
    Ok(())
}

proptest! {
    #[test]
    fn replay_window_is_a_sliding_set(
        size in prop::sample::select(vec![0u64, 1, 32, 64, 65, 200]),
        seqs in prop::collection::vec(0u64..400, 0..300),
    ) {
        window_matches_a_set(size, &seqs)?;
    }

    /// ESN inference gives back the sender's number whenever it lies within the window
    /// below the top, or less than 2^31 above it.
    #[test]
    fn esn_inference_recovers_numbers_near_the_top(
        top in 0u64..(1u64 << 40),
        size in 1u64..4096,
        delta in -4095i64..(1i64 << 31),
    ) {
        let mut w = ReplayWindow::new(size);
        if top > 0 {
            w.accept(top);
        }
        let seq = top as i64 + delta;
        prop_assume!(seq > 0);
        prop_assume!(delta >= 0 || (-delta as u64) < size);
        let seq = seq as u64;
        prop_assert_eq!(w.infer_esn(seq as u32), Some(seq));
    }

    /// Arbitrary bytes never panic either element; every packet is forwarded or dropped
    /// with a documented reason.
    #[test]
    fn garbage_is_forwarded_or_dropped(
        data in prop::collection::vec(any::<u8>(), 0..120),
        off in 0usize..40,
        esp in any::<bool>(),
    ) {
        let mut data = data;
        if esp && off + 20 <= data.len() {
            data[off] = 0x45;
            data[off + 9] = wire::ip::protocol::ESP;
            let len = (data.len() - off) as u16;
            data[off + 2..off + 4].copy_from_slice(&len.to_be_bytes());
            data[off + 6] = 0;
            data[off + 7] = 0;
            if off + 24 <= data.len() {
                data[off + 20..off + 24].copy_from_slice(&0x1234u32.to_be_bytes());
            }
        }
        for e in [encap(""), decap(""), decap(", ESN true")].iter_mut() {
            let mut p = Packet::from_bytes(&data);
            if off < data.len() {
                p.set_network_header(off);
            }
            let mut cx = Context::new(Timestamp(0));
            match e.push(0, p, &mut cx) {
                Verdict::Out(0, _) => {}
                Verdict::Drop(_, r) => {
                    let c = crate::registry::class(e.class_name()).unwrap();
                    prop_assert!(c.doc.documents_drop(r), "{}", r);
                }
                v => prop_assert!(false, "{:?}", v),
            }
        }
    }
}
