//! The IP family: header checks and annotations (`CheckIPHeader`, `MarkIPHeader`,
//! `GetIPAddress`, …), route lookups (`RadixIPLookup` and friends, `LookupIP6Route`), TTL and options
//! processing, fragmentation, checksum setters, `IPPrint` and `IPEncap`.
//!
//! Every element follows Click's documented behaviour; where FuseBox differs (no wall
//! clock, no random numbers, missing annotations) the element's documentation says how.
//! Elements that read the IP header through the network header annotation (set by
//! `CheckIPHeader`, `MarkIPHeader`, `IPEncap`) drop packets without one under
//! `no-ip-header` (Click would abort on its assertion), and those whose header is not
//! whole there under `bad-ip-header` ([`IpHeaderReason`]).

mod anno;
pub(crate) mod check;
mod cksum;
mod encap;
mod frag;
mod lookup;
mod lookup6;
mod options;
mod print;
pub mod tables;
mod ttl;

pub use anno::{
    DropBroadcasts, DropBroadcastsReason, FixIPSrc, GetIPAddress, GetIPAddressReason, SetIPAddress,
    SetPacketType,
};
pub use check::{
    CheckICMPReason, CheckIPHeader, CheckIPReason, CheckL4Header, CheckTCPReason, CheckUDPReason,
    L4Kind, MarkIPHeader,
};
pub use cksum::{SetIPChecksum, SetL4ChecksumReason, SetTCPChecksum, SetUDPChecksum};
pub use encap::{IPEncap, IPEncapReason};
pub use frag::{IPFragmenter, IPFragmenterReason};
pub use lookup::{IPLookup, Lpm, Route};
pub use lookup6::{mask6, LookupIP6Reason, LookupIP6Route, Lpm6, Route6};
pub use options::{IPGWOptions, IPGWOptionsReason};
pub use print::IPPrint;
pub use ttl::{DecIPTTL, DecIPTTLReason};

use crate::model::{Case, Field, FieldSet, Filter, Outcome};
pub use crate::reason::IpHeaderReason;
use crate::{BuildCtx, ConfigError, Verdict};
use packet::{HeaderError, Packet};
use std::net::Ipv4Addr;
use wire::ipv4::Packet as Ipv4Packet;

/// The IPv4 header length (IHL × 4) of the header starting `b`.
pub(crate) fn ihl(b: &[u8]) -> usize {
    b.first().map_or(0, |v| usize::from(v & 0x0f) * 4)
}

/// True when the IHL of `ip` (a view with its fixed 20 bytes present) is at least 20 and
/// within the bytes the view holds: the header the family's elements need whole.
#[inline]
pub(crate) fn ihl_fits<T: AsRef<[u8]>>(ip: &Ipv4Packet<T>) -> bool {
    let hl = ip.header_len();
    hl >= 20 && hl <= ip.as_ref().len()
}

/// The IPv4 header the network header annotation points at ([`Packet::ipv4`]), checked to
/// hold its IHL as well ([`ihl_fits`]): `(view over the header and following bytes, header
/// length)`.
#[inline]
pub(crate) fn ip_header(p: &Packet) -> Option<(Ipv4Packet<&[u8]>, usize)> {
    let ip = p.ipv4().ok().filter(ihl_fits)?;
    let hl = ip.header_len();
    Some((ip, hl))
}

/// Writable [`ip_header`], with the drop reason when there is none: `no-ip-header` without
/// the annotation, `bad-ip-header` for fewer than 20 bytes or an IHL that does not fit.
#[inline]
pub(crate) fn ip_header_mut(
    p: &mut Packet,
) -> Result<(Ipv4Packet<&mut [u8]>, usize), IpHeaderReason> {
    match p.ipv4_mut() {
        Ok(ip) if ihl_fits(&ip) => {
            let hl = ip.header_len();
            Ok((ip, hl))
        }
        Ok(_) | Err(HeaderError::Truncated) => Err(IpHeaderReason::Bad),
        Err(HeaderError::Missing) => Err(IpHeaderReason::Missing),
    }
}

/// Sends a bad packet to output 1 when it is connected (Click's `checked_output_push(1, p)`
/// and the `noutputs() == 2` tests), or drops it under `reason`.
#[inline]
pub(crate) fn bad_out(has_out1: bool, p: Packet, reason: impl Into<&'static str>) -> Verdict {
    bad_step(has_out1, reason).verdict(p)
}

/// [`bad_out`] in place: output 1 when connected, else a drop under `reason`.
#[inline(always)]
pub(crate) fn bad_step(has_out1: bool, reason: impl Into<&'static str>) -> crate::Step {
    if has_out1 {
        crate::Step::Out(1)
    } else {
        crate::Step::Drop(reason.into())
    }
}

/// The model outcome of [`bad_out`]: output 1 when connected, else a drop under `reason`.
pub(crate) fn bad_outcome(has_out1: bool, reason: impl Into<&'static str>) -> Outcome {
    if has_out1 {
        Outcome::Out(1)
    } else {
        Outcome::Drop(reason.into())
    }
}

