//! `RoundRobinSwitch`: cycles through its outputs.
//!
//! Click: `RoundRobinSwitch` — "Pushes each arriving packet to one of the N outputs. The
//! next packet will be pushed to the following output in round-robin order." The first
//! packet goes to output 0. Ports `1/1-`. FastClick's optional `MAX` argument limits the
//! cycle to outputs `0..MAX`; a `MAX` beyond the connected outputs sends packets to missing
//! outputs, which FuseBox drops as `no-output`.

use crate::args::parse_uint;
use crate::reason::OutputReason;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `RoundRobinSwitch([MAX])`: output 0, 1, ..., n-1, 0, ...
#[derive(Debug, Clone)]
pub struct RoundRobinSwitch {
    /// Length of the cycle (`MAX`, or the number of connected outputs).
    pub max: usize,
    noutputs: usize,
    next: usize,
}

impl RoundRobinSwitch {
    /// Reads the optional `MAX`.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<RoundRobinSwitch, ConfigError> {
        args.check(1, &["MAX", "SPLITBATCH"])?;
        let max = match args.get(0, "MAX") {
            Some(m) => usize::try_from(parse_uint(m, "MAX")?).map_err(|_| {
                ConfigError::new(format!("expected MAX (number of outputs), found `{m}`"))
            })?,
            None => bcx.noutputs,
        };
        if let Some(v) = args.keyword("SPLITBATCH") {
            crate::args::parse_bool(v, "SPLITBATCH")?;
        }
        Ok(RoundRobinSwitch {
            max,
            noutputs: bcx.noutputs,
            next: 0,
        })
    }
}

impl Element for RoundRobinSwitch {
    fn class_name(&self) -> &'static str {
        "RoundRobinSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        let i = self.next;
        self.next = if i + 1 >= self.max { 0 } else { i + 1 };
        if i < self.noutputs && i < self.max {
            Verdict::Out(i, packet)
        } else {
            Verdict::Drop(packet, OutputReason::NoOutput.into())
        }
    }
    /// Reads nothing of the packet: its turn is state; a turn beyond the outputs drops.
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(crate::record::Declared {
            drops: self.max > self.noutputs,
            stateful: true,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn cycles() {
        let mut e = ok("RoundRobinSwitch", "", 3);
        let ports: Vec<usize> = (0..7)
            .flat_map(|_| run(e.as_mut(), pkt(&frame())).ports())
            .collect();
        assert_eq!(ports, vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn max_limits_cycle() {
        let mut e = ok("RoundRobinSwitch", "2", 3);
        let ports: Vec<usize> = (0..4)
            .flat_map(|_| run(e.as_mut(), pkt(&frame())).ports())
            .collect();
        assert_eq!(ports, vec![0, 1, 0, 1]);
        let mut e = ok("RoundRobinSwitch", "MAX 3", 2);
        let drops: Vec<&str> = (0..3)
            .flat_map(|_| run(e.as_mut(), pkt(&frame())).drops)
            .collect();
        assert_eq!(drops, vec!["no-output"]);
        assert!(err("RoundRobinSwitch", "many", 2).contains("expected MAX"));
    }
}
