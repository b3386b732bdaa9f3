//! Element-level merging of the NFs placed together (NFCompass §IV.B.2): header checks an
//! equal or stronger check already passed, lookups an identical lookup already answered,
//! and later drops that could run earlier.
//!
//! # What is known about a packet
//!
//! [`analyze`] walks the chain's element graph forward from its roots (the `FromDevice`s
//! and `FromDump`s packets can enter by) and keeps, at every element's input, what holds
//! for *every* packet on *every* path there (a must-analysis, joined where paths meet):
//!
//! * where the data starts, where the network-header and MAC-header annotations point, as
//!   byte positions from the data start at the root (an `EtherEncap` moves the data start
//!   14 bytes back, a `Strip` forward; the IPv4 header of a chain of routers stays at 14);
//! * **answers**: for each modelled element the packet went through, the packets it could
//!   have been when it did — the union of the regions of the model cases it could have
//!   taken towards this path (a case's region is its filter minus the filters before it, in
//!   the `space` algebra synthesis uses), with the positions the element read them at;
//! * whether the packet was already cut at the IPv4 length of the header at a position,
//!   and whether the destination annotation already holds that header's destination.
//!
//! Every write weakens the answers it could change: the fields whose bytes it touches lose
//! their constraint (a `Write` of the TTL, the checksum validity with it; an `EtherEncap`
//! the 14 bytes in front; an opaque element what it declares, or everything). Two writes
//! keep more than that, because what they do is known exactly: `DecIPTTL`'s incremental
//! update keeps a valid checksum valid (RFC 1624 eqn. 3; the property test below checks
//! it), so the checksum validity survives it; a cut at the IPv4 length of a header whose
//! length was checked (`ip_len_ok` = 1) leaves at least the header's bytes
//! (`ip_avail` ≥ 4 × `ip_ihl`), so a check that passed still passes.
//!
//! # The rules
//!
//! An element with a model is **stepped over** (`chain::layout::Bypass`) when, from what is
//! known at its input, every case it could take sends the packet out of one and the same
//! output, counts nothing, and each of its effects is already done (the network header
//! already marked there, the packet already cut there, the destination annotation already
//! set from that header). The cases it could take are those whose region meets every
//! answer read at the same positions (an answer read elsewhere, or whose positions are
//! unknown, is left out: it can only make more cases possible).
//!
//! * **(a) duplicate header checks**: a `CheckIPHeader` after one that passed at the same
//!   header, with only `DecIPTTL`s and writes of other bytes in between, can take only its
//!   passing case: its drop cases meet no answer. A removed check is one that could never
//!   drop there, so drops by reason are unchanged. A check after a writer of what it reads
//!   (a `SetIPChecksum`, a NAT rewriting the addresses it checks, an element declaring
//!   nothing) is refused and the report names the writer.
//! * **(b) shared classifiers and lookups**: an `IPLookup`/`RadixIPLookup` (or any modelled
//!   classifier) after an identical one whose answer reaches it (nothing wrote the fields
//!   they read) can take only the cases of that answer; when they all lead to one output
//!   with nothing to write, it is stepped over. The first element's answer is reused as
//!   the graph's wiring, so no per-packet tag is needed; when the answer differs by path,
//!   it is refused (a tag would be needed).
//! * **(c) later drops earlier**: for an element that may drop, the report says how far
//!   back along its single incoming path its test could run: never across an element that
//!   writes a field the test reads (a classifier never crosses a writer), that moves the
//!   data start or the header the test reads, that keeps state (a counter, a table, a
//!   declared state: it would not see the packet), that may drop itself (the drop would be
//!   counted under another reason), or that branches (the test would drop packets going
//!   elsewhere). The merged mode applies the part of that move inside the test's own NF,
//!   across elements with a model, when the test itself changes nothing (every case it
//!   could take drops or sends the packet out of one output, with no effect and no byte
//!   count) and no skip uses the edges ([`Hoist`]): a packet it drops then skips the
//!   elements it was moved before, and their counts get those drops added back, so per
//!   element counters, drops by reason and state are as written. Across NFs the move is
//!   reported only (the NFs' own in/out counters would change).
//!
//! Merging and synthesis: synthesis reduces a fully modelled chain to one classifier and
//! one write set per traffic class, which removes every duplicate check and lookup at once;
//! merging works element by element on the same models and the same filter algebra, and
//! keeps every opaque element in place, so it applies where synthesis runs naive (opaque
//! NFs, a stage of a pipeline).

use chain::layout::{Bypass, Hoist, Merged, Placement, Skip};
use chain::{Executor, Place};
use elements::model::{Effect, IpAnchor, Model, Op, Outcome};
use elements::record::{Access, Declared};
use elements::Role;
use serde::Serialize;
use space::{Base, Field, FieldSet, Filter, FilterSet, Group};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// What an element stepped over or considered is, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CandidateKind {
    /// A header check: cases that drop (or send bad packets aside) and one way on.
    Check,
    /// A classifier or lookup: cases towards several outputs.
    Classifier,
    /// An element whose model does nothing to any packet (`Null`).
    PassThrough,
    /// Anything else (a writer).
    Other,
}

/// One element considered for merging, and the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// The element (global index, [`Executor::element`]).
    pub element: usize,
    /// Its qualified name (`nf/element`).
    pub name: String,
    /// Its class.
    pub class: String,
    /// What kind of element it is.
    pub kind: CandidateKind,
    /// The stage it is in (0 without a placement).
    pub stage: usize,
    /// Whether it is stepped over (on at least one of its ways in).
    pub taken: bool,
    /// Why it was taken or refused.
    pub why: Vec<String>,
}

/// A drop that could run earlier, or why not (reported only, see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DropMove {
    /// The dropping element (global index).
    pub element: usize,
    /// Its qualified name.
    pub name: String,
    /// The reasons it may drop under here.
    pub reasons: Vec<String>,
    /// The elements its test could run before, nearest first (empty: none).
    pub across: Vec<String>,
    /// Why it could go no further back.
    pub stopped: String,
    /// How many of `across` (the nearest) the merged mode runs it before ([`Hoist`]).
    pub applied: usize,
    /// Why not all of `across` (empty when all are, or none).
    pub applied_why: String,
}

/// What [`analyze`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergeReport {
    /// The groups of NFs analysed together (all NFs, or each stage of a placement), by name.
    pub stages: Vec<Vec<String>>,
    /// Checks and classifiers with an earlier element of their class in their stage, and
    /// every element stepped over, in element order.
    pub candidates: Vec<Candidate>,
    /// Elements that may drop, and how far back their test could run.
    pub drops: Vec<DropMove>,
    /// Header checks stepped over.
    pub checks_removed: usize,
    /// Classifiers and lookups stepped over.
    pub lookups_reused: usize,
    /// Pass-through elements stepped over.
    pub pass_throughs: usize,
}

