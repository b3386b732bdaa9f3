//! `SignatureNF`: signature matching over reassembled TCP streams, the core of Snort's
//! content matching as NetBricks' §5 NF: a `window` over every TCP stream, the rules'
//! `content` patterns searched in each window with one Aho-Corasick automaton.
//!
//! ```text
//! SignatureNF(RULES FILE [, WINDOW BYTES] [, TIMEOUT SECONDS] [, VAR NAME VALUE ...])
//! ```
//!
//! * **Rules** are Snort 2.9 rules (the `SnortIDS` parser, `elements::ids::rules`). A TCP
//!   rule with at least one `content` applies to a stream when its header takes the
//!   stream's direction (addresses and ports) and *every* one of its contents occurs
//!   somewhere in the stream's bytes (`nocase` honoured). Positional modifiers (`offset`,
//!   `depth`, `distance`, `within`) are ignored, as a stream has no packet boundaries to
//!   count from; rules that are not TCP, have no content, or need a content to be absent
//!   (`content:!`, `isdataat`) are not used and are counted in `rules_unused`. Unsupported
//!   rule options are skipped, as `SnortIDS(SKIP_UNSUPPORTED true)` does.
//! * **Windows.** `WINDOW` bytes (default 1,500, at least twice the longest pattern) sliding
//!   by `WINDOW - (longest pattern - 1)`, so every occurrence of every pattern lies whole
//!   in one window, however the stream was segmented, reordered or retransmitted (the
//!   window reassembles: see `operators::stream`). `TIMEOUT` (default 60 s of packet time)
//!   closes idle streams. Bytes of a stream still open at the end of a run that fill no
//!   window are not inspected.
//! * **What it does to packets:** nothing; every packet leaves by output 0 (NetBricks'
//!   window forwards what it reassembles). It raises alerts: one per (stream, rule), listed
//!   in the NF's state as `alert SID:REV #CONNECTION DIRECTION FLOW MSG`, in the order they
//!   were found, and counted (`alerts`).
//!
//! `SnortIDS` matches each packet alone: a pattern split across two segments is invisible
//! to it and found here; on patterns inside single segments both raise the same
//! (flow, rule) alerts (the tests show both).

use aho_corasick::{AhoCorasick, MatchKind};
use elements::args::parse_uint;
use elements::ids::rules::{Proto, Rule, RuleSet, Test, Vars};
use elements::model::{Field, IpAnchor};
use elements::record::{Access, Declared};
use elements::registry::{Doc, ElementClass};
use elements::{Args, BuildCtx, ConfigError, Element};
use operators::nf::class;
use operators::stream::{StreamId, Window, WindowInfo, WindowKind};
use operators::{Cx, OperatorNf, Pkt, Raw, Stage};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The class name.
pub const NAME: &str = "SignatureNF";

/// A rule as the NF uses it: its header, the patterns that must all occur, its name.
struct Signature {
    rule: Rule,
    patterns: Vec<usize>,
}

/// The compiled rules.
struct Matcher {
    signatures: Vec<Signature>,
    /// Case-sensitive patterns, then case-insensitive ones: pattern ids in that order.
    exact: Option<AhoCorasick>,
    nocase: Option<AhoCorasick>,
    exact_count: usize,
    longest: usize,
}

impl Matcher {
    fn new(rules: Vec<Rule>) -> Result<(Matcher, u64), String> {
        let mut exact: Vec<Vec<u8>> = Vec::new();
        let mut nocase: Vec<Vec<u8>> = Vec::new();
        let mut pending = Vec::new();
        let mut unused = 0u64;
        for rule in rules {
            let contents: Option<Vec<_>> = rule
                .tests
                .iter()
                .map(|t| match t {
                    Test::Content(c) if !c.negated && !c.pattern.is_empty() => Some(c),
                    _ => None,
                })
                .collect();
            match contents {
                Some(cs) if rule.proto == Proto::Tcp && !cs.is_empty() => {
                    let ids = cs
                        .iter()
                        .map(|c| {
                            let list = if c.nocase { &mut nocase } else { &mut exact };
                            let at = list.iter().position(|p| *p == c.pattern);
                            (
                                c.nocase,
                                at.unwrap_or_else(|| {
                                    list.push(c.pattern.clone());
                                    list.len() - 1
                                }),
                            )
                        })
                        .collect::<Vec<_>>();
                    pending.push((rule, ids));
                }
                _ => unused += 1,
            }
        }
        let exact_count = exact.len();
        let longest = exact.iter().chain(&nocase).map(Vec::len).max().unwrap_or(1);
        let build = |pats: &[Vec<u8>], ci: bool| -> Result<Option<AhoCorasick>, String> {
            if pats.is_empty() {
                return Ok(None);
            }
            AhoCorasick::builder()
                .ascii_case_insensitive(ci)
                .match_kind(MatchKind::Standard)
                .build(pats)
                .map(Some)
                .map_err(|e| e.to_string())
        };
        let signatures = pending
            .into_iter()
            .map(|(rule, ids)| Signature {
                rule,
                patterns: ids
                    .into_iter()
                    .map(|(ci, i)| if ci { exact_count + i } else { i })
                    .collect(),
            })
            .collect();
        Ok((
            Matcher {
                signatures,
                exact: build(&exact, false)?,
                nocase: build(&nocase, true)?,
                exact_count,
                longest,
            },
            unused,
        ))
    }

