//! Queues and unqueuers, pass-through in FuseBox.
//!
//! Click: `Queue([CAPACITY])` — "Stores incoming packets in a first-in-first-out queue.
//! Drops incoming packets if the queue already holds CAPACITY packets. The default for
//! CAPACITY is 1000." Push input, pull output; ports `1/1`. `SimpleQueue`, `ThreadSafeQueue`,
//! `FullNoteQueue` and `NotifierQueue` take the same argument. `Unqueue([BURST, keywords
//! ACTIVE, LIMIT])` and `Unqueue2([BURST])` pull packets from their input whenever they can
//! and push them out.
//!
//! FuseBox runs every packet to completion: whatever is pushed into a queue is immediately
//! pulled by the unqueuer (or the pull sink) downstream, so the queue never holds a packet,
//! never reaches its capacity and never drops. These elements therefore forward each packet
//! unchanged out of output 0; the arguments are checked as Click checks them. Click's queues
//! have ports `1/1-2` (overflow drops leave on output 1 when it is connected); FuseBox
//! accepts a connected output 1 too, which never gets a packet.

use crate::args::{parse_bool, parse_uint};
use crate::{Args, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `Queue([CAPACITY])` and its variants: a FIFO that, run to completion, passes packets
/// straight through.
#[derive(Debug, Clone)]
pub struct Queue {
    class: &'static str,
    /// The configured capacity (default 1000); never reached in run-to-completion.
    pub capacity: u64,
}

impl Queue {
    /// Reads `CAPACITY` (positional or keyword).
    pub fn configure(class: &'static str, args: &Args) -> Result<Queue, ConfigError> {
        args.check(1, &["CAPACITY"])?;
        let capacity = match args.get(0, "CAPACITY") {
            Some(c) => parse_uint(c, "CAPACITY")?,
            None => 1000,
        };
        Ok(Queue { class, capacity })
    }
}

impl Element for Queue {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Out(0, packet)
    }
    /// Run to completion, a queue passes every packet straight through.
    fn model(&self) -> Option<crate::model::Model> {
        Some(crate::model::Model::pass())
    }
}

/// `Unqueue([BURST])` and `Unqueue2`: pull-to-push converters, pass-through here.
#[derive(Debug, Clone)]
pub struct Unqueue {
    class: &'static str,
    /// Packets moved per scheduling (Click's default 1); no effect here.
    pub burst: u64,
}

impl Unqueue {
    /// Reads `BURST` (positional or keyword) and checks `ACTIVE` and `LIMIT`.
    pub fn configure(class: &'static str, args: &Args) -> Result<Unqueue, ConfigError> {
        args.check(1, &["BURST", "ACTIVE", "LIMIT", "QUOTA"])?;
        let burst = match args.get(0, "BURST") {
            Some(b) => parse_uint(b, "BURST")?,
            None => 1,
        };
        if let Some(v) = args.keyword("ACTIVE") {
            parse_bool(v, "ACTIVE")?;
        }
        if let Some(v) = args.keyword("LIMIT") {
            v.trim().parse::<i64>().map_err(|_| {
                ConfigError::new(format!(
                    "expected LIMIT (an integer, -1 for none), found `{}`",
                    v.trim()
                ))
            })?;
        }
        Ok(Unqueue { class, burst })
    }
}

impl Element for Unqueue {
    fn class_name(&self) -> &'static str {
        self.class
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        Verdict::Out(0, packet)
    }
    /// Run to completion, a queue passes every packet straight through.
    fn model(&self) -> Option<crate::model::Model> {
        Some(crate::model::Model::pass())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn queues_pass_through() {
        for class in [
            "Queue",
            "SimpleQueue",
            "ThreadSafeQueue",
            "FullNoteQueue",
            "NotifierQueue",
            "Unqueue",
            "Unqueue2",
        ] {
            let mut e = ok(class, "", 1);
            assert_eq!(e.class_name(), class);
            let ports = if class.starts_with("Unqueue") {
                "1/1"
            } else {
                "1/1-2"
            };
            assert_eq!(e.port_count().describe(), ports, "{class}");
            let o = run(e.as_mut(), pkt(&frame()));
            assert_eq!(o.ports(), vec![0]);
            assert_eq!(o.out[0].1.data(), &frame()[..]);
            assert_eq!(e.held(), 0);
        }
    }

    #[test]
    fn capacity_and_burst() {
        let e = ok("Queue", "", 1);
        assert_eq!(
            e.as_any().downcast_ref::<Queue>().map(|q| q.capacity),
            Some(1000)
        );
        let e = ok("SimpleQueue", "CAPACITY 20", 1);
        assert_eq!(
            e.as_any().downcast_ref::<Queue>().map(|q| q.capacity),
            Some(20)
        );
        let e = ok("Unqueue", "8, ACTIVE true, LIMIT -1", 1);
        assert_eq!(
            e.as_any().downcast_ref::<Unqueue>().map(|q| q.burst),
            Some(8)
        );
        assert!(err("Queue", "big", 1).contains("expected CAPACITY"));
        assert!(err("Queue", "1, 2", 1).contains("too many"));
        assert!(err("Unqueue", "LIMIT x", 1).contains("LIMIT"));
    }
}
