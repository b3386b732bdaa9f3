//! Payload matching: the Aho-Corasick prefilter over every rule's fast pattern, and the
//! full check of one rule's contents with Snort 2.9's modifiers.
//!
//! # Where a content may match
//!
//! A content matches at position `p` of the payload when its bytes (ASCII case folded with
//! `nocase`) are at `p..p+len` and that range lies in the content's window:
//!
//! * **absolute** (no `distance`/`within`): from `offset` (default 0) to `offset + depth`
//!   (default: the end of the payload);
//! * **relative** (`distance` or `within`): from `c + distance` (default 0) to
//!   `c + distance + within` (default: the end), where `c` is the end of the previous
//!   content's match (0 before the first content).
//!
//! Window bounds are clamped to the payload. A negated content (`content:!"…"`) holds when
//! the pattern does not occur in its window, and leaves `c` where it was. `isdataat:n` holds
//! when the payload has a byte at `n` (`n < len`), relative to `c` with `relative`; `!`
//! negates it. As in Snort (and Suricata), when a later test fails, an earlier content is
//! tried at its next occurrence in its window: a rule matches when *some* choice of match
//! positions satisfies every test in order. That search is bounded by [`STEP_BUDGET`]
//! candidate positions per rule and packet; a rule that runs out does not match (counted
//! by the element).

use super::rules::{Content, Rule, Test};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::collections::HashMap;

/// Candidate match positions one rule may try on one packet before it gives up.
pub const STEP_BUDGET: u32 = 1 << 16;

/// What [`rule_matches`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Every test holds.
    Match,
    /// Some test fails for every choice of match positions.
    NoMatch,
    /// The search ran out of its step budget.
    Exhausted,
}

/// Whether `tests` all hold on `payload` (see the module documentation).
pub fn rule_matches(tests: &[Test], payload: &[u8]) -> Verify {
    let mut budget = STEP_BUDGET;
    match eval(tests, payload, 0, &mut budget) {
        Some(true) => Verify::Match,
        Some(false) => Verify::NoMatch,
        None => Verify::Exhausted,
    }
}

/// The window `[start, end)` a content may match in, with the previous match ending at `c`.
pub fn window(c: &Content, cursor: usize, len: usize) -> (usize, usize) {
    let len_i = len as i64;
    let (start, end) = if c.relative() {
        let s = cursor as i64 + i64::from(c.distance.unwrap_or(0));
        let e = c.within.map_or(len_i, |w| s + i64::from(w));
        (s, e)
    } else {
        let s = i64::from(c.offset.unwrap_or(0));
        let e = c.depth.map_or(len_i, |d| s + i64::from(d));
        (s, e)
    };
    (start.clamp(0, len_i) as usize, end.clamp(0, len_i) as usize)
}

/// The first position `>= from` where `c` matches wholly inside `..end`.
fn find(c: &Content, payload: &[u8], from: usize, end: usize) -> Option<usize> {
    let n = c.pattern.len();
    if n == 0 || end > payload.len() || from + n > end {
        return None;
    }
    let hay = &payload[from..end];
    let first = c.pattern[0];
    let pos = if c.nocase {
        hay.windows(n)
            .position(|w| w.eq_ignore_ascii_case(&c.pattern))
    } else {
        hay.windows(n)
            .position(|w| w[0] == first && w == c.pattern.as_slice())
    };
    pos.map(|p| p + from)
}

/// `Some(result)`, or `None` when the budget ran out.
fn eval(tests: &[Test], payload: &[u8], cursor: usize, budget: &mut u32) -> Option<bool> {
    let Some((t, rest)) = tests.split_first() else {
        return Some(true);
    };
    match t {
        Test::IsDataAt {
            n,
            relative,
            negated,
        } => {
            let base = if *relative { cursor } else { 0 };
            let has = base.saturating_add(*n as usize) < payload.len();
            if has != *negated {
                eval(rest, payload, cursor, budget)
            } else {
                Some(false)
            }
        }
        Test::Content(c) => {
            let (start, end) = window(c, cursor, payload.len());
            if c.negated {
                return if find(c, payload, start, end).is_none() {
                    eval(rest, payload, cursor, budget)
                } else {
                    Some(false)
                };
            }
            let mut from = start;
            while let Some(p) = find(c, payload, from, end) {
                if *budget == 0 {
                    return None;
                }
                *budget -= 1;
                if eval(rest, payload, p + c.pattern.len(), budget)? {
                    return Some(true);
                }
                // Later tests that do not depend on this match's position cannot change.
                if !depends_on_cursor(rest) {
                    return Some(false);
                }
                from = p + 1;
            }
            Some(false)
        }
    }
}

