//! The etcd key layout (everything under [`ROOT`]), and a plan as keys: one key per entry
//! under `/fusebox/sfc/v1/plan/<host>/`, each value the entry as JSON, so a changed chain
//! file is applied as a [`diff`] of keys (puts and deletes) and an agent rebuilds its
//! [`HostPlan`] from its prefix with [`host_plan_from_keys`].
//!
//! Under a host's plan prefix:
//!
//! | key (after the prefix)                                        | value          |
//! |---------------------------------------------------------------|----------------|
//! | `i/<instance>`                                                | `{}`           |
//! | `i/<instance>/attach/<stage>/<iface>`                         | [`Attach`]     |
//! | `i/<instance>/fwd/<spi>/<si>`                                 | [`FwdEntry`]   |
//! | `i/<instance>/cls/<ifindex>/<src>/<dst>/<proto>/<sport>/<dport>` | [`ClsEntry`] |
//! | `i/<instance>/cfg/<ifindex>`                                  | [`Cfg`](crate::entries::Cfg) |
//! | `i/<instance>/proxy/<src>/<dst>/<proto>/<sport>/<dport>`      | [`ProxyEntry`] |
//! | `link/<from tag>/<from iface>/<to tag>/<to iface>`            | [`DirectLink`] |
//! | `commit`                                                      | [`Commit`]     |
//!
//! The entry keys of a change are written in several etcd transactions when there are more
//! than [`crate::store::MAX_TXN_OPS`] operations, so a watcher can see a set that is half
//! the old plan and half the new. The `commit` key is written last (in the last
//! transaction): it names the complete set (count and [`digest`] of the entry keys and
//! values), and an agent installs only a set that matches it ([`committed`]); while a
//! change is being written it keeps the previous complete plan. A host without entries has
//! no `commit` key (so a host that leaves the plan leaves nothing behind).

use crate::entries::FlowKey;
use crate::plan::{Attach, ClsEntry, DirectLink, FwdEntry, HostPlan, Instance, ProxyEntry};
use std::collections::BTreeMap;

/// The prefix of every FuseBox SFC key.
pub const ROOT: &str = "/fusebox/sfc/v1/";

/// The prefix of the agents' Hellos (each under its lease).
pub fn hello_prefix() -> String {
    format!("{ROOT}hello/")
}

/// Where host `host`'s agent puts its Hello ([`crate::registry::Hello`] as JSON).
pub fn hello_key(host: &str) -> String {
    format!("{ROOT}hello/{host}")
}

/// The prefix of the agents' published status (counters, installed entries).
pub fn status_prefix() -> String {
    format!("{ROOT}status/")
}

/// Where host `host`'s agent publishes its status.
pub fn status_key(host: &str) -> String {
    format!("{ROOT}status/{host}")
}

/// The prefix of every host's plan.
pub fn plan_root() -> String {
    format!("{ROOT}plan/")
}

/// The prefix of host `host`'s plan (ends with `/`).
pub fn plan_prefix(host: &str) -> String {
    format!("{ROOT}plan/{host}/")
}

/// Where the controller writes host `host`'s [`Commit`], last, after its entries.
pub fn commit_key(host: &str) -> String {
    format!("{ROOT}plan/{host}/commit")
}

/// Where the controller writes its per-chain reports ([`crate::plan::ChainReport`]s as JSON).
pub fn report_key() -> String {
    format!("{ROOT}report")
}

/// A key/value map of etcd entries.
pub type Kv = BTreeMap<String, Vec<u8>>;

fn flow_path(f: &FlowKey) -> String {
    format!(
        "{}/{}/{}/{}/{}",
        f.saddr, f.daddr, f.proto, f.sport, f.dport
    )
}

fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    // The plan's types serialize to JSON without failing (no maps with non-string keys
    // other than integers, no non-finite floats).
    serde_json::to_vec(v).unwrap_or_default()
}

