//! `Tee` and `PullTee`: duplicate packets.
//!
//! Click: `Tee([N])` — "Pushes each packet from its input to all N of its outputs. The last
//! output receives the original packet; outputs 0..N-2 receive clones, pushed in ascending
//! order before it." Ports `1/1-`; when `N` is given it must equal the number of outputs
//! (Click: "%d outputs implies %d arms"). `PullTee([N])` sends the original out of output 0
//! (its pull output) and clones to outputs 1..N-1.
//!
//! In FuseBox both emit in ascending port order (output 0 first), each extra packet made by
//! [`Context::copy_packet`] (a deep copy, so which output gets the original is invisible).

use crate::args::parse_uint;
use crate::model::{Case, Filter, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `Tee([N])` / `PullTee([N])`: one packet in, one copy out of every output.
#[derive(Debug, Clone)]
pub struct Tee {
    class: &'static str,
    /// Number of outputs ("arms").
    pub arms: usize,
    fixed: bool,
}

impl Tee {
    /// Reads `N` (positional or keyword); without it the arms are the connected outputs.
    pub fn configure(class: &'static str, args: &Args, bcx: &BuildCtx) -> Result<Tee, ConfigError> {
        args.check(1, &["N"])?;
        match args.get(0, "N") {
            Some(n) => {
                let n = parse_uint(n, "N (number of arms)")?;
                if n == 0 {
                    return Err(ConfigError::new(
                        "expected N (number of arms) at least 1, found 0",
                    ));
                }
                let n = usize::try_from(n).map_err(|_| {
                    ConfigError::new("expected N (number of arms), found a huge number")
                })?;
                if bcx.noutputs != 0 && bcx.noutputs != n {
                    return Err(ConfigError::new(format!(
                        "expected {n} connected outputs for N {n}, found {}",
                        bcx.noutputs
                    )));
                }
                Ok(Tee {
                    class,
                    arms: n,
                    fixed: true,
                })
            }
            None => Ok(Tee {
                class,
                arms: bcx.noutputs.max(1),
                fixed: false,
            }),
        }
    }
}

impl Element for Tee {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        if self.fixed {
            PortCount::exact(1, self.arms)
        } else {
            PortCount::range(1, 1, 1, usize::MAX)
        }
    }
    fn push(&mut self, _port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        if self.arms <= 1 {
            return Verdict::Out(0, packet);
        }
        for i in 0..self.arms - 1 {
            let copy = cx.copy_packet(&packet);
            cx.emit(i, copy);
        }
        cx.emit(self.arms - 1, packet);
        Verdict::Done
    }
    /// Every packet leaves on every arm, copied.
    fn model(&self) -> Option<Model> {
        let out = match self.arms {
            1 => Outcome::Out(0),
            n => Outcome::Copies(n),
        };
        Some(Model::new(vec![Case::new(Filter::any(), out)]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn copies_to_every_output_in_order() {
        for class in ["Tee", "PullTee"] {
            let mut e = ok(class, "", 3);
            assert_eq!(e.port_count().describe(), "1/1-");
            let mut p = pkt(&frame());
            p.meta.paint = 4;
            let o = run(e.as_mut(), p);
            assert_eq!(o.ports(), vec![0, 1, 2]);
            assert_eq!(o.created, 2);
            for (_, q) in &o.out {
                assert_eq!(q.data(), &frame()[..]);
                assert_eq!(q.meta.paint, 4);
            }
        }
    }

    #[test]
    fn explicit_arms() {
        let mut e = ok("Tee", "2", 2);
        assert_eq!(e.port_count().describe(), "1/2");
        let o = run(e.as_mut(), pkt(&frame()));
        assert_eq!((o.ports(), o.created), (vec![0, 1], 1));
        let mut e = ok("Tee", "N 1", 1);
        let o = run(e.as_mut(), pkt(&frame()));
        assert_eq!((o.ports(), o.created), (vec![0], 0));
        assert!(err("Tee", "3", 2).contains("expected 3 connected outputs"));
        assert!(err("Tee", "0", 1).contains("at least 1"));
        assert!(err("Tee", "two", 2).contains("expected N"));
    }
}
