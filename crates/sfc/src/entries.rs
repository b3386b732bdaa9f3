//! The map entries of the NSH stages: the `stages` crate's mirrors of
//! `crates/stages/bpf/cbox.h` (one definition), with the serde form the controller writes
//! to etcd and the agent reads back (MACs as `02:00:00:00:00:01`, contexts in hex).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

pub use stages::maps::{
    ClsKey, FlowKey, FwdAction, FwdVal, NshMeta, StageCfg, CFG_ANY_DST, CFG_NAT_LEARN, CFG_TO_HOST,
    FWDF_INGRESS, NSH_MAX_CTX, PROXY_LEARNED, PROXY_STATIC,
};

/// The SI the classifier pushes (the first SF sees it).
pub const SI_START: u8 = 255;
/// The TTL the classifier pushes (RFC 8300's default, 6 bits).
pub const TTL_START: u8 = 63;

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

impl From<[u8; 6]> for Mac {
    fn from(b: [u8; 6]) -> Mac {
        Mac(b)
    }
}

/// SPI << 8 | SI (the forwarding table's key).
#[inline]
pub fn sph(spi: u32, si: u8) -> u32 {
    ((spi & 0xff_ffff) << 8) | u32::from(si)
}

/// An MD type 1 header for (SPI, SI) with zero context, TTL 63 and `flags` (`PROXY_*`).
pub fn md1(spi: u32, si: u8, flags: u8) -> NshMeta {
    let mut m = NshMeta::md1(spi, si, TTL_START, [0; 4]);
    m.flags = flags;
    m
}

/// The end-of-path entry (`FWD_END`, zero MACs: Fig. 5.10's "ZERO, 1").
pub fn fwd_end() -> FwdVal {
    FwdVal {
        action: FwdAction::End,
        flags: 0,
        dmac: [0; 6],
        smac: [0; 6],
        udp_sport: 0,
        ifindex: 0,
        saddr: Ipv4Addr::UNSPECIFIED,
        daddr: Ipv4Addr::UNSPECIFIED,
        vni: 0,
    }
}

/// serde for a MAC held as `[u8; 6]`: the `02:00:00:00:00:01` text.
pub mod mac_text {
    use super::Mac;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    /// Writes the MAC as text.
    pub fn serialize<S: Serializer>(m: &[u8; 6], s: S) -> Result<S::Ok, S::Error> {
        Mac(*m).serialize(s)
    }
    /// Reads the MAC from text.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 6], D::Error> {
        Mac::deserialize(d).map(|m| m.0)
    }
}

/// serde for an NSH context (`[u8; 32]` and its length): the bytes in use, in hex.
mod ctx_hex {
    use super::NSH_MAX_CTX;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(c: &[u8; NSH_MAX_CTX], s: S) -> Result<S::Ok, S::Error> {
        let mut t = String::with_capacity(2 * NSH_MAX_CTX);
        for b in c {
            t.push_str(&format!("{b:02x}"));
        }
        s.serialize_str(&t)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; NSH_MAX_CTX], D::Error> {
        let t = String::deserialize(d)?;
        let mut out = [0u8; NSH_MAX_CTX];
        if t.len() != 2 * NSH_MAX_CTX || !t.is_ascii() {
            return Err(D::Error::custom("NSH context: expected 64 hex digits"));
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16)
                .map_err(|_| D::Error::custom("NSH context: expected hex digits"))?;
        }
        Ok(out)
    }
}

/// serde for [`FwdAction`] (`ethernet`, `vxlan-gpe`, `end`, or the raw code).
#[derive(Serialize, Deserialize)]
#[serde(remote = "FwdAction", rename_all = "kebab-case")]
pub enum FwdActionDef {
    /// `FWD_ETHERNET`.
    Ethernet,
    /// `FWD_VXLAN_GPE`.
    VxlanGpe,
    /// `FWD_END`.
    End,
    /// Another code.
    Other(u8),
}

/// serde for [`FwdVal`] (use as `#[serde(with = "FwdValDef")]`).
#[derive(Serialize, Deserialize)]
#[serde(remote = "FwdVal")]
pub struct FwdValDef {
    /// What to do.
    #[serde(with = "FwdActionDef")]
    pub action: FwdAction,
    /// `FWDF_*` flags.
    pub flags: u8,
    /// The next hop's MAC.
    #[serde(with = "mac_text")]
    pub dmac: [u8; 6],
    /// Our MAC on the egress interface.
    #[serde(with = "mac_text")]
    pub smac: [u8; 6],
    /// VXLAN-GPE: UDP source port, 0 = derived from the inner flow.
    pub udp_sport: u16,
    /// Redirect to this interface; 0 = continue on the current one.
    pub ifindex: u32,
    /// VXLAN-GPE: outer IPv4 source.
    pub saddr: Ipv4Addr,
    /// VXLAN-GPE: outer IPv4 destination.
    pub daddr: Ipv4Addr,
    /// VXLAN-GPE: 24-bit VNI.
    pub vni: u32,
}

