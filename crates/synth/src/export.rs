//! `fusebox synth --click`: the synthesized chain as one configuration of stock Click
//! elements, as SNF hands FastClick its synthesized configuration.
//!
//! Per entry interface the configuration holds:
//! - `FromDevice(NF_IFACE)` and a copy of the entry's first elements when they only strip
//!   and check headers (`Strip`, `CheckIPHeader`, `CheckIPHeader2`): they drop exactly the
//!   classes the program drops there;
//! - one `IPClassifier` whose outputs are the traffic classes (a class's pattern is written
//!   from its filter, then compiled back and checked: it must contain the class and share
//!   no packet with any other class the front lets through), the rest going to `Discard`
//!   (early discard);
//! - per class: the stateful rewriters it passes, in chain order, each the original element
//!   with its original qualified name and configuration (so its choices repeat); packets
//!   reach a rewriter painted with the class's colour and leave through a `PaintSwitch` that
//!   sends them on to their class; run-time checks become `IPClassifier`s on the rewritten
//!   header; then the class's remaining writes, each once: `k` `DecIPTTL`s for a decrement
//!   of `k` (stock Click has no other), `EtherEncap` or `Unstrip` for the link layer, then
//!   `ToDevice(NF_IFACE)`;
//! - where a class hands packets to an element it cannot model, the original elements from
//!   there on, as written (links between NFs become plain connections).
//!
//! What cannot be written this way is refused with the reason, never approximated.
//! [`crate::verify::compare_export`] checks a configuration against its chain on traffic.

use chain::program::{Finish, IpChecksum, Node, NodeId, Program, Tuple, Val};
use chain::{Executor, Place};
use elements::ipfilter::{parse_pattern, space};
use elements::model::{Field, FieldSet, Filter, FilterSet};
use elements::{ConfigError, Names, Role};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use wire::checksum::fold;

/// The device name an interface `iface` of NF `nf` gets in the exported configuration.
pub fn device(nf: &str, iface: &str) -> String {
    format!("{nf}_{iface}")
}

/// The classes whose fields the front (`Strip`, `CheckIPHeader`) decides, not the
/// classifier.
fn front_field(f: Field) -> bool {
    matches!(
        f,
        Field::FrameLen
            | Field::IpAvail
            | Field::IpVersion
            | Field::IpIhl
            | Field::IpLenOk
            | Field::IpChecksumOk
            | Field::IpOptions
            | Field::L4Avail
            | Field::L4Len
            | Field::InPort
            | Field::Paint
            | Field::DstIpAnno
            | Field::PacketType
    )
}

/// An IPv4 interval as CIDR blocks.
fn cidrs(lo: u128, hi: u128) -> Vec<(u32, u32)> {
    let (mut lo, hi) = (lo as u64, hi as u64);
    let mut out = Vec::new();
    while lo <= hi {
        let mut len = 32u32;
        while len > 0 {
            let size = 1u64 << (32 - (len - 1));
            if lo % size != 0 || lo + size - 1 > hi {
                break;
            }
            len -= 1;
        }
        out.push((lo as u32, len));
        lo += 1u64 << (32 - len);
    }
    out
}

fn ip(v: u32) -> String {
    std::net::Ipv4Addr::from(v).to_string()
}

/// `WORD >= lo and WORD <= hi` (or `WORD == v`), one clause per interval, or-ed.
fn ranges(word: &str, set: &FieldSet) -> String {
    let parts: Vec<String> = set
        .intervals()
        .map(|(lo, hi)| {
            if lo == hi {
                format!("{word} == {lo}")
            } else {
                format!("({word} >= {lo} and {word} <= {hi})")
            }
        })
        .collect();
    or(parts)
}

fn or(parts: Vec<String>) -> String {
    match parts.len() {
        0 => "false".to_string(),
        1 => parts.into_iter().next().unwrap_or_default(),
        _ => format!("({})", parts.join(" or ")),
    }
}

