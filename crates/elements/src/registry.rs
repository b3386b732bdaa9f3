//! The element registry: every Click class FuseBox builds, with its constructor and its
//! documentation, in one table ([`CLASSES`]).
//!
//! [`crate::build`] looks a class up here; `fusebox elements [NAME]` prints the
//! documentation (Click's `click-elem2man` idea); the tests build every class from its
//! example and check that every class with a synthesis model has property-test cases.
//! Adding an element is one entry here (see `docs/CONTRIBUTING.md`).
//!
//! What the documentation says beside the table is derived from the element itself, built
//! from [`Doc::example`]: its port count ([`Element::port_count`]), whether it has a
//! synthesis model ([`Element::model`]) and how the fast path handles it.

use crate::arp::{ARPQuerier, ARPQuerierReason, ARPResponder, ARPResponderReason};
use crate::basic::{
    CheckPaint, CheckPaintReason, Counter, Declarative, Discard, DiscardReason, EtherEncap,
    EtherRewrite, FromDevice, FromDump, FromDumpReason, HashSwitch, Idle, IdleReason, Null, Paint,
    PaintSwitch, PaintTee, Print, Queue, RoundRobinSwitch, StaticSwitch, StoreEtherAddress, Strip,
    Switch, Tee, ToDevice, ToDump, Unqueue, Unstrip,
};
use crate::classifier::Classifier;
use crate::icmp::{ICMPError, ICMPErrorReason};
use crate::ids::{SnortIDS, SnortIDSReason};
use crate::ip::{
    CheckICMPReason, CheckIPHeader, CheckIPReason, CheckL4Header, CheckTCPReason, CheckUDPReason,
    DecIPTTL, DecIPTTLReason, DropBroadcasts, DropBroadcastsReason, FixIPSrc, GetIPAddress,
    GetIPAddressReason, IPEncap, IPEncapReason, IPFragmenter, IPFragmenterReason, IPGWOptions,
    IPGWOptionsReason, IPLookup, IPPrint, L4Kind, LookupIP6Reason, LookupIP6Route, MarkIPHeader,
    SetIPAddress, SetIPChecksum, SetL4ChecksumReason, SetPacketType, SetTCPChecksum,
    SetUDPChecksum,
};
use crate::ipfilter::{IPClassifier, IPFilter, IPFilterReason};
use crate::ipsec::{IPsecGCMDecap, IPsecGCMDecapReason, IPsecGCMEncap, IPsecGCMEncapReason};
use crate::nfs::{BlacklistFilter, BlacklistFilterReason, Maglev, MaglevReason, Monitor};
use crate::pcapfilter::PcapFilter;
use crate::reason::{
    FlowReason, InputReason, IpHeaderReason, LengthReason, MatchReason, OutputReason, RouteReason,
};
use crate::rewriter::{IPRewriter, MazuNAT, RewriterKind, RewriterReason, RoundRobinIPMapper};
use crate::{Args, BuildCtx, ConfigError, Element};

/// Builds an element from the class name it was declared with (synonyms keep theirs), its
/// parsed configuration and what it is being built for.
pub type Constructor =
    fn(&'static str, &Args, &BuildCtx<'_>) -> Result<Box<dyn Element>, ConfigError>;

/// One element class: its Click name, its constructor and its documentation.
#[derive(Debug, Clone, Copy)]
pub struct ElementClass {
    /// The Click class name (`"DecIPTTL"`).
    pub name: &'static str,
    /// How it is built.
    pub build: Constructor,
    /// What it is.
    pub doc: Doc,
}

/// An element class's documentation: what is not derived from the element itself.
#[derive(Debug, Clone, Copy)]
pub struct Doc {
    /// The arguments, in Click's synopsis notation (`[OFFSET, keywords ...]`).
    pub args: &'static str,
    /// What it does, in a sentence or two.
    pub about: &'static str,
    /// A configuration it builds from (with one input and `outputs` outputs).
    pub example: &'static str,
    /// Outputs connected when the example is built.
    pub outputs: usize,
    /// The reasons it drops packets under: the `TEXTS` of its reason enums (see
    /// [`crate::reason`]), or single reasons of a shared enum.
    pub drops: &'static [&'static [&'static str]],
    /// Whether it records its own actions or state functions for the fast path (besides a
    /// model, which the executor records for it).
    pub records: bool,
}

impl Doc {
    /// Documentation with arguments, description and example (one output, no drops).
    pub const fn new(args: &'static str, about: &'static str, example: &'static str) -> Doc {
        Doc {
            args,
            about,
            example,
            outputs: 1,
            drops: &[],
            records: false,
        }
    }
    /// The same, with `n` outputs connected when the example is built.
    pub const fn outputs(mut self, n: usize) -> Doc {
        self.outputs = n;
        self
    }
    /// The same, with these drop reasons.
    pub const fn drops(mut self, reasons: &'static [&'static [&'static str]]) -> Doc {
        self.drops = reasons;
        self
    }
    /// Every documented drop reason, in order.
    pub fn drop_reasons(&self) -> impl Iterator<Item = &'static str> {
        self.drops.iter().flat_map(|l| l.iter().copied())
    }
    /// Whether `reason` is one of the documented drop reasons.
    pub fn documents_drop(&self, reason: &str) -> bool {
        self.drop_reasons().any(|r| r == reason)
    }
    /// The same, for a class that records its own actions for the fast path.
    pub const fn records(mut self) -> Doc {
        self.records = true;
        self
    }
}

/// The class `name`, if FuseBox has it: one of [`CLASSES`] or one [`register`]ed since.
pub fn class(name: &str) -> Option<&'static ElementClass> {
    CLASSES
        .iter()
        .find(|c| c.name == name)
        .or_else(|| registered().into_iter().find(|c| c.name == name))
}

