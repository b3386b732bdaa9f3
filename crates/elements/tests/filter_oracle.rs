//! The libpcap oracle: IPClassifier and IPFilter verdicts must agree with libpcap's BPF
//! compiler on every packet, for every Click pattern that has a tcpdump equivalent.
//!
//! Packets: every Ethernet capture under `shared/data/pcaps` (next to the workspace) plus a
//! few thousand generated IPv4 frames (TCP/UDP/ICMP/other, fragments, IP options, truncated
//! transport headers). Only Ethernet + IPv4 frames with a well-formed header are compared; the
//! frame is cut to the IP total length for both sides (CheckIPHeader removes the trailer).
//!
//! libpcap quirk: a load past the end of the packet makes the whole BPF program reject, while
//! Click only makes that one test false (so `not tcp port 80` on a TCP packet whose header
//! is cut short matches in Click). First fragments whose TCP/UDP/ICMP header is shorter than
//! its fixed part are therefore counted but not compared.

mod common;

use elements::{build, BuildCtx, Context, Names, Verdict};
use packet::Packet;
use pcap::{Capture, Linktype};
use std::path::Path;
use wire::IpProtocol;

/// (Click pattern, tcpdump expression). The oracle filter is `ip and (<tcpdump>)`.
const TABLE: &[(&str, &str)] = &[
    ("tcp", "tcp"),
    ("udp", "udp"),
    ("icmp", "icmp"),
    ("ip proto tcp", "ip proto 6"),
    ("ip proto 47", "ip proto 47"),
    ("ip proto != 6", "not ip proto 6"),
    ("ip proto > 20", "ip[9] > 20"),
    ("ip proto tcp or udp", "tcp or udp"),
    ("src host 10.0.0.1", "src host 10.0.0.1"),
    ("dst host 192.168.1.1", "dst host 192.168.1.1"),
    ("host 1.2.3.4", "host 1.2.3.4"),
    (
        "src and dst host 10.0.0.1",
        "src host 10.0.0.1 and dst host 10.0.0.1",
    ),
    ("src or dst host 8.8.8.8", "host 8.8.8.8"),
    ("host != 10.0.0.1", "not host 10.0.0.1"),
    ("src host == 10.0.0.2", "src host 10.0.0.2"),
    ("src net 10/8", "src net 10.0.0.0/8"),
    ("dst net 192.168.0.0/16", "dst net 192.168.0.0/16"),
    (
        "net 172.16.0.0 mask 255.240.0.0",
        "net 172.16.0.0 mask 255.240.0.0",
    ),
    ("10.0.0.0/24", "net 10.0.0.0/24"),
    (
        "src host 10.0.0.1 or 10.0.0.2",
        "src host 10.0.0.1 or src host 10.0.0.2",
    ),
    ("src net lan", "src net 192.168.1.0/24"),
    ("dst gw", "dst host 10.0.0.2"),
    (
        "dst host 10.0.0.1 and not src net 192.168/16",
        "dst host 10.0.0.1 and not src net 192.168.0.0/16",
    ),
    ("port 80", "(tcp or udp) and port 80"),
    ("src port 53", "(tcp or udp) and src port 53"),
    ("dst tcp port www", "tcp dst port 80"),
    ("udp port domain", "udp port 53"),
    ("port 80 or 443", "(tcp or udp) and (port 80 or port 443)"),
    ("www", "(tcp or udp) and port 80"),
    ("https or ssh", "(tcp or udp) and (port 443 or port 22)"),
    ("dst port < 1024", "(tcp or udp) and dst portrange 0-1023"),
    (
        "src port >= 1024",
        "(tcp or udp) and src portrange 1024-65535",
    ),
    ("port > 1023", "(tcp or udp) and portrange 1024-65535"),
    (
        "port <= 1023",
        "(tcp or udp) and src portrange 0-1023 and dst portrange 0-1023",
    ),
    (
        "src port != 80",
        "(tcp or udp) and ip[6:2] & 0x1fff = 0 and not src port 80",
    ),
    (
        "port != 80",
        "(tcp or udp) and ip[6:2] & 0x1fff = 0 and not port 80",
    ),
    (
        "src and dst port 80",
        "(tcp or udp) and src port 80 and dst port 80",
    ),
    ("not port 80", "not ((tcp or udp) and port 80)"),
    (
        "tcp src port 1023 or 1024",
        "tcp src port 1023 or tcp src port 1024",
    ),
    ("src tcp port & 0xff00 == 0", "tcp[0:2] & 0xff00 = 0"),
    ("tcp opt syn", "tcp[tcpflags] & tcp-syn != 0"),
    (
        "syn and not ack",
        "tcp[tcpflags] & tcp-syn != 0 and not tcp[tcpflags] & tcp-ack != 0",
    ),
    (
        "tcp opt fin or tcp opt rst",
        "tcp[tcpflags] & (tcp-fin|tcp-rst) != 0",
    ),
    ("fin ack", "tcp[13] & 0x11 = 0x11"),
    ("psh && urg", "tcp[13] & 0x28 = 0x28"),
    ("tcp win > 1000", "tcp[14:2] > 1000"),
    ("tcp win 0", "tcp[14:2] = 0"),
    ("icmp type echo", "icmp[icmptype] = icmp-echo"),
    (
        "icmp type echo-reply or unreachable",
        "icmp[0] = 0 or icmp[0] = 3",
    ),
    ("icmp type != 8", "icmp[0] != 8"),
    ("icmp type > 10", "icmp[0] > 10"),
    ("ip vers 4", "ip[0] >> 4 = 4"),
    ("ip hl > 5", "ip[0] & 0xf > 5"),
    ("ip id < 1000", "ip[4:2] < 1000"),
    ("ip tos 0x10", "ip[1] = 0x10"),
    ("ip dscp 46", "ip[1] >> 2 = 46"),
    ("ip ect", "ip[1] & 3 != 0"),
    ("ip ce", "ip[1] & 3 = 3"),
    ("ip ttl > 10", "ip[8] > 10"),
    ("ip ttl <= 10", "ip[8] <= 10"),
    ("ip ttl < 64", "ip[8] < 64"),
    ("ip ttl >= 128", "ip[8] >= 128"),
    ("ip ttl 64 or 128", "ip[8] = 64 or ip[8] = 128"),
    ("ip frag", "ip[6:2] & 0x3fff != 0"),
    ("ip unfrag", "ip[6:2] & 0x3fff = 0"),
    ("unfrag and udp", "ip[6:2] & 0x3fff = 0 and udp"),
    ("ip len >= 100", "ip[2:2] >= 100"),
    ("ip[9] = 17", "ip[9] = 17"),
    (
        "ip[12:4] & 0xff000000 == 0x0a000000",
        "ip[12:4] & 0xff000000 = 0x0a000000",
    ),
    ("ip[6:2] & 0x1fff != 0", "ip[6:2] & 0x1fff != 0"),
    ("tcp[13] & 2 != 0", "tcp[13] & 2 != 0"),
    ("udp and transp[4:2] > 100", "udp[4:2] > 100"),
    ("transp[0:2] == 80 and tcp", "tcp[0:2] = 80"),
    (
        "ether host 00:11:22:33:44:55",
        "ether host 00:11:22:33:44:55",
    ),
    (
        "src ether host 02:00:00:00:00:01",
        "ether src 02:00:00:00:00:01",
    ),
    ("true", "ip"),
    ("false", "not ip"),
    ("-", "ip"),
    ("not tcp", "not tcp"),
    ("!(tcp or udp)", "not (tcp or udp)"),
    (
        "tcp ? dst port 80 : icmp",
        "(tcp and tcp dst port 80) or (not tcp and icmp)",
    ),
    (
        "(dst port www or dst port ssh) and tcp opt syn",
        "(tcp dst port 80 or tcp dst port 22) and tcp[13] & 2 != 0",
    ),
    (
        "src host 10.0.0.1 && dst port 53 || icmp",
        "(src host 10.0.0.1 and (tcp or udp) and dst port 53) or icmp",
    ),
    (
        "udp or icmp and src net 10/8",
        "udp or (icmp and src net 10.0.0.0/8)",
    ),
    (
        "dst port 22 and src host 1.2.3.4 or 8.8.8.8",
        "((tcp or udp) and dst port 22 and src host 1.2.3.4) or src host 8.8.8.8",
    ),
];

