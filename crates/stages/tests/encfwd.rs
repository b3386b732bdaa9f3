//! Fixtures of Enc, Fwd and Enc+Fwd through `BPF_PROG_TEST_RUN`: every branch (MD types 1
//! and 2, Ethernet and VXLAN-GPE in and out, end of path, TTL expiry, unknown SPI, truncated
//! and bad NSH, proxy miss, NAT-aware learning), each checked by verdict, the output frame
//! byte for byte against a frame `wire::build` makes on its own, map contents and counters.
//! Root needed: each test skips without it (fails under CI=true); every test has its own pin
//! directory, removed by the instance's Drop even when the test fails.

mod common;

use std::net::Ipv4Addr;

use stages::maps::{
    Counter, CounterStage, FlowKey, FwdAction, FwdVal, NshMeta, StageCfg, CFG_ANY_DST,
    CFG_NAT_LEARN, FWDF_INGRESS, PROXY_LEARNED,
};
use stages::{Instance, Stage};
use wire::build::{Frame, Gpe, Nsh};
use wire::nsh::{encode_tlvs, Tlv};

use common::{TC_ACT_OK, TC_ACT_SHOT, TC_ACT_UNSPEC, XDP_PASS};

/// `TC_ACT_REDIRECT`: what `bpf_redirect` returns (the test run does not perform it).
const TC_ACT_REDIRECT: u32 = 7;
/// The loopback interface: the device of every test run, so the `cfg` entry Enc finds.
const LO: u32 = 1;

const SPI: u32 = 0x00ab_cd01;
const CTX: [u32; 4] = [0x0102_0304, 0xdead_beef, 0, 0xffff_fffe];
const NEXT_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x0a, 0x01];
const OUR_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x0b, 0x02];
const PREV_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x0c, 0x03];
const TUNNEL_SRC: [u8; 4] = [192, 168, 50, 1];
const TUNNEL_DST: [u8; 4] = [192, 168, 50, 2];
const VNI: u32 = 0x0001_2345;

/// The frame the SF handles: UDP 10.0.0.1:1234 -> 10.0.0.2:80 with a payload.
fn inner() -> Vec<u8> {
    Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80)
        .payload(b"chaining across hosts")
        .build()
}

/// `inner()`'s 5-tuple.
fn flow() -> FlowKey {
    FlowKey {
        saddr: Ipv4Addr::new(10, 0, 0, 1),
        daddr: Ipv4Addr::new(10, 0, 0, 2),
        sport: 1234,
        dport: 80,
        proto: 17,
    }
}

/// Two MD type 2 TLVs, 20 bytes encoded.
fn tlvs() -> [Tlv<'static>; 2] {
    [
        Tlv {
            class: 0x0101,
            tlv_type: 7,
            value: &[0xde, 0xad, 0xbe, 0xef],
        },
        Tlv {
            class: 0xfff6,
            tlv_type: 0x22,
            value: &[1, 2, 3, 4, 5, 6],
        },
    ]
}

/// The NSH the stages hold for `md` (1 or 2) at `si` with `ttl`.
fn meta(md: u8, si: u8, ttl: u8) -> NshMeta {
    match md {
        1 => NshMeta::md1(SPI, si, ttl, CTX),
        _ => NshMeta::md2(SPI, si, ttl, &encode_tlvs(&tlvs())).unwrap(),
    }
}

/// The same NSH as `wire` writes it.
fn nsh(md: u8, si: u8, ttl: u8) -> Nsh {
    match md {
        1 => Nsh::md1(SPI, si, CTX).ttl(ttl),
        _ => Nsh::md2(SPI, si, &tlvs()).ttl(ttl),
    }
}

/// The SPH of (SPI, `si`).
fn sph(si: u8) -> u32 {
    SPI << 8 | u32::from(si)
}

/// A forwarding entry doing `action`, redirecting to `ifindex` (0: stay) with `flags`.
fn hop(action: FwdAction, ifindex: u32, flags: u8, udp_sport: u16) -> FwdVal {
    FwdVal {
        action,
        flags,
        dmac: NEXT_MAC,
        smac: OUR_MAC,
        udp_sport,
        ifindex,
        saddr: Ipv4Addr::from(TUNNEL_SRC),
        daddr: Ipv4Addr::from(TUNNEL_DST),
        vni: VNI,
    }
}

/// The tunnel Fwd writes for `hop(VxlanGpe, ..)`, with UDP source port `sport`.
fn tunnel(sport: u16) -> Gpe {
    let mut g = Gpe::new(TUNNEL_SRC, TUNNEL_DST, VNI);
    g.dst_mac = NEXT_MAC;
    g.src_mac = OUR_MAC;
    g.sport = sport;
    g.dont_frag = true;
    g
}

/// A tunnel from the previous hop, as a VXLAN-GPE frame arrives.
fn arriving_tunnel() -> Gpe {
    let mut g = Gpe::new([192, 168, 50, 9], TUNNEL_SRC, 77);
    g.dst_mac = OUR_MAC;
    g.src_mac = PREV_MAC;
    g.sport = 50000;
    g
}

/// The UDP source port Fwd derives from the inner flow, computed here from the formula in
/// encfwd.h's comment (not from the C code).
fn flow_port(k: &FlowKey) -> u16 {
    let mut h = u32::from(k.saddr)
        ^ u32::from(k.daddr)
        ^ (u32::from(k.sport) << 16 | u32::from(k.dport))
        ^ u32::from(k.proto);
    h ^= h >> 16;
    h = h.wrapping_mul(0x7feb_352d);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846c_a68b);
    h ^= h >> 16;
    0xc000 | (h & 0x3fff) as u16
}

