//! `IPClassifier` and `IPFilter`: classify IP packets by tcpdump-like patterns, in Click's
//! dialect (see Click's `IPClassifier` manual page).
//!
//! Patterns are parsed at configure time into an [`Expr`] over field [`Test`]s; a packet is
//! classified by walking the expressions in order (no allocation per packet).
//!
//! Choices where Click leaves the behaviour to the packet layout:
//! * Patterns read the IP header at the network header annotation (set by `CheckIPHeader` or
//!   `MarkIPHeader`) and the transport header at the transport annotation, or, when that is not
//!   set, right after the IP header (`ip hl * 4`). A packet without a network annotation is
//!   still evaluated: every IP or transport test on it is false, so it only matches patterns
//!   like `true`, `-` or `not tcp`, and otherwise is dropped as not matching.
//! * A test that needs bytes past the end of the packet is false whatever its operator (Click's
//!   "short packet" rule); `not`/`!` is a plain logical negation of what it applies to.
//! * Port, `tcp opt`, `tcp win`, `icmp type` and `transp[...]` tests only match first
//!   fragments (fragment offset 0), as in Click.
//!
//! For synthesis, [`space::compile`] turns a pattern into the exact set of packets it matches
//! over the model's header fields, and both elements' models ([`Element::model`]) are their
//! rules in order, one case per box of each rule's set. A rule that cannot be compiled
//! exactly (`ether host`, `tcp win`, ...) ends the model with an [`Outcome::Runtime`] case:
//! the element classifies the packets no earlier rule took.

mod eval;
mod lexer;
mod parser;
pub mod rules;
pub mod space;

pub use eval::{full_mask, Base, CmpOp, Expr, Test, View};
pub use lexer::{tokenize, Token};
pub use parser::parse_pattern;

