//! Snort 2.9 rules and `snort.conf` variables: the parser of `SnortIDS`.
//!
//! # Rule files
//!
//! One rule per line; a line ending in `\` continues on the next; blank lines and lines
//! starting with `#` are skipped (so the community rules' disabled `# alert …` lines stay
//! disabled). A rule is `ACTION PROTO SRC SPORT DIR DST DPORT (OPTIONS)`:
//!
//! * **Actions:** `alert`, `log`, `pass`, `drop`, `sdrop` (drop without an alert). `reject`,
//!   `activate`, `dynamic` are refused by name (unsupported).
//! * **Protocols:** `tcp`, `udp`, `icmp`, `ip` (any IPv4 packet; ports are ignored), and
//!   Suricata's `tcp-pkt` as `tcp` (matching is per packet anyway); `tcp-stream` and
//!   application protocols are refused (unsupported).
//! * **Addresses:** `any`, `a.b.c.d`, `a.b.c.d/len`, lists `[x,y,…]` (nested), negation
//!   `!x` (a list keeps its plain members minus its negated ones; a list of negations only
//!   means everything but them), variables `$NAME`. IPv6 members are accepted and match
//!   nothing (the element inspects IPv4).
//! * **Ports:** `any`, `n`, `a:b`, `:b`, `a:`, lists, negation, variables (`portvar`).
//! * **Direction:** `->`, or `<>` for both ways.
//!
//! Variables come from `snort.conf` (`ipvar`, `portvar`, `var`; every other line is
//! ignored, except `config order:` and `config classification:`), then from the element's
//! own `VAR NAME VALUE` arguments, which override the file. *Decision:* an undefined
//! `$HOME_NET` or `$EXTERNAL_NET` means `any` (Snort's shipped defaults); any other
//! undefined variable is an error naming it.
//!
//! # Options
//!
//! * **Detection:** `content:[!]"…"` (`|41 42|` hex runs, `\"`, `\;`, `\\`, `\:` escapes)
//!   with `nocase`, `offset`, `depth`, `distance`, `within`, `rawbytes` (no effect: no
//!   normalisation is done) and `fast_pattern` (`:only`, `:o,l`: chooses the content the
//!   prefilter searches); `isdataat:[!]n[,relative]`; `flow:` with `established`,
//!   `not_established`, `stateless`, `to_server`, `from_client`, `to_client`,
//!   `from_server`, `no_stream` (every packet is unreassembled here); `dsize:[<|>|!]n` or
//!   `a<>b` (inclusive).
//! * **Metadata:** `msg`, `sid`, `rev`, `gid`, `classtype` (Snort's standard
//!   classifications, plus `config classification:` lines), `priority`, `reference`,
//!   `metadata`.
//! * Anything else (`pcre`, `flags`, `ttl`, `byte_test`, `http_uri`, …) makes the rule
//!   unsupported: refused with the option's name, file, line and column, or — with
//!   `SKIP_UNSUPPORTED true` — skipped and counted. Malformed rules (bad hex, a missing `;`,
//!   `offset` twice, `depth` with `distance`, `depth` shorter than the pattern, an
//!   undefined variable, a content that cannot end within the largest `dsize`, …) are always
//!   refused.

use space::FieldSet;
use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use wire::IpProtocol;

/// What a rule does with the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Alert, forward.
    Alert,
    /// Alert (an alert line, as `alert`), forward.
    Log,
    /// The packet is not checked against the rules after this one (in evaluation order).
    Pass,
    /// Alert and drop (`ids-drop`).
    Drop,
    /// Drop without an alert.
    Sdrop,
}

impl Action {
    /// The keyword.
    pub fn name(self) -> &'static str {
        match self {
            Action::Alert => "alert",
            Action::Log => "log",
            Action::Pass => "pass",
            Action::Drop => "drop",
            Action::Sdrop => "sdrop",
        }
    }

    fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "alert" => Action::Alert,
            "log" => Action::Log,
            "pass" => Action::Pass,
            "drop" => Action::Drop,
            "sdrop" => Action::Sdrop,
            _ => return None,
        })
    }

    /// Snort 2.9's default evaluation order: pass, drop, sdrop, (reject), alert, log.
    pub const DEFAULT_ORDER: [Action; 5] = [
        Action::Pass,
        Action::Drop,
        Action::Sdrop,
        Action::Alert,
        Action::Log,
    ];
}

/// The protocol a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proto {
    /// TCP (IPv4 protocol 6).
    Tcp,
    /// UDP (17).
    Udp,
    /// ICMP (1).
    Icmp,
    /// Any IPv4 packet.
    Ip,
}

/// What `flow:` asks of the packet's session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowOpts {
    /// `Some(true)`: `established`; `Some(false)`: `not_established`.
    pub established: Option<bool>,
    /// `Some(true)`: `to_server`/`from_client`; `Some(false)`: `to_client`/`from_server`.
    pub to_server: Option<bool>,
}

/// One `content` and its modifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// The bytes searched for.
    pub pattern: Vec<u8>,
    /// `content:!"…"`: the rule needs the pattern to be absent from the window.
    pub negated: bool,
    /// ASCII case-insensitive.
    pub nocase: bool,
    /// `offset` (from the payload start).
    pub offset: Option<i32>,
    /// `depth` (from `offset`).
    pub depth: Option<u32>,
    /// `distance` (from the end of the previous content match).
    pub distance: Option<i32>,
    /// `within` (from the end of the previous match plus `distance`).
    pub within: Option<u32>,
    /// `fast_pattern`: the content the prefilter searches for.
    pub fast_pattern: bool,
    /// `fast_pattern:only` (no positional modifiers allowed).
    pub fast_pattern_only: bool,
}

impl Content {
    /// Whether the content is placed relative to the previous match.
    pub fn relative(&self) -> bool {
        self.distance.is_some() || self.within.is_some()
    }
}

/// A test that reads the payload, in the order the rule lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Test {
    /// A `content` with its modifiers.
    Content(Content),
    /// `isdataat:[!]n[,relative]`.
    IsDataAt {
        /// The offset.
        n: u32,
        /// From the end of the previous content match instead of the payload start.
        relative: bool,
        /// `!`: true when there is *no* data there.
        negated: bool,
    },
}

/// One parsed rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The action.
    pub action: Action,
    /// The protocol.
    pub proto: Proto,
    /// Source addresses (IPv4, 32-bit values).
    pub src: FieldSet,
    /// Source ports.
    pub sport: FieldSet,
    /// `<>`: the rule applies both ways.
    pub bidir: bool,
    /// Destination addresses.
    pub dst: FieldSet,
    /// Destination ports.
    pub dport: FieldSet,
    /// Generator id (`gid`, default 1).
    pub gid: u32,
    /// Signature id.
    pub sid: u32,
    /// Revision (`rev`, default 0).
    pub rev: u32,
    /// `msg`.
    pub msg: Option<String>,
    /// `classtype`'s description and priority.
    pub class: Option<(String, u32)>,
    /// `priority`, else the classtype's, else 0 (printed as Snort does).
    pub priority: u32,
    /// Payload tests, in order.
    pub tests: Vec<Test>,
    /// `flow:`.
    pub flow: FlowOpts,
    /// `dsize`, as an inclusive range of payload sizes.
    pub dsize: Option<(u32, u32)>,
    /// Where the rule was written (`file:line`).
    pub origin: String,
}

