//! Property: any UDP/TCP flow through a NAPT pattern and its reply back restores the original
//! addresses and ports, and every checksum still verifies (incremental updates).

use elements::net::Names;
use elements::{build, BuildCtx, Context, Verdict};
use packet::{Packet, Timestamp};
use proptest::prelude::*;
use std::path::Path;
use wire::build::{Frame, Sum};
use wire::{checksum, IpProtocol};

/// An IPv4 packet (no Ethernet header) with valid checksums (UDP's only if `udp_ck`);
/// network header annotation at 0.
fn packet(
    tcp: bool,
    src: [u8; 4],
    sport: u16,
    dst: [u8; 4],
    dport: u16,
    payload: &[u8],
    udp_ck: bool,
) -> Packet {
    let f = if tcp {
        Frame::tcp(src, dst, sport, dport)
    } else {
        Frame::udp(src, dst, sport, dport).l4_sum(if udp_ck { Sum::Valid } else { Sum::Zero })
    };
    let mut p = Packet::from_bytes(&f.payload(payload).no_ethernet().build());
    p.set_network_header(0);
    p
}

fn verifies(d: &[u8]) -> bool {
    let off = if d[9] == IpProtocol::TCP { 36 } else { 26 };
    let ip_ok = checksum::data(&d[..20]) == 0;
    if d[9] == IpProtocol::UDP && d[off] == 0 && d[off + 1] == 0 {
        return ip_ok;
    }
    let src: [u8; 4] = d[12..16].try_into().unwrap();
    let dst: [u8; 4] = d[16..20].try_into().unwrap();
    let s = checksum::combine(&[
        checksum::pseudo_header_v4(src, dst, d[9], (d.len() - 20) as u16),
        checksum::sum(&d[20..]),
    ]);
    ip_ok && checksum::fold(s) == 0xffff
}

fn out(v: Verdict) -> (usize, Vec<u8>) {
    match v {
        Verdict::Out(o, p) => (o, p.data().to_vec()),
        other => panic!("expected Out, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn napt_round_trip(
        tcp in any::<bool>(),
        udp_ck in any::<bool>(),
        src in any::<[u8; 4]>(),
        sport in 1u16..,
        dst in any::<[u8; 4]>(),
        dport in 1u16..,
        payload in proptest::collection::vec(any::<u8>(), 0..40),
        suffix in prop_oneof![Just(""), Just("#"), Just("?")],
    ) {
        let names = Names::new();
        let bcx = BuildCtx { name: "nf/napt", ninputs: 2, noutputs: 2, names: &names, base_dir: Path::new(".") };
        let cfg = format!("pattern 10.0.0.1 1024-65535{suffix} - - 0 1, drop");
        let mut rw = build("IPRewriter", &cfg, &bcx).unwrap();
        let mut cx = Context::new(Timestamp(1));
        let (o, fwd) = out(rw.push(0, packet(tcp, src, sport, dst, dport, &payload, udp_ck), &mut cx));
        prop_assert_eq!(o, 0);
        prop_assert_eq!(&fwd[12..16], &[10, 0, 0, 1]);
        let nport = u16::from_be_bytes([fwd[20], fwd[21]]);
        prop_assert!(nport >= 1024);
        if suffix.is_empty() && sport >= 1024 {
            prop_assert_eq!(nport, sport);
        }
        prop_assert!(verifies(&fwd));
        prop_assert_eq!(&fwd[20 + if tcp { 20 } else { 8 }..], &payload[..]);
        // The reply, addressed to the translated endpoint, comes back to the original one.
        let reply = packet(tcp, dst, dport, [10, 0, 0, 1], nport, &payload, udp_ck);
        let (o, back) = out(rw.push(1, reply, &mut cx));
        prop_assert_eq!(o, 1);
        prop_assert_eq!(&back[12..16], &dst);
        prop_assert_eq!(&back[16..20], &src);
        prop_assert_eq!(u16::from_be_bytes([back[20], back[21]]), dport);
        prop_assert_eq!(u16::from_be_bytes([back[22], back[23]]), sport);
        prop_assert!(verifies(&back));
    }
}
