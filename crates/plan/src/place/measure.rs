//! What placement measures: the cost of handing packets from one core to another
//! ([`handoff_ns`]), and the chain's profile (ns per packet per element, packets per edge)
//! turned into the element graph ([`Profile`], [`profile`]).

use super::model::{Edge, Graph, Node};
use serde::Serialize;
use std::sync::mpsc;
use std::time::Instant;

/// Packets per batch in the handoff measurement (the executor's default batch).
const BATCH: usize = 32;
/// Bytes per packet buffer handed over (a small frame's cache lines).
const FRAME: usize = 128;

/// Measures the cost of passing packets between two threads pinned to two cores (the first
/// two cores `core_affinity` lists; unpinned when there are fewer): batches of [`BATCH`]
/// buffers of [`FRAME`] bytes go one way through a bounded channel, the receiver writes
/// each frame's first bytes (as a stage reading and rewriting headers does) and sends the
/// batch back for reuse, as a pipeline recycles its buffers. The same work done in one
/// thread is subtracted. Returns ns per packet (the best of `rounds` rounds of `packets`
/// packets), at least 0.
pub fn handoff_ns(packets: usize, rounds: usize) -> f64 {
    let batches = packets.div_ceil(BATCH).max(1);
    let n = (batches * BATCH) as f64;
    let mut best = f64::INFINITY;
    for _ in 0..rounds.max(1) {
        let local = local_pass(batches);
        let crossed = crossed_pass(batches);
        best = best.min((crossed - local).max(0.0) / n);
    }
    if best.is_finite() {
        best
    } else {
        0.0
    }
}

/// Writes the first bytes of every frame of `batch` (the receiver's touch).
#[inline]
fn touch(batch: &mut [Vec<u8>]) -> u64 {
    let mut sum = 0u64;
    for f in batch.iter_mut() {
        if let Some(b) = f.get_mut(..16) {
            for x in b.iter_mut() {
                *x = x.wrapping_add(1);
                sum = sum.wrapping_add(u64::from(*x));
            }
        }
    }
    sum
}

fn fresh_batch() -> Vec<Vec<u8>> {
    (0..BATCH).map(|_| vec![0u8; FRAME]).collect()
}

/// ns for `batches` batches touched in one thread.
fn local_pass(batches: usize) -> f64 {
    let mut b = fresh_batch();
    let t = Instant::now();
    let mut sum = 0u64;
    for _ in 0..batches {
        sum = sum.wrapping_add(touch(std::hint::black_box(&mut b)));
    }
    std::hint::black_box(sum);
    t.elapsed().as_nanos() as f64
}

/// ns for `batches` batches passed to a thread on another core and back.
fn crossed_pass(batches: usize) -> f64 {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let (to_rx, rx) = mpsc::sync_channel::<Vec<Vec<u8>>>(8);
    let (back_tx, back) = mpsc::sync_channel::<Vec<Vec<u8>>>(8);
    let second = cores.get(1).copied();
    let receiver = std::thread::spawn(move || {
        if let Some(c) = second {
            let _ = core_affinity::set_for_current(c);
        }
        let mut sum = 0u64;
        while let Ok(mut b) = rx.recv() {
            sum = sum.wrapping_add(touch(&mut b));
            if back_tx.send(b).is_err() {
                break;
            }
        }
        sum
    });
    // The sender runs on a thread of its own, pinned to the first core (the caller stays
    // unpinned).
    let first = cores.first().copied().filter(|_| second.is_some());
    let sender = std::thread::spawn(move || {
        if let Some(c) = first {
            let _ = core_affinity::set_for_current(c);
        }
        let mut spare: Vec<Vec<Vec<u8>>> = (0..4).map(|_| fresh_batch()).collect();
        let t = Instant::now();
        let mut sent = 0;
        let mut returned = 0;
        while returned < batches {
            let b = if sent < batches { spare.pop() } else { None };
            match b {
                Some(b) => {
                    if to_rx.send(b).is_err() {
                        break;
                    }
                    sent += 1;
                }
                None => match back.recv() {
                    Ok(b) => {
                        returned += 1;
                        spare.push(b);
                    }
                    Err(_) => break,
                },
            }
        }
        let ns = t.elapsed().as_nanos() as f64;
        drop(to_rx);
        ns
    });
    let ns = sender.join().unwrap_or(f64::INFINITY);
    let _ = receiver.join();
    ns
}