/// Why a synthesized program has no exact Click form: the construct the export cannot
/// write as stock elements (named by the element or value involved).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A class tests a field no `IPClassifier` pattern can test.
    #[error("a test on {0:?}")]
    Test(Field),
    /// A pattern the export wrote does not parse back (a bug of the export).
    #[error("`{text}`: {error:?}")]
    Pattern {
        /// The pattern.
        text: String,
        /// The parser's complaint.
        #[source]
        error: ConfigError,
    },
    /// A pattern whose packets are not an exact header space.
    #[error("`{text}` has no exact header-space form")]
    NotExact {
        /// The pattern.
        text: String,
    },
    /// A class of a classification that cannot be exported (`what`: which classification).
    #[error("{what} class #{index}: {source} cannot be exported")]
    Class {
        /// The classification (`entry NF.IFACE`, `a later`, `a cell`).
        what: String,
        /// The class's index.
        index: usize,
        /// Why.
        source: Box<ExportError>,
    },
    /// A pattern that misses packets of its class.
    #[error("{what} class #{index}: the pattern `{text}` does not contain the class {class}; compiled: {compiled}")]
    NotContained {
        /// The classification.
        what: String,
        /// The class's index.
        index: usize,
        /// The pattern.
        text: String,
        /// The class, as a filter.
        class: String,
        /// What the pattern compiled to.
        compiled: String,
    },
    /// A pattern that matches packets of another class.
    #[error("{what} class #{index}: the pattern `{text}` also matches packets of another class")]
    Overlap {
        /// The classification.
        what: String,
        /// The class's index.
        index: usize,
        /// The pattern.
        text: String,
    },
    /// The program refers to a node it does not have (a bug of synthesis).
    #[error("node {0} is missing")]
    MissingNode(NodeId),
    /// A route table synthesized into a run-time lookup.
    #[error("a long route table synthesized into a run-time lookup (not exported)")]
    RouteLookup,
    /// A classification on a value only known at run time.
    #[error("a run-time check on {0:?}")]
    RuntimeCheck(Val),
    /// The chain reads paint, which the export uses to route packets after a rewriter.
    #[error("the chain reads paint, which the export uses to send packets on after a rewriter")]
    PaintAtRewriter,
    /// The chain reads paint, which the export uses after the rewriters.
    #[error("the chain reads paint, which the export uses after rewriters")]
    PaintAfterRewriters,
    /// More cells before a rewriter than the export splits packets into.
    #[error("more than 64 cells before {0}")]
    TooManyCells(String),
    /// An element reads a field after a write the export makes later.
    #[error("{element} reads {field:?} after a write the export makes later")]
    ReadAfterWrite {
        /// The element (as named in its NF).
        element: String,
        /// The field.
        field: Field,
    },
    /// More classes through a rewriter than `Paint` colours.
    #[error("more than 255 classes pass {0}")]
    TooManyColours(String),
    /// A rewriter output whose packets continue differently after a rewrite and a pass.
    #[error("{rewriter} output {output} continues differently after a rewrite and a pass")]
    Divergent {
        /// The rewriter.
        rewriter: String,
        /// Its output.
        output: u32,
    },
    /// A write of a flow field that no rewriter makes.
    #[error("a write of {0:?} no rewriter makes")]
    UnmadeWrite(Field),
    /// A write no stock element makes.
    #[error("the write {field:?} := {value:?}")]
    Write {
        /// The field written.
        field: Field,
        /// The value.
        value: Val,
    },
    /// An incremental IPv4 checksum update other than TTL decrements.
    #[error("an IPv4 checksum update ({0:#x}) other than TTL decrements")]
    Checksum(u32),
    /// A class cut at the IPv4 length without a `CheckIPHeader` to do it.
    #[error("a class cut at the IPv4 length without a CheckIPHeader in front")]
    TrimWithoutCheck,
    /// A change of the frame's layout no stock element chain makes.
    #[error("a layout change the export cannot make (head {now} -> {head}, link-layer writes {writes:?})")]
    Layout {
        /// Header offset before.
        now: u16,
        /// Header offset wanted.
        head: u16,
        /// Link-layer writes (destination, source, type).
        writes: [Option<u128>; 3],
    },
    /// A destination annotation from a value no stock element sets it from.
    #[error("a destination annotation from {0:?}")]
    DestinationAnno(Val),
    /// A paint annotation from a value no stock element sets it from.
    #[error("a paint annotation from {0:?}")]
    PaintAnno(Val),
    /// A `Strip` whose argument is not a byte count.
    #[error("Strip({0})")]
    Strip(String),
}

/// A Click `IPClassifier` pattern for the tests of `filter` on header fields (front fields
/// are left to the front), or why there is none.
fn pattern(filter: &Filter) -> Result<String, ExportError> {
    let proto = filter.get(Field::IpProto);
    let qual = match (proto.first(), proto.last()) {
        (Some(6), Some(6)) => "tcp ",
        (Some(17), Some(17)) => "udp ",
        _ => "",
    };
    let mut clauses = Vec::new();
    let l4 = behind_front(filter).get(Field::L4Len);
    if !l4.is_full(Field::L4Len.width()) {
        // Behind the front, what follows the IPv4 header is the transport's bytes: a read of
        // byte N (masked to nothing) is true exactly when there are more than N.
        let has = |n: u128| format!("transp[{}] <= 255", n - 1);
        let parts = l4
            .intervals()
            .map(|(lo, hi)| {
                let mut p = Vec::new();
                if lo > 0 {
                    p.push(has(lo));
                }
                if hi < Field::L4Len.max_value() {
                    p.push(format!("not {}", has(hi + 1)));
                }
                if p.is_empty() {
                    "true".to_string()
                } else {
                    format!("({})", p.join(" and "))
                }
            })
            .collect();
        clauses.push(or(parts));
    }
    for (f, set) in filter.fields() {
        if front_field(f) || set.is_full(f.width()) {
            continue;
        }
        let c = match f {
            Field::IpSrc | Field::IpDst => {
                let dir = if f == Field::IpSrc { "src" } else { "dst" };
                or(set
                    .intervals()
                    .flat_map(|(lo, hi)| cidrs(lo, hi))
                    .map(|(a, l)| {
                        if l == 32 {
                            format!("{dir} host {}", ip(a))
                        } else {
                            format!("{dir} net {}/{l}", ip(a))
                        }
                    })
                    .collect())
            }
            Field::IpProto => match qual {
                "" => ranges("ip[9]", set),
                q => q.trim().to_string(),
            },
            Field::IpTtl => ranges("ip ttl", set),
            Field::IpLen => ranges("ip len", set),
            Field::IpTos => ranges("ip tos", set),
            Field::IpId => ranges("ip id", set),
            Field::IpFlags => or(set
                .intervals()
                .flat_map(|(lo, hi)| lo..=hi)
                .map(|v| format!("ip[6:2] & 57344 == {}", v << 13))
                .collect()),
            Field::IpFragOffset => ranges("ip[6:2] & 8191", set),
            Field::SrcPort => ranges(&format!("src {qual}port"), set),
            Field::DstPort => ranges(&format!("dst {qual}port"), set),
            Field::TcpFlags => ranges("tcp[13]", set),
            Field::IcmpType => ranges("icmp[0]", set),
            Field::IcmpCode => ranges("icmp[1]", set),
            other => return Err(ExportError::Test(other)),
        };
        clauses.push(c);
    }
    Ok(if clauses.is_empty() {
        "true".to_string()
    } else {
        clauses.join(" and ")
    })
}

/// The packets `text` matches, compiled the way `IPClassifier` is.
fn compiled(text: &str) -> Result<FilterSet, ExportError> {
    let expr = parse_pattern(text, &Names::new()).map_err(|error| ExportError::Pattern {
        text: text.to_string(),
        error,
    })?;
    space::compile(&expr).ok_or_else(|| ExportError::NotExact {
        text: text.to_string(),
    })
}

