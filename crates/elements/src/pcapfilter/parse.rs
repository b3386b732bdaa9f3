//! Lexer and parser of the tcpdump dialect, producing a [`Pred`] as libpcap's code generator
//! would (same loads, same offsets, same order of tests).

use super::expr::{ArithOp, Pred, Value};
use crate::ipfilter::CmpOp;
use std::fmt;
use wire::ethernet::ethertype;
use wire::ip::protocol;

/// The EtherTypes `wire` names, as the filter's 32-bit values (RARP 0x8035, DECnet 0x6003
/// and the pre-standard QinQ TPID 0x9100 are written where they are used: only this
/// filter language knows them).
const ET_IPV4: u32 = ethertype::IPV4 as u32;
const ET_IPV6: u32 = ethertype::IPV6 as u32;
const ET_ARP: u32 = ethertype::ARP as u32;
const ET_VLAN: u32 = ethertype::VLAN as u32;
const ET_QINQ: u32 = ethertype::QINQ as u32;

/// A refused expression: the 1-based column of the offending token and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// 1-based column (in characters) where the problem is.
    pub column: usize,
    /// What was wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for ExprError {}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A name, address or number-like word (`host`, `10.0.0.1`, `1-1023`, `fe80::1`).
    Word(String),
    /// A backslash-escaped name (`\tcp`).
    Escaped(String),
    Num(u32),
    LParen,
    RParen,
    LBrack,
    RBrack,
    Colon,
    Op(ArithOp),
    Bang,
    AndAnd,
    OrOr,
    Rel(CmpOp),
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("`{w}`"),
            Tok::Escaped(w) => format!("`\\{w}`"),
            Tok::Num(n) => format!("`{n}`"),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBrack => "`[`".into(),
            Tok::RBrack => "`]`".into(),
            Tok::Colon => "`:`".into(),
            Tok::Op(o) => format!("`{}`", o.as_str()),
            Tok::Bang => "`!`".into(),
            Tok::AndAnd => "`&&`".into(),
            Tok::OrOr => "`||`".into(),
            Tok::Rel(o) => format!("`{}`", o.as_str()),
            Tok::End => "the end of the expression".into(),
        }
    }
}

fn err<T>(column: usize, message: impl Into<String>) -> Result<T, ExprError> {
    Err(ExprError {
        column,
        message: message.into(),
    })
}

/// Parses a number as libpcap does: decimal, `0x` hexadecimal or leading-`0` octal.
fn number(w: &str) -> Option<Result<u32, ()>> {
    let (digits, radix) = if let Some(h) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        (h, 16)
    } else if w.len() > 1 && w.starts_with('0') {
        (&w[1..], 8)
    } else {
        (w, 10)
    };
    if digits.is_empty() {
        return if radix == 16 { Some(Err(())) } else { None };
    }
    if radix == 10 && !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if radix == 8 && !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if radix == 16 && !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(u32::from_str_radix(digits, radix).map_err(|_| ()))
}

fn is_mac(w: &str) -> bool {
    let colon: Vec<&str> = w.split(':').collect();
    colon.len() == 6
        && colon
            .iter()
            .all(|g| (1..=2).contains(&g.len()) && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let word_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let (tok, n) = match two.as_str() {
            "&&" => (Tok::AndAnd, 2),
            "||" => (Tok::OrOr, 2),
            "<<" => (Tok::Op(ArithOp::Shl), 2),
            ">>" => (Tok::Op(ArithOp::Shr), 2),
            "==" => (Tok::Rel(CmpOp::Eq), 2),
            "!=" => (Tok::Rel(CmpOp::Ne), 2),
            "<=" => (Tok::Rel(CmpOp::Le), 2),
            ">=" => (Tok::Rel(CmpOp::Ge), 2),
            _ => match c {
                '(' => (Tok::LParen, 1),
                ')' => (Tok::RParen, 1),
                '[' => (Tok::LBrack, 1),
                ']' => (Tok::RBrack, 1),
                '+' => (Tok::Op(ArithOp::Add), 1),
                '-' => (Tok::Op(ArithOp::Sub), 1),
                '*' => (Tok::Op(ArithOp::Mul), 1),
                '/' => (Tok::Op(ArithOp::Div), 1),
                '%' => (Tok::Op(ArithOp::Mod), 1),
                '&' => (Tok::Op(ArithOp::And), 1),
                '|' => (Tok::Op(ArithOp::Or), 1),
                '^' => (Tok::Op(ArithOp::Xor), 1),
                '!' => (Tok::Bang, 1),
                '=' => (Tok::Rel(CmpOp::Eq), 1),
                '<' => (Tok::Rel(CmpOp::Lt), 1),
                '>' => (Tok::Rel(CmpOp::Gt), 1),
                _ => (Tok::End, 0),
            },
        };
        if n > 0 {
            // `:` is a token of its own unless it starts an IPv6 address (`::1`).
            out.push((tok, col));
            i += n;
            continue;
        }
        if c == '\\' {
            let start = i + 1;
            let mut j = start;
            while j < chars.len() && word_char(chars[j]) {
                j += 1;
            }
            if j == start {
                return err(col, "expected a name after `\\`");
            }
            out.push((Tok::Escaped(chars[start..j].iter().collect()), col));
            i = j;
            continue;
        }
        if c == ':' && chars.get(i + 1) != Some(&':') {
            out.push((Tok::Colon, col));
            i += 1;
            continue;
        }
        if c.is_ascii_alphanumeric() || c == ':' {
            // The longest run that is an IPv6 or MAC address, else a plain word.
            let mut j = i;
            while j < chars.len() && (word_char(chars[j]) || chars[j] == ':') {
                j += 1;
            }
            let long: String = chars[i..j].iter().collect();
            let word = if long.contains(':')
                && (long.parse::<std::net::Ipv6Addr>().is_ok() || is_mac(&long))
            {
                long
            } else {
                let mut k = i;
                while k < chars.len() && word_char(chars[k]) {
                    k += 1;
                }
                if k == i {
                    return err(col, format!("unexpected character `{c}`"));
                }
                chars[i..k].iter().collect()
            };
            let n = word.chars().count();
            // libpcap's named constants (`tcpflags`, `tcp-syn`, `icmp-echo`) are numbers
            // wherever a number may stand (`ip proto tcpflags`, `vlan tcpflags`).
            let tok = match number(&word) {
                _ if named_constant(&word).is_some() => {
                    Tok::Num(named_constant(&word).unwrap_or(0))
                }
                Some(Ok(v)) => Tok::Num(v),
                Some(Err(())) => {
                    return err(col, format!("number `{word}` is not a valid 32-bit number"))
                }
                None => Tok::Word(word),
            };
            out.push((tok, col));
            i += n;
            continue;
        }
        return err(col, format!("unexpected character `{c}`"));
    }
    out.push((Tok::End, chars.len() + 1));
    Ok(out)
}

