//! A synthesized chain as the executor runs it: per entry element, one classification of
//! the packet as it arrived, then a small program per traffic class (early drop, or one
//! write per field with checksums fixed once, or a stateful rewriter's decision followed by
//! more of the same).
//!
//! The `synth` crate builds a [`Program`]; [`crate::Executor::install`] makes the executor
//! run it. Everything a class does to counters is listed in its nodes' [`Event`]s and
//! applied in bulk, so per-element counters come out exactly as the naive run's.

use elements::model::{Base, Field};
use std::collections::HashMap;

/// Index of a node in [`Program::nodes`].
pub type NodeId = u32;

/// Something a class does to the executor's counters each time a packet takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// A packet crossed the connection with this edge index (global output port).
    Edge(u32),
    /// A packet arrived at this (global) element without a counted edge (a link crossing).
    Arrival(u32),
    /// A packet left NF `nf` by a link.
    NfOut(u32),
    /// A packet entered NF `nf` by a link.
    NfIn(u32),
    /// Element `element` dropped a packet under `reason` (index into [`Program::reasons`]).
    Drop(u32, u32),
    /// Element `element` added one to its counter named [`Program::reasons`]`[name]`.
    Stat(u32, u32),
    /// NF `nf` created a packet (a `Tee`'s copy).
    Created(u32),
    /// Element `element` added the packet's length there to its counter `name`: the frame's
    /// length as it arrived minus `head` bytes pulled, or, when the packet was cut at its
    /// IPv4 length (`trimmed`), 14 + that length minus `head`.
    StatBytes {
        /// The (global) element.
        element: u32,
        /// Index into [`Program::reasons`].
        name: u32,
        /// Bytes pulled off the front.
        head: u16,
        /// Whether the packet was cut at its IPv4 total length.
        trimmed: bool,
    },
}

/// Where a value written into the packet comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Val {
    /// A constant.
    Const(u128),
    /// The field's value in the packet as it arrived, plus a constant (modulo the width).
    Orig(Field, i128),
    /// A component of the flow a stateful rewriter decided (register `reg`), plus a constant.
    Reg(u8, Tuple, i128),
}

/// A component of a flow identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tuple {
    /// Source address.
    Saddr,
    /// Source port.
    Sport,
    /// Destination address.
    Daddr,
    /// Destination port.
    Dport,
}

impl Tuple {
    /// The component's position in (saddr, sport, daddr, dport).
    pub fn index(self) -> usize {
        match self {
            Tuple::Saddr => 0,
            Tuple::Sport => 1,
            Tuple::Daddr => 2,
            Tuple::Dport => 3,
        }
    }
}

/// How the IPv4 header checksum is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpChecksum {
    /// Incrementally (RFC 1624 eqn. 3): the constant sum of the static steps' operands
    /// ([`wire::checksum::TTL_DECREMENT`] per TTL decrement) plus whatever rewriters added at run time.
    Incremental(u32),
    /// Recomputed over the final header.
    Recompute,
}

/// How a packet is turned into what the original chain would hold at the same point: the
/// writes (each field once), the layout (head offset, trimmed to the IP length), checksums
/// (once) and, when an element is going to see it, the annotations.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finish {
    /// Byte writes: field (in the coordinates of the frame as it arrived) and value.
    pub writes: Vec<(Field, Val)>,
    /// Bytes pulled off the front of the frame as it arrived.
    pub head: u16,
    /// Whether the packet is cut at the end of the IPv4 total length.
    pub trim: bool,
    /// IPv4 checksum.
    pub ip_checksum: IpChecksum,
    /// Annotations to set (only when the packet is handed to an element).
    pub annos: Option<Annotations>,
    /// The constant writes at fixed offsets, pre-rendered as byte runs (offset, bytes) by
    /// [`Finish::prepare`]; `writes` then holds only the others.
    pub runs: Vec<(u16, Vec<u8>)>,
    /// The 8-bit fields at fixed offsets whose value is the old one plus a constant (a TTL
    /// decrement), as (offset, byte added) by [`Finish::prepare`].
    pub adds: Vec<(u16, u8)>,
    /// The other writes, each with where its bytes are, by [`Finish::prepare`] (so
    /// finishing a packet does not look the layout up per write).
    pub placed: Vec<PlacedWrite>,
}

/// A write of [`Finish::writes`] with its place in the frame as it arrived.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlacedWrite {
    /// The field written.
    pub field: Field,
    /// Its value.
    pub val: Val,
    /// Whether `off` counts from the transport header (after the IPv4 header, whose length
    /// varies) rather than from the frame's start.
    pub transport: bool,
    /// Byte offset.
    pub off: u16,
    /// Bytes.
    pub len: u8,
}

