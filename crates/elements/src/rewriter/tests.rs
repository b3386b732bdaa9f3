use super::*;
use crate::net::Names;
use packet::Timestamp;
use std::net::Ipv4Addr;
use std::path::Path;
use wire::build::{Frame, Sum};
use wire::checksum;

fn mk(class: &str, config: &str, names: &Names) -> Result<Box<dyn Element>, ConfigError> {
    let bcx = BuildCtx {
        name: "nf/rw",
        ninputs: 2,
        noutputs: 2,
        names,
        base_dir: Path::new("."),
    };
    crate::build(class, config, &bcx)
}

/// An IPv4 packet (no Ethernet header) with valid checksums (UDP's only if `udp_ck`);
/// network header annotation at 0.
fn ip_packet(
    proto: u8,
    src: [u8; 4],
    sport: u16,
    dst: [u8; 4],
    dport: u16,
    udp_ck: bool,
) -> Packet {
    let f = if proto == TCP {
        Frame::tcp(src, dst, sport, dport).flags(wire::tcp::flags::PSH | wire::tcp::flags::ACK)
    } else {
        Frame::udp(src, dst, sport, dport).l4_sum(if udp_ck { Sum::Valid } else { Sum::Zero })
    };
    let mut p = Packet::from_bytes(&f.ident(0x1234).payload(b"hello").no_ethernet().build());
    p.set_network_header(0);
    p
}

/// True if the IP header and transport checksums of `p` verify.
fn checksums_ok(p: &Packet) -> bool {
    let d = p.data();
    if checksum::data(&d[..20]) != 0 {
        return false;
    }
    let proto = d[9];
    let off = if proto == TCP { 36 } else { 26 };
    if proto == UDP && d[off] == 0 && d[off + 1] == 0 {
        return true;
    }
    let src: [u8; 4] = d[12..16].try_into().unwrap();
    let dst: [u8; 4] = d[16..20].try_into().unwrap();
    let s = checksum::combine(&[
        checksum::pseudo_header_v4(src, dst, proto, (d.len() - 20) as u16),
        checksum::sum(&d[20..]),
    ]);
    checksum::fold(s) == 0xffff
}

fn fields(p: &Packet) -> ([u8; 4], u16, [u8; 4], u16) {
    let d = p.data();
    (
        d[12..16].try_into().unwrap(),
        u16::from_be_bytes([d[20], d[21]]),
        d[16..20].try_into().unwrap(),
        u16::from_be_bytes([d[22], d[23]]),
    )
}

fn out(v: Verdict) -> (usize, Packet) {
    match v {
        Verdict::Out(o, p) => (o, p),
        other => panic!("expected Out, got {other:?}"),
    }
}

fn drop_reason(v: Verdict) -> &'static str {
    match v {
        Verdict::Drop(_, r) => r,
        other => panic!("expected Drop, got {other:?}"),
    }
}

fn at(s: u64) -> Context {
    Context::new(Timestamp(s * 1_000_000_000))
}

#[test]
fn napt_round_trip_restores_flow_and_checksums() {
    let names = Names::new();
    let mut rw = mk(
        "IPRewriter",
        "pattern 10.0.0.1 1000-9000 - - 0 1, drop",
        &names,
    )
    .unwrap();
    // Click's `1-/1-`: one input per specification, at least the outputs they name.
    assert_eq!(rw.port_count(), PortCount::range(2, 2, 2, usize::MAX));
    let p = ip_packet(UDP, [192, 168, 0, 5], 5353, [8, 8, 8, 8], 53, true);
    let (o, q) = out(rw.push(0, p, &mut at(1)));
    assert_eq!(o, 0);
    // The packet's own port 5353 is in range and free: kept.
    assert_eq!(fields(&q), ([10, 0, 0, 1], 5353, [8, 8, 8, 8], 53));
    assert!(checksums_ok(&q));
    assert_eq!(q.meta.dst_ip, Ipv4Addr::new(8, 8, 8, 8));
    // The reply comes back on input 1 and is restored.
    let r = ip_packet(UDP, [8, 8, 8, 8], 53, [10, 0, 0, 1], 5353, true);
    let (o, q) = out(rw.push(1, r, &mut at(2)));
    assert_eq!(o, 1);
    assert_eq!(fields(&q), ([8, 8, 8, 8], 53, [192, 168, 0, 5], 5353));
    assert!(checksums_ok(&q));
    assert_eq!(q.meta.dst_ip, Ipv4Addr::new(192, 168, 0, 5));
    // An unknown reply on input 1 is dropped by its `drop` spec.
    let r = ip_packet(UDP, [8, 8, 4, 4], 53, [10, 0, 0, 1], 5353, true);
    assert_eq!(drop_reason(rw.push(1, r, &mut at(2))), "rewriter-drop");
    let st = rw.stats();
    assert!(
        st.contains(&("mappings_created", 1))
            && st.contains(&("rewritten", 2))
            && st.contains(&("dropped", 1))
    );
}

