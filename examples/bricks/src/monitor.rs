//! `MonitorNF`: per-flow packet and byte counters (NetBricks' §5 monitor, after Click's
//! traffic monitors), every packet forwarded unchanged.
//!
//! ```text
//! MonitorNF([CAPACITY N])
//! ```
//!
//! The state is the NF's own (no external access): a table the pipeline's last stage owns.
//! A stage with state is a type implementing [`Stage`]: `run` counts the packet and hands
//! it on, `state` and `stats` show the table the way FuseBox compares runs.
//!
//! Same counting and state dump as the `Monitor` element after `MarkIPHeader(14)` on IPv4
//! frames (`examples/bricks/click/monitor.click`): a frame that parses as Ethernet and IPv4
//! is counted under its flow (protocol, addresses, ports of TCP and UDP first fragments,
//! else 0), with its length in bytes; any other frame under `non_ip`. At most `CAPACITY`
//! flows (default 262,144) are counted apart, later flows together under `untracked`.
//! `state_dump`: `flow proto P S:SP > D:DP packets N bytes B` per flow, sorted, then
//! `untracked packets N bytes B` if any. `stats`: `packets`, `bytes`, `flows`, `non_ip`,
//! `untracked`. No drops.

use elements::model::{Field, IpAnchor};
use elements::record::Declared;
use elements::registry::{Doc, ElementClass};
use elements::{Args, BuildCtx, ConfigError, Element};
use operators::nf::class;
use operators::{pipe, Cx, Ethernet, Ipv4, OperatorNf, Pkt, Raw, Stage};
use packet::{Ipv4Flow, Ipv4FlowKey, Ports};
use std::collections::HashMap;

/// The class name.
pub const NAME: &str = "MonitorNF";

/// The most flows counted apart without `CAPACITY` (as `Monitor`).
pub const DEFAULT_CAPACITY: usize = 1 << 18;

/// The monitor's table: the stage that counts.
#[derive(Debug, Default)]
pub struct Counters {
    slots: HashMap<Ipv4FlowKey, usize>,
    counts: Vec<(Ipv4FlowKey, u64, u64)>,
    capacity: usize,
    packets: u64,
    bytes: u64,
    non_ip: u64,
    untracked: (u64, u64),
}

impl Counters {
    /// An empty table counting at most `capacity` flows apart.
    pub fn new(capacity: usize) -> Counters {
        Counters {
            capacity,
            ..Counters::default()
        }
    }

    /// Counts one packet of `len` bytes for `flow` (`None`: not IPv4).
    fn count(&mut self, flow: Option<Ipv4FlowKey>, len: u64) {
        self.packets += 1;
        self.bytes += len;
        let Some(key) = flow else {
            self.non_ip += 1;
            return;
        };
        let slot = match self.slots.get(&key) {
            Some(&s) => Some(s),
            None if self.counts.len() < self.capacity => {
                self.slots.insert(key, self.counts.len());
                self.counts.push((key, 0, 0));
                Some(self.counts.len() - 1)
            }
            None => None,
        };
        match slot.and_then(|s| self.counts.get_mut(s)) {
            Some(c) => {
                c.1 += 1;
                c.2 += len;
            }
            None => {
                self.untracked.0 += 1;
                self.untracked.1 += len;
            }
        }
    }
}

impl Stage<Pkt<Raw>> for Counters {
    type Out = Pkt<Raw>;

    fn run(&mut self, p: Pkt<Raw>, _: &mut Cx) -> Option<Pkt<Raw>> {
        let len = p.len() as u64;
        // Parsing fails by giving the packet back: the monitor counts it and forwards it.
        let p = match p.parse::<Ethernet>().map(Pkt::parse::<Ipv4>) {
            Ok(Ok(ip)) => {
                let flow = Ipv4Flow::parse(ip.header().into_inner()).map(|f| f.key(Ports::TcpUdp));
                self.count(flow, len);
                ip.reset()
            }
            Ok(Err(eth)) => {
                self.count(None, len);
                eth.reset()
            }
            Err(raw) => {
                self.count(None, len);
                raw
            }
        };
        Some(p)
    }

