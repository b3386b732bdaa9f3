//! The walk of the stitched chain graph (SNF Algorithm 1, with Algorithm 2's intersect made
//! exact): from every entry, follow (filter, composed action) through the element models,
//! splitting at every read, until the packets leave, are dropped, reach a stateful rewriter
//! (a run-time decision inside the class) or an element without a model (handed over).

use chain::program::{
    Annotations, Branch, Class, Event, Finish, IpChecksum, Node, NodeId, Program, Segment, Tuple,
    Val,
};
use chain::{ChainReason, Executor, Place};
use elements::model::{
    Action, Effect, EffectSink, Field, FieldSet, Filter, Group, IpAnchor, Model, Op, Outcome,
};
use elements::rewriter::{InputSpec, Pattern, Vary};
use elements::{Element, RewriteSpec, RouteTable};
use space::Preimage;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A link crossed more often than this is a forwarding loop (as the naive executor counts).
const MAX_HOPS: u32 = chain::exec::MAX_HOPS as u32;
/// Synthesis of one entry gives up (the entry runs naive) beyond this many nodes.
const NODE_BUDGET: usize = 200_000;
/// With run-time checks, an entry's walk tries at most this many nodes before it retries
/// without them.
const ENTRY_BUDGET: usize = 20_000;
/// A class follows at most this many links; a packet going further (a forwarding loop) is
/// handed to the link and runs naive from there (which also bounds the walk's recursion).
const WALK_HOPS: u32 = 16;
/// At most this many elements on a path decide by run-time checks; later ones see the packet.
const MAX_CHECKED: u32 = 2;
/// Annotations every fresh packet has at 0 (the executor reads them as 0 from any frame).
const FRESH_ZERO: [Field; 4] = [
    Field::Paint,
    Field::DstIpAnno,
    Field::InPort,
    Field::FixIpSrc,
];
/// The id of an unknown operation (a field no element keeps track of any more).
const UNKNOWN: u32 = u32::MAX;

/// One traffic class as `fusebox synth` shows it.
#[derive(Debug, Clone)]
pub struct ClassReport {
    /// The entry (`NF.IFACE`).
    pub entry: String,
    /// The packets of the class (fields of the frame as it arrived).
    pub filter: Filter,
    /// What is written, field by field (once).
    pub writes: Vec<(Field, Op)>,
    /// Stateful elements deciding inside the class, in chain order.
    pub stateful: Vec<String>,
    /// Where the class ends: `exit NF.IFACE`, `drop REASON at ELEMENT`, `handoff ELEMENT`.
    pub end: String,
    /// The elements the class passes, in order.
    pub path: Vec<String>,
}

/// The outcome of synthesizing a chain.
#[derive(Debug, Clone, Default)]
pub struct Synthesis {
    /// The program the executor runs.
    pub program: Program,
    /// Every traffic class.
    pub classes: Vec<ClassReport>,
    /// Entries that could not be synthesized (they run naive), with the reason.
    pub naive_entries: Vec<String>,
    /// Elements packets are handed to (opaque), with how many classes end there.
    pub handoffs: BTreeMap<String, usize>,
}

/// Where DstIpAnno's value comes from: an operation on a field of the frame as it arrived.
#[derive(Debug, Clone, PartialEq)]
struct Anno {
    src: Field,
    op: Op,
}

/// One path of the walk so far: the packets on it (`phi`), what the path has done to them
/// (`w`) and where their headers are.
#[derive(Debug, Clone)]
struct PathState {
    phi: Filter,
    w: Action,
    head: i32,
    mac: Option<i32>,
    net: Option<i32>,
    l4: bool,
    trimmed: bool,
    anno: Anno,
    ttl_decs: u32,
    recompute: bool,
    hops: u32,
    events: Vec<Event>,
    path: Vec<u32>,
    stateful: Vec<u32>,
    next_reg: u8,
    /// The data is empty (a frame shorter than what `Strip` pulled): every field reads 0.
    empty: bool,
    /// Elements on the path whose reads needed run-time checks.
    checked: u32,
}

/// Why a walk cannot go on statically at an element (the packet is handed to it).
#[derive(Debug)]
struct Bail;

/// The packets of a state that match a read.
enum Refined {
    None,
    Exact(Filter),
    /// These may match; they do when every value lies in its set at run time.
    Runtime(Filter, Vec<(Val, FieldSet)>),
}

struct Giveup(String);

/// The walk of an empty packet (a frame shorter than a `Strip`) needed more than reads and
/// drops: it is handed to the `Strip` instead.
const EMPTY: &str = "empty packet";

/// The walker over an executor's stitched graph.
struct Walker<'a> {
    ex: &'a Executor,
    nodes: Vec<Node>,
    events: Vec<Vec<Event>>,
    reasons: Vec<&'static str>,
    interned: HashMap<(Node, Vec<Event>), NodeId>,
    reports: Vec<ClassReport>,
    entry: String,
    /// Protocols that can reach each (rewriter, input); `None` = any.
    protos: Option<HashMap<(u32, u32), BTreeSet<u8>>>,
    /// Protocols seen reaching rewriter inputs in this walk.
    seen: HashMap<(u32, u32), BTreeSet<u8>>,
    /// Elements packets were handed to, with the protocols they may carry.
    handed: Vec<(u32, FieldSet)>,
    budget: usize,
    report: bool,
    /// Whether run-time checks may be used (else such reads hand the packet over).
    checks: bool,
    /// Classify nodes of the entry being walked, with their classes, to be finished once the
    /// entry's fields are known.
    pending: Vec<(NodeId, Vec<(Filter, NodeId)>)>,
    /// The nodes that lazily walked cases lead to: a list of leaves with one of them is
    /// classified in order.
    lazy_ids: HashSet<NodeId>,
    /// The ordered Classify nodes of the entry being walked.
    ordered_nodes: Vec<NodeId>,
}

/// An element whose model has more cases than this is walked with lazy subtraction: a
/// first-match case no longer has every earlier case subtracted from it, and the classes it
/// leads to are kept in priority order and may overlap (see
/// [`chain::program::Segment::ordered`]). Subtracting each rule of a long access list from
/// every later one multiplies the classes (250 ClassBench rules gave 20,000 classes).
pub const LAZY_AT: usize = 64;

fn tuple_of(f: Field) -> Option<Tuple> {
    Some(match f {
        Field::IpSrc => Tuple::Saddr,
        Field::SrcPort => Tuple::Sport,
        Field::IpDst => Tuple::Daddr,
        Field::DstPort => Tuple::Dport,
        _ => return None,
    })
}

/// The value a field holds after `op`, for the executor.
fn val(f: Field, op: &Op) -> Val {
    match op {
        Op::Identity => Val::Orig(f, 0),
        Op::Set(c) => Val::Const(*c),
        Op::Add(c) => Val::Orig(f, *c),
        Op::Pool { id, .. } | Op::Stateful { id } => match tuple_of(f) {
            Some(t) if *id != UNKNOWN => Val::Reg(*id as u8, t, 0),
            _ => Val::Const(0),
        },
        Op::StatefulThen { id, add } => match tuple_of(f) {
            Some(t) if *id != UNKNOWN => Val::Reg(*id as u8, t, *add),
            _ => Val::Const(0),
        },
    }
}

