//! `fusebox synth --openflow`: each entry's first classification as OpenFlow 1.3 flows in
//! `ovs-ofctl add-flows` syntax, so that a switch classifies and the FuseBox server does
//! not have to (SNF's hardware-accelerated mode).
//!
//! # What the switch does
//!
//! Entry `k` of the chain (in the order `fusebox synth` lists them) is OpenFlow port `k`.
//! IPv4 frames go through three tables:
//! * **table 0** writes the source-port interval of TCP and UDP packets into metadata bits
//!   0–15, **table 1** the destination-port interval into bits 16–31 (as SNF did: each
//!   range becomes a run of interval numbers, which a few masked metadata matches cover,
//!   instead of the product of both ranges' prefix expansions);
//! * **table 2** holds one flow (or a few) per traffic class, in the classifier's order with
//!   decreasing priorities (first match, as FuseBox's ordered classes need): it pushes a
//!   VLAN tag whose id is the class number (`1 + ` its index at the entry's root) and sends
//!   the frame to the server port (`--of-port`, default `LOCAL`).
//!
//! Frames that are not IPv4, or match no class flow, leave untagged: the server classifies
//! them itself.
//!
//! # Residual tests
//!
//! OpenFlow cannot test everything FuseBox's classes test (checksum validity, lengths, TTL
//! ranges, annotations, ...). A class's flow matches what OpenFlow can express, exactly
//! or a superset of it; what is left is the class's *residual*, written in a comment before
//! its flows. The server, given a tagged frame, checks only that class's residual: if it
//! holds, the tag is the frame's class (every flow matches a superset of its class, so no
//! earlier class can hold the frame: it would have matched an earlier flow); if not, the
//! server classifies the frame itself. The addresses, protocol and ports go to the switch;
//! they are what long rule lists test. IPv4 fields are matched only for classes whose
//! frames have a whole IPv4 header with consistent lengths (version 4, header length ≥ 5 or
//! a valid checksum, total length within the data), where the switch reads them where
//! FuseBox does. Ports are matched for TCP/UDP classes, with port 0 added (the switch reads
//! 0 for a later fragment or a short transport header, where FuseBox reads the bytes), and
//! stay in the residual.

use chain::program::{Class, Getter, Node, Program, Segment};
use chain::Executor;
use elements::model::Field;
use space::{FieldSet, Filter};
use std::fmt::Write as _;

/// Most flows one class may expand into before its addresses go to the residual.
const MAX_FLOWS_PER_CLASS: usize = 64;
/// Most values a protocol set may have to be matched by the switch.
const MAX_PROTOS: usize = 8;
/// Most values a TTL set may have to be matched by the switch (it matches TTLs exactly).
const MAX_TTLS: usize = 16;

/// One class's match: OpenFlow match fields (`nw_src=...`) per alternative, and the
/// residual tests (field, intervals).
struct Split {
    flows: Vec<String>,
    /// How many fields the switch matches.
    matched: usize,
    residual: Vec<(Field, Vec<(u128, u128)>)>,
}

/// Interval numbering of one port dimension: the boundaries of every range the classes
/// match.
struct Intervals {
    /// Sorted starts of the elementary intervals (the first is 0).
    starts: Vec<u128>,
}

impl Intervals {
    fn new(sets: &[&FieldSet]) -> Intervals {
        let mut starts = vec![0u128];
        for s in sets {
            for (lo, hi) in s.intervals() {
                starts.push(lo);
                if hi < 0xffff {
                    starts.push(hi + 1);
                }
            }
        }
        starts.sort_unstable();
        starts.dedup();
        Intervals { starts }
    }

    /// The interval numbers (1-based) `set` covers.
    fn ids(&self, set: &FieldSet) -> FieldSet {
        let mut ids = Vec::new();
        for (lo, hi) in set.intervals() {
            let a = self.starts.partition_point(|&s| s <= lo);
            let b = self.starts.partition_point(|&s| s <= hi);
            ids.push((a as u128, b as u128));
        }
        FieldSet::from_intervals(ids)
    }