/// Deterministic xorshift64*.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn generated_frames(n: usize) -> Vec<Vec<u8>> {
    let mut r = Rng(0x5eed_f11e_4000_0001);
    let macs: [[u8; 6]; 4] = [
        [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
        [0x02, 0, 0, 0, 0, 0x01],
        [0xff; 6],
        [0x00, 0x11, 0x22, 0x33, 0x44, 0x56],
    ];
    let addrs: [[u8; 4]; 9] = [
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        [10, 1, 2, 3],
        [192, 168, 1, 1],
        [192, 168, 1, 77],
        [1, 2, 3, 4],
        [8, 8, 8, 8],
        [172, 16, 5, 4],
        [172, 32, 0, 1],
    ];
    let ports: [u16; 13] = [
        22, 23, 25, 53, 80, 443, 1023, 1024, 8000, 8080, 0, 65535, 256,
    ];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let x = r.next();
        let mut f = Vec::new();
        f.extend_from_slice(&r.pick(&macs));
        f.extend_from_slice(&r.pick(&macs));
        f.extend_from_slice(if r.chance(97) {
            &[0x08, 0x00]
        } else {
            &[0x08, 0x06]
        });
        let opt_words = if r.chance(20) {
            1 + r.below(10) as usize
        } else {
            0
        };
        let ihl = 5 + opt_words;
        let proto: u8 = match r.below(100) {
            0..=39 => IpProtocol::TCP,
            40..=69 => IpProtocol::UDP,
            70..=84 => IpProtocol::ICMP,
            _ => r.pick(&[47, 132, 2, 33, (x >> 56) as u8]),
        };
        // Transport header + payload.
        let mut l4 = Vec::new();
        match proto {
            6 => {
                l4.extend_from_slice(&r.pick(&ports).to_be_bytes());
                l4.extend_from_slice(&r.pick(&ports).to_be_bytes());
                l4.extend_from_slice(&r.next().to_be_bytes());
                l4.push(0x50);
                l4.push(if r.chance(50) {
                    r.pick(&[0x02, 0x12, 0x10, 0x11, 0x04, 0x18, 0x28, 0x29])
                } else {
                    r.next() as u8
                });
                l4.extend_from_slice(
                    &r.pick(&[0u16, 512, 1000, 1001, 65535, x as u16])
                        .to_be_bytes(),
                );
                l4.extend_from_slice(&[0, 0, 0, 0]);
            }
            17 => {
                l4.extend_from_slice(&r.pick(&ports).to_be_bytes());
                l4.extend_from_slice(&r.pick(&ports).to_be_bytes());
                l4.extend_from_slice(&r.pick(&[8u16, 100, 101, 1500, x as u16]).to_be_bytes());
                l4.extend_from_slice(&[0, 0]);
            }
            1 => {
                l4.push(r.pick(&[0u8, 3, 5, 8, 11, 13, 14, 17, 18, (x >> 16) as u8]));
                l4.push(r.below(16) as u8);
                l4.extend_from_slice(&(r.next() as u16).to_be_bytes());
                l4.extend_from_slice(&(r.next() as u32).to_be_bytes());
            }
            _ => {}
        }
        let pay = r.below(40) as usize;
        for _ in 0..pay {
            l4.push(r.next() as u8);
        }
        if r.chance(5) {
            let cut = r.below(l4.len() as u64 + 1) as usize;
            l4.truncate(cut);
        }
        let total = ihl * 4 + l4.len();
        let tos = r.pick(&[0u8, 0x10, 0xb8, 0x03, 0x01, 0x02, (x >> 24) as u8]);
        let frag: u16 = match r.below(100) {
            0..=59 => 0,
            60..=79 => 0x4000,
            80..=87 => 0x2000,
            88..=93 => 0x2000 | (1 + r.below(0x1fff) as u16),
            _ => 1 + r.below(0x1fff) as u16,
        };
        let ttl = r.pick(&[1u8, 5, 10, 11, 63, 64, 128, 255, (x >> 32) as u8]);
        let vers_ihl = if r.chance(2) {
            0x60 | ihl as u8
        } else {
            0x40 | ihl as u8
        };
        f.push(vers_ihl);
        f.push(tos);
        f.extend_from_slice(&(total as u16).to_be_bytes());
        f.extend_from_slice(&r.pick(&[0u16, 999, 1000, (x >> 40) as u16]).to_be_bytes());
        f.extend_from_slice(&frag.to_be_bytes());
        f.push(ttl);
        f.push(proto);
        f.extend_from_slice(&[0, 0]);
        let src = r.pick(&addrs);
        let dst = if r.chance(5) { src } else { r.pick(&addrs) };
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend(std::iter::repeat_n(1u8, opt_words * 4));
        f.extend_from_slice(&l4);
        if r.chance(10) {
            f.extend_from_slice(&[0; 6]); // Ethernet trailer
        }
        out.push(f);
    }
    out
}

