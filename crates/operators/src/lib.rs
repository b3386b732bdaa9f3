//! NFs written in Rust with operators (after NetBricks, OSDI 2016): a packet's header stack
//! is part of its type, operators (`parse`, `deparse`, `transform`, `map`, `filter`,
//! `group_by`/`merge`, `window`/`packetize`, `shuffle`) compose into a pipeline that runs each
//! packet to completion, and a pipeline built into an [`nf::OperatorNf`] is a FuseBox element
//! like any other.
//!
//! Isolation is by ownership: sending a packet moves it, so the sender cannot read or write
//! it afterwards, and a header view borrows the packet, so it cannot outlive a send.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod event;
pub mod header;
pub mod nf;
pub mod pipe;
pub mod pkt;
pub mod runtime;
pub mod state;
pub mod stream;

pub use header::{Ethernet, Header, Ipv4, Over, Raw, Stack, Tcp, Udp};
pub use nf::{Input, OperatorNf};
pub use pipe::{pipe, Cx, Pipe, Stage};
pub use pkt::Pkt;