    /// Each elementary interval: (number, first, last).
    fn each(&self) -> impl Iterator<Item = (u128, u128, u128)> + '_ {
        self.starts.iter().enumerate().map(|(i, &lo)| {
            let hi = self.starts.get(i + 1).map_or(0xffff, |n| n - 1);
            (i as u128 + 1, lo, hi)
        })
    }
}

fn set_of(c: &Class, seg: &Segment, f: Field) -> Option<FieldSet> {
    c.tests.iter().find_map(|(i, iv)| {
        (seg.fields.get(usize::from(*i)) == Some(&f)).then(|| FieldSet::from_intervals(iv.clone()))
    })
}

fn ip4(v: u128) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(v as u32)
}

/// The alternatives (`key=value/mask` strings) of a set of a `width`-bit field.
fn ternary(key: &str, s: &FieldSet, width: u32, fmt: impl Fn(u128) -> String) -> Vec<String> {
    if s.is_full(width) {
        return vec![String::new()];
    }
    s.prefixes(width)
        .into_iter()
        .map(|(v, len)| {
            let mask = if len == 0 {
                0
            } else {
                ((1u128 << len) - 1) << (width - len)
            };
            if len == width {
                format!("{key}={}", fmt(v))
            } else {
                format!("{key}={}/{}", fmt(v), fmt(mask))
            }
        })
        .collect()
}

/// Every combination of one alternative per list, comma-joined.
fn product(lists: &[Vec<String>]) -> Vec<String> {
    let mut out = vec![String::new()];
    for l in lists {
        let mut next = Vec::with_capacity(out.len() * l.len());
        for a in &out {
            for b in l {
                next.push(match (a.is_empty(), b.is_empty()) {
                    (true, _) => b.clone(),
                    (_, true) => a.clone(),
                    _ => format!("{a},{b}"),
                });
            }
        }
        out = next;
    }
    out
}

