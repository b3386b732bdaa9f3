//! What each agent's Hello says: its host, its SFs' interfaces, its underlay address. The
//! controller's registry is the Hellos of the live agents (those whose lease is alive).

use crate::entries::Mac;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// One network interface on a host.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Iface {
    /// Its name (`veth0`).
    pub name: String,
    /// Its index.
    pub ifindex: u32,
    /// Its MAC.
    pub mac: Mac,
}

/// An SF's interfaces as its agent sees them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfPorts {
    /// Where the SF receives (Dec sits here).
    pub iface_in: Iface,
    /// Where the SF sends (Enc and Fwd sit here); `None`: the same as `iface_in`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface_out: Option<Iface>,
}

impl SfPorts {
    /// The sending interface.
    pub fn out(&self) -> &Iface {
        self.iface_out.as_ref().unwrap_or(&self.iface_in)
    }
}

/// The host's underlay (VXLAN-GPE tunnel endpoint).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Underlay {
    /// Its IPv4 address.
    pub addr: Ipv4Addr,
    /// The MAC senders put as outer destination (the host's underlay interface, on a
    /// shared segment); `None`: zero (the agent's Fwd then relies on the kernel's neighbour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<Mac>,
}

/// An agent's Hello.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The host's name (the chain file's `host`).
    pub host: String,
    /// The SFs the agent runs, by tag.
    #[serde(default)]
    pub functions: BTreeMap<String, SfPorts>,
    /// Other interfaces: where a classifier may take traffic in, and the interfaces the
    /// chain file names by `iface_in` / `iface_out` for SFs not listed in `functions`.
    #[serde(default)]
    pub ifaces: Vec<Iface>,
    /// The underlay address, for VXLAN-GPE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub underlay: Option<Underlay>,
}

impl Hello {
    /// The interface of that name, among the SFs' and the others.
    pub fn iface(&self, name: &str) -> Option<&Iface> {
        self.ifaces.iter().find(|i| i.name == name).or_else(|| {
            self.functions
                .values()
                .flat_map(|p| std::iter::once(&p.iface_in).chain(p.iface_out.as_ref()))
                .find(|i| i.name == name)
        })
    }
}

/// The live agents' Hellos, by host name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    /// Host name → its Hello.
    pub hosts: BTreeMap<String, Hello>,
}

impl Registry {
    /// A registry of these Hellos (a later Hello of the same host replaces an earlier one).
    pub fn from_hellos(hellos: impl IntoIterator<Item = Hello>) -> Registry {
        Registry {
            hosts: hellos.into_iter().map(|h| (h.host.clone(), h)).collect(),
        }
    }
}

impl Registry {
    /// The registry a dry run assumes: every host of the file live, every SF on interfaces
    /// named by the file (or after its tag), placeholder ifindexes and MACs
    /// (`02:00:00:00:00:NN`), classifier hosts with `eth0` unless their rules name an
    /// interface, and VXLAN-GPE hosts without an underlay address on 192.0.2.0/24.
    pub fn assumed(file: &crate::file::ChainFile) -> Registry {
        use crate::file::Transport;
        let mut hellos: BTreeMap<String, Hello> = BTreeMap::new();
        let mut n: u32 = 0;
        let mut next = |name: &str| {
            n += 1;
            let b = n.to_be_bytes();
            Iface {
                name: name.to_string(),
                ifindex: 100 + n,
                mac: Mac([0x02, 0, b[0], b[1], b[2], b[3]]),
            }
        };
        let hello = |hellos: &mut BTreeMap<String, Hello>, host: &str| {
            hellos.entry(host.to_string()).or_insert_with(|| Hello {
                host: host.to_string(),
                functions: BTreeMap::new(),
                ifaces: Vec::new(),
                underlay: None,
            });
        };
        for f in &file.functions {
            hello(&mut hellos, &f.host);
            let in_name = f.iface_in.clone().unwrap_or_else(|| f.tag.clone());
            let iface_in = next(&in_name);
            let iface_out = match &f.iface_out {
                Some(o) if *o != in_name => Some(next(o)),
                _ => None,
            };
            if let Some(h) = hellos.get_mut(&f.host) {
                h.functions.insert(
                    f.tag.clone(),
                    SfPorts {
                        iface_in,
                        iface_out,
                    },
                );
            }
        }
        for c in &file.chains {
            for r in &c.classifier {
                let Some(host) = r.host.as_ref().or(c.entry.as_ref()) else {
                    continue;
                };
                hello(&mut hellos, host);
                let name = r.iface.clone().unwrap_or_else(|| "eth0".to_string());
                let known = hellos.get(host).is_some_and(|h| h.iface(&name).is_some());
                if !known {
                    let i = next(&name);
                    if let Some(h) = hellos.get_mut(host) {
                        h.ifaces.push(i);
                    }
                }
            }
        }
        let mut last = 0u8;
        for (name, h) in hellos.iter_mut() {
            let def = file.hosts.iter().find(|d| d.name == *name);
            if def.is_some_and(|d| d.transport == Transport::VxlanGpe && d.underlay.is_none()) {
                last = last.wrapping_add(1);
                h.underlay = Some(Underlay {
                    addr: Ipv4Addr::new(192, 0, 2, last),
                    mac: None,
                });
            }
        }
        Registry { hosts: hellos }
    }

    /// Who owns `mac`: `"sf3 in"`, `"sf3 out"`, `"server1 eth0"`, if anyone.
    pub fn owner(&self, mac: crate::entries::Mac) -> Option<String> {
        for h in self.hosts.values() {
            for (tag, p) in &h.functions {
                if p.iface_in.mac == mac {
                    return Some(format!("{tag} in"));
                }
                if p.iface_out.as_ref().is_some_and(|o| o.mac == mac) {
                    return Some(format!("{tag} out"));
                }
            }
            if let Some(i) = h.ifaces.iter().find(|i| i.mac == mac) {
                return Some(format!("{} {}", h.host, i.name));
            }
            if h.underlay.as_ref().and_then(|u| u.mac) == Some(mac) {
                return Some(format!("{} underlay", h.host));
            }
        }
        None
    }
}
