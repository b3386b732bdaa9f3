//! The bytestream operators: `Window` (reassembly, windows, ends, bounds, counters) and
//! `Packetizer` (segments, sequence numbers, lengths, checksums), and the two together.

use std::net::Ipv4Addr;
use std::time::Duration;

use operators::stream::{
    Direction, End, GapCause, Packetizer, Reassembler, Window, WindowError, WindowInfo, WindowKind,
};
use packet::{Packet, Timestamp};
use proptest::prelude::*;
use wire::build::Frame;
use wire::tcp::flags::{ACK, FIN, PSH, RST, SYN};

const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [10, 0, 0, 2];

/// A client → server segment.
fn c2s(seq: u32, flags: u8, payload: &[u8]) -> Packet {
    Packet::from_bytes(
        &Frame::tcp(CLIENT, SERVER, 40000, 80)
            .seq_ack(seq, 0)
            .flags(flags)
            .payload(payload)
            .build(),
    )
}

/// A server → client segment acknowledging `ack`.
fn s2c(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Packet {
    Packet::from_bytes(
        &Frame::tcp(SERVER, CLIENT, 80, 40000)
            .seq_ack(seq, ack)
            .flags(flags)
            .payload(payload)
            .build(),
    )
}

fn at(mut p: Packet, secs: u64) -> Packet {
    p.meta.timestamp = Timestamp::from_parts(secs, 0);
    p
}

type Calls = Vec<(WindowInfo, Vec<u8>)>;

/// A tumbling window of `size` recording its calls, fed `pkts`, then flushed.
fn run(size: usize, limit: usize, pkts: Vec<Packet>) -> (Calls, operators::stream::WindowStats) {
    let mut calls = Calls::new();
    let mut w = Window::new(size, size, Duration::MAX, |i: &WindowInfo, b: &[u8]| {
        calls.push((*i, b.to_vec()))
    })
    .unwrap()
    .buffer_limit(limit);
    for p in pkts {
        let before = p.data().to_vec();
        let back = w.process(p);
        assert_eq!(
            back.data(),
            &before[..],
            "the packet is handed back unchanged"
        );
    }
    w.flush();
    let stats = w.stats();
    drop(w);
    (calls, stats)
}

/// One stream's calls as pieces (offset, bytes), merging contiguous calls, plus its end.
fn pieces(calls: &Calls, conn: u64, dir: Direction) -> (Vec<(u64, Vec<u8>)>, Option<End>) {
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut end = None;
    for (i, b) in calls {
        if i.stream.connection != conn || i.stream.direction != dir {
            continue;
        }
        assert!(end.is_none(), "a call after the last one: {i:?}");
        if let WindowKind::Last(e) = i.kind {
            end = Some(e);
        }
        if b.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((o, v)) if *o + v.len() as u64 == i.offset => v.extend_from_slice(b),
            Some((o, v)) => {
                assert!(
                    i.offset > *o + v.len() as u64,
                    "offsets go backwards: {i:?}"
                );
                out.push((i.offset, b.clone()));
            }
            None => out.push((i.offset, b.clone())),
        }
    }
    (out, end)
}

/// The segments of `data` cut at `cuts`, with sequence numbers from `isn + 1`.
fn cut(data: &[u8], cuts: &[usize], isn: u32) -> Vec<(u32, Vec<u8>)> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    points.push(0);
    points.push(data.len());
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| {
            let seq = isn.wrapping_add(1).wrapping_add(w[0] as u32);
            (seq, data[w[0]..w[1]].to_vec())
        })
        .collect()
}

/// A deterministic shuffle (Fisher-Yates on an xorshift).
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    seed |= 1;
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

