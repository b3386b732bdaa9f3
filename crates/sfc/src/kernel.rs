//! The agent's real data plane: the plan's keys applied to the NSH stages of
//! `crates/stages` (one [`stages::load::Instance`] per plan instance, its maps pinned under
//! `/sys/fs/bpf/fusebox/sfc-<host>-<instance>/`).
//!
//! Which keys are installed is kept in a ledger file (JSON, written atomically after every
//! change) beside the pinned maps' life: the instances are kept when the agent exits
//! ([`stages::load::Instance::keep`]), so a restarted agent reopens them with their entries
//! and attachments in place, reads the ledger, and reconciles only the difference.
//!
//! Attachments are made in the namespace of the interface ([`Namespaces`]: an SF's own
//! from AGENT.toml, or the host's): the agent's thread enters it for the netlink calls
//! (`nic::netns::enter`) and comes back; maps are pinned on bpffs, which every network
//! namespace shares.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stages::load::{Hook, Instance};
use stages::maps::{Counter, CounterStage, StageCfg};

use crate::dataplane::{Counters, Dataplane, DataplaneError};
use crate::entries::{sph, Cfg};
use crate::keys::{self, Kv};
use crate::plan::{Attach, ClsEntry, FwdEntry, Instance as Planned, ProxyEntry, Stage};

/// A data plane over the kernel's NSH stages.
pub struct KernelDataplane {
    host: String,
    ledger: PathBuf,
    installed: Kv,
    instances: BTreeMap<String, Instance>,
    /// Where each instance's interfaces live.
    namespaces: Namespaces,
}

/// The network namespaces of a host's interfaces (names under `/var/run/netns`), where
/// they are not the agent's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespaces {
    /// SF tag → the namespace of its interfaces.
    pub sfs: BTreeMap<String, String>,
    /// The namespace of the host's own interfaces (the classifier instances'); `None`: the
    /// agent's.
    pub default: Option<String>,
}

impl Namespaces {
    /// The namespace plan instance `inst` attaches in (`None`: the agent's own).
    pub fn of(&self, inst: &str) -> Option<&str> {
        self.sfs
            .get(inst)
            .or(self.default.as_ref())
            .map(String::as_str)
    }
}

/// Runs `f` with the calling thread inside namespace `ns` (if any), back home after.
fn inside<T>(
    ns: Option<&str>,
    key: &str,
    f: impl FnOnce() -> Result<T, DataplaneError>,
) -> Result<T, DataplaneError> {
    let _guard = match ns {
        Some(ns) => Some(nic::netns::enter(ns).map_err(|e| err(key, e))?),
        None => None,
    };
    f()
}

fn err(key: &str, why: impl std::fmt::Display) -> DataplaneError {
    DataplaneError::Entry {
        key: key.to_string(),
        why: why.to_string(),
    }
}

/// The pin name of plan instance `inst` of `host` (letters, digits, `-` and `_` only: bpffs
/// refuses names with dots).
pub fn pin_name(host: &str, inst: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("sfc-{}-{}", clean(host), clean(inst))
}

/// The stage program that runs planned stage `s` (the entry's classifier is loaded as
/// Cls+Fwd).
pub fn program(s: Stage) -> stages::Stage {
    match s {
        // The entry's classifier forwards by its own instance's table at once.
        Stage::Cls => stages::Stage::ClsFwd,
        Stage::Dec => stages::Stage::Dec,
        Stage::Enc => stages::Stage::Enc,
        Stage::Fwd => stages::Stage::Fwd,
        Stage::EncFwd => stages::Stage::EncFwd,
    }
}

/// The stages' hook of a planned hook.
pub fn hook(h: crate::plan::Hook) -> Hook {
    match h {
        crate::plan::Hook::Xdp => Hook::Xdp,
        crate::plan::Hook::TcIngress => Hook::Ingress,
        crate::plan::Hook::TcEgress => Hook::Egress,
    }
}

/// One entry of a planned instance's maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapEntry {
    /// (SPI, SI) → next hop.
    Fwd(FwdEntry),
    /// (interface, 5-tuple) → NSH.
    Cls(ClsEntry),
    /// 5-tuple → NSH (static proxy entries).
    Proxy(ProxyEntry),
    /// interface → its stage configuration.
    Cfg(u32, StageCfg),
}

