//! The chain file: which NFs, how their interfaces are linked, where traffic enters.
//!
//! ```toml
//! [nf.napt]
//! click = "napt.click"          # relative to the chain file
//! define = { MAC = "00:00:00:00:00:01" }   # optional, like click's --define
//! [nf.fw]
//! click = "fw.click"
//! [[link]]
//! between = ["napt.eth1", "fw.eth0"]
//! [[entry]]
//! to = "napt.eth0"
//! [[device]]                    # optional: run live on a Linux interface
//! at = "napt.eth0"
//! dev = "veth1"
//! via = "afxdp"                 # optional: afxdp, afpacket or afpacket-tc (default: auto)
//! ```
//!
//! `nsh = true` at the top makes the chain an NSH-aware service function (as `fusebox run
//! --nsh` does): a frame arriving with an NSH, over Ethernet transport or VXLAN-GPE, loses
//! the transport and the NSH before the chain, and every packet the chain sends out because
//! of it leaves with them put back (same SPI and context, SI − 1). Frames without an NSH go
//! through the chain as they are.
//!
//! An NF written in Rust with operators (an element class registered in
//! `elements::registry`, such as the `bricks` crate's) is an NF of its own without a Click
//! file:
//!
//! ```toml
//! [nf.t1]
//! rust = "TTLNF"                # the class
//! args = ""                     # optional: its configuration string ($NAMEs from `define`)
//! inputs = 1                    # optional (default 1)
//! outputs = 1                   # optional (default: as many as inputs)
//! ```
//!
//! Its Click configuration is generated ([`RustNf::click`]): the element is named `nf`,
//! input `i` is fed by `FromDevice(eth<i>)`, and with `n` = max(inputs, 2) output `j < n`
//! leaves by `ToDevice(eth<(j + 1) mod n>)`, output `j ≥ n` by `ToDevice(eth<j>)`. So a
//! one-input NF is `FromDevice(eth0) -> nf :: CLASS(ARGS) -> ToDevice(eth1)`, and a
//! two-sided one (a NAT: inside on eth0, outside on eth1) is `eth0 -> [0]nf[0] -> eth1`
//! and `eth1 -> [1]nf[1] -> eth0`.
//!
//! A link is a bidirectional wire between two NF interfaces. Every interface that is not
//! linked (entries included) is also an exit. A device binds an unlinked interface to a
//! Linux network device: packets received there enter the chain at it (when the NF reads
//! it), and packets leaving by it are sent there (when the NF writes it).

pub use ports::port::{Attach, UnknownAttach};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// An error in a chain file: where (the file and, where known, the line and column) and
/// what. Displayed as `file:line:col: what` or `file: what`.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {kind}")]
pub struct ChainError {
    /// `file:line:col`, or `file` when no position is known.
    pub at: String,
    /// What is wrong there (boxed: errors are rare, `Result`s stay small).
    #[source]
    pub kind: Box<ChainErrorKind>,
}

