//! Running a loaded stage on one frame through `BPF_PROG_TEST_RUN`: the verdict, the frame
//! as the program left it and the kernel's time per run.

use libbpf_rs::{MapCore, ProgramInput, ProgramMut};

use crate::load::{Error, Instance, Result};
use crate::{Hook, Stage};

/// What one test run gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    /// The program's return value (XDP_* or TC_ACT_*; TC_ACT_UNSPEC is `u32::MAX`).
    pub ret: u32,
    /// The frame after the program.
    pub frame: Vec<u8>,
    /// Mean time per run in nanoseconds, as the kernel measured it.
    pub duration_ns: u64,
}

/// Room for what a stage may add to a frame (outer headers, NSH).
const GROWTH: usize = 512;

/// Runs `prog` on `frame`, `repeat` times (0 = once).
pub fn run_program(prog: &ProgramMut<'_>, frame: &[u8], repeat: u32) -> Result<RunOutput> {
    run_with_context(prog, frame, None, repeat)
}

/// The `struct xdp_md` a test run of an XDP program starts from: the whole frame as data,
/// arriving on `ifindex`'s receive queue 0 (the kernel takes `ingress_ifindex` and
/// `rx_queue_index` from it; data_meta and egress_ifindex must be 0).
fn xdp_md(frame_len: usize, ifindex: u32) -> Result<[u8; 24]> {
    let len = u32::try_from(frame_len).map_err(|_| Error::Io {
        what: format!("test run of a {frame_len}-byte frame"),
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    })?;
    let mut md = [0u8; 24];
    // data 0, data_end, data_meta 0, ingress_ifindex, rx_queue_index 0, egress_ifindex 0
    md[4..8].copy_from_slice(&len.to_ne_bytes());
    md[12..16].copy_from_slice(&ifindex.to_ne_bytes());
    Ok(md)
}

fn run_with_context(
    prog: &ProgramMut<'_>,
    frame: &[u8],
    context: Option<&mut [u8]>,
    repeat: u32,
) -> Result<RunOutput> {
    let mut out = vec![0u8; frame.len() + GROWTH];
    let input = ProgramInput {
        data_in: Some(frame),
        data_out: Some(&mut out),
        context_in: context,
        repeat,
        ..Default::default()
    };
    let o = prog.test_run(input).map_err(|source| Error::Bpf {
        what: format!("test run of {:?}", prog.name()),
        source,
    })?;
    let frame = o.data.map(|d| d.to_vec()).unwrap_or_default();
    Ok(RunOutput {
        ret: o.return_value,
        frame,
        duration_ns: u64::try_from(o.duration.as_nanos()).unwrap_or(u64::MAX),
    })
}

impl Instance {
    /// Runs `stage` (loading it if needed) on `frame` through `BPF_PROG_TEST_RUN`, `repeat`
    /// times (0 = once). Maps are the instance's: the run reads and writes them.
    pub fn test_run(&mut self, stage: Stage, frame: &[u8], repeat: u32) -> Result<RunOutput> {
        self.load(stage)?;
        let prog = self.program(stage)?;
        run_program(&prog, frame, repeat)
    }

    /// Like [`Instance::test_run`], with an XDP stage's frame arriving on interface
    /// `ifindex` (its `ingress_ifindex`, receive queue 0; the interface must exist in the
    /// caller's network namespace). A TC stage's test run always sits on the loopback
    /// (`skb->ifindex` 1): `ifindex` is ignored for TC stages. [`Instance::test_run`] runs an
    /// XDP stage on the loopback's queue 0 too (the kernel's default without a context).
    pub fn test_run_on(
        &mut self,
        stage: Stage,
        frame: &[u8],
        ifindex: u32,
        repeat: u32,
    ) -> Result<RunOutput> {
        self.load(stage)?;
        let prog = self.program(stage)?;
        if !stage.is_xdp() {
            return run_program(&prog, frame, repeat);
        }
        let mut md = xdp_md(frame.len(), ifindex)?;
        run_with_context(&prog, frame, Some(&mut md), repeat)
    }
}

/// An object loaded on its own (no pin directory, its maps private): another project's
/// stages measured beside FuseBox's (`fusebox bench --scenario stages --chaining-box`).
pub struct Standalone {
    name: String,
    obj: libbpf_rs::Object,
    /// (network namespace inode, ifindex) whose clsact qdisc [`Standalone::attach`] made
    /// sure of.
    clsact: std::cell::RefCell<std::collections::BTreeSet<(u64, u32)>>,
}

/// A directory of pins under bpffs, removed with whatever is left in it when dropped (also
/// when loading fails half-way).
struct PrivatePins(std::path::PathBuf);

impl Drop for PrivatePins {
    fn drop(&mut self) {
        if let Ok(entries) = std::fs::read_dir(&self.0) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

impl std::fmt::Debug for Standalone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Standalone")
            .field("name", &self.name)
            .finish()
    }
}

