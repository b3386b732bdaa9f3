//! Packet ports for FuseBox: where packets enter and leave a chain.
//!
//! * [`pcap`]: streaming readers for classic pcap (micro- and nanosecond) and pcapng
//!   files, and a buffered classic-pcap writer;
//! * [`port`]: the one port abstraction ([`port::RxPort`], [`port::TxPort`]) and the
//!   offline ports behind it (capture files, in-memory replay); live ports are in `nic`;
//! * [`gen`]: a deterministic synthetic trace generator (Ethernet/IPv4 TCP, UDP and ICMP
//!   flows with valid checksums).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod gen;
pub mod pcap;
pub mod port;
