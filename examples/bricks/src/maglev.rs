//! `MaglevNF`: Google's Maglev load balancer (Eisenbud et al., NSDI 2016) written with
//! operators, after NetBricks' Listing 3.
//!
//! ```text
//! MaglevNF(BACKEND NAME IP MAC, BACKEND ..., [SCHEDULE FILE], [TIMEOUT T], [REAP_INTERVAL T],
//!          [SEED N], [CAPACITY N], [BOUND K], [SPLIT BOOL])
//! ```
//!
//! The pipeline, one replica per worker:
//!
//! 1. **control plane** ([`Control`]): the lookup table's one writer, in bounded-inconsistency
//!    state ([`operators::state::bounded`]). Backend failures and recoveries (the `SCHEDULE`
//!    file, applied before the chain input packet of each event's index, or
//!    [`Control::set`] from a program) each make one update: the table is rebuilt by the
//!    Maglev paper's population (§3.4) over the backends that are up. Readers see it within
//!    `BOUND` updates (default 1: at once);
//! 2. `parse` Ethernet and IPv4 (checked, then handed back as payload);
//! 3. **flow cache** ([`FlowCache`], no external access: [`Local`]): the connection entries of
//!    this worker. A flow's first packet takes the table entry `flow_hash mod M`'s backend
//!    and gets an entry; later packets follow the entry while it lives (`TIMEOUT` of virtual
//!    time after the flow's last packet); entries expire and are reaped every `REAP_INTERVAL`;
//!    when the table says a backend went down, its entries go. A reply (input 1) is matched to
//!    its flow's entry. The packet's group is its backend (or "reply");
//! 4. `group_by` the backend: branch `i` rewrites the destination to backend `i`'s IP and MAC
//!    (one branch per backend, merged into output 0 as the Click element has it, or with
//!    `SPLIT true` Listing 3's one output per backend: output `i` for backend `i`); the reply
//!    branch puts the service address back as source and sends the packet out of output 1
//!    (output N with `SPLIT`).
//!
//! **Same as `Maglev`.** Configured alike (e.g. `examples/speedybox/lb.click`), `MaglevNF`
//! forwards, rewrites and drops exactly as the `Maglev` element, with the same counters and
//! `state_dump` (the test `tests/maglev.rs` pushes one trace through both). It shares the
//! element's table and hashes (`elements::nfs::maglev`): FuseBox's Maglev hashes backend names
//! and flows with FNV-1a and splitmix64 where the paper leaves the hash functions open, and
//! the element is FuseBox's reference. Differences: frames that are not Ethernet + IPv4 are
//! dropped by the parses (`parse-ethernet`, `parse-ipv4`; `Maglev` says `bad-ip-header`) and
//! do not run the flow cache's reaping (behind `CheckIPHeader(14)`, as in `lb.click`, none
//! arrive); `BOUND` above 1 lets the flow cache see a table change up to `BOUND − 1`
//! updates late, which the element never does.

use elements::hash::{fnv1a, FNV_BASIS};
use elements::model::{Field, IpAnchor};
use elements::nfs::maglev::{backend_hashes, flow_hash, parse_schedule, populate, Event};
use elements::nfs::maglev::{DEFAULT_CAPACITY, TABLE_SIZE};
use elements::nfs::MaglevReason;
use elements::reason::FlowReason;
use elements::record::Declared;
use elements::registry::{Doc, ElementClass};
use elements::rewriter::{rewrite_ipv4, FlowId};
use elements::{Args, BuildCtx, ConfigError, Element};
use operators::nf::class;
use operators::state::{bounded, Local, Reader, Writer};
use operators::{pipe, Cx, Ethernet, Input, Ipv4, OperatorNf, Pkt, Raw, Stage};
use packet::{Ipv4FlowKey as FlowKey, Ports};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use wire::ethernet::Address;
use wire::ip::protocol::{TCP, UDP};

/// The class name.
pub const NAME: &str = "MaglevNF";
const NONE: u16 = u16::MAX;

