//! Rewrite patterns (`SADDR SPORT DADDR DPORT`) and input specifications, parsed as Click's
//! `IPRewriterPattern` and `IPRewriterInput` do.

use crate::args::{parse_uint, ConfigError};
use crate::net::Names;
use std::net::Ipv4Addr;

/// Which field of a pattern is chosen from a range for each new flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vary {
    /// No range: every field is fixed or kept.
    None,
    /// The source address is chosen from `base ..= base + top` (a pattern's `A-B` range or
    /// prefix as SADDR).
    SourceAddr {
        /// First address of the range.
        base: Ipv4Addr,
        /// Number of addresses in the range minus one.
        top: u32,
    },
    /// The source port is chosen from `base ..= base + top` (a pattern's `L-H` SPORT).
    SourcePort {
        /// First port of the range.
        base: u16,
        /// Number of ports in the range minus one.
        top: u16,
    },
}

/// How a value is picked from a pattern's range (Click's range suffixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// No suffix: the packet's own value if it lies in the range and is free, else the first
    /// free value from a pseudo-random starting point (wrapping).
    PreferOwn,
    /// `#` suffix: the first free value from the point after the last one allocated.
    Sequential,
    /// `?` suffix: the first free value from a pseudo-random starting point.
    Random,
}

/// A parsed rewrite pattern `SADDR SPORT DADDR DPORT`; `None` fields keep the packet's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// New source address (the range base when the source address varies).
    pub saddr: Option<Ipv4Addr>,
    /// New source port (the range base when the source port varies).
    pub sport: Option<u16>,
    /// New destination address.
    pub daddr: Option<Ipv4Addr>,
    /// New destination port.
    pub dport: Option<u16>,
    /// The field chosen from a range, if any.
    pub vary: Vary,
    /// How the ranged value is chosen.
    pub choice: Choice,
}

/// One rewriter input's specification (`drop`, `pass N`, `keep F R`, `pattern ... F R`,
/// or the name of a `RoundRobinIPMapper`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSpec {
    /// `drop` / `discard`: packets without a mapping are dropped.
    Drop,
    /// `pass N` (also `passthrough`, `nochange`): packets without a mapping go unchanged to
    /// output N; no mapping is installed.
    Pass(usize),
    /// `keep FOUTPUT ROUTPUT`: install a mapping that keeps addresses and ports.
    Keep {
        /// Output for the flow's packets.
        foutput: usize,
        /// Output for the reply flow's packets.
        routput: usize,
    },
    /// `pattern SADDR SPORT DADDR DPORT FOUTPUT ROUTPUT` or `pattern NAME FOUTPUT ROUTPUT`.
    Pattern {
        /// The rewrite pattern.
        pattern: Pattern,
        /// Output for the flow's packets.
        foutput: usize,
        /// Output for the reply flow's packets.
        routput: usize,
    },
    /// `MAPPERNAME`: a `RoundRobinIPMapper`; each new flow takes the next of its patterns.
    Mapper {
        /// The mapper element's name.
        name: String,
        /// Its patterns with their forward and reply outputs, in configuration order.
        patterns: Vec<(Pattern, usize, usize)>,
    },
}

impl InputSpec {
    /// The highest output number this specification can send to.
    pub fn max_output(&self) -> usize {
        match self {
            InputSpec::Drop => 0,
            InputSpec::Pass(o) => *o,
            InputSpec::Keep { foutput, routput }
            | InputSpec::Pattern {
                foutput, routput, ..
            } => (*foutput).max(*routput),
            InputSpec::Mapper { patterns, .. } => {
                patterns.iter().map(|p| p.1.max(p.2)).max().unwrap_or(0)
            }
        }
    }
}

fn strip_suffix(w: &str) -> (&str, Option<Choice>) {
    if let Some(s) = w.strip_suffix('#') {
        (s, Some(Choice::Sequential))
    } else if let Some(s) = w.strip_suffix('?') {
        (s, Some(Choice::Random))
    } else {
        (w, None)
    }
}