/// What the switch matches of class `c` and what is left to the server.
fn split(c: &Class, seg: &Segment, ports: &[Intervals; 2]) -> Split {
    let get = |f| set_of(c, seg, f);
    let has = |f, lo: u128, hi: u128| get(f).is_some_and(|s| s.is_subset(&FieldSet::range(lo, hi)));
    // The switch reads the IPv4 fields where FuseBox does when the header is whole and its
    // lengths consistent (a valid checksum needs 20 bytes of header or more).
    let ip_ok = has(Field::IpVersion, 4, 4)
        && (has(Field::IpIhl, 5, 15) || has(Field::IpChecksumOk, 1, 1))
        && has(Field::IpLenOk, 1, 1);
    let mut matched: Vec<Field> = Vec::new();
    let mut lists: Vec<Vec<String>> = Vec::new();
    let mut protos: Option<Vec<u128>> = None;
    if ip_ok {
        for (f, key) in [(Field::IpSrc, "nw_src"), (Field::IpDst, "nw_dst")] {
            if let Some(s) = get(f) {
                lists.push(ternary(key, &s, 32, |v| ip4(v).to_string()));
                matched.push(f);
            }
        }
        if let Some(s) = get(Field::IpTtl) {
            if s.len() <= MAX_TTLS as u128 {
                lists.push(
                    s.intervals()
                        .flat_map(|(lo, hi)| lo..=hi)
                        .map(|t| format!("nw_ttl={t}"))
                        .collect(),
                );
                matched.push(Field::IpTtl);
            }
        }
        if let Some(s) = get(Field::IpProto) {
            if s.len() <= MAX_PROTOS as u128 {
                protos = Some(s.intervals().flat_map(|(lo, hi)| lo..=hi).collect());
                matched.push(Field::IpProto);
            }
        }
        // Ports: TCP or UDP classes only. The switch reads 0 where FuseBox reads the bytes
        // of a later fragment or a short transport header: the flows take port 0 too, and
        // the ports stay in the residual.
        let l4 = protos.as_ref().is_some_and(|p| {
            p.iter().all(|&x| {
                x == u128::from(wire::IpProtocol::TCP) || x == u128::from(wire::IpProtocol::UDP)
            })
        });
        let mut meta = Vec::new();
        for (k, f) in [Field::SrcPort, Field::DstPort].into_iter().enumerate() {
            if let (true, Some(s)) = (l4, get(f)) {
                meta.push((k, ports[k].ids(&s.union(&FieldSet::single(0)))));
            }
        }
        if !meta.is_empty() {
            // Metadata: source-port interval in bits 0-15, destination in 16-31.
            let per: Vec<Vec<(u128, u128)>> = meta
                .iter()
                .map(|(k, ids)| {
                    ids.prefixes(16)
                        .into_iter()
                        .map(|(v, len)| {
                            let m = if len == 0 {
                                0
                            } else {
                                ((1u128 << len) - 1) << (16 - len)
                            };
                            (v << (16 * k), m << (16 * k))
                        })
                        .collect()
                })
                .collect();
            let mut alts = vec![(0u128, 0u128)];
            for p in per {
                alts = alts
                    .iter()
                    .flat_map(|&(v, m)| p.iter().map(move |&(v2, m2)| (v | v2, m | m2)))
                    .collect();
            }
            lists.push(
                alts.into_iter()
                    .map(|(v, m)| format!("metadata={v:#x}/{m:#x}"))
                    .collect(),
            );
        }
    }
    if let Some(p) = &protos {
        lists.push(p.iter().map(|x| format!("nw_proto={x}")).collect());
    }
    let mut flows = product(&lists);
    if flows.len() > MAX_FLOWS_PER_CLASS {
        // Too many: the switch matches nothing of this class but IPv4 (the server checks
        // all of it).
        flows = vec![String::new()];
        matched.clear();
    }
    let residual = c
        .tests
        .iter()
        .filter_map(|(i, iv)| {
            let f = *seg.fields.get(usize::from(*i))?;
            (!matched.contains(&f)).then(|| (f, iv.clone()))
        })
        .collect();
    Split {
        flows,
        matched: matched.len(),
        residual,
    }
}

/// The root classes of a segment (one class matching everything when its root is not a
/// classification).
fn root_classes(prog: &Program, seg: &Segment) -> Vec<Class> {
    match prog.nodes.get(seg.root as usize) {
        Some(Node::Classify(cs)) => cs.clone(),
        _ => vec![Class {
            tests: Vec::new(),
            node: seg.root,
            hits: 0,
        }],
    }
}

/// The port intervals over every root class of every entry.
fn port_intervals(prog: &Program) -> [Intervals; 2] {
    let sets = |f: Field| -> Vec<FieldSet> {
        prog.starts
            .values()
            .flat_map(|seg| {
                root_classes(prog, seg)
                    .into_iter()
                    .filter_map(move |c| set_of(&c, seg, f))
            })
            .collect()
    };
    let (src, dst) = (sets(Field::SrcPort), sets(Field::DstPort));
    [
        Intervals::new(&src.iter().collect::<Vec<_>>()),
        Intervals::new(&dst.iter().collect::<Vec<_>>()),
    ]
}

/// Class `c` as a box over the model's fields.
fn boxed(c: &Class, seg: &Segment) -> Filter {
    c.tests.iter().fold(Filter::any(), |f, (i, iv)| {
        match seg.fields.get(usize::from(*i)) {
            Some(&x) => f.with(x, FieldSet::from_intervals(iv.clone())),
            None => f,
        }
    })
}