impl Rule {
    /// Whether the rule's header takes a packet `src:sport -> dst:dport` of protocol
    /// `proto` (ports are ignored for `icmp` and `ip` rules and when `ports` is false).
    pub fn header_matches(
        &self,
        proto: u8,
        src: u32,
        sport: u16,
        dst: u32,
        dport: u16,
        ports: bool,
    ) -> bool {
        let (want_ports, proto_ok) = match self.proto {
            Proto::Tcp => (true, proto == IpProtocol::TCP && ports),
            Proto::Udp => (true, proto == IpProtocol::UDP && ports),
            Proto::Icmp => (false, proto == IpProtocol::ICMP),
            Proto::Ip => (false, true),
        };
        if !proto_ok {
            return false;
        }
        let one = |s: u32, sp: u16, d: u32, dp: u16| {
            self.src.contains(u128::from(s))
                && self.dst.contains(u128::from(d))
                && (!want_ports
                    || (self.sport.contains(u128::from(sp)) && self.dport.contains(u128::from(dp))))
        };
        one(src, sport, dst, dport) || (self.bidir && one(dst, dport, src, sport))
    }
}

/// A rule-file or configuration error: where and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// `file:line:column: message`.
    pub message: String,
    /// The rule uses something this IDS does not implement (it may be skipped), as opposed
    /// to being malformed.
    pub unsupported: bool,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// An error at a column of the rule text (0-based byte offset), before the location is added.
#[derive(Debug)]
struct ColumnError {
    col: usize,
    msg: String,
    unsupported: bool,
}

fn bad<T>(col: usize, msg: impl Into<String>) -> Result<T, ColumnError> {
    Err(ColumnError {
        col,
        msg: msg.into(),
        unsupported: false,
    })
}

fn unsupported<T>(col: usize, msg: impl Into<String>) -> Result<T, ColumnError> {
    Err(ColumnError {
        col,
        msg: msg.into(),
        unsupported: true,
    })
}

/// Variables and settings read from `snort.conf` and the element's arguments.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    vars: HashMap<String, String>,
    /// `config order:` (evaluation order of actions), if given.
    pub order: Option<Vec<Action>>,
    classes: HashMap<String, (String, u32)>,
}

/// Snort 2.9's `classification.config` (name, description, priority).
const CLASSES: &[(&str, &str, u32)] = &[
    ("not-suspicious", "Not Suspicious Traffic", 3),
    ("unknown", "Unknown Traffic", 3),
    ("bad-unknown", "Potentially Bad Traffic", 2),
    ("attempted-recon", "Attempted Information Leak", 2),
    ("successful-recon-limited", "Information Leak", 2),
    (
        "successful-recon-largescale",
        "Large Scale Information Leak",
        2,
    ),
    ("attempted-dos", "Attempted Denial of Service", 2),
    ("successful-dos", "Denial of Service", 2),
    ("attempted-user", "Attempted User Privilege Gain", 1),
    ("unsuccessful-user", "Unsuccessful User Privilege Gain", 1),
    ("successful-user", "Successful User Privilege Gain", 1),
    (
        "attempted-admin",
        "Attempted Administrator Privilege Gain",
        1,
    ),
    (
        "successful-admin",
        "Successful Administrator Privilege Gain",
        1,
    ),
    ("rpc-portmap-decode", "Decode of an RPC Query", 2),
    ("shellcode-detect", "Executable code was detected", 1),
    ("string-detect", "A suspicious string was detected", 3),
    (
        "suspicious-filename-detect",
        "A suspicious filename was detected",
        2,
    ),
    (
        "suspicious-login",
        "An attempted login using a suspicious username was detected",
        2,
    ),
    ("system-call-detect", "A system call was detected", 2),
    ("tcp-connection", "A TCP connection was detected", 4),
    ("trojan-activity", "A Network Trojan was detected", 1),
    (
        "unusual-client-port-connection",
        "A client was using an unusual port",
        2,
    ),
    ("network-scan", "Detection of a Network Scan", 3),
    (
        "denial-of-service",
        "Detection of a Denial of Service Attack",
        2,
    ),
    (
        "non-standard-protocol",
        "Detection of a non-standard protocol or event",
        2,
    ),
    (
        "protocol-command-decode",
        "Generic Protocol Command Decode",
        3,
    ),
    (
        "web-application-activity",
        "access to a potentially vulnerable web application",
        2,
    ),
    ("web-application-attack", "Web Application Attack", 1),
    ("misc-activity", "Misc activity", 3),
    ("misc-attack", "Misc Attack", 2),
    ("icmp-event", "Generic ICMP event", 3),
    (
        "inappropriate-content",
        "Inappropriate Content was Detected",
        1,
    ),
    (
        "policy-violation",
        "Potential Corporate Privacy Violation",
        1,
    ),
    (
        "default-login-attempt",
        "Attempt to login by a default username and password",
        2,
    ),
    ("sdf", "Sensitive Data", 2),
    (
        "file-format",
        "Known malicious file or file based exploit",
        1,
    ),
    (
        "malware-cnc",
        "Known malware command and control traffic",
        1,
    ),
    (
        "client-side-exploit",
        "Known client side exploit attempt",
        1,
    ),
];

/// Lines of a file with `\` continuations joined: (first line number, 1-based; text).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let (n, mut acc) = cur.take().unwrap_or((i + 1, String::new()));
        let t = line.trim_end();
        if let Some(head) = t.strip_suffix('\\') {
            acc.push_str(head);
            cur = Some((n, acc));
        } else {
            acc.push_str(t);
            out.push((n, acc));
        }
    }
    if let Some(c) = cur {
        out.push(c);
    }
    out
}

impl Vars {
    /// No variables: `$HOME_NET` and `$EXTERNAL_NET` mean `any`.
    pub fn new() -> Vars {
        Vars::default()
    }

    /// Sets variable `name` to `value` (text, expanded where it is used).
    pub fn set(&mut self, name: &str, value: &str) {
        self.vars.insert(
            name.trim_start_matches('$').to_string(),
            value.trim().to_string(),
        );
    }