/// A backend: name, address, MAC.
#[derive(Debug, Clone)]
pub struct Backend {
    /// Its name (hashed into its preference list).
    pub name: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// Its MAC.
    pub mac: [u8; 6],
}

/// What the control plane publishes to the workers.
#[derive(Debug, Clone)]
pub struct Table {
    /// The backend of each of the [`TABLE_SIZE`] entries (`u16::MAX`: none is up).
    pub entries: Vec<u16>,
    /// Whether each backend is up.
    pub up: Vec<bool>,
    /// How often each backend went down (a worker drops a backend's flows when it changes).
    pub downs: Vec<u64>,
    /// Rebuilds since the first.
    pub rebuilds: u64,
}

/// The control plane: the table's one writer and the backend events still to come.
#[derive(Debug)]
pub struct Control {
    prefs: Vec<(usize, usize)>,
    table: Writer<Table>,
    events: Vec<Event>,
    next: usize,
}

impl Control {
    /// The table over `backends` (all up), published every `bound` updates, and a reader of
    /// it for each worker to clone; `events` are the scheduled failures and recoveries.
    pub fn new(
        backends: &[Backend],
        seed: u64,
        bound: u64,
        events: Vec<Event>,
    ) -> (Control, Reader<Table>) {
        let prefs: Vec<_> = backends
            .iter()
            .map(|b| backend_hashes(&b.name, seed, TABLE_SIZE))
            .collect();
        let up = vec![true; backends.len()];
        let table = Table {
            entries: populate(&prefs, &up, TABLE_SIZE),
            up,
            downs: vec![0; backends.len()],
            rebuilds: 0,
        };
        let (table, reader) = bounded(bound, table);
        (
            Control {
                prefs,
                table,
                events,
                next: 0,
            },
            reader,
        )
    }

    /// One update: backend `b` goes up or down and the table is rebuilt (nothing happens
    /// when it already is).
    pub fn set(&mut self, b: usize, up: bool) {
        if self.table.get().up.get(b) != Some(&!up) {
            return;
        }
        let prefs = &self.prefs;
        self.table.update(|t| {
            t.up[b] = up;
            t.downs[b] += u64::from(!up);
            t.entries = populate(prefs, &t.up, TABLE_SIZE);
            t.rebuilds += 1;
        });
    }

    /// Applies the events due before chain input `index`.
    fn catch_up(&mut self, index: u64) {
        while let Some(ev) = self
            .events
            .get(self.next)
            .copied()
            .filter(|e| e.index <= index)
        {
            self.next += 1;
            self.set(ev.backend, ev.up);
        }
    }
}

/// A packet's metadata in the NF: its input, its flow, and where it goes.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    input: usize,
    key: FlowKey,
    hl: usize,
    /// The backend, or the backend count for a reply.
    group: usize,
    /// A reply's new source: the service address its flow was sent to.
    vip: Ipv4Addr,
}

/// A connection entry: the flow's backend and its last packet's time.
#[derive(Debug, Clone, Copy)]
struct Conn {
    backend: u16,
    last: u64,
}

/// One worker's flows and counters (see the module documentation).
#[derive(Debug)]
pub struct Flows {
    backends: Vec<Backend>,
    stat_names: Vec<&'static str>,
    table: Reader<Table>,
    downs: Vec<u64>,
    seed: u64,
    timeout: u64,
    reap_interval: u64,
    capacity: usize,
    next_reap: Option<u64>,
    conns: HashMap<FlowKey, Conn>,
    /// Reply 5-tuple → the flow it answers.
    replies_of: HashMap<FlowKey, FlowKey>,
    /// Per backend: packets forwarded, replies.
    counts: Vec<(u64, u64)>,
    /// Forwarded, replies, evicted, untracked.
    totals: [u64; 4],
}

/// The flow cache operator: the worker's [`Flows`], no external access.
#[derive(Debug)]
pub struct FlowCache(pub Local<Flows>);

type P = Pkt<(Ethernet, Raw), Route>;

