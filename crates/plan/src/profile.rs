//! Action profiles (NFCompass Table II), derived from the NFs' element graphs.
//!
//! An NF's profile says what it may do to a packet that enters it: the header parts it reads
//! (as they were when the packet entered: a part the NF itself wrote first on every path is
//! not a read of the packet's), the parts it writes, whether it reads or writes the payload,
//! whether it adds or removes bytes, whether it may drop, whether it keeps state, and whether
//! it makes packets (copies, replies) or holds them.
//!
//! Nothing is written by hand per NF: [`profile_nf`] walks the NF's element graph from its
//! `FromDevice`s and reads each element's synthesis model ([`elements::model::Model`]):
//! a case's filter reads fields, its effects read and write them, a `Drop` outcome may drop,
//! its counters are state. An element without a model (opaque) is taken at what it declares
//! ([`elements::record::Declared`], [`elements::Element::declared`]); one that declares
//! nothing is taken to read and write everything, add and remove bytes, drop, keep state and
//! make packets, and the profile says which element made it so ([`Profile::conservative`]).
//!
//! Positions: Ethernet fields are the NF's first 14 bytes as the packet entered it (an
//! element whose data start moved, after a `Strip`, reads raw bytes at the shifted offset:
//! [`Part::Frame`]); IPv4 fields are at the IPv4 header, transport fields at the transport
//! header. [`Profile::ip_header`] says how far into the frame the NF finds its IPv4 header,
//! which is what tells Ethernet bytes from IPv4 bytes when two profiles are compared
//! ([`overlaps`]).

use chain::{Executor, Nf};
use elements::model::{Effect, IpAnchor, Model, Op, Outcome};
use elements::record::{Access, Declared};
use elements::Role;
use serde::Serialize;
use space::{Base, Field};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

/// One part of a packet an NF can read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// A header field stored in the packet: Ethernet fields in the first 14 bytes of the
    /// packet as it entered the NF, IPv4 fields at the IPv4 header, transport fields at the
    /// transport header.
    Field(Field),
    /// `len` bytes at `start` from the packet's first byte as it entered the NF (raw reads,
    /// and Ethernet fields read where an element's data start moved).
    Frame {
        /// First byte (negative: in front of the packet as it entered, pushed by the NF).
        start: i32,
        /// Number of bytes.
        len: u16,
    },
    /// Bytes at a position the walk cannot tell.
    FrameAnywhere,
    /// The IPv4 header checksum.
    IpChecksum,
    /// The IPv4 options (bytes 20.. of the header).
    IpOptions,
    /// The transport checksum (TCP's, UDP's or ICMP's: all three positions).
    L4Checksum,
    /// The payload: transport bytes from byte 8 on (whatever the protocol).
    Payload,
    /// The packet's length (bytes at its end).
    Length,
    /// An annotation ([`Field::Paint`], [`Field::DstIpAnno`], [`Field::PacketType`],
    /// [`Field::FixIpSrc`], [`Field::InPort`]).
    Anno(Field),
    /// The MAC-header annotation (where the Ethernet header is).
    MacHeader,
    /// The network- and transport-header annotations (where the IPv4 header is).
    NetHeader,
    /// Every byte and annotation (an element declaring nothing).
    Everything,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Field(x) => write!(f, "{x}"),
            Part::Frame { start, len } => write!(f, "frame[{start}..{}]", start + i32::from(*len)),
            Part::FrameAnywhere => f.write_str("frame[?]"),
            Part::IpChecksum => f.write_str("ip_csum"),
            Part::IpOptions => f.write_str("ip_options"),
            Part::L4Checksum => f.write_str("l4_csum"),
            Part::Payload => f.write_str("payload"),
            Part::Length => f.write_str("length"),
            Part::Anno(x) => write!(f, "anno:{x}"),
            Part::MacHeader => f.write_str("anno:mac_header"),
            Part::NetHeader => f.write_str("anno:net_header"),
            Part::Everything => f.write_str("*"),
        }
    }
}

impl Serialize for Part {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Part {
    /// Whether the part is in the packet's header bytes (Table II's HDR column): not the
    /// payload, the length or an annotation.
    pub fn is_header(&self) -> bool {
        !matches!(
            self,
            Part::Payload | Part::Length | Part::Anno(_) | Part::MacHeader | Part::NetHeader
        )
    }

    /// Whether the part is an annotation (metadata beside the bytes).
    pub fn is_annotation(&self) -> bool {
        matches!(self, Part::Anno(_) | Part::MacHeader | Part::NetHeader)
    }