/// The byte positions and knowledge at an element's input.
#[derive(Debug, Clone, PartialEq)]
struct Know {
    /// The data start (bytes from the data start at the root).
    data: Option<i32>,
    /// The network-header annotation.
    net: Option<i32>,
    /// The header whose `MarkIp` set the transport-header annotation.
    l4: Option<i32>,
    /// The MAC-header annotation.
    mac: Option<i32>,
    /// The packet ends at the IPv4 total length of the header here.
    trimmed: Option<i32>,
    /// The destination annotation holds the destination of the header here.
    dst_anno: Option<i32>,
    /// Answers of elements the packet went through.
    facts: Vec<Fact>,
}

/// An element's answer: the packet was in `region` when element `by` read it.
#[derive(Debug, Clone, PartialEq)]
struct Fact {
    /// The first element of the chain with the same model (facts of equal models join).
    key: usize,
    by: usize,
    data: Option<i32>,
    ip: Option<i32>,
    region: FilterSet,
    /// What weakened it since, and where (`field by element`).
    lost: BTreeSet<String>,
}

impl Fact {
    /// A fact of no element with no region, read by `by` at `data`/`ip`: to ask whether a
    /// write touches a field at those positions ([`touches`]).
    fn probe(by: usize, data: Option<i32>, ip: Option<i32>) -> Fact {
        Fact {
            key: usize::MAX,
            by,
            data,
            ip,
            region: FilterSet::empty(),
            lost: BTreeSet::new(),
        }
    }
}

impl Know {
    fn root() -> Know {
        Know {
            data: Some(0),
            net: None,
            l4: None,
            mac: None,
            trimmed: None,
            dst_anno: None,
            facts: Vec::new(),
        }
    }

    fn unknown(&mut self, who: &str) {
        for f in &mut self.facts {
            if !f.region.members().iter().all(Filter::is_any) {
                f.lost.insert(format!("everything by {who}"));
            }
            f.region = FilterSet::any();
        }
        self.data = None;
        self.net = None;
        self.l4 = None;
        self.mac = None;
        self.trimmed = None;
        self.dst_anno = None;
    }

    /// What holds on both paths.
    fn join(&self, o: &Know) -> Know {
        let same = |a: Option<i32>, b: Option<i32>| if a == b { a } else { None };
        let mut facts = Vec::new();
        for f in &self.facts {
            if let Some(g) = o
                .facts
                .iter()
                .find(|g| g.key == f.key && g.data == f.data && g.ip == f.ip)
            {
                facts.push(Fact {
                    key: f.key,
                    by: f.by,
                    data: f.data,
                    ip: f.ip,
                    region: f.region.union(&g.region),
                    lost: f.lost.union(&g.lost).cloned().collect(),
                });
            }
        }
        Know {
            data: same(self.data, o.data),
            net: same(self.net, o.net),
            l4: same(self.l4, o.l4),
            mac: same(self.mac, o.mac),
            trimmed: same(self.trimmed, o.trimmed),
            dst_anno: same(self.dst_anno, o.dst_anno),
            facts,
        }
    }
}

/// What a write changes: byte ranges (absolute, `None` upper: to the end), the end of the
/// packet, an annotation.
#[derive(Debug, Clone, Default)]
struct Touch {
    /// Byte ranges written; `None`: somewhere unknown.
    bytes: Option<Vec<(i64, i64)>>,
    /// The packet's end moves.
    end: bool,
    /// Annotations written.
    annos: Vec<Field>,
    /// The write keeps a valid IPv4 checksum of the header at this position valid.
    keeps_checksum_at: Option<i32>,
}

impl Touch {
    /// A write of annotation `f` only.
    fn anno(f: Field) -> Touch {
        Touch {
            bytes: Some(Vec::new()),
            annos: vec![f],
            ..Touch::default()
        }
    }
}

const FAR: i64 = i64::MAX / 4;

/// What field `f` of an answer taken with `data`/`ip` depends on: byte ranges (`None`:
/// unknown), the end of the packet, an annotation.
fn depends(f: Field, data: Option<i32>, ip: Option<i32>) -> (Option<Vec<(i64, i64)>>, bool) {
    let at = |base: Option<i32>, lo: i64, hi: i64| {
        base.map(|b| vec![(i64::from(b) + lo, i64::from(b) + hi)])
    };
    match f.group() {
        Group::Annotation => (Some(Vec::new()), false),
        Group::Frame | Group::Ethernet => match f {
            Field::FrameLen => (Some(Vec::new()), true),
            Field::HasVlan => (at(data, 12, 14), false),
            Field::VlanId => (at(data, 12, 16), false),
            _ => match f.layout() {
                Some(l) => (
                    at(
                        data,
                        i64::from(l.offset),
                        i64::from(l.offset) + i64::from(l.len),
                    ),
                    false,
                ),
                None => (None, true),
            },
        },
        Group::Ipv4 | Group::Transport => match f {
            Field::IpChecksumOk => (at(ip, 0, 60), false),
            Field::IpAvail => (Some(Vec::new()), true),
            Field::IpLenOk => (at(ip, 0, 4), true),
            Field::L4Len => (at(ip, 0, 4), false),
            Field::IpOptions => (at(ip, 0, 1), false),
            Field::L4Avail => (at(ip, 0, 1), true),
            _ => match f.layout() {
                Some(l) if l.base == Base::Network => (
                    at(
                        ip,
                        i64::from(l.offset),
                        i64::from(l.offset) + i64::from(l.len),
                    ),
                    false,
                ),
                // Transport bytes: after the IPv4 header, as long as the header says.
                _ => (
                    ip.map(|b| vec![(i64::from(b), i64::from(b) + 1), (i64::from(b) + 20, FAR)]),
                    false,
                ),
            },
        },
    }
}

fn ranges_meet(a: &[(i64, i64)], b: &[(i64, i64)]) -> bool {
    a.iter()
        .any(|&(a0, a1)| b.iter().any(|&(b0, b1)| a0 < b1 && b0 < a1))
}

/// Whether `touch` may change field `f` of fact `fact`.
fn touches(touch: &Touch, f: Field, fact: &Fact) -> bool {
    if f.group() == Group::Annotation {
        return touch.annos.contains(&f);
    }
    if f == Field::IpChecksumOk && touch.keeps_checksum_at.is_some() {
        return fact.ip.is_none() || touch.keeps_checksum_at != fact.ip;
    }
    let (bytes, end) = depends(f, fact.data, fact.ip);
    if end && touch.end {
        return true;
    }
    match (bytes, &touch.bytes) {
        (Some(b), Some(t)) => ranges_meet(&b, t),
        (Some(b), None) => !b.is_empty(),
        (None, _) => true,
    }
}

/// The fields a region constrains.
fn read_fields(region: &FilterSet) -> BTreeSet<Field> {
    region
        .members()
        .iter()
        .flat_map(|m| m.fields().map(|(f, _)| f))
        .collect()
}

