//! `ARPResponder`.

use super::{arp_frame, parse_arp, ARP_FRAME_LEN};
use crate::model::{Case, Field, FieldSet, Filter, Model, Outcome};
use crate::net::mask;
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use std::net::Ipv4Addr;
use wire::arp;
use wire::ethernet::{ethertype, Address as EthAddr};

reasons! {
    /// Why `ARPResponder` drops a packet.
    pub enum ARPResponderReason {
        /// An ARP request it answered (the reply is a new packet).
        Answered => "arp-answered",
        /// Not an Ethernet/IPv4 ARP request (another frame, or an ARP reply), and output 1
        /// is not connected.
        NotArpRequest => "not-arp-request",
        /// An Ethernet/IPv4 ARP request for an address it does not answer for, and output 1
        /// is not connected.
        NotOurAddress => "not-our-address",
    }
}

/// `ARPResponder(IP/MASK ... ETH, ...)`: answers ARP requests for its addresses (Click 1/1-2).
///
/// Each argument lists one or more IP addresses or prefixes and one Ethernet address (an
/// `AddressInfo` name may stand for both). An input frame that is an Ethernet/IPv4 ARP
/// request (EtherType 0x0806, hardware type 1, protocol 0x0800, operation 1) whose target
/// address matches an entry (most specific prefix first; for identical prefixes the later
/// argument wins) is answered: a new 42-byte ARP reply is emitted on output 0 (Ethernet
/// destination and target = the request's sender hardware address, target IP = the
/// request's sender IP, sender = the entry's Ethernet address and the requested IP), and the
/// request is consumed (dropped, reason `arp-answered`), as Click's ARPResponder makes a new
/// packet and kills the request. Every other frame goes to output 1 if it is connected, and
/// is dropped otherwise: `not-our-address` for an ARP request whose target is none of its
/// addresses, `not-arp-request` for anything else.
#[derive(Debug)]
pub struct ARPResponder {
    /// (network, prefix length, Ethernet address), most specific first.
    entries: Vec<(Ipv4Addr, u8, EthAddr)>,
    has_out1: bool,
    answered: u64,
}

impl ARPResponder {
    /// Builds the responder from its arguments.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<ARPResponder, ConfigError> {
        let mut entries: Vec<(usize, Ipv4Addr, u8, EthAddr)> = Vec::new();
        for (i, a) in args.all().iter().enumerate() {
            let text = match &a.keyword {
                Some(k) => format!("{k} {}", a.value),
                None => a.value.clone(),
            };
            let words: Vec<&str> = text.split_whitespace().collect();
            let mut prefixes = Vec::new();
            let mut eth: Option<EthAddr> = None;
            for w in &words {
                if let Ok((addr, len)) = bcx.names.prefix(w) {
                    prefixes.push((addr, len));
                } else if let Ok(e) = bcx.names.eth(w) {
                    if eth.is_some() {
                        return Err(ConfigError::new(format!(
                            "argument {i}: expected one ETH, found more than one"
                        )));
                    }
                    eth = Some(e);
                } else {
                    return Err(ConfigError::new(format!(
                        "argument {i}: expected `IP/MASK ETH`, found `{w}`"
                    )));
                }
            }
            if eth.is_none() {
                // A name can be both an address and an Ethernet address.
                eth = words.iter().find_map(|w| bcx.names.eth(w).ok());
            }
            if prefixes.is_empty() {
                return Err(ConfigError::new(format!(
                    "argument {i}: expected `IP/MASK ETH`, missing IP/MASK"
                )));
            }
            let Some(eth) = eth else {
                return Err(ConfigError::new(format!(
                    "argument {i}: expected `IP/MASK ETH`, missing ETH"
                )));
            };
            for (addr, len) in prefixes {
                let net = Ipv4Addr::from(u32::from(addr) & mask(len));
                entries.push((entries.len(), net, len, eth));
            }
        }
        if entries.is_empty() {
            return Err(ConfigError::new(
                "expected at least one `IP/MASK ETH` argument",
            ));
        }
        // Most specific first; identical prefixes: the later one first (it wins), then dedup.
        entries.sort_by(|a, b| {
            b.2.cmp(&a.2)
                .then(u32::from(a.1).cmp(&u32::from(b.1)))
                .then(b.0.cmp(&a.0))
        });
        entries.dedup_by(|b, a| a.1 == b.1 && a.2 == b.2);
        Ok(ARPResponder {
            entries: entries.into_iter().map(|e| (e.1, e.2, e.3)).collect(),
            has_out1: bcx.noutputs >= 2,
            answered: 0,
        })
    }

    /// The Ethernet address answered for `ip`, if any.
    pub fn lookup(&self, ip: Ipv4Addr) -> Option<EthAddr> {
        self.entries
            .iter()
            .find(|(net, len, _)| u32::from(ip) & mask(*len) == u32::from(*net))
            .map(|e| e.2)
    }

    /// The table: (network, prefix length, Ethernet address), most specific first.
    pub fn entries(&self) -> &[(Ipv4Addr, u8, EthAddr)] {
        &self.entries
    }
}

