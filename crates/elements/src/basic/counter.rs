//! `Counter`: counts packets and bytes.
//!
//! Click: `Counter([keywords COUNT_CALL, BYTE_COUNT_CALL])` — "Passes packets unchanged from
//! its input to its output, maintaining statistics information about packet count and
//! packet rate." The `count` and `byte_count` handlers report the number of packets and the
//! sum of their lengths. Ports `1/1`. The `*_CALL` keywords name handlers to call when a
//! count is reached; FuseBox has no handlers, so they are checked for shape (`N HANDLER`) and
//! ignored.

use crate::args::parse_uint;
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `Counter`: forwards every packet, counting packets and bytes.
#[derive(Debug, Clone, Default)]
pub struct Counter {
    /// Packets seen.
    pub count: u64,
    /// Bytes seen (sum of packet lengths).
    pub byte_count: u64,
}

impl Counter {
    /// Accepts the keywords `COUNT_CALL` and `BYTE_COUNT_CALL` (`N HANDLER`).
    pub fn configure(args: &Args) -> Result<Counter, ConfigError> {
        args.check(0, &["COUNT_CALL", "BYTE_COUNT_CALL"])?;
        for k in ["COUNT_CALL", "BYTE_COUNT_CALL"] {
            if let Some(v) = args.keyword(k) {
                let n = v.split_whitespace().next().unwrap_or("");
                parse_uint(n, k)?;
            }
        }
        Ok(Counter::default())
    }
}

impl Element for Counter {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Counter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        self.count += 1;
        self.byte_count += packet.len() as u64;
        Verdict::Out(0, packet)
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("count", self.count), ("byte_count", self.byte_count)]
    }
    fn model(&self) -> Option<crate::model::Model> {
        use crate::model::{Case, Filter, Model, Outcome};
        Some(Model::new(vec![Case::new(Filter::any(), Outcome::Out(0))
            .stat("count")
            .byte_stat("byte_count")]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn counts_packets_and_bytes() {
        let mut e = ok("Counter", "", 1);
        assert_eq!(e.stats(), vec![("count", 0), ("byte_count", 0)]);
        let o = run(e.as_mut(), pkt(&frame()));
        assert_eq!(o.ports(), vec![0]);
        assert_eq!(o.out[0].1.data(), &frame()[..]);
        run(e.as_mut(), pkt(&[1, 2, 3]));
        assert_eq!(e.stats(), vec![("count", 2), ("byte_count", 63)]);
    }

    #[test]
    fn arguments() {
        ok("Counter", "COUNT_CALL 10 x.stop", 1);
        assert!(err("Counter", "COUNT_CALL soon", 1).contains("COUNT_CALL"));
        assert!(err("Counter", "5", 1).contains("too many"));
        assert!(err("Counter", "RATE 5", 1).contains("unknown keyword"));
    }
}