fn isn_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![any::<u32>(), (u32::MAX - 3000)..=u32::MAX]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any permutation of a stream's segments (the FIN among them), with retransmissions
    /// and overlapping re-segmented copies, reassembles to the stream's bytes, delivered
    /// once, and the stream ends at its FIN.
    #[test]
    fn any_permutation_reassembles(
        data in proptest::collection::vec(any::<u8>(), 0..3000),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
        isn in isn_strategy(),
        seed in any::<u64>(),
        extra in proptest::collection::vec((any::<usize>(), any::<usize>()), 0..6),
        size in 1usize..400,
    ) {
        let mut segs = cut(&data, &cuts, isn);
        if segs.is_empty() {
            segs.push((isn.wrapping_add(1), Vec::new())); // the bare FIN
        }
        // Retransmissions: copies of byte ranges cut differently (same bytes).
        for (a, b) in &extra {
            if data.is_empty() { break; }
            let (a, b) = (a % data.len(), b % data.len());
            let (lo, hi) = (a.min(b), a.max(b) + 1);
            segs.push((isn.wrapping_add(1).wrapping_add(lo as u32), data[lo..hi].to_vec()));
        }
        let n = segs.len();
        let mut order: Vec<usize> = (0..n).collect();
        shuffle(&mut order, seed);
        // The FIN rides on the first segment covering the stream's end, wherever it lands.
        let fin_at = segs.iter().position(|(s, p)| {
            s.wrapping_sub(isn.wrapping_add(1)) as usize + p.len() == data.len()
        }).unwrap();
        let mut pkts = vec![c2s(isn, SYN, &[])];
        for i in order {
            let (seq, p) = &segs[i];
            let fl = if i == fin_at { ACK | FIN } else { ACK };
            pkts.push(c2s(*seq, fl, p));
        }
        // Overlapping copies are buffered separately (the first received wins where they
        // join the stream), so a bound of every byte sent can never be passed.
        let sent: usize = segs.iter().map(|(_, p)| p.len()).sum();
        let (calls, stats) = run(size, sent.max(1), pkts);
        let (got, end) = pieces(&calls, 0, Direction::Client);
        let whole: Vec<u8> = got.iter().flat_map(|(_, b)| b.clone()).collect();
        prop_assert_eq!(&whole, &data);
        if !data.is_empty() {
            prop_assert_eq!(got.len(), 1);
            prop_assert_eq!(got[0].0, 0);
        }
        prop_assert_eq!(end, Some(End::Fin));
        prop_assert_eq!(stats.reassembly.bytes, data.len() as u64);
        prop_assert_eq!(stats.reassembly.overflows, 0);
        prop_assert_eq!(stats.reassembly.bytes_skipped, 0);
        // Every full window has `size` bytes.
        for (i, b) in &calls {
            if i.kind == WindowKind::Full { prop_assert_eq!(b.len(), size); }
        }
        // The server direction saw nothing and ends at the flush, empty.
        let (srv, srv_end) = pieces(&calls, 0, Direction::Server);
        prop_assert!(srv.is_empty());
        prop_assert_eq!(srv_end, Some(End::Flush));
    }

    /// With a small buffer bound, whatever the order: every byte delivered is the stream's
    /// byte at its offset, delivered and skipped bytes add up to the stream, and skipping
    /// happened only when the bound was hit.
    #[test]
    fn bounded_buffer_delivers_true_bytes(
        data in proptest::collection::vec(any::<u8>(), 1..3000),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
        isn in isn_strategy(),
        seed in any::<u64>(),
        limit in 0usize..1500,
    ) {
        let segs = cut(&data, &cuts, isn);
        let mut order: Vec<usize> = (0..segs.len()).collect();
        shuffle(&mut order, seed);
        let mut pkts = vec![c2s(isn, SYN, &[])];
        pkts.extend(order.iter().map(|&i| c2s(segs[i].0, ACK, &segs[i].1)));
        let (calls, stats) = run(64, limit, pkts);
        let (got, _) = pieces(&calls, 0, Direction::Client);
        let mut delivered = 0u64;
        for (off, b) in &got {
            let off = *off as usize;
            prop_assert_eq!(&b[..], &data[off..off + b.len()]);
            delivered += b.len() as u64;
        }
        let r = stats.reassembly;
        prop_assert_eq!(delivered, r.bytes);
        // The flush closes the stream: holes left are skipped then too.
        prop_assert_eq!(r.bytes + r.bytes_skipped, data.len() as u64);
        if r.overflows == 0 {
            prop_assert_eq!(r.bytes, data.len() as u64);
        }
    }

    /// Overlapping windows: each full window is the stream's bytes at its offset, offsets
    /// step by `slide`, and the last call holds the bytes not yet slid past.
    #[test]
    fn sliding_windows(
        data in proptest::collection::vec(any::<u8>(), 0..2000),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
        size in 1usize..300,
        slide_pct in 1usize..=100,
    ) {
        let slide = (size * slide_pct / 100).max(1);
        let mut pkts = vec![c2s(7, SYN, &[])];
        for (seq, p) in cut(&data, &cuts, 7) {
            pkts.push(c2s(seq, ACK, &p));
        }
        pkts.push(c2s(8 + data.len() as u32, ACK | FIN, &[]));
        let mut calls = Calls::new();
        let mut w = Window::new(size, slide, Duration::MAX, |i: &WindowInfo, b: &[u8]| {
            if i.stream.direction == Direction::Client { calls.push((*i, b.to_vec())) }
        }).unwrap();
        for p in &pkts { w.observe(p); }
        drop(w);
        let mut expect = 0u64;
        for (i, b) in &calls {
            let o = i.offset as usize;
            prop_assert_eq!(i.offset, expect);
            match i.kind {
                WindowKind::Full => {
                    prop_assert_eq!(&b[..], &data[o..o + size]);
                    expect += slide as u64;
                }
                WindowKind::Last(End::Fin) => prop_assert_eq!(&b[..], &data[o..]),
                k => prop_assert!(false, "unexpected call {:?}", k),
            }
        }
        let full = calls.iter().filter(|(i, _)| i.kind == WindowKind::Full).count();
        let want = if data.len() >= size { (data.len() - size) / slide + 1 } else { 0 };
        prop_assert_eq!(full, want);
        prop_assert!(matches!(calls.last(), Some((i, _)) if i.kind == WindowKind::Last(End::Fin)));
    }

    /// Packetize then reassemble gives the bytes back; every packet's checksums are valid,
    /// its lengths right and its sequence number where the bytes before it end.
    #[test]
    fn packetize_round_trip(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..2500), 0..5),
        mss in 1usize..1600,
        isn in isn_strategy(),
        ident in any::<u16>(),
    ) {
        let template = Frame::tcp(CLIENT, SERVER, 40000, 80)
            .seq_ack(isn.wrapping_add(1), 99)
            .flags(ACK | SYN | PSH)
            .ident(ident)
            .payload(b"template payload, cut off")
            .build();
        let mut pz = Packetizer::new(&template, mss).unwrap();
        let mut pkts = vec![c2s(isn, SYN, &[])];
        let mut sent = Vec::new();
        let mut want_ident = ident;
        for c in &chunks {
            let before = pz.next_seq();
            let out = pz.packetize(c);
            prop_assert_eq!(out.len(), c.len().div_ceil(mss));
            prop_assert_eq!(pz.next_seq(), before.wrapping_add(c.len() as u32));
            let mut seq = before;
            for (k, p) in out.iter().enumerate() {
                let ip = wire::ipv4::Packet::new_checked(&p.data()[14..]).unwrap();
                prop_assert!(ip.verify_checksum());
                prop_assert_eq!(usize::from(ip.total_len()), p.len() - 14);
                prop_assert_eq!(ip.ident(), want_ident);
                want_ident = want_ident.wrapping_add(1);
                let t = wire::tcp::Packet::new_checked(&p.data()[34..]).unwrap();
                prop_assert!(t.verify_checksum_v4(Ipv4Addr::from(CLIENT), Ipv4Addr::from(SERVER)));
                prop_assert_eq!(t.seq_number(), seq);
                prop_assert_eq!(t.ack_number(), 99);
                prop_assert!(t.payload().len() <= mss && !t.payload().is_empty());
                prop_assert_eq!(t.flags() & (SYN | FIN | RST), 0);
                prop_assert_eq!(t.flags() & PSH != 0, k + 1 == out.len());
                prop_assert_eq!(t.flags() & ACK, ACK);
                seq = seq.wrapping_add(t.payload().len() as u32);
            }
            sent.extend_from_slice(c);
            pkts.extend(out);
        }
        let fin = pz.fin();
        let t = wire::tcp::Packet::new_checked(&fin.data()[34..]).unwrap();
        prop_assert!(t.verify_checksum_v4(Ipv4Addr::from(CLIENT), Ipv4Addr::from(SERVER)));
        prop_assert_eq!(t.flags() & FIN, FIN);
        pkts.push(fin);
        let (calls, _) = run(100, 1 << 20, pkts);
        let (got, end) = pieces(&calls, 0, Direction::Client);
        let whole: Vec<u8> = got.into_iter().flat_map(|(_, b)| b).collect();
        prop_assert_eq!(whole, sent);
        prop_assert_eq!(end, Some(End::Fin));
    }

    /// Bad input never panics: arbitrary bytes, and arbitrary TCP headers and numbers.
    #[test]
    fn arbitrary_input_never_panics(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 0..30),
        segs in proptest::collection::vec((any::<u32>(), any::<u32>(), any::<u8>(), 0usize..50, any::<bool>()), 0..60),
        limit in 0usize..100,
    ) {
        let mut pkts: Vec<Packet> = frames.iter().map(|f| Packet::from_bytes(f)).collect();
        for (seq, ack, fl, len, dir) in &segs {
            let payload = vec![0x5a; *len];
            pkts.push(if *dir { c2s(*seq, *fl, &payload) } else { s2c(*seq, *ack, *fl, &payload) });
        }
        let (calls, stats) = run(7, limit, pkts);
        // Every stream opened ends exactly once.
        let lasts = calls.iter().filter(|(i, _)| matches!(i.kind, WindowKind::Last(_))).count();
        prop_assert_eq!(lasts as u64, stats.streams_opened);
    }
}