impl Flows {
    /// A worker's empty flow cache over `backends`, reading the control plane's `table` (of a
    /// [`Control`] over the same backends);
    /// `times`: the entries' idle timeout and the reaping interval (ns of virtual time).
    pub fn new(
        backends: &[Backend],
        table: Reader<Table>,
        seed: u64,
        times: [u64; 2],
        capacity: usize,
    ) -> Flows {
        let n = backends.len();
        Flows {
            // One name per backend for the whole run: counter names are 'static.
            stat_names: backends
                .iter()
                .map(|b| &*Box::leak(format!("packets_{}", b.name).into_boxed_str()))
                .collect(),
            backends: backends.to_vec(),
            table,
            downs: vec![0; n],
            seed,
            timeout: times[0],
            reap_interval: times[1],
            capacity,
            next_reap: None,
            conns: HashMap::new(),
            replies_of: HashMap::new(),
            counts: vec![(0, 0); n],
            totals: [0; 4],
        }
    }

    fn reply_key(&self, k: &FlowKey, b: u16) -> Option<FlowKey> {
        let ip = self.backends.get(usize::from(b))?.ip;
        Some(FlowKey {
            protocol: k.protocol,
            src: ip,
            src_port: k.dst_port,
            dst: k.src,
            dst_port: k.src_port,
        })
    }

    fn remove(&mut self, k: &FlowKey) {
        if let Some(c) = self.conns.remove(k) {
            if let Some(r) = self
                .reply_key(k, c.backend)
                .filter(|r| self.replies_of.get(r) == Some(k))
            {
                self.replies_of.remove(&r);
            }
        }
    }

    fn remove_where(&mut self, gone: impl Fn(&Conn) -> bool) -> u64 {
        let keys: Vec<FlowKey> = self
            .conns
            .iter()
            .filter(|(_, c)| gone(c))
            .map(|(k, _)| *k)
            .collect();
        keys.iter().for_each(|k| self.remove(k));
        keys.len() as u64
    }

    /// Takes the table's last snapshot: the flows of backends that went down go.
    fn sync(&mut self) {
        if !self.table.refresh() {
            return;
        }
        for b in 0..self.downs.len() {
            let d = self.table.held().downs.get(b).copied().unwrap_or(0);
            if d != self.downs[b] {
                self.downs[b] = d;
                self.totals[2] += self.remove_where(|c| usize::from(c.backend) == b);
            }
        }
    }

    fn reap(&mut self, now: u64) {
        match self.next_reap {
            _ if self.reap_interval == 0 => return,
            Some(t) if now >= t => {
                let timeout = self.timeout;
                self.remove_where(|c| now >= c.last.saturating_add(timeout));
            }
            Some(_) => return,
            None => {}
        }
        self.next_reap = Some(now.saturating_add(self.reap_interval));
    }

    /// A forward packet's backend.
    fn forward(&mut self, key: FlowKey, now: u64) -> Result<usize, &'static str> {
        if let Some(c) = self.conns.get(&key) {
            if now >= c.last.saturating_add(self.timeout) {
                self.remove(&key);
            }
        }
        let b = match self.conns.get_mut(&key) {
            Some(c) => {
                c.last = now;
                c.backend
            }
            None => {
                let b = self.table.held().entries[flow_hash(&key, self.seed, TABLE_SIZE)];
                if b == NONE {
                    return Err(MaglevReason::NoBackend.into());
                }
                if self.conns.len() >= self.capacity {
                    self.totals[3] += 1;
                } else {
                    self.conns.insert(
                        key,
                        Conn {
                            backend: b,
                            last: now,
                        },
                    );
                    if let Some(r) = self.reply_key(&key, b) {
                        self.replies_of.insert(r, key);
                    }
                }
                b
            }
        };
        if let Some(c) = self.counts.get_mut(usize::from(b)) {
            c.0 += 1;
        }
        self.totals[0] += 1;
        Ok(usize::from(b))
    }

    /// A reply's service address.
    fn reply(&mut self, key: FlowKey, now: u64) -> Result<Ipv4Addr, &'static str> {
        let flow = *self
            .replies_of
            .get(&key)
            .ok_or(MaglevReason::NoConnection.as_str())?;
        match self.conns.get(&flow) {
            Some(c) if now < c.last.saturating_add(self.timeout) => {
                if let Some(n) = self.counts.get_mut(usize::from(c.backend)) {
                    n.1 += 1;
                }
                self.totals[1] += 1;
                Ok(flow.dst)
            }
            _ => {
                self.remove(&flow);
                Err(MaglevReason::NoConnection.into())
            }
        }
    }
}

