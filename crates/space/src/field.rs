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
    /// The four fields of a flow's tuple a rewriter writes, in the order of its patterns
    /// (source address, source port, destination address, destination port).
    pub const TUPLE: [Field; 4] = [Field::IpSrc, Field::SrcPort, Field::IpDst, Field::DstPort];

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
    #[inline(always)]
    pub const fn width(self) -> u32 {
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
            Field::Raw { len, .. } => {
                if len < 1 {
                    8
                } else if len > MAX_RAW_LEN {
                    8 * MAX_RAW_LEN as u32
                } else {
                    8 * len as u32
                }
            }
        }
    }

    /// The largest value of the field, `2^width - 1`.
    #[inline]
    pub const fn max_value(self) -> u128 {
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

/// Which part of the packet a field belongs to: the one field-group predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    /// A Click/FuseBox annotation (stored beside the bytes): [`Field::InPort`],
    /// [`Field::Paint`], [`Field::DstIpAnno`], [`Field::PacketType`], [`Field::FixIpSrc`].
    Annotation,
    /// The frame as a whole: [`Field::FrameLen`] and [`Field::Raw`] reads.
    Frame,
    /// The Ethernet header, with its optional 802.1Q tag.
    Ethernet,
    /// The IPv4 header, and what is computed from it ([`Field::IpAvail`],
    /// [`Field::IpLenOk`], [`Field::L4Len`], ...).
    Ipv4,
    /// The transport (TCP/UDP/ICMP) header, and [`Field::L4Avail`].
    Transport,
}

/// Where a [`Layout`]'s byte offset is counted from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Base {
    /// The start of the frame (the packet data).
    Frame,
    /// The start of the IPv4 (network) header.
    Network,
    /// The start of the transport header: the IPv4 header + its header length (IHL × 4).
    Transport,
}

/// Where a stored field's bits are in the packet bytes: `len` bytes at `offset` from
/// `base`, read big-endian, shifted right by `shift` and masked with `mask`.
///
/// This is the one table of header positions: models, synthesized programs and the
/// executor's finishing step all derive their offsets from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// What `offset` is counted from.
    pub base: Base,
    /// Byte offset from `base`.
    pub offset: u16,
    /// Number of bytes read (1..=16).
    pub len: u8,
    /// Right shift of the field's lowest bit within those bytes read big-endian.
    pub shift: u8,
    /// Mask applied after the shift (`2^width - 1`).
    pub mask: u128,
}

impl Layout {
    #[inline(always)]
    const fn new(base: Base, offset: u16, len: u8, shift: u8, width: u32) -> Layout {
        Layout {
            base,
            offset,
            len,
            shift,
            mask: max_value(width),
        }
    }

    /// Whether the field covers its bytes exactly (no shift, every bit masked in): such a
    /// field is written by storing whole bytes.
    #[inline]
    pub const fn whole_bytes(&self) -> bool {
        self.shift == 0 && self.mask == max_value(8 * self.len as u32)
    }

    /// The field's value in `bytes` (which start at the layout's base), or 0 when its bytes
    /// are not all there.
    #[inline(always)]
    pub fn read(&self, bytes: &[u8]) -> u128 {
        let (o, n) = (usize::from(self.offset), usize::from(self.len));
        match bytes.get(o..o + n) {
            Some(b) => {
                // Fixed-width loads for the common widths: this runs for every guard of every
                // fast-path packet, where a byte loop of unknown length costs several times more.
                let raw = match *b {
                    [x] => u128::from(x),
                    [x, y] => u128::from(u16::from_be_bytes([x, y])),
                    [x, y, z, w] => u128::from(u32::from_be_bytes([x, y, z, w])),
                    _ => b.iter().fold(0u128, |a, x| (a << 8) | u128::from(*x)),
                };
                (raw >> self.shift) & self.mask
            }
            None => 0,
        }
    }

    /// Replaces the field's value in `bytes` (which start at the layout's base) by
    /// `new(old)`, leaving the other bits of its bytes alone. Nothing happens when the bytes
    /// are not all there or `new` gives `None`.
    #[inline]
    pub fn update(&self, bytes: &mut [u8], new: impl FnOnce(u128) -> Option<u128>) {
        let (o, n) = (usize::from(self.offset), usize::from(self.len));
        let Some(b) = bytes.get_mut(o..o + n) else {
            return;
        };
        let old = b.iter().fold(0u128, |a, x| (a << 8) | u128::from(*x));
        let shift = u32::from(self.shift);
        let Some(v) = new((old >> shift) & self.mask) else {
            return;
        };
        let word = (old & !(self.mask << shift)) | ((v & self.mask) << shift);
        for (i, x) in b.iter_mut().enumerate() {
            *x = (word >> (8 * (n - 1 - i))) as u8;
        }
    }
}

impl Field {
    /// The part of the packet the field belongs to.
    #[inline]
    pub const fn group(self) -> Group {
        match self {
            Field::InPort
            | Field::Paint
            | Field::DstIpAnno
            | Field::PacketType
            | Field::FixIpSrc => Group::Annotation,
            Field::FrameLen | Field::Raw { .. } => Group::Frame,
            Field::EthDst | Field::EthSrc | Field::EtherType | Field::HasVlan | Field::VlanId => {
                Group::Ethernet
            }
            Field::IpVersion
            | Field::IpIhl
            | Field::IpOptions
            | Field::IpTos
            | Field::IpLen
            | Field::IpId
            | Field::IpFlags
            | Field::IpFragOffset
            | Field::IpTtl
            | Field::IpProto
            | Field::IpChecksumOk
            | Field::IpSrc
            | Field::IpDst
            | Field::IpAvail
            | Field::IpLenOk
            | Field::L4Len => Group::Ipv4,
            Field::SrcPort
            | Field::DstPort
            | Field::TcpFlags
            | Field::TcpDataOff
            | Field::IcmpType
            | Field::IcmpCode
            | Field::L4Avail => Group::Transport,
        }
    }

