//! `Null`: passes packets through unchanged.
//!
//! Click: `Null` — "Responds to each packet by pushing it unchanged out its first output."
//! Ports `1/1`, no arguments.

use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `Null`: forwards every packet unchanged.
#[derive(Debug, Clone, Default)]
pub struct Null;

impl Null {
    /// Takes no arguments.
    pub fn configure(args: &Args) -> Result<Null, ConfigError> {
        args.check(0, &[])?;
        Ok(Null)
    }
}

impl Element for Null {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Null"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Out(0, packet)
    }
    fn model(&self) -> Option<crate::model::Model> {
        Some(crate::model::Model::pass())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn passes_through() {
        let mut e = ok("Null", "", 1);
        assert_eq!(e.port_count().describe(), "1/1");
        let mut p = pkt(&frame());
        p.meta.paint = 9;
        let o = run(e.as_mut(), p);
        assert_eq!(o.ports(), vec![0]);
        assert_eq!(o.out[0].1.data(), &frame()[..]);
        assert_eq!(o.out[0].1.meta.paint, 9);
        assert!(err("Null", "1", 1).contains("too many"));
    }
}