#[test]
fn tcp_destination_rewrite_and_udp_zero_checksum() {
    let names = Names::new();
    let mut rw = mk(
        "IPRewriter",
        "pattern - - 10.1.1.2 - 0 1, pattern 10.0.0.1 1000-9000# - - 0 1",
        &names,
    )
    .unwrap();
    let p = ip_packet(TCP, [192, 168, 0, 7], 40000, [10, 0, 0, 1], 80, false);
    let (o, q) = out(rw.push(0, p, &mut at(1)));
    assert_eq!(o, 0);
    assert_eq!(fields(&q), ([192, 168, 0, 7], 40000, [10, 1, 1, 2], 80));
    assert!(checksums_ok(&q));
    let back = ip_packet(TCP, [10, 1, 1, 2], 80, [192, 168, 0, 7], 40000, false);
    let (o, q) = out(rw.push(0, back, &mut at(1)));
    assert_eq!(o, 1);
    assert_eq!(fields(&q), ([10, 0, 0, 1], 80, [192, 168, 0, 7], 40000));
    assert!(checksums_ok(&q));
    // UDP without checksum: stays 0.
    let u = ip_packet(UDP, [192, 168, 0, 7], 7000, [9, 9, 9, 9], 9, false);
    let (_, q) = out(rw.push(1, u, &mut at(1)));
    assert_eq!(fields(&q), ([10, 0, 0, 1], 1000, [9, 9, 9, 9], 9));
    assert_eq!(&q.data()[26..28], &[0, 0]);
    assert_eq!(checksum::data(&q.data()[..20]), 0);
}

#[test]
fn non_tcp_udp_dropped_or_passed() {
    let names = Names::new();
    let mut rw = mk("IPRewriter", "pattern 10.0.0.1 - - - 0 1, pass 1", &names).unwrap();
    let mut icmp = ip_packet(UDP, [1, 1, 1, 1], 1, [2, 2, 2, 2], 2, false);
    icmp.data_mut()[9] = 1;
    let icmp2 = icmp.duplicate();
    assert_eq!(drop_reason(rw.push(0, icmp, &mut at(1))), "not-tcp-udp");
    assert_eq!(out(rw.push(1, icmp2, &mut at(1))).0, 1);
    let mut frag = ip_packet(UDP, [1, 1, 1, 1], 1, [2, 2, 2, 2], 2, false);
    frag.data_mut()[7] = 10;
    assert_eq!(drop_reason(rw.push(0, frag, &mut at(1))), "ip-fragment");
    let mut bare = Packet::from_bytes(&[0x45; 10]);
    bare.set_network_header(0);
    assert_eq!(drop_reason(rw.push(0, bare, &mut at(1))), "bad-ip-header");
    let unannotated = Packet::from_bytes(&[0x45; 40]);
    assert_eq!(
        drop_reason(rw.push(0, unannotated, &mut at(1))),
        "bad-ip-header"
    );
    // TCPRewriter refuses UDP; UDPRewriter accepts TCP.
    let mut t = mk("TCPRewriter", "pattern 10.0.0.1 - - - 0 0", &names).unwrap();
    let u = ip_packet(UDP, [1, 1, 1, 1], 1, [2, 2, 2, 2], 2, false);
    assert_eq!(drop_reason(t.push(0, u, &mut at(1))), "not-tcp-udp");
    let mut u_rw = mk("UDPRewriter", "pattern 10.0.0.9 - - - 0 0", &names).unwrap();
    let tcp = ip_packet(TCP, [1, 1, 1, 1], 1, [2, 2, 2, 2], 2, false);
    let (_, q) = out(u_rw.push(0, tcp, &mut at(1)));
    assert_eq!(fields(&q).0, [10, 0, 0, 9]);
    assert!(checksums_ok(&q));
}