/// The flow of a TCP or UDP first fragment with its ports (`ip`: from the IPv4 header on).
fn classify(ip: &[u8]) -> Result<(FlowKey, usize), &'static str> {
    let v = packet::Ipv4Flow::parse(ip).ok_or("parse-ipv4")?;
    let key = v.key(Ports::TcpUdp);
    match (key.protocol, v.first_fragment(), v.transport_len()) {
        (TCP | UDP, false, _) => Err(FlowReason::Fragment.into()),
        (TCP, true, 20..) | (UDP, true, 8..) => Ok((key, v.header_len())),
        (TCP | UDP, true, _) => Err(FlowReason::ShortTransport.into()),
        _ => Err(FlowReason::NotTcpUdp.into()),
    }
}

impl Stage<P> for FlowCache {
    type Out = P;
    fn run(&mut self, mut p: P, cx: &mut Cx) -> Option<P> {
        let (f, now) = (self.0.get_mut(), cx.now.0);
        f.sync();
        f.reap(now);
        let verdict = classify(p.payload()).and_then(|(key, hl)| {
            let m = p.meta_mut();
            (m.key, m.hl) = (key, hl);
            match m.input {
                0 => f.forward(key, now).map(|b| m.group = b),
                _ => f
                    .reply(key, now)
                    .map(|vip| (m.group, m.vip) = (f.backends.len(), vip)),
            }
        });
        match verdict {
            Ok(()) => Some(p),
            Err(reason) => {
                cx.drop(p, reason);
                None
            }
        }
    }

    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        let f = self.0.get();
        out.extend(f.stat_names.iter().zip(&f.counts).map(|(n, c)| (*n, c.0)));
        let t = f.table.held();
        let [fw, re, ev, un] = f.totals;
        out.extend([
            ("forwarded", fw),
            ("replies", re),
            ("rebuilds", t.rebuilds),
            ("evicted", ev),
        ]);
        out.extend([("connections", f.conns.len() as u64), ("untracked", un)]);
    }

    /// As `Maglev`'s: the table, each backend, then the connection entries by flow.
    fn state(&self, out: &mut Vec<String>) {
        let f = self.0.get();
        let t = f.table.held();
        let digest = t
            .entries
            .iter()
            .fold(FNV_BASIS, |h, e| fnv1a(h, &e.to_le_bytes()));
        out.push(format!(
            "table size {} digest {digest:016x} rebuilds {}",
            t.entries.len(),
            t.rebuilds
        ));
        for (i, b) in f.backends.iter().enumerate() {
            let owned = t.entries.iter().filter(|&&e| usize::from(e) == i).count();
            let state = if t.up.get(i) == Some(&true) {
                "up"
            } else {
                "down"
            };
            let (pk, re) = f.counts[i];
            out.push(format!(
                "backend {} {} {state} entries {owned} packets {pk} replies {re}",
                b.name, b.ip
            ));
        }
        let mut conns: Vec<_> = f.conns.iter().collect();
        conns.sort_by_key(|(k, _)| **k);
        for (k, c) in conns {
            let name = f
                .backends
                .get(usize::from(c.backend))
                .map_or("?", |b| b.name.as_str());
            out.push(format!("conn {k} => {name} last {}", c.last));
        }
    }
}

