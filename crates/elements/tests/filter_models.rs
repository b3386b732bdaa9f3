//! The semantic models of `IPClassifier`, `IPFilter` and `Classifier` against the elements:
//! a pattern compiled to header space holds exactly on the packets `Expr::matches` accepts,
//! and a model's first matching case sends every packet where `push` does.

use elements::ipfilter::space::compile;
use elements::ipfilter::{parse_pattern, Expr, View};
use elements::model::{self, Field, FieldSet, Filter, FilterSet, IpAnchor, Model, Outcome};
use elements::{build, BuildCtx, Context, Element, Names, Verdict};
use packet::Packet;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use std::path::Path;

// ---------------------------------------------------------------------------------------
// Packets.

/// Where the network-header annotation goes.
#[derive(Debug, Clone, Copy)]
enum NetAnno {
    /// At the IPv4 header.
    AtIp,
    /// Not set.
    Unset,
    /// At this offset into the data (anywhere, even past the end).
    At(usize),
}

/// A packet description: an IPv4 packet (possibly malformed), maybe behind an Ethernet
/// header, maybe cut short, with annotations.
#[derive(Debug, Clone)]
struct Spec {
    eth: Option<([u8; 12], u16)>,
    vers: u8,
    ihl: u8,
    tos: u8,
    len: Option<u16>,
    id: u16,
    ff: u16,
    ttl: u8,
    proto: u8,
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
    tcp_flags: u8,
    fill: u8,
    payload: usize,
    cut: Option<usize>,
    net: NetAnno,
    /// Set the transport annotation at the IPv4 header plus IHL × 4 (as `MarkIPHeader` and
    /// `CheckIPHeader` do); always set when IHL < 5, where `View::of` would otherwise find no
    /// transport header while the model's convention puts it at IHL × 4.
    transport: bool,
    mac: bool,
    paint: u8,
}

impl Spec {
    fn frame(&self) -> (Vec<u8>, usize) {
        let mut f = Vec::new();
        if let Some((macs, et)) = self.eth {
            f.extend_from_slice(&macs);
            f.extend_from_slice(&et.to_be_bytes());
        }
        let ip_at = f.len();
        let hl = usize::from(self.ihl) * 4;
        let mut ip = vec![(self.vers << 4) | self.ihl, self.tos, 0, 0];
        ip.extend_from_slice(&self.id.to_be_bytes());
        ip.extend_from_slice(&self.ff.to_be_bytes());
        ip.extend_from_slice(&[self.ttl, self.proto, 0xc5, 0x3a]);
        ip.extend_from_slice(&self.src.to_be_bytes());
        ip.extend_from_slice(&self.dst.to_be_bytes());
        while ip.len() < hl {
            ip.push(self.fill);
        }
        ip.truncate(hl.max(20));
        // A transport header where the model expects it (IHL × 4 from the IP header).
        let mut l4 = Vec::new();
        l4.extend_from_slice(&self.sport.to_be_bytes());
        l4.extend_from_slice(&self.dport.to_be_bytes());
        l4.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, self.tcp_flags, 0x20, 0]);
        l4.extend_from_slice(&[0, 0, 0, 0]);
        l4.extend(std::iter::repeat_n(self.fill, self.payload));
        if hl < 20 {
            // The transport header overlaps the 20-byte header: write it over.
            let mut whole = ip[..hl].to_vec();
            whole.extend_from_slice(&l4);
            if whole.len() < 20 {
                whole.extend_from_slice(&ip[whole.len()..]);
            }
            ip = whole;
        } else {
            ip.extend_from_slice(&l4);
        }
        let total = self.len.unwrap_or(ip.len() as u16);
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&ip);
        if let Some(n) = self.cut {
            f.truncate(n);
        }
        (f, ip_at)
    }

    fn packet(&self) -> Packet {
        let (f, ip_at) = self.frame();
        let mut p = Packet::from_bytes(&f);
        p.meta.paint = self.paint;
        if self.mac {
            p.set_mac_header(0);
        }
        let net = match self.net {
            NetAnno::AtIp => Some(ip_at),
            NetAnno::Unset => None,
            NetAnno::At(o) => Some(o),
        };
        if let Some(off) = net {
            p.set_network_header(off);
            let hl = f.get(off).map_or(0, |b| usize::from(b & 0x0f) * 4);
            if self.transport || hl < 20 {
                p.set_transport_header(off + hl);
            }
        }
        p
    }
}

