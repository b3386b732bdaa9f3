//! `MazuNAT`: the NAT core of Click's `conf/mazu-nat.click` (the NAT of SpeedyBox's first
//! chain), as one element built on [`IPRewriter`].
//!
//! ```text
//! MazuNAT(EXTERNAL ADDR, [PORTS LO-HI], [INTERNAL ADDR, SERVER ADDR],
//!         [rewriter timeout keywords ...])
//! ```
//!
//! In `mazu-nat.click`, TCP and UDP from the internal network reach an `IPRewriter` whose
//! input 0 pattern (`to_world_pat extern 50000-65535 - -`) maps each new flow to the
//! gateway's external address and a source port from 50000–65535, and the traffic the
//! firewall lets in from outside reaches its input 1, where replies of known flows are
//! translated back and other flows are redirected to an internal server
//! (`to_server_pat intern 50000-65535 intern_server -`). FuseBox's `MazuNAT` is that
//! rewriter, built as `IPRewriter(pattern EXTERNAL LO-HI - - 0 1, SPEC1, KEYWORDS...)`:
//!
//! * input 0 (internal → external): TCP/UDP flows get source `EXTERNAL` and a source port
//!   from `PORTS` (default 50000–65535; the packet's own port when it is in range and free,
//!   else the first free one from a pseudo-random point, as Click's pattern does), leaving
//!   on output 0;
//! * input 1 (external → internal): replies of a mapping are translated back (destination
//!   the internal host and port) and leave on output 1. Other flows are dropped
//!   (`rewriter-drop`), or, with `INTERNAL` and `SERVER`, redirected as `mazu-nat.click`
//!   does: `SPEC1` is then `pattern INTERNAL LO-HI SERVER - 1 0` (source the gateway's
//!   internal address and a port, destination the server, out on output 1; the server's
//!   replies, arriving on input 0, are translated back and leave on output 0);
//! * non-TCP/UDP packets, later fragments and short headers are dropped with the
//!   rewriter's reasons. FTP helpers, ICMP (ping rewriting, error translation), ARP and
//!   the configuration's firewall classifier around the rewriter are out of scope (the
//!   chain's other NFs do filtering).
//!
//! Every `IPRewriter` keyword is accepted (`TCP_TIMEOUT`, `UDP_TIMEOUT`, `MAPPING_CAPACITY`,
//! ...), with the same defaults; mappings, timeouts, allocation, checksums, `state_dump` and
//! `stats` are the rewriter's.
//!
//! *Decision:* an element of its own rather than a compound, so a chain can name it. To
//! synthesis it is opaque (it offers no [`crate::RewriteSpec`]): it runs
//! as it is there.
//!
//! **Fast path.** [`Element::stateful_flow`] hands the executor the rewriter inside, so a flow is
//! recorded as any `IPRewriter`'s is: the mapping is the header action (addresses, ports,
//! checksums), its refresh (timers, TCP state) is replayed per packet through
//! [`StatefulFlow::replay`] after [`StatefulFlow::check_replay`] (which checks the version), and the
//! entry expires no later than the mapping. `push` records nothing itself; drops (no mapping
//! for an external packet, no free port, a full table) leave the flow on the full chain.

use super::{rewrite_ipv4, Decision, FlowInput, IPRewriter, RewriterKind};
use crate::args::Args;
use crate::{BuildCtx, ConfigError, Context, Element, PortCount, StatefulFlow, Verdict};
use packet::Packet;

/// `MazuNAT`: the NAT of `mazu-nat.click` (module docs).
#[derive(Debug)]
pub struct MazuNAT {
    rw: IPRewriter,
}

impl MazuNAT {
    /// Builds the NAT from its arguments (see the module documentation).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<MazuNAT, ConfigError> {
        let mut allowed: Vec<&str> = vec!["EXTERNAL", "PORTS", "INTERNAL", "SERVER"];
        allowed.extend(super::REWRITER_KEYWORDS);
        args.check(0, &allowed)?;
        let ext = args
            .keyword("EXTERNAL")
            .ok_or_else(|| ConfigError::new("missing argument EXTERNAL (the external address)"))?;
        let ext = bcx.names.ipv4(ext)?;
        let ports = args.keyword("PORTS").unwrap_or("50000-65535").trim();
        let ok_ports = ports
            .split_once('-')
            .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)))
            .is_some_and(|(a, b)| a <= b);
        if !ok_ports {
            return Err(ConfigError::new(format!(
                "expected PORTS as a port range `LO-HI`, found `{ports}`"
            )));
        }
        let spec1 = match (args.keyword("INTERNAL"), args.keyword("SERVER")) {
            (None, None) => "drop".to_string(),
            (Some(i), Some(srv)) => format!(
                "pattern {} {ports} {} - 1 0",
                bcx.names.ipv4(i)?,
                bcx.names.ipv4(srv)?
            ),
            _ => {
                return Err(ConfigError::new(
                    "expected INTERNAL and SERVER together (the redirection to an internal server), found only one",
                ))
            }
        };
        let mut config = format!("pattern {ext} {ports} - - 0 1, {spec1}");
        for a in args.all() {
            if let Some(k) = a.keyword.as_deref() {
                if !matches!(k, "EXTERNAL" | "PORTS" | "INTERNAL" | "SERVER") {
                    config += &format!(", {k} {}", a.value);
                }
            }
        }
        let inner = Args::parse(&config)?;
        Ok(MazuNAT {
            rw: IPRewriter::configure(RewriterKind::Ip, &inner, bcx)?,
        })
    }

    /// The underlying rewriter.
    pub fn rewriter(&self) -> &IPRewriter {
        &self.rw
    }
}