/// Rewrites a packet's destination to backend `b` (IP, checksums, MAC).
fn to_backend(b: Backend) -> impl FnMut(&mut P) + Send + 'static {
    move |p| {
        let Route { key, hl, .. } = *p.meta();
        let to = FlowId {
            saddr: key.src,
            sport: key.src_port,
            daddr: b.ip,
            dport: key.dst_port,
        };
        rewrite_ipv4(p.payload_mut(), hl, key.protocol, &to);
        p.header_mut().set_dst_addr(Address(b.mac));
    }
}

/// The NF's pipeline over `backends`: `control` applies the schedule in line (a program can
/// instead keep the control plane and give the workers readers of its table); `split`: one
/// output per backend (see [`outputs`]).
pub fn pipeline(
    backends: Vec<Backend>,
    mut control: Option<Control>,
    flows: Flows,
    split: bool,
) -> impl Stage<Pkt<Raw, Input>, Out = impl operators::nf::Leave> + 'static {
    let n = backends.len();
    let key = FlowKey {
        protocol: 0,
        src: Ipv4Addr::UNSPECIFIED,
        src_port: 0,
        dst: Ipv4Addr::UNSPECIFIED,
        dst_port: 0,
    };
    let mut groups = pipe::<Raw, Input>()
        .transform(move |p| {
            control
                .iter_mut()
                .for_each(|c| c.catch_up(p.anno().input_index))
        })
        .map(move |p| {
            let input = p.meta().0;
            p.with_meta(Route {
                input,
                key,
                hl: 0,
                group: 0,
                vip: Ipv4Addr::UNSPECIFIED,
            })
        })
        .parse::<Ethernet>()
        .parse::<Ipv4>()
        .deparse()
        .then(FlowCache(Local::new(flows)))
        .group_by(n + 1, |p| p.meta().group);
    // Backend `i`'s packets leave by output 0 (as `Maglev`'s), or by output `i` with SPLIT
    // (Listing 3's one output per backend); replies by output 1, or `n` with SPLIT.
    for (i, b) in backends.into_iter().enumerate() {
        groups = match split {
            false => groups.branch(i, move |g| g.transform(to_backend(b))),
            true => groups.branch(i, move |g| g.transform(to_backend(b)).send(i)),
        };
    }
    let replies = if split { n } else { 1 };
    groups
        .branch(n, |g| {
            g.transform(|p| {
                let Route { key, hl, vip, .. } = *p.meta();
                let back = FlowId {
                    saddr: vip,
                    sport: key.src_port,
                    daddr: key.dst,
                    dport: key.dst_port,
                };
                rewrite_ipv4(p.payload_mut(), hl, key.protocol, &back);
            })
            .send(replies)
        })
        .merge()
        .into_stage()
}

/// How many outputs the NF has over `n` backends: 2 (forwarded, replies), or with `split`
/// `n + 1` (backend `i`'s packets on output `i`, replies on output `n`).
pub fn outputs(n: usize, split: bool) -> usize {
    if split {
        n + 1
    } else {
        2
    }
}