impl MapEntry {
    /// Every map entry of planned instance `plan`: forwarding, classifier, configuration,
    /// proxy.
    pub fn of(plan: &Planned) -> Vec<MapEntry> {
        let fwd = plan.fwd.iter().cloned().map(MapEntry::Fwd);
        let cls = plan.cls.iter().cloned().map(MapEntry::Cls);
        let cfg = plan.cfg.iter().map(|(i, c)| MapEntry::Cfg(*i, *c));
        let proxy = plan.proxy.iter().cloned().map(MapEntry::Proxy);
        fwd.chain(cls).chain(cfg).chain(proxy).collect()
    }

    /// Puts the entry in `inst`'s map (replacing one with the same key).
    pub fn insert(&self, inst: &Instance) -> Result<(), stages::Error> {
        match self {
            MapEntry::Fwd(f) => inst.insert_fwd(sph(f.spi, f.si), &f.val),
            MapEntry::Cls(c) => inst.insert_cls(&c.key, &c.meta),
            MapEntry::Proxy(p) => inst.insert_proxy(&p.key, &p.meta),
            MapEntry::Cfg(ifindex, c) => inst.insert_cfg(*ifindex, c),
        }
    }

    /// Removes the entry's key from `inst`'s map.
    pub fn delete(&self, inst: &Instance) -> Result<(), stages::Error> {
        match self {
            MapEntry::Fwd(f) => inst.delete_fwd(sph(f.spi, f.si)),
            MapEntry::Cls(c) => inst.delete_cls(&c.key),
            MapEntry::Proxy(p) => inst.delete_proxy(&p.key),
            MapEntry::Cfg(ifindex, _) => inst.delete_cfg(*ifindex),
        }
    }
}

/// Fills `inst`'s maps with every entry of planned instance `plan` ([`MapEntry::of`]), as
/// the agent's data plane does entry by entry.
pub fn fill(inst: &Instance, plan: &Planned) -> Result<(), stages::Error> {
    MapEntry::of(plan).iter().try_for_each(|e| e.insert(inst))
}

/// One plan key, parsed.
enum Entry {
    Instance(String),
    Attach(String, Attach),
    Map(String, MapEntry),
    Link,
}

fn val<T: serde::de::DeserializeOwned>(key: &str, v: &[u8]) -> Result<T, DataplaneError> {
    serde_json::from_slice(v).map_err(|e| err(key, e))
}

