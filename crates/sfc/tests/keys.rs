//! The etcd layout: a changed plan applied as a diff of keys gives the new plan's keys, and
//! an agent rebuilds its host plan from its keys.

use proptest::prelude::*;
use sfc::entries::Mac;
use sfc::file::{Chain, ChainFile, ClsRule, Function, HostDef, Node, Proto, Transport};
use sfc::keys::{diff, host_plan_from_keys, keys, plan_prefix, Kv};
use sfc::plan::{plan, Plan};
use sfc::registry::{Hello, Iface, Registry, SfPorts, Underlay};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

const HOSTS: [&str; 3] = ["h0", "h1", "h2"];

#[derive(Debug, Clone)]
struct Case {
    file: ChainFile,
    live: Vec<bool>,
}

fn function(i: usize) -> impl Strategy<Value = Function> {
    (0..3usize, 0..3u8, any::<bool>()).prop_map(move |(h, mode, split)| Function {
        tag: format!("f{i}"),
        kind: "x".into(),
        host: HOSTS[h].into(),
        nsh_aware: mode == 1,
        nat: mode == 2,
        to_host: mode == 2,
        iface_in: None,
        iface_out: split.then(|| format!("f{i}o")),
    })
}

fn node() -> impl Strategy<Value = Node> {
    prop_oneof![
        (0..6usize).prop_map(|t| Node::One(format!("f{t}"))),
        prop::collection::vec(0..6usize, 1..3)
            .prop_map(|ts| Node::Any(ts.into_iter().map(|t| format!("f{t}")).collect())),
    ]
}

fn rule() -> impl Strategy<Value = ClsRule> {
    (0..4u8, 0..2u16).prop_map(|(a, p)| ClsRule {
        src: Ipv4Addr::new(10, 0, 0, a),
        dst: Ipv4Addr::new(10, 0, 1, 1),
        proto: Proto::Name("udp".into()),
        sport: Some(1000 + p),
        dport: Some(53),
        host: None,
        iface: None,
    })
}

fn case() -> impl Strategy<Value = Case> {
    let functions = (0..6).map(function).collect::<Vec<_>>();
    let chains = prop::collection::vec(
        (
            prop::collection::vec(node(), 1..5),
            prop::collection::vec(rule(), 0..3),
            0..3usize,
        ),
        1..4,
    );
    (
        functions,
        chains,
        prop::collection::vec(any::<bool>(), 3),
        prop::collection::vec(0..3u8, 3),
        any::<bool>(),
    )
        .prop_map(|(functions, chains, live, transports, direct_links)| {
            let chains = chains
                .into_iter()
                .enumerate()
                .map(|(i, (nodes, classifier, entry))| Chain {
                    id: 100 + i as u32,
                    nodes,
                    classifier,
                    entry: Some(HOSTS[entry].into()),
                })
                .collect();
            let hosts = transports
                .iter()
                .enumerate()
                .map(|(i, t)| HostDef {
                    name: HOSTS[i].into(),
                    transport: if *t == 0 {
                        Transport::VxlanGpe
                    } else {
                        Transport::Ethernet
                    },
                    underlay: (*t != 2).then(|| Ipv4Addr::new(192, 168, 0, i as u8)),
                })
                .collect();
            Case {
                file: ChainFile {
                    chains,
                    functions,
                    hosts,
                    direct_links,
                },
                live,
            }
        })
}

fn registry(c: &Case) -> Registry {
    let mut n = 0u8;
    let mut iface = |name: String| {
        n += 1;
        Iface {
            name,
            ifindex: u32::from(n),
            mac: Mac([2, 0, 0, 0, 0, n]),
        }
    };
    let mut hellos: BTreeMap<&str, Hello> = BTreeMap::new();
    for (i, h) in HOSTS.iter().enumerate() {
        if c.live[i] {
            hellos.insert(
                h,
                Hello {
                    host: h.to_string(),
                    functions: BTreeMap::new(),
                    ifaces: vec![iface(format!("{h}-eth0"))],
                    underlay: (i == 1).then(|| Underlay {
                        addr: Ipv4Addr::new(172, 16, 0, 1),
                        mac: Some(Mac([2, 0, 0, 0, 1, 1])),
                    }),
                },
            );
        }
    }
    for f in &c.file.functions {
        let ports = SfPorts {
            iface_in: iface(f.tag.clone()),
            iface_out: f.iface_out.clone().map(&mut iface),
        };
        if let Some(h) = hellos.get_mut(f.host.as_str()) {
            h.functions.insert(f.tag.clone(), ports);
        }
    }
    Registry::from_hellos(hellos.into_values())
}

fn host_keys(p: &Plan, host: &str) -> Kv {
    p.hosts.get(host).map(keys).unwrap_or_default()
}