/// serde for [`NshMeta`].
#[derive(Serialize, Deserialize)]
#[serde(remote = "NshMeta")]
pub struct NshMetaDef {
    /// SPI << 8 | SI.
    pub sph: u32,
    /// MD type.
    pub md_type: u8,
    /// TTL.
    pub ttl: u8,
    /// Context bytes in use.
    pub ctx_len: u8,
    /// `PROXY_*` flags.
    pub flags: u8,
    /// Context.
    #[serde(with = "ctx_hex")]
    pub ctx: [u8; NSH_MAX_CTX],
}

/// serde for [`FlowKey`].
#[derive(Serialize, Deserialize)]
#[serde(remote = "FlowKey")]
pub struct FlowKeyDef {
    /// Source address.
    pub saddr: Ipv4Addr,
    /// Destination address.
    pub daddr: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IP protocol.
    pub proto: u8,
}

/// serde for [`ClsKey`].
#[derive(Serialize, Deserialize)]
#[serde(remote = "ClsKey")]
pub struct ClsKeyDef {
    /// Ingress interface index (0: any).
    pub ifindex: u32,
    /// The 5-tuple.
    #[serde(with = "FlowKeyDef")]
    pub flow: FlowKey,
}

/// serde for [`StageCfg`].
#[derive(Serialize, Deserialize)]
#[serde(remote = "StageCfg")]
pub struct StageCfgDef {
    /// The interface's MAC.
    #[serde(with = "mac_text")]
    pub mac: [u8; 6],
    /// `CFG_*` flags.
    pub flags: u16,
    /// The interface's index.
    pub ifindex: u32,
}

/// serde for a map of [`StageCfg`] by ifindex.
pub mod cfg_map {
    use super::{StageCfg, StageCfgDef};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    struct Ref<'a>(&'a StageCfg);
    impl Serialize for Ref<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            StageCfgDef::serialize(self.0, s)
        }
    }
    #[derive(Deserialize)]
    struct Own(#[serde(with = "StageCfgDef")] StageCfg);

    /// Writes the map.
    pub fn serialize<S: Serializer>(m: &BTreeMap<u32, StageCfg>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k, Ref(v))))
    }
    /// Reads the map.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<u32, StageCfg>, D::Error> {
        let m = BTreeMap::<u32, Own>::deserialize(d)?;
        Ok(m.into_iter().map(|(k, v)| (k, v.0)).collect())
    }
}

/// A [`StageCfg`] with its serde form (an etcd value on its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cfg(#[serde(with = "StageCfgDef")] pub StageCfg);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_forms() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct E(
            #[serde(with = "FwdValDef")] FwdVal,
            #[serde(with = "NshMetaDef")] NshMeta,
        );
        let mut v = fwd_end();
        v.action = FwdAction::VxlanGpe;
        v.dmac = [2, 0, 0, 0, 0, 0xab];
        v.daddr = Ipv4Addr::new(192, 0, 2, 1);
        let m = md1(100, 254, PROXY_STATIC);
        let text = serde_json::to_string(&E(v, m)).unwrap();
        assert!(text.contains("\"vxlan-gpe\""), "{text}");
        assert!(text.contains("\"02:00:00:00:00:ab\""), "{text}");
        assert!(text.contains(&"0".repeat(64)), "{text}");
        assert_eq!(serde_json::from_str::<E>(&text).unwrap(), E(v, m));
        assert_eq!((m.spi(), m.si(), m.ctx_len, m.ttl), (100, 254, 16, 63));
        assert_eq!(sph(100, 254), m.sph);
        let bad = text.replace(&"0".repeat(64), "zz");
        assert!(serde_json::from_str::<E>(&bad).is_err());
        for s in [
            "",
            "02:00",
            "02:00:00:00:00:00:00",
            "g2:00:00:00:00:00",
            "002:0:0:0:0:0",
        ] {
            assert!(s.parse::<Mac>().is_err(), "{s}");
        }
        assert_eq!(
            "2-0-0-0-0-ab".parse::<Mac>(),
            Ok(Mac([2, 0, 0, 0, 0, 0xab]))
        );
    }
}
