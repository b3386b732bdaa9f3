//! `Monitor`: per-flow packet and byte counters (the SpeedyBox paper's traffic monitor).
//!
//! ```text
//! Monitor([CAPACITY N])
//! ```
//!
//! Forwards every packet unchanged on output 0 and counts it for its flow: the flow is
//! (protocol, source and destination address and port) of the IPv4 header at the network
//! header annotation, as the element sees it (ports 0 for protocols without ports, later
//! fragments and packets too short to hold them); the bytes are the length of the data the
//! element receives. Packets without an IPv4 header are counted under `non_ip` and forwarded
//! too. Ports `1/1`.
//!
//! **Bound.** At most `CAPACITY` flows are counted apart (default [`DEFAULT_CAPACITY`] =
//! 262,144; flows are never forgotten, so the table only grows): the packets of a flow that
//! arrives when the table is full are forwarded and counted together under `untracked`.
//!
//! `state_dump`: one line per flow, sorted by flow: `flow proto P S:SP > D:DP packets N bytes
//! B`, then, when some packets were not counted apart, `untracked packets N bytes B`.
//! `stats`: `packets`, `bytes`, `flows`, `non_ip`, `untracked`.
//!
//! **Fast path.** A recorded TCP/UDP packet is guarded to first fragments holding the ports
//! (others count under another flow). A recorded IPv4 packet records one state function (`Access::Ignore`)
//! whose token is the flow's counter slot (or [`UNTRACKED`] for a flow the full table left
//! out: it stays out, the table never shrinks); [`Element::replay`] adds one packet and the
//! view's length (`view.data.len()`, the data from the element's view start) to it. A packet
//! without an IPv4 header has no flow to count it in: it is recorded as opaque
//! (`record_opaque`), so such packets always take the full chain.

use super::{FlowKey, L4};
use crate::record::{Access, ReplayView};
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use std::collections::HashMap;

/// The most flows a `Monitor` counts apart when `CAPACITY` is not given.
pub const DEFAULT_CAPACITY: usize = 1 << 18;

/// The recorded token of a packet counted under `untracked`.
pub const UNTRACKED: u64 = u64::MAX;

/// `Monitor`: per-flow packet and byte counters (module docs).
#[derive(Debug)]
pub struct Monitor {
    slots: HashMap<FlowKey, usize>,
    counts: Vec<(FlowKey, u64, u64)>,
    capacity: usize,
    packets: u64,
    bytes: u64,
    non_ip: u64,
    untracked: (u64, u64),
}

impl Monitor {
    /// Takes `CAPACITY N` (the most flows counted apart), optionally.
    pub fn configure(args: &Args) -> Result<Monitor, ConfigError> {
        args.check(0, &["CAPACITY"])?;
        let capacity = match args.keyword("CAPACITY") {
            Some(v) => {
                usize::try_from(crate::args::parse_uint(v, "CAPACITY")?).unwrap_or(usize::MAX)
            }
            None => DEFAULT_CAPACITY,
        };
        Ok(Monitor {
            slots: HashMap::new(),
            counts: Vec::new(),
            capacity,
            packets: 0,
            bytes: 0,
            non_ip: 0,
            untracked: (0, 0),
        })
    }

    /// The packet and byte counts of a flow.
    pub fn flow(&self, key: &FlowKey) -> Option<(u64, u64)> {
        let &(_, p, b) = self.counts.get(*self.slots.get(key)?)?;
        Some((p, b))
    }

    fn count(&mut self, slot: u64, len: usize) {
        match usize::try_from(slot)
            .ok()
            .and_then(|s| self.counts.get_mut(s))
        {
            Some(c) => {
                c.1 += 1;
                c.2 += len as u64;
            }
            None => {
                self.untracked.0 += 1;
                self.untracked.1 += len as u64;
            }
        }
        self.packets += 1;
        self.bytes += len as u64;
    }
}

