//! Header fields: the coordinates of the packet space.

use std::fmt;

/// A header field or Click annotation: one coordinate of the packet space.
///
/// Every field is an unsigned integer of [`Field::width`] bits. Fields are independent
/// coordinates: the algebra does not know that, say, `Raw { offset: 23, len: 1 }` and
/// [`Field::IpProto`] may name the same bits, so a caller should pick one name per header
/// bit range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// The interface the packet arrived on (16 bits).
    InPort,
    /// Ethernet destination address (48 bits).
    EthDst,
    /// Ethernet source address (48 bits).
    EthSrc,
    /// Ethertype (16 bits).
    EtherType,
    /// Whether the frame carries an 802.1Q tag (1 bit).
    HasVlan,
    /// 802.1Q VLAN id (12 bits).
    VlanId,
    /// IPv4 version (4 bits).
    IpVersion,
    /// IPv4 header length in 32-bit words (4 bits).
    IpIhl,
    /// Whether IPv4 options are present (1 bit).
    IpOptions,
    /// IPv4 type of service (8 bits).
    IpTos,
    /// IPv4 total length (16 bits).
    IpLen,
    /// IPv4 identification (16 bits).
    IpId,
    /// IPv4 flags (3 bits).
    IpFlags,
    /// IPv4 fragment offset (13 bits).
    IpFragOffset,
    /// IPv4 time to live (8 bits).
    IpTtl,
    /// IPv4 protocol (8 bits).
    IpProto,
    /// Whether the IPv4 header checksum is valid (1 bit).
    IpChecksumOk,
    /// IPv4 source address (32 bits).
    IpSrc,
    /// IPv4 destination address (32 bits).
    IpDst,
    /// Transport (TCP/UDP) source port (16 bits).
    SrcPort,
    /// Transport (TCP/UDP) destination port (16 bits).
    DstPort,
    /// TCP flags (8 bits).
    TcpFlags,
    /// ICMP type (8 bits).
    IcmpType,
    /// ICMP code (8 bits).
    IcmpCode,
    /// Click's paint annotation (8 bits).
    Paint,
    /// Click's destination-IP annotation (32 bits).
    DstIpAnno,
    /// Click's packet-type annotation (3 bits).
    PacketType,
    /// Length of the whole frame in bytes, as it arrived (16 bits).
    FrameLen,
    /// Bytes from the start of the IPv4 header to the end of the packet data (16 bits).
    IpAvail,
    /// Whether the IPv4 lengths are consistent: header length ≤ total length ≤
    /// [`Field::IpAvail`] (1 bit; what `CheckIPHeader` calls `bad-ip-length` when 0).
    IpLenOk,
    /// Bytes from the start of the transport header (IPv4 header + header length) to the end
    /// of the packet data (16 bits, 0 when the header length runs past the end).
    L4Avail,
    /// IPv4 total length minus header length, saturating at 0 (16 bits): the transport bytes
    /// inside the datagram, what [`Field::L4Avail`] becomes once the packet is cut at the IPv4
    /// total length.
    L4Len,
    /// TCP data offset in 32-bit words (4 bits).
    TcpDataOff,
    /// FuseBox's fix-IP-source annotation, which `ICMPError` sets for `FixIPSrc` (1 bit).
    FixIpSrc,
    /// `len` raw bytes at byte `offset`, as read by Click's `Classifier` (8 × `len` bits).
    ///
    /// Valid lengths are 1..=16 (use [`Field::raw`] to check); a length outside that range
    /// is treated as the nearest valid one by [`Field::width`].
    Raw {
        /// Byte offset from the start of the frame.
        offset: u16,
        /// Number of bytes, 1..=16.
        len: u8,
    },
}

/// The longest [`Field::Raw`] read, in bytes (the values are `u128`).
pub const MAX_RAW_LEN: u8 = 16;

impl Field {
    /// Every named (non-raw) field, in order.
    pub const ALL: [Field; 34] = [
        Field::InPort,
        Field::EthDst,
        Field::EthSrc,
        Field::EtherType,
        Field::HasVlan,
        Field::VlanId,
        Field::IpVersion,
        Field::IpIhl,
        Field::IpOptions,
        Field::IpTos,
        Field::IpLen,
        Field::IpId,
        Field::IpFlags,
        Field::IpFragOffset,
        Field::IpTtl,
        Field::IpProto,
        Field::IpChecksumOk,
        Field::IpSrc,
        Field::IpDst,
        Field::SrcPort,
        Field::DstPort,
        Field::TcpFlags,
        Field::IcmpType,
        Field::IcmpCode,
        Field::Paint,
        Field::DstIpAnno,
        Field::PacketType,
        Field::FrameLen,
        Field::IpAvail,
        Field::IpLenOk,
        Field::L4Avail,
        Field::L4Len,
        Field::TcpDataOff,
        Field::FixIpSrc,
    ];

    /// A raw read of `len` bytes at `offset`, or `None` unless `len` is in 1..=16.
    pub fn raw(offset: u16, len: u8) -> Option<Field> {
        (1..=MAX_RAW_LEN)
            .contains(&len)
            .then_some(Field::Raw { offset, len })
    }