/// An address range or prefix for SADDR: `A-B` or `A/LEN`, as Click's pattern parser reads
/// them (a prefix leaves out its `.0` and broadcast addresses unless it is a /31 or /32).
fn address_range(w: &str, names: &Names) -> Option<(Ipv4Addr, u32)> {
    if let Some((a, b)) = w.split_once('-') {
        let a = u32::from(names.ipv4(a).ok()?);
        let b = u32::from(names.ipv4(b).ok()?);
        return (b >= a).then(|| (Ipv4Addr::from(a), b - a));
    }
    let (addr, len) = names.prefix(w).ok()?;
    let addr = u32::from(addr);
    let mask = crate::net::mask(len);
    if addr == 0 || mask == 0 {
        return None;
    }
    Some(match len {
        32 => (Ipv4Addr::from(addr), 0),
        31 => (Ipv4Addr::from(addr & mask), 1),
        _ => (Ipv4Addr::from((addr & mask) | 1), !mask - 2),
    })
}

fn port(w: &str, what: &str) -> Result<Option<u16>, ConfigError> {
    if w == "-" {
        return Ok(None);
    }
    match parse_uint(w, what) {
        Ok(v) if (1..=65535).contains(&v) => Ok(Some(v as u16)),
        _ => Err(ConfigError::new(format!(
            "expected {what} (`-` or a port 1-65535), found `{w}`"
        ))),
    }
}

fn port_range(w: &str) -> Option<(u16, u16)> {
    let (lo, hi) = w.split_once('-')?;
    let lo = parse_uint(lo, "port").ok()?;
    let hi = parse_uint(hi, "port").ok()?;
    (hi >= lo && hi < 65536).then(|| (lo as u16, (hi - lo) as u16))
}

impl Pattern {
    /// Parses pattern words: `SADDR SPORT DADDR DPORT`, `SADDR DADDR` (addresses only), or a
    /// single `IPRewriterPatterns` name.
    pub fn parse(words: &[&str], names: &Names) -> Result<Pattern, ConfigError> {
        match words.len() {
            1 => {
                let text = names.pattern(words[0]).ok_or_else(|| {
                    ConfigError::new(format!(
                        "expected a pattern name declared by IPRewriterPatterns, found `{}`",
                        words[0]
                    ))
                })?;
                let inner: Vec<&str> = text.split_whitespace().collect();
                if inner.len() == 1 {
                    return Err(ConfigError::new(format!(
                        "pattern `{}` refers to another name",
                        words[0]
                    )));
                }
                Pattern::parse(&inner, names)
            }
            2 | 4 => Self::parse_fields(words, names),
            n => Err(ConfigError::new(format!(
                "expected pattern `SADDR SPORT DADDR DPORT` (or a pattern name), found {n} words"
            ))),
        }
    }

    fn parse_fields(words: &[&str], names: &Names) -> Result<Pattern, ConfigError> {
        let four = words.len() == 4;
        let (sa, sp, da, dp) = if four {
            (words[0], Some(words[1]), words[2], Some(words[3]))
        } else {
            (words[0], None, words[1], None)
        };
        let mut vary = Vary::None;
        let mut choice = Choice::PreferOwn;
        // Source address: `-`, an address, or a range / prefix with an optional suffix.
        let saddr = if sa == "-" {
            None
        } else if let Ok(a) = names.ipv4(sa) {
            Some(a)
        } else {
            let (body, suffix) = strip_suffix(sa);
            let (base, top) = address_range(body, names).ok_or_else(|| {
                ConfigError::new(format!(
                    "expected source address (`-`, an address, `A-B` or a prefix), found `{sa}`"
                ))
            })?;
            if top > 0 {
                vary = Vary::SourceAddr { base, top };
            }
            if let Some(c) = suffix {
                choice = c;
            }
            Some(base)
        };
        let sport = match sp {
            None => None,
            Some(w) => match port(w, "source port") {
                Ok(p) => p,
                Err(e) => {
                    let (body, suffix) = strip_suffix(w);
                    let (base, top) = port_range(body).ok_or(e)?;
                    if matches!(vary, Vary::SourceAddr { .. }) && top > 0 {
                        return Err(ConfigError::new(format!(
                            "only one of SADDR and SPORT may be a range, found `{sa}` and `{w}`"
                        )));
                    }
                    if top > 0 {
                        vary = Vary::SourcePort { base, top };
                    }
                    if let Some(c) = suffix {
                        choice = c;
                    }
                    Some(base)
                }
            },
        };
        let daddr = if da == "-" {
            None
        } else {
            Some(names.ipv4(da).map_err(|_| {
                ConfigError::new(format!(
                    "expected destination address (`-` or an address), found `{da}`"
                ))
            })?)
        };
        let dport = match dp {
            None => None,
            Some(w) => port(w, "destination port")?,
        };
        Ok(Pattern {
            saddr,
            sport,
            daddr,
            dport,
            vary,
            choice,
        })
    }

