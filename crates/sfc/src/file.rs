//! The chain file: Chaining-Box's JSON format (thesis Appendix A) with FuseBox's optional
//! extensions, or the same structure in TOML.
//!
//! ```json
//! { "chains": [ { "id": 100, "nodes": ["sf2", "sf3"] } ],
//!   "functions": [ { "tag": "sf2", "type": "tc-redirect", "host": "server1" },
//!                  { "tag": "sf3", "type": "tc-redirect", "host": "server2" } ] }
//! ```

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// A whole chain file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainFile {
    /// The chains (SPI and the SFs in order).
    pub chains: Vec<Chain>,
    /// The service functions the chains name.
    pub functions: Vec<Function>,
    /// Extension: the hosts' transports (a host not listed uses Ethernet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostDef>,
    /// Extension: join consecutive SFs on one host by direct links (default true).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub direct_links: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One chain: its SPI and its SFs in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chain {
    /// The SPI (24 bits).
    pub id: u32,
    /// The SFs in order; a node may list alternatives (the first live one is used).
    pub nodes: Vec<Node>,
    /// Extension: the traffic that enters this chain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classifier: Vec<ClsRule>,
    /// Extension: the host whose classifier takes the traffic in (for rules without `host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
}

/// One node of a chain: an SF tag, or alternative SF tags (the first live one is used).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Node {
    /// One SF.
    One(String),
    /// Alternatives, in order of preference.
    Any(Vec<String>),
}

impl Node {
    /// The SF tags of this node, in order of preference.
    pub fn choices(&self) -> &[String] {
        match self {
            Node::One(t) => std::slice::from_ref(t),
            Node::Any(ts) => ts,
        }
    }
}

/// One service function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Function {
    /// The name chains use for it (unique).
    pub tag: String,
    /// Chaining-Box: which function to deploy; FuseBox keeps it as a label.
    #[serde(rename = "type")]
    pub kind: String,
    /// The host it runs on.
    pub host: String,
    /// Extension: the SF reads and rewrites NSH itself (no Dec, no Enc).
    #[serde(default, skip_serializing_if = "is_false")]
    pub nsh_aware: bool,
    /// Extension: the SF rewrites 5-tuples (NAT-aware proxy: Enc learns the translation).
    #[serde(default, skip_serializing_if = "is_false")]
    pub nat: bool,
    /// Extension: the SF is the Linux stack (routing, iptables): Dec addresses the frames
    /// it decapsulates to the SF's interface (`CFG_TO_HOST`), so the stack takes them.
    #[serde(default, skip_serializing_if = "is_false")]
    pub to_host: bool,
    /// Extension: the interface the SF receives on (default: what its agent reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface_in: Option<String>,
    /// Extension: the interface the SF sends on (default: the same as `iface_in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface_out: Option<String>,
}

/// Extension: one classifier rule, an exact 5-tuple (cbox.h's `cls_key`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClsRule {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol: `tcp`, `udp`, `icmp` or a number.
    pub proto: Proto,
    /// Source port (TCP and UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    /// Destination port (TCP and UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
    /// The ingress host (default: the chain's `entry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The ingress interface (default: any interface the host's agent offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<String>,
}

/// An IP protocol: a name or a number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Proto {
    /// A protocol number.
    Number(u8),
    /// `tcp`, `udp` or `icmp`.
    Name(String),
}

impl Proto {
    /// The protocol number, if the name is known.
    pub fn number(&self) -> Option<u8> {
        match self {
            Proto::Number(n) => Some(*n),
            Proto::Name(s) => match s.as_str() {
                "tcp" => Some(6),
                "udp" => Some(17),
                "icmp" => Some(1),
                _ => None,
            },
        }
    }
}