    /// Where the field is stored in the packet bytes; `None` for annotations and for the
    /// fields computed from the packet ([`Field::FrameLen`], [`Field::HasVlan`],
    /// [`Field::IpOptions`], [`Field::IpChecksumOk`], [`Field::IpLenOk`],
    /// [`Field::IpAvail`], [`Field::L4Avail`], [`Field::L4Len`]).
    ///
    /// [`Field::VlanId`] is stored in the 12 low bits of bytes 14–15, but reads as 0 unless
    /// the frame is tagged ([`Field::HasVlan`]); a reader checks that first. [`Field::Raw`]
    /// lengths outside 1..=16 are taken as the nearest valid one, as by [`Field::width`].
    #[inline(always)]
    pub const fn layout(self) -> Option<Layout> {
        use Base::{Frame, Network, Transport};
        let w = self.width();
        Some(match self {
            Field::EthDst => Layout::new(Frame, 0, 6, 0, w),
            Field::EthSrc => Layout::new(Frame, 6, 6, 0, w),
            Field::EtherType => Layout::new(Frame, 12, 2, 0, w),
            Field::VlanId => Layout::new(Frame, 14, 2, 0, w),
            Field::Raw { offset, len } => {
                let n = if len < 1 {
                    1
                } else if len > MAX_RAW_LEN {
                    MAX_RAW_LEN
                } else {
                    len
                };
                Layout::new(Frame, offset, n, 0, w)
            }
            Field::IpVersion => Layout::new(Network, 0, 1, 4, w),
            Field::IpIhl => Layout::new(Network, 0, 1, 0, w),
            Field::IpTos => Layout::new(Network, 1, 1, 0, w),
            Field::IpLen => Layout::new(Network, 2, 2, 0, w),
            Field::IpId => Layout::new(Network, 4, 2, 0, w),
            Field::IpFlags => Layout::new(Network, 6, 2, 13, w),
            Field::IpFragOffset => Layout::new(Network, 6, 2, 0, w),
            Field::IpTtl => Layout::new(Network, 8, 1, 0, w),
            Field::IpProto => Layout::new(Network, 9, 1, 0, w),
            Field::IpSrc => Layout::new(Network, 12, 4, 0, w),
            Field::IpDst => Layout::new(Network, 16, 4, 0, w),
            Field::SrcPort => Layout::new(Transport, 0, 2, 0, w),
            Field::DstPort => Layout::new(Transport, 2, 2, 0, w),
            Field::IcmpType => Layout::new(Transport, 0, 1, 0, w),
            Field::IcmpCode => Layout::new(Transport, 1, 1, 0, w),
            Field::TcpDataOff => Layout::new(Transport, 12, 1, 4, w),
            Field::TcpFlags => Layout::new(Transport, 13, 1, 0, w),
            _ => return None,
        })
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
pub const fn max_value(width: u32) -> u128 {
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

    #[test]
    fn layouts_fit_their_bytes_and_groups() {
        let mut stored = 0;
        for f in Field::ALL {
            let Some(l) = f.layout() else {
                continue;
            };
            stored += 1;
            assert_eq!(l.mask, f.max_value(), "{f}");
            assert!(
                f.width() + u32::from(l.shift) <= 8 * u32::from(l.len),
                "{f}"
            );
            let base = match f.group() {
                Group::Ethernet | Group::Frame => Base::Frame,
                Group::Ipv4 => Base::Network,
                Group::Transport => Base::Transport,
                Group::Annotation => panic!("{f}: an annotation has no bytes"),
            };
            assert_eq!(l.base, base, "{f}");
        }
        assert_eq!(stored, 21);
        assert_eq!(
            Field::Raw { offset: 3, len: 0 }.layout().map(|l| l.len),
            Some(1)
        );
        assert_eq!(
            Field::Raw { offset: 3, len: 99 }.layout().map(|l| l.len),
            Some(16)
        );
        assert!(Field::IpTtl.layout().is_some_and(|l| l.whole_bytes()));
        assert!(!Field::IpFlags.layout().is_some_and(|l| l.whole_bytes()));
        assert!(!Field::VlanId.layout().is_some_and(|l| l.whole_bytes()));
    }

    #[test]
    fn layout_reads_and_updates_only_its_bits() {
        let l = Field::IpFlags.layout().unwrap();
        let mut b = [0u8, 0, 0, 0, 0, 0, 0x5f, 0xff];
        assert_eq!(l.read(&b), 0b010);
        l.update(&mut b, |v| Some(v + 5));
        assert_eq!(b[6..], [0xff, 0xff]);
        l.update(&mut b, |_| Some(0));
        assert_eq!(b[6..], [0x1f, 0xff]);
        l.update(&mut b, |_| None);
        assert_eq!(b[6..], [0x1f, 0xff]);
        assert_eq!(l.read(&b[..7]), 0);
        l.update(&mut b[..7], |_| Some(7));
        assert_eq!(b[6], 0x1f);
    }
}