impl PathState {
    fn start() -> PathState {
        // Fresh packets carry no annotations: these read 0 in every frame.
        let mut phi = Filter::any();
        for f in FRESH_ZERO {
            phi.restrict(f, &FieldSet::single(0));
        }
        PathState {
            phi,
            // A fresh packet's packet-type annotation is "host" until FromDevice sets it.
            w: Action::identity().with(Field::PacketType, Op::Set(0)),
            head: 0,
            mac: None,
            net: None,
            l4: false,
            trimmed: false,
            anno: Anno {
                src: Field::DstIpAnno,
                op: Op::Identity,
            },
            ttl_decs: 0,
            recompute: false,
            hops: 0,
            events: Vec::new(),
            path: Vec::new(),
            stateful: Vec::new(),
            next_reg: 0,
            empty: false,
            checked: 0,
        }
    }

    /// Whether the element's IPv4 header is the frame's at offset 14.
    fn ip_ok(&self, at: IpAnchor) -> bool {
        match at {
            IpAnchor::Annotation => self.net == Some(14),
            IpAnchor::Data(o) => self.head + i32::from(o) == 14,
        }
    }

    /// The read `set` of element-view field `f` as reads of frame fields with the
    /// operation in force on them: (frame field, op, set); `Ok(None)` when nothing matches.
    fn translate(
        &self,
        f: Field,
        set: &FieldSet,
        at: IpAnchor,
    ) -> Result<Option<(Field, Op, FieldSet)>, Bail> {
        let plain = |g: Field| Ok(Some((g, self.w.get(g).clone(), set.clone())));
        match f {
            Field::DstIpAnno => Ok(Some((self.anno.src, self.anno.op.clone(), set.clone()))),
            Field::Paint | Field::PacketType | Field::InPort | Field::FixIpSrc => plain(f),
            Field::FrameLen => {
                if self.trimmed {
                    // data length = 14 + IpLen - head
                    Ok(Some((
                        Field::IpLen,
                        self.w.get(Field::IpLen).clone(),
                        set.shift(i128::from(self.head - 14), 16),
                    )))
                } else {
                    Ok(Some((
                        Field::FrameLen,
                        Op::Identity,
                        set.shift(i128::from(self.head), 16),
                    )))
                }
            }
            _ if f.group() == Group::Ethernet => {
                if self.head != 0 {
                    return Err(Bail);
                }
                plain(f)
            }
            Field::Raw { offset, len } => {
                let off = i32::from(offset) + self.head;
                if off < 0 || off > i32::from(u16::MAX) {
                    return Err(Bail);
                }
                // Raw bytes must not overlap anything written so far.
                let written = self.w.ops().any(|(g, _)| {
                    chain::program::frame_location(g, 20).is_some()
                        || matches!(g, Field::Raw { .. })
                });
                if written && off < 14 + 60 + 20 {
                    return Err(Bail);
                }
                let _ = len;
                Ok(Some((
                    Field::Raw {
                        offset: off as u16,
                        len,
                    },
                    Op::Identity,
                    set.clone(),
                )))
            }
            _ if matches!(f.group(), Group::Ipv4 | Group::Transport) => {
                if !self.ip_ok(at) {
                    return Err(Bail);
                }
                if f.group() == Group::Transport
                    && f != Field::L4Avail
                    && self.w.get(Field::IpIhl) != &Op::Identity
                {
                    return Err(Bail);
                }
                if self.trimmed {
                    match f {
                        Field::IpAvail => {
                            return Ok(Some((
                                Field::IpLen,
                                self.w.get(Field::IpLen).clone(),
                                set.clone(),
                            )))
                        }
                        Field::L4Avail => {
                            return Ok(Some((Field::L4Len, Op::Identity, set.clone())))
                        }
                        Field::IpLenOk => {
                            return Ok(set
                                .contains(1)
                                .then(|| (Field::IpLenOk, Op::Identity, FieldSet::full(1))))
                        }
                        _ => {}
                    }
                }
                plain(f)
            }
            _ => Err(Bail),
        }
    }

    /// The packets of `self.phi` that match the element-view filter `read`: `Ok(None)` for
    /// none; `Err` when the walk cannot tell (the element must see the packet).
    fn refine(&self, read: &Filter, at: IpAnchor) -> Result<Option<Filter>, Bail> {
        match self.refine_rt(read, at)? {
            Refined::None => Ok(None),
            Refined::Exact(f) => Ok(Some(f)),
            Refined::Runtime(..) => Err(Bail),
        }
    }

    /// Like [`PathState::refine`], but a read of values run-time state decided gives the packets
    /// that may match plus the checks to make at run time.
    fn refine_rt(&self, read: &Filter, at: IpAnchor) -> Result<Refined, Bail> {
        if read.is_empty() {
            return Ok(Refined::None);
        }
        if self.empty {
            // No bytes: every field of the packet reads as 0.
            for (f, set) in read.fields() {
                let zero = match f {
                    Field::Paint
                    | Field::PacketType
                    | Field::DstIpAnno
                    | Field::InPort
                    | Field::FixIpSrc => return Err(Bail),
                    _ => set.contains(0),
                };
                if !zero {
                    return Ok(Refined::None);
                }
            }
            return Ok(Refined::Exact(self.phi.clone()));
        }
        let mut phi = self.phi.clone();
        let mut checks = Vec::new();
        for (f, set) in read.fields() {
            let Some((g, op, s)) = self.translate(f, set, at)? else {
                return Ok(Refined::None);
            };
            let act = Action::identity().with(g, op.clone());
            let one = Filter::any().with(g, s);
            match act.refine(&phi, &one) {
                Preimage::Exact(x) => {
                    if x.is_empty() {
                        return Ok(Refined::None);
                    }
                    phi = x;
                }
                Preimage::RuntimeDecision {
                    may_match,
                    checks: cs,
                } => {
                    if may_match.is_empty() {
                        return Ok(Refined::None);
                    }
                    for c in cs {
                        let v = val(c.field, act.get(c.field));
                        if matches!(v, Val::Const(_)) || tuple_of(c.field).is_none() {
                            return Err(Bail);
                        }
                        checks.push((v, c.allowed));
                    }
                    phi = may_match;
                }
            }
        }
        Ok(if checks.is_empty() {
            Refined::Exact(phi)
        } else {
            Refined::Runtime(phi, checks)
        })
    }

    /// Applies a write of element-view field `f`.
    fn write(&mut self, f: Field, op: &Op, at: IpAnchor) -> Result<(), Bail> {
        match f {
            Field::DstIpAnno => {
                self.anno = match op {
                    Op::Set(_) => Anno {
                        src: Field::DstIpAnno,
                        op: op.clone(),
                    },
                    Op::Identity => return Ok(()),
                    _ => Anno {
                        src: self.anno.src,
                        op: self.anno.op.then(op, 32),
                    },
                };
                Ok(())
            }
            Field::Paint | Field::PacketType => {
                let w = self.w.get(f).then(op, f.width());
                self.w.set(f, w);
                Ok(())
            }
            Field::EthDst | Field::EthSrc | Field::EtherType if self.head == 0 => {
                let w = self.w.get(f).then(op, f.width());
                self.w.set(f, w);
                Ok(())
            }
            _ if matches!(f.group(), Group::Ipv4 | Group::Transport)
                && chain::program::frame_location(f, 20).is_some()
                && self.ip_ok(at) =>
            {
                let w = self.w.get(f).then(op, f.width());
                self.w.set(f, w);
                // Nobody keeps the checksum valid through a plain write.
                self.w
                    .set(Field::IpChecksumOk, Op::Stateful { id: UNKNOWN });
                Ok(())
            }
            _ => Err(Bail),
        }
    }