fn capture_frames(max_per_file: usize, max_total: usize) -> Option<(usize, Vec<Vec<u8>>)> {
    let dir = common::shared_data("pcaps")?;
    let files = ports::pcap::capture_files(&dir);
    let mut frames = Vec::new();
    let mut used = 0;
    for f in files {
        let Ok(mut cap) = Capture::from_file(&f) else {
            continue;
        };
        if cap.get_datalink() != Linktype::ETHERNET {
            continue;
        }
        used += 1;
        let mut n = 0;
        while let Ok(p) = cap.next_packet() {
            frames.push(p.data.to_vec());
            n += 1;
            if n >= max_per_file || frames.len() >= max_total {
                break;
            }
        }
        if frames.len() >= max_total {
            break;
        }
    }
    Some((used, frames))
}

/// The frame cut to its IP total length, if it is Ethernet + a well-formed IPv4 header whose
/// fixed transport header (on first fragments) is complete; `Err(true)` for IPv4 frames left
/// out only because of a short transport header.
fn comparable(frame: &[u8]) -> Result<&[u8], bool> {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] {
        return Err(false);
    }
    let ip = &frame[14..];
    let hl = usize::from(ip[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ip[0] >> 4 != 4 || hl < 20 || total < hl || total > ip.len() {
        return Err(false);
    }
    let first = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff == 0;
    let need = match ip[9] {
        6 => 20,
        17 | 1 => 8,
        _ => 0,
    };
    if first && total - hl < need {
        return Err(true);
    }
    Ok(&frame[..14 + total])
}

fn bcx<'a>(names: &'a Names, noutputs: usize) -> BuildCtx<'a> {
    BuildCtx {
        name: "oracle/f",
        ninputs: 1,
        noutputs,
        names,
        base_dir: Path::new("."),
    }
}