/// Asserts the counters of `stage` are exactly `want` (the others zero).
fn assert_counters(i: &Instance, stage: CounterStage, want: &[(Counter, u64)]) {
    let got = i.counters(stage).unwrap();
    for c in Counter::ALL {
        let w = want.iter().find(|(k, _)| *k == c).map_or(0, |(_, v)| *v);
        assert_eq!(got.get(c), w, "{} counter {}", stage.name(), c.name());
    }
}

/// Enc with a proxy entry: SI - 1, outer Ethernet with zero MACs, the context as saved, TTL
/// as saved; TC_ACT_UNSPEC so that Fwd runs next.
#[test]
fn enc_pushes_the_saved_nsh_with_si_minus_one() {
    for md in [1, 2] {
        let Some(mut i) = common::instance(&format!("enc_push_md{md}")) else {
            return;
        };
        i.insert_proxy(&flow(), &meta(md, 200, 17)).unwrap();
        i.insert_fwd(sph(199), &hop(FwdAction::Ethernet, 0, 0, 0))
            .unwrap();
        let o = i.test_run(Stage::Enc, &inner(), 0).unwrap();
        assert_eq!(o.ret, TC_ACT_UNSPEC, "md{md}");
        assert_eq!(
            o.frame,
            nsh(md, 199, 17).ethernet([0; 6], [0; 6], &inner()),
            "md{md}"
        );
        assert_counters(
            &i,
            CounterStage::Enc,
            &[(Counter::Packets, 1), (Counter::Done, 1)],
        );
        assert_counters(&i, CounterStage::Fwd, &[]);
        // The proxy entry stays as it was.
        assert_eq!(i.list_proxy().unwrap(), vec![(flow(), meta(md, 200, 17))]);
    }
}

/// Enc pushes even without a forwarding entry: Fwd is the one that drops (unknown SPI).
#[test]
fn enc_then_fwd_without_a_hop_drops_in_fwd() {
    let Some(mut i) = common::instance("enc_no_hop") else {
        return;
    };
    i.insert_proxy(&flow(), &meta(1, 9, 63)).unwrap();
    let o = i.test_run(Stage::Enc, &inner(), 0).unwrap();
    assert_eq!(o.ret, TC_ACT_UNSPEC);
    assert_eq!(o.frame, nsh(1, 8, 63).ethernet([0; 6], [0; 6], &inner()));
    let f = i.test_run(Stage::Fwd, &o.frame, 0).unwrap();
    assert_eq!(f.ret, TC_ACT_SHOT);
    assert_counters(
        &i,
        CounterStage::Fwd,
        &[(Counter::Packets, 1), (Counter::DropUnknownSpi, 1)],
    );
}

/// Enc at the end of the chain: the frame leaves decapsulated, untouched.
#[test]
fn enc_end_of_chain_delivers_the_frame_as_it_is() {
    let Some(mut i) = common::instance("enc_end") else {
        return;
    };
    i.insert_proxy(&flow(), &meta(2, 2, 63)).unwrap();
    i.insert_fwd(sph(1), &hop(FwdAction::End, 0, 0, 0)).unwrap();
    let o = i.test_run(Stage::Enc, &inner(), 0).unwrap();
    assert_eq!((o.ret, &o.frame), (TC_ACT_OK, &inner()));
    assert_counters(
        &i,
        CounterStage::Enc,
        &[(Counter::Packets, 1), (Counter::Delivered, 1)],
    );
}

/// Enc on traffic that is not the chain's: a proxy miss (or not IPv4) passes untouched, as
/// does a miss on an interface without NAT learning even when Dec ran before.
#[test]
fn enc_passes_what_is_not_the_chains() {
    let Some(mut i) = common::instance("enc_miss") else {
        return;
    };
    let f = inner();
    let o = i.test_run(Stage::Enc, &f, 0).unwrap();
    assert_eq!((o.ret, &o.frame), (TC_ACT_OK, &f));
    let arp = wire::build::Arp::request([2, 0, 0, 0, 0, 9], [10, 0, 0, 9], [10, 0, 0, 1]).build();
    let o = i.test_run(Stage::Enc, &arp, 0).unwrap();
    assert_eq!((o.ret, &o.frame), (TC_ACT_OK, &arp));
    // A Dec run fills last_dec, but this interface does not learn.
    let cfg = StageCfg {
        mac: OUR_MAC,
        flags: CFG_ANY_DST,
        ifindex: LO,
    };
    i.insert_cfg(LO, &cfg).unwrap();
    common::pin_cpu();
    let d = i
        .test_run(
            Stage::Dec,
            &nsh(1, 50, 63).ethernet(OUR_MAC, PREV_MAC, &inner()),
            0,
        )
        .unwrap();
    assert_eq!((d.ret, &d.frame), (XDP_PASS, &inner()));
    let other = Frame::tcp([10, 9, 9, 9], [10, 0, 0, 2], 7, 80).build();
    let o = i.test_run(Stage::Enc, &other, 0).unwrap();
    assert_eq!((o.ret, &o.frame), (TC_ACT_OK, &other));
    assert_counters(
        &i,
        CounterStage::Enc,
        &[
            (Counter::Packets, 3),
            (Counter::Passed, 1),
            (Counter::ProxyMiss, 2),
        ],
    );
    assert_eq!(i.list_proxy().unwrap().len(), 1, "only Dec's entry");
}

