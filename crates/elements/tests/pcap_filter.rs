//! `PcapFilter`: the parser never panics and reports columns, random expressions agree with
//! the live libpcap, and the element's model (header-space regions plus a `Runtime` case)
//! agrees with the element.

use elements::model::{self, Field, IpAnchor, Model, Outcome};
use elements::pcapfilter::space::regions;
use elements::pcapfilter::{parse, Pred};
use elements::{build, BuildCtx, Context, Element, Names, Verdict};
use packet::Packet;
use pcap::{Capture, Linktype};
use proptest::prelude::*;
use std::path::Path;
use wire::IpProtocol;

// ---------------------------------------------------------------------------------------
// Frames.

#[derive(Debug, Clone)]
struct Spec {
    dst_mac: u8,
    vlan: Option<u16>,
    kind: u8,
    ihl: u8,
    frag: u16,
    proto: u8,
    src: u8,
    dst: u8,
    sport: u16,
    dport: u16,
    flags: u8,
    v6_frag_header: bool,
    payload: u8,
    cut: Option<usize>,
}

const ADDRS: [[u8; 4]; 5] = [
    [10, 0, 0, 1],
    [10, 1, 2, 3],
    [192, 168, 1, 1],
    [8, 8, 8, 8],
    [224, 0, 0, 5],
];

