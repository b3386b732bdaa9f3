//! One service function's stages: an [`Instance`] owns a pin directory
//! `/sys/fs/bpf/fusebox/<name>/` where the shared maps are pinned by name (every stage object
//! declares all of them, so the objects loaded for one SF share one proxy table, one
//! forwarding table, one configuration and one set of counters), the loaded objects and their
//! attachments. Dropping an instance (or [`Instance::remove`]) detaches everything, unpins
//! the maps and deletes the directory, unless [`Instance::keep`] was called (an agent that
//! exits leaves the data plane running; a new instance of the same name reuses the pins).

use std::collections::BTreeMap;
use std::fs;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_rs::{
    MapCore, MapFlags, MapHandle, Object, ObjectBuilder, ProgramMut, TcHook, TcHookBuilder, Xdp,
    XdpFlags, TC_EGRESS, TC_INGRESS,
};

use crate::maps::{
    cfg_slot, cls_slot, fwd_slot, proxy_slot, CfgSlot, ClsHop, ClsKey, ClsSlot, ClsVersion,
    Counter, CounterStage, Counters, FlowKey, FwdSlot, FwdVal, NshMeta, ProxySlot, SizeError,
    StageCfg, CTR_PER_STAGE,
};
use crate::Stage;

/// Where bpffs is mounted.
pub const BPFFS: &str = "/sys/fs/bpf";
/// FuseBox's directory on bpffs; instances live under it.
pub const PIN_ROOT: &str = "/sys/fs/bpf/fusebox";

/// Errors of loading, attaching and map access.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The stage's object was not built (no source, or clang missing at build time).
    #[error("stage {0}: object not built (no source, or clang missing at build time)")]
    NotBuilt(&'static str),
    /// The stage is not loaded in this instance.
    #[error("stage {0}: not loaded in this instance")]
    NotLoaded(&'static str),
    /// The object has no program of the expected name.
    #[error("object {0}: no program {1}")]
    NoProgram(&'static str, &'static str),
    /// An instance name that is not a plain file name.
    #[error("instance name {0:?}: use letters, digits, '-', '_', '.'")]
    Name(String),
    /// A stage attached where it cannot run (XDP program on TC or the reverse).
    #[error("stage {0:?} cannot attach at {1:?}")]
    Hook(Stage, Hook),
    /// A file system operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// libbpf refused.
    #[error("{what}: {source}")]
    Bpf {
        /// What was being done.
        what: String,
        /// The error.
        source: libbpf_rs::Error,
    },
    /// A map value of the wrong size.
    #[error(transparent)]
    Size(#[from] SizeError),
    /// A map pinned in the instance's directory whose definition is not this build's (an
    /// instance made by another version of FuseBox, whose map layouts differ): libbpf cannot
    /// reuse it, and its entries mean something else to this build's stages.
    #[error(
        "{path}: pinned by another build of FuseBox ({got}; this build's: {want}): its entries \
         cannot be reused; remove the instance (Instance::unpin_stale) and fill it again"
    )]
    StalePin {
        /// The pinned map.
        path: PathBuf,
        /// This build's definition (type, key and value bytes, entries, flags).
        want: String,
        /// The pinned map's.
        got: String,
    },
}

/// Result of this module.
pub type Result<T> = std::result::Result<T, Error>;

fn bpf(what: impl FnOnce() -> String) -> impl FnOnce(libbpf_rs::Error) -> Error {
    move |source| Error::Bpf {
        what: what(),
        source,
    }
}

fn io(what: impl FnOnce() -> String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io {
        what: what(),
        source,
    }
}

/// Where a stage attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// XDP (Dec).
    Xdp,
    /// TC clsact ingress (Cls, and Fwd after it).
    Ingress,
    /// TC clsact egress (Enc, Fwd, Enc+Fwd).
    Egress,
}

/// Whether this process runs as root (effective uid 0, from /proc/self/status).
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Mounts bpffs at /sys/fs/bpf unless it is mounted already.
pub fn ensure_bpffs() -> Result<()> {
    let mounted = fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines().any(|l| {
                let mut f = l.split_whitespace();
                let _dev = f.next();
                f.next() == Some(BPFFS) && f.next() == Some("bpf")
            })
        })
        .unwrap_or(false);
    if mounted {
        return Ok(());
    }
    fs::create_dir_all(BPFFS).map_err(io(|| format!("create {BPFFS}")))?;
    let status = Command::new("mount")
        .args(["-t", "bpf", "bpf", BPFFS])
        .status()
        .map_err(io(|| "run mount -t bpf".to_string()))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Io {
            what: format!("mount -t bpf bpf {BPFFS}"),
            source: std::io::Error::other(format!("exit status {status}")),
        })
    }
}

/// The names the maps are pinned under (maps.h).
pub const MAP_NAMES: [&str; 11] = [
    "cls_table",
    "cls_slots",
    "proxy_table",
    "proxy_slots",
    "proxy_gen",
    "fwd_table",
    "fwd_slots",
    "cfg",
    "cfg_slots",
    "counters",
    "last_dec",
];