/// Extension: how a host is reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDef {
    /// The host's name (as functions' `host`).
    pub name: String,
    /// Its transport (default Ethernet: the hosts share an L2 network).
    #[serde(default)]
    pub transport: Transport,
    /// VXLAN-GPE: its underlay IPv4 address (default: what its agent reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub underlay: Option<Ipv4Addr>,
}

/// The transport between hosts.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Outer Ethernet (EtherType 0x894F): the hosts share an L2 network.
    #[default]
    Ethernet,
    /// Outer IPv4 + UDP 4790 + VXLAN-GPE.
    VxlanGpe,
}

// ---------------------------------------------------------------------------------------
// Loading and validation.

use crate::span::{pos_of, Spans};
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

/// The JSON Schema of chain files (Chaining-Box's Listing A.2, extended).
pub const SCHEMA: &str = include_str!("../chains.schema.json");

/// The most SFs in one chain (the SI counts down from 255).
pub const MAX_CHAIN_LEN: usize = 255;

/// The largest SPI (24 bits).
pub const MAX_SPI: u32 = 0xff_ffff;

/// The syntax of a chain file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Chaining-Box's JSON.
    Json,
    /// The same structure in TOML.
    Toml,
}

impl Format {
    /// TOML for `.toml` files, JSON for anything else.
    pub fn of_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("toml") => Format::Toml,
            _ => Format::Json,
        }
    }
}

/// One problem in a chain file, where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileError {
    /// The file's name as given.
    pub file: String,
    /// Line, from 1 (0: the file as a whole, e.g. it cannot be read).
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// The JSON pointer of the value (`/chains/0/id`), empty for syntax errors.
    pub path: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
            if !self.path.is_empty() {
                write!(f, "{}: ", self.path)?;
            }
            f.write_str(&self.message)
        }
    }
}

/// Every problem found in a chain file (at least one), in source order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FileErrors(pub Vec<FileError>);

impl fmt::Display for FileErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

struct Ctx<'a> {
    file: &'a str,
    spans: Spans,
    errors: Vec<FileError>,
}

impl Ctx<'_> {
    fn at(&mut self, path: &str, key: bool, message: String) {
        let pos = if key {
            self.spans.key(path)
        } else {
            self.spans.value(path)
        };
        self.errors.push(FileError {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.column,
            path: path.to_string(),
            message,
        });
    }
    fn into_errors(mut self) -> FileErrors {
        self.errors.sort_by_key(|e| (e.line, e.column));
        self.errors.dedup();
        FileErrors(self.errors)
    }
    fn finish(self) -> Result<(), FileErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(self.into_errors())
        }
    }
}

