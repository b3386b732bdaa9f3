//! `SnortIDS`: an intrusion detection element matching Snort 2.9 rules over packet payloads.
//!
//! ```text
//! SnortIDS(RULES path [, CONF snort.conf] [, ALERTS path] [, SKIP_UNSUPPORTED bool]
//!          [, VAR NAME VALUE …] [, ORDER "pass drop sdrop alert log"] [, RULES more.rules …]
//!          [, FLOW_CAPACITY N] [, ALERT_MEMORY N])
//! ```
//!
//! Ports `1/1`. Every packet leaves on output 0 unless a `drop`/`sdrop` rule matched it
//! (dropped, reason `ids-drop`).
//!
//! * **Arguments.** `RULES` (the first positional argument, or the keyword; repeat it to
//!   load several files, in order), `CONF` (a `snort.conf`: its `ipvar`/`portvar`/`var`,
//!   `config order:` and `config classification:` lines), `VAR NAME VALUE` (a variable set
//!   in the configuration, overriding the file's; repeatable, e.g.
//!   `VAR HOME_NET [10.0.0.0/8,192.168.0.0/16]`), `ORDER` (the action evaluation order,
//!   overriding `config order:`), `ALERTS` (a file the alert lines are written to, created
//!   when the element is built), `SKIP_UNSUPPORTED` (default false: a rule using an option
//!   this IDS does not implement is refused with the option's name, file, line and column;
//!   true: it is skipped and counted in `rules_skipped`, so
//!   `snort-community-rules/community-simple-content.rules` loads directly). Relative paths
//!   are read from the configuration's folder (or the working directory when not found
//!   there). The rule language is documented in [`rules`], matching in [`matcher`].
//! * **What is inspected.** IPv4 packets, found at the network-header annotation
//!   (`CheckIPHeader`, `MarkIPHeader`), else after an Ethernet header (type 0x0800, one
//!   802.1Q tag allowed), else at the start of the data when it holds an IPv4 header. The
//!   *payload* is what Snort 2.9 calls the packet's data, whatever the rule's protocol: the
//!   TCP payload (after the data offset), the UDP payload, what follows the 8-byte ICMP
//!   header, and for other protocols and later fragments what follows the IP header;
//!   bounded by the IP total length (Ethernet padding is not payload). *No stream
//!   reassembly and no defragmentation:* each packet is matched on its own. Later fragments
//!   have no ports: only `ip` rules apply to them. Packets that are not IPv4 or whose
//!   headers are cut short are forwarded uninspected and counted (`not_ipv4`,
//!   `bad_ip_header`, `truncated_transport`).
//! * **Actions and their order.** Rules are evaluated by action class, in Snort 2.9's
//!   default order `pass, drop, sdrop, alert, log` (`config order:` or `ORDER` change it;
//!   actions left out follow in the default order), and in file order within a class. The
//!   first matching `pass` rule ends the evaluation: the packet is forwarded and no rule after
//!   it raises an alert (so by default a matching pass rule silences every alert). `drop`
//!   alerts and drops the packet; `sdrop` drops it silently; `alert` and `log` write an
//!   alert line and forward. Every matching rule before a pass alerts (Snort's event queue
//!   is not limited here). A drop is per packet: later packets of the flow are inspected
//!   again.
//! * **Flow tracking** (per 5-tuple, both directions, kept for the whole run; no timeout;
//!   at most `FLOW_CAPACITY` flows, default [`DEFAULT_FLOW_CAPACITY`] = 262,144: a packet of
//!   a new flow that finds the table full is inspected as the first packet of a flow that
//!   is not kept, under flow number `-` in alerts, and counted in `untracked`).
//!   TCP: a SYN (without ACK) makes its sender the *client*; a SYN+ACK from the other side,
//!   then an ACK from the client complete the handshake: from that ACK on (it included) the
//!   flow is `established`; a RST closes it (not established until a new handshake).
//!   *Midstream decision:* a TCP flow picked up without its SYN is never `established`
//!   (as Suricata without `stream.midstream`); its client is the receiver of the first
//!   packet seen when that packet is a SYN+ACK or goes from a port below 1024 to one that is
//!   not (the server spoke first), else its sender. UDP, ICMP and other protocols:
//!   the client is the first sender; the flow is `established` from the first packet seen in
//!   the other direction on (as Snort's UDP sessions). `to_server`/`from_client` hold for
//!   packets sent by the client, `to_client`/`from_server` for the others; `stateless` and
//!   `no_stream` always hold.
//! * **Alerts** are Snort's `alert_fast` lines, with the flow and the packet appended:
//!   `MM/DD-HH:MM:SS.uuuuuu  [**] [GID:SID:REV] MSG [**] [Classification: DESC] [Priority: N]
//!   {PROTO} SRC:SPORT -> DST:DPORT [flow F] [packet N]`. The time is the packet's timestamp
//!   (virtual time) in UTC; `Classification` is printed only for rules with a `classtype`;
//!   the priority is `priority`, else the classtype's, else 0; ports only for TCP and UDP;
//!   `F` is the flow's number in the element's table (0-based, in order of first packet) and
//!   `N` the packet's chain input index. `log` rules write the same line (Snort would log the
//!   packet instead).
//! * **Counters and state.** `stats()`: `rules_loaded`, `rules_skipped`, `packets`,
//!   `inspected`, `alerts`, `dropped`, `passed` (packets a pass rule matched), `flows`, the
//!   malformed counts above, `search_exhausted` (rule checks that ran out of their step
//!   budget, see [`matcher::STEP_BUDGET`]), `alert_write_errors`, `untracked` and
//!   `alerts_not_kept`. `state_dump()`: the alert lines kept in memory in order (the first
//!   `ALERT_MEMORY`, default [`DEFAULT_ALERT_MEMORY`] = 65,536; the `ALERTS` file gets every
//!   one), how many were not kept, the alert count per `gid:sid`, and every flow's state,
//!   so runs in different modes compare line by line.
//!
//! # The fast path
//!
//! When a packet is recorded ([`Context::recording`]), the element records one state
//! function whose token is the flow's number and the packet's direction (`flow * 2 + dir`),
//! reading the payload ([`Access::Read`]), and a guard on [`Field::TcpFlags`] for TCP: on an
//! established flow, no SYN, FIN or RST; during the handshake (or midstream, or with SYN,
//! FIN or RST), the same SYN, ACK, FIN and RST bits as the recorded packet, so the next
//! handshake step walks the chain and is recorded in its place (never opaque: the executor
//! would keep such a flow off the fast path for good). [`Element::replay`] runs the very code
//! `push` runs after its lookup (flow update, rule evaluation, alerts, counters), with the
//! flow's addresses and ports taken from the token's flow and the payload and flags from the
//! view. [`Element::check`] says no when the flow state the packet would see differs from
//! the recorded one (a UDP reply arrived, a TCP flow was reset) or when the flow's rules
//! include `drop`/`sdrop` rules and this payload's verdict differs from the recorded one.
//! A packet of a flow the full table left out is recorded as opaque: the table never
//! shrinks, so such a flow always takes the full chain.

