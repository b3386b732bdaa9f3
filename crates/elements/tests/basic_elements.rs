//! The basic family through the public API: every class builds under its Click name with
//! Click's port counts, configuration errors name the class, and no element panics or loses
//! a packet whatever the bytes and annotations it is pushed.

use elements::{build, BuildCtx, Context, Element, Names, Role, Verdict};
use packet::{Packet, NO_OFFSET};
use proptest::prelude::*;
use std::path::Path;

fn make(class: &str, config: &str, noutputs: usize) -> Result<Box<dyn Element>, String> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/e",
        ninputs: 1,
        noutputs,
        names: &names,
        base_dir: Path::new("/case"),
    };
    build(class, config, &bcx).map_err(|e| e.message)
}

/// (class, configuration, connected outputs, port count). Click's `port_count()`, except
/// `ToDevice` (Click `1/0-2`: sent and failed packets) and `ToDump` (Click `1/0-1`: written
/// packets), whose outputs FuseBox does not have: a packet reaching an exit leaves the NF.
const CLASSES: &[(&str, &str, usize, &str)] = &[
    ("FromDevice", "eth0", 1, "0/1-2"),
    ("PollDevice", "eth0", 1, "0/1-2"),
    ("FromNetmapDevice", "netmap:eth0", 1, "0/1-2"),
    ("FromDPDKDevice", "0", 1, "0/1-2"),
    ("ToDevice", "eth0", 0, "1/0"),
    ("ToNetmapDevice", "netmap:eth0", 0, "1/0"),
    ("ToDPDKDevice", "0", 0, "1/0"),
    ("FromDump", "in.pcap, STOP true", 1, "0/1-2"),
    ("ToDump", "out.pcap", 0, "1/0"),
    ("Discard", "", 0, "1/0"),
    ("Idle", "", 0, "0-/0-"),
    ("Counter", "", 1, "1/1"),
    ("Null", "", 1, "1/1"),
    ("Queue", "100", 1, "1/1-2"),
    ("SimpleQueue", "", 1, "1/1-2"),
    ("ThreadSafeQueue", "", 1, "1/1-2"),
    ("FullNoteQueue", "", 1, "1/1-2"),
    ("Unqueue", "", 1, "1/1"),
    ("Unqueue2", "", 1, "1/1"),
    ("Tee", "", 3, "1/1-"),
    ("Tee", "2", 2, "1/2"),
    ("PullTee", "", 2, "1/1-"),
    ("Paint", "3", 1, "1/1"),
    ("PaintSwitch", "", 3, "1/0-"),
    ("CheckPaint", "3", 2, "1/1-2"),
    ("PaintTee", "3", 2, "1/2"),
    ("Strip", "14", 1, "1/1"),
    ("Unstrip", "14", 1, "1/1"),
    ("EtherEncap", "0x0800, 0:0:0:0:0:1, 0:0:0:0:0:2", 1, "1/1"),
    ("EtherRewrite", "0:0:0:0:0:1, 0:0:0:0:0:2", 1, "1/1"),
    ("StoreEtherAddress", "0:0:0:0:0:1, dst", 2, "1/1-2"),
    ("Print", "label", 1, "1/1"),
    ("HashSwitch", "12, 2", 4, "1/1-"),
    ("RoundRobinSwitch", "", 3, "1/1-"),
    ("StaticSwitch", "1", 2, "1/0-"),
    ("Switch", "", 2, "1/0-"),
    ("AddressInfo", "me 10.0.0.1", 0, "0/0"),
    ("IPRewriterPatterns", "p 1.2.3.4 - - -", 0, "0/0"),
    ("ScheduleInfo", "e 2", 0, "0/0"),
    ("ControlSocket", "TCP, 7777", 0, "0/0"),
    ("DriverManager", "stop", 0, "0/0"),
    ("Script", "wait 1s, stop", 0, "0/0"),
    ("StaticThreadSched", "e 1", 0, "0/0"),
];

#[test]
fn every_class_builds_with_clicks_ports() {
    for &(class, config, noutputs, ports) in CLASSES {
        let e = make(class, config, noutputs).unwrap_or_else(|m| panic!("{class}({config}): {m}"));
        assert_eq!(e.class_name(), class);
        assert_eq!(e.port_count().describe(), ports, "{class}");
        assert_eq!(e.held(), 0, "{class}");
    }
}

#[test]
fn roles() {
    let role = |c, k| make(c, k, 1).map(|e| e.role()).unwrap_or(Role::Inner);
    assert_eq!(role("FromDevice", "eth3"), Role::FromDevice("eth3".into()));
    assert_eq!(role("ToDevice", "eth4"), Role::ToDevice("eth4".into()));
    assert_eq!(
        role("FromDump", "a/in.pcap"),
        Role::FromDump(Path::new("/case/a/in.pcap").into())
    );
    assert_eq!(
        role("ToDump", "/abs/out.pcap"),
        Role::ToDump(Path::new("/abs/out.pcap").into())
    );
    assert_eq!(role("Counter", ""), Role::Inner);
}