    /// Marks in `found` every pattern occurring in `bytes` (overlapping occurrences count).
    fn scan(&self, bytes: &[u8], found: &mut [bool]) {
        let mut mark = |ac: &Option<AhoCorasick>, base: usize| {
            if let Some(ac) = ac {
                for m in ac.find_overlapping_iter(bytes) {
                    if let Some(f) = found.get_mut(base + m.pattern().as_usize()) {
                        *f = true;
                    }
                }
            }
        };
        mark(&self.exact, 0);
        mark(&self.nocase, self.exact_count);
    }

    fn patterns(&self) -> usize {
        self.exact_count + self.nocase.as_ref().map_or(0, |a| a.patterns_len())
    }
}

/// What the window's UDF gathers: per open stream, the patterns found so far and the rules
/// that alerted; the alerts in order.
#[derive(Default)]
struct Findings {
    open: HashMap<(u64, bool), (Vec<bool>, Vec<bool>)>,
    alerts: Vec<String>,
}

fn v4(a: IpAddr) -> u32 {
    match a {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(_) => 0,
    }
}

impl Findings {
    fn window(&mut self, m: &Matcher, info: &WindowInfo, bytes: &[u8]) {
        let key = (
            info.stream.connection,
            info.stream.direction == operators::stream::Direction::Client,
        );
        let (found, alerted) = self
            .open
            .entry(key)
            .or_insert_with(|| (vec![false; m.patterns()], vec![false; m.signatures.len()]));
        m.scan(bytes, found);
        let s: &StreamId = &info.stream;
        let f = &s.flow;
        for (i, sig) in m.signatures.iter().enumerate() {
            if alerted[i] || !sig.patterns.iter().all(|&p| found[p]) {
                continue;
            }
            let header = sig.rule.header_matches(
                f.protocol,
                v4(f.src),
                f.src_port,
                v4(f.dst),
                f.dst_port,
                true,
            );
            if header && matches!(f.src, IpAddr::V4(_)) {
                alerted[i] = true;
                self.alerts.push(format!(
                    "alert {}:{} {} {}",
                    sig.rule.sid,
                    sig.rule.rev,
                    s,
                    sig.rule.msg.as_deref().unwrap_or("")
                ));
            }
        }
        if matches!(info.kind, WindowKind::Last(_)) {
            self.open.remove(&key);
        }
    }
}

type Udf = Box<dyn FnMut(&WindowInfo, &[u8]) + Send>;

/// The NF's one stage: the window over every packet, packets handed on unchanged.
pub struct Signatures {
    window: Window<Udf>,
    findings: Arc<Mutex<Findings>>,
    rules: usize,
    unused: u64,
}

impl Stage<Pkt<Raw>> for Signatures {
    type Out = Pkt<Raw>;
    #[inline]
    fn run(&mut self, p: Pkt<Raw>, _: &mut Cx) -> Option<Pkt<Raw>> {
        self.window.observe(p.packet());
        Some(p)
    }
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        let w = self.window.stats();
        let alerts = self.findings.lock().map_or(0, |f| f.alerts.len() as u64);
        out.extend([
            ("rules", self.rules as u64),
            ("rules_unused", self.unused),
            ("alerts", alerts),
            ("windows", w.calls),
            ("connections", w.connections),
        ]);
    }
    fn state(&self, out: &mut Vec<String>) {
        if let Ok(f) = self.findings.lock() {
            out.extend(f.alerts.iter().cloned());
        }
    }
}

impl Signatures {
    /// The stage for `rules`, windows of at least `window` bytes, streams idle for
    /// `timeout` closed.
    pub fn new(rules: Vec<Rule>, window: usize, timeout: Duration) -> Result<Signatures, String> {
        let (matcher, unused) = Matcher::new(rules)?;
        let rules = matcher.signatures.len();
        let size = window.max(2 * matcher.longest);
        let slide = size - (matcher.longest - 1);
        let findings = Arc::new(Mutex::new(Findings::default()));
        let f = Arc::clone(&findings);
        let udf: Udf = Box::new(move |info, bytes| {
            if let Ok(mut f) = f.lock() {
                f.window(&matcher, info, bytes);
            }
        });
        let window = Window::new(size, slide, timeout, udf).map_err(|e| e.to_string())?;
        Ok(Signatures {
            window,
            findings,
            rules,
            unused,
        })
    }