fn pool<T: Copy + std::fmt::Debug + 'static>(
    v: &'static [T],
    any: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<T> {
    prop_oneof![3 => proptest::sample::select(v), 1 => any].boxed()
}

const ADDRS: &[u32] = &[
    0x0a00_0001, // 10.0.0.1
    0x0a00_0002, // 10.0.0.2
    0x0a00_0909, // 10.0.9.9
    0x0a01_0001, // 10.1.0.1
    0xc0a8_0102, // 192.168.1.2
    0xc0a8_014d, // 192.168.1.77
    0xc0a8_0201, // 192.168.2.1
    0x0101_0101, // 1.1.1.1
];
const PORTS: &[u16] = &[
    0, 22, 53, 80, 443, 1023, 1024, 5353, 65535, 0x1234, 0x0800, 0x0300, 0x0b00, 0x1010, 0x1011,
];

prop_compose! {
    fn ip_part()(
        vers in prop_oneof![6 => Just(4u8), 1 => 0u8..16],
        ihl in prop_oneof![8 => Just(5u8), 2 => 6u8..8, 1 => Just(15u8), 1 => 0u8..5],
        tos in pool(&[0u8, 1, 2, 3, 0xb8, 0xb9], any::<u8>()),
        len in prop_oneof![
            3 => Just(None),
            1 => pool(&[0u16, 20, 40, 41, 60], any::<u16>()).prop_map(Some),
        ],
        id in pool(&[0u16, 0x1234, 1000], any::<u16>()),
        ff in prop_oneof![
            4 => proptest::sample::select(&[0u16, 0x4000, 0x2000][..]),
            2 => proptest::sample::select(&[0x2001u16, 0x0005, 0x4005, 0x8000, 0x0010, 0x1fff][..]),
            1 => any::<u16>(),
        ],
        ttl in pool(&[0u8, 1, 2, 10, 64, 255], any::<u8>()),
        proto in prop_oneof![
            4 => proptest::sample::select(&[1u8, 6, 17][..]),
            1 => proptest::sample::select(&[0u8, 33, 47, 255][..]),
            1 => any::<u8>(),
        ],
        src in pool(ADDRS, any::<u32>()),
        dst in pool(ADDRS, any::<u32>()),
    ) -> (u8, u8, u8, Option<u16>, u16, u16, u8, u8, u32, u32) {
        (vers, ihl, tos, len, id, ff, ttl, proto, src, dst)
    }
}