    /// Where the part is, for [`overlaps`].
    fn region(&self) -> Region {
        match *self {
            Part::Field(f) => match f.layout() {
                Some(l) => {
                    let width = f.width() as i64;
                    let lo =
                        i64::from(l.offset) * 8 + i64::from(l.len) * 8 - i64::from(l.shift) - width;
                    let r = vec![(lo, lo + width)];
                    match l.base {
                        Base::Frame => Region::Frame(r),
                        Base::Network => Region::Ip(r),
                        Base::Transport => Region::L4(r),
                    }
                }
                None => Region::Everything,
            },
            Part::Frame { start, len } => {
                let lo = i64::from(start) * 8;
                Region::Frame(vec![(lo, lo + i64::from(len) * 8)])
            }
            Part::FrameAnywhere | Part::Everything => Region::Everything,
            Part::IpChecksum => Region::Ip(vec![(80, 96)]),
            Part::IpOptions => Region::Ip(vec![(160, 480)]),
            Part::L4Checksum => Region::L4(vec![(16, 32), (48, 64), (128, 144)]),
            Part::Payload => Region::L4(vec![(64, i64::MAX)]),
            Part::Length => Region::Length,
            Part::Anno(f) => Region::Anno(f),
            Part::MacHeader => Region::HeaderAnno(false),
            Part::NetHeader => Region::HeaderAnno(true),
        }
    }
}

/// Where a [`Part`] is: bit ranges in one of the packet's spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Region {
    /// Bits from the packet's first byte as it entered the NF.
    Frame(Vec<(i64, i64)>),
    /// Bits from the IPv4 header.
    Ip(Vec<(i64, i64)>),
    /// Bits from the transport header.
    L4(Vec<(i64, i64)>),
    /// The length.
    Length,
    /// An annotation.
    Anno(Field),
    /// The MAC (`false`) or network (`true`) header annotation.
    HeaderAnno(bool),
    /// Everything.
    Everything,
}

fn ranges_meet(a: &[(i64, i64)], b: &[(i64, i64)]) -> bool {
    a.iter()
        .any(|&(a0, a1)| b.iter().any(|&(b0, b1)| a0 < b1 && b0 < a1))
}

/// Whether part `a` (of an NF whose IPv4 header is at `ip_a`) and part `b` (of one whose
/// IPv4 header is at `ip_b`) may name a common bit of the same packet. Bytes of the frame
/// (Ethernet fields, raw reads) meet IPv4 and transport parts unless they end before the
/// IPv4 header of the NF reading the latter, as far as both profiles know it.
pub fn overlaps(a: &Part, ip_a: IpHeaderAt, b: &Part, ip_b: IpHeaderAt) -> bool {
    use Region::*;
    let (ra, rb) = (a.region(), b.region());
    let frame_vs_ip = |frame: &[(i64, i64)], ip_at: IpHeaderAt| match ip_at {
        IpHeaderAt::Never => false,
        IpHeaderAt::From(p) => frame.iter().any(|&(_, hi)| hi > i64::from(p) * 8),
        IpHeaderAt::Unknown => true,
    };
    match (&ra, &rb) {
        (Everything, _) | (_, Everything) => true,
        (Length, Length) => true,
        (Length, _) | (_, Length) => false,
        (Anno(x), Anno(y)) => x == y,
        (HeaderAnno(x), HeaderAnno(y)) => x == y,
        (Anno(_) | HeaderAnno(_), _) | (_, Anno(_) | HeaderAnno(_)) => false,
        (Frame(x), Frame(y)) | (Ip(x), Ip(y)) | (L4(x), L4(y)) => ranges_meet(x, y),
        (Frame(x), Ip(_) | L4(_)) => frame_vs_ip(x, ip_b),
        (Ip(_) | L4(_), Frame(y)) => frame_vs_ip(y, ip_a),
        // The transport header starts after the IPv4 header's end (options included).
        (Ip(_), L4(_)) | (L4(_), Ip(_)) => false,
    }
}

/// How far into the packet (as it entered the NF) the NF reads or writes an IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IpHeaderAt {
    /// The NF never touches an IPv4 or transport field.
    Never,
    /// Never before this byte.
    From(i32),
    /// Somewhere the walk cannot tell (an annotation set before the NF, or by an opaque
    /// element).
    Unknown,
}

impl IpHeaderAt {
    fn add(self, at: Option<i32>) -> IpHeaderAt {
        match (self, at) {
            (IpHeaderAt::Unknown, _) | (_, None) => IpHeaderAt::Unknown,
            (IpHeaderAt::Never, Some(p)) => IpHeaderAt::From(p),
            (IpHeaderAt::From(q), Some(p)) => IpHeaderAt::From(q.min(p)),
        }
    }
}

impl fmt::Display for IpHeaderAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpHeaderAt::Never => f.write_str("-"),
            IpHeaderAt::From(p) => write!(f, "{p}"),
            IpHeaderAt::Unknown => f.write_str("?"),
        }
    }
}

