//! Dependencies between NFs and the groups that may run side by side (NFCompass §IV.B,
//! Table III refined field by field).
//!
//! Two NFs `a` (earlier on the chain) and `b` (later) may run on copies of a packet, their
//! outputs merged by XOR against the original, when, by their action profiles
//! ([`crate::profile`]):
//!
//! * **RAR, WAR**: `b` may read what `a` reads; `b` may write what `a` only reads (in
//!   parallel, `a` reads the packet as it came, which is what it read in sequence);
//! * **RAW**: `b` reads nothing `a` may write (bit by bit: `a` writing the TTL and `b`
//!   reading the addresses is fine; a checksum `a` updates is a part of its own);
//! * **WAW**: they write no common bit, so that each bit of the merged packet was changed by
//!   at most one branch and XOR gives it. Annotations no NF of the chain reads before writing
//!   them (the header annotations and packet type each `FromDevice` sets) are left out: what
//!   the merge makes of them is never read;
//! * **drops**: a packet `a` may drop is discarded whatever `b` did to it (Table III: drop is
//!   always allowed), but in sequence `b` never sees it. Decision: `b` may follow a dropping
//!   `a` only if `b` keeps no state (no counters, no tables): then what it did to a packet
//!   `a` dropped leaves no trace but the executor's own counters, which the parallel mode
//!   counts as the sequence would (it counts `b`'s elements only for packets no earlier
//!   branch dropped);
//! * **length**: neither adds or removes bytes (the XOR merge needs equal lengths; this
//!   includes `CheckIPHeader`'s cut at the IPv4 length), and neither copies, creates or
//!   holds packets;
//! * **structure**: they are consecutive along the chain's links, and every packet `a` lets
//!   on leaves by the one interface linked to `b` (its only way on; for an NF that passes
//!   replies back, every packet entering by its other interfaces: see [`ways_on`]).
//!
//! A group is a run of NFs along the links in which every pair satisfies the above.
//! [`parallel`] builds the groups greedily along each run and reports, for every pair it
//! considered, why it was or was not allowed.
//!
//! The contract with the executor (`--mode parallel`): for a group `[n1, …, nk]`, a packet
//! that would enter `n1` runs `n1` as written and `n2 … nk` each on a copy of the same packet
//! entering by the `FromDevice` its predecessor's link leads to; the bytes of the result are
//! the original XOR the OR of every branch's bytes XOR the original, its annotations likewise,
//! and a drop in any branch drops it (the first branch's reason, in chain order); it then
//! leaves by the last NF's way out.

use crate::profile::{overlaps, Part, Profile};
use chain::layout::{Group, Parallel};
use chain::{Executor, Place};
use elements::Role;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Why a pair of NFs may or may not run side by side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pair {
    /// The earlier NF (index into [`Executor::nfs`]).
    pub earlier: usize,
    /// The later NF.
    pub later: usize,
    /// The earlier NF's name.
    pub earlier_name: String,
    /// The later NF's name.
    pub later_name: String,
    /// Whether they may run side by side.
    pub allowed: bool,
    /// What forbids it (empty when allowed).
    pub conflicts: Vec<String>,
    /// What was found harmless (read after read, write after read, dead annotations).
    pub fine: Vec<String>,
}

/// Whether one NF can be in a group at all, and its way on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NfNote {
    /// The NF's name.
    pub nf: String,
    /// The NF packets go on to from it (a link to one NF; `a or b` for an NF in the middle
    /// of a line that passes replies back, see [`ways_on`]).
    pub next: Option<String>,
    /// Why it has no single way on, if it has none.
    pub no_next: Option<String>,
    /// Why it can be in no group (length changes, packets made).
    pub excluded: Vec<String>,
}

/// What [`parallel`] found: per NF, per pair considered, and the groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DepsReport {
    /// Per NF, in [`Executor::nfs`] order.
    pub nfs: Vec<NfNote>,
    /// Every pair considered, in the order considered.
    pub pairs: Vec<Pair>,
    /// The groups, by NF name.
    pub groups: Vec<Vec<String>>,
    /// Annotations no NF reads before writing it (writes to them never conflict).
    pub dead_annotations: Vec<String>,
}

