//! `StaticSwitch` and `Switch`: send every packet to one configured output.
//!
//! Click: `StaticSwitch(K)` — "Sends every incoming packet to output K. If K is negative (or
//! not less than the number of outputs), incoming packets are dropped." `Switch([K])` —
//! "Sends every incoming packet to output K (default 0). If K is out of range, packets are
//! dropped"; its handlers can change K at run time, which FuseBox has no use for. Click's
//! `Switch::configure` refuses a K not below the number of outputs ("output must be < N"),
//! and so does FuseBox; a negative K drops. Ports `1/-` for both (no output at all is
//! allowed, as in Click). Drops are counted as `no-output`.

use crate::model::{Case, Filter, Model, Outcome};
use crate::reason::OutputReason;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// K, or `None` when negative or (`refuse_beyond` false) not below the number of outputs;
/// with `refuse_beyond` such a K is a configuration error, as in Click's `Switch`.
fn output_arg(
    args: &Args,
    default: Option<i64>,
    bcx: &BuildCtx,
    refuse_beyond: bool,
) -> Result<Option<usize>, ConfigError> {
    args.check(1, &["OUTPUT"])?;
    let k = match (args.get(0, "OUTPUT"), default) {
        (Some(k), _) => k.trim().parse::<i64>().map_err(|_| {
            ConfigError::new(format!(
                "expected K (an output number, -1 for none), found `{}`",
                k.trim()
            ))
        })?,
        (None, Some(d)) => d,
        (None, None) => return Err(ConfigError::new("missing argument K (output number)")),
    };
    if refuse_beyond && k >= 0 && k as u64 >= bcx.noutputs as u64 {
        return Err(ConfigError::new(format!(
            "expected K below the number of connected outputs ({}), found {k}",
            bcx.noutputs
        )));
    }
    Ok(usize::try_from(k).ok().filter(|&k| k < bcx.noutputs))
}

/// Every packet to `output`, or dropped (`no-output`) when there is none.
fn send_model(output: Option<usize>) -> Model {
    let outcome = match output {
        Some(k) => Outcome::Out(k),
        None => Outcome::Drop(OutputReason::NoOutput.into()),
    };
    Model::new(vec![Case::new(Filter::any(), outcome)])
}

fn send(output: Option<usize>, packet: Packet) -> Verdict {
    match output {
        Some(k) => Verdict::Out(k, packet),
        None => Verdict::Drop(packet, OutputReason::NoOutput.into()),
    }
}

/// `StaticSwitch(K)`: every packet to output `K`, or dropped if `K` is out of range.
#[derive(Debug, Clone)]
pub struct StaticSwitch {
    /// The output, `None` when switched off (negative or out of range).
    pub output: Option<usize>,
}

impl StaticSwitch {
    /// Reads `K` (mandatory).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<StaticSwitch, ConfigError> {
        Ok(StaticSwitch {
            output: output_arg(args, None, bcx, false)?,
        })
    }
}

impl Element for StaticSwitch {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "StaticSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 0, usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        send(self.output, packet)
    }
    fn model(&self) -> Option<Model> {
        Some(send_model(self.output))
    }
}

/// `Switch([K])`: every packet to output `K` (default 0), or dropped if `K` is negative; a `K`
/// not below the number of outputs is a configuration error.
#[derive(Debug, Clone)]
pub struct Switch {
    /// The output, `None` when switched off (negative or out of range).
    pub output: Option<usize>,
}

impl Switch {
    /// Reads the optional `K`.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<Switch, ConfigError> {
        Ok(Switch {
            output: output_arg(args, Some(0), bcx, true)?,
        })
    }
}

impl Element for Switch {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "Switch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 0, usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        send(self.output, packet)
    }
    fn model(&self) -> Option<Model> {
        Some(send_model(self.output))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn static_switch() {
        let mut e = ok("StaticSwitch", "1", 2);
        assert_eq!(run(e.as_mut(), pkt(&frame())).ports(), vec![1]);
        let mut e = ok("StaticSwitch", "-1", 2);
        assert_eq!(run(e.as_mut(), pkt(&frame())).drops, vec!["no-output"]);
        let mut e = ok("StaticSwitch", "2", 2);
        assert_eq!(run(e.as_mut(), pkt(&frame())).drops, vec!["no-output"]);
        assert!(err("StaticSwitch", "", 2).contains("missing argument K"));
        assert!(err("StaticSwitch", "one", 2).contains("expected K"));
    }

    #[test]
    fn switch_defaults_to_0() {
        let mut e = ok("Switch", "", 2);
        assert_eq!(run(e.as_mut(), pkt(&frame())).ports(), vec![0]);
        let mut e = ok("Switch", "OUTPUT 1", 2);
        assert_eq!(run(e.as_mut(), pkt(&frame())).ports(), vec![1]);
        let mut e = ok("Switch", "-1", 2);
        assert_eq!(run(e.as_mut(), pkt(&frame())).drops, vec!["no-output"]);
        // Click: "output must be < 2"; with no outputs only a negative K is accepted.
        assert!(err("Switch", "2", 2)
            .contains("expected K below the number of connected outputs (2), found 2"));
        assert!(err("Switch", "", 0).contains("(0), found 0"));
        let mut e = ok("Switch", "-1", 0);
        assert_eq!(run(e.as_mut(), pkt(&frame())).drops, vec!["no-output"]);
        let mut e = ok("StaticSwitch", "0", 0);
        assert_eq!(run(e.as_mut(), pkt(&frame())).drops, vec!["no-output"]);
    }
}