prop_compose! {
    fn spec()(
        ip in ip_part(),
        eth in prop_oneof![
            4 => Just(Some(([0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x02, 0, 0, 0, 0, 1], wire::ethernet::ethertype::IPV4))),
            1 => (any::<[u8; 12]>(), any::<u16>()).prop_map(Some),
            1 => Just(None),
        ],
        sport in prop_oneof![
            3 => proptest::sample::select(PORTS),
            2 => proptest::sample::select(&[0x0000u16, 0x0800, 0x0300, 0x0b00, 0x0801][..]),
            1 => any::<u16>(),
        ],
        dport in pool(PORTS, any::<u16>()),
        tcp_flags in pool(&[0x02u8, 0x12, 0x10, 0x11, 0x04, 0x18], any::<u8>()),
        fill in any::<u8>(),
        payload in 0usize..12,
        cut in prop_oneof![3 => Just(None), 1 => (0usize..80).prop_map(Some)],
        net in prop_oneof![
            6 => Just(NetAnno::AtIp),
            1 => Just(NetAnno::Unset),
            1 => (0usize..90).prop_map(NetAnno::At),
        ],
        transport in any::<bool>(),
        mac in any::<bool>(),
        paint in any::<u8>(),
    ) -> Spec {
        let (vers, ihl, tos, len, id, ff, ttl, proto, src, dst) = ip;
        Spec {
            eth, vers, ihl, tos, len, id, ff, ttl, proto, src, dst, sport, dport, tcp_flags,
            fill, payload, cut, net, transport, mac, paint,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Patterns.

/// Every primitive the parser supports, with operators, masks and elision. Those marked in
/// [`OPAQUE`] cannot be compiled exactly.
const PRIMITIVES: &[&str] = &[
    "tcp",
    "udp",
    "icmp",
    "ip proto 47",
    "ip proto != 6",
    "ip proto > 6",
    "ip proto < 17",
    "ip proto <= 6",
    "ip proto >= 17",
    "ip proto tcpudp",
    "ip proto & 0xf0 == 0",
    "ip proto 1 or 17",
    "src host 10.0.0.1",
    "dst host 192.168.1.2",
    "host 10.0.0.2",
    "src and dst host 10.0.0.1",
    "src or dst host 1.1.1.1",
    "host != 10.0.0.1",
    "dst host != 192.168.1.2",
    "src host & 255.255.0.0 10.0.0.1",
    "src host 1.1.1.1 or 10.0.0.1",
    "tcp src host 10.0.0.1",
    "src net 10/8",
    "dst net 192.168.1.0/24",
    "net 10.0.0.0 mask 255.0.255.0",
    "net != 192.168/16",
    "src lan",
    "dst net lan",
    "10.0.0.2",
    "192.168/16",
    "port 80",
    "src port 53",
    "dst port > 1023",
    "dst port < 1024",
    "port >= 443",
    "port <= 22",
    "port > 1023",
    "port != 80",
    "src port != 80",
    "src and dst port > 50",
    "tcp port 22",
    "udp dst port 53",
    "dst tcp port http",
    "port & 0xff00 == 0",
    "src port & 0xff00 == 0x0400",
    "dst port & 0xf0f0 > 0x1010",
    "src or dst port 5353",
    "tcp dst port 1 or 80",
    "ip ttl 64",
    "ip ttl > 1",
    "ip ttl < 2",
    "ip ttl != 0",
    "ip ttl 5 or 10",
    "ip ttl < 300",
    "ip ttl > 300",
    "ip tos 0",
    "ip tos & 3 == 3",
    "ip tos & 0xfc == 0xb8",
    "ip dscp 46",
    "ip dscp > 45",
    "ip ect",
    "ip ect 1",
    "ip ce",
    "ip len > 40",
    "ip len <= 60",
    "ip len 40",
    "ip id 0x1234",
    "ip id >= 1000",
    "ip hl > 5",
    "ip hl 5",
    "ip vers 4",
    "ip vers != 4",
    "ip frag",
    "ip unfrag",
    "tcp opt syn",
    "tcp opt ack",
    "syn and not ack",
    "fin ack",
    "rst or fin",
    "icmp type echo",
    "icmp type 0",
    "icmp type > 3",
    "icmp type != 0",
    "icmp type echo or echo-reply",
    "ip[0] == 0x45",
    "ip[8] > 32",
    "ip[8,9] == 0x4006",
    "ip[8:2] > 0x4000",
    "ip[6:2] > 100",
    "ip[6:2] & 0x1fff < 5",
    "ip[0:4] & 0x0f00ff00 == 0x05000000",
    "ip[0:4] >= 0x45000028",
    "ip[12:4] & 0xffff0000 == 0x0a000000",
    "ip[12:4] & 0xffffff00 == 0x0a000000",
    "ip[16:4] < 0x0a000002",
    "tcp[2:2] == 80",
    "udp[2:2] == 53",
    "transp[13] & 2 != 0",
    "transp[0:2] < 1024",
    "transp[0:4] > 0x00500000",
    "transp[1] == 0",
    "transp[12] > 0x4f",
    "transp[12:2] & 0xf0ff == 0x5012",
    "true",
    "false",
    // Refused: Ethernet, the TCP window, the checksum, options.
    "ether host 00:11:22:33:44:55",
    "ether src host 02:00:00:00:00:01",
    "tcp win > 100",
    "ip[10:2] != 0",
    "ip[20:4] == 0x01010101",
    "ip[60:4] != 0",
    "ip[12:2] & 0xff00 == 0x0a00",
    "ip[6] & 0x20 != 0",
    "transp[1:2] == 0x0000",
    "transp[12] > 0x50",
    "ip[14:2] & 0xff00 == 0x0000",
];

/// Primitives the compilation refuses.
const OPAQUE: &[&str] = &[
    "ether host 00:11:22:33:44:55",
    "ether src host 02:00:00:00:00:01",
    "tcp win > 100",
    "ip[10:2] != 0",
    "ip[20:4] == 0x01010101",
    "ip[60:4] != 0",
    "ip[12:2] & 0xff00 == 0x0a00",
    "ip[6] & 0x20 != 0",
    "transp[1:2] == 0x0000",
    "transp[12] > 0x50",
    "ip[14:2] & 0xff00 == 0x0000",
];

fn names() -> Names {
    let mut n = Names::new();
    n.add_address_info("lan 192.168.1.0/24, gw 10.0.0.254")
        .unwrap();
    n
}

fn parse(text: &str) -> Expr {
    parse_pattern(text, &names()).unwrap_or_else(|e| panic!("`{text}`: {e}"))
}

/// A pattern text built from primitives with `not`, `and`, `or`, juxtaposition, parentheses
/// and `? :`.
fn pattern() -> impl Strategy<Value = String> {
    let leaf = proptest::sample::select(PRIMITIVES).prop_map(str::to_string);
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|a| format!("not ({a})")),
            inner.clone().prop_map(|a| format!("! ({a})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) and ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) && ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) or ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) || ({b})")),
            (inner.clone(), inner.clone(), inner)
                .prop_map(|(a, b, c)| format!("({a}) ? ({b}) : ({c})")),
        ]
    })
    // Keyword elision can carry `ether` into the next primitive (`ether host X) or (syn`).
    .prop_filter("the pattern parses", |t| parse_pattern(t, &names()).is_ok())
}