    /// The text of variable `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// Reads the variables, `config order:` and `config classification:` lines of a
    /// `snort.conf` text (`name` is the file's name for errors). Other lines are ignored.
    pub fn read_conf(&mut self, text: &str, name: &str) -> Result<(), RuleError> {
        for (line, l) in logical_lines(text) {
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let col = l.len() - l.trim_start().len() + 1;
            let err = |m: String| RuleError {
                message: format!("{name}:{line}:{col}: {m}"),
                unsupported: false,
            };
            let mut words = t.splitn(3, char::is_whitespace);
            let kw = words.next().unwrap_or("");
            match kw {
                "ipvar" | "portvar" | "var" => {
                    let var = words.next().unwrap_or("");
                    let value = words.next().map(str::trim).unwrap_or("");
                    if var.is_empty() || value.is_empty() {
                        return Err(err(format!("expected `{kw} NAME VALUE`, found `{t}`")));
                    }
                    if !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        return Err(err(format!(
                            "expected a variable name (letters, digits, `_`), found `{var}`"
                        )));
                    }
                    self.set(var, value);
                }
                "config" => {
                    let rest = t["config".len()..].trim();
                    if let Some(v) = rest.strip_prefix("order:") {
                        let mut order = Vec::new();
                        for w in v.split_whitespace() {
                            match Action::parse(w) {
                                Some(a) => order.push(a),
                                None if matches!(w, "reject" | "activation" | "dynamic") => {}
                                None => {
                                    return Err(err(format!(
                                        "config order: expected rule actions, found `{w}`"
                                    )))
                                }
                            }
                        }
                        self.order = Some(order);
                    } else if let Some(v) = rest.strip_prefix("classification:") {
                        let parts: Vec<&str> = v.split(',').map(str::trim).collect();
                        let prio = parts.get(2).and_then(|p| p.parse::<u32>().ok());
                        match (parts.len(), prio) {
                            (3, Some(p)) => {
                                self.classes
                                    .insert(parts[0].to_string(), (parts[1].to_string(), p));
                            }
                            _ => {
                                return Err(err(format!(
                                    "config classification: expected `NAME,DESCRIPTION,PRIORITY`, found `{}`",
                                    v.trim()
                                )))
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn class(&self, name: &str) -> Option<(String, u32)> {
        if let Some(c) = self.classes.get(name) {
            return Some(c.clone());
        }
        CLASSES
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, d, p)| (d.to_string(), *p))
    }

    /// The value of `$name` for a rule (`HOME_NET`/`EXTERNAL_NET` default to `any`).
    fn lookup(&self, name: &str, col: usize) -> Result<&str, ColumnError> {
        match self.vars.get(name) {
            Some(v) => Ok(v),
            None if name == "HOME_NET" || name == "EXTERNAL_NET" => Ok("any"),
            None => bad(
                col,
                format!("undefined variable `${name}` (define it in snort.conf or with VAR)"),
            ),
        }
    }
}

const MAX_DEPTH: usize = 16;

/// Splits a list body `a,[b,c],d` on top-level commas.
fn split_list(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// What an address or port list is: a set of values of `width` bits.
trait Space {
    const WIDTH: u32;
    const WHAT: &'static str;
    fn atom(s: &str, col: usize) -> Result<FieldSet, ColumnError>;
}

struct Addrs;
impl Space for Addrs {
    const WIDTH: u32 = 32;
    const WHAT: &'static str = "an address (any, a.b.c.d[/len], [list], !x or $VAR)";
    fn atom(s: &str, col: usize) -> Result<FieldSet, ColumnError> {
        let (ip, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        if let Ok(a) = ip.parse::<Ipv4Addr>() {
            let len = match len {
                None => 32,
                Some(l) => match l.parse::<u32>() {
                    Ok(n) if n <= 32 => n,
                    _ => return bad(col, format!("expected a prefix length 0-32, found `{l}`")),
                },
            };
            return Ok(FieldSet::prefix(u128::from(u32::from(a)), len, 32));
        }
        if ip.parse::<Ipv6Addr>().is_ok() {
            if let Some(l) = len {
                if !matches!(l.parse::<u32>(), Ok(n) if n <= 128) {
                    return bad(col, format!("expected a prefix length 0-128, found `{l}`"));
                }
            }
            return Ok(FieldSet::empty()); // IPv6: never an IPv4 packet's address
        }
        bad(col, format!("expected {}, found `{s}`", Self::WHAT))
    }
}

struct Ports;
impl Space for Ports {
    const WIDTH: u32 = 16;
    const WHAT: &'static str = "a port (any, n, a:b, :b, a:, [list], !x or $VAR)";
    fn atom(s: &str, col: usize) -> Result<FieldSet, ColumnError> {
        let num = |t: &str| -> Result<u128, ColumnError> {
            match t.parse::<u32>() {
                Ok(n) if n <= 65535 => Ok(u128::from(n)),
                _ => bad(col, format!("expected a port 0-65535, found `{t}`")),
            }
        };
        match s.split_once(':') {
            None => Ok(FieldSet::single(num(s)?)),
            Some((a, b)) => {
                let lo = if a.is_empty() { 0 } else { num(a)? };
                let hi = if b.is_empty() { 65535 } else { num(b)? };
                if a.is_empty() && b.is_empty() || lo > hi {
                    return bad(
                        col,
                        format!("expected a port range a:b with a <= b, found `{s}`"),
                    );
                }
                Ok(FieldSet::range(lo, hi))
            }
        }
    }
}

/// Parses an address or port expression (see the module documentation).
fn parse_set<S: Space>(
    s: &str,
    col: usize,
    vars: &Vars,
    depth: usize,
) -> Result<FieldSet, ColumnError> {
    if depth > MAX_DEPTH {
        return bad(
            col,
            "variables nested too deep (a variable refers to itself?)",
        );
    }
    let s = s.trim();
    let full = FieldSet::full(S::WIDTH);
    if let Some(rest) = s.strip_prefix('!') {
        let inner = parse_set::<S>(rest, col, vars, depth + 1)?;
        return Ok(inner.complement(S::WIDTH));
    }
    if s == "any" {
        return Ok(full);
    }
    if let Some(name) = s.strip_prefix('$') {
        let v = vars.lookup(name, col)?;
        return parse_set::<S>(v, col, vars, depth + 1);
    }
    if let Some(body) = s.strip_prefix('[') {
        let Some(body) = body.strip_suffix(']') else {
            return bad(col, format!("expected `]` closing the list `{s}`"));
        };
        let mut plus = FieldSet::empty();
        let mut minus = FieldSet::empty();
        let mut any_plus = false;
        for item in split_list(body) {
            let item = item.trim();
            if item.is_empty() {
                return bad(
                    col,
                    format!("expected {}, found an empty list item in `{s}`", S::WHAT),
                );
            }
            if let Some(neg) = item.strip_prefix('!') {
                minus = minus.union(&parse_set::<S>(neg, col, vars, depth + 1)?);
            } else {
                any_plus = true;
                plus = plus.union(&parse_set::<S>(item, col, vars, depth + 1)?);
            }
        }
        let base = if any_plus { plus } else { full };
        return Ok(base.difference(&minus));
    }
    if s.is_empty() || s.contains(['[', ']', ',']) {
        return bad(col, format!("expected {}, found `{s}`", S::WHAT));
    }
    S::atom(s, col)
}

/// Splits the header into whitespace-separated words with their columns; brackets keep
/// lists with spaces (`[1, 2]`) in one word.
fn header_words(h: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut depth = 0i32;
    for (i, c) in h.char_indices() {
        match c {
            '[' => {
                depth += 1;
                start.get_or_insert(i);
            }
            ']' => depth -= 1,
            c if c.is_whitespace() && depth <= 0 => {
                if let Some(s) = start.take() {
                    out.push((s, &h[s..i]));
                }
            }
            _ => {
                start.get_or_insert(i);
            }
        }
    }
    if let Some(s) = start {
        out.push((s, &h[s..]));
    }
    out
}

/// Options' text: (column of the name, name, value if any, column of the value).
type RawOption<'a> = (usize, &'a str, Option<&'a str>, usize);

/// Splits the option body (between the parentheses) on unquoted, unescaped `;`.
fn split_options(body: &str, base: usize) -> Result<Vec<RawOption<'_>>, ColumnError> {
    let mut out = Vec::new();
    let bytes = body.as_bytes();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            break;
        }
        let start = i;
        let mut quote = false;
        let mut escaped = false;
        while i < bytes.len() {
            let c = bytes[i];
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                quote = !quote;
            } else if c == b';' && !quote {
                break;
            }
            i += 1;
        }
        if quote {
            return bad(base + start, "expected a closing `\"`");
        }
        // The last option may go without its `;` (`…; sid:1)`).
        let piece = &body[start..i];
        i += 1; // the `;`
        if piece.trim().is_empty() {
            return bad(
                base + start,
                "expected an option, found an empty one (`;;`)",
            );
        }
        let (name, value, vcol) = match piece.find(':') {
            Some(c) => (
                piece[..c].trim(),
                Some(piece[c + 1..].trim()),
                base + start + c + 1 + (piece[c + 1..].len() - piece[c + 1..].trim_start().len()),
            ),
            None => (piece.trim(), None, base + start),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            return bad(
                base + start,
                format!("expected an option name, found `{}`", piece.trim()),
            );
        }
        out.push((base + start, name, value, vcol));
    }
    Ok(out)
}

/// Why a `content` value does not parse ([`parse_content`]); each message says what was
/// expected and what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    /// No opening quote.
    #[error("expected a quoted string, found `{0}`")]
    Unquoted(String),
    /// No closing quote.
    #[error("expected a closing `\"` in `{0}`")]
    Unclosed(String),
    /// Text after the closing quote.
    #[error("expected `;` after the closing quote, found `{0}`")]
    Trailing(String),
    /// An odd number of hex digits for a byte.
    #[error("expected two hex digits per byte, found a lone digit")]
    LoneDigit,
    /// A character other than a hex digit between `|`.
    #[error("expected hex digits between `|`, found `{0}`")]
    NotHex(char),
    /// A backslash at the end.
    #[error("expected a character after `\\`")]
    DanglingEscape,
    /// A backslash before a character that needs no escape.
    #[error("expected one of `\\\"`, `\\;`, `\\\\`, `\\:`, `\\|`, found `\\{0}`")]
    BadEscape(char),
    /// A bare quote inside the content.
    #[error("expected `\\\"` for a quote inside the content")]
    BareQuote,
    /// A bare semicolon inside the content.
    #[error("expected `\\;` for a semicolon inside the content")]
    BareSemicolon,
    /// Hex bytes not closed by `|`.
    #[error("expected `|` closing the hex bytes")]
    UnclosedHex,
    /// `""`.
    #[error("expected a non-empty content")]
    Empty,
}

/// Parses a content string `"…"` (quotes required) into bytes.
pub fn parse_content(v: &str) -> Result<Vec<u8>, ContentError> {
    let v = v.trim();
    if v.len() < 2 || !v.starts_with('"') {
        return Err(ContentError::Unquoted(v.to_string()));
    }
    let bytes = v.as_bytes();
    // Find the closing quote.
    let mut i = 1;
    let mut escaped = false;
    let mut end = None;
    while i < bytes.len() {
        let c = bytes[i];
        if escaped {
            escaped = false;
        } else if c == b'\\' {
            escaped = true;
        } else if c == b'"' {
            end = Some(i);
            break;
        }
        i += 1;
    }
    let Some(end) = end else {
        return Err(ContentError::Unclosed(v.to_string()));
    };
    let trailing = v[end + 1..].trim();
    if !trailing.is_empty() {
        return Err(ContentError::Trailing(trailing.to_string()));
    }
    let inner = &bytes[1..end];
    let mut out = Vec::new();
    let mut hex = false;
    let mut nibble: Option<u8> = None;
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        if hex {
            match c {
                b'|' => {
                    if nibble.is_some() {
                        return Err(ContentError::LoneDigit);
                    }
                    hex = false;
                }
                b' ' | b'\t' => {
                    if nibble.is_some() {
                        return Err(ContentError::LoneDigit);
                    }
                }
                c if c.is_ascii_hexdigit() => {
                    let d = (c as char).to_digit(16).unwrap_or(0) as u8;
                    match nibble.take() {
                        Some(h) => out.push(h << 4 | d),
                        None => nibble = Some(d),
                    }
                }
                c => return Err(ContentError::NotHex(c as char)),
            }
        } else {
            match c {
                b'|' => hex = true,
                b'\\' => {
                    let Some(&n) = inner.get(i + 1) else {
                        return Err(ContentError::DanglingEscape);
                    };
                    if !matches!(n, b'"' | b';' | b'\\' | b':' | b'|') {
                        return Err(ContentError::BadEscape(n as char));
                    }
                    out.push(n);
                    i += 1;
                }
                b'"' => return Err(ContentError::BareQuote),
                b';' => return Err(ContentError::BareSemicolon),
                c => out.push(c),
            }
        }
        i += 1;
    }
    if hex {
        return Err(ContentError::UnclosedHex);
    }
    if out.is_empty() {
        return Err(ContentError::Empty);
    }
    Ok(out)
}