/// One key per entry of `plan`, under [`plan_prefix`] of its host.
pub fn keys(plan: &HostPlan) -> Kv {
    let p = plan_prefix(&plan.host);
    let mut out = Kv::new();
    for (name, inst) in &plan.instances {
        let i = format!("{p}i/{name}");
        for a in &inst.attach {
            out.insert(
                format!("{i}/attach/{}/{}", a.stage.name(), a.iface),
                json(a),
            );
        }
        for f in &inst.fwd {
            out.insert(format!("{i}/fwd/{}/{}", f.spi, f.si), json(f));
        }
        for c in &inst.cls {
            let k = format!("{i}/cls/{}/{}", c.key.ifindex, flow_path(&c.key.flow));
            out.insert(k, json(c));
        }
        for (ifindex, c) in &inst.cfg {
            out.insert(format!("{i}/cfg/{ifindex}"), json(&crate::entries::Cfg(*c)));
        }
        for e in &inst.proxy {
            out.insert(format!("{i}/proxy/{}", flow_path(&e.key)), json(e));
        }
        out.insert(i, b"{}".to_vec());
    }
    for l in &plan.direct_links {
        let k = format!(
            "{p}link/{}/{}/{}/{}",
            l.from.tag, l.from.iface, l.to.tag, l.to.iface
        );
        out.insert(k, json(l));
    }
    out
}

/// What turns `old` into `new`: the keys to put (new or changed values) and to delete.
pub fn diff(old: &Kv, new: &Kv) -> (Kv, Vec<String>) {
    let puts = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let deletes = old
        .keys()
        .filter(|k| !new.contains_key(*k))
        .cloned()
        .collect();
    (puts, deletes)
}

/// A key under a plan prefix that is not one [`keys`] writes, or whose value does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan key {key}: {why}")]
pub struct BadKey {
    /// The key.
    pub key: String,
    /// What is wrong.
    pub why: String,
}

/// Host `host`'s plan from the keys under its [`plan_prefix`] (as [`keys`] wrote them).
pub fn host_plan_from_keys<'a>(
    host: &str,
    kvs: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<HostPlan, BadKey> {
    let p = plan_prefix(host);
    let mut plan = HostPlan {
        host: host.to_string(),
        ..HostPlan::default()
    };
    for (key, value) in kvs {
        let bad = |why: String| BadKey {
            key: key.to_string(),
            why,
        };
        let rest = key
            .strip_prefix(&p)
            .ok_or_else(|| bad(format!("not under {p}")))?;
        let parts: Vec<&str> = rest.split('/').collect();
        fn val<T: serde::de::DeserializeOwned>(v: &[u8]) -> Result<T, String> {
            serde_json::from_slice(v).map_err(|e| e.to_string())
        }
        match parts.as_slice() {
            ["link", ..] => plan
                .direct_links
                .push(val::<DirectLink>(value).map_err(bad)?),
            ["i", name] => {
                plan.instances.entry(name.to_string()).or_default();
            }
            ["i", name, kind, ..] => {
                let inst: &mut Instance = plan.instances.entry(name.to_string()).or_default();
                match *kind {
                    "attach" => inst.attach.push(val::<Attach>(value).map_err(bad)?),
                    "fwd" => inst.fwd.push(val::<FwdEntry>(value).map_err(bad)?),
                    "cls" => inst.cls.push(val::<ClsEntry>(value).map_err(bad)?),
                    "proxy" => inst.proxy.push(val::<ProxyEntry>(value).map_err(bad)?),
                    "cfg" => {
                        let c: crate::entries::Cfg = val(value).map_err(bad)?;
                        inst.cfg.insert(c.0.ifindex, c.0);
                    }
                    other => return Err(bad(format!("unknown entry kind {other:?}"))),
                }
            }
            _ => return Err(bad("unknown key shape".to_string())),
        }
    }
    plan.normalize();
    Ok(plan)
}

