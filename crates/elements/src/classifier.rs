//! `Classifier`: Click's generic byte-pattern classifier.
//!
//! Each pattern is a space-separated list of clauses `OFFSET/VALUE` or `OFFSET/VALUE%MASK`
//! (decimal offset from the start of the packet data; hexadecimal value with `?` for
//! "any nibble"; the mask, if given, has as many hex digits as the value), all of which must
//! hold. A clause preceded by `!` must not hold. The pattern `-` matches every packet. A packet
//! goes to the output of the first matching pattern; packets matching none are dropped
//! (`no-match`).
//!
//! A clause whose checked bytes (those with a nonzero mask) reach past the end of the packet
//! does not hold, so its `!` form does.
//!
//! The semantic model ([`Element::model`]) is exact: a clause reading checked bytes up to
//! `offset + n` needs [`Field::FrameLen`] ≥ `offset + n`, and its checked bytes are
//! [`Field::Raw`] reads from the start of the data. The raw fields of one `Classifier` never
//! overlap: the checked byte runs of all its clauses are cut at every run's start and end (and
//! every 16 bytes), so `12/0800` next to `12/08` reads `raw[12:1]` and `raw[13:1]`. Were a
//! value/mask set to need too many intervals, every checked byte becomes its own field.

use crate::args::{unquote, Args};
use crate::model::{Case, Field, FieldSet, Filter, FilterSet, Model, Outcome};
use crate::reason::MatchReason;
use crate::{ConfigError, Context, Element, PortCount, Verdict};
use ::space::MAX_RAW_LEN;
use packet::Packet;
use std::collections::BTreeSet;

/// The most disjoint boxes one pattern's model may need before the element stays opaque.
const MAX_BOXES: usize = 1024;

/// One `OFFSET/VALUE%MASK` clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// Byte offset from the start of the packet data.
    pub offset: usize,
    /// Expected bytes (already masked).
    pub value: Vec<u8>,
    /// Which bits of each byte are compared.
    pub mask: Vec<u8>,
    /// True for a `!` clause (must not match).
    pub negated: bool,
}

impl Clause {
    /// How many bytes from `offset` the clause needs: up to its last checked byte.
    fn needed(&self) -> usize {
        self.mask.iter().rposition(|m| *m != 0).map_or(0, |i| i + 1)
    }

    /// The runs `[start, end)` (packet offsets) of consecutive checked bytes.
    fn runs(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for (i, m) in self.mask.iter().enumerate() {
            if *m == 0 {
                continue;
            }
            let at = self.offset + i;
            match out.last_mut() {
                Some(last) if last.1 == at => last.1 = at + 1,
                _ => out.push((at, at + 1)),
            }
        }
        out
    }

    /// Whether the clause's bytes match `data` (ignoring negation); false if the checked bytes
    /// are not all present.
    fn bytes_match(&self, data: &[u8]) -> bool {
        let needed = self.needed();
        let Some(window) = data.get(self.offset..).and_then(|d| d.get(..needed)) else {
            return false;
        };
        window
            .iter()
            .zip(&self.mask)
            .zip(&self.value)
            .all(|((b, m), v)| b & m == *v)
    }

    /// Whether the clause holds for `data`.
    pub fn matches(&self, data: &[u8]) -> bool {
        self.bytes_match(data) != self.negated
    }
}

/// One pattern: clauses that must all hold (`-` is the empty list).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pattern {
    /// The clauses, all of which must hold.
    pub clauses: Vec<Clause>,
}

impl Pattern {
    /// Whether every clause holds for `data`.
    pub fn matches(&self, data: &[u8]) -> bool {
        self.clauses.iter().all(|c| c.matches(data))
    }
}

fn hex_nibble(c: char) -> Option<u8> {
    c.to_digit(16).map(|d| d as u8)
}