    /// Applies one effect (the packets are those of `self.phi`).
    fn effect(&mut self, e: &Effect, at: IpAnchor) -> Result<(), Bail> {
        if self.empty {
            return Err(Bail);
        }
        elements::model::apply_effect(e, &mut Symbolic { st: self, at })
    }

    fn finish(&self, annos: bool) -> Finish {
        let writes = self
            .w
            .ops()
            .filter(|(f, _)| chain::program::frame_location(*f, 20).is_some())
            .filter(|(f, op)| !matches!(op, Op::Identity) && !matches!(f, Field::Raw { .. }))
            .map(|(f, op)| (f, val(f, op)))
            .collect();
        let v16 = |x: Option<i32>| x.and_then(|v| u16::try_from(v).ok());
        Finish {
            writes,
            head: self.head.max(0) as u16,
            trim: self.trimmed,
            ip_checksum: if self.recompute {
                IpChecksum::Recompute
            } else {
                IpChecksum::Incremental(self.ttl_decs * wire::checksum::TTL_DECREMENT)
            },
            annos: annos.then(|| Annotations {
                mac: v16(self.mac),
                net: v16(self.net),
                transport: self.l4 && self.net == Some(14),
                dst_ip: val(self.anno.src, &self.anno.op),
                paint: val(Field::Paint, self.w.get(Field::Paint)),
                packet_type: val(Field::PacketType, self.w.get(Field::PacketType)),
                hops: self.hops.min(255) as u8,
            }),
            runs: Vec::new(),
            adds: Vec::new(),
            placed: Vec::new(),
        }
    }
}

/// The symbolic packets of a walk state as an [`EffectSink`]: what synthesis knows after each
/// primitive, or [`Bail`] where it cannot follow.
struct Symbolic<'a> {
    st: &'a mut PathState,
    /// Where the element reads its IPv4 header.
    at: IpAnchor,
}

impl EffectSink for Symbolic<'_> {
    type Error = Bail;

    fn write(&mut self, f: Field, op: &Op) -> Result<(), Bail> {
        self.st.write(f, op, self.at)
    }

    fn dec_ttl(&mut self) -> Result<(), Bail> {
        let st = &mut *self.st;
        if !st.ip_ok(self.at) {
            return Err(Bail);
        }
        let w = st.w.get(Field::IpTtl).then(&Op::Add(-1), 8);
        st.w.set(Field::IpTtl, w);
        st.ttl_decs += 1;
        Ok(())
    }

    fn pull(&mut self, n: u16) -> Result<(), Bail> {
        self.st.head += i32::from(n);
        Ok(())
    }

    fn unpull(&mut self, n: u16) -> Result<(), Bail> {
        if self.st.head < i32::from(n) {
            return Err(Bail);
        }
        self.st.head -= i32::from(n);
        Ok(())
    }

    fn push(&mut self, n: u16) -> Result<(), Bail> {
        // The pushed bytes are known only as what overwrites the frame's own (the
        // Ethernet writes that follow need the head back at the frame's start).
        self.unpull(n)
    }

    fn rewrite_macs(&mut self, src: &[u8; 6], dst: &[u8; 6]) -> Result<(), Bail> {
        let st = &mut *self.st;
        // Known only where the MAC header is the frame's first byte and at least 14
        // bytes follow it (cut at the IPv4 length: 14 + that length; else the frame
        // as it arrived).
        let long = st.trimmed || st.phi.get(Field::FrameLen).first().unwrap_or(0) >= 14;
        if st.mac != Some(0) || !long {
            return Err(Bail);
        }
        let mac = |m: &[u8; 6]| u128::from(wire::ethernet::mac_to_u64(m));
        st.w.set(Field::EthDst, Op::Set(mac(dst)));
        st.w.set(Field::EthSrc, Op::Set(mac(src)));
        Ok(())
    }

    fn mark_mac(&mut self) -> Result<(), Bail> {
        self.st.mac = Some(self.st.head);
        Ok(())
    }

    fn mark_network(&mut self, off: u16) -> Result<(), Bail> {
        self.st.net = Some(self.st.head + i32::from(off));
        Ok(())
    }

    fn mark_ip(&mut self) -> Result<(), Bail> {
        if !self.st.ip_ok(self.at) {
            return Err(Bail);
        }
        self.st.net = Some(chain::program::IP_OFFSET as i32);
        self.st.l4 = true;
        Ok(())
    }

    fn packet_type_from_eth(&mut self) -> Result<(), Bail> {
        let st = &mut *self.st;
        if st.head != 0 {
            return Err(Bail);
        }
        let op = match st.w.get(Field::EthDst) {
            Op::Identity => Op::Identity,
            Op::Set(m) => {
                let b = m.to_be_bytes();
                let t = packet::PacketType::from_dst_mac(&b[10..16]);
                Op::Set(elements::model::packet_type_value(t))
            }
            _ => return Err(Bail),
        };
        st.w.set(Field::PacketType, op);
        Ok(())
    }

    fn dst_anno_from_ip_dst(&mut self) -> Result<(), Bail> {
        if !self.st.ip_ok(self.at) {
            return Err(Bail);
        }
        self.st.anno = Anno {
            src: Field::IpDst,
            op: self.st.w.get(Field::IpDst).clone(),
        };
        Ok(())
    }

    fn trim_to_ip_len(&mut self) -> Result<(), Bail> {
        let st = &mut *self.st;
        if !st.ip_ok(self.at) || st.w.get(Field::IpLen) != &Op::Identity {
            return Err(Bail);
        }
        if !st.trimmed {
            if st.phi.get(Field::IpLenOk) != FieldSet::single(1) {
                return Err(Bail);
            }
            st.trimmed = true;
            // Consistent lengths and a header of at least 20 bytes: IpLen ≥ 4·IHL ≥ 20.
            let ihl = st.phi.get(Field::IpIhl);
            if let Some(lo) = ihl.first() {
                if st.w.get(Field::IpIhl) == &Op::Identity && lo >= 5 {
                    st.phi
                        .restrict(Field::IpLen, &FieldSet::range(4 * lo, 0xffff));
                }
            }
        }
        Ok(())
    }

    fn set_ip_checksum(&mut self) -> Result<(), Bail> {
        if !self.st.ip_ok(self.at) {
            return Err(Bail);
        }
        self.st.recompute = true;
        self.st.w.set(Field::IpChecksumOk, Op::Set(1));
        Ok(())
    }
}

/// A rewriter output's effect on one field, over all ways a packet can reach that output.
#[derive(Debug, Clone, PartialEq)]
enum OutputOp {
    Identity,
    Values(FieldSet),
    Unknown,
}