/// An NF's action profile (NFCompass Table II, field by field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Profile {
    /// The NF's name.
    pub nf: String,
    /// Its index in [`Executor::nfs`].
    pub index: usize,
    /// Parts read as they were when the packet entered the NF.
    pub reads: BTreeSet<Part>,
    /// Parts the NF may write.
    pub writes: BTreeSet<Part>,
    /// Parts read only to compute an annotation (the destination MAC for the packet type,
    /// the IPv4 destination for the destination annotation), by that annotation: they
    /// matter only where the annotation is read ([`Profile::annotations_used`], or by a
    /// later NF).
    pub derived: BTreeMap<Part, BTreeSet<Part>>,
    /// Annotations some element of the NF reads, whoever wrote them.
    pub annotations_used: BTreeSet<Part>,
    /// Bytes the NF may put in front of the packet or append (encapsulation).
    pub adds_bytes: bool,
    /// Bytes the NF may take off (decapsulation, a cut at the IPv4 length).
    pub removes_bytes: bool,
    /// Why the length may change: per element (`name (Class)`), what it does.
    pub length_changes: Notes,
    /// Whether the NF may drop a packet.
    pub may_drop: bool,
    /// The reasons it may drop under.
    pub drop_reasons: BTreeSet<String>,
    /// Whether the NF keeps state a packet can change (counters, tables).
    pub stateful: bool,
    /// What state: per element, its counters or why.
    pub state: Notes,
    /// Whether the NF may copy, create or hold packets (one packet in may not be one or no
    /// packet out).
    pub makes_packets: bool,
    /// Elements taken conservatively (as reading and writing everything), and why.
    pub conservative: Notes,
    /// Elements taken at what they declare (no model).
    pub declared: Vec<String>,
    /// Where the NF finds its IPv4 header.
    pub ip_header: IpHeaderAt,
    /// The interfaces packets enter by (its `FromDevice`s, `FromDump`s as `dump:FILE`).
    pub inputs: Vec<String>,
    /// The interfaces packets leave by (its `ToDevice`s, `ToDump`s as `dump:FILE`).
    pub outputs: Vec<String>,
}

