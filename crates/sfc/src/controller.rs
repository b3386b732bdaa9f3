//! The controller: reads the registry (the live agents' Hellos, each held by its agent's
//! lease), computes the plan from the chain file, and writes each host's keys as a diff
//! (deletes and puts; hosts no longer in the plan lose their keys) followed by the host's
//! commit key ([`keys::Commit`]), in one transaction per host when the diff is small and
//! several when it has more than [`crate::store::MAX_TXN_OPS`] operations. The commit goes
//! last, so an agent never installs a half-written change ([`keys::committed`]).
//!
//! It runs on and recomputes when a Hello appears, changes or goes (a lease expired: paths
//! go around the dead host where the chain names an alternative SF), and when the chain file
//! changes: it polls the file's modification time (every [`ControllerOptions::poll_every`]),
//! so an edit is picked up without a signal. With [`ControllerOptions::once`] it applies
//! the plan once and returns.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::file::ChainFile;
use crate::keys::{self, Kv};
use crate::plan::Plan;
use crate::registry::{Hello, Registry};
use crate::store::{Op, Store, StoreError, TlsFiles};

/// Where plans come from: a chain file and a planner.
pub trait PlanSource: Send {
    /// True when the input changed since the last [`PlanSource::plan`].
    fn changed(&mut self) -> bool;
    /// The plan for the live hosts of `registry`.
    fn plan(&mut self, registry: &Registry) -> Result<Plan, String>;
    /// A problem the last [`PlanSource::plan`] worked around (e.g. a bad edit of the file,
    /// the previous file kept in force), once.
    fn warning(&mut self) -> Option<String> {
        None
    }
}

/// The planner: chain file and registry → plan.
pub type Planner = fn(&ChainFile, &Registry) -> Plan;

/// A chain file on disk, re-read when its modification time changes.
pub struct ChainFileSource {
    path: PathBuf,
    planner: Planner,
    seen: Option<SystemTime>,
    file: Option<ChainFile>,
    warning: Option<String>,
}

impl ChainFileSource {
    /// The chain file at `path`, planned by `planner`.
    pub fn new(path: &Path, planner: Planner) -> ChainFileSource {
        ChainFileSource {
            path: path.to_path_buf(),
            planner,
            seen: None,
            file: None,
            warning: None,
        }
    }

    fn mtime(&self) -> Option<SystemTime> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }
}

impl PlanSource for ChainFileSource {
    fn changed(&mut self) -> bool {
        self.mtime() != self.seen
    }

    fn plan(&mut self, registry: &Registry) -> Result<Plan, String> {
        let mtime = self.mtime();
        if self.file.is_none() || mtime != self.seen {
            self.seen = mtime;
            // A file that no longer validates keeps the last good one in force.
            match ChainFile::load(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(e) if self.file.is_some() => {
                    self.warning = Some(format!(
                        "{}: {e}; the previous chain file stays in force",
                        self.path.display()
                    ))
                }
                Err(e) => return Err(format!("{}: {e}", self.path.display())),
            }
        }
        match &self.file {
            Some(f) => Ok((self.planner)(f, registry)),
            None => Err(format!("{}: no chain file", self.path.display())),
        }
    }

    fn warning(&mut self) -> Option<String> {
        self.warning.take()
    }
}

/// How the controller talks to etcd and how often it looks at things.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// etcd's client URL.
    pub endpoint: String,
    /// The controller's TLS identity.
    pub tls: TlsFiles,
    /// Apply once and return.
    pub once: bool,
    /// How often the chain file's modification time is looked at.
    pub poll_every: Duration,
    /// How long to wait before retrying after an error.
    pub retry_every: Duration,
}

impl ControllerOptions {
    /// Defaults: run on, poll the file every 500 ms, retry every second.
    pub fn new(endpoint: &str, tls: TlsFiles) -> ControllerOptions {
        ControllerOptions {
            endpoint: endpoint.to_string(),
            tls,
            once: false,
            poll_every: Duration::from_millis(500),
            retry_every: Duration::from_secs(1),
        }
    }
}

/// What one application of a plan wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Keys put (new or changed).
    pub put: usize,
    /// Keys deleted.
    pub deleted: usize,
    /// Hosts whose keys changed.
    pub hosts: Vec<String>,
}

/// Errors of the controller.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// etcd failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain file or the plan failed.
    #[error("{0}")]
    Plan(String),
}

/// The registry from the Hellos under [`keys::hello_prefix`] (Hellos that do not parse are
/// reported through `log` and left out).
pub fn registry_of(hellos: &Kv, log: Log<'_>) -> Registry {
    let mut list = Vec::new();
    for (k, v) in hellos {
        match serde_json::from_slice::<Hello>(v) {
            Ok(h) if keys::hello_key(&h.host) == *k => list.push(h),
            Ok(h) => log(&format!(
                "controller: Hello under {k} names host {:?}; ignored",
                h.host
            )),
            Err(e) => log(&format!(
                "controller: Hello under {k} does not parse: {e}; ignored"
            )),
        }
    }
    Registry::from_hellos(list)
}

