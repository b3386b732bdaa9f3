//! `BlacklistFilter`: the SpeedyBox paper's header blacklist, a linear scan of deny rules.
//!
//! ```text
//! BlacklistFilter(RULE, RULE, ..., [FILE path], ...)
//! ```
//!
//! Each rule is a pattern in Click's `IPFilter` dialect, optionally preceded by `deny` (or
//! `drop`): `deny src net 10.0.0.0/8 && dst port 80`, `udp && dst port 53`,
//! `ip proto 47`. `FILE path` stands for the rules of a file at its place among the others:
//! one rule per line in the same syntax, blank lines and lines starting with `#` or `//`
//! skipped; a ClassBench filter set (lines starting with `@`) is read as `IPFilter` reads it,
//! every rule a deny rule. Relative paths are read from the configuration's folder (or the
//! working directory, for paths given with `--define`). `allow` rules are refused: a
//! blacklist only denies.
//!
//! A packet matching any rule is dropped (`blacklisted`); the others leave on output 0.
//! The rules are tried in order for every packet, deliberately — it is the paper's
//! baseline NF, whose cost grows with the rule count (`IPFilter` builds a decision tree
//! instead). Patterns read the IPv4 header at the network header annotation, as `IPFilter`
//! does. Ports `1/1`. `stats`: `passed`, `blacklisted`.
//!
//! **Synthesis and fast path.** The model is the rule list (one case per box of each rule,
//! all dropping, then forward), as `IPFilter`'s; the fast path takes the recorded model case
//! as the flow's guard, so the element records nothing itself. When a rule cannot be
//! compiled exactly into header space the model hands those packets to the element at run
//! time, and a recorded packet is marked opaque.

use super::config_path;
use crate::args::unquote;
use crate::ipfilter::{parse_pattern, rules, rules_model, Expr, View};
use crate::model::{Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

reasons! {
    /// Why `BlacklistFilter` drops a packet.
    pub enum BlacklistFilterReason {
        /// A deny rule matched (also its `stats()` counter).
        Blacklisted => "blacklisted",
    }
}

/// `BlacklistFilter`: drops packets matching any deny rule (module docs).
#[derive(Debug, Clone)]
pub struct BlacklistFilter {
    rules: Vec<Expr>,
    exact: bool,
    passed: u64,
    blacklisted: u64,
}

/// Parses one rule (`[deny|drop] PATTERN`) written at `origin`.
fn parse_rule(text: &str, origin: &str, bcx: &BuildCtx) -> Result<Expr, ConfigError> {
    let t = text.trim();
    let word = t.split_whitespace().next().unwrap_or("");
    let body = match word {
        "deny" | "drop" => format!("{}{}", " ".repeat(word.len()), &t[word.len()..]),
        "allow" => {
            return Err(ConfigError::new(format!(
                "{origin}: expected a deny rule (`deny PATTERN` or `PATTERN`), found `allow`"
            )))
        }
        _ => t.to_string(),
    };
    if body.trim().is_empty() {
        return Err(ConfigError::new(format!(
            "{origin}: expected a pattern after `{word}`"
        )));
    }
    parse_pattern(&body, bcx.names).map_err(|e| ConfigError::new(format!("{origin}: {e}")))
}

impl BlacklistFilter {
    /// Builds the filter from its rules (see the module documentation).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<BlacklistFilter, ConfigError> {
        let mut rules = Vec::new();
        for (i, a) in args.all().iter().enumerate() {
            match a.keyword.as_deref() {
                Some("FILE") => {
                    let path = config_path(bcx, &unquote(&a.value));
                    let cb = rules::ClassBenchActions {
                        allow_percent: 0,
                        seed: 1,
                        first: None,
                    };
                    for r in rules::load(&path, &cb)? {
                        rules.push(parse_rule(&r.text, &r.origin, bcx)?);
                    }
                }
                Some(k) => {
                    // An upper-case first word (an `AddressInfo` name) is part of the rule.
                    let text = unquote(&format!("{k} {}", a.value));
                    rules.push(parse_rule(&text, &format!("rule {i}"), bcx)?);
                }
                None => rules.push(parse_rule(&unquote(&a.value), &format!("rule {i}"), bcx)?),
            }
        }
        if rules.is_empty() {
            return Err(ConfigError::new(
                "expected at least one rule (`deny PATTERN`) or `FILE path`",
            ));
        }
        let exact = rules
            .iter()
            .all(|e| crate::ipfilter::space::compile(e).is_some());
        Ok(BlacklistFilter {
            rules,
            exact,
            passed: 0,
            blacklisted: 0,
        })
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Expr] {
        &self.rules
    }

    /// Whether `packet` matches a rule (the linear scan).
    pub fn matches(&self, packet: &Packet) -> bool {
        let view = View::of(packet);
        self.rules.iter().any(|e| e.matches(&view))
    }
}