    /// The alerts raised so far, in order.
    pub fn alerts(&self) -> Vec<String> {
        self.findings
            .lock()
            .map(|f| f.alerts.clone())
            .unwrap_or_default()
    }
}

fn build(
    name: &'static str,
    args: &Args,
    bcx: &BuildCtx<'_>,
) -> Result<Box<dyn Element>, ConfigError> {
    let err = |m: String| ConfigError::new(format!("{name}: {m}"));
    args.check(1, &["RULES", "WINDOW", "TIMEOUT", "VAR"])
        .map_err(|e| err(e.message))?;
    let file = args
        .require(0, "RULES", "a Snort rule file")
        .map_err(|e| err(e.message))?;
    let mut vars = Vars::new();
    for a in args.all() {
        if a.keyword.as_deref() == Some("VAR") {
            let (k, v) = a
                .value
                .split_once(char::is_whitespace)
                .ok_or_else(|| err(format!("VAR takes NAME VALUE, found `{}`", a.value)))?;
            vars.set(k, v.trim());
        }
    }
    let window = match args.keyword("WINDOW") {
        Some(w) => parse_uint(w, "WINDOW")? as usize,
        None => 1500,
    };
    let timeout = match args.keyword("TIMEOUT") {
        Some(t) => parse_uint(t, "TIMEOUT")?,
        None => 60,
    };
    let path = bcx.base_dir.join(file);
    let path = if path.exists() { path } else { file.into() };
    let mut set = RuleSet::default();
    set.load(&path, &vars, true).map_err(|e| err(e.message))?;
    let stage = Signatures::new(set.rules, window, Duration::from_secs(timeout)).map_err(err)?;
    Ok(Box::new(
        OperatorNf::<_, ()>::new(name, 1, stage).with_declared(declared()),
    ))
}

/// What the NF declares for the planner: it reads the flow and TCP header (IPv4 header at
/// 14, as its pipeline parses it) and the payload it searches, keeps streams; nothing
/// written, nothing dropped.
pub fn declared() -> Declared {
    Declared {
        sets_headers: true,
        ip_at: IpAnchor::Data(14),
        payload: Access::Read,
        stateful: true,
        ..Declared::default()
    }
    .read(&[Field::EtherType])
    .read(&Declared::FLOW)
    .read(&Declared::L4_HEADER)
}

