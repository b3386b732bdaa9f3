//! The agent: registers its host's Hello under a lease kept alive, watches the host's plan
//! prefix and makes its [`Dataplane`] match it, and publishes its status every second.
//!
//! It reconciles on start and on every change ([`crate::dataplane::reconcile`]: only the
//! difference is applied, so a restarted agent whose data plane kept its state does no work),
//! each time to a complete plan only: the keys under its prefix must be the set the
//! controller's commit key names ([`keys::committed`]), so a change written in several
//! transactions is installed whole, once its commit (written last) is there.
//! When etcd or the controller is down, the data plane is left as it is (it keeps
//! forwarding) and the agent retries every second; when its lease was lost it registers
//! again under a new one.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;

use crate::dataplane::{reconcile, Dataplane};
use crate::entries::Mac;
use crate::keys::{self, Kv};
use crate::registry::{Hello, Iface, SfPorts, Underlay};
use crate::status::HostStatus;
use crate::store::{Store, StoreError, TlsFiles};

/// Errors of the agent's configuration.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The configuration file could not be read.
    #[error("reading {0}: {1}")]
    Read(String, std::io::Error),
    /// The configuration file does not parse.
    #[error("{0}: {1}")]
    Parse(String, String),
    /// An interface could not be looked up.
    #[error("interface {iface}{}: {why}", ns.as_ref().map(|n| format!(" in namespace {n}")).unwrap_or_default())]
    Iface {
        /// The interface.
        iface: String,
        /// Its namespace, if any.
        ns: Option<String>,
        /// Why.
        why: String,
    },
}

/// One interface in the agent's configuration: its name, and optionally its index and MAC
/// (looked up with `ip -j link` otherwise, in the SF's namespace if it has one).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IfaceConf {
    /// The interface's name.
    pub name: String,
    /// Its index (looked up when absent).
    #[serde(default)]
    pub ifindex: Option<u32>,
    /// Its MAC (looked up when absent).
    #[serde(default)]
    pub mac: Option<Mac>,
}

/// One SF of the host.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SfConf {
    /// The SF's tag (as the chain file names it).
    pub tag: String,
    /// Where the SF receives.
    pub iface_in: IfaceConf,
    /// Where the SF sends (default: `iface_in`).
    #[serde(default)]
    pub iface_out: Option<IfaceConf>,
    /// The network namespace the SF's interfaces live in (default: the agent's).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// The host's underlay in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnderlayConf {
    /// The VXLAN-GPE tunnel endpoint address.
    pub addr: Ipv4Addr,
    /// The MAC senders put as outer destination (optional).
    #[serde(default)]
    pub mac: Option<Mac>,
}

/// `AGENT.toml`: the host's SFs, its other interfaces and its underlay address.
///
/// ```toml
/// namespace = "host1"   # optional: where the host's own interfaces live
///
/// [underlay]
/// addr = "10.0.0.1"
///
/// [[sf]]
/// tag = "sf1"
/// namespace = "sf1"
/// iface_in = { name = "veth1" }
/// iface_out = { name = "veth2" }
///
/// [[iface]]          # other interfaces (a classifier's ingress)
/// name = "eth0"
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The network namespace of the host's own interfaces (`[[iface]]`, a classifier's
    /// ingress) and of SFs that name none (default: the agent's).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The host's SFs.
    #[serde(default)]
    pub sf: Vec<SfConf>,
    /// Other interfaces.
    #[serde(default)]
    pub iface: Vec<IfaceConf>,
    /// The underlay.
    #[serde(default)]
    pub underlay: Option<UnderlayConf>,
}

#[derive(Deserialize)]
struct IpLink {
    ifindex: u32,
    address: Option<String>,
}

