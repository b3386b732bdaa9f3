//! Action profiles of small NFs against hand-checked expectations.

mod common;

use plan::profile::{profile_nf, IpHeaderAt, Kind, Part, Profile};
use space::Field;

fn one(test: &str, body: &str) -> Profile {
    let ex = common::linear(test, &[body]);
    profile_nf(&ex, 0)
}

fn whole(test: &str, config: &str) -> Profile {
    let ex = common::chain_of(test, &[config]);
    profile_nf(&ex, 0)
}

fn set(parts: &[Part]) -> std::collections::BTreeSet<Part> {
    parts.iter().copied().collect()
}

const ENTRY_WRITES: [Part; 2] = [Part::MacHeader, Part::Anno(Field::PacketType)];

#[test]
fn an_empty_nf_reads_the_destination_mac_for_the_packet_type() {
    let p = one("empty", "");
    assert!(p.reads.is_empty());
    let mac = set(&[Part::Field(Field::EthDst)]);
    assert_eq!(p.derived.get(&Part::Anno(Field::PacketType)), Some(&mac));
    assert!(p.row().header_read);
    assert_eq!(p.writes, set(&ENTRY_WRITES));
    assert!(!p.may_drop && !p.stateful && !p.makes_packets && p.keeps_length());
    assert_eq!(p.ip_header, IpHeaderAt::Never);
    assert_eq!(
        (p.inputs.clone(), p.outputs.clone()),
        (vec!["eth0".into()], vec!["eth1".into()])
    );
    assert!(p.conservative.is_empty());
}

#[test]
fn a_counter_is_a_probe_that_reads_the_length_and_keeps_state() {
    let p = one("counter", "Counter");
    assert_eq!(p.reads, set(&[Part::Length]));
    assert_eq!(p.writes, set(&ENTRY_WRITES));
    assert!(p.stateful && !p.may_drop);
    assert!(p.state.keys().any(|k| k.contains("Counter")));
    let (kinds, d) = p.kinds();
    assert_eq!(d, 0);
    assert_eq!(kinds, vec![Kind::Probe, Kind::Firewall, Kind::Lb]);
}

#[test]
fn a_filter_reads_its_fields_at_the_marked_header_and_drops() {
    let p = one(
        "filter",
        "MarkIPHeader(14) -> IPFilter(allow src 10.0.0.1, deny all)",
    );
    assert!(p.reads.contains(&Part::Field(Field::IpSrc)));
    assert!(p.reads.contains(&Part::Field(Field::IpIhl)));
    // The NF marks the header itself: it does not read the annotation it came with.
    assert!(!p.reads.contains(&Part::NetHeader));
    assert!(!p.reads.contains(&Part::Field(Field::IpDst)));
    assert_eq!(
        p.writes,
        set(&[ENTRY_WRITES[0], ENTRY_WRITES[1], Part::NetHeader])
    );
    assert!(p.may_drop);
    assert_eq!(p.ip_header, IpHeaderAt::From(14));
    assert!(p.keeps_length());
}

#[test]
fn a_filter_on_an_inherited_header_reads_the_annotation_and_cannot_place_it() {
    let p = one("inherited", "IPFilter(allow udp, deny all)");
    assert!(p.reads.contains(&Part::NetHeader));
    assert!(p.reads.contains(&Part::Field(Field::IpProto)));
    assert_eq!(p.ip_header, IpHeaderAt::Unknown);
}

#[test]
fn check_ip_header_cuts_at_the_ip_length_and_counts() {
    let p = one("check", "CheckIPHeader(14)");
    assert!(p.removes_bytes && !p.adds_bytes);
    assert!(p.reads.contains(&Part::IpChecksum));
    assert!(p.reads.contains(&Part::Length));
    assert!(p.writes.contains(&Part::Length));
    assert!(p.writes.contains(&Part::Anno(Field::DstIpAnno)));
    assert!(p.stateful && p.may_drop);
    assert!(p.drop_reasons.contains("bad-ip-checksum"));
}

#[test]
fn dec_ip_ttl_after_a_check_writes_the_ttl_and_checksum_and_is_not_opaque() {
    let p = one("ttl", "CheckIPHeader(14) -> DecIPTTL");
    assert!(p.writes.contains(&Part::Field(Field::IpTtl)));
    assert!(p.writes.contains(&Part::IpChecksum));
    assert!(p.reads.contains(&Part::Field(Field::IpTtl)));
    // The packets without an IPv4 header (a Runtime case of DecIPTTL) cannot reach it.
    assert!(p.conservative.is_empty(), "{:?}", p.conservative);
    assert!(!p.writes.contains(&Part::Everything));
}

