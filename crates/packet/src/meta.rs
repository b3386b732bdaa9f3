//! Per-packet metadata: Click's annotations plus what the executor needs to account for a
//! packet (input index, link hops, reflection).

use std::net::Ipv4Addr;

/// Marks a header offset that has not been set.
pub const NO_OFFSET: u32 = u32::MAX;

/// A capture timestamp in nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// Builds a timestamp from seconds and nanoseconds.
    pub fn from_parts(secs: u64, nanos: u32) -> Self {
        Timestamp(
            secs.saturating_mul(1_000_000_000)
                .saturating_add(nanos as u64),
        )
    }
    /// Whole seconds.
    pub fn secs(self) -> u64 {
        self.0 / 1_000_000_000
    }
    /// Nanoseconds within the second.
    pub fn subsec_nanos(self) -> u32 {
        (self.0 % 1_000_000_000) as u32
    }
    /// This timestamp plus `nanos` nanoseconds.
    pub fn add_nanos(self, nanos: u64) -> Self {
        Timestamp(self.0.saturating_add(nanos))
    }
}

/// The resolution a timestamp was captured with; an output packet keeps its input's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Microsecond timestamps (classic pcap).
    #[default]
    Micro,
    /// Nanosecond timestamps (pcap with the nanosecond magic, or pcapng with if_tsresol 9).
    Nano,
}

/// Click's packet type annotation, set from the destination MAC on reception.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PacketType {
    /// Addressed to this host (unicast).
    #[default]
    Host,
    /// Ethernet broadcast (ff:ff:ff:ff:ff:ff).
    Broadcast,
    /// Ethernet multicast (group bit set).
    Multicast,
    /// Unicast to another host.
    OtherHost,
    /// Sent by this host.
    Outgoing,
    /// Looped back.
    Loopback,
}

impl PacketType {
    /// Classifies a destination MAC address as Click's `FromDevice` does.
    #[inline]
    pub fn from_dst_mac(mac: &[u8]) -> PacketType {
        match mac.first() {
            _ if mac.len() >= 6 && mac[..6] == [0xff; 6] => PacketType::Broadcast,
            Some(b) if b & 1 == 1 => PacketType::Multicast,
            _ => PacketType::Host,
        }
    }
}

/// Click's annotations and FuseBox's bookkeeping for one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Interface index the packet entered the current NF on.
    pub ingress: u16,
    /// Paint annotation (`Paint`, `PaintSwitch`, `CheckPaint`).
    pub paint: u8,
    /// Destination IP annotation (`GetIPAddress`, route lookups, `ARPQuerier`).
    pub dst_ip: Ipv4Addr,
    /// Packet type from the destination MAC.
    pub packet_type: PacketType,
    /// The fast path's flow identifier, taken once at chain entry from (entry interface,
    /// VLAN tags, 5-tuple) and kept even after NATs rewrite the tuple; 0 when unset.
    pub flow_id: u32,
    /// Capture timestamp.
    pub timestamp: Timestamp,
    /// Resolution of the timestamp.
    pub precision: Precision,
    /// Offset of the MAC header in the buffer, or [`NO_OFFSET`].
    pub mac_offset: u32,
    /// Offset of the network header in the buffer, or [`NO_OFFSET`].
    pub network_offset: u32,
    /// Offset of the transport header in the buffer, or [`NO_OFFSET`].
    pub transport_offset: u32,
    /// Index of the chain input packet this packet descends from.
    pub input_index: u64,
    /// Number of chain links this packet has crossed.
    pub hops: u8,
    /// Set on a packet that was reflected back into the chain (never reflected twice).
    pub reflected: bool,
    /// Click's "fix IP source" annotation: set by `ICMPError` on the errors it generates,
    /// read and cleared by `FixIPSrc`.
    pub fix_ip_src: bool,
    /// The NSH the packet arrived with, in an NSH-aware run (`fusebox run --nsh`): 0 for
    /// none, else the id of the transport and NSH the executor took off at the chain's
    /// entry. It follows the packet, and the packets elements make from it, to the exit,
    /// where the NSH (SI − 1) and the transport are put back.
    pub nsh: u32,
}

impl Default for Meta {
    fn default() -> Self {
        Meta {
            ingress: 0,
            paint: 0,
            dst_ip: Ipv4Addr::UNSPECIFIED,
            packet_type: PacketType::Host,
            flow_id: 0,
            timestamp: Timestamp(0),
            precision: Precision::Micro,
            mac_offset: NO_OFFSET,
            network_offset: NO_OFFSET,
            transport_offset: NO_OFFSET,
            input_index: 0,
            hops: 0,
            reflected: false,
            fix_ip_src: false,
            nsh: 0,
        }
    }
}