impl KernelDataplane {
    /// The data plane of `host`, its ledger in `ledger` (read if it exists: the instances it
    /// names are reopened with their pinned maps); `namespaces`: where the interfaces live.
    pub fn open(
        host: &str,
        ledger: &Path,
        namespaces: Namespaces,
    ) -> Result<KernelDataplane, DataplaneError> {
        let installed: Kv = match std::fs::read(ledger) {
            Ok(bytes) => {
                let text: BTreeMap<String, String> = serde_json::from_slice(&bytes)
                    .map_err(|e| DataplaneError::State(format!("{}: {e}", ledger.display())))?;
                text.into_iter().map(|(k, v)| (k, v.into_bytes())).collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Kv::new(),
            Err(e) => return Err(DataplaneError::State(format!("{}: {e}", ledger.display()))),
        };
        let mut dp = KernelDataplane {
            host: host.to_string(),
            ledger: ledger.to_path_buf(),
            installed: Kv::new(),
            instances: BTreeMap::new(),
            namespaces,
        };
        let mut installed = installed;
        for (k, v) in installed.clone() {
            if let Entry::Instance(name) = dp.parse(&k, &v)? {
                if dp.instance(&name, &k)?.1 {
                    dp.forget(&mut installed, &name);
                }
            }
        }
        dp.installed = installed;
        Ok(dp)
    }

    fn parse(&self, key: &str, v: &[u8]) -> Result<Entry, DataplaneError> {
        let prefix = keys::plan_prefix(&self.host);
        let rest = key
            .strip_prefix(&prefix)
            .ok_or_else(|| err(key, format!("not under {prefix}")))?;
        let parts: Vec<&str> = rest.split('/').collect();
        Ok(match parts.as_slice() {
            ["link", ..] => Entry::Link,
            ["i", name] => Entry::Instance(name.to_string()),
            ["i", name, "attach", ..] => Entry::Attach(name.to_string(), val(key, v)?),
            ["i", name, "fwd", ..] => Entry::Map(name.to_string(), MapEntry::Fwd(val(key, v)?)),
            ["i", name, "cls", ..] => Entry::Map(name.to_string(), MapEntry::Cls(val(key, v)?)),
            ["i", name, "proxy", ..] => Entry::Map(name.to_string(), MapEntry::Proxy(val(key, v)?)),
            ["i", name, "cfg", ifindex] => {
                let i = ifindex.parse().map_err(|e| err(key, e))?;
                let c: Cfg = val(key, v)?;
                Entry::Map(name.to_string(), MapEntry::Cfg(i, c.0))
            }
            _ => return Err(err(key, "unknown key shape")),
        })
    }

    /// Plan instance `name` (opened or created on first use), and whether it was made again
    /// just now because its pins were another build's ([`stages::Error::StalePin`]: map
    /// layouts that changed between versions of FuseBox). Such an instance starts empty: its
    /// entries and attachments are forgotten from the ledger ([`Self::forget`]), so the next
    /// reconcile installs them again. The stages a previous build attached keep running on
    /// their maps until the new ones replace them.
    fn instance(&mut self, name: &str, key: &str) -> Result<(&mut Instance, bool), DataplaneError> {
        let mut remade = false;
        if !self.instances.contains_key(name) {
            let pin = pin_name(&self.host, name);
            let mut i = match Instance::create(&pin) {
                Err(e @ stages::Error::StalePin { .. }) => {
                    eprintln!(
                        "fusebox agent: {e}; instance {name} unpinned and made again, its \
                         entries to be installed again"
                    );
                    Instance::unpin_stale(&pin).map_err(|e| err(key, e))?;
                    remade = true;
                    Instance::create(&pin)
                }
                r => r,
            }
            .map_err(|e| err(key, e))?;
            // The data plane outlives the agent: pins and attachments stay when it exits.
            i.keep();
            self.instances.insert(name.to_string(), i);
        }
        if remade {
            let mut installed = std::mem::take(&mut self.installed);
            self.forget(&mut installed, name);
            self.installed = installed;
        }
        let i = self
            .instances
            .get_mut(name)
            .ok_or_else(|| err(key, "no instance"))?;
        Ok((i, remade))
    }

    /// Removes plan instance `name`'s attachments and map entries from `installed` (the
    /// instance's own key stays).
    fn forget(&self, installed: &mut Kv, name: &str) {
        installed.retain(|k, v| match self.parse(k, v) {
            Ok(Entry::Attach(n, _) | Entry::Map(n, _)) => n != name,
            _ => true,
        });
    }

    fn install(&mut self, key: &str, v: &[u8]) -> Result<(), DataplaneError> {
        let e = |x: stages::load::Error| err(key, x);
        match self.parse(key, v)? {
            Entry::Link => {}
            Entry::Instance(name) => {
                self.instance(&name, key)?;
            }
            Entry::Attach(name, a) => {
                let ns = self.namespaces.of(&name).map(str::to_string);
                let (inst, _) = self.instance(&name, key)?;
                inside(ns.as_deref(), key, || {
                    inst.attach(program(a.stage), a.ifindex, hook(a.stage.hook()))
                        .map_err(e)
                })?
            }
            Entry::Map(name, m) => m.insert(self.instance(&name, key)?.0).map_err(e)?,
        }
        Ok(())
    }

    fn uninstall(&mut self, key: &str, v: &[u8]) -> Result<(), DataplaneError> {
        let e = |x: stages::load::Error| err(key, x);
        let entry = self.parse(key, v)?;
        if let Entry::Instance(name) = &entry {
            if let Some(i) = self.instances.remove(name) {
                inside(self.namespaces.of(name), key, || i.remove().map_err(e))?;
            }
            return Ok(());
        }
        let name = match &entry {
            Entry::Attach(n, _) | Entry::Map(n, _) => n.clone(),
            Entry::Link | Entry::Instance(_) => return Ok(()),
        };
        let ns = self.namespaces.of(&name).map(str::to_string);
        let Some(i) = self.instances.get_mut(&name) else {
            return Ok(());
        };
        match entry {
            Entry::Attach(_, a) => inside(ns.as_deref(), key, || {
                i.detach(program(a.stage), a.ifindex, hook(a.stage.hook()))
                    .map_err(e)
            })?,
            Entry::Map(_, m) => m.delete(i).map_err(e)?,
            Entry::Link | Entry::Instance(_) => {}
        }
        Ok(())
    }

    fn save(&self) -> Result<(), DataplaneError> {
        let text: BTreeMap<&str, String> = self
            .installed
            .iter()
            .map(|(k, v)| (k.as_str(), String::from_utf8_lossy(v).into_owned()))
            .collect();
        let bytes =
            serde_json::to_vec_pretty(&text).map_err(|e| DataplaneError::State(e.to_string()))?;
        let tmp = self.ledger.with_extension("tmp");
        let io =
            |e: std::io::Error| DataplaneError::State(format!("{}: {e}", self.ledger.display()));
        if let Some(dir) = self.ledger.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, &self.ledger).map_err(io)
    }