/// A saved SI of 0 cannot be decremented: dropped as a bad NSH.
#[test]
fn enc_drops_si_zero() {
    let Some(mut i) = common::instance("enc_si0") else {
        return;
    };
    i.insert_proxy(&flow(), &meta(1, 0, 63)).unwrap();
    let o = i.test_run(Stage::Enc, &inner(), 0).unwrap();
    assert_eq!(o.ret, TC_ACT_SHOT);
    assert_counters(
        &i,
        CounterStage::Enc,
        &[(Counter::Packets, 1), (Counter::DropBadNsh, 1)],
    );
}

/// Dec then Enc, MD type 1 and 2: the context Dec removed comes back on the frame the SF
/// emitted, SI one lower, TTL as it arrived.
#[test]
fn dec_then_enc_carries_the_context_through() {
    for md in [1, 2] {
        let Some(mut i) = common::instance(&format!("dec_enc_md{md}")) else {
            return;
        };
        i.insert_cfg(
            LO,
            &StageCfg {
                mac: OUR_MAC,
                flags: 0,
                ifindex: LO,
            },
        )
        .unwrap();
        let arriving = nsh(md, 254, 40).ethernet(OUR_MAC, PREV_MAC, &inner());
        let d = i.test_run(Stage::Dec, &arriving, 0).unwrap();
        assert_eq!((d.ret, &d.frame), (XDP_PASS, &inner()), "md{md}");
        let o = i.test_run(Stage::Enc, &d.frame, 0).unwrap();
        assert_eq!(o.ret, TC_ACT_UNSPEC, "md{md}");
        assert_eq!(
            o.frame,
            nsh(md, 253, 40).ethernet([0; 6], [0; 6], &inner()),
            "md{md}"
        );
        assert_eq!(i.list_proxy().unwrap(), vec![(flow(), meta(md, 254, 40))]);
    }
}

/// NAT-aware Enc: the SF rewrote the 5-tuple; on the miss Enc takes this CPU's last Dec,
/// learns the translated key (PROXY_LEARNED) and encapsulates; the flow's next packet hits
/// without learning again.
#[test]
fn enc_learns_a_translated_five_tuple() {
    let Some(mut i) = common::instance("enc_nat") else {
        return;
    };
    i.insert_cfg(
        LO,
        &StageCfg {
            mac: OUR_MAC,
            flags: CFG_NAT_LEARN,
            ifindex: LO,
        },
    )
    .unwrap();
    // Dec and Enc of one packet run on one CPU in the kernel; so do they here.
    common::pin_cpu();
    let translated = Frame::udp([100, 64, 0, 1], [10, 0, 0, 2], 40000, 80)
        .payload(b"chaining across hosts")
        .build();
    let key = FlowKey {
        saddr: Ipv4Addr::new(100, 64, 0, 1),
        sport: 40000,
        ..flow()
    };
    let other = Frame::udp([100, 64, 0, 1], [10, 0, 0, 2], 40001, 80).build();
    for round in 1..=2u64 {
        let arriving = nsh(2, 100, 30).ethernet(OUR_MAC, PREV_MAC, &inner());
        let d = i.test_run(Stage::Dec, &arriving, 0).unwrap();
        assert_eq!((d.ret, &d.frame), (XDP_PASS, &inner()));
        let o = i.test_run(Stage::Enc, &translated, 0).unwrap();
        assert_eq!(o.ret, TC_ACT_UNSPEC, "round {round}");
        assert_eq!(
            o.frame,
            nsh(2, 99, 30).ethernet([0; 6], [0; 6], &translated)
        );
        if round == 1 {
            // Learning consumed the last Dec: another translated flow now misses.
            let o = i.test_run(Stage::Enc, &other, 0).unwrap();
            assert_eq!((o.ret, &o.frame), (TC_ACT_OK, &other));
        }
        assert_counters(
            &i,
            CounterStage::Enc,
            &[
                (Counter::Packets, round + 1),
                (Counter::Done, round),
                (Counter::Learned, 1),
                (Counter::ProxyMiss, 1),
            ],
        );
    }
    let mut learned = meta(2, 100, 30);
    learned.flags = PROXY_LEARNED;
    let mut proxy = i.list_proxy().unwrap();
    proxy.sort_by_key(|(k, _)| *k);
    assert_eq!(proxy, vec![(flow(), meta(2, 100, 30)), (key, learned)]);
}

/// Fwd over Ethernet to Ethernet, MD types 1 and 2: outer MACs from the entry, TTL - 1, SI
/// unchanged; redirected (or left on the interface when the entry says ifindex 0).
#[test]
fn fwd_ethernet_to_ethernet() {
    for md in [1, 2] {
        for (ifindex, verdict) in [(LO, TC_ACT_REDIRECT), (0, TC_ACT_OK)] {
            let Some(mut i) = common::instance(&format!("fwd_eth_eth_md{md}")) else {
                return;
            };
            i.insert_fwd(sph(77), &hop(FwdAction::Ethernet, ifindex, 0, 0))
                .unwrap();
            let input = nsh(md, 77, 20).ethernet(OUR_MAC, PREV_MAC, &inner());
            let o = i.test_run(Stage::Fwd, &input, 0).unwrap();
            assert_eq!(o.ret, verdict);
            assert_eq!(
                o.frame,
                nsh(md, 77, 19).ethernet(NEXT_MAC, OUR_MAC, &inner())
            );
            assert_counters(
                &i,
                CounterStage::Fwd,
                &[(Counter::Packets, 1), (Counter::Done, 1)],
            );
        }
    }
}