/// Parses one clause such as `12/0800`, `!23/06`, `14/4?%f0`.
pub fn parse_clause(word: &str) -> Result<Clause, ConfigError> {
    let (negated, body) = match word.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, word),
    };
    let (off, rest) = body.split_once('/').ok_or_else(|| {
        ConfigError::new(format!("expected `OFFSET/VALUE` clause, found `{word}`"))
    })?;
    if off.is_empty() || !off.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ConfigError::new(format!(
            "expected a decimal offset before `/` in `{word}`"
        )));
    }
    let offset: usize =
        off.parse().ok().filter(|o| *o <= 0xffff).ok_or_else(|| {
            ConfigError::new(format!("expected an offset at most 65535 in `{word}`"))
        })?;
    let (val, mask) = match rest.split_once('%') {
        Some((v, m)) => (v, Some(m)),
        None => (rest, None),
    };
    if val.is_empty() || val.len() % 2 != 0 {
        return Err(ConfigError::new(format!(
            "expected an even number of hex digits after `/` in `{word}`"
        )));
    }
    let mut value = Vec::with_capacity(val.len() / 2);
    let mut vmask = Vec::with_capacity(val.len() / 2);
    let chars: Vec<char> = val.chars().collect();
    for pair in chars.chunks(2) {
        let (mut b, mut m) = (0u8, 0u8);
        for (i, c) in pair.iter().enumerate() {
            let shift = if i == 0 { 4 } else { 0 };
            if *c == '?' {
                continue;
            }
            let d = hex_nibble(*c).ok_or_else(|| {
                ConfigError::new(format!(
                    "expected hex digits or `?` after `/` in `{word}`, found `{c}`"
                ))
            })?;
            b |= d << shift;
            m |= 0xf << shift;
        }
        value.push(b);
        vmask.push(m);
    }
    if let Some(m) = mask {
        if m.len() != val.len() {
            return Err(ConfigError::new(format!(
                "expected the mask in `{word}` to have as many hex digits as the value"
            )));
        }
        let mchars: Vec<char> = m.chars().collect();
        for (i, pair) in mchars.chunks(2).enumerate() {
            let mut byte = 0u8;
            for c in pair {
                let d = hex_nibble(*c).ok_or_else(|| {
                    ConfigError::new(format!(
                        "expected hex digits after `%` in `{word}`, found `{c}`"
                    ))
                })?;
                byte = (byte << 4) | d;
            }
            if let Some(vm) = vmask.get_mut(i) {
                *vm &= byte;
            }
        }
    }
    for (v, m) in value.iter_mut().zip(&vmask) {
        *v &= *m;
    }
    Ok(Clause {
        offset,
        value,
        mask: vmask,
        negated,
    })
}

/// Parses one pattern: `-` or space-separated clauses.
pub fn parse_pattern(text: &str) -> Result<Pattern, ConfigError> {
    let text = text.trim();
    if text == "-" {
        return Ok(Pattern::default());
    }
    let clauses = text
        .split_whitespace()
        .map(parse_clause)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Pattern { clauses })
}

/// `Classifier(PATTERN_1, ..., PATTERN_N)`: one output per pattern.
#[derive(Debug, Clone)]
pub struct Classifier {
    patterns: Vec<Pattern>,
}

impl Classifier {
    /// Parses a `Classifier` configuration.
    pub fn configure(args: &Args) -> Result<Classifier, ConfigError> {
        let mut patterns = Vec::new();
        for (i, a) in args.all().iter().enumerate() {
            let text = match &a.keyword {
                Some(k) => format!("{k} {}", a.value),
                None => a.value.clone(),
            };
            let p = parse_pattern(&unquote(&text))
                .map_err(|e| ConfigError::new(format!("pattern {i}: {}", e.message)))?;
            patterns.push(p);
        }
        if patterns.is_empty() {
            return Err(ConfigError::new("expected at least one pattern"));
        }
        Ok(Classifier { patterns })
    }

    /// The parsed patterns, one per output.
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// The output of the first pattern `data` matches.
    pub fn classify(&self, data: &[u8]) -> Option<usize> {
        self.patterns.iter().position(|p| p.matches(data))
    }

