//! Address arguments: IPv4 addresses and prefixes, Ethernet addresses, and the names an NF
//! declares with `AddressInfo` and `IPRewriterPatterns`.

use crate::args::{Args, ConfigError};
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use wire::ethernet::Address as EthAddr;

/// Names declared by `AddressInfo` (name → addresses) and `IPRewriterPatterns`
/// (name → pattern text `SADDR SPORT DADDR DPORT`).
#[derive(Debug, Clone, Default)]
pub struct Names {
    addresses: HashMap<String, Vec<String>>,
    patterns: HashMap<String, String>,
    mappers: HashMap<String, (String, String)>,
}

impl Names {
    /// No names.
    pub fn new() -> Names {
        Names::default()
    }

    /// Adds the entries of an `AddressInfo(NAME ADDR [ADDR...], ...)` configuration.
    pub fn add_address_info(&mut self, config: &str) -> Result<(), ConfigError> {
        for a in Args::parse(config)?.all() {
            let text = match &a.keyword {
                Some(k) => format!("{k} {}", a.value),
                None => a.value.clone(),
            };
            let mut words = text.split_whitespace();
            let name = words.next().ok_or_else(|| {
                ConfigError::new("expected `NAME ADDRESS...`, found an empty entry")
            })?;
            let addrs: Vec<String> = words.map(str::to_string).collect();
            if addrs.is_empty() {
                return Err(ConfigError::new(format!(
                    "expected addresses after `{name}`"
                )));
            }
            for w in &addrs {
                let ok = parse_prefix_plain(w).is_some()
                    || w.parse::<EthAddr>().is_ok()
                    || w.split('/')
                        .next()
                        .is_some_and(|x| x.parse::<Ipv6Addr>().is_ok());
                if !ok {
                    return Err(ConfigError::new(format!(
                        "expected an IP address, IP prefix or Ethernet address for `{name}`, found `{w}`"
                    )));
                }
            }
            self.addresses.insert(name.to_string(), addrs);
        }
        Ok(())
    }

    /// Adds the entries of an `IPRewriterPatterns(NAME SADDR SPORT DADDR DPORT, ...)` configuration.
    pub fn add_patterns(&mut self, config: &str) -> Result<(), ConfigError> {
        for a in Args::parse(config)?.all() {
            let text = match &a.keyword {
                Some(k) => format!("{k} {}", a.value),
                None => a.value.clone(),
            };
            let (name, rest) = text.trim().split_once(char::is_whitespace).ok_or_else(|| {
                ConfigError::new(format!(
                    "expected `NAME SADDR SPORT DADDR DPORT`, found `{text}`"
                ))
            })?;
            self.patterns
                .insert(name.to_string(), rest.trim().to_string());
        }
        Ok(())
    }

    /// Records an element that rewriters may name as a mapper in an input spec
    /// (`RoundRobinIPMapper`): its class and configuration string.
    pub fn add_mapper(&mut self, name: &str, class: &str, config: &str) {
        self.mappers
            .insert(name.to_string(), (class.to_string(), config.to_string()));
    }

    /// The class and configuration of the mapper element called `name`.
    pub fn mapper(&self, name: &str) -> Option<(&str, &str)> {
        self.mappers
            .get(name)
            .map(|(c, k)| (c.as_str(), k.as_str()))
    }

    /// The pattern text declared under `name`.
    pub fn pattern(&self, name: &str) -> Option<&str> {
        self.patterns.get(name).map(String::as_str)
    }