impl PlacedWrite {
    /// Offset and length in a frame whose IPv4 header is `hl` bytes long.
    #[inline(always)]
    pub fn at(&self, hl: usize) -> (usize, usize) {
        let base = if self.transport { IP_OFFSET + hl } else { 0 };
        (base + usize::from(self.off), usize::from(self.len))
    }
}

impl Finish {
    /// Moves the constant writes at fixed offsets (Ethernet and IPv4 fields) into byte runs,
    /// merging neighbours, so that finishing a packet copies them in one go, and the 8-bit
    /// ones that add a constant into byte additions.
    pub fn prepare(&mut self) {
        let mut bytes: Vec<(usize, u8)> = Vec::new();
        let mut adds: Vec<(u16, u8)> = Vec::new();
        self.writes.retain(|(f, v)| {
            let fixed = !matches!(
                f,
                Field::SrcPort
                    | Field::DstPort
                    | Field::TcpFlags
                    | Field::IcmpType
                    | Field::IcmpCode
            );
            match (v, frame_location(*f, 20)) {
                (Val::Const(c), Some((off, len))) if fixed => {
                    for i in 0..len {
                        bytes.push((off + i, (c >> (8 * (len - 1 - i))) as u8));
                    }
                    false
                }
                (Val::Orig(g, add), Some((off, 1))) if fixed && g == f && f.width() == 8 => {
                    adds.push((off as u16, *add as u8));
                    false
                }
                _ => true,
            }
        });
        self.adds.extend(adds);
        self.placed = self
            .writes
            .iter()
            .filter_map(|(f, v)| {
                let l = f.layout().filter(|l| l.whole_bytes())?;
                let (transport, off) = match l.base {
                    Base::Frame => (false, l.offset),
                    Base::Network => (false, IP_OFFSET as u16 + l.offset),
                    Base::Transport => (true, l.offset),
                };
                Some(PlacedWrite {
                    field: *f,
                    val: *v,
                    transport,
                    off,
                    len: l.len,
                })
            })
            .collect();
        bytes.sort();
        for (off, b) in bytes {
            match self.runs.last_mut() {
                Some((o, v)) if usize::from(*o) + v.len() == off => v.push(b),
                _ => self.runs.push((off as u16, vec![b])),
            }
        }
    }
}

/// Annotations of a packet handed to an element, offsets in frame coordinates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Annotations {
    /// MAC header.
    pub mac: Option<u16>,
    /// Network header.
    pub net: Option<u16>,
    /// Transport header follows the network header (IPv4 header length).
    pub transport: bool,
    /// Destination-IP annotation.
    pub dst_ip: Val,
    /// Paint.
    pub paint: Val,
    /// Packet type.
    pub packet_type: Val,
    /// Links crossed so far (the `loop` limit counts them).
    pub hops: u8,
}

/// What follows a stateful rewriter's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Branch {
    /// The packet was rewritten and goes to this output.
    Rewrite(u32),
    /// The packet passes unchanged to this output.
    Pass(u32),
}

/// One step of a class program.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    /// The packet falls in the first class that contains it (classes are disjoint and cover
    /// every packet that can reach the node).
    Classify(Vec<Class>),
    /// The packet leaves the chain by exit element `element` after `finish`.
    Exit {
        /// The exit's (global) `ToDevice`/`ToDump` element.
        element: u32,
        /// How the packet is finished.
        finish: Finish,
    },
    /// The packet is dropped (its writes skipped: early discard). The drop is one of the
    /// node's events.
    Drop,
    /// The packet is handed to element `element`, input `port`, and runs naive from there.
    Handoff {
        /// The (global) element.
        element: u32,
        /// Its input port.
        port: u32,
        /// How the packet is made what that element would see.
        finish: Finish,
    },
    /// A read of values run-time state decided (SNF limitation 2, kept inside the class):
    /// `yes` when every value lies in its intervals, else `no`.
    Check {
        /// The values and their allowed closed intervals.
        tests: Vec<(Val, Vec<(u128, u128)>)>,
        /// Next node when all tests pass.
        yes: NodeId,
        /// Next node otherwise.
        no: NodeId,
    },
    /// A route lookup at run time (a long `LookupIPRoute`-family table, one step instead of
    /// a class per route): `key` (the destination annotation as the element sees it) is
    /// looked up in element `element`'s table; route `r` continues at
    /// `branches[route_branch[r]]`, no route at `miss`.
    Lookup {
        /// The (global) lookup element (an `elements::ip::IPLookup`).
        element: u32,
        /// Where the looked-up address comes from.
        key: Val,
        /// Per route (in the element's configuration order): its branch.
        route_branch: Vec<u32>,
        /// The first node of each branch (routes with the same output and gateway share one).
        branches: Vec<NodeId>,
        /// Where packets with no route go.
        miss: NodeId,
    },
    /// The packet is copied (`Tee`): a copy takes each branch, branch 0 first and to
    /// completion, then branch 1, and so on (the copies are the node's `Created` events).
    Fork {
        /// The first node of each branch.
        branches: Vec<NodeId>,
    },
    /// A stateful rewriter decides; its decision picks the next node.
    Rewrite {
        /// The (global) rewriter element.
        element: u32,
        /// Its input port.
        port: u32,
        /// The register the decision is kept in.
        reg: u8,
        /// Where the packet's current addresses and ports come from.
        tuple: [Val; 4],
        /// Whether the network header is where synthesis expects it (else the rewriter
        /// sees no IPv4 header).
        has_ip: bool,
        /// Whether the packet has been cut at the IPv4 total length.
        trimmed: bool,
        /// Whether the rewriter sets the destination-IP annotation.
        dst_anno: bool,
        /// The next node for each decision; a decision not listed here cannot happen.
        branches: Vec<(Branch, NodeId)>,
    },
}