pub mod matcher;
pub mod rules;

use crate::args::{parse_bool, unquote, Args};
use crate::model::{Field, FieldSet, Filter};
use crate::record::{Access, ReplayView};
use crate::{BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use matcher::{rule_matches, Prefilter, Verify};
use packet::{FlowKey, Ipv4Flow, Ipv4FlowKey, Packet, Timestamp};
use rules::{Action, Rule, RuleSet, Vars};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{LineWriter, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use wire::ethernet::ethertype;
use wire::tcp::flags::{ACK, FIN, RST, SYN};
use wire::{icmpv4, tcp, udp, IpProtocol};

reasons! {
    /// Why `SnortIDS` drops a packet.
    pub enum SnortIDSReason {
        /// A `drop` or `sdrop` rule matched.
        RuleDrop => "ids-drop",
    }
}

/// The most flows a `SnortIDS` tracks when `FLOW_CAPACITY` is not given.
pub const DEFAULT_FLOW_CAPACITY: usize = 1 << 18;

/// The most alert lines a `SnortIDS` keeps in memory when `ALERT_MEMORY` is not given.
pub const DEFAULT_ALERT_MEMORY: usize = 1 << 16;

/// Drop reason of packets a `drop` or `sdrop` rule matched.
pub const DROP_REASON: &str = SnortIDSReason::RuleDrop.as_str();

/// One packet as the rules see it.
#[derive(Debug, Clone, Copy)]
struct Pkt<'a> {
    /// Protocol, addresses and ports (0 when the transport header was not read).
    key: Ipv4FlowKey,
    /// Whether the transport header was read (ports and TCP flags are known).
    ports: bool,
    flags: u8,
    payload: &'a [u8],
}

/// Where the IPv4 header is (see the module documentation).
fn locate_ip(data: &[u8], anno: Option<usize>) -> Option<usize> {
    if anno.is_some() {
        return anno;
    }
    let is_v4 = |o: usize| data.get(o).is_some_and(|b| b >> 4 == 4);
    match wire::vlan::single_tag_l3(data) {
        Some((off, ethertype::IPV4)) if is_v4(off) => Some(off),
        _ => is_v4(0).then_some(0),
    }
}

/// Decodes the packet at `data` (IPv4 header at `anno` or found by [`locate_ip`]).
fn decode(data: &[u8], anno: Option<usize>) -> Result<Pkt<'_>, Malformed> {
    let off = locate_ip(data, anno).ok_or(Malformed::NotIpv4)?;
    let ip = data.get(off..).ok_or(Malformed::NotIpv4)?;
    if ip.first().is_some_and(|b| b >> 4 != 4) {
        return Err(Malformed::NotIpv4);
    }
    // At least 20 bytes, 20 <= header length <= data, and the total length covers the
    // header; the packet ends at its total length (Ethernet padding is not payload).
    let whole = Ipv4Flow::parse(ip).ok_or(Malformed::BadIpHeader)?;
    let total = usize::from(whole.total_len());
    if total < whole.header_len() {
        return Err(Malformed::BadIpHeader);
    }
    let ip = Ipv4Flow::parse(&ip[..total.min(ip.len())]).ok_or(Malformed::BadIpHeader)?;
    let l4 = ip.transport();
    let mut p = Pkt {
        key: FlowKey {
            protocol: ip.protocol(),
            src: ip.src(),
            src_port: 0,
            dst: ip.dst(),
            dst_port: 0,
        },
        ports: false,
        flags: 0,
        payload: l4,
    };
    if !ip.first_fragment() {
        return Ok(p);
    }
    match p.key.protocol {
        IpProtocol::TCP => {
            let t = tcp::Packet::new_checked(l4).map_err(|_| Malformed::TruncatedTransport)?;
            (p.key.src_port, p.key.dst_port) = (t.src_port(), t.dst_port());
            p.flags = t.flags();
            p.ports = true;
            p.payload = &l4[t.header_len()..];
        }
        IpProtocol::UDP => {
            // The UDP length field is not checked (as Snort's payload is the IP's).
            if l4.len() < udp::HEADER_LEN {
                return Err(Malformed::TruncatedTransport);
            }
            let u = udp::Packet::new_unchecked(l4);
            (p.key.src_port, p.key.dst_port) = (u.src_port(), u.dst_port());
            p.ports = true;
            p.payload = &l4[udp::HEADER_LEN..];
        }
        IpProtocol::ICMP => {
            icmpv4::Packet::new_checked(l4).map_err(|_| Malformed::TruncatedTransport)?;
            p.payload = &l4[icmpv4::HEADER_LEN..];
        }
        _ => {}
    }
    Ok(p)
}

