//! Property tests of the operator algebra: what composing operators must mean, checked
//! against plain models over byte vectors on generated packets.
//!
//! * `group_by` then `merge` keeps every packet exactly once: each packet in leaves by the
//!   merge, a `send` or a drop, once, with what its own branch did to it, in input order;
//! * `parse` then `deparse` is the identity on bytes, and a packet a parse refuses is
//!   dropped unchanged under that header's reason (headers accepted as the docs say);
//! * `filter(a)` then `filter(b)` keeps and drops what `filter(a && b)` does;
//! * `transform(f)` then `transform(g)` is `transform(f; g)`, `map(f)` then `map(g)` is
//!   `map(g ∘ f)`, both as the byte model says;
//! * arbitrary bytes never make parse, deparse, a header view's getters or setters, or the
//!   payload operations panic.

use operators::pipe::NO_GROUP;
use operators::{pipe, Cx, Ethernet, Ipv4, Pkt, Raw, Stage, Tcp, Udp};
use packet::Packet;
use proptest::prelude::*;

/// Frames: arbitrary bytes, and UDP or TCP frames (random addresses, ports, TTL and
/// payload), some with bytes overwritten and some cut short.
fn frames() -> impl Strategy<Value = Vec<u8>> {
    let built = (
        any::<bool>(),
        any::<[u8; 4]>(),
        any::<[u8; 4]>(),
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(tcp, src, dst, sport, dport, ttl, payload)| {
            let f = if tcp {
                wire::build::Frame::tcp(src, dst, sport, dport)
            } else {
                wire::build::Frame::udp(src, dst, sport, dport)
            };
            f.ttl(ttl).payload(&payload).build()
        });
    let damaged = (
        built.clone(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(mut f, writes, cut, truncate)| {
            for (at, v) in writes {
                let at = at.index(f.len());
                f[at] = v;
            }
            if truncate {
                f.truncate(cut.index(f.len() + 1));
            }
            f
        });
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..80),
        built,
        damaged,
    ]
}

fn pkt(bytes: &[u8]) -> Pkt {
    Pkt::new(Packet::from_bytes(bytes))
}

// ---------------------------------------------------------------------------------------
// group_by / merge

/// What one group's branch does.
#[derive(Debug, Clone, Copy)]
enum Branch {
    /// No branch given: the group's packets go straight to the merge.
    Empty,
    /// A branch with no operators.
    Pass,
    /// Keeps the packets whose byte `at` (if there is one) is below `below`.
    Filter { at: usize, below: u8 },
    /// Sends every packet out of `port`.
    Send(usize),
    /// Writes `value` at byte `at` (if there is one; never the packet's 4-byte tag).
    Write { at: usize, value: u8 },
    /// Parses an Ethernet header and pops it again (frames under 14 bytes are dropped).
    ParseDeparse,
}

fn branches() -> impl Strategy<Value = Branch> {
    prop_oneof![
        Just(Branch::Empty),
        Just(Branch::Pass),
        (0usize..24, any::<u8>()).prop_map(|(at, below)| Branch::Filter { at, below }),
        (1usize..4).prop_map(Branch::Send),
        (4usize..24, any::<u8>()).prop_map(|(at, value)| Branch::Write { at, value }),
        Just(Branch::ParseDeparse),
    ]
}

fn keep(data: &[u8], at: usize, below: u8) -> bool {
    data.get(at).is_none_or(|&v| v < below)
}

fn write(data: &mut [u8], at: usize, value: u8) {
    if let Some(b) = data.get_mut(at) {
        *b = value;
    }
}

/// The group of a packet: its byte 4 modulo `n + 1` (so that some fall outside the `n`
/// groups), group 0 when it has none.
fn group_of(data: &[u8], n: usize) -> usize {
    data.get(4).map_or(0, |&b| usize::from(b) % (n + 1))
}

/// Where a packet ends up.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fate {
    Out(Vec<u8>),
    Sent(usize, Vec<u8>),
    Dropped(&'static str, Vec<u8>),
}

