//! Dec against a model built on `wire` (differential): seeded random NSH frames over both
//! transports, MD type 1 and 2, each with one random change to its NSH base header or its
//! VXLAN-GPE header, or cut short (Ethernet transport). The model says, from
//! `wire::nsh::Packet::new_checked` and `wire::nsh::Repr::parse` at the offset the frame was
//! built with, whether Dec must decapsulate (then: the output is the inner frame and the
//! proxy entry is the NSH as `wire` reads it), pass the frame (not NSH: VXLAN-GPE without
//! the P flag, with a version or another next protocol) or drop it, and with which counter.

mod common;

use common::{XDP_DROP, XDP_PASS};
use stages::maps::{Counter, CounterStage, FlowKey, NshMeta, StageCfg, NSH_MAX_CTX};
use stages::Stage;
use wire::build::{Frame, Gpe, Nsh};
use wire::nsh::{Metadata, Packet, Repr, Tlv};
use wire::Error as NshError;

const OUR_MAC: [u8; 6] = [0x02, 0xcb, 0, 0, 0, 0x11];
const PEER_MAC: [u8; 6] = [0x02, 0xcb, 0, 0, 0, 0x22];

/// SplitMix64: the test's own seeded generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Want {
    Decap(Vec<u8>, FlowKey, NshMeta),
    Pass,
    Drop(Counter),
}

/// What Dec must do with `frame`, whose NSH was put at `nsh`; `gpe` is the VXLAN-GPE
/// header's offset, if any.
fn model(frame: &[u8], nsh: usize, gpe: Option<usize>) -> Want {
    if let Some(g) = gpe {
        let flags = frame[g];
        if flags & 0x04 == 0 || flags & 0x30 != 0 || frame[g + 3] != 4 {
            return Want::Pass;
        }
    }
    let Some(rest) = frame.get(nsh..) else {
        return Want::Drop(Counter::DropTruncated);
    };
    let p = match Packet::new_checked(rest) {
        Ok(p) => p,
        Err(NshError::Truncated) => return Want::Drop(Counter::DropTruncated),
        Err(_) => return Want::Drop(Counter::DropBadNsh),
    };
    let repr = match Repr::parse(&p) {
        Ok(r) => r,
        // Dec does not read the TLVs: MD type 2 context that is not whole TLVs is carried.
        Err(NshError::Malformed) if p.md_type() == 2 => Repr {
            o_bit: p.o_bit(),
            ttl: p.ttl(),
            next_protocol: p.next_protocol(),
            spi: p.spi(),
            si: p.si(),
            metadata: Metadata::Type2(p.metadata()),
        },
        Err(_) => return Want::Drop(Counter::DropBadNsh),
    };
    let meta = match repr.metadata {
        Metadata::Type1(c) => NshMeta::md1(repr.spi, repr.si, repr.ttl, c),
        Metadata::Type2(md) if md.len() <= NSH_MAX_CTX => {
            NshMeta::md2(repr.spi, repr.si, repr.ttl, md).unwrap()
        }
        Metadata::Type2(_) => return Want::Drop(Counter::DropBadNsh),
    };
    if repr.next_protocol != wire::nsh::next_protocol::ETHERNET {
        return Want::Drop(Counter::DropInner);
    }
    let inner = &frame[nsh + p.header_len()..];
    match inner_flow(inner) {
        Some(k) => Want::Decap(inner.to_vec(), k, meta),
        None => Want::Drop(Counter::DropInner),
    }
}

