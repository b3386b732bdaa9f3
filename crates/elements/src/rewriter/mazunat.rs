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
//! *Decision:* an element of its own rather than a compound, so a chain can name it, and
//! opaque to synthesis (its rewriter is not offered to the synthesizer as an `IPRewriter`);
//! it runs as it is there.
//!
//! **Fast path.** A rewritten packet records the writes of the four address and port fields
//! (and the destination annotation), a guard (IPv4 first fragment with a whole transport
//! header), one state function whose token names the mapping (slot, direction, version) and
//! the mapping's expiry. [`Element::check`] reaps as a packet would and says no when the
//! mapping is gone, changed (version) or expired; [`Element::replay`] touches it with the
//! packet's TCP flags and payload exactly as `push` does. Drops that depend on the table
//! (no mapping for an external packet, no free port, a full table) are recorded as opaque.

use super::{
    rewrite_ipv4, Decision, Direction, FlowInput, IPRewriter, PacketInfo, RewriterKind, TCP,
};
use crate::args::Args;
use crate::record::{Access, ReplayView};
use crate::{BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use space::Field;
use std::any::Any;

/// `MazuNAT`: the NAT of `mazu-nat.click` (module docs).
#[derive(Debug)]
pub struct MazuNAT {
    rw: IPRewriter,
}

const REPLY_BIT: u64 = 1 << 63;

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
            rw: IPRewriter::from_args(RewriterKind::Ip, &inner, bcx)?,
        })
    }

    /// The underlying rewriter.
    pub fn rewriter(&self) -> &IPRewriter {
        &self.rw
    }

    fn token(&self, idx: u32, dir: Direction) -> u64 {
        let v = u64::from(self.rw.version(idx) & 0x7fff_ffff);
        let d = if dir == Direction::Reply {
            REPLY_BIT
        } else {
            0
        };
        u64::from(idx) | v << 32 | d
    }

    fn untoken(token: u64) -> (u32, Direction, u32) {
        let dir = if token & REPLY_BIT != 0 {
            Direction::Reply
        } else {
            Direction::Forward
        };
        (
            (token & 0xffff_ffff) as u32,
            dir,
            ((token & !REPLY_BIT) >> 32) as u32,
        )
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
        let (d, at) = self
            .rw
            .decide_at(port, input.as_ref().map(|(_, i)| i), cx.now.0);
        match (d, input) {
            (Decision::Rewrite { out, new }, Some((off, i))) => {
                if let Some(ip) = packet.data_mut().get_mut(off..) {
                    rewrite_ipv4(ip, i.hl, i.proto, &new);
                }
                if self.rw.dst_anno {
                    packet.meta.dst_ip = new.daddr;
                }
                if cx.recording() {
                    match at {
                        Some((idx, dir)) => {
                            cx.record_write(Field::IpSrc, u128::from(u32::from(new.saddr)));
                            cx.record_write(Field::SrcPort, u128::from(new.sport));
                            cx.record_write(Field::IpDst, u128::from(u32::from(new.daddr)));
                            cx.record_write(Field::DstPort, u128::from(new.dport));
                            if self.rw.dst_anno {
                                cx.record_write(Field::DstIpAnno, u128::from(u32::from(new.daddr)));
                            }
                            let min = if i.proto == TCP { 20 } else { 8 };
                            cx.record_guard(crate::nfs::l4_guard(min));
                            cx.record_state(self.token(idx, dir), Access::Ignore);
                            if let Some(f) = self.rw.table.flow(idx as usize) {
                                cx.record_expiry(packet::Timestamp(f.expiry));
                            }
                        }
                        None => cx.record_opaque("mazunat: rewrite without a mapping"),
                    }
                }
                Verdict::Out(out, packet)
            }
            (Decision::Pass(out), _) => {
                cx.record_opaque("mazunat: pass");
                Verdict::Out(out, packet)
            }
            (Decision::Drop(reason), _) => {
                if matches!(
                    reason,
                    "rewriter-drop" | "no-free-port" | "mapping-table-full"
                ) {
                    cx.record_opaque("mazunat: drop decided by the mapping table");
                } else {
                    cx.record_nothing();
                }
                Verdict::Drop(packet, reason)
            }
            (Decision::Rewrite { .. }, None) => Verdict::Drop(packet, "bad-ip-header"),
        }
    }

    fn check(&mut self, token: u64, view: &ReplayView<'_>) -> bool {
        let now = view.now.0;
        self.rw.table.maybe_reap(now);
        let (idx, _, version) = MazuNAT::untoken(token);
        self.rw
            .table
            .flow(idx as usize)
            .is_some_and(|f| now < f.expiry)
            && self.rw.version(idx) & 0x7fff_ffff == version
    }

    fn replay(&mut self, token: u64, view: &mut ReplayView<'_>, _cx: &mut Context) {
        let (idx, dir, _) = MazuNAT::untoken(token);
        let info = view
            .ip
            .and_then(|off| view.data.get(off..))
            .and_then(FlowInput::parse)
            .map_or(PacketInfo::default(), |i| i.info);
        let now = view.now.0;
        self.rw.table.maybe_reap(now);
        self.rw.replay_n(idx, dir, info, now, 1);
    }

    fn state_dump(&self) -> Vec<String> {
        self.rw.state_dump()
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.rw.stats()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs::testutil::*;
    use packet::Timestamp;

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
    fn fast_path_replay_matches_push() {
        let cfg = "EXTERNAL 203.0.113.1, UDP_TIMEOUT 30s";
        let mut naive = ok("MazuNAT", cfg, 2);
        let mut fast = ok("MazuNAT", cfg, 2);
        let p = || frame(17, [10, 0, 0, 5], 4000, [198, 51, 100, 7], 80);
        let (v, step, expiry) = push_recording(fast.as_mut(), 0, p(), SEC);
        let q = v.unwrap().1;
        assert_eq!(
            q.data(),
            push(naive.as_mut(), 0, p(), SEC).unwrap().1.data()
        );
        let (s, sp, ..) = addrs(&q);
        assert!(step
            .writes
            .contains(&(Field::IpSrc, u128::from(u32::from_be_bytes(s)))));
        assert!(step.writes.contains(&(Field::SrcPort, u128::from(sp))));
        assert_eq!(step.guards.len(), 1);
        assert_eq!(expiry, Some(Timestamp(SEC + 30 * SEC)));
        let token = step.states[0].0;
        let mut now = SEC;
        for _ in 0..5 {
            now += SEC;
            let mut data = p().data().to_vec();
            let mut view = ReplayView {
                data: &mut data,
                ip: Some(14),
                now: Timestamp(now),
                input_index: 0,
            };
            if fast.check(token, &view) {
                fast.replay(token, &mut view, &mut Context::default());
            } else {
                // The mapping changed (UDP streaming after the third packet): record again.
                push(fast.as_mut(), 0, p(), now).unwrap();
            }
            push(naive.as_mut(), 0, p(), now).unwrap();
        }
        assert_eq!(naive.state_dump(), fast.state_dump());
        assert_eq!(naive.stats(), fast.stats());
        // After the mapping expires, check says no.
        let view = ReplayView {
            data: &mut [],
            ip: None,
            now: Timestamp(now + 31 * SEC),
            input_index: 0,
        };
        let (_, step2, _) = push_recording(fast.as_mut(), 0, p(), now);
        assert!(!fast.check(step2.states[0].0, &view));
        // An unsolicited external packet is opaque to the fast path.
        let x = frame(17, [198, 51, 100, 9], 80, [203, 0, 113, 1], 1);
        let (_, step, _) = push_recording(fast.as_mut(), 1, x, now);
        assert!(step.opaque.is_some());
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