/// Fwd over Ethernet into a VXLAN-GPE tunnel: outer Ethernet, IPv4 (checksum, TTL 64, DF),
/// UDP to 4790 (source port from the entry, or the inner flow's hash), VXLAN-GPE (I, P,
/// next protocol NSH, VNI) around the NSH.
#[test]
fn fwd_ethernet_to_vxlan_gpe() {
    for md in [1, 2] {
        for sport in [0, 4242] {
            let Some(mut i) = common::instance(&format!("fwd_eth_gpe_md{md}")) else {
                return;
            };
            i.insert_fwd(sph(77), &hop(FwdAction::VxlanGpe, LO, 0, sport))
                .unwrap();
            let input = nsh(md, 77, 20).ethernet(OUR_MAC, PREV_MAC, &inner());
            let o = i.test_run(Stage::Fwd, &input, 0).unwrap();
            assert_eq!(o.ret, TC_ACT_REDIRECT);
            let port = if sport == 0 {
                flow_port(&flow())
            } else {
                sport
            };
            assert_eq!(o.frame, nsh(md, 77, 19).vxlan_gpe(&tunnel(port), &inner()));
            assert_counters(
                &i,
                CounterStage::Fwd,
                &[(Counter::Packets, 1), (Counter::Done, 1)],
            );
        }
    }
}

/// Fwd over VXLAN-GPE to Ethernet (the tunnel headers go) and to VXLAN-GPE (rewritten; IPv4
/// options in the arriving tunnel are cut).
#[test]
fn fwd_vxlan_gpe_in() {
    for md in [1, 2] {
        let Some(mut i) = common::instance(&format!("fwd_gpe_in_md{md}")) else {
            return;
        };
        i.insert_fwd(sph(30), &hop(FwdAction::Ethernet, LO, 0, 0))
            .unwrap();
        i.insert_fwd(sph(31), &hop(FwdAction::VxlanGpe, LO, 0, 0))
            .unwrap();
        let input = nsh(md, 30, 5).vxlan_gpe(&arriving_tunnel(), &inner());
        let o = i.test_run(Stage::Fwd, &input, 0).unwrap();
        assert_eq!(o.ret, TC_ACT_REDIRECT);
        assert_eq!(
            o.frame,
            nsh(md, 30, 4).ethernet(NEXT_MAC, OUR_MAC, &inner())
        );

        let input = nsh(md, 31, 5).vxlan_gpe(&arriving_tunnel(), &inner());
        let o = i.test_run(Stage::Fwd, &input, 0).unwrap();
        assert_eq!(o.ret, TC_ACT_REDIRECT);
        let want = nsh(md, 31, 4).vxlan_gpe(&tunnel(flow_port(&flow())), &inner());
        assert_eq!(o.frame, want);

        // The same tunnel with 8 bytes of IPv4 options (two NOPs and a padded end).
        let with_options = ipv4_options(&nsh(md, 31, 5).vxlan_gpe(&arriving_tunnel(), &inner()));
        let o = i.test_run(Stage::Fwd, &with_options, 0).unwrap();
        assert_eq!((o.ret, &o.frame), (TC_ACT_REDIRECT, &want));
        assert_counters(
            &i,
            CounterStage::Fwd,
            &[(Counter::Packets, 3), (Counter::Done, 3)],
        );
    }
}

/// `frame` (Ethernet | IPv4 without options | ...) with 8 bytes of IPv4 options inserted,
/// header length, total length and checksum fixed.
fn ipv4_options(frame: &[u8]) -> Vec<u8> {
    let mut f = frame[..34].to_vec();
    f.extend_from_slice(&[1, 1, 1, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&frame[34..]);
    let mut ip = wire::ipv4::Packet::new_unchecked(&mut f[14..]);
    ip.set_header_len(28);
    let total = ip.total_len() + 8;
    ip.set_total_len(total);
    ip.fill_checksum();
    f
}

/// Fwd at the end of the path, over either transport: transport and NSH go, the inner frame
/// is delivered (redirected to an ingress, or left on the interface).
#[test]
fn fwd_end_of_path_delivers_the_inner_frame() {
    for md in [1, 2] {
        let Some(mut i) = common::instance(&format!("fwd_end_md{md}")) else {
            return;
        };
        i.insert_fwd(sph(3), &hop(FwdAction::End, LO, FWDF_INGRESS, 0))
            .unwrap();
        i.insert_fwd(sph(4), &hop(FwdAction::End, 0, 0, 0)).unwrap();
        for (si, verdict) in [(3, TC_ACT_REDIRECT), (4, TC_ACT_OK)] {
            let eth = nsh(md, si, 9).ethernet(OUR_MAC, PREV_MAC, &inner());
            let o = i.test_run(Stage::Fwd, &eth, 0).unwrap();
            assert_eq!(
                (o.ret, &o.frame),
                (verdict, &inner()),
                "md{md} si {si} ethernet"
            );
            let gpe = nsh(md, si, 9).vxlan_gpe(&arriving_tunnel(), &inner());
            let o = i.test_run(Stage::Fwd, &gpe, 0).unwrap();
            assert_eq!(
                (o.ret, &o.frame),
                (verdict, &inner()),
                "md{md} si {si} vxlan-gpe"
            );
        }
        // A large inner frame (several of the Ethernet path's move chunks).
        let big = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80)
            .payload(&(0..1400u32).map(|b| b as u8).collect::<Vec<_>>())
            .build();
        let o = i
            .test_run(
                Stage::Fwd,
                &nsh(md, 4, 9).ethernet(OUR_MAC, PREV_MAC, &big),
                0,
            )
            .unwrap();
        assert_eq!((o.ret, &o.frame), (TC_ACT_OK, &big));
        assert_counters(
            &i,
            CounterStage::Fwd,
            &[(Counter::Packets, 5), (Counter::Delivered, 5)],
        );
    }
}