fn lookup(conf: &IfaceConf, ns: Option<&str>) -> Result<Iface, AgentError> {
    if let (Some(ifindex), Some(mac)) = (conf.ifindex, conf.mac) {
        return Ok(Iface {
            name: conf.name.clone(),
            ifindex,
            mac,
        });
    }
    let err = |why: String| AgentError::Iface {
        iface: conf.name.clone(),
        ns: ns.map(str::to_string),
        why,
    };
    let mut cmd = Command::new("ip");
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let out = cmd
        .args(["-j", "link", "show", "dev", &conf.name])
        .output()
        .map_err(|e| err(format!("running ip: {e}")))?;
    if !out.status.success() {
        return Err(err(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    let links: Vec<IpLink> =
        serde_json::from_slice(&out.stdout).map_err(|e| err(format!("reading ip -j: {e}")))?;
    let link = links.first().ok_or_else(|| err("not found".into()))?;
    let mac = match conf.mac {
        Some(m) => m,
        None => link
            .address
            .as_deref()
            .unwrap_or("00:00:00:00:00:00")
            .parse()
            .map_err(|e| err(format!("{e}")))?,
    };
    Ok(Iface {
        name: conf.name.clone(),
        ifindex: conf.ifindex.unwrap_or(link.ifindex),
        mac,
    })
}

impl AgentConfig {
    /// Reads `AGENT.toml`.
    pub fn load(path: &Path) -> Result<AgentConfig, AgentError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| AgentError::Read(path.display().to_string(), e))?;
        AgentConfig::parse(&text, &path.display().to_string())
    }

    /// Parses the text of `AGENT.toml` (`name` names it in errors).
    pub fn parse(text: &str, name: &str) -> Result<AgentConfig, AgentError> {
        toml::from_str(text).map_err(|e| AgentError::Parse(name.to_string(), e.to_string()))
    }

    /// The network namespace of each plan instance whose interfaces are not in the agent's
    /// own: SF tag → its namespace (or the host's), and `default` for the classifier
    /// instances (on the host's own interfaces).
    pub fn namespaces(&self) -> crate::kernel::Namespaces {
        crate::kernel::Namespaces {
            sfs: self
                .sf
                .iter()
                .filter_map(|s| {
                    s.namespace
                        .clone()
                        .or_else(|| self.namespace.clone())
                        .map(|n| (s.tag.clone(), n))
                })
                .collect(),
            default: self.namespace.clone(),
        }
    }

    /// The SF of that tag.
    pub fn sf(&self, tag: &str) -> Option<&SfConf> {
        self.sf.iter().find(|s| s.tag == tag)
    }

    /// The Hello of host `host`: every interface with its index and MAC (looked up when the
    /// configuration does not give them).
    pub fn hello(&self, host: &str) -> Result<Hello, AgentError> {
        let mut functions = BTreeMap::new();
        for sf in &self.sf {
            let ns = sf.namespace.as_deref().or(self.namespace.as_deref());
            let iface_in = lookup(&sf.iface_in, ns)?;
            let iface_out = sf.iface_out.as_ref().map(|i| lookup(i, ns)).transpose()?;
            functions.insert(
                sf.tag.clone(),
                SfPorts {
                    iface_in,
                    iface_out,
                },
            );
        }
        let ifaces = self
            .iface
            .iter()
            .map(|i| lookup(i, self.namespace.as_deref()))
            .collect::<Result<_, _>>()?;
        let underlay = self.underlay.as_ref().map(|u| Underlay {
            addr: u.addr,
            mac: u.mac,
        });
        Ok(Hello {
            host: host.to_string(),
            functions,
            ifaces,
            underlay,
        })
    }
}

/// How the agent talks to etcd and how often it does things.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// etcd's client URL.
    pub endpoint: String,
    /// The agent's TLS identity.
    pub tls: TlsFiles,
    /// The lease's time to live, seconds (the controller notices a dead agent this late).
    pub ttl: i64,
    /// How often the status is published.
    pub status_every: Duration,
    /// How long to wait before retrying after an error.
    pub retry_every: Duration,
}

