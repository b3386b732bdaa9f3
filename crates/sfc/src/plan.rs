//! The per-host plan: for every host, which stages sit on which interface of which SF, and
//! the entries of each SF instance's maps (forwarding, classifier, configuration, proxy).
//!
//! An *instance* is one set of maps (one pin directory): one per SF, named by its tag, and
//! one classifier per ingress interface of an entry host, named [`classifier_instance`].
//!
//! The rules [`plan`] follows (thesis §5.5–5.6, RFC 8300):
//! - the classifier pushes SI 255; the k-th SF of a chain receives SI 256 − k and sends
//!   SI 255 − k, so its forwarding entry is (SPI, 255 − k) → the next SF's receiving
//!   interface, or `FWD_END` after the last SF (Fig. 5.10);
//! - Dec sits on the SF's receiving interface (XDP) unless the SF is NSH-aware or fed by a
//!   direct link; Enc and Fwd sit on its sending interface (TC egress, one combined Enc+Fwd
//!   program) unless it feeds a direct link; an NSH-aware SF gets Fwd alone;
//! - consecutive NSH-unaware SFs of a chain on one host are joined by a direct link when
//!   every chain through them agrees (the first always feeds the second, the second is
//!   always fed by the first) and, where the second keeps Enc without Dec (§5.5's corner
//!   cases: a remote SF or the end of the chain follows), static proxy entries can stand in
//!   for Dec: they need the chain's classifier 5-tuples, no NAT before, no 5-tuple shared
//!   by two chains and one visit of the SF per chain (a 5-tuple keys one SI); otherwise the
//!   report says why the link is not used;
//! - next hops on one host, or on hosts that both use Ethernet transport, are reached over
//!   Ethernet (the next SF's MAC); other hops over VXLAN-GPE to the next host's underlay
//!   address (VNI = SPI); the packet leaves by the interface it is on (`ifindex` 0);
//! - a host without a live agent (no Hello) has no live SF: a node takes its first live
//!   alternative; a chain with a node without one is reported and not installed.

use crate::entries::{
    ClsKey, ClsKeyDef, FlowKey, FlowKeyDef, FwdVal, FwdValDef, NshMeta, NshMetaDef, StageCfg,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The prefix of classifier instance names (tags cannot start with `@`).
pub const CLASSIFIER: &str = "@cls";

/// The instance name of the classifier on interface `iface`.
pub fn classifier_instance(iface: &str) -> String {
    format!("{CLASSIFIER}.{iface}")
}

/// A stage program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// The classifier at a chain's entry: 5-tuple → (SPI, 255), push NSH, then forward by
    /// its instance's forwarding table — the agent attaches `stages::Stage::ClsFwd` (Cls
    /// and Fwd in one program) for it, or Cls followed by Fwd on the same TC hook.
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FwdEntry {
    /// SPI.
    pub spi: u32,
    /// SI of the packet Fwd sees.
    pub si: u8,
    /// The next hop.
    #[serde(with = "FwdValDef")]
    pub val: FwdVal,
}

/// One classifier entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClsEntry {
    /// Ingress interface and 5-tuple.
    #[serde(with = "ClsKeyDef")]
    pub key: ClsKey,
    /// The NSH to push.
    #[serde(with = "NshMetaDef")]
    pub meta: NshMeta,
}

/// One static proxy entry (the §5.5 corner cases: Dec skipped, Enc needed).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProxyEntry {
    /// The 5-tuple the SF emits.
    #[serde(with = "FlowKeyDef")]
    pub key: FlowKey,
    /// The NSH Enc pushes back (with SI − 1); flags `PROXY_STATIC`.
    #[serde(with = "NshMetaDef")]
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
    #[serde(with = "crate::entries::cfg_map")]
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

impl ChainReport {
    /// `installed` or `NOT installed`.
    pub fn state(&self) -> &'static str {
        if self.installed {
            "installed"
        } else {
            "NOT installed"
        }
    }

    /// The path as text: `tag@host (SI n)` per hop, joined by `arrow`.
    pub fn path_text(&self, arrow: &str) -> String {
        let hops: Vec<String> = self
            .path
            .iter()
            .map(|h| format!("{}@{} (SI {})", h.tag, h.host, h.si))
            .collect();
        hops.join(arrow)
    }
}