#[test]
fn dec_ip_ttl_alone_drops_what_has_no_header_as_it_declares() {
    let p = one("ttl-alone", "DecIPTTL");
    assert!(!p.writes.contains(&Part::Everything));
    assert!(p.conservative.is_empty());
    assert!(p.declared.iter().any(|k| k.contains("DecIPTTL")));
    assert!(p.may_drop && p.keeps_length());
}

#[test]
fn check_ip_header_reads_the_destination_for_its_annotation_only() {
    let p = one("dst-anno", "CheckIPHeader(14, CHECKSUM false)");
    let dst = set(&[Part::Field(Field::IpDst)]);
    assert_eq!(p.derived.get(&Part::Anno(Field::DstIpAnno)), Some(&dst));
    assert!(!p.reads.contains(&Part::Field(Field::IpDst)));
    // It counts where an element reads the annotation (a route lookup).
    let q = one(
        "dst-anno-used",
        "CheckIPHeader(14) -> RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 0)",
    );
    assert!(q.annotations_used.contains(&Part::Anno(Field::DstIpAnno)));
    let dead = plan::deps::dead_annotations(std::slice::from_ref(&q));
    assert!(q
        .effective_reads(&dead)
        .contains(&Part::Field(Field::IpDst)));
}

#[test]
fn strip_and_encap_rewrite_the_ethernet_header_in_place() {
    let p = one(
        "encap",
        "Strip(14) -> MarkIPHeader(0) -> EtherEncap(0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2)",
    );
    assert!(p.keeps_length(), "{:?}", p.length_changes);
    for f in [Field::EthDst, Field::EthSrc, Field::EtherType] {
        assert!(p.writes.contains(&Part::Field(f)), "{f}");
    }
    assert_eq!(p.ip_header, IpHeaderAt::From(14));
}

#[test]
fn strip_alone_removes_bytes_in_front() {
    let p = one("strip", "Strip(14)");
    assert!(p.removes_bytes && !p.adds_bytes);
    let p = one("unstrip", "Unstrip(14)");
    assert!(p.adds_bytes && !p.removes_bytes);
}

#[test]
fn ether_rewrite_writes_the_addresses_where_the_entry_marked_the_mac_header() {
    let p = one("rewrite", "EtherRewrite(1:1:1:1:1:1, 2:2:2:2:2:2)");
    assert!(p.writes.contains(&Part::Field(Field::EthDst)));
    assert!(p.writes.contains(&Part::Field(Field::EthSrc)));
    assert!(!p.reads.contains(&Part::MacHeader));
}

#[test]
fn a_raw_classifier_reads_frame_bytes() {
    let p = whole(
        "classifier",
        "FromDevice(eth0) -> c :: Classifier(12/0800, -) -> ToDevice(eth1); c[1] -> Discard;",
    );
    assert!(
        p.reads.contains(&Part::Frame { start: 12, len: 2 }),
        "{:?}",
        p.reads
    );
}

#[test]
fn tee_makes_packets() {
    let p = whole(
        "tee",
        "FromDevice(eth0) -> t :: Tee(2) -> ToDevice(eth1); t[1] -> Discard;",
    );
    assert!(p.makes_packets);
}

#[test]
fn an_element_without_model_or_declaration_is_taken_as_anything() {
    let p = one("encap", "IPEncap(4, 1.0.0.1, 2.0.0.2)");
    assert!(p.reads.contains(&Part::Everything));
    assert!(p.writes.contains(&Part::Everything));
    assert!(p.may_drop && p.stateful && p.makes_packets && !p.keeps_length());
    assert!(p.conservative.keys().any(|k| k.contains("IPEncap")));
}

#[test]
fn a_round_robin_switch_declares_it_reads_and_writes_nothing() {
    let p = whole(
        "rr",
        "FromDevice(eth0) -> r :: RoundRobinSwitch -> ToDevice(eth1); r[1] -> ToDevice(eth1);",
    );
    assert!(p.conservative.is_empty(), "{:?}", p.conservative);
    assert!(p.reads.is_empty(), "{:?}", p.reads);
    assert_eq!(p.writes, set(&ENTRY_WRITES));
    assert!(p.stateful && !p.may_drop && !p.makes_packets && p.keeps_length());
}

/// The IPv4 and transport fields a flow parse reads (`Declared::FLOW`), as parts.
fn flow_parts() -> Vec<Part> {
    elements::record::Declared::FLOW
        .iter()
        .filter(|f| f.layout().is_some())
        .map(|f| Part::Field(*f))
        .collect()
}

