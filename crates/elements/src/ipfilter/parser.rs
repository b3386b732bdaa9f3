//! The pattern parser: Click's IPFilter grammar, primitives and keyword elision, lowered to
//! [`Expr`].
//!
//! ```text
//! expr   ::= orexpr [ '?' expr ':' expr ]
//! orexpr ::= term { ('or' | '||') term }
//! term   ::= factor { ['and' | '&&'] factor }        (juxtaposition means and)
//! factor ::= ('not' | '!') factor | '(' expr ')' | test
//! test   ::= 'true' | 'false' | QUALIFIERS ['[' POS[:LEN] ']'] ['&' MASK] [RELOP] [DATA]
//! ```

use super::eval::{Base, CmpOp, Expr, Test};
use super::lexer::{tokenize, Token};
use crate::net::Names;
use crate::ConfigError;

const PROTO_ICMP: u16 = wire::IpProtocol::ICMP as u16;
const PROTO_TCP: u16 = wire::IpProtocol::TCP as u16;
const PROTO_UDP: u16 = wire::IpProtocol::UDP as u16;
const PROTO_DCCP: u16 = 33;
/// Click's `tcpudp` pseudo-protocol: TCP or UDP.
const PROTO_TCP_OR_UDP: u16 = 256;
/// Click's `transp` pseudo-protocol: any transport protocol.
const PROTO_TRANSP: u16 = 257;

const MAX_DEPTH: usize = 100;

/// Protocol names (Click's IPNameInfo table).
const PROTO_NAMES: &[(&str, u16)] = &[
    ("dccp", PROTO_DCCP),
    ("gre", 47),
    ("icmp", PROTO_ICMP),
    ("igmp", 2),
    ("ipip", 4),
    ("sctp", 132),
    ("tcp", PROTO_TCP),
    ("tcpudp", PROTO_TCP_OR_UDP),
    ("transp", PROTO_TRANSP),
    ("udp", PROTO_UDP),
];

/// TCP and UDP port names (Click's IPNameInfo table, plus `http`, which Click finds in
/// /etc/services; FuseBox never reads that file so results do not depend on the host).
const PORT_NAMES: &[(&str, u16)] = &[
    ("auth", 113),
    ("bootpc", 68),
    ("bootps", 67),
    ("chargen", 19),
    ("daytime", 13),
    ("discard", 9),
    ("dns", 53),
    ("domain", 53),
    ("echo", 7),
    ("finger", 79),
    ("ftp", 21),
    ("ftp-data", 20),
    ("http", 80),
    ("https", 443),
    ("imap3", 220),
    ("imaps", 993),
    ("irc", 194),
    ("netbios-dgm", 138),
    ("netbios-ns", 137),
    ("netbios-ssn", 139),
    ("nntp", 119),
    ("ntp", 123),
    ("pop3", 110),
    ("pop3s", 995),
    ("pptp", 1723),
    ("rip", 520),
    ("route", 520),
    ("smtp", 25),
    ("snmp", 161),
    ("snmp-trap", 162),
    ("ssh", 22),
    ("sunrpc", 111),
    ("telnet", 23),
    ("tftp", 69),
    ("www", 80),
];

/// TCP flag names for `tcp opt`.
const TCP_OPTS: &[(&str, u8)] = &[
    ("ack", 0x10),
    ("fin", 0x01),
    ("psh", 0x08),
    ("rst", 0x04),
    ("syn", 0x02),
    ("urg", 0x20),
];

/// ICMP type names.
const ICMP_TYPES: &[(&str, u8)] = &[
    ("echo", 8),
    ("echo-reply", 0),
    ("inforeq", 15),
    ("inforeq-reply", 16),
    ("maskreq", 17),
    ("maskreq-reply", 18),
    ("parameterproblem", 12),
    ("redirect", 5),
    ("routeradvert", 9),
    ("routersolicit", 10),
    ("sourcequench", 4),
    ("timeexceeded", 11),
    ("timestamp", 13),
    ("timestamp-reply", 14),
    ("unreachable", 3),
];

fn find<T: Copy>(table: &[(&str, T)], word: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == word).map(|(_, v)| *v)
}

/// A header field: protocol it belongs to (`None`: the IP header), bit offset and bit length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    name: &'static str,
    proto: Option<u16>,
    bit_off: u32,
    bit_len: u32,
}

const F_VERS: Field = Field {
    name: "ip vers",
    proto: None,
    bit_off: 0,
    bit_len: 4,
};
const F_HL: Field = Field {
    name: "ip hl",
    proto: None,
    bit_off: 4,
    bit_len: 4,
};
const F_TOS: Field = Field {
    name: "ip tos",
    proto: None,
    bit_off: 8,
    bit_len: 8,
};
const F_DSCP: Field = Field {
    name: "ip dscp",
    proto: None,
    bit_off: 8,
    bit_len: 6,
};
const F_LEN: Field = Field {
    name: "ip len",
    proto: None,
    bit_off: 16,
    bit_len: 16,
};
const F_ID: Field = Field {
    name: "ip id",
    proto: None,
    bit_off: 32,
    bit_len: 16,
};
const F_TTL: Field = Field {
    name: "ip ttl",
    proto: None,
    bit_off: 64,
    bit_len: 8,
};
const F_WIN: Field = Field {
    name: "tcp win",
    proto: Some(PROTO_TCP),
    bit_off: 112,
    bit_len: 16,
};
const F_ICMP_TYPE: Field = Field {
    name: "icmp type",
    proto: Some(PROTO_ICMP),
    bit_off: 0,
    bit_len: 8,
};

