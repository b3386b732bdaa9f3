//! The pattern AST shared by `IPClassifier` and `IPFilter`, and its evaluation on a packet.
//!
//! Every Click primitive (`src host`, `dst port > 1023`, `tcp opt syn`, `ip frag`, ...) is
//! lowered at configure time into [`Test`]s: "load `len` bytes at `offset` from a header, shift,
//! mask, compare". Boolean structure is kept as [`Expr::And`], [`Expr::Or`] and [`Expr::Not`].
//! This is the form the synthesis pass compiles into header-space filters.

use std::fmt;

/// Which header a [`Test`] reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Base {
    /// The MAC header annotation (`ether host`).
    Mac,
    /// The network (IP) header annotation.
    Network,
    /// The transport header: the transport annotation if set, else the network header plus
    /// the IP header length.
    Transport,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `==` (also `=`, or no operator).
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `>`.
    Gt,
    /// `<=`.
    Le,
    /// `>=`.
    Ge,
}

impl CmpOp {
    /// The operator giving the opposite answer (`==` ↔ `!=`, `<` ↔ `>=`, `>` ↔ `<=`).
    pub fn negate(self) -> CmpOp {
        match self {
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Ge => CmpOp::Lt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Le => CmpOp::Gt,
        }
    }

    /// Applies the operator to `a OP b`.
    pub fn apply(self, a: u32, b: u32) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Gt => a > b,
            CmpOp::Le => a <= b,
            CmpOp::Ge => a >= b,
        }
    }

    /// The operator's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Gt => ">",
            CmpOp::Le => "<=",
            CmpOp::Ge => ">=",
        }
    }
}

/// One field comparison: `((load(base + offset, len) >> shift) & mask) OP value`, where the
/// load reads `len` (1 to 4) bytes big-endian.
///
/// A test whose bytes are not all inside the packet (or whose base header is not annotated) is
/// false, whatever its operator — as Click's classifier treats short packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Test {
    /// Header the offset is relative to.
    pub base: Base,
    /// Byte offset from the start of that header.
    pub offset: u16,
    /// Number of bytes loaded, 1 to 4.
    pub len: u8,
    /// Right shift applied to the loaded value before masking.
    pub shift: u8,
    /// Mask applied after the shift.
    pub mask: u32,
    /// The comparison.
    pub op: CmpOp,
    /// The value compared against.
    pub value: u32,
}

impl Test {
    /// A test on the whole `len`-byte field.
    pub fn field(base: Base, offset: u16, len: u8, op: CmpOp, value: u32) -> Test {
        Test {
            base,
            offset,
            len,
            shift: 0,
            mask: full_mask(len),
            op,
            value,
        }
    }

    /// Evaluates the test on `view`.
    #[inline]
    pub fn eval(&self, view: &View<'_>) -> bool {
        let hdr = match self.base {
            Base::Mac => view.mac,
            Base::Network => view.network,
            Base::Transport => view.transport,
        };
        let Some(hdr) = hdr else { return false };
        let start = usize::from(self.offset);
        let Some(bytes) = hdr.get(start..start + usize::from(self.len)) else {
            return false;
        };
        let raw = bytes.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b));
        let v = raw.checked_shr(u32::from(self.shift)).unwrap_or(0) & self.mask;
        self.op.apply(v, self.value)
    }
}

/// All-ones mask for a `len`-byte field.
pub fn full_mask(len: u8) -> u32 {
    match len {
        0 => 0,
        1..=3 => (1u32 << (8 * u32::from(len))) - 1,
        _ => u32::MAX,
    }
}

/// A parsed `IPClassifier` / `IPFilter` pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Matches every packet (`true`, `-`, `any`, `all`).
    True,
    /// Matches no packet (`false`).
    False,
    /// Logical negation (`not`, `!`): true also when the inner tests lack their bytes.
    Not(Box<Expr>),
    /// All of these (`and`, `&&`, juxtaposition).
    And(Vec<Expr>),
    /// Any of these (`or`, `||`).
    Or(Vec<Expr>),
    /// A field comparison.
    Test(Test),
}

impl Expr {
    /// Evaluates the pattern on a packet's headers (a tree walk; never allocates).
    pub fn matches(&self, view: &View<'_>) -> bool {
        match self {
            Expr::True => true,
            Expr::False => false,
            Expr::Not(e) => !e.matches(view),
            Expr::And(v) => v.iter().all(|e| e.matches(view)),
            Expr::Or(v) => v.iter().any(|e| e.matches(view)),
            Expr::Test(t) => t.eval(view),
        }
    }

    /// `a and b`, flattening nested conjunctions and dropping `true`.
    pub fn and(items: Vec<Expr>) -> Expr {
        Expr::joined(items, true)
    }

    /// `a or b`, flattening nested disjunctions and dropping `false`.
    pub fn or(items: Vec<Expr>) -> Expr {
        Expr::joined(items, false)
    }