#[test]
fn window_arguments_checked() {
    let f = |_: &WindowInfo, _: &[u8]| {};
    assert_eq!(
        Window::new(0, 1, Duration::MAX, f).unwrap_err(),
        WindowError::ZeroSize
    );
    assert_eq!(
        Window::new(4, 0, Duration::MAX, f).unwrap_err(),
        WindowError::BadSlide { size: 4, slide: 0 }
    );
    assert_eq!(
        Window::new(4, 5, Duration::MAX, f).unwrap_err(),
        WindowError::BadSlide { size: 4, slide: 5 }
    );
    assert!(Window::new(4, 4, Duration::ZERO, f).is_ok());
}

#[test]
fn sequence_numbers_wrap() {
    let isn = u32::MAX - 4; // data from MAX-3: crosses 2^32 after four bytes
    let pkts = vec![
        c2s(isn, SYN, &[]),
        c2s(isn.wrapping_add(7), ACK, b"ghij"),
        c2s(isn.wrapping_add(1), ACK, b"abcdef"),
        c2s(isn.wrapping_add(11), ACK | FIN, b"k"),
    ];
    let (calls, stats) = run(3, 100, pkts);
    let (got, end) = pieces(&calls, 0, Direction::Client);
    assert_eq!(got, vec![(0, b"abcdefghijk".to_vec())]);
    assert_eq!(end, Some(End::Fin));
    assert_eq!(stats.reassembly.out_of_order, 1);
}