struct Maps {
    cls: MapHandle,
    cls_slots: MapHandle,
    proxy: MapHandle,
    proxy_slots: MapHandle,
    proxy_gen: MapHandle,
    fwd: MapHandle,
    fwd_slots: MapHandle,
    cfg: MapHandle,
    cfg_slots: MapHandle,
    counters: MapHandle,
    last_dec: MapHandle,
}

impl Maps {
    fn open(dir: &Path) -> Result<Maps> {
        let open = |name: &str| {
            let path = dir.join(name);
            MapHandle::from_pinned_path(&path).map_err(bpf(|| format!("open {}", path.display())))
        };
        Ok(Maps {
            cls: open("cls_table")?,
            cls_slots: open("cls_slots")?,
            proxy: open("proxy_table")?,
            proxy_slots: open("proxy_slots")?,
            proxy_gen: open("proxy_gen")?,
            fwd: open("fwd_table")?,
            fwd_slots: open("fwd_slots")?,
            cfg: open("cfg")?,
            cfg_slots: open("cfg_slots")?,
            counters: open("counters")?,
            last_dec: open("last_dec")?,
        })
    }
}

/// The proxy table of an instance another process made (the agent's), opened alone from
/// its pin: what a FuseBox SF needs to tell the proxy its rewrites (`fusebox run
/// --tell-proxy`). Unlike an [`Instance`] it holds no loaded object, so it can move to the
/// thread that runs the chain.
#[derive(Debug)]
pub struct ProxyTable {
    map: MapHandle,
    /// The slot generations (`proxy_gen`), absent in a pin made before the proxy slots (whose
    /// stages have no slot to invalidate).
    gen: Option<MapHandle>,
}

impl ProxyTable {
    /// Opens the proxy table pinned for instance `name` (`/sys/fs/bpf/fusebox/<name>/`).
    pub fn open(name: &str) -> Result<ProxyTable> {
        let dir = Path::new(PIN_ROOT).join(name);
        let path = dir.join("proxy_table");
        let map = MapHandle::from_pinned_path(&path)
            .map_err(bpf(|| format!("open {}", path.display())))?;
        let gen_path = dir.join("proxy_gen");
        let gen = if gen_path.exists() {
            Some(
                MapHandle::from_pinned_path(&gen_path)
                    .map_err(bpf(|| format!("open {}", gen_path.display())))?,
            )
        } else {
            None
        };
        Ok(ProxyTable { map, gen })
    }

    /// The entry of `key`, if there is one.
    pub fn get(&self, key: &FlowKey) -> Result<Option<NshMeta>> {
        match self
            .map
            .lookup(&key.to_bytes(), MapFlags::ANY)
            .map_err(bpf(|| "read proxy_table".to_string()))?
        {
            Some(v) => Ok(Some(NshMeta::from_bytes(&v)?)),
            None => Ok(None),
        }
    }

    /// Adds or replaces the entry of `key`, then retires whatever its slot cached (a new
    /// generation, cbox.h `proxy_slots`).
    pub fn insert(&self, key: &FlowKey, nsh: &NshMeta) -> Result<()> {
        update(&self.map, "proxy_table", &key.to_bytes(), &nsh.to_bytes())?;
        match &self.gen {
            Some(g) => proxy_gen_bump(g, key),
            None => Ok(()),
        }
    }
}

/// A generation no proxy slot has held: the nanoseconds since the Unix epoch, made strictly
/// increasing within the process, the process id in the top 16 bits. Two writers in one
/// process never share one; writers in two processes would have to hit the same value to the
/// nanosecond with their ids' bits undone by the clock's. Never 0 (a slot's initial
/// generation).
fn fresh_gen() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        & ((1 << 48) - 1);
    let prev = LAST
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
            Some(now.max(last + 1) & ((1 << 48) - 1))
        })
        .unwrap_or(0);
    let t = now.max(prev + 1) & ((1 << 48) - 1);
    let v = t | (u64::from(std::process::id() & 0xffff) << 48);
    v.max(1)
}

/// Gives the proxy slot of `key` a new generation in `gen` (the `proxy_gen` map), after a
/// write of `key` to the hash: whatever the slot cached before no longer answers (cbox.h
/// `proxy_slots`).
fn proxy_gen_bump(gen: &MapHandle, key: &FlowKey) -> Result<()> {
    update(
        gen,
        "proxy_gen",
        &proxy_slot(key).to_ne_bytes(),
        &fresh_gen().to_ne_bytes(),
    )
}

#[derive(Debug)]
struct Attachment {
    stage: Stage,
    ifindex: u32,
    hook: Hook,
    tc: Option<TcHook>,
}

/// One service function's stages (see the module documentation).
pub struct Instance {
    name: String,
    dir: PathBuf,
    attached: Vec<Attachment>,
    objects: BTreeMap<&'static str, Object>,
    maps: Maps,
    /// Interfaces whose clsact qdisc this instance made sure of.
    clsact: std::collections::BTreeSet<u32>,
    keep: bool,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("objects", &self.objects.keys().collect::<Vec<_>>())
            .field("attached", &self.attached)
            .finish()
    }
}