/// Classes registered at run time, in registration order: NFs written in Rust with the
/// operator API (the `operators` crate), which cannot be in [`CLASSES`] because they are
/// built on top of this crate.
static REGISTERED: std::sync::RwLock<Vec<&'static ElementClass>> =
    std::sync::RwLock::new(Vec::new());

/// Why a class could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("element class `{0}` exists already")]
pub struct Taken(pub &'static str);

/// Adds `class` to the classes configurations can name, for the rest of the process.
/// Registering the same class again (same name, same description) is a no-op, so every
/// program and test may register what it needs; a built-in class's name, or another class
/// under a registered name, is refused.
pub fn register(class: ElementClass) -> Result<(), Taken> {
    if let Some(old) = self::class(class.name) {
        let builtin = CLASSES.iter().any(|c| c.name == class.name);
        return if !builtin && old.doc.about == class.doc.about {
            Ok(())
        } else {
            Err(Taken(class.name))
        };
    }
    let mut list = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    if list.iter().all(|c| c.name != class.name) {
        list.push(Box::leak(Box::new(class)));
    }
    Ok(())
}

/// The classes registered at run time (see [`register`]).
pub fn registered() -> Vec<&'static ElementClass> {
    REGISTERED.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Every class: [`CLASSES`], then the [`registered`] ones.
pub fn all() -> Vec<&'static ElementClass> {
    CLASSES.iter().chain(registered()).collect()
}

/// Boxes a built element.
fn boxed<E: Element + 'static>(r: Result<E, ConfigError>) -> Result<Box<dyn Element>, ConfigError> {
    r.map(|e| Box::new(e) as Box<dyn Element>)
}

/// Boxes a built element; a configuration error is prefixed with the class name
/// (`Strip: expected LENGTH ...`).
fn named<E: Element + 'static>(
    class: &str,
    r: Result<E, ConfigError>,
) -> Result<Box<dyn Element>, ConfigError> {
    boxed(r).map_err(|e| ConfigError::new(format!("{class}: {}", e.message)))
}

const FROM_DEVICE: Doc = Doc::new(
    "DEVNAME [, FORCE_IP, keywords ...]",
    "Packets arriving on the NF's interface DEVNAME enter here (MAC header at the start, \
     packet type from the destination MAC). FORCE_IP true keeps only IP frames (others \
     leave on output 1). Other keywords are accepted and ignored.",
    "eth0",
)
.drops(&[FromDumpReason::TEXTS]);
const TO_DEVICE: Doc = Doc::new(
    "DEVNAME [, keywords ...]",
    "Packets pushed here leave the NF by its interface DEVNAME.",
    "eth1",
)
.outputs(0);
const QUEUE: Doc = Doc::new(
    "[CAPACITY]",
    "A FIFO; run to completion, packets pass straight through.",
    "",
);
const UNQUEUE: Doc = Doc::new(
    "[BURST]",
    "A pull-to-push converter; pass-through here.",
    "",
);
const TEE: Doc = Doc::new("[N]", "One packet in, one copy out of every output.", "").outputs(2);
const DECLARATIVE: Doc = Doc::new(
    "...",
    "Configuration only: no ports, never sees a packet (AddressInfo and \
     IPRewriterPatterns declare names the NF's other elements use).",
    "",
)
.outputs(0)
.drops(&[InputReason::TEXTS]);
const IP_LOOKUP: Doc = Doc::new(
    "ADDR/LEN [GW] OUT, ...",
    "Longest-prefix match of the destination IP annotation: the packet leaves on the \
     route's output, with the annotation set to the route's gateway if it has one.",
    "10.0.0.0/8 0, 0.0.0.0/0 10.0.0.1 1",
)
.outputs(2)
.drops(&[RouteReason::TEXTS]);
const REWRITER_DROPS: &[&[&str]] = &[
    &[IpHeaderReason::Bad.as_str()],
    FlowReason::TEXTS,
    RewriterReason::TEXTS,
];
const SET_L4_CHECKSUM: &[&[&str]] = &[IpHeaderReason::TEXTS, SetL4ChecksumReason::TEXTS];

