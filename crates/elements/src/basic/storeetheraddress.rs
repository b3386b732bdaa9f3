//! `StoreEtherAddress`: writes an Ethernet address into packets.
//!
//! Click: `StoreEtherAddress(ADDR, OFFSET)` — "Writes an Ethernet address ADDR into packets
//! at offset OFFSET. OFFSET can be `src` or `dst` (6 or 0) or a byte offset. If a packet is
//! too short, it is sent to output 1 if that output exists, or dropped." Ports `1/1-2`. The
//! offset counts from the start of the data. Drops are counted as `too-short`.

use crate::args::parse_uint;
use crate::model::{Case, Effect, Field, FieldSet, Filter, Model, Op, Outcome};
use crate::reason::LengthReason;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;

/// `StoreEtherAddress(ADDR, OFFSET)`: overwrites 6 bytes at `OFFSET`.
#[derive(Debug, Clone)]
pub struct StoreEtherAddress {
    /// The address written.
    pub addr: [u8; 6],
    /// Byte offset from the start of the data.
    pub offset: usize,
    has_reject_output: bool,
}

impl StoreEtherAddress {
    /// Reads `ADDR` and `OFFSET` (mandatory, positional or keyword).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<StoreEtherAddress, ConfigError> {
        args.check(2, &["ADDR", "OFFSET"])?;
        let addr = bcx
            .names
            .eth(args.require(0, "ADDR", "Ethernet address")?)?
            .0;
        let off = args
            .require(1, "OFFSET", "`src`, `dst` or a byte offset")?
            .trim();
        let offset = match off.to_ascii_lowercase().as_str() {
            "src" => 6,
            "dst" => 0,
            _ => {
                let v = parse_uint(off, "OFFSET (`src`, `dst` or a byte offset)")?;
                usize::try_from(v)
                    .map_err(|_| ConfigError::new(format!("expected OFFSET, found `{off}`")))?
            }
        };
        Ok(StoreEtherAddress {
            addr,
            offset,
            has_reject_output: bcx.noutputs >= 2,
        })
    }
}

impl Element for StoreEtherAddress {
    fn class_name(&self) -> &'static str {
        "StoreEtherAddress"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, mut packet: Packet, _cx: &mut Context) -> Verdict {
        let end = self.offset.saturating_add(6);
        if let Some(b) = packet.data_mut().get_mut(self.offset..end) {
            b.copy_from_slice(&self.addr);
            Verdict::Out(0, packet)
        } else if self.has_reject_output {
            Verdict::Out(1, packet)
        } else {
            Verdict::Drop(packet, LengthReason::TooShort.into())
        }
    }
    /// Frames holding OFFSET + 6 bytes get the address written (`eth_dst` at 0, `eth_src`
    /// at 6, raw bytes elsewhere) and leave on output 0; shorter ones go to output 1 or are
    /// dropped (`too-short`). Opaque when OFFSET + 6 is beyond what `frame_len` tells.
    fn model(&self) -> Option<Model> {
        let end = u16::try_from(self.offset.checked_add(6)?).ok()?;
        let field = match self.offset {
            0 => Field::EthDst,
            6 => Field::EthSrc,
            o => Field::raw(u16::try_from(o).ok()?, 6)?,
        };
        let addr = u128::from(wire::ethernet::mac_to_u64(&self.addr));
        let long = Filter::any().with(Field::FrameLen, FieldSet::range(u128::from(end), 0xffff));
        let short = if self.has_reject_output {
            Outcome::Out(1)
        } else {
            Outcome::Drop(LengthReason::TooShort.into())
        };
        Some(Model::new(vec![
            Case::new(long, Outcome::Out(0)).effect(Effect::Write(field, Op::Set(addr))),
            Case::new(Filter::any(), short),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn stores_at_src_dst_and_offsets() {
        let mut e = ok("StoreEtherAddress", "0:0:0:0:0:9, src", 1);
        let o = run(e.as_mut(), pkt(&frame()));
        assert_eq!(
            &o.out[0].1.data()[..12],
            &[2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 9]
        );
        let mut e = ok("StoreEtherAddress", "ADDR 0:0:0:0:0:9, OFFSET dst", 1);
        assert_eq!(
            &run(e.as_mut(), pkt(&frame())).out[0].1.data()[..6],
            &[0, 0, 0, 0, 0, 9]
        );
        let mut e = ok("StoreEtherAddress", "0:0:0:0:0:9, 2", 1);
        assert_eq!(
            run(e.as_mut(), pkt(&[1; 8])).out[0].1.data(),
            &[1, 1, 0, 0, 0, 0, 0, 9]
        );
    }

    #[test]
    fn short_packets() {
        let mut e = ok("StoreEtherAddress", "0:0:0:0:0:9, src", 1);
        assert_eq!(run(e.as_mut(), pkt(&[1; 11])).drops, vec!["too-short"]);
        let mut e = ok("StoreEtherAddress", "0:0:0:0:0:9, src", 2);
        let o = run(e.as_mut(), pkt(&[1; 11]));
        assert_eq!(o.ports(), vec![1]);
        assert_eq!(o.out[0].1.data(), &[1; 11]);
        assert!(err("StoreEtherAddress", "0:0:0:0:0:9, middle", 1).contains("expected OFFSET"));
    }
}
