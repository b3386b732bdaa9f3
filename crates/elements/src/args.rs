//! Click's configuration-string conventions: comma-separated arguments, positional ones
//! first, then `KEYWORD value` arguments; quotes and brackets protect commas.

use std::fmt;

/// A configuration error: what was wrong and what was expected. The graph builder adds the
/// file, line and column of the element declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The message, e.g. "expected IP address, found `10.0.0`".
    pub message: String,
}

impl ConfigError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// One argument: an optional upper-case keyword and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// `Some("MTU")` for `MTU 1500`.
    pub keyword: Option<String>,
    /// The value text, trimmed.
    pub value: String,
}

/// A parsed configuration string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    items: Vec<Arg>,
}

/// Splits a configuration string on top-level commas (outside quotes, parentheses, brackets
/// and braces), trimming each piece; an empty configuration has no arguments. A trailing
/// empty argument (`a, b,`) is dropped, as Click does.
pub fn split(config: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in config.chars() {
        if let Some(q) = quote {
            cur.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => {
                quote = Some(c);
                cur.push(c);
            }
            '(' | '[' | '{' => {
                depth += 1;
                cur.push(c);
            }
            ')' | ']' | '}' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth <= 0 => out.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    let last = cur.trim().to_string();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    if out.last().is_some_and(|s| s.is_empty()) {
        out.pop();
    }
    out
}

fn is_keyword(word: &str) -> bool {
    let mut chars = word.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Removes one level of double quotes and processes backslash escapes (`"a b"` → `a b`).
pub fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        let inner = &s[1..s.len() - 1];
        let mut out = String::new();
        let mut it = inner.chars();
        while let Some(c) = it.next() {
            if c == '\\' {
                match it.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(o) => out.push(o),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        out
    } else if s.len() >= 2 && s.starts_with('\'') && s.ends_with('\'') {
        s[1..s.len() - 1].to_string()
    } else {
        s.to_string()
    }
}

impl Args {
    /// Parses a configuration string. An argument whose first word is all upper case
    /// (`MTU`, `ACTIVE`, `CAPACITY`) followed by a value is a keyword argument; a lone upper-case
    /// word is a keyword with an empty value only if `keyword_alone` would allow it, so it is
    /// kept positional here.
    pub fn parse(config: &str) -> Result<Args, ConfigError> {
        let items = split(config)
            .into_iter()
            .map(|piece| {
                let mut parts = piece.splitn(2, char::is_whitespace);
                let first = parts.next().unwrap_or("");
                match parts.next() {
                    Some(rest) if is_keyword(first) => Arg {
                        keyword: Some(first.to_string()),
                        value: rest.trim().to_string(),
                    },
                    _ => Arg {
                        keyword: None,
                        value: piece,
                    },
                }
            })
            .collect();
        Ok(Args { items })
    }

    /// Every argument, in order.
    pub fn all(&self) -> &[Arg] {
        &self.items
    }

    /// The positional arguments (those without a keyword), in order.
    pub fn positional(&self) -> Vec<&str> {
        self.items
            .iter()
            .filter(|a| a.keyword.is_none())
            .map(|a| a.value.as_str())
            .collect()
    }

    /// The `i`th positional argument.
    pub fn pos(&self, i: usize) -> Option<&str> {
        self.items
            .iter()
            .filter(|a| a.keyword.is_none())
            .nth(i)
            .map(|a| a.value.as_str())
    }

    /// The value of keyword `key` (the last one if repeated).
    pub fn keyword(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .rev()
            .find(|a| a.keyword.as_deref() == Some(key))
            .map(|a| a.value.as_str())
    }

    /// Click's mandatory-or-keyword argument: keyword `key` if given, else positional `i`.
    pub fn get(&self, i: usize, key: &str) -> Option<&str> {
        self.keyword(key).or_else(|| self.pos(i))
    }

    /// Like [`Args::get`], but an error naming `what` when absent.
    pub fn require(&self, i: usize, key: &str, what: &str) -> Result<&str, ConfigError> {
        self.get(i, key)
            .ok_or_else(|| ConfigError::new(format!("missing argument {key} ({what})")))
    }

    /// Refuses keywords not in `allowed` and more than `max_positional` positional arguments.
    pub fn check(&self, max_positional: usize, allowed: &[&str]) -> Result<(), ConfigError> {
        for a in &self.items {
            if let Some(k) = &a.keyword {
                if !allowed.contains(&k.as_str()) {
                    let expected = if allowed.is_empty() {
                        "no keyword arguments".to_string()
                    } else {
                        format!("one of {}", allowed.join(", "))
                    };
                    return Err(ConfigError::new(format!(
                        "unknown keyword `{k}`, expected {expected}"
                    )));
                }
            }
        }
        let n = self.positional().len();
        if n > max_positional {
            return Err(ConfigError::new(format!(
                "too many arguments: expected at most {max_positional}, found {n}"
            )));
        }
        Ok(())
    }

    /// Number of arguments of any kind.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Parses an unsigned integer in decimal, `0x` hex or `0` octal... Click's `IntArg`: decimal
/// or `0x` hexadecimal.
pub fn parse_uint(s: &str, what: &str) -> Result<u64, ConfigError> {
    let t = s.trim();
    let r = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        t.parse::<u64>()
    };
    r.map_err(|_| {
        ConfigError::new(format!(
            "expected {what} (an unsigned integer), found `{t}`"
        ))
    })
}

/// Parses an unsigned integer no larger than `max`.
pub fn parse_uint_max(s: &str, max: u64, what: &str) -> Result<u64, ConfigError> {
    let v = parse_uint(s, what)?;
    if v > max {
        return Err(ConfigError::new(format!(
            "expected {what} at most {max}, found {v}"
        )));
    }
    Ok(v)
}

/// Parses a Click boolean (`true`/`false`, `yes`/`no`, `1`/`0`, `on`/`off`).
pub fn parse_bool(s: &str, what: &str) -> Result<bool, ConfigError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "on" | "t" | "y" => Ok(true),
        "false" | "no" | "0" | "off" | "f" | "n" => Ok(false),
        t => Err(ConfigError::new(format!(
            "expected {what} (true or false), found `{t}`"
        ))),
    }
}

/// Parses a Click time interval in seconds (`30`, `1.5`, `10s`, `100ms`, `5min`, `2h`) into
/// nanoseconds.
pub fn parse_seconds(s: &str, what: &str) -> Result<u64, ConfigError> {
    let t = s.trim();
    let err = || {
        ConfigError::new(format!(
            "expected {what} (a time such as 30, 1.5s, 100ms), found `{t}`"
        ))
    };
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| err())?;
    let mul = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" => 1e6,
        "us" | "usec" => 1e3,
        "ns" | "nsec" => 1.0,
        "m" | "min" | "mins" => 60e9,
        "h" | "hr" | "hour" | "hours" => 3600e9,
        "d" | "day" | "days" => 86400e9,
        _ => return Err(err()),
    };
    Ok((v * mul).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_top_level_commas() {
        assert_eq!(
            split("a, b (c, d), \"e, f\", g"),
            vec!["a", "b (c, d)", "\"e, f\"", "g"]
        );
        assert!(split("").is_empty());
        assert!(split("   ").is_empty());
        assert_eq!(split("a,,b"), vec!["a", "", "b"]);
        assert_eq!(split("a, b,"), vec!["a", "b"]);
    }

    #[test]
    fn keywords_and_positionals() {
        let a = Args::parse("1500, MTU 576, HONOR_DF true").unwrap();
        assert_eq!(a.positional(), vec!["1500"]);
        assert_eq!(a.keyword("MTU"), Some("576"));
        assert_eq!(a.get(1, "HONOR_DF"), Some("true"));
        assert!(a.check(1, &["MTU", "HONOR_DF"]).is_ok());
        assert!(a.check(0, &["MTU", "HONOR_DF"]).is_err());
        assert!(a
            .check(1, &["MTU"])
            .unwrap_err()
            .message
            .contains("HONOR_DF"));
    }

    #[test]
    fn numbers_times_bools() {
        assert_eq!(parse_uint("0x800", "x").unwrap(), 0x800);
        assert!(parse_uint("12a", "x").is_err());
        assert_eq!(parse_seconds("100ms", "t").unwrap(), 100_000_000);
        assert_eq!(parse_seconds("2", "t").unwrap(), 2_000_000_000);
        assert!(parse_seconds("2 parsecs", "t").is_err());
        assert!(parse_bool("yes", "b").unwrap());
        assert_eq!(unquote("\"a\\\"b\""), "a\"b");
    }
}