/// Fwd decrements the TTL before the lookup and never forwards a TTL of 0 (RFC 8300 §2.2);
/// no entry for (SPI, SI) is a drop too.
#[test]
fn fwd_drops_expired_ttl_and_unknown_spi() {
    let Some(mut i) = common::instance("fwd_ttl_spi") else {
        return;
    };
    i.insert_fwd(sph(10), &hop(FwdAction::Ethernet, LO, 0, 0))
        .unwrap();
    for ttl in [1, 0] {
        let o = i
            .test_run(
                Stage::Fwd,
                &nsh(1, 10, ttl).ethernet(OUR_MAC, PREV_MAC, &inner()),
                0,
            )
            .unwrap();
        assert_eq!(o.ret, TC_ACT_SHOT, "ttl {ttl}");
        let o = i
            .test_run(
                Stage::Fwd,
                &nsh(2, 10, ttl).vxlan_gpe(&arriving_tunnel(), &inner()),
                0,
            )
            .unwrap();
        assert_eq!(o.ret, TC_ACT_SHOT, "ttl {ttl}");
    }
    // TTL 2 still goes (leaving with 1).
    let o = i
        .test_run(
            Stage::Fwd,
            &nsh(1, 10, 2).ethernet(OUR_MAC, PREV_MAC, &inner()),
            0,
        )
        .unwrap();
    assert_eq!(o.ret, TC_ACT_REDIRECT);
    assert_eq!(o.frame, nsh(1, 10, 1).ethernet(NEXT_MAC, OUR_MAC, &inner()));
    let o = i
        .test_run(
            Stage::Fwd,
            &nsh(1, 11, 63).ethernet(OUR_MAC, PREV_MAC, &inner()),
            0,
        )
        .unwrap();
    assert_eq!(o.ret, TC_ACT_SHOT);
    assert_counters(
        &i,
        CounterStage::Fwd,
        &[
            (Counter::Packets, 6),
            (Counter::Done, 1),
            (Counter::DropTtl, 4),
            (Counter::DropUnknownSpi, 1),
        ],
    );
}

/// The forwarding table's two parts (cbox.h, `fwd_slots`): SPHs sharing a slot (SI 200 and
/// SI 136 of one SPI, and SI 200 of SPI + 64) all forward by their own entry, the first in
/// the slot, the others in the hash; an SPH whose slot holds another SPH and that the hash
/// lacks is an unknown SPI; a replaced entry forwards by its new value; a deleted one is
/// unknown while the entries sharing its slot still forward; listing shows each SPH once.
#[test]
fn fwd_entries_sharing_a_slot() {
    let Some(mut i) = common::instance("fwd_slots") else {
        return;
    };
    let other_spi = SPI + 64;
    let (a, b, c) = (sph(200), sph(136), other_spi << 8 | 200);
    assert_eq!(stages::maps::fwd_slot(a), stages::maps::fwd_slot(b));
    assert_eq!(stages::maps::fwd_slot(a), stages::maps::fwd_slot(c));
    let hop_to = |mac: [u8; 6]| FwdVal {
        dmac: mac,
        ..hop(FwdAction::Ethernet, 0, 0, 0)
    };
    let (mac_a, mac_b, mac_c, mac_a2) = (
        [2, 0, 0, 0, 0xa, 0xa],
        [2, 0, 0, 0, 0xb, 0xb],
        [2, 0, 0, 0, 0xc, 0xc],
        [2, 0, 0, 0, 0xa, 0x2],
    );
    i.insert_fwd(a, &hop_to(mac_a)).unwrap();
    i.insert_fwd(b, &hop_to(mac_b)).unwrap();
    i.insert_fwd(c, &hop_to(mac_c)).unwrap();
    let frame = |spi: u32, si: u8| {
        Nsh::md1(spi, si, CTX)
            .ttl(9)
            .ethernet(OUR_MAC, PREV_MAC, &inner())
    };
    let out = |spi: u32, si: u8, mac: [u8; 6]| {
        Nsh::md1(spi, si, CTX)
            .ttl(8)
            .ethernet(mac, OUR_MAC, &inner())
    };
    let run = |i: &mut Instance, spi: u32, si: u8| {
        let o = i.test_run(Stage::Fwd, &frame(spi, si), 0).unwrap();
        (o.ret, o.frame)
    };
    assert_eq!(run(&mut i, SPI, 200), (TC_ACT_OK, out(SPI, 200, mac_a)));
    assert_eq!(run(&mut i, SPI, 136), (TC_ACT_OK, out(SPI, 136, mac_b)));
    assert_eq!(
        run(&mut i, other_spi, 200),
        (TC_ACT_OK, out(other_spi, 200, mac_c))
    );
    // Same slot, in neither part.
    assert_eq!(run(&mut i, SPI, 72).0, TC_ACT_SHOT);
    // Replaced in place (the slot's other version, then the flips), twice; at rest the
    // live version is 0, the slot's first cache line.
    let slot_a = stages::maps::fwd_slot(a);
    assert_eq!(i.fwd_slot_read(slot_a).unwrap().live, 0);
    for mac in [mac_a2, mac_a] {
        i.insert_fwd(a, &hop_to(mac)).unwrap();
        assert_eq!(run(&mut i, SPI, 200), (TC_ACT_OK, out(SPI, 200, mac)));
        let slot = i.fwd_slot_read(slot_a).unwrap();
        assert_eq!((slot.live, slot.current()), (0, Some((a, hop_to(mac)))));
    }
    let listed: Vec<(u32, [u8; 6])> = i
        .list_fwd()
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.dmac))
        .collect();
    let mut want = vec![(a, mac_a), (b, mac_b), (c, mac_c)];
    want.sort();
    assert_eq!(listed, want);
    // The slot's entry deleted: unknown; the hash's still forward.
    i.delete_fwd(a).unwrap();
    assert_eq!(run(&mut i, SPI, 200).0, TC_ACT_SHOT);
    assert_eq!(run(&mut i, SPI, 136), (TC_ACT_OK, out(SPI, 136, mac_b)));
    assert_eq!(
        run(&mut i, other_spi, 200),
        (TC_ACT_OK, out(other_spi, 200, mac_c))
    );
    // Rewritten while the slot is free: it moves into the slot, listed once.
    i.insert_fwd(b, &hop_to(mac_a2)).unwrap();
    assert_eq!(run(&mut i, SPI, 136), (TC_ACT_OK, out(SPI, 136, mac_a2)));
    let listed: Vec<u32> = i.list_fwd().unwrap().into_iter().map(|(k, _)| k).collect();
    let mut want = vec![b, c];
    want.sort();
    assert_eq!(listed, want);
    i.delete_fwd(c).unwrap();
    i.delete_fwd(b).unwrap();
    assert!(i.list_fwd().unwrap().is_empty());
    assert_eq!(run(&mut i, SPI, 136).0, TC_ACT_SHOT);
    assert_eq!(run(&mut i, other_spi, 200).0, TC_ACT_SHOT);
    assert_counters(
        &i,
        CounterStage::Fwd,
        &[
            (Counter::Packets, 12),
            (Counter::Done, 8),
            (Counter::DropUnknownSpi, 4),
        ],
    );
}