impl Standalone {
    /// Opens and loads the object `bytes` (named `name` in errors). Maps the object asks to
    /// pin by name are pinned in a directory of its own under bpffs while it loads, then
    /// unpinned and the directory removed: its maps stay private to it (and are never
    /// shared with, or left beside, another object's maps of the same name).
    pub fn load(name: &str, bytes: &[u8]) -> Result<Standalone> {
        let bpf = |what: &str| {
            let what = format!("{what} {name}");
            move |source| Error::Bpf { what, source }
        };
        crate::load::ensure_bpffs()?;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = PrivatePins(std::path::PathBuf::from(format!(
            "{}/fusebox-standalone-{}-{n}",
            crate::load::BPFFS,
            std::process::id()
        )));
        std::fs::create_dir_all(&dir.0).map_err(|source| Error::Io {
            what: format!("create {}", dir.0.display()),
            source,
        })?;
        let mut b = libbpf_rs::ObjectBuilder::default();
        b.pin_root_path(&dir.0).map_err(bpf("pin root for"))?;
        let open = b.open_memory(bytes).map_err(bpf("open object"))?;
        let mut obj = open.load().map_err(bpf("load object"))?;
        for mut m in obj.maps_mut() {
            if let Some(path) = m.get_pin_path().map(std::path::PathBuf::from) {
                m.unpin(&path).map_err(bpf("unpin a map of"))?;
            }
        }
        drop(dir);
        Ok(Standalone {
            name: name.to_string(),
            obj,
            clsact: Default::default(),
        })
    }

    /// The names of the object's maps that are pinned in bpffs (none: see
    /// [`Standalone::load`]).
    pub fn pinned_maps(&self) -> Vec<String> {
        self.obj
            .maps()
            .filter(|m| m.is_pinned())
            .map(|m| m.name().to_string_lossy().into_owned())
            .collect()
    }

    /// The names of the object's programs.
    pub fn programs(&self) -> Vec<String> {
        self.obj
            .progs()
            .map(|p| p.name().to_string_lossy().into_owned())
            .collect()
    }

    /// Writes `key` → `value` into the object's map `map`.
    pub fn update(&self, map: &str, key: &[u8], value: &[u8]) -> Result<()> {
        let m = self
            .obj
            .maps()
            .find(|m| m.name() == map)
            .ok_or_else(|| Error::Io {
                what: format!("object {}: map {map}", self.name),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })?;
        m.update(key, value, libbpf_rs::MapFlags::ANY)
            .map_err(|source| Error::Bpf {
                what: format!("update {map} of {}", self.name),
                source,
            })
    }

    /// Attaches program `prog` to interface `ifindex` of the calling thread's network
    /// namespace at `hook`: XDP, or a TC clsact filter (handle 1) at `priority`, replacing a
    /// filter of the same priority there (the qdisc is made if missing). The attachment is
    /// not undone when the object drops: it lasts as long as the interface (the benchmark
    /// attaches inside namespaces it deletes afterwards).
    pub fn attach(&self, prog: &str, ifindex: u32, hook: Hook, priority: u32) -> Result<()> {
        use std::os::fd::AsFd;
        let p = self.program(prog)?;
        let what = || {
            format!(
                "attach {prog} of {} to {hook:?} of ifindex {ifindex}",
                self.name
            )
        };
        let is_xdp = p.prog_type() == libbpf_rs::ProgramType::Xdp;
        if is_xdp != (hook == Hook::Xdp) {
            return Err(Error::Io {
                what: what(),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            });
        }
        let ifi = i32::try_from(ifindex).map_err(|_| Error::Io {
            what: what(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })?;
        if hook == Hook::Xdp {
            return libbpf_rs::Xdp::new(p.as_fd())
                .attach(ifi, libbpf_rs::XdpFlags::NONE)
                .map_err(|source| Error::Bpf {
                    what: what(),
                    source,
                });
        }
        let point = if hook == Hook::Ingress {
            libbpf_rs::TC_INGRESS
        } else {
            libbpf_rs::TC_EGRESS
        };
        let mut h = libbpf_rs::TcHookBuilder::new(p.as_fd())
            .ifindex(ifi)
            .replace(true)
            .handle(1)
            .priority(priority)
            .hook(point);
        // The qdisc once per interface (making it again works, but the kernel complains).
        let netns = std::fs::metadata("/proc/thread-self/ns/net")
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .unwrap_or(0);
        if self.clsact.borrow_mut().insert((netns, ifindex)) {
            h.create().map_err(|source| Error::Bpf {
                what: format!("clsact qdisc on ifindex {ifindex}"),
                source,
            })?;
        }
        h.attach().map(|_| ()).map_err(|source| Error::Bpf {
            what: what(),
            source,
        })
    }

    fn program(&self, prog: &str) -> Result<libbpf_rs::ProgramMut<'_>> {
        self.obj
            .progs_mut()
            .find(|p| p.name() == prog)
            .ok_or_else(|| Error::Io {
                what: format!("object {}: program {prog}", self.name),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })
    }

    /// Runs program `prog` on `frame` through `BPF_PROG_TEST_RUN`, `repeat` times.
    pub fn test_run(&self, prog: &str, frame: &[u8], repeat: u32) -> Result<RunOutput> {
        let p = self.program(prog)?;
        run_program(&p, frame, repeat)
    }
}