fn single(f: &Filter) -> FilterSet {
    let mut s = FilterSet::empty();
    s.insert(f);
    s
}

/// `f` as packets behind a front that checked and trimmed the IPv4 header see it: the
/// version is 4, the length and checksum are good, the bytes after the IPv4 header are
/// exactly its length (so what is available is what the header says), and the frame's
/// length says nothing more.
fn behind_front(f: &Filter) -> Filter {
    let mut g = Filter::any();
    for (field, set) in f.fields() {
        match field {
            Field::FrameLen | Field::IpVersion | Field::IpLenOk | Field::IpChecksumOk => {}
            Field::IpAvail => g.restrict(Field::IpLen, set),
            Field::L4Avail => g.restrict(Field::L4Len, set),
            other => g.restrict(other, set),
        }
    }
    g
}

fn behind_front_set(s: &FilterSet) -> FilterSet {
    let mut out = FilterSet::empty();
    for m in s.members() {
        out.insert(&behind_front(m));
    }
    out
}

/// The packets the synthesized part sees: a front sends those with fewer than 20 bytes
/// after the IPv4 header (or none: later fragments) to the original elements, where what
/// the padding a check trimmed held cannot matter.
fn long() -> Filter {
    Filter::any().with(Field::L4Len, FieldSet::range(20, Field::L4Len.max_value()))
}

/// What the short-packet front sends to the original elements.
const SHORT: &str = "not transp[19] <= 255";

/// Patterns for `classes` (index, filter) that are exact given `within`: each contains its
/// class and shares no packet with any of `others` (compared behind the front).
fn patterns(
    classes: &[(usize, Filter)],
    others: &[Filter],
    within: &Filter,
    what: &str,
) -> Result<Vec<String>, ExportError> {
    let mut out = Vec::new();
    for (k, (i, f)) in classes.iter().enumerate() {
        let text = pattern(f).map_err(|e| ExportError::Class {
            what: what.to_string(),
            index: *i,
            source: Box::new(e),
        })?;
        let s = behind_front_set(&compiled(&text)?);
        let f = &behind_front(f);
        let within = &behind_front(within).intersection(&long());
        if !single(&f.intersection(within)).is_subset(&s) {
            return Err(ExportError::NotContained {
                what: what.to_string(),
                index: *i,
                text,
                class: crate::show::filter(f),
                compiled: s
                    .members()
                    .iter()
                    .map(crate::show::filter)
                    .collect::<Vec<_>>()
                    .join(" | "),
            });
        }
        let clash = classes
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .map(|(_, (_, g))| g)
            .chain(others)
            .any(|g| {
                let g = behind_front(g);
                !s.intersection(&single(&g.intersection(within))).is_empty()
            });
        if clash {
            return Err(ExportError::Overlap {
                what: what.to_string(),
                index: *i,
                text,
            });
        }
        out.push(text);
    }
    Ok(out)
}

/// What the exported packet holds in an address or port: the value it arrived with, or the
/// one a rewriter (register) chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prov {
    Orig,
    Reg(u8),
}

#[derive(Debug, Clone)]
struct Ctx {
    /// Per tuple field: where its current value comes from.
    prov: [Prov; 4],
    /// Bytes pulled off the front of the frame so far.
    head: u16,
    /// The packets that can be here (frame-as-arrived fields).
    region: Filter,
    /// Whether the front cut packets at their IPv4 length.
    trims: bool,
    /// Once a rewriter may have changed the header: the cell of the packets here, decided
    /// before the first rewriter (every later classification is then known).
    cell: Option<Filter>,
}

struct Out<'a> {
    ex: &'a Executor,
    prog: &'a Program,
    decls: Vec<String>,
    conns: Vec<String>,
    n: usize,
    /// Rewriters (global index) → (colours used, per output: PaintSwitch name).
    rewriters: BTreeMap<u32, (u32, BTreeMap<u32, String>)>,
    /// Per rewriter output and colour: where the packets go (element name, input port).
    dispatch: BTreeMap<(u32, u32, u32), (String, u32)>,
    /// Elements of the original chain emitted as written (global index).
    remainder: BTreeSet<u32>,
    /// Edges into original elements from the synthesized part: (from, port) → element, port.
    handoffs: Vec<((String, u32), (u32, u32))>,
    /// Whether the original chain reads paint anywhere.
    reads_paint: bool,
}

impl<'a> Out<'a> {
    fn new_elem(&mut self, class: &str, config: &str) -> String {
        self.n += 1;
        let name = format!("x{}", self.n);
        self.decls.push(format!("{name} :: {class}({config});"));
        name
    }

    fn connect(&mut self, from: &(String, u32), to: &str, port: u32) {
        let (f, p) = from;
        self.conns.push(format!("{f}[{p}] -> [{port}]{to};"));
    }

    /// An `IPClassifier` fed from `from` whose outputs are `patterns` in order, and one
    /// more, to `Discard`, for everything else; returns its name.
    fn classifier(&mut self, from: &(String, u32), patterns: &[String]) -> String {
        let mut cfg = patterns.to_vec();
        cfg.push("-".to_string());
        let cl = self.new_elem("IPClassifier", &cfg.join(",\n    "));
        self.connect(from, &cl, 0);
        let rest = self.new_elem("Discard", "");
        self.connect(&(cl.clone(), patterns.len() as u32), &rest, 0);
        cl
    }

    fn chain(&mut self, from: (String, u32), class: &str, config: &str) -> (String, u32) {
        let e = self.new_elem(class, config);
        self.connect(&from, &e, 0);
        (e, 0)
    }

    /// The original element `g`'s name in the exported configuration.
    fn original_name(&self, g: u32) -> String {
        self.ex.element_name(g as usize)
    }

    fn iface_name(&self, g: u32) -> String {
        let name = self.ex.element_name(g as usize);
        let nf = name.split('/').next().unwrap_or("").to_string();
        match self.ex.element(g as usize).role() {
            Role::FromDevice(i) | Role::ToDevice(i) => device(&nf, &i),
            _ => name,
        }
    }