#[test]
fn sequential_prefer_own_and_random_allocation() {
    let names = Names::new();
    let mut seq = mk("IPRewriter", "pattern 10.0.0.1 2000-2999# - - 0 0", &names).unwrap();
    let mut got = Vec::new();
    for h in 1..=3u8 {
        let p = ip_packet(UDP, [192, 168, 0, h], 2500, [8, 8, 8, 8], 53, true);
        got.push(fields(&out(seq.push(0, p, &mut at(1))).1).1);
    }
    assert_eq!(got, vec![2000, 2001, 2002]);

    // No suffix: own port kept while free; a clash starts at the flow's pseudo-random point.
    let mut own = mk("IPRewriter", "pattern 10.0.0.1 2000-2999 - - 0 0", &names).unwrap();
    let p = ip_packet(UDP, [192, 168, 0, 1], 2500, [8, 8, 8, 8], 53, true);
    assert_eq!(fields(&out(own.push(0, p, &mut at(1))).1).1, 2500);
    let p = ip_packet(UDP, [192, 168, 0, 2], 2500, [8, 8, 8, 8], 53, true);
    let flow = FlowId {
        saddr: Ipv4Addr::new(192, 168, 0, 2),
        sport: 2500,
        daddr: Ipv4Addr::new(8, 8, 8, 8),
        dport: 53,
    };
    let expect = 2000 + (flow_random(name_seed("nf/rw"), UDP, &flow) % 1000) as u16;
    let expect = if expect == 2500 { 2501 } else { expect };
    assert_eq!(fields(&out(own.push(0, p, &mut at(1))).1).1, expect);

    // `?`: never the own port first, deterministic for a given element name.
    let mut a = mk("IPRewriter", "pattern 10.0.0.1 2000-2999? - - 0 0", &names).unwrap();
    let mut b = mk("IPRewriter", "pattern 10.0.0.1 2000-2999? - - 0 0", &names).unwrap();
    let p = ip_packet(UDP, [192, 168, 0, 1], 2500, [8, 8, 8, 8], 53, true);
    let pa = fields(&out(a.push(0, p.duplicate(), &mut at(1))).1).1;
    let pb = fields(&out(b.push(0, p, &mut at(1))).1).1;
    assert_eq!(pa, pb);
    let flow1 = FlowId {
        saddr: Ipv4Addr::new(192, 168, 0, 1),
        ..flow
    };
    assert_eq!(
        pa,
        2000 + (flow_random(name_seed("nf/rw"), UDP, &flow1) % 1000) as u16
    );
}

#[test]
fn ports_exhausted_and_address_ranges() {
    let names = Names::new();
    let mut rw = mk("IPRewriter", "pattern 10.0.0.1 1000-1001 - - 0 0", &names).unwrap();
    for h in 1..=2u8 {
        let p = ip_packet(UDP, [192, 168, 0, h], 5, [8, 8, 8, 8], 53, true);
        assert!(matches!(rw.push(0, p, &mut at(1)), Verdict::Out(0, _)));
    }
    let p = ip_packet(UDP, [192, 168, 0, 3], 5, [8, 8, 8, 8], 53, true);
    assert_eq!(drop_reason(rw.push(0, p, &mut at(1))), "no-free-port");

    let mut ar = mk("IPRewriter", "pattern 10.0.0.0/30# - - - 0 0", &names).unwrap();
    // /30: .1 and .2 (the .0 and broadcast addresses are left out).
    let mut got = Vec::new();
    for h in 1..=3u8 {
        let p = ip_packet(UDP, [192, 168, 0, h], 5, [8, 8, 8, 8], 53, true);
        match ar.push(0, p, &mut at(1)) {
            Verdict::Out(_, q) => got.push(fields(&q).0[3]),
            Verdict::Drop(_, r) => assert_eq!(r, "no-free-port"),
            Verdict::Done => unreachable!(),
        }
    }
    assert_eq!(got, vec![1, 2]);
}

#[test]
fn round_robin_mapper_alternates_per_new_flow() {
    let mut names = Names::new();
    names.add_mapper(
        "rr",
        "RoundRobinIPMapper",
        "- - 10.0.0.1 - 0 1, - - 10.0.0.2 - 0 1",
    );
    let mut rw = mk("IPRewriter", "rr", &names).unwrap();
    let mut dsts = Vec::new();
    for (h, repeat) in [(1u8, 2), (2, 1), (3, 1)] {
        for _ in 0..repeat {
            let p = ip_packet(TCP, [192, 168, 0, h], 4000, [1, 2, 3, 4], 80, false);
            dsts.push(fields(&out(rw.push(0, p, &mut at(1))).1).2[3]);
        }
    }
    assert_eq!(dsts, vec![1, 1, 2, 1]);
    let m = mk("RoundRobinIPMapper", "- - 10.0.0.1 - 0 1", &names).unwrap();
    assert_eq!(m.port_count(), PortCount::exact(0, 0));
    let mut bad = Names::new();
    bad.add_mapper("q", "Queue", "");
    assert!(mk("IPRewriter", "q", &bad)
        .err()
        .unwrap()
        .message
        .contains("IPMapper"));
}

#[test]
fn mappings_time_out_on_the_virtual_clock() {
    let names = Names::new();
    let mut rw = mk(
        "IPRewriter",
        "pattern 10.0.0.1 1000-1999# - - 0 1, UDP_TIMEOUT 10, UDP_GUARANTEE 0",
        &names,
    )
    .unwrap();
    let p = || ip_packet(UDP, [192, 168, 0, 1], 5, [8, 8, 8, 8], 53, true);
    assert_eq!(fields(&out(rw.push(0, p(), &mut at(0))).1).1, 1000);
    assert_eq!(fields(&out(rw.push(0, p(), &mut at(9))).1).1, 1000);
    // 10 s after the last packet the mapping is gone: a new one (next sequential port).
    assert_eq!(fields(&out(rw.push(0, p(), &mut at(19))).1).1, 1001);
    let st = rw.stats();
    assert!(st.contains(&("mappings_created", 2)) && st.contains(&("active_mappings", 1)));
}