// ARPResponder makes replies (its model's run-time case): it declares nothing (`Element::declared`).
impl Element for ARPResponder {
    fn class_name(&self) -> &'static str {
        "ARPResponder"
    }

    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }

    fn push(&mut self, _port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        let request = parse_arp(packet.data()).filter(|a| a.op == arp::operation::REQUEST);
        let is_request = request.is_some();
        let reply = request.and_then(|a| {
            let eth = self.lookup(Ipv4Addr::from(a.tpa))?;
            Some(arp_frame(
                a.sha,
                eth.0,
                arp::operation::REPLY,
                eth.0,
                a.tpa,
                a.sha,
                a.spa,
            ))
        });
        match reply {
            Some(frame) => {
                let mut q = cx.new_packet(&frame, &packet.meta);
                q.set_mac_header(0);
                self.answered += 1;
                cx.drop(packet, ARPResponderReason::Answered.into());
                cx.emit(0, q);
                Verdict::Done
            }
            None if self.has_out1 => Verdict::Out(1, packet),
            None if is_request => Verdict::Drop(packet, ARPResponderReason::NotOurAddress.into()),
            None => Verdict::Drop(packet, ARPResponderReason::NotArpRequest.into()),
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("answered", self.answered)]
    }

    /// An Ethernet/IPv4 ARP request (what `parse_arp` checks: 42 bytes, EtherType 0x0806,
    /// hardware type 1, protocol 0x0800; operation 1) whose target is one of the entries'
    /// addresses is answered with a new packet: left to the element. Every other frame goes
    /// to output 1, or is dropped when output 1 is not connected (`not-our-address` for a
    /// request for another address, `not-arp-request` otherwise).
    fn model(&self) -> Option<Model> {
        let raw = |offset: u16, len: u8| Field::Raw { offset, len };
        let targets = self
            .entries
            .iter()
            .fold(FieldSet::empty(), |set, (net, len, _)| {
                let lo = u32::from(*net);
                let hi = lo | !mask(*len);
                set.union(&FieldSet::range(u128::from(lo), u128::from(hi)))
            });
        let any_request = Filter::any()
            .with(
                Field::FrameLen,
                FieldSet::range(ARP_FRAME_LEN as u128, 0xffff),
            )
            .with(Field::EtherType, FieldSet::single(ethertype::ARP.into()))
            .with(raw(14, 2), FieldSet::single(arp::HARDWARE_ETHERNET.into()))
            .with(raw(16, 2), FieldSet::single(ethertype::IPV4.into()))
            .with(raw(20, 2), FieldSet::single(arp::operation::REQUEST.into()));
        let request = any_request.clone().with(raw(38, 4), targets);
        let (not_ours, other) = if self.has_out1 {
            (Outcome::Out(1), Outcome::Out(1))
        } else {
            (
                Outcome::Drop(ARPResponderReason::NotOurAddress.into()),
                Outcome::Drop(ARPResponderReason::NotArpRequest.into()),
            )
        };
        Some(Model::new(vec![
            Case::new(request, Outcome::Runtime),
            Case::new(any_request, not_ours),
            Case::new(Filter::any(), other),
        ]))
    }
}
