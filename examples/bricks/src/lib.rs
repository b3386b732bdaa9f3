//! The NFs of NetBricks (OSDI 2016, §4–5) written with FuseBox's operator API, each a class
//! of the element registry once [`register`] has run: usable by name in Click
//! configurations (`t :: TTLNF`) and in chain files (`[nf.t] rust = "TTLNF"`), in every
//! execution mode.
//!
//! | class | module | what it does | Click counterpart |
//! |---|---|---|---|
//! | `TTLNF` | [`ttl`] | decrement the IPv4 TTL, drop at expiry (NetBricks' Listing 1) | `examples/ttl/ttl.click` |
//! | `MacSwapNF` | [`macswap`] | swap the Ethernet source and destination | — |
//! | `MonitorNF` | [`monitor`] | per-flow packet and byte counters | `Monitor` (`examples/bricks/click/monitor.click`) |
//! | `NatNF` | [`nat`] | NAPT, inside on input 0, outside on input 1 | `IPRewriter` (`examples/bricks/click/nat.click`) |
//! | `FirewallNF` | [`firewall`] | linear scan of an ACL (`IPFilter`'s rules) | `IPFilter` (`examples/bricks/click/firewall.click`) |
//! | `SignatureNF` | [`signature`] | Snort rules' contents searched in reassembled TCP streams (`window`) | `SnortIDS` (per packet) |
//! | `MaglevNF` | [`maglev`] | Maglev: lookup table in bounded-inconsistency state, flow cache per worker, `group_by` backend (Listing 3) | `Maglev` (`examples/speedybox/lb.click`) |
//!
//! Each module is short and documented: the pipeline first, the class (its arguments and
//! constructor) after it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod firewall;
pub mod macswap;
pub mod maglev;
pub mod monitor;
pub mod nat;
pub mod signature;
pub mod ttl;

#[cfg(test)]
mod testutil;

use elements::registry::{ElementClass, Taken};

/// Every class this crate defines, in the order `fusebox elements` lists them.
pub const CLASSES: &[ElementClass] = &[
    ttl::CLASS,
    macswap::CLASS,
    firewall::CLASS,
    monitor::CLASS,
    nat::CLASS,
    signature::CLASS,
    maglev::CLASS,
];

/// Registers every class of [`CLASSES`] in the element registry, so that configurations and
/// chain files read afterwards can name them. Registering again is a no-op; the error is a
/// name another class holds already.
pub fn register() -> Result<(), Taken> {
    operators::nf::register(CLASSES)
}
