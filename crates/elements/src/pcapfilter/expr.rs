//! The compiled form of a tcpdump expression and its evaluation on a frame.
//!
//! Every primitive is lowered, as libpcap's code generator does, into comparisons of
//! arithmetic over loads at byte offsets from the start of the Ethernet frame. The boolean
//! structure is kept (`and`, `or`, `not`), and evaluation is libpcap's: left to right,
//! short-circuit, and a load past the end of the captured bytes (or a division by zero)
//! *aborts* the whole filter, which then rejects the packet — even under a `not`.

use crate::ipfilter::CmpOp;
use std::fmt;

/// A binary arithmetic operator of the tcpdump language (32-bit, unsigned, wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (a zero divisor aborts the filter)
    Div,
    /// `%` (a zero divisor aborts the filter)
    Mod,
    /// `&`
    And,
    /// `|`
    Or,
    /// `^`
    Xor,
    /// `<<` (by 32 or more gives 0)
    Shl,
    /// `>>` (by 32 or more gives 0)
    Shr,
}

impl ArithOp {
    /// Applies the operator; `None` for a division by zero.
    pub fn apply(self, a: u32, b: u32) -> Option<u32> {
        Some(match self {
            ArithOp::Add => a.wrapping_add(b),
            ArithOp::Sub => a.wrapping_sub(b),
            ArithOp::Mul => a.wrapping_mul(b),
            ArithOp::Div => a.checked_div(b)?,
            ArithOp::Mod => a.checked_rem(b)?,
            ArithOp::And => a & b,
            ArithOp::Or => a | b,
            ArithOp::Xor => a ^ b,
            ArithOp::Shl => a.checked_shl(b).unwrap_or(0),
            ArithOp::Shr => a.checked_shr(b).unwrap_or(0),
        })
    }

    /// The operator's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Mod => "%",
            ArithOp::And => "&",
            ArithOp::Or => "|",
            ArithOp::Xor => "^",
            ArithOp::Shl => "<<",
            ArithOp::Shr => ">>",
        }
    }
}

/// A 32-bit value computed from the frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// A constant.
    Const(u32),
    /// The packet's length on the wire (`len`).
    Len,
    /// `size` bytes (1, 2 or 4, big-endian) at byte `off`, plus the IPv4 header length
    /// (4 × the low nibble of the byte at `ihl_at`) when `ihl_at` is set, plus `index`.
    Load {
        /// Frame offset of an IPv4 header whose length is added (transport loads).
        ihl_at: Option<u32>,
        /// A variable part added to the offset (`tcp[expr]`).
        index: Option<Box<Value>>,
        /// The constant part of the offset.
        off: u32,
        /// Bytes loaded: 1, 2 or 4.
        size: u8,
    },
    /// A binary operation.
    Bin(ArithOp, Box<Value>, Box<Value>),
    /// Two's-complement negation (`-x`).
    Neg(Box<Value>),
}

impl Value {
    /// A load of `size` bytes at the fixed frame offset `off`.
    pub fn at(off: u32, size: u8) -> Value {
        Value::Load {
            ihl_at: None,
            index: None,
            off,
            size,
        }
    }

    /// The value on a frame of captured bytes `data` whose wire length is `wire_len`, or
    /// `None` if a load falls past the end of `data` or a divisor is zero.
    pub fn eval(&self, data: &[u8], wire_len: u32) -> Option<u32> {
        match self {
            Value::Const(c) => Some(*c),
            Value::Len => Some(wire_len),
            Value::Load {
                ihl_at,
                index,
                off,
                size,
            } => {
                let mut at = u64::from(*off);
                if let Some(h) = ihl_at {
                    let b = *data.get(usize::try_from(*h).ok()?)?;
                    at += u64::from(b & 0x0f) * 4;
                }
                if let Some(i) = index {
                    at += u64::from(i.eval(data, wire_len)?);
                }
                load(data, at, *size)
            }
            Value::Bin(op, a, b) => {
                let a = a.eval(data, wire_len)?;
                let b = b.eval(data, wire_len)?;
                op.apply(a, b)
            }
            Value::Neg(a) => Some(a.eval(data, wire_len)?.wrapping_neg()),
        }
    }

    /// The constant this value always is, if it reads nothing from the packet.
    pub fn constant(&self) -> Option<u32> {
        match self {
            Value::Const(c) => Some(*c),
            _ => None,
        }
    }
}

fn load(data: &[u8], at: u64, size: u8) -> Option<u32> {
    let start = usize::try_from(at).ok()?;
    let end = start.checked_add(usize::from(size))?;
    let bytes = data.get(start..end)?;
    Some(bytes.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)))
}

/// A compiled tcpdump expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pred {
    /// Always true.
    True,
    /// Always false.
    False,
    /// Negation (an aborted evaluation stays aborted).
    Not(Box<Pred>),
    /// Short-circuit conjunction, left to right.
    And(Vec<Pred>),
    /// Short-circuit disjunction, left to right.
    Or(Vec<Pred>),
    /// `lhs OP rhs`, unsigned.
    Cmp(Value, CmpOp, Value),
}

impl Pred {
    /// `a and b and ...`, flattened.
    pub fn and(items: Vec<Pred>) -> Pred {
        Pred::joined(items, true)
    }