/// The protocol qualifier of a primitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Default,
    Link,
    Ip,
    Ip6,
    Arp,
    Rarp,
    Tcp,
    Udp,
    Sctp,
    Icmp,
    Icmp6,
    Igmp,
    Igrp,
    Pim,
    Vrrp,
    Carp,
    Ah,
    Esp,
    Decnet,
}

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Proto::Default => "",
            Proto::Link => "ether",
            Proto::Ip => "ip",
            Proto::Ip6 => "ip6",
            Proto::Arp => "arp",
            Proto::Rarp => "rarp",
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Sctp => "sctp",
            Proto::Icmp => "icmp",
            Proto::Icmp6 => "icmp6",
            Proto::Igmp => "igmp",
            Proto::Igrp => "igrp",
            Proto::Pim => "pim",
            Proto::Vrrp => "vrrp",
            Proto::Carp => "carp",
            Proto::Ah => "ah",
            Proto::Esp => "esp",
            Proto::Decnet => "decnet",
        }
    }

    fn of(w: &str) -> Option<Proto> {
        Some(match w {
            "ether" | "link" => Proto::Link,
            "ip" => Proto::Ip,
            "ip6" => Proto::Ip6,
            "arp" => Proto::Arp,
            "rarp" => Proto::Rarp,
            "tcp" => Proto::Tcp,
            "udp" => Proto::Udp,
            "sctp" => Proto::Sctp,
            "icmp" => Proto::Icmp,
            "icmp6" => Proto::Icmp6,
            "igmp" => Proto::Igmp,
            "igrp" => Proto::Igrp,
            "pim" => Proto::Pim,
            "vrrp" => Proto::Vrrp,
            "carp" => Proto::Carp,
            "ah" => Proto::Ah,
            "esp" => Proto::Esp,
            "decnet" => Proto::Decnet,
            _ => return None,
        })
    }

    /// The IP protocol number of a transport qualifier.
    fn ip_proto(self) -> Option<u32> {
        Some(match self {
            Proto::Tcp => protocol::TCP.into(),
            Proto::Udp => protocol::UDP.into(),
            Proto::Sctp => protocol::SCTP.into(),
            Proto::Icmp => protocol::ICMP.into(),
            Proto::Icmp6 => protocol::ICMPV6.into(),
            Proto::Igmp => protocol::IGMP.into(),
            Proto::Igrp => 9,
            Proto::Pim => 103,
            Proto::Vrrp | Proto::Carp => 112,
            Proto::Ah => 51,
            Proto::Esp => 50,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Default,
    Src,
    Dst,
    SrcOrDst,
    SrcAndDst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addr {
    Default,
    Host,
    Net,
    Port,
    PortRange,
    Proto,
}

impl Addr {
    fn name(self) -> &'static str {
        match self {
            Addr::Default | Addr::Host => "host",
            Addr::Net => "net",
            Addr::Port => "port",
            Addr::PortRange => "portrange",
            Addr::Proto => "proto",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Quals {
    proto: Proto,
    dir: Dir,
    addr: Addr,
}

/// Keywords libpcap knows that this front-end refuses, with the reason.
fn refused(w: &str) -> Option<&'static str> {
    Some(match w {
        "gateway" => "`gateway` needs host-name and Ethernet-address lookups, which FuseBox does not do",
        "protochain" => "`protochain` walks IPv6 extension headers in a loop, which is not supported",
        "geneve" | "vxlan" | "vxlan-gpe" => "tunnel primitives (`geneve`, `vxlan`) re-base later offsets on a variable-length header; not supported",
        "inbound" | "outbound" | "ifname" | "on" | "rnr" | "rulenum" | "reason" | "rset"
        | "srnr" | "subrulenum" | "action" | "ifindex" => {
            "capture-direction and pflog primitives have no meaning for frames in a chain"
        }
        "atalk" | "aarp" | "lat" | "sca" | "moprc" | "mopdl" | "iso" | "esis"
        | "es-is" | "isis" | "is-is" | "clnp" | "stp" | "ipx" | "netbeui" | "l1" | "l2"
        | "iih" | "lsp" | "snp" | "csnp" | "psnp" | "fddi" | "tr" | "wlan" | "radio"
        | "ppp" | "slip" | "atm" | "lane" | "oamf4" | "oamf4ec" | "oamf4sc" | "oam"
        | "metac" | "bcc" | "sc" | "ilmic" | "metaconnect" | "connectmsg" | "vpi" | "vci"
        | "fisu" | "lssu" | "msu" | "hfisu" | "hlssu" | "hmsu" | "sio" | "opc" | "dpc"
        | "sls" | "hsio" | "hopc" | "hdpc" | "hsls" | "type" | "subtype" | "dir" | "addr1"
        | "addr2" | "addr3" | "addr4" | "ra" | "ta" | "byte" => {
            "this protocol or qualifier is outside the supported subset (Ethernet, VLAN, ARP, IPv4, IPv6, TCP, UDP, SCTP, ICMP, ICMPv6, IGMP)"
        }
        _ => return None,
    })
}

/// Named constants of the relational syntax (`tcp[tcpflags] & tcp-syn`).
fn named_constant(w: &str) -> Option<u32> {
    Some(match w {
        "icmptype" | "icmp6type" => 0,
        "icmpcode" | "icmp6code" => 1,
        "tcpflags" => 13,
        "tcp-fin" => 0x01,
        "tcp-syn" => 0x02,
        "tcp-rst" => 0x04,
        "tcp-push" => 0x08,
        "tcp-ack" => 0x10,
        "tcp-urg" => 0x20,
        "tcp-ece" => 0x40,
        "tcp-cwr" => 0x80,
        "icmp-echoreply" => 0,
        "icmp-unreach" => 3,
        "icmp-sourcequench" => 4,
        "icmp-redirect" => 5,
        "icmp-echo" => 8,
        "icmp-routeradvert" => 9,
        "icmp-routersolicit" => 10,
        "icmp-timxceed" => 11,
        "icmp-paramprob" => 12,
        "icmp-tstamp" => 13,
        "icmp-tstampreply" => 14,
        "icmp-ireq" => 15,
        "icmp-ireqreply" => 16,
        "icmp-maskreq" => 17,
        "icmp-maskreply" => 18,
        "icmp6-destinationunreach" => 1,
        "icmp6-packettoobig" => 2,
        "icmp6-timeexceeded" => 3,
        "icmp6-parameterproblem" => 4,
        "icmp6-echo" => 128,
        "icmp6-echoreply" => 129,
        "icmp6-multicastlistenerquery" => 130,
        "icmp6-multicastlistenerreportv1" => 131,
        "icmp6-multicastlistenerdone" => 132,
        "icmp6-routersolicit" => 133,
        "icmp6-routeradvert" => 134,
        "icmp6-neighborsolicit" => 135,
        "icmp6-neighboradvert" => 136,
        "icmp6-redirect" => 137,
        _ => return None,
    })
}

/// Well-known service names for `port` (what `getservbyname` gives on a stock system).
fn service(w: &str) -> Option<u32> {
    Some(match w {
        "ftp-data" => 20,
        "ftp" => 21,
        "ssh" => 22,
        "telnet" => 23,
        "smtp" => 25,
        "domain" => 53,
        "bootps" => 67,
        "bootpc" => 68,
        "tftp" => 69,
        "http" | "www" => 80,
        "pop3" => 110,
        "sunrpc" => 111,
        "ntp" => 123,
        "netbios-ns" => 137,
        "imap" | "imap2" => 143,
        "snmp" => 161,
        "snmp-trap" => 162,
        "bgp" => 179,
        "ldap" => 389,
        "https" => 443,
        "syslog" => 514,
        "submission" => 587,
        "imaps" => 993,
        "pop3s" => 995,
        _ => return None,
    })
}

/// IP protocol names (`proto \tcp`, `ip proto gre`).
fn ip_protocol(w: &str) -> Option<u32> {
    Some(match w {
        "icmp" => protocol::ICMP.into(),
        "igmp" => protocol::IGMP.into(),
        "ipencap" | "ipip" => protocol::IPIP.into(),
        "tcp" => protocol::TCP.into(),
        "udp" => protocol::UDP.into(),
        "ipv6" | "ip6" => protocol::IPV6.into(),
        "gre" => protocol::GRE.into(),
        "esp" => protocol::ESP.into(),
        "ah" => protocol::AH.into(),
        "icmp6" | "ipv6-icmp" => protocol::ICMPV6.into(),
        "ospf" => 89,
        "pim" => 103,
        "vrrp" => 112,
        "sctp" => 132,
        _ => return None,
    })
}

fn ether_type(w: &str) -> Option<u32> {
    Some(match w {
        "ip" => ET_IPV4,
        "ip6" => ET_IPV6,
        "arp" => ET_ARP,
        "rarp" => 0x8035,
        _ => return None,
    })
}

/// Parses a dotted IPv4 address or prefix (`10`, `10.1`, `10.1.2.3`): value in the top bits
/// and the number of bits given.
fn ipv4(w: &str) -> Option<(u32, u32)> {
    let parts: Vec<&str> = w.split('.').collect();
    if parts.len() > 4 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let mut v = 0u32;
    for p in &parts {
        let n = match number(p)? {
            Ok(n) if n <= 255 => n,
            _ => return None,
        };
        v = (v << 8) | n;
    }
    let bits = 8 * parts.len() as u32;
    Some((if bits == 32 { v } else { v << (32 - bits) }, bits))
}

fn mask_of(bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    }
}

/// The parser's state: the tokens and libpcap's link-layer offsets, which `vlan` moves for
/// the rest of the expression.
struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    /// Offset of the Ethertype the next link-type test reads.
    off_lt: u32,
    /// Offset of the link-layer payload (the IP header).
    off_pl: u32,
    /// MPLS labels seen so far (`mpls` moves the payload 4 bytes each time).
    mpls_depth: u32,
    /// Set after `mpls` or `pppoes`, after which libpcap tests the link type differently
    /// (MPLS bottom of stack and IP version, PPP protocol): such tests are refused.
    relinked: Option<&'static str>,
    /// The first refused link-type test after `relinked` was set.
    poison: std::cell::Cell<Option<ExprError>>,
    /// Column of the primitive being parsed.
    term_col: usize,
    /// Current recursion depth of the parser.
    depth: usize,
}

/// The deepest nesting of parentheses, `not`s and unary minus accepted.
pub const MAX_NESTING: usize = 100;

/// The most tokens an expression may have (this bounds the depth of the compiled tree, which
/// evaluation walks recursively).
pub const MAX_TOKENS: usize = 4096;

type Res<T> = Result<T, ExprError>;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].0
    }
    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].0
    }
    fn col(&self) -> usize {
        self.toks[self.pos.min(self.toks.len() - 1)].1
    }
    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }
    fn word(&self) -> Option<&str> {
        match self.peek() {
            Tok::Word(w) => Some(w.as_str()),
            _ => None,
        }
    }
    fn is_word(&self, w: &str) -> bool {
        self.word() == Some(w)
    }
    fn expected<T>(&self, what: &str) -> Res<T> {
        err(
            self.col(),
            format!("expected {what}, found {}", self.peek().describe()),
        )
    }
    fn is_and(&self) -> bool {
        matches!(self.peek(), Tok::AndAnd) || self.is_word("and")
    }
    fn is_or(&self) -> bool {
        matches!(self.peek(), Tok::OrOr) || self.is_word("or")
    }
    fn is_not(&self) -> bool {
        matches!(self.peek(), Tok::Bang) || self.is_word("not")
    }

    // ---- code generation, as libpcap's gencode.c -------------------------------------

    fn linktype(&self, et: u32) -> Pred {
        if let Some(kind) = self.relinked {
            let e = self.poison.take().unwrap_or(ExprError {
                column: self.term_col,
                message: format!(
                    "tests of the link type (`ip`, `tcp`, `host`, `port`, ...) after `{kind}` are not supported (libpcap re-bases them on the {kind} payload)"
                ),
            });
            self.poison.set(Some(e));
        }
        Pred::field(self.off_lt, 2, CmpOp::Eq, et)
    }

    fn ip4_proto(&self, p: u32) -> Pred {
        Pred::and(vec![
            self.linktype(ET_IPV4),
            Pred::field(self.off_pl + 9, 1, CmpOp::Eq, p),
        ])
    }

    fn ip6_proto(&self, p: u32) -> Pred {
        let nh = self.off_pl + 6;
        Pred::and(vec![
            self.linktype(ET_IPV6),
            Pred::or(vec![
                Pred::field(nh, 1, CmpOp::Eq, p),
                Pred::and(vec![
                    Pred::field(nh, 1, CmpOp::Eq, protocol::IPV6_FRAG.into()),
                    Pred::field(self.off_pl + 40, 1, CmpOp::Eq, p),
                ]),
            ]),
        ])
    }

    fn abbrev(&self, p: Proto) -> Pred {
        match p {
            Proto::Default | Proto::Link => Pred::True,
            Proto::Ip => self.linktype(ET_IPV4),
            Proto::Ip6 => self.linktype(ET_IPV6),
            Proto::Arp => self.linktype(ET_ARP),
            Proto::Decnet => self.linktype(0x6003),
            Proto::Rarp => self.linktype(0x8035),
            Proto::Tcp | Proto::Udp | Proto::Sctp | Proto::Pim | Proto::Ah | Proto::Esp => {
                let n = p.ip_proto().unwrap_or(0);
                Pred::or(vec![self.ip4_proto(n), self.ip6_proto(n)])
            }
            Proto::Icmp | Proto::Igmp | Proto::Igrp | Proto::Vrrp | Proto::Carp => {
                self.ip4_proto(p.ip_proto().unwrap_or(0))
            }
            Proto::Icmp6 => self.ip6_proto(protocol::ICMPV6.into()),
        }
    }

    fn frag0(&self) -> Pred {
        Pred::masked(self.off_pl + 6, 2, 0x1fff, CmpOp::Eq, 0)
    }

    fn by_dir(dir: Dir, src: Pred, dst: Pred) -> Pred {
        match dir {
            Dir::Src => src,
            Dir::Dst => dst,
            Dir::SrcAndDst => Pred::and(vec![src, dst]),
            Dir::Default | Dir::SrcOrDst => Pred::or(vec![src, dst]),
        }
    }

    fn cmp4(off: u32, addr: u32, mask: u32) -> Pred {
        if mask == u32::MAX {
            Pred::field(off, 4, CmpOp::Eq, addr)
        } else {
            Pred::masked(off, 4, mask, CmpOp::Eq, addr & mask)
        }
    }

    fn host4(&self, col: usize, q: Quals, addr: u32, mask: u32) -> Res<Pred> {
        let one = |et: u32, s: u32, d: u32| {
            Pred::and(vec![
                self.linktype(et),
                Self::by_dir(
                    q.dir,
                    Self::cmp4(self.off_pl + s, addr, mask),
                    Self::cmp4(self.off_pl + d, addr, mask),
                ),
            ])
        };
        Ok(match q.proto {
            Proto::Default => Pred::or(vec![
                one(ET_IPV4, 12, 16),
                one(ET_ARP, 14, 24),
                one(0x8035, 14, 24),
            ]),
            Proto::Ip => one(ET_IPV4, 12, 16),
            Proto::Arp => one(ET_ARP, 14, 24),
            Proto::Rarp => one(0x8035, 14, 24),
            p => {
                return err(
                    col,
                    format!(
                        "'{}' is not a valid qualifier for '{}' with an IPv4 address",
                        p.name(),
                        q.addr.name()
                    ),
                )
            }
        })
    }

    fn host6(&self, col: usize, q: Quals, addr: u128, bits: u32) -> Res<Pred> {
        if !matches!(q.proto, Proto::Default | Proto::Ip6) {
            return err(
                col,
                format!(
                    "'{}' is not a valid qualifier for '{}' with an IPv6 address",
                    q.proto.name(),
                    q.addr.name()
                ),
            );
        }
        let mask: u128 = if bits == 0 {
            0
        } else {
            u128::MAX << (128 - bits)
        };
        let words = |base: u32| {
            let mut v = Vec::new();
            for k in 0..4u32 {
                let m = (mask >> (96 - 32 * k)) as u32;
                let a = (addr >> (96 - 32 * k)) as u32;
                if m != 0 {
                    v.push(Self::cmp4(base + 4 * k, a, m));
                }
            }
            Pred::and(v)
        };
        Ok(Pred::and(vec![
            self.linktype(ET_IPV6),
            Self::by_dir(q.dir, words(self.off_pl + 8), words(self.off_pl + 24)),
        ]))
    }

    fn ether_host(&self, q: Quals, mac: [u8; 6]) -> Pred {
        let hi = u32::from(u16::from_be_bytes([mac[0], mac[1]]));
        let lo = u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]);
        let at = |o: u32| {
            Pred::and(vec![
                Pred::field(o + 2, 4, CmpOp::Eq, lo),
                Pred::field(o, 2, CmpOp::Eq, hi),
            ])
        };
        Self::by_dir(q.dir, at(6), at(0))
    }

    /// `port` / `portrange` over TCP, UDP and SCTP (or the one qualified), IPv6 then IPv4.
    fn ports(&self, col: usize, q: Quals, lo: u32, hi: u32) -> Res<Pred> {
        let protos: Vec<u32> = match q.proto {
            Proto::Default => [protocol::SCTP, protocol::TCP, protocol::UDP]
                .map(u32::from)
                .to_vec(),
            Proto::Tcp | Proto::Udp | Proto::Sctp => vec![q.proto.ip_proto().unwrap_or(0)],
            p => {
                return err(
                    col,
                    format!(
                        "'{}' is not a valid qualifier for '{}'",
                        p.name(),
                        q.addr.name()
                    ),
                )
            }
        };
        let test = |v: Value| {
            if lo == hi {
                Pred::Cmp(v, CmpOp::Eq, Value::Const(lo))
            } else {
                Pred::and(vec![
                    Pred::Cmp(v.clone(), CmpOp::Ge, Value::Const(lo)),
                    Pred::Cmp(v, CmpOp::Le, Value::Const(hi)),
                ])
            }
        };
        let l4 = |off: u32| Value::Load {
            ihl_at: Some(self.off_pl),
            index: None,
            off: self.off_pl + off,
            size: 2,
        };
        let v6 = Pred::and(vec![
            self.linktype(ET_IPV6),
            Pred::or(
                protos
                    .iter()
                    .map(|&p| {
                        Pred::and(vec![
                            Pred::field(self.off_pl + 6, 1, CmpOp::Eq, p),
                            Self::by_dir(
                                q.dir,
                                test(Value::at(self.off_pl + 40, 2)),
                                test(Value::at(self.off_pl + 42, 2)),
                            ),
                        ])
                    })
                    .collect(),
            ),
        ]);
        let v4 = Pred::and(vec![
            self.linktype(ET_IPV4),
            Pred::or(
                protos
                    .iter()
                    .map(|&p| {
                        Pred::and(vec![
                            Pred::field(self.off_pl + 9, 1, CmpOp::Eq, p),
                            self.frag0(),
                            Self::by_dir(q.dir, test(l4(0)), test(l4(2))),
                        ])
                    })
                    .collect(),
            ),
        ]);
        Ok(Pred::or(vec![v6, v4]))
    }

    fn ip_proto_prim(&self, col: usize, q: Quals, n: u32) -> Res<Pred> {
        if n > 255 && q.proto != Proto::Link {
            return err(col, format!("IP protocol {n} greater than maximum 255"));
        }
        if q.dir != Dir::Default {
            return err(col, "`src`/`dst` do not apply to `proto`");
        }
        Ok(match q.proto {
            Proto::Default => Pred::or(vec![self.ip4_proto(n), self.ip6_proto(n)]),
            Proto::Ip => self.ip4_proto(n),
            Proto::Ip6 => self.ip6_proto(n),
            Proto::Link => {
                if n > 0xffff {
                    return err(col, format!("Ethertype {n} greater than maximum 65535"));
                }
                if n <= 1500 {
                    return err(
                        col,
                        format!(
                            "`ether proto {n}`: 802.3 length/LLC values (≤ 1500) are not supported"
                        ),
                    );
                }
                self.linktype(n)
            }
            p => {
                return err(
                    col,
                    format!("'{}' is not a valid qualifier for 'proto'", p.name()),
                )
            }
        })
    }

    // ---- grammar ---------------------------------------------------------------------

    /// expr := term ((and | or) (term | bare id))*, left-associative, `and` and `or` of
    /// equal precedence (libpcap's grammar).
    fn expr(&mut self) -> Res<(Pred, Option<Quals>)> {
        let (mut acc, mut last) = self.term()?;
        loop {
            let is_and = if self.is_and() {
                true
            } else if self.is_or() {
                false
            } else {
                return Ok((acc, last));
            };
            self.bump();
            let (rhs, q) = match last {
                Some(q) if self.bare_id_ahead() => self.bare_id_or_term(q)?,
                _ => self.term()?,
            };
            last = q;
            acc = if is_and {
                Pred::and(vec![acc, rhs])
            } else {
                Pred::or(vec![acc, rhs])
            };
        }
    }

    /// An identifier inheriting `q` (`or 443`), unless what follows makes it a term after
    /// all (`or (3) = ip[0]`): the parse that gets further wins.
    fn bare_id_or_term(&mut self, q: Quals) -> Res<(Pred, Option<Quals>)> {
        let save = (self.pos, self.off_lt, self.off_pl);
        let id_err = match self.id(q) {
            Ok(p) if !matches!(self.peek(), Tok::Rel(_) | Tok::Op(_)) => return Ok((p, Some(q))),
            Ok(_) => ExprError {
                column: self.col(),
                message: String::new(),
            },
            Err(e) => e,
        };
        (self.pos, self.off_lt, self.off_pl) = save;
        match self.term() {
            Ok(v) => Ok(v),
            Err(e) if e.column >= id_err.column || id_err.message.is_empty() => Err(e),
            Err(_) => Err(id_err),
        }
    }

    /// Whether the next tokens are an identifier that inherits the previous qualifiers
    /// (`host 1.2.3.4 or 5.6.7.8`, `port 80 or not 443`).
    fn bare_id_ahead(&self) -> bool {
        let mut k = 0;
        while matches!(self.peek_at(k), Tok::Bang | Tok::LParen)
            || matches!(self.peek_at(k), Tok::Word(w) if w == "not")
        {
            k += 1;
        }
        match self.peek_at(k) {
            Tok::Word(w) => !is_keyword(w),
            Tok::Escaped(_) => true,
            Tok::Num(_) => !matches!(self.peek_at(k + 1), Tok::Rel(_) | Tok::Op(_)),
            _ => false,
        }
    }

    /// Enters one level of recursion, refusing input nested deeper than [`MAX_NESTING`].
    fn enter(&mut self) -> Res<()> {
        if self.depth >= MAX_NESTING {
            return err(
                self.col(),
                format!("expression nested too deeply (more than {MAX_NESTING} levels)"),
            );
        }
        self.depth += 1;
        Ok(())
    }

    fn term(&mut self) -> Res<(Pred, Option<Quals>)> {
        self.enter()?;
        let r = self.term_inner();
        self.depth -= 1;
        r
    }

    fn term_inner(&mut self) -> Res<(Pred, Option<Quals>)> {
        self.term_col = self.col();
        if self.is_not() {
            self.bump();
            let (p, q) = self.term()?;
            return Ok((Pred::negate(p), q));
        }
        if matches!(self.peek(), Tok::LParen) {
            let save = (self.pos, self.off_lt, self.off_pl);
            let rel_err = match self.relation() {
                Ok(p) => return Ok((p, None)),
                Err(e) => e,
            };
            (self.pos, self.off_lt, self.off_pl) = save;
            self.bump();
            let r = self.expr().and_then(|(p, q)| {
                if matches!(self.peek(), Tok::RParen) {
                    self.bump();
                    Ok((p, q))
                } else {
                    self.expected("`)` or `and`/`or`")
                }
            });
            return match r {
                Ok(v) => Ok(v),
                Err(e) if e.column >= rel_err.column => Err(e),
                Err(_) => Err(rel_err),
            };
        }
        if self.starts_arith() {
            return Ok((self.relation()?, None));
        }
        let col = self.col();
        let w = match self.peek().clone() {
            Tok::Word(w) => w,
            Tok::Num(_) | Tok::Escaped(_) => {
                return err(
                    col,
                    format!(
                        "{} needs a qualifier (`host`, `net`, `port`, ...) or a comparison",
                        self.peek().describe()
                    ),
                )
            }
            _ => return self.expected("a primitive (`ip`, `host`, `port`, ...), `not` or `(`"),
        };
        if let Some(why) = refused(&w) {
            return err(col, format!("`{w}` is not supported: {why}"));
        }
        match w.as_str() {
            "greater" | "less" => {
                self.bump();
                let Tok::Num(n) = self.peek().clone() else {
                    return self.expected(&format!("a number after `{w}`"));
                };
                self.bump();
                let op = if w == "greater" { CmpOp::Ge } else { CmpOp::Le };
                return Ok((Pred::Cmp(Value::Len, op, Value::Const(n)), None));
            }
            "vlan" => {
                self.bump();
                let tags = Pred::or(
                    [ET_VLAN, ET_QINQ, 0x9100]
                        .iter()
                        .map(|&t| self.linktype(t))
                        .collect(),
                );
                let mut p = vec![tags];
                if let Tok::Num(n) = self.peek().clone() {
                    if n > 4095 {
                        return err(
                            self.col(),
                            format!("VLAN tag {n} greater than maximum 4095"),
                        );
                    }
                    self.bump();
                    p.push(Pred::masked(self.off_pl, 2, 0x0fff, CmpOp::Eq, n));
                }
                self.off_lt += 4;
                self.off_pl += 4;
                return Ok((Pred::and(p), None));
            }
            "broadcast" | "multicast" => {
                self.bump();
                return Ok((self.cast(col, Proto::Default, &w)?, None));
            }
            "mpls" => {
                self.bump();
                let mut p = if self.mpls_depth == 0 {
                    vec![self.linktype(0x8847)]
                } else {
                    // Not the bottom of the stack: the previous label's S bit is clear.
                    vec![Pred::masked(self.off_pl - 2, 1, 1, CmpOp::Eq, 0)]
                };
                if let Tok::Num(n) = self.peek().clone() {
                    if n > 0xfffff {
                        return err(
                            self.col(),
                            format!("MPLS label {n} greater than maximum 1048575"),
                        );
                    }
                    self.bump();
                    p.push(Pred::masked(
                        self.off_pl,
                        4,
                        0xffff_f000,
                        CmpOp::Eq,
                        n << 12,
                    ));
                }
                self.mpls_depth += 1;
                self.off_pl += 4;
                self.relinked = Some("mpls");
                return Ok((Pred::and(p), None));
            }
            "llc" => {
                self.bump();
                let mut p = vec![
                    Pred::field(self.off_lt, 2, CmpOp::Le, 1500),
                    Pred::field(self.off_pl, 2, CmpOp::Ne, 0xffff),
                ];
                let ctl = self.off_pl + 2;
                let sub = match self.word() {
                    Some("i") => Some((1, 0)),
                    Some("s") => Some((3, 1)),
                    Some("u") => Some((3, 3)),
                    Some("rr") => Some((0x0f, 0x01)),
                    Some("rnr") => Some((0x0f, 0x05)),
                    Some("rej") => Some((0x0f, 0x09)),
                    Some("ui") => Some((0xef, 0x03)),
                    Some("ua") => Some((0xef, 0x63)),
                    Some("disc") => Some((0xef, 0x43)),
                    Some("dm") => Some((0xef, 0x0f)),
                    Some("sabme") => Some((0xef, 0x6f)),
                    Some("test") => Some((0xef, 0xe3)),
                    Some("xid") => Some((0xef, 0xaf)),
                    Some("frmr") => Some((0xef, 0x87)),
                    _ => None,
                };
                if let Some((m, v)) = sub {
                    self.bump();
                    p.push(Pred::masked(ctl, 1, m, CmpOp::Eq, v));
                }
                return Ok((Pred::and(p), None));
            }
            "pppoed" => {
                self.bump();
                return Ok((self.linktype(0x8863), None));
            }
            "pppoes" => {
                self.bump();
                let mut p = vec![self.linktype(0x8864)];
                if let Tok::Num(n) = self.peek().clone() {
                    if n > 0xffff {
                        return err(
                            self.col(),
                            format!("PPPoE session number {n} greater than maximum 65535"),
                        );
                    }
                    self.bump();
                    p.push(Pred::masked(self.off_pl, 4, 0xffff, CmpOp::Eq, n));
                }
                self.off_pl += 8;
                self.relinked = Some("pppoes");
                return Ok((Pred::and(p), None));
            }
            _ => {}
        }
        let mut q = Quals {
            proto: Proto::Default,
            dir: Dir::Default,
            addr: Addr::Default,
        };
        let mut head = false;
        if let Some(p) = Proto::of(&w) {
            self.bump();
            q.proto = p;
            match self.word() {
                Some(c @ ("broadcast" | "multicast")) => {
                    let c = c.to_string();
                    self.bump();
                    return Ok((self.cast(col, p, &c)?, None));
                }
                Some(w2) if is_dir(w2) || is_addr(w2) => {}
                Some("gateway" | "protochain") => {
                    let w2 = self.word().unwrap_or_default().to_string();
                    return err(
                        self.col(),
                        format!("`{w2}` is not supported: {}", refused(&w2).unwrap_or("")),
                    );
                }
                _ => {
                    if p == Proto::Link {
                        return err(
                            col,
                            format!(
                                "`{w}` alone is not a test: expected `{w} host`, `{w} src`, `{w} dst`, `{w} proto`, `{w} broadcast`, `{w} multicast` or `{w}[...]`"
                            ),
                        );
                    }
                    return Ok((self.abbrev(p), None));
                }
            }
            head = true;
        }
        if let Some(w2) = self.word() {
            if is_dir(w2) {
                q.dir = self.dir()?;
                head = true;
            }
        }
        if let Some(w2) = self.word() {
            let a = match w2 {
                "host" => Some(Addr::Host),
                "net" => Some(Addr::Net),
                "port" => Some(Addr::Port),
                "portrange" => Some(Addr::PortRange),
                "proto" => Some(Addr::Proto),
                _ => None,
            };
            if let Some(a) = a {
                self.bump();
                q.addr = a;
                head = true;
            }
        }
        if !head && (w.starts_with(|c: char| c.is_ascii_digit()) || w.contains(':')) {
            return err(
                col,
                format!("`{w}` needs a qualifier (`host`, `net`, `port`, ...) or a comparison"),
            );
        }
        if !head {
            return err(
                col,
                format!("unknown primitive `{w}`: expected a protocol (`ip`, `tcp`, ...), `src`/`dst`, `host`, `net`, `port`, `portrange`, `proto`, `vlan`, `greater`, `less` or a comparison"),
            );
        }
        let p = self.id(q)?;
        Ok((p, Some(q)))
    }

    fn cast(&self, col: usize, p: Proto, which: &str) -> Res<Pred> {
        Ok(match (p, which) {
            (Proto::Default | Proto::Link, "broadcast") => Pred::and(vec![
                Pred::field(2, 4, CmpOp::Eq, u32::MAX),
                Pred::field(0, 2, CmpOp::Eq, 0xffff),
            ]),
            (Proto::Default | Proto::Link, _) => Pred::masked(0, 1, 1, CmpOp::Ne, 0),
            (Proto::Ip, "broadcast") => {
                return err(col, "netmask not known, so 'ip broadcast' not supported")
            }
            (Proto::Ip, _) => Pred::and(vec![
                self.linktype(ET_IPV4),
                Pred::field(self.off_pl + 16, 1, CmpOp::Ge, 224),
            ]),
            (Proto::Ip6, "multicast") => Pred::and(vec![
                self.linktype(ET_IPV6),
                Pred::field(self.off_pl + 24, 1, CmpOp::Eq, 255),
            ]),
            (p, w) => {
                return err(
                    col,
                    format!("'{}' is not a valid qualifier for '{w}'", p.name()),
                )
            }
        })
    }

    fn dir(&mut self) -> Res<Dir> {
        let first = self.word().unwrap_or_default().to_string();
        self.bump();
        let d = if first == "src" { Dir::Src } else { Dir::Dst };
        let combined = (self.is_word("or") || self.is_word("and"))
            && matches!(self.peek_at(1), Tok::Word(w) if is_dir(w) && *w != first);
        if combined {
            let or = self.is_word("or");
            self.bump();
            self.bump();
            return Ok(if or { Dir::SrcOrDst } else { Dir::SrcAndDst });
        }
        Ok(d)
    }

    /// id := not id | ( id ((and|or) id)* ) | name-or-address, with qualifiers `q`.
    fn id(&mut self, q: Quals) -> Res<Pred> {
        self.enter()?;
        let r = self.id_inner(q);
        self.depth -= 1;
        r
    }

    fn id_inner(&mut self, q: Quals) -> Res<Pred> {
        if self.is_not() {
            self.bump();
            return Ok(Pred::negate(self.id(q)?));
        }
        if matches!(self.peek(), Tok::LParen) {
            self.bump();
            let mut acc = self.id(q)?;
            loop {
                if self.is_and() {
                    self.bump();
                    acc = Pred::and(vec![acc, self.id(q)?]);
                } else if self.is_or() {
                    self.bump();
                    acc = Pred::or(vec![acc, self.id(q)?]);
                } else {
                    break;
                }
            }
            if !matches!(self.peek(), Tok::RParen) {
                return self.expected("`)`");
            }
            self.bump();
            return Ok(acc);
        }
        let col = self.col();
        match self.bump() {
            Tok::Num(n) => self.num_id(col, q, n),
            Tok::Word(w) => self.word_id(col, q, &w),
            Tok::Escaped(w) => self.name_id(col, q, &w),
            t => err(
                col,
                format!(
                    "expected an address, number or name after the qualifiers, found {}",
                    t.describe()
                ),
            ),
        }
    }

    fn num_id(&mut self, col: usize, q: Quals, n: u32) -> Res<Pred> {
        match q.addr {
            Addr::Port | Addr::PortRange => {
                if n > 65535 {
                    return err(col, format!("port {n} greater than maximum 65535"));
                }
                self.ports(col, q, n, n)
            }
            Addr::Proto => self.ip_proto_prim(col, q, n),
            Addr::Default | Addr::Host | Addr::Net => {
                if q.proto == Proto::Link {
                    return err(
                        col,
                        "Ethernet address expected after `ether host`/`src`/`dst`",
                    );
                }
                if matches!(self.peek(), Tok::Op(ArithOp::Div)) || self.is_word("mask") {
                    return err(
                        col,
                        format!("a network needs a dotted address before `/` or `mask` (write `{n}.0.0.0/8`, `{n}.0/16`, ...)"),
                    );
                }
                if q.addr == Addr::Net {
                    let (mut v, mut m) = (n, u32::MAX);
                    while v != 0 && v & 0xff00_0000 == 0 {
                        v <<= 8;
                        m <<= 8;
                    }
                    return self.host4(col, q, v, m);
                }
                self.host4(col, q, n, u32::MAX)
            }
        }
    }

    fn word_id(&mut self, col: usize, q: Quals, w: &str) -> Res<Pred> {
        if is_keyword(w) {
            return err(
                col,
                format!("`{w}` is a keyword, not a name: write `\\{w}` for the protocol name"),
            );
        }
        if q.proto == Proto::Decnet {
            return self.decnet_host(col, q, w);
        }
        if is_mac(w) {
            if q.proto != Proto::Link || !matches!(q.addr, Addr::Default | Addr::Host) {
                return err(col, "Ethernet address used in non-ether expression");
            }
            let mut mac = [0u8; 6];
            for (i, g) in w.split(':').enumerate() {
                mac[i] = u8::from_str_radix(g, 16).map_err(|_| ExprError {
                    column: col,
                    message: format!("invalid Ethernet address `{w}`"),
                })?;
            }
            return Ok(self.ether_host(q, mac));
        }
        if q.proto == Proto::Link && matches!(q.addr, Addr::Default | Addr::Host) {
            return err(col, format!("expected an Ethernet address (aa:bb:cc:dd:ee:ff) after `ether`, found `{w}` (names are not resolved)"));
        }
        if w.contains(':') {
            let addr: std::net::Ipv6Addr = w.parse().map_err(|_| ExprError {
                column: col,
                message: format!("invalid IPv6 address `{w}`"),
            })?;
            let mut bits = 128;
            let cidr = matches!(self.peek(), Tok::Op(ArithOp::Div));
            if cidr {
                self.bump();
                bits = self.prefix_len(128)?;
            }
            return match q.addr {
                Addr::Net => {
                    let a = u128::from(addr);
                    let mask = if bits == 0 {
                        0
                    } else {
                        u128::MAX << (128 - bits)
                    };
                    if a & !mask != 0 {
                        return err(col, format!("non-network bits set in \"{w}/{bits}\""));
                    }
                    self.host6(col, q, a, bits)
                }
                Addr::Default | Addr::Host if !cidr => self.host6(col, q, u128::from(addr), 128),
                Addr::Default | Addr::Host => err(col, "Mask syntax for networks only (use `net`)"),
                a => err(
                    col,
                    format!("'{}' qualifier applied to IPv6 address", a.name()),
                ),
            };
        }
        if w.starts_with(|c: char| c.is_ascii_digit()) && !w.contains('-') {
            // `10.1` is the network 10.1.0.0/16 (the octets given), as in libpcap.
            let Some((v, given)) = ipv4(w) else {
                return err(col, format!("invalid IPv4 address '{w}'"));
            };
            let mut mask = mask_of(given);
            let mut netmask = false;
            if matches!(self.peek(), Tok::Op(ArithOp::Div)) {
                self.bump();
                mask = mask_of(self.prefix_len(32)?);
                netmask = true;
            } else if self.is_word("mask") {
                self.bump();
                let mcol = self.col();
                let m = match self.bump() {
                    Tok::Word(mw) => ipv4(&mw).filter(|x| x.1 == 32).map(|x| x.0),
                    _ => None,
                };
                let Some(m) = m else {
                    return err(mcol, "expected a dotted netmask (255.255.0.0) after `mask`");
                };
                mask = m;
                netmask = true;
            }
            return match q.addr {
                Addr::Net | Addr::Default | Addr::Host => {
                    if netmask && q.addr != Addr::Net {
                        return err(col, "Mask syntax for networks only (use `net`)");
                    }
                    if netmask && v & !mask != 0 {
                        return err(col, format!("non-network bits set in \"{w}\""));
                    }
                    self.host4(col, q, v, mask)
                }
                a => err(
                    col,
                    format!("'{}' qualifier applied to IPv4 address", a.name()),
                ),
            };
        }
        if matches!(q.addr, Addr::Port | Addr::PortRange) {
            if let Some((a, b)) = w.split_once('-') {
                if q.addr == Addr::Port {
                    return err(col, format!("`port {w}`: use `portrange` for a range"));
                }
                let p = |s: &str| match number(s) {
                    Some(Ok(n)) if n <= 65535 => Some(n),
                    _ => service(s),
                };
                let (Some(lo), Some(hi)) = (p(a), p(b)) else {
                    return err(
                        col,
                        format!(
                            "invalid port range `{w}`: expected LOW-HIGH with ports 0 to 65535"
                        ),
                    );
                };
                return self.ports(col, q, lo.min(hi), lo.max(hi));
            }
        }
        self.name_id(col, q, w)
    }

    /// The prefix length after a `/`, at most `max`.
    fn prefix_len(&mut self, max: u32) -> Res<u32> {
        let col = self.col();
        match self.bump() {
            Tok::Num(n) if n <= max => Ok(n),
            Tok::Num(_) => err(col, format!("mask length must be <= {max}")),
            t => err(
                col,
                format!("expected a prefix length after `/`, found {}", t.describe()),
            ),
        }
    }

    /// `decnet [src|dst] host AREA.NODE`: the four DECnet routing-header layouts.
    fn decnet_host(&self, col: usize, q: Quals, w: &str) -> Res<Pred> {
        if !matches!(q.addr, Addr::Default | Addr::Host) {
            return err(
                col,
                format!("'decnet' is not a valid qualifier for '{}'", q.addr.name()),
            );
        }
        let parsed = w.split_once('.').and_then(|(a, n)| {
            let a = match number(a)? {
                Ok(a) if a <= 63 => a,
                _ => return None,
            };
            let n = match number(n)? {
                Ok(n) if n <= 1023 => n,
                _ => return None,
            };
            Some((a << 10) | n)
        });
        let Some(addr) = parsed else {
            return err(
                col,
                format!(
                    "invalid DECnet address `{w}`: expected AREA.NODE (AREA ≤ 63, NODE ≤ 1023)"
                ),
            );
        };
        let le = ((addr & 0xff) << 8) | (addr >> 8);
        let b = self.off_pl;
        let layouts = |offs: [u32; 4]| {
            Pred::or(vec![
                Pred::and(vec![
                    Pred::masked(b + 2, 1, 7, CmpOp::Eq, 2),
                    Pred::field(b + offs[0], 2, CmpOp::Eq, le),
                ]),
                Pred::and(vec![
                    Pred::masked(b + 2, 2, 0xff07, CmpOp::Eq, 0x8102),
                    Pred::field(b + offs[1], 2, CmpOp::Eq, le),
                ]),
                Pred::and(vec![
                    Pred::masked(b + 2, 1, 7, CmpOp::Eq, 6),
                    Pred::field(b + offs[2], 2, CmpOp::Eq, le),
                ]),
                Pred::and(vec![
                    Pred::masked(b + 2, 2, 0xff07, CmpOp::Eq, 0x8106),
                    Pred::field(b + offs[3], 2, CmpOp::Eq, le),
                ]),
            ])
        };
        let one = |offs| Pred::and(vec![self.linktype(0x6003), layouts(offs)]);
        let src = [5, 6, 17, 18];
        let dst = [3, 4, 9, 10];
        Ok(match q.dir {
            Dir::Src => one(src),
            Dir::Dst => one(dst),
            Dir::SrcAndDst => Pred::and(vec![one(src), one(dst)]),
            Dir::Default | Dir::SrcOrDst => Pred::or(vec![one(src), one(dst)]),
        })
    }

    fn name_id(&mut self, col: usize, q: Quals, w: &str) -> Res<Pred> {
        match q.addr {
            Addr::Port | Addr::PortRange => match service(w) {
                Some(p) => self.ports(col, q, p, p),
                None => err(col, format!("unknown port name `{w}`")),
            },
            Addr::Proto => {
                if q.proto == Proto::Link {
                    return match ether_type(w) {
                        Some(t) => Ok(self.linktype(t)),
                        None => err(col, format!("unknown ether proto `{w}`: expected a number, `\\ip`, `\\ip6`, `\\arp` or `\\rarp`")),
                    };
                }
                match ip_protocol(w) {
                    Some(n) => self.ip_proto_prim(col, q, n),
                    None => err(col, format!("unknown IP protocol `{w}`")),
                }
            }
            _ => err(
                col,
                format!("`{w}` is not an address: host and network names are not resolved (write the address)"),
            ),
        }
    }

    // ---- relations and arithmetic -------------------------------------------------

    fn starts_arith(&self) -> bool {
        match self.peek() {
            Tok::Num(_) | Tok::LParen => true,
            Tok::Op(ArithOp::Sub) => true,
            Tok::Word(w) if w == "len" || w == "length" => true,
            Tok::Word(w) => Proto::of(w).is_some() && matches!(self.peek_at(1), Tok::LBrack),
            _ => false,
        }
    }

    fn relation(&mut self) -> Res<Pred> {
        let mut guards = Vec::new();
        let a = self.arith(0, &mut guards)?;
        let Tok::Rel(op) = self.peek().clone() else {
            return self.expected("a comparison (`=`, `!=`, `<`, `<=`, `>`, `>=`)");
        };
        self.bump();
        let b = self.arith(0, &mut guards)?;
        guards.push(Pred::Cmp(a, op, b));
        Ok(Pred::and(guards))
    }

    fn binop_level(op: ArithOp) -> u8 {
        match op {
            ArithOp::Or | ArithOp::Xor => 0,
            ArithOp::And => 1,
            ArithOp::Shl | ArithOp::Shr => 2,
            ArithOp::Add | ArithOp::Sub => 3,
            ArithOp::Mul | ArithOp::Div | ArithOp::Mod => 4,
        }
    }

    fn arith(&mut self, min: u8, guards: &mut Vec<Pred>) -> Res<Value> {
        let mut lhs = self.primary(guards)?;
        while let Tok::Op(op) = self.peek().clone() {
            let level = Self::binop_level(op);
            if level < min {
                break;
            }
            let col = self.col();
            self.bump();
            // libpcap's `gen_arth` keeps only the left operand's protocol checks: the right
            // operand's are dropped (`ip[0] + udp[0:2]` is not limited to UDP), so its loads
            // run unguarded.
            let start = self.pos;
            let rhs = self.arith(level + 1, &mut Vec::new())?;
            // libpcap checks the divisor and the shift count only when they are a literal
            // number (`/ 0`, `<< 40`); computed ones are evaluated per packet.
            if let Some(n) = rhs.constant().filter(|_| self.literal(start)) {
                match op {
                    ArithOp::Div if n == 0 => return err(col, "division by zero"),
                    ArithOp::Mod if n == 0 => return err(col, "modulus by zero"),
                    ArithOp::Shl | ArithOp::Shr if n > 31 => {
                        return err(col, "shift by more than 31 bits")
                    }
                    _ => {}
                }
            }
            lhs = match (lhs.constant(), rhs.constant()) {
                (Some(a), Some(b)) => match op.apply(a, b) {
                    Some(v) => Value::Const(v),
                    None => Value::Bin(op, Box::new(lhs), Box::new(rhs)),
                },
                _ => Value::Bin(op, Box::new(lhs), Box::new(rhs)),
            };
        }
        Ok(lhs)
    }

    /// Whether the tokens from `start` to the current position are one number, possibly in
    /// parentheses (what libpcap's code generator sees as an immediate operand).
    fn literal(&self, start: usize) -> bool {
        let num = |t: &Tok| matches!(t, Tok::Num(_));
        let span: Vec<&Tok> = self.toks[start..self.pos].iter().map(|(t, _)| t).collect();
        match span.as_slice() {
            [t] => num(t),
            [Tok::LParen, t, Tok::RParen] => num(t),
            _ => false,
        }
    }

    /// A primary, and libpcap's `^`: its grammar gives `^` no precedence, so the parser
    /// always shifts it — `^` takes the primary before it as its left operand and the whole
    /// arithmetic expression after it as its right one (`a & 1 ^ 3` is `a & (1 ^ 3)`,
    /// `a ^ 1 | 3` is `a ^ (1 | 3)`).
    fn primary(&mut self, guards: &mut Vec<Pred>) -> Res<Value> {
        self.enter()?;
        let r = self.primary_inner(guards).and_then(|lhs| {
            if !matches!(self.peek(), Tok::Op(ArithOp::Xor)) {
                return Ok(lhs);
            }
            self.bump();
            // As for the other operators, the right operand's protocol checks are dropped.
            let rhs = self.arith(0, &mut Vec::new())?;
            Ok(match (lhs.constant(), rhs.constant()) {
                (Some(a), Some(b)) => Value::Const(a ^ b),
                _ => Value::Bin(ArithOp::Xor, Box::new(lhs), Box::new(rhs)),
            })
        });
        self.depth -= 1;
        r
    }

    fn primary_inner(&mut self, guards: &mut Vec<Pred>) -> Res<Value> {
        let col = self.col();
        match self.peek().clone() {
            Tok::Num(n) => {
                self.bump();
                Ok(Value::Const(n))
            }
            Tok::Op(ArithOp::Sub) => {
                self.bump();
                let v = self.primary(guards)?;
                Ok(match v.constant() {
                    Some(c) => Value::Const(c.wrapping_neg()),
                    None => Value::Neg(Box::new(v)),
                })
            }
            Tok::LParen => {
                self.bump();
                let v = self.arith(0, guards)?;
                if !matches!(self.peek(), Tok::RParen) {
                    return self.expected("`)` closing the arithmetic expression");
                }
                self.bump();
                Ok(v)
            }
            Tok::Word(w) if w == "len" || w == "length" => {
                self.bump();
                Ok(Value::Len)
            }
            Tok::Word(w) if Proto::of(&w).is_some() && matches!(self.peek_at(1), Tok::LBrack) => {
                let p = Proto::of(&w).unwrap_or(Proto::Default);
                self.bump();
                self.bump();
                let mut inner = Vec::new();
                let index = self.arith(0, &mut inner)?;
                let mut size = 1u8;
                if matches!(self.peek(), Tok::Colon) {
                    self.bump();
                    let scol = self.col();
                    match self.bump() {
                        Tok::Num(n @ (1 | 2 | 4)) => size = n as u8,
                        Tok::Num(_) => return err(scol, "data size must be 1, 2, or 4"),
                        t => {
                            return err(
                                scol,
                                format!(
                                    "expected a size (1, 2 or 4) after `:`, found {}",
                                    t.describe()
                                ),
                            )
                        }
                    }
                }
                if !matches!(self.peek(), Tok::RBrack) {
                    return self.expected("`]` or `:SIZE]`");
                }
                self.bump();
                self.load(col, p, index, size, inner, guards)
            }
            Tok::Word(w) if refused(&w).is_some() => err(
                col,
                format!("`{w}` is not supported: {}", refused(&w).unwrap_or("")),
            ),
            t => err(
                col,
                format!(
                    "expected a number, `len`, `PROTO[OFFSET]` or `(`, found {}",
                    t.describe()
                ),
            ),
        }
    }

    fn load(
        &self,
        col: usize,
        p: Proto,
        index: Value,
        size: u8,
        inner: Vec<Pred>,
        guards: &mut Vec<Pred>,
    ) -> Res<Value> {
        let (k, var) = match index.constant() {
            Some(k) => (k, None),
            None => (0, Some(Box::new(index))),
        };
        let fixed = |base: u32| -> Res<Value> {
            let off = base
                .checked_add(k)
                .filter(|o| *o <= 0xffff)
                .ok_or(ExprError {
                    column: col,
                    message: format!("offset {k} is too large"),
                })?;
            Ok(Value::Load {
                ihl_at: None,
                index: var.clone(),
                off,
                size,
            })
        };
        match p {
            Proto::Link | Proto::Default => {
                guards.extend(inner);
                fixed(0)
            }
            Proto::Ip | Proto::Ip6 | Proto::Arp | Proto::Rarp => {
                guards.extend(inner);
                guards.push(self.abbrev(p));
                fixed(self.off_pl)
            }
            Proto::Icmp6 => {
                guards.extend(inner);
                guards.push(Pred::and(vec![
                    self.linktype(ET_IPV6),
                    Pred::field(self.off_pl + 6, 1, CmpOp::Eq, 58),
                ]));
                fixed(self.off_pl + 40)
            }
            Proto::Ah | Proto::Esp | Proto::Decnet => err(
                col,
                format!(
                    "`{}[...]` is not supported: libpcap has no header offset for it",
                    p.name()
                ),
            ),
            Proto::Tcp
            | Proto::Udp
            | Proto::Sctp
            | Proto::Icmp
            | Proto::Igmp
            | Proto::Igrp
            | Proto::Pim
            | Proto::Vrrp
            | Proto::Carp => {
                guards.push(self.abbrev(Proto::Ip));
                guards.extend(inner);
                guards.push(self.abbrev(p));
                guards.push(self.frag0());
                let v = fixed(self.off_pl)?;
                Ok(match v {
                    Value::Load {
                        index, off, size, ..
                    } => Value::Load {
                        ihl_at: Some(self.off_pl),
                        index,
                        off,
                        size,
                    },
                    v => v,
                })
            }
        }
    }
}