/// `f` with what every real frame in it also satisfies (what synthesis leaves out of its
/// classes: a valid checksum needs a 20-byte header; a consistent total length lies within
/// the data; the bytes from the IPv4 header on follow 14 bytes of Ethernet header).
fn real(f: &Filter) -> Filter {
    let mut out = f.clone();
    let one = FieldSet::single(1);
    if f.get(Field::IpChecksumOk) == one {
        out.restrict(Field::IpIhl, &FieldSet::range(5, 15));
    }
    if f.get(Field::IpLenOk) == one {
        if let Some(len) = f.get(Field::IpLen).first() {
            out.restrict(Field::IpAvail, &FieldSet::range(len, 0xffff));
            out.restrict(
                Field::FrameLen,
                &FieldSet::range((14 + len).min(0xffff), 0xffff),
            );
        }
    }
    if let Some(a) = out.get(Field::IpAvail).first().filter(|&a| a >= 1) {
        out.restrict(
            Field::FrameLen,
            &FieldSet::range((14 + a).min(0xffff), 0xffff),
        );
    }
    out
}

/// Why a synthesized program has no OpenFlow form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenflowError {
    /// An entry's root has more classes than VLAN ids can number.
    #[error(
        "entry {entry}: {classes} classes at its root, more than the 4094 VLAN ids that can mark them"
    )]
    TooManyClasses {
        /// The entry (`NF.IFACE`).
        entry: String,
        /// Its classes.
        classes: usize,
    },
}

/// The flows for every synthesized entry of `ex` (program `prog`), sending classified
/// frames to `port` (an OpenFlow port number or `LOCAL`).
pub fn openflow(ex: &Executor, prog: &Program, port: &str) -> Result<String, OpenflowError> {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# fusebox synth --openflow: OpenFlow 1.3 flows (ovs-ofctl -O OpenFlow13 add-flows BRIDGE FILE)."
    );
    let _ = writeln!(
        o,
        "# Tables 0 and 1 number the TCP/UDP port intervals into metadata, table 2 tags each class (VLAN id = class)."
    );
    let mut entries = ex.entry_elements();
    entries.sort_by_key(|(e, _)| e.to_string());
    // The port intervals over every class of every entry.
    let mut roots: Vec<(usize, String, &Segment, Vec<Class>)> = Vec::new();
    for (k, (e, g)) in entries.iter().enumerate() {
        let Some(seg) = prog.starts.get(g) else {
            let _ = writeln!(o, "# entry {e}: not synthesized (classified by the server)");
            continue;
        };
        let classes = root_classes(prog, seg);
        if classes.len() > 4094 {
            return Err(OpenflowError::TooManyClasses {
                entry: e.to_string(),
                classes: classes.len(),
            });
        }
        roots.push((k + 1, e.to_string(), seg, classes));
    }
    let ports = port_intervals(prog);
    for (table, (iv, key)) in ports.iter().zip(["tp_src", "tp_dst"]).enumerate() {
        let shift = 16 * table;
        for (id, lo, hi) in iv.each() {
            for proto in ["tcp", "udp"] {
                for m in ternary(key, &FieldSet::range(lo, hi), 16, |v| format!("{v:#x}")) {
                    let m = if m.is_empty() {
                        String::new()
                    } else {
                        format!(",{m}")
                    };
                    let _ = writeln!(
                        o,
                        "table={table},priority=10,{proto}{m},actions=write_metadata:{:#x}/{:#x},goto_table:{}",
                        id << shift,
                        0xffffu128 << shift,
                        table + 1
                    );
                }
            }
        }
        let _ = writeln!(
            o,
            "table={table},priority=1,ip,actions=goto_table:{}",
            table + 1
        );
    }
    let _ = writeln!(o, "table=0,priority=0,actions=output:{port}");
    let _ = writeln!(o, "table=2,priority=0,actions=output:{port}");
    for (of_port, name, seg, classes) in &roots {
        let _ = writeln!(
            o,
            "# entry {name}: OpenFlow port {of_port}, {} classes",
            classes.len()
        );
        let boxes: Vec<Filter> = classes.iter().map(|c| real(&boxed(c, seg))).collect();
        let splits: Vec<Split> = classes.iter().map(|c| split(c, seg, &ports)).collect();
        // Ordered classes keep their order. Disjoint ones go most fully matched first: a
        // class whose TTL range the switch cannot match must not hide the classes of single
        // TTLs beside it.
        let mut order: Vec<usize> = (0..classes.len()).collect();
        if !seg.ordered.contains(&seg.root) {
            // More fields matched by the switch first; among equals, the class whose
            // residual more frames pass (what the switch cannot tell apart goes to the
            // likelier class).
            let likely = |sp: &Split| -> f64 {
                sp.residual
                    .iter()
                    .map(|(f, iv)| {
                        let n: f64 = iv.iter().map(|&(lo, hi)| (hi - lo) as f64 + 1.0).sum();
                        n / 2f64.powi(f.width().min(1000) as i32)
                    })
                    .product()
            };
            order.sort_by(|&a, &b| {
                let (x, y) = (&splits[a], &splits[b]);
                y.matched
                    .cmp(&x.matched)
                    .then(likely(y).total_cmp(&likely(x)))
            });
        }
        for (rank, &i) in order.iter().enumerate() {
            let id = i + 1;
            let s = &splits[i];
            if s.flows == [String::new()]
                && order[rank + 1..]
                    .iter()
                    .all(|&j| boxes[j].intersection(&boxes[i]).is_empty())
            {
                // The switch can tell nothing of this class (a malformed header, say): a
                // flow for it would take every frame. No later class holds its frames, so
                // they can go untagged, or tagged with a class whose residual they fail.
                let _ = writeln!(o, "# class {id}: left to the server");
                continue;
            }
            let residual: Vec<String> = s
                .residual
                .iter()
                .map(|(f, iv)| {
                    format!(
                        "{f}={}",
                        crate::show::set(*f, &FieldSet::from_intervals(iv.clone()))
                    )
                })
                .collect();
            let _ = writeln!(
                o,
                "# class {id}: residual {}",
                if residual.is_empty() {
                    "-".to_string()
                } else {
                    residual.join(" && ")
                }
            );
            let prio = 60000usize.saturating_sub(rank);
            for m in &s.flows {
                let m = if m.is_empty() {
                    String::new()
                } else {
                    format!(",{m}")
                };
                let _ = writeln!(
                    o,
                    "table=2,priority={prio},in_port={of_port},ip{m},actions=push_vlan:0x8100,set_field:{}->vlan_vid,output:{port}",
                    4096 + id
                );
            }
        }
    }
    Ok(o)
}