impl Profile {
    fn new(nf: &Nf, index: usize) -> Profile {
        Profile {
            nf: nf.name.clone(),
            index,
            reads: BTreeSet::new(),
            writes: BTreeSet::new(),
            derived: BTreeMap::new(),
            annotations_used: BTreeSet::new(),
            adds_bytes: false,
            removes_bytes: false,
            length_changes: Notes::new(),
            may_drop: false,
            drop_reasons: BTreeSet::new(),
            stateful: false,
            state: Notes::new(),
            makes_packets: false,
            conservative: Notes::new(),
            declared: Vec::new(),
            ip_header: IpHeaderAt::Never,
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Table II's columns for this profile.
    pub fn row(&self) -> Row {
        let any_header = |s: &BTreeSet<Part>| s.iter().any(Part::is_header);
        let mut reads = self.reads.clone();
        reads.extend(self.derived.values().flatten().copied());
        let payload =
            |s: &BTreeSet<Part>| s.contains(&Part::Payload) || s.contains(&Part::Everything);
        Row {
            header_read: any_header(&reads),
            payload_read: payload(&reads),
            header_write: any_header(&self.writes),
            payload_write: payload(&self.writes),
            add_remove: self.adds_bytes || self.removes_bytes,
            drop: self.may_drop,
        }
    }

    /// The parts the NF reads that matter, given the annotations whose value nobody reads
    /// as it came (`dead`): [`Profile::reads`], and the parts [`Profile::derived`] from an
    /// annotation that is read in the NF or is not dead.
    pub fn effective_reads(&self, dead: &BTreeSet<Part>) -> BTreeSet<Part> {
        let mut r = self.reads.clone();
        for (anno, parts) in &self.derived {
            if self.annotations_used.contains(anno) || !dead.contains(anno) {
                r.extend(parts.iter().copied());
            }
        }
        r
    }

    /// Whether the NF's length stays as it came (no bytes added or removed).
    pub fn keeps_length(&self) -> bool {
        !self.adds_bytes && !self.removes_bytes
    }

    /// The NF kinds of the paper whose Table II row is nearest this profile's (see
    /// [`nearest_kinds`]).
    pub fn kinds(&self) -> (Vec<Kind>, u32) {
        nearest_kinds(&self.row())
    }

    fn note_state(&mut self, who: &str, what: &str) {
        self.stateful = true;
        note(&mut self.state, who, what);
    }

    fn note_length(&mut self, who: &str, what: &str) {
        note(&mut self.length_changes, who, what);
    }

    fn everything(&mut self, who: &str, why: &str) {
        self.reads.insert(Part::Everything);
        self.writes.insert(Part::Everything);
        self.adds_bytes = true;
        self.removes_bytes = true;
        self.may_drop = true;
        self.drop_reasons.insert("(undeclared)".into());
        self.makes_packets = true;
        self.ip_header = IpHeaderAt::Unknown;
        self.stateful = true;
        note(&mut self.conservative, who, why);
        self.note_length(who, "anything (conservative)");
        self.note_state(who, "anything (conservative)");
    }
}

/// Notes per element (`name (Class)`): what it does, in the order found.
pub type Notes = BTreeMap<String, Vec<String>>;

fn note(notes: &mut Notes, who: &str, what: &str) {
    let v = notes.entry(who.to_string()).or_default();
    if !v.iter().any(|x| x == what) {
        v.push(what.to_string());
    }
}

/// Notes as one line: `element: what, what; element: what`.
pub fn notes_line(notes: &Notes) -> String {
    notes
        .iter()
        .map(|(who, what)| format!("{who}: {}", what.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// One row of Table II: what an NF does, column by column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Row {
    /// Reads header bytes.
    pub header_read: bool,
    /// Reads the payload.
    pub payload_read: bool,
    /// Writes header bytes.
    pub header_write: bool,
    /// Writes the payload.
    pub payload_write: bool,
    /// Adds or removes bytes.
    pub add_remove: bool,
    /// May drop.
    pub drop: bool,
}

impl Row {
    fn bits(&self) -> [bool; 6] {
        [
            self.header_read,
            self.payload_read,
            self.header_write,
            self.payload_write,
            self.add_remove,
            self.drop,
        ]
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let y = |b: bool| if b { "Y" } else { "N" };
        write!(
            f,
            "{}/{}  {}/{}  {}  {}",
            y(self.header_read),
            y(self.payload_read),
            y(self.header_write),
            y(self.payload_write),
            y(self.add_remove),
            y(self.drop)
        )
    }
}

/// The NF kinds of NFCompass' Table II.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Kind {
    /// A probe (monitor).
    Probe,
    /// An intrusion detection system.
    Ids,
    /// A firewall.
    Firewall,
    /// A network address translator.
    Nat,
    /// A load balancer.
    Lb,
    /// A WAN optimizer.
    WanOptimization,
    /// A proxy.
    Proxy,
}

impl Kind {
    /// Every kind, in the paper's order.
    pub const ALL: [Kind; 7] = [
        Kind::Probe,
        Kind::Ids,
        Kind::Firewall,
        Kind::Nat,
        Kind::Lb,
        Kind::WanOptimization,
        Kind::Proxy,
    ];

    /// The paper's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Probe => "Probe",
            Kind::Ids => "IDS",
            Kind::Firewall => "Firewall",
            Kind::Nat => "NAT",
            Kind::Lb => "LB",
            Kind::WanOptimization => "WAN optimization",
            Kind::Proxy => "Proxy",
        }
    }

    /// The kind's row in NFCompass' Table II, as printed in the paper.
    pub fn paper_row(self) -> Row {
        let r = |hr, pr, hw, pw, ar, d| Row {
            header_read: hr,
            payload_read: pr,
            header_write: hw,
            payload_write: pw,
            add_remove: ar,
            drop: d,
        };
        match self {
            Kind::Probe => r(true, false, false, false, false, false),
            Kind::Ids => r(true, true, false, false, false, true),
            Kind::Firewall => r(true, false, false, false, false, false),
            Kind::Nat => r(true, false, true, false, false, false),
            Kind::Lb => r(true, false, false, false, false, false),
            Kind::WanOptimization => r(true, true, true, true, true, true),
            Kind::Proxy => r(true, true, false, true, false, false),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kinds whose paper row differs from `row` in the fewest of Table II's six columns, in
/// the paper's order, with that number (0: an exact match). Rows that tie (the paper gives
/// Probe, Firewall and LB the same row) are all returned: the profile cannot tell them apart.
pub fn nearest_kinds(row: &Row) -> (Vec<Kind>, u32) {
    let dist = |k: Kind| {
        row.bits()
            .iter()
            .zip(k.paper_row().bits())
            .filter(|(a, b)| **a != *b)
            .count() as u32
    };
    let best = Kind::ALL.iter().map(|&k| dist(k)).min().unwrap_or(0);
    (
        Kind::ALL.into_iter().filter(|&k| dist(k) == best).collect(),
        best,
    )
}

/// Where the network header annotation points, during the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Pos {
    /// As it was when the packet entered the NF.
    Inherited,
    /// This many bytes from the packet's first byte as it entered.
    At(i32),
    /// Unknown.
    Unknown,
}

/// The annotations a walk tracks as written on every path so far.
const KILLABLE: [Part; 6] = [
    Part::Anno(Field::Paint),
    Part::Anno(Field::DstIpAnno),
    Part::Anno(Field::PacketType),
    Part::Anno(Field::FixIpSrc),
    Part::MacHeader,
    Part::NetHeader,
];

/// What the walk knows about a packet at an element's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct State {
    /// Bytes pulled off the front since the NF got the packet (`None`: unknown).
    pulled: Option<i32>,
    /// Where the MAC header annotation points.
    mac: Pos,
    /// Where the network header annotation points.
    net: Pos,
    /// Which [`KILLABLE`] annotations the NF wrote on this path.
    killed: u8,
    /// What earlier model cases tell about the IPv4 header at this position (a frame
    /// offset): the packets that reach here passed their checks.
    checked: Option<(i32, Checked)>,
}

/// Lower bounds on an IPv4 header that earlier cases established (the packets that did not
/// match a case on one field alone lie outside its set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Checked {
    /// Least [`Field::IpAvail`].
    avail: u128,
    /// Least [`Field::IpIhl`].
    ihl: u128,
    /// [`Field::IpLenOk`] is 1.
    len_ok: bool,
}

/// The most (element, input, state) triples a walk visits before it gives up (a chain whose
/// pulls grow around a loop): the NF is then taken conservatively.
const MAX_STATES: usize = 100_000;

struct Walk<'a> {
    ex: &'a Executor,
    nf: &'a Nf,
    n: usize,
    p: Profile,
}