fn open_object(name: &'static str, dir: &Path) -> Result<Object> {
    let bytes = crate::object_bytes(name).ok_or(Error::NotBuilt(name))?;
    let mut b = ObjectBuilder::default();
    b.pin_root_path(dir)
        .map_err(bpf(|| format!("pin root {}", dir.display())))?;
    let open = b
        .open_memory(bytes)
        .map_err(bpf(|| format!("open object {name}")))?;
    for m in open.maps() {
        let path = dir.join(m.name());
        if !path.exists() {
            continue;
        }
        let want = MapDef {
            kind: m.map_type(),
            key: m.key_size(),
            value: m.value_size(),
            entries: m.max_entries(),
            flags: m.map_flags(),
        };
        let pinned = MapHandle::from_pinned_path(&path)
            .map_err(bpf(|| format!("open {}", path.display())))?;
        let info = pinned
            .info()
            .map_err(bpf(|| format!("read {}", path.display())))?;
        let got = MapDef {
            kind: pinned.map_type(),
            key: pinned.key_size(),
            value: pinned.value_size(),
            entries: pinned.max_entries(),
            flags: info.info.map_flags,
        };
        if got != want {
            return Err(Error::StalePin {
                path,
                want: want.to_string(),
                got: got.to_string(),
            });
        }
    }
    open.load().map_err(bpf(|| format!("load object {name}")))
}

/// An instance name is a plain file name: letters, digits, '-', '_', '.', not "." or "..".
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::Name(name.to_string()))
    }
}

/// What libbpf compares when it reuses a pinned map.
#[derive(PartialEq)]
struct MapDef {
    kind: libbpf_rs::MapType,
    key: u32,
    value: u32,
    entries: u32,
    flags: u32,
}

impl std::fmt::Display for MapDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}, key {} bytes, value {} bytes, {} entries, flags {:#x}",
            self.kind, self.key, self.value, self.entries, self.flags
        )
    }
}

impl Instance {
    /// Creates (or reopens) the instance `name`: mounts bpffs if needed, makes
    /// `/sys/fs/bpf/fusebox/<name>/` and creates the shared maps there (by loading the no-op
    /// object). Maps already pinned there are reused with their entries.
    pub fn create(name: &str) -> Result<Instance> {
        check_name(name)?;
        ensure_bpffs()?;
        let dir = Path::new(PIN_ROOT).join(name);
        fs::create_dir_all(&dir).map_err(io(|| format!("create {}", dir.display())))?;
        let noop = match open_object("noop", &dir) {
            Ok(o) => o,
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let maps = Maps::open(&dir)?;
        let mut objects = BTreeMap::new();
        objects.insert("noop", noop);
        let inst = Instance {
            name: name.to_string(),
            dir,
            attached: Vec::new(),
            objects,
            maps,
            clsact: Default::default(),
            keep: false,
        };
        if let Err(e) = inst.cls_spill_recount() {
            // Maps reused from a pin stay as they were.
            let mut inst = inst;
            inst.keep();
            return Err(e);
        }
        Ok(inst)
    }

    /// The instance's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pin directory.
    pub fn pin_dir(&self) -> &Path {
        &self.dir
    }

    /// Loads the object of `stage` (no-op if loaded already); its maps are the instance's.
    pub fn load(&mut self, stage: Stage) -> Result<()> {
        let name = stage.object();
        if !self.objects.contains_key(name) {
            let obj = open_object(name, &self.dir)?;
            self.objects.insert(name, obj);
        }
        Ok(())
    }

    /// Whether the object of `stage` is loaded.
    pub fn is_loaded(&self, stage: Stage) -> bool {
        self.objects.contains_key(stage.object())
    }

    /// The loaded program of `stage`.
    pub fn program(&self, stage: Stage) -> Result<ProgramMut<'_>> {
        let obj = self
            .objects
            .get(stage.object())
            .ok_or(Error::NotLoaded(stage.object()))?;
        obj.progs_mut()
            .find(|p| p.name() == stage.program())
            .ok_or(Error::NoProgram(stage.object(), stage.program()))
    }

    /// Attaches `stage` (loading it if needed) to interface `ifindex` at `hook`: XDP for
    /// Dec, a TC clsact filter at the stage's priority ([`Stage::tc_priority`]) otherwise.
    /// Attaching the same stage at the same place again replaces it.
    pub fn attach(&mut self, stage: Stage, ifindex: u32, hook: Hook) -> Result<()> {
        if stage.is_xdp() != (hook == Hook::Xdp) {
            return Err(Error::Hook(stage, hook));
        }
        self.load(stage)?;
        let prog = self.program(stage)?;
        let ifi = ifindex as i32;
        let tc = if hook == Hook::Xdp {
            Xdp::new(prog.as_fd())
                .attach(ifi, XdpFlags::NONE)
                .map_err(bpf(|| {
                    format!("attach {stage:?} to XDP of ifindex {ifindex}")
                }))?;
            None
        } else {
            let point = if hook == Hook::Ingress {
                TC_INGRESS
            } else {
                TC_EGRESS
            };
            let mut h = TcHookBuilder::new(prog.as_fd())
                .ifindex(ifi)
                .replace(true)
                .handle(1)
                .priority(stage.tc_priority())
                .hook(point);
            if !self.clsact.contains(&ifindex) {
                h.create()
                    .map_err(bpf(|| format!("clsact qdisc on ifindex {ifindex}")))?;
                self.clsact.insert(ifindex);
            }
            h.attach().map_err(bpf(|| {
                format!("attach {stage:?} to {hook:?} of ifindex {ifindex}")
            }))?;
            Some(h)
        };
        self.attached
            .retain(|a| !(a.stage == stage && a.ifindex == ifindex && a.hook == hook));
        self.attached.push(Attachment {
            stage,
            ifindex,
            hook,
            tc,
        });
        Ok(())
    }