#[test]
fn configuration_errors_name_the_class_and_what_was_expected() {
    let cases = [
        ("Strip", "", "Strip: missing argument LENGTH"),
        (
            "Paint",
            "300",
            "Paint: expected COLOR at most 255, found 300",
        ),
        (
            "EtherEncap",
            "0x0800, 1:2:3, 0:0:0:0:0:2",
            "EtherEncap: expected Ethernet address, found `1:2:3`",
        ),
        (
            "HashSwitch",
            "0, 0",
            "HashSwitch: expected LENGTH > 0, found 0",
        ),
        (
            "Tee",
            "3",
            "Tee: expected 3 connected outputs for N 3, found 2",
        ),
        (
            "Queue",
            "CAPACITY many",
            "Queue: expected CAPACITY (an unsigned integer), found `many`",
        ),
        (
            "AddressInfo",
            "x 10.0.0",
            "AddressInfo: expected an IP address, IP prefix or Ethernet address",
        ),
        ("Counter", "1", "Counter: too many arguments"),
    ];
    for (class, config, want) in cases {
        match make(class, config, 2) {
            Ok(_) => panic!("{class}({config}) accepted"),
            Err(m) => assert!(
                m.starts_with(want),
                "{class}({config}): got `{m}`, want `{want}...`"
            ),
        }
    }
}

/// Pushes `p` and returns (outputs, drops, created), checking every output port is valid.
fn push(e: &mut dyn Element, p: Packet, noutputs: usize) -> (Vec<(usize, Packet)>, usize, u64) {
    let mut cx = Context::default();
    let mut out = Vec::new();
    let mut drops = 0;
    match e.push(0, p, &mut cx) {
        Verdict::Out(port, q) => out.push((port, q)),
        Verdict::Drop(_, reason) => {
            assert!(
                !reason.is_empty() && reason.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{reason}"
            );
            drops += 1;
        }
        Verdict::Done => {}
    }
    out.extend(cx.take_emitted());
    drops += cx.take_dropped().count();
    for (port, _) in &out {
        assert!(
            *port < noutputs.max(1),
            "{} emitted on output {port}",
            e.class_name()
        );
    }
    (out, drops, cx.take_created())
}

proptest! {
    #[test]
    fn never_panics_and_accounts_for_every_packet(
        data in proptest::collection::vec(any::<u8>(), 0..120),
        paint in any::<u8>(),
        pull in 0usize..40,
        mac_in_data in any::<bool>(),
    ) {
        for &(class, config, noutputs, _) in CLASSES {
            let sink = matches!(class, "ToDevice" | "ToNetmapDevice" | "ToDPDKDevice" | "ToDump");
            let mut e = make(class, config, noutputs).map_err(TestCaseError::fail)?;
            let mut p = Packet::from_bytes(&data);
            p.meta.paint = paint;
            if mac_in_data {
                p.set_mac_header(0);
            }
            p.pull(pull.min(data.len()));
            if !mac_in_data {
                p.meta.mac_offset = NO_OFFSET;
            }
            let (out, drops, created) = push(e.as_mut(), p, noutputs);
            let consumed = u64::from(sink);
            prop_assert_eq!(1 + created, out.len() as u64 + drops as u64 + consumed + e.held(), "{}", class);
        }
    }
}

#[test]
fn a_small_pipeline() {
    // FromDevice -> Strip(14) -> EtherEncap -> Paint(2) -> PaintTee(2) -> Counter, by hand.
    let mut chain: Vec<Box<dyn Element>> = [
        ("FromDevice", "eth0", 1),
        ("Strip", "14", 1),
        (
            "EtherEncap",
            "0x0800, 02:00:00:00:00:aa, 02:00:00:00:00:bb",
            1,
        ),
        ("Paint", "2", 1),
        ("PaintTee", "2", 2),
    ]
    .iter()
    .map(|&(c, k, n)| make(c, k, n).unwrap_or_else(|m| panic!("{m}")))
    .collect();
    let mut counter = make("Counter", "", 1).unwrap_or_else(|m| panic!("{m}"));
    let mut frame = vec![0xffu8; 6];
    frame.extend_from_slice(&[2, 0, 0, 0, 0, 1, 8, 0]);
    frame.extend_from_slice(&[0x45; 26]);
    let mut packets = vec![Packet::from_bytes(&frame)];
    for e in chain.iter_mut() {
        let mut next = Vec::new();
        for p in packets {
            let (out, drops, _) = push(e.as_mut(), p, 2);
            assert_eq!(drops, 0);
            next.extend(out.into_iter().map(|(_, q)| q));
        }
        packets = next;
    }
    assert_eq!(packets.len(), 2);
    for p in packets {
        assert_eq!(
            &p.data()[..14],
            &[2, 0, 0, 0, 0, 0xbb, 2, 0, 0, 0, 0, 0xaa, 8, 0]
        );
        assert_eq!(&p.data()[14..], &frame[14..]);
        assert_eq!(p.meta.paint, 2);
        assert_eq!(p.meta.packet_type, packet::PacketType::Broadcast);
        push(counter.as_mut(), p, 1);
    }
    assert_eq!(counter.stats(), vec![("count", 2), ("byte_count", 80)]);
}
