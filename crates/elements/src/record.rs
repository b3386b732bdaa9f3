//! The recording API of the per-flow fast path (SpeedyBox, `--mode fastpath`).
//!
//! In fast-path mode the first packet of a flow (or the first after its TCP handshake) walks
//! the real chain while every element it meets *records* what it did to it; later packets of
//! the flow get one consolidated action instead of the walk. Recording never changes what an
//! element does: the calls below only write into the [`Recorder`] the executor lends through
//! [`Context`](crate::Context), and they do nothing when no packet is being recorded.
//!
//! What an element records for the packet it is pushed:
//!
//! * **Header actions.** Where the packet goes (an output, or a drop with its reason) is taken
//!   from the element's [`Verdict`](crate::Verdict): nothing to call. Fields the element
//!   writes are declared with [`Context::record_write`](crate::Context::record_write), in the vocabulary of
//!   [`crate::model`] (element view: Ethernet fields at the start of the data, IPv4 and
//!   transport fields at the network-header annotation). Elements with a synthesis model
//!   need not call anything: the executor records the model case the packet took (its
//!   effects are the header action, its filter the guard). The executor checks every
//!   declaration against the bytes the element actually produced; a mismatch makes the flow
//!   take the full chain, never a wrong packet.
//! * **Guards.** [`Context::record_guard`](crate::Context::record_guard): a filter (element view) that every later packet
//!   must pass for the recorded action to hold for it (TTL > 1, checksum valid, TCP flags,
//!   length …). Fields that are part of the flow key never need one.
//! * **State functions.** [`Context::record_state`](crate::Context::record_state): a token the executor hands back to
//!   [`Element::replay`](crate::Element::replay) for each later packet of the flow, with what
//!   it does to the payload ([`Access`]). That is where counters, timers and payload scans
//!   happen on the fast path.
//! * **Events.** [`Element::check`](crate::Element::check) is asked, before any state
//!   function runs, whether the token's recorded decision still holds given the element's
//!   state now (a Maglev backend still up, a NAT mapping still the same). When one says no,
//!   the flow's entry is dropped and the packet takes the full chain, where it is recorded
//!   afresh (re-consolidation).
//! * **Lifetime.** [`Context::record_expiry`](crate::Context::record_expiry): the entry must not outlive this virtual time
//!   (the earliest NF timer it depends on, such as a NAT mapping's expiry).
//! * **Refusal.** [`Context::record_opaque`](crate::Context::record_opaque): the element's decision is per packet and cannot
//!   be guarded (`RoundRobinSwitch`, a `Classifier` on payload bytes): the flow always takes
//!   the full chain.

use crate::model::Filter;
use packet::Timestamp;
use space::Field;

/// What a state function does with the packet's payload (SpeedyBox Table I: which state
/// functions of different NFs may run in parallel).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Access {
    /// Does not look at the payload (counters, timers).
    #[default]
    Ignore,
    /// Reads it (an IDS scan).
    Read,
    /// Writes it.
    Write,
}

/// One element's record for the packet being recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// Declared writes, in order (element view).
    pub writes: Vec<(Field, u128)>,
    /// Guards (element view).
    pub guards: Vec<Filter>,
    /// State functions: token and payload access.
    pub states: Vec<(u64, Access)>,
    /// Why the flow cannot take the fast path, if the element said so.
    pub opaque: Option<&'static str>,
    /// Whether the element recorded anything at all (an element that records nothing and
    /// has no model is opaque).
    pub touched: bool,
}

/// What an element declares it may do to a packet, whatever the packet and its state, for
/// the packets its model does not describe: every packet for an element without a model,
/// the packets of its [`Outcome::Runtime`](crate::model::Outcome::Runtime) cases for one
/// with a model. It is the planner's action profile of the element (`plan::profile`,
/// NFCompass Table II), beside what it records per flow. An element that declares promises that one
/// packet in is one packet out or a drop (no copies, no new packets, none held), that the
/// packet keeps its length and its data start, and that no byte or annotation outside
/// [`Declared::writes`] (and the checksums it names) changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// Where the IPv4 and transport fields below are: at the network-header annotation (the
    /// element view, as for most elements), or at a fixed offset into the data (an operator
    /// NF that parses the frame from its start).
    pub ip_at: crate::model::IpAnchor,
    /// Header fields and annotations the element may read (IPv4 and transport fields where
    /// [`Declared::ip_at`] says).
    pub reads: Vec<Field>,
    /// Header fields and annotations it may write.
    pub writes: Vec<Field>,
    /// Whether it may rewrite the IPv4 header checksum.
    pub ip_checksum: bool,
    /// Whether it may rewrite the transport (TCP/UDP/ICMP) checksum.
    pub l4_checksum: bool,
    /// What it does with the IPv4 options (bytes 20 to the header length: a source route's
    /// final destination in a pseudo header, a header checksum computed over them).
    pub ip_options: Access,
    /// What it does with the payload: the transport bytes from byte 4 on (after the ports,
    /// which no named field but [`Field::TcpFlags`] and [`Field::TcpDataOff`] covers: TCP
    /// sequence numbers, the UDP length and checksum, the data), and, for a packet without a
    /// network-header annotation, every byte (an element that finds its headers itself may
    /// read any of them).
    pub payload: Access,
    /// Whether it may set the header annotations where a parse of the frame finds the
    /// headers: the MAC header at the start of the data, the network header at
    /// [`Declared::ip_at`], the transport header after the IPv4 header length.
    pub sets_headers: bool,
    /// Whether it may drop a packet.
    pub drops: bool,
    /// Whether a packet may change its state (counters, tables).
    pub stateful: bool,
}

