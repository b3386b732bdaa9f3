//! ClassBench filter sets and header traces (Taylor & Turner 2007).
//!
//! A filter set has one rule per line, highest priority first (rule index 0):
//!
//! ```text
//! @SRC/LEN <TAB> DST/LEN <TAB> SPLO : SPHI <TAB> DPLO : DPHI <TAB> 0xPROTO/0xMASK <TAB> 0xFLAGS/0xMASK
//! ```
//!
//! The flags column is ignored, as every published classifier (and the `.firstmatch`
//! answers) does. A trace line is seven unsigned integers: source and destination address,
//! ports, protocol, the flags value and the index of the rule the generator drew it from.
//! Both become the five fields (source, destination, source port, destination port,
//! protocol) of [`FIELDS`].

use crate::{Error, Rule};

/// The fields of ClassBench rules and headers, in order.
pub const FIELDS: [&str; 5] = ["src", "dst", "sport", "dport", "proto"];

fn at(file: &str, line: usize, col: usize, what: String) -> Error {
    Error::Syntax {
        file: file.to_string(),
        line,
        col,
        what,
    }
}

/// The inclusive range of an IPv4 prefix `A.B.C.D/LEN`.
fn prefix(s: &str) -> Option<(u64, u64)> {
    let (addr, len) = s.split_once('/')?;
    let a: std::net::Ipv4Addr = addr.trim().parse().ok()?;
    let len: u32 = len.trim().parse().ok()?;
    if len > 32 {
        return None;
    }
    let a = u64::from(u32::from(a));
    let size = 1u64 << (32 - len);
    let lo = a & !(size - 1);
    Some((lo, lo + size - 1))
}

fn port_range(s: &str) -> Option<(u64, u64)> {
    let (a, b) = s.split_once(':')?;
    let (a, b): (u64, u64) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (a <= b && b <= 0xffff).then_some((a, b))
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(
        s.trim()
            .strip_prefix("0x")
            .or(s.trim().strip_prefix("0X"))?,
        16,
    )
    .ok()
}

/// The protocol `0xVV/0xMM`: exact (mask 0xFF) or any (mask 0).
fn proto(s: &str) -> Option<(u64, u64)> {
    let (v, m) = s.split_once('/')?;
    match (hex(v)?, hex(m)?) {
        (v, 0xff) if v <= 0xff => Some((v, v)),
        (_, 0) => Some((0, 0xff)),
        _ => None,
    }
}

/// Whether rule `index` of a filter set is an `allow` rule in FuseBox's firewalls: a seeded
/// draw, `percent` % of rules allowed (ClassBench sets carry no actions). The draw is
/// SplitMix64 of `seed * 2^32 + index`, allowed when its value modulo 100 is below
/// `percent`: the same rule file, seed and percentage give the same actions everywhere.
pub fn allowed(seed: u64, index: usize, percent: u32) -> bool {
    mix((seed << 32).wrapping_add(index as u64)) % 100 < u64::from(percent)
}

/// SplitMix64's output function of state `x` (after its increment).
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `n` headers for a filter set without a trace, as ClassBench's trace generator makes
/// them: each a random corner of a random rule (every field at its rule's low or high end),
/// drawn by SplitMix64 from `seed`. Empty when there are no rules.
pub fn corners(rules: &[Rule], n: usize, seed: u64) -> Vec<[u64; 5]> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(state.wrapping_sub(0x9e37_79b9_7f4a_7c15))
    };
    if rules.is_empty() {
        return Vec::new();
    }
    (0..n)
        .map(|_| {
            let r = &rules[(next() % rules.len() as u64) as usize];
            let mut k = [0u64; 5];
            let bits = next();
            for (i, (v, &(lo, hi))) in k.iter_mut().zip(&r.ranges).enumerate() {
                *v = if (bits >> i) & 1 == 0 { lo } else { hi };
            }
            k
        })
        .collect()
}

/// Parses a filter set; `file` names it in errors (`file:line:column: what was expected`).
pub fn parse_rules(text: &str, file: &str) -> Result<Vec<Rule>, Error> {
    let mut rules = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let Some(body) = line.strip_prefix('@') else {
            return Err(at(file, n, 1, "expected `@` starting a rule".into()));
        };
        let cols: Vec<&str> = body.split('\t').collect();
        let col =
            |k: usize| -> usize { 2 + cols.iter().take(k).map(|c| c.len() + 1).sum::<usize>() };
        if cols.len() < 5 {
            return Err(at(
                file,
                n,
                line.len() + 1,
                format!(
                    "expected 5 tab-separated fields (6 with flags), found {}",
                    cols.len()
                ),
            ));
        }
        let parsed = [
            (prefix(cols[0]), "a source prefix A.B.C.D/LEN"),
            (prefix(cols[1]), "a destination prefix A.B.C.D/LEN"),
            (port_range(cols[2]), "a source port range LO : HI (0-65535)"),
            (
                port_range(cols[3]),
                "a destination port range LO : HI (0-65535)",
            ),
            (proto(cols[4]), "a protocol 0xVV/0xFF or 0xVV/0x00"),
        ];
        let mut ranges = Vec::with_capacity(5);
        for (k, (r, what)) in parsed.into_iter().enumerate() {
            match r {
                Some(r) => ranges.push(r),
                None => {
                    return Err(at(
                        file,
                        n,
                        col(k),
                        format!("expected {what}, found `{}`", cols[k]),
                    ))
                }
            }
        }
        rules.push(Rule { ranges });
    }
    Ok(rules)
}