/// `region` with no constraint on `fields`.
fn without(region: &FilterSet, fields: &[Field]) -> FilterSet {
    let mut out = FilterSet::empty();
    for m in region.members() {
        let mut m = m.clone();
        for f in fields {
            m = m.without(*f);
        }
        out.insert(&m);
    }
    out
}

/// The regions of a model's cases: each case's filter minus the filters before it.
fn regions(m: &Model) -> Vec<FilterSet> {
    let mut before = FilterSet::empty();
    let mut out = Vec::new();
    for c in &m.cases {
        let mut mine = FilterSet::empty();
        mine.insert(&c.filter);
        out.push(mine.difference(&before));
        before.insert(&c.filter);
    }
    out
}

/// What the walk found at one element (with the final knowledge at its input).
struct Seen {
    /// Which cases of its model are possible.
    feasible: Vec<usize>,
    /// The knowledge at its input.
    know: Know,
}

struct Walk<'a> {
    ex: &'a Executor,
    /// Per element, the first element with an equal model.
    model_id: Vec<usize>,
    stage_of: Vec<usize>,
    regions: Vec<Option<(Model, Vec<FilterSet>)>>,
    declared: Vec<Option<Declared>>,
}

impl Walk<'_> {
    fn name(&self, g: usize) -> String {
        format!(
            "{} ({})",
            self.ex.element_name(g),
            self.ex.element(g).class_name()
        )
    }

    fn role(&self, g: usize) -> Role {
        let n = self.ex.element_nf(g) as usize;
        let base = self.ex.global(n, 0) as usize;
        self.ex.nfs()[n].roles[g - base].clone()
    }

    /// Applies `touch` by element `who` to `k`'s answers.
    fn apply(&self, k: &mut Know, touch: &Touch, who: usize) {
        let name = self.name(who);
        for fact in &mut k.facts {
            let hit: Vec<Field> = read_fields(&fact.region)
                .into_iter()
                .filter(|&f| touches(touch, f, fact))
                .collect();
            if !hit.is_empty() {
                for f in &hit {
                    fact.lost.insert(format!("{f} by {name}"));
                }
                fact.region = without(&fact.region, &hit);
            }
        }
        if touch.annos.contains(&Field::DstIpAnno) {
            k.dst_anno = None;
        }
        if let Some(at) = k.dst_anno {
            let t = Fact::probe(who, k.data, Some(at));
            if touches(touch, Field::IpDst, &t) {
                k.dst_anno = None;
            }
        }
        if touch.end {
            k.trimmed = None;
        }
        if let Some(at) = k.trimmed {
            let t = Fact::probe(who, k.data, Some(at));
            if touches(touch, Field::IpLen, &t) {
                k.trimmed = None;
            }
        }
        if let Some(at) = k.l4 {
            let t = Fact::probe(who, k.data, Some(at));
            if touches(touch, Field::IpIhl, &t) {
                k.l4 = None;
            }
        }
    }

    /// The bytes of field `f` written by an element at `data`/`ip` (`None`: unknown).
    fn field_bytes(f: Field, data: Option<i32>, ip: Option<i32>) -> Option<Vec<(i64, i64)>> {
        let t = Fact::probe(0, data, ip);
        match f.layout() {
            Some(l) => {
                let base = match l.base {
                    Base::Frame => t.data,
                    Base::Network => t.ip,
                    Base::Transport => return t.ip.map(|b| vec![(i64::from(b) + 20, FAR)]),
                };
                base.map(|b| {
                    let lo = i64::from(b) + i64::from(l.offset);
                    vec![(lo, lo + i64::from(l.len))]
                })
            }
            None => depends(f, data, ip).0,
        }
    }

    /// Applies effect `e` of element `g` (reading IPv4 at `ip`) to `k`; whether it was a
    /// no-op (already done).
    fn effect(&self, k: &mut Know, e: &Effect, ip: Option<i32>, g: usize) -> bool {
        match e {
            Effect::Write(_, Op::Identity) => true,
            Effect::Write(f, _) => {
                let touch = if f.group() == Group::Annotation {
                    Touch::anno(*f)
                } else {
                    let mut bytes = Self::field_bytes(*f, k.data, ip);
                    // A stored IPv4 field's write leaves the checksum stale.
                    if f.group() == Group::Ipv4 {
                        if let (Some(b), Some(p)) = (&mut bytes, ip) {
                            b.push((i64::from(p) + 10, i64::from(p) + 12));
                        }
                    }
                    Touch {
                        bytes,
                        ..Touch::default()
                    }
                };
                self.apply(k, &touch, g);
                false
            }
            Effect::DecTtl => {
                let touch = Touch {
                    bytes: ip.map(|p| {
                        let p = i64::from(p);
                        vec![(p + 8, p + 9), (p + 10, p + 12)]
                    }),
                    keeps_checksum_at: ip,
                    ..Touch::default()
                };
                self.apply(k, &touch, g);
                false
            }
            Effect::Pull(n) => {
                k.data = k.data.map(|d| d + i32::from(*n));
                *n == 0
            }
            Effect::Unpull(n) => {
                k.data = k.data.map(|d| d - i32::from(*n));
                *n == 0
            }
            Effect::EtherEncap { .. } => {
                k.data = k.data.map(|d| d - 14);
                let touch = Touch {
                    bytes: k.data.map(|d| vec![(i64::from(d), i64::from(d) + 14)]),
                    ..Touch::default()
                };
                self.apply(k, &touch, g);
                k.mac = k.data;
                k.net = k.data.map(|d| d + 14);
                false
            }
            Effect::EtherRewrite { .. } => {
                let touch = Touch {
                    bytes: k.mac.map(|m| vec![(i64::from(m), i64::from(m) + 12)]),
                    ..Touch::default()
                };
                self.apply(k, &touch, g);
                false
            }
            Effect::MarkMac => {
                let done = k.mac.is_some() && k.mac == k.data;
                k.mac = k.data;
                done
            }
            Effect::PacketTypeFromEth => {
                self.apply(k, &Touch::anno(Field::PacketType), g);
                false
            }
            Effect::MarkIp => {
                let done = ip.is_some() && k.net == ip && k.l4 == ip;
                k.net = ip;
                k.l4 = ip;
                done
            }
            Effect::TrimToIpLen => {
                if ip.is_some() && k.trimmed == ip {
                    return true;
                }
                let name = self.name(g);
                for fact in &mut k.facts {
                    let hit: Vec<Field> = read_fields(&fact.region)
                        .into_iter()
                        .filter(|&f| depends(f, fact.data, fact.ip).1)
                        .collect();
                    if hit.is_empty() {
                        continue;
                    }
                    let mut out = FilterSet::empty();
                    for m in fact.region.members() {
                        let mut m = m.clone();
                        // Cut at a length that was checked: what is left is the datagram,
                        // at least its header.
                        let checked = ip.is_some()
                            && fact.ip == ip
                            && m.get(Field::IpLenOk).is_subset(&FieldSet::single(1));
                        for f in &hit {
                            if !(checked && *f == Field::IpLenOk) {
                                m = m.without(*f);
                            }
                        }
                        if checked {
                            let ihl = m.get(Field::IpIhl).first().unwrap_or(0);
                            m = m.with(Field::IpAvail, FieldSet::range(ihl * 4, 0xffff));
                        } else {
                            for f in &hit {
                                fact.lost.insert(format!("{f} by {name}"));
                            }
                        }
                        out.insert(&m);
                    }
                    fact.region = out;
                }
                k.trimmed = ip;
                false
            }
            Effect::DstAnnoFromIpDst => {
                if ip.is_some() && k.dst_anno == ip {
                    return true;
                }
                self.apply(k, &Touch::anno(Field::DstIpAnno), g);
                k.dst_anno = ip;
                false
            }
            Effect::SetIpChecksum => {
                let touch = Touch {
                    bytes: ip.map(|p| vec![(i64::from(p) + 10, i64::from(p) + 12)]),
                    ..Touch::default()
                };
                self.apply(k, &touch, g);
                false
            }
        }
    }

    /// Applies what element `g` declares (no model, or a run-time case) to `k`.
    fn declared(&self, k: &mut Know, d: Option<&Declared>, g: usize) {
        let Some(d) = d else {
            k.unknown(&self.name(g));
            return;
        };
        // Where its IPv4 fields are (an operator NF parses the frame from its start).
        let ip = match d.ip_at {
            IpAnchor::Data(o) => k.data.map(|x| x + i32::from(o)),
            IpAnchor::Annotation => k.net,
        };
        let mut bytes = Some(Vec::new());
        let mut annos = Vec::new();
        let mut add = |b: Option<Vec<(i64, i64)>>| match (&mut bytes, b) {
            (Some(v), Some(b)) => v.extend(b),
            _ => bytes = None,
        };
        for f in &d.writes {
            if f.group() == Group::Annotation {
                annos.push(*f);
            } else {
                add(Self::field_bytes(*f, k.data, ip));
                if f.group() == Group::Ipv4 {
                    add(ip.map(|p| vec![(i64::from(p) + 10, i64::from(p) + 12)]));
                }
            }
        }
        if d.ip_checksum {
            add(ip.map(|p| vec![(i64::from(p) + 10, i64::from(p) + 12)]));
        }
        // The options, the transport checksum and the payload: from byte 20 of the header on.
        if d.l4_checksum || d.payload == Access::Write || d.ip_options == Access::Write {
            add(ip.map(|p| vec![(i64::from(p) + 20, FAR)]));
        }
        let touch = Touch {
            bytes,
            annos,
            ..Touch::default()
        };
        self.apply(k, &touch, g);
        if d.sets_headers {
            // It may move the header annotations (a parse of the frame): where is unknown.
            k.net = None;
            k.mac = None;
        }
    }

    /// The IPv4 position element `g`'s model reads at, with `k`.
    fn ip_at(m: &Model, k: &Know) -> Option<i32> {
        match m.ip_at {
            IpAnchor::Data(o) => k.data.map(|d| d + i32::from(o)),
            IpAnchor::Annotation => k.net,
        }
    }

    /// `fact`'s region as element `g` reading at `data`/`ip` can use it: fields read at
    /// other positions are left out.
    fn projected(fact: &Fact, data: Option<i32>, ip: Option<i32>) -> FilterSet {
        let frame_ok = fact.data.is_some() && fact.data == data;
        let ip_ok = frame_ok && fact.ip.is_some() && fact.ip == ip;
        let drop: Vec<Field> = read_fields(&fact.region)
            .into_iter()
            .filter(|f| match f.group() {
                Group::Annotation => false,
                Group::Frame | Group::Ethernet => !frame_ok,
                Group::Ipv4 | Group::Transport => !ip_ok,
            })
            .collect();
        if drop.is_empty() {
            fact.region.clone()
        } else {
            without(&fact.region, &drop)
        }
    }

    /// The cases of element `g` possible with `k`.
    fn feasible(&self, g: usize, k: &Know) -> Vec<usize> {
        let Some((m, regs)) = &self.regions[g] else {
            return Vec::new();
        };
        let ip = Self::ip_at(m, k);
        let known: Vec<FilterSet> = k
            .facts
            .iter()
            .map(|f| Self::projected(f, k.data, ip))
            .filter(|r| !r.members().iter().any(Filter::is_any))
            .collect();
        (0..regs.len())
            .filter(|&i| {
                !regs[i].is_empty() && known.iter().all(|r| !r.intersection(&regs[i]).is_empty())
            })
            .collect()
    }

    /// Where packets go from element `g` with `k` at its input: (output, element,
    /// knowledge), the output `None` across a link.
    fn step(&self, g: usize, k: &Know) -> Vec<(Option<usize>, usize, Know)> {
        let mut out = Vec::new();
        match self.ex.place(g) {
            Place::Exit => {}
            Place::Link(t) => {
                let t = t as usize;
                if self.stage_of[t] == self.stage_of[g] {
                    out.push((None, t, k.clone()));
                }
            }
            Place::Inner => {
                let next = |o: usize| self.ex.edge(g, o).map(|(_, e, _)| e as usize);
                match &self.regions[g] {
                    Some((m, regs)) => {
                        let ip = Self::ip_at(m, k);
                        for i in self.feasible(g, k) {
                            let c = &m.cases[i];
                            let mut k2 = k.clone();
                            let key = self.model_id[g];
                            k2.facts
                                .retain(|f| !(f.key == key && f.data == k.data && f.ip == ip));
                            k2.facts.push(Fact {
                                key,
                                by: g,
                                data: k.data,
                                ip,
                                region: regs[i].clone(),
                                lost: BTreeSet::new(),
                            });
                            for e in &c.effects {
                                self.effect(&mut k2, e, ip, g);
                            }
                            let outs: Vec<usize> = match c.outcome {
                                Outcome::Out(o) => vec![o],
                                Outcome::Drop(_) => Vec::new(),
                                Outcome::Copies(n) => (0..n).collect(),
                                Outcome::Runtime => {
                                    self.declared(&mut k2, self.declared[g].as_ref(), g);
                                    (0..self.ex.outputs(g)).collect()
                                }
                            };
                            for o in outs {
                                if let Some(t) = next(o) {
                                    out.push((Some(o), t, k2.clone()));
                                }
                            }
                        }
                    }
                    None => {
                        let mut k2 = k.clone();
                        self.declared(&mut k2, self.declared[g].as_ref(), g);
                        for o in 0..self.ex.outputs(g) {
                            if let Some(t) = next(o) {
                                out.push((Some(o), t, k2.clone()));
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// What holds for every packet leaving element `g` by output `o`, with `k` at its
    /// input (`None`: none can).
    fn along(&self, g: usize, o: usize, k: &Know) -> Option<Know> {
        self.step(g, k)
            .into_iter()
            .filter(|(p, _, _)| *p == Some(o))
            .map(|(_, _, k2)| k2)
            .reduce(|a, b| a.join(&b))
    }

    /// Whether element `g` is where packets enter its stage (a `FromDevice` or `FromDump`
    /// no link of the stage leads to).
    fn seen_root(&self, g: usize) -> bool {
        matches!(self.role(g), Role::FromDevice(_) | Role::FromDump(_))
            && !(0..self.ex.element_count()).any(|p| {
                self.ex.place(p) == Place::Link(g as u32) && self.stage_of[p] == self.stage_of[g]
            })
    }

    /// Whether element `g` is an ordinary element with a model (one that may be skipped).
    fn skippable(&self, g: usize) -> bool {
        self.ex.place(g) == Place::Inner
            && matches!(self.role(g), Role::Inner)
            && self.regions[g].is_some()
    }

    /// The fixpoint: the knowledge at every reached element's input.
    fn run(&self) -> Vec<Option<Know>> {
        let n = self.ex.element_count();
        let mut at: Vec<Option<Know>> = vec![None; n];
        let mut changes = vec![0u32; n];
        let mut linked = vec![false; n];
        for g in 0..n {
            if let Place::Link(t) = self.ex.place(g) {
                if self.stage_of[t as usize] == self.stage_of[g] {
                    linked[t as usize] = true;
                }
            }
        }
        // Packets come in by interfaces no link of the stage joins (the merged mode refuses
        // an input at a linked one: `Executor::entry`).
        let mut work = Vec::new();
        for g in 0..n {
            let root =
                matches!(self.role(g), Role::FromDevice(_) | Role::FromDump(_)) && !linked[g];
            if root {
                at[g] = Some(Know::root());
                work.push(g);
            }
        }
        while let Some(g) = work.pop() {
            let Some(k) = at[g].clone() else { continue };
            for (_, t, k2) in self.step(g, &k) {
                let next = match &at[t] {
                    None => k2,
                    Some(old) => {
                        let j = old.join(&k2);
                        if j == *old {
                            continue;
                        }
                        j
                    }
                };
                changes[t] += 1;
                let next = if changes[t] > MAX_CHANGES {
                    let mut u = next;
                    u.unknown("a loop the walk did not settle");
                    u.facts.clear();
                    if at[t].as_ref() == Some(&u) {
                        continue;
                    }
                    u
                } else {
                    next
                };
                at[t] = Some(next);
                work.push(t);
            }
        }
        at
    }
}

/// How often an element's knowledge may change before it is taken as unknown (loops).
const MAX_CHANGES: u32 = 64;

/// What kind of element a model describes: a pass-through (every packet out of 0,
/// nothing done or counted), a classifier (cases towards several outputs, none of them
/// counted), a check (cases that drop or count), anything else.
fn kind_of(m: &Model) -> CandidateKind {
    let outs: BTreeSet<usize> = m
        .cases
        .iter()
        .filter_map(|c| match c.outcome {
            Outcome::Out(o) => Some(o),
            _ => None,
        })
        .collect();
    let counted = |c: &elements::model::Case| !c.stats.is_empty() || !c.byte_stats.is_empty();
    if m.cases
        .iter()
        .all(|c| c.outcome == Outcome::Out(0) && c.effects.is_empty() && !counted(c))
    {
        CandidateKind::PassThrough
    } else if outs.len() > 1
        && m.cases
            .iter()
            .all(|c| !matches!(c.outcome, Outcome::Out(_)) || !counted(c))
    {
        CandidateKind::Classifier
    } else if m
        .cases
        .iter()
        .any(|c| matches!(c.outcome, Outcome::Drop(_)) || counted(c))
    {
        CandidateKind::Check
    } else {
        CandidateKind::Other
    }
}

fn outcome_text(o: &Outcome) -> String {
    match o {
        Outcome::Out(p) => format!("output {p}"),
        Outcome::Drop(r) => format!("drop `{r}`"),
        Outcome::Copies(n) => format!("{n} copies"),
        Outcome::Runtime => "left to the element".to_string(),
    }
}

/// Finds what can be merged in `ex`'s chain, for the NFs placed together: all of them, or
/// each stage of `placement` (a link between stages is crossed by no knowledge). Returns
/// the edges to rewire past the elements they skip ([`Merged`], for
/// [`Executor::enable_merged`]) and the report.
pub fn analyze(ex: &Executor, placement: Option<&Placement>) -> (Merged, MergeReport) {
    let n = ex.element_count();
    let nfs = ex.nfs().len();
    let mut nf_stage = vec![0usize; nfs];
    let mut stages: Vec<Vec<String>> = Vec::new();
    match placement {
        Some(p) if !p.stages.is_empty() => {
            for (s, st) in p.stages.iter().enumerate() {
                for &f in &st.nfs {
                    if let Some(x) = nf_stage.get_mut(f) {
                        *x = s;
                    }
                }
                stages.push(
                    st.nfs
                        .iter()
                        .filter_map(|&f| ex.nfs().get(f).map(|x| x.name.clone()))
                        .collect(),
                );
            }
        }
        _ => stages.push(ex.nfs().iter().map(|x| x.name.clone()).collect()),
    }
    let models: Vec<Option<Model>> = (0..n).map(|g| ex.element(g).model()).collect();
    let model_id = (0..n)
        .map(|g| match &models[g] {
            Some(m) => (0..g).find(|&h| models[h].as_ref() == Some(m)).unwrap_or(g),
            None => g,
        })
        .collect();
    let walk = Walk {
        ex,
        model_id,
        stage_of: (0..n)
            .map(|g| nf_stage[ex.element_nf(g) as usize])
            .collect(),
        regions: models
            .into_iter()
            .map(|m| {
                m.map(|m| {
                    let r = regions(&m);
                    (m, r)
                })
            })
            .collect(),
        declared: (0..n).map(|g| ex.element(g).declared()).collect(),
    };
    let at = walk.run();
    let seen: Vec<Option<Seen>> = at
        .into_iter()
        .enumerate()
        .map(|(g, k)| {
            k.map(|know| Seen {
                feasible: walk.feasible(g, &know),
                know,
            })
        })
        .collect();
    // Edge by edge: how far along it packets can skip.
    let mut merged = Merged::default();
    // Per element: ways in it was skipped on, ways in considered, why (taken / refused).
    let mut tally: BTreeMap<usize, (usize, usize, Vec<String>, Vec<String>)> = BTreeMap::new();
    for (p, sp) in seen.iter().enumerate() {
        let Some(sp) = sp else { continue };
        if ex.place(p) != Place::Inner {
            continue;
        }
        for o in 0..ex.outputs(p) {
            let Some((_, first, _)) = ex.edge(p, o) else {
                continue;
            };
            let Some(mut k) = walk.along(p, o, &sp.know) else {
                continue;
            };
            let mut e = first as usize;
            let mut over = Vec::new();
            while walk.skippable(e) && over.len() < n {
                let Some((m, _)) = &walk.regions[e] else {
                    break;
                };
                let feasible = walk.feasible(e, &k);
                let t = tally.entry(e).or_default();
                t.1 += 1;
                match decide(&walk, e, m, &feasible, &k) {
                    Ok((out, why)) => {
                        t.0 += 1;
                        if t.2.is_empty() {
                            t.2 = why;
                        }
                        over.push(Bypass {
                            element: e,
                            output: out,
                        });
                        let Some(next) = walk.along(e, out, &k) else {
                            break;
                        };
                        let Some((_, to, _)) = ex.edge(e, out) else {
                            break;
                        };
                        k = next;
                        e = to as usize;
                    }
                    Err(why) => {
                        if t.3.is_empty() {
                            t.3 = why;
                            let class = ex.element(e).class_name();
                            for f in &k.facts {
                                if f.by != e
                                    && ex.element(f.by).class_name() == class
                                    && !f.lost.is_empty()
                                {
                                    t.3.push(format!(
                                        "what {} found was weakened: {}",
                                        ex.element_name(f.by),
                                        f.lost.iter().cloned().collect::<Vec<_>>().join(", ")
                                    ));
                                }
                            }
                        }
                        break;
                    }
                }
            }
            if !over.is_empty() {
                merged.skips.push(Skip {
                    from: p,
                    output: o,
                    over,
                });
            }
        }
    }
    // The edges the skips rewire or step over, as (element, output): no drop moves there.
    let mut used: BTreeSet<(usize, usize)> = BTreeSet::new();
    for sk in &merged.skips {
        used.insert((sk.from, sk.output));
        used.extend(sk.over.iter().map(|b| (b.element, b.output)));
    }
    let mut candidates = Vec::new();
    let mut drops = Vec::new();
    let (mut checks, mut lookups, mut passes) = (0, 0, 0);
    for g in 0..n {
        let (Some(s), Some((m, _))) = (&seen[g], &walk.regions[g]) else {
            continue;
        };
        if !walk.skippable(g) {
            continue;
        }
        let kind = kind_of(m);
        let class = ex.element(g).class_name();
        let earlier = s
            .know
            .facts
            .iter()
            .any(|f| f.by != g && ex.element(f.by).class_name() == class);
        let (taken, ways, why_taken, why_not) = tally.remove(&g).unwrap_or_default();
        if taken > 0 {
            match kind {
                CandidateKind::Check => checks += 1,
                CandidateKind::Classifier => lookups += 1,
                CandidateKind::PassThrough => passes += 1,
                CandidateKind::Other => {}
            }
            let mut why = why_taken;
            if taken < ways {
                why.push(format!("on {taken} of its {ways} ways in"));
                why.extend(why_not.into_iter().map(|w| format!("elsewhere: {w}")));
            }
            candidates.push(Candidate {
                element: g,
                name: ex.element_name(g),
                class: class.to_string(),
                kind,
                stage: walk.stage_of[g],
                taken: true,
                why,
            });
        } else if earlier && matches!(kind, CandidateKind::Check | CandidateKind::Classifier) {
            let why = if why_not.is_empty() {
                decide(&walk, g, m, &s.feasible, &s.know)
                    .err()
                    .unwrap_or_default()
            } else {
                why_not
            };
            candidates.push(Candidate {
                element: g,
                name: ex.element_name(g),
                class: class.to_string(),
                kind,
                stage: walk.stage_of[g],
                taken: false,
                why,
            });
        }
        if taken < ways || ways == 0 {
            let reasons: BTreeSet<String> = s
                .feasible
                .iter()
                .filter_map(|&i| match m.cases[i].outcome {
                    Outcome::Drop(r) => Some(r.to_string()),
                    _ => None,
                })
                .collect();
            if !reasons.is_empty() {
                let (d, hoist) = drop_move(&walk, &seen, g, m, s, reasons, &used);
                drops.push(d);
                if let Some(h) = hoist {
                    // Its edges are not used by another move either.
                    used.insert((h.element, h.output));
                    for b in &h.before {
                        used.insert((b.element, b.output));
                    }
                    merged.hoists.push(h);
                }
            }
        }
    }
    let report = MergeReport {
        stages,
        candidates,
        drops,
        checks_removed: checks,
        lookups_reused: lookups,
        pass_throughs: passes,
    };
    (merged, report)
}

/// Whether element `g` (model `m`, cases `feasible` possible) can be stepped over with
/// what `k` knows: the output and why, or why not.
fn decide(
    walk: &Walk<'_>,
    g: usize,
    m: &Model,
    feasible: &[usize],
    know: &Know,
) -> Result<(usize, Vec<String>), Vec<String>> {
    let ex = walk.ex;
    let mut why = Vec::new();
    if feasible.is_empty() {
        return Err(vec!["no packet reaches it".to_string()]);
    }
    let outs: BTreeSet<String> = feasible
        .iter()
        .map(|&i| outcome_text(&m.cases[i].outcome))
        .collect();
    let mut o = None;
    for &i in feasible {
        match m.cases[i].outcome {
            Outcome::Out(p) if o.is_none() || o == Some(p) => o = Some(p),
            _ => {
                why.push(format!(
                    "still possible here: {}",
                    outs.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
                return Err(why);
            }
        }
    }
    let ip = Walk::ip_at(m, know);
    let mut k = know.clone();
    for &i in feasible {
        let c = &m.cases[i];
        if !c.stats.is_empty() || !c.byte_stats.is_empty() {
            let mut st = c.stats.clone();
            st.extend(&c.byte_stats);
            why.push(format!("counts packets ({})", st.join(", ")));
        }
        for e in &c.effects {
            if !walk.effect(&mut k, e, ip, g) {
                why.push(format!("{} is not already done here", effect_text(e)));
            }
        }
    }
    why.dedup();
    let Some(o) = o.filter(|_| why.is_empty()) else {
        return Err(why);
    };
    if ex.edge(g, o).is_none() {
        return Err(vec![format!("output {o} is not connected")]);
    }
    let mut because = Vec::new();
    let skipped: Vec<String> = (0..m.cases.len())
        .filter(|i| !feasible.contains(i))
        .map(|i| outcome_text(&m.cases[i].outcome))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let class = ex.element(g).class_name();
    let by: BTreeSet<String> = know
        .facts
        .iter()
        .filter(|f| f.by != g && ex.element(f.by).class_name() == class)
        .map(|f| ex.element_name(f.by))
        .collect();
    if skipped.is_empty() {
        because.push(format!("every packet leaves by output {o}, unchanged"));
    } else if by.is_empty() {
        because.push(format!(
            "what is known here rules out {}",
            skipped.join(", ")
        ));
    } else {
        because.push(format!(
            "every packet here went through an equal or stronger {} ({}): never {} here",
            class,
            by.into_iter().collect::<Vec<_>>().join(", "),
            skipped.join(", ")
        ));
    }
    let done: Vec<String> = feasible
        .iter()
        .flat_map(|&i| m.cases[i].effects.iter().map(effect_text))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !done.is_empty() {
        because.push(format!("already done: {}", done.join(", ")));
    }
    because.push(format!("leaves by output {o}"));
    Ok((o, because))
}

fn effect_text(e: &Effect) -> String {
    match e {
        Effect::Write(f, _) => format!("write of {f}"),
        Effect::DecTtl => "TTL decrement".to_string(),
        Effect::Pull(n) => format!("strip of {n} bytes"),
        Effect::Unpull(n) => format!("unstrip of {n} bytes"),
        Effect::EtherEncap { .. } => "Ethernet encapsulation".to_string(),
        Effect::EtherRewrite { .. } => "Ethernet address rewrite".to_string(),
        Effect::MarkMac => "MAC header mark".to_string(),
        Effect::PacketTypeFromEth => "packet type".to_string(),
        Effect::MarkIp => "network header mark".to_string(),
        Effect::TrimToIpLen => "cut at the IPv4 length".to_string(),
        Effect::DstAnnoFromIpDst => "destination annotation".to_string(),
        Effect::SetIpChecksum => "checksum".to_string(),
    }
}

/// How far back the drop test of element `g` could run (rule (c)), and the part of that
/// the merged mode applies (`used`: the edges skips use, as (element, output)).
fn drop_move(
    walk: &Walk<'_>,
    seen: &[Option<Seen>],
    g: usize,
    m: &Model,
    s: &Seen,
    reasons: BTreeSet<String>,
    used: &BTreeSet<(usize, usize)>,
) -> (DropMove, Option<Hoist>) {
    let ex = walk.ex;
    let n = ex.element_count();
    // Fields the test reads: every case up to the last drop decides it, up to the last
    // possible case when a case counts (the count must not change either).
    let counts = s
        .feasible
        .iter()
        .any(|&i| !m.cases[i].stats.is_empty() || !m.cases[i].byte_stats.is_empty());
    let last = s
        .feasible
        .iter()
        .copied()
        .filter(|&i| counts || matches!(m.cases[i].outcome, Outcome::Drop(_)))
        .max()
        .unwrap_or(0);
    let mut reads: BTreeSet<Field> = BTreeSet::new();
    for c in &m.cases[..=last] {
        reads.extend(c.filter.fields().map(|(f, _)| f));
    }
    let ip = Walk::ip_at(m, &s.know);
    let probe = Fact::probe(g, s.know.data, ip);
    // Whether the test itself can run elsewhere: it only drops or sends packets out of one
    // output, changing nothing and counting no bytes.
    let mut way_on = BTreeSet::new();
    let mut pure = String::new();
    for &i in &s.feasible {
        let c = &m.cases[i];
        match c.outcome {
            Outcome::Drop(_) => {}
            Outcome::Out(o) => {
                way_on.insert(o);
            }
            ref o => pure = format!("it may end in {}", outcome_text(o)),
        }
        if let Some(e) = c.effects.first() {
            pure = format!("it does a {} itself", effect_text(e));
        }
        if !c.byte_stats.is_empty() {
            pure = "it counts bytes".to_string();
        }
    }
    let pass = match (way_on.len(), way_on.first()) {
        (1, Some(&o)) if ex.edge(g, o).is_some() => Some(o),
        _ => {
            if pure.is_empty() {
                pure = "its packets leave by more than one output".to_string();
            }
            None
        }
    };
    if pure.is_empty() && pass.is_some_and(|o| used.contains(&(g, o))) {
        pure = "the edge after it is rewired by a skip".to_string();
    }
    // Per element crossed (nearest first): it, its output towards the test, why the test
    // cannot run in front of it in the merged mode (`None`: it can), whether one edge not
    // used by a skip leads into it.
    let mut across = Vec::new();
    let mut path: Vec<(usize, usize, Option<&str>, bool)> = Vec::new();
    let mut at = g;
    let stopped = loop {
        // The single way into `at`.
        let mut preds = Vec::new();
        for p in 0..n {
            match ex.place(p) {
                Place::Inner => {
                    for o in 0..ex.outputs(p) {
                        if ex.edge(p, o).is_some_and(|(_, e, _)| e as usize == at) {
                            preds.push((p, o));
                        }
                    }
                }
                Place::Link(t) if t as usize == at => preds.push((p, 0)),
                _ => {}
            }
        }
        if let Some(last) = path.last_mut().filter(|l| l.0 == at) {
            last.3 = matches!(preds.as_slice(), [(p, o)]
                if ex.place(*p) == Place::Inner && !used.contains(&(*p, *o)));
        }
        let is_root = matches!(walk.role(at), Role::FromDevice(_) | Role::FromDump(_))
            && !preds
                .iter()
                .any(|&(p, _)| walk.stage_of[p] == walk.stage_of[at]);
        if is_root {
            break format!("{} is where packets enter", walk.name(at));
        }
        let [(p, po)] = preds.as_slice() else {
            break format!("{} has several ways in", walk.name(at));
        };
        let (p, po) = (*p, *po);
        if walk.stage_of[p] != walk.stage_of[g] {
            break format!("{} is in another stage", walk.name(p));
        }
        if walk.seen_root(p) {
            break format!("{} is where packets enter", walk.name(p));
        }
        if ex.place(p) != Place::Inner {
            // A link: the bytes cross unchanged (the NF after it is another one, where the
            // merged mode does not move the test).
            at = p;
            continue;
        }
        let Some(sp) = &seen[p] else {
            break format!("{} is never reached", walk.name(p));
        };
        let (why, writes) = match &walk.regions[p] {
            None => match &walk.declared[p] {
                None => (Some("declares nothing (may do anything)".to_string()), true),
                Some(d) if d.stateful => (Some("keeps state".to_string()), false),
                Some(d) if d.drops => (Some("may drop too".to_string()), false),
                Some(d) => {
                    let mut k = sp.know.clone();
                    k.facts = vec![probe_with(&probe, &reads)];
                    walk.declared(&mut k, Some(d), p);
                    (None, !k.facts[0].lost.is_empty())
                }
            },
            Some((pm, _)) => {
                let outs: BTreeSet<usize> = sp
                    .feasible
                    .iter()
                    .flat_map(|&i| match pm.cases[i].outcome {
                        Outcome::Out(o) => vec![o],
                        Outcome::Copies(k) => (0..k).collect(),
                        _ => vec![usize::MAX],
                    })
                    .collect();
                let stats = sp
                    .feasible
                    .iter()
                    .any(|&i| !pm.cases[i].stats.is_empty() || !pm.cases[i].byte_stats.is_empty());
                let pip = Walk::ip_at(pm, &sp.know);
                let mut k = sp.know.clone();
                k.facts = vec![probe_with(&probe, &reads)];
                let mut moves = false;
                for &i in &sp.feasible {
                    for e in &pm.cases[i].effects {
                        moves |= matches!(
                            e,
                            Effect::Pull(_) | Effect::Unpull(_) | Effect::EtherEncap { .. }
                        );
                        walk.effect(&mut k, e, pip, p);
                    }
                }
                let why = if stats {
                    Some("keeps state (counts packets)".to_string())
                } else if outs.contains(&usize::MAX) {
                    Some("may drop too, or runs itself".to_string())
                } else if outs.len() > 1 {
                    Some("branches (the test would drop packets going elsewhere)".to_string())
                } else if moves {
                    Some("moves the data start".to_string())
                } else {
                    None
                };
                (why, !k.facts[0].lost.is_empty())
            }
        };
        if writes {
            break format!(
                "{} writes what the test reads (never a classifier across a writer)",
                walk.name(p)
            );
        }
        if let Some(w) = why {
            break format!("{} {w}", walk.name(p));
        }
        // In front of it, the test must find its header where it finds it now.
        let anchored = sp.know.data.is_some()
            && sp.know.data == s.know.data
            && (m.ip_at != IpAnchor::Annotation || (ip.is_some() && sp.know.net == ip));
        if !anchored {
            break format!(
                "{} is reached with the test's header elsewhere (a header mark or a data move)",
                walk.name(p)
            );
        }
        across.push(walk.name(p));
        // The merged mode moves the test only inside its NF, across modelled elements
        // (the NFs' own counters and the opaque elements stay as written).
        let unmovable = if ex.element_nf(p) != ex.element_nf(g) {
            Some("is in another NF")
        } else if !matches!(walk.role(p), Role::Inner) || walk.regions[p].is_none() {
            Some("has no model")
        } else if used.contains(&(p, po)) {
            Some("is stepped over or rewired by a skip")
        } else {
            None
        };
        path.push((p, po, unmovable, false));
        at = p;
    };
    // The longest run of movable elements from the test back whose first has one edge in.
    let run = path.iter().take_while(|e| e.2.is_none()).count();
    let applied = if pure.is_empty() {
        (0..=run)
            .rev()
            .find(|&k| k == 0 || path[k - 1].3)
            .unwrap_or(0)
    } else {
        0
    };
    let applied_why = if applied == across.len() {
        String::new()
    } else if !pure.is_empty() {
        format!("not moved: {pure}")
    } else {
        match path.get(applied) {
            Some((p, _, Some(w), _)) => format!("not across {}, which {w}", walk.name(*p)),
            Some((p, ..)) => format!(
                "not before {}: it has more than one way in, or one a skip rewires",
                walk.name(*p)
            ),
            None => String::new(),
        }
    };
    let hoist = pass.filter(|_| applied > 0).map(|output| Hoist {
        element: g,
        output,
        before: path[..applied]
            .iter()
            .rev()
            .map(|&(p, o, _, _)| Bypass {
                element: p,
                output: o,
            })
            .collect(),
    });
    (
        DropMove {
            element: g,
            name: ex.element_name(g),
            reasons: reasons.into_iter().collect(),
            across,
            stopped,
            applied,
            applied_why,
        },
        hoist,
    )
}

/// A fact reading `reads` at the positions of `probe`, to see what a write weakens.
fn probe_with(probe: &Fact, reads: &BTreeSet<Field>) -> Fact {
    let mut f = Filter::any();
    for &r in reads {
        // Any proper subset will do: the walk only looks at which fields lose constraints.
        let w = r.width().min(127);
        f = f.with(r, FieldSet::range(0, (1u128 << w) - 2));
    }
    let mut region = FilterSet::empty();
    region.insert(&f);
    Fact {
        region,
        ..probe.clone()
    }
}

/// The edges to rewire in `ex`'s whole chain (the planner [`Mode::Merged`] asks).
///
/// [`Mode::Merged`]: synth::Mode::Merged
pub fn merged(ex: &Executor) -> Merged {
    analyze(ex, None).0
}

impl MergeReport {
    /// The report as text: per candidate the verdict and why, then the drops.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "element merging: {} header check(s) removed, {} lookup(s)/classifier(s) reused, {} pass-through(s) stepped over, {} drop test(s) moved earlier",
            self.checks_removed,
            self.lookups_reused,
            self.pass_throughs,
            self.drops.iter().filter(|d| d.applied > 0).count()
        );
        if self.stages.len() > 1 {
            for (i, s) in self.stages.iter().enumerate() {
                let _ = writeln!(o, "stage {i}: {}", s.join(", "));
            }
        }
        let kind = |k: CandidateKind| match k {
            CandidateKind::Check => "check",
            CandidateKind::Classifier => "lookup",
            CandidateKind::PassThrough => "pass-through",
            CandidateKind::Other => "other",
        };
        for c in &self.candidates {
            let verdict = if c.taken { "stepped over" } else { "kept" };
            let _ = writeln!(o, "{} ({}, {}): {verdict}", c.name, c.class, kind(c.kind));
            for w in &c.why {
                let _ = writeln!(o, "  {} {w}", if c.taken { "ok" } else { "x" });
            }
        }
        let mut by_stop: BTreeMap<usize, Vec<&DropMove>> = BTreeMap::new();
        for d in &self.drops {
            by_stop.entry(d.across.len()).or_default().push(d);
        }
        for d in &self.drops {
            if d.across.is_empty() {
                continue;
            }
            let _ = writeln!(
                o,
                "drop {} ({}) could run {} element(s) earlier, before {}; then {}",
                d.name,
                d.reasons.join(", "),
                d.across.len(),
                d.across.last().map_or("", String::as_str),
                d.stopped
            );
            let _ = match d.applied {
                0 => writeln!(o, "  kept in place: {}", d.applied_why),
                k if k == d.across.len() => {
                    writeln!(o, "  moved: it runs before {}", d.across[k - 1])
                }
                k => writeln!(
                    o,
                    "  moved {k} element(s) earlier, before {}; {}",
                    d.across[k - 1],
                    d.applied_why
                ),
            };
        }
        let stay = by_stop.get(&0).map_or(0, Vec::len);
        if stay > 0 {
            let _ = writeln!(o, "drops that stay where they are: {stay}");
            for d in by_stop.get(&0).into_iter().flatten() {
                let _ = writeln!(o, "  {}: {}", d.name, d.stopped);
            }
        }
        o
    }
}