/// The class FuseBox's own classifier gives a frame entering synthesized entry element `g`
/// (as the switch marks it: 1 + its index at the entry's root), or `None`.
pub fn class_of(prog: &Program, g: u32, frame: &[u8]) -> Option<usize> {
    let seg = prog.starts.get(&g)?;
    let Some(Node::Classify(cs)) = prog.nodes.get(seg.root as usize) else {
        return Some(1);
    };
    let view = chain::program::frame(frame);
    let getters: Vec<Getter> = seg.fields.iter().map(|f| Getter::of(*f)).collect();
    cs.iter()
        .position(|c| {
            c.contains_with(&mut |i| getters.get(usize::from(i)).map_or(0, |g| g.get(&view)))
        })
        .map(|i| i + 1)
}

/// Whether frame `frame` passes the residual tests of class `id` (1-based) at entry element
/// `g`: what the server checks for a frame the switch tagged.
pub fn residual_holds(prog: &Program, g: u32, id: usize, frame: &[u8]) -> bool {
    let Some(seg) = prog.starts.get(&g) else {
        return false;
    };
    let cs = root_classes(prog, seg);
    let Some(c) = id.checked_sub(1).and_then(|i| cs.get(i)) else {
        return false;
    };
    let s = split(c, seg, &port_intervals(prog));
    let view = chain::program::frame(frame);
    s.residual.iter().all(|(f, iv)| {
        let v = Getter::of(*f).get(&view);
        iv.iter().any(|&(lo, hi)| lo <= v && v <= hi)
    })
}
