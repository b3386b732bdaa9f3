//! The outside oracle of `Window`'s reassembly: for every TCP connection of the zeek and
//! tcpreplay captures under `../shared/data/pcaps`, the bytes the window delivers in each
//! direction (its UDF calls concatenated) equal what Wireshark's
//! `tshark -q -z follow,tcp,raw,N` prints for that connection, connection by connection.
//!
//! * tshark numbers connections by `tcp.stream` and names each one's endpoints ("Node 0" is
//!   the sender of its first packet, as the window's client is). Connections are paired by
//!   their endpoints and, for a pair of endpoints used more than once, by order of
//!   appearance; each direction is compared as a sequence of byte runs and holes (tshark's
//!   "[N bytes missing in capture file]" record is a hole of N bytes; the window's holes are
//!   the jumps in its calls' offsets).
//! * tshark walks tunnels and reassembles IP fragments before it follows TCP; so does this
//!   test, before the window sees a packet (Ethernet, VLAN, MPLS, PPPoE; IP in IP, GRE with
//!   ERSPAN and transparent Ethernet, VXLAN, GTP-U and GRE over UDP; IPv4 fragments). The
//!   window is given the inner IP header as the packet's network header annotation; plain
//!   Ethernet/VLAN frames are given as they are, so the window's own parsing is tested too.
//! * The window runs with tumbling windows (slide = size), no timeout (tshark has none) and
//!   its default out-of-order bound, and is flushed at the end of each capture.
//!
//! Every capture is compared whole (the largest, `echo-connections.pcap`, has 500
//! connections and takes tshark a few seconds). Needs `tshark` (Debian package `tshark`)
//! and the data: without either the test skips with a message, except under `CI=true`,
//! where it fails.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use operators::stream::{Direction, Window, WindowInfo, WindowKind};
use packet::{Packet, Timestamp};

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn skip(why: &str) {
    assert!(!ci(), "{why} (CI=true: not skipping)");
    println!("SKIP: {why}");
}

/// A byte run or a hole of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Data(Vec<u8>),
    Gap(u64),
}

/// Appends bytes, merging them with a run before.
fn push_data(items: &mut Vec<Item>, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    match items.last_mut() {
        Some(Item::Data(v)) => v.extend_from_slice(bytes),
        _ => items.push(Item::Data(bytes.to_vec())),
    }
}

/// An endpoint: address and port, as tshark prints it.
type Endpoint = (IpAddr, u16);

/// One connection as tshark follows it.
#[derive(Debug, Default)]
struct Followed {
    nodes: [Option<Endpoint>; 2],
    dirs: [Vec<Item>; 2],
}