impl OutputOp {
    fn union(self, other: OutputOp) -> OutputOp {
        match (self, other) {
            (OutputOp::Identity, OutputOp::Identity) => OutputOp::Identity,
            (OutputOp::Values(a), OutputOp::Values(b)) => OutputOp::Values(a.union(&b)),
            _ => OutputOp::Unknown,
        }
    }
    fn op(self, reg: u8) -> Op {
        match self {
            OutputOp::Identity => Op::Identity,
            OutputOp::Values(s) if s.len() == 1 => Op::Set(s.first().unwrap_or(0)),
            OutputOp::Values(s) => Op::Pool {
                values: s,
                id: u32::from(reg),
            },
            OutputOp::Unknown => Op::Stateful { id: u32::from(reg) },
        }
    }
}

/// Forward effect of a pattern on (saddr, sport, daddr, dport).
fn forward_ops(p: &Pattern) -> [OutputOp; 4] {
    let addr = |a: Option<std::net::Ipv4Addr>| match a {
        Some(a) => OutputOp::Values(FieldSet::single(u128::from(u32::from(a)))),
        None => OutputOp::Identity,
    };
    let port = |x: Option<u16>| match x {
        Some(x) => OutputOp::Values(FieldSet::single(u128::from(x))),
        None => OutputOp::Identity,
    };
    let mut s = addr(p.saddr);
    let mut sp = port(p.sport);
    match p.vary {
        Vary::None => {}
        Vary::SourceAddr { base, top } => {
            let b = u128::from(u32::from(base));
            s = OutputOp::Values(FieldSet::range(b, b + u128::from(top)));
        }
        Vary::SourcePort { base, top } => {
            let b = u128::from(base);
            sp = OutputOp::Values(FieldSet::range(b, b + u128::from(top)));
        }
    }
    [s, sp, addr(p.daddr), port(p.dport)]
}

/// Whether a packet of `st` can be a reply to a mapping `p` made: its destination must be
/// what `p` wrote into the source, and so on.
fn could_reply(st: &PathState, p: &Pattern) -> bool {
    let f = forward_ops(p);
    let mut read = Filter::any();
    for (field, op) in [
        (Field::IpDst, &f[0]),
        (Field::DstPort, &f[1]),
        (Field::IpSrc, &f[2]),
        (Field::SrcPort, &f[3]),
    ] {
        if let OutputOp::Values(v) = op {
            read = read.with(field, v.clone());
        }
    }
    !matches!(st.refine_rt(&read, IpAnchor::Annotation), Ok(Refined::None))
}

/// Reply effect: a field is kept when the pattern kept its counterpart.
fn reply_ops(p: &Pattern) -> [OutputOp; 4] {
    let f = forward_ops(p);
    let keep = |x: &OutputOp| {
        if *x == OutputOp::Identity {
            OutputOp::Identity
        } else {
            OutputOp::Unknown
        }
    };
    [keep(&f[2]), keep(&f[3]), keep(&f[0]), keep(&f[1])]
}

impl<'a> Walker<'a> {
    fn reason(&mut self, r: &'static str) -> u32 {
        match self.reasons.iter().position(|x| *x == r) {
            Some(i) => i as u32,
            None => {
                self.reasons.push(r);
                self.reasons.len() as u32 - 1
            }
        }
    }

    fn add(&mut self, n: Node, events: Vec<Event>) -> Result<NodeId, Giveup> {
        if self.nodes.len() >= self.budget {
            return Err(Giveup(format!(
                "more than {} synthesized nodes",
                self.budget
            )));
        }
        self.nodes.push(n);
        self.events.push(events);
        Ok(self.nodes.len() as NodeId - 1)
    }

    /// A terminal node, shared by every class that ends the same way.
    fn terminal(&mut self, n: Node, events: Vec<Event>) -> Result<NodeId, Giveup> {
        let key = (n, events);
        if let Some(&id) = self.interned.get(&key) {
            return Ok(id);
        }
        let id = self.add(key.0.clone(), key.1.clone())?;
        self.interned.insert(key, id);
        Ok(id)
    }

    fn name(&self, g: u32) -> String {
        self.ex.element_name(g as usize)
    }

    fn record(&mut self, st: &PathState, end: String) {
        if !self.report {
            return;
        }
        let writes =
            st.w.ops()
                .filter(|(f, op)| !(*f == Field::PacketType && **op == Op::Set(0)))
                .map(|(f, op)| (f, op.clone()))
                .chain(
                    (st.anno.src != Field::DstIpAnno || st.anno.op != Op::Identity)
                        .then(|| (Field::DstIpAnno, st.anno.op.clone())),
                )
                .collect();
        let path = st.path.iter().map(|g| self.name(*g)).collect();
        let stateful = st.stateful.iter().map(|g| self.name(*g)).collect();
        let mut filter = st.phi.clone();
        for z in FRESH_ZERO {
            filter = filter.without(z);
        }
        self.reports.push(ClassReport {
            entry: self.entry.clone(),
            filter,
            writes,
            stateful,
            end,
            path,
        });
    }

    fn handoff(
        &mut self,
        st: &PathState,
        g: u32,
        port: u32,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        if st.empty {
            return Err(Giveup(EMPTY.into()));
        }
        self.handed.push((g, st.phi.get(Field::IpProto)));
        let n = Node::Handoff {
            element: g,
            port,
            finish: st.finish(true),
        };
        let id = self.terminal(n, st.events.clone())?;
        self.record(st, format!("handoff {}", self.name(g)));
        Ok(vec![(st.phi.clone(), id)])
    }

    fn drop(
        &mut self,
        st: &PathState,
        g: u32,
        reason: &'static str,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        let mut ev = st.events.clone();
        let r = self.reason(reason);
        ev.push(Event::Drop(g, r));
        let id = self.terminal(Node::Drop, ev)?;
        self.record(st, format!("drop {reason} at {}", self.name(g)));
        Ok(vec![(st.phi.clone(), id)])
    }

    /// Packets of `st` leave element `g` by output `o`.
    fn follow(
        &mut self,
        mut st: PathState,
        g: u32,
        o: usize,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        let Some((k, t, tp)) = self.ex.edge(g as usize, o) else {
            return self.drop(&st, g, ChainReason::UnconnectedOutput.into());
        };
        st.events.push(Event::Edge(k));
        match self.ex.place(t as usize) {
            Place::Inner => self.element(st, t, tp),
            Place::Link(target) => {
                if st.hops >= MAX_HOPS {
                    return self.drop(&st, t, ChainReason::Loop.into());
                }
                if st.hops >= WALK_HOPS {
                    // A long way round (a forwarding loop): the rest runs naive, which counts
                    // the links the packet crossed (its `hops`).
                    return self.handoff(&st, t, 0);
                }
                st.hops += 1;
                st.events.push(Event::NfOut(self.ex.element_nf(t as usize)));
                st.events
                    .push(Event::NfIn(self.ex.element_nf(target as usize)));
                st.events.push(Event::Arrival(target));
                self.element(st, target, 0)
            }
            Place::Exit => {
                if st.empty {
                    return Err(Giveup(EMPTY.into()));
                }
                st.events.push(Event::NfOut(self.ex.element_nf(t as usize)));
                let n = Node::Exit {
                    element: t,
                    finish: st.finish(false),
                };
                let id = self.terminal(n, st.events.clone())?;
                let exit = self.name(t);
                self.record(&st, format!("exit {exit}"));
                Ok(vec![(st.phi.clone(), id)])
            }
        }
    }