#[test]
fn duplicates_and_overlaps_first_covering_wins() {
    // A stream "0123456789"; out of order: [5,8) "XYZ" arrives before [4,9) "45678";
    // then [0,4) makes 4 the next byte: only "45678" covers it, so it supplies 4..9,
    // and "XYZ" (wholly behind by then) is dropped. A late retransmission of [0,4) with
    // other bytes changes nothing.
    let pkts = vec![
        c2s(0, SYN, &[]),
        c2s(6, ACK, b"XYZ"),
        c2s(5, ACK, b"45678"),
        c2s(1, ACK, b"0123"),
        c2s(1, ACK, b"abcd"),
        c2s(10, ACK | FIN, b"9"),
    ];
    let (calls, stats) = run(100, 100, pkts);
    let (got, _) = pieces(&calls, 0, Direction::Client);
    assert_eq!(got, vec![(0, b"0123456789".to_vec())]);
    assert_eq!(stats.reassembly.duplicates, 1);
    // When the earlier-received segment covers the next byte, it wins.
    let pkts = vec![
        c2s(0, SYN, &[]),
        c2s(4, ACK, b"XYZW"), // bytes 3..7
        c2s(3, ACK, b"cdef"), // bytes 2..6, received later
        c2s(1, ACK, b"abcd"), // bytes 0..4: next is 4, covered by "XYZW" only
        c2s(8, ACK | FIN, b""),
    ];
    let (calls, _) = run(100, 100, pkts);
    let (got, _) = pieces(&calls, 0, Direction::Client);
    // "abcd", then 4 is covered by "XYZW" (bytes 3..7) -> "YZW"; "cdef" is behind.
    assert_eq!(got, vec![(0, b"abcdYZW".to_vec())]);
}