fn parse_endpoint(s: &str) -> Option<Endpoint> {
    let (addr, port) = s.trim().rsplit_once(':')?;
    let addr = addr.trim_start_matches('[').trim_end_matches(']');
    Some((addr.parse().ok()?, port.parse().ok()?))
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// tshark's marker for bytes the capture lacks, if `rec` is one.
fn missing_marker(rec: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(rec).ok()?;
    let s = s.trim_end_matches('\0');
    let n = s
        .strip_prefix('[')?
        .strip_suffix(" bytes missing in capture file]")?;
    n.parse().ok()
}

/// Runs tshark's follow on every TCP stream of `file`.
fn tshark_follow(file: &Path) -> Result<BTreeMap<u64, Followed>, String> {
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(file)
        .args(["-T", "fields", "-e", "tcp.stream"])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let mut ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut streams = BTreeMap::new();
    if ids.is_empty() {
        return Ok(streams);
    }
    let mut cmd = Command::new("tshark");
    cmd.args(["-q", "-r"]).arg(file);
    for id in &ids {
        cmd.args(["-z", &format!("follow,tcp,raw,{id}")]);
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut cur: Option<u64> = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("Filter: tcp.stream eq ") {
            let n: u64 = n.trim().parse().map_err(|_| format!("bad line {line}"))?;
            streams.insert(n, Followed::default());
            cur = Some(n);
        } else if line.starts_with("=====") || line.starts_with("Follow:") || line.is_empty() {
            continue;
        } else if let Some(f) = cur.and_then(|n| streams.get_mut(&n)) {
            if let Some(e) = line.strip_prefix("Node 0: ") {
                f.nodes[0] = parse_endpoint(e);
            } else if let Some(e) = line.strip_prefix("Node 1: ") {
                f.nodes[1] = parse_endpoint(e);
            } else {
                let (d, hex) = match line.strip_prefix('\t') {
                    Some(h) => (1, h),
                    None => (0, line),
                };
                let rec = unhex(hex.trim()).ok_or_else(|| format!("not hex: {line}"))?;
                match missing_marker(&rec) {
                    Some(n) => f.dirs[d].push(Item::Gap(n)),
                    None => push_data(&mut f.dirs[d], &rec),
                }
            }
        }
    }
    for id in ids {
        streams.entry(id).or_default();
    }
    Ok(streams)
}

// ---- Decapsulation (what tshark does before following TCP) ----

/// Where a frame's TCP-carrying IP packet is. Offsets are into the frame; each layer's
/// length field bounds what it carries (`end`), as tshark bounds each layer's bytes.
enum Found {
    /// The IP header of a TCP packet at `.0`, its bytes ending at `.1` at most.
    Tcp(usize, usize),
    /// An IPv4 fragment at `.0`, ending at `.1`: to be reassembled first.
    Fragment(usize, usize),
    /// No TCP.
    Nothing,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// `b` cut at `end` (when shorter).
fn upto(b: &[u8], end: usize) -> &[u8] {
    &b[..end.min(b.len())]
}

fn from_ethernet(b: &[u8], mut off: usize) -> Found {
    let Some(mut ty) = be16(b, off + 12) else {
        return Found::Nothing;
    };
    off += 14;
    while matches!(ty, 0x8100 | 0x88a8 | 0x9100) {
        let Some(t) = be16(b, off + 2) else {
            return Found::Nothing;
        };
        ty = t;
        off += 4;
    }
    from_ethertype(b, off, ty)
}

fn from_ethertype(b: &[u8], mut off: usize, ty: u16) -> Found {
    match ty {
        0x0800 | 0x86dd => from_ip(b, off),
        // MPLS: labels up to the bottom of the stack, then IP by its version nibble.
        0x8847 | 0x8848 => loop {
            let Some(&s) = b.get(off + 2) else {
                return Found::Nothing;
            };
            off += 4;
            if s & 1 == 1 {
                return match b.get(off).map(|v| v >> 4) {
                    Some(4) | Some(6) => from_ip(b, off),
                    _ => Found::Nothing,
                };
            }
        },
        // PPPoE session: 6 bytes (the last two its payload length), then the PPP protocol.
        0x8864 => match (be16(b, off + 4), be16(b, off + 6)) {
            (Some(len), Some(0x0021 | 0x0057)) => {
                from_ip(upto(b, off + 6 + usize::from(len)), off + 8)
            }
            _ => Found::Nothing,
        },
        _ => Found::Nothing,
    }
}

fn from_ip(b: &[u8], off: usize) -> Found {
    let Some(ip) = b.get(off..) else {
        return Found::Nothing;
    };
    let (proto, l4, b) = match ip.first().map(|v| v >> 4) {
        Some(4) => {
            if ip.len() < 20 {
                return Found::Nothing;
            }
            let p = wire::ipv4::Packet::new_unchecked(ip);
            let (hl, tl) = (p.header_len(), usize::from(p.total_len()));
            if hl < 20 || hl > ip.len() || tl < hl {
                return Found::Nothing;
            }
            if p.is_fragment() {
                return Found::Fragment(off, b.len().min(off + tl));
            }
            if p.protocol() == 6 {
                return Found::Tcp(off, b.len());
            }
            (p.protocol(), off + hl, upto(b, off + tl))
        }
        Some(6) => match wire::ipv6::walk_extension_headers(ip) {
            Ok((proto, l4, frag)) if frag.is_none_or(|f| f.offset == 0 && !f.more_frags) => {
                let p = wire::ipv6::Packet::new_unchecked(ip);
                (
                    proto,
                    off + l4,
                    upto(b, off + 40 + usize::from(p.payload_len())),
                )
            }
            _ => return Found::Nothing,
        },
        _ => return Found::Nothing,
    };
    match proto {
        6 => Found::Tcp(off, b.len()),
        4 | 41 => from_ip(b, l4),
        47 => from_gre(b, l4),
        17 => from_udp(b, l4),
        _ => Found::Nothing,
    }
}

fn from_gre(b: &[u8], off: usize) -> Found {
    let (Some(flags), Some(proto)) = (be16(b, off), be16(b, off + 2)) else {
        return Found::Nothing;
    };
    if flags & 0x7 != 0 {
        return Found::Nothing; // only version 0
    }
    let mut at = off + 4;
    for bit in [0x8000, 0x2000, 0x1000] {
        if flags & bit != 0 {
            at += 4;
        }
    }
    match proto {
        0x0800 | 0x86dd => from_ip(b, at),
        0x6558 => from_ethernet(b, at),
        // ERSPAN type II (8-byte header; type I has no sequence number and no header).
        0x88be if flags & 0x1000 != 0 => from_ethernet(b, at + 8),
        0x88be => from_ethernet(b, at),
        // ERSPAN type III (12 bytes, 8 more with the optional subheader).
        0x22eb => {
            let o = b.get(at + 11).is_some_and(|v| v & 1 == 1);
            from_ethernet(b, at + 12 + if o { 8 } else { 0 })
        }
        _ => Found::Nothing,
    }
}

fn from_udp(b: &[u8], off: usize) -> Found {
    let (Some(sport), Some(dport), Some(len)) = (be16(b, off), be16(b, off + 2), be16(b, off + 4))
    else {
        return Found::Nothing;
    };
    let b = if len >= 8 {
        upto(b, off + usize::from(len))
    } else {
        b
    };
    let at = off + 8;
    let port = |p: u16| sport == p || dport == p;
    if port(4789) {
        from_ethernet(b, at + 8)
    } else if port(2152) {
        // GTP-U version 1: a G-PDU carries IP after 8 bytes, 4 more with the E/S/PN flags,
        // then the extension headers.
        let Some(&flags) = b.get(at) else {
            return Found::Nothing;
        };
        if b.get(at + 1) != Some(&0xff) {
            return Found::Nothing;
        }
        let mut h = at + 8;
        if flags & 0x07 != 0 {
            let mut next = b.get(h + 3).copied().unwrap_or(0);
            h += 4;
            while flags & 0x04 != 0 && next != 0 {
                let Some(&len) = b.get(h) else {
                    return Found::Nothing;
                };
                if len == 0 {
                    return Found::Nothing;
                }
                h += usize::from(len) * 4;
                next = b.get(h - 1).copied().unwrap_or(0);
            }
        }
        from_ip(b, h)
    } else if port(4754) {
        from_gre(b, at)
    } else {
        Found::Nothing
    }
}

/// A datagram's fragments: source, destination, identification, protocol.
type FragKey = (u32, u32, u16, u8);
/// A fragment: offset, More Fragments, header, payload.
type Fragment = (usize, bool, Vec<u8>, Vec<u8>);

/// IPv4 fragments waiting for the rest of their datagram.
#[derive(Default)]
struct Defrag {
    parts: HashMap<FragKey, Vec<Fragment>>,
}

impl Defrag {
    /// Takes a fragment (the IPv4 packet); the whole datagram once every part is there.
    fn push(&mut self, ip: &[u8]) -> Option<Vec<u8>> {
        let p = wire::ipv4::Packet::new_checked(ip).ok()?;
        let key = (
            u32::from(p.src_addr()),
            u32::from(p.dst_addr()),
            p.ident(),
            p.protocol(),
        );
        let hl = p.header_len();
        let part = (
            usize::from(p.frag_offset()),
            p.more_frags(),
            ip[..hl].to_vec(),
            ip[hl..usize::from(p.total_len())].to_vec(),
        );
        let parts = self.parts.entry(key).or_default();
        parts.push(part);
        parts.sort_by_key(|x| x.0);
        // Complete: starts at 0, no holes, ends with a last fragment.
        let mut end = 0;
        for (off, _, _, data) in parts.iter() {
            if *off > end {
                return None;
            }
            end = end.max(off + data.len());
        }
        let last = parts.iter().find(|x| !x.1)?;
        if parts[0].0 != 0 || last.0 + last.3.len() != end {
            return None;
        }
        let parts = self.parts.remove(&key)?;
        // Overlaps: in offset order (ties in arrival order), each fragment gives only the
        // bytes after those before it (tshark's reassembly).
        let mut payload = Vec::with_capacity(end);
        for (off, _, _, data) in &parts {
            if off + data.len() > payload.len() {
                payload.extend_from_slice(&data[payload.len() - off..]);
            }
        }
        let mut dgram = parts[0].2.clone();
        dgram.extend_from_slice(&payload);
        let total = u16::try_from(dgram.len()).ok()?;
        let mut v = wire::ipv4::Packet::new_unchecked(&mut dgram[..]);
        v.set_total_len(total);
        v.set_more_frags(false);
        v.set_frag_offset(0);
        v.fill_checksum();
        Some(dgram)
    }
}

// ---- The window's side ----

/// One connection as the window delivered it.
#[derive(Debug)]
struct Delivered {
    client: Endpoint,
    server: Endpoint,
    dirs: [Vec<Item>; 2],
    /// Stream offset each direction's next call should start at.
    expect: [u64; 2],
}

/// What the window delivered for a capture.
struct Run {
    conns: Vec<Delivered>,
    stats: operators::stream::WindowStats,
    /// Whether some packet was captured shorter than it was on the wire (a snap length).
    cut: bool,
}

fn window_streams(file: &Path) -> Result<Run, String> {
    let (records, err) = ports::pcap::read_all(file).map_err(|e| e.to_string())?;
    if let Some(e) = err {
        return Err(e.to_string());
    }
    let cut = records
        .iter()
        .any(|r| (r.data.len() as u64) < u64::from(r.orig_len));
    let mut conns: BTreeMap<u64, Delivered> = BTreeMap::new();
    let udf = |i: &WindowInfo, bytes: &[u8]| {
        let s = i.stream;
        let c = conns.entry(s.connection).or_insert_with(|| {
            let client = match s.direction {
                Direction::Client => s.flow,
                Direction::Server => s.flow.reversed(),
            };
            Delivered {
                client: (client.src, client.src_port),
                server: (client.dst, client.dst_port),
                dirs: [Vec::new(), Vec::new()],
                expect: [0, 0],
            }
        });
        let d = usize::from(s.direction == Direction::Server);
        if bytes.is_empty() {
            return;
        }
        assert!(i.offset >= c.expect[d], "offsets go backwards: {i:?}");
        if i.offset > c.expect[d] {
            c.dirs[d].push(Item::Gap(i.offset - c.expect[d]));
        }
        push_data(&mut c.dirs[d], bytes);
        c.expect[d] = i.offset + bytes.len() as u64;
        // Windows are tumbling: a full one has `size` bytes.
        assert!(i.kind != WindowKind::Full || bytes.len() == 1024, "{i:?}");
    };
    let mut w = Window::new(1024, 1024, Duration::MAX, udf).map_err(|e| e.to_string())?;
    let mut defrag = Defrag::default();
    for r in &records {
        let ts = r.timestamp;
        let pkt = match from_ethernet(&r.data, 0) {
            Found::Tcp(o, _) if plain_ethernet(&r.data, o) => Some(Packet::from_bytes(&r.data)),
            Found::Tcp(o, end) => {
                let mut p = Packet::from_bytes(&r.data[..end]);
                p.set_network_header(o);
                Some(p)
            }
            Found::Fragment(o, end) => {
                defrag
                    .push(&r.data[o..end])
                    .and_then(|d| match from_ip(&d, 0) {
                        Found::Tcp(o, end) => {
                            let mut p = Packet::from_bytes(&d[..end]);
                            p.set_network_header(o);
                            Some(p)
                        }
                        _ => None,
                    })
            }
            Found::Nothing => Some(Packet::from_bytes(&r.data)),
        };
        if let Some(mut p) = pkt {
            p.meta.timestamp = Timestamp(ts.0);
            w.observe(&p);
        }
    }
    w.flush();
    let stats = w.stats();
    drop(w);
    Ok(Run {
        conns: conns.into_values().collect(),
        stats,
        cut,
    })
}

/// Whether the IP header at `o` is where the window's own Ethernet walk finds it.
fn plain_ethernet(frame: &[u8], o: usize) -> bool {
    wire::vlan::walk(frame)
        .is_ok_and(|l| l.l3_offset == o && matches!(l.ethertype, 0x0800 | 0x86dd))
}

fn describe(items: &[Item]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|i| match i {
            Item::Data(v) => format!("{} bytes", v.len()),
            Item::Gap(n) => format!("gap {n}"),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Where two directions first differ.
fn first_difference(a: &[Item], b: &[Item]) -> String {
    let flat = |items: &[Item]| -> Vec<Option<u8>> {
        let mut v = Vec::new();
        for i in items {
            match i {
                Item::Data(d) => v.extend(d.iter().map(|&x| Some(x))),
                Item::Gap(n) => v.extend(std::iter::repeat_n(None, *n as usize)),
            }
        }
        v
    };
    let (fa, fb) = (flat(a), flat(b));
    let at = fa
        .iter()
        .zip(&fb)
        .position(|(x, y)| x != y)
        .unwrap_or(fa.len().min(fb.len()));
    let show = |v: &[Option<u8>]| -> String {
        v.iter()
            .skip(at)
            .take(12)
            .map(|x| x.map_or("..".to_string(), |b| format!("{b:02x}")))
            .collect()
    };
    format!(
        "window {} vs tshark {}, first difference at byte {at}: {} vs {}",
        describe(a),
        describe(b),
        show(&fa),
        show(&fb)
    )
}

/// A direction without its holes (runs merged).
fn without_holes(items: &[Item]) -> Vec<Item> {
    let mut out = Vec::new();
    for i in items {
        if let Item::Data(d) = i {
            push_data(&mut out, d);
        }
    }
    out
}

/// Compares one connection; `holes`: whether hole positions are compared too.
fn compare(c: &Delivered, f: &Followed, holes: bool) -> Vec<String> {
    let mut diffs = Vec::new();
    for d in 0..2 {
        let (a, b) = if holes {
            (c.dirs[d].clone(), f.dirs[d].clone())
        } else {
            (without_holes(&c.dirs[d]), without_holes(&f.dirs[d]))
        };
        if a != b {
            diffs.push(format!(
                "{}: {}",
                ["client->server", "server->client"][d],
                first_difference(&a, &b)
            ));
        }
    }
    diffs
}

/// Connections compared under each rule, over all captures.
#[derive(Debug, Default)]
struct Tally {
    compared: usize,
    equal: usize,
    /// Paired by order because tshark names IPv6 endpoints otherwise (see the test).
    renamed: usize,
    /// In captures cut by a snap length: bytes compared, holes not (see the test).
    cut: usize,
}

/// The documented exceptions, each a count over the captures (printed, and checked so
/// that a change in them is seen):
///
/// * **IPv6 endpoint names.** tshark names an IPv6 endpoint by its Mobile IPv6 Home
///   Address option and a type 0 routing header's final destination; the window keys
///   connections by the addresses of the IPv6 header, as every FuseBox flow key does. Such
///   connections (the `chksums/ip6-hoa-*` and `chksums/ip6-route0-*` captures, one each)
///   cannot be paired by endpoints: the ones left unpaired in a capture are paired in order
///   of appearance, their ports must match, and their bytes are compared as usual.
const RENAMED: usize = 4;
/// * **Snap length.** A packet captured shorter than it was on the wire gives tshark its
///   on-wire length, so it moves on without marking the missing bytes; a FuseBox packet has
///   no on-wire length, so the window delivers the bytes there are and marks the missing
///   ones as a hole when later bytes come. In captures with such packets
///   (`communityid/tcp.pcap`, one connection), the bytes are compared, holes are not.
const CUT: usize = 1;

#[test]
fn window_matches_tshark_follow() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/pcaps");
    if !root.is_dir() {
        return skip(&format!("{} not found", root.display()));
    }
    if Command::new("tshark").arg("-v").output().is_err() {
        return skip("tshark not found (Debian package tshark)");
    }
    let mut files = ports::pcap::capture_files(&root.join("zeek-traces"));
    files.extend(ports::pcap::capture_files(&root.join("tcpreplay")));
    assert!(!files.is_empty(), "no captures under {}", root.display());

    let mut tally = Tally::default();
    let mut streams_total = 0usize;
    let mut failures = Vec::new();
    for file in &files {
        let name = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        let followed = match tshark_follow(file) {
            Ok(f) => f,
            Err(e) => {
                failures.push(format!("{name}: tshark failed: {e}"));
                continue;
            }
        };
        let run = match window_streams(file) {
            Ok(x) => x,
            Err(e) => {
                failures.push(format!("{name}: reading failed: {e}"));
                continue;
            }
        };
        streams_total += followed.len();
        // Pair by endpoints, in order of appearance.
        type Pair = (Endpoint, Endpoint);
        let key = |a: Endpoint, b: Endpoint| -> Pair {
            if a <= b {
                (a, b)
            } else {
                (b, a)
            }
        };
        let mut theirs: BTreeMap<Pair, Vec<(u64, &Followed)>> = BTreeMap::new();
        for (id, f) in &followed {
            match f.nodes {
                [Some(a), Some(b)] => theirs.entry(key(a, b)).or_default().push((*id, f)),
                _ => failures.push(format!("{name}: tshark stream {id} has no endpoints")),
            }
        }
        let mut mine: BTreeMap<Pair, Vec<&Delivered>> = BTreeMap::new();
        for c in &run.conns {
            mine.entry(key(c.client, c.server)).or_default().push(c);
        }
        let mut pairs: Vec<(u64, &Followed, &Delivered, bool)> = Vec::new();
        let mut lone_theirs: Vec<(u64, &Followed)> = Vec::new();
        let mut lone_mine: Vec<&Delivered> = Vec::new();
        for (pair, list) in &theirs {
            let m = mine.get(pair).map(Vec::as_slice).unwrap_or_default();
            for (k, (id, f)) in list.iter().enumerate() {
                match m.get(k) {
                    Some(c) => pairs.push((*id, f, c, false)),
                    None => lone_theirs.push((*id, *f)),
                }
            }
            lone_mine.extend(m.iter().skip(list.len()));
        }
        for (pair, list) in &mine {
            if !theirs.contains_key(pair) {
                lone_mine.extend(list.iter());
            }
        }
        // Unpaired on both sides: the IPv6 endpoint naming exception.
        lone_theirs.sort_by_key(|x| x.0);
        lone_mine.sort_by_key(|c| (c.client, c.server));
        if lone_theirs.len() == lone_mine.len() {
            for ((id, f), c) in lone_theirs.drain(..).zip(lone_mine.drain(..)) {
                let ports = |e: Option<Endpoint>| e.map(|e| e.1);
                let v6 = c.client.0.is_ipv6();
                if v6
                    && ports(f.nodes[0]) == Some(c.client.1)
                    && ports(f.nodes[1]) == Some(c.server.1)
                {
                    tally.renamed += 1;
                    pairs.push((id, f, c, true));
                } else {
                    failures.push(format!(
                        "{name}: tshark stream {id} {:?} and window connection {:?} -> {:?} unpaired",
                        f.nodes, c.client, c.server
                    ));
                }
            }
        }
        for (id, f) in lone_theirs {
            failures.push(format!(
                "{name}: tshark stream {id} {:?}: no window connection",
                f.nodes
            ));
        }
        for c in lone_mine {
            failures.push(format!(
                "{name}: window connection {:?} -> {:?}: no tshark stream",
                c.client, c.server
            ));
        }
        for (id, f, c, renamed) in pairs {
            tally.compared += 1;
            let mut diffs = compare(c, f, !run.cut);
            if run.cut {
                tally.cut += 1;
            }
            // Node 0 is the window's client (by port alone for a renamed IPv6 endpoint).
            let orient = if renamed {
                f.nodes[0].map(|e| e.1) == Some(c.client.1)
            } else {
                f.nodes[0] == Some(c.client)
            };
            if !orient {
                diffs.push(format!(
                    "tshark's node 0 {:?} is not the window's client {:?}",
                    f.nodes[0], c.client
                ));
            }
            if diffs.is_empty() {
                tally.equal += 1;
            }
            for d in diffs {
                failures.push(format!("{name}: stream {id} {d}"));
            }
        }
        let r = run.stats.reassembly;
        println!(
            "{name}: {} tshark streams, {} window connections; segments {}, out-of-order {}, duplicates {}, holes skipped {} ({} bytes), overflows {}",
            followed.len(),
            run.stats.connections,
            r.segments,
            r.out_of_order,
            r.duplicates,
            r.holes_skipped,
            r.bytes_skipped,
            r.overflows
        );
    }
    println!(
        "{} captures, {streams_total} tshark streams, {} connections compared, {} equal \
         ({} paired by order under the IPv6 naming exception, {} compared without holes \
         under the snap length exception)",
        files.len(),
        tally.compared,
        tally.equal,
        tally.renamed,
        tally.cut
    );
    for f in &failures {
        println!("MISMATCH {f}");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches (listed above)",
        failures.len()
    );
    assert_eq!(
        tally.compared, streams_total,
        "every tshark stream compared"
    );
    assert_eq!(tally.equal, tally.compared);
    assert_eq!(
        (tally.renamed, tally.cut),
        (RENAMED, CUT),
        "the documented exceptions changed"
    );
}