    /// Removes every instance (detach, unpin) and the ledger: the host leaves the chains.
    pub fn remove_all(mut self) -> Result<(), DataplaneError> {
        let mut first = None;
        for (name, i) in std::mem::take(&mut self.instances) {
            let ns = self.namespaces.of(&name);
            if let Err(e) = inside(ns, &name, || i.remove().map_err(|e| err(&name, e))) {
                first.get_or_insert(e);
            }
        }
        let _ = std::fs::remove_file(&self.ledger);
        first.map_or(Ok(()), Err)
    }

    /// The open instance of plan instance `name`, if any.
    pub fn instance_of(&self, name: &str) -> Option<&Instance> {
        self.instances.get(name)
    }
}

impl Dataplane for KernelDataplane {
    fn installed(&self) -> Result<Kv, DataplaneError> {
        Ok(self.installed.clone())
    }

    fn apply(&mut self, puts: &Kv, deletes: &[String]) -> Result<(), DataplaneError> {
        let prefix = keys::plan_prefix(&self.host);
        let rank = |k: &str| {
            let tail = k.strip_prefix(&prefix).unwrap_or(k);
            let parts: Vec<&str> = tail.split('/').collect();
            match parts.as_slice() {
                ["i", _] => 0,
                ["i", _, "attach", ..] => 2,
                _ => 1,
            }
        };
        // Detach first and remove instances last; create instances first and attach last
        // (programs start with their maps filled).
        let mut dels: Vec<&String> = deletes.iter().collect();
        dels.sort_by_key(|k| 2 - rank(k));
        let mut ps: Vec<(&String, &Vec<u8>)> = puts.iter().collect();
        ps.sort_by_key(|(k, _)| rank(k));
        let mut result = Ok(());
        for k in dels {
            let v = self.installed.get(k.as_str()).cloned().unwrap_or_default();
            match self.uninstall(k, &v) {
                Ok(()) => {
                    self.installed.remove(k.as_str());
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            for (k, v) in ps {
                match self.install(k, v) {
                    Ok(()) => {
                        self.installed.insert(k.clone(), v.clone());
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
        }
        // The ledger records what was done, even when a step failed (the agent retries the rest).
        self.save()?;
        result
    }

    fn counters(&self) -> Result<BTreeMap<String, Counters>, DataplaneError> {
        let mut out = BTreeMap::new();
        for (name, i) in &self.instances {
            for stage in CounterStage::ALL {
                let c = i.counters(stage).map_err(|e| err(name, e))?;
                if c.0.iter().all(|v| *v == 0) {
                    continue;
                }
                let named: Counters = Counter::ALL
                    .iter()
                    .map(|k| (k.name().to_string(), c.get(*k)))
                    .filter(|(_, v)| *v > 0)
                    .collect();
                out.insert(format!("{name}/{}", stage.name()), named);
            }
        }
        Ok(out)
    }
}
