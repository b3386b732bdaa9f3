//! The one error type of the command-line tool.

use std::path::{Path, PathBuf};

/// Why a `fusebox` command failed. `main` prints it as `fusebox: error: MESSAGE` and exits
/// with status 1 (a command's other statuses, such as `verify`'s 4, are results, not errors).
///
/// Decision: a hand-written enum rather than `anyhow`. Every library error keeps its type
/// (wrapped `transparent`, so the message is the library's own, naming the file, line and
/// what was expected) and stays matchable in the command code and its tests; the tool's own
/// checks of its arguments are [`CliError::Invalid`]; a wrapped error that needs the
/// argument or input it came from says so with [`CliError::Context`]. `anyhow` would give the
/// same messages but erase the types, and add a dependency for a dozen call sites.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A chain file that does not load.
    #[error(transparent)]
    Chain(#[from] chain::ChainError),
    /// A chain that does not build or wire.
    #[error(transparent)]
    Setup(#[from] chain::SetupError),
    /// An exit's capture that could not be finished.
    #[error(transparent)]
    Finish(#[from] chain::FinishError),
    /// A run given no input.
    #[error(transparent)]
    NoInput(#[from] chain::NoInputError),
    /// A capture that cannot be read or written.
    #[error(transparent)]
    Pcap(#[from] ports::pcap::PcapError),
    /// A trace generator setting that is not valid.
    #[error(transparent)]
    Gen(#[from] ports::gen::GenError),
    /// A verification run that could not run.
    #[error(transparent)]
    Run(#[from] synth::verify::RunError),
    /// A run on several workers that could not run (a worker failed, a NAT range too
    /// small to split).
    #[error(transparent)]
    Workers(#[from] dataplane::Error),
    /// A mode name that is not a mode.
    #[error(transparent)]
    Mode(#[from] synth::UnknownMode),
    /// A program with no OpenFlow form.
    #[error(transparent)]
    Openflow(#[from] synth::openflow::OpenflowError),
    /// A program with no Click form.
    #[error(transparent)]
    Export(#[from] synth::export::ExportError),
    /// A random chain or trace that could not be written.
    #[error(transparent)]
    Testgen(#[from] synth::testgen::TestgenError),
    /// A ClassBench file or classifier operation that failed.
    #[error(transparent)]
    Classify(#[from] classify::Error),
    /// A device port that cannot be opened or stopped working.
    #[error(transparent)]
    Port(#[from] ports::port::PortError),
    /// A pcap-filter expression that does not parse.
    #[error(transparent)]
    Filter(#[from] elements::pcapfilter::ExprError),
    /// The NSH stages could not be loaded, filled or run.
    #[error(transparent)]
    Stages(#[from] stages::Error),
    /// A chains-across-hosts chain file that does not validate (every problem, each with
    /// file, line and column).
    #[error(transparent)]
    SfcFile(#[from] sfc::file::FileErrors),
    /// Certificates that could not be made or written.
    #[error(transparent)]
    Pki(#[from] sfc::pki::PkiError),
    /// The control plane's etcd failed or refused us.
    #[error(transparent)]
    Store(#[from] sfc::store::StoreError),
    /// The controller failed (etcd, or the chain file).
    #[error(transparent)]
    Controller(#[from] sfc::controller::ControllerError),
    /// An agent's configuration that does not load.
    #[error(transparent)]
    Agent(#[from] sfc::agent::AgentError),
    /// A file or directory the command could not read, create or write.
    #[error("{}: {action}{source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was tried, with its separator (`cannot create: `), or empty.
        action: &'static str,
        /// What the system said.
        source: std::io::Error,
    },
    /// An error of an argument or input, prefixed with it (`--filter `…``, `NF/element`).
    #[error("{context}: {source}")]
    Context {
        /// The argument or input the error is about.
        context: String,
        /// The error.
        source: Box<CliError>,
    },
    /// A command-line argument or input the tool itself rejects; the message names the flag
    /// or file and what was expected.
    #[error("{0}")]
    Invalid(String),
}

impl CliError {
    /// An I/O error on `path` (`action`: `cannot create: `, `cannot write: `, … or empty).
    pub fn io(path: impl AsRef<Path>, action: &'static str, source: std::io::Error) -> CliError {
        CliError::Io {
            path: path.as_ref().to_path_buf(),
            action,
            source,
        }
    }

    /// `source` prefixed with the argument or input it is about.
    pub fn context(context: impl Into<String>, source: impl Into<CliError>) -> CliError {
        CliError::Context {
            context: context.into(),
            source: Box::new(source.into()),
        }
    }
}
