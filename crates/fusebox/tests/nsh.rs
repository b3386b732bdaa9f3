//! `fusebox run --nsh`: a FuseBox chain as an NSH-aware service function.
//!
//! A NAPT (examples/napts/napt.click) with flows going out at `n1.eth0` and their replies
//! coming back at `n1.eth1`, run once on plain frames and once with `--nsh` on the same
//! frames wrapped in an NSH (outgoing: MD type 1 over Ethernet transport; replies: MD type 2
//! over VXLAN-GPE; one frame left plain). Every packet of the NSH run is the plain run's
//! packet, byte for byte, in the NSH of the input it came from (SI − 1, the transport's
//! addresses swapped): the NAT's translated packets and its translated-back replies keep
//! their paths with no proxy table. The three modes give the same files, `fusebox verify
//! --nsh` agrees, and the run balances.

mod common;

use common::{fusebox, fusebox_ok, packets, root, scratch};
use packet::{Precision, Timestamp};
use ports::pcap::{PcapWriter, DLT_EN10MB};
use std::path::Path;
use wire::build::{Frame, Gpe, Nsh};
use wire::nsh::Tlv;

/// The one-NAPT chain with an entry on both sides.
fn chain(dir: &Path) -> std::path::PathBuf {
    let click = root().join("examples/napts/napt.click");
    let path = dir.join("napt.toml");
    std::fs::write(
        &path,
        format!(
            r#"[nf.n1]
click = "{}"
define = {{ EXT = "10.0.101.1", MAC0 = "02:00:00:00:01:10", MAC1 = "02:00:00:00:01:11", PEER0 = "02:00:00:00:00:11", PEER1 = "02:00:00:00:02:10" }}
[[entry]]
to = "n1.eth0"
[[entry]]
to = "n1.eth1"
"#,
            click.display()
        ),
    )
    .unwrap();
    path
}

fn write(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut w = PcapWriter::create(path, Precision::Micro, DLT_EN10MB).unwrap();
    for (us, f) in frames {
        w.write(Timestamp(us * 1000), f).unwrap();
    }
    w.finish().unwrap();
}

/// The outgoing frames: UDP and TCP flows from inside hosts (timestamps 1000 µs apart).
fn outgoing() -> Vec<(u64, Vec<u8>)> {
    (0..24u64)
        .map(|i| {
            let src = [192, 168, 0, 1 + (i % 4) as u8];
            let dst = [8, 8, (i % 3) as u8, 8];
            let sport = 5000 + (i % 6) as u16;
            let f = if i % 2 == 0 {
                Frame::udp(src, dst, sport, 53).payload(&[i as u8; 10])
            } else {
                Frame::tcp(src, dst, sport, 80).flags(wire::tcp::flags::SYN)
            };
            (1_000 + i * 1_000, f.build())
        })
        .collect()
}

/// Replies to the NAT's translated packets: addresses and ports swapped, later.
fn replies(translated: &[Vec<u8>]) -> Vec<(u64, Vec<u8>)> {
    translated
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let v4 = common::v4(f);
            let (src, dst) = (v4.dst, v4.src);
            let frame = if v4.proto == 17 {
                Frame::udp(src, dst, v4.dport, v4.sport).payload(b"answer")
            } else {
                Frame::tcp(src, dst, v4.dport, v4.sport)
                    .flags(wire::tcp::flags::SYN | wire::tcp::flags::ACK)
            };
            (100_000 + i as u64 * 1_000, frame.build())
        })
        .collect()
}

