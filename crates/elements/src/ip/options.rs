//! `IPGWOptions`: Record Route and Timestamp option processing.

use super::{bad_out, ip_header_cases, ip_header_mut, ip_list};
use crate::model::{Case, Field, FieldSet, Filter, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use std::net::Ipv4Addr;

reasons! {
    /// Why `IPGWOptions` drops a packet (besides [`super::IpHeaderReason`]).
    pub enum IPGWOptionsReason {
        /// An erroneous Record Route or Timestamp option, and output 1 is not connected.
        BadOptions => "bad-ip-options",
    }
}

const EOL: u8 = 0;
const NOP: u8 = 1;
const RR: u8 = 7;
const TS: u8 = 68;

/// `IPGWOptions(MYADDR [, OTHERADDRS])`: processes the Record Route and Timestamp options of
/// the IP header (network header annotation), as a gateway does. 1/1-2.
///
/// Packets without options pass untouched. Record Route: if there is room (pointer − 1 ≥ 3
/// and 4 bytes left) MYADDR is written at the pointer and the pointer advanced by 4; a full
/// option (pointer − 1 = length) is left alone; any other pointer is an error. Timestamp:
/// flag 0 records a timestamp, flag 1 MYADDR and a timestamp, flag 3 a timestamp only where
/// the pre-specified address is MYADDR or one of OTHERADDRS; when there is no room the
/// overflow counter is incremented (an overflowing overflow counter, a pointer below 5 or
/// another flag is an error). Timestamps are milliseconds since midnight UTC of the virtual
/// clock (`cx.now`, never the wall clock), big-endian. Options that are not RR/TS are skipped;
/// an option length below 2 or beyond the header is an error. If anything changed the header
/// checksum is recomputed. Erroneous packets leave on output 1 if it is connected, else are
/// dropped under `bad-ip-options` (Click also records the offending offset for ICMPError's
/// parameter problem pointer; FuseBox has no such annotation). No network header:
/// `no-ip-header`; header length beyond the packet: `bad-ip-header`. `stats()`: `drops`.
pub struct IPGWOptions {
    my: Ipv4Addr,
    mine: Vec<Ipv4Addr>,
    has_out1: bool,
    drops: u64,
}

impl IPGWOptions {
    /// Builds the element.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<IPGWOptions, ConfigError> {
        args.check(2, &["MYADDR", "OTHERADDRS"])?;
        let my = bcx
            .names
            .ipv4(args.require(0, "MYADDR", "an IP address")?)?;
        let mut mine = match args.get(1, "OTHERADDRS") {
            Some(s) => ip_list(s, bcx)?,
            None => Vec::new(),
        };
        mine.push(my);
        Ok(IPGWOptions {
            my,
            mine,
            has_out1: bcx.noutputs >= 2,
            drops: 0,
        })
    }

    /// Processes the options of header `h` (`hl` bytes); `Ok(changed)` or `Err(offset)`.
    fn process(&self, h: &mut [u8], hl: usize, ms: u32) -> Result<bool, usize> {
        let mut changed = false;
        let mut oi = 20;
        while oi < hl {
            let ty = h[oi];
            if ty == NOP {
                oi += 1;
                continue;
            } else if ty == EOL {
                break;
            }
            let xlen = match h.get(oi + 1) {
                Some(&l) if oi + 1 < hl => usize::from(l),
                _ => return Err(oi + 1),
            };
            if xlen < 2 || oi + xlen > hl {
                return Err(oi + 1);
            }
            if ty != RR && ty != TS {
                oi += xlen;
                continue;
            }
            let opt = &mut h[oi..oi + xlen];
            if xlen < 3 || (ty == TS && xlen < 4) {
                return Err(oi + 1);
            }
            // The pointer is 1-origin; 0 is an error for both options.
            let Some(p) = usize::from(opt[2]).checked_sub(1) else {
                return Err(oi + 2);
            };
            if ty == RR {
                if p >= 3 && p + 4 <= xlen {
                    opt[p..p + 4].copy_from_slice(&self.my.octets());
                    opt[2] = opt[2].wrapping_add(4);
                    changed = true;
                } else if p != xlen {
                    return Err(oi + 2);
                }
            } else {
                let oflw = opt[3] >> 4;
                let flg = opt[3] & 0x0f;
                let mut overflowed = false;
                if p < 4 {
                    return Err(oi + 2);
                } else if flg == 0 {
                    if p + 4 <= xlen {
                        opt[p..p + 4].copy_from_slice(&ms.to_be_bytes());
                        opt[2] = opt[2].wrapping_add(4);
                        changed = true;
                    } else {
                        overflowed = true;
                    }
                } else if flg == 1 {
                    if p + 8 <= xlen {
                        opt[p..p + 4].copy_from_slice(&self.my.octets());
                        opt[p + 4..p + 8].copy_from_slice(&ms.to_be_bytes());
                        opt[2] = opt[2].wrapping_add(8);
                        changed = true;
                    } else {
                        overflowed = true;
                    }
                } else if flg == 3 && p + 8 <= xlen {
                    let a = Ipv4Addr::new(opt[p], opt[p + 1], opt[p + 2], opt[p + 3]);
                    if self.mine.contains(&a) {
                        opt[p + 4..p + 8].copy_from_slice(&ms.to_be_bytes());
                        opt[2] = opt[2].wrapping_add(8);
                        changed = true;
                    }
                } else {
                    return Err(oi + 3);
                }
                if overflowed {
                    if oflw < 15 {
                        opt[3] = ((oflw + 1) << 4) | flg;
                        changed = true;
                    } else {
                        return Err(oi + 3);
                    }
                }
            }
            oi += xlen;
        }
        Ok(changed)
    }
}