    /// The field's width in bits (1..=128).
    #[inline]
    pub fn width(self) -> u32 {
        match self {
            Field::HasVlan
            | Field::IpOptions
            | Field::IpChecksumOk
            | Field::IpLenOk
            | Field::FixIpSrc => 1,
            Field::IpFlags | Field::PacketType => 3,
            Field::IpVersion | Field::IpIhl | Field::TcpDataOff => 4,
            Field::IpTos
            | Field::IpTtl
            | Field::IpProto
            | Field::TcpFlags
            | Field::IcmpType
            | Field::IcmpCode
            | Field::Paint => 8,
            Field::VlanId => 12,
            Field::IpFragOffset => 13,
            Field::InPort
            | Field::EtherType
            | Field::IpLen
            | Field::IpId
            | Field::SrcPort
            | Field::DstPort
            | Field::FrameLen
            | Field::IpAvail
            | Field::L4Avail
            | Field::L4Len => 16,
            Field::IpSrc | Field::IpDst | Field::DstIpAnno => 32,
            Field::EthDst | Field::EthSrc => 48,
            Field::Raw { len, .. } => 8 * u32::from(len.clamp(1, MAX_RAW_LEN)),
        }
    }

    /// The largest value of the field, `2^width - 1`.
    #[inline]
    pub fn max_value(self) -> u128 {
        max_value(self.width())
    }

    /// The field's short name (`"raw"` for every raw read; `Display` adds offset and length).
    pub fn name(self) -> &'static str {
        match self {
            Field::InPort => "in_port",
            Field::EthDst => "eth_dst",
            Field::EthSrc => "eth_src",
            Field::EtherType => "eth_type",
            Field::HasVlan => "vlan_present",
            Field::VlanId => "vlan_id",
            Field::IpVersion => "ip_ver",
            Field::IpIhl => "ip_ihl",
            Field::IpOptions => "ip_opts",
            Field::IpTos => "ip_tos",
            Field::IpLen => "ip_len",
            Field::IpId => "ip_id",
            Field::IpFlags => "ip_flags",
            Field::IpFragOffset => "ip_frag",
            Field::IpTtl => "ip_ttl",
            Field::IpProto => "ip_proto",
            Field::IpChecksumOk => "ip_csum_ok",
            Field::IpSrc => "ip_src",
            Field::IpDst => "ip_dst",
            Field::SrcPort => "sport",
            Field::DstPort => "dport",
            Field::TcpFlags => "tcp_flags",
            Field::IcmpType => "icmp_type",
            Field::IcmpCode => "icmp_code",
            Field::Paint => "paint",
            Field::DstIpAnno => "dst_ip_anno",
            Field::PacketType => "pkt_type",
            Field::FrameLen => "frame_len",
            Field::IpAvail => "ip_avail",
            Field::IpLenOk => "ip_len_ok",
            Field::L4Avail => "l4_avail",
            Field::L4Len => "l4_len",
            Field::TcpDataOff => "tcp_doff",
            Field::FixIpSrc => "fix_ip_src",
            Field::Raw { .. } => "raw",
        }
    }

    /// The named field called `name`, if any.
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Raw { offset, len } => write!(f, "raw[{offset}:{len}]"),
            other => f.write_str(other.name()),
        }
    }
}

/// The largest value of a `width`-bit field (`width` is capped at 128; width 0 has only 0).
#[inline]
pub fn max_value(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_match_the_headers() {
        assert_eq!(Field::EthDst.width(), 48);
        assert_eq!(Field::VlanId.width(), 12);
        assert_eq!(Field::HasVlan.width(), 1);
        assert_eq!(Field::IpFragOffset.width(), 13);
        assert_eq!(Field::IpFlags.width(), 3);
        assert_eq!(Field::PacketType.width(), 3);
        assert_eq!(Field::DstIpAnno.width(), 32);
        assert_eq!(Field::Raw { offset: 0, len: 16 }.width(), 128);
        assert_eq!(Field::Raw { offset: 0, len: 0 }.width(), 8);
        assert_eq!(
            Field::Raw {
                offset: 0,
                len: 200
            }
            .width(),
            128
        );
        assert_eq!(Field::IpTtl.max_value(), 255);
        assert_eq!(Field::Raw { offset: 0, len: 16 }.max_value(), u128::MAX);
    }

    #[test]
    fn raw_checks_its_length() {
        assert_eq!(Field::raw(12, 2), Some(Field::Raw { offset: 12, len: 2 }));
        assert_eq!(Field::raw(12, 0), None);
        assert_eq!(Field::raw(12, 17), None);
    }

    #[test]
    fn names_are_unique_and_round_trip() {
        for f in Field::ALL {
            assert_eq!(Field::from_name(f.name()), Some(f));
            assert_eq!(f.to_string(), f.name());
        }
        assert_eq!(Field::from_name("raw"), None);
        assert_eq!(Field::Raw { offset: 23, len: 1 }.to_string(), "raw[23:1]");
    }
}