/// A flow's TCP handshake state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tcp {
    /// Nothing of a handshake seen (or midstream).
    None,
    /// The client's SYN was seen.
    SynSent,
    /// The server's SYN+ACK was seen.
    SynAck,
    /// The client's ACK completed the handshake.
    Established,
    /// A RST was seen.
    Closed,
}

/// What `flow:` options see of a packet: established, and whether it goes to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowView {
    established: bool,
    to_server: bool,
}

/// One tracked flow.
#[derive(Debug, Clone)]
struct Flow {
    proto: u8,
    /// Transport header known (TCP/UDP ports, TCP flags).
    ports: bool,
    /// Endpoint 0 sent the flow's first packet.
    ep: [Endpoint; 2],
    client: Option<usize>,
    tcp: Tcp,
    seen: [bool; 2],
    /// Rule lists (see [`Engine::lists`]) per direction.
    lists: [u32; 2],
    packets: u64,
}

impl Flow {
    fn is_tcp(&self) -> bool {
        self.proto == IpProtocol::TCP && self.ports
    }

    /// The client of a TCP flow picked up midstream by a packet of direction `dir`: its
    /// sender, unless it comes from a port below 1024 to one that is not (a server's reply).
    fn midstream_client(&self, dir: usize) -> usize {
        let (sport, dport) = (self.ep[dir].1, self.ep[1 - dir].1);
        if sport < 1024 && dport >= 1024 {
            1 - dir
        } else {
            dir
        }
    }

    /// The state change a packet of direction `dir` with TCP `flags` makes.
    fn update(&mut self, dir: usize, flags: u8) {
        self.seen[dir] = true;
        if !self.is_tcp() {
            self.client.get_or_insert(dir);
            return;
        }
        let (syn, ack, rst) = (flags & SYN != 0, flags & ACK != 0, flags & RST != 0);
        if rst {
            let c = self.midstream_client(dir);
            self.client.get_or_insert(c);
            if self.tcp != Tcp::None {
                self.tcp = Tcp::Closed;
            }
            return;
        }
        match (syn, ack) {
            (true, false) => {
                self.client = Some(dir);
                self.tcp = Tcp::SynSent;
            }
            (true, true) => {
                if self.tcp == Tcp::SynSent && self.client == Some(1 - dir) {
                    self.tcp = Tcp::SynAck;
                } else {
                    self.client.get_or_insert(1 - dir);
                }
            }
            (false, _) => {
                let c = self.midstream_client(dir);
                self.client.get_or_insert(c);
                if self.tcp == Tcp::SynAck && self.client == Some(dir) && ack {
                    self.tcp = Tcp::Established;
                }
            }
        }
    }

    fn established(&self) -> bool {
        if self.is_tcp() {
            self.tcp == Tcp::Established
        } else {
            self.seen[0] && self.seen[1]
        }
    }

    fn view(&self, dir: usize) -> FlowView {
        FlowView {
            established: self.established(),
            to_server: self.client == Some(dir),
        }
    }

    fn state_name(&self) -> &'static str {
        if self.is_tcp() {
            match self.tcp {
                Tcp::None => "midstream",
                Tcp::SynSent => "syn-sent",
                Tcp::SynAck => "syn-ack",
                Tcp::Established => "established",
                Tcp::Closed => "closed",
            }
        } else if self.established() {
            "established"
        } else {
            "one-way"
        }
    }
}

/// The rules a flow direction's header takes, in evaluation order.
#[derive(Debug, Clone)]
struct RuleList {
    rules: Vec<u32>,
    has_drop: bool,
}

/// What the rules decided for one packet.
#[derive(Debug, Default)]
struct Decision {
    /// Rules that raise an alert, in evaluation order.
    fired: Vec<u32>,
    drop: bool,
    passed: bool,
    exhausted: u64,
}

