//! The scraper's side, for tests and tools: fetch `/metrics` over HTTP and parse the
//! Prometheus text exposition format (0.0.4) strictly.
//!
//! The parser rejects what the format forbids, not only what it cannot read: a sample
//! before its family's `# TYPE`, a second `# TYPE` or `# HELP` for one name, a family whose
//! samples are not together, a repeated series (same name and labels), bad metric or label
//! names, label values with escapes other than `\\`, `\"`, `\n`, and values that are not
//! floats (`NaN`, `+Inf`, `-Inf` allowed) or timestamps that are not integers.

use std::collections::{BTreeMap, HashSet};
use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An HTTP response: status, `Content-Type`, body.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body as text.
    pub body: String,
}

/// `GET path` from `addr` (HTTP/1.1, one connection per request, 5 s timeouts).
pub fn get(addr: SocketAddr, path: &str) -> io::Result<Response> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(&str, &str)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k, v.trim()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    };
    let content_type = header("content-type").map(str::to_string);
    let body = if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        dechunk(body).ok_or_else(|| bad("bad chunked body"))?
    } else {
        body.to_string()
    };
    Ok(Response {
        status,
        content_type,
        body,
    })
}

/// A chunked body (`SIZE\r\nDATA\r\n` … `0\r\n\r\n`) put back together.
fn dechunk(mut rest: &str) -> Option<String> {
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.push_str(after.get(..size)?);
        rest = after.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// One sample: labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's own name (a family's name, or for histograms and summaries its
    /// `_bucket`, `_sum` or `_count` series).
    pub name: String,
    /// Labels by name.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// One metric family: its `# TYPE`, `# HELP` and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family's name.
    pub name: String,
    /// `counter`, `gauge`, `histogram`, `summary` or `untyped`.
    pub kind: String,
    /// The `# HELP` text (unescaped), if any.
    pub help: Option<String>,
    /// Samples in order.
    pub samples: Vec<Sample>,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// Families in order.
    pub families: Vec<Family>,
}

impl Scrape {
    /// The family `name`.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// The value of the series `name` with exactly the labels `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.families
            .iter()
            .flat_map(|f| &f.samples)
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }
}

/// What is wrong with an exposition, and on which line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The line.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ParseError {}

fn metric_name_ok(n: &str) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

fn label_name_ok(n: &str) -> bool {
    let mut c = n.chars();
    !n.starts_with("__")
        && c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// The float syntax the format allows (Go's `ParseFloat`: decimal or exponent notation,
/// `NaN`, `+Inf`, `-Inf`).
fn float(s: &str) -> Option<f64> {
    match s {
        "NaN" => return Some(f64::NAN),
        "+Inf" | "Inf" => return Some(f64::INFINITY),
        "-Inf" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    let ok = s
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && s.chars().any(|c| c.is_ascii_digit());
    ok.then(|| s.parse().ok()).flatten()
}

/// The family a sample name belongs to, given the families declared so far.
fn family_of<'a>(name: &'a str, kinds: &BTreeMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if matches!(
                kinds.get(base).map(String::as_str),
                Some("histogram" | "summary")
            ) {
                return base;
            }
        }
    }
    name
}

/// Parses `{a="x",b="y"}` at the start of `s`; returns the labels and the rest.
fn labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut out = BTreeMap::new();
    let mut rest = s.strip_prefix('{').ok_or("expected {")?;
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((out, r));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = rest[..eq].trim_matches([' ', '\t']);
        if !label_name_ok(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..]
            .trim_start_matches([' ', '\t'])
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?} in a label value")),
                },
                Some((_, c)) => value.push(c),
            }
        };
        if out.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = rest[end + 1..].trim_start_matches([' ', '\t']);
        match rest.strip_prefix(',') {
            Some(r) => rest = r,
            None if rest.starts_with('}') => {}
            None => return Err("expected , or } after a label".into()),
        }
    }
}

