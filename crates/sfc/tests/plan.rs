//! The planner against the thesis' examples (Fig. 5.10, Listing A.1, hand-checked), the
//! §5.5 direct-link corner cases, alternatives around a dead host, and the extensions.

use sfc::entries::{fwd_end, md1, FlowKey, FwdAction, FwdVal, Mac, CFG_NAT_LEARN, PROXY_STATIC};
use sfc::file::{ChainFile, Format};
use sfc::plan::{plan, FwdEntry, Plan, ProxyEntry, Stage};
use sfc::registry::{Hello, Iface, Registry, SfPorts, Underlay};
use std::net::Ipv4Addr;
use std::path::Path;

fn example(name: &str) -> ChainFile {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/sfc")
        .join(name);
    ChainFile::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

fn json(text: &str) -> ChainFile {
    ChainFile::parse(text, Format::Json, "test.json").unwrap_or_else(|e| panic!("{e}"))
}

/// A MAC that tells its SF: 02:00:00:00:00:NN.
fn mac(n: u8) -> Mac {
    Mac([2, 0, 0, 0, 0, n])
}

/// An SF `tag` with one interface named after it, ifindex n, MAC 02:..:n.
fn sf(tag: &str, n: u8) -> (String, SfPorts) {
    (
        tag.to_string(),
        SfPorts {
            iface_in: Iface {
                name: tag.to_string(),
                ifindex: u32::from(n),
                mac: mac(n),
            },
            iface_out: None,
        },
    )
}

fn hello(host: &str, sfs: &[(&str, u8)]) -> Hello {
    Hello {
        host: host.to_string(),
        functions: sfs.iter().map(|(t, n)| sf(t, *n)).collect(),
        ifaces: vec![Iface {
            name: "eth0".into(),
            ifindex: 1,
            mac: mac(0xe0),
        }],
        underlay: None,
    }
}

fn fwd(p: &Plan, host: &str, inst: &str) -> Vec<(u32, u8, FwdVal)> {
    p.hosts[host].instances[inst]
        .fwd
        .iter()
        .map(|FwdEntry { spi, si, val }| (*spi, *si, *val))
        .collect()
}

fn stages(p: &Plan, host: &str, inst: &str) -> Vec<Stage> {
    p.hosts[host].instances[inst]
        .attach
        .iter()
        .map(|a| a.stage)
        .collect()
}

fn eth(from: u8, to: u8) -> FwdVal {
    FwdVal {
        action: FwdAction::Ethernet,
        smac: mac(from).0,
        dmac: mac(to).0,
        ..fwd_end()
    }
}

#[test]
fn fig_5_10() {
    let file = example("fig5-10.json");
    let reg = Registry::from_hellos([
        hello("server1", &[("sf1", 1), ("sf2", 2)]),
        hello("server2", &[("sf3", 3)]),
    ]);
    let p = plan(&file, &reg);
    // The thesis: one rule for sf1 and sf2, two for sf3; sf3's entries end the chains.
    assert_eq!(fwd(&p, "server1", "sf1"), vec![(200, 254, eth(1, 3))]);
    assert_eq!(fwd(&p, "server1", "sf2"), vec![(100, 254, eth(2, 3))]);
    assert_eq!(
        fwd(&p, "server2", "sf3"),
        vec![(100, 253, fwd_end()), (200, 253, fwd_end())]
    );
    for (h, s) in [("server1", "sf1"), ("server1", "sf2"), ("server2", "sf3")] {
        assert_eq!(stages(&p, h, s), vec![Stage::Dec, Stage::EncFwd]);
        assert!(p.hosts[h].instances[s].proxy.is_empty());
    }
    // sf1 and sf2 share a host but are not consecutive in a chain: no direct link.
    assert!(p.hosts.values().all(|h| h.direct_links.is_empty()));
    assert!(p.chains.iter().all(|c| c.installed && c.notes.is_empty()));
    assert_eq!(p.chains[0].path[1].si, 254);
    // The TOML version is the same file.
    assert_eq!(example("fig5-10.toml"), file);
}

#[test]
fn listing_a_1() {
    let file = example("listing-a1.json");
    let reg = Registry::from_hellos([
        hello("server1", &[("sf1", 1)]),
        hello("server2", &[("sf2", 2)]),
    ]);
    let p = plan(&file, &reg);
    assert_eq!(
        fwd(&p, "server1", "sf1"),
        vec![(1234, 254, eth(1, 2)), (7892, 254, fwd_end())]
    );
    assert_eq!(fwd(&p, "server2", "sf2"), vec![(1234, 253, fwd_end())]);
}

const RULE: &str =
    r#"{"src": "10.0.0.1", "dst": "10.0.1.1", "proto": "udp", "sport": 1000, "dport": 53}"#;

fn flow() -> FlowKey {
    FlowKey {
        saddr: Ipv4Addr::new(10, 0, 0, 1),
        daddr: Ipv4Addr::new(10, 0, 1, 1),
        sport: 1000,
        dport: 53,
        proto: 17,
    }
}

fn three(nodes: &str, classifier: &str) -> ChainFile {
    json(&format!(
        r#"{{"chains": [{{"id": 10, "nodes": {nodes}, "entry": "h1", "classifier": [{classifier}]}}],
            "functions": [{{"tag": "a", "type": "x", "host": "h1"}},
                          {{"tag": "b", "type": "x", "host": "h1"}},
                          {{"tag": "c", "type": "x", "host": "h2"}},
                          {{"tag": "d", "type": "x", "host": "h1"}}]}}"#
    ))
}