fn is_dir(w: &str) -> bool {
    matches!(w, "src" | "dst")
}

fn is_addr(w: &str) -> bool {
    matches!(w, "host" | "net" | "port" | "portrange" | "proto")
}

fn is_keyword(w: &str) -> bool {
    Proto::of(w).is_some()
        || is_dir(w)
        || is_addr(w)
        || refused(w).is_some()
        || matches!(
            w,
            "and"
                | "or"
                | "not"
                | "len"
                | "length"
                | "greater"
                | "less"
                | "vlan"
                | "broadcast"
                | "multicast"
                | "mask"
                | "mpls"
                | "pppoed"
                | "pppoes"
                | "llc"
        )
}

/// Parses a tcpdump expression for Ethernet frames (libpcap's `DLT_EN10MB`).
///
/// An empty expression (only spaces) matches every packet, as in tcpdump.
pub fn parse(text: &str) -> Result<Pred, ExprError> {
    let toks = tokenize(text)?;
    if toks.len() > MAX_TOKENS {
        return err(
            toks[MAX_TOKENS].1,
            format!("expression too long: more than {MAX_TOKENS} tokens"),
        );
    }
    let mut p = Parser {
        toks,
        pos: 0,
        off_lt: 12,
        off_pl: 14,
        mpls_depth: 0,
        relinked: None,
        poison: std::cell::Cell::new(None),
        term_col: 1,
        depth: 0,
    };
    if matches!(p.peek(), Tok::End) {
        return Ok(Pred::True);
    }
    let (pred, _) = p.expr()?;
    if !matches!(p.peek(), Tok::End) {
        return p.expected("`and`, `or` or the end of the expression");
    }
    if let Some(e) = p.poison.take() {
        return Err(e);
    }
    Ok(pred)
}