use crate::args::{unquote, Args};
use crate::model::{Case, Filter, Model, Outcome};
use crate::reason::MatchReason;
use crate::{BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

reasons! {
    /// Why `IPFilter` drops a packet.
    pub enum IPFilterReason {
        /// A `deny` (or `drop`) rule matched, or no rule did.
        Deny => "filter-deny",
    }
}

/// The configuration arguments as written (a leading upper-case word that `Args` took for a
/// keyword, such as an `AddressInfo` name, is put back), unquoted.
fn raw_args(args: &Args) -> Vec<String> {
    args.all()
        .iter()
        .map(|a| match &a.keyword {
            Some(k) => unquote(&format!("{k} {}", a.value)),
            None => unquote(&a.value),
        })
        .collect()
}

/// `IPClassifier(PATTERN_1, ..., PATTERN_N)`: sends each packet to the output of the first
/// pattern it matches; packets matching none are dropped (`no-match`).
#[derive(Debug, Clone)]
pub struct IPClassifier {
    patterns: Vec<Expr>,
}

impl IPClassifier {
    /// Parses the patterns of an `IPClassifier` configuration.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<IPClassifier, ConfigError> {
        let raw = raw_args(args);
        if raw.is_empty() {
            return Err(ConfigError::new("expected at least one pattern"));
        }
        let patterns = raw
            .iter()
            .enumerate()
            .map(|(i, text)| {
                parse_pattern(text, bcx.names)
                    .map_err(|e| ConfigError::new(format!("pattern {i}: {}", e.message)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(IPClassifier { patterns })
    }

    /// The parsed patterns, one per output.
    pub fn patterns(&self) -> &[Expr] {
        &self.patterns
    }

    /// The output of the first pattern `packet` matches.
    pub fn classify(&self, packet: &Packet) -> Option<usize> {
        let view = View::of(packet);
        self.patterns.iter().position(|e| e.matches(&view))
    }
}

impl Element for IPClassifier {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "IPClassifier"
    }
    fn port_count(&self) -> PortCount {
        // Click: `1/-`. Outputs no pattern names get nothing.
        PortCount::range(1, 1, self.patterns.len(), usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        match self.classify(&packet) {
            Some(o) => Verdict::Out(o, packet),
            None => Verdict::Drop(packet, MatchReason::NoMatch.into()),
        }
    }
    fn model(&self) -> Option<Model> {
        rules_model(
            self.patterns
                .iter()
                .enumerate()
                .map(|(i, e)| (e, Outcome::Out(i))),
            Outcome::Drop(MatchReason::NoMatch.into()),
        )
    }
    /// The packets its model leaves to run time (patterns on bytes no field names): it may
    /// read anything, writes nothing, drops what no pattern matches.
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(crate::record::Declared::reads_anything(true))
    }
}

/// The model of a first-match rule list: one case per box of each rule's pattern, in order,
/// then `otherwise` for packets matching no rule.
///
/// A pattern that cannot be compiled exactly ([`space::compile`] gives `None`) ends the
/// model with a [`Outcome::Runtime`] case for every packet no earlier rule took: the element
/// itself classifies those. If that happens before any case is made, the element is opaque.
pub(crate) fn rules_model<'a>(
    rules: impl Iterator<Item = (&'a Expr, Outcome)>,
    otherwise: Outcome,
) -> Option<Model> {
    let mut cases = Vec::new();
    for (expr, outcome) in rules {
        let Some(set) = space::compile(expr) else {
            if cases.is_empty() {
                return None;
            }
            cases.push(Case::new(Filter::any(), Outcome::Runtime));
            return Some(Model::new(cases));
        };
        for m in set.members() {
            cases.push(Case::new(m.clone(), outcome.clone()));
            if m.is_any() {
                return Some(Model::new(cases)); // nothing reaches the later rules
            }
        }
    }
    cases.push(Case::new(Filter::any(), otherwise));
    Some(Model::new(cases))
}

/// The rules of an `IPFilter` configuration in Click's dialect, each with where it was
/// written: the rules as given, with every `FILE path` argument replaced by the rules it
/// stands for (see [`rules`]; relative paths resolve against `base_dir`, or the working
/// directory when not found there) and the keywords `ALLOW_PERCENT`, `SEED` and `FIRST`
/// applied. What stock Click's `IPFilter` is given in place of FuseBox's `FILE`.
pub fn rule_texts(
    args: &Args,
    base_dir: &std::path::Path,
) -> Result<Vec<(String, String)>, ConfigError> {
    let number = |k: &str, default: u64| -> Result<u64, ConfigError> {
        args.keyword(k).map_or(Ok(default), |v| {
            v.trim()
                .parse()
                .map_err(|_| ConfigError::new(format!("{k}: expected a whole number, found `{v}`")))
        })
    };
    let cb = rules::ClassBenchActions {
        allow_percent: number("ALLOW_PERCENT", 85)?.min(100) as u32,
        seed: number("SEED", 1)?,
        first: match args.keyword("FIRST").map(str::trim) {
            None | Some("all") => None,
            Some(_) => Some(number("FIRST", 0)? as usize),
        },
    };
    let mut texts: Vec<(String, String)> = Vec::new();
    for (a, text) in args.all().iter().zip(raw_args(args)) {
        match a.keyword.as_deref() {
            Some("FILE") => {
                // The configuration's folder first; a path given with `--define`
                // may be relative to the working directory instead.
                let written = std::path::PathBuf::from(unquote(&a.value));
                let path = match base_dir.join(&written) {
                    p if p.exists() || !written.exists() => p,
                    _ => written,
                };
                for r in rules::load(&path, &cb)? {
                    texts.push((r.text, r.origin));
                }
            }
            Some("ALLOW_PERCENT" | "SEED" | "FIRST") => {}
            _ => {
                let i = texts.len();
                texts.push((text, format!("rule {i}")));
            }
        }
    }
    Ok(texts)
}

/// What an `IPFilter` rule does with the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterAction {
    /// Send out of this output (`allow` is output 0).
    Output(usize),
    /// Drop (`deny` or `drop`), counted as `filter-deny`.
    Drop,
}

/// `IPFilter(ACTION_1 PATTERN_1, ..., ACTION_N PATTERN_N)`: the first rule whose pattern
/// matches decides; packets matching no rule are dropped (`filter-deny`).
#[derive(Debug, Clone)]
pub struct IPFilter {
    rules: Vec<(FilterAction, Expr)>,
    noutputs: usize,
    /// The first-match tree, for long rule lists.
    index: Option<rules::FirstMatch>,
}

impl IPFilter {
    /// Parses the rules of an `IPFilter` configuration (`FILE path` arguments read rules
    /// from a file: see [`rules`]).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<IPFilter, ConfigError> {
        let texts = rule_texts(args, bcx.base_dir)?;
        if texts.is_empty() {
            return Err(ConfigError::new(
                "expected at least one `ACTION PATTERN` rule",
            ));
        }
        let mut rules = Vec::with_capacity(texts.len());
        for (text, origin) in &texts {
            let ctx = |m: String| ConfigError::new(format!("{origin}: {m}"));
            let toks = tokenize(text);
            let Some(first) = toks.first() else {
                return Err(ctx(
                    "expected `ACTION PATTERN`, found an empty argument".into()
                ));
            };
            let action = match first.text {
                "allow" => FilterAction::Output(0),
                "deny" | "drop" => FilterAction::Drop,
                w => match w.parse::<usize>() {
                    Ok(n) if n < 1 << 16 => FilterAction::Output(n),
                    _ => {
                        return Err(ctx(format!(
                            "expected an action (`allow`, `deny`, `drop` or an output number), found `{w}`"
                        )))
                    }
                },
            };
            let rest = &toks[1..];
            let expr = if rest.is_empty() {
                Expr::True
            } else {
                parser::parse_tokens(text, rest, bcx.names).map_err(|e| ctx(e.message))?
            };
            rules.push((action, expr));
        }
        let noutputs = rules
            .iter()
            .filter_map(|(a, _)| match a {
                FilterAction::Output(n) => Some(n + 1),
                FilterAction::Drop => None,
            })
            .max()
            .unwrap_or(1)
            .max(1);
        let index = rules::FirstMatch::new(&rules);
        Ok(IPFilter {
            rules,
            noutputs,
            index,
        })
    }

    /// The parsed rules, in order.
    pub fn rules(&self) -> &[(FilterAction, Expr)] {
        &self.rules
    }

    /// What the filter does with `packet`: the action of the first matching rule, or drop.
    pub fn decide(&self, packet: &Packet) -> FilterAction {
        let from = match self.index.as_ref().map(|t| (t.find(packet), t.covered())) {
            Some((Some(Some(i)), _)) => return self.rules[i].0,
            Some((Some(None), covered)) => covered,
            _ => 0,
        };
        self.decide_from(packet, from)
    }

    /// The action of the first rule from `from` on that `packet` matches, or drop (a plain
    /// scan: what [`IPFilter::decide`] must agree with).
    pub fn decide_from(&self, packet: &Packet, from: usize) -> FilterAction {
        let view = View::of(packet);
        self.rules
            .iter()
            .skip(from)
            .find(|(_, e)| e.matches(&view))
            .map_or(FilterAction::Drop, |(a, _)| *a)
    }

    /// The first-match tree, when the filter has one.
    pub fn index(&self) -> Option<&rules::FirstMatch> {
        self.index.as_ref()
    }
}

impl Element for IPFilter {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "IPFilter"
    }
    fn port_count(&self) -> PortCount {
        // Click: `1/-`. Outputs no rule names get nothing.
        PortCount::range(1, 1, self.noutputs, usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        match self.decide(&packet) {
            FilterAction::Output(o) => Verdict::Out(o, packet),
            FilterAction::Drop => Verdict::Drop(packet, IPFilterReason::Deny.into()),
        }
    }
    fn model(&self) -> Option<Model> {
        rules_model(
            self.rules.iter().map(|(a, e)| {
                let o = match a {
                    FilterAction::Output(n) => Outcome::Out(*n),
                    FilterAction::Drop => Outcome::Drop(IPFilterReason::Deny.into()),
                };
                (e, o)
            }),
            Outcome::Drop(IPFilterReason::Deny.into()),
        )
    }
    /// The packets its model leaves to run time (rules on bytes no field names): it may
    /// read anything, writes nothing, drops what the rules deny.
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(crate::record::Declared::reads_anything(true))
    }
}