/// The model of `group_by(n, group_of).branch(..)…merge().transform(append 0xaa)`.
fn model_group(branches: &[Branch], data: &[u8]) -> Fate {
    let mut d = data.to_vec();
    let after_merge = |mut d: Vec<u8>| {
        d.push(0xaa);
        Fate::Out(d)
    };
    match branches.get(group_of(data, branches.len())) {
        None => Fate::Dropped(NO_GROUP, d),
        Some(Branch::Empty | Branch::Pass) => after_merge(d),
        Some(&Branch::Filter { at, below }) => match keep(&d, at, below) {
            true => after_merge(d),
            false => Fate::Dropped("branch-filter", d),
        },
        Some(&Branch::Send(port)) => Fate::Sent(port, d),
        Some(&Branch::Write { at, value }) => {
            write(&mut d, at, value);
            after_merge(d)
        }
        Some(Branch::ParseDeparse) => match d.len() >= 14 {
            true => after_merge(d),
            false => Fate::Dropped("parse-ethernet", d),
        },
    }
}

/// What left a pipeline by its end, what it sent (with the port) and what it dropped (with
/// the reason), each in order.
type Outcome = (
    Vec<Vec<u8>>,
    Vec<(usize, Vec<u8>)>,
    Vec<(&'static str, Vec<u8>)>,
);

/// Runs `inputs` through `nf`; what left by its end, what it sent, what it dropped, each in
/// order.
fn run_all<St: Stage<Pkt, Out = Pkt<S, M>>, S: operators::Stack, M>(
    nf: &mut St,
    inputs: &[Vec<u8>],
) -> Outcome {
    let mut cx = Cx::default();
    let mut out = Vec::new();
    for i in inputs {
        if let Some(p) = nf.run(pkt(i), &mut cx) {
            out.push(p.data().to_vec());
        }
    }
    let sent = cx
        .take_sent()
        .map(|(q, p)| (q, p.data().to_vec()))
        .collect();
    let dropped = cx
        .take_dropped()
        .map(|(p, r)| (r, p.data().to_vec()))
        .collect();
    (out, sent, dropped)
}

fn tag(id: usize, frame: &[u8]) -> Vec<u8> {
    let mut v = (id as u32).to_be_bytes().to_vec();
    v.extend_from_slice(frame);
    v
}

fn id_of(d: &[u8]) -> u32 {
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn group_by_then_merge_keeps_every_packet_once(
        spec in proptest::collection::vec(branches(), 1..6),
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..30), 0..60),
    ) {
        let n = spec.len();
        let inputs: Vec<Vec<u8>> = frames.iter().enumerate().map(|(i, f)| tag(i, f)).collect();
        let mut g = pipe::<Raw, ()>().group_by(n, move |p| group_of(p.data(), n));
        for (i, b) in spec.iter().enumerate() {
            g = match *b {
                Branch::Empty => g,
                Branch::Pass => g.branch(i, |b| b),
                Branch::Filter { at, below } => {
                    g.branch(i, move |b| b.filter("branch-filter", move |p| keep(p.data(), at, below)))
                }
                Branch::Send(port) => g.branch(i, move |b| b.send(port)),
                Branch::Write { at, value } => {
                    g.branch(i, move |b| b.transform(move |p| write(p.payload_mut(), at, value)))
                }
                Branch::ParseDeparse => g.branch(i, |b| b.parse::<Ethernet>().deparse()),
            };
        }
        let mut nf = g.merge().transform(|p| p.extend_payload(&[0xaa])).into_stage();
        let (out, sent, dropped) = run_all(&mut nf, &inputs);

        // Exactly once: the tags of everything that left are the tags that came in.
        let mut ids: Vec<u32> = out.iter().map(|d| id_of(d))
            .chain(sent.iter().map(|(_, d)| id_of(d)))
            .chain(dropped.iter().map(|(_, d)| id_of(d)))
            .collect();
        ids.sort_unstable();
        prop_assert_eq!(ids, (0..inputs.len() as u32).collect::<Vec<_>>());
        // Order: what leaves by the merge (so each branch's packets too) in input order.
        prop_assert!(out.windows(2).all(|w| id_of(&w[0]) < id_of(&w[1])));
        // And each packet as its own branch left it.
        let (mut mo, mut ms, mut md) = (Vec::new(), Vec::new(), Vec::new());
        for i in &inputs {
            match model_group(&spec, i) {
                Fate::Out(d) => mo.push(d),
                Fate::Sent(q, d) => ms.push((q, d)),
                Fate::Dropped(r, d) => md.push((r, d)),
            }
        }
        prop_assert_eq!(out, mo);
        prop_assert_eq!(sent, ms);
        prop_assert_eq!(dropped, md);
    }
}

// ---------------------------------------------------------------------------------------
// parse / deparse