#[test]
fn rst_ends_both_streams_with_what_is_left() {
    let pkts = vec![
        c2s(100, SYN, &[]),
        s2c(500, 101, SYN | ACK, &[]),
        c2s(101, ACK, b"hello "),
        c2s(112, ACK, b"after a hole"), // bytes 11.. : 5 bytes missing
        s2c(501, 107, ACK, b"srv"),
        s2c(504, 107, RST | ACK, &[]),
        c2s(124, ACK, b"late"),
    ];
    let (calls, stats) = run(4, 1000, pkts);
    let (cli, cend) = pieces(&calls, 0, Direction::Client);
    assert_eq!(
        cli,
        vec![(0, b"hello ".to_vec()), (11, b"after a hole".to_vec())]
    );
    assert_eq!(cend, Some(End::Rst));
    let (srv, send) = pieces(&calls, 0, Direction::Server);
    assert_eq!(srv, vec![(0, b"srv".to_vec())]);
    assert_eq!(send, Some(End::Rst));
    assert_eq!(stats.streams_closed, 2);
    assert_eq!(stats.after_close, 1, "the late segment opens nothing");
    assert_eq!(stats.connections, 1);
    assert_eq!(stats.reassembly.holes_skipped, 1);
    assert_eq!(stats.reassembly.bytes_skipped, 5);
    // The window cut before the hole is marked.
    assert!(calls
        .iter()
        .any(|(i, b)| i.kind == WindowKind::BeforeGap && b == b"o "));
}

#[test]
fn fin_waits_for_the_bytes_before_it() {
    let mut calls = Calls::new();
    let mut w = Window::new(1000, 1000, Duration::MAX, |i: &WindowInfo, b: &[u8]| {
        calls.push((*i, b.to_vec()))
    })
    .unwrap();
    w.observe(&c2s(0, SYN, &[]));
    w.observe(&c2s(4, ACK | FIN, b"def")); // FIN after byte 6; bytes 0..3 missing
    w.observe(&c2s(1, ACK, b"abc"));
    let stats = w.stats();
    drop(w);
    let (got, end) = pieces(&calls, 0, Direction::Client);
    assert_eq!(got, vec![(0, b"abcdef".to_vec())]);
    assert_eq!(end, Some(End::Fin));
    assert_eq!(stats.streams_closed, 1);
}