#[test]
fn named_patterns_and_config_errors() {
    let mut names = Names::new();
    names.add_patterns("nat 10.0.0.1 1000-2000 - -").unwrap();
    names.add_address_info("ext 10.9.9.9").unwrap();
    let rw = mk(
        "IPRewriter",
        "pattern nat 0 1, pattern ext 53 - - 0 1, keep 1 0",
        &names,
    )
    .unwrap();
    let r = rw.as_any().downcast_ref::<IPRewriter>().unwrap();
    assert_eq!(r.specs().len(), 3);
    match &r.specs()[1] {
        InputSpec::Pattern { pattern, .. } => {
            assert_eq!(pattern.saddr, Some(Ipv4Addr::new(10, 9, 9, 9)));
            assert_eq!(pattern.sport, Some(53));
        }
        other => panic!("{other:?}"),
    }
    for (cfg, needle) in [
        ("", "INPUTSPEC"),
        ("frobnicate", "frobnicate"),
        ("pattern 10.0.0.1 1000-900 - - 0 1", "source port"),
        ("pattern 10.0.0.0/24 1-5 - - 0 1", "only one"),
        ("pattern 10.0.0 - - - 0 1", "source address"),
        ("pattern nope 0 1", "pattern name"),
        ("keep 0", "keep FOUTPUT ROUTPUT"),
        ("drop 1", "drop"),
        ("pass 0, UDP_TIMEOUT soon", "UDP_TIMEOUT"),
        ("pass 0, COLOR 1", "unknown keyword"),
    ] {
        let e = mk("IPRewriter", cfg, &names).err().unwrap();
        assert!(e.message.contains(needle), "{cfg}: {}", e.message);
    }
}

#[test]
fn tcp_fin_shortens_timeout() {
    let names = Names::new();
    let mut rw = mk(
        "TCPRewriter",
        "pattern 10.0.0.1 - - - 0 1, TCP_DONE_TIMEOUT 2, TCP_GUARANTEE 0",
        &names,
    )
    .unwrap();
    let mk_fin = |fwd: bool| {
        let mut p = if fwd {
            ip_packet(TCP, [192, 168, 0, 1], 4000, [1, 1, 1, 1], 80, false)
        } else {
            ip_packet(TCP, [1, 1, 1, 1], 80, [10, 0, 0, 1], 4000, false)
        };
        p.data_mut()[33] = 0x11; // FIN|ACK (checksum no longer matters here)
        p
    };
    assert_eq!(out(rw.push(0, mk_fin(true), &mut at(0))).0, 0);
    assert_eq!(out(rw.push(1, mk_fin(false), &mut at(1))).0, 1);
    // Both directions done: the mapping lasts TCP_DONE_TIMEOUT (2 s) after the last packet.
    let r = rw.as_any().downcast_ref::<IPRewriter>().unwrap();
    assert_eq!(
        r.table().flows().next().map(|(_, f)| f.expiry),
        Some(3_000_000_000)
    );
}

/// Two replicas of a NAPT told they are workers 0 and 1 of 2 allocate from disjoint halves
/// of the port range; their pools name the full range and steer each allocated port back
/// to the worker that made it.
#[test]
fn worker_shares_allocate_disjoint_ports_and_steer_replies_home() {
    let names = Names::default();
    let config = "pattern 10.0.0.1 1000-9000# - - 0 1, drop";
    let mut seen = Vec::new();
    for w in 0..2 {
        let mut e = mk("IPRewriter", config, &names).unwrap();
        let share = e.worker_share().expect("a rewriter has a worker share");
        let pools = share.pools();
        assert_eq!(pools.len(), 1);
        assert_eq!(pools[0].ports, Some((1000, 8001)));
        share.narrow(w, 2).unwrap();
        let mut cx = Context::new(Timestamp(1));
        for i in 0..50u16 {
            let p = ip_packet(UDP, [192, 168, 0, 1], 2000 + i, [10, 0, 2, 1], 53, true);
            let Verdict::Out(0, q) = e.push(0, p, &mut cx) else {
                panic!("the NAPT maps every UDP flow")
            };
            let (src, sport, _, _) = fields(&q);
            assert_eq!(src, [10, 0, 0, 1]);
            let range = if w == 0 { 1000..=4999 } else { 5000..=9000 };
            assert!(range.contains(&sport), "worker {w}: port {sport}");
            assert_eq!(
                pools[0].owner(Ipv4Addr::new(10, 0, 0, 1), sport, 2),
                Some(w)
            );
            seen.push(sport);
        }
    }
    let mut unique = seen.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "no port handed out twice");
}