    /// `a or b or ...`, flattened.
    pub fn or(items: Vec<Pred>) -> Pred {
        Pred::joined(items, false)
    }

    /// `and` (`all`) or `or` of `items`: nested ones of the same kind spliced in, the
    /// neutral constant dropped, a single item returned as is.
    fn joined(items: Vec<Pred>, all: bool) -> Pred {
        let mut out = Vec::with_capacity(items.len());
        for p in items {
            match (p, all) {
                (Pred::True, true) | (Pred::False, false) => {}
                (Pred::And(v), true) | (Pred::Or(v), false) => out.extend(v),
                (p, _) => out.push(p),
            }
        }
        let neutral = if all { Pred::True } else { Pred::False };
        match out.len() {
            0 => neutral,
            1 => out.pop().unwrap_or(neutral),
            _ if all => Pred::And(out),
            _ => Pred::Or(out),
        }
    }

    /// `not p` (a double negation cancels).
    pub fn negate(p: Pred) -> Pred {
        match p {
            Pred::Not(q) => *q,
            p => Pred::Not(Box::new(p)),
        }
    }

    /// `size` bytes at fixed frame offset `off` compared with `value`.
    pub fn field(off: u32, size: u8, op: CmpOp, value: u32) -> Pred {
        Pred::Cmp(Value::at(off, size), op, Value::Const(value))
    }

    /// `(size bytes at off) & mask OP value`.
    pub fn masked(off: u32, size: u8, mask: u32, op: CmpOp, value: u32) -> Pred {
        Pred::Cmp(
            Value::Bin(
                ArithOp::And,
                Box::new(Value::at(off, size)),
                Box::new(Value::Const(mask)),
            ),
            op,
            Value::Const(value),
        )
    }

    /// Three-valued evaluation: `Some(verdict)`, or `None` when the filter aborts (a load
    /// past the end of `data`, a zero divisor).
    pub fn eval(&self, data: &[u8], wire_len: u32) -> Option<bool> {
        match self {
            Pred::True => Some(true),
            Pred::False => Some(false),
            Pred::Not(p) => p.eval(data, wire_len).map(|b| !b),
            Pred::And(v) => {
                for p in v {
                    if !p.eval(data, wire_len)? {
                        return Some(false);
                    }
                }
                Some(true)
            }
            Pred::Or(v) => {
                for p in v {
                    if p.eval(data, wire_len)? {
                        return Some(true);
                    }
                }
                Some(false)
            }
            Pred::Cmp(a, op, b) => {
                let a = a.eval(data, wire_len)?;
                let b = b.eval(data, wire_len)?;
                Some(op.apply(a, b))
            }
        }
    }

    /// Whether the filter accepts the frame (libpcap's verdict: an abort rejects).
    pub fn accepts(&self, data: &[u8], wire_len: u32) -> bool {
        self.eval(data, wire_len) == Some(true)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Const(c) => write!(f, "{c:#x}"),
            Value::Len => f.write_str("len"),
            Value::Load {
                ihl_at,
                index,
                off,
                size,
            } => {
                f.write_str("[")?;
                if let Some(h) = ihl_at {
                    write!(f, "4*([{h}]&0xf) + ")?;
                }
                if let Some(i) = index {
                    write!(f, "{i} + ")?;
                }
                write!(f, "{off}:{size}]")
            }
            Value::Bin(op, a, b) => write!(f, "({a} {} {b})", op.as_str()),
            Value::Neg(a) => write!(f, "-{a}"),
        }
    }
}

impl fmt::Display for Pred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(f: &mut fmt::Formatter<'_>, v: &[Pred], sep: &str) -> fmt::Result {
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
            Pred::True => f.write_str("true"),
            Pred::False => f.write_str("false"),
            Pred::Not(p) => write!(f, "!{p}"),
            Pred::And(v) => list(f, v, " && "),
            Pred::Or(v) => list(f, v, " || "),
            Pred::Cmp(a, op, b) => write!(f, "{a} {} {b}", op.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_loads_abort_even_under_not() {
        let p = Pred::field(20, 1, CmpOp::Eq, 6);
        assert_eq!(p.eval(&[0; 10], 10), None);
        assert!(!Pred::negate(p.clone()).accepts(&[0; 10], 10));
        assert!(Pred::negate(p).accepts(&[0; 21], 21));
        // Short-circuit: a false left side never reaches the short load.
        let q = Pred::and(vec![
            Pred::field(0, 1, CmpOp::Eq, 1),
            Pred::field(50, 1, CmpOp::Eq, 0),
        ]);
        assert_eq!(q.eval(&[0; 4], 4), Some(false));
        assert_eq!(q.eval(&[1; 4], 4), None);
    }

    #[test]
    fn transport_loads_add_the_ip_header_length() {
        let mut f = vec![0u8; 60];
        f[14] = 0x46; // IHL 6: transport at 14 + 24
        f[38] = 0xab;
        let v = Value::Load {
            ihl_at: Some(14),
            index: None,
            off: 14,
            size: 1,
        };
        assert_eq!(v.eval(&f, 60), Some(0xab));
        let div = Value::Bin(
            ArithOp::Div,
            Box::new(Value::Len),
            Box::new(Value::Const(0)),
        );
        assert_eq!(div.eval(&f, 60), None);
        assert_eq!(ArithOp::Shl.apply(1, 40), Some(0));
    }
}