fn reg_abcd() -> Registry {
    Registry::from_hellos([
        hello("h1", &[("a", 1), ("b", 2), ("d", 4)]),
        hello("h2", &[("c", 3)]),
    ])
}

#[test]
fn corner_case_a_direct_link_then_remote() {
    let p = plan(&three(r#"["a", "b", "c"]"#, RULE), &reg_abcd());
    // a → b is a direct link: a keeps Dec only, b keeps Enc+Fwd without Dec ...
    assert_eq!(stages(&p, "h1", "a"), vec![Stage::Dec]);
    assert!(fwd(&p, "h1", "a").is_empty());
    assert_eq!(stages(&p, "h1", "b"), vec![Stage::EncFwd]);
    assert_eq!(fwd(&p, "h1", "b"), vec![(10, 253, eth(2, 3))]);
    // ... so the controller stands in for Dec: b's packets carried SI 254 on arrival.
    assert_eq!(
        p.hosts["h1"].instances["b"].proxy,
        vec![ProxyEntry {
            key: flow(),
            meta: md1(10, 254, PROXY_STATIC)
        }]
    );
    assert_eq!(fwd(&p, "h2", "c"), vec![(10, 252, fwd_end())]);
    assert_eq!(stages(&p, "h2", "c"), vec![Stage::Dec, Stage::EncFwd]);
    let links = &p.hosts["h1"].direct_links;
    assert_eq!(links.len(), 1);
    assert_eq!(
        (links[0].from.tag.as_str(), links[0].to.tag.as_str()),
        ("a", "b")
    );
    assert_eq!(links[0].chains, vec![10]);
    // The classifier on h1's eth0 pushes (10, 255) and sends to a.
    let cls = &p.hosts["h1"].instances["@cls.eth0"];
    assert_eq!(cls.cls.len(), 1);
    assert_eq!(cls.cls[0].key.flow, flow());
    assert_eq!(cls.cls[0].key.ifindex, 0);
    assert_eq!((cls.cls[0].meta.spi(), cls.cls[0].meta.si()), (10, 255));
    assert_eq!(fwd(&p, "h1", "@cls.eth0"), vec![(10, 255, eth(0xe0, 1))]);
}

#[test]
fn corner_case_b_direct_link_ends_chain() {
    let p = plan(&three(r#"["c", "a", "b"]"#, RULE), &reg_abcd());
    assert_eq!(stages(&p, "h1", "a"), vec![Stage::Dec]);
    assert_eq!(stages(&p, "h1", "b"), vec![Stage::EncFwd]);
    assert_eq!(fwd(&p, "h1", "b"), vec![(10, 252, fwd_end())]);
    assert_eq!(
        p.hosts["h1"].instances["b"].proxy,
        vec![ProxyEntry {
            key: flow(),
            meta: md1(10, 253, PROXY_STATIC)
        }]
    );
    // Three on one host: the middle one has no stage at all, the last one the proxy entry.
    let p = plan(&three(r#"["a", "b", "d"]"#, RULE), &reg_abcd());
    assert!(stages(&p, "h1", "b").is_empty());
    assert!(p.hosts["h1"].instances["b"].proxy.is_empty());
    assert_eq!(
        p.hosts["h1"].instances["d"].proxy[0].meta,
        md1(10, 253, PROXY_STATIC)
    );
    assert_eq!(p.hosts["h1"].direct_links.len(), 2);
}

#[test]
fn corner_case_without_five_tuples_keeps_nsh() {
    // No classifier: no 5-tuples for static proxy entries, so a → b stays on NSH.
    let file = json(
        r#"{"chains": [{"id": 10, "nodes": ["a", "b", "c"]}],
            "functions": [{"tag": "a", "type": "x", "host": "h1"},
                          {"tag": "b", "type": "x", "host": "h1"},
                          {"tag": "c", "type": "x", "host": "h2"}]}"#,
    );
    let p = plan(&file, &reg_abcd());
    assert_eq!(stages(&p, "h1", "a"), vec![Stage::Dec, Stage::EncFwd]);
    assert_eq!(stages(&p, "h1", "b"), vec![Stage::Dec, Stage::EncFwd]);
    assert_eq!(fwd(&p, "h1", "a"), vec![(10, 254, eth(1, 2))]);
    assert!(p.hosts["h1"].direct_links.is_empty());
    let notes = p.chains[0].notes.join("\n");
    assert!(notes.contains("direct link a → b not used"), "{notes}");
    assert!(notes.contains("no classifier 5-tuples"), "{notes}");
    // direct_links: false turns them off without a note.
    let mut off = three(r#"["a", "b", "c"]"#, RULE);
    off.direct_links = false;
    let p = plan(&off, &reg_abcd());
    assert!(p.hosts["h1"].direct_links.is_empty());
    assert!(p.chains[0].notes.is_empty());
}

#[test]
fn direct_link_needs_agreement_between_chains() {
    // a feeds b in chain 10 but c in chain 20: Enc must stay on a.
    let file = json(
        r#"{"chains": [{"id": 10, "nodes": ["a", "b"], "entry": "h1", "classifier": [{"src": "1.1.1.1", "dst": "2.2.2.2", "proto": 1}]},
                       {"id": 20, "nodes": ["a", "c"]}],
            "functions": [{"tag": "a", "type": "x", "host": "h1"},
                          {"tag": "b", "type": "x", "host": "h1"},
                          {"tag": "c", "type": "x", "host": "h2"}]}"#,
    );
    let p = plan(&file, &reg_abcd());
    assert!(p.hosts["h1"].direct_links.is_empty());
    assert!(p.chains[0].notes[0].contains("a feeds other next hops"));
    assert_eq!(
        fwd(&p, "h1", "a"),
        vec![(10, 254, eth(1, 2)), (20, 254, eth(1, 3))]
    );
}

#[test]
fn alternatives_go_around_a_dead_host() {
    let file = json(
        r#"{"chains": [{"id": 5, "nodes": ["a", ["c", "d"]]},
                       {"id": 6, "nodes": ["a", "c"]}],
            "functions": [{"tag": "a", "type": "x", "host": "h1"},
                          {"tag": "c", "type": "x", "host": "h2"},
                          {"tag": "d", "type": "x", "host": "h3"}]}"#,
    );
    let live = Registry::from_hellos([
        hello("h1", &[("a", 1)]),
        hello("h2", &[("c", 3)]),
        hello("h3", &[("d", 4)]),
    ]);
    let p = plan(&file, &live);
    assert_eq!(
        fwd(&p, "h1", "a"),
        vec![(5, 254, eth(1, 3)), (6, 254, eth(1, 3))]
    );
    assert!(!p.hosts["h3"].instances.contains_key("d"));
    // h2's agent is gone (lease expired): chain 5 goes to d, chain 6 is not installed.
    let without_h2 = Registry::from_hellos([hello("h1", &[("a", 1)]), hello("h3", &[("d", 4)])]);
    let p = plan(&file, &without_h2);
    assert_eq!(fwd(&p, "h1", "a"), vec![(5, 254, eth(1, 4))]);
    assert_eq!(fwd(&p, "h3", "d"), vec![(5, 253, fwd_end())]);
    assert!(p.chains[0].installed);
    assert!(
        p.chains[0].notes[0].contains("host h2 has no live agent"),
        "{:?}",
        p.chains[0].notes
    );
    assert!(!p.chains[1].installed);
    assert!(p.chains[1].path.is_empty());
    assert!(p.chains[1].notes[0].starts_with("not installed: node 2 has no live SF"));
    assert!(!p.hosts.contains_key("h2"));
}

#[test]
fn nsh_aware_nat_interfaces_and_vxlan() {
    let file = json(
        r#"{"chains": [{"id": 7, "nodes": ["fw", "napt", "ids"], "entry": "h1",
                        "classifier": [{"src": "1.1.1.1", "dst": "2.2.2.2", "proto": "icmp"}]}],
            "functions": [{"tag": "fw", "type": "fusebox", "host": "h1", "nsh_aware": true},
                          {"tag": "napt", "type": "iptables", "host": "h1", "nat": true,
                           "to_host": true, "iface_in": "n0", "iface_out": "n1"},
                          {"tag": "ids", "type": "x", "host": "h2"}],
            "hosts": [{"name": "h1", "transport": "vxlan-gpe", "underlay": "192.168.0.1"},
                      {"name": "h2", "transport": "vxlan-gpe"}]}"#,
    );
    let mut h1 = hello("h1", &[("fw", 1)]);
    h1.ifaces.push(Iface {
        name: "n0".into(),
        ifindex: 20,
        mac: mac(20),
    });
    h1.ifaces.push(Iface {
        name: "n1".into(),
        ifindex: 21,
        mac: mac(21),
    });
    let mut h2 = hello("h2", &[("ids", 3)]);
    h2.underlay = Some(Underlay {
        addr: Ipv4Addr::new(192, 168, 0, 2),
        mac: Some(mac(0x99)),
    });
    let p = plan(&file, &Registry::from_hellos([h1, h2]));
    // NSH-aware: Fwd alone; no direct link to or from it.
    assert_eq!(stages(&p, "h1", "fw"), vec![Stage::Fwd]);
    assert_eq!(fwd(&p, "h1", "fw"), vec![(7, 254, eth(1, 20))]);
    // NAT: Dec on n0, Enc+Fwd on n1 with NAT learning; across hosts over VXLAN-GPE.
    let napt = &p.hosts["h1"].instances["napt"];
    assert_eq!(napt.attach[0].iface, "n0");
    assert_eq!(
        (napt.attach[1].stage, napt.attach[1].iface.as_str()),
        (Stage::EncFwd, "n1")
    );
    assert_eq!(napt.cfg[&21].flags, CFG_NAT_LEARN);
    // The Linux stack SF: Dec addresses what it decapsulates to n0.
    assert_eq!(napt.cfg[&20].flags, sfc::entries::CFG_TO_HOST);
    let v = napt.fwd[0].val;
    assert_eq!((napt.fwd[0].spi, napt.fwd[0].si), (7, 253));
    assert_eq!(v.action, FwdAction::VxlanGpe);
    assert_eq!(
        (v.saddr, v.daddr, v.vni),
        (
            Ipv4Addr::new(192, 168, 0, 1),
            Ipv4Addr::new(192, 168, 0, 2),
            7
        )
    );
    assert_eq!((v.smac, v.dmac), (mac(21).0, mac(0x99).0));
    // ids takes tunnel frames addressed to its host's underlay MAC.
    assert_eq!(
        p.hosts["h2"].instances["ids"].cfg[&3].flags,
        sfc::entries::CFG_ANY_DST
    );
    assert!(p.hosts["h1"].direct_links.is_empty());
    // No classifier on the SFs' own interfaces.
    let cls: Vec<&String> = p.hosts["h1"]
        .instances
        .keys()
        .filter(|i| i.starts_with('@'))
        .collect();
    assert_eq!(cls, ["@cls.eth0"]);
    // Without an underlay address for h2, the chain cannot be installed.
    let p = plan(
        &file,
        &Registry::from_hellos([hello("h1", &[("fw", 1)]), hello("h2", &[("ids", 3)])]),
    );
    assert!(!p.chains[0].installed, "{:?}", p.chains[0]);
}

