//! What a run did: per-NF and per-element counters, exits, and the accounting check
//! (in + created = out + drops + held).

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Counters of one element.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ElementSummary {
    /// Element name.
    pub name: String,
    /// Click class.
    pub class: String,
    /// Packets pushed into it.
    pub input: u64,
    /// Packets sent out of each output port.
    pub output: Vec<u64>,
    /// Drops by reason.
    pub drops: BTreeMap<String, u64>,
    /// Element-specific counters.
    pub stats: BTreeMap<String, u64>,
    /// Packets it holds at the end.
    pub held: u64,
}

/// Counters of one NF.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NfSummary {
    /// NF name.
    pub name: String,
    /// Packets that entered it (from inputs, links and reflection).
    pub input: u64,
    /// Packets that left it (through links and exits).
    pub output: u64,
    /// Packets its elements created (copies, fragments, ARP queries, ICMP errors).
    pub created: u64,
    /// Packets it dropped.
    pub dropped: u64,
    /// Packets it still holds (ARP queues).
    pub held: u64,
    /// Whether input + created = output + dropped + held.
    pub balanced: bool,
    /// Drops by reason.
    pub drops: BTreeMap<String, u64>,
    /// Per-element counters, in declaration order.
    pub elements: Vec<ElementSummary>,
}

/// Packets that left by one exit.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ExitSummary {
    /// `NF.IFACE` or the `ToDump` file.
    pub name: String,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// What one device port received and sent (live runs), by the interface it is bound to.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct PortSummary {
    /// `NF.IFACE=DEV`.
    pub name: String,
    /// Frames received (each entered the chain).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames the kernel dropped before FuseBox read them (receive ring overruns).
    pub rx_kernel_drops: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames that left the chain by this interface but found the transmit ring full
    /// (dropped by the port, `tx-full`): the exit's packets = sent + tx-full.
    pub tx_full: u64,
}

impl PortSummary {
    /// The summary of port counters `c` under `name`.
    pub fn new(name: impl Into<String>, c: &ports::port::PortCounters) -> PortSummary {
        PortSummary {
            name: name.into(),
            rx_packets: c.rx_packets,
            rx_bytes: c.rx_bytes,
            rx_kernel_drops: c.rx_kernel_drops,
            tx_packets: c.tx_packets,
            tx_bytes: c.tx_bytes,
            tx_full: c.tx_full,
        }
    }
}

/// Chain-wide totals.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Totals {
    /// Input packets.
    pub input: u64,
    /// Packets created (by elements, and replies made by `--reflect`).
    pub created: u64,
    /// Packets out of all exits.
    pub output: u64,
    /// Packets dropped.
    pub dropped: u64,
    /// Packets held at the end.
    pub held: u64,
    /// Drops by reason.
    pub drops: BTreeMap<String, u64>,
    /// Whether input + created = output + dropped + held.
    pub balanced: bool,
}

/// Everything a run reports.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// Per NF, in chain-file order.
    pub nfs: Vec<NfSummary>,
    /// Per exit.
    pub exits: Vec<ExitSummary>,
    /// Per device port (live runs; empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortSummary>,
    /// Totals.
    pub totals: Totals,
}

/// Adds the counts of `b` to those of `a`, key by key.
fn add_counts(a: &mut BTreeMap<String, u64>, b: &BTreeMap<String, u64>) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

impl Summary {
    /// The counters of several replicas of one chain (the workers of a run) added up: per
    /// NF, element, output port, drop reason, statistic, exit, device port (by name) and
    /// total; the accounting
    /// checks recomputed on the sums. `None` without parts.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a Summary>) -> Option<Summary> {
        let mut parts = parts.into_iter();
        let mut s = parts.next()?.clone();
        for o in parts {
            for (a, b) in s.nfs.iter_mut().zip(&o.nfs) {
                a.input += b.input;
                a.output += b.output;
                a.created += b.created;
                a.dropped += b.dropped;
                a.held += b.held;
                add_counts(&mut a.drops, &b.drops);
                for (x, y) in a.elements.iter_mut().zip(&b.elements) {
                    x.input += y.input;
                    for (p, q) in x.output.iter_mut().zip(&y.output) {
                        *p += q;
                    }
                    add_counts(&mut x.drops, &y.drops);
                    add_counts(&mut x.stats, &y.stats);
                    x.held += y.held;
                }
            }
            for (a, b) in s.exits.iter_mut().zip(&o.exits) {
                a.packets += b.packets;
                a.bytes += b.bytes;
            }
            for q in &o.ports {
                match s.ports.iter_mut().find(|p| p.name == q.name) {
                    Some(p) => {
                        p.rx_packets += q.rx_packets;
                        p.rx_bytes += q.rx_bytes;
                        p.rx_kernel_drops += q.rx_kernel_drops;
                        p.tx_packets += q.tx_packets;
                        p.tx_bytes += q.tx_bytes;
                        p.tx_full += q.tx_full;
                    }
                    None => s.ports.push(q.clone()),
                }
            }
            let (t, u) = (&mut s.totals, &o.totals);
            t.input += u.input;
            t.created += u.created;
            t.output += u.output;
            t.dropped += u.dropped;
            t.held += u.held;
            add_counts(&mut t.drops, &u.drops);
        }
        for n in &mut s.nfs {
            n.balanced = n.input + n.created == n.output + n.dropped + n.held;
        }
        let t = &mut s.totals;
        t.balanced = t.input + t.created == t.output + t.dropped + t.held;
        Some(s)
    }

    /// True when the chain and every NF balance.
    pub fn balanced(&self) -> bool {
        self.totals.balanced && self.nfs.iter().all(|n| n.balanced)
    }

    /// The summary as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// A human-readable report in the shape of the graph.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let t = &self.totals;
        let _ = writeln!(
            s,
            "chain: {} in + {} created = {} out + {} dropped + {} held  [{}]",
            t.input,
            t.created,
            t.output,
            t.dropped,
            t.held,
            if self.balanced() {
                "balanced"
            } else {
                "NOT BALANCED"
            }
        );
        for (r, n) in &t.drops {
            let _ = writeln!(s, "  drop {r:<24} {n}");
        }
        for x in &self.exits {
            let _ = writeln!(
                s,
                "exit {:<28} {} packets, {} bytes",
                x.name, x.packets, x.bytes
            );
        }
        for p in &self.ports {
            let _ = writeln!(
                s,
                "port {:<28} received {} ({} bytes, {} dropped by the kernel), sent {} ({} bytes), tx-full {}",
                p.name, p.rx_packets, p.rx_bytes, p.rx_kernel_drops, p.tx_packets, p.tx_bytes, p.tx_full
            );
        }
        for nf in &self.nfs {
            let _ = writeln!(
                s,
                "nf {}: {} in, {} created, {} out, {} dropped, {} held",
                nf.name, nf.input, nf.created, nf.output, nf.dropped, nf.held
            );
            for e in &nf.elements {
                let outs: Vec<String> = e.output.iter().map(u64::to_string).collect();
                let _ = write!(
                    s,
                    "  {:<28} {:<18} in {:>8}  out [{}]",
                    e.name,
                    e.class,
                    e.input,
                    outs.join(" ")
                );
                for (r, n) in e.drops.iter().filter(|(_, n)| **n > 0) {
                    let _ = write!(s, "  drop {r}={n}");
                }
                for (k, v) in e.stats.iter().filter(|(_, v)| **v > 0) {
                    let _ = write!(s, "  {k}={v}");
                }
                if e.held > 0 {
                    let _ = write!(s, "  held={}", e.held);
                }
                s.push('\n');
            }
        }
        s
    }
}