#[test]
fn worker_shares_refuse_ranges_smaller_than_the_workers() {
    let names = Names::default();
    let mut e = mk(
        "IPRewriter",
        "pattern 10.0.0.1 1000-1002 - - 0 1, drop",
        &names,
    )
    .unwrap();
    let share = e.worker_share().unwrap();
    let err = share.narrow(0, 4).unwrap_err();
    assert_eq!((err.count, err.workers), (3, 4));
    assert_eq!(share.pools()[0].ports, Some((1000, 3)), "unchanged");
    share.narrow(2, 3).unwrap();
    assert_eq!(share.pools()[0].ports, Some((1002, 1)));
    // An address range is split by addresses; a pattern keeping the address has no pool
    // replies can be recognised by.
    let mut e = mk(
        "IPRewriter",
        "pattern 10.0.0.0/24 - - - 0 1, pattern - 2000-2999 - - 0 1",
        &names,
    )
    .unwrap();
    let pools = e.worker_share().unwrap().pools();
    assert_eq!(pools[0].sliced, crate::capability::Sliced::Addresses);
    assert_eq!(pools[0].addrs, Some((Ipv4Addr::new(10, 0, 0, 1), 254)));
    assert_eq!(pools[1].owner(Ipv4Addr::new(1, 2, 3, 4), 2500, 2), None);
    let mut m = mk("MazuNAT", "EXTERNAL 10.1.1.1, PORTS 50000-50009", &names).unwrap();
    let share = m.worker_share().expect("MazuNAT has its rewriter's share");
    share.narrow(1, 2).unwrap();
    assert_eq!(share.pools()[0].ports, Some((50005, 5)));
}

// Short transport headers, against Click's rules (`elements/tcpudp/iprewriter.cc`,
// `tcprewriter.cc`, `udprewriter.cc`): fewer than 8 transport bytes are refused; a TCP
// segment with 8 to 17 is mapped by its ports but `TCPFlow::apply` (IPRewriter,
// TCPRewriter) rewrites only the addresses and the IP checksum, `UDPFlow::apply`
// (UDPRewriter) the ports as well; from 18 bytes the TCP checksum is updated too. The
// expected bytes are built here from those rules with Click's checksum arithmetic
// (`click_update_in_cksum`, the per-flow deltas of `IPRewriterFlow`), not from FuseBox's
// helpers.

/// The transport checksum the short packets carry (Click does not check it).
const SHORT_CK: u16 = 0xb1c5;

/// One's-complement sum of the IPv4 header `h`, as a checksum (RFC 791), computed here.
fn header_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, w) in h.chunks(2).enumerate() {
        if i != 5 {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Click's `click_update_in_cksum(csum, old, new)`.
fn click_update(ck: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!ck) + u32::from(!old) + u32::from(new);
    sum = (sum & 0xffff) + (sum >> 16);
    !((sum + (sum >> 16)) as u16)
}

/// Click's `IPRewriterFlow::update_csum` for a packet in `reply` direction with the flow's
/// delta from the words `old` to `new` (the `_udp_csum_delta` of the constructor).
fn click_apply(ck: u16, old: &[u16], new: &[u16], reply: bool) -> u16 {
    let delta = old
        .iter()
        .zip(new)
        .fold(0u16, |d, (&o, &n)| click_update(d, o, n));
    if delta == 0 {
        return ck;
    }
    click_update(ck, 0, if reply { delta } else { !delta })
}

/// The 16-bit words of a flow identifier in Click's `IPFlowID` order (saddr, daddr, sport,
/// dport).
fn words(s: [u8; 4], d: [u8; 4], sp: u16, dp: u16) -> [u16; 6] {
    [
        u16::from_be_bytes([s[0], s[1]]),
        u16::from_be_bytes([s[2], s[3]]),
        u16::from_be_bytes([d[0], d[1]]),
        u16::from_be_bytes([d[2], d[3]]),
        sp,
        dp,
    ]
}

/// An IPv4 packet whose transport part is the first `n` bytes of a TCP header with `flags`
/// (sequence numbers, data offset 5, window, checksum [`SHORT_CK`]) or of a UDP datagram
/// (checksum [`SHORT_CK`], payload 0xaa), the IP total length `20 + n`, IP checksum valid.
fn short_packet(
    proto: u8,
    s: [u8; 4],
    sp: u16,
    d: [u8; 4],
    dp: u16,
    n: usize,
    flags: u8,
) -> Vec<u8> {
    let mut l4 = Vec::new();
    l4.extend_from_slice(&sp.to_be_bytes());
    l4.extend_from_slice(&dp.to_be_bytes());
    if proto == TCP {
        l4.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0x50, flags, 0x20, 0]);
        l4.extend_from_slice(&SHORT_CK.to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
    } else {
        l4.extend_from_slice(&(n as u16).to_be_bytes());
        l4.extend_from_slice(&SHORT_CK.to_be_bytes());
    }
    l4.resize(32, 0xaa);
    let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, proto, 0, 0];
    ip[2..4].copy_from_slice(&((20 + n) as u16).to_be_bytes());
    ip.extend_from_slice(&s);
    ip.extend_from_slice(&d);
    let ck = header_checksum(&ip);
    ip[10..12].copy_from_slice(&ck.to_be_bytes());
    ip.extend_from_slice(&l4[..n]);
    ip
}