/// Whether the first test of `rest` that reads the cursor comes before any absolute one
/// (an absolute test and everything after it do not depend on earlier positions… except
/// through later relative tests, which is why only the next test is looked at).
fn depends_on_cursor(rest: &[Test]) -> bool {
    rest.iter().any(|t| match t {
        Test::IsDataAt { relative, .. } => *relative,
        Test::Content(c) => c.relative(),
    })
}

/// The content of a rule the prefilter searches for: the first non-negated `fast_pattern`
/// content, else the longest non-negated content (the first of equals). `None` when the rule
/// has no positive content (it is checked on every packet its header takes).
pub fn fast_pattern(rule: &Rule) -> Option<&Content> {
    let positive = || {
        rule.tests.iter().filter_map(|t| match t {
            Test::Content(c) if !c.negated => Some(c),
            _ => None,
        })
    };
    positive().find(|c| c.fast_pattern).or_else(|| {
        positive().fold(None, |best: Option<&Content>, c| match best {
            Some(b) if b.pattern.len() >= c.pattern.len() => Some(b),
            _ => Some(c),
        })
    })
}

/// The content automaton of a rule set cannot be built (too many or too long patterns).
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot build the content automaton: {0}")]
pub struct AutomatonError(#[source] pub aho_corasick::BuildError);

/// One automaton per case mode over the distinct fast patterns of all rules.
#[derive(Debug, Clone)]
pub struct Prefilter {
    exact: Option<AhoCorasick>,
    nocase: Option<AhoCorasick>,
    /// Rules of each exact pattern, then of each nocase pattern.
    exact_rules: Vec<Vec<u32>>,
    nocase_rules: Vec<Vec<u32>>,
    /// Rules without a positive content.
    always: Vec<u32>,
    nrules: usize,
}

impl Prefilter {
    /// Builds the automata for `rules` (rule `i` is reported as `i`).
    pub fn new(rules: &[Rule]) -> Result<Prefilter, AutomatonError> {
        let mut exact: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut nocase: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut pf = Prefilter {
            exact: None,
            nocase: None,
            exact_rules: Vec::new(),
            nocase_rules: Vec::new(),
            always: Vec::new(),
            nrules: rules.len(),
        };
        let mut exact_pats = Vec::new();
        let mut nocase_pats = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let i = i as u32;
            match fast_pattern(r) {
                None => pf.always.push(i),
                Some(c) if c.nocase => {
                    let key = c.pattern.to_ascii_lowercase();
                    let id = *nocase.entry(key.clone()).or_insert_with(|| {
                        nocase_pats.push(key);
                        pf.nocase_rules.push(Vec::new());
                        nocase_pats.len() - 1
                    });
                    pf.nocase_rules[id].push(i);
                }
                Some(c) => {
                    let id = *exact.entry(c.pattern.clone()).or_insert_with(|| {
                        exact_pats.push(c.pattern.clone());
                        pf.exact_rules.push(Vec::new());
                        exact_pats.len() - 1
                    });
                    pf.exact_rules[id].push(i);
                }
            }
        }
        let build = |pats: &[Vec<u8>], ci: bool| -> Result<Option<AhoCorasick>, AutomatonError> {
            if pats.is_empty() {
                return Ok(None);
            }
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .ascii_case_insensitive(ci)
                .build(pats)
                .map(Some)
                .map_err(AutomatonError)
        };
        pf.exact = build(&exact_pats, false)?;
        pf.nocase = build(&nocase_pats, true)?;
        Ok(pf)
    }

    /// Marks in `hits` (one bit per rule, resized here) the rules whose fast pattern occurs
    /// in `payload`, and the rules without one.
    pub fn scan(&self, payload: &[u8], hits: &mut Vec<u64>) {
        hits.clear();
        hits.resize(self.nrules.div_ceil(64), 0);
        let mut mark = |r: u32| hits[(r / 64) as usize] |= 1 << (r % 64);
        for &r in &self.always {
            mark(r);
        }
        for (ac, rules) in [
            (&self.exact, &self.exact_rules),
            (&self.nocase, &self.nocase_rules),
        ] {
            if let Some(ac) = ac {
                let mut seen = vec![false; rules.len()];
                for m in ac.find_overlapping_iter(payload) {
                    let id = m.pattern().as_usize();
                    if !seen[id] {
                        seen[id] = true;
                        for &r in &rules[id] {
                            mark(r);
                        }
                    }
                }
            }
        }
    }

    /// Whether rule `r` is marked in `hits`.
    #[inline]
    pub fn hit(hits: &[u64], r: u32) -> bool {
        hits.get((r / 64) as usize)
            .is_some_and(|w| w & (1 << (r % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::rules::{parse_rule, Vars};

    fn tests_of(opts: &str) -> Vec<Test> {
        let t = format!("alert tcp any any -> any any ({opts} sid:1;)");
        parse_rule(&t, "m:1", &Vars::new())
            .unwrap_or_else(|e| panic!("{e}"))
            .tests
    }

    fn m(opts: &str, payload: &[u8]) -> bool {
        rule_matches(&tests_of(opts), payload) == Verify::Match
    }

    #[test]
    fn plain_and_nocase() {
        assert!(m(r#"content:"abc";"#, b"xxabcxx"));
        assert!(!m(r#"content:"abc";"#, b"xxABCxx"));
        assert!(m(r#"content:"abc"; nocase;"#, b"xxABCxx"));
        assert!(m(r#"content:"|00 ff|A";"#, b"\x01\x00\xffA"));
        assert!(!m(r#"content:"abc";"#, b"ab"));
        assert!(!m(r#"content:"abc";"#, b""));
    }

    #[test]
    fn offset_and_depth() {
        // offset: the match starts at or after it.
        assert!(m(r#"content:"abc"; offset:2;"#, b"xxabc"));
        assert!(!m(r#"content:"abc"; offset:3;"#, b"xxabc"));
        // depth counts from offset: the match must end within offset + depth.
        assert!(m(r#"content:"abc"; depth:5;"#, b"xxabc"));
        assert!(!m(r#"content:"abc"; depth:4;"#, b"xxabc"));
        assert!(m(r#"content:"abc"; offset:1; depth:4;"#, b"xxabc"));
        assert!(!m(r#"content:"abc"; offset:1; depth:3;"#, b"xxabc"));
        // A later occurrence inside the window is found.
        assert!(m(r#"content:"ab"; offset:1;"#, b"abxab"));
        // Offsets beyond the payload never match.
        assert!(!m(r#"content:"a"; offset:100;"#, b"aaaa"));
    }

    #[test]
    fn distance_and_within() {
        // distance: the next match starts at least that far after the previous one's end.
        assert!(m(r#"content:"ab"; content:"cd"; distance:2;"#, b"abxxcd"));
        assert!(!m(r#"content:"ab"; content:"cd"; distance:3;"#, b"abxxcd"));
        // within: it ends at most that far after the previous end (plus distance).
        assert!(m(r#"content:"ab"; content:"cd"; within:4;"#, b"abxxcd"));
        assert!(!m(r#"content:"ab"; content:"cd"; within:3;"#, b"abxxcd"));
        assert!(m(
            r#"content:"ab"; content:"cd"; distance:1; within:3;"#,
            b"abxxcd"
        ));
        assert!(!m(
            r#"content:"ab"; content:"cd"; distance:1; within:2;"#,
            b"abxxcd"
        ));
        // Negative distance reaches back over the previous match.
        assert!(m(r#"content:"bc"; content:"ab"; distance:-3;"#, b"abc"));
        assert!(!m(r#"content:"bc"; content:"ab"; distance:-2;"#, b"abc"));
        // Backtracking: the first "ab" is too far from "cd", the second is close enough.
        assert!(m(r#"content:"ab"; content:"cd"; within:2;"#, b"abxxxxabcd"));
        // Relative to the payload start when nothing matched before.
        assert!(m(r#"content:"ab"; distance:1;"#, b"xab"));
        assert!(!m(r#"content:"ab"; distance:2;"#, b"xab"));
        // suricata-verify alert-distance-within-1's rule.
        assert!(m(
            r#"content:"AllWorkAndNoPlayMakesWill"; content:"DullBoy"; distance:1; within:7;"#,
            b"AllWorkAndNoPlayMakesWill DullBoy"
        ));
        assert!(!m(
            r#"content:"AllWorkAndNoPlayMakesWill"; content:"DullBoy"; distance:1; within:7;"#,
            b"AllWorkAndNoPlayMakesWill  DullBoy"
        ));
    }

    #[test]
    fn negated_contents() {
        assert!(m(r#"content:"ab"; content:!"cd";"#, b"abef"));
        assert!(!m(r#"content:"ab"; content:!"cd";"#, b"abcd"));
        // Relative negation only looks in its window.
        assert!(m(r#"content:"ab"; content:!"cd"; within:2;"#, b"abxcd"));
        assert!(!m(r#"content:"ab"; content:!"cd"; within:3;"#, b"abxcd"));
        // Negated content does not move the cursor.
        assert!(m(
            r#"content:"ab"; content:!"zz"; content:"c"; within:1;"#,
            b"abc"
        ));
        assert!(m(r#"content:!"evil";"#, b"good"));
        assert!(m(r#"content:!"evil"; offset:2;"#, b"evil"));
    }

    #[test]
    fn isdataat() {
        assert!(m("isdataat:3;", b"abcd"));
        assert!(!m("isdataat:4;", b"abcd"));
        assert!(m("isdataat:!4;", b"abcd"));
        assert!(m(r#"content:"ab"; isdataat:1,relative;"#, b"abcd"));
        assert!(!m(r#"content:"ab"; isdataat:2,relative;"#, b"abcd"));
        assert!(m(r#"content:"cd"; isdataat:!0,relative;"#, b"abcd"));
        assert!(!m(r#"content:"ab"; isdataat:!0,relative;"#, b"abcd"));
        // The search backtracks to an occurrence where isdataat holds.
        assert!(m(r#"content:"ab"; isdataat:!0,relative;"#, b"abxab"));
    }

    #[test]
    fn budget_ends_pathological_searches() {
        let t = tests_of(
            r#"content:"a"; content:"a"; distance:0; content:"a"; distance:0; content:"a"; distance:0; content:"b"; distance:0;"#,
        );
        let payload = vec![b'a'; 4000];
        assert_eq!(rule_matches(&t, &payload), Verify::Exhausted);
        assert_eq!(rule_matches(&t, b"aaaab"), Verify::Match);
    }

    #[test]
    fn prefilter_marks_candidates() {
        let v = Vars::new();
        let rules: Vec<Rule> = [
            r#"alert tcp any any -> any any (content:"abc"; sid:1;)"#,
            r#"alert tcp any any -> any any (content:"xy"; content:"LONGER"; nocase; sid:2;)"#,
            r#"alert tcp any any -> any any (content:"q"; content:"zz"; fast_pattern; sid:3;)"#,
            r#"alert tcp any any -> any any (dsize:3; sid:4;)"#,
            r#"alert tcp any any -> any any (content:!"abc"; sid:5;)"#,
        ]
        .iter()
        .map(|t| parse_rule(t, "p:1", &v).unwrap())
        .collect();
        assert_eq!(fast_pattern(&rules[1]).unwrap().pattern, b"LONGER");
        assert_eq!(fast_pattern(&rules[2]).unwrap().pattern, b"zz");
        let pf = Prefilter::new(&rules).unwrap();
        let mut hits = Vec::new();
        let marked = |hits: &Vec<u64>| {
            (0..5)
                .filter(|&r| Prefilter::hit(hits, r))
                .collect::<Vec<_>>()
        };
        pf.scan(b"..abc..longer..", &mut hits);
        assert_eq!(marked(&hits), vec![0, 1, 3, 4]);
        pf.scan(b"zz", &mut hits);
        assert_eq!(marked(&hits), vec![2, 3, 4]);
    }
}