    /// Parses `PATTERN... FOUTPUT ROUTPUT` (the words after `pattern`, or a
    /// `RoundRobinIPMapper` argument).
    pub fn parse_with_ports(
        text: &str,
        names: &Names,
    ) -> Result<(Pattern, usize, usize), ConfigError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.len() <= 2 {
            return Err(ConfigError::new(format!(
                "expected `SADDR SPORT DADDR DPORT FOUTPUT ROUTPUT` or `NAME FOUTPUT ROUTPUT`, found `{text}`"
            )));
        }
        let n = words.len();
        let fout = parse_uint(words[n - 2], "forward output")? as usize;
        let rout = parse_uint(words[n - 1], "reply output")? as usize;
        if fout > 255 || rout > 255 {
            return Err(ConfigError::new(format!(
                "expected an output port below 256, found `{text}`"
            )));
        }
        Ok((Pattern::parse(&words[..n - 2], names)?, fout, rout))
    }
}

/// Parses one input specification; a mapper element name is resolved through `names`.
pub fn parse_input_spec(text: &str, names: &Names) -> Result<InputSpec, ConfigError> {
    let text = text.trim();
    let (word, rest) = match text.split_once(char::is_whitespace) {
        Some((w, r)) => (w, r.trim()),
        None => (text, ""),
    };
    let out = |w: &str| -> Result<usize, ConfigError> {
        let v = parse_uint(w, "output port")?;
        if v > 255 {
            return Err(ConfigError::new(format!(
                "expected an output port below 256, found `{w}`"
            )));
        }
        Ok(v as usize)
    };
    match word {
        "" => Err(ConfigError::new(
            "expected an input specification, found an empty argument",
        )),
        "pass" | "passthrough" | "nochange" => {
            if rest.is_empty() {
                Ok(InputSpec::Pass(0))
            } else if rest.split_whitespace().count() == 1 {
                Ok(InputSpec::Pass(out(rest)?))
            } else {
                Err(ConfigError::new(format!(
                    "expected `pass [OUTPUT]`, found `{text}`"
                )))
            }
        }
        "drop" | "discard" => {
            if rest.is_empty() {
                Ok(InputSpec::Drop)
            } else {
                Err(ConfigError::new(format!(
                    "expected `{word}` alone, found `{text}`"
                )))
            }
        }
        "keep" => {
            let w: Vec<&str> = rest.split_whitespace().collect();
            if w.len() != 2 {
                return Err(ConfigError::new(format!(
                    "expected `keep FOUTPUT ROUTPUT`, found `{text}`"
                )));
            }
            Ok(InputSpec::Keep {
                foutput: out(w[0])?,
                routput: out(w[1])?,
            })
        }
        "pattern" | "xpattern" => {
            let (pattern, foutput, routput) = Pattern::parse_with_ports(rest, names)?;
            Ok(InputSpec::Pattern {
                pattern,
                foutput,
                routput,
            })
        }
        name => {
            if !rest.is_empty() {
                return Err(ConfigError::new(format!(
                    "expected drop, pass, keep, pattern or a mapper element name, found `{text}`"
                )));
            }
            match names.mapper(name) {
                Some(("RoundRobinIPMapper", config)) => {
                    let patterns = parse_mapper_config(config, names)?;
                    Ok(InputSpec::Mapper { name: name.to_string(), patterns })
                }
                Some((class, _)) => {
                    Err(ConfigError::new(format!("expected an IPMapper element, `{name}` is a {class}")))
                }
                None => Err(ConfigError::new(format!(
                    "expected drop, pass, keep, pattern or a RoundRobinIPMapper name, found `{name}`"
                ))),
            }
        }
    }
}

/// Parses a `RoundRobinIPMapper` configuration: one `PATTERN FOUTPUT ROUTPUT` per argument.
pub fn parse_mapper_config(
    config: &str,
    names: &Names,
) -> Result<Vec<(Pattern, usize, usize)>, ConfigError> {
    let mut v = Vec::new();
    for a in crate::args::split(config) {
        v.push(Pattern::parse_with_ports(&a, names)?);
    }
    if v.is_empty() {
        return Err(ConfigError::new(
            "expected at least one `SADDR SPORT DADDR DPORT FOUTPUT ROUTPUT` pattern",
        ));
    }
    Ok(v)
}