/// What Click makes of `input` (from `short_packet`) rewritten to `to`, in the `reply`
/// direction of a flow whose identifiers are `from_flow` → `to_flow` (Click's deltas),
/// for a rewriter whose TCP flows are `TCPFlow`s (`tcp_flow`) or `UDPFlow`s.
fn click_expect(
    input: &[u8],
    to: ([u8; 4], u16, [u8; 4], u16),
    deltas: ([u16; 6], [u16; 6]),
    reply: bool,
    tcp_flow: bool,
) -> Vec<u8> {
    let mut e = input.to_vec();
    let proto = e[9];
    let n = e.len() - 20;
    // IP header: addresses, and the IP checksum by the address delta.
    e[12..16].copy_from_slice(&to.0);
    e[16..20].copy_from_slice(&to.2);
    let ipck = u16::from_be_bytes([e[10], e[11]]);
    let ipck = click_apply(ipck, &deltas.0[..4], &deltas.1[..4], reply);
    e[10..12].copy_from_slice(&ipck.to_be_bytes());
    let ports = proto == UDP || !tcp_flow || n >= 18;
    if ports {
        e[20..22].copy_from_slice(&to.1.to_be_bytes());
        e[22..24].copy_from_slice(&to.3.to_be_bytes());
    }
    let ck_at = if proto == TCP { 36 } else { 26 };
    if (proto == TCP && n >= 18) || proto == UDP {
        let ck = u16::from_be_bytes([e[ck_at], e[ck_at + 1]]);
        let ck = click_apply(ck, &deltas.0, &deltas.1, reply);
        assert!(
            ck != 0 && ck != 0xffff,
            "a test value without the ±0 question"
        );
        e[ck_at..ck_at + 2].copy_from_slice(&ck.to_be_bytes());
    }
    e
}

/// The expiry (whole seconds of virtual time) of the first mapping in `rw`'s table.
fn expiry(rw: &dyn Element) -> Option<u64> {
    let r = rw.as_any().downcast_ref::<IPRewriter>().unwrap();
    r.table()
        .flows()
        .next()
        .map(|(_, f)| f.expiry / 1_000_000_000)
}

fn push_bytes(rw: &mut Box<dyn Element>, port: usize, bytes: &[u8], t: u64) -> Verdict {
    let mut p = Packet::from_bytes(bytes);
    p.set_network_header(0);
    rw.push(port, p, &mut at(t))
}

const INSIDE: [u8; 4] = [192, 168, 0, 2];
const OUTSIDE: [u8; 4] = [1, 2, 3, 4];
const PUBLIC: [u8; 4] = [10, 0, 0, 1];

#[test]
fn short_transport_rewritten_as_click_does() {
    let names = Names::new();
    for class in ["IPRewriter", "TCPRewriter", "UDPRewriter"] {
        for proto in [TCP, UDP] {
            if class == "TCPRewriter" && proto == UDP {
                continue;
            }
            // TCP flows of IPRewriter and TCPRewriter are Click's TCPFlows.
            let tcp_flow = class != "UDPRewriter";
            for n in [7usize, 8, 12, 16, 17, 18, 19, 20] {
                let mut rw = mk(class, "pattern 10.0.0.1 5000 - - 0 1, pass 1", &names).unwrap();
                let fwd = short_packet(proto, INSIDE, 4000, OUTSIDE, 80, n, 0x10);
                let what = format!("{class} proto {proto} with {n} transport bytes");
                if n < 8 {
                    // Refused: dropped on a pattern input, passed unchanged on `pass 1`.
                    assert_eq!(
                        drop_reason(push_bytes(&mut rw, 0, &fwd, 1)),
                        "short-transport",
                        "{what}"
                    );
                    let (o, q) = out(push_bytes(&mut rw, 1, &fwd, 1));
                    assert_eq!((o, q.data()), (1, &fwd[..]), "{what}");
                    continue;
                }
                let deltas = (
                    words(INSIDE, OUTSIDE, 4000, 80),
                    words(PUBLIC, OUTSIDE, 5000, 80),
                );
                let (o, q) = out(push_bytes(&mut rw, 0, &fwd, 1));
                let want = click_expect(&fwd, (PUBLIC, 5000, OUTSIDE, 80), deltas, false, tcp_flow);
                assert_eq!((o, q.data()), (0, &want[..]), "forward: {what}");
                assert_eq!(q.meta.dst_ip, Ipv4Addr::from(OUTSIDE), "{what}");
                // The reply finds the mapping by its ports and is translated back.
                let rep = short_packet(proto, OUTSIDE, 80, PUBLIC, 5000, n, 0x10);
                let (o, q) = out(push_bytes(&mut rw, 1, &rep, 2));
                let want = click_expect(&rep, (OUTSIDE, 80, INSIDE, 4000), deltas, true, tcp_flow);
                assert_eq!((o, q.data()), (1, &want[..]), "reply: {what}");
                let st = rw.stats();
                assert!(
                    st.contains(&("mappings_created", 1)) && st.contains(&("rewritten", 2)),
                    "{what}: {st:?}"
                );
            }
        }
    }
}

