//! `Print`: prints packets, passes them through.
//!
//! Click: `Print([LABEL, MAXLENGTH, keywords LABEL, MAXLENGTH, CONTENTS, TIMESTAMP, PRINTANNO,
//! CPU, HEADROOM, ACTIVE])` — "Prints up to MAXLENGTH bytes of data from each packet, in hex,
//! preceded by the LABEL text. Default MAXLENGTH is 24." Ports `1/1`; packets leave
//! unchanged.
//!
//! FuseBox replays captures, often millions of packets, so printing is off by default: a
//! `Print` writes to standard error only when the environment variable `FUSEBOX_PRINT` is
//! `1` when the element is built, and `ACTIVE` is true (the default). Either way it counts
//! the packets it sees (`stats()` → `count`). The line follows Click's shape:
//! `LABEL: LEN | hex bytes, grouped by 4` (with `TIMESTAMP true`, the timestamp follows the
//! label). Arguments whose first word looks like an unknown keyword are taken as label
//! text, so `Print(NAT OUT)` works.

use crate::args::{parse_bool, parse_uint, unquote};
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use std::fmt::Write as _;

const KEYWORDS: &[&str] = &[
    "LABEL",
    "MAXLENGTH",
    "LENGTH",
    "NBYTES",
    "CONTENTS",
    "TIMESTAMP",
    "PRINTANNO",
    "CPU",
    "HEADROOM",
    "ACTIVE",
];

/// How packet contents are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// No contents.
    None,
    /// Hexadecimal bytes (the default).
    Hex,
    /// Printable ASCII, others as `.`.
    Ascii,
}

/// `Print([LABEL, MAXLENGTH])`: forwards packets, optionally describing them on stderr.
#[derive(Debug, Clone)]
pub struct Print {
    /// Text printed before each packet.
    pub label: String,
    /// Bytes of contents printed.
    pub maxlength: usize,
    /// How contents are printed.
    pub contents: Contents,
    /// Print the timestamp annotation.
    pub timestamp: bool,
    /// Whether printing is on (`ACTIVE` and `FUSEBOX_PRINT=1`).
    pub printing: bool,
    count: u64,
}

impl Print {
    /// Reads `LABEL`, `MAXLENGTH`, `CONTENTS`, `TIMESTAMP` and `ACTIVE`; checks the others.
    pub fn configure(args: &Args) -> Result<Print, ConfigError> {
        let mut positional = Vec::new();
        for a in args.all() {
            match &a.keyword {
                Some(k) if KEYWORDS.contains(&k.as_str()) => {}
                Some(k) => positional.push(format!("{k} {}", a.value)),
                None => positional.push(a.value.clone()),
            }
        }
        if positional.len() > 2 {
            return Err(ConfigError::new(format!(
                "too many arguments: expected at most LABEL and MAXLENGTH, found {}",
                positional.len()
            )));
        }
        let label = unquote(
            args.keyword("LABEL")
                .or(positional.first().map(String::as_str))
                .unwrap_or(""),
        );
        let maxlength = match args
            .keyword("MAXLENGTH")
            .or(args.keyword("LENGTH"))
            .or(args.keyword("NBYTES"))
            .or(positional.get(1).map(String::as_str))
        {
            Some(m) => usize::try_from(parse_uint(m, "MAXLENGTH")?).map_err(|_| {
                ConfigError::new(format!("expected MAXLENGTH (a byte count), found `{m}`"))
            })?,
            None => 24,
        };
        let contents = match args
            .keyword("CONTENTS")
            .map(|c| c.trim().to_ascii_lowercase())
        {
            None => Contents::Hex,
            Some(c) => match c.as_str() {
                "hex" => Contents::Hex,
                "ascii" => Contents::Ascii,
                "none" => Contents::None,
                _ => {
                    if parse_bool(&c, "CONTENTS (true, false, HEX, ASCII or NONE)")? {
                        Contents::Hex
                    } else {
                        Contents::None
                    }
                }
            },
        };
        let flag = |k: &str, d: bool| args.keyword(k).map_or(Ok(d), |v| parse_bool(v, k));
        let timestamp = flag("TIMESTAMP", false)?;
        let active = flag("ACTIVE", true)?;
        flag("PRINTANNO", false)?;
        flag("CPU", false)?;
        flag("HEADROOM", false)?;
        let printing = active && std::env::var("FUSEBOX_PRINT").is_ok_and(|v| v == "1");
        Ok(Print {
            label,
            maxlength,
            contents,
            timestamp,
            printing,
            count: 0,
        })
    }

