//! ARP: `ARPResponder` answers ARP requests for its addresses; `ARPQuerier` resolves next
//! hops and encapsulates IP packets in Ethernet.

mod querier;
mod responder;

pub use querier::ARPQuerier;
pub use responder::ARPResponder;

/// Length of an Ethernet header plus an Ethernet/IPv4 ARP packet.
pub(crate) const ARP_FRAME_LEN: usize = 42;

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
    let mut f = [0u8; ARP_FRAME_LEN];
    f[0..6].copy_from_slice(&eth_dst);
    f[6..12].copy_from_slice(&eth_src);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    f[14..16].copy_from_slice(&1u16.to_be_bytes());
    f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
    f[18] = 6;
    f[19] = 4;
    f[20..22].copy_from_slice(&op.to_be_bytes());
    f[22..28].copy_from_slice(&sha);
    f[28..32].copy_from_slice(&spa);
    f[32..38].copy_from_slice(&tha);
    f[38..42].copy_from_slice(&tpa);
    f
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
    let f = d.get(..ARP_FRAME_LEN)?;
    let be = |i: usize| u16::from_be_bytes([f[i], f[i + 1]]);
    if be(12) != 0x0806 || be(14) != 1 || be(16) != 0x0800 {
        return None;
    }
    Some(ArpView {
        op: be(20),
        sha: f[22..28].try_into().ok()?,
        spa: f[28..32].try_into().ok()?,
        tpa: f[38..42].try_into().ok()?,
    })
}