// ---------------------------------------------------------------------------------------
// Checks.

fn point(p: &Packet) -> model::PacketPoint {
    model::point_of(p, IpAnchor::Annotation)
}

/// `compile(expr)` holds on `p` iff `expr` matches it.
fn check_compiled(text: &str, expr: &Expr, set: &FilterSet, spec: &Spec) {
    let p = spec.packet();
    let want = expr.matches(&View::of(&p));
    let got = set.contains(&point(&p));
    assert_eq!(
        got,
        want,
        "`{text}` = {expr}\ncompiled {set}\npacket {spec:?}\nbytes {:02x?}\npoint {:?}",
        p.data(),
        point(&p)
    );
}

fn bcx(names: &Names) -> BuildCtx<'_> {
    BuildCtx {
        name: "nf/f",
        ninputs: 1,
        noutputs: 1,
        names,
        base_dir: Path::new("."),
    }
}

fn element(class: &str, conf: &str) -> Box<dyn Element> {
    let names = names();
    build(class, conf, &bcx(&names)).unwrap_or_else(|e| panic!("{class}({conf}): {e}"))
}

/// What `push` does, as a model outcome.
fn pushed(e: &mut Box<dyn Element>, p: Packet) -> Outcome {
    let mut cx = Context::default();
    match e.push(0, p, &mut cx) {
        Verdict::Out(o, _) => Outcome::Out(o),
        Verdict::Drop(_, r) => Outcome::Drop(r),
        Verdict::Done => panic!("classifiers never keep packets"),
    }
}

/// The outcome of the first case of `m` holding on `p`.
fn modelled(m: &Model, p: &Packet) -> Outcome {
    let c = m
        .cases
        .iter()
        .find(|c| model::matches(&c.filter, p, m.ip_at))
        .expect("the cases of a model cover every packet");
    assert!(c.effects.is_empty() && c.stats.is_empty());
    c.outcome.clone()
}