impl Element for IPGWOptions {
    fn class_name(&self) -> &'static str {
        "IPGWOptions"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, mut p: Packet, cx: &mut Context) -> Verdict {
        let (mut ip, hl) = match ip_header_mut(&mut p) {
            Ok(x) => x,
            Err(r) => return Verdict::Drop(p, r.into()),
        };
        if hl <= 20 {
            return Verdict::Out(0, p);
        }
        let ms =
            ((cx.now.secs() % 86_400) * 1000 + u64::from(cx.now.subsec_nanos() / 1_000_000)) as u32;
        // Like Click, options are updated in place, so an error in a later option leaves
        // the earlier ones processed.
        match self.process(ip.as_mut(), hl, ms) {
            Ok(changed) => {
                if changed {
                    ip.fill_checksum();
                }
                Verdict::Out(0, p)
            }
            Err(_offset) => {
                self.drops += 1;
                bad_out(self.has_out1, p, IPGWOptionsReason::BadOptions)
            }
        }
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("drops", self.drops)]
    }
    /// Bad headers as `push` finds them (`ip_header_cases` in the module); a 20-byte header (no
    /// options) passes untouched; packets with options are processed at run time.
    fn model(&self) -> Option<Model> {
        let mut cases = ip_header_cases();
        cases.push(Case::new(
            Filter::any().with(Field::IpIhl, FieldSet::single(5)),
            Outcome::Out(0),
        ));
        cases.push(Case::new(Filter::any(), Outcome::Runtime));
        Some(Model::new(cases))
    }
    /// Packets with options (its model's run-time case): the options read and updated in
    /// place (record route, timestamps), the header checksum computed afresh over the whole
    /// header; bad options counted and dropped (or sent to output 1); no header: dropped.
    fn declared(&self) -> Option<crate::record::Declared> {
        use crate::record::{Access, Declared};
        let d = Declared {
            ip_checksum: true,
            ip_options: Access::Write,
            // The packets without a header the model leaves to run time are dropped.
            drops: true,
            stateful: true,
            ..Default::default()
        };
        Some(d.read(&Declared::IP_HEADER))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use packet::Packet;

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    #[test]
    fn record_route_is_filled() {
        // RR with room for 2 addresses, then EOL padding: 7, 11, 4, 8 zero bytes, 0.
        let opts = [7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let b = ipv4(A, B, 17, 64, &opts, &[1, 2, 3]);
        let mut e = build("IPGWOptions", "192.168.1.1", 1).unwrap();
        let o = push(e.as_mut(), pkt(&b));
        let d = o.out[0].1.data().to_vec();
        assert_eq!(&d[20..32], &[7, 11, 8, 192, 168, 1, 1, 0, 0, 0, 0, 0]);
        assert!(ip_ok(&d));
        let o = push(e.as_mut(), pkt(&d));
        let d = o.out[0].1.data().to_vec();
        assert_eq!(&d[20..32], &[7, 11, 12, 192, 168, 1, 1, 192, 168, 1, 1, 0]);
        // Full: unchanged.
        let o = push(e.as_mut(), pkt(&d));
        assert_eq!(o.out[0].1.data(), &d[..]);
        // Bad pointer.
        let bad = ipv4(A, B, 17, 64, &[7, 7, 2, 0, 0, 0, 0, 0], &[]);
        assert_eq!(push(e.as_mut(), pkt(&bad)).drops, vec!["bad-ip-options"]);
        let mut e2 = build("IPGWOptions", "192.168.1.1", 2).unwrap();
        assert_eq!(push(e2.as_mut(), pkt(&bad)).out[0].0, 1);
        // No options: untouched.
        let plain = ipv4(A, B, 17, 64, &[], &[]);
        assert_eq!(push(e.as_mut(), pkt(&plain)).out[0].1.data(), &plain[..]);
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&plain)).drops,
            vec!["no-ip-header"]
        );
    }

    #[test]
    fn timestamps() {
        // TS flag 1 with room for one (addr, ts) pair.
        let opts = [68, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let b = ipv4(A, B, 17, 64, &opts, &[]);
        let mut e = build("IPGWOptions", "1.2.3.4, 5.6.7.8", 1).unwrap();
        let now = 86_400 * 3 + 3_600; // 01:00:00.250 UTC
        let o = push_at(e.as_mut(), pkt(&b), now * 1_000_000_000 + 250_000_000);
        let d = o.out[0].1.data().to_vec();
        let ms = 3_600_250u32.to_be_bytes();
        assert_eq!(
            &d[20..32],
            &[68, 12, 13, 1, 1, 2, 3, 4, ms[0], ms[1], ms[2], ms[3]]
        );
        assert!(ip_ok(&d));
        // Full now: overflow counter goes to 1.
        let o = push(e.as_mut(), pkt(&d));
        assert_eq!(o.out[0].1.data()[23], 0x11);
        // Flag 3: only our addresses get a timestamp.
        let opts = [68, 12, 5, 3, 5, 6, 7, 8, 0, 0, 0, 0];
        let o = push(e.as_mut(), pkt(&ipv4(A, B, 17, 64, &opts, &[])));
        assert_eq!(o.out[0].1.data()[22], 13);
        let opts = [68, 12, 5, 3, 9, 9, 9, 9, 0, 0, 0, 0];
        let o = push(e.as_mut(), pkt(&ipv4(A, B, 17, 64, &opts, &[])));
        assert_eq!(o.out[0].1.data()[22], 5);
        // Flag 2 is an error; so is a bad option length.
        let opts = [68, 12, 5, 2, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            push(e.as_mut(), pkt(&ipv4(A, B, 17, 64, &opts, &[]))).drops,
            vec!["bad-ip-options"]
        );
        let opts = [1, 1, 130, 9, 0, 0, 0, 0];
        assert_eq!(
            push(e.as_mut(), pkt(&ipv4(A, B, 17, 64, &opts, &[]))).drops,
            vec!["bad-ip-options"]
        );
        assert!(build("IPGWOptions", "", 1).is_err());
        assert!(build("IPGWOptions", "1.2.3.4, 1.2.3", 1).is_err());
    }
}
