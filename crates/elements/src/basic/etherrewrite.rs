//! `EtherRewrite`: rewrites the Ethernet addresses.
//!
//! Click: `EtherRewrite(SRC, DST)` — "Rewrite the source and the destination address in the
//! Ethernet header. The ETHERTYPE is left untouched." Ports `1/1`. Click writes the 12
//! address bytes at the MAC header annotation. FuseBox does the same (the annotation may
//! point before the data, as after a `Strip`: the bytes in the headroom are rewritten and
//! reappear on `Unstrip`, as in Click); without a MAC header annotation it uses the start of
//! the data. A packet with fewer than 14 bytes from the MAC header on is dropped as
//! `too-short` (Click would write past it).

use crate::model::{Case, Effect, Field, FieldSet, Filter, Model, Outcome};
use crate::reason::LengthReason;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `EtherRewrite(SRC, DST)`: overwrites the MAC addresses of the existing header.
#[derive(Debug, Clone)]
pub struct EtherRewrite {
    /// Source MAC address written.
    pub src: [u8; 6],
    /// Destination MAC address written.
    pub dst: [u8; 6],
}

impl EtherRewrite {
    /// Reads `SRC` and `DST` (mandatory, positional or keyword).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<EtherRewrite, ConfigError> {
        args.check(2, &["SRC", "DST"])?;
        let src = bcx
            .names
            .eth(args.require(0, "SRC", "source Ethernet address")?)?
            .0;
        let dst = bcx
            .names
            .eth(args.require(1, "DST", "destination Ethernet address")?)?
            .0;
        Ok(EtherRewrite { src, dst })
    }
}

impl Element for EtherRewrite {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "EtherRewrite"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut packet: Packet, _cx: &mut Context) -> Verdict {
        if packet.write_ether_addrs(&self.src, &self.dst) {
            Verdict::Out(0, packet)
        } else {
            Verdict::Drop(packet, LengthReason::TooShort.into())
        }
    }
    /// A packet with 14 bytes or more of data leaves on output 0 with the addresses written
    /// at its MAC header; the rest (and one with fewer than 14 bytes from the MAC header
    /// on) is left to the element. Synthesis writes the addresses only where it knows the
    /// MAC header is the frame's first byte.
    fn model(&self) -> Option<Model> {
        let long = Filter::any().with(Field::FrameLen, FieldSet::range(14, 0xffff));
        Some(Model::new(vec![
            Case::new(long, Outcome::Out(0)).effect(Effect::EtherRewrite {
                src: self.src,
                dst: self.dst,
            }),
            Case::new(Filter::any(), Outcome::Runtime),
        ]))
    }
    /// The packets the model leaves to run time (fewer than 14 bytes) are too short for the
    /// addresses: they are dropped, nothing written.
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(crate::record::Declared {
            reads: vec![Field::FrameLen],
            drops: true,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    const SRC: [u8; 6] = [0, 0, 0, 0, 0, 0xaa];
    const DST: [u8; 6] = [0, 0, 0, 0, 0, 0xbb];

    #[test]
    fn rewrites_addresses_only() {
        let mut e = ok("EtherRewrite", "00:00:00:00:00:aa, 00:00:00:00:00:bb", 1);
        let mut p = pkt(&frame());
        p.set_mac_header(0);
        let o = run(e.as_mut(), p);
        assert_eq!(o.ports(), vec![0]);
        let d = o.out[0].1.data();
        assert_eq!((&d[..6], &d[6..12]), (&DST[..], &SRC[..]));
        assert_eq!(&d[12..], &frame()[12..]);
    }

    #[test]
    fn uses_mac_annotation_even_after_strip() {
        let mut e = ok(
            "EtherRewrite",
            "SRC 00:00:00:00:00:aa, DST 00:00:00:00:00:bb",
            1,
        );
        let mut strip = ok("Strip", "14", 1);
        let mut unstrip = ok("Unstrip", "14", 1);
        let mut p = pkt(&frame());
        p.set_mac_header(0);
        let p = run(strip.as_mut(), p).out.remove(0).1;
        let o = run(e.as_mut(), p);
        assert_eq!(o.out[0].1.data(), &frame()[14..]);
        let o = run(
            unstrip.as_mut(),
            o.out
                .into_iter()
                .next()
                .map(|x| x.1)
                .unwrap_or_else(|| pkt(&[])),
        );
        let d = o.out[0].1.data();
        assert_eq!(
            (&d[..6], &d[6..12], &d[12..]),
            (&DST[..], &SRC[..], &frame()[12..])
        );
    }

    #[test]
    fn short_frames_dropped() {
        let mut e = ok("EtherRewrite", "00:00:00:00:00:aa, 00:00:00:00:00:bb", 1);
        let o = run(e.as_mut(), pkt(&[1; 13]));
        assert_eq!((o.out.len(), o.drops), (0, vec!["too-short"]));
        // No MAC annotation: the data start is used.
        let o = run(e.as_mut(), pkt(&[1; 14]));
        assert_eq!(&o.out[0].1.data()[..6], &DST);
        assert!(err("EtherRewrite", "00:00:00:00:00:aa", 1).contains("missing argument DST"));
        assert!(
            err("EtherRewrite", "x, 00:00:00:00:00:aa", 1).contains("expected Ethernet address")
        );
    }
}