impl Spec {
    fn frame(&self) -> Vec<u8> {
        let mut f = match self.dst_mac % 3 {
            0 => vec![0xff; 6],
            1 => vec![0x01, 0, 0x5e, 0, 0, 1],
            _ => vec![0, 1, 2, 3, 4, 5],
        };
        f.extend_from_slice(&[0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        if let Some(v) = self.vlan {
            f.extend_from_slice(&[0x81, 0]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        let mut l4 = Vec::new();
        l4.extend_from_slice(&self.sport.to_be_bytes());
        l4.extend_from_slice(&self.dport.to_be_bytes());
        l4.extend_from_slice(&[0; 8]);
        l4.extend_from_slice(&[0x50, self.flags, 0, 0, 0, 0, 0, 0]);
        l4.extend(std::iter::repeat_n(0x47, usize::from(self.payload)));
        match self.kind % 4 {
            0 | 1 => {
                f.extend_from_slice(&[0x08, 0x00]);
                let hl = usize::from(self.ihl) * 4;
                let total = (hl.max(20) + l4.len()) as u16;
                f.push(0x40 | self.ihl);
                f.push(0);
                f.extend_from_slice(&total.to_be_bytes());
                f.extend_from_slice(&[0, 1]);
                f.extend_from_slice(&self.frag.to_be_bytes());
                f.extend_from_slice(&[64, self.proto, 0, 0]);
                f.extend_from_slice(&ADDRS[usize::from(self.src) % 5]);
                f.extend_from_slice(&ADDRS[usize::from(self.dst) % 5]);
                f.extend(std::iter::repeat_n(1u8, hl.saturating_sub(20)));
                f.extend_from_slice(&l4);
            }
            2 => {
                f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
                f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
                let nh = if self.v6_frag_header { 44 } else { self.proto };
                f.extend_from_slice(&[nh, 64]);
                let mut a = [0u8; 16];
                a[0] = 0xfe;
                a[1] = 0x80;
                a[15] = self.src;
                f.extend_from_slice(&a);
                a[0] = if self.dst.is_multiple_of(2) {
                    0xff
                } else {
                    0x20
                };
                a[15] = self.dst;
                f.extend_from_slice(&a);
                if self.v6_frag_header {
                    f.extend_from_slice(&[self.proto, 0, 0, 0, 0, 0, 0, 1]);
                }
                f.extend_from_slice(&l4);
            }
            _ => {
                f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
                f.extend_from_slice(&[0, 0x11, 0x22, 0x33, 0x44, 0x55]);
                f.extend_from_slice(&ADDRS[usize::from(self.src) % 5]);
                f.extend_from_slice(&[0; 6]);
                f.extend_from_slice(&ADDRS[usize::from(self.dst) % 5]);
            }
        }
        if let Some(c) = self.cut {
            f.truncate(c % (f.len() + 1));
        }
        f
    }
}

prop_compose! {
    fn spec()(
        dst_mac in 0u8..3,
        vlan in prop::option::weighted(0.2, prop::sample::select(vec![1u16, 5, 100, 0x2005])),
        kind in 0u8..4,
        ihl in prop::sample::select(vec![5u8, 5, 5, 6, 2, 15]),
        frag in prop::sample::select(vec![0u16, 0, 0x4000, 0x2000, 0x00b9]),
        proto in prop::sample::select(vec![6u8, 17, 1, 132, 58, 47]),
        src in 0u8..5,
        dst in 0u8..5,
        sport in prop::sample::select(vec![22u16, 53, 80, 443, 1024, 8080]),
        dport in prop::sample::select(vec![22u16, 53, 80, 443, 1024, 8080]),
        flags in prop::sample::select(vec![0x02u8, 0x12, 0x10, 0x11, 0x04, 0x18]),
        v6_frag_header in prop::bool::weighted(0.2),
        payload in prop::sample::select(vec![0u8, 0, 4, 20]),
        cut in prop::option::weighted(0.2, 0usize..80),
    ) -> Spec {
        Spec { dst_mac, vlan, kind, ihl, frag, proto, src, dst, sport, dport, flags,
               v6_frag_header, payload, cut }
    }
}

// ---------------------------------------------------------------------------------------
// Expressions.

const PRIMITIVES: &[&str] = &[
    "ip",
    "ip6",
    "arp",
    "tcp",
    "udp",
    "icmp",
    "icmp6",
    "sctp",
    "vlan",
    "vlan 5",
    "host 10.0.0.1",
    "src host 8.8.8.8",
    "dst net 10.0.0.0/8",
    "net 192.168.0.0 mask 255.255.0.0",
    "ip6 net fe80::/10",
    "ip6 dst host fe80::3",
    "port 80",
    "tcp dst port 443",
    "udp src port 53",
    "portrange 1-1023",
    "ip proto 47",
    "proto \\udp",
    "ip6 proto 58",
    "ether proto 0x86dd",
    "ether broadcast",
    "ether multicast",
    "ip multicast",
    "ether src 00:11:22:33:44:55",
    "greater 80",
    "less 60",
    "len >= 70",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[13] & (tcp-syn|tcp-ack) == tcp-syn",
    "icmp[icmptype] == icmp-echo",
    "ip[6:2] & 0x1fff != 0",
    "ip[0] & 0xf > 5",
    "ip[8] < 64",
    "udp[2:2] = 53",
    "ip6[6] == 44",
    "tcp[((tcp[12] & 0xf0) >> 2):1] = 0x47",
    "ip[2:2] - (ip[0] & 0xf) * 4 > 20",
    "ether[12:2] > 0x0800",
    "llc",
    "llc u",
    "decnet src 1.1",
    "pppoed",
    "pim",
    "vrrp[0] & 0x0f = 1",
    "ah or esp",
];

/// Random arithmetic, to check operator precedence (`^` included) against libpcap.
fn arith() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(vec![
        "ip[0]",
        "ip[1]",
        "tcp[13]",
        "len",
        "3",
        "0x10",
        "ip[2:2]",
        "ether[12:2]",
        "udp[0:2]",
        "1",
    ])
    .prop_map(String::from);
    leaf.prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "&", "|", "^", "<<", ">>"]),
                inner.clone()
            )
                .prop_map(|(a, o, b)| format!("{a} {o} {b}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.prop_map(|a| format!("-{a}")),
        ]
    })
}

fn relation() -> impl Strategy<Value = String> {
    (
        arith(),
        prop::sample::select(vec!["=", "!=", "<", "<=", ">", ">="]),
        arith(),
    )
        .prop_map(|(a, o, b)| format!("{a} {o} {b}"))
}

fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        4 => prop::sample::select(PRIMITIVES).prop_map(String::from),
        1 => relation(),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|a| format!("not {a}")),
            inner.clone().prop_map(|a| format!("({a})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} and {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} or {b}")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("({a}) || !({b})")),
        ]
    })
}

fn bcx(names: &Names, noutputs: usize) -> BuildCtx<'_> {
    BuildCtx {
        name: "nf/pf",
        ninputs: 1,
        noutputs,
        names,
        base_dir: Path::new("."),
    }
}