impl Declared {
    /// The fields a parse of an IPv4 packet's flow reads: protocol, addresses and ports,
    /// with the version, lengths and fragment fields that decide whether the header and the
    /// ports are there.
    pub const FLOW: [Field; 14] = [
        Field::IpVersion,
        Field::IpIhl,
        Field::IpLen,
        Field::IpFlags,
        Field::IpFragOffset,
        Field::IpProto,
        Field::IpSrc,
        Field::IpDst,
        Field::SrcPort,
        Field::DstPort,
        Field::IpAvail,
        Field::IpLenOk,
        Field::L4Avail,
        Field::L4Len,
    ];

    /// Every field of the IPv4 header (options aside), with the bytes available: what a
    /// header checksum computed afresh depends on.
    pub const IP_HEADER: [Field; 12] = [
        Field::IpVersion,
        Field::IpIhl,
        Field::IpTos,
        Field::IpLen,
        Field::IpId,
        Field::IpFlags,
        Field::IpFragOffset,
        Field::IpTtl,
        Field::IpProto,
        Field::IpSrc,
        Field::IpDst,
        Field::IpAvail,
    ];

    /// The named fields in the first bytes of a transport header (ports, TCP flags and data
    /// offset, ICMP type and code): with [`Access::Read`] of the payload, every transport
    /// byte (what a transport checksum is computed over).
    pub const L4_HEADER: [Field; 7] = [
        Field::SrcPort,
        Field::DstPort,
        Field::TcpFlags,
        Field::TcpDataOff,
        Field::IcmpType,
        Field::IcmpCode,
        Field::L4Avail,
    ];

    /// A declaration that reads every named field and annotation, the options and the
    /// payload, and writes nothing: an element deciding on bytes anywhere (a filter's
    /// run-time rules). It may drop when `drops`.
    pub fn reads_anything(drops: bool) -> Declared {
        Declared {
            reads: Field::ALL.to_vec(),
            ip_options: Access::Read,
            payload: Access::Read,
            drops,
            ..Declared::default()
        }
    }

    /// The declaration with `fields` read as well (each once).
    pub fn read(mut self, fields: &[Field]) -> Declared {
        for f in fields {
            if !self.reads.contains(f) {
                self.reads.push(*f);
            }
        }
        self
    }
}

/// What the executor lends an element while a packet is being recorded.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    /// Whether a packet is being recorded now.
    pub active: bool,
    /// The record of the element being pushed.
    pub step: Step,
    /// The earliest expiry recorded so far for the flow.
    pub expiry: Option<Timestamp>,
}

impl Recorder {
    /// Starts the record of one element's push (executor use).
    pub fn begin(&mut self) {
        self.step = Step::default();
    }

    /// Takes the record of the element just pushed (executor use).
    pub fn take(&mut self) -> Step {
        std::mem::take(&mut self.step)
    }
}

/// A later packet of a recorded flow, as a state function sees it.
///
/// `data` is the packet from the point where the element saw its data start. Header fields
/// are as the packet *arrived at the chain* (the consolidated header action is applied after
/// the state functions): per-flow header values an element needs (addresses and ports after
/// a NAT) belong in its token. The payload, the lengths and the TCP flags are the element's.
#[derive(Debug)]
pub struct ReplayView<'a> {
    /// The packet data from the element's view start.
    pub data: &'a mut [u8],
    /// Offset of the IPv4 header in `data`, when the element saw one.
    pub ip: Option<usize>,
    /// Virtual time of the packet: its own timestamp (what an element reading
    /// `packet.meta.timestamp` in `push` sees).
    pub now: Timestamp,
    /// The chain's virtual clock when the packet arrived: the latest timestamp seen so far,
    /// never earlier than `now` (what an element reading [`crate::Context::now`] in `push`
    /// sees; they differ when a capture's timestamps go backwards).
    pub clock: Timestamp,
    /// Index of the chain input packet.
    pub input_index: u64,
}