    fn lookup<'a>(&'a self, s: &'a str) -> (Option<&'a [String]>, &'a str) {
        let (name, suffix) = s.split_once(':').unwrap_or((s, ""));
        (self.addresses.get(name).map(Vec::as_slice), suffix)
    }

    /// An IPv4 address: dotted quad, or an `AddressInfo` name (its first IPv4 address or the
    /// address part of its first prefix; `name:ip` also works).
    pub fn ipv4(&self, s: &str) -> Result<Ipv4Addr, ConfigError> {
        let s = s.trim();
        if let Ok(a) = s.parse::<Ipv4Addr>() {
            return Ok(a);
        }
        if let (Some(list), suffix) = self.lookup(s) {
            if matches!(suffix, "" | "ip") {
                if let Some(a) = list.iter().find_map(|w| parse_prefix_plain(w).map(|p| p.0)) {
                    return Ok(a);
                }
            }
        }
        Err(ConfigError::new(format!(
            "expected IP address, found `{s}`"
        )))
    }

    /// An IPv4 prefix: `10.0.0.0/8`, `10/8`, `10.0.0.0/255.0.0.0`, a bare address (/32), or
    /// an `AddressInfo` name (its first prefix, or its first address as /32; `name:ipnet`).
    pub fn prefix(&self, s: &str) -> Result<(Ipv4Addr, u8), ConfigError> {
        let s = s.trim();
        if let Some(p) = parse_prefix_plain(s) {
            return Ok(p);
        }
        if let (Some(list), suffix) = self.lookup(s) {
            if matches!(suffix, "" | "ipnet" | "ip") {
                let pick = list
                    .iter()
                    .find(|w| w.contains('/'))
                    .or_else(|| list.first());
                if let Some(p) = pick.and_then(|w| parse_prefix_plain(w)) {
                    return Ok(if suffix == "ip" { (p.0, 32) } else { p });
                }
            }
        }
        Err(ConfigError::new(format!(
            "expected IP prefix (ADDR/LEN), found `{s}`"
        )))
    }

    /// An Ethernet address (`00:11:22:33:44:55`, `0-11-22-33-44-55`), or an `AddressInfo` name.
    pub fn eth(&self, s: &str) -> Result<EthAddr, ConfigError> {
        let s = s.trim();
        if let Ok(a) = s.parse::<EthAddr>() {
            return Ok(a);
        }
        if let (Some(list), suffix) = self.lookup(s) {
            if matches!(suffix, "" | "eth") {
                if let Some(a) = list.iter().find_map(|w| w.parse::<EthAddr>().ok()) {
                    return Ok(a);
                }
            }
        }
        Err(ConfigError::new(format!(
            "expected Ethernet address, found `{s}`"
        )))
    }
}

/// Parses a prefix without names: `A.B.C.D/LEN`, `A.B.C.D/MASK`, `A.B/LEN` (missing octets
/// are zero, as Click allows in prefixes), or a bare dotted quad (/32). Host bits are kept.
pub fn parse_prefix_plain(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let ip = match addr.parse::<Ipv4Addr>() {
        Ok(ip) => ip,
        Err(_) => {
            // Partial dotted form only with an explicit length (10/8, 192.168/16).
            len?;
            let parts: Vec<&str> = addr.split('.').collect();
            if parts.is_empty() || parts.len() > 4 {
                return None;
            }
            let mut o = [0u8; 4];
            for (i, p) in parts.iter().enumerate() {
                o[i] = p.parse().ok()?;
            }
            Ipv4Addr::from(o)
        }
    };
    let len = match len {
        None => 32,
        Some(l) => {
            if let Ok(n) = l.parse::<u8>() {
                if n > 32 {
                    return None;
                }
                n
            } else {
                let m = u32::from(l.parse::<Ipv4Addr>().ok()?);
                let n = m.leading_ones();
                if m.checked_shl(n).unwrap_or(0) != 0 {
                    return None; // not a contiguous mask
                }
                n as u8
            }
        }
    };
    Some((ip, len))
}

/// The netmask of a prefix length.
pub fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(
            parse_prefix_plain("10/8"),
            Some((Ipv4Addr::new(10, 0, 0, 0), 8))
        );
        assert_eq!(
            parse_prefix_plain("192.168.0.0/255.255.0.0"),
            Some((Ipv4Addr::new(192, 168, 0, 0), 16))
        );
        assert_eq!(
            parse_prefix_plain("1.2.3.4"),
            Some((Ipv4Addr::new(1, 2, 3, 4), 32))
        );
        assert_eq!(parse_prefix_plain("1.2.3.4/33"), None);
        assert_eq!(parse_prefix_plain("1.2.3.4/255.0.255.0"), None);
        assert_eq!(parse_prefix_plain("10"), None);
        assert_eq!(mask(24), 0xffff_ff00);
        assert_eq!(mask(0), 0);
    }

    #[test]
    fn address_info_names() {
        let mut n = Names::new();
        n.add_address_info("ext 10.0.0.1, int 192.168.0.1/24 00:01:02:03:04:05, GW 1.1.1.1")
            .unwrap();
        assert_eq!(n.ipv4("ext").unwrap(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(
            n.prefix("int").unwrap(),
            (Ipv4Addr::new(192, 168, 0, 1), 24)
        );
        assert_eq!(n.ipv4("int:ip").unwrap(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(n.eth("int").unwrap().to_string(), "00:01:02:03:04:05");
        assert_eq!(n.ipv4("GW").unwrap(), Ipv4Addr::new(1, 1, 1, 1));
        assert!(n.ipv4("nope").is_err());
        assert!(n.add_address_info("bad 1.2.3").is_err());
    }
}