    fn state(&self, out: &mut Vec<String>) {
        let mut flows: Vec<_> = self.counts.iter().collect();
        flows.sort_by_key(|c| c.0);
        out.extend(
            flows
                .into_iter()
                .map(|(k, p, b)| format!("flow {k} packets {p} bytes {b}")),
        );
        if self.untracked.0 > 0 {
            let (p, b) = self.untracked;
            out.push(format!("untracked packets {p} bytes {b}"));
        }
    }

    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        out.extend([
            ("packets", self.packets),
            ("bytes", self.bytes),
            ("flows", self.counts.len() as u64),
            ("non_ip", self.non_ip),
            ("untracked", self.untracked.0),
        ]);
    }
}

/// The NF's pipeline: every packet through the counters.
pub fn pipeline(capacity: usize) -> impl Stage<Pkt<Raw>, Out = Pkt<Raw>> + 'static {
    pipe::<Raw, ()>().then(Counters::new(capacity)).into_stage()
}

/// What the NF declares for the planner: it reads the flow (IPv4 header at 14, as its
/// pipeline parses it) and counts it; nothing written, nothing dropped.
pub fn declared() -> Declared {
    Declared {
        sets_headers: true,
        ip_at: IpAnchor::Data(14),
        stateful: true,
        ..Declared::default()
    }
    .read(&[Field::EtherType])
    .read(&Declared::FLOW)
}

/// Builds the NF from `CAPACITY N` (optional).
fn build(
    name: &'static str,
    args: &Args,
    _: &BuildCtx<'_>,
) -> Result<Box<dyn Element>, ConfigError> {
    let err = |e: ConfigError| ConfigError::new(format!("{name}: {}", e.message));
    args.check(0, &["CAPACITY"]).map_err(err)?;
    let capacity = match args.keyword("CAPACITY") {
        Some(v) => elements::args::parse_uint(v, "CAPACITY")
            .map_err(err)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))?,
        None => DEFAULT_CAPACITY,
    };
    Ok(Box::new(
        OperatorNf::<_, ()>::new(name, 1, pipeline(capacity)).with_declared(declared()),
    ))
}

/// The registry entry.
pub const CLASS: ElementClass = class(
    NAME,
    build,
    Doc::new(
        "[CAPACITY N]",
        "Per-flow packet and byte counters written with operators (examples/bricks): every \
         packet forwarded, counted under its IPv4 flow (or `non_ip`); state as Monitor's.",
        "",
    ),
);

#[cfg(test)]
mod tests {
    use crate::testutil::{build, push};
    use elements::Verdict;
    use wire::build::Frame;

    #[test]
    fn counts_per_flow_and_forwards_everything() {
        let mut nf = build("MonitorNF", "CAPACITY 1", 1);
        let a = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2).build();
        let b = Frame::tcp([10, 0, 0, 3], [10, 0, 0, 2], 5, 80).build();
        for f in [&a, &a, &b, &a[..10].to_vec()] {
            assert!(matches!(push(&mut *nf, 0, f, 0), Verdict::Out(0, _)));
        }
        let state = nf.state_dump();
        assert_eq!(
            state,
            [
                format!(
                    "flow proto 17 10.0.0.1:1 > 10.0.0.2:2 packets 2 bytes {}",
                    2 * a.len()
                ),
                format!("untracked packets 1 bytes {}", b.len()),
            ]
        );
        let stats = nf.stats();
        assert!(stats.contains(&("non_ip", 1)), "{stats:?}");
        assert!(stats.contains(&("flows", 1)), "{stats:?}");
    }

    #[test]
    fn refuses_bad_capacity() {
        let e = crate::testutil::build_in("MonitorNF", "CAPACITY x", 1, std::path::Path::new("."));
        assert!(e
            .err()
            .is_some_and(|e| e.message.starts_with("MonitorNF: ")));
    }
}