/// The rules, in evaluation order, with their prefilter and the interned per-flow lists.
#[derive(Debug)]
struct Engine {
    rules: Vec<Rule>,
    prefilter: Prefilter,
    /// Rules grouped by identical headers (a new flow tests each header once).
    headers: Vec<Vec<u32>>,
    lists: Vec<RuleList>,
    list_ids: HashMap<Vec<u32>, u32>,
}

impl Engine {
    /// The list of rules whose header takes packets `src:sport -> dst:dport`.
    fn list_for(&mut self, proto: u8, ports: bool, s: Endpoint, d: Endpoint) -> u32 {
        let mut rules: Vec<u32> = Vec::new();
        for group in &self.headers {
            let first = &self.rules[group[0] as usize];
            if first.header_matches(proto, u32::from(s.0), s.1, u32::from(d.0), d.1, ports) {
                rules.extend_from_slice(group);
            }
        }
        rules.sort_unstable(); // evaluation order
        if let Some(&id) = self.list_ids.get(&rules) {
            return id;
        }
        let has_drop = rules
            .iter()
            .any(|&r| matches!(self.rules[r as usize].action, Action::Drop | Action::Sdrop));
        let id = self.lists.len() as u32;
        self.lists.push(RuleList {
            rules: rules.clone(),
            has_drop,
        });
        self.list_ids.insert(rules, id);
        id
    }

    /// Evaluates list `list` on a packet (no side effects but the scratch `hits`).
    fn decide(&self, list: u32, fv: FlowView, payload: &[u8], hits: &mut Vec<u64>) -> Decision {
        let mut d = Decision::default();
        let Some(list) = self.lists.get(list as usize) else {
            return d;
        };
        if list.rules.is_empty() {
            return d;
        }
        self.prefilter.scan(payload, hits);
        for &r in &list.rules {
            if !Prefilter::hit(hits, r) {
                continue;
            }
            let rule = &self.rules[r as usize];
            if rule.flow.established.is_some_and(|e| e != fv.established)
                || rule.flow.to_server.is_some_and(|t| t != fv.to_server)
            {
                continue;
            }
            if let Some((lo, hi)) = rule.dsize {
                let n = payload.len() as u64;
                if n < u64::from(lo) || n > u64::from(hi) {
                    continue;
                }
            }
            match rule_matches(&rule.tests, payload) {
                Verify::Match => {}
                Verify::NoMatch => continue,
                Verify::Exhausted => {
                    d.exhausted += 1;
                    continue;
                }
            }
            match rule.action {
                Action::Pass => {
                    d.passed = true;
                    break;
                }
                Action::Drop => {
                    d.drop = true;
                    d.fired.push(r);
                }
                Action::Sdrop => d.drop = true,
                Action::Alert | Action::Log => d.fired.push(r),
            }
        }
        d
    }
}

/// What was recorded for a token: the flow state the packet saw and its verdict.
#[derive(Debug, Clone, Copy)]
struct Recorded {
    view: FlowView,
    drop: bool,
}

/// An endpoint: IPv4 address and port (0 without ports).
type Endpoint = (Ipv4Addr, u16);

/// A flow's key in the flow table: its 5-tuple with the smaller endpoint as the source (so
/// both directions find the flow), and whether the ports were read (a later fragment, which
/// has none, is not the first fragment's flow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct TableKey {
    tuple: Ipv4FlowKey,
    ports: bool,
}

impl TableKey {
    /// The key of packet `p`'s flow.
    #[inline]
    fn of(p: &Pkt) -> TableKey {
        let k = p.key;
        let tuple = if (k.src, k.src_port) <= (k.dst, k.dst_port) {
            k
        } else {
            k.reversed()
        };
        TableKey {
            tuple,
            ports: p.ports,
        }
    }
}

reasons! {
    /// Why `SnortIDS` forwards a packet uninspected: its malformed-packet counters (one per
    /// reason, `reason as usize`, named by the texts in `stats()`).
    pub enum Malformed {
        /// No IPv4 header where one is looked for.
        NotIpv4 => "not_ipv4",
        /// An IPv4 header shorter than 20 bytes, its IHL or its total length.
        BadIpHeader => "bad_ip_header",
        /// A first fragment whose TCP, UDP or ICMP header is cut short.
        TruncatedTransport => "truncated_transport",
    }
}

/// The `SnortIDS` element (see the module documentation).
#[derive(Debug)]
pub struct SnortIDS {
    engine: Engine,
    skipped: u64,
    flows: HashMap<TableKey, u32>,
    table: Vec<Flow>,
    recorded: HashMap<u64, Recorded>,
    /// The decision `check` made for a packet (flow, direction, input index), which its
    /// `replay` uses instead of scanning the payload again.
    checked: Option<(usize, usize, u64, Decision)>,
    hits: Vec<u64>,
    alerts: Vec<String>,
    /// Alerts raised, kept in memory or not.
    alert_count: u64,
    alert_memory: usize,
    flow_capacity: usize,
    untracked: u64,
    per_sid: BTreeMap<(u32, u32), u64>,
    out: Option<LineWriter<File>>,
    packets: u64,
    inspected: u64,
    dropped: u64,
    passed: u64,
    exhausted: u64,
    malformed: [u64; Malformed::ALL.len()],
    write_errors: u64,
}

