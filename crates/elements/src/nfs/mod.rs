//! The network functions of SpeedyBox's chains (Jiang et al., §VII) that Click does not ship:
//! a Maglev load balancer ([`Maglev`]), a per-flow traffic monitor ([`Monitor`]) and a
//! linear-scan header blacklist ([`BlacklistFilter`]). The fourth NF of the paper's first
//! chain, the Mazu NAT, is [`crate::rewriter::MazuNAT`], built on the rewriter family.
//!
//! Each element works in every execution mode: naive (`push`), synthesis (the blacklist has a
//! model; the others are run as they are) and the fast path (each records what it does for a
//! flow's first packet and replays its state functions for later ones; see [`crate::record`]).

mod blacklist;
pub mod maglev;
mod monitor;

pub use blacklist::{BlacklistFilter, BlacklistFilterReason};
pub use maglev::{Maglev, MaglevReason};
pub use monitor::Monitor;

use crate::BuildCtx;

use wire::ip::protocol::{TCP, UDP};

/// A flow as an element sees it: protocol, addresses and ports (0 for protocols without
/// ports and for later fragments: [`packet::Ports::TcpUdp`]). Orders by protocol, source,
/// destination.
pub type FlowKey = packet::Ipv4FlowKey;

/// What an element reads of an IPv4 packet's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct L4 {
    /// The flow.
    pub key: FlowKey,
    /// IP header length in bytes.
    pub hl: usize,
    /// False for a later fragment (fragment offset ≠ 0).
    pub first_frag: bool,
    /// Bytes from the transport header to the end of the data.
    pub tlen: usize,
}

impl L4 {
    /// Reads the bytes `ip` (from the IPv4 header to the end of the data), or `None` when they
    /// do not start with an IPv4 header (version 4, header length 20 or more, within the data).
    /// Ports are read only for TCP and UDP first fragments with at least 4 transport bytes.
    #[inline]
    pub fn parse(ip: &[u8]) -> Option<L4> {
        let v = packet::Ipv4Flow::parse(ip).filter(|v| v.version() == 4)?;
        Some(L4 {
            key: v.key(packet::Ports::TcpUdp),
            hl: v.header_len(),
            first_frag: v.first_fragment(),
            tlen: v.transport_len(),
        })
    }
}

/// The guard of a recorded TCP/UDP packet whose handling needs its ports and at least
/// `min_l4` transport bytes: a later packet of the flow takes the recorded action only if
/// it is an IPv4 first fragment with that many transport bytes (element view).
pub(crate) fn l4_guard(min_l4: u128) -> crate::model::Filter {
    use crate::model::{Field, FieldSet, Filter};
    Filter::any()
        .with(Field::IpVersion, FieldSet::single(4))
        .with(Field::IpIhl, FieldSet::range(5, 15))
        .with(Field::IpFragOffset, FieldSet::single(0))
        .with(Field::L4Avail, FieldSet::range(min_l4, 0xffff))
}

