//! `Strip`: removes bytes from the front of packets.
//!
//! Click: `Strip(LENGTH)` — "Deletes the first LENGTH bytes from each packet." Ports `1/1`.
//! Click's `Packet::pull` on a packet shorter than LENGTH removes all of it (with a warning),
//! so a short packet leaves as an empty packet; FuseBox does the same. The removed bytes stay
//! in the headroom, so a later `Unstrip` brings them back. Header annotations are absolute
//! and do not move.

use crate::args::parse_uint;
use crate::model::{Case, Effect, Filter, Model, Outcome};
use crate::{Args, ConfigError, Element, PortCount};
use packet::Packet;

/// `Strip(LENGTH)`: pulls `LENGTH` bytes off the front.
#[derive(Debug, Clone)]
pub struct Strip {
    /// Bytes removed.
    pub length: usize,
}

/// Reads a mandatory `LENGTH` argument (a byte count).
pub(super) fn length_arg(args: &Args) -> Result<usize, ConfigError> {
    args.check(1, &["LENGTH"])?;
    let n = args.require(0, "LENGTH", "number of bytes")?;
    let v = parse_uint(n, "LENGTH")?;
    usize::try_from(v)
        .map_err(|_| ConfigError::new(format!("expected LENGTH (a byte count), found `{v}`")))
}

impl Strip {
    /// Reads `LENGTH` (mandatory).
    pub fn configure(args: &Args) -> Result<Strip, ConfigError> {
        Ok(Strip {
            length: length_arg(args)?,
        })
    }

    /// What `push` does, in place.
    #[inline(always)]
    fn step(&mut self, packet: &mut Packet) -> crate::Step {
        let n = self.length.min(packet.len());
        packet.pull(n);
        crate::Step::Out(0)
    }
}

impl Element for Strip {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Strip"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    push_in_place!();
    /// `Pull(LENGTH)`; opaque for a LENGTH beyond 65535 (the effect's range).
    fn model(&self) -> Option<Model> {
        let n = u16::try_from(self.length).ok()?;
        Some(Model::new(vec![
            Case::new(Filter::any(), Outcome::Out(0)).effect(Effect::Pull(n))
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn strips() {
        let mut e = ok("Strip", "14", 1);
        let mut p = pkt(&frame());
        p.set_network_header(14);
        let o = run(e.as_mut(), p);
        assert_eq!(o.ports(), vec![0]);
        let q = &o.out[0].1;
        assert_eq!(q.data(), &frame()[14..]);
        assert_eq!(q.network_offset_in_data(), Some(0));
    }

    #[test]
    fn short_packet_becomes_empty() {
        let mut e = ok("Strip", "LENGTH 14", 1);
        let o = run(e.as_mut(), pkt(&[1, 2, 3]));
        assert_eq!(o.ports(), vec![0]);
        assert!(o.out[0].1.is_empty());
    }

    #[test]
    fn bad_arguments() {
        assert!(err("Strip", "", 1).contains("missing argument LENGTH"));
        assert!(err("Strip", "-2", 1).contains("expected LENGTH"));
        assert!(err("Strip", "99999999999999999999", 1).contains("expected LENGTH"));
        assert!(err("Strip", "1, 2", 1).contains("too many"));
    }
}