/// Writes `plan` to etcd: for every host in the plan or with keys under the plan root, the
/// diff between its entry keys in etcd and the plan's (deletes, then puts), then its
/// [`keys::Commit`] last (in the last transaction; several transactions when there are more
/// than [`crate::store::MAX_TXN_OPS`] operations), so its agent installs the new set only
/// once it is complete; then the per-chain report. A host left without entries has its
/// commit deleted (last, too).
pub async fn apply_plan(store: &mut Store, plan: &Plan) -> Result<Applied, StoreError> {
    let current = store.get_prefix(&keys::plan_root()).await?.kvs;
    let root = keys::plan_root();
    let mut by_host: std::collections::BTreeMap<String, Kv> = Default::default();
    for (k, v) in current {
        let host = k
            .strip_prefix(&root)
            .and_then(|r| r.split_once('/'))
            .map(|(h, _)| h.to_string());
        if let Some(h) = host {
            by_host.entry(h).or_default().insert(k, v);
        }
    }
    for h in plan.hosts.keys() {
        by_host.entry(h.clone()).or_default();
    }
    let mut applied = Applied::default();
    for (host, old) in by_host {
        let (old, old_commit_raw) = keys::split_commit(&host, old);
        let old_commit: Option<keys::Commit> = old_commit_raw
            .as_deref()
            .and_then(|v| serde_json::from_slice(v).ok());
        let new = plan.hosts.get(&host).map(keys::keys).unwrap_or_default();
        let (puts, deletes) = keys::diff(&old, &new);
        let commit_key = keys::commit_key(&host);
        let last = if new.is_empty() {
            // No entries, no commit: the agent reads an empty prefix as a complete plan.
            (old_commit_raw.is_some() || !old.is_empty()).then_some(Op::Delete(commit_key))
        } else {
            let generation = old_commit.as_ref().map_or(0, |c| c.generation) + 1;
            let commit = keys::Commit::of(&new, generation);
            let same = old_commit
                .as_ref()
                .is_some_and(|c| c.keys == commit.keys && c.digest == commit.digest);
            (!same || !puts.is_empty() || !deletes.is_empty())
                .then(|| Op::Put(commit_key, serde_json::to_vec(&commit).unwrap_or_default()))
        };
        let Some(last) = last else { continue };
        let mut ops: Vec<Op> = Vec::with_capacity(puts.len() + deletes.len() + 1);
        ops.extend(deletes.iter().map(|k| Op::Delete(k.clone())));
        ops.extend(puts.iter().map(|(k, v)| Op::Put(k.clone(), v.clone())));
        ops.push(last);
        store.apply_ops(&ops).await?;
        applied.put += puts.len();
        applied.deleted += deletes.len();
        applied.hosts.push(host);
    }
    let report = serde_json::to_vec(&plan.chains).unwrap_or_default();
    if store.get(&keys::report_key()).await?.as_deref() != Some(&report[..]) {
        store.put(&keys::report_key(), &report, None).await?;
    }
    Ok(applied)
}

/// What the controller reports as it goes (for its log).
pub type Log<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// Runs the controller until `stop` turns true (or once, with [`ControllerOptions::once`]).
/// Errors of etcd are retried after a pause; with `once` they are returned.
pub async fn run(
    source: &mut dyn PlanSource,
    options: &ControllerOptions,
    mut stop: tokio::sync::watch::Receiver<bool>,
    log: Log<'_>,
) -> Result<(), ControllerError> {
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        let outcome = tokio::select! {
            r = session(source, options, log) => r,
            _ = stop.changed() => return Ok(()),
        };
        match outcome {
            Ok(()) => return Ok(()),
            Err(e) if options.once => return Err(e),
            Err(e) => log(&format!("controller: {e}; retrying")),
        }
        tokio::select! {
            _ = tokio::time::sleep(options.retry_every) => {}
            _ = stop.changed() => return Ok(()),
        }
    }
}

fn replan(source: &mut dyn PlanSource, hellos: &Kv, log: Log<'_>) -> Result<Plan, ControllerError> {
    let registry = registry_of(hellos, log);
    let plan = source.plan(&registry).map_err(ControllerError::Plan);
    if let Some(w) = source.warning() {
        log(&format!("controller: {w}"));
    }
    plan
}

async fn write(store: &mut Store, plan: &Plan, log: Log<'_>) -> Result<(), ControllerError> {
    let a = apply_plan(store, plan).await?;
    if !a.hosts.is_empty() {
        log(&format!(
            "controller: put {} keys, deleted {} (hosts {})",
            a.put,
            a.deleted,
            a.hosts.join(", ")
        ));
    }
    for c in plan.chains.iter().filter(|c| !c.installed) {
        log(&format!(
            "controller: chain {} not installed: {}",
            c.id,
            c.notes.join("; ")
        ));
    }
    Ok(())
}

async fn session(
    source: &mut dyn PlanSource,
    options: &ControllerOptions,
    log: Log<'_>,
) -> Result<(), ControllerError> {
    let mut store = Store::connect(&options.endpoint, &options.tls).await?;
    let snap = store.get_prefix(&keys::hello_prefix()).await?;
    let mut hellos = snap.kvs;
    log(&format!("controller: {} agents registered", hellos.len()));
    let plan = replan(source, &hellos, log)?;
    write(&mut store, &plan, log).await?;
    if options.once {
        return Ok(());
    }
    let mut watch = store
        .watch_prefix(&keys::hello_prefix(), snap.revision + 1)
        .await?;
    let mut poll = tokio::time::interval(options.poll_every);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            batch = watch.next() => {
                let (changes, _) = batch?;
                for c in changes {
                    log(&format!("controller: {}", match &c {
                        crate::store::Change::Put(k, _) => format!("Hello {k}"),
                        crate::store::Change::Delete(k) => format!("{k} gone (lease expired or revoked)"),
                    }));
                    c.apply_to(&mut hellos);
                }
            }
            _ = poll.tick() => {
                if !source.changed() {
                    continue;
                }
                log("controller: the chain file changed");
            }
        }
        match replan(source, &hellos, log) {
            Ok(plan) => write(&mut store, &plan, log).await?,
            // A bad edit of the chain file leaves the plan in force; fix the file.
            Err(e) => log(&format!("controller: {e}")),
        }
    }
}