fn unquote_msg(v: &str) -> String {
    let v = v.trim();
    let v = v
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(v);
    let mut out = String::new();
    let mut it = v.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            if let Some(n) = it.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn number<T: std::str::FromStr>(
    v: Option<&str>,
    col: usize,
    name: &str,
    what: &str,
) -> Result<T, ColumnError> {
    let t = v.unwrap_or("").trim();
    t.parse::<T>()
        .or_else(|_| bad(col, format!("{name}: expected {what}, found `{t}`")))
}

/// Snort's limit for offsets, depths, distances and withins.
const MAX_OFF: i64 = 65535;

/// Parses one rule line (`origin` is `file:line` for messages; columns are added).
pub fn parse_rule(text: &str, origin: &str, vars: &Vars) -> Result<Rule, RuleError> {
    parse_rule_at(text, origin, vars).map_err(|a| RuleError {
        message: format!("{origin}:{}: {}", a.col + 1, a.msg),
        unsupported: a.unsupported,
    })
}

fn parse_rule_at(text: &str, origin: &str, vars: &Vars) -> Result<Rule, ColumnError> {
    let Some(open) = text.find('(') else {
        return bad(0, "expected `(` starting the rule options");
    };
    let Some(close) = text.rfind(')') else {
        return bad(text.len(), "expected `)` closing the rule options");
    };
    if close < open {
        return bad(close, "expected `(` before `)`");
    }
    if !text[close + 1..].trim().is_empty() {
        return bad(close + 1, "expected nothing after the closing `)`");
    }
    let words = header_words(&text[..open]);
    if words.is_empty() {
        return bad(0, "expected a rule action (alert, log, pass, drop, sdrop)");
    }
    let (c0, act) = words[0];
    let action = match Action::parse(act) {
        Some(a) => a,
        None if matches!(act, "reject" | "activate" | "dynamic") => {
            return unsupported(c0, format!("action `{act}` is not supported"))
        }
        None => {
            return bad(
                c0,
                format!("expected a rule action (alert, log, pass, drop, sdrop), found `{act}`"),
            )
        }
    };
    if words.len() != 7 {
        return bad(
            c0,
            format!(
                "expected `ACTION PROTO SRC SPORT -> DST DPORT (OPTIONS)`, found {} header words",
                words.len()
            ),
        );
    }
    let (c1, p) = words[1];
    let proto = match p {
        // Suricata's per-packet TCP is what `tcp` means here (no reassembly).
        "tcp" | "tcp-pkt" => Proto::Tcp,
        "udp" => Proto::Udp,
        "icmp" => Proto::Icmp,
        "ip" => Proto::Ip,
        "tcp-stream" | "http" | "tls" | "dns" | "smb" | "ftp" | "ssh" | "ipv6" | "icmpv6"
        | "sctp" | "udp-pkt" => return unsupported(c1, format!("protocol `{p}` is not supported")),
        _ => {
            return bad(
                c1,
                format!("expected a protocol (tcp, udp, icmp, ip), found `{p}`"),
            )
        }
    };
    let (cs, s) = words[2];
    let src = parse_set::<Addrs>(s, cs, vars, 0)?;
    let (csp, sp) = words[3];
    let sport = parse_set::<Ports>(sp, csp, vars, 0)?;
    let (cd, d) = words[4];
    let bidir = match d {
        "->" => false,
        "<>" => true,
        _ => {
            return bad(
                cd,
                format!("expected a direction (`->` or `<>`), found `{d}`"),
            )
        }
    };
    let (cda, da) = words[5];
    let dst = parse_set::<Addrs>(da, cda, vars, 0)?;
    let (cdp, dp) = words[6];
    let dport = parse_set::<Ports>(dp, cdp, vars, 0)?;

    let mut rule = Rule {
        action,
        proto,
        src,
        sport,
        bidir,
        dst,
        dport,
        gid: 1,
        sid: 0,
        rev: 0,
        msg: None,
        class: None,
        priority: 0,
        tests: Vec::new(),
        flow: FlowOpts::default(),
        dsize: None,
        origin: origin.to_string(),
    };
    let mut sid = None;
    let mut priority = None;
    let mut last_content: Option<usize> = None; // index into tests
    let mut seen_content = false;
    for (col, name, value, vcol) in split_options(&text[open + 1..close], open + 1)? {
        let need = |v: Option<&str>| -> Result<(), ColumnError> {
            match v {
                Some(s) if !s.is_empty() => Ok(()),
                _ => bad(col, format!("{name}: expected a value (`{name}:…;`)")),
            }
        };
        match name {
            "msg" => {
                need(value)?;
                rule.msg = Some(unquote_msg(value.unwrap_or("")));
            }
            "sid" => sid = Some(number::<u32>(value, vcol, name, "a number")?),
            "rev" => rule.rev = number::<u32>(value, vcol, name, "a number")?,
            "gid" => rule.gid = number::<u32>(value, vcol, name, "a number")?,
            "priority" => priority = Some(number::<u32>(value, vcol, name, "a number")?),
            "classtype" => {
                need(value)?;
                let v = value.unwrap_or("").trim();
                match vars.class(v) {
                    Some(c) => rule.class = Some(c),
                    None => return bad(vcol, format!("classtype: unknown classification `{v}`")),
                }
            }
            "reference" | "metadata" => need(value)?,
            "content" => {
                need(value)?;
                let v = value.unwrap_or("").trim();
                let (negated, q) = match v.strip_prefix('!') {
                    Some(r) => (true, r.trim_start()),
                    None => (false, v),
                };
                let pattern = parse_content(q).or_else(|m| bad(vcol, format!("content: {m}")))?;
                rule.tests.push(Test::Content(Content {
                    pattern,
                    negated,
                    nocase: false,
                    offset: None,
                    depth: None,
                    distance: None,
                    within: None,
                    fast_pattern: false,
                    fast_pattern_only: false,
                }));
                last_content = Some(rule.tests.len() - 1);
                seen_content = true;
            }
            "nocase" | "rawbytes" | "fast_pattern" | "offset" | "depth" | "distance" | "within" => {
                let Some(Test::Content(c)) = last_content.and_then(|i| rule.tests.get_mut(i))
                else {
                    return bad(col, format!("{name}: expected a `content` before it"));
                };
                let int = |min: i64| -> Result<i64, ColumnError> {
                    let t = value.unwrap_or("").trim();
                    match t.parse::<i64>() {
                        Ok(n) if (min..=MAX_OFF).contains(&n) => Ok(n),
                        _ => bad(
                            vcol,
                            format!("{name}: expected a number {min}..{MAX_OFF}, found `{t}`"),
                        ),
                    }
                };
                let dup = |set: bool| -> Result<(), ColumnError> {
                    if set {
                        bad(col, format!("{name}: given twice for one content"))
                    } else {
                        Ok(())
                    }
                };
                let fp_conflict = |c: &Content| -> Result<(), ColumnError> {
                    if c.fast_pattern && c.negated {
                        return bad(
                            col,
                            "fast_pattern: a negated content cannot be the fast pattern",
                        );
                    }
                    Ok(())
                };
                match name {
                    "nocase" => c.nocase = true,
                    "rawbytes" => {}
                    "fast_pattern" => {
                        dup(c.fast_pattern)?;
                        let v = value.unwrap_or("").trim();
                        if !(v.is_empty() || v == "only" || is_fp_range(v)) {
                            return bad(vcol, format!("fast_pattern: expected nothing, `only` or `offset,length`, found `{v}`"));
                        }
                        if v == "only" && (c.relative() || c.offset.is_some() || c.depth.is_some())
                        {
                            return bad(col, "fast_pattern:only cannot be used with offset, depth, distance or within");
                        }
                        c.fast_pattern = true;
                        c.fast_pattern_only = v == "only";
                    }
                    "offset" | "depth" | "distance" | "within" if c.fast_pattern_only => {
                        return bad(
                            col,
                            format!("{name}: cannot modify a fast_pattern:only content"),
                        );
                    }
                    "offset" | "depth" => {
                        if c.relative() {
                            return bad(col, format!("{name}: cannot be combined with distance or within on one content"));
                        }
                        if name == "offset" {
                            dup(c.offset.is_some())?;
                            c.offset = Some(int(-MAX_OFF)? as i32);
                        } else {
                            dup(c.depth.is_some())?;
                            let d = int(1)?;
                            if (d as usize) < c.pattern.len() {
                                return bad(
                                    vcol,
                                    format!(
                                        "depth: {d} is shorter than the pattern ({} bytes)",
                                        c.pattern.len()
                                    ),
                                );
                            }
                            c.depth = Some(d as u32);
                        }
                    }
                    _ => {
                        if c.offset.is_some() || c.depth.is_some() {
                            return bad(col, format!("{name}: cannot be combined with offset or depth on one content"));
                        }
                        if name == "distance" {
                            dup(c.distance.is_some())?;
                            c.distance = Some(int(-MAX_OFF)? as i32);
                        } else {
                            dup(c.within.is_some())?;
                            let w = int(1)?;
                            if (w as usize) < c.pattern.len() {
                                return bad(
                                    vcol,
                                    format!(
                                        "within: {w} is shorter than the pattern ({} bytes)",
                                        c.pattern.len()
                                    ),
                                );
                            }
                            c.within = Some(w as u32);
                        }
                    }
                }
                fp_conflict(c)?;
            }
            "isdataat" => {
                need(value)?;
                let v = value.unwrap_or("").trim();
                let (negated, rest) = match v.strip_prefix('!') {
                    Some(r) => (true, r.trim_start()),
                    None => (false, v),
                };
                let mut parts = rest.split(',').map(str::trim);
                let n: u32 = match parts.next().map(str::parse::<u32>) {
                    Some(Ok(n)) if i64::from(n) <= MAX_OFF => n,
                    _ => {
                        return bad(
                            vcol,
                            format!("isdataat: expected `[!]n[,relative]`, found `{v}`"),
                        )
                    }
                };
                let mut relative = false;
                for p in parts {
                    match p {
                        "relative" => relative = true,
                        "rawbytes" => {}
                        _ => {
                            return bad(
                                vcol,
                                format!("isdataat: expected `relative` or `rawbytes`, found `{p}`"),
                            )
                        }
                    }
                }
                if relative && !seen_content {
                    return bad(col, "isdataat: `relative` needs a content before it");
                }
                rule.tests.push(Test::IsDataAt {
                    n,
                    relative,
                    negated,
                });
            }
            "flow" => {
                need(value)?;
                for w in value.unwrap_or("").split(',').map(str::trim) {
                    let (est, dir): (Option<bool>, Option<bool>) = match w {
                        "established" => (Some(true), None),
                        "not_established" => (Some(false), None),
                        "stateless" | "no_stream" => (None, None),
                        "to_server" | "from_client" => (None, Some(true)),
                        "to_client" | "from_server" => (None, Some(false)),
                        "only_stream" | "no_frag" | "only_frag" => {
                            return unsupported(vcol, format!("flow: `{w}` is not supported"))
                        }
                        _ => return bad(vcol, format!("flow: expected established, not_established, stateless, to_server, to_client, from_server, from_client or no_stream, found `{w}`")),
                    };
                    if let Some(e) = est {
                        if rule.flow.established.is_some_and(|x| x != e) {
                            return bad(vcol, "flow: established and not_established together");
                        }
                        rule.flow.established = Some(e);
                    }
                    if let Some(d) = dir {
                        if rule.flow.to_server.is_some_and(|x| x != d) {
                            return bad(vcol, "flow: both directions given");
                        }
                        rule.flow.to_server = Some(d);
                    }
                }
            }
            "dsize" => {
                if rule.dsize.is_some() {
                    return bad(col, "dsize: given twice");
                }
                need(value)?;
                rule.dsize =
                    Some(parse_dsize(value.unwrap_or("")).or_else(|m| bad(vcol, m.to_string()))?);
            }
            _ => return unsupported(col, format!("option `{name}` is not supported")),
        }
    }
    rule.sid = match sid {
        Some(s) => s,
        None => return bad(close, "expected a `sid` option"),
    };
    rule.priority = priority.or(rule.class.as_ref().map(|c| c.1)).unwrap_or(0);
    // Contents that can never fit in the payload sizes dsize allows: the earliest end of
    // each positive content (offsets and distances taken at their smallest).
    if let Some((_, max)) = rule.dsize {
        let mut end = 0i64;
        for t in &rule.tests {
            if let Test::Content(c) = t {
                if c.negated {
                    continue;
                }
                let len = c.pattern.len() as i64;
                let start = if c.relative() {
                    end + i64::from(c.distance.unwrap_or(0))
                } else {
                    i64::from(c.offset.unwrap_or(0))
                };
                end = start.max(0) + len;
                if end > i64::from(max) {
                    return bad(
                        open + 1,
                        format!(
                            "content of {len} bytes ending at {end} at the earliest can never match with dsize at most {max}"
                        ),
                    );
                }
            }
        }
    }
    let _ = origin;
    Ok(rule)
}

fn is_fp_range(v: &str) -> bool {
    let mut it = v.split(',').map(str::trim);
    matches!((it.next(), it.next(), it.next()), (Some(a), Some(b), None) if a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
}

/// Why a `dsize` value does not parse (the value as written in each).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum DsizeError {
    #[error("dsize: expected a size 0-65535, found `{0}`")]
    Size(String),
    #[error("dsize: expected a<>b with a <= b, found `{0}`")]
    Reversed(String),
    #[error("dsize: `{0}` can never match")]
    Never(String),
    #[error("dsize: negation is not supported, found `{0}`")]
    Negated(String),
}

/// Parses `dsize`'s value into an inclusive range.
fn parse_dsize(v: &str) -> Result<(u32, u32), DsizeError> {
    let v = v.trim();
    let num = |t: &str| -> Result<u32, DsizeError> {
        match t.trim().parse::<u32>() {
            Ok(n) if n <= 65535 => Ok(n),
            _ => Err(DsizeError::Size(t.trim().to_string())),
        }
    };
    if let Some((a, b)) = v.split_once("<>") {
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(DsizeError::Reversed(v.to_string()));
        }
        return Ok((a, b));
    }
    if let Some(r) = v.strip_prefix('>') {
        let n = num(r)?;
        if n >= 65535 {
            return Err(DsizeError::Never(v.to_string()));
        }
        return Ok((n + 1, 65535));
    }
    if let Some(r) = v.strip_prefix('<') {
        let n = num(r)?;
        if n == 0 {
            return Err(DsizeError::Never(v.to_string()));
        }
        return Ok((0, n - 1));
    }
    if v.starts_with('!') {
        return Err(DsizeError::Negated(v.to_string()));
    }
    let n = num(v.strip_prefix('=').unwrap_or(v))?;
    Ok((n, n))
}

