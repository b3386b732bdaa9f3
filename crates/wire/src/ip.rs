//! IP protocol numbers, shared by the IPv4 `protocol` and the IPv6 `next_header` fields.

use core::fmt;

/// IANA IP protocol numbers as `u8` constants, usable in `match` patterns.
///
/// These are the single table of protocol numbers: [`IpProtocol`] converts through them.
pub mod protocol {
    /// IPv6 hop-by-hop options.
    pub const HOP_BY_HOP: u8 = 0;
    /// Internet Control Message Protocol.
    pub const ICMP: u8 = 1;
    /// Internet Group Management Protocol.
    pub const IGMP: u8 = 2;
    /// IPv4-in-IP encapsulation.
    pub const IPIP: u8 = 4;
    /// Transmission Control Protocol.
    pub const TCP: u8 = 6;
    /// User Datagram Protocol.
    pub const UDP: u8 = 17;
    /// IPv6 encapsulation.
    pub const IPV6: u8 = 41;
    /// IPv6 routing header.
    pub const IPV6_ROUTE: u8 = 43;
    /// IPv6 fragment header.
    pub const IPV6_FRAG: u8 = 44;
    /// Generic Routing Encapsulation.
    pub const GRE: u8 = 47;
    /// Encapsulating Security Payload.
    pub const ESP: u8 = 50;
    /// Authentication Header.
    pub const AH: u8 = 51;
    /// ICMP for IPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header".
    pub const IPV6_NONXT: u8 = 59;
    /// IPv6 destination options.
    pub const IPV6_OPTS: u8 = 60;
    /// Stream Control Transmission Protocol.
    pub const SCTP: u8 = 132;
}

/// An IP protocol number (IPv4 `protocol`, IPv6 `next_header`), named where FuseBox knows it.
///
/// Two forms on purpose. The enum is for code that names or dispatches on a protocol away
/// from the per-packet path (configuration, printing, tests): `IpProtocol::from(byte)` and
/// `u8::from(proto)` round-trip every value, unknown ones through [`IpProtocol::Unknown`].
/// Per-packet code (DecIPTTL, the rewriters, the checkers, the executors) compares the raw
/// header byte with the associated constants instead (`proto == IpProtocol::TCP`, or
/// `IpProtocol::TCP => …` in a `match`): a `u8` compared with a constant needs no conversion
/// `match`, so it costs exactly what the bare literal did, and the constants work in patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpProtocol {
    /// IPv6 hop-by-hop options (0).
    HopByHop,
    /// ICMP (1).
    Icmp,
    /// IGMP (2).
    Igmp,
    /// IPv4-in-IP (4).
    IpIp,
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// IPv6 encapsulation (41).
    Ipv6,
    /// IPv6 routing header (43).
    Ipv6Route,
    /// IPv6 fragment header (44).
    Ipv6Frag,
    /// GRE (47).
    Gre,
    /// ESP (50).
    Esp,
    /// Authentication Header (51).
    Ah,
    /// ICMPv6 (58).
    Icmpv6,
    /// IPv6 "no next header" (59).
    Ipv6NoNxt,
    /// IPv6 destination options (60).
    Ipv6Opts,
    /// SCTP (132).
    Sctp,
    /// Any other protocol number.
    Unknown(u8),
}

impl IpProtocol {
    /// ICMP's number, for comparisons and patterns on the raw byte.
    pub const ICMP: u8 = protocol::ICMP;
    /// TCP's number, for comparisons and patterns on the raw byte.
    pub const TCP: u8 = protocol::TCP;
    /// UDP's number, for comparisons and patterns on the raw byte.
    pub const UDP: u8 = protocol::UDP;
    /// ICMPv6's number, for comparisons and patterns on the raw byte.
    pub const ICMPV6: u8 = protocol::ICMPV6;

    /// The protocol number.
    #[inline]
    pub const fn number(self) -> u8 {
        match self {
            IpProtocol::HopByHop => protocol::HOP_BY_HOP,
            IpProtocol::Icmp => protocol::ICMP,
            IpProtocol::Igmp => protocol::IGMP,
            IpProtocol::IpIp => protocol::IPIP,
            IpProtocol::Tcp => protocol::TCP,
            IpProtocol::Udp => protocol::UDP,
            IpProtocol::Ipv6 => protocol::IPV6,
            IpProtocol::Ipv6Route => protocol::IPV6_ROUTE,
            IpProtocol::Ipv6Frag => protocol::IPV6_FRAG,
            IpProtocol::Gre => protocol::GRE,
            IpProtocol::Esp => protocol::ESP,
            IpProtocol::Ah => protocol::AH,
            IpProtocol::Icmpv6 => protocol::ICMPV6,
            IpProtocol::Ipv6NoNxt => protocol::IPV6_NONXT,
            IpProtocol::Ipv6Opts => protocol::IPV6_OPTS,
            IpProtocol::Sctp => protocol::SCTP,
            IpProtocol::Unknown(n) => n,
        }
    }

    /// True for TCP and UDP, the protocols whose first four transport bytes are the ports.
    #[inline]
    pub const fn has_ports(self) -> bool {
        matches!(self, IpProtocol::Tcp | IpProtocol::Udp)
    }
}

impl From<u8> for IpProtocol {
    #[inline]
    fn from(n: u8) -> IpProtocol {
        match n {
            protocol::HOP_BY_HOP => IpProtocol::HopByHop,
            protocol::ICMP => IpProtocol::Icmp,
            protocol::IGMP => IpProtocol::Igmp,
            protocol::IPIP => IpProtocol::IpIp,
            protocol::TCP => IpProtocol::Tcp,
            protocol::UDP => IpProtocol::Udp,
            protocol::IPV6 => IpProtocol::Ipv6,
            protocol::IPV6_ROUTE => IpProtocol::Ipv6Route,
            protocol::IPV6_FRAG => IpProtocol::Ipv6Frag,
            protocol::GRE => IpProtocol::Gre,
            protocol::ESP => IpProtocol::Esp,
            protocol::AH => IpProtocol::Ah,
            protocol::ICMPV6 => IpProtocol::Icmpv6,
            protocol::IPV6_NONXT => IpProtocol::Ipv6NoNxt,
            protocol::IPV6_OPTS => IpProtocol::Ipv6Opts,
            protocol::SCTP => IpProtocol::Sctp,
            n => IpProtocol::Unknown(n),
        }
    }
}

impl From<IpProtocol> for u8 {
    #[inline]
    fn from(p: IpProtocol) -> u8 {
        p.number()
    }
}

impl fmt::Display for IpProtocol {
    /// The number, as FuseBox prints protocols everywhere (`proto 6`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_round_trips() {
        for n in 0..=255u8 {
            let p = IpProtocol::from(n);
            assert_eq!(u8::from(p), n);
            // Known numbers never come back as Unknown.
            if let IpProtocol::Unknown(m) = p {
                assert_eq!(m, n);
                assert!(![0, 1, 2, 4, 6, 17, 41, 43, 44, 47, 50, 51, 58, 59, 60, 132].contains(&n));
            }
        }
        assert_eq!(IpProtocol::from(6), IpProtocol::Tcp);
        assert_eq!(IpProtocol::from(IpProtocol::UDP), IpProtocol::Udp);
        assert_eq!(IpProtocol::Icmpv6.number(), 58);
        assert!(IpProtocol::Tcp.has_ports() && !IpProtocol::Icmp.has_ports());
        assert_eq!(IpProtocol::Unknown(200).to_string(), "200");
    }
}