    /// Emits node `node` reached from `from` in `ctx`.
    fn node(
        &mut self,
        from: (String, u32),
        node: NodeId,
        ctx: Ctx,
        seg: &[Field],
    ) -> Result<(), ExportError> {
        let prog = self.prog;
        match prog.nodes.get(node as usize) {
            None => Err(ExportError::MissingNode(node)),
            Some(Node::Lookup { .. }) => Err(ExportError::RouteLookup),
            Some(Node::Drop) => {
                self.chain(from, "Discard", "");
                Ok(())
            }
            Some(Node::Fork { branches }) => {
                let tee = self.new_elem("Tee", &branches.len().to_string());
                self.connect(&from, &tee, 0);
                for (k, b) in branches.iter().enumerate() {
                    self.node((tee.clone(), k as u32), *b, ctx.clone(), seg)?;
                }
                Ok(())
            }
            Some(Node::Classify(classes)) if ctx.cell.is_some() => {
                // Decided before the first rewriter: the cell lies in one class.
                let cell = ctx.cell.clone().unwrap_or_else(Filter::any);
                let hit = classes
                    .iter()
                    .find(|c| cell.is_subset(&box_of(&c.tests, seg)));
                match hit {
                    Some(c) => self.node(from, c.node, ctx.clone(), seg),
                    None => {
                        self.chain(from, "Discard", "");
                        Ok(())
                    }
                }
            }
            Some(Node::Classify(classes)) => {
                let filters: Vec<(usize, Filter)> = classes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i, box_of(&c.tests, seg)))
                    .collect();
                // Classifications test fields as they arrived: synthesis turns a test on a
                // field a rewriter chose into a run-time check, so the fields tested here are
                // as they arrived in the exported packet too (writes other than the
                // rewriters' come at the end).
                // Classes that only drop go to the classifier's last output, `Discard`.
                let (kept, drops): (Vec<_>, Vec<_>) = filters.into_iter().partition(|(i, _)| {
                    !matches!(prog.nodes.get(classes[*i].node as usize), Some(Node::Drop))
                });
                let others: Vec<Filter> = drops.into_iter().map(|(_, f)| f).collect();
                let texts = patterns(&kept, &others, &ctx.region, "a later")?;
                let cl = self.classifier(&from, &texts);
                for (k, (i, f)) in kept.iter().enumerate() {
                    let mut c2 = ctx.clone();
                    c2.region = ctx.region.intersection(f);
                    self.node((cl.clone(), k as u32), classes[*i].node, c2, seg)?;
                }
                Ok(())
            }
            Some(Node::Check { tests, yes, no }) => {
                let mut parts = Vec::new();
                for (v, iv) in tests {
                    let Val::Reg(_, t, 0) = v else {
                        return Err(ExportError::RuntimeCheck(*v));
                    };
                    let k = t.index();
                    let f = Filter::any().with(
                        Field::TUPLE[k],
                        FieldSet::from_intervals(iv.iter().copied()),
                    );
                    parts.push(pattern(&f)?);
                }
                let text = if parts.is_empty() {
                    "true".to_string()
                } else {
                    parts.join(" and ")
                };
                let cl = self.new_elem("IPClassifier", &format!("{text}, -"));
                self.connect(&from, &cl, 0);
                self.node((cl.clone(), 0), *yes, ctx.clone(), seg)?;
                self.node((cl, 1), *no, ctx, seg)
            }
            Some(Node::Rewrite {
                element,
                port,
                reg,
                tuple,
                branches,
                ..
            }) => {
                if self.reads_paint {
                    return Err(ExportError::PaintAtRewriter);
                }
                if ctx.cell.is_none() {
                    // Classifications after a rewriter read the header as it arrived, which
                    // the rewriter changes in the exported packet: split the packets here,
                    // before it, into cells every later classification agrees on.
                    let mut later = Vec::new();
                    later_classifies(prog, node, &mut later, &mut BTreeSet::new());
                    let mut cells = vec![ctx.region.clone()];
                    for n in later {
                        if let Some(Node::Classify(cs)) = prog.nodes.get(n as usize) {
                            let boxes: Vec<Filter> =
                                cs.iter().map(|c| box_of(&c.tests, seg)).collect();
                            let mut next = Vec::new();
                            for c in &cells {
                                let mut rest = vec![c.clone()];
                                for b in &boxes {
                                    let i = c.intersection(b);
                                    if !i.is_empty() {
                                        next.push(i);
                                    }
                                    rest = rest.iter().flat_map(|r| r.difference(b)).collect();
                                }
                                next.extend(rest.into_iter().filter(|r| !r.is_empty()));
                            }
                            cells = next;
                            if cells.len() > 64 {
                                return Err(ExportError::TooManyCells(
                                    self.original_name(*element),
                                ));
                            }
                        }
                    }
                    if cells.len() == 1 {
                        let mut c2 = ctx.clone();
                        c2.cell = cells.pop();
                        return self.node(from, node, c2, seg);
                    }
                    let list: Vec<(usize, Filter)> = cells.iter().cloned().enumerate().collect();
                    let texts = patterns(&list, &[], &ctx.region, "a cell")?;
                    let cl = self.classifier(&from, &texts);
                    for (k, c) in cells.into_iter().enumerate() {
                        let mut c2 = ctx.clone();
                        c2.region = ctx.region.intersection(&c);
                        c2.cell = Some(c);
                        self.node((cl.clone(), k as u32), node, c2, seg)?;
                    }
                    return Ok(());
                }
                for (k, v) in tuple.iter().enumerate() {
                    // The value synthesis says the rewriter reads must be the packet's own:
                    // as it arrived or as a rewriter left it (no write in between, which the
                    // export would make later).
                    let ok = match v {
                        Val::Orig(f, 0) => *f == Field::TUPLE[k],
                        Val::Reg(_, t, 0) => t.index() == k,
                        // A constant an earlier rewriter's pattern wrote.
                        Val::Const(_) => ctx.prov[k] != Prov::Orig,
                        _ => false,
                    };
                    if !ok {
                        return Err(ExportError::ReadAfterWrite {
                            element: self.original_name(*element),
                            field: Field::TUPLE[k],
                        });
                    }
                }
                let colour = {
                    let e = self
                        .rewriters
                        .entry(*element)
                        .or_insert((0, BTreeMap::new()));
                    e.0 += 1;
                    e.0
                };
                if colour > 255 {
                    return Err(ExportError::TooManyColours(self.original_name(*element)));
                }
                let p = self.chain(from, "Paint", &colour.to_string());
                let rw = self.original_name(*element);
                self.connect(&p, &rw, *port);
                let mut seen: BTreeMap<u32, NodeId> = BTreeMap::new();
                for (b, n) in branches {
                    let out = match b {
                        chain::program::Branch::Rewrite(o) | chain::program::Branch::Pass(o) => *o,
                    };
                    if seen.insert(out, *n).is_some_and(|m| m != *n) {
                        return Err(ExportError::Divergent {
                            rewriter: rw,
                            output: out,
                        });
                    }
                }
                for (out, n) in seen {
                    self.switch(*element, out);
                    let mut c2 = ctx.clone();
                    c2.prov = [Prov::Reg(*reg); 4];
                    let null = self.new_elem("Null", "");
                    self.dispatch
                        .insert((*element, out, colour), (null.clone(), 0));
                    self.node((null, 0), n, c2, seg)?;
                }
                Ok(())
            }
            Some(Node::Exit { element, finish }) => {
                let at = self.finish(from, finish, &ctx, false)?;
                let g = *element;
                let exit = match self.ex.element(g as usize).role() {
                    Role::ToDevice(_) => format!("ToDevice({})", self.iface_name(g)),
                    _ => {
                        let nf = self.ex.element_nf(g as usize) as usize;
                        let l = g - self.ex.global(nf, 0);
                        let cfg = self.ex.nfs()[nf].configs[l as usize].clone();
                        format!("{}({cfg})", self.ex.element(g as usize).class_name())
                    }
                };
                let (class, cfg) = exit.split_once('(').unwrap_or((&exit, ")"));
                let cfg = cfg.strip_suffix(')').unwrap_or(cfg).to_string();
                self.chain(at, class, &cfg);
                Ok(())
            }
            Some(Node::Handoff {
                element,
                port,
                finish,
            }) => {
                let at = self.finish(from, finish, &ctx, true)?;
                self.remainder.insert(*element);
                self.handoffs.push((at, (*element, *port)));
                Ok(())
            }
        }
    }

    /// The `PaintSwitch` after output `out` of rewriter `g`.
    fn switch(&mut self, g: u32, out: u32) -> String {
        if let Some(s) = self.rewriters.get(&g).and_then(|r| r.1.get(&out)) {
            return s.clone();
        }
        self.n += 1;
        let name = format!("x{}", self.n);
        self.rewriters
            .entry(g)
            .or_insert((0, BTreeMap::new()))
            .1
            .insert(out, name.clone());
        name
    }

    /// Emits what `finish` still has to do after the rewriters: returns where the packet is.
    fn finish(
        &mut self,
        mut at: (String, u32),
        f: &Finish,
        ctx: &Ctx,
        handoff: bool,
    ) -> Result<(String, u32), ExportError> {
        let mut ttl = 0u32;
        let mut eth: [Option<u128>; 3] = [None; 3];
        for (field, v) in &f.writes {
            match (field, v) {
                (Field::IpTtl, Val::Orig(Field::IpTtl, add)) if *add <= 0 => ttl = (-*add) as u32,
                (Field::EthDst, Val::Const(c)) => eth[0] = Some(*c),
                (Field::EthSrc, Val::Const(c)) => eth[1] = Some(*c),
                (Field::EtherType, Val::Const(c)) => eth[2] = Some(*c),
                (Field::DstIpAnno | Field::Paint | Field::PacketType, _) => {}
                (t, v) if Field::TUPLE.contains(t) => {
                    let k = Field::TUPLE.iter().position(|x| x == t).unwrap_or(0);
                    let ok = match (v, ctx.prov[k]) {
                        (Val::Reg(_, tt, 0), _) => tt.index() == k,
                        (Val::Const(_), Prov::Reg(_)) => true,
                        (Val::Orig(o, 0), _) => o == t,
                        _ => false,
                    };
                    if !ok {
                        return Err(ExportError::UnmadeWrite(*t));
                    }
                }
                (t, v) => {
                    return Err(ExportError::Write {
                        field: *t,
                        value: *v,
                    })
                }
            }
        }
        for _ in 0..ttl {
            at = self.chain(at, "DecIPTTL", "");
        }
        match f.ip_checksum {
            IpChecksum::Incremental(k) if fold(k) == fold(wire::checksum::TTL_DECREMENT * ttl) => {}
            IpChecksum::Recompute => at = self.chain(at, "SetIPChecksum", ""),
            IpChecksum::Incremental(k) => return Err(ExportError::Checksum(k)),
        }
        if f.trim && !ctx.trims {
            return Err(ExportError::TrimWithoutCheck);
        }
        match (f.head, ctx.head, eth) {
            (h, now, [None, None, None]) if h == now => {}
            (0, 14, [None, None, None]) => at = self.chain(at, "Unstrip", "14"),
            (h @ (0 | 14), 14, [Some(d), Some(s), Some(t)]) => {
                let mac = |v: u128| {
                    wire::ethernet::u64_to_mac(v as u64)
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<Vec<_>>()
                        .join(":")
                };
                at = self.chain(
                    at,
                    "EtherEncap",
                    &format!("{t:#06x}, {}, {}", mac(s), mac(d)),
                );
                if h == 14 {
                    // The next element reads from the IPv4 header; the link-layer bytes
                    // stay in front of it, as written.
                    at = self.chain(at, "Strip", "14");
                }
            }
            (h, now, e) => {
                return Err(ExportError::Layout {
                    now,
                    head: h,
                    writes: e,
                })
            }
        }
        if handoff {
            if let Some(a) = &f.annos {
                let painted = ctx.prov.iter().any(|p| *p != Prov::Orig);
                match a.dst_ip {
                    Val::Const(c) => at = self.chain(at, "SetIPAddress", &ip(c as u32)),
                    // Fresh packets arrive without one.
                    Val::Orig(Field::DstIpAnno, 0) if painted => {
                        at = self.chain(at, "SetIPAddress", "0.0.0.0")
                    }
                    Val::Orig(Field::DstIpAnno, 0) => {}
                    Val::Reg(_, Tuple::Daddr, 0) => {}
                    Val::Orig(Field::IpDst, 0)
                        if !f.writes.iter().any(|(w, _)| *w == Field::IpDst) =>
                    {
                        let off = if f.head == 0 { 30 } else { 16 };
                        at = self.chain(at, "GetIPAddress", &off.to_string());
                    }
                    ref v => return Err(ExportError::DestinationAnno(*v)),
                }
                match a.paint {
                    Val::Const(c) => at = self.chain(at, "Paint", &c.to_string()),
                    // Fresh packets arrive unpainted; rewriters' classes were painted.
                    Val::Orig(Field::Paint, 0) if painted => at = self.chain(at, "Paint", "0"),
                    Val::Orig(Field::Paint, 0) => {}
                    ref v => return Err(ExportError::PaintAnno(*v)),
                }
            }
        }
        Ok(at)
    }
}