impl AgentOptions {
    /// Defaults: a 5 s lease, status every second, retry every second.
    pub fn new(endpoint: &str, tls: TlsFiles) -> AgentOptions {
        AgentOptions {
            endpoint: endpoint.to_string(),
            tls,
            ttl: 5,
            status_every: Duration::from_secs(1),
            retry_every: Duration::from_secs(1),
        }
    }
}

/// What the agent reports as it goes (for its log), given to [`run`]'s `log`.
pub type Log<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// Runs the agent of `hello.host` until `stop` turns true: registers, reconciles, publishes;
/// on any etcd error it leaves the data plane as it is and starts over after a pause.
pub async fn run<D: Dataplane + ?Sized>(
    hello: &Hello,
    dp: &mut D,
    options: &AgentOptions,
    mut stop: tokio::sync::watch::Receiver<bool>,
    log: Log<'_>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        let outcome = tokio::select! {
            r = session(hello, dp, options, log) => r,
            _ = stop.changed() => return,
        };
        if let Err(e) = outcome {
            log(&format!(
                "agent {}: {e}; the data plane keeps its state, retrying",
                hello.host
            ));
        }
        tokio::select! {
            _ = tokio::time::sleep(options.retry_every) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One connection's life: register, reconcile, watch, publish, until an error.
async fn session<D: Dataplane + ?Sized>(
    hello: &Hello,
    dp: &mut D,
    options: &AgentOptions,
    log: Log<'_>,
) -> Result<(), StoreError> {
    let host = &hello.host;
    let mut store = Store::connect(&options.endpoint, &options.tls).await?;
    let mut lease = store.lease(options.ttl).await?;
    let hello_json = serde_json::to_vec(hello).unwrap_or_default();
    store
        .put(&keys::hello_key(host), &hello_json, Some(lease.id()))
        .await?;
    let prefix = keys::plan_prefix(host);
    let snap = store.get_prefix(&prefix).await?;
    let mut view = PlanView::new(snap.kvs);
    let mut watch = store.watch_prefix(&prefix, snap.revision + 1).await?;
    log(&format!(
        "agent {host}: registered (lease {:x}), {} plan keys at revision {}",
        lease.id(),
        view.seen.len(),
        snap.revision
    ));
    let mut error = None;
    if view.complete(snap.revision, host, log) {
        error = apply(dp, &view.desired, host, log);
    }
    let mut tick = tokio::time::interval(options.status_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            batch = watch.next() => {
                let (changes, rev) = batch?;
                for c in changes {
                    c.apply_to(&mut view.seen);
                }
                if view.complete(rev, host, log) {
                    error = apply(dp, &view.desired, host, log);
                }
            }
            _ = tick.tick() => {
                if error.is_some() {
                    // A failed reconciliation is retried until it succeeds.
                    error = apply(dp, &view.desired, host, log);
                }
                let status = status(host, dp, &view, error.clone());
                store.put(&keys::status_key(host), &status, Some(lease.id())).await?;
            }
            why = lease.lost() => {
                return Err(StoreError::WatchEnded(format!("lease of {host}: {why}")));
            }
        }
    }
}

/// The agent's view of its plan prefix.
struct PlanView {
    /// Every key under the prefix, as the watch brings them.
    seen: Kv,
    /// The last complete plan among them (a change written in several transactions counts
    /// once its commit is there): what the data plane is reconciled to.
    desired: Kv,
    /// The store revision of `desired`.
    revision: i64,
    /// The generation of `desired`'s commit (0: an empty plan, no commit).
    generation: u64,
    /// Why `seen` is not complete, while a change is being written.
    pending: Option<String>,
}

impl PlanView {
    fn new(seen: Kv) -> PlanView {
        PlanView {
            seen,
            desired: Kv::new(),
            revision: 0,
            generation: 0,
            pending: None,
        }
    }