fn apply(mut kv: Kv, (puts, deletes): (Kv, Vec<String>)) -> Kv {
    for d in deletes {
        kv.remove(&d);
    }
    kv.extend(puts);
    kv
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn diff_applies(a in case(), b in case()) {
        let (pa, pb) = (plan(&a.file, &registry(&a)), plan(&b.file, &registry(&b)));
        let hosts: BTreeSet<&String> = pa.hosts.keys().chain(pb.hosts.keys()).collect();
        for h in hosts {
            let (ka, kb) = (host_keys(&pa, h), host_keys(&pb, h));
            let d = diff(&ka, &kb);
            // Only what changed is written.
            for (k, v) in &d.0 {
                prop_assert!(ka.get(k) != Some(v));
            }
            prop_assert_eq!(apply(ka.clone(), d), kb.clone());
            prop_assert!(kb.keys().all(|k| k.starts_with(&plan_prefix(h))));
        }
    }

    #[test]
    fn agent_rebuilds_its_plan(a in case()) {
        let p = plan(&a.file, &registry(&a));
        for (h, hp) in &p.hosts {
            let kv = keys(hp);
            let back = host_plan_from_keys(h, kv.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
            prop_assert_eq!(back.as_ref(), Ok(hp));
        }
        // Every installed chain's path is on live hosts only.
        for c in p.chains.iter().filter(|c| c.installed) {
            for hop in &c.path {
                let i = HOSTS.iter().position(|h| *h == hop.host).unwrap();
                prop_assert!(a.live[i]);
            }
        }
    }
}

#[test]
fn diff_of_a_changed_file() {
    let reg = Registry::from_hellos(["server1", "server2"].map(|h| {
        Hello {
            host: h.into(),
            functions: ["sf1", "sf2", "sf3"]
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    (
                        t.to_string(),
                        SfPorts {
                            iface_in: Iface {
                                name: t.to_string(),
                                ifindex: i as u32 + 1,
                                mac: Mac([2, 0, 0, 0, 0, i as u8 + 1]),
                            },
                            iface_out: None,
                        },
                    )
                })
                .collect(),
            ifaces: vec![],
            underlay: None,
        }
    }));
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/sfc/fig5-10.json"
    ))
    .unwrap();
    let a = sfc::file::ChainFile::parse(&text, sfc::file::Format::Json, "a").unwrap();
    let mut b = a.clone();
    b.chains.remove(1); // chain 200 goes away
    let (pa, pb) = (plan(&a, &reg), plan(&b, &reg));
    let (puts, deletes) = diff(&keys(&pa.hosts["server1"]), &keys(&pb.hosts["server1"]));
    assert!(puts.is_empty());
    // sf1's instance, its two stages, its cfg and its forwarding entry.
    assert_eq!(deletes.len(), 5, "{deletes:?}");
    assert!(deletes.contains(&"/fusebox/sfc/v1/plan/server1/i/sf1/fwd/200/254".to_string()));
    let (puts, deletes) = diff(&keys(&pa.hosts["server2"]), &keys(&pb.hosts["server2"]));
    assert!(puts.is_empty());
    assert_eq!(
        deletes,
        vec!["/fusebox/sfc/v1/plan/server2/i/sf3/fwd/200/253".to_string()]
    );
}

/// Entries under `host`'s prefix from (key tail, value) pairs.
fn entries(host: &str, kv: &[(&str, &str)]) -> Kv {
    kv.iter()
        .map(|(k, v)| (format!("{}{k}", plan_prefix(host)), v.as_bytes().to_vec()))
        .collect()
}

#[test]
fn only_a_committed_set_is_complete() {
    use sfc::keys::{commit_key, committed, digest, Commit, Incomplete};
    let h = "server1";
    let full = entries(
        h,
        &[("i/sf1", "{}"), ("i/sf1/fwd/1/255", "a"), ("link/x", "b")],
    );
    let with = |kv: &Kv, commit: &Commit| {
        let mut kv = kv.clone();
        kv.insert(commit_key(h), serde_json::to_vec(commit).unwrap());
        kv
    };
    let commit = Commit::of(&full, 7);
    assert_eq!((commit.generation, commit.keys), (7, 3));
    // Complete: the entries the commit names, returned without the commit key.
    let (got, c) = committed(h, &with(&full, &commit)).unwrap();
    assert_eq!((got, c), (full.clone(), Some(commit.clone())));
    // A key missing, one too many, a value changed: not the set the commit names.
    let mut less = full.clone();
    less.pop_first();
    let mut more = full.clone();
    more.insert(format!("{}i/sf2", plan_prefix(h)), b"{}".to_vec());
    let mut changed = full.clone();
    changed.insert(format!("{}i/sf1/fwd/1/255", plan_prefix(h)), b"z".to_vec());
    for (what, kv) in [("less", &less), ("more", &more), ("changed", &changed)] {
        assert!(
            matches!(
                committed(h, &with(kv, &commit)),
                Err(Incomplete::Pending {
                    generation: 7,
                    want: 3,
                    ..
                })
            ),
            "{what}"
        );
    }
    assert_ne!(digest(&changed), digest(&full));
    // Nothing at all is complete (an empty plan); entries without a commit are not.
    assert_eq!(committed(h, &Kv::new()).unwrap(), (Kv::new(), None));
    assert_eq!(committed(h, &full), Err(Incomplete::NoCommit { have: 3 }));
    let mut bad = full.clone();
    bad.insert(commit_key(h), b"not json".to_vec());
    assert!(matches!(committed(h, &bad), Err(Incomplete::BadCommit(_))));
    // The digest frames keys and values: moving bytes between them changes it.
    let a: Kv = [("ab".to_string(), b"c".to_vec())].into_iter().collect();
    let b: Kv = [("a".to_string(), b"bc".to_vec())].into_iter().collect();
    assert_ne!(digest(&a), digest(&b));
    // The commit key is not an entry key: a plan's keys never include it.
    assert!(!commit_key(h).contains("/i/") && !commit_key(h).contains("/link/"));
    assert!(commit_key(h).starts_with(&plan_prefix(h)));
}