impl Field {
    fn full(&self) -> u32 {
        if self.bit_len >= 32 {
            u32::MAX
        } else {
            (1u32 << self.bit_len) - 1
        }
    }
}

/// What a primitive tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum PrimKind {
    #[default]
    None,
    Host,
    Net,
    Proto,
    Port,
    TcpOpt,
    Ether,
    Frag,
    Unfrag,
    Ect,
    Ce,
    Field(Field),
}

impl PrimKind {
    fn name(&self) -> &'static str {
        match self {
            PrimKind::None => "primitive",
            PrimKind::Host => "host",
            PrimKind::Net => "net",
            PrimKind::Proto => "ip proto",
            PrimKind::Port => "port",
            PrimKind::TcpOpt => "tcp opt",
            PrimKind::Ether => "ether host",
            PrimKind::Frag => "ip frag",
            PrimKind::Unfrag => "ip unfrag",
            PrimKind::Ect => "ip ect",
            PrimKind::Ce => "ip ce",
            PrimKind::Field(f) => f.name,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum SrcDst {
    #[default]
    None,
    Src,
    Dst,
    And,
    Or,
}

/// The value a primitive was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Data {
    #[default]
    None,
    Int(u64),
    Host(u32),
    Net(u32, u32),
    Ether([u8; 6]),
    /// A name that only makes sense for one type (`www`, `syn`, `echo-reply`, `tcp`).
    Named(PrimKind, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mask {
    Int(u32),
    Ip(u32),
    Ether([u8; 6]),
}

#[derive(Debug, Clone, Copy, Default)]
struct Prim {
    ty: PrimKind,
    srcdst: SrcDst,
    transp: Option<u16>,
    data: Data,
    op: Option<CmpOp>,
}

/// What a word means with no context.
enum Lookup {
    /// A type keyword (`host`, `ttl`, ...).
    Type(PrimKind),
    /// Syntax (`src`, `dst`, `ip`, `ether`, `not`): handled by the caller.
    Syntax,
    /// A protocol name.
    Proto(u16),
    /// A name meaning a value of one type.
    Data(PrimKind, u32),
    /// A name with several or no meanings in this context: the message says which.
    Bad(String),
    /// Not a name.
    Unknown,
}

fn type_word(word: &str) -> Option<Lookup> {
    let ty = match word {
        "ce" => PrimKind::Ce,
        "dscp" => PrimKind::Field(F_DSCP),
        "ect" => PrimKind::Ect,
        "frag" => PrimKind::Frag,
        "hl" => PrimKind::Field(F_HL),
        "host" => PrimKind::Host,
        "id" => PrimKind::Field(F_ID),
        "len" => PrimKind::Field(F_LEN),
        "net" => PrimKind::Net,
        "opt" => PrimKind::TcpOpt,
        "port" => PrimKind::Port,
        "proto" => PrimKind::Proto,
        "tos" => PrimKind::Field(F_TOS),
        "ttl" => PrimKind::Field(F_TTL),
        "type" => PrimKind::Field(F_ICMP_TYPE),
        "unfrag" => PrimKind::Unfrag,
        "vers" => PrimKind::Field(F_VERS),
        "win" => PrimKind::Field(F_WIN),
        "dest" | "dst" | "ether" | "ip" | "not" | "src" => return Some(Lookup::Syntax),
        _ => return None,
    };
    Some(Lookup::Type(ty))
}

/// Click's `IPFilter::lookup`: the meaning of `word` given the primitive's type and transport
/// protocol so far (`echo` is a port in `port echo` and an ICMP type in `icmp type echo`).
fn lookup(word: &str, ty: PrimKind, proto: Option<u16>) -> Lookup {
    if ty == PrimKind::None {
        if let Some(l) = type_word(word) {
            return l;
        }
    }
    let proto_v = find(PROTO_NAMES, word);
    let port_v = find(PORT_NAMES, word);
    let opt_v = find(TCP_OPTS, word);
    let icmp_v = find(ICMP_TYPES, word);
    if proto_v.is_none() && port_v.is_none() && opt_v.is_none() && icmp_v.is_none() {
        return Lookup::Unknown;
    }
    let tcpish = matches!(proto, None | Some(PROTO_TCP) | Some(PROTO_TCP_OR_UDP));
    let udpish = matches!(proto, None | Some(PROTO_UDP) | Some(PROTO_TCP_OR_UDP));
    let mut hits: Vec<Lookup> = Vec::new();
    if let Some(v) = proto_v {
        if matches!(ty, PrimKind::None | PrimKind::Proto) {
            hits.push(Lookup::Proto(v));
        }
    }
    if let Some(v) = port_v {
        if matches!(ty, PrimKind::None | PrimKind::Port) && (tcpish || udpish) {
            hits.push(Lookup::Data(PrimKind::Port, u32::from(v)));
        }
    }
    if let Some(v) = opt_v {
        if matches!(ty, PrimKind::None | PrimKind::TcpOpt) && tcpish {
            hits.push(Lookup::Data(PrimKind::TcpOpt, u32::from(v)));
        }
    }
    if let Some(v) = icmp_v {
        if matches!(ty, PrimKind::None | PrimKind::Field(F_ICMP_TYPE))
            && matches!(proto, None | Some(PROTO_ICMP))
        {
            hits.push(Lookup::Data(PrimKind::Field(F_ICMP_TYPE), u32::from(v)));
        }
    }
    if hits.len() == 1 {
        return hits.pop().unwrap_or(Lookup::Unknown);
    }
    let mut meanings = Vec::new();
    if proto_v.is_some() {
        meanings.push(format!("`ip proto {word}`"));
    }
    if port_v.is_some() {
        meanings.push(format!("`port {word}`"));
    }
    if opt_v.is_some() {
        meanings.push(format!("`tcp opt {word}`"));
    }
    if icmp_v.is_some() {
        meanings.push(format!("`icmp type {word}`"));
    }
    let what = if hits.is_empty() {
        "meaningless here"
    } else {
        "ambiguous"
    };
    Lookup::Bad(format!("`{word}` is {what}; try {}", meanings.join(" or ")))
}

/// Click's `IntArg`: decimal, `0x` hexadecimal or `0`-prefixed octal.
fn parse_int(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok();
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) || s.is_empty() {
        return None;
    }
    if s.len() > 1 && s.starts_with('0') {
        return u64::from_str_radix(&s[1..], 8).ok();
    }
    s.parse().ok()
}

/// Parses one `IPClassifier` pattern (or an `IPFilter` pattern without its action).
/// `-`, `any` and `all` alone match everything.
pub fn parse_pattern(text: &str, names: &Names) -> Result<Expr, ConfigError> {
    let tokens = tokenize(text);
    if tokens.is_empty() {
        return Err(ConfigError::new(
            "expected a pattern, found an empty argument",
        ));
    }
    parse_tokens(text, &tokens, names)
}

pub(super) fn parse_tokens(
    text: &str,
    tokens: &[Token<'_>],
    names: &Names,
) -> Result<Expr, ConfigError> {
    if tokens.len() == 1 && matches!(tokens[0].text, "-" | "any" | "all") {
        return Ok(Expr::True);
    }
    let mut p = Parser {
        text,
        toks: tokens,
        pos: 0,
        names,
        prev: Prim::default(),
        depth: 0,
    };
    let e = p.expr()?;
    if p.pos < p.toks.len() {
        return Err(p.err("expected `and`, `or` or the end of the pattern"));
    }
    Ok(e)
}

struct Parser<'a, 't> {
    text: &'a str,
    toks: &'t [Token<'a>],
    pos: usize,
    names: &'a Names,
    prev: Prim,
    depth: usize,
}

impl<'a, 't> Parser<'a, 't> {
    fn word(&self, i: usize) -> Option<&'a str> {
        self.toks.get(i).map(|t| t.text)
    }

    fn peek(&self) -> Option<&'a str> {
        self.word(self.pos)
    }