/// Annotations whose value no NF of the chain reads as it came (so what a merge makes of
/// them is never seen): the MAC-header and packet-type annotations always (each NF's entry
/// sets them), the others unless an NF reads them or may read anything.
pub fn dead_annotations(profiles: &[Profile]) -> BTreeSet<Part> {
    let mut dead: BTreeSet<Part> = [
        Part::Anno(space::Field::Paint),
        Part::Anno(space::Field::DstIpAnno),
        Part::Anno(space::Field::PacketType),
        Part::Anno(space::Field::FixIpSrc),
        Part::Anno(space::Field::InPort),
        Part::MacHeader,
        Part::NetHeader,
    ]
    .into_iter()
    .collect();
    for p in profiles {
        if p.reads.contains(&Part::Everything) {
            // Every packet enters an NF by a `FromDevice` (or `FromDump`), which sets the
            // MAC-header and packet-type annotations before any element sees it: what
            // another NF left there is never read, even by an element that may read
            // anything.
            dead.retain(|a| matches!(a, Part::MacHeader | Part::Anno(space::Field::PacketType)));
            continue;
        }
        for r in &p.reads {
            dead.remove(r);
        }
    }
    dead
}

/// Why NF profile `p` can be in no group, if it cannot.
pub fn exclusions(p: &Profile) -> Vec<String> {
    let mut v = Vec::new();
    if !p.keeps_length() {
        v.push(format!(
            "changes the packet's length ({})",
            crate::profile::notes_line(&p.length_changes)
        ));
    }
    if p.makes_packets {
        v.push("may copy, create or hold packets".to_string());
    }
    v
}

/// Table III field by field: whether `a` (earlier) and `b` (later) may run side by side,
/// given the annotations nobody reads (`dead`). Length and structure are not looked at here
/// (see [`exclusions`] and [`parallel`]).
pub fn pair(a: &Profile, b: &Profile, dead: &BTreeSet<Part>) -> Pair {
    let mut conflicts = Vec::new();
    let mut fine = Vec::new();
    let (a_reads, b_reads) = (a.effective_reads(dead), b.effective_reads(dead));
    let list = |v: Vec<String>| v.join(", ");
    // RAW: b reads what a may write.
    let mut raw = Vec::new();
    for w in &a.writes {
        for r in &b_reads {
            if overlaps(w, a.ip_header, r, b.ip_header) {
                raw.push(if w == r {
                    w.to_string()
                } else {
                    format!("{w}/{r}")
                });
            }
        }
    }
    if !raw.is_empty() {
        conflicts.push(format!("read after write on {}", list(raw)));
    }
    // WAW: both may write a common bit.
    let (mut waw, mut waw_dead) = (Vec::new(), Vec::new());
    for w1 in &a.writes {
        for w2 in &b.writes {
            if overlaps(w1, a.ip_header, w2, b.ip_header) {
                let s = if w1 == w2 {
                    w1.to_string()
                } else {
                    format!("{w1}/{w2}")
                };
                if dead.contains(w1) && dead.contains(w2) {
                    waw_dead.push(s);
                } else {
                    waw.push(s);
                }
            }
        }
    }
    if !waw.is_empty() {
        conflicts.push(format!("write after write on {}", list(waw)));
    }
    if !waw_dead.is_empty() {
        fine.push(format!(
            "write after write on annotations nobody reads: {}",
            list(waw_dead)
        ));
    }
    // WAR and RAR: harmless, noted.
    let mut war = Vec::new();
    for r in &a_reads {
        for w in &b.writes {
            if overlaps(r, a.ip_header, w, b.ip_header) {
                war.push(r.to_string());
                break;
            }
        }
    }
    if !war.is_empty() {
        war.dedup();
        fine.push(format!("write after read on {}", list(war)));
    }
    let rar: Vec<String> = a_reads
        .intersection(&b_reads)
        .filter(|p| p.is_header() || **p == Part::Payload)
        .map(Part::to_string)
        .collect();
    if !rar.is_empty() {
        fine.push(format!("read after read on {}", list(rar)));
    }
    // Drops.
    if a.may_drop {
        if b.stateful {
            conflicts.push(format!(
                "{} may drop ({}) and {} keeps state a dropped packet would change ({})",
                a.nf,
                a.drop_reasons
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                b.nf,
                crate::profile::notes_line(&b.state)
            ));
        } else {
            fine.push(format!(
                "{} may drop; {} keeps no state, so its work on a dropped packet is discarded",
                a.nf, b.nf
            ));
        }
    }
    Pair {
        earlier: a.index,
        later: b.index,
        earlier_name: a.nf.clone(),
        later_name: b.nf.clone(),
        allowed: conflicts.is_empty(),
        conflicts,
        fine,
    }
}