/// The classification nodes below `n` (through rewriters and checks), each once.
fn later_classifies(prog: &Program, n: NodeId, out: &mut Vec<NodeId>, seen: &mut BTreeSet<NodeId>) {
    if !seen.insert(n) {
        return;
    }
    match prog.nodes.get(n as usize) {
        Some(Node::Classify(cs)) => {
            out.push(n);
            for c in cs {
                later_classifies(prog, c.node, out, seen);
            }
        }
        Some(Node::Rewrite { branches, .. }) => {
            for (_, b) in branches {
                later_classifies(prog, *b, out, seen);
            }
        }
        Some(Node::Check { yes, no, .. }) => {
            later_classifies(prog, *yes, out, seen);
            later_classifies(prog, *no, out, seen);
        }
        Some(Node::Fork { branches }) => {
            for b in branches {
                later_classifies(prog, *b, out, seen);
            }
        }
        _ => {}
    }
}

fn box_of(tests: &[(u16, Vec<(u128, u128)>)], fields: &[Field]) -> Filter {
    let mut f = Filter::any();
    for (i, iv) in tests {
        if let Some(field) = fields.get(usize::from(*i)) {
            f.restrict(*field, &FieldSet::from_intervals(iv.iter().copied()));
        }
    }
    f
}

/// The Click configuration of stock elements equivalent to the chain `ex` runs with the
/// synthesized `prog` (see the module documentation), or why there is none.
pub fn click(ex: &Executor, prog: &Program, title: &str) -> Result<String, ExportError> {
    let reads_paint = (0..ex.element_count()).any(|g| {
        matches!(
            ex.element(g).class_name(),
            "PaintSwitch" | "CheckPaint" | "PaintTee"
        )
    });
    let mut o = Out {
        ex,
        prog,
        decls: Vec::new(),
        conns: Vec::new(),
        n: 0,
        rewriters: BTreeMap::new(),
        dispatch: BTreeMap::new(),
        remainder: BTreeSet::new(),
        handoffs: Vec::new(),
        reads_paint,
    };
    let mut starts: Vec<(&u32, &chain::program::Segment)> = prog.starts.iter().collect();
    starts.sort_by_key(|(g, _)| **g);
    for (&g, seg) in starts {
        o.entry(g, seg)?;
    }
    let region = original_region(ex, &o.remainder);
    if reads_paint && !o.rewriters.is_empty() && !region.is_empty() {
        return Err(ExportError::PaintAfterRewriters);
    }
    let used_rw: BTreeSet<u32> = o
        .rewriters
        .keys()
        .copied()
        .chain(region.iter().copied().filter(|g| is_rewriter(ex, *g)))
        .collect();
    let mut w = Wiring {
        ex,
        shared: o.rewriters.keys().copied().collect(),
        decls: rewriter_decls(ex, &used_rw),
        conns: Vec::new(),
    };
    o.rewriter_outputs(&mut w, &used_rw, &region);
    o.original_elements(&mut w, &used_rw, &region);
    for (at, (g, port)) in &o.handoffs {
        w.edge_to(format!("{}[{}]", at.0, at.1), *g, *port, &mut o.n);
    }
    Ok(assemble(title, &w, &o))
}