/// A path from the configuration: the configuration's folder first, else as written.
fn resolve(base: &Path, v: &str) -> PathBuf {
    let written = PathBuf::from(unquote(v));
    match base.join(&written) {
        p if p.exists() || !written.exists() => p,
        _ => written,
    }
}

fn parse_order(s: &str) -> Result<Vec<Action>, ConfigError> {
    let mut order = Vec::new();
    for w in unquote(s).split([' ', ',']).filter(|w| !w.is_empty()) {
        let a = match w {
            "alert" => Action::Alert,
            "log" => Action::Log,
            "pass" => Action::Pass,
            "drop" => Action::Drop,
            "sdrop" => Action::Sdrop,
            _ => {
                return Err(ConfigError::new(format!(
                    "ORDER: expected rule actions (pass, drop, sdrop, alert, log), found `{w}`"
                )))
            }
        };
        order.push(a);
    }
    Ok(order)
}

impl SnortIDS {
    /// Configures the element (see the module documentation for the arguments).
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<SnortIDS, ConfigError> {
        args.check(
            1,
            &[
                "RULES",
                "CONF",
                "ALERTS",
                "SKIP_UNSUPPORTED",
                "VAR",
                "ORDER",
                "FLOW_CAPACITY",
                "ALERT_MEMORY",
            ],
        )?;
        let limit = |k: &str, default: usize| -> Result<usize, ConfigError> {
            Ok(match args.keyword(k) {
                Some(v) => usize::try_from(crate::args::parse_uint(v, k)?).unwrap_or(usize::MAX),
                None => default,
            })
        };
        let flow_capacity = limit("FLOW_CAPACITY", DEFAULT_FLOW_CAPACITY)?;
        let alert_memory = limit("ALERT_MEMORY", DEFAULT_ALERT_MEMORY)?;
        let mut vars = Vars::new();
        if let Some(c) = args.keyword("CONF") {
            let path = resolve(bcx.base_dir, c);
            let text = std::fs::read(&path).map_err(|e| {
                ConfigError::new(format!("CONF {}: cannot read it: {e}", path.display()))
            })?;
            vars.read_conf(&String::from_utf8_lossy(&text), &path.display().to_string())
                .map_err(|e| ConfigError::new(e.message))?;
        }
        for a in args.all() {
            if a.keyword.as_deref() == Some("VAR") {
                let v = unquote(&a.value);
                let mut it = v.trim().splitn(2, char::is_whitespace);
                match (it.next(), it.next().map(str::trim)) {
                    (Some(name), Some(value))
                        if !value.is_empty()
                            && name
                                .trim_start_matches('$')
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                    {
                        vars.set(name, value)
                    }
                    _ => {
                        return Err(ConfigError::new(format!(
                            "VAR: expected `VAR NAME VALUE` (e.g. `VAR HOME_NET 10.0.0.0/8`), found `VAR {}`",
                            a.value
                        )))
                    }
                }
            }
        }
        let skip = match args.keyword("SKIP_UNSUPPORTED") {
            Some(v) => parse_bool(v, "SKIP_UNSUPPORTED")?,
            None => false,
        };
        let order = match args.keyword("ORDER") {
            Some(o) => Some(parse_order(o)?),
            None => vars.order.clone(),
        };
        let mut files: Vec<&str> = args.positional();
        for a in args.all() {
            if a.keyword.as_deref() == Some("RULES") {
                files.push(&a.value);
            }
        }
        if files.is_empty() {
            return Err(ConfigError::new(
                "missing argument RULES (a Snort rules file)",
            ));
        }
        let mut set = RuleSet::default();
        for f in files {
            set.load(&resolve(bcx.base_dir, f), &vars, skip)
                .map_err(|e| ConfigError::new(e.message))?;
        }
        let out = match args.keyword("ALERTS") {
            Some(a) => {
                let path = bcx.base_dir.join(unquote(a));
                let f = File::create(&path).map_err(|e| {
                    ConfigError::new(format!("ALERTS {}: cannot create it: {e}", path.display()))
                })?;
                Some(LineWriter::new(f))
            }
            None => None,
        };
        let mut ids = SnortIDS::from_rules(set, order.as_deref(), out)?;
        ids.flow_capacity = flow_capacity;
        ids.alert_memory = alert_memory;
        Ok(ids)
    }

