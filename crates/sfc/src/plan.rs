//! The per-host plan: for every host, which stages sit on which interface of which SF, and
//! the entries of each SF instance's maps (forwarding, classifier, configuration, proxy).
//!
//! An *instance* is one set of maps (one pin directory): one per SF, named by its tag, and
//! one classifier instance per entry host, named [`CLASSIFIER`].

use crate::entries::{ClsKey, FlowKey, FwdVal, NshMeta, StageCfg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The instance name of a host's classifier (tags cannot start with `@`).
pub const CLASSIFIER: &str = "@cls";

/// A stage program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// The classifier: 5-tuple → (SPI, SI), push NSH, forward by the forwarding table.
    Cls,
    /// Decapsulation before an NSH-unaware SF (XDP).
    Dec,
    /// Encapsulation after an NSH-unaware SF (TC egress), then the next TC filter.
    Enc,
    /// Forwarding by (SPI, SI) (TC egress).
    Fwd,
    /// Encapsulation and forwarding in one program (TC egress).
    EncFwd,
}

impl Stage {
    /// Its name (`enc-fwd`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Cls => "cls",
            Stage::Dec => "dec",
            Stage::Enc => "enc",
            Stage::Fwd => "fwd",
            Stage::EncFwd => "enc-fwd",
        }
    }
    /// The hook it is attached to.
    pub fn hook(self) -> Hook {
        match self {
            Stage::Cls => Hook::TcIngress,
            Stage::Dec => Hook::Xdp,
            Stage::Enc | Stage::Fwd | Stage::EncFwd => Hook::TcEgress,
        }
    }
    /// The stage of that name.
    pub fn from_name(s: &str) -> Option<Stage> {
        [
            Stage::Cls,
            Stage::Dec,
            Stage::Enc,
            Stage::Fwd,
            Stage::EncFwd,
        ]
        .into_iter()
        .find(|st| st.name() == s)
    }
}

/// Where a stage program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hook {
    /// XDP (receive).
    Xdp,
    /// TC ingress.
    TcIngress,
    /// TC egress.
    TcEgress,
}

/// One stage on one interface.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Attach {
    /// The stage.
    pub stage: Stage,
    /// The interface's name.
    pub iface: String,
    /// The interface's index (as the agent reported it).
    pub ifindex: u32,
}

/// One forwarding entry: (SPI, SI) → next hop.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FwdEntry {
    /// SPI.
    pub spi: u32,
    /// SI of the packet Fwd sees.
    pub si: u8,
    /// The next hop.
    pub val: FwdVal,
}

/// One classifier entry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClsEntry {
    /// Ingress interface and 5-tuple.
    pub key: ClsKey,
    /// The NSH to push.
    pub meta: NshMeta,
}

/// One static proxy entry (the §5.5 corner cases: Dec skipped, Enc needed).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProxyEntry {
    /// The 5-tuple the SF emits.
    pub key: FlowKey,
    /// The NSH Enc pushes back (with SI − 1); flags `PROXY_STATIC`.
    pub meta: NshMeta,
}

/// One SF instance (or a host's classifier): its stages and map entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// The stages and where they sit (sorted).
    pub attach: Vec<Attach>,
    /// Forwarding entries (sorted by SPI, SI).
    pub fwd: Vec<FwdEntry>,
    /// Classifier entries (sorted).
    pub cls: Vec<ClsEntry>,
    /// Configuration per interface (key: ifindex).
    pub cfg: BTreeMap<u32, StageCfg>,
    /// Static proxy entries (sorted).
    pub proxy: Vec<ProxyEntry>,
}

/// One end of a direct link: an SF's interface.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LinkEnd {
    /// The SF's tag.
    pub tag: String,
    /// The interface's name.
    pub iface: String,
    /// The interface's index.
    pub ifindex: u32,
}

/// A direct link: what `from` sends on its egress interface goes straight into `to`'s
/// receiving interface (no Enc/Fwd before, no Dec after).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DirectLink {
    /// The sending SF's egress interface.
    pub from: LinkEnd,
    /// The receiving SF's ingress interface.
    pub to: LinkEnd,
    /// The chains (SPIs) that use it.
    pub chains: Vec<u32>,
}

/// Everything one host's agent installs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPlan {
    /// The host.
    pub host: String,
    /// Instances by name: SF tags, and [`CLASSIFIER`].
    pub instances: BTreeMap<String, Instance>,
    /// Direct links between SFs on this host (sorted).
    pub direct_links: Vec<DirectLink>,
}

/// One SF a chain goes through, as chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    /// The SF's tag.
    pub tag: String,
    /// Its host.
    pub host: String,
    /// The SI of packets it receives (255 for the first).
    pub si: u8,
}

/// What became of one chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainReport {
    /// Its SPI.
    pub id: u32,
    /// The SFs chosen (alternatives resolved), empty when not installed.
    pub path: Vec<Hop>,
    /// Whether its entries are in the plan.
    pub installed: bool,
    /// Why not installed, or what was left out (a direct link not used, and why).
    pub notes: Vec<String>,
}

/// The whole plan: per host, and per chain what was done.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Host → what its agent installs (only hosts with something to install).
    pub hosts: BTreeMap<String, HostPlan>,
    /// One report per chain, in the file's order.
    pub chains: Vec<ChainReport>,
}
