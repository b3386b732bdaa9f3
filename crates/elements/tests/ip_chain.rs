//! IP family through the public API: a router-style chain, fragment accounting, and
//! robustness of every IP element against arbitrary bytes.

use elements::{build, BuildCtx, Context, Element, Names, Verdict};
use packet::{Packet, Timestamp};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::path::Path;
use wire::build::{Frame, Sum};

fn make(class: &str, config: &str, noutputs: usize) -> Box<dyn Element> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/x",
        ninputs: 1,
        noutputs,
        names: &names,
        base_dir: Path::new("."),
    };
    match build(class, config, &bcx) {
        Ok(e) => e,
        Err(e) => panic!("{class}({config}): {e}"),
    }
}

/// Pushes `p` and collects (port, packet) outputs plus drop reasons and created count.
fn run(e: &mut dyn Element, p: Packet) -> (Vec<(usize, Packet)>, Vec<&'static str>, u64) {
    let mut cx = Context::new(Timestamp(0));
    let mut out = Vec::new();
    let mut drops = Vec::new();
    match e.push(0, p, &mut cx) {
        Verdict::Out(port, p) => out.push((port, p)),
        Verdict::Drop(_, r) => drops.push(r),
        Verdict::Done => {}
    }
    out.extend(cx.take_emitted());
    drops.extend(cx.take_dropped().map(|(_, r)| r));
    (out, drops, cx.take_created())
}

fn checksum_ok(h: &[u8]) -> bool {
    let hl = usize::from(h[0] & 0xf) * 4;
    wire::checksum::data(&h[..hl]) == 0
}

/// An Ethernet frame carrying IPv4/UDP with `ttl` to `dst`, `len` bytes of UDP payload.
fn frame(dst: [u8; 4], ttl: u8, len: usize) -> Vec<u8> {
    Frame::udp([10, 0, 0, 1], dst, 1, 2)
        .macs([0; 6], [0; 6])
        .ident(1)
        .ttl(ttl)
        .payload(&vec![0x5a; len])
        .l4_sum(Sum::Zero)
        .build()
}

/// A destination and where it should go: (output port, destination annotation), or no route.
type Case = ([u8; 4], Option<(usize, Ipv4Addr)>);

#[test]
fn router_chain_routes_and_decrements() {
    let mut chk = make("CheckIPHeader", "14", 1);
    let mut rt = make(
        "RadixIPLookup",
        "10.1.0.0/16 0, 10.2.0.0/16 10.9.9.9 1, 10.2.3.0/24 2",
        3,
    );
    let mut ttl = make("DecIPTTL", "", 1);
    let cases: [Case; 4] = [
        ([10, 1, 7, 7], Some((0, Ipv4Addr::new(10, 1, 7, 7)))),
        ([10, 2, 7, 7], Some((1, Ipv4Addr::new(10, 9, 9, 9)))),
        ([10, 2, 3, 4], Some((2, Ipv4Addr::new(10, 2, 3, 4)))),
        ([10, 3, 0, 1], None),
    ];
    for (dst, want) in cases {
        let (mut o, _, _) = run(chk.as_mut(), Packet::from_bytes(&frame(dst, 64, 10)));
        let (_, p) = o.pop().expect("valid header");
        let (mut o, drops, _) = run(rt.as_mut(), p);
        match want {
            None => assert_eq!(drops, vec!["no-route"]),
            Some((port, anno)) => {
                let (got_port, p) = o.pop().expect("routed");
                assert_eq!((got_port, p.meta.dst_ip), (port, anno));
                let (mut o, _, _) = run(ttl.as_mut(), p);
                let (_, p) = o.pop().expect("ttl ok");
                let h = p.network_header().expect("network header");
                assert_eq!(h[8], 63);
                assert!(checksum_ok(h));
                assert_eq!(&p.data()[..14], &frame(dst, 64, 10)[..14]);
            }
        }
    }
}

#[test]
fn fragmenter_accounting_holds() {
    let mut chk = make("CheckIPHeader", "14", 1);
    let mut frag = make("IPFragmenter", "576", 1);
    let (mut o, _, _) = run(
        chk.as_mut(),
        Packet::from_bytes(&frame([10, 0, 0, 2], 64, 1372)),
    );
    let (_, p) = o.pop().expect("valid");
    let (out, drops, created) = run(frag.as_mut(), p);
    assert_eq!(1 + created, out.len() as u64 + drops.len() as u64);
    assert_eq!(out.len(), 3);
    let total: usize = out
        .iter()
        .map(|(_, p)| p.network_header().map_or(0, |h| h.len() - 20))
        .sum();
    assert_eq!(total, 1380);
    assert!(out
        .iter()
        .all(|(_, p)| p.network_header().is_some_and(checksum_ok)));
}