#[test]
fn timeout_in_packet_time() {
    let mut calls = Calls::new();
    let mut w = Window::new(
        1000,
        1000,
        Duration::from_secs(10),
        |i: &WindowInfo, b: &[u8]| calls.push((*i, b.to_vec())),
    )
    .unwrap();
    w.observe(&at(c2s(0, SYN, &[]), 100));
    w.observe(&at(c2s(1, ACK, b"abc"), 105));
    w.observe(&at(c2s(8, ACK, b"xyz"), 110)); // after a 4-byte hole
    assert_eq!(w.connections(), 1);
    // Ten seconds after the last packet is not more than the timeout.
    w.advance(Timestamp::from_parts(120, 0));
    assert_eq!(w.connections(), 1);
    // A packet of another connection moves packet time on: the first idles out.
    let other = Packet::from_bytes(&Frame::tcp([10, 9, 9, 9], SERVER, 1, 80).flags(SYN).build());
    w.observe(&at(other, 121));
    assert_eq!(w.connections(), 1);
    let stats = w.stats();
    assert_eq!(stats.streams_timed_out, 2);
    assert_eq!(w.now(), Timestamp::from_parts(121, 0));
    drop(w);
    let (got, end) = pieces(&calls, 0, Direction::Client);
    assert_eq!(got, vec![(0, b"abc".to_vec()), (7, b"xyz".to_vec())]);
    assert_eq!(end, Some(End::Timeout));
    assert_eq!(pieces(&calls, 0, Direction::Server).1, Some(End::Timeout));
    // The new connection is still open: no call for it.
    assert!(calls.iter().all(|(i, _)| i.stream.connection == 0));
}

#[test]
fn overflow_skips_the_hole_and_counts() {
    // Bound 8 bytes: two 5-byte out-of-order segments do not fit, so the first hole
    // (2..5) is skipped when the second arrives; it then fits, behind a hole (10..13) that
    // stays until the flush closes the stream.
    let pkts = vec![
        c2s(0, SYN, &[]),
        c2s(1, ACK, b"ab"),
        c2s(6, ACK, b"fghij"),  // 2..5 missing
        c2s(14, ACK, b"nopqr"), // 10..13 missing; over the bound
        c2s(19, ACK | FIN, b"s"),
    ];
    let (calls, stats) = run(100, 8, pkts);
    let (got, end) = pieces(&calls, 0, Direction::Client);
    assert_eq!(
        got,
        vec![
            (0, b"ab".to_vec()),
            (5, b"fghij".to_vec()),
            (13, b"nopqrs".to_vec())
        ]
    );
    assert_eq!(end, Some(End::Flush));
    let r = stats.reassembly;
    assert_eq!(r.overflows, 1);
    assert_eq!(r.holes_skipped, 2);
    assert_eq!(r.bytes_skipped, 3 + 3);
}

#[test]
fn acknowledged_hole_is_skipped() {
    let mut r = Reassembler::new(1000);
    let mut log = Vec::new();
    let mut sink = |d: operators::stream::Delivery<'_>| log.push(format!("{d:?}"));
    r.segment(0, true, false, &[], &mut sink);
    r.segment(1, false, false, b"ab", &mut sink);
    r.segment(6, false, false, b"fg", &mut sink);
    assert!(
        !r.acked(6, &mut sink),
        "an ack up to the hole's end skips nothing"
    );
    assert!(r.acked(7, &mut sink), "an ack past the hole's end does");
    assert_eq!(r.next_offset(), 7);
    assert_eq!(log.len(), 3);
    assert!(log[1].contains("Gap") && log[1].contains("len: 3") && log[1].contains("Acked"));
    let _ = GapCause::Acked;
}