/// What is wrong with a chain file ([`ChainError`]).
#[derive(Debug, thiserror::Error)]
pub enum ChainErrorKind {
    /// The file cannot be read.
    #[error("cannot read chain file: {0}")]
    Read(#[source] std::io::Error),
    /// The file is not the TOML a chain file is.
    #[error("{}", .0.message())]
    Toml(#[source] toml::de::Error),
    /// An NF name that cannot be used in `NF.IFACE`.
    #[error("NF name `{0}` must be non-empty and contain no `.` or `/`")]
    NfName(String),
    /// An interface not written `NF.INTERFACE`.
    #[error("expected `NF.INTERFACE`, found `{0}`")]
    Endpoint(String),
    /// A link with other than two ends.
    #[error(
        "a link needs exactly two interfaces (`between = [\"a.eth1\", \"b.eth0\"]`), found {0}"
    )]
    LinkEnds(usize),
    /// An interface of an NF the chain does not declare.
    #[error("unknown NF `{nf}` in `{endpoint}` (the chain declares: {declared})", nf = .endpoint.nf, declared = .declared.join(", "))]
    UnknownNf {
        /// The interface named.
        endpoint: Endpoint,
        /// The NFs the chain declares.
        declared: Vec<String>,
    },
    /// A link between two interfaces of one NF.
    #[error("NF `{nf}` is linked to itself (`{a}` ↔ `{b}`); a link joins two different NFs", nf = .a.nf)]
    SelfLink {
        /// One end.
        a: Endpoint,
        /// The other end.
        b: Endpoint,
    },
    /// An interface in two links.
    #[error("interface `{endpoint}` is already in the link at {previous}; an interface can be in one link only")]
    LinkedTwice {
        /// The interface.
        endpoint: Endpoint,
        /// Where the first link is.
        previous: String,
    },
    /// An entry that is also linked.
    #[error("entry `{endpoint}` is linked (at {link}); an entry must be an unlinked interface")]
    LinkedEntry {
        /// The entry.
        endpoint: Endpoint,
        /// Where the link is.
        link: String,
    },
    /// A device bound to a linked interface.
    #[error(
        "`{endpoint}` is linked (at {link}); only an unlinked interface can be bound to a device"
    )]
    LinkedDevice {
        /// The interface.
        endpoint: Endpoint,
        /// Where the link is.
        link: String,
    },
    /// An interface bound to two devices.
    #[error("`{endpoint}` is already bound to a device at {previous}")]
    DeviceTwice {
        /// The interface.
        endpoint: Endpoint,
        /// Where the first binding is.
        previous: String,
    },
    /// A device binding without a device name, or with an unknown way to attach.
    #[error("{0}")]
    Device(DeviceSpecError),
    /// An NF with both or neither of `click` and `rust`.
    #[error("NF `{0}` needs exactly one of `click = \"FILE.click\"` (a Click configuration) and `rust = \"CLASS\"` (an NF written with operators)")]
    NfSource(String),
    /// A key only operator NFs (`rust = ...`) take, given to a Click NF.
    #[error(
        "`{0}` is for NFs written with operators (`rust = \"CLASS\"`), not Click configurations"
    )]
    RustOnly(&'static str),
    /// A `rust` class the element registry does not know.
    #[error("unknown element class `{0}` (`fusebox elements` lists the classes; operator NFs must be registered first)")]
    UnknownClass(String),
    /// An operator NF's number of inputs or outputs out of range.
    #[error("`{key} = {n}`: expected 1 to {MAX_PORTS}")]
    Ports {
        /// `inputs` or `outputs`.
        key: &'static str,
        /// The number given.
        n: i64,
    },
}

/// The most inputs or outputs a chain file gives an operator NF.
pub const MAX_PORTS: usize = 64;

/// A device specification that does not parse (`DEV[,afxdp|afpacket|afpacket-tc]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceSpecError {
    /// No device name.
    #[error("expected a device name (`DEV[,afxdp|afpacket|afpacket-tc]`), found `{0}`")]
    NoDevice(String),
    /// An attach kind that is not one.
    #[error(transparent)]
    Attach(#[from] UnknownAttach),
}

/// A Linux network device an interface of the chain is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Device {
    /// The device's name (`ip link` shows it).
    pub dev: String,
    /// How to attach to it.
    pub via: Attach,
}

impl Device {
    /// Parses `DEV[,afxdp|afpacket|afpacket-tc|auto]` (`--iface`'s right-hand side).
    pub fn parse(s: &str) -> Result<Device, DeviceSpecError> {
        let (dev, via) = s.split_once(',').unwrap_or((s, ""));
        let dev = dev.trim();
        if dev.is_empty() || dev.contains(['/', ' ']) {
            return Err(DeviceSpecError::NoDevice(s.to_string()));
        }
        Ok(Device {
            dev: dev.to_string(),
            via: via.trim().parse()?,
        })
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.via {
            Attach::Auto => write!(f, "{}", self.dev),
            v => write!(f, "{},{v}", self.dev),
        }
    }
}

impl ChainError {
    fn new(at: impl Into<String>, kind: ChainErrorKind) -> ChainError {
        ChainError {
            at: at.into(),
            kind: Box::new(kind),
        }
    }
}

/// A run was given no input: says which `--input` it could take (the chain's entries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoInputError {
    /// The chain's declared entries (empty: any interface with a `FromDevice`).
    pub entries: Vec<Endpoint>,
}