/// The whole plan: per host, and per chain what was done.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Host → what its agent installs (only hosts with something to install).
    pub hosts: BTreeMap<String, HostPlan>,
    /// One report per chain, in the file's order.
    pub chains: Vec<ChainReport>,
}

// ---------------------------------------------------------------------------------------
// The planner.

use crate::entries::{
    fwd_end, md1, FwdAction, Mac, CFG_ANY_DST, CFG_NAT_LEARN, CFG_TO_HOST, PROXY_STATIC, SI_START,
};
use crate::file::{ChainFile, Function, Transport};
use crate::registry::{Iface, Registry};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// One SF resolved against the registry: its host is live and its interfaces known.
#[derive(Clone, Debug)]
struct Sf<'a> {
    func: &'a Function,
    iface_in: Iface,
    iface_out: Iface,
}

impl Sf<'_> {
    fn tag(&self) -> &str {
        &self.func.tag
    }
    fn host(&self) -> &str {
        &self.func.host
    }
}

/// Resolves `f` against the live agents: its interfaces, or why it is not live.
fn resolve<'a>(f: &'a Function, reg: &Registry) -> Result<Sf<'a>, String> {
    let hello = reg
        .hosts
        .get(&f.host)
        .ok_or_else(|| format!("{}: host {} has no live agent", f.tag, f.host))?;
    let reported = hello.functions.get(&f.tag);
    let named = |name: &str| {
        hello.iface(name).cloned().ok_or_else(|| {
            format!(
                "{}: the agent of {} reports no interface {name}",
                f.tag, f.host
            )
        })
    };
    let iface_in = match (&f.iface_in, reported) {
        (Some(n), _) => named(n)?,
        (None, Some(p)) => p.iface_in.clone(),
        (None, None) => {
            return Err(format!(
                "{}: the agent of {} reports no such SF (and the file names no iface_in)",
                f.tag, f.host
            ))
        }
    };
    let iface_out = match (&f.iface_out, &f.iface_in, reported) {
        (Some(n), _, _) => named(n)?,
        (None, None, Some(p)) => p.out().clone(),
        _ => iface_in.clone(),
    };
    Ok(Sf {
        func: f,
        iface_in,
        iface_out,
    })
}

fn transport(file: &ChainFile, host: &str) -> Transport {
    file.hosts
        .iter()
        .find(|h| h.name == host)
        .map_or(Transport::Ethernet, |h| h.transport)
}

/// A host's underlay address (the file's, else its agent's) and the MAC to send it to.
fn underlay(file: &ChainFile, reg: &Registry, host: &str) -> Option<(Ipv4Addr, Option<Mac>)> {
    let from_file = file
        .hosts
        .iter()
        .find(|h| h.name == host)
        .and_then(|h| h.underlay);
    let hello = reg.hosts.get(host).and_then(|h| h.underlay.as_ref());
    let addr = from_file.or(hello.map(|u| u.addr))?;
    Some((addr, hello.and_then(|u| u.mac)))
}

/// Whether a hop from `from` to `to` goes over VXLAN-GPE.
fn tunnelled(file: &ChainFile, from: &str, to: &str) -> bool {
    from != to
        && (transport(file, from) == Transport::VxlanGpe
            || transport(file, to) == Transport::VxlanGpe)
}

/// The forwarding entry's next hop from host `from` (leaving by `out`) to the SF receiving
/// on `to_in` on host `to`.
fn next_hop(
    file: &ChainFile,
    reg: &Registry,
    spi: u32,
    (from, out): (&str, &Iface),
    (to, to_in): (&str, &Iface),
) -> Result<FwdVal, String> {
    let mut v = fwd_end();
    v.smac = out.mac.0;
    v.dmac = to_in.mac.0;
    if !tunnelled(file, from, to) {
        v.action = FwdAction::Ethernet;
        return Ok(v);
    }
    let (saddr, _) = underlay(file, reg, from)
        .ok_or_else(|| format!("VXLAN-GPE from {from}: no underlay address for {from}"))?;
    let (daddr, dmac) = underlay(file, reg, to)
        .ok_or_else(|| format!("VXLAN-GPE to {to}: no underlay address for {to}"))?;
    v.action = FwdAction::VxlanGpe;
    v.saddr = saddr;
    v.daddr = daddr;
    v.dmac = dmac.unwrap_or(to_in.mac).0;
    v.vni = spi & 0xff_ffff;
    Ok(v)
}