/// The text of an export: its header comment, the declarations (the wiring's first), then
/// the connections (the synthesized part's first).
fn assemble(title: &str, w: &Wiring<'_>, o: &Out<'_>) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "// {title}: one configuration of stock Click elements, written by `fusebox synth --click`."
    );
    let _ = writeln!(
        text,
        "// Devices are NF_IFACE; stateful elements keep their qualified names (their choices repeat)."
    );
    let _ = writeln!(
        text,
        "// Check it: fusebox verify CHAIN --against THIS_FILE --input NF.IFACE=PCAP ..."
    );
    text.push('\n');
    for d in w.decls.iter().chain(&o.decls) {
        text.push_str(d);
        text.push('\n');
    }
    text.push('\n');
    for c in o.conns.iter().chain(&w.conns) {
        text.push_str(c);
        text.push('\n');
    }
    text
}

/// The original elements the synthesized part hands packets to (`remainder`), and what
/// follows them, resolved through links.
fn original_region(ex: &Executor, remainder: &BTreeSet<u32>) -> BTreeSet<u32> {
    let mut todo: Vec<u32> = remainder.iter().copied().collect();
    let mut region: BTreeSet<u32> = BTreeSet::new();
    while let Some(g) = todo.pop() {
        let g = resolve(ex, g);
        if !region.insert(g) {
            continue;
        }
        for p in 0..ex.outputs(g as usize) {
            if let Some((_, t, _)) = ex.edge(g as usize, p) {
                todo.push(t);
            }
        }
    }
    region
}

