//! `CheckPaint`: checks the paint annotation.
//!
//! Click: `CheckPaint(COLOR [, ANNO])` — "Checks that incoming packets have paint annotation
//! equal to COLOR. If their paints are not equal to COLOR, then they are dropped or emitted
//! on output 1, depending on how many outputs were used." Ports `1/1-2`. FuseBox counts the
//! drops (output 1 not connected) as `paint-mismatch`.

use super::{check_paint_anno, parse_color};
use crate::model::{Case, Field, FieldSet, Filter, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

reasons! {
    /// Why `CheckPaint` drops a packet.
    pub enum CheckPaintReason {
        /// Not painted COLOR, and output 1 is not connected.
        Mismatch => "paint-mismatch",
    }
}

/// `CheckPaint(COLOR)`: matching paint to output 0, others to output 1 or dropped.
#[derive(Debug, Clone)]
pub struct CheckPaint {
    /// The expected color.
    pub color: u8,
    /// Whether output 1 is connected.
    pub has_reject_output: bool,
}

impl CheckPaint {
    /// Reads `COLOR` (mandatory) and `ANNO`.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<CheckPaint, ConfigError> {
        args.check(2, &["COLOR", "ANNO"])?;
        let color = parse_color(args.require(0, "COLOR", "paint color 0-255")?)?;
        check_paint_anno(args, 1)?;
        Ok(CheckPaint {
            color,
            has_reject_output: bcx.noutputs >= 2,
        })
    }
}

impl Element for CheckPaint {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "CheckPaint"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        if packet.meta.paint == self.color {
            Verdict::Out(0, packet)
        } else if self.has_reject_output {
            Verdict::Out(1, packet)
        } else {
            Verdict::Drop(packet, CheckPaintReason::Mismatch.into())
        }
    }
    fn model(&self) -> Option<Model> {
        let good = Filter::any().with(Field::Paint, FieldSet::single(u128::from(self.color)));
        let bad = if self.has_reject_output {
            Outcome::Out(1)
        } else {
            Outcome::Drop(CheckPaintReason::Mismatch.into())
        };
        Some(Model::new(vec![
            Case::new(good, Outcome::Out(0)),
            Case::new(Filter::any(), bad),
        ]))
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
    fn two_outputs() {
        let mut e = ok("CheckPaint", "5", 2);
        assert_eq!(e.port_count().describe(), "1/1-2");
        assert_eq!(run(e.as_mut(), painted(5)).ports(), vec![0]);
        assert_eq!(run(e.as_mut(), painted(4)).ports(), vec![1]);
    }

    #[test]
    fn one_output_drops() {
        let mut e = ok("CheckPaint", "COLOR 5", 1);
        assert_eq!(run(e.as_mut(), painted(5)).ports(), vec![0]);
        let o = run(e.as_mut(), painted(0));
        assert_eq!((o.out.len(), o.drops), (0, vec!["paint-mismatch"]));
    }

    #[test]
    fn bad_arguments() {
        assert!(err("CheckPaint", "", 1).contains("COLOR"));
        assert!(err("CheckPaint", "-1", 1).contains("expected COLOR"));
    }
}