#[test]
fn classifier_on_a_named_interface() {
    let file = json(
        r#"{"chains": [{"id": 9, "nodes": ["c"],
                        "classifier": [{"src": "10.0.0.1", "dst": "10.0.1.1", "proto": "tcp", "sport": 1, "dport": 2, "host": "h1", "iface": "eth0"},
                                       {"src": "10.0.0.2", "dst": "10.0.1.1", "proto": "tcp", "sport": 1, "dport": 2, "host": "h9"}]}],
            "functions": [{"tag": "c", "type": "x", "host": "h2"}]}"#,
    );
    let p = plan(&file, &reg_abcd());
    let cls = &p.hosts["h1"].instances["@cls.eth0"];
    assert_eq!(cls.attach[0].stage, Stage::Cls);
    assert_eq!(cls.cls[0].key.ifindex, 1);
    assert_eq!(cls.cls[0].key.flow.proto, 6);
    assert_eq!(fwd(&p, "h1", "@cls.eth0"), vec![(9, 255, eth(0xe0, 3))]);
    assert!(p.chains[0].installed);
    assert!(p.chains[0].notes[0].contains("host h9 has no live agent"));
}

#[test]
fn assumed_registry_plans_every_example() {
    for name in [
        "fig5-10.json",
        "listing-a1.json",
        "fig5-10.toml",
        "extended.toml",
    ] {
        let file = example(name);
        let reg = Registry::assumed(&file);
        let p = plan(&file, &reg);
        assert!(
            p.chains.iter().all(|c| c.installed),
            "{name}: {:?}",
            p.chains
        );
        let text = sfc::table::render(&p, &reg);
        assert!(text.contains("chains"), "{text}");
    }
}