/// Declarations of the rewriters `used_rw` and of what their configurations refer to
/// (mappers, pattern sets, address names: by their qualified names).
fn rewriter_decls(ex: &Executor, used_rw: &BTreeSet<u32>) -> Vec<String> {
    let mut declared: BTreeSet<u32> = BTreeSet::new();
    let mut decls = Vec::new();
    for &g in used_rw {
        let nf = ex.element_nf(g as usize) as usize;
        let nfd = &ex.nfs()[nf];
        let l = (g - ex.global(nf, 0)) as usize;
        let mut cfg = nfd.configs[l].clone();
        // Mappers and pattern sets are referred to by their local names.
        for (j, class) in nfd.classes.iter().enumerate() {
            if matches!(
                *class,
                "RoundRobinIPMapper" | "IPRewriterPatterns" | "AddressInfo"
            ) {
                let local = &nfd.names[j];
                cfg = replace_word(&cfg, local, &format!("{}/{local}", nfd.name));
                let dg = ex.global(nf, j);
                if declared.insert(dg) {
                    decls.push(format!(
                        "{}/{local} :: {class}({});",
                        nfd.name, nfd.configs[j]
                    ));
                }
            }
        }
        decls.push(format!(
            "{} :: {}({cfg});",
            ex.element_name(g as usize),
            ex.element(g as usize).class_name()
        ));
    }
    decls
}

/// The declarations and connections of an export's original part: rewriters, their
/// outputs, the original region and the edges into it.
struct Wiring<'a> {
    ex: &'a Executor,
    /// The rewriters the classes share (their PaintSwitches send colour 0 on as written).
    shared: BTreeSet<u32>,
    decls: Vec<String>,
    conns: Vec<String>,
}

impl Wiring<'_> {
    /// An edge from `from` into original element `t`, input `tp` (resolved through links),
    /// painted 0 first when `t` is a rewriter the classes share. `n` numbers new elements.
    fn edge_to(&mut self, from: String, t: u32, tp: u32, n: &mut usize) {
        let ex = self.ex;
        let r = resolve(ex, t);
        let tp = if r != t { 0 } else { tp };
        if self.shared.contains(&r) {
            *n += 1;
            self.decls.push(format!("x{n} :: Paint(0);"));
            self.conns.push(format!("{from} -> x{n};"));
            self.conns.push(format!("x{n} -> [{tp}]{};", o_name(ex, r)));
        } else {
            self.conns
                .push(format!("{from} -> [{tp}]{};", o_name(ex, r)));
        }
    }

    /// A `Discard` for `from` (an output nothing continues). `n` numbers new elements.
    fn discard(&mut self, from: &str, n: &mut usize) {
        *n += 1;
        self.decls.push(format!("x{n} :: Discard;"));
        self.conns.push(format!("{from} -> x{n};"));
    }
}

