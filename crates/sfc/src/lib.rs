//! Chains across hosts, after Chaining-Box: service functions (SFs) on many hosts joined by
//! NSH (RFC 8300), with eBPF stages beside each SF and a control plane on etcd.
//!
//! The pure parts: [`file`] (the chain file: Chaining-Box's JSON format and the same in TOML),
//! [`registry`] (what each agent's Hello says), [`plan`] (the per-host stages and map entries
//! computed from both), [`entries`] (the map entries of `crates/stages/bpf/cbox.h`) and
//! [`keys`] (the etcd key layout, and a changed plan as a diff of keys).
//!
//! [`lab`] builds test and benchmark networks of namespaces (hosts, SFs, end points).
//!
//! The etcd control plane: [`store`] (a typed etcd client with mutual TLS), [`controller`]
//! (plans from the chain file and the registry, written as per-host diffs), [`agent`]
//! (registers a Hello under a lease, reconciles its data plane), [`dataplane`]
//! (what an agent reconciles, with fakes; [`kernel`] the real one over `crates/stages`), [`status`] (what agents publish, what
//! `fusebox chain status` shows) and [`testing`] (a real etcd with mutual TLS for tests).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod agent;
pub mod controller;
pub mod dataplane;
pub mod entries;
pub mod file;
pub mod kernel;
pub mod keys;
pub mod lab;
pub mod pki;
pub mod plan;
pub mod registry;
pub mod span;
pub mod status;
pub mod store;
pub mod table;
pub mod testing;