    /// Packets of `st` arrive at element `g`, input `port`.
    fn element(
        &mut self,
        mut st: PathState,
        g: u32,
        port: u32,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        st.path.push(g);
        let el = self.ex.element(g as usize);
        if let Some(rw) = el.rewrite_spec() {
            return self.rewriter(st, g, port, rw);
        }
        if let Some(lk) = el.route_table() {
            if lk.routes().len() > LAZY_AT {
                if let Some(r) = self.lookup(&st, g, port, el, lk)? {
                    return Ok(r);
                }
            }
        }
        let Some(model) = el.model() else {
            return self.handoff(&st, g, port);
        };
        self.cases(st, g, port, &model)
    }

    /// A long route table becomes one run-time lookup (`Node::Lookup`) instead of a class
    /// per route: the routes with the same output and gateway share a branch. `None` when
    /// the looked-up address is known here (the cases then pick the route statically).
    fn lookup(
        &mut self,
        st: &PathState,
        g: u32,
        port: u32,
        el: &dyn Element,
        lk: &dyn RouteTable,
    ) -> Result<Option<Vec<(Filter, NodeId)>>, Giveup> {
        let key = val(st.anno.src, &st.anno.op);
        // The destination as it arrived, or as a rewriter before made it.
        let known = st.anno.src == Field::IpDst
            && matches!(
                key,
                Val::Orig(Field::IpDst, 0) | Val::Reg(_, Tuple::Daddr, 0)
            );
        if st.empty || !known {
            return Ok(None);
        }
        let Some(model) = el.model() else {
            return Ok(None);
        };
        let mut base = st.clone();
        base.events = Vec::new();
        let mut groups: Vec<(usize, u32)> = Vec::new();
        let mut route_branch = Vec::with_capacity(lk.routes().len());
        for r in lk.routes() {
            let hop = (r.port, r.gw.map_or(0, u32::from));
            let b = match groups.iter().position(|h| *h == hop) {
                Some(b) => b,
                None => {
                    groups.push(hop);
                    groups.len() - 1
                }
            };
            route_branch.push(b as u32);
        }
        let mut branches = Vec::with_capacity(groups.len());
        for &(out, gw) in &groups {
            let mut case = elements::model::Case::new(Filter::any(), Outcome::Out(out));
            if gw != 0 {
                case = case.effect(Effect::Write(Field::DstIpAnno, Op::Set(u128::from(gw))));
            }
            let leaves = self.take_case(base.clone(), g, port, &model, &case)?;
            branches.push(self.classify(leaves)?);
        }
        let Some(no_route) = model.cases.last() else {
            return Ok(None);
        };
        let leaves = self.take_case(base, g, port, &model, no_route)?;
        let miss = self.classify(leaves)?;
        let n = Node::Lookup {
            element: g,
            key,
            route_branch,
            branches,
            miss,
        };
        let id = self.add(n, st.events.clone())?;
        Ok(Some(vec![(st.phi.clone(), id)]))
    }

    fn cases(
        &mut self,
        st: PathState,
        g: u32,
        port: u32,
        model: &Model,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        self.cases_from(st, g, port, model, 0)
    }

    /// First-match over `model.cases[i..]` for the packets of `st`.
    fn cases_from(
        &mut self,
        st: PathState,
        g: u32,
        port: u32,
        model: &Model,
        i: usize,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        let mut leaves = Vec::new();
        let mut rest = vec![st.phi.clone()];
        // Long rule lists only: other elements' cases rely on the earlier ones being
        // subtracted (a valid IPv4 header is what passed the checks before).
        let lazy = model.cases.len() > LAZY_AT;
        for (ci, case) in model.cases.iter().enumerate().skip(i) {
            let mut next = Vec::new();
            for r in rest {
                let sr = PathState {
                    phi: r.clone(),
                    ..st.clone()
                };
                let m = match sr.refine_rt(&case.filter, model.ip_at) {
                    Err(Bail) => {
                        leaves.extend(self.handoff(&sr, g, port)?);
                        continue;
                    }
                    Ok(Refined::None) => {
                        next.push(r);
                        continue;
                    }
                    Ok(Refined::Exact(m)) => m,
                    Ok(Refined::Runtime(..))
                        if !self.checks || (i == 0 && st.checked >= MAX_CHECKED) =>
                    {
                        leaves.extend(self.handoff(&sr, g, port)?);
                        continue;
                    }
                    Ok(Refined::Runtime(may, checks)) => {
                        // Outside `may` the case cannot match; inside, run time decides.
                        next.extend(r.difference(&may));
                        let mut sm = PathState {
                            phi: may.clone(),
                            events: Vec::new(),
                            ..st.clone()
                        };
                        // The recursive calls (i > 0) are this element's, already counted.
                        if i == 0 {
                            sm.checked = st.checked + 1;
                        }
                        let yes = self.take_case(sm.clone(), g, port, model, case)?;
                        let yes = self.classify(yes)?;
                        let no = self.cases_from(sm, g, port, model, ci + 1)?;
                        let no = self.classify(no)?;
                        let tests = checks
                            .into_iter()
                            .map(|(v, set)| (v, set.intervals().collect()))
                            .collect();
                        let n = Node::Check { tests, yes, no };
                        let id = self.add(n, st.events.clone())?;
                        leaves.push((may, id));
                        continue;
                    }
                };
                if !lazy {
                    next.extend(r.difference(&m));
                } else if !r.is_subset(&m) {
                    // Lazy subtraction: the later cases see these packets too, after this
                    // one's classes.
                    next.push(r);
                }
                let before = PathState {
                    phi: m.clone(),
                    ..st.clone()
                };
                if lazy {
                    // One class per case here, the case's own classes in a node of their
                    // own: the classifier stays the size of the rule list, not of its
                    // product with everything after it.
                    let sub = self.take_case(before, g, port, model, case)?;
                    // Packets get here only from this case's class: what it already says
                    // need not be tested again.
                    let sub = sub.into_iter().map(|(f, n)| (beyond(&f, &m), n)).collect();
                    let id = self.classify(sub)?;
                    self.lazy_ids.insert(id);
                    leaves.push((m, id));
                    continue;
                }
                leaves.extend(self.take_case(before, g, port, model, case)?);
            }
            rest = next;
            if rest.is_empty() {
                break;
            }
        }
        for r in rest {
            // The model does not say: let the element decide.
            let sr = PathState {
                phi: r,
                ..st.clone()
            };
            leaves.extend(self.handoff(&sr, g, port)?);
        }
        Ok(leaves)
    }