impl fmt::Display for NoInputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no input: give --input NF.IFACE=FILE (entries: ")?;
        if self.entries.is_empty() {
            f.write_str("any interface with a FromDevice")?;
        }
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{e}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for NoInputError {}

/// `NF.IFACE`: an interface of an NF, as named at chain level.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// NF name.
    pub nf: String,
    /// Interface name (the `X` of `FromDevice(X)` / `ToDevice(X)`).
    pub iface: String,
}

impl Endpoint {
    /// Parses `NF.IFACE` (the interface may itself contain dots: the first dot splits).
    pub fn parse(s: &str) -> Option<Endpoint> {
        let (nf, iface) = s.split_once('.')?;
        if nf.is_empty() || iface.is_empty() {
            return None;
        }
        Some(Endpoint {
            nf: nf.to_string(),
            iface: iface.to_string(),
        })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.nf, self.iface)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNf {
    #[serde(default)]
    click: Option<String>,
    #[serde(default)]
    rust: Option<Spanned<String>>,
    #[serde(default)]
    args: Option<Spanned<String>>,
    #[serde(default)]
    inputs: Option<Spanned<i64>>,
    #[serde(default)]
    outputs: Option<Spanned<i64>>,
    #[serde(default)]
    define: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    between: Spanned<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    to: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    at: Spanned<String>,
    dev: Spanned<String>,
    #[serde(default)]
    via: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChain {
    #[serde(default)]
    nf: indexmap::IndexMap<String, Spanned<RawNf>>,
    #[serde(default)]
    link: Vec<RawLink>,
    #[serde(default)]
    entry: Vec<RawEntry>,
    #[serde(default)]
    device: Vec<RawDevice>,
    #[serde(default)]
    nsh: bool,
}

/// An NF written in Rust with operators (`rust = "CLASS"` in a chain file): an element class
/// of the registry, in a generated Click configuration (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RustNf {
    /// The element class.
    pub class: String,
    /// Its configuration string.
    pub args: String,
    /// Its inputs (interfaces `eth0`..).
    pub inputs: usize,
    /// Its outputs.
    pub outputs: usize,
    /// Where `rust = ...` is written (`file:line:col`).
    pub at: String,
}

impl RustNf {
    /// The interface output `j` leaves by (see the module documentation).
    pub fn output_iface(&self, j: usize) -> usize {
        let n = self.inputs.max(2);
        if j < n {
            (j + 1) % n
        } else {
            j
        }
    }

    /// The generated Click configuration.
    pub fn click(&self) -> String {
        let mut s = format!(
            "// generated for `rust = \"{}\"` at {}\nnf :: {}({});\n",
            self.class, self.at, self.class, self.args
        );
        for i in 0..self.inputs {
            s.push_str(&format!("FromDevice(eth{i}) -> [{i}]nf;\n"));
        }
        for j in 0..self.outputs {
            s.push_str(&format!(
                "nf[{j}] -> ToDevice(eth{});\n",
                self.output_iface(j)
            ));
        }
        s
    }
}

/// One NF of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NfSpec {
    /// NF name.
    pub name: String,
    /// Path of its Click configuration (resolved against the chain file's directory); for
    /// an operator NF, the chain file (relative paths in its arguments resolve against the
    /// chain file's directory).
    pub click: PathBuf,
    /// For an NF written with operators (`rust = ...`): its class and ports; its Click
    /// configuration is generated, not read from `click`.
    pub rust: Option<RustNf>,
    /// `define` overrides for this NF.
    pub defines: Vec<(String, String)>,
    /// Whether its elements' qualified names (which seed their pseudo-random choices) are
    /// `NF/NAME` (NFs of a chain file) or the names as written (a single configuration run
    /// on its own, such as one `fusebox synth --click` wrote with the original names).
    pub scoped: bool,
}

/// A parsed (not yet validated against the NFs' interfaces) chain file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainFile {
    /// Where the chain was read from.
    pub path: PathBuf,
    /// NFs in the order the file declares them.
    pub nfs: Vec<NfSpec>,
    /// Links, each between two interfaces, with the position of the link in the file.
    pub links: Vec<(Endpoint, Endpoint, String)>,
    /// Entry interfaces, with their positions.
    pub entries: Vec<(Endpoint, String)>,
    /// Interfaces bound to Linux devices (`[[device]]`), with their positions.
    pub devices: Vec<(Endpoint, Device, String)>,
    /// NSH-aware (`nsh = true`, or `fusebox run --nsh`): frames arriving with an NSH lose
    /// their transport and NSH at the entry and get them back (SI − 1) at the exit.
    pub nsh: bool,
}

fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

impl NfSpec {
    /// Parses the NF's Click configuration (the file, or the one generated for an operator
    /// NF) with these `define` overrides.
    pub fn config(&self, defines: &[(String, String)]) -> Result<click::Config, click::Error> {
        match &self.rust {
            Some(r) => click::parse_str(
                &r.click(),
                &format!("{} (generated for nf.{})", r.at, self.name),
                defines,
            ),
            None => click::parse_file(&self.click, defines),
        }
    }

    /// Where the NF's configuration comes from: its Click file, or `rust CLASS(ARGS)`.
    pub fn source(&self) -> String {
        match &self.rust {
            Some(r) => format!("rust {}({})", r.class, r.args),
            None => self.click.display().to_string(),
        }
    }
}

impl ChainFile {
    /// The error for a run given no input: which `--input` it could take.
    pub fn no_input_error(&self) -> NoInputError {
        NoInputError {
            entries: self.entries.iter().map(|(e, _)| e.clone()).collect(),
        }
    }

    /// Reads and parses a chain file.
    pub fn load(path: &Path) -> Result<ChainFile, ChainError> {
        let src = std::fs::read_to_string(path)
            .map_err(|e| ChainError::new(path.display().to_string(), ChainErrorKind::Read(e)))?;
        ChainFile::parse(&src, path)
    }