/// The ns two clock reads around nothing take (subtracted from every timed push).
pub fn clock_overhead_ns() -> f64 {
    let n = 20_000;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        let mut sum = 0u128;
        for _ in 0..n {
            let t0 = Instant::now();
            sum += std::hint::black_box(t0).elapsed().as_nanos();
        }
        std::hint::black_box(sum);
        // Each iteration is the pair of reads a timed push adds.
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    if best.is_finite() {
        best
    } else {
        0.0
    }
}

/// What an element did in the profiling run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ElementProfile {
    /// `nf/element`.
    pub name: String,
    /// Its Click class.
    pub class: String,
    /// Index of its NF.
    pub nf: usize,
    /// Packets pushed into it (timed pushes).
    pub packets: u64,
    /// Its measured ns per packet, clock reads subtracted.
    pub ns_per_packet: f64,
    /// Whether an accelerator could run it ([`offloadable`]).
    pub offloadable: bool,
}

/// The profiling run of a chain over a trace: per element ns per packet, packets per edge,
/// and the chain's untimed rate on one core.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    /// The NFs' names, by index.
    pub nfs: Vec<String>,
    /// Per element (global index).
    pub elements: Vec<ElementProfile>,
    /// (from, to, packets): traffic along element edges and links between NFs.
    pub edges: Vec<(usize, usize, u64)>,
    /// Chain input packets of the timed run.
    pub input_packets: u64,
    /// The untimed run on one core: ns per chain input packet (its fastest pass over the
    /// trace: the one other load on the machine disturbed least).
    pub one_core_ns: f64,
    /// ns subtracted per timed push (the clock's own cost).
    pub clock_ns: f64,
}

/// Whether NFCompass would offload an element of `class` to an accelerator: the lookups of
/// forwarding, the payload scan of DPI and IDS, the cipher of IPsec (§III.A.2).
pub fn offloadable(class: &str) -> bool {
    class.contains("IPLookup")
        || class.contains("IPRoute")
        || class == "SnortIDS"
        || class.starts_with("IPsec")
        || class.starts_with("Esp")
}

/// Input records per entry, as [`chain::Executor::replay`] takes them.
pub type Inputs = [((usize, usize), Vec<ports::pcap::Record>)];

/// Replays `inputs` through `ex` until at least `min_ns` have passed (at least once, at
/// most 1000 passes); returns (packets, ns, the fastest pass's ns per packet).
fn replay_for(ex: &mut chain::Executor, inputs: &Inputs, min_ns: u128) -> (u64, u128, f64) {
    let t = Instant::now();
    let mut packets = 0;
    let mut best = f64::INFINITY;
    for _ in 0..1000 {
        let t0 = Instant::now();
        let n = ex.replay(inputs, 1);
        if n > 0 {
            best = best.min(t0.elapsed().as_nanos() as f64 / n as f64);
        }
        packets += n;
        if n == 0 || t.elapsed().as_nanos() >= min_ns {
            break;
        }
    }
    (packets, t.elapsed().as_nanos(), best)
}

