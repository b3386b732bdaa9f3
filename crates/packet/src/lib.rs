//! Packets as FuseBox moves them: an owned buffer with headroom, Click's annotations as
//! per-packet metadata, batches, 5-tuple flow keys and a symmetric Toeplitz RSS hash.
//!
//! A [`Packet`] is moved between elements and NFs, never shared: once an element hands a
//! packet on, the compiler stops it from touching it again (NetBricks' zero-copy isolation).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod batch;
mod buffer;
mod flow;
mod meta;
mod rss;

pub use batch::{Batch, DEFAULT_BATCH_SIZE};
pub use buffer::{HeaderError, Packet, PacketData, DEFAULT_HEADROOM};
pub use flow::{FlowKey, Ipv4Flow, Ipv4FlowKey, Ports};
pub use meta::{Meta, PacketType, Precision, Timestamp, NO_OFFSET};
pub use rss::{symmetric_rss, Toeplitz, SYMMETRIC_RSS_KEY};