/// The first model cases of an element that reads the header at the network header
/// annotation and needs all of it ([`ip_header`]), dropping the rest under `no-ip-header`
/// and `bad-ip-header`.
///
/// No annotation and an annotation at the very end of the data both read as `ip_avail` 0
/// (no field tells them apart), yet one is `no-ip-header` and the other `bad-ip-header`:
/// those packets are left to the element. Then fewer than 20 bytes, IHL < 5, and a header
/// longer than the bytes there (one case per IHL) are `bad-ip-header`.
pub(crate) fn ip_header_cases() -> Vec<Case> {
    let avail = |lo: u128, hi: u128| Filter::any().with(Field::IpAvail, FieldSet::range(lo, hi));
    let bad = |f: Filter| Case::new(f, Outcome::Drop(IpHeaderReason::Bad.into()));
    let mut cases = vec![
        Case::new(avail(0, 0), Outcome::Runtime),
        bad(avail(1, 19)),
        bad(Filter::any().with(Field::IpIhl, FieldSet::range(0, 4))),
    ];
    for ihl in 6..=15u128 {
        cases.push(bad(
            avail(0, 4 * ihl - 1).with(Field::IpIhl, FieldSet::single(ihl))
        ));
    }
    cases
}

/// The IPv4 flags values with DF (0x4000 of the flags/offset word, flag bit 1) set.
pub(crate) fn df_flags() -> FieldSet {
    FieldSet::from_intervals([(2, 3), (6, 7)])
}

/// Parses a space-separated list of IPv4 addresses.
pub(crate) fn ip_list(s: &str, bcx: &BuildCtx) -> Result<Vec<Ipv4Addr>, ConfigError> {
    s.split_whitespace().map(|w| bcx.names.ipv4(w)).collect()
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers for the family's unit tests: a build context, pushing packets, and small
    //! IPv4/UDP/TCP packet builders.
    use crate::{BuildCtx, Context, Element, Names, Verdict};
    use packet::{Packet, Timestamp};
    use std::path::Path;
    use wire::build::Frame;

    /// Builds `class(config)` with `noutputs` connected outputs.
    pub fn build(
        class: &str,
        config: &str,
        noutputs: usize,
    ) -> Result<Box<dyn Element>, crate::ConfigError> {
        let names = Names::new();
        let bcx = BuildCtx {
            name: "nf/e",
            ninputs: 1,
            noutputs,
            names: &names,
            base_dir: Path::new("."),
        };
        crate::build(class, config, &bcx)
    }

    /// What one push produced: (port, packet) outputs and (reason) drops, in order.
    pub struct Outcome {
        pub out: Vec<(usize, Packet)>,
        pub drops: Vec<&'static str>,
        pub created: u64,
    }

    /// Pushes `p` on port 0 at virtual time `now` (ns).
    pub fn push_at(e: &mut dyn Element, p: Packet, now: u64) -> Outcome {
        let mut cx = Context::new(Timestamp(now));
        let v = e.push(0, p, &mut cx);
        let mut out: Vec<(usize, Packet)> = Vec::new();
        let mut drops = Vec::new();
        match v {
            Verdict::Out(port, p) => out.push((port, p)),
            Verdict::Drop(_, r) => drops.push(r),
            Verdict::Done => {}
        }
        out.extend(cx.take_emitted());
        drops.extend(cx.take_dropped().map(|(_, r)| r));
        Outcome {
            out,
            drops,
            created: cx.take_created(),
        }
    }

    /// Pushes `p` on port 0.
    pub fn push(e: &mut dyn Element, p: Packet) -> Outcome {
        push_at(e, p, 0)
    }

    /// An IPv4 header (20 bytes + `opts`, a multiple of 4 bytes) followed by `payload`, with
    /// a valid checksum (identification 0x1234, no Ethernet header).
    pub fn ipv4(
        src: [u8; 4],
        dst: [u8; 4],
        proto: u8,
        ttl: u8,
        opts: &[u8],
        payload: &[u8],
    ) -> Vec<u8> {
        Frame::ip(src, dst, proto)
            .ttl(ttl)
            .ident(0x1234)
            .ip_options(opts)
            .payload(payload)
            .no_ethernet()
            .build()
    }

    /// A UDP datagram (8-byte header + payload) with a correct checksum, in IPv4.
    pub fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        Frame::udp(src, dst, sport, dport)
            .ident(0x1234)
            .payload(payload)
            .no_ethernet()
            .build()
    }

    pub fn pkt_at(bytes: &[u8], off: usize) -> Packet {
        let mut p = Packet::from_bytes(bytes);
        p.set_network_header(off);
        p.set_transport_header(off + super::ihl(&bytes[off..]));
        p
    }
    pub fn pkt(bytes: &[u8]) -> Packet {
        pkt_at(bytes, 0)
    }
    pub fn ip_ok(b: &[u8]) -> bool {
        wire::checksum::data(&b[..super::ihl(b)]) == 0
    }
}
