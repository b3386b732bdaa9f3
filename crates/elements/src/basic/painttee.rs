//! `PaintTee`: copies packets of one color.
//!
//! Click: `PaintTee(COLOR [, ANNO])` — "Sends every packet through output 0. If the packet's
//! paint annotation is equal to COLOR, also sends a copy through output 1." Ports `1/2`.
//! Click pushes the copy on output 1 before returning the original on output 0; FuseBox
//! emits in ascending port order (original on 0, then the copy on 1), as the executor
//! requires. The copy is identical (bytes and annotations).

use super::{check_paint_anno, parse_color};
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `PaintTee(COLOR)`: all packets to output 0, a copy of those painted `COLOR` to output 1.
#[derive(Debug, Clone)]
pub struct PaintTee {
    /// The color copied.
    pub color: u8,
}

impl PaintTee {
    /// Reads `COLOR` (mandatory) and `ANNO`.
    pub fn configure(args: &Args) -> Result<PaintTee, ConfigError> {
        args.check(2, &["COLOR", "ANNO"])?;
        let color = parse_color(args.require(0, "COLOR", "paint color 0-255")?)?;
        check_paint_anno(args, 1)?;
        Ok(PaintTee { color })
    }
}

// PaintTee copies packets (its model's run-time case): it declares nothing (`Element::declared`).
impl Element for PaintTee {
    fn class_name(&self) -> &'static str {
        "PaintTee"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 2)
    }
    fn push(&mut self, _port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        if packet.meta.paint != self.color {
            return Verdict::Out(0, packet);
        }
        let copy = cx.copy_packet(&packet);
        cx.emit(0, packet);
        cx.emit(1, copy);
        Verdict::Done
    }
    fn model(&self) -> Option<crate::model::Model> {
        use crate::model::{Case, Field, FieldSet, Filter, Model, Outcome};
        // Other colors pass unchanged; the element copies its own color at run time.
        let other = FieldSet::single(u128::from(self.color)).complement(8);
        Some(Model::new(vec![
            Case::new(Filter::any().with(Field::Paint, other), Outcome::Out(0)),
            Case::new(Filter::any(), Outcome::Runtime),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn copies_matching_color() {
        let mut e = ok("PaintTee", "2", 2);
        assert_eq!(e.port_count().describe(), "1/2");
        let mut p = pkt(&frame());
        p.meta.paint = 2;
        let o = run(e.as_mut(), p);
        assert_eq!((o.ports(), o.created), (vec![0, 1], 1));
        assert_eq!(o.out[1].1.data(), &frame()[..]);
        assert_eq!(o.out[1].1.meta.paint, 2);
        let o = run(e.as_mut(), pkt(&frame()));
        assert_eq!((o.ports(), o.created), (vec![0], 0));
        assert!(err("PaintTee", "", 2).contains("COLOR"));
    }
}