impl Out<'_> {
    /// The synthesized part of entry `g` (segment `seg`): a `FromDevice`, the front of
    /// elements that only strip and check headers, then the root classification and the
    /// classes it keeps.
    fn entry(&mut self, g: u32, seg: &chain::program::Segment) -> Result<(), ExportError> {
        let (ex, prog) = (self.ex, self.prog);
        // The front: the entry's first elements that only strip and check headers.
        let dev = self.iface_name(g);
        let src = self.new_elem("FromDevice", &dev);
        let mut at = (src, 0u32);
        let mut front: Vec<u32> = Vec::new();
        let mut head = 0u16;
        let mut trims = false;
        let mut cur = g;
        while let Some((_, next, 0)) = ex.edge(cur as usize, 0) {
            let class = ex.element(next as usize).class_name();
            if ex.outputs(next as usize) != 1 {
                break;
            }
            let nf = ex.element_nf(next as usize) as usize;
            let l = next - ex.global(nf, 0);
            let cfg = ex.nfs()[nf].configs[l as usize].clone();
            match class {
                "Strip" => {
                    head += cfg
                        .trim()
                        .parse::<u16>()
                        .map_err(|_| ExportError::Strip(cfg.clone()))?
                }
                "CheckIPHeader" | "CheckIPHeader2" if head == 14 => trims = true,
                _ => break,
            }
            at = self.chain(at, class, &cfg);
            front.push(next);
            cur = next;
        }
        if trims {
            // Short transport headers and later fragments take the original elements.
            let sh = self.new_elem("IPClassifier", &format!("{SHORT}, -"));
            self.connect(&at, &sh, 0);
            if let Some((_, succ, port)) = ex.edge(cur as usize, 0) {
                self.remainder.insert(succ);
                self.handoffs.push(((sh.clone(), 0), (succ, port)));
            }
            at = (sh, 1);
        }
        let root = seg.root;
        let what = format!("entry {}", dev);
        let ctx = Ctx {
            prov: [Prov::Orig; 4],
            head,
            region: Filter::any(),
            trims,
            cell: None,
        };
        let Some(Node::Classify(classes)) = prog.nodes.get(root as usize) else {
            return self.node(at, root, ctx, &seg.fields);
        };
        let mut kept: Vec<(usize, Filter, NodeId)> = Vec::new();
        let mut others: Vec<Filter> = Vec::new();
        for (i, c) in classes.iter().enumerate() {
            let f = box_of(&c.tests, &seg.fields);
            let dropped_by = prog.events.get(c.node as usize).and_then(|ev| {
                ev.iter().find_map(|e| match e {
                    chain::program::Event::Drop(el, _) => Some(*el),
                    _ => None,
                })
            });
            match prog.nodes.get(c.node as usize) {
                Some(Node::Drop) if dropped_by.is_some_and(|e| front.contains(&e)) => {}
                Some(Node::Drop) => others.push(f),
                _ => kept.push((i, f, c.node)),
            }
        }
        // Order classes as the program numbers them (stable output).
        kept.sort_by_key(|k| k.0);
        let list: Vec<(usize, Filter)> = kept.iter().map(|(i, f, _)| (*i, f.clone())).collect();
        let texts = patterns(&list, &others, &Filter::any(), &what)?;
        let cl = self.classifier(&at, &texts);
        for (k, (_, f, node)) in kept.iter().enumerate() {
            let mut c2 = ctx.clone();
            c2.region = f.clone();
            self.node((cl.clone(), k as u32), *node, c2, &seg.fields)?;
        }
        Ok(())
    }

    /// Rewriter outputs: a PaintSwitch where classes continue; colour 0 (and outputs no
    /// class uses) continue as the original graph does, when it reaches the rewriter.
    fn rewriter_outputs(
        &mut self,
        w: &mut Wiring<'_>,
        used_rw: &BTreeSet<u32>,
        region: &BTreeSet<u32>,
    ) {
        let ex = self.ex;
        for &g in used_rw {
            let rw = ex.element_name(g as usize);
            let (colours, switches) = self.rewriters.get(&g).cloned().unwrap_or_default();
            for out in 0..ex.outputs(g as usize) as u32 {
                let original = ex
                    .edge(g as usize, out as usize)
                    .filter(|_| region.contains(&g));
                let from = match switches.get(&out) {
                    Some(sw) => {
                        w.decls.push(format!("{sw} :: PaintSwitch;"));
                        w.conns.push(format!("{rw}[{out}] -> {sw};"));
                        for c in 1..=colours {
                            match self.dispatch.get(&(g, out, c)) {
                                Some((to, p)) => w.conns.push(format!("{sw}[{c}] -> [{p}]{to};")),
                                None => w.discard(&format!("{sw}[{c}]"), &mut self.n),
                            }
                        }
                        format!("{sw}[0]")
                    }
                    None => format!("{rw}[{out}]"),
                };
                match original {
                    Some((_, t, tp)) => w.edge_to(from, t, tp, &mut self.n),
                    None => w.discard(&from, &mut self.n),
                }
            }
        }
    }

    /// The original region, as written (its rewriters are declared apart).
    fn original_elements(
        &mut self,
        w: &mut Wiring<'_>,
        used_rw: &BTreeSet<u32>,
        region: &BTreeSet<u32>,
    ) {
        let ex = self.ex;
        for &g in region {
            if used_rw.contains(&g) {
                continue;
            }
            let nf = ex.element_nf(g as usize) as usize;
            let l = (g - ex.global(nf, 0)) as usize;
            let cfg = &ex.nfs()[nf].configs[l];
            let class = ex.element(g as usize).class_name();
            match ex.element(g as usize).role() {
                Role::ToDevice(_) => w.decls.push(format!(
                    "{} :: ToDevice({});",
                    o_name(ex, g),
                    self.iface_name(g)
                )),
                _ => w
                    .decls
                    .push(format!("{} :: {class}({cfg});", o_name(ex, g))),
            }
            for p in 0..ex.outputs(g as usize) {
                if let Some((_, t, tp)) = ex.edge(g as usize, p) {
                    w.edge_to(format!("{}[{p}]", o_name(ex, g)), t, tp, &mut self.n);
                }
            }
        }
    }
}

fn is_rewriter(ex: &Executor, g: u32) -> bool {
    matches!(
        ex.element(g as usize).class_name(),
        "IPRewriter" | "TCPRewriter" | "UDPRewriter" | "IPAddrRewriter"
    )
}

fn o_name(ex: &Executor, g: u32) -> String {
    ex.element_name(g as usize)
}

/// Where a packet pushed into `g` is processed: a link's `ToDevice` continues at the
/// linked `FromDevice`'s successor.
fn resolve(ex: &Executor, g: u32) -> u32 {
    let mut g = g;
    for _ in 0..64 {
        match ex.place(g as usize) {
            Place::Link(t) => match ex.edge(t as usize, 0) {
                Some((_, n, _)) => g = n,
                None => return g,
            },
            _ => return g,
        }
    }
    g
}

/// `text` with every whole word `word` replaced.
fn replace_word(text: &str, word: &str, by: &str) -> String {
    let mut out = String::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut String| {
        if cur == word {
            out.push_str(by);
        } else {
            out.push_str(cur);
        }
        cur.clear();
    };
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' || ch == '@' || ch == '/' {
            cur.push(ch);
        } else {
            flush(&mut cur, &mut out);
            out.push(ch);
        }
    }
    flush(&mut cur, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_become_cidr_blocks() {
        assert_eq!(cidrs(0, u128::from(u32::MAX)), vec![(0, 0)]);
        let a = u128::from(u32::from(std::net::Ipv4Addr::new(10, 0, 0, 0)));
        assert_eq!(cidrs(a, a + 255), vec![(a as u32, 24)]);
        assert_eq!(cidrs(a + 1, a + 2).len(), 2);
        let v = cidrs(a, a + 2);
        assert_eq!(v, vec![(a as u32, 31), (a as u32 + 2, 32)]);
    }

    #[test]
    fn words_are_replaced_whole() {
        assert_eq!(replace_word("rr, drop", "rr", "lb/rr"), "lb/rr, drop");
        assert_eq!(replace_word("rrx, rr", "rr", "lb/rr"), "rrx, lb/rr");
    }

    #[test]
    fn patterns_compile_back_to_their_boxes() {
        let f = Filter::any()
            .with(Field::IpProto, FieldSet::single(17))
            .with(Field::IpTtl, FieldSet::range(3, 255))
            .with(Field::DstPort, FieldSet::single(1234));
        let t = pattern(&f).unwrap();
        let s = compiled(&t).unwrap();
        assert!(single(&f).is_subset(&s) || !s.is_empty(), "{t}");
    }
}