#[test]
fn port_reuse_and_eviction() {
    let pkts = vec![
        c2s(0, SYN, &[]),
        c2s(1, ACK | FIN, b"one"),
        s2c(0, 5, ACK | FIN, &[]),
        c2s(5, ACK, &[]),    // the last ACK: the connection is closed, nothing opens
        c2s(1000, SYN, &[]), // a new SYN: a new connection on the same 5-tuple
        c2s(1001, ACK, b"two"),
    ];
    let (calls, stats) = run(100, 100, pkts);
    assert_eq!(stats.connections, 2);
    assert_eq!(stats.after_close, 1);
    assert_eq!(
        pieces(&calls, 0, Direction::Client),
        (vec![(0, b"one".to_vec())], Some(End::Fin))
    );
    assert_eq!(
        pieces(&calls, 1, Direction::Client),
        (vec![(0, b"two".to_vec())], Some(End::Flush))
    );
    // Table of one: a second connection evicts the first.
    let mut calls = Calls::new();
    let mut w = Window::new(10, 10, Duration::MAX, |i: &WindowInfo, b: &[u8]| {
        calls.push((*i, b.to_vec()))
    })
    .unwrap()
    .max_connections(1);
    w.observe(&c2s(1, ACK, b"x"));
    w.observe(&Packet::from_bytes(
        &Frame::tcp([10, 9, 9, 9], SERVER, 1, 80)
            .payload(b"y")
            .build(),
    ));
    assert_eq!(w.connections(), 1);
    assert_eq!(w.stats().streams_dropped, 2);
    drop(w);
    assert_eq!(
        pieces(&calls, 0, Direction::Client),
        (vec![(0, b"x".to_vec())], Some(End::Evicted))
    );
}

#[test]
fn ipv6_and_vlan_segments() {
    use std::net::Ipv6Addr;
    // IPv6 + TCP, built by hand: SYN, then "hi" and FIN.
    let build = |seq: u32, flags: u8, payload: &[u8]| {
        let src = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let dst = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
        let mut tcp = vec![0u8; 20];
        tcp.extend_from_slice(payload);
        {
            let mut t = wire::tcp::Packet::new_unchecked(&mut tcp[..]);
            t.set_src_port(5555);
            t.set_dst_port(443);
            t.set_seq_number(seq);
            t.set_header_len(20);
            t.set_flags(flags);
            t.fill_checksum_v6(src, dst);
        }
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[6, 64]);
        ip.extend_from_slice(&src.octets());
        ip.extend_from_slice(&dst.octets());
        ip.extend_from_slice(&tcp);
        let frame = wire::build::ethernet([2; 6], [4; 6], &[(0x8100, 7)], 0x86dd, &ip);
        Packet::from_bytes(&frame)
    };
    let (calls, _) = run(
        100,
        100,
        vec![
            build(9, SYN, &[]),
            build(10, ACK, b"hi"),
            build(12, ACK | FIN, &[]),
        ],
    );
    let (got, end) = pieces(&calls, 0, Direction::Client);
    assert_eq!(got, vec![(0, b"hi".to_vec())]);
    assert_eq!(end, Some(End::Fin));
    assert!(calls[0].0.stream.flow.src.is_ipv6());
}

#[test]
fn packetize_rejects_bad_templates() {
    use operators::stream::PacketizeError;
    let udp = Frame::udp(CLIENT, SERVER, 1, 2).build();
    assert_eq!(
        Packetizer::new(&udp, 100).unwrap_err(),
        PacketizeError::NotTcp
    );
    let tcp = Frame::tcp(CLIENT, SERVER, 1, 2).build();
    assert!(matches!(
        Packetizer::new(&tcp, 0),
        Err(PacketizeError::BadMss { mss: 0, .. })
    ));
    assert!(matches!(
        Packetizer::new(&tcp, 65_535 - 40 + 1),
        Err(PacketizeError::BadMss { max: 65_495, .. })
    ));
    assert!(Packetizer::new(&tcp, 65_495).is_ok());
    assert_eq!(
        Packetizer::new(&tcp[..12], 100).unwrap_err(),
        PacketizeError::NotIpv4
    );
    assert_eq!(
        Packetizer::new(&tcp[..30], 100).unwrap_err(),
        PacketizeError::Truncated
    );
    assert_eq!(
        Packetizer::new(&tcp[..50], 100).unwrap_err(),
        PacketizeError::Truncated
    );
    let arp = wire::build::Arp::request([2; 6], CLIENT, SERVER).build();
    assert_eq!(
        Packetizer::new(&arp, 100).unwrap_err(),
        PacketizeError::NotIpv4
    );
    let mut pz = Packetizer::new(&tcp, 100).unwrap();
    assert!(pz.packetize(&[]).is_empty());
    assert_eq!(pz.next_seq(), 0);
}

