//! Human-readable traffic classes: filters, writes and ends with addresses as addresses.

use crate::walk::ClassReport;
use elements::model::{Field, FieldSet, Filter, Op};
use std::net::Ipv4Addr;

fn is_addr(f: Field) -> bool {
    matches!(f, Field::IpSrc | Field::IpDst | Field::DstIpAnno)
}

fn is_mac(f: Field) -> bool {
    matches!(f, Field::EthSrc | Field::EthDst)
}

/// One value of field `f`, written the way operators write it.
pub fn value(f: Field, v: u128) -> String {
    if is_addr(f) {
        Ipv4Addr::from(v as u32).to_string()
    } else if is_mac(f) {
        let b = v.to_be_bytes();
        b[10..16]
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    } else if f == Field::EtherType {
        format!("{v:#06x}")
    } else {
        v.to_string()
    }
}

/// A closed interval of field `f`: an address prefix when it is one, else `a-b`.
fn interval(f: Field, lo: u128, hi: u128) -> String {
    if lo == hi {
        return value(f, lo);
    }
    if is_addr(f) {
        let size = hi - lo + 1;
        if size.is_power_of_two() && lo.is_multiple_of(size) {
            let len = 32 - size.trailing_zeros();
            return format!("{}/{len}", value(f, lo));
        }
    }
    format!("{}-{}", value(f, lo), value(f, hi))
}

/// A set of values of field `f`: `v`, `a-b`, `p/len`, or a list of those.
pub fn set(f: Field, s: &FieldSet) -> String {
    let parts: Vec<String> = s.intervals().map(|(a, b)| interval(f, a, b)).collect();
    if parts.len() > 6 {
        format!("{} … ({} ranges)", parts[..5].join(","), parts.len())
    } else {
        parts.join(",")
    }
}

/// A filter as `field=set && ...` (`any` when it says nothing).
pub fn filter(fl: &Filter) -> String {
    if fl.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = fl
        .fields()
        .map(|(f, s)| format!("{f}={}", set(f, s)))
        .collect();
    if parts.is_empty() {
        "any".into()
    } else {
        parts.join(" && ")
    }
}

/// A write of field `f` as `f:=v`, `f-=3`, `f:=pool#0{1000-9000}`, `f:=state#1`.
pub fn write(f: Field, op: &Op) -> String {
    match op {
        Op::Identity => format!("{f}"),
        Op::Set(v) => format!("{f}:={}", value(f, *v)),
        Op::Add(c) if *c < 0 => format!("{f}-={}", c.unsigned_abs()),
        Op::Add(c) => format!("{f}+={c}"),
        Op::Pool { values, id } => format!("{f}:=rw#{id}{{{}}}", set(f, values)),
        Op::Stateful { id } if *id == u32::MAX => format!("{f}:=?"),
        Op::Stateful { id } => format!("{f}:=rw#{id}"),
        Op::StatefulThen { id, add } => format!("{f}:=rw#{id}{add:+}"),
    }
}

/// The writes of a class, checksums included.
pub fn writes(c: &ClassReport) -> String {
    let mut v: Vec<String> = c
        .writes
        .iter()
        .filter(|(f, _)| *f != Field::IpChecksumOk)
        .map(|(f, op)| write(*f, op))
        .collect();
    let ip = c
        .writes
        .iter()
        .any(|(f, _)| matches!(f, Field::IpTtl | Field::IpSrc | Field::IpDst))
        || !c.stateful.is_empty();
    if ip {
        v.push("ip_csum once".into());
    }
    if c.writes.iter().any(|(f, _)| {
        matches!(
            f,
            Field::IpSrc | Field::IpDst | Field::SrcPort | Field::DstPort
        )
    }) || !c.stateful.is_empty()
    {
        v.push("l4_csum once".into());
    }
    if v.is_empty() {
        "-".into()
    } else {
        v.join(" ")
    }
}
