//! The map entries of the NSH stages, as `crates/stages/bpf/cbox.h` lays them out, in a
//! serde form (what the controller writes to etcd and the agent writes into the maps).
//!
//! Addresses and ports are kept as values here; the agent converts them to the byte order
//! cbox.h asks for (network order for `flow_key` and the VXLAN-GPE addresses) when it fills
//! the maps.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// `PROXY_LEARNED`: Enc learned this proxy entry from an SF's translated packet.
pub const PROXY_LEARNED: u8 = 0x1;
/// `PROXY_STATIC`: the controller wrote this proxy entry (the §5.5 direct-link corner cases).
pub const PROXY_STATIC: u8 = 0x2;
/// `FWDF_INGRESS`: redirect to the interface's ingress.
pub const FWDF_INGRESS: u8 = 0x1;
/// `CFG_ANY_DST`: Dec takes NSH frames whatever their destination MAC.
pub const CFG_ANY_DST: u16 = 0x1;
/// `CFG_NAT_LEARN`: Enc learns a NAT SF's translated 5-tuple on a proxy miss.
pub const CFG_NAT_LEARN: u16 = 0x2;
/// The SI the classifier pushes (the first SF sees it).
pub const SI_START: u8 = 255;
/// The TTL the classifier pushes (RFC 8300's default, 6 bits).
pub const TTL_START: u8 = 63;
/// Bytes of context of MD type 1.
pub const MD1_CTX_LEN: usize = 16;

/// An Ethernet address, written `02:00:00:00:00:01`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// The all-zero address (the next hop of an end-of-path entry).
    pub const ZERO: Mac = Mac([0; 6]);
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// A MAC address that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a MAC address (want six hex bytes like 02:00:00:00:00:01): {0:?}")]
pub struct BadMac(pub String);

impl FromStr for Mac {
    type Err = BadMac;
    fn from_str(s: &str) -> Result<Mac, BadMac> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for b in &mut out {
            let p = parts.next().ok_or_else(|| BadMac(s.to_string()))?;
            if p.is_empty() || p.len() > 2 {
                return Err(BadMac(s.to_string()));
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| BadMac(s.to_string()))?;
        }
        if parts.next().is_some() {
            return Err(BadMac(s.to_string()));
        }
        Ok(Mac(out))
    }
}

impl Serialize for Mac {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Mac {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Mac, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// `struct flow_key`: the inner 5-tuple (the proxy table's key, and the classifier's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlowKey {
    /// Source address.
    pub saddr: Ipv4Addr,
    /// Destination address.
    pub daddr: Ipv4Addr,
    /// Source port (0 for protocols without ports).
    pub sport: u16,
    /// Destination port (0 for protocols without ports).
    pub dport: u16,
    /// IP protocol number.
    pub proto: u8,
}

/// `struct cls_key`: the ingress interface (0 = any) and the 5-tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClsKey {
    /// Ingress interface index; 0 matches any interface.
    pub ifindex: u32,
    /// The 5-tuple.
    pub flow: FlowKey,
}

/// `struct nsh_meta`: an NSH without its constants (what Cls pushes, what Dec saves).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NshMeta {
    /// SPI << 8 | SI.
    pub sph: u32,
    /// MD type: 1 or 2.
    pub md_type: u8,
    /// TTL (6 bits).
    pub ttl: u8,
    /// `PROXY_*` flags (proxy table) or 0.
    pub flags: u8,
    /// Context bytes: 16 for MD type 1; up to 32, whole words, for MD type 2.
    pub ctx: Vec<u8>,
}

impl NshMeta {
    /// An MD type 1 header with zero context for (SPI, SI).
    pub fn md1(spi: u32, si: u8, flags: u8) -> NshMeta {
        NshMeta {
            sph: sph(spi, si),
            md_type: 1,
            ttl: TTL_START,
            flags,
            ctx: vec![0; MD1_CTX_LEN],
        }
    }
    /// The service path identifier.
    pub fn spi(&self) -> u32 {
        self.sph >> 8
    }
    /// The service index.
    pub fn si(&self) -> u8 {
        (self.sph & 0xff) as u8
    }
}

/// SPI << 8 | SI (the forwarding table's key).
#[inline]
pub fn sph(spi: u32, si: u8) -> u32 {
    (spi << 8) | u32::from(si)
}

/// `FWD_*`: what Fwd does with a packet of this (SPI, SI).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FwdAction {
    /// `FWD_ETHERNET`: to the next hop over Ethernet transport.
    Ethernet,
    /// `FWD_VXLAN_GPE`: to the next hop over a VXLAN-GPE tunnel.
    VxlanGpe,
    /// `FWD_END`: end of path, remove transport and NSH, deliver the inner frame.
    End,
}

impl FwdAction {
    /// The `FWD_*` value of cbox.h.
    pub fn raw(self) -> u8 {
        match self {
            FwdAction::Ethernet => 1,
            FwdAction::VxlanGpe => 2,
            FwdAction::End => 3,
        }
    }
}

/// `struct fwd_val`: the next hop of one (SPI, SI).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FwdVal {
    /// What to do.
    pub action: FwdAction,
    /// `FWDF_*` flags.
    pub flags: u8,
    /// The next hop's MAC (outer Ethernet destination).
    pub dmac: Mac,
    /// Our MAC on the egress interface (outer Ethernet source).
    pub smac: Mac,
    /// VXLAN-GPE: UDP source port, 0 = derived from the inner flow.
    pub udp_sport: u16,
    /// Redirect to this interface; 0 = continue on the current one.
    pub ifindex: u32,
    /// VXLAN-GPE: outer IPv4 source.
    pub saddr: Ipv4Addr,
    /// VXLAN-GPE: outer IPv4 destination (the tunnel endpoint).
    pub daddr: Ipv4Addr,
    /// VXLAN-GPE: 24-bit VNI.
    pub vni: u32,
}

impl FwdVal {
    /// The end-of-path entry (`FWD_END`, zero MAC: Fig. 5.10's "ZERO, 1").
    pub fn end() -> FwdVal {
        FwdVal {
            action: FwdAction::End,
            flags: 0,
            dmac: Mac::ZERO,
            smac: Mac::ZERO,
            udp_sport: 0,
            ifindex: 0,
            saddr: Ipv4Addr::UNSPECIFIED,
            daddr: Ipv4Addr::UNSPECIFIED,
            vni: 0,
        }
    }
}

/// `struct stage_cfg`: who we are on one interface (the configuration map, keyed by ifindex).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StageCfg {
    /// The interface's MAC.
    pub mac: Mac,
    /// `CFG_*` flags.
    pub flags: u16,
    /// The interface's index.
    pub ifindex: u32,
}