    /// An error at the current position: "`what`, found `x` at column N".
    fn err(&self, expected: &str) -> ConfigError {
        self.err_at(self.pos, expected)
    }

    fn err_at(&self, at: usize, expected: &str) -> ConfigError {
        match self.toks.get(at) {
            Some(t) => ConfigError::new(format!(
                "{expected}, found `{}` at column {}",
                t.text,
                t.pos + 1
            )),
            None => ConfigError::new(format!(
                "{expected}, found the end of the pattern at column {}",
                self.text.len() + 1
            )),
        }
    }

    fn msg_at(&self, at: usize, msg: &str) -> ConfigError {
        let col = self.toks.get(at).map_or(self.text.len() + 1, |t| t.pos + 1);
        ConfigError::new(format!("{msg} (at column {col})"))
    }

    fn enter(&mut self) -> Result<(), ConfigError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.msg_at(
                self.pos,
                &format!("pattern nested more than {MAX_DEPTH} deep"),
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, ConfigError> {
        self.enter()?;
        let cond = self.orexpr()?;
        let out = if self.peek() == Some("?") {
            self.pos += 1;
            let yes = self.expr()?;
            if self.peek() != Some(":") {
                return Err(self.err("expected `:` in `COND ? A : B`"));
            }
            self.pos += 1;
            let no = self.expr()?;
            Expr::or(vec![
                Expr::and(vec![cond.clone(), yes]),
                Expr::and(vec![Expr::Not(Box::new(cond)), no]),
            ])
        } else {
            cond
        };
        self.depth -= 1;
        Ok(out)
    }

    fn orexpr(&mut self) -> Result<Expr, ConfigError> {
        let mut items = vec![self.term()?];
        while matches!(self.peek(), Some("or" | "||")) {
            self.pos += 1;
            items.push(self.term()?);
        }
        Ok(Expr::or(items))
    }

    fn term(&mut self) -> Result<Expr, ConfigError> {
        let mut items = vec![self.factor()?];
        loop {
            match self.peek() {
                Some("and" | "&&") => {
                    self.pos += 1;
                    items.push(self.factor()?);
                }
                None | Some(")" | "or" | "||" | "?" | ":") => break,
                Some(_) => items.push(self.factor()?),
            }
        }
        Ok(Expr::and(items))
    }

    fn factor(&mut self) -> Result<Expr, ConfigError> {
        match self.peek() {
            Some("not" | "!") => {
                self.pos += 1;
                self.enter()?;
                let e = self.factor()?;
                self.depth -= 1;
                Ok(Expr::Not(Box::new(e)))
            }
            Some("(") => {
                self.pos += 1;
                let e = self.expr()?;
                if self.peek() != Some(")") {
                    return Err(self.err("expected `)`"));
                }
                self.pos += 1;
                Ok(e)
            }
            _ => self.test(),
        }
    }

    /// One primitive with its qualifiers, operator and value.
    fn test(&mut self) -> Result<Expr, ConfigError> {
        let first = self.pos;
        match self.peek() {
            None | Some(")" | "or" | "||" | "?" | ":" | "and" | "&&") => {
                return Err(self
                    .err("expected a primitive (such as `tcp`, `src host ADDR`, `dst port 80`)"));
            }
            Some("true") => {
                self.pos += 1;
                return Ok(Expr::True);
            }
            Some("false") => {
                self.pos += 1;
                return Ok(Expr::False);
            }
            _ => {}
        }

        let mut prim = Prim::default();
        let mut header: Option<char> = None;
        let mut negated = false;

        // Qualifiers.
        while let Some(wd) = self.peek() {
            match lookup(wd, PrimKind::None, None) {
                Lookup::Type(t) => {
                    if prim.ty != PrimKind::None {
                        return Err(self.msg_at(self.pos, "type specified twice"));
                    }
                    prim.ty = t;
                    if let PrimKind::Field(Field { proto: Some(p), .. }) = t {
                        self.set_transp(&mut prim, p)?;
                    }
                }
                Lookup::Proto(p) => self.set_transp(&mut prim, p)?,
                Lookup::Syntax => match wd {
                    "src" => {
                        let both = match (self.word(self.pos + 1), self.word(self.pos + 2)) {
                            (Some("and" | "&&"), Some("dst" | "dest")) => Some(SrcDst::And),
                            (Some("or" | "||"), Some("dst" | "dest")) => Some(SrcDst::Or),
                            _ => None,
                        };
                        self.set_srcdst(&mut prim, both.unwrap_or(SrcDst::Src))?;
                        if both.is_some() {
                            self.pos += 2;
                        }
                    }
                    "dst" | "dest" => self.set_srcdst(&mut prim, SrcDst::Dst)?,
                    "ip" | "ether" => {
                        if header.is_some() {
                            break;
                        }
                        header = wd.chars().next();
                    }
                    _ => negated = !negated, // "not"
                },
                _ => break,
            }
            self.pos += 1;
        }
        if self.pos != first {
            self.prev = Prim::default();
        }
        if self.prev.ty == PrimKind::Ether {
            header = Some('e');
        }
        // Is there a word after the one at `pos`? (Click only reads `[`, `&` and operators
        // when something follows them.)
        let has_more = |p: &Self| p.pos + 1 < p.toks.len();

        // Optional [POS:LEN].
        if self.peek() == Some("[")
            && has_more(self)
            && self.pos > first
            && prim.ty == PrimKind::None
        {
            self.brackets(&mut prim)?;
        }

        // Optional & MASK.
        let mut mask = None;
        if self.peek() == Some("&") && has_more(self) {
            let w = self.word(self.pos + 1).unwrap_or("");
            let m = if let Some(v) = parse_int(w) {
                let v =
                    u32::try_from(v).map_err(|_| self.msg_at(self.pos + 1, "mask out of range"))?;
                Some(Mask::Int(v))
            } else if let (true, Some(a)) = (header != Some('e'), self.ip_addr(w)) {
                Some(Mask::Ip(a))
            } else if header != Some('i') && self.names.eth(w).is_ok() {
                self.names.eth(w).ok().map(|a| Mask::Ether(a.0))
            } else {
                None
            };
            let Some(m) = m else {
                return Err(self.err_at(
                    self.pos + 1,
                    "expected a mask (integer, IP or Ethernet address) after `&`",
                ));
            };
            if matches!(m, Mask::Int(0) | Mask::Ip(0)) {
                return Err(self.msg_at(self.pos + 1, "zero mask"));
            }
            mask = Some(m);
            self.pos += 2;
        }

        // Optional relational operator.
        if has_more(self) {
            let op = match self.peek() {
                Some("=" | "==") => Some(CmpOp::Eq),
                Some("!=") => Some(CmpOp::Ne),
                Some(">") => Some(CmpOp::Gt),
                Some("<") => Some(CmpOp::Lt),
                Some(">=") => Some(CmpOp::Ge),
                Some("<=") => Some(CmpOp::Le),
                _ => None,
            };
            if op.is_some() {
                prim.op = op;
                self.pos += 1;
            }
        }

        // The value.
        if let Some(wd) = self.peek() {
            let at = self.pos;
            match lookup(wd, prim.ty, prim.transp) {
                Lookup::Bad(msg) => return Err(self.msg_at(at, &msg)),
                Lookup::Data(t, v) => {
                    prim.data = Data::Named(t, v);
                    self.pos += 1;
                }
                Lookup::Proto(v) if prim.ty == PrimKind::Proto => {
                    prim.data = Data::Named(PrimKind::Proto, u32::from(v));
                    self.pos += 1;
                }
                _ => {
                    if let Some(v) = parse_int(wd) {
                        prim.data = Data::Int(v);
                        self.pos += 1;
                    } else if let (true, Some(a)) = (header != Some('e'), self.ip_addr(wd)) {
                        self.pos += 1;
                        let masked = match (self.peek(), self.word(self.pos + 1)) {
                            (Some("mask"), Some(m)) => self.ip_addr(m),
                            _ => None,
                        };
                        if let Some(m) = masked {
                            self.pos += 2;
                            prim.data = Data::Net(a, m);
                        } else if let (PrimKind::Net, Ok((na, len))) =
                            (prim.ty, self.names.prefix(wd))
                        {
                            prim.data = Data::Net(u32::from(na), crate::net::mask(len));
                        } else {
                            prim.data = Data::Host(a);
                        }
                    } else if let (true, Ok((na, len))) =
                        (header != Some('e'), self.names.prefix(wd))
                    {
                        prim.data = Data::Net(u32::from(na), crate::net::mask(len));
                        self.pos += 1;
                    } else if let (true, Ok(e)) = (header != Some('i'), self.names.eth(wd)) {
                        prim.data = Data::Ether(e.0);
                        self.pos += 1;
                    } else if prim.op.is_some() {
                        return Err(self.err_at(at, "expected a value after the operator"));
                    }
                }
            }
        } else if prim.op.is_some() {
            return Err(self.err("expected a value after the operator"));
        }

        if self.pos == first {
            return Err(
                self.err("expected a primitive (such as `tcp`, `src host ADDR`, `dst port 80`)")
            );
        }

        let prim = self.check(prim, header, mask, first)?;
        let e = compile(&prim, mask);
        self.prev = prim;
        Ok(if negated { Expr::Not(Box::new(e)) } else { e })
    }

    /// An IP address: a dotted quad or an `AddressInfo` name that defines an address. As in
    /// Click's AddressInfo, a name declared only as a network prefix (`NET 10.0.0.0/8`, no host
    /// bits) is not an address, so `src NET` means `src net NET`.
    fn ip_addr(&self, w: &str) -> Option<u32> {
        if let Ok(a) = w.parse::<std::net::Ipv4Addr>() {
            return Some(u32::from(a));
        }
        let a = u32::from(self.names.ipv4(w).ok()?);
        if let Ok((p, len)) = self.names.prefix(w) {
            if len < 32 && u32::from(p) & !crate::net::mask(len) == 0 {
                return None;
            }
        }
        Some(a)
    }

    fn set_transp(&self, prim: &mut Prim, p: u16) -> Result<(), ConfigError> {
        if prim.transp.is_some_and(|q| q != p) {
            return Err(self.msg_at(self.pos, "transport protocol specified twice"));
        }
        prim.transp = Some(p);
        Ok(())
    }

    fn set_srcdst(&self, prim: &mut Prim, sd: SrcDst) -> Result<(), ConfigError> {
        if prim.srcdst != SrcDst::None {
            return Err(self.msg_at(self.pos, "`src` or `dst` specified twice"));
        }
        prim.srcdst = sd;
        Ok(())
    }

    /// `[POS]`, `[POS:LEN]` or `[POS,POS2]` after `ip`, `tcp`, `udp`, `icmp` or `transp`.
    fn brackets(&mut self, prim: &mut Prim) -> Result<(), ConfigError> {
        let open = self.pos;
        let mut inner = String::new();
        self.pos += 1;
        while let Some(w) = self.peek() {
            if w == "]" {
                break;
            }
            inner.push_str(w);
            self.pos += 1;
        }
        if self.peek() != Some("]") {
            return Err(self.err("expected `]`"));
        }
        self.pos += 1;
        let bad = || self.msg_at(open, "expected `[POS]` or `[POS:LEN]`");
        let (pos, len) = if let Some((a, b)) = inner.split_once(':') {
            (parse_int(a).ok_or_else(bad)?, parse_int(b).ok_or_else(bad)?)
        } else if let Some((a, b)) = inner.split_once(',') {
            let (a, b) = (parse_int(a).ok_or_else(bad)?, parse_int(b).ok_or_else(bad)?);
            if b < a {
                return Err(bad());
            }
            (a, b - a + 1)
        } else {
            (parse_int(&inner).ok_or_else(bad)?, 1)
        };
        if !(1..=4).contains(&len) {
            return Err(self.msg_at(
                open,
                "LEN in `[POS:LEN]` out of range, should be between 1 and 4",
            ));
        }
        if pos > 0x1fff || (pos / 4) != (pos + len - 1) / 4 {
            return Err(self.msg_at(
                open,
                &format!("field [{pos}:{len}] does not fit in a single 4-byte word"),
            ));
        }
        let proto = prim.transp;
        prim.ty = PrimKind::Field(Field {
            name: if proto.is_some() {
                "transp[...]"
            } else {
                "ip[...]"
            },
            proto,
            bit_off: (pos * 8) as u32,
            bit_len: (len * 8) as u32,
        });
        Ok(())
    }

    /// Click's `Primitive::check`: fills in the type from the value or the previous primitive
    /// (keyword elision) and checks the value, operator and mask agree with the type.
    fn check(
        &self,
        mut p: Prim,
        header: Option<char>,
        mask: Option<Mask>,
        at: usize,
    ) -> Result<Prim, ConfigError> {
        let prev = self.prev;
        if p.ty == PrimKind::None {
            let ty = match p.data {
                Data::Host(_) => PrimKind::Host,
                Data::Net(..) => PrimKind::Net,
                Data::Ether(_) => PrimKind::Ether,
                Data::Named(t, _) => t,
                Data::Int(_) => match prev.ty {
                    t @ (PrimKind::Field(_) | PrimKind::Proto | PrimKind::Port) => t,
                    _ => {
                        return Err(self
                            .msg_at(at, "a bare number needs a header field or `port` before it"));
                    }
                },
                Data::None => {
                    if p.transp.is_some() {
                        PrimKind::Proto
                    } else {
                        return Err(self.msg_at(at, "incomplete primitive: expected a value"));
                    }
                }
            };
            p.ty = ty;
            // Keyword elision: direction (and for ports, protocol) carry over.
            let inherits_dir = matches!(
                ty,
                PrimKind::Host
                    | PrimKind::Net
                    | PrimKind::Ether
                    | PrimKind::TcpOpt
                    | PrimKind::Port
            );
            if inherits_dir && p.srcdst == SrcDst::None {
                p.srcdst = prev.srcdst;
            }
            if p.transp.is_none() {
                p.transp = match ty {
                    PrimKind::Port => prev.transp,
                    PrimKind::Field(f) => f.proto,
                    _ => None,
                };
            }
        }
        let header = header.unwrap_or(if matches!(p.data, Data::Ether(_)) {
            'e'
        } else {
            'i'
        });
        if header == 'e' && p.ty == PrimKind::Host {
            p.ty = PrimKind::Ether;
        }
        let name = p.ty.name();
        let err = |m: &str| self.msg_at(at, &format!("`{name}`: {m}"));
        if header != 'i' && p.ty != PrimKind::Ether {
            return Err(err("only for IP headers"));
        }
        let op = p.op.unwrap_or(CmpOp::Eq);
        let eq_only = matches!(op, CmpOp::Eq | CmpOp::Ne);
        let int_value = |want: PrimKind| match p.data {
            Data::Int(v) => Some(v),
            Data::Named(t, v) if t == want => Some(u64::from(v)),
            _ => None,
        };
        match p.ty {
            PrimKind::Host | PrimKind::Net => {
                let ok = match (p.ty, p.data) {
                    (PrimKind::Host, Data::Host(_)) | (PrimKind::Net, Data::Net(..)) => true,
                    // `host` given a prefix is an error in Click; `net` given an address is /32.
                    (PrimKind::Net, Data::Host(a)) => {
                        p.data = Data::Net(a, u32::MAX);
                        true
                    }
                    _ => false,
                };
                if !ok {
                    return Err(err("expected an IP address or prefix as value"));
                }
                if !eq_only {
                    return Err(err("operator not supported"));
                }
                if matches!(mask, Some(Mask::Ether(_))) {
                    return Err(err("bad mask"));
                }
            }
            PrimKind::Ether => {
                if !matches!(p.data, Data::Ether(_)) {
                    return Err(err("expected an Ethernet address as value"));
                }
                if !eq_only {
                    return Err(err("operator not supported"));
                }
                if matches!(mask, Some(Mask::Int(_) | Mask::Ip(_))) {
                    return Err(err("bad mask"));
                }
            }
            PrimKind::Proto => {
                let v = match p.data {
                    Data::Int(v) => v,
                    Data::Named(PrimKind::Proto, v) => u64::from(v),
                    Data::None => match p.transp {
                        Some(t) => u64::from(t),
                        None => return Err(err("value missing")),
                    },
                    _ => return Err(err("value missing")),
                };
                if let (Some(t), Data::Int(_) | Data::Named(..)) = (p.transp, p.data) {
                    if u64::from(t) != v {
                        return Err(err("protocol specified twice"));
                    }
                }
                if v >= 256 {
                    if op != CmpOp::Eq || mask.is_some() || v > u64::from(PROTO_TRANSP) {
                        return Err(err("operator, mask or value not supported"));
                    }
                } else {
                    check_value(&err, v, 0xff, op, mask)?;
                }
                p.data = Data::Int(v);
                p.transp = None;
            }
            PrimKind::Port => {
                let v = int_value(PrimKind::Port).ok_or_else(|| err("value missing"))?;
                match p.transp {
                    None => p.transp = Some(PROTO_TCP_OR_UDP),
                    Some(PROTO_TCP | PROTO_UDP | PROTO_TCP_OR_UDP | PROTO_DCCP) => {}
                    Some(t) => return Err(err(&format!("bad protocol {t}"))),
                }
                check_value(&err, v, 0xffff, op, mask)?;
                p.data = Data::Int(v);
            }
            PrimKind::TcpOpt => {
                let v = int_value(PrimKind::TcpOpt).ok_or_else(|| err("value missing"))?;
                match p.transp {
                    None | Some(PROTO_TCP) => p.transp = Some(PROTO_TCP),
                    Some(t) => return Err(err(&format!("bad protocol {t}"))),
                }
                if p.op.is_some_and(|o| o != CmpOp::Eq) || mask.is_some() {
                    return Err(err("operator or mask not supported"));
                }
                if v == 0 || v > 255 {
                    return Err(err(&format!("value {v} out of range")));
                }
                p.data = Data::Int(v);
            }
            PrimKind::Ect => match p.data {
                Data::None => {
                    if mask.is_some() {
                        return Err(err("value missing"));
                    }
                }
                Data::Int(v) => check_value(&err, v, 3, op, mask)?,
                _ => return Err(err("value missing")),
            },
            PrimKind::Ce | PrimKind::Frag | PrimKind::Unfrag => {
                if p.data != Data::None || mask.is_some() || p.op.is_some() {
                    return Err(err("value not supported"));
                }
            }
            PrimKind::Field(f) => {
                let v = int_value(p.ty).ok_or_else(|| err("value missing"))?;
                check_value(&err, v, f.full(), op, mask)?;
                p.data = Data::Int(v);
            }
            PrimKind::None => return Err(err("incomplete primitive")),
        }
        if matches!(
            p.ty,
            PrimKind::Host | PrimKind::Net | PrimKind::Port | PrimKind::Ether
        ) && p.srcdst == SrcDst::None
        {
            p.srcdst = SrcDst::Or;
        }
        Ok(p)
    }
}

/// Checks a mask is inside the field and, for `==`/`!=`, that the value fits.
fn check_value(
    err: &dyn Fn(&str) -> ConfigError,
    v: u64,
    full: u32,
    op: CmpOp,
    mask: Option<Mask>,
) -> Result<(), ConfigError> {
    match mask {
        None => {}
        Some(Mask::Int(m)) if m & !full != 0 => {
            return Err(err(&format!("mask out of range, bound {full:#x}")));
        }
        Some(Mask::Int(_)) => {}
        Some(_) => return Err(err("bad mask")),
    }
    if matches!(op, CmpOp::Eq | CmpOp::Ne) && v > u64::from(full) {
        return Err(err(&format!("value {v} out of range, bound {full}")));
    }
    if v > u64::from(u32::MAX) {
        return Err(err(&format!("value {v} out of range")));
    }
    Ok(())
}

fn proto_expr(p: u16) -> Expr {
    let is = |v: u16| Expr::Test(Test::field(Base::Network, 9, 1, CmpOp::Eq, u32::from(v)));
    match p {
        PROTO_TCP_OR_UDP => Expr::or(vec![is(PROTO_TCP), is(PROTO_UDP)]),
        PROTO_TRANSP => Expr::True,
        p => is(p),
    }
}

/// The first-fragment test (fragment offset zero) Click puts before transport-header tests.
fn first_fragment() -> Expr {
    Expr::Test(Test {
        mask: 0x1fff,
        ..Test::field(Base::Network, 6, 2, CmpOp::Eq, 0)
    })
}

/// Combines a source and a destination test as `src`, `dst`, `src and dst` or `src or dst`.
fn srcdst(sd: SrcDst, src: Expr, dst: Expr) -> Expr {
    match sd {
        SrcDst::Src => src,
        SrcDst::Dst => dst,
        SrcDst::And => Expr::and(vec![src, dst]),
        SrcDst::None | SrcDst::Or => Expr::or(vec![src, dst]),
    }
}

/// Splits an operator into its positive form and whether the result is negated, as Click
/// does (`!=` is `not ==`, `<=` is `not >`, `<` is `not >=`).
fn positive(op: CmpOp) -> (CmpOp, bool) {
    match op {
        CmpOp::Ne => (CmpOp::Eq, true),
        CmpOp::Le => (CmpOp::Gt, true),
        CmpOp::Lt => (CmpOp::Ge, true),
        o => (o, false),
    }
}

fn field_test(f: &Field, op: CmpOp, value: u32, mask: Option<Mask>) -> Test {
    let start = f.bit_off / 8;
    let end = (f.bit_off + f.bit_len).div_ceil(8);
    let user = match mask {
        Some(Mask::Int(m)) => m,
        _ => u32::MAX,
    };
    Test {
        base: if f.proto.is_some() {
            Base::Transport
        } else {
            Base::Network
        },
        offset: start as u16,
        len: (end - start) as u8,
        shift: (end * 8 - f.bit_off - f.bit_len) as u8,
        mask: f.full() & user,
        op,
        value,
    }
}

/// Lowers a checked primitive to an expression.
fn compile(p: &Prim, mask: Option<Mask>) -> Expr {
    let mut parts = Vec::new();
    if p.ty != PrimKind::Proto {
        if let Some(t) = p.transp {
            parts.push(proto_expr(t));
        }
    }
    let transport_field = matches!(p.ty, PrimKind::Field(Field { proto: Some(_), .. }));
    if matches!(p.ty, PrimKind::Port | PrimKind::TcpOpt) || transport_field {
        parts.push(first_fragment());
    }
    let op = p.op.unwrap_or(CmpOp::Eq);
    let int = match p.data {
        Data::Int(v) => v as u32,
        _ => 0,
    };
    let test = match p.ty {
        PrimKind::Host | PrimKind::Net => {
            let (addr, m) = match p.data {
                Data::Host(a) => (a, u32::MAX),
                Data::Net(a, m) => (a, m),
                _ => (0, 0),
            };
            let m = match mask {
                Some(Mask::Int(x) | Mask::Ip(x)) => x,
                _ => m,
            };
            let t = |off| {
                Expr::Test(Test {
                    mask: m,
                    ..Test::field(Base::Network, off, 4, CmpOp::Eq, addr & m)
                })
            };
            let e = srcdst(p.srcdst, t(12), t(16));
            if op == CmpOp::Ne {
                e.negate_tests()
            } else {
                e
            }
        }
        PrimKind::Ether => {
            let a = match p.data {
                Data::Ether(a) => a,
                _ => [0; 6],
            };
            let m = match mask {
                Some(Mask::Ether(m)) => m,
                _ => [0xff; 6],
            };
            let word = |b: &[u8]| b.iter().fold(0u32, |acc, x| (acc << 8) | u32::from(*x));
            let at = |off: u16| {
                Expr::and(vec![
                    Expr::Test(Test {
                        mask: word(&m[..4]),
                        ..Test::field(Base::Mac, off, 4, CmpOp::Eq, word(&a[..4]) & word(&m[..4]))
                    }),
                    Expr::Test(Test {
                        mask: word(&m[4..]),
                        ..Test::field(
                            Base::Mac,
                            off + 4,
                            2,
                            CmpOp::Eq,
                            word(&a[4..]) & word(&m[4..]),
                        )
                    }),
                ])
            };
            let e = srcdst(p.srcdst, at(6), at(0));
            if op == CmpOp::Ne {
                e.negate_tests()
            } else {
                e
            }
        }
        PrimKind::Proto => {
            if int >= 256 {
                proto_expr(int as u16)
            } else {
                let m = match mask {
                    Some(Mask::Int(m)) => m,
                    _ => 0xff,
                };
                Expr::Test(Test {
                    mask: m,
                    ..Test::field(Base::Network, 9, 1, op, int)
                })
            }
        }
        PrimKind::Frag => Expr::Test(Test {
            mask: 0x3fff,
            ..Test::field(Base::Network, 6, 2, CmpOp::Ne, 0)
        }),
        PrimKind::Unfrag => Expr::Test(Test {
            mask: 0x3fff,
            ..Test::field(Base::Network, 6, 2, CmpOp::Eq, 0)
        }),
        PrimKind::Ce => Expr::Test(Test {
            mask: 3,
            ..Test::field(Base::Network, 1, 1, CmpOp::Eq, 3)
        }),
        PrimKind::Ect => match p.data {
            Data::Int(v) => {
                let m = match mask {
                    Some(Mask::Int(m)) => m,
                    _ => 3,
                };
                Expr::Test(Test {
                    mask: m,
                    ..Test::field(Base::Network, 1, 1, op, v as u32)
                })
            }
            _ => Expr::Test(Test {
                mask: 3,
                ..Test::field(Base::Network, 1, 1, CmpOp::Ne, 0)
            }),
        },
        PrimKind::Port => {
            let (pos, neg) = positive(op);
            let m = match mask {
                Some(Mask::Int(m)) => m,
                _ => 0xffff,
            };
            let t = |off| {
                Expr::Test(Test {
                    mask: m,
                    ..Test::field(Base::Transport, off, 2, pos, int)
                })
            };
            let e = srcdst(p.srcdst, t(0), t(2));
            if neg {
                e.negate_tests()
            } else {
                e
            }
        }
        PrimKind::TcpOpt => Expr::Test(Test {
            mask: int,
            ..Test::field(Base::Transport, 13, 1, CmpOp::Eq, int)
        }),
        PrimKind::Field(f) => Expr::Test(field_test(&f, op, int, mask)),
        PrimKind::None => Expr::True,
    };
    parts.push(test);
    Expr::and(parts)
}