/// The program of one entry element.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Segment {
    /// The fields the segment's classifiers read, parsed once from the frame as it arrived.
    pub fields: Vec<Field>,
    /// How each of `fields` is read (same order; filled by [`crate::Executor::install`]).
    pub getters: Vec<Getter>,
    /// The first node (usually a [`Node::Classify`]).
    pub root: NodeId,
    /// The [`Node::Classify`] nodes whose classes are in priority order and may overlap (a
    /// packet's class is the first that contains it): synthesis keeps long first-match rule
    /// lists that way instead of subtracting every earlier rule from each later one (HSA's
    /// lazy subtraction). Other nodes' classes are disjoint.
    pub ordered: Vec<NodeId>,
}

/// One traffic class of a [`Node::Classify`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Class {
    /// Tests on the segment's fields: (field index, allowed closed intervals).
    pub tests: Vec<(u16, Vec<(u128, u128)>)>,
    /// The class's first node.
    pub node: NodeId,
    /// Packets classified into it so far (the executor keeps busy classes first when
    /// classes are disjoint: their order then does not change the result).
    pub hits: u64,
}

/// A synthesized chain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Program {
    /// The segment of each (global) entry element (a `FromDevice` that fresh packets enter).
    pub starts: HashMap<u32, Segment>,
    /// All nodes.
    pub nodes: Vec<Node>,
    /// The counter events of reaching each node (same index as `nodes`).
    pub events: Vec<Vec<Event>>,
    /// Drop reasons and counter names referenced by events.
    pub reasons: Vec<&'static str>,
}

/// Orders each class's tests so that a class the packet is not in is rejected early: first
/// the fields on which the node's classes differ most (distinct interval lists), then the
/// rest. Classes are boxes, so the order never changes which class a packet falls in.
pub fn order_tests(classes: &mut [Class]) {
    let mut variety: HashMap<u16, std::collections::HashSet<&Vec<(u128, u128)>>> = HashMap::new();
    for c in classes.iter() {
        for (f, iv) in &c.tests {
            variety.entry(*f).or_default().insert(iv);
        }
    }
    let rank: HashMap<u16, usize> = variety.into_iter().map(|(f, s)| (f, s.len())).collect();
    for c in classes.iter_mut() {
        c.tests
            .sort_by_key(|(f, _)| (std::cmp::Reverse(rank.get(f).copied().unwrap_or(0)), *f));
    }
}

impl Class {
    /// Whether the packet whose field `i` (index into the segment's fields) is `get(i)` is in
    /// the class; fields are read only as the tests need them.
    #[inline]
    pub fn contains_with(&self, get: &mut impl FnMut(u16) -> u128) -> bool {
        self.tests.iter().all(|(i, iv)| {
            let v = get(*i);
            iv.iter().any(|&(lo, hi)| lo <= v && v <= hi)
        })
    }
}

/// A rewriter decision remembered for a flow: (rewriter element, mapping index or
/// [`NO_MAPPING`], direction).
pub(crate) type Step = (u32, u32, elements::rewriter::Direction);

/// A decision that used no mapping (passed or dropped).
pub(crate) const NO_MAPPING: u32 = u32::MAX;

