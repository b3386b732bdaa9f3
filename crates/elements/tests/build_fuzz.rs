//! Configuration strings never panic an element's constructor: every class either builds
//! or refuses with a message. Every class of the registry is tried.

use elements::registry::CLASSES;
use elements::{BuildCtx, Names};
use proptest::prelude::*;
use std::path::Path;

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(",".to_string()),
        Just(" ".to_string()),
        Just("-".to_string()),
        Just("/".to_string()),
        Just("#".to_string()),
        Just("?".to_string()),
        Just("\"".to_string()),
        Just("(".to_string()),
        Just(")".to_string()),
        Just("%".to_string()),
        Just("pattern".to_string()),
        Just("drop".to_string()),
        Just("pass".to_string()),
        Just("keep".to_string()),
        Just("allow".to_string()),
        Just("tcp".to_string()),
        Just("src".to_string()),
        Just("host".to_string()),
        Just("port".to_string()),
        Just("MTU".to_string()),
        Just("STATIC".to_string()),
        Just("BACKEND".to_string()),
        Just("SCHEDULE".to_string()),
        Just("EXTERNAL".to_string()),
        Just("deny".to_string()),
        Just("0x0800".to_string()),
        Just("10.0.0.1".to_string()),
        Just("10.0.0.0/8".to_string()),
        Just("0.0.0.0/0".to_string()),
        Just("2001:db8::/32".to_string()),
        Just("::".to_string()),
        Just("00:11:22:33:44:55".to_string()),
        Just("1000-9000".to_string()),
        Just("12/0800".to_string()),
        (0u32..70000).prop_map(|n| n.to_string()),
        "[a-z0-9.:/-]{1,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn constructors_never_panic(class in 0..CLASSES.len(), toks in prop::collection::vec(token(), 0..12), outs in 0usize..4) {
        let config: String = toks.concat();
        let names = Names::new();
        let bcx = BuildCtx { name: "nf/e", ninputs: 1, noutputs: outs, names: &names, base_dir: Path::new(".") };
        match elements::build(CLASSES[class].name, &config, &bcx) {
            Ok(e) => prop_assert_eq!(e.class_name().is_empty(), false),
            Err(err) => prop_assert!(!err.message.is_empty()),
        }
    }
}

/// A working configuration for each class, to push random packets through.
const CONFIGS: &[(&str, &str, usize, usize)] = &[
    ("Classifier", "12/0800, 12/0806 20/0002, -", 1, 3),
    (
        "IPClassifier",
        "tcp dst port 80, udp, icmp type echo, -",
        1,
        4,
    ),
    (
        "IPFilter",
        "allow src net 10/8 && tcp opt syn, 1 udp && dst port < 1024, deny all",
        1,
        2,
    ),
    ("CheckIPHeader", "", 1, 2),
    ("CheckTCPHeader", "", 1, 2),
    ("CheckUDPHeader", "", 1, 1),
    ("CheckICMPHeader", "", 1, 1),
    (
        "RadixIPLookup",
        "10.0.0.0/8 0, 10.1.0.0/16 10.1.0.1 1, 0.0.0.0/0 2",
        1,
        3,
    ),
    (
        "LookupIP6Route",
        "2000::/3 0, 2001:db8:: ffff:ffff:: fe80::1 1, ::/0 2",
        1,
        3,
    ),
    ("DecIPTTL", "", 1, 2),
    ("IPGWOptions", "10.0.0.1", 1, 2),
    ("IPFragmenter", "68", 1, 2),
    ("SetIPChecksum", "", 1, 1),
    ("SetTCPChecksum", "", 1, 1),
    ("SetUDPChecksum", "", 1, 1),
    (
        "IPRewriter",
        "pattern 10.0.0.1 1000-1010 - - 0 1, pattern - - 10.1.1.2 - 0 1, drop",
        3,
        2,
    ),
    (
        "TCPRewriter",
        "pattern 10.0.0.1 1000-1002# - - 0 1, drop",
        2,
        2,
    ),
    (
        "UDPRewriter",
        "pattern 10.0.0.1 1000-1002? - - 0 1, pass 1",
        2,
        2,
    ),
    (
        "ARPResponder",
        "10.0.0.1 00:01:02:03:04:05, 10.2.0.0/16 00:01:02:03:04:06",
        1,
        2,
    ),
    (
        "ARPQuerier",
        "10.0.0.1, 00:01:02:03:04:05, CAPACITY 4",
        2,
        2,
    ),
    ("ICMPError", "10.0.0.1, unreachable, host", 1, 1),
    ("EtherRewrite", "00:01:02:03:04:05, 00:01:02:03:04:06", 1, 1),
    ("Strip", "14", 1, 1),
    ("Unstrip", "14", 1, 1),
    ("HashSwitch", "26, 4", 1, 3),
    ("PaintSwitch", "", 1, 2),
    ("GetIPAddress", "16", 1, 1),
    ("FixIPSrc", "10.0.0.9", 1, 1),
    ("DropBroadcasts", "", 1, 1),
    (
        "Maglev",
        "BACKEND a 10.0.1.1 02:00:00:00:01:01, BACKEND b 10.0.1.2 02:00:00:00:01:02",
        2,
        2,
    ),
    ("Monitor", "", 1, 1),
    (
        "BlacklistFilter",
        "deny tcp && dst port 23, src net 10/8",
        1,
        1,
    ),
    ("MazuNAT", "EXTERNAL 203.0.113.1, PORTS 50000-50003", 2, 2),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn random_packets_never_panic_and_are_accounted(
        pkts in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..120), any::<bool>(), 0u8..40, any::<u8>()), 1..24)
    ) {
        let names = Names::new();
        for (class, config, ninputs, noutputs) in CONFIGS {
            let bcx = BuildCtx { name: "nf/e", ninputs: *ninputs, noutputs: *noutputs, names: &names, base_dir: Path::new(".") };
            let mut e = elements::build(class, config, &bcx).unwrap_or_else(|err| panic!("{class}: {err}"));
            let mut cx = elements::Context::new(packet::Timestamp(1));
            let (mut pushed, mut created, mut settled) = (0u64, 0u64, 0u64);
            for (i, (bytes, ipv4ish, off, paint)) in pkts.iter().enumerate() {
                let mut data = bytes.clone();
                if *ipv4ish && data.len() >= 34 {
                    // Make a plausible Ethernet + IPv4 start so deeper code paths run.
                    data[12] = 8;
                    data[13] = 0;
                    data[14] = 0x45;
                }
                let mut p = packet::Packet::from_bytes(&data);
                p.meta.paint = *paint % 3;
                let off = usize::from(*off).min(data.len());
                p.set_network_header(off);
                p.set_transport_header((off + 20).min(data.len()));
                cx.now = packet::Timestamp(1 + i as u64 * 1_000_000_000);
                pushed += 1;
                match e.push(i % ninputs, p, &mut cx) {
                    elements::Verdict::Out(port, _) => { prop_assert!(port < (*noutputs).max(1), "{}", class); settled += 1; }
                    elements::Verdict::Drop(_, reason) => { prop_assert!(!reason.is_empty()); settled += 1; }
                    elements::Verdict::Done => {}
                }
                created += cx.take_created();
                settled += cx.take_emitted().count() as u64 + cx.take_dropped().count() as u64;
                cx.settled();
            }
            prop_assert_eq!(pushed + created, settled + e.held(), "{} loses packets", class);
        }
    }
}
