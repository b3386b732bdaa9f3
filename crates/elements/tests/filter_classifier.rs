//! Classifier: clauses, masks, wildcards, negation, short packets, first match, errors.

use elements::classifier::{parse_pattern, Classifier};
use elements::{build, BuildCtx, Context, Names, PortCount, Verdict};
use packet::Packet;
use std::path::Path;
use wire::ethernet::ethertype;

fn classifier(conf: &str) -> Box<dyn elements::Element> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/c",
        ninputs: 1,
        noutputs: 4,
        names: &names,
        base_dir: Path::new("."),
    };
    build("Classifier", conf, &bcx).unwrap_or_else(|e| panic!("Classifier({conf}): {e}"))
}

fn conf_err(conf: &str) -> String {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/c",
        ninputs: 1,
        noutputs: 4,
        names: &names,
        base_dir: Path::new("."),
    };
    match build("Classifier", conf, &bcx) {
        Ok(_) => panic!("Classifier({conf}) accepted"),
        Err(e) => e.message,
    }
}

fn push(e: &mut Box<dyn elements::Element>, data: &[u8]) -> Result<usize, &'static str> {
    let mut cx = Context::default();
    match e.push(0, Packet::from_bytes(data), &mut cx) {
        Verdict::Out(o, p) => {
            assert_eq!(p.data(), data, "packets pass unchanged");
            Ok(o)
        }
        Verdict::Drop(_, why) => Err(why),
        Verdict::Done => panic!("Classifier answers directly"),
    }
}

fn eth(ethertype: u16, rest: &[u8]) -> Vec<u8> {
    wire::build::ethernet([0xff; 6], [2, 0, 0, 0, 0, 1], &[], ethertype, rest)
}

#[test]
fn click_manual_example() {
    // ARP requests, ARP replies, IP, everything else.
    let mut c = classifier("12/0806 20/0001, 12/0806 20/0002, 12/0800, -");
    // Click's `1/-`: at least the four outputs the patterns name.
    assert_eq!(c.port_count(), PortCount::range(1, 1, 4, usize::MAX));
    assert_eq!(c.class_name(), "Classifier");
    let arp = |op: u8| eth(ethertype::ARP, &[0, 1, 8, 0, 6, 4, 0, op]);
    assert_eq!(push(&mut c, &arp(1)), Ok(0));
    assert_eq!(push(&mut c, &arp(2)), Ok(1));
    assert_eq!(push(&mut c, &eth(ethertype::IPV4, &[0x45; 20])), Ok(2));
    assert_eq!(push(&mut c, &eth(ethertype::IPV6, &[0x60; 40])), Ok(3));
    assert_eq!(push(&mut c, &arp(3)), Ok(3));
}

#[test]
fn no_match_is_dropped() {
    let mut c = classifier("12/0800");
    assert_eq!(
        push(&mut c, &eth(ethertype::ARP, &[0; 28])),
        Err("no-match")
    );
    assert_eq!(push(&mut c, &[]), Err("no-match"));
}

#[test]
fn first_match_wins() {
    let mut c = classifier("12/08, 12/0800, -");
    assert_eq!(push(&mut c, &eth(ethertype::IPV4, &[])), Ok(0));
    assert_eq!(push(&mut c, &eth(ethertype::ARP, &[])), Ok(0));
    assert_eq!(push(&mut c, &eth(ethertype::IPV6, &[])), Ok(2));
}

#[test]
fn wildcards_and_masks() {
    let mut c = classifier("0/4?, 0/?6, 0/f0%0f, 0/a5%f0");
    assert_eq!(push(&mut c, &[0x45]), Ok(0));
    assert_eq!(push(&mut c, &[0x46]), Ok(0), "first pattern wins");
    assert_eq!(push(&mut c, &[0x56]), Ok(1));
    assert_eq!(
        push(&mut c, &[0x30]),
        Ok(2),
        "mask 0f: low nibble must be 0"
    );
    assert_eq!(
        push(&mut c, &[0xa9]),
        Ok(3),
        "mask f0: only the high nibble"
    );
    assert_eq!(push(&mut c, &[0x91]), Err("no-match"));
    let p = parse_pattern("2/12??56").unwrap();
    assert!(p.matches(&[0, 0, 0x12, 0xff, 0x56]));
    assert!(!p.matches(&[0, 0, 0x12, 0xff, 0x57]));
}

#[test]
fn clauses_are_anded_and_negation() {
    let mut c = classifier("0/01 !1/02, 0/01");
    assert_eq!(push(&mut c, &[1, 3]), Ok(0));
    assert_eq!(push(&mut c, &[1, 2]), Ok(1), "negated clause fails");
    assert_eq!(push(&mut c, &[2, 3]), Err("no-match"));
    // A negated clause on bytes the packet does not have holds.
    assert_eq!(push(&mut c, &[1]), Ok(0));
}

#[test]
fn short_packets_do_not_match() {
    let mut c = classifier("4/aabb");
    assert_eq!(push(&mut c, &[0, 0, 0, 0, 0xaa]), Err("no-match"));
    assert_eq!(push(&mut c, &[0, 0, 0, 0, 0xaa, 0xbb]), Ok(0));
    // Trailing wildcard bytes are not needed.
    let mut c = classifier("4/aa??");
    assert_eq!(push(&mut c, &[0, 0, 0, 0, 0xaa]), Ok(0));
    let mut c = classifier("1000/00");
    assert_eq!(push(&mut c, &[0; 64]), Err("no-match"));
}

#[test]
fn patterns_are_exposed() {
    let c = classifier("12/0800 !23/06, -");
    let cls = c.as_any().downcast_ref::<Classifier>().unwrap();
    assert_eq!(cls.patterns().len(), 2);
    assert_eq!(cls.patterns()[0].clauses.len(), 2);
    assert!(cls.patterns()[0].clauses[1].negated);
    assert_eq!(cls.patterns()[0].clauses[1].offset, 23);
    assert!(cls.patterns()[1].clauses.is_empty());
}

#[test]
fn configuration_errors() {
    assert!(conf_err("").contains("at least one pattern"));
    assert!(conf_err("12/080").contains("even number"));
    assert!(conf_err("12/0800, 12/08x0").starts_with("pattern 1:"));
    assert!(conf_err("12/08x0").contains("hex"));
    assert!(conf_err("a/08").contains("decimal offset"));
    assert!(conf_err("12-0800").contains("OFFSET/VALUE"));
    assert!(conf_err("12/0800%ff").contains("as many hex digits"));
    assert!(conf_err("12/0800%ffzz").contains("hex digits after `%`"));
    assert!(conf_err("99999999/00").contains("offset"));
}