fn schema() -> Result<&'static jsonschema::Validator, String> {
    static V: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    V.get_or_init(|| {
        let s: serde_json::Value = serde_json::from_str(SCHEMA).map_err(|e| e.to_string())?;
        jsonschema::validator_for(&s).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The schema definition that describes the object at `pointer`.
fn definition(pointer: &str) -> Option<&'static str> {
    let segs: Vec<&str> = pointer.split('/').skip(1).collect();
    Some(match segs.as_slice() {
        [] => "Configfile",
        ["chains", _] => "Chain",
        ["chains", _, "classifier", _] => "ClsRule",
        ["functions", _] => "Function",
        ["hosts", _] => "Host",
        _ => return None,
    })
}

/// The schema's `properties` names (`what` = "properties") or `required` fields (`what` =
/// "required") of the object at `pointer`, read from [`SCHEMA`] itself.
fn schema_fields(pointer: &str, what: &str) -> Vec<String> {
    let Some(def) = definition(pointer) else {
        return Vec::new();
    };
    let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap_or_default();
    match &schema["definitions"][def][what] {
        serde_json::Value::Object(m) => m.keys().cloned().collect(),
        serde_json::Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn show(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

/// What the value at `pointer` should have been, in words (for `oneOf` and `pattern`).
fn expected_at(pointer: &str) -> Option<&'static str> {
    let segs: Vec<&str> = pointer.split('/').skip(1).collect();
    Some(match segs.as_slice() {
        ["chains", _, "nodes", _] => {
            "an SF tag or a non-empty list of alternative SF tags (letters, digits, '_', '.', '-')"
        }
        ["chains", _, "nodes", _, _] | ["functions", _, "tag"] => {
            "an SF tag: letters, digits, '_', '.', '-', starting with a letter or digit, at most 63"
        }
        ["functions", _, "host"] | ["hosts", _, "name"] | ["chains", _, "entry"] | ["chains", _, "classifier", _, "host"] => {
            "a host name: letters, digits, '_', '.', '-', starting with a letter or digit, at most 63"
        }
        ["functions", _, "iface_in" | "iface_out"] | ["chains", _, "classifier", _, "iface"] => {
            "a Linux interface name (at most 15 letters, digits, '_', '.', ':', '-')"
        }
        ["chains", _, "classifier", _, "src" | "dst"] | ["hosts", _, "underlay"] => {
            "an IPv4 address like 10.0.0.1"
        }
        ["chains", _, "classifier", _, "proto"] => "tcp, udp, icmp or a protocol number 0 to 255",
        _ => return None,
    })
}

fn schema_errors(value: &serde_json::Value, cx: &mut Ctx) -> Result<(), String> {
    use jsonschema::error::ValidationErrorKind as K;
    let v = schema()?;
    for e in v.iter_errors(value) {
        let path = e.instance_path().as_str().to_string();
        let found = show(e.instance());
        match e.kind() {
            K::AdditionalProperties { unexpected } => {
                let known = schema_fields(&path, "properties");
                for u in unexpected {
                    let p = format!("{path}/{}", crate::span::escape(u));
                    cx.at(
                        &p,
                        true,
                        format!("unknown field {u:?}: expected one of {}", known.join(", ")),
                    );
                }
            }
            K::Required { property } => {
                let name = property.as_str().unwrap_or("?");
                cx.at(
                    &path,
                    false,
                    format!(
                        "missing field {name:?}: expected the required fields {}",
                        schema_fields(&path, "required").join(", ")
                    ),
                );
            }
            K::Type { kind } => {
                let want = format!("{kind:?}").to_lowercase();
                let want = want
                    .trim_start_matches("single(")
                    .trim_start_matches("multiple(")
                    .trim_end_matches(')');
                let want = match want {
                    "integer" | "object" | "array" => format!("an {want}"),
                    "string" | "boolean" | "number" => format!("a {want}"),
                    other => other.to_string(),
                };
                let msg = match expected_at(&path) {
                    Some(x) => format!("expected {x}, found {}", json_type(e.instance())),
                    None => format!("expected {want}, found {} {found}", json_type(e.instance())),
                };
                cx.at(&path, false, msg);
            }
            K::OneOfNotValid { .. } | K::AnyOf { .. } | K::Pattern { .. } | K::MinItems { .. } => {
                let msg = match expected_at(&path) {
                    Some(x) => format!("expected {x}, found {found}"),
                    None => format!("{e}"),
                };
                cx.at(&path, false, msg);
            }
            K::Enum { options } => {
                cx.at(
                    &path,
                    false,
                    format!("expected one of {options}, found {found}"),
                );
            }
            K::Minimum { limit } => {
                cx.at(
                    &path,
                    false,
                    format!("expected at least {limit}, found {found}"),
                );
            }
            K::Maximum { limit } => {
                cx.at(
                    &path,
                    false,
                    format!("expected at most {limit}, found {found}"),
                );
            }
            _ => cx.at(&path, false, e.to_string()),
        }
    }
    Ok(())
}

impl ChainFile {
    /// Reads, validates and decodes the chain file at `path` (TOML for `.toml`, else JSON).
    pub fn load(path: &Path) -> Result<ChainFile, FileErrors> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            FileErrors(vec![FileError {
                file: name.clone(),
                line: 0,
                column: 0,
                path: String::new(),
                message: format!("cannot read: {e}"),
            }])
        })?;
        ChainFile::parse(&text, Format::of_path(path), &name)
    }

    /// Validates and decodes chain file text; `name` is the file name errors give.
    pub fn parse(text: &str, format: Format, name: &str) -> Result<ChainFile, FileErrors> {
        let syntax = |line: usize, column: usize, message: String| {
            FileErrors(vec![FileError {
                file: name.to_string(),
                line,
                column,
                path: String::new(),
                message,
            }])
        };
        let (value, spans) = match format {
            Format::Json => {
                let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                    let m = e.to_string();
                    let m = m
                        .rfind(" at line ")
                        .map_or(m.as_str(), |i| &m[..i])
                        .to_string();
                    syntax(e.line(), e.column(), format!("JSON syntax: {m}"))
                })?;
                (v, Spans::of_json(text))
            }
            Format::Toml => {
                let t: toml::Table = toml::from_str(text).map_err(|e| {
                    let p = pos_of(text, e.span().map_or(0, |r| r.start));
                    syntax(
                        p.line,
                        p.column,
                        format!("TOML syntax: {}", e.message().trim().replace('\n', "; ")),
                    )
                })?;
                let v = serde_json::to_value(t).map_err(|e| syntax(1, 1, e.to_string()))?;
                (v, Spans::of_toml(text))
            }
        };
        let mut cx = Ctx {
            file: name,
            spans,
            errors: Vec::new(),
        };
        if let Err(e) = schema_errors(&value, &mut cx) {
            cx.at(
                "",
                false,
                format!("internal error: the chain file schema: {e}"),
            );
        }
        spans_id_check(&value, &mut cx);
        if !cx.errors.is_empty() {
            return Err(cx.into_errors());
        }
        let file: ChainFile = match serde_json::from_value(value) {
            Ok(f) => f,
            Err(e) => {
                cx.at("", false, format!("cannot decode: {e}"));
                return Err(cx.into_errors());
            }
        };
        file.semantic(&mut cx);
        cx.finish().map(|()| file)
    }

    /// The file as JSON text (Chaining-Box's format).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    fn semantic(&self, cx: &mut Ctx) {
        use std::collections::BTreeMap;
        let mut tags: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, f) in self.functions.iter().enumerate() {
            if let Some(&j) = tags.get(f.tag.as_str()) {
                let first = cx.spans.value(&format!("/functions/{j}/tag"));
                cx.at(
                    &format!("/functions/{i}/tag"),
                    false,
                    format!(
                        "duplicate tag {:?} (first at line {}): expected every function's tag to be unique",
                        f.tag, first.line
                    ),
                );
            } else {
                tags.insert(&f.tag, i);
            }
            if f.nat && f.nsh_aware {
                cx.at(
                    &format!("/functions/{i}/nat"),
                    false,
                    "nat applies to NSH-unaware SFs (an nsh_aware SF keeps the NSH across its own rewrites): expected nat or nsh_aware, not both".into(),
                );
            }
        }
        let mut hosts: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, h) in self.hosts.iter().enumerate() {
            if let Some(&j) = hosts.get(h.name.as_str()) {
                let first = cx.spans.value(&format!("/hosts/{j}/name"));
                cx.at(
                    &format!("/hosts/{i}/name"),
                    false,
                    format!("duplicate host {:?} (first at line {})", h.name, first.line),
                );
            } else {
                hosts.insert(&h.name, i);
            }
        }
        let mut ids: BTreeMap<u32, usize> = BTreeMap::new();
        let mut cls_seen: BTreeMap<(Option<&str>, Option<&str>, String), String> = BTreeMap::new();
        for (i, c) in self.chains.iter().enumerate() {
            if let Some(&j) = ids.get(&c.id) {
                let first = cx.spans.value(&format!("/chains/{j}/id"));
                cx.at(
                    &format!("/chains/{i}/id"),
                    false,
                    format!(
                        "duplicate chain id {} (first at line {}): expected every SPI to be unique",
                        c.id, first.line
                    ),
                );
            } else {
                ids.insert(c.id, i);
            }
            if c.nodes.is_empty() {
                cx.at(
                    &format!("/chains/{i}/nodes"),
                    false,
                    "empty chain: expected at least one SF".into(),
                );
            }
            if c.nodes.len() > MAX_CHAIN_LEN {
                cx.at(
                    &format!("/chains/{i}/nodes"),
                    false,
                    format!(
                        "chain of {} SFs: expected at most {MAX_CHAIN_LEN} (the service index counts down from 255)",
                        c.nodes.len()
                    ),
                );
            }
            for (j, n) in c.nodes.iter().enumerate() {
                for (k, t) in n.choices().iter().enumerate() {
                    if !tags.contains_key(t.as_str()) {
                        let p = match n {
                            Node::One(_) => format!("/chains/{i}/nodes/{j}"),
                            Node::Any(_) => format!("/chains/{i}/nodes/{j}/{k}"),
                        };
                        let known: Vec<&str> = tags.keys().copied().collect();
                        let expected = if known.is_empty() {
                            "a function's tag (there are no functions)".to_string()
                        } else {
                            format!("one of the functions' tags ({})", known.join(", "))
                        };
                        cx.at(&p, false, format!("unknown tag {t:?}: expected {expected}"));
                    }
                }
            }
            for (r, rule) in c.classifier.iter().enumerate() {
                let p = format!("/chains/{i}/classifier/{r}");
                let proto = rule.proto.number();
                let ported = matches!(proto, Some(6 | 17));
                if ported && (rule.sport.is_none() || rule.dport.is_none()) {
                    cx.at(
                        &p,
                        false,
                        "missing sport or dport: expected both ports for tcp and udp (rules are exact 5-tuples)".into(),
                    );
                }
                if !ported && (rule.sport.is_some() || rule.dport.is_some()) {
                    cx.at(
                        &format!("{p}/proto"),
                        false,
                        "ports given for a protocol without ports: expected tcp or udp, or no sport/dport".into(),
                    );
                }
                let host = rule.host.as_deref().or(c.entry.as_deref());
                if host.is_none() {
                    cx.at(
                        &p,
                        false,
                        "no ingress host: expected \"host\" in the rule or \"entry\" in the chain"
                            .into(),
                    );
                }
                let key = (
                    host,
                    rule.iface.as_deref(),
                    format!(
                        "{}>{}/{:?}/{:?}/{:?}",
                        rule.src, rule.dst, proto, rule.sport, rule.dport
                    ),
                );
                match cls_seen.get(&key) {
                    Some(first) => {
                        cx.at(
                            &p,
                            false,
                            format!(
                                "the same 5-tuple on the same ingress is already classified by {first}: expected each rule once"
                            ),
                        );
                    }
                    None => {
                        cls_seen.insert(key, format!("chain {} rule {}", c.id, r));
                    }
                }
            }
        }
    }
}

/// SPIs outside 24 bits, found on the raw value (serde would reject them without a place).
fn spans_id_check(value: &serde_json::Value, cx: &mut Ctx) {
    let Some(chains) = value.get("chains").and_then(|c| c.as_array()) else {
        return;
    };
    for (i, c) in chains.iter().enumerate() {
        let Some(id) = c.get("id") else { continue };
        if !(id.is_i64() || id.is_u64()) {
            continue; // the schema said so already
        }
        let ok = id.as_u64().is_some_and(|n| n <= u64::from(MAX_SPI));
        if !ok {
            cx.at(
                &format!("/chains/{i}/id"),
                false,
                format!("SPI {id} out of range: expected 0 to {MAX_SPI} (24 bits)"),
            );
        }
    }
}
