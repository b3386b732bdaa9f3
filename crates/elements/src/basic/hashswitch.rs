//! `HashSwitch`: chooses the output by a hash of packet bytes.
//!
//! Click: `HashSwitch(OFFSET, LENGTH)` — "Can have any number of outputs. Chooses the
//! output on which to emit each packet based on a hash of the LENGTH bytes starting at
//! OFFSET. Could be used for stochastic fair queuing." Ports `1/1-`. Click's hash is the sum
//! `d` of those bytes; with 2, 4 or 8 outputs the output is `(d ^ (d >> 4)) & (n - 1)`,
//! otherwise `d % n`. Packets shorter than `OFFSET + LENGTH` go to output 0. `LENGTH` must
//! be positive ("length must be > 0").

use crate::args::parse_uint;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `HashSwitch(OFFSET, LENGTH)`: output from a byte-sum hash.
#[derive(Debug, Clone)]
pub struct HashSwitch {
    /// First byte hashed.
    pub offset: usize,
    /// Bytes hashed.
    pub length: usize,
    /// Number of outputs (connected, at least 1).
    pub noutputs: usize,
}

impl HashSwitch {
    /// Reads `OFFSET` and `LENGTH` (mandatory).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<HashSwitch, ConfigError> {
        args.check(2, &["OFFSET", "LENGTH"])?;
        let num = |i, k: &str, what| -> Result<usize, ConfigError> {
            let v = parse_uint(args.require(i, k, what)?, k)?;
            usize::try_from(v)
                .map_err(|_| ConfigError::new(format!("expected {k} ({what}), found `{v}`")))
        };
        let offset = num(0, "OFFSET", "byte offset")?;
        let length = num(1, "LENGTH", "number of bytes")?;
        if length == 0 {
            return Err(ConfigError::new("expected LENGTH > 0, found 0"));
        }
        Ok(HashSwitch {
            offset,
            length,
            noutputs: bcx.noutputs.max(1),
        })
    }

    /// The output Click chooses for `data`.
    pub fn output(&self, data: &[u8]) -> usize {
        let Some(bytes) = self
            .offset
            .checked_add(self.length)
            .and_then(|end| data.get(self.offset..end))
        else {
            return 0;
        };
        let d: usize = bytes.iter().map(|&b| usize::from(b)).sum();
        let n = self.noutputs;
        if matches!(n, 2 | 4 | 8) {
            (d ^ (d >> 4)) & (n - 1)
        } else {
            d % n
        }
    }
}

impl Element for HashSwitch {
    fn class_name(&self) -> &'static str {
        "HashSwitch"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, usize::MAX)
    }
    fn push(&mut self, _port: usize, packet: Packet, _cx: &mut Context) -> Verdict {
        let port = self.output(packet.data());
        Verdict::Out(port, packet)
    }
    /// Reads the hashed bytes (as raw fields of at most 16 bytes) and the frame's length
    /// (too short: output 0); nothing is written, nothing dropped. Hashed bytes beyond what
    /// raw fields reach (an offset past 65535, more than 64 raw fields) declare nothing.
    fn declared(&self) -> Option<crate::record::Declared> {
        let mut reads = vec![space::Field::FrameLen];
        let mut at = self.offset;
        let end = self.offset.checked_add(self.length)?;
        while at < end {
            let len = (end - at).min(16);
            reads.push(space::Field::raw(u16::try_from(at).ok()?, len as u8)?);
            if reads.len() > 64 {
                return None;
            }
            at += len;
        }
        Some(crate::record::Declared {
            reads,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn power_of_two_outputs_fold_the_sum() {
        let mut e = ok("HashSwitch", "1, 2", 2);
        // d = 1 + 0 = 1 -> 1; d = 16 -> 16 ^ 1 = 17 -> 1; d = 17 -> 17 ^ 1 = 16 -> 0.
        assert_eq!(run(e.as_mut(), pkt(&[9, 1, 0])).ports(), vec![1]);
        assert_eq!(run(e.as_mut(), pkt(&[9, 8, 8])).ports(), vec![1]);
        assert_eq!(run(e.as_mut(), pkt(&[9, 9, 8])).ports(), vec![0]);
        let mut e = ok("HashSwitch", "0, 1", 4);
        // d = 0x35 = 53 -> 53 ^ 3 = 54 -> 54 & 3 = 2.
        assert_eq!(run(e.as_mut(), pkt(&[0x35])).ports(), vec![2]);
    }

    #[test]
    fn other_counts_use_modulo() {
        let mut e = ok("HashSwitch", "OFFSET 0, LENGTH 2", 3);
        assert_eq!(run(e.as_mut(), pkt(&[200, 100])).ports(), vec![0]);
        assert_eq!(run(e.as_mut(), pkt(&[200, 101])).ports(), vec![1]);
        assert_eq!(run(e.as_mut(), pkt(&[16, 0])).ports(), vec![1]);
    }

    #[test]
    fn short_packets_to_output_0() {
        let mut e = ok("HashSwitch", "4, 4", 3);
        assert_eq!(run(e.as_mut(), pkt(&[1; 7])).ports(), vec![0]);
        let mut e = ok("HashSwitch", "18446744073709551615, 4", 3);
        assert_eq!(run(e.as_mut(), pkt(&[1; 7])).ports(), vec![0]);
    }

    #[test]
    fn bad_arguments() {
        assert!(err("HashSwitch", "0, 0", 2).contains("LENGTH > 0"));
        assert!(err("HashSwitch", "0", 2).contains("missing argument LENGTH"));
        assert!(err("HashSwitch", "x, 1", 2).contains("expected OFFSET"));
    }
}