#[test]
fn a_monitor_is_a_probe_reading_the_flow() {
    let p = one("monitor", "MarkIPHeader(14) -> Monitor");
    for f in flow_parts() {
        assert!(p.reads.contains(&f), "{f}: {:?}", p.reads);
    }
    assert!(!p.reads.contains(&Part::Payload));
    assert_eq!(
        p.writes,
        set(&[ENTRY_WRITES[0], ENTRY_WRITES[1], Part::NetHeader])
    );
    assert!(p.stateful && !p.may_drop && p.keeps_length() && p.conservative.is_empty());
    let row = p.row();
    assert!(row.header_read && !row.payload_read && !row.header_write && !row.drop);
    assert!(p.kinds().0.contains(&Kind::Probe), "{:?}", p.kinds());
}

#[test]
fn an_ids_reads_header_and_payload_and_drops() {
    let p = one("ids", "MarkIPHeader(14) -> SnortIDS(RULES /dev/null)");
    assert!(p.conservative.is_empty(), "{:?}", p.conservative);
    for f in flow_parts() {
        assert!(p.reads.contains(&f), "{f}");
    }
    assert!(p.reads.contains(&Part::Payload) && p.reads.contains(&Part::Field(Field::TcpFlags)));
    assert!(p.may_drop && p.stateful && p.keeps_length());
    assert!(p.drop_reasons.iter().any(|r| r.contains("SnortIDS")));
    let row = p.row();
    assert!(row.header_read && row.payload_read && !row.header_write && !row.payload_write);
    assert_eq!(p.kinds(), (vec![Kind::Ids], 0));
}

#[test]
fn a_nat_reads_and_writes_addresses_ports_and_checksums() {
    for (test, config) in [
        (
            "rewriter",
            "FromDevice(eth0) -> MarkIPHeader(14) \
             -> IPRewriter(pattern 203.0.113.1 50000-50010 - - 0 0, drop) -> ToDevice(eth1);",
        ),
        (
            "mazunat",
            "FromDevice(eth0) -> MarkIPHeader(14) -> n :: MazuNAT(EXTERNAL 203.0.113.1) \
             -> ToDevice(eth1); Idle -> [1]n; n[1] -> Discard;",
        ),
    ] {
        let p = whole(test, config);
        assert!(p.conservative.is_empty(), "{test}: {:?}", p.conservative);
        for f in [Field::IpSrc, Field::IpDst, Field::SrcPort, Field::DstPort] {
            assert!(p.reads.contains(&Part::Field(f)), "{test}: {f}");
            assert!(p.writes.contains(&Part::Field(f)), "{test}: {f}");
        }
        assert!(p.writes.contains(&Part::IpChecksum) && p.writes.contains(&Part::L4Checksum));
        assert!(!p.reads.contains(&Part::Payload), "{test}");
        assert!(p.may_drop && p.stateful && p.keeps_length(), "{test}");
        let row = p.row();
        assert!(
            row.header_read && row.header_write && !row.payload_read,
            "{test}"
        );
        assert!(p.kinds().0.contains(&Kind::Nat), "{test}: {:?}", p.kinds());
    }
}

#[test]
fn a_load_balancer_reads_the_flow_and_writes_the_destination() {
    let p = one(
        "maglev",
        "MarkIPHeader(14) -> Maglev(BACKEND a 10.0.1.1 02:00:00:00:01:01)",
    );
    assert!(p.conservative.is_empty(), "{:?}", p.conservative);
    for f in flow_parts() {
        assert!(p.reads.contains(&f), "{f}");
    }
    for f in [Field::IpDst, Field::EthDst] {
        assert!(p.writes.contains(&Part::Field(f)), "{f}");
    }
    assert!(p.may_drop && p.stateful && p.keeps_length());
}

#[test]
fn checksum_setters_read_every_transport_byte_and_write_the_checksum() {
    let p = one("udpsum", "MarkIPHeader(14) -> SetUDPChecksum");
    assert!(p.conservative.is_empty(), "{:?}", p.conservative);
    assert!(p.reads.contains(&Part::Payload) && p.reads.contains(&Part::IpOptions));
    assert!(p.writes.contains(&Part::L4Checksum));
    assert!(!p.writes.contains(&Part::Payload));
    assert!(p.may_drop && !p.stateful && p.keeps_length());
}

#[test]
fn paint_writes_an_annotation_that_check_paint_reads() {
    let ex = common::linear("paint", &["Paint(3)", "CheckPaint(3)"]);
    let (a, b) = (profile_nf(&ex, 0), profile_nf(&ex, 1));
    assert!(a.writes.contains(&Part::Anno(Field::Paint)));
    assert!(b.reads.contains(&Part::Anno(Field::Paint)));
}
