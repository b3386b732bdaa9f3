//! Errors of setting up and finishing an [`Executor`](super::Executor) (never on the
//! per-packet path: a packet that cannot go on is a drop with a reason, not an error).

use crate::file::Endpoint;
use crate::nf::BuildError;
use ports::pcap::PcapError;

/// Why [`Executor::new`](super::Executor::new) could not build and wire a chain. The
/// messages name the chain file position, the NF and the interface at fault.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// An NF's Click configuration does not parse.
    #[error(transparent)]
    Click(#[from] click::Error),
    /// An NF's configuration parses but its elements cannot be built or connected.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A link names an interface its NF does not have.
    #[error(
        "{pos}: unknown interface `{endpoint}`: NF `{}` has interfaces [{}] (its FromDevice/ToDevice names)",
        .endpoint.nf,
        .interfaces.join(", ")
    )]
    UnknownLinkInterface {
        /// Position of the link in the chain file (`file:line:col`).
        pos: String,
        /// The interface named.
        endpoint: Endpoint,
        /// The interfaces the NF has.
        interfaces: Vec<String>,
    },
    /// An entry names an interface its NF does not have.
    #[error("{pos}: unknown interface `{endpoint}` in entry")]
    UnknownEntryInterface {
        /// Position of the entry in the chain file.
        pos: String,
        /// The interface named.
        endpoint: Endpoint,
    },
    /// A link's peer NF has no `FromDevice` for the linked interface.
    #[error(
        "link `{here}` ↔ `{peer}`: NF `{}` has no FromDevice({}) to receive packets",
        .peer.nf,
        .peer.iface
    )]
    NoReceiver {
        /// The sending side (a `ToDevice`).
        here: Endpoint,
        /// The side without a `FromDevice`.
        peer: Endpoint,
    },
    /// A `--reflect` exit has no `FromDevice` to bring the replies back in.
    #[error("--reflect {0}: NF `{nf}` has no FromDevice({iface}) for the replies", nf = .0.nf, iface = .0.iface)]
    ReflectNoEntry(Endpoint),
    /// A `--reflect` endpoint is not an exit of the chain.
    #[error(
        "--reflect {0}: not an exit of the chain (exits are unlinked interfaces with a ToDevice)"
    )]
    ReflectNotExit(Endpoint),
    /// An exit's sink could not be made (its pcap file cannot be created, its device
    /// cannot be opened).
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// Why [`Executor::finish`](super::Executor::finish) could not flush an exit's sink.
#[derive(Debug, thiserror::Error)]
#[error("{exit}: {source}")]
pub struct FinishError {
    /// The exit's name (`NF.IFACE` or the file of a `ToDump`).
    pub exit: String,
    /// What went wrong writing its capture or sending to its port.
    pub source: SinkError,
}

/// What went wrong with an exit's sink.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Writing a capture file.
    #[error(transparent)]
    Pcap(#[from] PcapError),
    /// Sending to a port (a device that went down or disappeared).
    #[error(transparent)]
    Port(#[from] ports::port::PortError),
}