/// The model agrees with `push` on `p` (a `Runtime` case hands the packet to the element).
fn check_model(e: &mut Box<dyn Element>, m: &Model, p: Packet, what: &str) {
    let want = modelled(m, &p);
    let bytes = p.data().to_vec();
    let got = pushed(e, p);
    if want != Outcome::Runtime {
        assert_eq!(got, want, "{what}\nbytes {bytes:02x?}");
    }
}

// ---------------------------------------------------------------------------------------
// Properties.

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn compiled_patterns_hold_exactly_where_they_match(
        text in pattern(),
        specs in proptest::collection::vec(spec(), 24),
    ) {
        let expr = parse(&text);
        if let Some(set) = compile(&expr) {
            for s in &specs {
                check_compiled(&text, &expr, &set, s);
            }
        } else {
            prop_assert!(OPAQUE.iter().any(|o| text.contains(o)), "`{text}` refused");
        }
    }

    #[test]
    fn ipclassifier_model_agrees_with_push(
        patterns in proptest::collection::vec(pattern(), 1..4),
        specs in proptest::collection::vec(spec(), 24),
    ) {
        let conf = patterns.join(", ");
        let mut e = element("IPClassifier", &conf);
        let m = e.model();
        let opaque = patterns.iter().any(|t| compile(&parse(t)).is_none());
        prop_assert!(m.is_some() || opaque, "IPClassifier({}) opaque", conf);
        if let Some(m) = m {
            prop_assert_eq!(m.ip_at, IpAnchor::Annotation);
            for s in &specs {
                check_model(&mut e, &m, s.packet(), &format!("IPClassifier({conf}) {s:?}"));
            }
        }
    }

    #[test]
    fn ipfilter_model_agrees_with_push(
        rules in proptest::collection::vec(
            (prop_oneof![
                Just("allow".to_string()),
                Just("deny".to_string()),
                Just("drop".to_string()),
                (1usize..4).prop_map(|n| n.to_string()),
            ], pattern()),
            1..4,
        ),
        specs in proptest::collection::vec(spec(), 24),
    ) {
        let conf = rules
            .iter()
            .map(|(a, p)| format!("{a} {p}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut e = element("IPFilter", &conf);
        if let Some(m) = e.model() {
            for s in &specs {
                check_model(&mut e, &m, s.packet(), &format!("IPFilter({conf}) {s:?}"));
            }
        } else {
            prop_assert!(rules.iter().any(|(_, p)| compile(&parse(p)).is_none()));
        }
    }
}

// Classifier: random clauses over bytes from a small pool, so that they hit.

const BYTES: &[u8] = &[0x00, 0x08, 0x06, 0x45, 0xff, 0x11];

fn hexbyte() -> impl Strategy<Value = String> {
    let nib = proptest::sample::select(&[0u8, 8, 4, 15][..]);
    prop_oneof![
        4 => proptest::sample::select(BYTES).prop_map(|b| format!("{b:02x}")),
        1 => Just("??".to_string()),
        1 => nib.clone().prop_map(|n| format!("{n:x}?")),
        1 => nib.prop_map(|n| format!("?{n:x}")),
    ]
}

fn clause() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop_oneof![8 => 0usize..24, 1 => 24usize..40, 1 => Just(65530usize)],
        proptest::collection::vec(hexbyte(), 1..6),
        proptest::option::weighted(
            0.3,
            proptest::collection::vec(
                proptest::sample::select(&[0x00u8, 0xff, 0x0f, 0xf0, 0x81][..]),
                6,
            ),
        ),
    )
        .prop_map(|(neg, off, val, mask)| {
            let v: String = val.concat();
            let mut s = format!("{}{off}/{v}", if neg { "!" } else { "" });
            if let Some(m) = mask {
                let m: String = m[..val.len()].iter().map(|b| format!("{b:02x}")).collect();
                s.push('%');
                s.push_str(&m);
            }
            s
        })
}