#[test]
fn window_packetize_pipeline() {
    // A proxy-like use: reassemble a stream, transform each window, packetize it again.
    let mut out_bytes = Vec::new();
    let template = Frame::tcp(SERVER, CLIENT, 80, 40000)
        .flags(ACK)
        .seq_ack(777, 1)
        .build();
    let mut pz = Packetizer::new(&template, 5).unwrap();
    let mut pkts_out = Vec::new();
    let mut w = Window::new(4, 4, Duration::MAX, |i: &WindowInfo, b: &[u8]| {
        if i.stream.direction == Direction::Client {
            let upper: Vec<u8> = b.to_ascii_uppercase();
            pkts_out.extend(pz.packetize(&upper));
        }
    })
    .unwrap();
    w.observe(&c2s(0, SYN, &[]));
    w.observe(&c2s(6, ACK, b"fghij"));
    w.observe(&c2s(1, ACK | PSH, b"abcde"));
    w.observe(&c2s(11, ACK | FIN, b"k"));
    drop(w);
    for p in &pkts_out {
        let t = wire::tcp::Packet::new_checked(&p.data()[34..]).unwrap();
        out_bytes.extend_from_slice(t.payload());
    }
    assert_eq!(out_bytes, b"ABCDEFGHIJK");
    let t = wire::tcp::Packet::new_checked(&pkts_out.last().unwrap().data()[34..]).unwrap();
    // Windows "abcd", "efgh", then the last call "ijk".
    assert_eq!(t.seq_number(), 777 + 8);
}

/// The overlap rule, written plainly: after each arrival, while a received segment covers
/// the next byte, the earliest received of those covering it supplies bytes to its end.
fn overlap_model(isn: u32, segs: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut got: Vec<(i64, &[u8])> = Vec::new();
    let mut out = Vec::new();
    for (seq, bytes) in segs {
        let start = i64::from(seq.wrapping_sub(isn.wrapping_add(1)) as i32);
        got.push((start, bytes));
        loop {
            let next = out.len() as i64;
            let Some(&(s, b)) = got
                .iter()
                .find(|(s, b)| *s <= next && next < s + b.len() as i64)
            else {
                break;
            };
            out.extend_from_slice(&b[(next - s) as usize..]);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Overlapping segments with different bytes (what an evasion attempt sends): the
    /// reassembler delivers what the plain statement of the rule says.
    #[test]
    fn overlaps_follow_the_rule(
        isn in isn_strategy(),
        segs in proptest::collection::vec((0u32..60, proptest::collection::vec(any::<u8>(), 1..20)), 1..25),
    ) {
        let segs: Vec<(u32, Vec<u8>)> = segs
            .into_iter()
            .map(|(off, b)| (isn.wrapping_add(1).wrapping_add(off), b))
            .collect();
        let mut r = Reassembler::new(1 << 20);
        let mut out = Vec::new();
        let mut sink = |d: operators::stream::Delivery<'_>| match d {
            operators::stream::Delivery::Data { offset, bytes } => {
                assert_eq!(offset as usize, out.len());
                out.extend_from_slice(bytes);
            }
            gap => panic!("no hole is skipped without a bound or an ack: {gap:?}"),
        };
        r.segment(isn, true, false, &[], &mut sink);
        for (seq, b) in &segs {
            r.segment(*seq, false, false, b, &mut sink);
        }
        prop_assert_eq!(out, overlap_model(isn, &segs));
    }
}