impl Element for BlacklistFilter {
    fn class_name(&self) -> &'static str {
        "BlacklistFilter"
    }

    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }

    fn push(&mut self, _port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        if !self.exact {
            cx.record_opaque("blacklist rule without an exact model");
        }
        if self.matches(&packet) {
            self.blacklisted += 1;
            Verdict::Drop(packet, BlacklistFilterReason::Blacklisted.into())
        } else {
            self.passed += 1;
            Verdict::Out(0, packet)
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("passed", self.passed),
            (BlacklistFilterReason::Blacklisted.into(), self.blacklisted),
        ]
    }

    fn model(&self) -> Option<Model> {
        let m = rules_model(
            self.rules
                .iter()
                .map(|e| (e, Outcome::Drop(BlacklistFilterReason::Blacklisted.into()))),
            Outcome::Out(0),
        )?;
        let cases = m
            .cases
            .into_iter()
            .map(|c| match c.outcome {
                Outcome::Out(_) => c.stat("passed"),
                Outcome::Drop(_) => c.stat(BlacklistFilterReason::Blacklisted.into()),
                _ => c,
            })
            .collect();
        Some(Model::new(cases))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs::testutil::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    /// A rule the naive check below understands: source prefix, destination prefix,
    /// optional protocol and destination port.
    #[derive(Debug, Clone)]
    struct NaiveRule {
        src: (u32, u8),
        dst: (u32, u8),
        proto: Option<u8>,
        dport: Option<u16>,
    }

    impl NaiveRule {
        fn text(&self) -> String {
            let mut t = format!(
                "deny src net {}/{} && dst net {}/{}",
                Ipv4Addr::from(self.src.0),
                self.src.1,
                Ipv4Addr::from(self.dst.0),
                self.dst.1
            );
            if let Some(p) = self.proto {
                t += if p == wire::IpProtocol::TCP {
                    " && tcp"
                } else {
                    " && udp"
                };
            }
            if let Some(d) = self.dport {
                t += &format!(" && dst port {d}");
            }
            t
        }
        fn hit(&self, proto: u8, s: u32, d: u32, dport: u16) -> bool {
            let inp = |a: u32, (n, l): (u32, u8)| l == 0 || (a ^ n) >> (32 - l) == 0;
            inp(s, self.src)
                && inp(d, self.dst)
                && self.proto.is_none_or(|p| p == proto)
                && self.dport.is_none_or(|p| p == dport)
        }
    }

    fn rule() -> impl Strategy<Value = NaiveRule> {
        (
            (0u32..4, 0u8..=3),
            (0u32..4, 0u8..=3),
            prop::option::of(prop_oneof![Just(6u8), Just(17u8)]),
            prop::option::of(79u16..82),
        )
            .prop_map(|((s, sl), (d, dl), proto, dport)| NaiveRule {
                // Prefixes over 10.0.0.0/8 with lengths 8, 16, 24, 30.
                src: (0x0a00_0000 | s, [8, 16, 24, 30][sl as usize]),
                dst: (0x0a00_0000 | d << 8, [8, 16, 24, 30][dl as usize]),
                proto,
                dport,
            })
    }

    proptest! {
        #[test]
        fn agrees_with_a_per_rule_check(
            rules in prop::collection::vec(rule(), 1..12),
            pkts in prop::collection::vec((any::<bool>(), 0u32..4, 0u32..4, 79u16..82), 1..40),
        ) {
            let cfg = rules.iter().map(NaiveRule::text).collect::<Vec<_>>().join(", ");
            let mut e = ok("BlacklistFilter", &cfg, 1);
            let m = e.model().unwrap();
            prop_assert!(m.cases.iter().all(|c| !matches!(c.outcome, Outcome::Runtime)));
            let (mut passed, mut dropped) = (0, 0);
            for (tcp, s, d, dport) in pkts {
                let proto = if tcp { 6 } else { 17 };
                let (sa, da) = (0x0a00_0000 | s, 0x0a00_0000 | d << 8);
                let p = frame(proto, Ipv4Addr::from(sa).octets(), 1000, Ipv4Addr::from(da).octets(), dport);
                let want = rules.iter().any(|r| r.hit(proto, sa, da, dport));
                // The model gives the same outcome and counters as push.
                let a = crate::model::apply(&m, p.duplicate());
                let (outcome, stat) = if want {
                    (Outcome::Drop("blacklisted"), "blacklisted")
                } else {
                    (Outcome::Out(0), "passed")
                };
                prop_assert_eq!(&a.outcome, &outcome);
                prop_assert_eq!(a.stats, vec![stat]);
                match push(e.as_mut(), 0, p, 0) {
                    Ok((0, _)) => { prop_assert!(!want); passed += 1; }
                    Err("blacklisted") => { prop_assert!(want); dropped += 1; }
                    other => prop_assert!(false, "{:?}", other.map(|x| x.0)),
                }
            }
            prop_assert_eq!(e.stats(), vec![("passed", passed), ("blacklisted", dropped)]);
        }
    }

    #[test]
    fn model_agrees_with_push() {
        let mut e = ok(
            "BlacklistFilter",
            "deny src net 10.0.0.0/8 && dst port 80, udp && dst port 53",
            1,
        );
        let m = e.model().unwrap();
        for (proto, src, dport) in [
            (6, [10, 1, 1, 1], 80),
            (6, [11, 1, 1, 1], 80),
            (17, [11, 0, 0, 1], 53),
            (6, [11, 0, 0, 1], 53),
        ] {
            let p = frame(proto, src, 1, [20, 0, 0, 1], dport);
            let a = crate::model::apply(&m, p.duplicate());
            let got = push(e.as_mut(), 0, p, 0);
            assert_eq!(
                format!("{:?}", a.outcome),
                format!(
                    "{:?}",
                    match got {
                        Ok((o, _)) => Outcome::Out(o),
                        Err(r) => Outcome::Drop(r),
                    }
                )
            );
        }
    }

    #[test]
    fn fast_path_records_nothing_unless_a_rule_has_no_exact_model() {
        let mut e = ok("BlacklistFilter", "deny tcp && dst port 23", 1);
        let (v, step, _) = push_recording(
            e.as_mut(),
            0,
            frame(6, [1, 1, 1, 1], 5, [2, 2, 2, 2], 23),
            0,
        );
        assert_eq!(v.unwrap_err(), "blacklisted");
        assert_eq!(step, crate::record::Step::default());
        let mut e = ok("BlacklistFilter", "deny tcp win 512", 1);
        assert!(e.model().is_none());
        let (v, step, _) = push_recording(
            e.as_mut(),
            0,
            frame(6, [1, 1, 1, 1], 5, [2, 2, 2, 2], 23),
            0,
        );
        assert_eq!(v.unwrap().0, 0);
        assert!(step.opaque.is_some());
    }

    #[test]
    fn rules_from_a_file_and_errors() {
        let tmp = tempfile::Builder::new()
            .prefix("fusebox-bl-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        std::fs::write(
            dir.join("bl.rules"),
            "# blacklist\ndeny dst port 23\n\nudp && src host 10.0.0.9\n",
        )
        .unwrap();
        let mut e = make_in("BlacklistFilter", "FILE bl.rules", 1, dir).unwrap();
        assert_eq!(
            e.as_any()
                .downcast_ref::<BlacklistFilter>()
                .unwrap()
                .rules()
                .len(),
            2
        );
        assert_eq!(
            push(
                e.as_mut(),
                0,
                frame(6, [1, 1, 1, 1], 5, [2, 2, 2, 2], 23),
                0
            )
            .unwrap_err(),
            "blacklisted"
        );
        assert_eq!(
            push(
                e.as_mut(),
                0,
                frame(17, [10, 0, 0, 9], 5, [2, 2, 2, 2], 24),
                0
            )
            .unwrap_err(),
            "blacklisted"
        );
        assert_eq!(
            push(
                e.as_mut(),
                0,
                frame(6, [10, 0, 0, 9], 5, [2, 2, 2, 2], 24),
                0
            )
            .unwrap()
            .0,
            0
        );
        std::fs::write(dir.join("bad.rules"), "deny dst port 23\ndeny dst prt 5\n").unwrap();
        let msg = make_in("BlacklistFilter", "FILE bad.rules", 1, dir)
            .err()
            .unwrap()
            .message;
        assert!(msg.contains("bad.rules:2"), "{msg}");
        assert!(err("BlacklistFilter", "").contains("at least one rule"));
        assert!(err("BlacklistFilter", "allow tcp").contains("expected a deny rule"));
        assert!(err("BlacklistFilter", "deny").contains("expected a pattern"));
    }
}