/// `md1` (an MD type 1 NSH over Ethernet) made an NSH Fwd must refuse, three ways: version
/// 1, MD type 15, MD type 1 with a length of 5 words.
fn bad_nshs(md1: &[u8]) -> [Vec<u8>; 3] {
    let mut version = md1.to_vec();
    version[14] |= 0x40;
    let mut md_type = md1.to_vec();
    md_type[16] = 0x0f;
    let mut md1_len = md1.to_vec();
    md1_len[15] = (md1_len[15] & 0xc0) | 5;
    [version, md_type, md1_len]
}

/// Fwd on frames cut short or with an NSH it cannot take: dropped by reason; frames that
/// are not NSH pass untouched.
#[test]
fn fwd_drops_truncated_and_bad_nsh_and_passes_the_rest() {
    let Some(mut i) = common::instance("fwd_bad") else {
        return;
    };
    i.insert_fwd(sph(10), &hop(FwdAction::End, 0, 0, 0))
        .unwrap();
    let md1 = nsh(1, 10, 63).ethernet(OUR_MAC, PREV_MAC, &inner());
    let gpe = nsh(2, 10, 63).vxlan_gpe(&arriving_tunnel(), &inner());
    let gpe_nsh = wire::nsh::locate(&gpe).unwrap().nsh;
    let truncated = [
        md1[..14 + 4].to_vec(),       // base header cut
        md1[..14 + 20].to_vec(),      // MD1 context cut
        gpe[..gpe_nsh - 4].to_vec(),  // VXLAN-GPE header cut
        gpe[..gpe_nsh + 12].to_vec(), // MD2 context cut
    ];
    for f in &truncated {
        let o = i.test_run(Stage::Fwd, f, 0).unwrap();
        assert_eq!(o.ret, TC_ACT_SHOT, "truncated {f:02x?}");
    }
    for f in &bad_nshs(&md1) {
        let o = i.test_run(Stage::Fwd, f, 0).unwrap();
        assert_eq!(o.ret, TC_ACT_SHOT, "bad {f:02x?}");
    }
    // End of path with a next protocol other than Ethernet: nothing to deliver.
    let ipv4_np = nsh(1, 10, 63)
        .next_protocol(wire::nsh::next_protocol::IPV4)
        .ethernet(OUR_MAC, PREV_MAC, &inner()[14..]);
    let o = i.test_run(Stage::Fwd, &ipv4_np, 0).unwrap();
    assert_eq!(o.ret, TC_ACT_SHOT);
    // Not NSH: plain IPv4, UDP to another port, VXLAN-GPE carrying Ethernet.
    let plain = inner();
    let other_port = Frame::udp([1, 1, 1, 1], [2, 2, 2, 2], 5, 4789)
        .payload(&gpe[42..])
        .build();
    let mut gpe_eth = gpe.clone();
    gpe_eth[45] = 3;
    for f in [&plain, &other_port, &gpe_eth] {
        let o = i.test_run(Stage::Fwd, f, 0).unwrap();
        assert_eq!((o.ret, &o.frame), (TC_ACT_OK, f));
    }
    assert_counters(
        &i,
        CounterStage::Fwd,
        &[
            (Counter::Packets, 11),
            (Counter::Passed, 3),
            (Counter::DropTruncated, 4),
            (Counter::DropBadNsh, 3),
            (Counter::DropInner, 1),
        ],
    );
}