#[test]
fn a_short_segment_makes_the_mapping_a_whole_one_uses() {
    // Click maps a short segment by its ports: a later whole segment of the flow takes the
    // same mapping (and has its ports rewritten).
    let names = Names::new();
    let mut rw = mk("IPRewriter", "pattern 10.0.0.1 5000-5009 - - 0 1", &names).unwrap();
    let short = short_packet(TCP, INSIDE, 4000, OUTSIDE, 80, 12, 0x02);
    let (_, q) = out(push_bytes(&mut rw, 0, &short, 1));
    assert_eq!(&q.data()[12..16], &PUBLIC);
    assert_eq!(&q.data()[20..24], &short[20..24], "ports stay");
    let whole = short_packet(TCP, INSIDE, 4000, OUTSIDE, 80, 20, 0x10);
    let (_, q) = out(push_bytes(&mut rw, 0, &whole, 2));
    let sport = u16::from_be_bytes([q.data()[20], q.data()[21]]);
    assert!((5000..=5009).contains(&sport));
    assert!(rw.stats().contains(&("mappings_created", 1)));
}

#[test]
fn short_segments_leave_the_tcp_state_alone() {
    // FIN in both directions marks a TCPFlow done (TCP_DONE_TIMEOUT) only when Click reads
    // the flags: from 18 transport bytes on. With 17 the flags byte is there but unread, and
    // the mapping keeps the no-data timeout.
    let names = Names::new();
    for (n, done) in [(14usize, false), (17, false), (18, true), (20, true)] {
        let mut rw = mk(
            "IPRewriter",
            "pattern 10.0.0.1 5000 - - 0 1, pass 1, TCP_DONE_TIMEOUT 2, TCP_NODATA_TIMEOUT 30, TCP_GUARANTEE 0",
            &names,
        )
        .unwrap();
        let fin = 0x11;
        out(push_bytes(
            &mut rw,
            0,
            &short_packet(TCP, INSIDE, 4000, OUTSIDE, 80, n, fin),
            0,
        ));
        out(push_bytes(
            &mut rw,
            1,
            &short_packet(TCP, OUTSIDE, 80, PUBLIC, 5000, n, fin),
            1,
        ));
        let want = if done { 3 } else { 31 };
        assert_eq!(expiry(rw.as_ref()), Some(want), "{n} transport bytes");
    }
}

#[test]
fn data_reopens_a_finished_direction() {
    // Click's TCPFlow::apply: RST ends both directions, else FIN its own, else a SYN or a
    // segment with payload reopens its direction.
    let names = Names::new();
    let mut rw = mk(
        "IPRewriter",
        "pattern 10.0.0.1 5000 - - 0 1, pass 1, TCP_DONE_TIMEOUT 2, TCP_NODATA_TIMEOUT 30, TCP_TIMEOUT 100, TCP_GUARANTEE 0",
        &names,
    )
    .unwrap();
    let seg = |fwd: bool, flags: u8, payload: bool| {
        let mut p = if fwd {
            short_packet(TCP, INSIDE, 4000, OUTSIDE, 80, 20, flags)
        } else {
            short_packet(TCP, OUTSIDE, 80, PUBLIC, 5000, 20, flags)
        };
        if payload {
            p.extend_from_slice(b"data");
            let len = p.len() as u16;
            p[2..4].copy_from_slice(&len.to_be_bytes());
            p[10..12].copy_from_slice(&[0, 0]);
            let ck = header_checksum(&p[..20]);
            p[10..12].copy_from_slice(&ck.to_be_bytes());
        }
        p
    };
    out(push_bytes(&mut rw, 0, &seg(true, 0x11, false), 0));
    out(push_bytes(&mut rw, 1, &seg(false, 0x11, false), 1));
    assert_eq!(expiry(rw.as_ref()), Some(3), "both done");
    // Data forward: the forward direction is open again (and has seen data).
    out(push_bytes(&mut rw, 0, &seg(true, 0x10, true), 2));
    assert_eq!(expiry(rw.as_ref()), Some(32), "not done, no data both ways");
    // Data back: both directions have data, neither is done.
    out(push_bytes(&mut rw, 1, &seg(false, 0x10, true), 3));
    assert_eq!(expiry(rw.as_ref()), Some(103));
}