/// A loaded rule set: the rules in file order and how many were skipped.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// The rules, in the order written.
    pub rules: Vec<Rule>,
    /// Rules skipped as unsupported (`SKIP_UNSUPPORTED true`), with the reason.
    pub skipped: Vec<String>,
}

impl RuleSet {
    /// Parses the rules of `text` (`name` names the file in messages). With `skip`,
    /// unsupported rules are skipped and listed instead of refused.
    pub fn parse(text: &str, name: &str, vars: &Vars, skip: bool) -> Result<RuleSet, RuleError> {
        let mut set = RuleSet::default();
        set.add(text, name, vars, skip)?;
        Ok(set)
    }

    /// Adds the rules of `text` (see [`RuleSet::parse`]).
    pub fn add(
        &mut self,
        text: &str,
        name: &str,
        vars: &Vars,
        skip: bool,
    ) -> Result<(), RuleError> {
        for (line, l) in logical_lines(text) {
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let lead = l.len() - l.trim_start().len();
            let origin = format!("{name}:{line}");
            match parse_rule(t, &origin, vars) {
                Ok(r) => self.rules.push(r),
                Err(e) => {
                    // Columns are relative to the trimmed text: shift them to the line.
                    let e = if lead > 0 {
                        shift_column(e, &origin, lead)
                    } else {
                        e
                    };
                    if e.unsupported && skip {
                        self.skipped.push(e.message);
                    } else {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads and parses a rule file.
    pub fn load(&mut self, path: &Path, vars: &Vars, skip: bool) -> Result<(), RuleError> {
        let name = path.display().to_string();
        let text = std::fs::read(path).map_err(|e| RuleError {
            message: format!("RULES {name}: cannot read it: {e}"),
            unsupported: false,
        })?;
        self.add(&String::from_utf8_lossy(&text), &name, vars, skip)
    }
}

fn shift_column(e: RuleError, origin: &str, lead: usize) -> RuleError {
    let prefix = format!("{origin}:");
    let message = match e.message.strip_prefix(&prefix).and_then(|rest| {
        let (col, msg) = rest.split_once(':')?;
        Some(format!(
            "{prefix}{}:{msg}",
            col.parse::<usize>().ok()? + lead
        ))
    }) {
        Some(m) => m,
        None => e.message,
    };
    RuleError { message, ..e }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(t: &str) -> Rule {
        parse_rule(t, "t.rules:1", &Vars::new()).unwrap_or_else(|e| panic!("{t}: {e}"))
    }

    fn refused(t: &str) -> RuleError {
        match parse_rule(t, "t.rules:1", &Vars::new()) {
            Ok(_) => panic!("accepted: {t}"),
            Err(e) => e,
        }
    }

    fn ip(s: &str) -> u128 {
        u128::from(u32::from(s.parse::<Ipv4Addr>().unwrap()))
    }

    #[test]
    fn header_forms() {
        let r = rule("alert tcp 10.0.0.0/8 any -> [192.168.1.1,!192.168.1.0/24,172.16.0.0/12] ![80,443] (sid:1;)");
        assert_eq!(r.action, Action::Alert);
        assert_eq!(r.proto, Proto::Tcp);
        assert!(r.src.contains(ip("10.1.2.3")) && !r.src.contains(ip("11.0.0.1")));
        assert!(r.sport.is_full(16));
        assert!(r.dst.contains(ip("172.16.5.5")));
        assert!(
            !r.dst.contains(ip("192.168.1.1")),
            "negation removes what it names"
        );
        assert!(!r.dst.contains(ip("8.8.8.8")));
        assert!(r.dport.contains(81) && !r.dport.contains(80) && !r.dport.contains(443));
        assert!(!r.bidir);
        let r = rule("drop udp !1.2.3.4 1024: <> any :1023 (sid:2;)");
        assert_eq!(r.action, Action::Drop);
        assert!(r.bidir);
        assert!(!r.src.contains(ip("1.2.3.4")) && r.src.contains(ip("1.2.3.5")));
        assert!(r.sport.contains(1024) && r.sport.contains(65535) && !r.sport.contains(1023));
        assert!(r.dport.contains(0) && r.dport.contains(1023) && !r.dport.contains(1024));
        let r = rule("pass ip any any -> any [1:3, 7] (sid:3;)");
        assert_eq!((r.action, r.proto), (Action::Pass, Proto::Ip));
        assert!(r.dport.contains(2) && r.dport.contains(7) && !r.dport.contains(5));
        let r = rule("log icmp [!10.0.0.1] any -> any any (sid:4;)");
        assert_eq!(r.action, Action::Log);
        assert!(!r.src.contains(ip("10.0.0.1")) && r.src.contains(ip("10.0.0.2")));
        // IPv6 members match no IPv4 address.
        let r = rule("alert ip [2001:db8::/32,10.0.0.1] any -> any any (sid:5;)");
        assert!(r.src.contains(ip("10.0.0.1")) && !r.src.contains(ip("10.0.0.2")));
        // Bidirectional header matching.
        let r = rule("alert tcp 1.1.1.1 80 <> 2.2.2.2 any (sid:6;)");
        let (a, b) = (ip("1.1.1.1") as u32, ip("2.2.2.2") as u32);
        assert!(r.header_matches(6, a, 80, b, 5000, true));
        assert!(r.header_matches(6, b, 5000, a, 80, true));
        assert!(!r.header_matches(6, b, 5000, a, 81, true));
        assert!(!r.header_matches(17, a, 80, b, 5000, true));
        assert!(
            !r.header_matches(6, a, 80, b, 5000, false),
            "tcp rules need the ports"
        );
        let r = rule("alert ip 1.1.1.1 80 -> any 99 (sid:7;)");
        assert!(
            r.header_matches(47, a, 0, b, 0, false),
            "ip rules ignore ports"
        );
    }

    #[test]
    fn variables_from_conf_and_defaults() {
        let mut v = Vars::new();
        v.read_conf(
            "# comment\nipvar HOME_NET [10.0.0.0/8,\\\n 192.168.0.0/16]\nportvar HTTP_PORTS [80,8080]\nportvar WEB [$HTTP_PORTS,443]\nvar X !$HOME_NET\npreprocessor stream5_global: x\nconfig order: drop pass alert log\nconfig classification: my-class,My Class,5\n",
            "snort.conf",
        )
        .unwrap();
        assert_eq!(
            v.order,
            Some(vec![Action::Drop, Action::Pass, Action::Alert, Action::Log])
        );
        let r = parse_rule(
            "alert tcp $X any -> $HOME_NET $WEB (classtype:my-class; sid:1;)",
            "r:1",
            &v,
        )
        .unwrap();
        assert!(r.dst.contains(ip("192.168.3.3")) && !r.dst.contains(ip("11.0.0.1")));
        assert!(!r.src.contains(ip("10.9.9.9")) && r.src.contains(ip("11.0.0.1")));
        assert!(r.dport.contains(8080) && r.dport.contains(443) && !r.dport.contains(81));
        assert_eq!(r.class, Some(("My Class".into(), 5)));
        assert_eq!(r.priority, 5);
        // Undefined: HOME_NET/EXTERNAL_NET are any, others refused by name.
        let r = rule("alert tcp $EXTERNAL_NET any -> $HOME_NET any (sid:1;)");
        assert!(r.src.is_full(32) && r.dst.is_full(32));
        let e = refused("alert tcp any any -> any $HTTP_PORTS (sid:1;)");
        assert!(e.message.contains("$HTTP_PORTS"), "{e}");
        assert!(e.message.starts_with("t.rules:1:26:"), "{e}");
        assert!(!e.unsupported);
        // Self-reference does not loop forever.
        let mut v = Vars::new();
        v.set("A", "$A");
        assert!(parse_rule("alert ip $A any -> any any (sid:1;)", "r:1", &v).is_err());
        // Bad variable lines name file and line.
        let e = Vars::new()
            .read_conf("\n\nipvar HOME_NET\n", "s.conf")
            .unwrap_err();
        assert!(e.message.starts_with("s.conf:3:1:"), "{e}");
    }

    #[test]
    fn options_and_contents() {
        let r = rule(
            r#"alert tcp any any -> any any (msg:"a \"quoted\" msg\; yes"; content:"GET|20 2F|"; nocase; offset:2; depth:10; content:!"x|3a|y"; distance:-1; within:6; isdataat:!5,relative; flow:to_server, established; dsize:>3; classtype:trojan-activity; reference:url,x; metadata:a b; rev:7; gid:3; sid:99;)"#,
        );
        assert_eq!(r.msg.as_deref(), Some("a \"quoted\" msg; yes"));
        assert_eq!((r.gid, r.sid, r.rev, r.priority), (3, 99, 7, 1));
        assert_eq!(r.class.as_ref().unwrap().0, "A Network Trojan was detected");
        assert_eq!(
            r.flow,
            FlowOpts {
                established: Some(true),
                to_server: Some(true)
            }
        );
        assert_eq!(r.dsize, Some((4, 65535)));
        assert_eq!(r.tests.len(), 3);
        let Test::Content(c) = &r.tests[0] else {
            panic!()
        };
        assert_eq!(c.pattern, b"GET /");
        assert!(c.nocase && !c.negated);
        assert_eq!((c.offset, c.depth), (Some(2), Some(10)));
        let Test::Content(c) = &r.tests[1] else {
            panic!()
        };
        assert_eq!(c.pattern, b"x:y");
        assert!(c.negated && c.relative());
        assert_eq!((c.distance, c.within), (Some(-1), Some(6)));
        assert_eq!(
            r.tests[2],
            Test::IsDataAt {
                n: 5,
                relative: true,
                negated: true
            }
        );
        let r = rule(
            r#"alert udp any any -> any any (content:"a\:b\\"; fast_pattern:only; dsize:2<>10; priority:4; sid:1;)"#,
        );
        let Test::Content(c) = &r.tests[0] else {
            panic!()
        };
        assert_eq!(c.pattern, b"a:b\\");
        assert!(c.fast_pattern);
        assert_eq!((r.dsize, r.priority), (Some((2, 10)), 4));
        assert_eq!(rule("alert ip any any -> any any (sid:1;)").priority, 0);
        assert_eq!(rule("alert ip any any -> any any (rev:2; sid:8)").sid, 8);
        assert_eq!(
            rule("alert ip any any -> any any (dsize:<3; sid:1;)").dsize,
            Some((0, 2))
        );
        // Reachable within dsize thanks to a negative distance.
        rule(
            r#"alert udp any any -> any any (dsize:10; content:"boom"; content:"loom"; distance:-10; sid:1;)"#,
        );
        // Suricata's per-packet TCP is plain tcp here.
        assert_eq!(
            rule("alert tcp-pkt any any -> any any (sid:1;)").proto,
            Proto::Tcp
        );
    }

    #[test]
    fn refusals_name_the_place_and_the_option() {
        for (t, want) in [
            (
                "alert tcp any any -> any any (content:\"a\"; pcre:\"/x/\"; sid:1;)",
                "option `pcre`",
            ),
            (
                "alert tcp any any -> any any (flags:S; sid:1;)",
                "option `flags`",
            ),
            (
                "alert tcp any any -> any any (ttl:3; sid:1;)",
                "option `ttl`",
            ),
            (
                "alert tcp any any -> any any (byte_test:1,>,2,0; sid:1;)",
                "option `byte_test`",
            ),
            ("reject tcp any any -> any any (sid:1;)", "action `reject`"),
            (
                "alert tcp-stream any any -> any any (sid:1;)",
                "protocol `tcp-stream`",
            ),
            (
                "alert tcp any any -> any any (flow:only_stream; sid:1;)",
                "only_stream",
            ),
        ] {
            let e = refused(t);
            assert!(e.unsupported, "{t}: {e}");
            assert!(e.message.contains(want), "{t}: {e}");
            assert!(e.message.starts_with("t.rules:1:"), "{e}");
        }
        let e = refused("alert tcp any any -> any any (content:\"a\"; pcre:\"/x/\"; sid:1;)");
        assert!(
            e.message.starts_with("t.rules:1:44:"),
            "column of `pcre`: {e}"
        );
        for (t, want) in [
            ("alert tcp any any -> any any (content:\"|l0 01|\"; sid:1;)", "hex"),
            ("alert tcp any any -> any any (content:\"|22 2 22|\"; sid:1;)", "two hex digits"),
            ("alert tcp any any -> any any (content:\"|1\"; sid:1;)", "closing the hex"),
            ("alert tcp any any -> any any (content:AA; sid:1;)", "quoted"),
            ("alert tcp any any -> any any (content:\"AA\" depth:20; sid:1;)", "expected `;`"),
            ("alert tcp any any -> any any (content:\"AA\";; sid:1;)", "empty"),
            ("alert tcp any any -> any any (content:\"AA\"; depth:5; depth:6; sid:1;)", "twice"),
            ("alert tcp any any -> any any (content:\"AA\"; offset:5; offset:6; sid:1;)", "twice"),
            ("alert tcp any any -> any any (content:\"AA\"; within:5; within:6; sid:1;)", "twice"),
            ("alert tcp any any -> any any (content:\"AA\"; depth:50; distance:5; sid:1;)", "combined"),
            ("alert tcp any any -> any any (content:\"AA\"; within:5; offset:1; sid:1;)", "combined"),
            ("alert tcp any any -> any any (content:\"AAA\"; depth:2; sid:1;)", "shorter"),
            ("alert tcp any any -> any any (content:\"AAA\"; within:2; sid:1;)", "shorter"),
            ("alert tcp any any -> any any (content:\"AA\"; within:1048577; sid:1;)", "within"),
            ("alert tcp any any -> any any (nocase; content:\"AA\"; sid:1;)", "content"),
            ("alert tcp any any -> any any (content:\"a\"; content:!\"b\"; fast_pattern; sid:1;)", "negated"),
            ("alert tcp any any -> any any (content:\"a\"; content:\"b\"; fast_pattern:only; offset:6; sid:1;)", "fast_pattern:only"),
            ("alert udp any any -> any any (dsize:10; content:\"thisstringisgreater\"; sid:1;)", "never match"),
            ("alert udp any any -> any any (dsize:5<>10; content:\"AAAA\"; offset:8; sid:1;)", "never match"),
            ("alert udp any any -> any any (dsize:6; content:\"boom\"; content:\"loom\"; distance:2; sid:1;)", "never match"),
            ("alert tcp any any -> any any (content:\"a\";)", "sid"),
            ("alert tcp any any -> any 65536 (sid:1;)", "port"),
            ("alert tcp any 5:3 -> any any (sid:1;)", "a <= b"),
            ("alert tcp 10.0.0.0/33 any -> any any (sid:1;)", "prefix"),
            ("alert tcp 10.0.0 any -> any any (sid:1;)", "address"),
            ("alert tcp any any => any any (sid:1;)", "direction"),
            ("alert foo any any -> any any (sid:1;)", "protocol"),
            ("bark tcp any any -> any any (sid:1;)", "action"),
            ("alert tcp any any -> any any sid:1;", "`(`"),
            ("alert tcp any any -> any (sid:1;)", "header words"),
            ("alert tcp any any -> any any (classtype:nope; sid:1;)", "classification"),
            ("alert tcp any any -> any any (flow:to_server,to_client; sid:1;)", "directions"),
            ("alert tcp any any -> any any (flow:sideways; sid:1;)", "flow"),
            ("alert tcp any any -> any any (isdataat:x; sid:1;)", "isdataat"),
            ("alert tcp any any -> any any (content:\"a\\x\"; sid:1;)", "\\"),
        ] {
            let e = refused(t);
            assert!(!e.unsupported, "{t}: {e}");
            assert!(e.message.contains(want), "{t}: {e} (wanted {want})");
            assert!(e.message.starts_with("t.rules:1:"), "{e}");
        }
    }

    #[test]
    fn files_skip_or_refuse_unsupported_rules() {
        let text = "# a comment\n\nalert tcp any any -> any any (content:\"a\"; sid:1;)\n  alert tcp any any -> any any (pcre:\"/a/\"; sid:2;)\nalert udp any any -> any any \\\n (content:\"b\"; sid:3;)\n";
        let e = RuleSet::parse(text, "x.rules", &Vars::new(), false).unwrap_err();
        assert!(e.message.starts_with("x.rules:4:33:"), "{e}");
        assert!(e.message.contains("pcre"));
        let s = RuleSet::parse(text, "x.rules", &Vars::new(), true).unwrap();
        assert_eq!(
            s.rules.iter().map(|r| r.sid).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(s.rules[1].origin, "x.rules:5");
        assert_eq!(s.skipped.len(), 1);
        // Malformed rules are refused even when skipping.
        let bad = "alert tcp any any -> any any (content:\"|zz|\"; sid:1;)\n";
        assert!(RuleSet::parse(bad, "y.rules", &Vars::new(), true).is_err());
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(s in ".{0,200}") {
            let _ = parse_rule(&s, "p:1", &Vars::new());
            let _ = RuleSet::parse(&s, "p", &Vars::new(), true);
            let _ = Vars::new().read_conf(&s, "c");
        }

        #[test]
        fn parser_never_panics_on_rule_like_text(
            head in "(alert|drop|pass) (tcp|udp|ip) [!$\\[\\]0-9a-z.,/:]{1,12} [!\\[\\]0-9:,$a-z]{1,8} (->|<>) [!$\\[\\]0-9.,/]{1,12} [!\\[\\]0-9:,]{1,8} ",
            opts in proptest::collection::vec("(content|nocase|offset|depth|distance|within|isdataat|flow|dsize|sid|msg|fast_pattern)(:[!\"|0-9a-f ,<>\\-a-z\\\\;]{0,10})?", 0..8),
        ) {
            let text = format!("{head}({};)", opts.join("; "));
            let _ = parse_rule(&text, "p:1", &Vars::new());
        }
    }
}