impl Element for MazuNAT {
    fn class_name(&self) -> &'static str {
        "MazuNAT"
    }

    fn port_count(&self) -> PortCount {
        PortCount::exact(2, 2)
    }

    fn push(&mut self, port: usize, mut packet: Packet, cx: &mut Context) -> Verdict {
        let input = packet
            .network_offset_in_data()
            .and_then(|off| packet.data().get(off..).map(|ip| (off, ip)))
            .and_then(|(off, ip)| FlowInput::parse(ip).map(|i| (off, i)));
        let d = self
            .rw
            .decide(port, input.as_ref().map(|(_, i)| i), cx.now.0);
        match (d, input) {
            (Decision::Rewrite { out, new }, Some((off, i))) => {
                if let Some(ip) = packet.data_mut().get_mut(off..) {
                    rewrite_ipv4(ip, i.hl, i.proto, &new);
                }
                if self.rw.dst_anno {
                    packet.meta.dst_ip = new.daddr;
                }
                Verdict::Out(out, packet)
            }
            (Decision::Pass(out), _) => Verdict::Out(out, packet),
            (Decision::Drop(reason), _) => Verdict::Drop(packet, reason.into()),
            (Decision::Rewrite { .. }, None) => {
                Verdict::Drop(packet, crate::reason::IpHeaderReason::Bad.into())
            }
        }
    }

    fn declared(&self) -> Option<crate::record::Declared> {
        Some(self.rw.declaration())
    }

    fn stateful_flow(&mut self) -> Option<&mut dyn StatefulFlow> {
        Some(&mut self.rw)
    }

    fn worker_share(&mut self) -> Option<&mut dyn crate::WorkerShare> {
        Some(&mut self.rw)
    }

    fn state_dump(&self) -> Vec<String> {
        self.rw.state_dump()
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.rw.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs::testutil::*;

    const SEC: u64 = 1_000_000_000;

    fn addrs(p: &Packet) -> ([u8; 4], u16, [u8; 4], u16) {
        let d = p.data();
        (
            d[26..30].try_into().unwrap(),
            u16::from_be_bytes([d[34], d[35]]),
            d[30..34].try_into().unwrap(),
            u16::from_be_bytes([d[36], d[37]]),
        )
    }

    #[test]
    fn translates_both_directions_with_valid_checksums() {
        let mut e = ok("MazuNAT", "EXTERNAL 203.0.113.1, PORTS 50000-50010", 2);
        for proto in [6u8, 17] {
            let p = frame(proto, [10, 0, 0, 5], 4000, [198, 51, 100, 7], 80);
            let (o, q) = push(e.as_mut(), 0, p, SEC).unwrap();
            assert_eq!(o, 0);
            let (s, sp, d, dp) = addrs(&q);
            assert_eq!((s, d, dp), ([203, 0, 113, 1], [198, 51, 100, 7], 80));
            assert!((50000..=50010).contains(&sp));
            assert!(checksums_ok(&q), "proto {proto}");
            // The reply comes back to the internal host.
            let r = frame(proto, [198, 51, 100, 7], 80, [203, 0, 113, 1], sp);
            let (o, r) = push(e.as_mut(), 1, r, SEC).unwrap();
            assert_eq!(o, 1);
            assert_eq!(addrs(&r), ([198, 51, 100, 7], 80, [10, 0, 0, 5], 4000));
            assert!(checksums_ok(&r));
            assert_eq!(r.meta.dst_ip, std::net::Ipv4Addr::new(10, 0, 0, 5));
        }
        // Unsolicited external packets are dropped; so is what is not TCP/UDP.
        let x = frame(17, [198, 51, 100, 7], 80, [203, 0, 113, 1], 50009);
        assert_eq!(push(e.as_mut(), 1, x, SEC).unwrap_err(), "rewriter-drop");
        let mut icmp = frame(17, [10, 0, 0, 5], 1, [198, 51, 100, 7], 2);
        icmp.data_mut()[23] = 1;
        assert_eq!(push(e.as_mut(), 0, icmp, SEC).unwrap_err(), "not-tcp-udp");
        assert_eq!(e.stats()[0], ("mappings_created", 2));
        let dump = e.state_dump();
        assert_eq!(
            dump.iter().filter(|l| l.starts_with("map ")).count(),
            2,
            "{dump:?}"
        );
    }

    #[test]
    fn ports_run_out() {
        let mut e = ok("MazuNAT", "EXTERNAL 203.0.113.1, PORTS 50000-50001", 2);
        let mut got = Vec::new();
        for i in 0..3u16 {
            let p = frame(17, [10, 0, 0, 5], 4000 + i, [198, 51, 100, 7], 80);
            got.push(push(e.as_mut(), 0, p, SEC).map(|(_, q)| addrs(&q).1));
        }
        assert_eq!(got[2], Err("no-free-port"));
        let mut two = vec![got[0].unwrap(), got[1].unwrap()];
        two.sort();
        assert_eq!(two, vec![50000, 50001]);
        // A source port in range and free is kept, as Click's pattern does.
        let mut e = ok("MazuNAT", "EXTERNAL 203.0.113.1", 2);
        let p = frame(6, [10, 0, 0, 5], 50123, [198, 51, 100, 7], 80);
        assert_eq!(addrs(&push(e.as_mut(), 0, p, SEC).unwrap().1).1, 50123);
    }

    #[test]
    fn redirects_external_flows_to_the_internal_server() {
        let cfg = "EXTERNAL 203.0.113.1, INTERNAL 10.0.0.1, SERVER 10.0.0.80";
        let mut e = ok("MazuNAT", cfg, 2);
        let x = frame(6, [198, 51, 100, 7], 3333, [203, 0, 113, 1], 80);
        let (o, q) = push(e.as_mut(), 1, x, SEC).unwrap();
        assert_eq!(o, 1);
        let (s, sp, d, dp) = addrs(&q);
        assert_eq!((s, d, dp), ([10, 0, 0, 1], [10, 0, 0, 80], 80));
        assert!(checksums_ok(&q));
        // The server's reply goes back out with the external addresses restored.
        let r = frame(6, [10, 0, 0, 80], 80, [10, 0, 0, 1], sp);
        let (o, r) = push(e.as_mut(), 0, r, SEC).unwrap();
        assert_eq!(o, 0);
        assert_eq!(addrs(&r), ([203, 0, 113, 1], 80, [198, 51, 100, 7], 3333));
        assert!(checksums_ok(&r));
        assert!(err("MazuNAT", "EXTERNAL 1.2.3.4, SERVER 10.0.0.80").contains("together"));
    }

    #[test]
    fn the_fast_path_sees_the_rewriter_and_its_last_mapping() {
        let cfg = "EXTERNAL 203.0.113.1, UDP_TIMEOUT 30s";
        let mut e = ok("MazuNAT", cfg, 2);
        let p = frame(17, [10, 0, 0, 5], 4000, [198, 51, 100, 7], 80);
        let (v, step, _) = push_recording(e.as_mut(), 0, p, SEC);
        assert_eq!(v.unwrap().0, 0);
        // Nothing recorded by hand: the executor records the rewriter's mapping.
        assert_eq!(step, crate::record::Step::default());
        let flows = e.stateful_flow().expect("the rewriter is offered");
        let (idx, dir) = flows.last_mapping().expect("a mapping rewrote the packet");
        assert_eq!(dir, crate::rewriter::Direction::Forward);
        let nat = e.as_any().downcast_ref::<MazuNAT>().unwrap();
        let f = nat.rewriter().table().flow(idx as usize).unwrap();
        assert_eq!(f.rewritten.saddr, std::net::Ipv4Addr::new(203, 0, 113, 1));
        assert_eq!(f.expiry, SEC + 30 * SEC);
        // Not an IPRewriter to synthesis: it runs as it is.
        assert!(e.rewrite_spec().is_none());
        assert!(e.model().is_none());
    }

    #[test]
    fn arguments() {
        assert!(err("MazuNAT", "").contains("EXTERNAL"));
        assert!(err("MazuNAT", "EXTERNAL 1.2.3").contains("IP address"));
        assert!(err("MazuNAT", "EXTERNAL 1.2.3.4, PORTS 9-1").contains("LO-HI"));
        assert!(err("MazuNAT", "EXTERNAL 1.2.3.4, UDP_TIMEOUT soon").contains("UDP_TIMEOUT"));
        assert!(err("MazuNAT", "EXTERNAL 1.2.3.4, FOO 1").contains("unknown keyword"));
    }
}