impl Walk<'_> {
    fn who(&self, l: usize) -> String {
        format!("{} ({})", self.nf.names[l], self.nf.classes[l])
    }

    fn read(&mut self, part: Part, st: &State) {
        if part.is_annotation() {
            self.p.annotations_used.insert(part);
        }
        if let Some(k) = KILLABLE.iter().position(|x| *x == part) {
            if st.killed & (1 << k) != 0 {
                return;
            }
        }
        self.p.reads.insert(part);
    }

    fn write(&mut self, part: Part, st: &mut State, full: bool) {
        self.p.writes.insert(part);
        if full {
            if let Some(k) = KILLABLE.iter().position(|x| *x == part) {
                st.killed |= 1 << k;
            }
        }
    }

    /// Notes that `part` is read to compute annotation `anno`.
    fn derive(&mut self, anno: Part, part: Part) {
        self.p.derived.entry(anno).or_default().insert(part);
    }

    /// Where the IPv4 header is for an element reading it at `anchor`, noting the read of
    /// the annotation.
    fn ip_pos(&mut self, anchor: IpAnchor, st: &State) -> Option<i32> {
        match anchor {
            IpAnchor::Data(o) => st.pulled.map(|k| k + i32::from(o)),
            IpAnchor::Annotation => match st.net {
                Pos::At(p) => Some(p),
                Pos::Inherited => {
                    self.read(Part::NetHeader, st);
                    None
                }
                Pos::Unknown => None,
            },
        }
    }

    /// The part a stored frame field is, `pulled` bytes in.
    fn frame_part(f: Field, pulled: Option<i32>) -> Part {
        match (pulled, f.layout()) {
            (Some(0), _) if !matches!(f, Field::Raw { .. }) => Part::Field(f),
            (Some(k), Some(l)) => Part::Frame {
                start: k + i32::from(l.offset),
                len: u16::from(l.len),
            },
            _ => Part::FrameAnywhere,
        }
    }

    /// The parts a read of field `f` (by an element with IPv4 anchor `anchor`) reads.
    fn read_field(&mut self, f: Field, anchor: IpAnchor, st: &State) {
        match f.group() {
            space::Group::Annotation => self.read(Part::Anno(f), st),
            space::Group::Frame | space::Group::Ethernet => match f {
                Field::FrameLen => self.read(Part::Length, st),
                Field::HasVlan => self.read(Self::frame_part(Field::EtherType, st.pulled), st),
                Field::VlanId => {
                    self.read(Self::frame_part(Field::EtherType, st.pulled), st);
                    self.read(Self::frame_part(f, st.pulled), st);
                }
                _ => self.read(Self::frame_part(f, st.pulled), st),
            },
            space::Group::Ipv4 | space::Group::Transport => {
                let at = self.ip_pos(anchor, st);
                self.p.ip_header = self.p.ip_header.add(at);
                let transport = f.group() == space::Group::Transport;
                if transport {
                    self.read(Part::Field(Field::IpIhl), st);
                }
                match f {
                    Field::IpOptions => self.read(Part::Field(Field::IpIhl), st),
                    Field::IpChecksumOk => {
                        for g in Field::ALL {
                            if g.group() == space::Group::Ipv4 && g.layout().is_some() {
                                self.read(Part::Field(g), st);
                            }
                        }
                        self.read(Part::IpChecksum, st);
                        self.read(Part::IpOptions, st);
                    }
                    Field::IpAvail | Field::L4Avail => self.read(Part::Length, st),
                    Field::IpLenOk => {
                        self.read(Part::Length, st);
                        self.read(Part::Field(Field::IpLen), st);
                        self.read(Part::Field(Field::IpIhl), st);
                    }
                    Field::L4Len => {
                        self.read(Part::Field(Field::IpLen), st);
                        self.read(Part::Field(Field::IpIhl), st);
                    }
                    _ => self.read(Part::Field(f), st),
                }
            }
        }
    }

    /// A write of field `f` with `op`.
    fn write_field(&mut self, f: Field, op: &Op, anchor: IpAnchor, st: &mut State) {
        if matches!(f, Field::IpIhl | Field::IpLen) {
            st.checked = None;
        }
        let full = matches!(op, Op::Set(_) | Op::Pool { .. } | Op::Stateful { .. });
        if !full {
            self.read_field(f, anchor, st);
        }
        match f.group() {
            space::Group::Annotation => self.write(Part::Anno(f), st, full),
            space::Group::Frame | space::Group::Ethernet => {
                let part = Self::frame_part(f, st.pulled);
                self.write(part, st, full);
            }
            space::Group::Ipv4 | space::Group::Transport => {
                let at = self.ip_pos(anchor, st);
                self.p.ip_header = self.p.ip_header.add(at);
                if f.group() == space::Group::Transport {
                    self.read(Part::Field(Field::IpIhl), st);
                }
                self.write(Part::Field(f), st, full);
            }
        }
    }

    fn effect(&mut self, l: usize, e: &Effect, anchor: IpAnchor, st: &mut State) {
        match e {
            Effect::Write(f, op) => self.write_field(*f, op, anchor, st),
            Effect::DecTtl => {
                let ttl = Op::Add(-1);
                self.write_field(Field::IpTtl, &ttl, anchor, st);
                self.read(Part::IpChecksum, st);
                self.write(Part::IpChecksum, st, false);
            }
            Effect::Pull(n) => {
                st.pulled = st.pulled.map(|k| k + i32::from(*n));
            }
            Effect::Unpull(n) => {
                st.pulled = st.pulled.map(|k| k - i32::from(*n));
            }
            Effect::EtherEncap { .. } => {
                st.pulled = st.pulled.map(|k| k - 14);
                for f in [Field::EthDst, Field::EthSrc, Field::EtherType] {
                    let part = Self::frame_part(f, st.pulled);
                    self.write(part, st, true);
                }
                if st.pulled.is_some_and(|k| k < 0) {
                    self.p.adds_bytes = true;
                    let who = self.who(l);
                    self.p.note_length(&who, "+14 bytes in front");
                }
                self.write(Part::MacHeader, st, true);
                self.write(Part::NetHeader, st, true);
                st.mac = st.pulled.map_or(Pos::Unknown, Pos::At);
                st.net = st.pulled.map_or(Pos::Unknown, |k| Pos::At(k + 14));
            }
            Effect::EtherRewrite { .. } => {
                let at = match st.mac {
                    Pos::At(p) => Some(p),
                    Pos::Inherited => {
                        self.read(Part::MacHeader, st);
                        None
                    }
                    Pos::Unknown => None,
                };
                for f in [Field::EthDst, Field::EthSrc] {
                    let part = Self::frame_part(f, at);
                    self.write(part, st, true);
                }
            }
            Effect::MarkMac => {
                self.write(Part::MacHeader, st, true);
                st.mac = st.pulled.map_or(Pos::Unknown, Pos::At);
            }
            Effect::PacketTypeFromEth => {
                let mac = Self::frame_part(Field::EthDst, st.pulled);
                self.derive(Part::Anno(Field::PacketType), mac);
                self.write(Part::Anno(Field::PacketType), st, true);
            }
            Effect::MarkIp => {
                let at = self.ip_pos(anchor, st);
                self.p.ip_header = self.p.ip_header.add(at);
                self.read(Part::Field(Field::IpIhl), st);
                self.write(Part::NetHeader, st, true);
                st.net = at.map_or(Pos::Unknown, Pos::At);
            }
            Effect::TrimToIpLen => {
                let at = self.ip_pos(anchor, st);
                self.p.ip_header = self.p.ip_header.add(at);
                self.read(Part::Field(Field::IpLen), st);
                self.read(Part::Length, st);
                self.write(Part::Length, st, false);
                // What is left is the datagram: as long as its header at least.
                st.checked = match (at, st.checked) {
                    (Some(p), Some((q, k))) if p == q && k.len_ok => Some((
                        p,
                        Checked {
                            avail: k.ihl * 4,
                            ..k
                        },
                    )),
                    _ => None,
                };
                self.p.removes_bytes = true;
                let who = self.who(l);
                self.p.note_length(&who, "cut at the IPv4 length");
            }
            Effect::DstAnnoFromIpDst => {
                let at = self.ip_pos(anchor, st);
                self.p.ip_header = self.p.ip_header.add(at);
                self.derive(Part::Anno(Field::DstIpAnno), Part::Field(Field::IpDst));
                self.write(Part::Anno(Field::DstIpAnno), st, true);
            }
            Effect::SetIpChecksum => {
                self.read_field(Field::IpChecksumOk, anchor, st);
                self.write(Part::IpChecksum, st, false);
            }
        }
    }

    /// Takes element `l` at its declaration.
    fn declared(&mut self, l: usize, d: &Declared, st: &State) -> State {
        let anchor = d.ip_at;
        let mut st = *st;
        for f in &d.reads {
            self.read_field(*f, anchor, &st);
        }
        for f in &d.writes {
            // Not known to set the whole field on every packet: a read too, not a kill.
            self.write_field(*f, &Op::Identity, anchor, &mut st);
        }
        if d.ip_checksum {
            self.read(Part::IpChecksum, &st);
            self.write(Part::IpChecksum, &mut st, false);
        }
        if d.l4_checksum {
            self.read(Part::L4Checksum, &st);
            self.write(Part::L4Checksum, &mut st, false);
        }
        for (access, part) in [(d.ip_options, Part::IpOptions), (d.payload, Part::Payload)] {
            match access {
                Access::Ignore => {}
                Access::Read => self.read(part, &st),
                Access::Write => {
                    self.read(part, &st);
                    self.write(part, &mut st, false);
                }
            }
        }
        if d.sets_headers {
            // May set them (a parse that finds the headers): where they were, or there.
            self.write(Part::MacHeader, &mut st, false);
            self.write(Part::NetHeader, &mut st, false);
            let here = |p: Option<i32>| p.map_or(Pos::Unknown, Pos::At);
            let (mac, net) = (here(st.pulled), here(self.ip_pos(anchor, &st)));
            if st.mac != mac {
                st.mac = Pos::Unknown;
            }
            if st.net != net {
                st.net = Pos::Unknown;
            }
        }
        if d.drops {
            self.p.may_drop = true;
            let who = format!("{} (declared)", self.nf.classes[l]);
            self.p.drop_reasons.insert(who);
        }
        if d.stateful {
            let who = self.who(l);
            self.p.note_state(&who, "declared state");
        }
        let who = self.who(l);
        if !self.p.declared.contains(&who) {
            self.p.declared.push(who);
        }
        st
    }

    /// Walks the NF from its inputs.
    fn run(mut self) -> Profile {
        let nf = self.nf;
        let mut work: Vec<(usize, State)> = Vec::new();
        for (l, role) in nf.roles.iter().enumerate() {
            let name = match role {
                Role::FromDevice(d) => d.clone(),
                Role::FromDump(f) => format!("dump:{}", f.display()),
                _ => continue,
            };
            if !self.p.inputs.contains(&name) {
                self.p.inputs.push(name);
            }
            work.push((
                l,
                State {
                    pulled: Some(0),
                    mac: Pos::Inherited,
                    net: Pos::Inherited,
                    killed: 0,
                    checked: None,
                },
            ));
        }
        let mut seen: HashSet<(usize, State)> = HashSet::new();
        while let Some((l, st)) = work.pop() {
            if !seen.insert((l, st)) {
                continue;
            }
            if seen.len() > MAX_STATES {
                let who = nf.name.clone();
                self.p.everything(&who, "the walk did not settle");
                break;
            }
            match &nf.roles[l] {
                Role::ToDevice(d) => {
                    self.exit(d.clone(), &st, l);
                    continue;
                }
                Role::ToDump(f) => {
                    self.exit(format!("dump:{}", f.display()), &st, l);
                    continue;
                }
                _ => {}
            }
            let g = self.ex.global(self.n, l) as usize;
            let el = self.ex.element(g);
            let outs = nf.edges[l].clone();
            let next = |o: usize| outs.get(o).copied().flatten().map(|e| e.element);
            match el.model() {
                Some(m) => {
                    let d = el.declared();
                    for (l2, st2) in self.model(l, &m, d.as_ref(), &st) {
                        if let Some(t) = l2.and_then(next) {
                            work.push((t, st2));
                        }
                    }
                }
                None => {
                    let st2 = match el.declared() {
                        Some(d) => self.declared(l, &d, &st),
                        None => {
                            let who = self.who(l);
                            self.p.everything(&who, "no model, declares nothing");
                            unknown()
                        }
                    };
                    for o in 0..outs.len() {
                        if let Some(t) = next(o) {
                            work.push((t, st2));
                        }
                    }
                }
            }
        }
        self.p.inputs.sort();
        self.p.outputs.sort();
        self.p
    }

    /// The packet leaves the NF by `iface` with `st`.
    fn exit(&mut self, iface: String, st: &State, l: usize) {
        if !self.p.outputs.contains(&iface) {
            self.p.outputs.push(iface);
        }
        match st.pulled {
            Some(0) => {}
            Some(k) if k > 0 => {
                self.p.removes_bytes = true;
                let who = self.who(l);
                self.p
                    .note_length(&who, &format!("leaves {k} bytes shorter in front"));
            }
            Some(k) => {
                self.p.adds_bytes = true;
                let (who, what) = (self.who(l), format!("leaves {} bytes longer in front", -k));
                self.p.note_length(&who, &what);
            }
            None => {
                self.p.adds_bytes = true;
                self.p.removes_bytes = true;
                let who = self.who(l);
                self.p.note_length(&who, "leaves with an unknown start");
            }
        }
    }

    /// Takes element `l` by its model: the (output, state) pairs its cases lead to.
    fn model(
        &mut self,
        l: usize,
        m: &Model,
        declared: Option<&Declared>,
        st: &State,
    ) -> Vec<(Option<usize>, State)> {
        let mut next = Vec::new();
        // What the packets reaching the current case are known to satisfy.
        let mut rest = *st;
        let at = match m.ip_at {
            IpAnchor::Data(o) => st.pulled.map(|k| k + i32::from(o)),
            IpAnchor::Annotation => match st.net {
                Pos::At(p) => Some(p),
                _ => None,
            },
        };
        for c in &m.cases {
            for (f, _) in c.filter.fields() {
                self.read_field(f, m.ip_at, &rest);
            }
            let known = match (at, rest.checked) {
                (Some(p), Some((q, k))) if p == q => k,
                _ => Checked::default(),
            };
            if !feasible(&c.filter, &known) {
                continue;
            }
            let mut st2 = rest;
            if let Some(p) = at {
                rest.checked = Some((p, narrowed(&c.filter, known)));
                st2.checked = Some((p, known));
            }
            for e in &c.effects {
                self.effect(l, e, m.ip_at, &mut st2);
            }
            if !c.byte_stats.is_empty() {
                self.read(Part::Length, &st2);
            }
            for s in c.stats.iter().chain(&c.byte_stats) {
                let who = self.who(l);
                self.p.note_state(&who, &format!("counts {s}"));
            }
            match &c.outcome {
                Outcome::Out(o) => next.push((Some(*o), st2)),
                Outcome::Drop(r) => {
                    self.p.may_drop = true;
                    self.p.drop_reasons.insert((*r).to_string());
                }
                Outcome::Copies(n) => {
                    self.p.makes_packets = true;
                    for o in 0..*n {
                        next.push((Some(o), st2));
                    }
                }
                Outcome::Runtime => {
                    // The element runs itself on these packets: what it declares for them,
                    // or anything.
                    let after = match declared {
                        Some(d) => self.declared(l, d, &st2),
                        None => {
                            let who = self.who(l);
                            self.p
                                .everything(&who, "runs itself on some packets, declares nothing");
                            unknown()
                        }
                    };
                    for o in 0..self.nf.edges[l].len() {
                        next.push((Some(o), after));
                    }
                }
            }
        }
        next
    }
}