/// Parses an exposition strictly (see the module documentation).
pub fn parse(text: &str) -> Result<Scrape, ParseError> {
    let mut scrape = Scrape::default();
    let mut kinds: BTreeMap<String, String> = BTreeMap::new();
    let mut helps: HashSet<String> = HashSet::new();
    let mut closed: HashSet<String> = HashSet::new();
    let mut series: HashSet<(String, Vec<(String, String)>)> = HashSet::new();
    let mut current: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let err = |what: String| ParseError { line: i + 1, what };
        if line.trim().is_empty() {
            continue;
        }
        // Entering family `name`: the one before it is closed for good.
        let mut enter = |name: &str,
                         scrape: &mut Scrape,
                         current: &mut Option<usize>|
         -> Result<usize, ParseError> {
            if let Some(c) = *current {
                if scrape.families[c].name == name {
                    return Ok(c);
                }
                closed.insert(scrape.families[c].name.clone());
            }
            if closed.contains(name) {
                return Err(err(format!("family {name} is not in one group")));
            }
            let at = match scrape.families.iter().position(|f| f.name == name) {
                Some(p) => p,
                None => {
                    scrape.families.push(Family {
                        name: name.to_string(),
                        kind: "untyped".into(),
                        help: None,
                        samples: Vec::new(),
                    });
                    scrape.families.len() - 1
                }
            };
            *current = Some(at);
            Ok(at)
        };
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, [' ', '\t']);
            let (Some(tag @ ("HELP" | "TYPE")), Some(name)) = (words.next(), words.next()) else {
                continue; // A plain comment.
            };
            if !metric_name_ok(name) {
                return Err(err(format!("bad metric name {name:?}")));
            }
            let rest = words.next().unwrap_or_default();
            let at = enter(name, &mut scrape, &mut current)?;
            if tag == "TYPE" {
                if !matches!(
                    rest,
                    "counter" | "gauge" | "histogram" | "summary" | "untyped"
                ) {
                    return Err(err(format!("bad type {rest:?}")));
                }
                if kinds.contains_key(name) {
                    return Err(err(format!("second TYPE for {name}")));
                }
                if !scrape.families[at].samples.is_empty() {
                    return Err(err(format!("TYPE for {name} after its samples")));
                }
                kinds.insert(name.to_string(), rest.to_string());
                scrape.families[at].kind = rest.to_string();
            } else {
                if !helps.insert(name.to_string()) {
                    return Err(err(format!("second HELP for {name}")));
                }
                let mut help = String::new();
                let mut chars = rest.chars();
                while let Some(c) = chars.next() {
                    match (c, c == '\\') {
                        (_, true) => match chars.next() {
                            Some('\\') => help.push('\\'),
                            Some('n') => help.push('\n'),
                            other => return Err(err(format!("bad escape {other:?} in HELP"))),
                        },
                        (c, false) => help.push(c),
                    }
                }
                scrape.families[at].help = Some(help);
            }
            continue;
        }
        // A sample: name, labels, value, timestamp.
        let name_end = line
            .find(['{', ' ', '\t'])
            .ok_or_else(|| err("sample without a value".into()))?;
        let name = &line[..name_end];
        if !metric_name_ok(name) {
            return Err(err(format!("bad metric name {name:?}")));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            labels(&line[name_end..]).map_err(err)?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let mut fields = rest.split([' ', '\t']).filter(|f| !f.is_empty());
        let value = fields
            .next()
            .and_then(float)
            .ok_or_else(|| err(format!("bad value in {line:?}")))?;
        if let Some(ts) = fields.next() {
            ts.parse::<i64>()
                .map_err(|_| err(format!("bad timestamp {ts:?}")))?;
        }
        if fields.next().is_some() {
            return Err(err(format!("trailing text in {line:?}")));
        }
        let fam = family_of(name, &kinds).to_string();
        let at = enter(&fam, &mut scrape, &mut current)?;
        let key = (
            name.to_string(),
            labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        );
        if !series.insert(key) {
            return Err(err(format!("series {name} {labels:?} twice")));
        }
        scrape.families[at].samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(scrape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_format_allows() {
        let t = "# HELP a_total What \\\\ it\\ncounts.\n# TYPE a_total counter\n\
                 a_total{x=\"1\",y=\"q\\\"\\\\\\n\",} 3\na_total 4 1700000000000\n\
                 # a comment\n\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 0.5\nh_count 1\n\
                 g NaN\n";
        let s = parse(t).unwrap();
        assert_eq!(s.families.len(), 3);
        let a = s.family("a_total").unwrap();
        assert_eq!(a.help.as_deref(), Some("What \\ it\ncounts."));
        assert_eq!(a.kind, "counter");
        assert_eq!(
            s.value("a_total", &[("x", "1"), ("y", "q\"\\\n")]),
            Some(3.0)
        );
        assert_eq!(s.value("a_total", &[]), Some(4.0));
        assert_eq!(s.family("h").unwrap().samples.len(), 3);
        assert_eq!(s.family("g").unwrap().kind, "untyped");
    }

    #[test]
    fn chunked_bodies_are_put_back_together() {
        assert_eq!(
            dechunk("5\r\nhello\r\n1;x=y\r\n!\r\n0\r\n\r\n").as_deref(),
            Some("hello!")
        );
        assert_eq!(dechunk("5\r\nhell"), None);
        assert_eq!(dechunk("zz\r\n"), None);
    }

    #[test]
    fn rejects_what_the_format_forbids() {
        for bad in [
            "a 1\n# TYPE a counter\n",
            "# TYPE a counter\n# TYPE a gauge\n",
            "# HELP a x\n# HELP a y\n",
            "a 1\nb 1\na 2\n",
            "a 1\na 1\n",
            "a{x=\"1\"} 1\na{x=\"1\"} 2\n",
            "1a 1\n",
            "a{__x=\"1\"} 1\n",
            "a{x=1} 1\n",
            "a{x=\"\\t\"} 1\n",
            "a{x=\"1\" 1\n",
            "a one\n",
            "a 1 1.5\n",
            "a 1 2 3\n",
            "# TYPE a meter\n",
            "a\n",
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }
}
