//! The chain file: Chaining-Box's JSON format (thesis Appendix A) with FuseBox's optional
//! extensions, or the same structure in TOML.
//!
//! ```json
//! { "chains": [ { "id": 100, "nodes": ["sf2", "sf3"] } ],
//!   "functions": [ { "tag": "sf2", "type": "tc-redirect", "host": "server1" },
//!                  { "tag": "sf3", "type": "tc-redirect", "host": "server2" } ] }
//! ```

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// A whole chain file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainFile {
    /// The chains (SPI and the SFs in order).
    pub chains: Vec<Chain>,
    /// The service functions the chains name.
    pub functions: Vec<Function>,
    /// Extension: the hosts' transports (a host not listed uses Ethernet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostDef>,
    /// Extension: join consecutive SFs on one host by direct links (default true).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub direct_links: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One chain: its SPI and its SFs in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chain {
    /// The SPI (24 bits).
    pub id: u32,
    /// The SFs in order; a node may list alternatives (the first live one is used).
    pub nodes: Vec<Node>,
    /// Extension: the traffic that enters this chain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classifier: Vec<ClsRule>,
    /// Extension: the host whose classifier takes the traffic in (for rules without `host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
}

/// One node of a chain: an SF tag, or alternative SF tags (the first live one is used).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Node {
    /// One SF.
    One(String),
    /// Alternatives, in order of preference.
    Any(Vec<String>),
}

impl Node {
    /// The SF tags of this node, in order of preference.
    pub fn choices(&self) -> &[String] {
        match self {
            Node::One(t) => std::slice::from_ref(t),
            Node::Any(ts) => ts,
        }
    }
}

/// One service function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Function {
    /// The name chains use for it (unique).
    pub tag: String,
    /// Chaining-Box: which function to deploy; FuseBox keeps it as a label.
    #[serde(rename = "type")]
    pub kind: String,
    /// The host it runs on.
    pub host: String,
    /// Extension: the SF reads and rewrites NSH itself (no Dec, no Enc).
    #[serde(default, skip_serializing_if = "is_false")]
    pub nsh_aware: bool,
    /// Extension: the SF rewrites 5-tuples (NAT-aware proxy: Enc learns the translation).
    #[serde(default, skip_serializing_if = "is_false")]
    pub nat: bool,
    /// Extension: the interface the SF receives on (default: what its agent reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface_in: Option<String>,
    /// Extension: the interface the SF sends on (default: the same as `iface_in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface_out: Option<String>,
}

/// Extension: one classifier rule, an exact 5-tuple (cbox.h's `cls_key`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClsRule {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol: `tcp`, `udp`, `icmp` or a number.
    pub proto: Proto,
    /// Source port (TCP and UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    /// Destination port (TCP and UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
    /// The ingress host (default: the chain's `entry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The ingress interface (default: any interface the host's agent offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<String>,
}

/// An IP protocol: a name or a number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Proto {
    /// A protocol number.
    Number(u8),
    /// `tcp`, `udp` or `icmp`.
    Name(String),
}

impl Proto {
    /// The protocol number, if the name is known.
    pub fn number(&self) -> Option<u8> {
        match self {
            Proto::Number(n) => Some(*n),
            Proto::Name(s) => match s.as_str() {
                "tcp" => Some(6),
                "udp" => Some(17),
                "icmp" => Some(1),
                _ => None,
            },
        }
    }
}

/// Extension: how a host is reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDef {
    /// The host's name (as functions' `host`).
    pub name: String,
    /// Its transport (default Ethernet: the hosts share an L2 network).
    #[serde(default)]
    pub transport: Transport,
    /// VXLAN-GPE: its underlay IPv4 address (default: what its agent reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub underlay: Option<Ipv4Addr>,
}

/// The transport between hosts.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Outer Ethernet (EtherType 0x894F): the hosts share an L2 network.
    #[default]
    Ethernet,
    /// Outer IPv4 + UDP 4790 + VXLAN-GPE.
    VxlanGpe,
}