fn flow(rule: &crate::file::ClsRule) -> Option<FlowKey> {
    Some(FlowKey {
        saddr: rule.src,
        daddr: rule.dst,
        sport: rule.sport.unwrap_or(0),
        dport: rule.dport.unwrap_or(0),
        proto: rule.proto.number()?,
    })
}

struct Chosen<'a> {
    /// Index into the file's chains.
    chain: usize,
    hops: Vec<Sf<'a>>,
}

/// Computes every host's stages and entries from the chain file and the live agents.
pub fn plan(file: &ChainFile, reg: &Registry) -> Plan {
    let funcs: BTreeMap<&str, &Function> =
        file.functions.iter().map(|f| (f.tag.as_str(), f)).collect();
    let mut reports: Vec<ChainReport> = Vec::new();
    let mut chosen: Vec<Chosen> = Vec::new();

    // 1. Paths: the first live alternative of every node; every hop reachable.
    for (ci, chain) in file.chains.iter().enumerate() {
        let mut report = ChainReport {
            id: chain.id,
            path: Vec::new(),
            installed: false,
            notes: Vec::new(),
        };
        let mut hops = Vec::new();
        for (j, node) in chain.nodes.iter().enumerate() {
            let mut why = Vec::new();
            let pick = node.choices().iter().find_map(|t| {
                match funcs.get(t.as_str()).map(|f| resolve(f, reg)) {
                    Some(Ok(sf)) => Some(sf),
                    Some(Err(e)) => {
                        why.push(e);
                        None
                    }
                    None => {
                        why.push(format!("{t}: no such function"));
                        None
                    }
                }
            });
            match pick {
                Some(sf) => {
                    if !why.is_empty() {
                        report.notes.push(format!(
                            "node {}: {} used instead of a dead alternative ({})",
                            j + 1,
                            sf.tag(),
                            why.join("; ")
                        ));
                    }
                    hops.push(sf);
                }
                None => report.notes.push(format!(
                    "not installed: node {} has no live SF ({})",
                    j + 1,
                    why.join("; ")
                )),
            }
        }
        let complete = hops.len() == chain.nodes.len() && !hops.is_empty();
        if complete {
            for w in hops.windows(2) {
                let (a, b) = (&w[0], &w[1]);
                if let Err(e) = next_hop(
                    file,
                    reg,
                    chain.id,
                    (a.host(), &a.iface_out),
                    (b.host(), &b.iface_in),
                ) {
                    report
                        .notes
                        .push(format!("not installed: {} → {}: {e}", a.tag(), b.tag()));
                }
            }
        }
        if complete && report.notes.iter().all(|n| !n.starts_with("not installed")) {
            report.installed = true;
            report.path = hops
                .iter()
                .enumerate()
                .map(|(k, sf)| Hop {
                    tag: sf.tag().to_string(),
                    host: sf.host().to_string(),
                    si: SI_START - k as u8,
                })
                .collect();
            chosen.push(Chosen { chain: ci, hops });
        }
        reports.push(report);
    }

    // 2. Direct links.
    let links = direct_links(file, &chosen, &mut reports);

    // 3. Entries.
    let mut hosts: BTreeMap<String, HostPlan> = reg
        .hosts
        .keys()
        .map(|h| {
            (
                h.clone(),
                HostPlan {
                    host: h.clone(),
                    ..HostPlan::default()
                },
            )
        })
        .collect();
    let fed: BTreeSet<&str> = links.iter().map(|(_, b)| b.as_str()).collect();
    let feeds: BTreeSet<&str> = links.iter().map(|(a, _)| a.as_str()).collect();
    for c in &chosen {
        let chain = &file.chains[c.chain];
        let spi = chain.id;
        let n = c.hops.len();
        let report = reports.iter_mut().find(|r| r.id == spi);
        let mut notes = Vec::new();
        for (idx, sf) in c.hops.iter().enumerate() {
            let k = idx + 1;
            let si_in = SI_START - idx as u8;
            let si_out = si_in - 1;
            let aware = sf.func.nsh_aware;
            let dec = !aware && !fed.contains(sf.tag());
            let egress = !feeds.contains(sf.tag());
            let hp = hosts
                .entry(sf.host().to_string())
                .or_insert_with(|| HostPlan {
                    host: sf.host().to_string(),
                    ..HostPlan::default()
                });
            let inst = hp.instances.entry(sf.tag().to_string()).or_default();
            if dec {
                inst.attach.push(Attach {
                    stage: Stage::Dec,
                    iface: sf.iface_in.name.clone(),
                    ifindex: sf.iface_in.ifindex,
                });
                // Fed over a tunnel addressed to the host's underlay MAC: take any MAC.
                let prev = idx.checked_sub(1).map(|p| c.hops[p].host());
                let any = prev.is_some_and(|p| {
                    tunnelled(file, p, sf.host())
                        && underlay(file, reg, sf.host()).is_some_and(|(_, m)| m.is_some())
                });
                let to_host = if sf.func.to_host { CFG_TO_HOST } else { 0 };
                add_cfg(
                    inst,
                    &sf.iface_in,
                    if any { CFG_ANY_DST } else { 0 } | to_host,
                );
            }
            if egress {
                let stage = if aware { Stage::Fwd } else { Stage::EncFwd };
                inst.attach.push(Attach {
                    stage,
                    iface: sf.iface_out.name.clone(),
                    ifindex: sf.iface_out.ifindex,
                });
                let nat = if sf.func.nat && !aware {
                    CFG_NAT_LEARN
                } else {
                    0
                };
                add_cfg(inst, &sf.iface_out, nat);
                let val = if k == n {
                    Ok(fwd_end())
                } else {
                    let nx = &c.hops[k];
                    next_hop(
                        file,
                        reg,
                        spi,
                        (sf.host(), &sf.iface_out),
                        (nx.host(), &nx.iface_in),
                    )
                };
                match val {
                    Ok(val) => inst.fwd.push(FwdEntry {
                        spi,
                        si: si_out,
                        val,
                    }),
                    Err(e) => notes.push(e), // checked in step 1: not reached
                }
                if !dec && !aware {
                    // §5.5: Enc without Dec — stand in for Dec with the chain's 5-tuples.
                    for rule in &chain.classifier {
                        if let Some(key) = flow(rule) {
                            inst.proxy.push(ProxyEntry {
                                key,
                                meta: md1(spi, si_in, PROXY_STATIC),
                            });
                        }
                    }
                }
            }
        }
        // Direct links of this chain.
        for w in c.hops.windows(2) {
            if links.contains(&(w[0].tag().to_string(), w[1].tag().to_string())) {
                let hp = hosts.entry(w[0].host().to_string()).or_default();
                let from = LinkEnd {
                    tag: w[0].tag().to_string(),
                    iface: w[0].iface_out.name.clone(),
                    ifindex: w[0].iface_out.ifindex,
                };
                let to = LinkEnd {
                    tag: w[1].tag().to_string(),
                    iface: w[1].iface_in.name.clone(),
                    ifindex: w[1].iface_in.ifindex,
                };
                match hp
                    .direct_links
                    .iter_mut()
                    .find(|l| l.from == from && l.to == to)
                {
                    Some(l) => l.chains.push(spi),
                    None => hp.direct_links.push(DirectLink {
                        from,
                        to,
                        chains: vec![spi],
                    }),
                }
            }
        }
        // The classifier.
        let first = &c.hops[0];
        for (r, rule) in chain.classifier.iter().enumerate() {
            let Some(host) = rule.host.as_deref().or(chain.entry.as_deref()) else {
                continue; // the file check refuses this
            };
            let Some(hello) = reg.hosts.get(host) else {
                notes.push(format!(
                    "classifier rule {}: host {host} has no live agent; not installed",
                    r + 1
                ));
                continue;
            };
            let ifaces: Vec<Iface> = match &rule.iface {
                Some(name) => match hello.iface(name) {
                    Some(i) => vec![i.clone()],
                    None => {
                        notes.push(format!(
                            "classifier rule {}: the agent of {host} reports no interface {name}; not installed",
                            r + 1
                        ));
                        continue;
                    }
                },
                // Every interface the agent offers that no SF of the host uses.
                None => {
                    let mut sf_ifaces: BTreeSet<&str> = hello
                        .functions
                        .values()
                        .flat_map(|p| [p.iface_in.name.as_str(), p.out().name.as_str()])
                        .collect();
                    for f in file.functions.iter().filter(|f| f.host == host) {
                        sf_ifaces.extend(f.iface_in.as_deref());
                        sf_ifaces.extend(f.iface_out.as_deref());
                    }
                    hello
                        .ifaces
                        .iter()
                        .filter(|i| !sf_ifaces.contains(i.name.as_str()))
                        .cloned()
                        .collect()
                }
            };
            if ifaces.is_empty() {
                notes.push(format!(
                    "classifier rule {}: the agent of {host} offers no ingress interface; not installed",
                    r + 1
                ));
            }
            let Some(key_flow) = flow(rule) else { continue };
            for iface in ifaces {
                let val = match next_hop(
                    file,
                    reg,
                    spi,
                    (host, &iface),
                    (first.host(), &first.iface_in),
                ) {
                    Ok(v) => v,
                    Err(e) => {
                        notes.push(format!("classifier rule {}: {e}; not installed", r + 1));
                        continue;
                    }
                };
                let hp = hosts.entry(host.to_string()).or_default();
                let inst = hp
                    .instances
                    .entry(classifier_instance(&iface.name))
                    .or_default();
                let key = ClsKey {
                    ifindex: if rule.iface.is_some() {
                        iface.ifindex
                    } else {
                        0
                    },
                    flow: key_flow,
                };
                if let Some(other) = inst.cls.iter().find(|c| c.key == key) {
                    if other.meta.spi() != spi {
                        notes.push(format!(
                            "classifier rule {}: chain {} already takes this 5-tuple on {host} {}; not installed there",
                            r + 1,
                            other.meta.spi(),
                            iface.name
                        ));
                    }
                    continue;
                }
                inst.attach.push(Attach {
                    stage: Stage::Cls,
                    iface: iface.name.clone(),
                    ifindex: iface.ifindex,
                });
                add_cfg(inst, &iface, 0);
                inst.cls.push(ClsEntry {
                    key,
                    meta: md1(spi, SI_START, 0),
                });
                inst.fwd.push(FwdEntry {
                    spi,
                    si: SI_START,
                    val,
                });
            }
        }
        if let Some(report) = report {
            report.notes.extend(notes);
        }
    }
    for (h, hp) in hosts.iter_mut() {
        hp.host.clone_from(h);
        hp.normalize();
    }
    Plan {
        hosts,
        chains: reports,
    }
}

