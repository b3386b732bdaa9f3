//! ARP: `ARPResponder` answers ARP requests for its addresses; `ARPQuerier` resolves next
//! hops and encapsulates IP packets in Ethernet.

mod querier;
mod responder;

pub use querier::{ARPQuerier, ARPQuerierReason};
pub use responder::{ARPResponder, ARPResponderReason};

use std::net::Ipv4Addr;
use wire::arp::{self, Packet as ArpPacket};
use wire::ethernet::{ethertype, Address as EthAddr, Frame as EthernetFrame};

/// Length of an Ethernet header plus an Ethernet/IPv4 ARP packet.
pub(crate) const ARP_FRAME_LEN: usize = arp::FRAME_LEN;

/// Builds the 42-byte Ethernet/ARP frame `op` with these addresses.
pub(crate) fn arp_frame(
    eth_dst: [u8; 6],
    eth_src: [u8; 6],
    op: u16,
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
) -> [u8; ARP_FRAME_LEN] {
    arp::Repr {
        operation: op,
        sender_hardware_addr: EthAddr(sha),
        sender_protocol_addr: Ipv4Addr::from(spa),
        target_hardware_addr: EthAddr(tha),
        target_protocol_addr: Ipv4Addr::from(tpa),
    }
    .frame(EthAddr(eth_dst), EthAddr(eth_src))
}

/// The fields of an Ethernet/IPv4 ARP frame, if `d` is one (length, EtherType, hardware and
/// protocol types checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ArpView {
    pub op: u16,
    pub sha: [u8; 6],
    pub spa: [u8; 4],
    pub tpa: [u8; 4],
}

pub(crate) fn parse_arp(d: &[u8]) -> Option<ArpView> {
    // The address lengths are not checked (as before `wire`'s `check_len` would).
    let eth = EthernetFrame::new_unchecked(d.get(..ARP_FRAME_LEN)?);
    let a = ArpPacket::new_unchecked(eth.payload());
    if eth.ethertype() != ethertype::ARP
        || a.hardware_type() != arp::HARDWARE_ETHERNET
        || a.protocol_type() != ethertype::IPV4
    {
        return None;
    }
    Some(ArpView {
        op: a.operation(),
        sha: a.sender_hardware_addr().0,
        spa: a.sender_protocol_addr().octets(),
        tpa: a.target_protocol_addr().octets(),
    })
}