/// The registry entry.
pub const CLASS: ElementClass = class(
    NAME,
    build,
    Doc::new(
        "RULES FILE [, WINDOW BYTES] [, TIMEOUT SECONDS] [, VAR NAME VALUE ...]",
        "Signature matching written with operators (examples/bricks): a window over every \
         TCP stream, Snort rules' contents searched in the reassembled bytes (all of a \
         rule's contents anywhere in the stream); one alert per stream and rule, packets \
         forwarded unchanged.",
        "RULES /dev/null",
    ),
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::push;
    use wire::build::Frame;

    const RULES: &str = "\
alert tcp any any -> any 80 (msg:\"split\"; content:\"EVILPAYLOAD\"; sid:1; rev:2;)
alert tcp any any -> any any (msg:\"two\"; content:\"abc\"; content:\"XYZ\"; nocase; sid:2;)
alert udp any any -> any any (msg:\"udp\"; content:\"EVIL\"; sid:3;)
alert tcp any any -> any any (msg:\"absent\"; content:!\"EVIL\"; sid:4;)
";

    fn rules() -> Vec<Rule> {
        RuleSet::parse(RULES, "t.rules", &Vars::new(), true)
            .unwrap()
            .rules
    }

    fn segment(seq: u32, flags: u8, data: &[u8]) -> Vec<u8> {
        Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 40000, 80)
            .seq_ack(seq, 1)
            .flags(flags)
            .payload(data)
            .build()
    }

    /// A stream `data` cut at `cuts`, sent in `order`, after a SYN, ending with a FIN.
    fn run(stage: &mut Signatures, data: &[u8], cuts: &[usize], order: &[usize]) {
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(data.len());
        let pieces: Vec<_> = bounds
            .windows(2)
            .map(|w| (w[0], &data[w[0]..w[1]]))
            .collect();
        let mut cx = Cx::default();
        let mut go = |f: Vec<u8>| {
            let p = Pkt::new(packet::Packet::from_bytes(&f));
            assert!(stage.run(p, &mut cx).is_some(), "every packet passes");
        };
        go(segment(999, 0x02, b""));
        for &i in order {
            let (at, bytes) = pieces[i];
            go(segment(1000 + at as u32, 0x18, bytes));
        }
        go(segment(1000 + data.len() as u32, 0x11, b""));
    }

    #[test]
    fn finds_patterns_across_segments_in_any_order() {
        let data = b"GET / HTTP/1.0\r\n..EVILPAYLOAD..abc....xyz..";
        let mut s = Signatures::new(rules(), 16, Duration::from_secs(60)).unwrap();
        // The pattern is cut in three, and the pieces arrive out of order.
        run(&mut s, data, &[20, 24, 30], &[2, 0, 3, 1]);
        let alerts = s.alerts();
        assert_eq!(alerts.len(), 2, "{alerts:?}");
        assert!(alerts[0].starts_with("alert 1:2 #0 Client"), "{alerts:?}");
        assert!(alerts[1].starts_with("alert 2:0 #0 Client"), "{alerts:?}");
        let mut stats = Vec::new();
        s.stats(&mut stats);
        assert!(stats.contains(&("rules", 2)) && stats.contains(&("rules_unused", 2)));
    }

    #[test]
    fn a_rule_needs_all_its_contents() {
        let mut s = Signatures::new(rules(), 16, Duration::from_secs(60)).unwrap();
        run(&mut s, b"....abc.....EVIL.PAYLOAD", &[5], &[1, 0]);
        assert!(s.alerts().is_empty(), "{:?}", s.alerts());
    }

    #[test]
    fn builds_by_name_and_forwards_everything() {
        let dir = tempfile::Builder::new()
            .prefix("sig-nf-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("t.rules"), RULES).unwrap();
        let mut nf = crate::testutil::build_in(NAME, "RULES t.rules, WINDOW 64", 1, dir.path())
            .unwrap_or_else(|e| panic!("{e}"));
        drop(dir);
        for (i, f) in [
            segment(999, 0x02, b""),
            segment(1000, 0x18, b"xxEVILPAY"),
            segment(1009, 0x18, b"LOADxx"),
            segment(1015, 0x11, b""),
        ]
        .iter()
        .enumerate()
        {
            match push(&mut *nf, 0, f, i as u64) {
                elements::Verdict::Out(0, p) => assert_eq!(p.data(), &f[..]),
                v => panic!("{v:?}"),
            }
        }
        let state = nf.state_dump();
        assert_eq!(state.len(), 1, "{state:?}");
        assert!(state[0].starts_with("alert 1:2 #0 Client"));
        let e = crate::testutil::build_in(NAME, "", 1, std::path::Path::new(".")).err();
        assert!(e.is_some_and(|e| e.message.starts_with("SignatureNF: ")));
    }

    #[test]
    fn same_alerts_as_snort_ids_when_patterns_sit_in_one_segment() {
        let tmp = tempfile::Builder::new()
            .prefix("sig-ids-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        // The rules both use (SignatureNF leaves out rules needing a content's absence).
        let both: String = RULES.lines().take(3).map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.join("t.rules"), both).unwrap();
        let mut nf = crate::testutil::build_in(NAME, "RULES t.rules", 1, dir).unwrap();
        let mut ids =
            crate::testutil::build_in("SnortIDS", "RULES t.rules, SKIP_UNSUPPORTED true", 1, dir)
                .unwrap_or_else(|e| panic!("{e}"));
        drop(tmp);
        // Flow 1 carries both rules' contents inside single segments; flow 2 (port 81)
        // carries sid 1's pattern, which its header does not take.
        let flow = |sport: u16, dport: u16, seq: u32, flags: u8, data: &[u8]| {
            Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], sport, dport)
                .seq_ack(seq, 1)
                .flags(flags)
                .payload(data)
                .build()
        };
        let frames = [
            flow(1, 80, 9, 0x02, b""),
            flow(2, 81, 9, 0x02, b""),
            flow(1, 80, 10, 0x18, b"..EVILPAYLOAD.."),
            flow(2, 81, 10, 0x18, b"..EVILPAYLOAD.."),
            flow(1, 80, 25, 0x18, b"abc and xyz"),
            flow(1, 80, 36, 0x11, b""),
            flow(2, 81, 25, 0x11, b""),
        ];
        for (i, f) in frames.iter().enumerate() {
            let a = push(&mut *nf, 0, f, i as u64);
            let b = push(&mut *ids, 0, f, i as u64);
            assert!(matches!(
                (a, b),
                (elements::Verdict::Out(0, _), elements::Verdict::Out(0, _))
            ));
        }
        let ours: Vec<u32> = nf
            .state_dump()
            .iter()
            .map(|l| l.split([' ', ':']).nth(1).unwrap().parse().unwrap())
            .collect();
        let snort = ids
            .as_any()
            .downcast_ref::<elements::ids::SnortIDS>()
            .unwrap()
            .alert_counts()
            .keys()
            .map(|&(_, sid)| sid)
            .collect::<Vec<_>>();
        assert_eq!(ours, snort);
        assert_eq!(ours, [1, 2]);
    }
}