/// Fwd's in-place path (encfwd.h `fwd_fast`: untagged Ethernet, an Ethernet next hop in its
/// slot) takes only what the general path would forward the same way: with such a next hop
/// installed, frames cut short and NSHs it must refuse are still dropped by their reason;
/// MD type 2 up to the longest context the stages carry, the O bit and the unassigned bits
/// are forwarded with only the MACs and the TTL changed; one past the longest context is bad.
#[test]
fn fwd_in_place_takes_only_what_the_general_path_forwards() {
    let Some(mut i) = common::instance("fwd_in_place") else {
        return;
    };
    i.insert_fwd(sph(10), &hop(FwdAction::Ethernet, LO, 0, 0))
        .unwrap();
    let md1 = nsh(1, 10, 63).ethernet(OUR_MAC, PREV_MAC, &inner());
    let md2 = nsh(2, 10, 63).ethernet(OUR_MAC, PREV_MAC, &inner());
    // The longest context: 32 bytes of TLVs (4-byte header + 28-byte value).
    let value = [0x5a; stages::maps::NSH_MAX_CTX - 4];
    let longest = [Tlv {
        class: 0x0101,
        tlv_type: 1,
        value: &value,
    }];
    let value_over = [0x5a; stages::maps::NSH_MAX_CTX];
    let over = [Tlv {
        class: 0x0101,
        tlv_type: 1,
        value: &value_over,
    }];
    let md2_at = |tlvs: &[Tlv<'_>], ttl: u8, dst: [u8; 6], src: [u8; 6]| {
        Nsh::md2(SPI, 10, tlvs)
            .ttl(ttl)
            .ethernet(dst, src, &inner())
    };
    let md2_len = |f: &[u8]| usize::from(f[15] & 0x3f) * 4;
    let truncated = [
        md1[..14 + 4].to_vec(),                 // base header cut
        md1[..14 + 20].to_vec(),                // MD1 context cut
        md2[..14 + md2_len(&md2) - 4].to_vec(), // MD2 context cut
        md2[..14 + 8 + 4].to_vec(),             // MD2 context cut, shorter than MD1's
    ];
    let mut md2_short = md2.clone();
    md2_short[15] = (md2_short[15] & 0xc0) | 1; // MD type 2 with length 1
    let too_long = md2_at(&over, 63, OUR_MAC, PREV_MAC);
    let mut dropped = truncated.to_vec();
    dropped.extend(bad_nshs(&md1));
    dropped.extend([md2_short, too_long]);
    for f in &dropped {
        let o = i.test_run(Stage::Fwd, f, 0).unwrap();
        assert_eq!(o.ret, TC_ACT_SHOT, "dropped {f:02x?}");
    }
    // Forwarded in place: the longest MD type 2 context, and the O bit with the two
    // unassigned bits of the first byte and the six of the third set.
    let o = i
        .test_run(Stage::Fwd, &md2_at(&longest, 20, OUR_MAC, PREV_MAC), 0)
        .unwrap();
    assert_eq!(
        (o.ret, o.frame),
        (TC_ACT_REDIRECT, md2_at(&longest, 19, NEXT_MAC, OUR_MAC))
    );
    let flags = |mut f: Vec<u8>| {
        f[14] |= 0x30;
        f[16] |= 0xf0;
        f
    };
    let with_o = |ttl: u8, dst: [u8; 6], src: [u8; 6]| {
        flags(
            Nsh::md1(SPI, 10, CTX)
                .ttl(ttl)
                .oam(true)
                .ethernet(dst, src, &inner()),
        )
    };
    let o = i
        .test_run(Stage::Fwd, &with_o(20, OUR_MAC, PREV_MAC), 0)
        .unwrap();
    assert_eq!(
        (o.ret, o.frame),
        (TC_ACT_REDIRECT, with_o(19, NEXT_MAC, OUR_MAC))
    );
    assert_counters(
        &i,
        CounterStage::Fwd,
        &[
            (Counter::Packets, 11),
            (Counter::Done, 2),
            (Counter::DropTruncated, 4),
            (Counter::DropBadNsh, 5),
        ],
    );
}

