//! `Unstrip`: puts bytes back on the front of packets.
//!
//! Click: `Unstrip(LENGTH)` — "Put LENGTH bytes at the front of the packet. These LENGTH
//! bytes may be bytes previously removed by Strip." Ports `1/1`. Click's `Packet::push` only
//! moves the data pointer back into the headroom, so the bytes a `Strip` removed reappear
//! unchanged (`Strip(14) -> Unstrip(14)` restores the Ethernet header). FuseBox uses
//! [`Packet::unpull`], which does the same; bytes that never were in the packet (headroom
//! exhausted) come back as zeros.

use super::strip::length_arg;
use crate::model::{Case, Effect, Filter, Model, Outcome};
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `Unstrip(LENGTH)`: moves the data start back by `LENGTH` bytes.
#[derive(Debug, Clone)]
pub struct Unstrip {
    /// Bytes put back.
    pub length: usize,
}

impl Unstrip {
    /// Reads `LENGTH` (mandatory).
    pub fn configure(args: &Args) -> Result<Unstrip, ConfigError> {
        Ok(Unstrip {
            length: length_arg(args)?,
        })
    }
}

impl Element for Unstrip {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Unstrip"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut packet: Packet, _cx: &mut Context) -> Verdict {
        packet.unpull(self.length);
        Verdict::Out(0, packet)
    }
    /// `Unpull(LENGTH)`; opaque for a LENGTH beyond 65535 (the effect's range).
    fn model(&self) -> Option<Model> {
        let n = u16::try_from(self.length).ok()?;
        Some(Model::new(vec![
            Case::new(Filter::any(), Outcome::Out(0)).effect(Effect::Unpull(n))
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn restores_stripped_bytes() {
        let mut strip = ok("Strip", "14", 1);
        let mut unstrip = ok("Unstrip", "14", 1);
        let o = run(strip.as_mut(), pkt(&frame()));
        let p = o.out.into_iter().next().map(|(_, p)| p);
        let o = run(unstrip.as_mut(), p.unwrap_or_else(|| pkt(&[])));
        assert_eq!(o.ports(), vec![0]);
        assert_eq!(o.out[0].1.data(), &frame()[..]);
    }

    #[test]
    fn beyond_headroom_is_zero_filled() {
        let mut e = ok("Unstrip", "200", 1);
        let o = run(e.as_mut(), pkt(&[7, 8]));
        let d = o.out[0].1.data();
        assert_eq!(d.len(), 202);
        assert_eq!(&d[200..], &[7, 8]);
    }

    #[test]
    fn bad_arguments() {
        assert!(err("Unstrip", "", 1).contains("LENGTH"));
        assert!(err("Unstrip", "x", 1).contains("expected LENGTH"));
    }
}
