//! `IPPrint`.

use super::{ihl, ip_header};
use crate::args::unquote;
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use wire::bytes::read_u16;
use wire::IpProtocol;

/// `IPPrint([LABEL, keywords CONTENTS, PAYLOAD, MAXLENGTH, ID, TTL, TOS, LENGTH, TIMESTAMP,
/// AGGREGATE, PAINT, SWAP, OUTFILE, ACTIVE])`: passes packets through unchanged, printing a
/// tcpdump-like line per packet (label, timestamp, addresses, ports, protocol, length) —
/// only when the environment variable `FUSEBOX_PRINT` is `1` at build time, on stderr, so
/// runs stay quiet and output identical by default. `ID`, `TTL` and `TOS` add those fields;
/// the other keywords are accepted and ignored. 1/1.
pub struct IPPrint {
    label: String,
    enabled: bool,
    id: bool,
    ttl: bool,
    tos: bool,
}

impl IPPrint {
    /// Builds the element.
    pub fn configure(args: &Args) -> Result<IPPrint, ConfigError> {
        const KW: [&str; 14] = [
            "LABEL",
            "CONTENTS",
            "PAYLOAD",
            "MAXLENGTH",
            "ID",
            "TTL",
            "TOS",
            "LENGTH",
            "TIMESTAMP",
            "AGGREGATE",
            "PAINT",
            "SWAP",
            "OUTFILE",
            "ACTIVE",
        ];
        args.check(1, &KW)?;
        let flag = |k: &str| {
            args.keyword(k)
                .map_or(Ok(false), |s| crate::args::parse_bool(s, k))
        };
        let active = args
            .keyword("ACTIVE")
            .map_or(Ok(true), |s| crate::args::parse_bool(s, "ACTIVE"))?;
        Ok(IPPrint {
            label: args.get(0, "LABEL").map(unquote).unwrap_or_default(),
            enabled: active && std::env::var("FUSEBOX_PRINT").is_ok_and(|v| v == "1"),
            id: flag("ID")?,
            ttl: flag("TTL")?,
            tos: flag("TOS")?,
        })
    }

    /// The line IPPrint prints for `p`.
    pub fn line(&self, p: &Packet) -> String {
        let ts = p.meta.timestamp;
        let mut s = String::new();
        if !self.label.is_empty() {
            s.push_str(&self.label);
            s.push_str(": ");
        }
        s.push_str(&format!("{}.{:06}: ", ts.secs(), ts.subsec_nanos() / 1000));
        let Some((h, hl)) = ip_header(p) else {
            s.push_str("(no IP header)");
            return s;
        };
        let (src, dst) = (h.src_addr(), h.dst_addr());
        // The transport bytes as far as they go (a cut segment prints what is there).
        let l4 = &h.into_inner()[hl..];
        let frag = h.frag_offset() != 0;
        let len = h.total_len();
        let ports = |l4: &[u8]| (read_u16(l4, 0), read_u16(l4, 2));
        match (h.protocol(), frag) {
            (IpProtocol::TCP | IpProtocol::UDP, false) => {
                if let (Some(sp), Some(dp)) = ports(l4) {
                    s.push_str(&format!("{src}.{sp} > {dst}.{dp}: "));
                } else {
                    s.push_str(&format!("{src} > {dst}: "));
                }
                if h.protocol() == IpProtocol::TCP {
                    let f = l4.get(13).copied().unwrap_or(0);
                    let names = [
                        (0x02, 'S'),
                        (0x01, 'F'),
                        (0x04, 'R'),
                        (0x08, 'P'),
                        (0x10, '.'),
                        (0x20, 'U'),
                    ];
                    let flags: String = names
                        .iter()
                        .filter(|(b, _)| f & b != 0)
                        .map(|(_, c)| *c)
                        .collect();
                    let dlen = usize::from(len)
                        .saturating_sub(hl + l4.get(12).map_or(20, |b| ihl(&[b >> 4])));
                    s.push_str(&format!("{flags} {dlen}"));
                } else {
                    s.push_str(&format!(
                        "udp {}",
                        read_u16(l4, 4).unwrap_or(8).saturating_sub(8)
                    ));
                }
            }
            (IpProtocol::ICMP, false) => s.push_str(&format!(
                "{src} > {dst}: icmp type {} code {}",
                l4.first().copied().unwrap_or(0),
                l4.get(1).copied().unwrap_or(0)
            )),
            (proto, _) => s.push_str(&format!("{src} > {dst}: ip-proto-{proto} {len}")),
        }
        if self.id {
            s.push_str(&format!(" (id {})", h.ident()));
        }
        if self.ttl {
            s.push_str(&format!(" (ttl {})", h.ttl()));
        }
        if self.tos {
            s.push_str(&format!(" (tos 0x{:x})", h.tos()));
        }
        s
    }
}

impl Element for IPPrint {
    fn class_name(&self) -> &'static str {
        "IPPrint"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, p: Packet, _cx: &mut Context) -> Verdict {
        if self.enabled {
            eprintln!("{}", self.line(&p));
        }
        Verdict::Out(0, p)
    }
    fn model(&self) -> Option<crate::model::Model> {
        (!self.enabled).then(crate::model::Model::pass)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn passes_through_and_formats() {
        let b = udp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 53, b"abc");
        let mut e = build("IPPrint", "\"in\", TTL true", 1).unwrap();
        let mut p = pkt(&b);
        p.meta.timestamp = packet::Timestamp(1_500_000_000);
        let o = push(e.as_mut(), p);
        assert_eq!(o.out[0].1.data(), &b[..]);
        let pr = IPPrint::configure(&Args::parse("in, TTL true").unwrap()).unwrap();
        assert_eq!(
            pr.line(&o.out[0].1),
            "in: 1.500000: 10.0.0.1.1234 > 10.0.0.2.53: udp 3 (ttl 64)"
        );
        assert!(build("IPPrint", "a, b", 1).is_err());
        assert!(build("IPPrint", "BOGUS 1", 1).is_err());
    }
}