    /// Where the instance's stages are attached: (stage, ifindex, hook).
    pub fn attachments(&self) -> Vec<(Stage, u32, Hook)> {
        self.attached
            .iter()
            .map(|a| (a.stage, a.ifindex, a.hook))
            .collect()
    }

    fn detach_one(&self, a: &mut Attachment) -> Result<()> {
        match &mut a.tc {
            Some(h) => h.detach().map_err(bpf(|| {
                format!(
                    "detach {:?} from {:?} of ifindex {}",
                    a.stage, a.hook, a.ifindex
                )
            })),
            None => {
                let prog = self.program(a.stage)?;
                Xdp::new(prog.as_fd())
                    .detach(a.ifindex as i32, XdpFlags::NONE)
                    .map_err(bpf(|| format!("detach XDP of ifindex {}", a.ifindex)))
            }
        }
    }

    /// Detaches `stage` from `ifindex` at `hook` (no-op if it is not attached there).
    pub fn detach(&mut self, stage: Stage, ifindex: u32, hook: Hook) -> Result<()> {
        let Some(i) = self
            .attached
            .iter()
            .position(|a| a.stage == stage && a.ifindex == ifindex && a.hook == hook)
        else {
            return Ok(());
        };
        let mut a = self.attached.remove(i);
        self.detach_one(&mut a)
    }

