//! `PaintSwitch`: chooses the output by paint annotation.
//!
//! Click: `PaintSwitch([ANNO])` — "Sends every incoming packet to one of its outputs based
//! on the packet's paint annotation. If the paint annotation is N, the packet goes out
//! output N; packets whose paint is out of range are dropped. A paint of 0xFF (255) sends a
//! copy to every output" (clones to outputs 0..n-2, the original to the last). Ports `1/-`;
//! the number of outputs is the number connected. Out-of-range drops are counted as
//! `no-output`.

use super::check_paint_anno;
use crate::model::{Case, Field, FieldSet, Filter, Model, Outcome};
use crate::reason::OutputReason;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `PaintSwitch`: output = paint annotation.
#[derive(Debug, Clone)]
pub struct PaintSwitch {
    /// Number of outputs (connected).
    pub noutputs: usize,
}

impl PaintSwitch {
    /// Reads `ANNO`; the outputs are the connected ones.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<PaintSwitch, ConfigError> {
        args.check(1, &["ANNO"])?;
        check_paint_anno(args, 0)?;
        Ok(PaintSwitch {
            noutputs: bcx.noutputs,
        })
    }
}

// PaintSwitch copies paint-255 packets to every output (its model's run-time case): it declares nothing (`Element::declared`).
impl Element for PaintSwitch {
    fn class_name(&self) -> &'static str {
        "PaintSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 0, usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        let paint = usize::from(packet.meta.paint);
        if paint == 0xff && self.noutputs > 0 {
            for i in 0..self.noutputs - 1 {
                let copy = cx.copy_packet(&packet);
                cx.emit(i, copy);
            }
            cx.emit(self.noutputs - 1, packet);
            Verdict::Done
        } else if paint < self.noutputs {
            Verdict::Out(paint, packet)
        } else {
            Verdict::Drop(packet, OutputReason::NoOutput.into())
        }
    }
    /// Paint 255 (with outputs) is copied to every output: run time. Paint `i` below the
    /// number of outputs goes to output `i`; any other paint is dropped (`no-output`).
    fn model(&self) -> Option<Model> {
        let paint = |v: u128| Filter::any().with(Field::Paint, FieldSet::single(v));
        let mut cases = Vec::new();
        if self.noutputs > 0 {
            cases.push(Case::new(paint(0xff), Outcome::Runtime));
        }
        for i in 0..self.noutputs.min(0xff) {
            cases.push(Case::new(paint(i as u128), Outcome::Out(i)));
        }
        cases.push(Case::new(
            Filter::any(),
            Outcome::Drop(OutputReason::NoOutput.into()),
        ));
        Some(Model::new(cases))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    fn painted(c: u8) -> packet::Packet {
        let mut p = pkt(&frame());
        p.meta.paint = c;
        p
    }

    #[test]
    fn output_is_paint() {
        let mut e = ok("PaintSwitch", "", 3);
        assert_eq!(run(e.as_mut(), painted(0)).ports(), vec![0]);
        assert_eq!(run(e.as_mut(), painted(2)).ports(), vec![2]);
        let o = run(e.as_mut(), painted(3));
        assert_eq!((o.out.len(), o.drops), (0, vec!["no-output"]));
        let o = run(e.as_mut(), painted(0xff));
        assert_eq!((o.ports(), o.created), (vec![0, 1, 2], 2));
        ok("PaintSwitch", "ANNO PAINT", 2);
        assert!(err("PaintSwitch", "PAINT2", 2).contains("ANNO"));
        assert!(err("PaintSwitch", "PAINT, 1", 2).contains("too many"));
    }
}