#[test]
fn a_chain_visiting_an_sf_twice_keeps_its_dec() {
    // a → b would be a direct link (a always feeds b, b is always fed by a), but b is
    // visited twice with Enc and no Dec: a static proxy entry keyed by the 5-tuple could
    // not say whether the packet left b's first visit (it came with SI 254) or its second
    // (SI 252).
    let p = plan(&three(r#"["a", "b", "a", "b"]"#, RULE), &reg_abcd());
    assert!(p.hosts["h1"].direct_links.is_empty());
    let notes = p.chains[0].notes.join("\n");
    assert!(notes.contains("direct link a → b not used"), "{notes}");
    assert!(notes.contains("chain 10 visits it 2 times"), "{notes}");
    assert_eq!(stages(&p, "h1", "b"), vec![Stage::Dec, Stage::EncFwd]);
    assert!(p.hosts["h1"].instances["b"].proxy.is_empty());
    assert_eq!(
        fwd(&p, "h1", "b"),
        vec![(10, 251, fwd_end()), (10, 253, eth(2, 1))]
    );
    // Every proxy entry of every instance has a key of its own.
    for hp in p.hosts.values() {
        for inst in hp.instances.values() {
            let keys: std::collections::BTreeSet<_> = inst.proxy.iter().map(|e| e.key).collect();
            assert_eq!(keys.len(), inst.proxy.len());
        }
    }
}