/// Per-packet registers of the run-time steps: what the rewriters decided (each rewriter
/// node's new tuple) and the checksum operands of their rewrites. All a packet's writes
/// read; a remembered path keeps them (small: one entry per flow).
#[derive(Debug, Clone, Default)]
pub(crate) struct Regs {
    pub(crate) flows: Vec<[u128; 4]>,
    pub(crate) ip_ops: u32,
    pub(crate) l4_ops: u32,
    pub(crate) rewrote: bool,
}

/// What the executor notes while one packet walks a program, to remember its flow's path:
/// scratch of the packet being run, never kept per flow.
#[derive(Debug, Clone, Default)]
pub(crate) struct Track {
    /// The flow-cache key of the packet, once its first rewriter is reached.
    pub(crate) key: Option<u128>,
    /// The decisions remembered for the key.
    pub(crate) cached: Vec<Step>,
    /// The decisions taken for this packet.
    pub(crate) record: Vec<Step>,
    /// Whether `record` differs from `cached`.
    pub(crate) dirty: bool,
    /// The packet's own header as a rewriter reads it (as it arrived, and cut at the IPv4
    /// length), once parsed.
    pub(crate) parsed: [Option<Option<elements::rewriter::FlowInput>>; 2],
    /// The packets that take the same classes as this one: the intersection of the boxes
    /// of the classes it fell in (tests on the segment's fields).
    pub(crate) region: Vec<(u16, Vec<(u128, u128)>)>,
    /// The classes the packet took on the way (node, index), for its region: computed only
    /// when its path is remembered.
    pub(crate) visits: Vec<(NodeId, u32)>,
    /// The values of the fields an ordered classification tested (field index, value), for
    /// its region likewise.
    pub(crate) pinned: Vec<(u16, u128)>,
    /// The nodes visited, from the root.
    pub(crate) path: Vec<NodeId>,
    /// The last node (exit, hand-off, drop), once reached.
    pub(crate) end: Option<NodeId>,
    /// Whether the path is sure to repeat for the flow's packets like this one.
    pub(crate) cacheable: bool,
    /// The version of each decision's mapping (same order as `record`).
    pub(crate) versions: Vec<u32>,
    /// The shortest lifetime this packet gave a mapping.
    pub(crate) life: u64,
    /// What the packet told the rewriters (TCP flags, payload).
    pub(crate) info: Option<elements::rewriter::PacketInfo>,
    /// The rewriter (element) that dropped the packet for a reason every packet of the
    /// flow shares ([`elements::rewriter::RewriterDrop::per_flow`]), and the reason.
    pub(crate) drop: Option<(u32, &'static str)>,
    /// The root classification's choice (next node, class index) and how many of
    /// `pinned` it made, when it was made by the classifier (not taken from the flow's
    /// memo).
    pub(crate) root: Option<(NodeId, u32, usize)>,
}

/// Where the IPv4 header of a frame as it arrived is: right after its Ethernet header. The
/// synthesized programs read and write every field of the frame at the position
/// [`Field::layout`] gives from here.
pub const IP_OFFSET: usize = wire::ethernet::HEADER_LEN;

/// The value of `field` in `data`, a frame as it arrived (the models' reading with the
/// IPv4 header at [`IP_OFFSET`]; fresh packets' annotations read 0).
pub fn frame_value(data: &[u8], field: Field) -> u128 {
    frame(data).value_of(field)
}

/// A frame as it arrived, its IPv4 header at [`IP_OFFSET`].
pub type FrameView<'a> = elements::model::Headers<'a>;

/// The headers of a frame as it arrived.
#[inline]
pub fn frame(data: &[u8]) -> FrameView<'_> {
    FrameView::new(data, Some(IP_OFFSET))
}

/// How the executor reads one field of a frame as it arrived: most fields are a plain load
/// (no per-field dispatch on the hot path); the rest are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Getter {
    /// `len` (≤ 8) bytes at `off` from the frame (`l4 == false`) or from the transport
    /// header (`l4 == true`), shifted right and masked; 0 when the bytes are missing.
    Load {
        /// From the transport header (IPv4 header + its length) instead of the frame.
        l4: bool,
        /// Byte offset.
        off: u16,
        /// Bytes.
        len: u8,
        /// Right shift.
        shift: u8,
        /// Mask after the shift.
        mask: u64,
        /// The right shift that gives the value from the 8 bytes at `off` read big-endian
        /// (`(8 - len) * 8 + shift`): one load when those bytes are there.
        wide: u8,
    },
    /// Whether the IPv4 header checksum verifies (computed over the header).
    IpChecksumOk,
    /// Whether the IPv4 total length is at least the header's and within the data.
    IpLenOk,
    /// The bytes from the IPv4 header on (`FrameView::value(Field::IpAvail)`).
    IpAvail,
    /// Computed by [`FrameView::value`].
    Other(Field),
}