fn element(expr: &str, noutputs: usize) -> Box<dyn Element> {
    let names = Names::new();
    // Inside Click's double quotes a backslash escapes the next character.
    let quoted = format!("\"{}\"", expr.replace('\\', "\\\\"));
    build("PcapFilter", &quoted, &bcx(&names, noutputs))
        .unwrap_or_else(|e| panic!("PcapFilter({expr}): {e}"))
}

fn pushed(e: &mut Box<dyn Element>, p: Packet) -> Outcome {
    let mut cx = Context::default();
    match e.push(0, p, &mut cx) {
        Verdict::Out(o, _) => Outcome::Out(o),
        Verdict::Drop(_, r) => Outcome::Drop(r),
        Verdict::Done => panic!("filters never keep packets"),
    }
}

fn modelled(m: &Model, p: &Packet) -> Outcome {
    m.cases
        .iter()
        .find(|c| model::matches(&c.filter, p, m.ip_at))
        .expect("the cases of a model cover every packet")
        .outcome
        .clone()
}

/// The regions of `pred` classify `frame` as its evaluation does.
fn check_regions(text: &str, pred: &Pred, frame: &[u8]) {
    let Some(r) = regions(pred) else { return };
    let p = Packet::from_bytes(frame);
    let mut pt = model::point_of(&p, IpAnchor::Data(14));
    for s in [&r.yes, &r.no, &r.unknown] {
        for m in s.members() {
            for (f, _) in m.fields() {
                if let Field::Raw { .. } = f {
                    pt.set(f, model::raw_value(&p, f));
                }
            }
        }
    }
    let got = pred.eval(frame, frame.len() as u32);
    let (y, n, u) = (
        r.yes.contains(&pt),
        r.no.contains(&pt),
        r.unknown.contains(&pt),
    );
    assert!(
        u8::from(y) + u8::from(n) + u8::from(u) <= 1,
        "`{text}`: regions overlap"
    );
    if !u {
        let want = if y {
            Some(true)
        } else if n {
            Some(false)
        } else {
            None
        };
        assert_eq!(got, want, "`{text}` = {pred} on {frame:02x?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(s in "[ -~]{0,60}") {
        if let Err(e) = parse(&s) {
            prop_assert!(e.column >= 1 && e.column <= s.chars().count() + 1, "{e} for {s:?}");
        }
    }

    #[test]
    fn random_tokens_never_panic(toks in prop::collection::vec(prop::sample::select(vec![
        "ip", "tcp", "host", "net", "port", "src", "dst", "and", "or", "not", "(", ")", "[", "]",
        ":", "1", "0x10", "10.0.0.1", "fe80::1", "/", "8", "mask", "==", "!=", "<", "&", "|",
        "-", ">>", "len", "vlan", "portrange", "1-5", "proto", "\\tcp", "ether", "00:11:22:33:44:55",
        "tcpflags", "tcp-syn", "!", "&&", "||", "greater", "*", "%", "4", "0",
    ]), 0..14)) {
        let s = toks.join(" ");
        if let Ok(p) = parse(&s) {
            let _ = p.to_string();
            let _ = regions(&p);
            // Never accept what libpcap refuses.
            let dead = Capture::dead(Linktype::ETHERNET).expect("pcap dead handle");
            let ok = dead.compile(&s, false).is_ok();
            prop_assert!(ok, "`{}` is accepted but libpcap refuses it", s);
        }
    }

    #[test]
    fn random_expressions_agree_with_libpcap(text in expression(), specs in prop::collection::vec(spec(), 8)) {
        let pred = parse(&text).map_err(|e| TestCaseError::fail(format!("`{text}`: {e}")))?;
        let dead = Capture::dead(Linktype::ETHERNET).expect("pcap dead handle");
        let literal = dead.compile(&text, false).map_err(|e| TestCaseError::fail(format!("libpcap `{text}`: {e}")))?;
        let optimized = dead.compile(&text, true).ok();
        for s in &specs {
            let f = s.frame();
            let got = pred.accepts(&f, f.len() as u32);
            let want = literal.filter(&f);
            let want_opt = optimized.as_ref().map_or(want, |b| b.filter(&f));
            // Where libpcap's literal and optimized programs differ (the optimizer drops or
            // reorders a load past the end of the frame), either answer is libpcap's.
            if want == want_opt {
                prop_assert!(got == want, "`{text}` on {f:02x?}: libpcap {want}, ours {got}");
            } else {
                prop_assert!(got == want || got == want_opt, "`{text}` on {f:02x?}: libpcap {want}/{want_opt}, ours {got}");
            }
        }
    }

    #[test]
    fn model_agrees_with_push(text in expression(), specs in prop::collection::vec(spec(), 8), outs in 1usize..3) {
        let pred = parse(&text).map_err(|e| TestCaseError::fail(format!("`{text}`: {e}")))?;
        let mut e = element(&text, outs);
        let m = e.model();
        for s in &specs {
            let f = s.frame();
            check_regions(&text, &pred, &f);
            if let Some(m) = &m {
                let p = Packet::from_bytes(&f);
                let want = modelled(m, &p);
                let got = pushed(&mut e, p);
                if want != Outcome::Runtime {
                    prop_assert_eq!(got, want, "`{}` on {:02x?}", text, f);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Examples.

fn runtime_cases(m: &Model) -> usize {
    m.cases
        .iter()
        .filter(|c| c.outcome == Outcome::Runtime)
        .count()
}

#[test]
fn fixed_and_transport_fields_are_synthesizable() {
    for text in [
        "tcp port 80",
        "ip and not net 10.0.0.0/8",
        "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
        "vlan 5 and ip6 and udp",
        "greater 100 and udp dst portrange 1000-2000",
        "icmp[icmptype] == icmp-echo",
        "ether src 00:11:22:33:44:55 or ether broadcast",
    ] {
        let m = element(text, 1)
            .model()
            .unwrap_or_else(|| panic!("`{text}` has no model"));
        assert_eq!(runtime_cases(&m), 0, "`{text}`: {m:?}");
        assert_eq!(m.ip_at, IpAnchor::Data(14));
    }
}

#[test]
fn variable_offsets_are_opaque_only_where_they_decide() {
    let text = "tcp and tcp[((tcp[12] & 0xf0) >> 2):4] = 0x48545450";
    let m = element(text, 2).model().expect("a model");
    assert!(runtime_cases(&m) > 0);
    // A UDP frame is decided by the model: no match, output 1.
    let udp = Spec {
        dst_mac: 2,
        vlan: None,
        kind: 0,
        ihl: 5,
        frag: 0,
        proto: IpProtocol::UDP,
        src: 0,
        dst: 1,
        sport: 53,
        dport: 53,
        flags: 0,
        v6_frag_header: false,
        payload: 0,
        cut: None,
    };
    let p = Packet::from_bytes(&udp.frame());
    assert_eq!(modelled(&m, &p), Outcome::Out(1));
    let tcp = Spec {
        proto: IpProtocol::TCP,
        ..udp
    };
    assert_eq!(
        modelled(&m, &Packet::from_bytes(&tcp.frame())),
        Outcome::Runtime
    );
    // Transport loads after `vlan` read a shifted IPv4 header: opaque.
    let m = element("vlan and tcp port 80", 1).model().expect("a model");
    assert!(runtime_cases(&m) > 0);
    // Opaque from the start: no model at all.
    assert!(element("len - 14 > 100", 1).model().is_none());
    // Guards stay exact: non-IPv4 frames are decided even when the comparison is opaque.
    let m = element("len - 14 > ip[2:2]", 1).model().expect("a model");
    assert!(runtime_cases(&m) > 0);
}

#[test]
fn and_or_share_one_precedence_left_to_right() {
    let a = parse("udp or tcp and port 80").unwrap();
    let b = parse("(udp or tcp) and port 80").unwrap();
    assert_eq!(a, b);
    assert_ne!(a, parse("udp or (tcp and port 80)").unwrap());
    assert_eq!(
        parse("host 10.0.0.1 or 10.0.0.2").unwrap(),
        parse("host 10.0.0.1 or host 10.0.0.2").unwrap()
    );
    assert_eq!(
        parse("tcp dst port 80 or 443 and not 22").unwrap(),
        parse("(tcp dst port 80 or tcp dst port 443) and not tcp dst port 22").unwrap()
    );
    assert_eq!(parse("").unwrap(), Pred::True);
}

#[test]
fn errors_name_the_column_and_what_was_expected() {
    let cases: &[(&str, usize, &str)] = &[
        ("tcp port", 9, "expected an address, number or name"),
        ("ip[0:3] = 1", 6, "data size must be 1, 2, or 4"),
        ("ip[1/0] = 1", 5, "division by zero"),
        ("ip[1] % (0) = 1", 7, "modulus by zero"),
        ("ip[1] << 32 = 1", 7, "shift by more than 31 bits"),
        ("proto udp", 7, "write `\\udp`"),
        ("src 00:11:22:33:44:55", 5, "non-ether"),
        ("host 10.0.0.1 and", 18, "expected a primitive"),
        ("tcp and (udp", 13, "expected `)`"),
        ("10.0.0.1", 1, "needs a qualifier"),
        ("host www.example.com", 6, "not resolved"),
        ("geneve", 1, "not supported"),
        ("mpls 5 and ip", 12, "after `mpls` are not supported"),
        (
            "pppoes and tcp port 80",
            12,
            "after `pppoes` are not supported",
        ),
        ("decnet host 64.1", 13, "invalid DECnet address"),
        ("ip protochain 6", 4, "not supported"),
        ("ip broadcast", 1, "netmask"),
        ("tcp host 10.0.0.1", 10, "not a valid qualifier"),
        ("port 10.0.0.1", 6, "qualifier applied to IPv4 address"),
        ("host 10.0.0.1/8", 6, "Mask syntax for networks only"),
        ("src fe80::/10", 5, "Mask syntax for networks only"),
        ("net 10/8", 5, "dotted address"),
        ("net 10.0.0.0 mask 0xff000000", 19, "dotted netmask"),
        ("net 10.0.0.0/40", 14, "mask length must be <= 32"),
        ("net 10.0.0.1/8", 5, "non-network bits"),
        ("ether proto 100", 13, "≤ 1500"),
        ("ip @ 1", 4, "unexpected character `@`"),
        ("ip proto 300", 10, "greater than maximum 255"),
        ("vlan 5000", 6, "greater than maximum 4095"),
        ("ether host 10.0.0.1", 12, "Ethernet address"),
        ("tcp[0] = ", 10, "expected a number"),
    ];
    for (text, col, what) in cases {
        let e = parse(text).expect_err(text);
        assert_eq!(e.column, *col, "`{text}`: {e}");
        assert!(e.message.contains(what), "`{text}`: {e} (wanted {what:?})");
    }
}

#[test]
fn huge_and_deep_inputs_are_refused_or_handled_without_overflow() {
    let huge = format!("{}ip{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(parse(&huge).is_err());
    let deep = format!("{}ip{}", "(".repeat(2000), ")".repeat(2000));
    let e = parse(&deep).unwrap_err();
    assert!(e.message.contains("nested too deeply"), "{e}");
    let nots = "not ".repeat(3000) + "ip";
    let e = parse(&nots).unwrap_err();
    assert!(e.message.contains("nested too deeply"), "{e}");
    let minus = format!("{}1 = 1", "-".repeat(3000));
    let e = parse(&minus).unwrap_err();
    assert!(e.message.contains("nested too deeply"), "{e}");
    let long = "len + ".repeat(3000) + "1 > 0";
    let e = parse(&long).unwrap_err();
    assert!(e.message.contains("too long"), "{e}");
    // The longest accepted alternation of `and`/`or` builds a deep tree; it still evaluates
    // and compiles (on a thread with the default test stack).
    let chain = "udp or tcp and ".repeat(1000) + "ip";
    let p = parse(&chain).expect("long chain");
    let frame = [0u8; 60];
    assert!(!p.accepts(&frame, 60));
    let _ = regions(&p);
    let sum = "len + ".repeat(2000) + "1 > 0";
    assert!(parse(&sum).expect("long sum").accepts(&frame, 60));
    // `len` beyond the model's 16-bit frame length stays opaque instead of wrong.
    let m = element("udp or greater 70000", 1).model().expect("a model");
    assert!(runtime_cases(&m) > 0);
}

#[test]
fn element_outputs_and_drops() {
    let frame = Spec {
        dst_mac: 2,
        vlan: None,
        kind: 0,
        ihl: 5,
        frag: 0,
        proto: IpProtocol::TCP,
        src: 0,
        dst: 1,
        sport: 1024,
        dport: 80,
        flags: 2,
        v6_frag_header: false,
        payload: 0,
        cut: None,
    }
    .frame();
    let mut one = element("tcp dst port 80", 1);
    assert_eq!(
        pushed(&mut one, Packet::from_bytes(&frame)),
        Outcome::Out(0)
    );
    let mut two = element("udp", 2);
    assert_eq!(
        pushed(&mut two, Packet::from_bytes(&frame)),
        Outcome::Out(1)
    );
    let mut drop = element("udp", 1);
    assert_eq!(
        pushed(&mut drop, Packet::from_bytes(&frame)),
        Outcome::Drop("no-match")
    );
    let names = Names::new();
    let err = build("PcapFilter", "\"tcp port\"", &bcx(&names, 1))
        .err()
        .expect("refused");
    assert!(err.to_string().contains("column 9"), "{err}");
    assert!(build("PcapFilter", "", &bcx(&names, 1)).is_err());
    assert!(build("PcapFilter", "tcp, udp", &bcx(&names, 1)).is_err());
    // Unquoted, as long as it has no comma.
    let mut bare = build("PcapFilter", "net 10.0.0.0/8 and tcp", &bcx(&names, 1)).unwrap();
    assert_eq!(
        pushed(&mut bare, Packet::from_bytes(&frame)),
        Outcome::Out(0)
    );
}

/// Mutated valid expressions (a token dropped, duplicated, swapped or replaced): whatever we
/// accept, libpcap accepts too.
#[test]
fn nothing_libpcap_refuses_is_accepted() {
    let pool = [
        "ip",
        "tcp",
        "host",
        "net",
        "port",
        "src",
        "dst",
        "and",
        "or",
        "not",
        "(",
        ")",
        "[",
        "]",
        ":",
        "1",
        "0x10",
        "10.0.0.1",
        "fe80::1",
        "/",
        "8",
        "mask",
        "==",
        "!=",
        "<",
        "&",
        "|",
        "^",
        "-",
        ">>",
        "len",
        "vlan",
        "portrange",
        "1-5",
        "proto",
        "\\tcp",
        "ether",
        "00:11:22:33:44:55",
        "tcpflags",
        "tcp-syn",
        "!",
        "&&",
        "||",
        "greater",
        "*",
        "4",
        "0",
        "255.255.0.0",
        "10.1",
        "mpls",
        "llc",
        "decnet",
        "1.1",
        "udp",
        "icmp6",
        "broadcast",
        "multicast",
        "pppoes",
        "66000",
    ];
    let mut s = 0x1234_5678_9abc_def0u64;
    let mut next = move |n: usize| {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    let dead = Capture::dead(Linktype::ETHERNET).expect("pcap dead handle");
    let (mut accepted, mut total, mut refused_ok) = (0, 0, 0);
    let mut wrong = Vec::new();
    let mut samples = Vec::new();
    for _ in 0..6000 {
        let a = PRIMITIVES[next(PRIMITIVES.len())];
        let b = PRIMITIVES[next(PRIMITIVES.len())];
        let joined = format!("{a} {} {b}", ["and", "or", "and not"][next(3)]);
        let mut toks: Vec<String> = joined.split_whitespace().map(String::from).collect();
        let i = next(toks.len());
        match next(4) {
            0 => {
                toks.remove(i);
            }
            1 => toks.insert(i, toks[i].clone()),
            2 => {
                let j = next(toks.len());
                toks.swap(i, j);
            }
            _ => toks[i] = pool[next(pool.len())].to_string(),
        }
        let text = toks.join(" ");
        total += 1;
        match parse(&text) {
            Ok(_) => {
                accepted += 1;
                if dead.compile(&text, false).is_err() && wrong.len() < 20 {
                    wrong.push(text);
                }
            }
            Err(e) => {
                if dead.compile(&text, false).is_ok() {
                    refused_ok += 1;
                    if samples.len() < 30 {
                        samples.push(format!("{text}  ->  {e}"));
                    }
                }
            }
        }
    }
    println!(
        "{accepted} of {total} mutated expressions accepted; {refused_ok} refused that libpcap accepts, e.g.:"
    );
    for x in &samples {
        println!("  {x}");
    }
    assert!(accepted > total / 10, "only {accepted} of {total} parse");
    assert!(
        wrong.is_empty(),
        "accepted but refused by libpcap:\n{}",
        wrong.join("\n")
    );
}
