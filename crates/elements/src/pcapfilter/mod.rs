//! `PcapFilter(EXPR)`: filters Ethernet frames by a tcpdump (libpcap) expression.
//!
//! The second front-end of the filter language, next to Click's dialect
//! ([`crate::ipfilter`]). An expression is compiled, as libpcap's code generator does for
//! `DLT_EN10MB`, into comparisons of arithmetic over byte loads at offsets from the start of
//! the frame ([`Pred`]); the element evaluates that per packet, and its model is the header
//! space of the comparisons that map onto the model's fields ([`space::regions`]), with an
//! [`Outcome::Runtime`] case for the packets on which an opaque comparison (a variable
//! offset such as `tcp[((tcp[12] & 0xf0) >> 2):4]`) decides.
//!
//! # Semantics (libpcap's, checked against libpcap 1.10.3 by `tests/pcap_oracle.rs`)
//!
//! * The frame starts at the packet data (the element reads no annotation). `len`,
//!   `greater N` (`len >= N`) and `less N` (`len <= N`) use the data length.
//! * Evaluation is left to right with short-circuit; `and` and `or` have the *same*
//!   precedence and associate to the left (`a or b and c` is `(a or b) and c`); `not`/`!`
//!   binds tighter. A load past the end of the frame (or a division by zero) makes the whole
//!   filter reject the packet, even under `not` — libpcap's rule, unlike Click's.
//! * `ip`, `ip6`, `arp`, `rarp`, `decnet`: the Ethertype. `tcp`, `udp`, `sctp`, `pim`, `ah`,
//!   `esp`: IPv4 protocol, or the IPv6 next header, or an IPv6 fragment header followed by
//!   it; `icmp`, `igmp`, `igrp`, `vrrp`, `carp`: IPv4 only; `icmp6`: IPv6 only.
//! * `[ip|arp|rarp] [src|dst|src or dst|src and dst] host A`, `net N/LEN`, `net N mask M`,
//!   `net 10.1` (the octets given); without a protocol, IPv4, ARP and RARP addresses.
//!   `ip6 host`/`net` with IPv6 addresses and prefixes. `ether host|src|dst MAC`,
//!   `ether broadcast|multicast` (and `broadcast`/`multicast` alone), `ip multicast`,
//!   `ip6 multicast`. Qualifiers carry over to bare identifiers: `host a or b`,
//!   `port 80 or 443`, `host a and not (b or c)`.
//! * `[tcp|udp|sctp] [src|dst] port N` and `portrange A-B` (numbers or service names): over
//!   IPv6 the ports at the fixed offset 40 of the IPv6 header (no extension headers), over
//!   IPv4 only on first fragments (fragment offset 0), at 14 + IHL × 4.
//! * `proto N`, `ip proto N`, `ip6 proto N` (with `\tcp`-style escaped names, or names that
//!   are not keywords such as `gre`), `ether proto N` (N > 1500, or `\ip`, `\ip6`, `\arp`,
//!   `\rarp`).
//! * `vlan [ID]`: the Ethertype is 0x8100, 0x88a8 or 0x9100 (and the tag's id is ID); as in
//!   libpcap, every Ethertype and network-layer offset *after* it in the expression moves 4
//!   bytes further (so `vlan and ip` tests the inner Ethertype, and `ip or vlan` does not).
//! * `mpls [LABEL]` (Ethertype 0x8847, or for a second `mpls` the previous label not at the
//!   bottom of the stack) and `pppoes [SESSION]` move the payload offset likewise; `pppoed`;
//!   `llc [i|s|u|rr|rnr|rej|ui|ua|disc|dm|sabme|test|xid|frmr]` (802.3 frames);
//!   `decnet [src|dst] host AREA.NODE`.
//! * Relations `ARITH OP ARITH` with `= == != < <= > >=` (unsigned 32-bit), arithmetic
//!   `+ - * / % & | ^ << >>` and unary `-`, loads `PROTO[EXPR]` and `PROTO[EXPR:SIZE]`
//!   (size 1, 2 or 4) for `ether`/`link` (frame start), `ip`, `ip6`, `arp`, `rarp`
//!   (network header, guarded by the Ethertype), `tcp`, `udp`, `sctp`, `icmp`, `igmp`
//!   (IPv4 transport header at 14 + IHL × 4, guarded by the protocol and fragment offset 0)
//!   and `icmp6` (40 bytes into the IPv6 header), with libpcap's names `tcpflags`,
//!   `icmptype`, `icmpcode`, `tcp-syn`…`tcp-cwr`, `icmp-echo`…, `icmp6-echo`….
//!   libpcap's quirks are kept: a binary operator keeps only its *left* operand's protocol
//!   checks (`ip[0] + udp[0:2] > 1` also holds on TCP), and `^` has no precedence in its
//!   grammar, so it groups everything to its right (`a & 1 ^ 3` is `a & (1 ^ 3)`).
//!
//! # Synthesis
//!
//! A comparison of `((LOAD >> S) & M)` with a constant compiles exactly to header space when
//! the load is at a fixed offset (named IPv4 fields at byte 14, `Raw` fields elsewhere) or in
//! the IPv4 transport header at 14 + IHL × 4 (ports, TCP flags, ICMP type); `len`
//! comparisons use the frame length. Other comparisons (a computed offset, arithmetic
//! between two loads, transport loads after `vlan`) are opaque: evaluated per packet, correct
//! but not synthesizable — the model's `Runtime` case covers exactly the packets on which they
//! decide.
//!
//! # Refused, with a message naming the column
//!
//! Host, network and Ethernet names (FuseBox does no name lookups); `gateway`; `protochain`
//! (a loop over IPv6 extension headers); `ip broadcast` (needs a netmask); `geneve`,
//! `vxlan` (they re-base later offsets on a variable-length tunnel header); tests of the link
//! type after `mpls` or `pppoes` (libpcap then tests the MPLS bottom of stack and IP
//! version, or the PPP protocol); capture-direction and pflog primitives (`inbound`,
//! `ifname`, ...); other protocol families (`iso`, `atalk`, IS-IS, 802.11 qualifiers, ...);
//! `ether proto` values ≤ 1500 (802.3 LLC encapsulation); `ah[...]`, `esp[...]`,
//! `decnet[...]`; load sizes other than 1, 2 and 4; constant division by zero.