/// Parses a header trace into keys (source, destination, ports, protocol); the flags and
/// rule columns are read but not used.
pub fn parse_trace(text: &str, file: &str) -> Result<Vec<[u64; 5]>, Error> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let mut key = [0u64; 5];
        let mut col = 1;
        let mut fields = 0;
        for (k, w) in line.split_whitespace().enumerate() {
            let v: u64 = w.parse().map_err(|_| {
                at(
                    file,
                    n,
                    col,
                    format!("expected an unsigned integer, found `{w}`"),
                )
            })?;
            let max = [
                u64::from(u32::MAX),
                u64::from(u32::MAX),
                0xffff,
                0xffff,
                0xff,
            ];
            if let Some(&m) = max.get(k) {
                if v > m {
                    return Err(at(
                        file,
                        n,
                        col,
                        format!("expected {} at most {m}, found {v}", FIELDS[k]),
                    ));
                }
                key[k] = v;
            }
            fields += 1;
            col += w.len() + 1;
        }
        if fields < 5 {
            return Err(at(
                file,
                n,
                line.len() + 1,
                format!("expected at least 5 numbers (src dst sport dport proto), found {fields}"),
            ));
        }
        out.push(key);
    }
    Ok(out)
}

/// Parses a `.firstmatch` answer file: one 0-based rule index (or -1) per line.
pub fn parse_answers(text: &str, file: &str) -> Result<Vec<Option<usize>>, Error> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| match l.trim().parse::<i64>() {
            Ok(-1) => Ok(None),
            Ok(v) if v >= 0 => Ok(Some(v as usize)),
            _ => Err(at(
                file,
                i + 1,
                1,
                format!("expected a rule index or -1, found `{}`", l.trim()),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_and_traces_parse() {
        let text = "@37.184.89.216/29\t37.184.85.16/29\t7648 : 7648\t24032 : 24032\t0x11/0xFF\t0x0000/0x0000\t\n\
                    @0.0.0.0/0\t10.0.0.0/8\t0 : 65535\t0 : 1023\t0x00/0x00\t0x0000/0x0200\t\n";
        let r = parse_rules(text, "f").unwrap();
        assert_eq!(r.len(), 2);
        let a = u64::from(u32::from(std::net::Ipv4Addr::new(37, 184, 89, 216)));
        assert_eq!(r[0].ranges[0], (a, a + 7));
        assert_eq!(r[0].ranges[4], (17, 17));
        assert_eq!(r[1].ranges[0], (0, u64::from(u32::MAX)));
        assert_eq!(r[1].ranges[3], (0, 1023));
        assert_eq!(r[1].ranges[4], (0, 255));
        let t = parse_trace("1923697128\t2273746465\t0\t1221\t6\t4294967295\t261\n", "t").unwrap();
        assert_eq!(t, vec![[1923697128, 2273746465, 0, 1221, 6]]);
        assert_eq!(parse_answers("3\n-1\n", "a").unwrap(), vec![Some(3), None]);
    }

    #[test]
    fn errors_name_file_line_column_and_what_was_expected() {
        let e = parse_rules("@1.2.3.4/33\t0.0.0.0/0\t0 : 1\t0 : 1\t0x06/0xFF\n", "fw").unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Syntax {
                    line: 1,
                    col: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "fw:1:2: expected a source prefix A.B.C.D/LEN, found `1.2.3.4/33`"
        );
        let e = parse_rules("@1.2.3.4/32\t0.0.0.0/0\t0 : 1\t9 : 1\t0x06/0xFF\n", "fw").unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("fw:1:") && m.contains("destination port range"),
            "{e}"
        );
        let e = parse_rules("@1.2.3.4/32\t0.0.0.0/0\t0 : 1\t0 : 1\t0x06/0x0F\n", "fw").unwrap_err();
        assert!(e.to_string().contains("protocol"), "{e}");
        assert!(matches!(
            parse_rules("1.2.3.4/32\n", "fw").unwrap_err(),
            Error::Syntax {
                line: 1,
                col: 1,
                ..
            }
        ));
        let e = parse_trace("1 2 3 70000 6 0 0\n", "tr").unwrap_err();
        assert_eq!(
            e.to_string(),
            "tr:1:7: expected dport at most 65535, found 70000"
        );
        assert!(parse_trace("1 2 3\n", "tr").is_err());
        assert!(parse_answers("x\n", "a").is_err());
    }
}