    /// The line Click's `Print` would write for `packet`.
    pub fn line(&self, packet: &Packet) -> String {
        let mut s = self.label.clone();
        if self.timestamp {
            let ts = packet.meta.timestamp;
            if !s.is_empty() {
                s.push(' ');
            }
            let _ = write!(s, "{}.{:06}", ts.secs(), ts.subsec_nanos() / 1000);
        }
        if !s.is_empty() {
            s.push(':');
        }
        let _ = write!(s, "{:5}", packet.len());
        let shown = &packet.data()[..packet.len().min(self.maxlength)];
        match self.contents {
            Contents::None => {}
            Contents::Hex => {
                s.push_str(" | ");
                for (i, b) in shown.iter().enumerate() {
                    if i > 0 && i % 4 == 0 {
                        s.push(' ');
                    }
                    let _ = write!(s, "{b:02x}");
                }
            }
            Contents::Ascii => {
                s.push_str(" | ");
                s.extend(shown.iter().map(|&b| {
                    if (0x20..0x7f).contains(&b) {
                        b as char
                    } else {
                        '.'
                    }
                }));
            }
        }
        s
    }
}

impl Element for Print {
    fn class_name(&self) -> &'static str {
        "Print"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        self.count += 1;
        if self.printing {
            eprintln!("{}", self.line(&packet));
        }
        Verdict::Out(0, packet)
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("count", self.count)]
    }
    fn model(&self) -> Option<crate::model::Model> {
        use crate::model::{Case, Filter, Model, Outcome};
        // When it prints, it must see every packet.
        (!self.printing)
            .then(|| Model::new(vec![Case::new(Filter::any(), Outcome::Out(0)).stat("count")]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn print(config: &str) -> Print {
        let e = ok("Print", config, 1);
        match e.as_any().downcast_ref::<Print>() {
            Some(p) => p.clone(),
            None => panic!("not a Print"),
        }
    }

    #[test]
    fn passes_through_and_counts() {
        let mut e = ok("Print", "in", 1);
        let o = run(e.as_mut(), pkt(&frame()));
        assert_eq!(o.ports(), vec![0]);
        assert_eq!(o.out[0].1.data(), &frame()[..]);
        run(e.as_mut(), pkt(&[1]));
        assert_eq!(e.stats(), vec![("count", 2)]);
    }

    #[test]
    fn formats_like_click() {
        let p = print("ok, 6");
        assert_eq!(p.line(&pkt(&frame())), "ok:   60 | 02000000 0001");
        let p = print("NAT OUT, CONTENTS ascii, MAXLENGTH 3");
        assert_eq!(p.label, "NAT OUT");
        assert_eq!(p.line(&pkt(b"ab\x01\x02")), "NAT OUT:    4 | ab.");
        let p = print("\"x y\", CONTENTS false, TIMESTAMP true");
        let mut q = pkt(&[1, 2]);
        q.meta.timestamp = packet::Timestamp::from_parts(5, 1_500_000);
        assert_eq!(p.line(&q), "x y 5.001500:    2");
        assert!(!print("a, ACTIVE false").printing);
    }

    #[test]
    fn bad_arguments() {
        assert!(err("Print", "a, 3, 4", 1).contains("too many"));
        assert!(err("Print", "a, lots", 1).contains("MAXLENGTH"));
        assert!(err("Print", "a, CONTENTS purple", 1).contains("CONTENTS"));
    }
}
