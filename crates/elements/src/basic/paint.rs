//! `Paint`: sets the paint annotation.
//!
//! Click: `Paint(COLOR [, ANNO])` — "Sets each packet's paint annotation to COLOR, an integer
//! 0..255." Ports `1/1`. `ANNO` selects the annotation byte; FuseBox models only the paint
//! annotation, so `ANNO` is accepted when it is `PAINT`.

use super::{check_paint_anno, parse_color};
use crate::model::{Case, Effect, Field, Filter, Model, Op, Outcome};
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `Paint(COLOR)`: sets `meta.paint` to `COLOR`.
#[derive(Debug, Clone)]
pub struct Paint {
    /// The color written.
    pub color: u8,
}

impl Paint {
    /// Reads `COLOR` (mandatory) and `ANNO`.
    pub fn configure(args: &Args) -> Result<Paint, ConfigError> {
        args.check(2, &["COLOR", "ANNO"])?;
        let color = parse_color(args.require(0, "COLOR", "paint color 0-255")?)?;
        check_paint_anno(args, 1)?;
        Ok(Paint { color })
    }
}

impl Element for Paint {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Paint"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, mut packet: Packet, _cx: &mut Context) -> Verdict {
        packet.meta.paint = self.color;
        Verdict::Out(0, packet)
    }
    fn model(&self) -> Option<Model> {
        Some(Model::new(vec![Case::new(Filter::any(), Outcome::Out(0))
            .effect(Effect::Write(
                Field::Paint,
                Op::Set(u128::from(self.color)),
            ))]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn paints() {
        let mut e = ok("Paint", "7", 1);
        let o = run(e.as_mut(), pkt(&frame()));
        assert_eq!(o.ports(), vec![0]);
        assert_eq!(o.out[0].1.meta.paint, 7);
        assert_eq!(o.out[0].1.data(), &frame()[..]);
        let mut e = ok("Paint", "COLOR 0x10, ANNO PAINT", 1);
        assert_eq!(run(e.as_mut(), pkt(&[1])).out[0].1.meta.paint, 16);
    }

    #[test]
    fn bad_arguments() {
        assert!(err("Paint", "", 1).contains("missing argument COLOR"));
        assert!(err("Paint", "256", 1).contains("at most 255"));
        assert!(err("Paint", "red", 1).contains("expected COLOR"));
        assert!(err("Paint", "1, 20", 1).contains("expected ANNO `PAINT`"));
    }
}