fn cpattern() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("-".to_string()),
        8 => proptest::collection::vec(clause(), 1..4).prop_map(|c| c.join(" ")),
    ]
}

fn frame() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![4 => proptest::sample::select(BYTES), 1 => any::<u8>()],
        0..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn classifier_model_agrees_with_push(
        patterns in proptest::collection::vec(cpattern(), 1..5),
        frames in proptest::collection::vec(frame(), 32),
    ) {
        let conf = patterns.join(", ");
        let mut e = element("Classifier", &conf);
        let m = e.model().expect("Classifier models are exact");
        // The raw fields of one Classifier never overlap.
        let mut raws: Vec<(u16, u8)> = m
            .cases
            .iter()
            .flat_map(|c| c.filter.fields().map(|(f, _)| f).collect::<Vec<_>>())
            .filter_map(|f| match f {
                Field::Raw { offset, len } => Some((offset, len)),
                _ => None,
            })
            .collect();
        raws.sort_unstable();
        raws.dedup();
        for w in raws.windows(2) {
            prop_assert!(u32::from(w[0].0) + u32::from(w[0].1) <= u32::from(w[1].0), "{:?}", raws);
        }
        for f in &frames {
            check_model(&mut e, &m, Packet::from_bytes(f), &format!("Classifier({conf})"));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Every primitive on many packets, deterministically, and not vacuously.

fn sweep_specs(n: usize) -> Vec<Spec> {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let s = spec();
    (0..n)
        .map(|_| s.new_tree(&mut runner).expect("a packet").current())
        .collect()
}

#[test]
fn every_primitive_compiles_exactly_and_is_exercised() {
    let specs = sweep_specs(4000);
    for text in PRIMITIVES {
        let expr = parse(text);
        let Some(set) = compile(&expr) else {
            assert!(OPAQUE.contains(text), "`{text}` refused");
            continue;
        };
        assert!(!OPAQUE.contains(text), "`{text}` compiled to {set}");
        let mut hits = 0;
        for s in &specs {
            check_compiled(text, &expr, &set, s);
            hits += usize::from(expr.matches(&View::of(&s.packet())));
        }
        // Both answers occur (except for the constant patterns).
        match *text {
            "true" => assert_eq!(hits, specs.len(), "`{text}`"),
            "false" | "ip ttl > 300" => assert_eq!(hits, 0, "`{text}`"),
            _ => assert!(
                hits > 0 && hits < specs.len(),
                "`{text}` matched {hits} of {} packets",
                specs.len()
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Exact sets.

fn at_least(n: u128) -> FieldSet {
    FieldSet::range(n, 0xffff)
}

fn boxes(filters: Vec<Filter>) -> FilterSet {
    let mut s = FilterSet::empty();
    for f in &filters {
        s.insert(f);
    }
    s
}

fn assert_compiles_to(text: &str, want: FilterSet) {
    let got = compile(&parse(text)).unwrap_or_else(|| panic!("`{text}` refused"));
    assert!(got.equivalent(&want), "`{text}`\n got {got}\nwant {want}");
}

#[test]
fn dst_port_above_1023() {
    let want = Filter::any()
        .with(Field::IpAvail, at_least(10))
        .with(Field::IpProto, FieldSet::from_intervals([(6, 6), (17, 17)]))
        .with(Field::IpFragOffset, FieldSet::single(0))
        .with(Field::L4Avail, at_least(4))
        .with(Field::DstPort, FieldSet::range(1024, 65535));
    assert_compiles_to("dst port > 1023", FilterSet::from(want));
}

#[test]
fn hosts_nets_and_negations() {
    let src = |set: FieldSet| {
        Filter::any()
            .with(Field::IpAvail, at_least(16))
            .with(Field::IpSrc, set)
    };
    assert_compiles_to(
        "src host 10.0.0.1",
        FilterSet::from(src(FieldSet::single(0x0a00_0001))),
    );
    assert_compiles_to(
        "src net 10/8",
        FilterSet::from(src(FieldSet::prefix(0x0a00_0000, 8, 32))),
    );
    assert_compiles_to(
        "src host 10.0.0.1 or 10.0.0.2",
        FilterSet::from(src(FieldSet::range(0x0a00_0001, 0x0a00_0002))),
    );
    // `!=` needs the bytes; `not` does not.
    assert_compiles_to(
        "src host != 10.0.0.1",
        FilterSet::from(src(FieldSet::single(0x0a00_0001).complement(32))),
    );
    let short = Filter::any().with(Field::IpAvail, FieldSet::range(0, 15));
    assert_compiles_to(
        "not src host 10.0.0.1",
        boxes(vec![
            short,
            src(FieldSet::single(0x0a00_0001).complement(32)),
        ]),
    );
    // A non-prefix mask: one interval per value of the free bits above the lowest mask bit.
    let got = compile(&parse("src net 10.0.0.0 mask 255.0.255.0")).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got.members()[0].get(Field::IpSrc).intervals().len(), 256);
}

#[test]
fn protocols_fragments_and_flags() {
    let proto = |set: FieldSet| {
        Filter::any()
            .with(Field::IpAvail, at_least(10))
            .with(Field::IpProto, set)
    };
    assert_compiles_to("tcp", FilterSet::from(proto(FieldSet::single(6))));
    assert_compiles_to(
        "not tcp",
        boxes(vec![
            Filter::any().with(Field::IpAvail, FieldSet::range(0, 9)),
            proto(FieldSet::single(6).complement(8)),
        ]),
    );
    assert_compiles_to(
        "ip proto < 17",
        FilterSet::from(proto(FieldSet::range(0, 16))),
    );
    let ff = Filter::any().with(Field::IpAvail, at_least(8));
    // Unfragmented: MF clear and offset 0, DF and the reserved bit free.
    assert_compiles_to(
        "ip unfrag",
        FilterSet::from(
            ff.clone()
                .with(
                    Field::IpFlags,
                    FieldSet::from_intervals([(0, 0), (2, 2), (4, 4), (6, 6)]),
                )
                .with(Field::IpFragOffset, FieldSet::single(0)),
        ),
    );
    let syn = Filter::any()
        .with(Field::IpAvail, at_least(10))
        .with(Field::IpProto, FieldSet::single(6))
        .with(Field::IpFragOffset, FieldSet::single(0))
        .with(Field::L4Avail, at_least(14))
        .with(Field::TcpFlags, FieldSet::from_mask(2, 2, 8).unwrap());
    assert_compiles_to("tcp opt syn", FilterSet::from(syn));
    let echo = Filter::any()
        .with(Field::IpAvail, at_least(10))
        .with(Field::IpProto, FieldSet::single(1))
        .with(Field::IpFragOffset, FieldSet::single(0))
        .with(Field::L4Avail, at_least(1))
        .with(Field::IcmpType, FieldSet::single(8));
    assert_compiles_to("icmp type echo", FilterSet::from(echo));
    // Version and header length share a byte.
    let b0 = Filter::any()
        .with(Field::IpAvail, at_least(1))
        .with(Field::IpVersion, FieldSet::single(4))
        .with(Field::IpIhl, FieldSet::single(5));
    assert_compiles_to("ip[0] == 0x45", FilterSet::from(b0));
    // ip[6:2] > 100 over flags | offset: flags non-zero, or flags 0 and offset > 100.
    let hi = ff.clone().with(Field::IpFlags, FieldSet::range(1, 7));
    let lo = ff
        .with(Field::IpFlags, FieldSet::single(0))
        .with(Field::IpFragOffset, FieldSet::range(101, 0x1fff));
    assert_compiles_to("ip[6:2] > 100", boxes(vec![hi, lo]));
}

#[test]
fn ipfilter_model_cases() {
    let e = element("IPFilter", "allow src host 10.0.0.1, deny udp, 2 icmp");
    let m = e.model().expect("exact");
    assert_eq!(m.ip_at, IpAnchor::Annotation);
    let outs: Vec<Outcome> = m.cases.iter().map(|c| c.outcome.clone()).collect();
    assert_eq!(
        outs,
        vec![
            Outcome::Out(0),
            Outcome::Drop("filter-deny"),
            Outcome::Out(2),
            Outcome::Drop("filter-deny"),
        ]
    );
    assert!(m.cases.last().is_some_and(|c| c.filter.is_any()));
    // A rule matching everything ends the model.
    let m = element("IPClassifier", "tcp, -, udp")
        .model()
        .expect("exact");
    assert_eq!(m.cases.len(), 2);
    assert_eq!(m.cases[1], model::Case::new(Filter::any(), Outcome::Out(1)));
    // A refused rule after exact ones: the rest is decided at run time.
    let m = element("IPClassifier", "tcp, ether host 00:11:22:33:44:55, udp")
        .model()
        .expect("partial");
    assert_eq!(m.cases.len(), 2);
    assert_eq!(
        m.cases[1],
        model::Case::new(Filter::any(), Outcome::Runtime)
    );
    // Refused first: opaque.
    assert!(element("IPFilter", "allow tcp win > 10, deny all")
        .model()
        .is_none());
}

#[test]
fn classifier_model_cases() {
    let e = element(
        "Classifier",
        "12/0800, 12/0806 20/0001, 12/0806 20/0002, 12/08, -",
    );
    let m = e.model().expect("exact");
    let raw = |o: u16, l: u8| Field::raw(o, l).unwrap();
    let ip = Filter::any()
        .with(Field::FrameLen, FieldSet::range(14, 0xffff))
        .with(raw(12, 1), FieldSet::single(8))
        .with(raw(13, 1), FieldSet::single(0));
    assert_eq!(m.cases[0], model::Case::new(ip, Outcome::Out(0)));
    let arp_req = Filter::any()
        .with(Field::FrameLen, FieldSet::range(22, 0xffff))
        .with(raw(12, 1), FieldSet::single(8))
        .with(raw(13, 1), FieldSet::single(6))
        .with(raw(20, 2), FieldSet::single(1));
    assert_eq!(m.cases[1], model::Case::new(arp_req, Outcome::Out(1)));
    assert_eq!(m.cases.len(), 5, "{:?}", m.cases);
    assert_eq!(m.cases[4], model::Case::new(Filter::any(), Outcome::Out(4)));
    // Negation holds on short packets; masks and wildcards.
    let m = element("Classifier", "!0/45%f0, 1/?8")
        .model()
        .expect("exact");
    let short = Filter::any().with(Field::FrameLen, FieldSet::range(0, 0));
    let other = Filter::any()
        .with(Field::FrameLen, FieldSet::range(1, 0xffff))
        .with(
            raw(0, 1),
            FieldSet::from_mask(0x40, 0xf0, 8).unwrap().complement(8),
        );
    let got = boxes(
        m.cases
            .iter()
            .filter(|c| c.outcome == Outcome::Out(0))
            .map(|c| c.filter.clone())
            .collect(),
    );
    assert!(got.equivalent(&boxes(vec![short, other])), "{got}");
    for data in [
        &[][..],
        &[0x45],
        &[0x35, 0x08],
        &[0x45, 0x18],
        &[0x45, 0x19],
    ] {
        let mut e = element("Classifier", "!0/45%f0, 1/?8");
        check_model(&mut e, &m, Packet::from_bytes(data), "!0/45%f0, 1/?8");
    }
    // Low nibbles of four bytes as one 32-bit field would need 2^16 intervals: every
    // checked byte becomes its own field.
    let conf = "0/?1?2?3?4, !4/00";
    let m = element("Classifier", conf).model().expect("exact");
    let fields: Vec<Field> = m.cases[0].filter.fields().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        vec![Field::FrameLen, raw(0, 1), raw(1, 1), raw(2, 1), raw(3, 1)]
    );
    for data in [
        &[0x01, 0x02, 0x03, 0x04][..],
        &[0xf1, 0x52, 0x33, 0x04, 9],
        &[1, 2, 3],
    ] {
        let mut e = element("Classifier", conf);
        check_model(&mut e, &m, Packet::from_bytes(data), conf);
    }
}