    /// The element for an already parsed rule set (`order`: the action evaluation order,
    /// Snort's default when `None`; `alerts`: where alert lines are written, if anywhere).
    pub fn from_rules(
        set: RuleSet,
        order: Option<&[Action]>,
        alerts: Option<LineWriter<File>>,
    ) -> Result<SnortIDS, ConfigError> {
        let order = order.unwrap_or(&Action::DEFAULT_ORDER);
        let rank = |a: Action| -> usize {
            order.iter().position(|&o| o == a).unwrap_or_else(|| {
                100 + Action::DEFAULT_ORDER
                    .iter()
                    .position(|&o| o == a)
                    .unwrap_or(0)
            })
        };
        let mut rules = set.rules;
        rules.sort_by_key(|r| rank(r.action)); // stable: file order within an action
        let prefilter = Prefilter::new(&rules).map_err(|e| ConfigError::new(e.to_string()))?;
        let mut groups: HashMap<_, usize> = HashMap::new();
        let mut headers: Vec<Vec<u32>> = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let key = (r.proto, &r.src, &r.sport, r.bidir, &r.dst, &r.dport);
            let g = *groups.entry(key).or_insert_with(|| {
                headers.push(Vec::new());
                headers.len() - 1
            });
            headers[g].push(i as u32);
        }
        drop(groups);
        Ok(SnortIDS {
            engine: Engine {
                rules,
                prefilter,
                headers,
                lists: Vec::new(),
                list_ids: HashMap::new(),
            },
            skipped: set.skipped.len() as u64,
            flows: HashMap::new(),
            table: Vec::new(),
            recorded: HashMap::new(),
            checked: None,
            hits: Vec::new(),
            alerts: Vec::new(),
            alert_count: 0,
            alert_memory: DEFAULT_ALERT_MEMORY,
            flow_capacity: DEFAULT_FLOW_CAPACITY,
            untracked: 0,
            per_sid: BTreeMap::new(),
            out: alerts,
            packets: 0,
            inspected: 0,
            dropped: 0,
            passed: 0,
            exhausted: 0,
            malformed: [0; Malformed::ALL.len()],
            write_errors: 0,
        })
    }

    /// The alert lines kept in memory (the first `ALERT_MEMORY`), in order.
    pub fn alerts(&self) -> &[String] {
        &self.alerts
    }

    /// Alerts raised per `(gid, sid)`.
    pub fn alert_counts(&self) -> &BTreeMap<(u32, u32), u64> {
        &self.per_sid
    }

    /// The rules, in evaluation order.
    pub fn rules(&self) -> &[Rule] {
        &self.engine.rules
    }

    /// The flow of packet `p` and the packet's direction in it (created when new); `None`
    /// when it is new and the table is full.
    fn flow_of(&mut self, p: &Pkt) -> Option<(usize, usize)> {
        let s = (p.key.src, p.key.src_port);
        let key = TableKey::of(p);
        if let Some(&i) = self.flows.get(&key) {
            let f = &self.table[i as usize];
            let dir = usize::from(f.ep[0] != s);
            return Some((i as usize, dir));
        }
        if self.table.len() >= self.flow_capacity {
            return None;
        }
        let f = self.new_flow(p);
        let i = self.table.len();
        self.table.push(f);
        self.flows.insert(key, i as u32);
        Some((i, 0))
    }

    /// A new flow whose first packet is `p`.
    fn new_flow(&mut self, p: &Pkt) -> Flow {
        let (s, d) = ((p.key.src, p.key.src_port), (p.key.dst, p.key.dst_port));
        let proto = p.key.protocol;
        let fwd = self.engine.list_for(proto, p.ports, s, d);
        let rev = if s == d {
            fwd
        } else {
            self.engine.list_for(proto, p.ports, d, s)
        };
        Flow {
            proto,
            ports: p.ports,
            ep: [s, d],
            client: None,
            tcp: Tcp::None,
            seen: [false; 2],
            lists: [fwd, rev],
            packets: 0,
        }
    }

    /// A packet of a new flow the full table leaves out: inspected as the first packet of
    /// a flow that is not kept. Returns whether it is dropped.
    fn handle_untracked(&mut self, p: &Pkt, ts: Timestamp, index: u64) -> bool {
        let mut f = self.new_flow(p);
        f.update(0, p.flags);
        self.untracked += 1;
        self.inspected += 1;
        let d = self
            .engine
            .decide(f.lists[0], f.view(0), p.payload, &mut self.hits);
        self.conclude(d, p, None, index, ts)
    }

    /// What `push` and `replay` share once the packet's flow is known: the flow update, the
    /// rules, the alerts and the counters. Returns whether the packet is dropped.
    fn handle(&mut self, flow: usize, dir: usize, p: &Pkt, ts: Timestamp, index: u64) -> bool {
        let f = &mut self.table[flow];
        f.update(dir, p.flags);
        f.packets += 1;
        let fv = f.view(dir);
        let list = f.lists[dir];
        self.inspected += 1;
        let d = match self.checked.take() {
            // `check` scanned this very packet with this view already.
            Some((fl, di, i, d)) if fl == flow && di == dir && i == index => d,
            _ => self.engine.decide(list, fv, p.payload, &mut self.hits),
        };
        self.conclude(d, p, Some(flow), index, ts)
    }

    /// The counters and alerts of a decision on packet `p` of flow `flow` (`None`: a flow
    /// not kept). Returns whether the packet is dropped.
    fn conclude(
        &mut self,
        d: Decision,
        p: &Pkt,
        flow: Option<usize>,
        index: u64,
        ts: Timestamp,
    ) -> bool {
        self.exhausted += d.exhausted;
        if d.passed {
            self.passed += 1;
        }
        for &r in &d.fired {
            self.alert(r, p, flow, index, ts);
        }
        if d.drop {
            self.dropped += 1;
        }
        d.drop
    }

    fn alert(&mut self, r: u32, p: &Pkt, flow: Option<usize>, index: u64, ts: Timestamp) {
        let rule = &self.engine.rules[r as usize];
        let line = fast_line(rule, p, flow, index, ts);
        *self.per_sid.entry((rule.gid, rule.sid)).or_insert(0) += 1;
        if let Some(w) = &mut self.out {
            if writeln!(w, "{line}").is_err() {
                self.write_errors += 1;
            }
        }
        self.alert_count += 1;
        if self.alerts.len() < self.alert_memory {
            self.alerts.push(line);
        }
    }

    fn count_malformed(&mut self, reason: Malformed) {
        self.malformed[reason as usize] += 1;
    }

    fn token_flow(&self, token: u64) -> Option<(usize, usize)> {
        let flow = usize::try_from(token >> 1).ok()?;
        (flow < self.table.len()).then_some((flow, (token & 1) as usize))
    }

    /// The packet of a replayed or checked view, with the header fields of the token's flow.
    fn view_packet<'v>(
        &self,
        flow: usize,
        dir: usize,
        view: &'v ReplayView<'_>,
    ) -> Result<Pkt<'v>, Malformed> {
        let data: &'v [u8] = &view.data[..];
        let mut p = decode(data, view.ip)?;
        let f = &self.table[flow];
        let (s, d) = (f.ep[dir], f.ep[1 - dir]);
        p.ports = f.ports;
        p.key = FlowKey {
            protocol: f.proto,
            src: s.0,
            src_port: s.1,
            dst: d.0,
            dst_port: d.1,
        };
        Ok(p)
    }
}