    /// The raw fields the model reads: the checked byte runs of every clause, cut wherever a
    /// run starts or ends (or, with `per_byte`, at every byte) and every 16 bytes, so that no
    /// two fields overlap. Sorted by offset.
    fn raw_fields(&self, per_byte: bool) -> Vec<(usize, usize)> {
        let runs: Vec<(usize, usize)> = self
            .patterns
            .iter()
            .flat_map(|p| &p.clauses)
            .flat_map(Clause::runs)
            .collect();
        let mut cuts = BTreeSet::new();
        for (a, b) in &runs {
            cuts.insert(*a);
            cuts.insert(*b);
            if per_byte {
                cuts.extend(*a..*b);
            }
        }
        let cuts: Vec<usize> = cuts.into_iter().collect();
        let max = usize::from(MAX_RAW_LEN);
        let mut out = Vec::new();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            if runs.iter().any(|(s, e)| *s <= a && a < *e) {
                let mut at = a;
                while at < b {
                    let len = (b - at).min(max);
                    out.push((at, len));
                    at += len;
                }
            }
        }
        out
    }

    /// The packets on which `c` holds, with the raw fields `fields` (`Err` when a value/mask
    /// set needs too many intervals, `Ok(None)` when the clause cannot be modelled).
    fn clause_set(c: &Clause, fields: &[(usize, usize)]) -> Result<Option<FilterSet>, ()> {
        let needed = c.offset + c.needed();
        if needed > 0xffff {
            return Ok(None); // FrameLen saturates at 65535
        }
        let mut hit = Filter::any().with(Field::FrameLen, FieldSet::range(needed as u128, 0xffff));
        for &(at, len) in fields {
            let end = at + len;
            if end <= c.offset || at >= c.offset + c.mask.len() {
                continue;
            }
            let (mut m, mut v) = (0u128, 0u128);
            for i in at..end {
                let (mb, vb) = match i.checked_sub(c.offset) {
                    Some(k) => (
                        c.mask.get(k).copied().unwrap_or(0),
                        c.value.get(k).copied().unwrap_or(0),
                    ),
                    None => (0, 0),
                };
                m = (m << 8) | u128::from(mb);
                v = (v << 8) | u128::from(mb & vb);
            }
            if m == 0 {
                continue;
            }
            let raw = u16::try_from(at).ok().zip(u8::try_from(len).ok());
            let Some(field) = raw.and_then(|(o, l)| Field::raw(o, l)) else {
                return Ok(None);
            };
            let set = FieldSet::from_mask(v, m, field.width()).map_err(|_| ())?;
            hit = hit.with(field, set);
        }
        let hit = FilterSet::from(hit);
        Ok(Some(if c.negated {
            FilterSet::any().difference(&hit)
        } else {
            hit
        }))
    }

    /// The model with the raw fields cut as `raw_fields(per_byte)` says.
    fn model_with(&self, per_byte: bool) -> Result<Option<Model>, ()> {
        let fields = self.raw_fields(per_byte);
        let mut cases = Vec::new();
        for (i, p) in self.patterns.iter().enumerate() {
            let mut set = FilterSet::any();
            for c in &p.clauses {
                let Some(cs) = Classifier::clause_set(c, &fields)? else {
                    return Ok(None);
                };
                set = set.intersection(&cs);
                if set.len() > MAX_BOXES {
                    return Ok(None);
                }
            }
            for m in set.members() {
                cases.push(Case::new(m.clone(), Outcome::Out(i)));
                if m.is_any() {
                    return Ok(Some(Model::new(cases)));
                }
            }
        }
        cases.push(Case::new(
            Filter::any(),
            Outcome::Drop(MatchReason::NoMatch.into()),
        ));
        Ok(Some(Model::new(cases)))
    }
}

impl Element for Classifier {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Classifier"
    }
    fn port_count(&self) -> PortCount {
        // Click: `1/-`. Outputs no pattern names get nothing.
        PortCount::range(1, 1, self.patterns.len(), usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        match self.classify(packet.data()) {
            Some(o) => Verdict::Out(o, packet),
            None => Verdict::Drop(packet, MatchReason::NoMatch.into()),
        }
    }
    fn model(&self) -> Option<Model> {
        self.model_with(false)
            .or_else(|()| self.model_with(true))
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clause_parsing() {
        let c = parse_clause("12/08?6%ff0f").unwrap();
        assert_eq!(
            (c.offset, c.value.clone(), c.mask.clone(), c.negated),
            (12, vec![0x08, 0x06], vec![0xff, 0x0f], false)
        );
        assert!(parse_clause("!0/ff").unwrap().negated);
        assert!(parse_clause("12/080")
            .unwrap_err()
            .message
            .contains("even number"));
        assert!(parse_clause("x/08").is_err());
        assert!(parse_clause("12/0g").is_err());
        assert!(parse_clause("12/08%f").is_err());
        assert!(parse_clause("12:08").is_err());
    }
}
