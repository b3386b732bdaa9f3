//! The placement model: the element graph weighted by measured costs, the processors it is
//! placed on (kinds with their costs), and what a mapping of nodes to processors predicts.

use serde::Serialize;

/// A node of the graph: an element of an NF, an NF (the graph contracted to whole NFs), or a
/// virtual instance of an offloadable element (NFCompass' fine-grained expansion).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// `nf/element`, the NF's name, or `nf/element#k` for a virtual instance.
    pub name: String,
    /// The NF it belongs to (index into the chain's NFs).
    pub nf: usize,
    /// Work on one CPU core, in ns per chain input packet (ns per packet at the element
    /// times the packets reaching it per input packet).
    pub cpu_ns: f64,
    /// Packets reaching it per chain input packet.
    pub packets: f64,
    /// Whether an accelerator can run it (a lookup or payload scan, as NFCompass offloads).
    pub offloadable: bool,
}

/// A directed edge carrying traffic between two nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    /// Index of the sending node.
    pub from: usize,
    /// Index of the receiving node.
    pub to: usize,
    /// Packets along it per chain input packet.
    pub packets: f64,
}

/// A weighted graph of a chain's work.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Graph {
    /// The nodes.
    pub nodes: Vec<Node>,
    /// The edges (at most one per ordered pair; self-loops are ignored).
    pub edges: Vec<Edge>,
    /// The chain's NF names, by index ([`Node::nf`]).
    pub nfs: Vec<String>,
}

/// What an accelerator costs (NFCompass' GPU): every offloaded element is a kernel launched
/// once per batch, each packet goes to the device and back, and the element's own work runs
/// `speedup` times faster than on a core.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accelerator {
    /// ns per kernel launch (one per batch per offloaded element).
    pub launch_ns: f64,
    /// Packets per batch.
    pub batch: usize,
    /// ns per packet per offloaded element, beside its work (thread set-up, completion).
    pub per_packet_ns: f64,
    /// How many times faster than a core the element's work runs there.
    pub speedup: f64,
    /// ns per packet copied to or from the device (charged to both sides of a crossing).
    pub transfer_ns: f64,
}

/// What kind of processor a worker is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Kind {
    /// A CPU core: runs every element at its measured cost.
    Cpu,
    /// An accelerator: runs offloadable elements only.
    Accelerator(Accelerator),
}

/// A processor of the machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Processor {
    /// Its name in the plan (`core 0`, `gpu`).
    pub name: String,
    /// Its kind and costs.
    pub kind: Kind,
}

/// The processors a chain is placed on, and the measured cost of crossing between cores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// The processors.
    pub processors: Vec<Processor>,
    /// ns per packet handed from one core to another (charged to both cores).
    pub cross_ns: f64,
}

impl Machine {
    /// `n` CPU cores, crossing at `cross_ns` per packet.
    pub fn cores(n: usize, cross_ns: f64) -> Machine {
        Machine {
            processors: (0..n)
                .map(|i| Processor {
                    name: format!("core {i}"),
                    kind: Kind::Cpu,
                })
                .collect(),
            cross_ns,
        }
    }

    /// This machine with an accelerator added (the last processor).
    pub fn with_accelerator(mut self, name: &str, a: Accelerator) -> Machine {
        self.processors.push(Processor {
            name: name.to_string(),
            kind: Kind::Accelerator(a),
        });
        self
    }

    /// How many CPU cores it has.
    pub fn cpu_count(&self) -> usize {
        self.processors
            .iter()
            .filter(|p| p.kind == Kind::Cpu)
            .count()
    }

    /// What node `n` costs on processor `p`, in ns per chain input packet (infinite when
    /// `p` cannot run it).
    pub fn node_cost(&self, n: &Node, p: usize) -> f64 {
        match self.processors.get(p).map(|p| &p.kind) {
            Some(Kind::Cpu) => n.cpu_ns,
            Some(Kind::Accelerator(a)) if n.offloadable => {
                let batch = a.batch.max(1) as f64;
                n.packets * (a.per_packet_ns + a.launch_ns / batch)
                    + n.cpu_ns / a.speedup.max(f64::MIN_POSITIVE)
            }
            _ => f64::INFINITY,
        }
    }

    /// ns per packet that crossing from processor `p` to `q` costs each of them.
    pub fn cross_cost(&self, p: usize, q: usize) -> f64 {
        if p == q {
            return 0.0;
        }
        let accel = |i: usize| match self.processors.get(i).map(|p| &p.kind) {
            Some(Kind::Accelerator(a)) => Some(a.transfer_ns),
            _ => None,
        };
        match (accel(p), accel(q)) {
            (None, None) => self.cross_ns,
            (a, b) => a.unwrap_or(0.0).max(b.unwrap_or(0.0)),
        }
    }

    /// Each processor's time per chain input packet under `assign` (node → processor): its
    /// nodes' costs plus, for every edge it sends or receives across processors, the
    /// crossing cost times the edge's traffic.
    pub fn times(&self, g: &Graph, assign: &[usize]) -> Vec<f64> {
        let mut t = vec![0.0; self.processors.len()];
        for (v, n) in g.nodes.iter().enumerate() {
            let p = assign.get(v).copied().unwrap_or(0);
            if let Some(x) = t.get_mut(p) {
                *x += self.node_cost(n, p);
            }
        }
        for e in &g.edges {
            let (Some(&p), Some(&q)) = (assign.get(e.from), assign.get(e.to)) else {
                continue;
            };
            if p != q && p < t.len() && q < t.len() {
                let c = self.cross_cost(p, q) * e.packets;
                t[p] += c;
                t[q] += c;
            }
        }
        t
    }