/// Days since 1970-01-01 to (month, day) (proleptic Gregorian, UTC).
fn month_day(days: i64) -> (u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (m as u32, d as u32)
}

/// Snort's timestamp `MM/DD-HH:MM:SS.uuuuuu` (UTC).
pub fn fast_time(ts: Timestamp) -> String {
    let secs = ts.secs();
    let (m, d) = month_day((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{m:02}/{d:02}-{:02}:{:02}:{:02}.{:06}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ts.subsec_nanos() / 1000
    )
}

/// Snort's protocol names in alert lines.
fn proto_name(p: u8) -> String {
    match IpProtocol::from(p) {
        IpProtocol::Icmp => "ICMP".into(),
        IpProtocol::Igmp => "IGMP".into(),
        IpProtocol::IpIp => "IPIP".into(),
        IpProtocol::Tcp => "TCP".into(),
        IpProtocol::Udp => "UDP".into(),
        IpProtocol::Ipv6 => "IPV6".into(),
        IpProtocol::Gre => "GRE".into(),
        IpProtocol::Esp => "ESP".into(),
        IpProtocol::Ah => "AH".into(),
        IpProtocol::Icmpv6 => "IPV6-ICMP".into(),
        IpProtocol::Sctp => "SCTP".into(),
        _ => format!("PROTO:{p:03}"),
    }
}

/// One `alert_fast` line with the flow and packet appended (see the module documentation).
fn fast_line(rule: &Rule, p: &Pkt, flow: Option<usize>, index: u64, ts: Timestamp) -> String {
    let mut s = format!(
        "{}  [**] [{}:{}:{}] ",
        fast_time(ts),
        rule.gid,
        rule.sid,
        rule.rev
    );
    match &rule.msg {
        Some(m) => s.push_str(m),
        None => s.push_str(&format!(
            "Snort Alert [{}:{}:{}]",
            rule.gid, rule.sid, rule.rev
        )),
    }
    s.push_str(" [**] ");
    if let Some((desc, _)) = &rule.class {
        s.push_str(&format!("[Classification: {desc}] "));
    }
    s.push_str(&format!(
        "[Priority: {}] {{{}}} ",
        rule.priority,
        proto_name(p.key.protocol)
    ));
    let k = &p.key;
    let (a, b) = (k.src, k.dst);
    if p.ports && IpProtocol::from(k.protocol).has_ports() {
        s.push_str(&format!("{a}:{} -> {b}:{}", k.src_port, k.dst_port));
    } else {
        s.push_str(&format!("{a} -> {b}"));
    }
    match flow {
        Some(f) => s.push_str(&format!(" [flow {f}] [packet {index}]")),
        None => s.push_str(&format!(" [flow -] [packet {index}]")),
    }
    s
}

impl Element for SnortIDS {
    fn class_name(&self) -> &'static str {
        "SnortIDS"
    }

    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }

    fn push(&mut self, _port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        self.packets += 1;
        let anno = packet.network_offset_in_data();
        let (flow, dir, flags, is_tcp, drop) = match decode(packet.data(), anno) {
            Err(reason) => {
                self.count_malformed(reason);
                cx.record_opaque("ids-undecodable");
                return Verdict::Out(0, packet);
            }
            Ok(p) => {
                let Some((flow, dir)) = self.flow_of(&p) else {
                    let drop =
                        self.handle_untracked(&p, packet.meta.timestamp, packet.meta.input_index);
                    cx.record_opaque("ids: flow table full");
                    return if drop {
                        Verdict::Drop(packet, DROP_REASON)
                    } else {
                        Verdict::Out(0, packet)
                    };
                };
                let drop = self.handle(
                    flow,
                    dir,
                    &p,
                    packet.meta.timestamp,
                    packet.meta.input_index,
                );
                (
                    flow,
                    dir,
                    p.flags,
                    p.key.protocol == IpProtocol::TCP && p.ports,
                    drop,
                )
            }
        };
        if cx.recording() {
            let token = (flow as u64) << 1 | dir as u64;
            cx.record_state(token, Access::Read);
            let f = &self.table[flow];
            if is_tcp {
                // Established: any packet without SYN, FIN or RST leaves the state alone.
                // Otherwise the state moves with SYN, ACK, FIN and RST: later packets must
                // carry the same ones (a different packet walks the chain and is recorded).
                let (value, mask) = if f.tcp == Tcp::Established && flags & (SYN | FIN | RST) == 0 {
                    (0, SYN | FIN | RST)
                } else {
                    (flags & (SYN | ACK | FIN | RST), SYN | ACK | FIN | RST)
                };
                let set = FieldSet::from_mask(u128::from(value), u128::from(mask), 8)
                    .unwrap_or_else(|_| FieldSet::single(u128::from(flags)));
                cx.record_guard(Filter::any().with(Field::TcpFlags, set));
            }
            self.recorded.insert(
                token,
                Recorded {
                    view: f.view(dir),
                    drop,
                },
            );
        }
        if drop {
            Verdict::Drop(packet, DROP_REASON)
        } else {
            Verdict::Out(0, packet)
        }
    }

    /// Reads the flow (the IPv4 header found at the annotation, or after the Ethernet and
    /// VLAN headers without one), the TCP flags and data offset, the ICMP header and the
    /// payload its rules search; writes nothing; drops what drop rules match; keeps flows.
    fn declared(&self) -> Option<crate::record::Declared> {
        let d = crate::record::Declared {
            payload: Access::Read,
            drops: true,
            stateful: true,
            ..Default::default()
        };
        Some(
            d.read(&crate::record::Declared::FLOW)
                .read(&crate::record::Declared::L4_HEADER)
                .read(&[Field::EtherType, Field::HasVlan, Field::VlanId]),
        )
    }

    fn check(&mut self, token: u64, view: &ReplayView<'_>) -> bool {
        let Some(rec) = self.recorded.get(&token).copied() else {
            return false;
        };
        let Some((flow, dir)) = self.token_flow(token) else {
            return false;
        };
        let Ok(p) = self.view_packet(flow, dir, view) else {
            return false;
        };
        let mut f = self.table[flow].clone();
        if f.is_tcp() && p.flags & (SYN | FIN | RST) != 0 {
            return false;
        }
        f.update(dir, p.flags);
        if f.view(dir) != rec.view || (f.is_tcp() && f.tcp != self.table[flow].tcp) {
            return false;
        }
        let list = f.lists[dir];
        let has_drop = self
            .engine
            .lists
            .get(list as usize)
            .is_some_and(|l| l.has_drop);
        if !has_drop {
            return !rec.drop;
        }
        let d = self
            .engine
            .decide(list, rec.view, p.payload, &mut self.hits);
        let same = d.drop == rec.drop;
        self.checked = Some((flow, dir, view.input_index, d));
        same
    }

    fn replay(&mut self, token: u64, view: &mut ReplayView<'_>, _cx: &mut Context) {
        self.packets += 1;
        let Some((flow, dir)) = self.token_flow(token) else {
            return;
        };
        let (now, index) = (view.now, view.input_index);
        let view: &ReplayView<'_> = view;
        match self.view_packet(flow, dir, view) {
            Err(reason) => self.count_malformed(reason),
            Ok(p) => {
                self.handle(flow, dir, &p, now, index);
            }
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![
            ("rules_loaded", self.engine.rules.len() as u64),
            ("rules_skipped", self.skipped),
            ("packets", self.packets),
            ("inspected", self.inspected),
            ("alerts", self.alert_count),
            ("dropped", self.dropped),
            ("passed", self.passed),
            ("flows", self.table.len() as u64),
        ];
        for (name, n) in Malformed::TEXTS.iter().zip(self.malformed) {
            v.push((name, n));
        }
        v.push(("search_exhausted", self.exhausted));
        v.push(("alert_write_errors", self.write_errors));
        v.push(("untracked", self.untracked));
        v.push((
            "alerts_not_kept",
            self.alert_count - self.alerts.len() as u64,
        ));
        v
    }

    fn state_dump(&self) -> Vec<String> {
        let mut out: Vec<String> = self.alerts.iter().map(|a| format!("alert {a}")).collect();
        let not_kept = self.alert_count - self.alerts.len() as u64;
        if not_kept > 0 {
            out.push(format!("alerts not kept in memory {not_kept}"));
        }
        for ((gid, sid), n) in &self.per_sid {
            out.push(format!("sid {gid}:{sid} alerts {n}"));
        }
        for (i, f) in self.table.iter().enumerate() {
            let ep = |e: Endpoint| {
                if f.ports {
                    format!("{}:{}", e.0, e.1)
                } else {
                    e.0.to_string()
                }
            };
            let client = match f.client {
                Some(c) => ep(f.ep[c]),
                None => "-".into(),
            };
            out.push(format!(
                "flow {i} {} {} <> {} {} client {client} packets {}",
                proto_name(f.proto),
                ep(f.ep[0]),
                ep(f.ep[1]),
                f.state_name(),
                f.packets
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests;