/// Every element class, in the order `fusebox elements` lists them.
pub static CLASSES: &[ElementClass] = &[
    // Devices and dump files.
    ElementClass {
        name: "FromDevice",
        build: |c, a, b| named(c, FromDevice::configure(c, a, b)),
        doc: FROM_DEVICE,
    },
    ElementClass {
        name: "PollDevice",
        build: |c, a, b| named(c, FromDevice::configure(c, a, b)),
        doc: FROM_DEVICE,
    },
    ElementClass {
        name: "FromNetmapDevice",
        build: |c, a, b| named(c, FromDevice::configure(c, a, b)),
        doc: FROM_DEVICE,
    },
    ElementClass {
        name: "FromDPDKDevice",
        build: |c, a, b| named(c, FromDevice::configure(c, a, b)),
        doc: FROM_DEVICE,
    },
    ElementClass {
        name: "ToDevice",
        build: |c, a, _| named(c, ToDevice::configure(c, a)),
        doc: TO_DEVICE,
    },
    ElementClass {
        name: "ToNetmapDevice",
        build: |c, a, _| named(c, ToDevice::configure(c, a)),
        doc: TO_DEVICE,
    },
    ElementClass {
        name: "ToDPDKDevice",
        build: |c, a, _| named(c, ToDevice::configure(c, a)),
        doc: TO_DEVICE,
    },
    ElementClass {
        name: "ToHost",
        build: |c, a, _| named(c, ToDevice::to_host(a)),
        doc: Doc::new(
            "[DEVNAME]",
            "Packets pushed here leave the NF by an exit named `host`.",
            "",
        )
        .outputs(0),
    },
    ElementClass {
        name: "FromDump",
        build: |c, a, b| named(c, FromDump::configure(a, b)),
        doc: Doc::new(
            "FILENAME [, FORCE_IP, keywords ...]",
            "The executor reads this pcap file and pushes its packets here (MAC header at \
             the start; the packet type is left HOST, as in Click); FORCE_IP true keeps \
             only IP frames (with their header annotations; others leave on output 1).",
            "in.pcap",
        )
        .drops(&[FromDumpReason::TEXTS]),
    },
    ElementClass {
        name: "ToDump",
        build: |c, a, b| named(c, ToDump::configure(a, b)),
        doc: Doc::new(
            "FILENAME [, keywords ...]",
            "Packets pushed here are written to a pcap file.",
            "out.pcap",
        )
        .outputs(0),
    },
    // Sinks, counters, queues, tees.
    ElementClass {
        name: "Discard",
        build: |c, a, _| named(c, Discard::configure(a)),
        doc: Doc::new("[keywords ...]", "Drops every packet.", "")
            .outputs(0)
            .drops(&[DiscardReason::TEXTS]),
    },
    ElementClass {
        name: "Idle",
        build: |c, a, _| named(c, Idle::configure(a)),
        doc: Doc::new(
            "",
            "Any number of ports, never emits; pushed packets are dropped.",
            "",
        )
        .outputs(0)
        .drops(&[IdleReason::TEXTS]),
    },
    ElementClass {
        name: "Counter",
        build: |c, a, _| named(c, Counter::configure(a)),
        doc: Doc::new(
            "[keywords ...]",
            "Forwards every packet, counting packets and bytes.",
            "",
        ),
    },
    ElementClass {
        name: "Null",
        build: |c, a, _| named(c, Null::configure(a)),
        doc: Doc::new("", "Forwards every packet unchanged.", ""),
    },
    ElementClass {
        name: "Queue",
        build: |c, a, _| named(c, Queue::configure(c, a)),
        doc: QUEUE,
    },
    ElementClass {
        name: "SimpleQueue",
        build: |c, a, _| named(c, Queue::configure(c, a)),
        doc: QUEUE,
    },
    ElementClass {
        name: "ThreadSafeQueue",
        build: |c, a, _| named(c, Queue::configure(c, a)),
        doc: QUEUE,
    },
    ElementClass {
        name: "FullNoteQueue",
        build: |c, a, _| named(c, Queue::configure(c, a)),
        doc: QUEUE,
    },
    ElementClass {
        name: "NotifierQueue",
        build: |c, a, _| named(c, Queue::configure(c, a)),
        doc: QUEUE,
    },
    ElementClass {
        name: "Unqueue",
        build: |c, a, _| named(c, Unqueue::configure(c, a)),
        doc: UNQUEUE,
    },
    ElementClass {
        name: "Unqueue2",
        build: |c, a, _| named(c, Unqueue::configure(c, a)),
        doc: UNQUEUE,
    },
    ElementClass {
        name: "Tee",
        build: |c, a, b| named(c, Tee::configure(c, a, b)),
        doc: TEE,
    },
    ElementClass {
        name: "PullTee",
        build: |c, a, b| named(c, Tee::configure(c, a, b)),
        doc: TEE,
    },
    // Paint annotations.
    ElementClass {
        name: "Paint",
        build: |c, a, _| named(c, Paint::configure(a)),
        doc: Doc::new("COLOR [, ANNO]", "Sets the paint annotation to COLOR.", "7"),
    },
    ElementClass {
        name: "PaintSwitch",
        build: |c, a, b| named(c, PaintSwitch::configure(a, b)),
        doc: Doc::new(
            "[ANNO]",
            "Sends each packet to the output its paint annotation names.",
            "",
        )
        .outputs(2)
        .drops(&[OutputReason::TEXTS]),
    },
    ElementClass {
        name: "CheckPaint",
        build: |c, a, b| named(c, CheckPaint::configure(a, b)),
        doc: Doc::new(
            "COLOR [, ANNO]",
            "Packets painted COLOR leave on output 0, the others on output 1 (dropped if \
             it is not connected).",
            "3",
        )
        .drops(&[CheckPaintReason::TEXTS]),
    },
    ElementClass {
        name: "PaintTee",
        build: |c, a, _| named(c, PaintTee::configure(a)),
        doc: Doc::new(
            "COLOR [, ANNO]",
            "Every packet to output 0, and a copy of those painted COLOR to output 1.",
            "3",
        )
        .outputs(2),
    },
    // Headers and switches.
    ElementClass {
        name: "Strip",
        build: |c, a, _| named(c, Strip::configure(a)),
        doc: Doc::new(
            "LENGTH",
            "Pulls LENGTH bytes off the front of the packet.",
            "14",
        ),
    },
    ElementClass {
        name: "Unstrip",
        build: |c, a, _| named(c, Unstrip::configure(a)),
        doc: Doc::new(
            "LENGTH",
            "Moves the start of the packet data back by LENGTH bytes.",
            "14",
        ),
    },
    ElementClass {
        name: "EtherEncap",
        build: |c, a, b| named(c, EtherEncap::configure(a, b)),
        doc: Doc::new(
            "ETHERTYPE, SRC, DST",
            "Pushes a 14-byte Ethernet header.",
            "0x0800, 0:1:2:3:4:5, 6:7:8:9:a:b",
        ),
    },
    ElementClass {
        name: "EtherRewrite",
        build: |c, a, b| named(c, EtherRewrite::configure(a, b)),
        doc: Doc::new(
            "SRC, DST",
            "Overwrites the MAC addresses of the existing Ethernet header.",
            "0:1:2:3:4:5, 6:7:8:9:a:b",
        )
        .drops(&[LengthReason::TEXTS]),
    },
    ElementClass {
        name: "StoreEtherAddress",
        build: |c, a, b| named(c, StoreEtherAddress::configure(a, b)),
        doc: Doc::new(
            "ADDR, OFFSET",
            "Overwrites the 6 bytes at OFFSET (`src`, `dst` or a number) with ADDR.",
            "0:0:0:0:0:9, src",
        )
        .drops(&[LengthReason::TEXTS]),
    },
    ElementClass {
        name: "Print",
        build: |c, a, _| named(c, Print::configure(a)),
        doc: Doc::new(
            "[LABEL, MAXLENGTH, keywords ...]",
            "Forwards packets, describing them on stderr when FUSEBOX_PRINT=1.",
            "hello",
        ),
    },
    ElementClass {
        name: "HashSwitch",
        build: |c, a, b| named(c, HashSwitch::configure(a, b)),
        doc: Doc::new(
            "OFFSET, LENGTH",
            "Sends each packet to an output chosen by a hash of LENGTH bytes at OFFSET.",
            "26, 4",
        )
        .outputs(2),
    },
    ElementClass {
        name: "RoundRobinSwitch",
        build: |c, a, b| named(c, RoundRobinSwitch::configure(a, b)),
        doc: Doc::new(
            "[MAX]",
            "Sends packets to outputs 0, 1, ..., n-1, 0, ... in turn.",
            "",
        )
        .outputs(2)
        .drops(&[OutputReason::TEXTS]),
    },
    ElementClass {
        name: "StaticSwitch",
        build: |c, a, b| named(c, StaticSwitch::configure(a, b)),
        doc: Doc::new(
            "K",
            "Sends every packet to output K; K out of range drops it.",
            "1",
        )
        .outputs(2)
        .drops(&[OutputReason::TEXTS]),
    },
    ElementClass {
        name: "Switch",
        build: |c, a, b| named(c, Switch::configure(a, b)),
        doc: Doc::new(
            "[K]",
            "Sends every packet to output K (default 0); K out of range drops it.",
            "",
        )
        .outputs(2)
        .drops(&[OutputReason::TEXTS]),
    },
    // Declarative elements.
    ElementClass {
        name: "AddressInfo",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "IPRewriterPatterns",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "ScheduleInfo",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "ControlSocket",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "ChatterSocket",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "DriverManager",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "Script",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "StaticThreadSched",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "BalancedThreadSched",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "AlignmentInfo",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "AnnotationInfo",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    ElementClass {
        name: "Message",
        build: |c, a, _| named(c, Declarative::configure(c, a)),
        doc: DECLARATIVE,
    },
    // IP: checks and annotations.
    ElementClass {
        name: "CheckIPHeader",
        build: |_, a, b| boxed(CheckIPHeader::configure(a, b, true)),
        doc: Doc::new(
            "[OFFSET, keywords OFFSET, INTERFACES, BADSRC, GOODDST, CHECKSUM, VERBOSE, DETAILS]",
            "Checks the IPv4 header at OFFSET: good packets get their network and transport \
             header annotations and the destination IP annotation, are trimmed to the total \
             length and leave on output 0; bad ones leave on output 1, or are dropped.",
            "14",
        )
        .drops(&[CheckIPReason::TEXTS]),
    },
    ElementClass {
        name: "CheckIPHeader2",
        build: |_, a, b| boxed(CheckIPHeader::configure(a, b, false)),
        doc: Doc::new(
            "[OFFSET, keywords ...]",
            "CheckIPHeader without the checksum check.",
            "14",
        )
        .drops(&[CheckIPReason::TEXTS]),
    },
    ElementClass {
        name: "MarkIPHeader",
        build: |_, a, _| boxed(MarkIPHeader::configure(a)),
        doc: Doc::new(
            "[OFFSET]",
            "Sets the network header annotation OFFSET bytes in and the transport header \
             after it, checking nothing.",
            "14",
        ),
    },
    ElementClass {
        name: "CheckTCPHeader",
        build: |_, a, b| boxed(CheckL4Header::configure(L4Kind::Tcp, a, b)),
        doc: Doc::new(
            "[keywords VERBOSE, DETAILS]",
            "Checks the TCP header's length and checksum; bad packets leave on output 1, or \
             are dropped.",
            "",
        )
        .drops(&[CheckTCPReason::TEXTS]),
    },
    ElementClass {
        name: "CheckUDPHeader",
        build: |_, a, b| boxed(CheckL4Header::configure(L4Kind::Udp, a, b)),
        doc: Doc::new(
            "[keywords VERBOSE, DETAILS]",
            "Checks the UDP header's length and (nonzero) checksum; bad packets leave on \
             output 1, or are dropped.",
            "",
        )
        .drops(&[CheckUDPReason::TEXTS]),
    },
    ElementClass {
        name: "CheckICMPHeader",
        build: |_, a, b| boxed(CheckL4Header::configure(L4Kind::Icmp, a, b)),
        doc: Doc::new(
            "[keywords VERBOSE, DETAILS]",
            "Checks the ICMP message's per-type length and checksum; bad packets leave on \
             output 1, or are dropped.",
            "",
        )
        .drops(&[CheckICMPReason::TEXTS]),
    },
    ElementClass {
        name: "GetIPAddress",
        build: |_, a, _| boxed(GetIPAddress::configure(a)),
        doc: Doc::new(
            "OFFSET [, ANNO] | IP src|dst [, ANNO]",
            "Copies 4 bytes at OFFSET (or the IP header's source or destination) into the \
             destination IP annotation.",
            "16",
        )
        .drops(&[
            GetIPAddressReason::TEXTS,
            &[IpHeaderReason::Missing.as_str()],
        ]),
    },
    ElementClass {
        name: "SetIPAddress",
        build: |_, a, b| boxed(SetIPAddress::configure(a, b)),
        doc: Doc::new(
            "IP [, ANNO]",
            "Sets the destination IP annotation to IP.",
            "10.0.0.9",
        ),
    },
    ElementClass {
        name: "SetPacketType",
        build: |_, a, _| boxed(SetPacketType::configure(a)),
        doc: Doc::new(
            "TYPE",
            "Sets the packet type annotation (HOST, BROADCAST, MULTICAST, OTHERHOST, \
             OUTGOING, LOOPBACK).",
            "BROADCAST",
        ),
    },
    ElementClass {
        name: "DropBroadcasts",
        build: |_, a, b| boxed(DropBroadcasts::configure(a, b)),
        doc: Doc::new(
            "",
            "Drops packets whose packet type annotation is broadcast or multicast (or sends \
             them to output 1 when it is connected).",
            "",
        )
        .drops(&[DropBroadcastsReason::TEXTS]),
    },
    ElementClass {
        name: "FixIPSrc",
        build: |_, a, b| boxed(FixIPSrc::configure(a, b)),
        doc: Doc::new(
            "IPADDR",
            "Rewrites the IP source to IPADDR (with the checksum) of packets carrying the \
             \"fix IP source\" annotation ICMPError sets; others pass untouched.",
            "10.0.0.9",
        ),
    },
    // IP: routing.
    ElementClass {
        name: "StaticIPLookup",
        build: |c, a, b| boxed(IPLookup::configure(c, a, b)),
        doc: IP_LOOKUP,
    },
    ElementClass {
        name: "LookupIPRoute",
        build: |c, a, b| boxed(IPLookup::configure(c, a, b)),
        doc: IP_LOOKUP,
    },
    ElementClass {
        name: "RadixIPLookup",
        build: |c, a, b| boxed(IPLookup::configure(c, a, b)),
        doc: IP_LOOKUP,
    },
    ElementClass {
        name: "LinearIPLookup",
        build: |c, a, b| boxed(IPLookup::configure(c, a, b)),
        doc: IP_LOOKUP,
    },
    ElementClass {
        name: "DirectIPLookup",
        build: |c, a, b| boxed(IPLookup::configure(c, a, b)),
        doc: IP_LOOKUP,
    },
    ElementClass {
        name: "LookupIP6Route",
        build: |_, a, b| boxed(LookupIP6Route::configure(a, b)),
        doc: Doc::new(
            "ADDR/LEN [GW] OUT, ...",
            "Longest-prefix match of the IPv6 header's destination; the packet leaves on the \
             route's output.",
            "2000::/3 0, ::/0 1",
        )
        .outputs(2)
        .drops(&[LookupIP6Reason::TEXTS]),
    },
    ElementClass {
        name: "DecIPTTL",
        build: |_, a, b| boxed(DecIPTTL::configure(a, b)),
        doc: Doc::new(
            "[keywords ACTIVE, MULTICAST]",
            "Decrements the TTL (checksum updated incrementally); TTL <= 1 leaves on output \
             1, or is dropped.",
            "",
        )
        .outputs(2)
        .drops(&[DecIPTTLReason::TEXTS, IpHeaderReason::TEXTS]),
    },
    ElementClass {
        name: "IPGWOptions",
        build: |_, a, b| boxed(IPGWOptions::configure(a, b)),
        doc: Doc::new(
            "MYADDR [, OTHERADDRS]",
            "Processes the Record Route and Timestamp options; erroneous packets leave on \
             output 1, or are dropped. Differs from Click: timestamps are the packet's \
             virtual time (FuseBox's clock), not the wall-clock time Click writes.",
            "10.0.0.1",
        )
        .outputs(2)
        .drops(&[IPGWOptionsReason::TEXTS, IpHeaderReason::TEXTS]),
    },
    ElementClass {
        name: "IPFragmenter",
        build: |_, a, b| boxed(IPFragmenter::configure(a, b)),
        doc: Doc::new(
            "MTU [, HONOR_DF, keywords ...]",
            "Fragments packets longer than MTU; those that may not be fragmented leave on \
             output 1, or are dropped.",
            "576",
        )
        .outputs(2)
        .drops(&[IPFragmenterReason::TEXTS, IpHeaderReason::TEXTS]),
    },
    ElementClass {
        name: "SetIPChecksum",
        build: |_, a, _| boxed(SetIPChecksum::configure(a)),
        doc: Doc::new("", "Recomputes the IPv4 header checksum.", "")
            .drops(&[IpHeaderReason::TEXTS]),
    },
    ElementClass {
        name: "SetTCPChecksum",
        build: |_, a, _| boxed(SetTCPChecksum::configure(a)),
        doc: Doc::new("[FIXOFF]", "Recomputes the TCP checksum.", "").drops(SET_L4_CHECKSUM),
    },
    ElementClass {
        name: "SetUDPChecksum",
        build: |_, a, b| boxed(SetUDPChecksum::configure(a, b)),
        doc: Doc::new(
            "",
            "Recomputes the UDP checksum; fragments and short packets leave on output 1.",
            "",
        )
        .drops(SET_L4_CHECKSUM),
    },
    ElementClass {
        name: "IPPrint",
        build: |_, a, _| boxed(IPPrint::configure(a)),
        doc: Doc::new(
            "[LABEL, keywords ...]",
            "Forwards packets, printing a tcpdump-like line on stderr when FUSEBOX_PRINT=1.",
            "in",
        ),
    },
    ElementClass {
        name: "IPEncap",
        build: |_, a, b| boxed(IPEncap::configure(a, b)),
        doc: Doc::new(
            "PROTO, SRC, DST [, keywords TOS, DSCP, ECT, CE, TTL, DF]",
            "Pushes an IPv4 header.",
            "4, 10.0.0.1, 10.0.0.2",
        )
        .drops(&[IPEncapReason::TEXTS]),
    },
    // Classification.
    ElementClass {
        name: "Classifier",
        build: |_, a, _| boxed(Classifier::configure(a)),
        doc: Doc::new(
            "PATTERN_1, ..., PATTERN_N",
            "Sends each packet to the output of the first OFFSET/VALUE%MASK pattern it \
             matches.",
            "12/0800, -",
        )
        .outputs(2)
        .drops(&[MatchReason::TEXTS]),
    },
    ElementClass {
        name: "IPClassifier",
        build: |_, a, b| boxed(IPClassifier::configure(a, b)),
        doc: Doc::new(
            "PATTERN_1, ..., PATTERN_N",
            "Sends each packet to the output of the first tcpdump-like pattern it matches.",
            "tcp, udp, -",
        )
        .outputs(3)
        .drops(&[MatchReason::TEXTS]),
    },
    ElementClass {
        name: "IPFilter",
        build: |_, a, b| boxed(IPFilter::configure(a, b)),
        doc: Doc::new(
            "ACTION_1 PATTERN_1, ..., ACTION_N PATTERN_N [, FILE path]",
            "The first rule whose pattern matches decides: allow (output 0), deny, or an \
             output number.",
            "allow tcp, deny all",
        )
        .drops(&[IPFilterReason::TEXTS, MatchReason::TEXTS]),
    },
    ElementClass {
        name: "PcapFilter",
        build: |_, a, b| boxed(PcapFilter::configure(a, b)),
        doc: Doc::new(
            "EXPR",
            "Frames matching the tcpdump expression leave on output 0, the others on output \
             1, or are dropped.",
            "\"tcp port 80\"",
        )
        .drops(&[MatchReason::TEXTS]),
    },
    // Stateful rewriting.
    ElementClass {
        name: "IPRewriter",
        build: |_, a, b| boxed(IPRewriter::configure(RewriterKind::Ip, a, b)),
        doc: Doc::new(
            "INPUTSPEC_1, ..., INPUTSPEC_N [, keywords ...]",
            "Rewrites TCP and UDP flows by their input's specification (pattern, pass, \
             keep, drop, a mapper), keeping a mapping per flow and its reply. A UDP \
             checksum the update makes zero is written 0xFFFF (RFC 768; \
             FastClick writes 0x0000).",
            "pattern 10.0.0.1 1000-2000 - - 0 1, drop",
        )
        .outputs(2)
        .drops(REWRITER_DROPS),
    },
    ElementClass {
        name: "TCPRewriter",
        build: |_, a, b| boxed(IPRewriter::configure(RewriterKind::Tcp, a, b)),
        doc: Doc::new(
            "INPUTSPEC_1, ..., INPUTSPEC_N [, keywords ...]",
            "IPRewriter for TCP flows.",
            "pattern 10.0.0.1 1000-2000 - - 0 1, drop",
        )
        .outputs(2)
        .drops(REWRITER_DROPS),
    },
    ElementClass {
        name: "UDPRewriter",
        build: |_, a, b| boxed(IPRewriter::configure(RewriterKind::Udp, a, b)),
        doc: Doc::new(
            "INPUTSPEC_1, ..., INPUTSPEC_N [, keywords ...]",
            "IPRewriter for UDP flows. A UDP checksum the update makes zero is written \
             0xFFFF (RFC 768; FastClick writes 0x0000).",
            "pattern 10.0.0.1 1000-2000 - - 0 1, drop",
        )
        .outputs(2)
        .drops(REWRITER_DROPS),
    },
    ElementClass {
        name: "MazuNAT",
        build: |c, a, b| named(c, MazuNAT::configure(a, b)),
        doc: Doc::new(
            "EXTERNAL ADDR [, PORTS LO-HI, INTERNAL ADDR, SERVER ADDR, keywords ...]",
            "The NAT of Click's mazu-nat.click as one rewriter: flows from input 0 are \
             mapped to EXTERNAL, replies on input 1 translated back.",
            "EXTERNAL 203.0.113.1",
        )
        .outputs(2)
        .drops(REWRITER_DROPS),
    },
    ElementClass {
        name: "RoundRobinIPMapper",
        build: |_, a, b| boxed(RoundRobinIPMapper::configure(a, b)),
        doc: Doc::new(
            "PATTERN FOUTPUT ROUTPUT, ...",
            "Declarative: a rewriter's input names it to map each new flow with its next \
             pattern in turn.",
            "10.0.0.1 1000-2000 - - 0 1",
        )
        .outputs(0)
        .drops(&[InputReason::TEXTS]),
    },
    // ARP and ICMP.
    ElementClass {
        name: "ARPResponder",
        build: |_, a, b| boxed(ARPResponder::configure(a, b)),
        doc: Doc::new(
            "IP/LEN ETH, ...",
            "Answers ARP requests for its addresses with a new reply on output 0; other \
             frames leave on output 1, or are dropped.",
            "10.0.0.1 00:01:02:03:04:05",
        )
        .outputs(2)
        .drops(&[ARPResponderReason::TEXTS]),
    },
    ElementClass {
        name: "ARPQuerier",
        build: |_, a, b| boxed(ARPQuerier::configure(a, b)),
        doc: Doc::new(
            "IP, ETH [, keywords STATIC, DEFAULT_ETH, CAPACITY, TIMEOUT, BROADCAST, ...]",
            "Encapsulates IP packets (input 0) for their next hop, querying unknown ones; \
             ARP replies arrive on input 1. Differs from Click: queries are re-sent and \
             entries expire on the virtual clock (packet timestamps), not on Click's \
             wall-clock timers.",
            "10.0.0.1, 00:01:02:03:04:05",
        )
        .drops(&[ARPQuerierReason::TEXTS]),
    },
    ElementClass {
        name: "ICMPError",
        build: |_, a, b| boxed(ICMPError::configure(a, b)),
        doc: Doc::new(
            "SRC, TYPE [, CODE, keywords ...]",
            "Answers each packet with a new ICMP error of TYPE and CODE from SRC.",
            "10.0.0.1, unreachable, host",
        )
        .drops(&[ICMPErrorReason::TEXTS]),
    },
    // Network functions.
    ElementClass {
        name: "SnortIDS",
        build: |_, a, b| boxed(SnortIDS::configure(a, b)),
        doc: Doc::new(
            "RULES FILE [, keywords ...]",
            "A Snort-rule intrusion detection system: alerts on matching packets and drops \
             those drop rules match.",
            "RULES /dev/null",
        )
        .drops(&[SnortIDSReason::TEXTS])
        .records(),
    },
    ElementClass {
        name: "IPsecGCMEncap",
        build: |c, a, b| named(c, IPsecGCMEncap::configure(a, b)),
        doc: Doc::new(
            "SPI, KEY, SALT, SRC, DST [, keywords SEQ, ESN, TTL]",
            "An IPsec gateway's sending side: ESP tunnel mode (RFC 4303) with AES-GCM-128 or \
             -256 (RFC 4106: KEY of 16 or 32 bytes in hex, a 4-byte SALT, or KEY with the \
             salt appended as `ip xfrm` takes it; 8-byte IV = the sequence number; 16-byte \
             ICV). Encrypts the IPv4 datagram at the network header and sends it from SRC \
             to DST (protocol 50, TTL 64 unless TTL), sequence numbers from SEQ (1), \
             64-bit with ESN true. Opaque to synthesis and the fast path.",
            "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, SRC 192.0.2.1, \
             DST 192.0.2.2",
        )
        .drops(&[IPsecGCMEncapReason::TEXTS]),
    },
    ElementClass {
        name: "IPsecGCMDecap",
        build: |c, a, b| named(c, IPsecGCMDecap::configure(a, b)),
        doc: Doc::new(
            "SPI, KEY, SALT [, keywords SRC, DST, REPLAY, ESN]",
            "An IPsec gateway's receiving side: checks an ESP tunnel packet's SPI (and the \
             outer SRC and DST when given), its sequence number against the anti-replay \
             window (REPLAY packets, 64 by default, 0 for none), its AES-GCM ICV, then \
             decrypts it and puts the inner IPv4 datagram in the outer one's place. Drops \
             are counted by reason in its statistics. Opaque to synthesis and the fast path.",
            "SPI 0x1000, KEY 000102030405060708090a0b0c0d0e0f, SALT 01020304, REPLAY 128",
        )
        .drops(&[IPsecGCMDecapReason::TEXTS]),
    },
    ElementClass {
        name: "Maglev",
        build: |c, a, b| named(c, Maglev::configure(a, b)),
        doc: Doc::new(
            "BACKEND NAME IP MAC, ... [, SCHEDULE FILE, TIMEOUT T, REAP_INTERVAL T, SEED N, CAPACITY N]",
            "Maglev's load balancer: consistent hashing through a lookup table with \
             connection tracking and backend failures.",
            "BACKEND a 10.0.1.1 02:00:00:00:01:01",
        )
        .drops(&[
            MaglevReason::TEXTS,
            &[IpHeaderReason::Bad.as_str()],
            FlowReason::TEXTS,
        ])
        .records(),
    },
    ElementClass {
        name: "Monitor",
        build: |c, a, _| named(c, Monitor::configure(a)),
        doc: Doc::new(
            "[CAPACITY N]",
            "Forwards every packet, counting packets and bytes per flow (at most N flows apart, \
             262,144 by default; the others together under `untracked`).",
            "",
        )
        .records(),
    },
    ElementClass {
        name: "BlacklistFilter",
        build: |c, a, b| named(c, BlacklistFilter::configure(a, b)),
        doc: Doc::new(
            "RULE, ... [, FILE path]",
            "Drops packets matching any deny rule (a linear scan).",
            "deny tcp && dst port 23",
        )
        .drops(&[BlacklistFilterReason::TEXTS])
        .records(),
    },
];

impl ElementClass {
    /// The class built from its example configuration ([`Doc::example`]), with one input,
    /// `Doc::outputs` outputs and relative paths resolved against the current directory.
    pub fn example(&self) -> Result<Box<dyn Element>, ConfigError> {
        let names = crate::Names::new();
        let bcx = BuildCtx {
            name: self.name,
            ninputs: 1,
            noutputs: self.doc.outputs,
            names: &names,
            base_dir: std::path::Path::new("."),
        };
        crate::build(self.name, self.doc.example, &bcx)
    }

    /// The class in one line: name, arguments and what it does.
    pub fn summary(&self) -> String {
        format!("{}({}): {}", self.name, self.doc.args, self.doc.about)
    }

    /// The class's documentation: the synopsis, what it does, its ports, drop reasons,
    /// synthesis model and fast-path handling (the last three from its example).
    pub fn describe(&self) -> String {
        let d = &self.doc;
        let mut s = format!("{}({})\n\n  {}\n\n", self.name, d.args, d.about);
        let example = self.example();
        let line = |s: &mut String, k: &str, v: &str| {
            s.push_str(&format!("  {k:<10} {v}\n"));
        };
        line(&mut s, "example", &format!("{}({})", self.name, d.example));
        match example {
            Ok(mut e) => {
                line(&mut s, "ports", &e.port_count().describe());
                let drops: Vec<&str> = d.drop_reasons().collect();
                let drops = if drops.is_empty() {
                    "none".to_string()
                } else {
                    drops.join(", ")
                };
                line(&mut s, "drops", &drops);
                let model = e.model().is_some();
                let rewriter = e.stateful_flow().is_some();
                line(
                    &mut s,
                    "model",
                    if model {
                        "yes: synthesis composes its cases (this configuration)"
                    } else if rewriter {
                        "no: synthesis asks the rewriter for its mappings"
                    } else {
                        "no: synthesis runs it as it is (this configuration)"
                    },
                );
                let fast = if model {
                    "the executor records the model case each packet takes"
                } else if rewriter {
                    "the executor records the rewriter's mapping decisions"
                } else if d.records {
                    "records its own actions and state functions"
                } else {
                    "opaque: flows through it take the full chain"
                };
                line(&mut s, "fast path", fast);
            }
            Err(err) => line(&mut s, "example", &format!("refused: {err}")),
        }
        s
    }
}