/// The header an input of timestamp `us` µs is wrapped in: outgoing frames (before
/// 100 ms) MD type 1 over Ethernet on path 10, replies MD type 2 over VXLAN-GPE on path 20;
/// the frame at 5 ms stays plain.
fn wrap(us: u64) -> Option<(Nsh, Option<Gpe>)> {
    if us == 5_000 {
        return None;
    }
    if us < 100_000 {
        let ctx = [us as u32, 0xdead_beef, 0, 7];
        return Some((Nsh::md1(10, 255, ctx).ttl(40), None));
    }
    let v = (us as u32).to_be_bytes();
    let tlvs = [
        Tlv {
            class: 0x0101,
            tlv_type: 4,
            value: &v,
        },
        Tlv {
            class: 0x0202,
            tlv_type: 9,
            value: &[1, 2, 3],
        },
    ];
    let mut g = Gpe::new([172, 16, 0, 1], [172, 16, 0, 2], 0x00_beef);
    g.sport = 40_000 + (us / 1000) as u16;
    Some((Nsh::md2(20, 254, &tlvs).ttl(63), Some(g)))
}

fn wrapped(frames: &[(u64, Vec<u8>)]) -> Vec<(u64, Vec<u8>)> {
    frames
        .iter()
        .map(|(us, f)| {
            let out = match wrap(*us) {
                None => f.clone(),
                Some((n, None)) => n.ethernet([6, 0, 0, 0, 0, 1], [6, 0, 0, 0, 0, 2], f),
                Some((n, Some(g))) => n.vxlan_gpe(&g, f),
            };
            (*us, out)
        })
        .collect()
}

/// What the NSH-aware chain sends for `inner`, caused by the input of time `us`.
fn expected(us: u64, inner: &[u8]) -> Vec<u8> {
    let Some((n, g)) = wrap(us) else {
        return inner.to_vec();
    };
    let r = n.repr();
    let back = match r.metadata {
        wire::nsh::Metadata::Type1(ctx) => Nsh::md1(r.spi, r.si - 1, ctx),
        wire::nsh::Metadata::Type2(md) => {
            let tlvs: Vec<_> = wire::nsh::TlvIter::new(md).map(Result::unwrap).collect();
            Nsh::md2(r.spi, r.si - 1, &tlvs)
        }
    }
    .ttl(r.ttl);
    match g {
        None => back.ethernet([6, 0, 0, 0, 0, 2], [6, 0, 0, 0, 0, 1], inner),
        Some(g) => {
            let mut b = g;
            (b.src_ip, b.dst_ip) = (g.dst_ip, g.src_ip);
            (b.src_mac, b.dst_mac) = (g.dst_mac, g.src_mac);
            b.ttl = 64;
            back.vxlan_gpe(&b, inner)
        }
    }
}

fn timestamps_us(path: &Path) -> Vec<u64> {
    let (recs, err) = ports::pcap::read_all(path).unwrap();
    assert!(err.is_none());
    recs.iter().map(|r| r.timestamp.0 / 1000).collect()
}