    fn take_case(
        &mut self,
        before: PathState,
        g: u32,
        port: u32,
        model: &Model,
        case: &elements::model::Case,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        if case.outcome == Outcome::Runtime {
            return self.handoff(&before, g, port);
        }
        let mut leaves = Vec::new();
        let mut st = before.clone();
        for e in &case.effects {
            if let Effect::Pull(n) = e {
                // Strip pulls at most what there is: short frames are the element's business.
                let need = FieldSet::range(u128::from(*n), 0xffff);
                match st.refine(&Filter::any().with(Field::FrameLen, need), model.ip_at) {
                    Ok(Some(ok)) => {
                        for short in st.phi.difference(&ok) {
                            // Strip pulls what there is: the data is empty afterwards.
                            let mut s = PathState {
                                phi: short,
                                ..st.clone()
                            };
                            if s.trimmed || s.head != 0 || case.effects.len() != 1 {
                                let b = PathState {
                                    phi: s.phi,
                                    ..before.clone()
                                };
                                leaves.extend(self.handoff(&b, g, port)?);
                                continue;
                            }
                            s.empty = true;
                            s.head += i32::from(*n);
                            for name in &case.stats {
                                let r = self.reason(name);
                                s.events.push(Event::Stat(g, r));
                            }
                            let b = PathState {
                                phi: s.phi.clone(),
                                ..before.clone()
                            };
                            let r = match &case.outcome {
                                Outcome::Out(o) => self.follow(s, g, *o),
                                _ => Err(Giveup(EMPTY.into())),
                            };
                            match r {
                                Ok(l) => leaves.extend(l),
                                Err(Giveup(why)) if why == EMPTY => {
                                    leaves.extend(self.handoff(&b, g, port)?)
                                }
                                Err(e) => return Err(e),
                            }
                        }
                        st.phi = ok;
                    }
                    Ok(None) => {
                        st.phi = Filter::none();
                        let mut s = before.clone();
                        s.empty = true;
                        s.head += i32::from(*n);
                        if case.effects.len() != 1 || s.head != i32::from(*n) {
                            return self.handoff(&before, g, port);
                        }
                        for name in &case.stats {
                            let r = self.reason(name);
                            s.events.push(Event::Stat(g, r));
                        }
                        let r = match &case.outcome {
                            Outcome::Out(o) => self.follow(s, g, *o),
                            _ => Err(Giveup(EMPTY.into())),
                        };
                        return match r {
                            Err(Giveup(why)) if why == EMPTY => self.handoff(&before, g, port),
                            r => r,
                        };
                    }
                    _ => return self.handoff(&before, g, port),
                }
            }
            if st.effect(e, model.ip_at).is_err() {
                let b = PathState {
                    phi: st.phi.clone(),
                    ..before.clone()
                };
                leaves.extend(self.handoff(&b, g, port)?);
                return Ok(leaves);
            }
        }
        for s in &case.stats {
            let r = self.reason(s);
            st.events.push(Event::Stat(g, r));
        }
        for s in case.byte_stats.iter().filter(|_| !before.empty) {
            // The length as the element received it: before this case's effects (an empty
            // packet adds nothing).
            let name = self.reason(s);
            st.events.push(Event::StatBytes {
                element: g,
                name,
                head: before.head.max(0) as u16,
                trimmed: before.trimmed,
            });
        }
        match &case.outcome {
            Outcome::Out(o) => leaves.extend(self.follow(st, g, *o)?),
            Outcome::Drop(reason) => leaves.extend(self.drop(&st, g, reason)?),
            Outcome::Copies(n) => leaves.extend(self.fork(st, g, port, *n)?),
            Outcome::Runtime => {}
        }
        Ok(leaves)
    }

    /// A `Tee`: a copy of the packets of `st` takes each of the `n` outputs, output 0 first.
    fn fork(
        &mut self,
        st: PathState,
        g: u32,
        port: u32,
        n: usize,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        if st.empty || n == 0 {
            return self.handoff(&st, g, port);
        }
        let mut branches = Vec::with_capacity(n);
        for o in 0..n {
            let s = PathState {
                events: Vec::new(),
                ..st.clone()
            };
            let leaves = self.follow(s, g, o)?;
            branches.push(self.classify(leaves)?);
        }
        let mut events = st.events.clone();
        let nf = self.ex.element_nf(g as usize);
        events.extend(std::iter::repeat_n(Event::Created(nf), n - 1));
        let id = self.add(Node::Fork { branches }, events)?;
        Ok(vec![(st.phi.clone(), id)])
    }