fn add_cfg(inst: &mut Instance, iface: &Iface, flags: u16) {
    let c = inst.cfg.entry(iface.ifindex).or_insert(StageCfg {
        mac: iface.mac.0,
        flags: 0,
        ifindex: iface.ifindex,
    });
    c.flags |= flags;
}

/// The direct links used: (from tag, to tag) pairs, with the reasons for the ones not used
/// added to the chains' reports.
fn direct_links(
    file: &ChainFile,
    chosen: &[Chosen],
    reports: &mut [ChainReport],
) -> BTreeSet<(String, String)> {
    let mut links = BTreeSet::new();
    if !file.direct_links {
        return links;
    }
    // Every SF's successors and predecessors over all installed chains (None: the end or
    // the classifier).
    let mut succ: BTreeMap<&str, BTreeSet<Option<&str>>> = BTreeMap::new();
    let mut pred: BTreeMap<&str, BTreeSet<Option<&str>>> = BTreeMap::new();
    for c in chosen {
        for (i, sf) in c.hops.iter().enumerate() {
            succ.entry(sf.tag())
                .or_default()
                .insert(c.hops.get(i + 1).map(|s| s.tag()));
            pred.entry(sf.tag())
                .or_default()
                .insert(i.checked_sub(1).map(|p| c.hops[p].tag()));
        }
    }
    let note = |reports: &mut [ChainReport], a: &str, b: &str, why: String| {
        for c in chosen {
            if c.hops
                .windows(2)
                .any(|w| w[0].tag() == a && w[1].tag() == b)
            {
                let spi = file.chains[c.chain].id;
                if let Some(r) = reports.iter_mut().find(|r| r.id == spi) {
                    let n = format!("direct link {a} → {b} not used: {why}");
                    if !r.notes.contains(&n) {
                        r.notes.push(n);
                    }
                }
            }
        }
    };
    for c in chosen {
        for w in c.hops.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if a.host() != b.host() || a.tag() == b.tag() {
                continue;
            }
            let key = (a.tag().to_string(), b.tag().to_string());
            if links.contains(&key) {
                continue;
            }
            let why = if a.func.nsh_aware || b.func.nsh_aware {
                Some("an NSH-aware SF sends and takes NSH itself".to_string())
            } else if succ[a.tag()].len() > 1 {
                Some(format!("{} feeds other next hops in other chains", a.tag()))
            } else if pred[b.tag()].len() > 1 {
                Some(format!("{} is fed by other SFs in other chains", b.tag()))
            } else {
                None
            };
            match why {
                Some(why) => note(reports, a.tag(), b.tag(), why),
                None => {
                    links.insert(key);
                }
            }
        }
    }
    // §5.5's corner cases: an SF fed by a direct link that keeps Enc (a remote SF or the end
    // of the chain follows) needs static proxy entries; drop the links where they cannot be
    // made, until none is left.
    loop {
        let feeds: BTreeSet<&str> = links.iter().map(|(a, _)| a.as_str()).collect();
        let mut drop = None;
        'links: for (a, b) in &links {
            if feeds.contains(b.as_str()) {
                continue; // b feeds a direct link in turn: no Enc, nothing to stand in for
            }
            let mut seen: BTreeMap<FlowKey, u32> = BTreeMap::new();
            for c in chosen {
                let chain = &file.chains[c.chain];
                let Some(k) = c.hops.iter().position(|s| s.tag() == b) else {
                    continue;
                };
                let visits = c.hops.iter().filter(|s| s.tag() == b).count();
                let why = if visits > 1 {
                    // Static entries are keyed by the 5-tuple alone: one key, one SI.
                    Some(format!(
                        "{b} would keep Enc without Dec (§5.5) and chain {} visits it {visits} times: static proxy entries cannot tell the visits apart",
                        chain.id
                    ))
                } else if c.hops[k].func.nat {
                    Some(format!(
                        "{b} rewrites 5-tuples (nat) and would keep Enc without Dec (§5.5): a NAT-aware Enc learns from Dec"
                    ))
                } else if chain.classifier.is_empty() {
                    Some(format!(
                        "{b} would keep Enc without Dec (§5.5) and chain {} has no classifier 5-tuples for static proxy entries",
                        chain.id
                    ))
                } else if let Some(nat) = c.hops[..k].iter().find(|s| s.func.nat) {
                    Some(format!(
                        "{b} would keep Enc without Dec (§5.5) and {} rewrites the classifier's 5-tuples before it",
                        nat.tag()
                    ))
                } else {
                    let dup =
                        chain.classifier.iter().filter_map(flow).find_map(|f| {
                            seen.insert(f, chain.id).filter(|&other| other != chain.id)
                        });
                    dup.map(|other| {
                        format!(
                            "{b} would keep Enc without Dec (§5.5) and chains {other} and {} classify the same 5-tuple",
                            chain.id
                        )
                    })
                };
                if let Some(why) = why {
                    drop = Some((a.clone(), b.clone(), why));
                    break 'links;
                }
            }
        }
        match drop {
            Some((a, b, why)) => {
                note(reports, &a, &b, why);
                links.remove(&(a, b));
            }
            None => return links,
        }
    }
}