/// Resolves a file named in a configuration: relative to the configuration's folder first;
/// a path that only exists relative to the working directory (given with `--define`) is
/// taken as it is.
pub(crate) fn config_path(bcx: &BuildCtx, written: &str) -> std::path::PathBuf {
    let written = std::path::PathBuf::from(written);
    match bcx.base_dir.join(&written) {
        p if p.exists() || !written.exists() => p,
        _ => written,
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Packets and element plumbing for the unit tests of these NFs (and `MazuNAT`'s).
    use crate::{BuildCtx, ConfigError, Context, Element, Names, Verdict};
    use packet::{Packet, Timestamp};
    use std::path::Path;
    use wire::build::Frame;
    use wire::checksum;

    /// Builds `class(config)` as element `nf/e` with `n` inputs and outputs, files relative
    /// to `dir`.
    pub fn make_in(
        class: &str,
        config: &str,
        n: usize,
        dir: &Path,
    ) -> Result<Box<dyn Element>, ConfigError> {
        let names = Names::new();
        let bcx = BuildCtx {
            name: "nf/e",
            ninputs: n,
            noutputs: n,
            names: &names,
            base_dir: dir,
        };
        crate::build(class, config, &bcx)
    }

    /// Builds, panicking on a configuration error (tests only).
    pub fn ok(class: &str, config: &str, n: usize) -> Box<dyn Element> {
        match make_in(class, config, n, Path::new(".")) {
            Ok(e) => e,
            Err(err) => panic!("{class}({config}) refused: {err}"),
        }
    }

    /// The error message of a configuration that must be refused.
    pub fn err(class: &str, config: &str) -> String {
        match make_in(class, config, 2, Path::new(".")) {
            Ok(_) => panic!("{class}({config}) accepted"),
            Err(e) => e.message,
        }
    }

    /// An Ethernet frame with an IPv4 TCP (proto 6, flags ACK) or UDP header and 10 payload
    /// bytes, valid checksums; MAC header annotation at 0, network header at 14.
    pub fn frame(proto: u8, src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Packet {
        let f = if proto == wire::IpProtocol::TCP {
            Frame::tcp(src, dst, sport, dport).flags(wire::tcp::flags::ACK)
        } else {
            Frame::udp(src, dst, sport, dport)
        };
        let payload: Vec<u8> = (1..=10).collect();
        let mut p = Packet::from_bytes(&f.payload(&payload).build());
        p.set_mac_header(0);
        p.set_network_header(14);
        p
    }

    pub fn checksums_ok(p: &Packet) -> bool {
        let ip = &p.data()[14..];
        if checksum::data(&ip[..20]) != 0 {
            return false;
        }
        let proto = ip[9];
        let src: [u8; 4] = ip[12..16].try_into().unwrap_or_default();
        let dst: [u8; 4] = ip[16..20].try_into().unwrap_or_default();
        let len = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        let s = checksum::combine(&[
            checksum::pseudo_header_v4(src, dst, proto, (len - 20) as u16),
            checksum::sum(&ip[20..len]),
        ]);
        checksum::fold(s) == 0xffff
    }
    pub fn push(
        e: &mut dyn Element,
        port: usize,
        p: Packet,
        now: u64,
    ) -> Result<(usize, Packet), &'static str> {
        let mut cx = Context::new(Timestamp(now));
        match e.push(port, p, &mut cx) {
            Verdict::Out(o, p) => Ok((o, p)),
            Verdict::Drop(_, r) => Err(r),
            Verdict::Done => Err("done"),
        }
    }
    pub fn push_recording(
        e: &mut dyn Element,
        port: usize,
        p: Packet,
        now: u64,
    ) -> (
        Result<(usize, Packet), &'static str>,
        crate::record::Step,
        Option<Timestamp>,
    ) {
        let mut cx = Context::new(Timestamp(now));
        cx.recorder.active = true;
        cx.recorder.begin();
        let v = match e.push(port, p, &mut cx) {
            Verdict::Out(o, p) => Ok((o, p)),
            Verdict::Drop(_, r) => Err(r),
            Verdict::Done => Err("done"),
        };
        let expiry = cx.recorder.expiry;
        (v, cx.recorder.take(), expiry)
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use crate::{Context, Verdict};
    use packet::{Packet, Timestamp};
    use proptest::prelude::*;

    proptest! {
        /// Arbitrary bytes at arbitrary header offsets never panic any of the four NFs, and
        /// every packet is forwarded or dropped with a reason, while recording or not.
        #[test]
        fn garbage_is_forwarded_or_dropped(
            mut data in prop::collection::vec(any::<u8>(), 0..80),
            ip_off in 0usize..40,
            plausible in any::<bool>(),
            port in 0usize..2,
            recording in any::<bool>(),
            index in 0u64..10,
        ) {
            let mut elements = [
                (ok("Maglev", "BACKEND a 10.0.0.1 02:00:00:00:00:01, BACKEND b 10.0.0.2 02:00:00:00:00:02", 2), 2),
                (ok("Monitor", "", 1), 1),
                (ok("BlacklistFilter", "deny tcp && dst port 23, src net 10/8", 1), 1),
                (ok("MazuNAT", "EXTERNAL 10.9.9.9", 2), 2),
            ];
            if plausible && ip_off + 10 <= data.len() {
                // An IPv4 TCP or UDP header start, so the parsers get further.
                data[ip_off] = 0x45;
                data[ip_off + 9] = if data[ip_off + 1] & 1 == 0 { 6 } else { 17 };
                if let Some(b) = data.get_mut(ip_off + 6) {
                    *b &= 0xe0;
                }
                if let Some(b) = data.get_mut(ip_off + 7) {
                    *b = 0;
                }
            }
            for (e, inputs) in elements.iter_mut() {
                for _ in 0..2 {
                    let mut p = Packet::from_bytes(&data);
                    if ip_off < data.len() {
                        p.set_network_header(ip_off);
                    }
                    p.meta.input_index = index;
                    let mut cx = Context::new(Timestamp(index));
                    cx.recorder.active = recording;
                    let v = e.push(port % *inputs, p, &mut cx);
                    prop_assert!(!matches!(v, Verdict::Done), "{}", e.class_name());
                    if let Verdict::Out(o, _) = v {
                        prop_assert!(o < *inputs);
                    }
                }
                let _ = e.state_dump();
            }
        }
    }
}