    /// Leaves the stages attached and the maps pinned when the instance is dropped (the data
    /// plane outlives the agent); a later [`Instance::create`] of the same name reuses the
    /// maps.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    fn teardown(&mut self) -> Result<()> {
        let mut first: Option<Error> = None;
        let mut attached = std::mem::take(&mut self.attached);
        for a in attached.iter_mut() {
            if let Err(e) = self.detach_one(a) {
                first.get_or_insert(e);
            }
        }
        self.objects.clear();
        for m in MAP_NAMES {
            let p = self.dir.join(m);
            if let Err(e) = fs::remove_file(&p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    first.get_or_insert(Error::Io {
                        what: format!("unpin {}", p.display()),
                        source: e,
                    });
                }
            }
        }
        if let Err(e) = fs::remove_dir(&self.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                first.get_or_insert(Error::Io {
                    what: format!("remove {}", self.dir.display()),
                    source: e,
                });
            }
        }
        let _ = fs::remove_dir(PIN_ROOT); // only when no other instance is left
        first.map_or(Ok(()), Err)
    }

    /// Unpins the maps of instance `name` and deletes its pin directory, without opening
    /// them: what to do with an instance made by another build ([`Error::StalePin`]) before
    /// creating it again. Stages still attached from before keep running on the unpinned maps
    /// until they are replaced; nothing of them is detached here. Absent: no error.
    pub fn unpin_stale(name: &str) -> Result<()> {
        check_name(name)?;
        let dir = Path::new(PIN_ROOT).join(name);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(|| format!("read {}", dir.display()))(e)),
        };
        for e in entries {
            let p = e.map_err(io(|| format!("read {}", dir.display())))?.path();
            fs::remove_file(&p).map_err(io(|| format!("unpin {}", p.display())))?;
        }
        fs::remove_dir(&dir).map_err(io(|| format!("remove {}", dir.display())))
    }

    /// Detaches every stage, unpins the maps and deletes the pin directory.
    pub fn remove(mut self) -> Result<()> {
        self.keep = true; // Drop has nothing left to do
        self.teardown()
    }

    // ---- typed map access ----

    /// Adds or replaces a classifier entry: in its slot of `cls_slots` when the slot is free
    /// or already `key`'s, else in the hash `cls_table`, counted in the slot's `spill`
    /// (cbox.h). A slot is rewritten like a forwarding slot (the version packets do not read,
    /// then the flip): never a half-written entry on the fast path.
    pub fn insert_cls(&self, key: &ClsKey, nsh: &NshMeta) -> Result<()> {
        let idx = cls_slot(key);
        let slot = self.cls_slot_read(idx)?;
        let cur = slot.current();
        let in_hash = self.cls_in_hash(key)?;
        let free = match cur.entry {
            None => true,
            Some((owner, _)) => owner == *key,
        };
        if free {
            // A copy the hash held goes: at rest a key is in one place.
            let spill = cur.spill.saturating_sub(u16::from(in_hash));
            self.cls_slot_flip(idx, slot, Some((*key, *nsh)), spill)?;
            if in_hash {
                delete(&self.maps.cls, "cls_table", &key.to_bytes())?;
            }
            return Ok(());
        }
        // Another key holds the slot: the hash, counted before packets need to look there.
        update(
            &self.maps.cls,
            "cls_table",
            &key.to_bytes(),
            &nsh.to_bytes(),
        )?;
        if !in_hash {
            self.cls_slot_flip(idx, slot, cur.entry, cur.spill.saturating_add(1))?;
        }
        Ok(())
    }

    /// Deletes a classifier entry (absent: no error).
    pub fn delete_cls(&self, key: &ClsKey) -> Result<()> {
        let idx = cls_slot(key);
        let mut slot = self.cls_slot_read(idx)?;
        if matches!(slot.current().entry, Some((owner, _)) if owner == *key) {
            let spill = slot.current().spill;
            self.cls_slot_flip(idx, slot, None, spill)?;
            slot = self.cls_slot_read(idx)?;
        }
        if self.cls_in_hash(key)? {
            delete(&self.maps.cls, "cls_table", &key.to_bytes())?;
            let cur = slot.current();
            self.cls_slot_flip(idx, slot, cur.entry, cur.spill.saturating_sub(1))?;
        }
        Ok(())
    }

    /// Every classifier entry (slots and hash), sorted by key.
    pub fn list_cls(&self) -> Result<Vec<(ClsKey, NshMeta)>> {
        let mut all: BTreeMap<ClsKey, NshMeta> = list(
            &self.maps.cls,
            "cls_table",
            ClsKey::from_bytes,
            NshMeta::from_bytes,
        )?
        .into_iter()
        .collect();
        for idx in 0..crate::maps::CLS_SLOTS {
            if let Some((key, nsh)) = self.cls_slot_read(idx)?.current().entry {
                all.insert(key, nsh);
            }
        }
        Ok(all.into_iter().collect())
    }

    /// Whether the hash `cls_table` holds `key`.
    fn cls_in_hash(&self, key: &ClsKey) -> Result<bool> {
        Ok(self
            .maps
            .cls
            .lookup(&key.to_bytes(), MapFlags::ANY)
            .map_err(bpf(|| "read cls_table".to_string()))?
            .is_some())
    }

    /// Slot `idx` of `cls_slots`.
    pub fn cls_slot_read(&self, idx: u32) -> Result<ClsSlot> {
        slot_read(&self.maps.cls_slots, "cls_slots", idx, ClsSlot::from_bytes)
    }

    /// Writes slot `idx` of `cls_slots` as given, in one write, whatever the hash holds: a
    /// slot in the middle of a rewrite (version 1 live), for tests of the stages' reads.
    /// [`Instance::insert_cls`] is how entries are written.
    pub fn cls_slot_write(&self, idx: u32, slot: &ClsSlot) -> Result<()> {
        update(
            &self.maps.cls_slots,
            "cls_slots",
            &idx.to_ne_bytes(),
            &slot.to_bytes(),
        )
    }

    /// Makes (`entry`, `spill`) the live version of slot `idx` (now `slot`), with the next hop
    /// of an MD type 1 entry's SPH cached (cbox.h cls_hop), version 0 live at the end (the
    /// cache line packets read with `live`, cbox.h): [`flip_to_v0`].
    fn cls_slot_flip(
        &self,
        idx: u32,
        slot: ClsSlot,
        entry: Option<(ClsKey, NshMeta)>,
        spill: u16,
    ) -> Result<()> {
        let hop = match entry {
            Some((_, m)) if m.md_type == 1 => self.cls_hop(m.sph)?,
            _ => None,
        };
        flip_to_v0(
            slot.live,
            slot.ent,
            ClsVersion { entry, spill, hop },
            |live, ent| self.cls_slot_write(idx, &ClsSlot { live, ent }),
        )
    }

    /// The next hop a classifier entry of `sph` caches: its forwarding entry's, when that is
    /// an Ethernet next hop that redirects ([`ClsHop::of`]).
    fn cls_hop(&self, sph: u32) -> Result<Option<ClsHop>> {
        let val = match self.fwd_slot_read(fwd_slot(sph))?.current() {
            Some((owner, val)) if owner == sph => Some(val),
            _ => self
                .maps
                .fwd
                .lookup(&sph.to_ne_bytes(), MapFlags::ANY)
                .map_err(bpf(|| "read fwd_table".to_string()))?
                .map(|v| FwdVal::from_bytes(&v))
                .transpose()?,
        };
        Ok(val.as_ref().and_then(ClsHop::of))
    }

    /// Rewrites the classifier slots whose entry is of `sph` with the next hop `sph` has now,
    /// after its forwarding entry changed from one whose hop was `before`: nothing when the
    /// hop is the same (every entry of `sph` already caches it), else one batch read of every
    /// slot, then each slot whose cached hop differs through its versions, as any classifier
    /// rewrite.
    fn cls_hops_refresh(&self, sph: u32, before: Option<ClsHop>) -> Result<()> {
        let want = self.cls_hop(sph)?;
        if want == before {
            return Ok(());
        }
        let slots = self
            .maps
            .cls_slots
            .lookup_batch(crate::maps::CLS_SLOTS, MapFlags::ANY, MapFlags::ANY)
            .map_err(bpf(|| "read cls_slots".to_string()))?;
        for (k, v) in slots {
            if ClsSlot::live_sph(&v) != Some(sph) {
                continue;
            }
            let idx = u32_key(&k)?;
            let slot = ClsSlot::from_bytes(&v)?;
            let cur = slot.current();
            if let Some((key, meta)) = cur.entry {
                if meta.md_type == 1 && meta.sph == sph && cur.hop != want {
                    self.cls_slot_flip(idx, slot, Some((key, meta)), cur.spill)?;
                }
            }
        }
        Ok(())
    }

    /// Makes every slot's `spill` the number of keys of that slot in the hash `cls_table`:
    /// maps reused from a pin (an earlier process, an earlier build without `cls_slots`) may
    /// hold hash entries no slot counts, which Cls would never look up.
    fn cls_spill_recount(&self) -> Result<()> {
        let mut want: BTreeMap<u32, u16> = BTreeMap::new();
        for (key, _) in list(
            &self.maps.cls,
            "cls_table",
            ClsKey::from_bytes,
            NshMeta::from_bytes,
        )? {
            let n = want.entry(cls_slot(&key)).or_insert(0);
            *n = n.saturating_add(1);
        }
        for idx in 0..crate::maps::CLS_SLOTS {
            let slot = self.cls_slot_read(idx)?;
            let cur = slot.current();
            let spill = want.get(&idx).copied().unwrap_or(0);
            if cur.spill != spill {
                self.cls_slot_flip(idx, slot, cur.entry, spill)?;
            }
        }
        Ok(())
    }

    /// Adds or replaces a proxy entry in the hash `proxy_table`, then retires whatever the
    /// key's slot of `proxy_slots` cached (a new generation; cbox.h): the stages refill the
    /// slot from the hash.
    pub fn insert_proxy(&self, key: &FlowKey, nsh: &NshMeta) -> Result<()> {
        update(
            &self.maps.proxy,
            "proxy_table",
            &key.to_bytes(),
            &nsh.to_bytes(),
        )?;
        proxy_gen_bump(&self.maps.proxy_gen, key)
    }

    /// Deletes a proxy entry (absent: no error), then retires whatever the key's slot cached.
    pub fn delete_proxy(&self, key: &FlowKey) -> Result<()> {
        delete(&self.maps.proxy, "proxy_table", &key.to_bytes())?;
        proxy_gen_bump(&self.maps.proxy_gen, key)
    }

    /// The entry the slot of `key` in `proxy_slots` would answer a stage with, if it caches
    /// one for `key` (cbox.h): always the hash's entry for `key` when no write is under way.
    pub fn proxy_cached(&self, key: &FlowKey) -> Result<Option<NshMeta>> {
        let (slot, gen) = self.proxy_slot_read(proxy_slot(key))?;
        Ok(slot
            .and_then(|s| s.answer(gen))
            .filter(|(k, _)| k == key)
            .map(|(_, m)| m))
    }

    /// Slot `idx` of `proxy_slots` (None: never written) and its generation in `proxy_gen`.
    fn proxy_slot_read(&self, idx: u32) -> Result<(Option<ProxySlot>, u64)> {
        let slot = match self
            .maps
            .proxy_slots
            .lookup(&idx.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf(|| "read proxy_slots".to_string()))?
        {
            Some(v) => Some(ProxySlot::from_bytes(&v)?),
            None => None,
        };
        let gen = self
            .maps
            .proxy_gen
            .lookup(&idx.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf(|| "read proxy_gen".to_string()))?
            .map_or(0, |v| {
                let mut b = [0u8; 8];
                if let Some(s) = v.get(..8) {
                    b.copy_from_slice(s);
                }
                u64::from_ne_bytes(b)
            });
        Ok((slot, gen))
    }

    /// Every proxy entry, sorted by key.
    pub fn list_proxy(&self) -> Result<Vec<(FlowKey, NshMeta)>> {
        list(
            &self.maps.proxy,
            "proxy_table",
            FlowKey::from_bytes,
            NshMeta::from_bytes,
        )
    }

    /// Adds or replaces the forwarding entry of SPH `sph` (SPI << 8 | SI): in its slot of
    /// `fwd_slots` when the slot is free or already `sph`'s, else in the hash `fwd_table`
    /// (cbox.h). A slot's entry is replaced by writing the version packets do not read,
    /// then flipping which one they read: never a half-written entry on the fast path. The
    /// classifier entries of `sph` cache its new next hop (cbox.h cls_hop) before this
    /// returns.
    pub fn insert_fwd(&self, sph: u32, val: &FwdVal) -> Result<()> {
        let before = self.cls_hop(sph)?;
        self.fwd_put(sph, val)?;
        self.cls_hops_refresh(sph, before)
    }

    /// insert_fwd without the classifier's cached hops.
    fn fwd_put(&self, sph: u32, val: &FwdVal) -> Result<()> {
        let idx = fwd_slot(sph);
        let slot = self.fwd_slot_read(idx)?;
        let free = match slot.current() {
            None => true,
            Some((owner, _)) => owner == sph,
        };
        if !free || val.action.code() == 0 {
            // Another SPH holds the slot (or an entry the slot cannot tell from empty).
            return update(
                &self.maps.fwd,
                "fwd_table",
                &sph.to_ne_bytes(),
                &val.to_bytes(),
            );
        }
        self.fwd_slot_flip(idx, slot, Some((sph, *val)))?;
        // At rest an SPH is in one place: a copy the hash held before is gone.
        delete(&self.maps.fwd, "fwd_table", &sph.to_ne_bytes())
    }

    /// Deletes the forwarding entry of `sph` (absent: no error).
    pub fn delete_fwd(&self, sph: u32) -> Result<()> {
        let before = self.cls_hop(sph)?;
        let idx = fwd_slot(sph);
        let slot = self.fwd_slot_read(idx)?;
        if matches!(slot.current(), Some((owner, _)) if owner == sph) {
            self.fwd_slot_flip(idx, slot, None)?;
        }
        delete(&self.maps.fwd, "fwd_table", &sph.to_ne_bytes())?;
        self.cls_hops_refresh(sph, before)
    }

    /// Every forwarding entry (slots and hash), sorted by SPH.
    pub fn list_fwd(&self) -> Result<Vec<(u32, FwdVal)>> {
        let mut all: BTreeMap<u32, FwdVal> =
            list(&self.maps.fwd, "fwd_table", u32_key, FwdVal::from_bytes)?
                .into_iter()
                .collect();
        for idx in 0..crate::maps::FWD_SLOTS {
            if let Some((sph, val)) = self.fwd_slot_read(idx)?.current() {
                all.insert(sph, val);
            }
        }
        Ok(all.into_iter().collect())
    }

    /// Slot `idx` of `fwd_slots` as packets find it: both versions and which one is live
    /// (version 0 at rest, the one cache line a packet reads; cbox.h).
    pub fn fwd_slot_read(&self, idx: u32) -> Result<FwdSlot> {
        slot_read(&self.maps.fwd_slots, "fwd_slots", idx, FwdSlot::from_bytes)
    }

    /// Writes slot `idx` of `fwd_slots` as given, in one write, whatever the hash holds: a
    /// slot in the middle of a rewrite (version 1 live), for tests of the stages' reads.
    /// [`Instance::insert_fwd`] is how entries are written.
    pub fn fwd_slot_write(&self, idx: u32, slot: &FwdSlot) -> Result<()> {
        update(
            &self.maps.fwd_slots,
            "fwd_slots",
            &idx.to_ne_bytes(),
            &slot.to_bytes(),
        )
    }

    /// Makes `ent` the live version of slot `idx` (now `slot`), version 0 live at the end
    /// (the cache line packets read with `live`, cbox.h): [`flip_to_v0`].
    fn fwd_slot_flip(&self, idx: u32, slot: FwdSlot, ent: Option<(u32, FwdVal)>) -> Result<()> {
        flip_to_v0(slot.live, slot.ent, ent, |live, ent| {
            self.fwd_slot_write(idx, &FwdSlot { live, ent })
        })
    }

    /// Adds or replaces the configuration of interface `ifindex`: in its slot of `cfg_slots`
    /// when the slot is free or already `ifindex`'s, else in the hash `cfg` (cbox.h); a slot
    /// is rewritten like a forwarding slot (the version not read, then the flip).
    pub fn insert_cfg(&self, ifindex: u32, cfg: &StageCfg) -> Result<()> {
        let idx = cfg_slot(ifindex);
        let slot = self.cfg_slot_read(idx)?;
        let free = match slot.current() {
            None => true,
            Some((owner, _)) => owner == ifindex,
        };
        if !free || ifindex == 0 {
            return update(
                &self.maps.cfg,
                "cfg",
                &ifindex.to_ne_bytes(),
                &cfg.to_bytes(),
            );
        }
        self.cfg_slot_flip(idx, slot, Some((ifindex, *cfg)))?;
        delete(&self.maps.cfg, "cfg", &ifindex.to_ne_bytes())
    }

    /// Deletes the configuration of `ifindex` (absent: no error).
    pub fn delete_cfg(&self, ifindex: u32) -> Result<()> {
        let idx = cfg_slot(ifindex);
        let slot = self.cfg_slot_read(idx)?;
        if matches!(slot.current(), Some((owner, _)) if owner == ifindex) {
            self.cfg_slot_flip(idx, slot, None)?;
        }
        delete(&self.maps.cfg, "cfg", &ifindex.to_ne_bytes())
    }

    /// Every configuration entry (slots and hash), sorted by ifindex.
    pub fn list_cfg(&self) -> Result<Vec<(u32, StageCfg)>> {
        let mut all: BTreeMap<u32, StageCfg> =
            list(&self.maps.cfg, "cfg", u32_key, StageCfg::from_bytes)?
                .into_iter()
                .collect();
        for idx in 0..crate::maps::CFG_SLOTS {
            if let Some((ifindex, cfg)) = self.cfg_slot_read(idx)?.current() {
                all.insert(ifindex, cfg);
            }
        }
        Ok(all.into_iter().collect())
    }

    /// Slot `idx` of `cfg_slots`.
    fn cfg_slot_read(&self, idx: u32) -> Result<CfgSlot> {
        slot_read(&self.maps.cfg_slots, "cfg_slots", idx, CfgSlot::from_bytes)
    }

    /// Makes `ent` the live version of slot `idx` (now `slot`) in two writes, as
    /// `cls_slot_flip` does.
    fn cfg_slot_flip(
        &self,
        idx: u32,
        mut slot: CfgSlot,
        ent: Option<(u32, StageCfg)>,
    ) -> Result<()> {
        let next = (slot.live & 1) ^ 1;
        slot.ent[usize::from(next)] = ent;
        update(
            &self.maps.cfg_slots,
            "cfg_slots",
            &idx.to_ne_bytes(),
            &slot.to_bytes(),
        )?;
        slot.live = next;
        update(
            &self.maps.cfg_slots,
            "cfg_slots",
            &idx.to_ne_bytes(),
            &slot.to_bytes(),
        )
    }

    /// The counters of `stage`, summed over CPUs.
    pub fn counters(&self, stage: CounterStage) -> Result<Counters> {
        let mut out = Counters::default();
        for (i, slot) in out.0.iter_mut().enumerate() {
            let idx = stage as u32 * CTR_PER_STAGE as u32 + i as u32;
            let per_cpu = self
                .maps
                .counters
                .lookup_percpu(&idx.to_ne_bytes(), MapFlags::ANY)
                .map_err(bpf(|| "read counters".to_string()))?
                .unwrap_or_default();
            *slot = per_cpu
                .iter()
                .map(|v| {
                    let mut b = [0u8; 8];
                    if let Some(s) = v.get(..8) {
                        b.copy_from_slice(s);
                    }
                    u64::from_ne_bytes(b)
                })
                .sum();
        }
        // The stages count each packet once, by its outcome (cbox.h): every packet is the
        // sum of the outcomes, all counters but `learned`.
        out.0[Counter::Packets as usize] = Counter::ALL
            .iter()
            .filter(|&&c| c != Counter::Packets && c != Counter::Learned)
            .map(|&c| out.get(c))
            .sum();
        Ok(out)
    }

    /// Sets every counter of every stage to zero.
    pub fn clear_counters(&self) -> Result<()> {
        let cpus = libbpf_rs::num_possible_cpus().map_err(bpf(|| "count CPUs".to_string()))?;
        let zero = vec![vec![0u8; 8]; cpus];
        for idx in 0..(crate::maps::STAGES * CTR_PER_STAGE) as u32 {
            self.maps
                .counters
                .update_percpu(&idx.to_ne_bytes(), &zero, MapFlags::ANY)
                .map_err(bpf(|| "clear counters".to_string()))?;
        }
        Ok(())
    }

    /// Each CPU's last decapsulated NSH (`md_type` 0: none yet).
    pub fn last_dec(&self) -> Result<Vec<NshMeta>> {
        let per_cpu = self
            .maps
            .last_dec
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf(|| "read last_dec".to_string()))?
            .unwrap_or_default();
        per_cpu
            .iter()
            .map(|v| NshMeta::from_bytes(v).map_err(Error::from))
            .collect()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if !self.keep {
            let _ = self.teardown();
        }
    }
}