    /// A stateful rewriter: a run-time decision inside the class.
    ///
    /// A rewriter that keeps the ports of TCP segments cut before their checksum's end
    /// (Click's `IPRewriter` and `TCPRewriter`: fewer than
    /// [`elements::rewriter::TCP_REWRITE_MIN`] transport bytes) writes, in a class where TCP
    /// is possible, the ports its decision gives (the register) rather than a value of its
    /// pattern: the decision holds the segment's own ports for such a segment.
    fn rewriter(
        &mut self,
        st: PathState,
        g: u32,
        port: u32,
        rw: &dyn RewriteSpec,
    ) -> Result<Vec<(Filter, NodeId)>, Giveup> {
        if st.empty {
            return Err(Giveup(EMPTY.into()));
        }
        let protos = st.phi.get(Field::IpProto);
        self.seen
            .entry((g, port))
            .or_default()
            .extend(protos.intervals().flat_map(|(a, b)| a..=b).map(|p| p as u8));
        // A class meets each stateful element at most once: a packet that comes back to one
        // (a forwarding loop through NATs) runs naive from there.
        if st.next_reg == u8::MAX
            || st.stateful.contains(&g)
            || [
                Field::IpProto,
                Field::IpIhl,
                Field::IpFragOffset,
                Field::IpLen,
                Field::TcpFlags,
            ]
            .iter()
            .any(|f| st.w.get(*f) != &Op::Identity)
        {
            return self.handoff(&st, g, port);
        }
        let has_ip = st.net == Some(14);
        let reg = st.next_reg;
        let short_keeps_ports =
            rw.short_tcp_keeps_ports() && protos.contains(u128::from(wire::IpProtocol::TCP));
        let map_ids: BTreeSet<u8> = protos
            .intervals()
            .flat_map(|(a, b)| a..=b)
            .map(|p| rw.map_id(p as u8))
            .collect();
        // Which inputs' specifications can have made a mapping this packet may hit.
        let contributes = |s: usize| -> bool {
            match &self.protos {
                None => true,
                Some(m) => m
                    .get(&(g, s as u32))
                    .is_some_and(|ps| ps.iter().any(|p| map_ids.contains(&rw.map_id(*p)))),
            }
        };
        let mut outs: BTreeMap<usize, [OutputOp; 4]> = BTreeMap::new();
        let mut add = |o: usize, ops: [OutputOp; 4]| {
            let e = outs.remove(&o);
            let v = match e {
                None => ops,
                Some(old) => {
                    let [a, b, c, d] = old;
                    let [x, y, z, w] = ops;
                    [a.union(x), b.union(y), c.union(z), d.union(w)]
                }
            };
            outs.insert(o, v);
        };
        let mut pass = BTreeSet::new();
        for (s, spec) in rw.specs().iter().enumerate() {
            if s == port as usize {
                if let InputSpec::Pass(o) = spec {
                    pass.insert(*o);
                }
            }
            if !contributes(s) {
                continue;
            }
            match spec {
                InputSpec::Drop | InputSpec::Pass(_) => {}
                InputSpec::Keep { foutput, routput } => {
                    add(
                        *foutput,
                        [
                            OutputOp::Identity,
                            OutputOp::Identity,
                            OutputOp::Identity,
                            OutputOp::Identity,
                        ],
                    );
                    add(
                        *routput,
                        [
                            OutputOp::Identity,
                            OutputOp::Identity,
                            OutputOp::Identity,
                            OutputOp::Identity,
                        ],
                    );
                }
                InputSpec::Pattern {
                    pattern,
                    foutput,
                    routput,
                } => {
                    add(*foutput, forward_ops(pattern));
                    if could_reply(&st, pattern) {
                        add(*routput, reply_ops(pattern));
                    }
                }
                InputSpec::Mapper { patterns, .. } => {
                    for (p, fo, ro) in patterns {
                        add(*fo, forward_ops(p));
                        if could_reply(&st, p) {
                            add(*ro, reply_ops(p));
                        }
                    }
                }
            }
        }
        let tuple = [
            val(Field::IpSrc, st.w.get(Field::IpSrc)),
            val(Field::SrcPort, st.w.get(Field::SrcPort)),
            val(Field::IpDst, st.w.get(Field::IpDst)),
            val(Field::DstPort, st.w.get(Field::DstPort)),
        ];
        let mut branches = Vec::new();
        let mut base = st.clone();
        base.stateful.push(g);
        base.events = Vec::new();
        base.next_reg = reg + 1;
        if has_ip {
            for (o, ops) in outs {
                let mut b = base.clone();
                for (f, fop) in Field::TUPLE.into_iter().zip(ops) {
                    let fop = match fop {
                        OutputOp::Values(_)
                            if short_keeps_ports
                                && matches!(f, Field::SrcPort | Field::DstPort) =>
                        {
                            OutputOp::Unknown
                        }
                        fop => fop,
                    };
                    let w = b.w.get(f).then(&fop.op(reg), f.width());
                    b.w.set(f, w);
                }
                if rw.dst_anno() {
                    b.anno = Anno {
                        src: Field::IpDst,
                        op: b.w.get(Field::IpDst).clone(),
                    };
                }
                let leaves = self.follow(b, g, o)?;
                let child = self.classify(leaves)?;
                branches.push((Branch::Rewrite(o as u32), child));
            }
            for o in pass {
                let leaves = self.follow(base.clone(), g, o)?;
                let child = self.classify(leaves)?;
                branches.push((Branch::Pass(o as u32), child));
            }
        } else {
            for o in pass {
                let leaves = self.follow(base.clone(), g, o)?;
                let child = self.classify(leaves)?;
                branches.push((Branch::Pass(o as u32), child));
            }
        }
        let n = Node::Rewrite {
            element: g,
            port,
            reg,
            tuple,
            has_ip,
            trimmed: st.trimmed,
            dst_anno: rw.dst_anno(),
            branches,
        };
        let id = self.add(n, st.events.clone())?;
        Ok(vec![(st.phi.clone(), id)])
    }

    /// A node choosing among `leaves` (disjoint filters) at run time; merges classes that
    /// end the same way and differ in one field.
    fn classify(&mut self, leaves: Vec<(Filter, NodeId)>) -> Result<NodeId, Giveup> {
        if leaves.iter().any(|(_, n)| self.lazy_ids.contains(n)) {
            return self.classify_ordered(leaves);
        }
        let mut by_node: BTreeMap<NodeId, Vec<Filter>> = BTreeMap::new();
        for (f, n) in leaves {
            if !f.is_empty() {
                by_node.entry(n).or_default().push(f);
            }
        }
        if by_node.len() == 1 {
            if let Some((&n, _)) = by_node.iter().next() {
                return Ok(n);
            }
        }
        let mut classes = Vec::new();
        for (n, fs) in by_node {
            for f in merge(fs) {
                classes.push((f, n));
            }
        }
        let id = self.add(Node::Classify(Vec::new()), Vec::new())?;
        self.pending.push((id, classes));
        Ok(id)
    }
}

impl Walker<'_> {
    /// [`Walker::classify`] for ordered classes: the leaves stay in the walk's order (the
    /// first-match order), and only neighbours with the same next node merge.
    fn classify_ordered(&mut self, leaves: Vec<(Filter, NodeId)>) -> Result<NodeId, Giveup> {
        let mut classes: Vec<(Filter, NodeId)> = Vec::new();
        for (f, n) in leaves {
            if f.is_empty() {
                continue;
            }
            if let Some((last, ln)) = classes.last_mut() {
                if *ln == n {
                    if f.is_subset(last) {
                        continue;
                    }
                    if let Some(m) = union_box(last, &f) {
                        *last = m;
                        continue;
                    }
                }
            }
            classes.push((f, n));
        }
        let first = classes.first().map(|(_, n)| *n);
        if let Some(n) = first {
            if classes.iter().all(|(_, m)| *m == n) {
                return Ok(n);
            }
        }
        let id = self.add(Node::Classify(Vec::new()), Vec::new())?;
        self.pending.push((id, classes));
        self.ordered_nodes.push(id);
        Ok(id)
    }
}

/// `f` without the fields whose sets hold all of `given`'s: for packets known to be in
/// `given`, the same set of packets.
fn beyond(f: &Filter, given: &Filter) -> Filter {
    let implied: Vec<Field> = f
        .fields()
        .filter(|(x, set)| given.get(*x).is_subset(set))
        .map(|(x, _)| x)
        .collect();
    implied.into_iter().fold(f.clone(), |acc, x| acc.without(x))
}

/// Merges boxes that differ in exactly one field (their union is a box).
fn merge(mut fs: Vec<Filter>) -> Vec<Filter> {
    let mut changed = true;
    let mut rounds = 0;
    while changed && rounds < 8 {
        changed = false;
        rounds += 1;
        let mut out: Vec<Filter> = Vec::new();
        'next: for f in fs {
            for o in out.iter_mut() {
                if let Some(m) = union_box(o, &f) {
                    *o = m;
                    changed = true;
                    continue 'next;
                }
            }
            out.push(f);
        }
        fs = out;
    }
    fs
}

/// The union of two boxes if it is a box (they differ in at most one field).
fn union_box(a: &Filter, b: &Filter) -> Option<Filter> {
    let fields: BTreeSet<Field> = a
        .fields()
        .map(|(f, _)| f)
        .chain(b.fields().map(|(f, _)| f))
        .collect();
    let mut diff = None;
    for f in fields {
        let (x, y) = (a.get(f), b.get(f));
        if x != y {
            if diff.is_some() {
                return None;
            }
            diff = Some((f, x.union(&y)));
        }
    }
    let mut m = a.clone();
    if let Some((f, s)) = diff {
        m = m.without(f).with(f, s);
    }
    Some(m)
}

