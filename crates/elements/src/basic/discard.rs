//! `Discard` and `Idle`: sinks.
//!
//! Click: `Discard([keywords ACTIVE, BURST])` — "Discards all packets received on its single
//! input." Ports `1/0`. FuseBox counts each packet as dropped with reason `discard`. `ACTIVE`
//! and `BURST` only matter for pull inputs, which run-to-completion does not have; they are
//! checked and otherwise ignored.
//!
//! Click: `Idle` — "Has zero or more agnostic outputs and zero or more agnostic inputs. It
//! never pushes a packet to any output or pulls a packet from any input. Any packet it does
//! receive by push is discarded." Ports `-/-`; FuseBox drops with reason `idle`.

use crate::args::{parse_bool, parse_uint};
use crate::model::{Case, Filter, Model, Outcome};
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

reasons! {
    /// Why `Discard` drops a packet.
    pub enum DiscardReason {
        /// Every packet.
        Discard => "discard",
    }
}

reasons! {
    /// Why `Idle` drops a packet.
    pub enum IdleReason {
        /// Every packet pushed to it.
        Idle => "idle",
    }
}

/// `Discard`: drops every packet (reason `discard`).
#[derive(Debug, Clone, Default)]
pub struct Discard {
    count: u64,
}

impl Discard {
    /// Accepts the keywords `ACTIVE` and `BURST`.
    pub fn configure(args: &Args) -> Result<Discard, ConfigError> {
        args.check(0, &["ACTIVE", "BURST"])?;
        if let Some(v) = args.keyword("ACTIVE") {
            parse_bool(v, "ACTIVE")?;
        }
        if let Some(v) = args.keyword("BURST") {
            parse_uint(v, "BURST")?;
        }
        Ok(Discard::default())
    }
}

impl Element for Discard {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Discard"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 0)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        self.count += 1;
        Verdict::Drop(packet, DiscardReason::Discard.into())
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("count", self.count)]
    }
    /// Every packet is dropped under `discard` and counted.
    fn model(&self) -> Option<Model> {
        Some(Model::new(vec![Case::new(
            Filter::any(),
            Outcome::Drop(DiscardReason::Discard.into()),
        )
        .stat("count")]))
    }
}

/// `Idle`: any number of ports, never emits; pushed packets are dropped (reason `idle`).
#[derive(Debug, Clone, Default)]
pub struct Idle;

impl Idle {
    /// Takes no arguments.
    pub fn configure(args: &Args) -> Result<Idle, ConfigError> {
        args.check(0, &[])?;
        Ok(Idle)
    }
}

impl Element for Idle {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Idle"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(0, usize::MAX, 0, usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Drop(packet, IdleReason::Idle.into())
    }
    /// Every packet is dropped under `idle`.
    fn model(&self) -> Option<Model> {
        Some(Model::new(vec![Case::new(
            Filter::any(),
            Outcome::Drop(IdleReason::Idle.into()),
        )]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn discard_drops_and_counts() {
        let mut e = ok("Discard", "", 0);
        assert_eq!(e.port_count().describe(), "1/0");
        for _ in 0..3 {
            let o = run(e.as_mut(), pkt(&frame()));
            assert!(o.out.is_empty());
            assert_eq!(o.drops, vec!["discard"]);
        }
        assert_eq!(e.stats(), vec![("count", 3)]);
        ok("Discard", "ACTIVE false, BURST 8", 0);
        assert!(err("Discard", "3", 0).contains("too many arguments"));
        assert!(err("Discard", "ACTIVE sometimes", 0).contains("ACTIVE"));
    }

    #[test]
    fn idle_drops() {
        let mut e = ok("Idle", "", 0);
        assert_eq!(e.port_count().describe(), "0-/0-");
        assert_eq!(run(e.as_mut(), pkt(&frame())).drops, vec!["idle"]);
        assert!(err("Idle", "1", 0).contains("too many"));
    }
}