/// Whether some packet with what `k` says can match `filter`.
fn feasible(filter: &space::Filter, k: &Checked) -> bool {
    let none_from = |f: Field, lo: u128| {
        let set = filter.get(f);
        set.intersection(&space::FieldSet::range(lo, f.max_value()))
            .is_empty()
    };
    !(none_from(Field::IpAvail, k.avail)
        || none_from(Field::IpIhl, k.ihl)
        || (k.len_ok && none_from(Field::IpLenOk, 1)))
}

/// What packets that do not match `filter` (and satisfy `k`) are known to satisfy: only a
/// filter on one field tells something.
fn narrowed(filter: &space::Filter, mut k: Checked) -> Checked {
    let mut fields = filter.fields();
    let (Some((f, set)), None) = (fields.next(), fields.next()) else {
        return k;
    };
    let least_outside = |lo: u128| {
        let out = set
            .complement(f.width())
            .intersection(&space::FieldSet::range(lo, f.max_value()));
        out.first()
    };
    match f {
        Field::IpAvail => k.avail = least_outside(k.avail).unwrap_or(k.avail),
        Field::IpIhl => k.ihl = least_outside(k.ihl).unwrap_or(k.ihl),
        Field::IpLenOk if !set.contains(1) => k.len_ok = true,
        _ => {}
    }
    k
}