/// Elements reachable from `g` (outputs and links), as (rewriter element, input port) pairs.
fn reachable_rewriter_inputs(ex: &Executor, g: u32) -> Vec<(u32, u32)> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![g];
    let mut out = Vec::new();
    while let Some(e) = stack.pop() {
        if !seen.insert(e) {
            continue;
        }
        if let Place::Link(t) = ex.place(e as usize) {
            stack.push(t);
        }
        for o in 0..ex.outputs(e as usize) {
            if let Some((_, t, tp)) = ex.edge(e as usize, o) {
                if ex.element(t as usize).rewrite_spec().is_some() {
                    out.push((t, tp));
                }
                stack.push(t);
            }
        }
    }
    out
}

fn all_protos() -> BTreeSet<u8> {
    (0..=255u8).collect()
}

impl Walker<'_> {
    /// Walks entry element `g` (named `name`); returns its segment.
    fn entry(&mut self, g: u32, name: &str) -> Result<Segment, Giveup> {
        let (nodes, reports) = (self.nodes.len(), self.reports.len());
        self.checks = true;
        self.budget = nodes + ENTRY_BUDGET;
        match self.entry_once(g, name) {
            Err(Giveup(_)) => {
                // Too many run-time checks: hand such reads to their elements instead.
                self.nodes.truncate(nodes);
                self.events.truncate(nodes);
                self.reports.truncate(reports);
                self.interned.retain(|_, id| (*id as usize) < nodes);
                self.checks = false;
                self.budget = nodes + NODE_BUDGET;
                self.entry_once(g, name)
            }
            ok => ok,
        }
    }

    fn entry_once(&mut self, g: u32, name: &str) -> Result<Segment, Giveup> {
        self.entry = name.to_string();
        self.pending.clear();
        self.ordered_nodes.clear();
        let leaves = self.element(PathState::start(), g, 0)?;
        let root = self.classify(leaves)?;
        let mut fields: Vec<Field> = Vec::new();
        for (_, classes) in &self.pending {
            for (f, _) in classes {
                for (x, _) in f.fields() {
                    if !fields.contains(&x) {
                        fields.push(x);
                    }
                }
            }
        }
        for (id, classes) in std::mem::take(&mut self.pending) {
            let cs = classes
                .into_iter()
                .map(|(f, node)| (implied_dropped(&f), node))
                .map(|(f, node)| Class {
                    tests: f
                        .fields()
                        .map(|(x, set)| {
                            let i = fields.iter().position(|y| *y == x).unwrap_or(0) as u16;
                            (i, set.intervals().collect())
                        })
                        .collect(),
                    node,
                    hits: 0,
                })
                .collect();
            if let Some(n) = self.nodes.get_mut(id as usize) {
                *n = Node::Classify(cs);
            }
        }
        Ok(Segment {
            fields,
            getters: Vec::new(),
            root,
            ordered: std::mem::take(&mut self.ordered_nodes),
        })
    }
}

/// Synthesizes the chain `ex` runs: a program for every entry element that can be modelled,
/// plus a report of its traffic classes.
pub fn synthesize(ex: &Executor) -> Synthesis {
    let entries = ex.entry_elements();
    let mk = |protos, report| Walker {
        ex,
        nodes: Vec::new(),
        events: Vec::new(),
        reasons: Vec::new(),
        interned: HashMap::new(),
        reports: Vec::new(),
        entry: String::new(),
        protos,
        seen: HashMap::new(),
        handed: Vec::new(),
        budget: NODE_BUDGET,
        report,
        checks: true,
        pending: Vec::new(),
        lazy_ids: HashSet::new(),
        ordered_nodes: Vec::new(),
    };
    // Pass 1: which protocols reach each rewriter input (sound: no precision needed).
    let mut w1 = mk(None, false);
    let mut protos: HashMap<(u32, u32), BTreeSet<u8>> = HashMap::new();
    let mut naive_from: Vec<u32> = ex
        .dump_sources()
        .iter()
        .map(|(_, (n, l), _)| ex.global(*n, *l))
        .collect();
    for (ep, g) in &entries {
        if w1.entry(*g, &ep.to_string()).is_err() {
            naive_from.push(*g);
        }
    }
    for (k, v) in std::mem::take(&mut w1.seen) {
        protos.entry(k).or_default().extend(v);
    }
    for (g, ps) in std::mem::take(&mut w1.handed) {
        let ps: BTreeSet<u8> = ps
            .intervals()
            .flat_map(|(a, b)| a..=b)
            .map(|p| p as u8)
            .collect();
        for k in reachable_rewriter_inputs(ex, g) {
            protos.entry(k).or_default().extend(ps.iter().copied());
        }
    }
    for g in naive_from {
        for k in reachable_rewriter_inputs(ex, g) {
            protos.entry(k).or_default().extend(all_protos());
        }
    }
    // Pass 2: the program.
    let mut w = mk(Some(protos), true);
    let mut starts = HashMap::new();
    let mut naive_entries = Vec::new();
    for (ep, g) in &entries {
        let before = w.reports.len();
        match w.entry(*g, &ep.to_string()) {
            Ok(seg) => {
                starts.insert(*g, seg);
            }
            Err(Giveup(why)) => {
                w.reports.truncate(before);
                naive_entries.push(format!("{ep}: {why}"));
            }
        }
    }
    let mut handoffs = BTreeMap::new();
    for r in &w.reports {
        if let Some(e) = r.end.strip_prefix("handoff ") {
            *handoffs.entry(e.to_string()).or_default() += 1;
        }
    }
    Synthesis {
        program: Program {
            starts,
            nodes: w.nodes,
            events: w.events,
            reasons: w.reasons,
        },
        classes: w.reports,
        naive_entries,
        handoffs,
    }
}

/// `f` without the tests every real frame in it passes anyway (the derived fields are
/// functions of the bytes: a valid checksum needs a header of 20 bytes or more; consistent
/// lengths put the IP total length inside the data; 20 bytes of IPv4 need a 34-byte frame).
/// Classes then overlap only on points no frame has, so their order still does not matter.
fn implied_dropped(f: &Filter) -> Filter {
    let at_least = |s: &FieldSet, max: u128| -> Option<u128> {
        let mut it = s.intervals();
        match (it.next(), it.next()) {
            (Some((lo, hi)), None) if hi == max => Some(lo),
            _ => None,
        }
    };
    let mut out = f.clone();
    for z in FRESH_ZERO {
        // Constrained to 0 from the start: always true of a real frame.
        out = out.without(z);
    }
    let one = FieldSet::single(1);
    let csum_ok = f.get(Field::IpChecksumOk) == one;
    let len_ok = f.get(Field::IpLenOk) == one;
    if csum_ok && FieldSet::range(5, 15).is_subset(&f.get(Field::IpIhl)) {
        out = out.without(Field::IpIhl);
    }
    let min_len = f.get(Field::IpLen).first().unwrap_or(0);
    let mut avail_20 = false;
    if let Some(a) = at_least(&f.get(Field::IpAvail), 0xffff) {
        if len_ok && a <= min_len {
            out = out.without(Field::IpAvail);
            avail_20 = min_len >= 20;
        } else {
            avail_20 = a >= 20;
        }
    } else if len_ok && min_len >= 20 {
        avail_20 = true;
    }
    if let Some(a) = at_least(&f.get(Field::FrameLen), 0xffff) {
        if avail_20 && a <= 34 {
            out = out.without(Field::FrameLen);
        }
    }
    out
}