    /// When `seen` (at store revision `revision`) is a complete plan ([`keys::committed`]),
    /// makes it the desired one and returns true; otherwise (a change being written) logs
    /// it and keeps the last one.
    fn complete(&mut self, revision: i64, host: &str, log: Log<'_>) -> bool {
        match keys::committed(host, &self.seen) {
            Ok((entries, commit)) => {
                self.desired = entries;
                self.revision = revision;
                self.generation = commit.map_or(0, |c| c.generation);
                self.pending = None;
                true
            }
            Err(why) => {
                log(&format!(
                    "agent {host}: waiting for a complete plan ({why}); the data plane keeps the last one"
                ));
                self.pending = Some(why.to_string());
                false
            }
        }
    }
}

fn apply<D: Dataplane + ?Sized>(
    dp: &mut D,
    desired: &Kv,
    host: &str,
    log: Log<'_>,
) -> Option<String> {
    match reconcile(dp, desired) {
        Ok(r) => {
            if r.put + r.deleted > 0 {
                log(&format!(
                    "agent {host}: installed {} entries, removed {}",
                    r.put, r.deleted
                ));
            }
            None
        }
        Err(e) => {
            log(&format!("agent {host}: reconciling failed: {e}"));
            Some(e.to_string())
        }
    }
}

fn status<D: Dataplane + ?Sized>(
    host: &str,
    dp: &D,
    view: &PlanView,
    error: Option<String>,
) -> Vec<u8> {
    let (entries, counters, err) = match (dp.installed(), dp.counters()) {
        (Ok(e), Ok(c)) => (e, c, error),
        (Err(e), _) | (_, Err(e)) => (Kv::new(), BTreeMap::new(), Some(e.to_string())),
    };
    let mut s = HostStatus::new(host, &entries, &counters);
    s.plan_revision = view.revision;
    s.plan_generation = view.generation;
    s.pending = view.pending.clone();
    s.error = err;
    serde_json::to_vec(&s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_parses_and_makes_a_hello_without_lookups() {
        let c = AgentConfig::parse(
            r#"
            [underlay]
            addr = "10.0.0.1"
            [[sf]]
            tag = "sf1"
            iface_in = { name = "a", ifindex = 3, mac = "02:00:00:00:00:01" }
            [[sf]]
            tag = "sf2"
            namespace = "ns2"
            iface_in = { name = "b", ifindex = 4, mac = "02:00:00:00:00:02" }
            iface_out = { name = "c", ifindex = 5, mac = "02:00:00:00:00:03" }
            [[iface]]
            name = "eth0"
            ifindex = 1
            mac = "02:00:00:00:00:09"
            "#,
            "AGENT.toml",
        )
        .unwrap();
        assert_eq!(
            c.sf("sf2").and_then(|s| s.namespace.as_deref()),
            Some("ns2")
        );
        let h = c.hello("server1").unwrap();
        assert_eq!(h.host, "server1");
        assert_eq!(h.functions["sf2"].out().ifindex, 5);
        assert_eq!(h.functions["sf1"].out().ifindex, 3);
        assert_eq!(h.ifaces[0].name, "eth0");
        assert_eq!(
            h.underlay.as_ref().map(|u| u.addr),
            Some(Ipv4Addr::new(10, 0, 0, 1))
        );
    }

    #[test]
    fn bad_configs_are_errors() {
        assert!(AgentConfig::parse("[[sf]]\ntag = 1", "x").is_err());
        assert!(AgentConfig::parse("bogus = 1", "x").is_err());
        assert!(AgentConfig::parse(
            "[[sf]]\ntag = \"a\"\niface_in = { name = \"a\", mac = \"zz\" }",
            "x"
        )
        .is_err());
        let c = AgentConfig::parse("[[iface]]\nname = \"fusebox-no-such-iface\"", "x").unwrap();
        assert!(c.hello("h").is_err());
    }
}