/// Enc+Fwd gives what Enc then Fwd give (frame, verdict, counters) on every branch, and the
/// frames `wire` builds for them.
#[test]
fn enc_fwd_equals_enc_then_fwd() {
    struct Case {
        name: &'static str,
        md: u8,
        ttl: u8,
        hop: Option<FwdVal>,
        want: Option<Vec<u8>>,
        ret: u32,
    }
    let gpe_port = flow_port(&flow());
    let cases = [
        Case {
            name: "md1 ethernet",
            md: 1,
            ttl: 63,
            hop: Some(hop(FwdAction::Ethernet, LO, 0, 0)),
            want: Some(nsh(1, 99, 62).ethernet(NEXT_MAC, OUR_MAC, &inner())),
            ret: TC_ACT_REDIRECT,
        },
        Case {
            name: "md2 ethernet, stay",
            md: 2,
            ttl: 7,
            hop: Some(hop(FwdAction::Ethernet, 0, 0, 0)),
            want: Some(nsh(2, 99, 6).ethernet(NEXT_MAC, OUR_MAC, &inner())),
            ret: TC_ACT_OK,
        },
        Case {
            name: "md1 vxlan-gpe",
            md: 1,
            ttl: 63,
            hop: Some(hop(FwdAction::VxlanGpe, LO, 0, 0)),
            want: Some(nsh(1, 99, 62).vxlan_gpe(&tunnel(gpe_port), &inner())),
            ret: TC_ACT_REDIRECT,
        },
        Case {
            name: "md2 vxlan-gpe, fixed port",
            md: 2,
            ttl: 2,
            hop: Some(hop(FwdAction::VxlanGpe, LO, 0, 6000)),
            want: Some(nsh(2, 99, 1).vxlan_gpe(&tunnel(6000), &inner())),
            ret: TC_ACT_REDIRECT,
        },
        Case {
            name: "controller's entry, TTL 0 meaning 63",
            md: 1,
            ttl: 0,
            hop: Some(hop(FwdAction::Ethernet, LO, 0, 0)),
            want: Some(nsh(1, 99, 62).ethernet(NEXT_MAC, OUR_MAC, &inner())),
            ret: TC_ACT_REDIRECT,
        },
        Case {
            name: "end of chain",
            md: 1,
            ttl: 63,
            hop: Some(hop(FwdAction::End, LO, 0, 0)),
            want: Some(inner()),
            ret: TC_ACT_OK,
        },
        Case {
            name: "ttl expired",
            md: 2,
            ttl: 1,
            hop: Some(hop(FwdAction::Ethernet, LO, 0, 0)),
            want: None,
            ret: TC_ACT_SHOT,
        },
        // MD type 1 towards an Ethernet hop is encfwd.h enc_fast's case: at TTL 1 it must
        // leave the frame to the general code, which drops it.
        Case {
            name: "md1 ttl expired",
            md: 1,
            ttl: 1,
            hop: Some(hop(FwdAction::Ethernet, LO, 0, 0)),
            want: None,
            ret: TC_ACT_SHOT,
        },
        Case {
            name: "md1 ethernet, ttl 2",
            md: 1,
            ttl: 2,
            hop: Some(hop(FwdAction::Ethernet, LO, 0, 0)),
            want: Some(nsh(1, 99, 1).ethernet(NEXT_MAC, OUR_MAC, &inner())),
            ret: TC_ACT_REDIRECT,
        },
        Case {
            name: "unknown spi",
            md: 1,
            ttl: 63,
            hop: None,
            want: None,
            ret: TC_ACT_SHOT,
        },
    ];
    // Each case at rest, then the first (the steady state) with its forwarding slot in the
    // middle of a rewrite: version 1 live, version 0 holding the next hop being replaced
    // (other MACs), which Fwd's and Enc+Fwd's steady-state paths must not read.
    let runs = cases.iter().map(|c| (c, false)).chain([(&cases[0], true)]);
    for (c, mid_rewrite) in runs {
        let Some((mut split, mut one)) = common::split_and_one("enc_fwd", |i| {
            i.insert_proxy(&flow(), &meta(c.md, 100, c.ttl)).unwrap();
            if let Some(h) = &c.hop {
                i.insert_fwd(sph(99), h).unwrap();
            }
            if mid_rewrite {
                common::fwd_slot_mid_rewrite(i, sph(99));
            }
        }) else {
            return;
        };
        let out = common::assert_one_equals_two(
            (&mut split, &mut one),
            (Stage::Enc, Stage::Fwd, Stage::EncFwd),
            [CounterStage::Enc, CounterStage::Fwd],
            &inner(),
            c.ret,
            c.name,
        );
        if let Some(w) = &c.want {
            assert_eq!(&out, w, "{}", c.name);
        }
    }
}

/// Enc+Fwd on traffic that is not the chain's: untouched, counted only by Enc.
#[test]
fn enc_fwd_passes_a_proxy_miss() {
    let Some(mut i) = common::instance("enc_fwd_miss") else {
        return;
    };
    let o = i.test_run(Stage::EncFwd, &inner(), 0).unwrap();
    assert_eq!((o.ret, &o.frame), (TC_ACT_OK, &inner()));
    assert_counters(
        &i,
        CounterStage::Enc,
        &[(Counter::Packets, 1), (Counter::ProxyMiss, 1)],
    );
    assert_counters(&i, CounterStage::Fwd, &[]);
}

/// 802.1Q-tagged frames: Enc keys a tagged frame by its 5-tuple and encapsulates it whole;
/// Fwd takes an NSH behind a tagged outer Ethernet header and writes an untagged transport
/// of either kind (the 4 bytes cut, or the head grown by 32), or delivers the inner frame.
#[test]
fn tagged_frames() {
    let Some(mut i) = common::instance("tagged") else {
        return;
    };
    let tagged_inner = wire::build::ethernet(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        &[(0x8100, 7)],
        0x0800,
        &inner()[14..],
    );
    i.insert_proxy(&flow(), &meta(1, 60, 63)).unwrap();
    let o = i.test_run(Stage::Enc, &tagged_inner, 0).unwrap();
    assert_eq!(o.ret, TC_ACT_UNSPEC);
    assert_eq!(
        o.frame,
        nsh(1, 59, 63).ethernet([0; 6], [0; 6], &tagged_inner)
    );

    i.insert_fwd(sph(20), &hop(FwdAction::Ethernet, LO, 0, 0))
        .unwrap();
    i.insert_fwd(sph(21), &hop(FwdAction::VxlanGpe, LO, 0, 0))
        .unwrap();
    i.insert_fwd(sph(22), &hop(FwdAction::End, 0, 0, 0))
        .unwrap();
    let arriving = |si: u8| {
        wire::build::ethernet(
            OUR_MAC,
            PREV_MAC,
            &[(0x8100, 100)],
            0x894f,
            &nsh(2, si, 8).header(&inner()),
        )
    };
    let o = i.test_run(Stage::Fwd, &arriving(20), 0).unwrap();
    assert_eq!(o.ret, TC_ACT_REDIRECT);
    assert_eq!(o.frame, nsh(2, 20, 7).ethernet(NEXT_MAC, OUR_MAC, &inner()));
    let o = i.test_run(Stage::Fwd, &arriving(21), 0).unwrap();
    assert_eq!(o.ret, TC_ACT_REDIRECT);
    let want = nsh(2, 21, 7).vxlan_gpe(&tunnel(flow_port(&flow())), &inner());
    assert_eq!(o.frame, want);
    let o = i.test_run(Stage::Fwd, &arriving(22), 0).unwrap();
    assert_eq!((o.ret, &o.frame), (TC_ACT_OK, &inner()));
    assert_counters(
        &i,
        CounterStage::Fwd,
        &[
            (Counter::Packets, 3),
            (Counter::Done, 2),
            (Counter::Delivered, 1),
        ],
    );
}