#[test]
fn a_napt_keeps_its_packets_nsh_in_every_mode() {
    let dir = scratch("nsh-napt");
    let chain = chain(&dir);
    let chain = chain.to_str().unwrap();
    // The NAT's translations, to answer them.
    write(&dir.join("out.pcap"), &outgoing());
    fusebox_ok(
        &dir,
        &[
            "run",
            chain,
            "-i",
            "n1.eth0=out.pcap",
            "--out-dir",
            "first",
            "-q",
        ],
    );
    let translated = packets(&dir.join("first/n1.eth1.pcap"));
    assert_eq!(translated.len(), outgoing().len());
    write(&dir.join("back.pcap"), &replies(&translated));
    write(&dir.join("out-nsh.pcap"), &wrapped(&outgoing()));
    write(&dir.join("back-nsh.pcap"), &wrapped(&replies(&translated)));

    let plain_args = ["-i", "n1.eth0=out.pcap", "-i", "n1.eth1=back.pcap"];
    let nsh_args = ["-i", "n1.eth0=out-nsh.pcap", "-i", "n1.eth1=back-nsh.pcap"];
    let run = |args: &[&str], out: &str, extra: &[&str]| {
        let mut a = vec!["run", chain];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--out-dir", out, "-q"]);
        a.extend_from_slice(extra);
        fusebox_ok(&dir, &a)
    };
    run(&plain_args, "plain", &[]);
    let o = run(&nsh_args, "naive", &["--nsh"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let n = outgoing().len() * 2;
    assert!(
        err.contains(&format!(
            "nsh: {} frames decapsulated, 1 without NSH (run as they are), {} packets encapsulated, 0 left",
            n - 1,
            n - 1
        )),
        "{err}"
    );
    for exit in ["n1.eth0", "n1.eth1"] {
        let plain = packets(&dir.join(format!("plain/{exit}.pcap")));
        let got = packets(&dir.join(format!("naive/{exit}.pcap")));
        let times = timestamps_us(&dir.join(format!("plain/{exit}.pcap")));
        assert_eq!(got.len(), plain.len(), "{exit}");
        assert_eq!(plain.len(), outgoing().len(), "{exit}: every flow answered");
        for ((inner, out), us) in plain.iter().zip(&got).zip(&times) {
            assert_eq!(out, &expected(*us, inner), "{exit} at {us} µs");
            // What left is the NSH-aware chain's own output, not its input.
            if let Some(at) = wire::nsh::locate(out) {
                assert_eq!(&out[at.inner..], &inner[..]);
            }
        }
    }
    // The NSH survives the translation both ways: outgoing packets leave on path 10 and
    // replies on path 20, each one index further.
    let first = packets(&dir.join("naive/n1.eth1.pcap"));
    let at = wire::nsh::locate(&first[0]).unwrap();
    let p = wire::nsh::Packet::new_checked(&first[0][at.nsh..]).unwrap();
    assert_eq!(
        (at.transport, p.spi(), p.si(), p.ttl()),
        (wire::nsh::Transport::Ethernet, 10, 254, 40)
    );
    let back = packets(&dir.join("naive/n1.eth0.pcap"));
    let at = wire::nsh::locate(&back[0]).unwrap();
    let p = wire::nsh::Packet::new_checked(&back[0][at.nsh..]).unwrap();
    assert_eq!(
        (at.transport, p.spi(), p.si()),
        (wire::nsh::Transport::VxlanGpe, 20, 253)
    );

    // The modes agree, file for file, and `fusebox verify --nsh` finds them identical.
    for mode in ["synth", "fastpath"] {
        run(&nsh_args, mode, &["--nsh", "--mode", mode]);
        for exit in ["n1.eth0", "n1.eth1"] {
            assert_eq!(
                packets(&dir.join(format!("{mode}/{exit}.pcap"))),
                packets(&dir.join(format!("naive/{exit}.pcap"))),
                "{mode}: {exit}"
            );
        }
    }
    let mut v = vec![
        "verify",
        chain,
        "--nsh",
        "--modes",
        "naive,synth,fastpath,parallel",
    ];
    v.extend_from_slice(&nsh_args);
    let o = fusebox_ok(&dir, &v);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("identical"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // The chain file's setting does what --nsh does.
    let file = std::fs::read_to_string(chain).unwrap();
    let with = dir.join("napt-nsh.toml");
    std::fs::write(&with, format!("nsh = true\n{file}")).unwrap();
    run_file(&dir, &with, &nsh_args, "file");
    for exit in ["n1.eth0", "n1.eth1"] {
        assert_eq!(
            packets(&dir.join(format!("file/{exit}.pcap"))),
            packets(&dir.join(format!("naive/{exit}.pcap")))
        );
    }
    // One core only.
    let mut a = vec!["run", chain, "--nsh", "--cores", "2", "--out-dir", "x"];
    a.extend_from_slice(&nsh_args);
    let o = fusebox(&dir, &a);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("one core"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn run_file(dir: &Path, chain: &Path, args: &[&str], out: &str) {
    let mut a = vec!["run", chain.to_str().unwrap()];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--out-dir", out, "-q"]);
    fusebox_ok(dir, &a);
}