const ELEMENTS: [(&str, &str); 22] = [
    ("CheckIPHeader", ""),
    ("CheckIPHeader", "14"),
    ("CheckIPHeader2", "INTERFACES 10.0.0.1/8"),
    ("MarkIPHeader", "14"),
    ("CheckTCPHeader", ""),
    ("CheckUDPHeader", ""),
    ("CheckICMPHeader", ""),
    ("GetIPAddress", "16"),
    ("GetIPAddress", "IP dst"),
    ("SetIPAddress", "1.2.3.4"),
    ("DropBroadcasts", ""),
    ("FixIPSrc", "1.2.3.4"),
    ("RadixIPLookup", "0/0 1.1.1.1 0, 10/8 1"),
    ("DecIPTTL", ""),
    ("IPGWOptions", "1.2.3.4"),
    ("IPFragmenter", "68"),
    ("IPFragmenter", "68, false"),
    ("SetIPChecksum", ""),
    ("SetTCPChecksum", "true"),
    ("SetUDPChecksum", ""),
    ("IPPrint", "x"),
    ("IPEncap", "tcp, 1.1.1.1, DST_ANNO"),
];

proptest! {
    /// No IP element panics on arbitrary bytes, whatever header annotations they carry, and
    /// every packet is accounted for.
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        hdr in proptest::option::of(0usize..40),
        v4 in any::<bool>(),
    ) {
        let mut bytes = bytes;
        if v4 && !bytes.is_empty() {
            bytes[0] = 0x40 | (bytes[0] & 0x0f);
        }
        for (class, cfg) in ELEMENTS {
            let mut e = make(class, cfg, 2);
            let mut p = Packet::from_bytes(&bytes);
            if let Some(off) = hdr {
                p.set_network_header(off.min(bytes.len()));
                p.set_transport_header((off + 20).min(bytes.len()));
            }
            let (out, drops, created) = run(e.as_mut(), p);
            prop_assert_eq!(1 + created, (out.len() + drops.len()) as u64, "{}", class);
        }
    }
}

/// An Ethernet frame carrying an IPv6 header (no payload) to `dst`.
fn frame6(dst: &str) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[12] = 0x86;
    f[13] = 0xdd;
    let mut ip = vec![0u8; 40];
    ip[0] = 0x60;
    ip[6] = 59;
    ip[7] = 64;
    ip[8..24].copy_from_slice(
        &"2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    ip[24..40].copy_from_slice(&dst.parse::<std::net::Ipv6Addr>().unwrap().octets());
    f.extend(ip);
    f
}

#[test]
fn an_ipv6_router_chain_routes_by_longest_prefix() {
    // Classifier(12/86dd, -) -> MarkIPHeader(14) -> LookupIP6Route, as a Click IPv6 router
    // would mark and route (Click marks with its own IPv6 elements).
    let mut cl = make("Classifier", "12/86dd, -", 2);
    let mut mark = make("MarkIPHeader", "14", 1);
    let mut rt = make(
        "LookupIP6Route",
        "2001:db8::/32 0, 2001:db8:aa::/48 fe80::1 1, ::/0 2",
        3,
    );
    let mut route = |f: Vec<u8>| -> Result<usize, &'static str> {
        let (out, drops, _) = run(cl.as_mut(), Packet::from_bytes(&f));
        let Some((0, p)) = out.into_iter().next() else {
            return Err(drops.first().copied().unwrap_or("not-ipv6-ethertype"));
        };
        let (mut out, _, _) = run(mark.as_mut(), p);
        let (_, p) = out.remove(0);
        let (out, drops, _) = run(rt.as_mut(), p);
        match out.first() {
            Some((port, q)) => {
                assert_eq!(q.data(), &f[..], "routing leaves the frame as it was");
                Ok(*port)
            }
            None => Err(drops[0]),
        }
    };
    assert_eq!(route(frame6("2001:db8:1::5")), Ok(0));
    assert_eq!(route(frame6("2001:db8:aa:1::5")), Ok(1));
    assert_eq!(route(frame6("2001:db9::5")), Ok(2));
    assert_eq!(
        route(frame([10, 0, 0, 1], 64, 10)),
        Err("not-ipv6-ethertype")
    );
    let mut short = frame6("2001:db8::5");
    short.truncate(14 + 39);
    assert_eq!(route(short), Err("short-ipv6"));
    let mut v4 = frame([10, 0, 0, 1], 64, 40);
    v4[12..14].copy_from_slice(&[0x86, 0xdd]); // an IPv4 packet under the IPv6 ethertype
    assert_eq!(route(v4), Err("not-ipv6"));
    assert_eq!(
        rt.stats(),
        vec![
            ("no-ip-header", 0),
            ("short-ipv6", 1),
            ("not-ipv6", 1),
            ("no-route", 0)
        ]
    );
}