/// Slot `idx` of the slot array `map` (named `name`), parsed by `parse`; the default (empty)
/// slot when the map has none there.
/// Makes `ver` the live version of a two-version slot (`live`, `ent`: cls_slots, fwd_slots)
/// and leaves version 0 live, the cache line packets read with `live` (cbox.h). Each call of
/// `write` (the slot's `live` and versions, in one write) rewrites what packets may be reading
/// with the bytes it has: `ver` into the version not live, then the flip of `live` alone. From
/// version 0 live that is four writes (`ver` into version 1, live 1, `ver` into version 0,
/// live 0); from version 1, two.
fn flip_to_v0<V: Copy>(
    live: u8,
    mut ent: [V; 2],
    ver: V,
    mut write: impl FnMut(u8, [V; 2]) -> Result<()>,
) -> Result<()> {
    if live & 1 == 0 {
        ent[1] = ver;
        write(0, ent)?;
        write(1, ent)?;
    }
    ent[0] = ver;
    write(1, ent)?;
    write(0, ent)
}

fn slot_read<T: Default>(
    map: &MapHandle,
    name: &str,
    idx: u32,
    parse: fn(&[u8]) -> std::result::Result<T, SizeError>,
) -> Result<T> {
    match map
        .lookup(&idx.to_ne_bytes(), MapFlags::ANY)
        .map_err(bpf(|| format!("read {name}")))?
    {
        Some(v) => Ok(parse(&v)?),
        None => Ok(T::default()),
    }
}