    /// The pipeline's time per packet under `assign`: its slowest processor's.
    pub fn bottleneck(&self, g: &Graph, assign: &[usize]) -> f64 {
        self.times(g, assign).into_iter().fold(0.0, f64::max)
    }
}

/// Packets per second of a processor taking `ns` per packet (0 for an impossible mapping).
pub fn rate(ns: f64) -> f64 {
    if ns.is_finite() && ns > 0.0 {
        1e9 / ns
    } else if ns == 0.0 {
        f64::INFINITY
    } else {
        0.0
    }
}

impl Graph {
    /// Total CPU work per chain input packet: one core running everything to completion.
    pub fn total_cpu_ns(&self) -> f64 {
        self.nodes.iter().map(|n| n.cpu_ns).sum()
    }

    /// The undirected weight between each pair of nodes (both directions summed), as
    /// adjacency lists without self-loops.
    pub fn adjacency(&self) -> Vec<Vec<(usize, f64)>> {
        let mut adj: Vec<Vec<(usize, f64)>> = vec![Vec::new(); self.nodes.len()];
        let n = self.nodes.len();
        for e in &self.edges {
            if e.from == e.to || e.from >= n || e.to >= n || e.packets <= 0.0 {
                continue;
            }
            for (a, b) in [(e.from, e.to), (e.to, e.from)] {
                match adj[a].iter_mut().find(|(u, _)| *u == b) {
                    Some((_, w)) => *w += e.packets,
                    None => adj[a].push((b, e.packets)),
                }
            }
        }
        adj
    }

    /// The graph with nodes grouped by `group` (node index → group index, groups `0..k`):
    /// costs and traffic summed, edges inside a group dropped. A group is offloadable when
    /// all its nodes are; its name is `names[group]`.
    pub fn contract(&self, group: &[usize], names: &[String]) -> Graph {
        let k = names.len();
        let mut nodes: Vec<Node> = names
            .iter()
            .map(|name| Node {
                name: name.clone(),
                nf: 0,
                cpu_ns: 0.0,
                packets: 0.0,
                offloadable: true,
            })
            .collect();
        let mut seen = vec![false; k];
        for (v, n) in self.nodes.iter().enumerate() {
            let Some(&c) = group.get(v) else { continue };
            let Some(x) = nodes.get_mut(c) else { continue };
            if !seen[c] {
                x.nf = n.nf;
                x.packets = n.packets;
                seen[c] = true;
            }
            x.cpu_ns += n.cpu_ns;
            x.packets = x.packets.max(n.packets);
            x.offloadable &= n.offloadable;
        }
        for (c, x) in nodes.iter_mut().enumerate() {
            x.offloadable &= seen[c];
        }
        let mut edges: Vec<Edge> = Vec::new();
        for e in &self.edges {
            let (Some(&a), Some(&b)) = (group.get(e.from), group.get(e.to)) else {
                continue;
            };
            if a == b || a >= k || b >= k {
                continue;
            }
            match edges.iter_mut().find(|x| x.from == a && x.to == b) {
                Some(x) => x.packets += e.packets,
                None => edges.push(Edge {
                    from: a,
                    to: b,
                    packets: e.packets,
                }),
            }
        }
        Graph {
            nodes,
            edges,
            nfs: self.nfs.clone(),
        }
    }

    /// The graph contracted to whole NFs (what the executor can cut between).
    pub fn by_nf(&self) -> Graph {
        let group: Vec<usize> = self.nodes.iter().map(|n| n.nf).collect();
        let mut g = self.contract(&group, &self.nfs);
        for (i, n) in g.nodes.iter_mut().enumerate() {
            n.nf = i;
        }
        g
    }

    /// NFCompass' fine-grained expansion (§IV.C.1): every offloadable node becomes `1/step`
    /// virtual instances, each carrying `step` of its work and traffic, so that a partition
    /// of the instances between cores and an accelerator is an offload ratio in steps of
    /// `step` (NFCompass: 10 %). Returns the expanded graph and, per new node, the node it
    /// stands for.
    pub fn expand(&self, step: f64) -> (Graph, Vec<usize>) {
        let parts = if step > 0.0 && step < 1.0 {
            (1.0 / step).round().clamp(1.0, 100.0) as usize
        } else {
            1
        };
        let mut nodes = Vec::new();
        let mut origin = Vec::new();
        let mut copies: Vec<Vec<usize>> = Vec::with_capacity(self.nodes.len());
        for (v, n) in self.nodes.iter().enumerate() {
            let k = if n.offloadable { parts } else { 1 };
            let share = 1.0 / k as f64;
            let mut mine = Vec::with_capacity(k);
            for i in 0..k {
                mine.push(nodes.len());
                origin.push(v);
                nodes.push(Node {
                    name: if k == 1 {
                        n.name.clone()
                    } else {
                        format!("{}#{i}", n.name)
                    },
                    cpu_ns: n.cpu_ns * share,
                    packets: n.packets * share,
                    ..n.clone()
                });
            }
            copies.push(mine);
        }
        let mut edges = Vec::new();
        for e in &self.edges {
            let (Some(a), Some(b)) = (copies.get(e.from), copies.get(e.to)) else {
                continue;
            };
            // The traffic spreads evenly over the instances on both sides.
            let w = e.packets / (a.len() * b.len()) as f64;
            for &x in a {
                for &y in b {
                    edges.push(Edge {
                        from: x,
                        to: y,
                        packets: w,
                    });
                }
            }
        }
        (
            Graph {
                nodes,
                edges,
                nfs: self.nfs.clone(),
            },
            origin,
        )
    }
}
