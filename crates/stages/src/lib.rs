//! FuseBox's NSH stages after Chaining-Box (Cls, Dec, Enc, Fwd, Enc+Fwd): small eBPF programs
//! in C (`bpf/*.bpf.c`, compiled by `build.rs` with clang `-target bpf`) beside an NSH-unaware
//! service function, so that it can sit in a service chain across hosts without knowing it.
//!
//! - [`maps`]: the Rust side of `bpf/cbox.h` (map keys and values, counters, flags);
//! - [`load`]: an [`Instance`], one service function's stages: a pin directory on bpffs
//!   shared by every stage object, loading, attaching (XDP, TC clsact), typed map access;
//! - [`testrun`]: running a loaded stage on a frame through `BPF_PROG_TEST_RUN`.
//!
//! Cls has two forms sharing `bpf/cls.h`: TC ingress ([`Stage::Cls`], the default, and
//! [`Stage::ClsFwd`]) and XDP ([`Stage::ClsXdp`]).
//!
//! Each stage object holds one program named like the object (`dec.bpf.c` → `dec`); the
//! no-op object holds `noop_xdp` and `noop_tc`, the benchmarks' baseline.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod load;
pub mod maps;
pub mod testrun;

pub use load::{Error, Hook, Instance, ProxyTable};
pub use testrun::{RunOutput, Standalone};

mod objects {
    include!(concat!(env!("OUT_DIR"), "/objects.rs"));
}

/// A program of the stage objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Classifier (TC ingress) at a chain's entry.
    Cls,
    /// Decapsulation (XDP) before an SF.
    Dec,
    /// Encapsulation (TC egress) after an SF.
    Enc,
    /// Forwarding (TC, after Cls or Enc).
    Fwd,
    /// Enc and Fwd in one program (TC egress).
    EncFwd,
    /// Cls and Fwd in one program (TC ingress at a chain's entry).
    ClsFwd,
    /// Cls at XDP (a chain's entry): the same classification, NSH and counters as [`Stage::Cls`],
    /// the room made by `bpf_xdp_adjust_head`; a classified frame goes up (XDP_PASS) for Fwd
    /// at TC ingress.
    ClsXdp,
    /// The no-op XDP program (benchmark baseline).
    NoopXdp,
    /// The no-op TC program (benchmark baseline).
    NoopTc,
}

impl Stage {
    /// Every program.
    pub const ALL: [Stage; 9] = [
        Stage::Cls,
        Stage::ClsFwd,
        Stage::ClsXdp,
        Stage::Dec,
        Stage::Enc,
        Stage::Fwd,
        Stage::EncFwd,
        Stage::NoopXdp,
        Stage::NoopTc,
    ];

    /// The object (`bpf/<object>.bpf.c`) holding the program.
    pub fn object(self) -> &'static str {
        match self {
            Stage::Cls => "cls",
            Stage::Dec => "dec",
            Stage::Enc => "enc",
            Stage::Fwd => "fwd",
            Stage::EncFwd => "enc_fwd",
            Stage::ClsFwd => "cls_fwd",
            Stage::ClsXdp => "cls_xdp",
            Stage::NoopXdp | Stage::NoopTc => "noop",
        }
    }

    /// The program's name in its object.
    pub fn program(self) -> &'static str {
        match self {
            Stage::NoopXdp => "noop_xdp",
            Stage::NoopTc => "noop_tc",
            s => s.object(),
        }
    }

    /// Where the stage attaches by default: Dec, Cls's XDP form (and the no-op XDP) at XDP,
    /// Cls at TC ingress, the others at TC egress.
    pub fn default_hook(self) -> Hook {
        match self {
            Stage::Dec | Stage::ClsXdp | Stage::NoopXdp => Hook::Xdp,
            Stage::Cls | Stage::ClsFwd => Hook::Ingress,
            _ => Hook::Egress,
        }
    }

    /// Whether the program is XDP (else TC).
    pub fn is_xdp(self) -> bool {
        matches!(self, Stage::Dec | Stage::ClsXdp | Stage::NoopXdp)
    }

    /// The TC filter priority: Cls and Enc (and Enc+Fwd) before Fwd, the no-op last.
    pub fn tc_priority(self) -> u32 {
        match self {
            Stage::Cls | Stage::ClsFwd => 10,
            Stage::Enc | Stage::EncFwd => 20,
            Stage::Fwd => 30,
            Stage::NoopTc | Stage::Dec | Stage::ClsXdp | Stage::NoopXdp => 40,
        }
    }

    /// The compiled object's bytes: `None` when the source is absent or clang was missing
    /// at build time.
    pub fn object_bytes(self) -> Option<&'static [u8]> {
        object_bytes(self.object())
    }
}

/// The compiled bytes of `bpf/<name>.bpf.c`: `None` if there is no such source or clang was
/// missing at build time (the object is then empty).
pub fn object_bytes(name: &str) -> Option<&'static [u8]> {
    objects::OBJECTS
        .iter()
        .find(|(n, b)| *n == name && !b.is_empty())
        .map(|(_, b)| *b)
}

/// Why BPF programs cannot be loaded here (`None`: they can): objects not built (no clang at
/// build time) or not running as root.
pub fn unavailable() -> Option<String> {
    if object_bytes("noop").is_none() {
        return Some("the BPF objects were not built (clang missing at build time)".into());
    }
    if !load::is_root() {
        return Some("loading BPF programs needs root".into());
    }
    None
}

/// For tests: `true` when BPF programs can run here; otherwise prints why `test` skips and
/// returns `false`, or panics under `CI=true` (where BPF must work).
pub fn require_bpf(test: &str) -> bool {
    match unavailable() {
        None => true,
        Some(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: {why} (CI=true: BPF tests must run)"
            );
            eprintln!("skipping {test}: {why}");
            false
        }
    }
}