    /// `and` (`all`) or `or` of `items`: nested ones of the same kind spliced in, the
    /// neutral constant dropped, a single item returned as is.
    fn joined(items: Vec<Expr>, all: bool) -> Expr {
        let mut out = Vec::with_capacity(items.len());
        for e in items {
            match (e, all) {
                (Expr::True, true) | (Expr::False, false) => {}
                (Expr::And(v), true) | (Expr::Or(v), false) => out.extend(v),
                (e, _) => out.push(e),
            }
        }
        let neutral = if all { Expr::True } else { Expr::False };
        match out.len() {
            0 => neutral,
            1 => out.pop().unwrap_or(neutral),
            _ if all => Expr::And(out),
            _ => Expr::Or(out),
        }
    }

    /// The negation pushed down to the tests (De Morgan; operators flipped), so that tests
    /// lacking their bytes stay false. This is how Click negates an operator (`!=`, `<`, `<=`)
    /// applied to a `src or dst` primitive.
    pub fn negate_tests(self) -> Expr {
        match self {
            Expr::True => Expr::False,
            Expr::False => Expr::True,
            Expr::Not(e) => *e,
            Expr::And(v) => Expr::or(v.into_iter().map(Expr::negate_tests).collect()),
            Expr::Or(v) => Expr::and(v.into_iter().map(Expr::negate_tests).collect()),
            Expr::Test(t) => Expr::Test(Test {
                op: t.op.negate(),
                ..t
            }),
        }
    }
}

impl fmt::Display for Test {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = match self.base {
            Base::Mac => "ether",
            Base::Network => "ip",
            Base::Transport => "transp",
        };
        write!(f, "{base}[{}:{}]", self.offset, self.len)?;
        if self.shift != 0 {
            write!(f, " >> {}", self.shift)?;
        }
        if self.mask != full_mask(self.len) >> self.shift {
            write!(f, " & {:#x}", self.mask)?;
        }
        write!(f, " {} {}", self.op.as_str(), self.value)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(f: &mut fmt::Formatter<'_>, v: &[Expr], sep: &str) -> fmt::Result {
            f.write_str("(")?;
            for (i, e) in v.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                write!(f, "{e}")?;
            }
            f.write_str(")")
        }
        match self {
            Expr::True => f.write_str("true"),
            Expr::False => f.write_str("false"),
            Expr::Not(e) => write!(f, "!{e}"),
            Expr::And(v) => list(f, v, " && "),
            Expr::Or(v) => list(f, v, " || "),
            Expr::Test(t) => write!(f, "{t}"),
        }
    }
}

/// The headers of one packet as the evaluator sees them.
#[derive(Debug, Clone, Copy, Default)]
pub struct View<'a> {
    /// From the MAC header annotation to the end of the data.
    pub mac: Option<&'a [u8]>,
    /// From the network header annotation to the end of the data.
    pub network: Option<&'a [u8]>,
    /// From the transport header to the end of the data.
    pub transport: Option<&'a [u8]>,
}

impl<'a> View<'a> {
    /// The view of a packet: its MAC and network annotations; the transport header is the
    /// transport annotation if set, else the network header plus its IP header length.
    pub fn of(packet: &'a packet::Packet) -> View<'a> {
        let network = packet.network_header();
        let transport = packet
            .transport_header()
            .or_else(|| network.and_then(transport_of));
        View {
            mac: packet.mac_header(),
            network,
            transport,
        }
    }

    /// The view of bytes starting with an IPv4 header (no MAC header).
    pub fn from_ip(ip: &'a [u8]) -> View<'a> {
        View {
            mac: None,
            network: Some(ip),
            transport: transport_of(ip),
        }
    }
}

fn transport_of(ip: &[u8]) -> Option<&[u8]> {
    let hl = usize::from(ip.first()? & 0x0f) * 4;
    if hl < 20 {
        return None;
    }
    ip.get(hl..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_tests_are_false_whatever_the_operator() {
        let ip = [0x45u8, 0, 0, 20];
        let v = View::from_ip(&ip);
        let t = Test::field(Base::Network, 8, 1, CmpOp::Ne, 5);
        assert!(!t.eval(&v));
        assert!(Expr::Not(Box::new(Expr::Test(t))).matches(&v));
        assert!(!Expr::Test(t).negate_tests().matches(&v));
        assert!(Test::field(Base::Network, 2, 2, CmpOp::Eq, 20).eval(&v));
    }

    #[test]
    fn shift_and_mask() {
        let ip = [0x45u8, 0xb9];
        let v = View::from_ip(&ip);
        let dscp = Test {
            base: Base::Network,
            offset: 1,
            len: 1,
            shift: 2,
            mask: 0x3f,
            op: CmpOp::Eq,
            value: 46,
        };
        assert!(dscp.eval(&v));
        assert_eq!(dscp.to_string(), "ip[1:1] >> 2 == 46");
        let ect = Test {
            mask: 3,
            shift: 0,
            op: CmpOp::Ne,
            value: 0,
            ..dscp
        };
        assert!(ect.eval(&v));
    }
}