impl HostPlan {
    /// Sorts every list (the order [`keys`] and the planner use), dropping duplicates.
    pub fn normalize(&mut self) {
        for inst in self.instances.values_mut() {
            inst.attach.sort();
            inst.attach.dedup();
            inst.fwd.sort_by_key(|f| (f.spi, f.si));
            inst.fwd.dedup();
            inst.cls.sort_by_key(|c| c.key);
            inst.cls.dedup();
            inst.proxy.sort_by_key(|p| p.key);
            inst.proxy.dedup();
        }
        self.direct_links.sort();
        self.direct_links.dedup();
    }
}

/// The commit of a host's plan: which complete set of entry keys the agent may install.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Commit {
    /// Counts the controller's changes of this host's plan (1 for the first). A host that
    /// leaves the plan leaves nothing behind, this count included, so a host that comes back
    /// starts again at 1: the count orders the commits of one stretch of a host's plan, not
    /// of its whole history (chosen so that etcd holds nothing for hosts no longer in any
    /// chain; `chain status` shows the plan's etcd revision beside it, which only grows).
    pub generation: u64,
    /// How many entry keys the plan has.
    pub keys: usize,
    /// [`digest`] of the entry keys and values.
    pub digest: String,
}

impl Commit {
    /// The commit of `entries` (a host's entry keys, without its commit key).
    pub fn of(entries: &Kv, generation: u64) -> Commit {
        Commit {
            generation,
            keys: entries.len(),
            digest: digest(entries),
        }
    }

    /// True when `entries` is the set this commit names.
    pub fn names(&self, entries: &Kv) -> bool {
        self.keys == entries.len() && self.digest == digest(entries)
    }
}

/// A digest of a set of keys and values: FNV-1a (64 bits) over each key and value with its
/// length, in key order, as 16 hex digits. It tells a complete set from a partial one (an
/// accident, not an attack: etcd's access control keeps others from writing plans).
pub fn digest(entries: &Kv) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (k, v) in entries {
        eat(k.as_bytes());
        eat(v);
    }
    format!("{h:016x}")
}

/// Why the keys under a host's plan prefix are not a complete plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incomplete {
    /// Entries and no commit: being written (or written by a controller without commits).
    #[error("{have} plan keys and no commit yet")]
    NoCommit {
        /// Entry keys present.
        have: usize,
    },
    /// The entries are not the set the commit names: a change is being written.
    #[error("{have} plan keys do not match commit {generation} ({want} keys)")]
    Pending {
        /// Entry keys present.
        have: usize,
        /// Entry keys the commit names.
        want: usize,
        /// The commit's generation.
        generation: u64,
    },
    /// The commit key does not parse.
    #[error("the commit key does not parse: {0}")]
    BadCommit(String),
}

/// The keys under host `host`'s [`plan_prefix`] split into its entries and its commit
/// value (if present).
pub fn split_commit(host: &str, mut kvs: Kv) -> (Kv, Option<Vec<u8>>) {
    let commit = kvs.remove(&commit_key(host));
    (kvs, commit)
}

/// The entries under host `host`'s [`plan_prefix`] (`kvs`: every key there) when they are
/// the complete set the commit names (or there are none and no commit), with the commit.
pub fn committed(host: &str, kvs: &Kv) -> Result<(Kv, Option<Commit>), Incomplete> {
    let (entries, commit) = split_commit(host, kvs.clone());
    let Some(commit) = commit else {
        return if entries.is_empty() {
            Ok((entries, None))
        } else {
            Err(Incomplete::NoCommit {
                have: entries.len(),
            })
        };
    };
    let commit: Commit =
        serde_json::from_slice(&commit).map_err(|e| Incomplete::BadCommit(e.to_string()))?;
    if commit.names(&entries) {
        Ok((entries, Some(commit)))
    } else {
        Err(Incomplete::Pending {
            have: entries.len(),
            want: commit.keys,
            generation: commit.generation,
        })
    }
}