mod expr;
mod parse;
pub mod space;

pub use expr::{ArithOp, Pred, Value};
pub use parse::{parse, ExprError, MAX_NESTING, MAX_TOKENS};

use crate::args::{unquote, Args};
use crate::model::{Case, Filter, IpAnchor, Model, Outcome};
use crate::reason::MatchReason;
use crate::{BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `PcapFilter(EXPR)`: frames matching the tcpdump expression leave on output 0; the others
/// leave on output 1 if it is connected, else are dropped (`no-match`).
#[derive(Debug, Clone)]
pub struct PcapFilter {
    text: String,
    pred: Pred,
    reject_output: bool,
}

impl PcapFilter {
    /// Parses the expression of a `PcapFilter` configuration (one argument; commas are not
    /// part of the tcpdump language).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<PcapFilter, ConfigError> {
        let all = args.all();
        if all.len() != 1 {
            return Err(ConfigError::new(format!(
                "expected one tcpdump expression, found {} arguments",
                all.len()
            )));
        }
        let a = &all[0];
        let text = match &a.keyword {
            Some(k) => unquote(&format!("{k} {}", a.value)),
            None => unquote(&a.value),
        };
        let pred = parse(&text).map_err(|e| ConfigError::new(format!("`{text}`: {e}")))?;
        Ok(PcapFilter {
            text,
            pred,
            reject_output: bcx.noutputs >= 2,
        })
    }

    /// A filter for `text` (for `fusebox run --filter`), with no reject output.
    pub fn from_expr(text: &str) -> Result<PcapFilter, ExprError> {
        Ok(PcapFilter {
            text: text.to_string(),
            pred: parse(text)?,
            reject_output: false,
        })
    }

    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The compiled expression.
    pub fn pred(&self) -> &Pred {
        &self.pred
    }

    /// Whether the frame `data` matches (its wire length taken to be its length).
    pub fn matches(&self, data: &[u8]) -> bool {
        self.pred
            .accepts(data, u32::try_from(data.len()).unwrap_or(u32::MAX))
    }

    fn no_match(&self) -> Outcome {
        if self.reject_output {
            Outcome::Out(1)
        } else {
            Outcome::Drop(MatchReason::NoMatch.into())
        }
    }
}

impl Element for PcapFilter {
    fn class_name(&self) -> &'static str {
        "PcapFilter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        if self.matches(packet.data()) {
            Verdict::Out(0, packet)
        } else if self.reject_output {
            Verdict::Out(1, packet)
        } else {
            Verdict::Drop(packet, MatchReason::NoMatch.into())
        }
    }
    /// Cases: the boxes where the expression is surely true (output 0), then those where an
    /// opaque comparison decides (`Runtime`), then everything else (no match). Opaque
    /// throughout (`None`) when nothing is decidable.
    fn model(&self) -> Option<Model> {
        let r = space::regions(&self.pred)?;
        if r.unknown.members().iter().any(Filter::is_any) {
            return None;
        }
        let mut cases = Vec::new();
        for m in r.yes.members() {
            cases.push(Case::new(m.clone(), Outcome::Out(0)));
        }
        for m in r.unknown.members() {
            cases.push(Case::new(m.clone(), Outcome::Runtime));
        }
        cases.push(Case::new(Filter::any(), self.no_match()));
        let mut m = Model::new(cases);
        m.ip_at = IpAnchor::Data(14);
        Some(m)
    }
    /// The packets its model leaves to run time (opaque comparisons): it may read anything,
    /// writes nothing, drops what does not match unless output 1 takes it.
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(crate::record::Declared::reads_anything(!self.reject_output))
    }
}
