//! Live ports for FuseBox: Linux devices behind [`ports::port`]'s [`RxPort`] and [`TxPort`].
//!
//! This crate owns the rings the kernel shares with FuseBox, so it is the one crate of the
//! workspace with `unsafe` code: every block states the invariant that makes it sound, and
//! the rest of the workspace keeps `#![forbid(unsafe_code)]`.
//!
//! * [`afpacket`]: AF_PACKET sockets, a TPACKET_V3 memory-mapped receive ring and batched
//!   `sendmmsg` transmission; works on any Linux interface, needs `CAP_NET_RAW`.
//! * [`afxdp`]: AF_XDP sockets, a UMEM with fill/completion/receive/transmit rings and an
//!   XDP program redirecting the device's queue into the socket; zero-copy where the driver
//!   supports it, copy mode otherwise. Needs `CAP_NET_ADMIN`, `CAP_BPF` (or
//!   `CAP_SYS_ADMIN`) and `CAP_NET_RAW`.
//! * [`open`] picks and opens a device's ports, falling back when the device lacks what was
//!   asked for, and says so in [`Device::note`].
//! * [`netns`]: run code inside a named network namespace (tests, tools).
//!
//! System calls go through the `libc` crate only. The XDP program is six hand-assembled
//! instructions loaded with the `bpf(2)` system call (module `bpf`), not C compiled by
//! clang and loaded by libbpf: no C toolchain, libbpf or object file is needed to build or
//! run FuseBox, and the program is attached through a BPF link, so it is detached whenever
//! its descriptor closes (the port dropped, an error path, the process killed).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod afpacket;
pub mod afxdp;
mod bpf;
pub mod netns;
mod sys;

pub use ports::port::{Capability, PortCounters, PortError, Recv, RxPort, TxPort};

/// Which kind of socket carries a device's frames: the one [`ports::port::Attach`]
/// (`Auto`: AF_XDP where the device and privileges allow it, otherwise AF_PACKET).
pub use ports::port::Attach as Kind;

/// A device opened for receiving and sending.
pub struct Device {
    /// Frames received on the device.
    pub rx: Box<dyn RxPort>,
    /// Frames to send on the device.
    pub tx: Box<dyn TxPort>,
    /// What was actually used ([`Kind::AfPacket`], [`Kind::AfPacketTc`] or [`Kind::AfXdp`],
    /// never `Auto`).
    pub kind: Kind,
    /// Why the device runs in a lesser mode than asked for, e.g. "veth1: no zero-copy,
    /// AF_XDP in copy mode" or "veth1: XDP not available (...), using AF_PACKET".
    pub note: Option<String>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("rx", &self.rx.name())
            .field("tx", &self.tx.name())
            .field("kind", &self.kind)
            .field("note", &self.note)
            .finish()
    }
}

/// Opens `dev` (in the calling thread's network namespace) for receiving and sending.
///
/// A missing device is an error whatever the kind. AF_XDP falls back to AF_PACKET (saying
/// why in [`Device::note`]) when the device or the kernel cannot run it.
pub fn open(dev: &str, kind: Kind) -> Result<Device, PortError> {
    match kind {
        Kind::AfPacket => open_afpacket(dev, false, None),
        Kind::AfPacketTc => open_afpacket(dev, true, None),
        Kind::AfXdp | Kind::Auto => match open_afxdp(dev) {
            Ok(d) => Ok(d),
            Err(
                e @ (PortError::NoDevice { .. }
                | PortError::Gone { .. }
                | PortError::Down { .. }
                | PortError::NotUp { .. }),
            ) => Err(e),
            Err(e) => {
                let why = match &e {
                    PortError::NoXdp { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                open_afpacket(
                    dev,
                    false,
                    Some(format!("{dev}: XDP not available ({why}), using AF_PACKET")),
                )
            }
        },
    }
}

/// Every receive queue of the device into one receive port; sending on queue 0.
fn open_afxdp(dev: &str) -> Result<Device, PortError> {
    let queues = afxdp::rx_queues(dev)?;
    let (ports, mode) = afxdp::open_queues(dev, &afxdp::Config::default(), queues)?;
    let (mut rxs, txs): (Vec<_>, Vec<_>) = ports.into_iter().unzip();
    let no_queue = || PortError::NoXdp {
        dev: dev.to_string(),
        reason: "no receive queue".into(),
    };
    let tx = txs.into_iter().next().ok_or_else(no_queue)?;
    let rx: Box<dyn RxPort> = if rxs.len() == 1 {
        Box::new(rxs.pop().ok_or_else(no_queue)?)
    } else {
        Box::new(afxdp::AfXdpQueuesRx::new(rxs).ok_or_else(no_queue)?)
    };
    Ok(Device {
        rx,
        tx: Box::new(tx),
        kind: Kind::AfXdp,
        note: mode.note,
    })
}

/// AF_PACKET on `dev`; `through_tc`: sending through the queueing discipline (TC egress).
fn open_afpacket(dev: &str, through_tc: bool, note: Option<String>) -> Result<Device, PortError> {
    let rx = afpacket::AfPacketRx::open(dev)?;
    let tx = afpacket::AfPacketTx::open_with(dev, !through_tc)?;
    Ok(Device {
        rx: Box::new(rx),
        tx: Box::new(tx),
        kind: if through_tc {
            Kind::AfPacketTc
        } else {
            Kind::AfPacket
        },
        note,
    })
}