fn element_verdict(e: &mut Box<dyn elements::Element>, frame: &[u8], set_transport: bool) -> bool {
    let mut p = Packet::from_bytes(frame);
    p.set_mac_header(0);
    p.set_network_header(14);
    if set_transport {
        p.set_transport_header(14 + usize::from(frame[14] & 0xf) * 4);
    }
    let mut cx = Context::default();
    match e.push(0, p, &mut cx) {
        Verdict::Out(0, _) => true,
        Verdict::Drop(..) => false,
        v => panic!("unexpected verdict {v:?}"),
    }
}

#[test]
fn ipfilter_and_ipclassifier_agree_with_libpcap() {
    assert!(TABLE.len() >= 40);
    let mut names = Names::new();
    names
        .add_address_info("lan 192.168.1.0/24, gw 10.0.0.2")
        .unwrap();

    let generated = generated_frames(6000);
    let captured = capture_frames(20_000, 400_000);
    let mut sets: Vec<(&str, Vec<Vec<u8>>)> = vec![("generated", generated)];
    if let Some((files, frames)) = captured {
        println!(
            "capture files used: {files} Ethernet captures, {} frames",
            frames.len()
        );
        sets.push(("captures", frames));
    }

    let dead = Capture::dead(Linktype::ETHERNET).expect("pcap dead handle");
    let mut disagreements = Vec::new();
    for (set, frames) in &sets {
        let (mut compared, mut short, mut other) = (0usize, 0usize, 0usize);
        let usable: Vec<&[u8]> = frames
            .iter()
            .filter_map(|f| match comparable(f) {
                Ok(f) => {
                    compared += 1;
                    Some(f)
                }
                Err(true) => {
                    short += 1;
                    None
                }
                Err(false) => {
                    other += 1;
                    None
                }
            })
            .collect();
        println!("[{set}] {} frames: {compared} compared, {short} short transport header, {other} not Ethernet+IPv4", frames.len());
        for (i, (click, tcpdump)) in TABLE.iter().enumerate() {
            // The optimiser refuses programs that reject everything (`false`): compile those
            // unoptimised.
            let text = format!("ip and ({tcpdump})");
            let bpf = dead
                .compile(&text, true)
                .or_else(|_| dead.compile(&text, false))
                .unwrap_or_else(|e| panic!("libpcap rejects `{tcpdump}`: {e}"));
            let mut cls = build("IPClassifier", click, &bcx(&names, 1))
                .unwrap_or_else(|e| panic!("IPClassifier({click}): {e}"));
            let mut flt = build("IPFilter", &format!("allow {click}"), &bcx(&names, 1))
                .unwrap_or_else(|e| panic!("IPFilter(allow {click}): {e}"));
            let mut matched = 0usize;
            let mut bad = 0usize;
            for (k, f) in usable.iter().enumerate() {
                let want = bpf.filter(f);
                let got_c = element_verdict(&mut cls, f, k % 2 == 0);
                let got_f = element_verdict(&mut flt, f, k % 2 == 1);
                matched += usize::from(want);
                if got_c != want || got_f != want {
                    bad += 1;
                    if disagreements.len() < 20 {
                        let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
                        disagreements.push(format!(
                            "[{set}] `{click}` vs `{tcpdump}`: libpcap {want}, IPClassifier {got_c}, IPFilter {got_f}: {hex}"
                        ));
                    }
                }
            }
            println!(
                "[{set}] #{i:02} {click:<48} matched {matched:>6}/{compared}, disagreements {bad}"
            );
        }
    }
    assert!(
        disagreements.is_empty(),
        "disagreements with libpcap:\n{}",
        disagreements.join("\n")
    );
}