/// The drop reason the documented header rules give a frame parsed as Ethernet, IPv4,
/// then UDP (`None`: all three parse).
fn model_parse_udp(f: &[u8]) -> Option<&'static str> {
    if f.len() < 14 {
        return Some("parse-ethernet");
    }
    let ip = &f[14..];
    let ipv4_ok = f[12..14] == [0x08, 0x00]
        && ip.len() >= 4
        && ip[0] >> 4 == 4
        && usize::from(ip[0] & 0x0f) * 4 >= 20
        && usize::from(ip[0] & 0x0f) * 4 <= ip.len()
        && usize::from(u16::from_be_bytes([ip[2], ip[3]])) >= usize::from(ip[0] & 0x0f) * 4;
    if !ipv4_ok {
        return Some("parse-ipv4");
    }
    let hl = usize::from(ip[0] & 0x0f) * 4;
    let first_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff == 0;
    match ip[9] == 17 && first_fragment && ip.len() - hl >= 8 {
        true => None,
        false => Some("parse-udp"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parse_then_deparse_is_the_identity(f in frames()) {
        // Step by step: each parse either gives the packet back unchanged or splits it into
        // header and payload at the header's length; deparsing gives every byte back.
        let back: Vec<u8> = match pkt(&f).parse::<Ethernet>() {
            Err(p) => p.data().to_vec(),
            Ok(p) => {
                prop_assert_eq!(p.payload(), &f[14..]);
                prop_assert_eq!(p.header().ethertype(), u16::from_be_bytes([f[12], f[13]]));
                match p.parse::<Ipv4>() {
                    Err(p) => p.deparse().into_packet().data().to_vec(),
                    Ok(p) => {
                        let hl = usize::from(f[14] & 0x0f) * 4;
                        prop_assert_eq!(p.payload(), &f[14 + hl..]);
                        match p.parse::<Tcp>() {
                            Ok(p) => {
                                let thl = usize::from(f[14 + hl + 12] >> 4) * 4;
                                prop_assert_eq!(p.payload(), &f[14 + hl + thl..]);
                                p.deparse().deparse().deparse().into_packet().data().to_vec()
                            }
                            Err(p) => match p.parse::<Udp>() {
                                Ok(p) => {
                                    prop_assert_eq!(p.payload(), &f[14 + hl + 8..]);
                                    p.deparse().deparse().deparse().into_packet().data().to_vec()
                                }
                                Err(p) => p.deparse().deparse().into_packet().data().to_vec(),
                            },
                        }
                    }
                }
            }
        };
        prop_assert_eq!(&back, &f);

        // As operators: parse x3 then deparse x3 hands on the same bytes, or drops the
        // packet unchanged under the first header it does not hold.
        let mut nf = pipe::<Raw, ()>()
            .parse::<Ethernet>()
            .parse::<Ipv4>()
            .parse::<Udp>()
            .deparse()
            .deparse()
            .deparse()
            .into_stage();
        let (out, sent, dropped) = run_all(&mut nf, std::slice::from_ref(&f));
        prop_assert!(sent.is_empty());
        match model_parse_udp(&f) {
            None => {
                prop_assert_eq!(out, vec![f.clone()]);
                prop_assert!(dropped.is_empty());
            }
            Some(reason) => {
                prop_assert!(out.is_empty());
                prop_assert_eq!(dropped, vec![(reason, f.clone())]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// filter, transform, map

/// A predicate of the family the filter laws are checked over.
#[derive(Debug, Clone, Copy)]
enum Pred {
    ByteBelow(usize, u8),
    LenAtLeast(usize),
    Parity(usize),
}

fn preds() -> impl Strategy<Value = Pred> {
    prop_oneof![
        (0usize..40, any::<u8>()).prop_map(|(a, b)| Pred::ByteBelow(a, b)),
        (0usize..80).prop_map(Pred::LenAtLeast),
        (0usize..40).prop_map(Pred::Parity),
    ]
}

fn holds(p: Pred, d: &[u8]) -> bool {
    match p {
        Pred::ByteBelow(at, below) => keep(d, at, below),
        Pred::LenAtLeast(n) => d.len() >= n,
        Pred::Parity(at) => d.get(at).is_some_and(|b| b % 2 == 0),
    }
}

/// A change of a packet's bytes.
#[derive(Debug, Clone)]
enum Op {
    Write(usize, u8),
    Truncate(usize),
    Extend(Vec<u8>),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        prop_oneof![
            (0usize..80, any::<u8>()).prop_map(|(a, v)| Op::Write(a, v)),
            (0usize..80).prop_map(Op::Truncate),
            proptest::collection::vec(any::<u8>(), 0..8).prop_map(Op::Extend),
        ],
        0..4,
    )
}

fn apply_pkt<S: operators::Stack, M>(ops: &[Op], p: &mut Pkt<S, M>) {
    for op in ops {
        match op {
            Op::Write(at, v) => write(p.payload_mut(), *at, *v),
            Op::Truncate(n) => p.truncate_payload(*n),
            Op::Extend(b) => p.extend_payload(b),
        }
    }
}

fn apply_vec(ops: &[Op], d: &mut Vec<u8>) {
    for op in ops {
        match op {
            Op::Write(at, v) => write(d, *at, *v),
            Op::Truncate(n) => d.truncate(*n),
            Op::Extend(b) => d.extend_from_slice(b),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn filter_then_filter_is_the_conjunction(
        a in preds(),
        b in preds(),
        inputs in proptest::collection::vec(frames(), 0..40),
    ) {
        let mut two = pipe::<Raw, ()>()
            .filter("a", move |p| holds(a, p.data()))
            .filter("b", move |p| holds(b, p.data()))
            .into_stage();
        let mut one = pipe::<Raw, ()>()
            .filter("a-and-b", move |p| holds(a, p.data()) && holds(b, p.data()))
            .into_stage();
        let (out2, sent2, drop2) = run_all(&mut two, &inputs);
        let (out1, sent1, drop1) = run_all(&mut one, &inputs);
        prop_assert_eq!(&out2, &out1);
        prop_assert!(sent1.is_empty() && sent2.is_empty());
        // The same packets dropped, in the same order; the two filters name the first
        // predicate that failed.
        let bytes = |v: &[(&str, Vec<u8>)]| v.iter().map(|(_, d)| d.clone()).collect::<Vec<_>>();
        prop_assert_eq!(bytes(&drop2), bytes(&drop1));
        for (r, d) in &drop2 {
            prop_assert_eq!(*r, if holds(a, d) { "b" } else { "a" });
        }
        let kept: Vec<Vec<u8>> = inputs.iter().filter(|d| holds(a, d) && holds(b, d)).cloned().collect();
        prop_assert_eq!(out1, kept);
    }

    #[test]
    fn transform_and_map_compose(
        f in ops(),
        g in ops(),
        inputs in proptest::collection::vec(frames(), 0..30),
    ) {
        let (f1, g1, f2, g2) = (f.clone(), g.clone(), f.clone(), g.clone());
        let mut two = pipe::<Raw, ()>()
            .transform(move |p| apply_pkt(&f1, p))
            .transform(move |p| apply_pkt(&g1, p))
            .into_stage();
        let mut one = pipe::<Raw, ()>()
            .transform(move |p| {
                apply_pkt(&f2, p);
                apply_pkt(&g2, p);
            })
            .into_stage();
        let (out2, ..) = run_all(&mut two, &inputs);
        let (out1, ..) = run_all(&mut one, &inputs);
        let model: Vec<Vec<u8>> = inputs
            .iter()
            .map(|d| {
                let mut d = d.clone();
                apply_vec(&f, &mut d);
                apply_vec(&g, &mut d);
                d
            })
            .collect();
        prop_assert_eq!(&out2, &model);
        prop_assert_eq!(&out1, &model);

        // map(f) then map(g) is map(g ∘ f), metadata included.
        let step1 = |p: Pkt| {
            let n = p.len() as u64;
            p.with_meta(n)
        };
        let step2 = |mut p: Pkt<Raw, u64>| {
            let m = *p.meta() * 3 + 1;
            p.extend_payload(&[m as u8]);
            p.with_meta(m)
        };
        let mut maps2 = pipe::<Raw, ()>().map(step1).map(step2).into_stage();
        let mut maps1 = pipe::<Raw, ()>().map(move |p| step2(step1(p))).into_stage();
        let mut cx = Cx::default();
        for d in &inputs {
            let a = maps2.run(pkt(d), &mut cx).unwrap();
            let b = maps1.run(pkt(d), &mut cx).unwrap();
            let m = d.len() as u64 * 3 + 1;
            prop_assert_eq!((a.data(), *a.meta()), (b.data(), *b.meta()));
            prop_assert_eq!(*a.meta(), m);
            prop_assert_eq!(a.data().last(), Some(&(m as u8)));
        }
    }
}

// ---------------------------------------------------------------------------------------
// bad input

/// Reads every field of every view a packet's bytes parse into, writes some back, and
/// moves the payload around; nothing may panic. Returns a digest so nothing is optimised
/// away.
fn touch_everything(f: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut mix = |v: u64| acc = acc.rotate_left(5) ^ v;
    let p = pkt(f);
    mix(p.header().len() as u64);
    mix(p.flow().map_or(0, |k| u64::from(k.rss_hash())));
    let Ok(mut p) = p.parse::<Ethernet>() else {
        return acc;
    };
    {
        let e = p.header();
        mix(u64::from(e.ethertype()));
        mix(e.payload().len() as u64);
        mix(u64::from(e.src_addr().is_unicast()) + u64::from(e.dst_addr().is_broadcast()));
    }
    let ethertype = p.header().ethertype();
    p.header_mut().set_ethertype(ethertype);
    let Ok(mut p) = p.parse::<Ipv4>() else {
        return acc;
    };
    {
        let ip = p.header();
        mix(u64::from(ip.version()) + ip.header_len() as u64 + u64::from(ip.tos()));
        mix(u64::from(ip.total_len()) + u64::from(ip.ident()) + u64::from(ip.flags_frag_raw()));
        mix(u64::from(ip.frag_offset()) + u64::from(ip.ttl()) + u64::from(ip.protocol()));
        mix(u64::from(ip.checksum()) + u64::from(u32::from(ip.src_addr())));
        mix(u64::from(u32::from(ip.dst_addr())) + ip.options().len() as u64);
        mix(ip.payload().len() as u64 + u64::from(ip.verify_checksum()));
        mix(u64::from(ip.is_fragment()) + u64::from(ip.dont_frag()) + u64::from(ip.more_frags()));
    }
    {
        let mut ip = p.header_mut();
        let ttl = ip.ttl().wrapping_sub(1);
        ip.set_ttl(ttl);
        ip.fill_checksum();
        mix(ip.payload_mut().len() as u64 + ip.options_mut().len() as u64);
    }
    let (src, dst) = (p.header().src_addr(), p.header().dst_addr());
    p.truncate_payload(p.payload().len().saturating_sub(1));
    p.extend_payload(&[0x5a]);
    let p = match p.parse::<Tcp>() {
        Ok(mut p) => {
            {
                let t = p.header();
                mix(u64::from(t.src_port()) + u64::from(t.dst_port()) + u64::from(t.seq_number()));
                mix(u64::from(t.ack_number()) + t.header_len() as u64 + u64::from(t.flags()));
                mix(u64::from(t.window_len()) + u64::from(t.checksum()) + u64::from(t.urgent_at()));
                mix(t.options().len() as u64 + t.payload().len() as u64);
                mix(u64::from(t.verify_checksum_v4(src, dst)) + u64::from(t.has_flags(0x12)));
            }
            let mut t = p.header_mut();
            t.set_seq_number(t.seq_number().wrapping_add(1));
            t.fill_checksum_v4(src, dst);
            mix(t.payload_mut().len() as u64);
            p.deparse()
        }
        Err(p) => match p.parse::<Udp>() {
            Ok(mut p) => {
                {
                    let u = p.header();
                    mix(u64::from(u.src_port()) + u64::from(u.dst_port()) + u64::from(u.len()));
                    mix(u64::from(u.checksum()) + u.payload().len() as u64);
                    mix(u64::from(u.verify_checksum_v4(src, dst)));
                }
                let mut u = p.header_mut();
                u.set_dst_port(u.dst_port().wrapping_add(1));
                u.fill_checksum_v4(src, dst);
                mix(u.payload_mut().len() as u64);
                p.deparse()
            }
            Err(p) => p,
        },
    };
    let p = p.deparse().deparse().reset();
    mix(p.len() as u64);
    acc
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_never_panic(f in frames()) {
        let _ = touch_everything(&f);
        // And through a pipeline with every operator.
        let mut nf = pipe::<Raw, ()>()
            .parse::<Ethernet>()
            .parse::<Ipv4>()
            .transform(|p| {
                let t = p.header().ttl().wrapping_sub(1);
                p.header_mut().set_ttl(t);
            })
            .group_by(3, operators::pipe::group::by_flow(3))
            .branch(1, |b| b.parse::<Tcp>().deparse())
            .branch(2, |b| b.parse::<Udp>().deparse())
            .merge()
            .filter("odd", |p| p.len() % 2 == 0)
            .deparse()
            .deparse()
            .into_stage();
        let (out, sent, dropped) = run_all(&mut nf, std::slice::from_ref(&f));
        prop_assert_eq!(out.len() + sent.len() + dropped.len(), 1);
    }
}
