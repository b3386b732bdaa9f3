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
