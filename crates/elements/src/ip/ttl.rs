//! `DecIPTTL`.

use super::{bad_outcome, IpHeaderReason};
use crate::args::parse_bool;
use crate::model::{Case, Effect, Field, FieldSet, Filter, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Element, PortCount};
use packet::{HeaderError, Packet};
use wire::checksum;

reasons! {
    /// Why `DecIPTTL` drops a packet (besides [`IpHeaderReason`]).
    pub enum DecIPTTLReason {
        /// TTL 1 or 0, and output 1 is not connected.
        Expired => "ttl-expired",
    }
}

/// `DecIPTTL([keywords ACTIVE, MULTICAST])`: decrements the IP time-to-live of the header
/// the network header annotation points at. 1/1-2.
///
/// A packet whose TTL is ≤ 1 leaves on output 1 if it is connected, else is dropped under
/// `ttl-expired`; otherwise the TTL is decremented, the header checksum updated
/// incrementally exactly as Click's decipttl.cc does ([`wire::checksum::ttl_decremented`],
/// RFC 1624), and the packet leaves on output 0. `ACTIVE false`
/// passes every packet untouched; `MULTICAST false` passes packets to multicast destinations
/// untouched. Packets without a network header (Click asserts) are dropped under
/// `no-ip-header`, and headers shorter than 20 bytes under `bad-ip-header`.
/// `stats()`: `drops` (expired packets).
pub struct DecIPTTL {
    active: bool,
    multicast: bool,
    has_out1: bool,
    drops: u64,
}

impl DecIPTTL {
    /// Builds the element.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<DecIPTTL, ConfigError> {
        args.check(0, &["ACTIVE", "MULTICAST"])?;
        let flag = |k: &str| args.keyword(k).map_or(Ok(true), |s| parse_bool(s, k));
        Ok(DecIPTTL {
            active: flag("ACTIVE")?,
            multicast: flag("MULTICAST")?,
            has_out1: bcx.noutputs >= 2,
            drops: 0,
        })
    }

    /// What `push` does, in place.
    #[inline(always)]
    fn step(&mut self, p: &mut Packet) -> crate::Step {
        if !self.active {
            return crate::Step::Out(0);
        }
        // Only the fixed 20 bytes are needed: the IHL is not checked (as in Click).
        let mut ip = match p.ipv4_mut() {
            Ok(ip) => ip,
            Err(HeaderError::Missing) => return crate::Step::Drop(IpHeaderReason::Missing.into()),
            Err(HeaderError::Truncated) => return crate::Step::Drop(IpHeaderReason::Bad.into()),
        };
        if !self.multicast && ip.dst_addr().is_multicast() {
            return crate::Step::Out(0);
        }
        let ttl = ip.ttl();
        if ttl <= 1 {
            self.drops += 1;
            return super::bad_step(self.has_out1, DecIPTTLReason::Expired);
        }
        ip.set_ttl(ttl - 1);
        ip.set_checksum(checksum::ttl_decremented(ip.checksum()));
        crate::Step::Out(0)
    }
}

impl Element for DecIPTTL {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "DecIPTTL"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    push_in_place!();
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("drops", self.drops)]
    }
    /// `push`'s tests in its order. No network header (`no-ip-header`) and a network header
    /// at the very end of the data (`bad-ip-header`) both read as `ip_avail` 0: those packets
    /// are left to the element.
    fn model(&self) -> Option<Model> {
        if !self.active {
            return Some(Model::pass());
        }
        let any = Filter::any;
        let mut cases = vec![
            Case::new(
                any().with(Field::IpAvail, FieldSet::single(0)),
                Outcome::Runtime,
            ),
            Case::new(
                any().with(Field::IpAvail, FieldSet::range(1, 19)),
                Outcome::Drop(IpHeaderReason::Bad.into()),
            ),
        ];
        if !self.multicast {
            cases.push(Case::new(
                any().with(Field::IpDst, FieldSet::prefix(0xe000_0000, 4, 32)),
                Outcome::Out(0),
            ));
        }
        cases.push(
            Case::new(
                any().with(Field::IpTtl, FieldSet::range(0, 1)),
                bad_outcome(self.has_out1, DecIPTTLReason::Expired),
            )
            .stat("drops"),
        );
        cases.push(Case::new(any(), Outcome::Out(0)).effect(Effect::DecTtl));
        Some(Model::new(cases))
    }
    /// The packets the model leaves to run time (no byte from the network header on) have
    /// no header to decrement: they are dropped, nothing written.
    fn declared(&self) -> Option<crate::record::Declared> {
        Some(crate::record::Declared {
            reads: vec![Field::IpAvail],
            drops: true,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use packet::Packet;

    #[test]
    fn decrements_with_incremental_checksum() {
        let mut e = build("DecIPTTL", "", 1).unwrap();
        for ttl in [2u8, 64, 255] {
            let b = ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, ttl, &[], &[0; 8]);
            let o = push(e.as_mut(), pkt(&b));
            let d = o.out[0].1.data();
            assert_eq!(d[8], ttl - 1);
            assert!(ip_ok(d));
            assert_eq!(
                d,
                &ipv4([10, 0, 0, 1], [10, 0, 0, 2], 17, ttl - 1, &[], &[0; 8])[..]
            );
        }
        // An all-ones-sum header (checksum field 0x0000 vs 0xFFFF) still verifies.
        let mut b = ipv4([0, 0, 0, 0], [0, 0, 0, 0], 0, 5, &[], &[]);
        b[10] = 0xff;
        b[11] = 0xff;
        let o = push(e.as_mut(), pkt(&b));
        assert_eq!(o.out[0].1.data()[8], 4);
    }

    #[test]
    fn expired_and_options() {
        let one = ipv4([10, 0, 0, 1], [224, 0, 0, 5], 17, 1, &[], &[]);
        let mut e = build("DecIPTTL", "", 1).unwrap();
        assert_eq!(push(e.as_mut(), pkt(&one)).drops, vec!["ttl-expired"]);
        assert_eq!(e.stats(), vec![("drops", 1)]);
        let mut e = build("DecIPTTL", "", 2).unwrap();
        let o = push(e.as_mut(), pkt(&one));
        assert_eq!((o.out[0].0, o.out[0].1.data()), (1, &one[..]));
        let mut e = build("DecIPTTL", "MULTICAST false", 1).unwrap();
        assert_eq!(push(e.as_mut(), pkt(&one)).out[0].1.data(), &one[..]);
        let mut e = build("DecIPTTL", "ACTIVE false", 1).unwrap();
        assert_eq!(push(e.as_mut(), Packet::from_bytes(&one)).out.len(), 1);
        let mut e = build("DecIPTTL", "", 1).unwrap();
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&one)).drops,
            vec!["no-ip-header"]
        );
        assert!(build("DecIPTTL", "ACTIVE maybe", 1).is_err());
        assert!(build("DecIPTTL", "3", 1).is_err());
    }
}
