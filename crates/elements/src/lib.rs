//! The element library: Click's elements, with Click's names, arguments, ports and
//! documented behaviour.
//!
//! Every element implements [`Element`]: it receives one packet on an input port and
//! returns a [`Verdict`] (forward on an output, drop with a reason, or done after emitting
//! through the [`Context`]). Elements are built by [`build`] from a Click class name and its
//! configuration string; every class, with its constructor and documentation, is one entry
//! of the [`registry`].
//!
//! For synthesis, an element describes what it does in the vocabulary of header fields
//! through [`Element::model`] (see [`model`]; [`model::apply`] is the reference meaning that
//! the tests check against `push`); an element without a model is simply opaque.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[macro_use]
pub mod reason;

pub mod args;
pub mod capability;
#[macro_use]
mod element;
pub mod hash;
pub mod net;

// Element families, one module each.
pub mod arp;
pub mod basic;
pub mod classifier;
pub mod icmp;
pub mod ids;
pub mod ip;
pub mod ipfilter;
pub mod ipsec;
pub mod nfs;
pub mod pcapfilter;
pub mod rewriter;

pub mod model;
pub mod record;
pub mod registry;

pub use args::{Args, ConfigError};
pub use capability::{AsAny, RewriteSpec, RouteTable, StatefulFlow, WorkerShare};
pub use element::{
    push_batch_in_place, BatchClock, BatchOut, Batching, BuildCtx, Context, Element, PortCount,
    Role, Step, Verdict,
};
pub use model::Model;
pub use net::Names;

/// Builds the element of Click class `class` from its configuration string, with the
/// class's constructor in the [`registry`].
///
/// Returns `Err` with a message naming the class and what was expected when the class is
/// unknown or the configuration is wrong; never panics.
pub fn build(class: &str, config: &str, bcx: &BuildCtx) -> Result<Box<dyn Element>, ConfigError> {
    let args = Args::parse(config)?;
    match registry::class(class) {
        Some(c) => (c.build)(c.name, &args, bcx),
        None => Err(ConfigError::new(format!("unknown element class `{class}`"))),
    }
}