/// The 5-tuple of an inner frame as the stages read it: Ethernet (+ one 802.1Q tag), IPv4
/// (version 4, IHL >= 5, the header present; its total length is not checked), TCP or UDP
/// ports when the packet is not a later fragment (the 4 port bytes present), else ports 0.
fn inner_flow(f: &[u8]) -> Option<FlowKey> {
    let eth = wire::ethernet::Frame::new_checked(f).ok()?;
    let (ty, l3) = match eth.ethertype() {
        0x8100 => {
            let tag = f.get(14..18)?;
            (u16::from_be_bytes([tag[2], tag[3]]), 18)
        }
        t => (t, 14),
    };
    if ty != 0x0800 {
        return None;
    }
    let ip = f.get(l3..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip.len() < ihl {
        return None;
    }
    let proto = ip[9];
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    let (mut sport, mut dport) = (0, 0);
    if (proto == 6 || proto == 17) && frag == 0 {
        let l4 = ip.get(ihl..ihl + 4)?;
        sport = u16::from_be_bytes([l4[0], l4[1]]);
        dport = u16::from_be_bytes([l4[2], l4[3]]);
    }
    Some(FlowKey {
        saddr: [ip[12], ip[13], ip[14], ip[15]].into(),
        daddr: [ip[16], ip[17], ip[18], ip[19]].into(),
        sport,
        dport,
        proto,
    })
}

#[test]
fn dec_agrees_with_the_wire_model_on_mutated_frames() {
    let Some(mut i) = common::instance("dec-model") else {
        return;
    };
    // This interface's configuration (every frame here is addressed to its MAC), which Dec's
    // steady-state path needs in its slot.
    i.insert_cfg(
        1,
        &StageCfg {
            mac: OUR_MAC,
            flags: 0,
            ifindex: 1,
        },
    )
    .unwrap();
    let mut rng = Rng(0x6465_635f_6d6f_6465);
    let (mut decaps, mut passes, mut drops) = (0, 0, 0);
    for case in 0..1000 {
        let sport = 1024 + rng.below(60000) as u16;
        let udp = rng.below(2) == 0;
        let inner = if udp {
            Frame::udp([10, 1, 0, 1], [10, 1, 0, 2], sport, 53).build()
        } else {
            Frame::tcp([10, 1, 0, 1], [10, 1, 0, 2], sport, 443).build()
        };
        let key = FlowKey {
            saddr: [10, 1, 0, 1].into(),
            daddr: [10, 1, 0, 2].into(),
            sport,
            dport: if udp { 53 } else { 443 },
            proto: if udp { 17 } else { 6 },
        };
        let spi = rng.below(1 << 24) as u32;
        let si = rng.below(256) as u8;
        let values: Vec<Vec<u8>> = (0..rng.below(4))
            .map(|_| (0..rng.below(13)).map(|_| rng.next() as u8).collect())
            .collect();
        let tlvs: Vec<Tlv<'_>> = values
            .iter()
            .map(|v| Tlv {
                class: rng.below(0x10000) as u16,
                tlv_type: rng.below(128) as u8,
                value: v,
            })
            .collect();
        let md1 = rng.below(2) == 0;
        let nsh = if md1 {
            Nsh::md1(spi, si, [rng.next() as u32, 2, 3, rng.next() as u32])
        } else {
            Nsh::md2(spi, si, &tlvs)
        }
        .ttl(rng.below(64) as u8);
        let vxlan = rng.below(2) == 0;
        let (mut frame, at, gpe) = if vxlan {
            let g = Gpe {
                dst_mac: OUR_MAC,
                ..Gpe::new(
                    [192, 168, 0, 1],
                    [192, 168, 0, 2],
                    rng.below(1 << 24) as u32,
                )
            };
            (
                nsh.vxlan_gpe(&g, &inner),
                14 + 20 + 8 + 8,
                Some(14 + 20 + 8),
            )
        } else {
            (nsh.ethernet(OUR_MAC, PEER_MAC, &inner), 14, None)
        };
        // What the frame puts in the proxy table before any change: a later packet of its
        // flow finds it there (the second run below).
        let first = model(&frame, at, gpe);
        let mutation = rng.below(4);
        let mutated = mutation != 0;
        match mutation {
            0 => {}
            // A random bit of the NSH base header or the service path header.
            1 | 2 => {
                let bit = rng.below(64) as usize;
                frame[at + bit / 8] ^= 1 << (bit % 8);
            }
            // A random bit of the VXLAN-GPE header, or a cut of the Ethernet-borne frame.
            _ => match gpe {
                Some(g) => {
                    let bit = rng.below(32) as usize;
                    frame[g + bit / 8] ^= 1 << (bit % 8);
                }
                None => {
                    let cut = 14 + rng.below((frame.len() - 14) as u64) as usize;
                    frame.truncate(cut.max(14));
                }
            },
        }
        let want = model(&frame, at, gpe);
        // Unchanged frames whose context fits decapsulate to the inner frame under its own
        // 5-tuple (larger MD type 2 contexts are refused: more than NSH_MAX_CTX bytes).
        let fits = md1 || tlvs.iter().map(|t| t.encoded_len()).sum::<usize>() <= NSH_MAX_CTX;
        if !mutated && fits {
            assert!(
                matches!(&want, Want::Decap(f, k, _) if *f == inner && *k == key),
                "case {case}: the model on an unchanged frame: {want:?}"
            );
        }
        i.clear_counters().unwrap();
        for (k, _) in i.list_proxy().unwrap() {
            i.delete_proxy(&k).unwrap();
        }
        // First as a flow's first packet (nothing in the proxy table), then as a later packet
        // of the unchanged frame's flow (its entry there: dec.bpf.c dec_fast's case for the
        // common frame): the same outcome both times.
        for later in [false, true] {
            let before = if later {
                i.clear_counters().unwrap();
                for (k, _) in i.list_proxy().unwrap() {
                    i.delete_proxy(&k).unwrap();
                }
                match first {
                    Want::Decap(_, k, m) => {
                        i.insert_proxy(&k, &m).unwrap();
                        vec![(k, m)]
                    }
                    _ => Vec::new(),
                }
            } else {
                Vec::new()
            };
            let o = i.test_run(Stage::Dec, &frame, 0).unwrap();
            let c = i.counters(CounterStage::Dec).unwrap();
            let ctx = format!("case {case} (later packet: {later}): {want:?} for {frame:02x?}");
            match want {
                Want::Decap(ref inner_out, k, meta) => {
                    assert_eq!(o.ret, XDP_PASS, "{ctx}");
                    assert_eq!(&o.frame, inner_out, "{ctx}");
                    assert_eq!(i.list_proxy().unwrap(), vec![(k, meta)], "{ctx}");
                    assert_eq!(c.get(Counter::Done), 1, "{ctx}");
                    decaps += 1;
                }
                Want::Pass => {
                    assert_eq!((o.ret, &o.frame), (XDP_PASS, &frame), "{ctx}");
                    assert_eq!(c.get(Counter::Passed), 1, "{ctx}");
                    assert_eq!(i.list_proxy().unwrap(), before, "{ctx}");
                    passes += 1;
                }
                Want::Drop(reason) => {
                    assert_eq!(o.ret, XDP_DROP, "{ctx}");
                    assert_eq!(c.get(reason), 1, "{ctx}: counters {c:?}");
                    assert_eq!(i.list_proxy().unwrap(), before, "{ctx}");
                    drops += 1;
                }
            }
        }
    }
    // Every outcome was exercised.
    assert!(
        decaps > 400 && passes > 20 && drops > 400,
        "{decaps} {passes} {drops}"
    );
}