/// Builds the NF from its arguments (those of `Maglev`, and `BOUND K`, `SPLIT BOOL`).
fn build(
    name: &'static str,
    args: &Args,
    bcx: &BuildCtx<'_>,
) -> Result<Box<dyn Element>, ConfigError> {
    let err = |e: ConfigError| ConfigError::new(format!("{name}: {}", e.message));
    args.check(
        0,
        &[
            "BACKEND",
            "SCHEDULE",
            "TIMEOUT",
            "REAP_INTERVAL",
            "SEED",
            "CAPACITY",
            "BOUND",
            "SPLIT",
        ],
    )
    .map_err(err)?;
    let uint = |k: &str, default: u64| {
        args.keyword(k)
            .map_or(Ok(default), |v| elements::args::parse_uint(v, k))
    };
    let secs = |k: &str| {
        args.keyword(k)
            .map_or(Ok(60_000_000_000), |v| elements::args::parse_seconds(v, k))
    };
    let (seed, bound) = (
        uint("SEED", 0).map_err(err)?,
        uint("BOUND", 1).map_err(err)?,
    );
    let capacity = usize::try_from(uint("CAPACITY", DEFAULT_CAPACITY as u64).map_err(err)?)
        .unwrap_or(usize::MAX);
    let (timeout, reap_interval) = (
        secs("TIMEOUT").map_err(err)?,
        secs("REAP_INTERVAL").map_err(err)?,
    );
    let mut backends: Vec<Backend> = Vec::new();
    for a in args
        .all()
        .iter()
        .filter(|a| a.keyword.as_deref() == Some("BACKEND"))
    {
        let [name, ip, mac] = a.value.split_whitespace().collect::<Vec<_>>()[..] else {
            return Err(ConfigError::new(format!(
                "{NAME}: expected `BACKEND NAME IP MAC`, found `BACKEND {}`",
                a.value
            )));
        };
        if backends.iter().any(|b| b.name == name) || backends.len() + 1 >= usize::from(NONE) {
            return Err(ConfigError::new(format!(
                "{NAME}: backend `{name}`: declared twice or too many"
            )));
        }
        let (ip, mac) = (
            bcx.names.ipv4(ip).map_err(err)?,
            bcx.names.eth(mac).map_err(err)?.0,
        );
        backends.push(Backend {
            name: name.to_string(),
            ip,
            mac,
        });
    }
    if backends.is_empty() {
        return Err(ConfigError::new(format!(
            "{NAME}: expected at least one `BACKEND NAME IP MAC`"
        )));
    }
    let events = match args.keyword("SCHEDULE").map(elements::args::unquote) {
        Some(f) => {
            let (written, joined) = (std::path::PathBuf::from(&f), bcx.base_dir.join(&f));
            let path = if joined.exists() || !written.exists() {
                joined
            } else {
                written
            };
            let text = std::fs::read_to_string(&path).map_err(|e| {
                ConfigError::new(format!(
                    "{NAME}: SCHEDULE: cannot read `{}`: {e}",
                    path.display()
                ))
            })?;
            parse_schedule(&text, &path.display().to_string(), |n| {
                backends.iter().position(|b| b.name == n)
            })?
        }
        None => Vec::new(),
    };
    let split = args
        .keyword("SPLIT")
        .map_or(Ok(false), |v| elements::args::parse_bool(v, "SPLIT"))
        .map_err(err)?;
    let n = backends.len();
    let (control, table) = Control::new(&backends, seed, bound, events);
    let flows = Flows::new(&backends, table, seed, [timeout, reap_interval], capacity);
    let nf = OperatorNf::<_, Input>::new(
        name,
        outputs(n, split),
        pipeline(backends, Some(control), flows, split),
    )
    .inputs(2)
    .with_declared(declared());
    Ok(Box::new(nf))
}

/// What the NF declares for the planner: as `Maglev` (IPv4 header at 14, as its pipeline
/// parses it): the flow read, the destination (forward) or source (replies) address and the
/// Ethernet destination written with both checksums, unbalanced packets dropped,
/// connections kept.
pub fn declared() -> Declared {
    Declared {
        sets_headers: true,
        ip_at: IpAnchor::Data(14),
        writes: vec![Field::IpDst, Field::IpSrc, Field::EthDst],
        ip_checksum: true,
        l4_checksum: true,
        drops: true,
        stateful: true,
        ..Declared::default()
    }
    .read(&[Field::EtherType])
    .read(&Declared::FLOW)
}

/// The registry entry.
pub const CLASS: ElementClass = class(
    NAME,
    build,
    Doc::new(
        "BACKEND NAME IP MAC, ... [, SCHEDULE FILE, TIMEOUT T, REAP_INTERVAL T, SEED N, CAPACITY N, BOUND K, SPLIT BOOL]",
        "Maglev written with operators (examples/bricks, NetBricks' Listing 3): the lookup table \
         in bounded-inconsistency state, a flow cache per worker, group_by the backend; \
         behaves as Maglev.",
        "BACKEND a 10.0.1.1 02:00:00:00:01:01",
    )
    .drops(&[MaglevReason::TEXTS, &["parse-ethernet", "parse-ipv4"], FlowReason::TEXTS]),
);