impl Element for Monitor {
    fn class_name(&self) -> &'static str {
        "Monitor"
    }

    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }

    fn push(&mut self, _port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        let key = packet
            .network_offset_in_data()
            .and_then(|off| packet.data().get(off..))
            .and_then(L4::parse)
            .map(|l| l.key);
        let len = packet.len();
        match key {
            Some(key) => {
                let slot = match self.slots.get(&key) {
                    Some(&s) => s as u64,
                    None if self.counts.len() < self.capacity => {
                        self.slots.insert(key, self.counts.len());
                        self.counts.push((key, 0, 0));
                        (self.counts.len() - 1) as u64
                    }
                    None => UNTRACKED,
                };
                self.count(slot, len);
                if cx.recording() && (key.protocol == super::TCP || key.protocol == super::UDP) {
                    // Later fragments and packets cut before the ports count elsewhere.
                    cx.record_guard(super::l4_guard(4));
                }
                cx.record_state(slot, Access::Ignore);
            }
            None => {
                self.non_ip += 1;
                self.packets += 1;
                self.bytes += len as u64;
                cx.record_opaque("monitor: packet without an IPv4 header");
            }
        }
        Verdict::Out(0, packet)
    }

    fn replay(&mut self, token: u64, view: &mut ReplayView<'_>, _cx: &mut Context) {
        self.count(token, view.data.len());
    }

    /// Reads the flow, counts it; writes nothing, drops nothing.
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(crate::record::Declared {
            reads: crate::record::Declared::FLOW.to_vec(),
            stateful: true,
            ..Default::default()
        })
    }

    fn state_dump(&self) -> Vec<String> {
        let mut v: Vec<&(FlowKey, u64, u64)> = self.counts.iter().collect();
        v.sort_by_key(|c| c.0);
        let mut out: Vec<String> = v
            .into_iter()
            .map(|(k, p, b)| format!("flow {k} packets {p} bytes {b}"))
            .collect();
        if self.untracked.0 > 0 {
            let (p, b) = self.untracked;
            out.push(format!("untracked packets {p} bytes {b}"));
        }
        out
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("packets", self.packets),
            ("bytes", self.bytes),
            ("flows", self.counts.len() as u64),
            ("non_ip", self.non_ip),
            ("untracked", self.untracked.0),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs::testutil::*;
    use packet::Timestamp;
    use std::net::Ipv4Addr;

    #[test]
    fn counts_packets_and_bytes_per_flow() {
        let mut e = ok("Monitor", "", 1);
        let a = || frame(6, [10, 0, 0, 1], 1, [10, 0, 0, 2], 2);
        let b = || frame(17, [10, 0, 0, 3], 3, [10, 0, 0, 4], 4);
        for _ in 0..3 {
            assert_eq!(push(e.as_mut(), 0, a(), 0).unwrap().0, 0);
        }
        push(e.as_mut(), 0, b(), 0).unwrap();
        let mut raw = Packet::from_bytes(&[1, 2, 3]);
        raw.meta.input_index = 9;
        push(e.as_mut(), 0, raw, 0).unwrap();
        let m = e.as_any().downcast_ref::<Monitor>().unwrap();
        let ka = FlowKey {
            protocol: wire::IpProtocol::TCP,
            src: Ipv4Addr::new(10, 0, 0, 1),
            src_port: 1,
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dst_port: 2,
        };
        assert_eq!(m.flow(&ka), Some((3, 3 * 64)));
        assert_eq!(
            e.state_dump(),
            vec![
                "flow proto 6 10.0.0.1:1 > 10.0.0.2:2 packets 3 bytes 192",
                "flow proto 17 10.0.0.3:3 > 10.0.0.4:4 packets 1 bytes 52",
            ]
        );
        assert_eq!(
            e.stats(),
            vec![
                ("packets", 5),
                ("bytes", 192 + 52 + 3),
                ("flows", 2),
                ("non_ip", 1),
                ("untracked", 0)
            ]
        );
    }

    #[test]
    fn replay_counts_like_push() {
        let mut naive = ok("Monitor", "", 1);
        let mut fast = ok("Monitor", "", 1);
        let (_, step, _) = push_recording(
            fast.as_mut(),
            0,
            frame(17, [10, 0, 0, 3], 3, [10, 0, 0, 4], 4),
            0,
        );
        assert_eq!(step.states.len(), 1);
        assert_eq!(step.states[0].1, Access::Ignore);
        push(
            naive.as_mut(),
            0,
            frame(17, [10, 0, 0, 3], 3, [10, 0, 0, 4], 4),
            0,
        )
        .unwrap();
        for n in 0..5usize {
            let mut p = frame(17, [10, 0, 0, 3], 3, [10, 0, 0, 4], 4);
            p.take(n); // lengths vary; the view is what the element would receive
            let mut data = p.data().to_vec();
            let mut view = ReplayView {
                data: &mut data,
                ip: Some(14),
                now: Timestamp(0),
                clock: Timestamp(0),
                input_index: 0,
            };
            assert!(fast.check(step.states[0].0, &view));
            fast.replay(step.states[0].0, &mut view, &mut Context::default());
            push(naive.as_mut(), 0, p, 0).unwrap();
        }
        assert_eq!(naive.state_dump(), fast.state_dump());
        assert_eq!(naive.stats(), fast.stats());
        // Non-IP packets cannot be replayed: they are opaque to the fast path.
        let (_, step, _) = push_recording(fast.as_mut(), 0, Packet::from_bytes(&[1]), 0);
        assert!(step.opaque.is_some());
    }

    #[test]
    fn takes_only_a_capacity() {
        assert!(err("Monitor", "5").contains("too many"));
        assert!(err("Monitor", "CAPACITY x").contains("CAPACITY"));
    }

    #[test]
    fn capacity_bounds_the_flows_counted_apart() {
        let mut naive = ok("Monitor", "CAPACITY 2", 1);
        let mut fast = ok("Monitor", "CAPACITY 2", 1);
        let f = |h: u8| frame(17, [10, 0, 0, h], 3, [10, 0, 0, 9], 4);
        let mut tokens = Vec::new();
        for h in 0..5u8 {
            push(naive.as_mut(), 0, f(h), 0).unwrap();
            let (_, step, _) = push_recording(fast.as_mut(), 0, f(h), 0);
            tokens.push(step.states[0].0);
        }
        // Flows 0 and 1 have slots; 2, 3 and 4 came when the table was full.
        assert_eq!(tokens, vec![0, 1, UNTRACKED, UNTRACKED, UNTRACKED]);
        for (h, &t) in tokens.iter().enumerate() {
            push(naive.as_mut(), 0, f(h as u8), 0).unwrap();
            let mut data = f(h as u8).data().to_vec();
            let mut view = ReplayView {
                data: &mut data,
                ip: Some(14),
                now: Timestamp(0),
                clock: Timestamp(0),
                input_index: 0,
            };
            fast.replay(t, &mut view, &mut Context::default());
        }
        assert_eq!(naive.state_dump(), fast.state_dump());
        assert_eq!(naive.stats(), fast.stats());
        let st = naive.stats();
        assert!(
            st.contains(&("flows", 2)) && st.contains(&("untracked", 6)),
            "{st:?}"
        );
        assert_eq!(
            naive.state_dump().last().map(String::as_str),
            Some("untracked packets 6 bytes 312")
        );
        let m = naive.as_any().downcast_ref::<Monitor>().unwrap();
        assert_eq!(m.counts.len(), 2);
    }
}
