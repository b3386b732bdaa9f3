//! `EtherEncap`: prepends an Ethernet header.
//!
//! Click: `EtherEncap(ETHERTYPE, SRC, DST)` — "Encapsulates each packet in the Ethernet
//! header specified by its arguments. ETHERTYPE should be in host order" (e.g. `0x0800`).
//! Ports `1/1`. The header is pushed with `push_mac_header(14)`, which sets the MAC header
//! annotation to the new header and the network header annotation just after it. `SRC` and
//! `DST` may be `AddressInfo` names.

use crate::args::parse_uint_max;
use crate::model::{Case, Effect, Filter, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Element, PortCount};
use packet::Packet;
use wire::ethernet::{Address, Frame as EthernetFrame};

/// `EtherEncap(ETHERTYPE, SRC, DST)`: pushes a 14-byte Ethernet header.
#[derive(Debug, Clone)]
pub struct EtherEncap {
    /// The EtherType written.
    pub ethertype: u16,
    /// Source MAC address.
    pub src: [u8; 6],
    /// Destination MAC address.
    pub dst: [u8; 6],
}

impl EtherEncap {
    /// Reads `ETHERTYPE`, `SRC` and `DST` (all mandatory, positional or keyword).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<EtherEncap, ConfigError> {
        args.check(3, &["ETHERTYPE", "SRC", "DST"])?;
        let t = args.require(0, "ETHERTYPE", "Ethernet encapsulation type, e.g. 0x0800")?;
        let ethertype = parse_uint_max(t, 0xffff, "ETHERTYPE")? as u16;
        let src = bcx
            .names
            .eth(args.require(1, "SRC", "source Ethernet address")?)?
            .0;
        let dst = bcx
            .names
            .eth(args.require(2, "DST", "destination Ethernet address")?)?
            .0;
        Ok(EtherEncap {
            ethertype,
            src,
            dst,
        })
    }

    /// The 14 header bytes written in front of every packet.
    #[inline]
    pub fn header(&self) -> [u8; 14] {
        let mut h = [0u8; 14];
        let mut eth = EthernetFrame::new_unchecked(&mut h[..]);
        eth.set_dst_addr(Address(self.dst));
        eth.set_src_addr(Address(self.src));
        eth.set_ethertype(self.ethertype);
        h
    }

    /// What `push` does, in place.
    #[inline(always)]
    fn step(&mut self, packet: &mut Packet) -> crate::Step {
        packet.prepend(&self.header());
        packet.set_mac_header(0);
        packet.set_network_header(14);
        crate::Step::Out(0)
    }
}

impl Element for EtherEncap {
    /// A function of the packet and the configuration (counters aside): batches in any order.
    fn batching(&self) -> crate::Batching {
        crate::Batching::Free
    }
    fn class_name(&self) -> &'static str {
        "EtherEncap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }
    push_in_place!();
    fn model(&self) -> Option<Model> {
        Some(Model::new(vec![Case::new(Filter::any(), Outcome::Out(0))
            .effect(Effect::EtherEncap {
                ethertype: self.ethertype,
                src: self.src,
                dst: self.dst,
            })]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

    #[test]
    fn prepends_header_and_sets_annotations() {
        let mut e = ok(
            "EtherEncap",
            "0x0800, 00:01:02:03:04:05, 0a-0b-0c-0d-0e-0f",
            1,
        );
        let o = run(e.as_mut(), pkt(&[0x45, 0, 0, 20]));
        assert_eq!(o.ports(), vec![0]);
        let p = &o.out[0].1;
        assert_eq!(
            p.data(),
            &[10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 8, 0, 0x45, 0, 0, 20]
        );
        assert_eq!(p.mac_header().map(<[u8]>::len), Some(18));
        assert_eq!(p.network_offset_in_data(), Some(14));
    }

    #[test]
    fn keywords_and_decimal_type() {
        let mut e = ok(
            "EtherEncap",
            "ETHERTYPE 2054, SRC 1:1:1:1:1:1, DST ff:ff:ff:ff:ff:ff",
            1,
        );
        let o = run(e.as_mut(), pkt(&[]));
        assert_eq!(
            o.out[0].1.data(),
            &[255, 255, 255, 255, 255, 255, 1, 1, 1, 1, 1, 1, 8, 6]
        );
    }

    #[test]
    fn bad_arguments() {
        assert!(err("EtherEncap", "0x10000, 0:0:0:0:0:1, 0:0:0:0:0:2", 1).contains("at most 65535"));
        assert!(err("EtherEncap", "0x0800, 0:0:0:0:1, 0:0:0:0:0:2", 1)
            .contains("expected Ethernet address"));
        assert!(err("EtherEncap", "0x0800, 0:0:0:0:0:1", 1).contains("missing argument DST"));
        assert!(err("EtherEncap", "IP, 0:0:0:0:0:1, 0:0:0:0:0:2", 1).contains("expected ETHERTYPE"));
    }
}