fn unknown() -> State {
    State {
        pulled: None,
        mac: Pos::Unknown,
        net: Pos::Unknown,
        killed: 0,
        checked: None,
    }
}

/// The action profile of NF `n` of `ex` (see the module documentation).
pub fn profile_nf(ex: &Executor, n: usize) -> Profile {
    let nf = &ex.nfs()[n];
    Walk {
        ex,
        nf,
        n,
        p: Profile::new(nf, n),
    }
    .run()
}

/// The action profiles of every NF of `ex`, in [`Executor::nfs`] order.
pub fn profiles(ex: &Executor) -> Vec<Profile> {
    (0..ex.nfs().len()).map(|n| profile_nf(ex, n)).collect()
}

/// Profiles as a table: one line per NF with Table II's columns, the nearest paper kinds and
/// their rows, then per NF the parts read and written and the notes.
pub fn table(profiles: &[Profile]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let w = profiles
        .iter()
        .map(|p| p.nf.len())
        .max()
        .unwrap_or(2)
        .max(2);
    let _ = writeln!(
        o,
        "{:w$}  HDR/PL rd  HDR/PL wr  add/rm  drop  state  | nearest paper kind(s): their row",
        "NF"
    );
    for p in profiles {
        let r = p.row();
        let y = |b: bool| if b { "Y" } else { "N" };
        let (kinds, d) = p.kinds();
        let rows: BTreeMap<String, Vec<&str>> = kinds.iter().fold(BTreeMap::new(), |mut m, k| {
            m.entry(k.paper_row().to_string())
                .or_insert_with(Vec::new)
                .push(k.name());
            m
        });
        let kinds_s: Vec<String> = rows
            .iter()
            .map(|(row, ks)| format!("{}: {row}", ks.join("/")))
            .collect();
        let _ = writeln!(
            o,
            "{:w$}  {}/{}        {}/{}        {}       {}     {}      | {} (differs in {d})",
            p.nf,
            y(r.header_read),
            y(r.payload_read),
            y(r.header_write),
            y(r.payload_write),
            y(r.add_remove),
            y(r.drop),
            y(p.stateful),
            kinds_s.join("; "),
        );
    }
    for p in profiles {
        let list = |s: &BTreeSet<Part>| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.iter().map(Part::to_string).collect::<Vec<_>>().join(" ")
            }
        };
        let _ = writeln!(
            o,
            "\n{} (in: {}; out: {}; IPv4 header from byte {})",
            p.nf,
            p.inputs.join(" "),
            p.outputs.join(" "),
            p.ip_header
        );
        let _ = writeln!(o, "  reads:  {}", list(&p.reads));
        let _ = writeln!(o, "  writes: {}", list(&p.writes));
        for (anno, parts) in &p.derived {
            let _ = writeln!(o, "  reads for {anno} only: {}", list(parts));
        }
        if !p.length_changes.is_empty() {
            let _ = writeln!(o, "  length: {}", notes_line(&p.length_changes));
        }
        if p.may_drop {
            let r: Vec<&str> = p.drop_reasons.iter().map(String::as_str).collect();
            let _ = writeln!(o, "  drops:  {}", r.join(", "));
        }
        if p.stateful {
            let _ = writeln!(o, "  state:  {}", notes_line(&p.state));
        }
        if !p.declared.is_empty() {
            let _ = writeln!(o, "  taken at their declaration: {}", p.declared.join(", "));
        }
        if !p.conservative.is_empty() {
            let _ = writeln!(
                o,
                "  taken as doing anything: {}",
                notes_line(&p.conservative)
            );
        }
    }
    o
}
