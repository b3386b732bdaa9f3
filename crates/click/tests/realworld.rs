//! Real-world-shaped configurations.

mod common;
use common::*;

const ROUTER: &str = r#"// router
elementclass Router { $mac, $gw |
  input -> Strip(14) -> CheckIPHeader -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 $gw 1);
  rt[0] -> DecIPTTL -> EtherEncap(0x0800, $mac, 00:00:00:00:00:02) -> [0]output;
  rt[1] -> DecIPTTL -> EtherEncap(0x0800, $mac, 00:00:00:00:00:03) -> [1]output;
}
define($MAC 00:00:00:00:00:01)
FromDevice(eth0) -> r :: Router($MAC, 10.0.0.254);
r[0] -> ToDevice(eth1); r[1] -> Queue -> ToDevice(eth2)
"#;

const NAPT: &str = r#"AddressInfo(ext 10.0.0.1, int 192.168.0.0/24);
rw :: IPRewriter(pattern ext 1000-9000 - - 0 1, drop);
FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> [0]rw;
rw[0] -> EtherEncap(0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2) -> ToDevice(eth1);
rw[1] -> Discard;
"#;

#[test]
fn router() {
    let c = parse(ROUTER);
    assert_eq!(
        elems(&c),
        vec![
            ("FromDevice@1", "FromDevice", "eth0"),
            ("r/Strip@1", "Strip", "14"),
            ("r/CheckIPHeader@2", "CheckIPHeader", ""),
            (
                "r/rt",
                "RadixIPLookup",
                "10.0.0.0/8 0, 0.0.0.0/0 10.0.0.254 1"
            ),
            ("r/DecIPTTL@4", "DecIPTTL", ""),
            (
                "r/EtherEncap@5",
                "EtherEncap",
                "0x0800, 00:00:00:00:00:01, 00:00:00:00:00:02"
            ),
            ("r/DecIPTTL@6", "DecIPTTL", ""),
            (
                "r/EtherEncap@7",
                "EtherEncap",
                "0x0800, 00:00:00:00:00:01, 00:00:00:00:00:03"
            ),
            ("ToDevice@3", "ToDevice", "eth1"),
            ("Queue@4", "Queue", ""),
            ("ToDevice@5", "ToDevice", "eth2"),
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("FromDevice@1", 0, "r/Strip@1", 0),
            ("r/Strip@1", 0, "r/CheckIPHeader@2", 0),
            ("r/CheckIPHeader@2", 0, "r/rt", 0),
            ("r/rt", 0, "r/DecIPTTL@4", 0),
            ("r/rt", 1, "r/DecIPTTL@6", 0),
            ("r/DecIPTTL@4", 0, "r/EtherEncap@5", 0),
            ("r/EtherEncap@5", 0, "ToDevice@3", 0),
            ("r/DecIPTTL@6", 0, "r/EtherEncap@7", 0),
            ("r/EtherEncap@7", 0, "Queue@4", 0),
            ("Queue@4", 0, "ToDevice@5", 0),
        ]
    );
    assert!(c.requires.is_empty());
    // Spans point into the class body for expanded members.
    assert_eq!(
        c.elements[c.find("r/rt").unwrap()].span.to_string(),
        "t.click:3:42"
    );
}

#[test]
fn router_with_command_line_define() {
    let c = parse_with(ROUTER, &[("MAC", "aa:bb:cc:dd:ee:ff")]);
    assert_eq!(
        c.elements[c.find("r/EtherEncap@5").unwrap()].config,
        "0x0800, aa:bb:cc:dd:ee:ff, 00:00:00:00:00:02"
    );
}

#[test]
fn napt() {
    let c = parse(NAPT);
    assert_eq!(
        elems(&c),
        vec![
            (
                "AddressInfo@1",
                "AddressInfo",
                "ext 10.0.0.1, int 192.168.0.0/24"
            ),
            ("rw", "IPRewriter", "pattern ext 1000-9000 - - 0 1, drop"),
            ("FromDevice@3", "FromDevice", "eth0"),
            ("Strip@4", "Strip", "14"),
            ("CheckIPHeader@5", "CheckIPHeader", ""),
            (
                "EtherEncap@6",
                "EtherEncap",
                "0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2"
            ),
            ("ToDevice@7", "ToDevice", "eth1"),
            ("Discard@8", "Discard", ""),
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("rw", 0, "EtherEncap@6", 0),
            ("rw", 1, "Discard@8", 0),
            ("FromDevice@3", 0, "Strip@4", 0),
            ("Strip@4", 0, "CheckIPHeader@5", 0),
            ("CheckIPHeader@5", 0, "rw", 0),
            ("EtherEncap@6", 0, "ToDevice@7", 0),
        ]
    );
}

#[test]
fn classifier_fanout_with_compound_and_keywords() {
    let src = r#"
// A small firewall-ish chain in the style of Click's sample configs.
require(package fusebox);
define($IN eth0, $OUT eth1)

elementclass Filter { $rules, SNAPLEN $len |
    input -> cl :: IPClassifier($rules, -);
    cl[0] -> output;              // accepted
    cl[1] -> c :: Counter -> Discard;
}

src :: FromDevice($IN, SNIFFER false)
    -> Classifier(12/0800, -) [0]
    -> Strip(14)
    -> CheckIPHeader(VERIFY_CHECKSUM true)
    -> f :: Filter("tcp dst port 80", SNAPLEN 96)
    -> Unstrip(14)
    -> q :: Queue(1024)
    -> ToDevice($OUT);
Classifier@2[1] -> Discard;
"#;
    let c = parse(src);
    assert_eq!(c.requires, vec!["package fusebox"]);
    assert_eq!(
        elems(&c),
        vec![
            ("src", "FromDevice", "eth0, SNIFFER false"),
            ("Classifier@2", "Classifier", "12/0800, -"),
            ("Strip@3", "Strip", "14"),
            ("CheckIPHeader@4", "CheckIPHeader", "VERIFY_CHECKSUM true"),
            ("f/cl", "IPClassifier", "\"tcp dst port 80\", -"),
            ("f/c", "Counter", ""),
            ("f/Discard@3", "Discard", ""),
            ("Unstrip@6", "Unstrip", "14"),
            ("q", "Queue", "1024"),
            ("ToDevice@8", "ToDevice", "eth1"),
            ("Discard@9", "Discard", ""),
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("src", 0, "Classifier@2", 0),
            ("Classifier@2", 0, "Strip@3", 0),
            ("Classifier@2", 1, "Discard@9", 0),
            ("Strip@3", 0, "CheckIPHeader@4", 0),
            ("CheckIPHeader@4", 0, "f/cl", 0),
            ("f/cl", 0, "Unstrip@6", 0),
            ("f/cl", 1, "f/c", 0),
            ("f/c", 0, "f/Discard@3", 0),
            ("Unstrip@6", 0, "q", 0),
            ("q", 0, "ToDevice@8", 0),
        ]
    );
}

#[test]
fn two_routers_sharing_a_class() {
    let src = format!("{ROUTER}\nFromDevice(eth3) -> r2 :: Router(02:00:00:00:00:01, 192.168.1.1);\nr2[0] -> Discard; r2[1] -> Discard;");
    let c = parse(&src);
    let r2: Vec<_> = c
        .elements
        .iter()
        .filter(|e| e.name.starts_with("r2/"))
        .collect();
    assert_eq!(r2.len(), 7);
    assert_eq!(
        c.elements[c.find("r2/rt").unwrap()].config,
        "10.0.0.0/8 0, 0.0.0.0/0 192.168.1.1 1"
    );
    assert_eq!(c.connections.len(), 10 + 9);
}