fn u32_key(b: &[u8]) -> std::result::Result<u32, SizeError> {
    let a: [u8; 4] = b.try_into().map_err(|_| SizeError {
        what: "u32",
        got: b.len(),
        want: 4,
    })?;
    Ok(u32::from_ne_bytes(a))
}

fn update(map: &MapHandle, name: &str, key: &[u8], val: &[u8]) -> Result<()> {
    map.update(key, val, MapFlags::ANY)
        .map_err(bpf(|| format!("update {name}")))
}

fn delete(map: &MapHandle, name: &str, key: &[u8]) -> Result<()> {
    match map.delete(key) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::Bpf {
            what: format!("delete from {name}"),
            source: e,
        }),
    }
}

fn list<K: Ord, V>(
    map: &MapHandle,
    name: &str,
    key: impl Fn(&[u8]) -> std::result::Result<K, SizeError>,
    val: impl Fn(&[u8]) -> std::result::Result<V, SizeError>,
) -> Result<Vec<(K, V)>> {
    let mut out = Vec::new();
    for k in map.keys() {
        // An entry deleted between the key walk and the lookup is skipped.
        if let Some(v) = map
            .lookup(&k, MapFlags::ANY)
            .map_err(bpf(|| format!("read {name}")))?
        {
            out.push((key(&k)?, val(&v)?));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