    /// A chain made of a single Click configuration (the NF is named after the file stem, it
    /// has no links, and every interface is an entry and an exit).
    pub fn single(click: &Path) -> ChainFile {
        let name = click
            .file_stem()
            .and_then(|s| s.to_str())
            .map(|s| s.replace('.', "_"))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "nf".to_string());
        ChainFile {
            path: click.to_path_buf(),
            nfs: vec![NfSpec {
                name,
                click: click.to_path_buf(),
                rust: None,
                defines: Vec::new(),
                scoped: false,
            }],
            links: Vec::new(),
            entries: Vec::new(),
            devices: Vec::new(),
            nsh: false,
        }
    }

    /// Parses chain-file text; `path` names the file in errors and anchors relative paths.
    pub fn parse(src: &str, path: &Path) -> Result<ChainFile, ChainError> {
        let file = path.display().to_string();
        let at = |span: std::ops::Range<usize>| {
            let (l, c) = line_col(src, span.start);
            format!("{file}:{l}:{c}")
        };
        let raw: RawChain = toml::from_str(src).map_err(|e| {
            let pos = e.span().map(&at).unwrap_or_else(|| file.clone());
            ChainError::new(pos, ChainErrorKind::Toml(e))
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut nfs = Vec::new();
        for (name, spec) in raw.nf {
            if name.is_empty() || name.contains('.') || name.contains('/') {
                return Err(ChainError::new(
                    at(spec.span()),
                    ChainErrorKind::NfName(name),
                ));
            }
            let span = spec.span();
            let spec = spec.into_inner();
            let (click, rust) = match (&spec.click, &spec.rust) {
                (Some(c), None) => {
                    let only = [
                        ("args", spec.args.as_ref().map(Spanned::span)),
                        ("inputs", spec.inputs.as_ref().map(Spanned::span)),
                        ("outputs", spec.outputs.as_ref().map(Spanned::span)),
                    ];
                    if let Some((key, Some(sp))) = only.into_iter().find(|(_, sp)| sp.is_some()) {
                        return Err(ChainError::new(at(sp), ChainErrorKind::RustOnly(key)));
                    }
                    (dir.join(c), None)
                }
                (None, Some(class)) => {
                    let ports = |v: &Option<Spanned<i64>>, key, default: usize| match v {
                        None => Ok(default),
                        Some(n) => usize::try_from(*n.get_ref())
                            .ok()
                            .filter(|k| (1..=MAX_PORTS).contains(k))
                            .ok_or_else(|| {
                                ChainError::new(
                                    at(n.span()),
                                    ChainErrorKind::Ports {
                                        key,
                                        n: *n.get_ref(),
                                    },
                                )
                            }),
                    };
                    let inputs = ports(&spec.inputs, "inputs", 1)?;
                    let outputs = ports(&spec.outputs, "outputs", inputs)?;
                    if elements::registry::class(class.get_ref()).is_none() {
                        return Err(ChainError::new(
                            at(class.span()),
                            ChainErrorKind::UnknownClass(class.get_ref().clone()),
                        ));
                    }
                    let rust = RustNf {
                        class: class.get_ref().clone(),
                        args: spec
                            .args
                            .as_ref()
                            .map(|a| a.get_ref().clone())
                            .unwrap_or_default(),
                        inputs,
                        outputs,
                        at: at(class.span()),
                    };
                    (path.to_path_buf(), Some(rust))
                }
                _ => return Err(ChainError::new(at(span), ChainErrorKind::NfSource(name))),
            };
            nfs.push(NfSpec {
                name,
                click,
                rust,
                defines: spec.define.into_iter().collect(),
                scoped: true,
            });
        }
        let endpoint = |s: &Spanned<String>| {
            Endpoint::parse(s.get_ref()).ok_or_else(|| {
                ChainError::new(at(s.span()), ChainErrorKind::Endpoint(s.get_ref().clone()))
            })
        };
        let mut links = Vec::new();
        for l in &raw.link {
            let ends = l.between.get_ref();
            if ends.len() != 2 {
                return Err(ChainError::new(
                    at(l.between.span()),
                    ChainErrorKind::LinkEnds(ends.len()),
                ));
            }
            links.push((
                endpoint(&ends[0])?,
                endpoint(&ends[1])?,
                at(l.between.span()),
            ));
        }
        let mut entries = Vec::new();
        for e in &raw.entry {
            entries.push((endpoint(&e.to)?, at(e.to.span())));
        }
        let mut devices = Vec::new();
        for d in &raw.device {
            let via = match &d.via {
                Some(v) => v.get_ref().parse().map_err(|e: UnknownAttach| {
                    ChainError::new(at(v.span()), ChainErrorKind::Device(e.into()))
                })?,
                None => Attach::Auto,
            };
            let dev = Device::parse(d.dev.get_ref())
                .map_err(|e| ChainError::new(at(d.dev.span()), ChainErrorKind::Device(e)))?;
            devices.push((endpoint(&d.at)?, Device { via, ..dev }, at(d.at.span())));
        }
        let chain = ChainFile {
            path: path.to_path_buf(),
            nfs,
            links,
            entries,
            devices,
            nsh: raw.nsh,
        };
        chain.check_wiring()?;
        Ok(chain)
    }

    /// Checks what can be checked without the NFs' configurations: known NFs, no NF linked to
    /// itself, no interface in two links.
    fn check_wiring(&self) -> Result<(), ChainError> {
        let known = |e: &Endpoint, pos: &str| {
            if self.nfs.iter().any(|n| n.name == e.nf) {
                Ok(())
            } else {
                Err(ChainError::new(
                    pos,
                    ChainErrorKind::UnknownNf {
                        endpoint: e.clone(),
                        declared: self.nfs.iter().map(|n| n.name.clone()).collect(),
                    },
                ))
            }
        };
        let mut used: BTreeMap<&Endpoint, &str> = BTreeMap::new();
        for (a, b, pos) in &self.links {
            known(a, pos)?;
            known(b, pos)?;
            if a.nf == b.nf {
                return Err(ChainError::new(
                    pos,
                    ChainErrorKind::SelfLink {
                        a: a.clone(),
                        b: b.clone(),
                    },
                ));
            }
            for e in [a, b] {
                if let Some(prev) = used.insert(e, pos) {
                    return Err(ChainError::new(
                        pos,
                        ChainErrorKind::LinkedTwice {
                            endpoint: e.clone(),
                            previous: prev.to_string(),
                        },
                    ));
                }
            }
        }
        for (e, pos) in &self.entries {
            known(e, pos)?;
            if let Some(prev) = used.get(e) {
                return Err(ChainError::new(
                    pos.as_str(),
                    ChainErrorKind::LinkedEntry {
                        endpoint: e.clone(),
                        link: prev.to_string(),
                    },
                ));
            }
        }
        let mut bound: BTreeMap<&Endpoint, &str> = BTreeMap::new();
        for (e, _, pos) in &self.devices {
            known(e, pos)?;
            if let Some(link) = used.get(e) {
                return Err(ChainError::new(
                    pos.as_str(),
                    ChainErrorKind::LinkedDevice {
                        endpoint: e.clone(),
                        link: link.to_string(),
                    },
                ));
            }
            if let Some(prev) = bound.insert(e, pos) {
                return Err(ChainError::new(
                    pos.as_str(),
                    ChainErrorKind::DeviceTwice {
                        endpoint: e.clone(),
                        previous: prev.to_string(),
                    },
                ));
            }
        }
        Ok(())
    }

    /// The other end of the link `e` is in, if any.
    pub fn peer(&self, e: &Endpoint) -> Option<&Endpoint> {
        self.links.iter().find_map(|(a, b, _)| {
            if a == e {
                Some(b)
            } else if b == e {
                Some(a)
            } else {
                None
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ChainFile, ChainError> {
        ChainFile::parse(s, Path::new("dir/chain.toml"))
    }

    #[test]
    fn minimal_chain() {
        let c = parse(
            "[nf.napt]\nclick = \"napt.click\"\n[nf.fw]\nclick = \"fw.click\"\n[[link]]\nbetween = [\"napt.eth1\", \"fw.eth0\"]\n[[entry]]\nto = \"napt.eth0\"\n",
        )
        .unwrap();
        assert_eq!(c.nfs.len(), 2);
        assert_eq!(c.nfs[0].click, Path::new("dir/napt.click"));
        assert_eq!(c.nfs[1].name, "fw");
        let e = Endpoint::parse("napt.eth1").unwrap();
        assert_eq!(c.peer(&e), Some(&Endpoint::parse("fw.eth0").unwrap()));
    }

    #[test]
    fn devices_bind_unlinked_interfaces() {
        let head = "[nf.a]\nclick = \"a\"\n[nf.b]\nclick = \"b\"\n[[link]]\nbetween = [\"a.eth1\", \"b.eth0\"]\n";
        let c = parse(&format!(
            "{head}[[device]]\nat = \"a.eth0\"\ndev = \"veth0\"\n[[device]]\nat = \"b.eth1\"\ndev = \"veth1\"\nvia = \"afpacket\"\n"
        ))
        .unwrap();
        assert_eq!(c.devices.len(), 2);
        assert_eq!(c.devices[0].0, Endpoint::parse("a.eth0").unwrap());
        assert_eq!(
            c.devices[0].1,
            Device {
                dev: "veth0".into(),
                via: Attach::Auto
            }
        );
        assert_eq!(c.devices[1].1.via, Attach::AfPacket);
        assert_eq!(c.devices[1].2, "dir/chain.toml:11:6");
        // A linked interface, an interface bound twice, an unknown way to attach, no device.
        let linked =
            parse(&format!("{head}[[device]]\nat = \"a.eth1\"\ndev = \"v\"\n")).unwrap_err();
        assert!(
            matches!(*linked.kind, ChainErrorKind::LinkedDevice { .. }),
            "{linked}"
        );
        assert!(
            linked
                .to_string()
                .starts_with("dir/chain.toml:8:6: `a.eth1` is linked"),
            "{linked}"
        );
        let twice = parse(&format!(
            "{head}[[device]]\nat = \"a.eth0\"\ndev = \"v\"\n[[device]]\nat = \"a.eth0\"\ndev = \"w\"\n"
        ))
        .unwrap_err();
        assert!(
            twice
                .to_string()
                .contains("already bound to a device at dir/chain.toml:8:6"),
            "{twice}"
        );
        let via = parse(&format!(
            "{head}[[device]]\nat = \"a.eth0\"\ndev = \"v\"\nvia = \"dpdk\"\n"
        ))
        .unwrap_err();
        assert!(
            via.to_string()
                .starts_with("dir/chain.toml:10:7: unknown way to attach `dpdk`"),
            "{via}"
        );
        let nodev = parse(&format!("{head}[[device]]\nat = \"a.eth0\"\ndev = \"\"\n")).unwrap_err();
        assert!(
            nodev.to_string().contains("expected a device name"),
            "{nodev}"
        );
        let unknown = parse(&format!(
            "{head}[[device]]\nat = \"zz.eth0\"\ndev = \"v\"\n"
        ))
        .unwrap_err();
        assert!(unknown.to_string().contains("unknown NF `zz`"), "{unknown}");
    }

    #[test]
    fn rust_nfs_get_a_generated_configuration() {
        let c = parse(
            "[nf.t]\nrust = \"DecIPTTL\"\nargs = \"MULTICAST false\"\n[nf.n]\nrust = \"IPRewriter\"\nargs = \"pattern 1.2.3.4 1024-2047 - - 0 1, drop\"\ninputs = 2\n[[link]]\nbetween = [\"t.eth1\", \"n.eth0\"]\n",
        )
        .unwrap();
        let t = c.nfs[0].rust.as_ref().unwrap();
        assert_eq!((t.inputs, t.outputs), (1, 1));
        assert_eq!(t.at, "dir/chain.toml:2:8");
        assert_eq!(c.nfs[0].source(), "rust DecIPTTL(MULTICAST false)");
        assert_eq!(c.nfs[0].click, Path::new("dir/chain.toml"));
        let lines: Vec<String> = t.click().lines().skip(1).map(String::from).collect();
        assert_eq!(
            lines,
            [
                "nf :: DecIPTTL(MULTICAST false);",
                "FromDevice(eth0) -> [0]nf;",
                "nf[0] -> ToDevice(eth1);"
            ]
        );
        let n = c.nfs[1].rust.as_ref().unwrap();
        assert_eq!((n.inputs, n.outputs), (2, 2));
        let click = n.click();
        for l in [
            "FromDevice(eth0) -> [0]nf;",
            "FromDevice(eth1) -> [1]nf;",
            "nf[0] -> ToDevice(eth1);",
            "nf[1] -> ToDevice(eth0);",
        ] {
            assert!(click.contains(l), "{click}");
        }
        let config = c.nfs[1].config(&[]).unwrap();
        assert_eq!(config.elements.len(), 5);
        // One input, three outputs: 0 and 1 across and back, 2 by its own interface.
        let three = RustNf {
            outputs: 3,
            ..t.clone()
        };
        assert_eq!(
            (0..3).map(|j| three.output_iface(j)).collect::<Vec<_>>(),
            [1, 0, 2]
        );
    }

    #[test]
    fn rust_nf_errors_name_the_place() {
        let both = parse("[nf.a]\nclick = \"a.click\"\nrust = \"DecIPTTL\"\n").unwrap_err();
        assert!(matches!(*both.kind, ChainErrorKind::NfSource(_)), "{both}");
        assert!(
            both.to_string()
                .starts_with("dir/chain.toml:1:1: NF `a` needs exactly one of"),
            "{both}"
        );
        let neither = parse("[nf.a]\ndefine = { X = \"1\" }\n").unwrap_err();
        assert!(
            matches!(*neither.kind, ChainErrorKind::NfSource(_)),
            "{neither}"
        );
        let unknown = parse("[nf.a]\nrust = \"NoSuchNF\"\n").unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "dir/chain.toml:2:8: unknown element class `NoSuchNF` (`fusebox elements` lists the classes; operator NFs must be registered first)"
        );
        let args = parse("[nf.a]\nclick = \"a.click\"\nargs = \"x\"\n").unwrap_err();
        assert!(
            args.to_string()
                .starts_with("dir/chain.toml:3:8: `args` is for NFs written with operators"),
            "{args}"
        );
        let outs = parse("[nf.a]\nclick = \"a.click\"\noutputs = 2\n").unwrap_err();
        assert!(
            matches!(*outs.kind, ChainErrorKind::RustOnly("outputs")),
            "{outs}"
        );
        let zero = parse("[nf.a]\nrust = \"DecIPTTL\"\ninputs = 0\n").unwrap_err();
        assert_eq!(
            zero.to_string(),
            "dir/chain.toml:3:10: `inputs = 0`: expected 1 to 64"
        );
        let many = parse("[nf.a]\nrust = \"DecIPTTL\"\noutputs = 65\n").unwrap_err();
        assert!(
            matches!(
                *many.kind,
                ChainErrorKind::Ports {
                    key: "outputs",
                    n: 65
                }
            ),
            "{many}"
        );
        let typo = parse("[nf.a]\nrust = \"DecIPTTL\"\narg = \"x\"\n").unwrap_err();
        assert!(matches!(*typo.kind, ChainErrorKind::Toml(_)), "{typo}");
        let not_string = parse("[nf.a]\nrust = 3\n").unwrap_err();
        assert!(
            not_string.to_string().starts_with("dir/chain.toml:2:8:"),
            "{not_string}"
        );
    }

    #[test]
    fn device_specs_parse() {
        assert_eq!(
            Device::parse("veth0,afxdp").unwrap(),
            Device {
                dev: "veth0".into(),
                via: Attach::AfXdp
            }
        );
        assert_eq!(Device::parse("eth1").unwrap().via, Attach::Auto);
        let tc = Device::parse("veth2,afpacket-tc").unwrap();
        assert_eq!(tc.via, Attach::AfPacketTc);
        assert_eq!(tc.to_string(), "veth2,afpacket-tc");
        assert_eq!(
            Device::parse("eth1,afpacket").unwrap().to_string(),
            "eth1,afpacket"
        );
        assert!(matches!(
            Device::parse(",afxdp"),
            Err(DeviceSpecError::NoDevice(_))
        ));
        assert!(matches!(
            Device::parse("eth0,foo"),
            Err(DeviceSpecError::Attach(_))
        ));
    }

    #[test]
    fn wiring_errors_name_the_place() {
        let self_link =
            parse("[nf.a]\nclick = \"a.click\"\n[[link]]\nbetween = [\"a.eth0\", \"a.eth1\"]\n")
                .unwrap_err();
        assert!(matches!(*self_link.kind, ChainErrorKind::SelfLink { .. }));
        assert!(
            self_link
                .to_string()
                .starts_with("dir/chain.toml:4:11: NF `a` is linked to itself"),
            "{self_link}"
        );
        let twice = parse(
            "[nf.a]\nclick = \"a\"\n[nf.b]\nclick = \"b\"\n[nf.c]\nclick = \"c\"\n[[link]]\nbetween = [\"a.x\", \"b.y\"]\n[[link]]\nbetween = [\"c.z\", \"b.y\"]\n",
        )
        .unwrap_err();
        assert!(
            matches!(&*twice.kind, ChainErrorKind::LinkedTwice { previous, .. } if previous == "dir/chain.toml:8:11"),
            "{twice}"
        );
        assert!(
            twice
                .to_string()
                .contains("interface `b.y` is already in the link at dir/chain.toml:8:11"),
            "{twice}"
        );
        let unknown = parse("[nf.a]\nclick = \"a\"\n[[entry]]\nto = \"zz.eth0\"\n").unwrap_err();
        assert_eq!(unknown.at, "dir/chain.toml:4:6");
        assert!(
            unknown.to_string().contains("4:6: unknown NF `zz`"),
            "{unknown}"
        );
        let bad = parse("[nf.a]\nclick = 3\n").unwrap_err();
        assert!(matches!(*bad.kind, ChainErrorKind::Toml(_)), "{bad:?}");
        assert!(bad.to_string().starts_with("dir/chain.toml:2:9:"), "{bad}");
        let bad_ep = parse("[nf.a]\nclick = \"a\"\n[[entry]]\nto = \"noiface\"\n").unwrap_err();
        assert!(
            matches!(&*bad_ep.kind, ChainErrorKind::Endpoint(s) if s == "noiface"),
            "{bad_ep:?}"
        );
        let three = parse("[nf.a]\nclick = \"a\"\n[nf.b]\nclick = \"b\"\n[[link]]\nbetween = [\"a.x\", \"b.y\", \"b.z\"]\n").unwrap_err();
        assert!(
            matches!(*three.kind, ChainErrorKind::LinkEnds(3)),
            "{three:?}"
        );
        assert!(three.to_string().contains("exactly two"), "{three}");
    }
}