/// NF `n`'s single way on: the NF every packet it lets on goes to (by the one interface it
/// sends out of, linked to that NF's `FromDevice`), or why it has none (see [`ways_on`]).
pub fn next_nf(ex: &Executor, profiles: &[Profile], n: usize) -> Result<usize, String> {
    match ways_on(ex, profiles, n)?.as_slice() {
        [m] => Ok(*m),
        ways => Err(format!(
            "{} ways on ({})",
            ways.len(),
            ways.iter()
                .map(|&m| profiles[m].nf.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The NFs NF `n` may hand a group's packets on to, or why there is none.
///
/// An NF sending out of one interface only has that interface's link as its way on. An NF
/// that also sends packets back (replies arriving on the interface linked to the next NF,
/// passed back out of the one they would have come in by) has a way on by interface `out`
/// when every packet entering by its *other* interfaces leaves by `out`, linked to another
/// NF: those are the packets a group runs as branches (the executor triggers a group on
/// them, and runs a later NF of a group from the interface its predecessor is linked to);
/// what enters by `out` runs as written. An NF in the middle of a line has two such ways,
/// one each way along the line; [`parallel_with`] follows the one that does not lead back.
pub fn ways_on(ex: &Executor, profiles: &[Profile], n: usize) -> Result<Vec<usize>, String> {
    let p = &profiles[n];
    if p.outputs.is_empty() {
        return Err("sends nothing out".to_string());
    }
    if let [out] = p.outputs.as_slice() {
        return linked_nf(ex, n, out).map(|m| vec![m]);
    }
    let mut ways = Vec::new();
    for out in &p.outputs {
        if exits_from(ex, n, out) != [out.as_str()] {
            continue;
        }
        if let Ok(m) = linked_nf(ex, n, out) {
            if !ways.contains(&m) {
                ways.push(m);
            }
        }
    }
    if ways.is_empty() {
        return Err(format!(
            "leaves by several interfaces ({})",
            p.outputs.join(", ")
        ));
    }
    Ok(ways)
}

/// The NF that NF `n`'s `ToDevice(out)`s are linked to, or why there is none.
fn linked_nf(ex: &Executor, n: usize, out: &str) -> Result<usize, String> {
    let nf = &ex.nfs()[n];
    let mut target = None;
    for (l, role) in nf.roles.iter().enumerate() {
        if !matches!(role, Role::ToDevice(d) if d == out) {
            continue;
        }
        match ex.place(ex.global(n, l) as usize) {
            Place::Link(t) if target.is_none() || target == Some(t) => target = Some(t),
            Place::Link(_) => return Err(format!("{out} leads to two places")),
            _ => return Err(format!("{out} is an exit of the chain")),
        }
    }
    let t = target.ok_or_else(|| format!("no ToDevice({out})"))?;
    let m = ex.element_nf(t as usize) as usize;
    if m == n {
        return Err(format!("{out} is linked back to itself"));
    }
    Ok(m)
}

/// The interfaces (and dump files, `dump:PATH`) NF `n`'s element graph leads to from its
/// `FromDevice`s of other interfaces than `iface` (every edge followed), sorted.
fn exits_from<'a>(ex: &'a Executor, n: usize, iface: &str) -> Vec<&'a str> {
    let nf = &ex.nfs()[n];
    let mut seen = vec![false; nf.roles.len()];
    let mut work: Vec<usize> = nf
        .roles
        .iter()
        .enumerate()
        .filter(|(_, r)| match r {
            Role::FromDevice(d) => d != iface,
            Role::FromDump(_) => true,
            _ => false,
        })
        .map(|(l, _)| l)
        .collect();
    let mut out: Vec<&str> = Vec::new();
    while let Some(l) = work.pop() {
        if std::mem::replace(&mut seen[l], true) {
            continue;
        }
        match &nf.roles[l] {
            Role::ToDevice(d) => out.push(d.as_str()),
            Role::ToDump(_) => out.push("dump"),
            _ => {}
        }
        work.extend(nf.edges[l].iter().flatten().map(|e| e.element));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The parallel groups of `ex`'s chain from its NFs' profiles (see the module
/// documentation), and the report of why.
pub fn parallel_with(ex: &Executor, profiles: &[Profile]) -> (Parallel, DepsReport) {
    let n = profiles.len();
    let dead = dead_annotations(profiles);
    let ways: Vec<Result<Vec<usize>, String>> = (0..n).map(|i| ways_on(ex, profiles, i)).collect();
    let excluded: Vec<Vec<String>> = profiles.iter().map(exclusions).collect();
    let mut nfs = Vec::new();
    for (i, p) in profiles.iter().enumerate() {
        let (next, no_next) = match &ways[i] {
            Ok(w) => (
                Some(
                    w.iter()
                        .map(|&m| profiles[m].nf.as_str())
                        .collect::<Vec<_>>()
                        .join(" or "),
                ),
                None,
            ),
            Err(e) => (None, Some(e.clone())),
        };
        nfs.push(NfNote {
            nf: p.nf.clone(),
            next,
            no_next,
            excluded: excluded[i].clone(),
        });
    }
    // The way on from `at`, reached from `from`: the one way that does not lead back.
    let step = |at: usize, from: Option<usize>| -> Option<usize> {
        let w = ways[at].as_ref().ok()?;
        match w.iter().filter(|&&m| Some(m) != from).collect::<Vec<_>>()[..] {
            [m] => Some(*m),
            _ => None,
        }
    };
    // Runs start at NFs no other NF leads to as its only way on; NFs left over (a line of
    // NFs passing replies back, cycles) start runs too, in chain order.
    let mut has_pred = vec![false; n];
    for w in ways.iter().flatten() {
        if let [m] = w[..] {
            has_pred[m] = true;
        }
    }
    let mut order: Vec<usize> = (0..n).filter(|&i| !has_pred[i]).collect();
    order.extend((0..n).filter(|&i| has_pred[i]));
    let mut placed = vec![false; n];
    let mut pairs = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for start in order {
        if placed[start] {
            continue;
        }
        let mut cur = vec![start];
        placed[start] = true;
        let mut at = start;
        let mut from = None;
        while let Some(b) = step(at, from) {
            if placed[b] {
                break;
            }
            placed[b] = true;
            let out: Vec<String> = [(at, &excluded[at]), (b, &excluded[b])]
                .iter()
                .filter(|(_, e)| !e.is_empty())
                .map(|(i, e)| format!("{}: {}", profiles[*i].nf, e.join("; ")))
                .collect();
            let ok = if out.is_empty() {
                let mut all = true;
                for &m in &cur {
                    let pr = pair(&profiles[m], &profiles[b], &dead);
                    all &= pr.allowed;
                    pairs.push(pr);
                }
                all
            } else {
                pairs.push(Pair {
                    earlier: at,
                    later: b,
                    earlier_name: profiles[at].nf.clone(),
                    later_name: profiles[b].nf.clone(),
                    allowed: false,
                    conflicts: out,
                    fine: Vec::new(),
                });
                false
            };
            if ok {
                cur.push(b);
            } else {
                if cur.len() > 1 {
                    groups.push(std::mem::take(&mut cur));
                }
                cur = vec![b];
            }
            from = Some(at);
            at = b;
        }
        if cur.len() > 1 {
            groups.push(cur);
        }
    }
    let report = DepsReport {
        nfs,
        pairs,
        groups: groups
            .iter()
            .map(|g| g.iter().map(|&i| profiles[i].nf.clone()).collect())
            .collect(),
        dead_annotations: dead.iter().map(Part::to_string).collect(),
    };
    (
        Parallel {
            groups: groups.into_iter().map(|nfs| Group { nfs }).collect(),
        },
        report,
    )
}

/// The parallel groups of `ex`'s chain (profiles derived with [`crate::profile::profiles`])
/// and the report of why (see the module documentation).
pub fn parallel(ex: &Executor) -> (Parallel, DepsReport) {
    let profiles = crate::profile::profiles(ex);
    parallel_with(ex, &profiles)
}

impl DepsReport {
    /// The report as text: per NF its way on, per pair the verdict and why, then the groups.
    pub fn text(&self) -> String {
        let mut o = String::new();
        for nf in &self.nfs {
            let way = match (&nf.next, &nf.no_next) {
                (Some(m), _) => format!("-> {m}"),
                (None, Some(why)) => format!("no single way on: {why}"),
                (None, None) => String::new(),
            };
            let _ = write!(o, "{}: {way}", nf.nf);
            if !nf.excluded.is_empty() {
                let _ = write!(o, "; in no group: {}", nf.excluded.join("; "));
            }
            o.push('\n');
        }
        if !self.pairs.is_empty() {
            o.push('\n');
        }
        for p in &self.pairs {
            let verdict = if p.allowed { "parallel" } else { "sequential" };
            let _ = writeln!(o, "{} -> {}: {verdict}", p.earlier_name, p.later_name);
            for c in &p.conflicts {
                let _ = writeln!(o, "  x {c}");
            }
            for f in &p.fine {
                let _ = writeln!(o, "  ok {f}");
            }
        }
        o.push('\n');
        if self.groups.is_empty() {
            o.push_str("parallel groups: none\n");
        } else {
            for g in &self.groups {
                let _ = writeln!(o, "parallel group: {}", g.join(" | "));
            }
        }
        o
    }
}