impl Getter {
    /// The getter of `field`: a load at its [`Field::layout`] (the IPv4 header at
    /// [`IP_OFFSET`]) when it is stored in at most 8 bytes, else computed.
    pub fn of(field: Field) -> Getter {
        match field {
            Field::IpChecksumOk => return Getter::IpChecksumOk,
            Field::IpLenOk => return Getter::IpLenOk,
            Field::IpAvail => return Getter::IpAvail,
            // Stored, but only in tagged frames.
            Field::VlanId => return Getter::Other(field),
            _ => {}
        }
        match field.layout() {
            Some(l) if l.len <= 8 => {
                let (l4, off) = match l.base {
                    Base::Frame => (false, l.offset),
                    Base::Network => (false, IP_OFFSET as u16 + l.offset),
                    Base::Transport => (true, l.offset),
                };
                Getter::Load {
                    l4,
                    off,
                    len: l.len,
                    shift: l.shift,
                    mask: l.mask as u64,
                    wide: (8 - l.len) * 8 + l.shift,
                }
            }
            _ => Getter::Other(field),
        }
    }

    /// The value of a [`Getter::Load`] field in the frame `view` looks at; `None` for a
    /// computed field. Small: callers testing many fields inline it and keep the computed
    /// fields out of line.
    #[inline(always)]
    pub fn load(&self, view: &FrameView<'_>) -> Option<u128> {
        let Getter::Load {
            l4,
            off,
            len,
            shift,
            mask,
            wide,
        } = *self
        else {
            return None;
        };
        let b = if l4 { view.l4 } else { view.data };
        let (o, n) = (usize::from(off), usize::from(len));
        if let Some(w) = b.get(o..o + 8) {
            let mut x = [0u8; 8];
            x.copy_from_slice(w);
            return Some(u128::from((u64::from_be_bytes(x) >> wide) & mask));
        }
        Some(match b.get(o..o + n) {
            Some(x) => {
                let v = x.iter().fold(0u64, |a, y| (a << 8) | u64::from(*y));
                u128::from((v >> shift) & mask)
            }
            None => 0,
        })
    }

    /// The value of the field in the frame `view` looks at.
    #[inline(always)]
    pub fn get(&self, view: &FrameView<'_>) -> u128 {
        match *self {
            Getter::Load { .. } => self.load(view).unwrap_or(0),
            Getter::IpChecksumOk => u128::from(view.ip_checksum_ok()),
            Getter::IpLenOk => u128::from(view.ip_len_ok()),
            Getter::IpAvail => view.ip.len().min(0xffff) as u128,
            Getter::Other(f) => view.value_of(f),
        }
    }
}

/// Where a byte field lives in a frame as it arrived: offset and length, for a frame whose
/// IPv4 header length is `hl` bytes (derived from [`Field::layout`]). `None` for
/// annotations, computed fields and fields that share their bytes with others (bit
/// fields, [`Field::VlanId`]): those are not written as whole bytes.
#[inline]
pub fn frame_location(field: Field, hl: usize) -> Option<(usize, usize)> {
    let l = field.layout().filter(|l| l.whole_bytes())?;
    let base = match l.base {
        Base::Frame => 0,
        Base::Network => IP_OFFSET,
        Base::Transport => IP_OFFSET + hl,
    };
    Some((base + usize::from(l.offset), usize::from(l.len)))
}

/// The offset in a frame as it arrived of a field stored at a fixed position (an Ethernet or
/// IPv4 header field), for constants: evaluating it on any other field fails the build.
pub(crate) const fn fixed_offset(field: Field) -> usize {
    match field.layout() {
        Some(l) => match l.base {
            Base::Frame => l.offset as usize,
            Base::Network => IP_OFFSET + l.offset as usize,
            Base::Transport => panic!("a transport field has no fixed offset"),
        },
        None => panic!("the field is not stored"),
    }
}

/// Writes `v` big-endian into `len` bytes at `off` (nothing when out of range).
pub(crate) fn store(data: &mut [u8], off: usize, len: usize, v: u128) {
    if let Some(b) = data.get_mut(off..off + len) {
        for (i, x) in b.iter_mut().enumerate() {
            *x = (v >> (8 * (len - 1 - i))) as u8;
        }
    }
}