#[test]
fn mapping_capacity_evicts_then_refuses_and_counts_both() {
    let names = Names::new();
    let mut rw = mk(
        "IPRewriter",
        "pattern 10.0.0.1 1000-1999# - - 0 1, drop, MAPPING_CAPACITY 3, UDP_GUARANTEE 2",
        &names,
    )
    .unwrap();
    let p = |h: u8| ip_packet(UDP, [192, 168, 0, h], 5, [8, 8, 8, 8], 53, true);
    // Three flows fill the table at 0, 1 and 2 s.
    for h in 0..3u8 {
        out(rw.push(0, p(h), &mut at(u64::from(h))));
    }
    // At 3 s the first flow's guarantee (2 s) has passed: the fourth flow evicts it.
    out(rw.push(0, p(3), &mut at(3)));
    // Still at 3 s, flows 1 (guaranteed until 3 s: passed) then 2 (until 4 s): the fifth
    // flow evicts flow 1, the sixth finds every flow guaranteed and is dropped.
    out(rw.push(0, p(4), &mut at(3)));
    assert_eq!(
        drop_reason(rw.push(0, p(5), &mut at(3))),
        "mapping-table-full"
    );
    // Flow 0 lost its mapping: its next packet is a new flow (refused too).
    assert_eq!(
        drop_reason(rw.push(0, p(0), &mut at(3))),
        "mapping-table-full"
    );
    let st = rw.stats();
    for want in [
        ("mappings_created", 5),
        ("active_mappings", 3),
        ("mappings_evicted", 2),
        ("mappings_refused", 2),
        ("dropped", 2),
    ] {
        assert!(st.contains(&want), "{want:?} in {st:?}");
    }
    // A reply of an evicted flow finds no mapping.
    let mut reply = ip_packet(UDP, [8, 8, 8, 8], 53, [10, 0, 0, 1], 1000, true);
    reply.set_network_header(0);
    assert_eq!(drop_reason(rw.push(1, reply, &mut at(3))), "rewriter-drop");
}

#[test]
fn mapping_capacity_defaults_to_a_bound() {
    let names = Names::new();
    let rw = IPRewriter::configure(
        RewriterKind::Ip,
        &Args::parse("pattern 10.0.0.1 1000-1999 - - 0 1").unwrap(),
        &BuildCtx {
            name: "nf/rw",
            ninputs: 1,
            noutputs: 2,
            names: &names,
            base_dir: Path::new("."),
        },
    )
    .unwrap();
    assert_eq!(rw.table().capacity(), DEFAULT_CAPACITY);
}

#[test]
fn udp_rewriter_times_tcp_out_as_udp() {
    // Click's UDPRewriter keeps UDPFlows for TCP too: the UDP timeout (TIMEOUT), the
    // streaming timeout after 3 packets with a reply, and FIN/RST change nothing.
    let names = Names::new();
    let mut rw = mk(
        "UDPRewriter",
        "pattern 10.0.0.1 5000 - - 0 1, pass 1, TIMEOUT 10, STREAMING_TIMEOUT 50, GUARANTEE 0, TCP_DONE_TIMEOUT 2",
        &names,
    )
    .unwrap();
    let fin = 0x11;
    out(push_bytes(
        &mut rw,
        0,
        &short_packet(TCP, INSIDE, 4000, OUTSIDE, 80, 20, fin),
        0,
    ));
    assert_eq!(expiry(rw.as_ref()), Some(10));
    out(push_bytes(
        &mut rw,
        1,
        &short_packet(TCP, OUTSIDE, 80, PUBLIC, 5000, 20, fin),
        1,
    ));
    assert_eq!(
        expiry(rw.as_ref()),
        Some(11),
        "two packets: not streaming yet"
    );
    out(push_bytes(
        &mut rw,
        0,
        &short_packet(TCP, INSIDE, 4000, OUTSIDE, 80, 20, 0x04),
        2,
    ));
    assert_eq!(
        expiry(rw.as_ref()),
        Some(52),
        "streaming; the RST is not read"
    );
    // TCPRewriter: the same segments are TCP state (FIN both ways, then RST: done).
    let mut t = mk(
        "TCPRewriter",
        "pattern 10.0.0.1 5000 - - 0 1, pass 1, TCP_GUARANTEE 0, TCP_DONE_TIMEOUT 2",
        &names,
    )
    .unwrap();
    out(push_bytes(
        &mut t,
        0,
        &short_packet(TCP, INSIDE, 4000, OUTSIDE, 80, 20, 0x04),
        0,
    ));
    assert_eq!(expiry(t.as_ref()), Some(2));
}