/// Profiles a chain over `inputs`: `plain` (a naive executor) runs the trace untimed for the
/// one-core rate, `timed` (another naive executor of the same chain) runs it with every
/// element's push timed ([`chain::Executor::profile_elements`]). Each replays the trace
/// until `min_ms` milliseconds have passed (at least once).
pub fn profile(
    plain: &mut chain::Executor,
    timed: &mut chain::Executor,
    inputs: &Inputs,
    min_ms: u64,
) -> Profile {
    let min_ns = u128::from(min_ms) * 1_000_000;
    let (_, _, plain_best) = replay_for(plain, inputs, min_ns);
    let clock_ns = clock_overhead_ns();
    timed.profile_elements();
    let (input_packets, _, _) = replay_for(timed, inputs, min_ns);
    let summary = timed.summary();
    let n = timed.element_count();
    let (ns, calls) = timed
        .element_times()
        .map(|(a, b)| (a.to_vec(), b.to_vec()))
        .unwrap_or_else(|| (vec![0; n], vec![0; n]));
    let mut elements = Vec::with_capacity(n);
    let mut edges = Vec::new();
    for g in 0..n {
        let nf = timed.element_nf(g) as usize;
        let class = timed.element(g).class_name().to_string();
        let k = calls.get(g).copied().unwrap_or(0);
        let t = ns.get(g).copied().unwrap_or(0) as f64;
        let per = if k > 0 {
            (t / k as f64 - clock_ns).max(0.0)
        } else {
            0.0
        };
        let local = g - timed.global(nf, 0) as usize;
        let es = summary.nfs.get(nf).and_then(|s| s.elements.get(local));
        elements.push(ElementProfile {
            name: timed.element_name(g),
            offloadable: offloadable(&class),
            class,
            nf,
            packets: es.map(|e| e.input).unwrap_or(0),
            ns_per_packet: per,
        });
        match timed.place(g) {
            chain::exec::Place::Link(target) => {
                let c = es.map(|e| e.input).unwrap_or(0);
                if c > 0 {
                    edges.push((g, target as usize, c));
                }
            }
            chain::exec::Place::Inner => {
                for port in 0..timed.outputs(g) {
                    let Some((_, to, _)) = timed.edge(g, port) else {
                        continue;
                    };
                    let c = es.and_then(|e| e.output.get(port)).copied().unwrap_or(0);
                    if c > 0 {
                        edges.push((g, to as usize, c));
                    }
                }
            }
            _ => {}
        }
    }
    Profile {
        nfs: timed.nfs().iter().map(|n| n.name.clone()).collect(),
        elements,
        edges,
        input_packets,
        one_core_ns: if plain_best.is_finite() {
            plain_best
        } else {
            0.0
        },
        clock_ns,
    }
}

impl Profile {
    /// The element graph: each element's cost per chain input packet is its share of the
    /// timed work (ns per packet × packets) scaled so all of them add up to the untimed run's
    /// ns per packet (the executor's own work between elements spread in proportion);
    /// traffic per edge per input packet.
    pub fn graph(&self) -> Graph {
        let inputs = self.input_packets.max(1) as f64;
        let work: Vec<f64> = self
            .elements
            .iter()
            .map(|e| e.ns_per_packet * e.packets as f64 / inputs)
            .collect();
        let total: f64 = work.iter().sum();
        let reached = self
            .elements
            .iter()
            .filter(|e| e.packets > 0)
            .count()
            .max(1);
        let nodes = self
            .elements
            .iter()
            .zip(&work)
            .map(|(e, &w)| Node {
                name: e.name.clone(),
                nf: e.nf,
                cpu_ns: if total > 0.0 {
                    w / total * self.one_core_ns
                } else if e.packets > 0 {
                    self.one_core_ns / reached as f64
                } else {
                    0.0
                },
                packets: e.packets as f64 / inputs,
                offloadable: e.offloadable,
            })
            .collect();
        let edges = self
            .edges
            .iter()
            .map(|&(from, to, c)| Edge {
                from,
                to,
                packets: c as f64 / inputs,
            })
            .collect();
        Graph {
            nodes,
            edges,
            nfs: self.nfs.clone(),
        }
    }
}
