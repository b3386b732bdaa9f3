//! IPsec interoperability with the Linux kernel (xfrm): FuseBox's `IPsecGCMEncap` /
//! `IPsecGCMDecap` against `ip xfrm state` / `ip xfrm policy` in tunnel mode with
//! `rfc4106(gcm(aes))`, the same keys, salts and SPIs.
//!
//! Two namespaces on one bridge (`sfc::lab`, removed when the lab drops, even on failure):
//! `kern` (192.0.2.2, inner address 10.2.0.1, the xfrm states and policies) and `fb`
//! (192.0.2.1, where FuseBox sends and captures raw frames with AF_PACKET).
//!
//! * The kernel decrypts what FuseBox encrypts: UDP datagrams 10.1.0.5 → 10.2.0.1:5000,
//!   encrypted by `IPsecGCMEncap` and sent from `fb`, arrive at a UDP socket in `kern`
//!   with their payloads; one with a flipped ICV byte does not.
//! * FuseBox decrypts what the kernel encrypts: datagrams sent in `kern` from 10.2.0.1 to
//!   10.1.0.5:6000 leave as ESP, are captured in `fb`, and `IPsecGCMDecap` gives back the
//!   inner datagrams: addresses, ports and payloads as sent, a valid IP header.
//!
//! Needs root (skipped with a message without it, except under `CI=true`) and a kernel
//! with ESP and GCM (`CONFIG_INET_ESP`, `CONFIG_CRYPTO_GCM`): probed first by adding the
//! state in a namespace; a kernel without them cannot run the test, whoever runs it, so
//! it is skipped with the kernel's message (a build option, not something CI can install).

use elements::{BuildCtx, Context, Element, Names, Verdict};
use nic::{Kind, Recv};
use packet::{Packet, Timestamp};
use sfc::lab::{can_run, exec_in, udp_socket, Lab};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::time::{Duration, Instant};
use wire::build::Frame;

/// Key and salt of each direction (as `ip xfrm` takes them: key, then the 4-byte salt).
const KEY_IN: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fa0a1a2a3";
const KEY_OUT: &str = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeffa4a5a6a7";
const SPI_IN: u32 = 0x4001;
const SPI_OUT: u32 = 0x4002;
const FB: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const KERN: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const FB_INNER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const KERN_INNER: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 1);

fn element(class: &str, config: &str) -> Box<dyn Element> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "gw/e",
        ninputs: 1,
        noutputs: 1,
        names: &names,
        base_dir: Path::new("."),
    };
    elements::build(class, config, &bcx).unwrap_or_else(|e| panic!("{class}: {e}"))
}

fn ip(ns: &str, args: &[&str]) {
    exec_in(ns, "ip", args).unwrap_or_else(|e| panic!("ip {args:?} in {ns}: {e}"));
}

/// Adds the states and policies of the tunnel in `ns`; `Err` with the kernel's message when
/// it has no ESP or GCM.
fn xfrm(ns: &str) -> Result<(), String> {
    let state = |src: Ipv4Addr, dst: Ipv4Addr, spi: u32, key: &str| {
        exec_in(
            ns,
            "ip",
            &[
                "xfrm",
                "state",
                "add",
                "src",
                &src.to_string(),
                "dst",
                &dst.to_string(),
                "proto",
                "esp",
                "spi",
                &format!("{spi:#x}"),
                "reqid",
                "1",
                "mode",
                "tunnel",
                "replay-window",
                "64",
                "aead",
                "rfc4106(gcm(aes))",
                &format!("0x{key}"),
                "128",
            ],
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    state(FB, KERN, SPI_IN, KEY_IN)?;
    state(KERN, FB, SPI_OUT, KEY_OUT)?;
    for (dir, src, dst, tsrc, tdst) in [
        ("in", "10.1.0.0/24", "10.2.0.0/24", FB, KERN),
        ("out", "10.2.0.0/24", "10.1.0.0/24", KERN, FB),
    ] {
        ip(
            ns,
            &[
                "xfrm",
                "policy",
                "add",
                "src",
                src,
                "dst",
                dst,
                "dir",
                dir,
                "tmpl",
                "src",
                &tsrc.to_string(),
                "dst",
                &tdst.to_string(),
                "proto",
                "esp",
                "reqid",
                "1",
                "mode",
                "tunnel",
            ],
        );
    }
    Ok(())
}

fn mac_string(m: &[u8; 6]) -> String {
    sfc::lab::mac_string(m)
}

#[test]
fn kernel_and_fusebox_decrypt_each_other() {
    let test = "kernel_and_fusebox_decrypt_each_other";
    if !can_run(test) {
        return;
    }
    let mut lab = Lab::new().expect("lab");
    let host = "h";
    lab.host(host).expect("host");
    let fb = lab.endpoint(host, "fb", FB).expect("fb end point");
    let kern = lab.endpoint(host, "kern", KERN).expect("kern end point");
    let (fb_ns, kern_ns) = (fb.eth0.netns.clone(), kern.eth0.netns.clone());
    if let Err(why) = xfrm(&kern_ns) {
        eprintln!(
            "skipping {test}: this kernel cannot run ESP with rfc4106(gcm(aes)) \
             (CONFIG_INET_ESP and CONFIG_CRYPTO_GCM are needed): {why}"
        );
        return;
    }
    ip(&kern_ns, &["addr", "add", "10.2.0.1/32", "dev", "lo"]);
    ip(
        &kern_ns,
        &[
            "route",
            "add",
            "10.1.0.0/24",
            "dev",
            "eth0",
            "src",
            "10.2.0.1",
        ],
    );
    // No ARP on the path: each side knows the other's MAC.
    ip(
        &kern_ns,
        &[
            "neigh",
            "replace",
            &FB.to_string(),
            "lladdr",
            &mac_string(&fb.eth0.mac),
            "dev",
            "eth0",
            "nud",
            "permanent",
        ],
    );
    let mut dev = nic::netns::run_in(&fb_ns, || nic::open("eth0", Kind::AfPacket))
        .expect("enter fb")
        .expect("AF_PACKET on fb's eth0");

    // FuseBox encrypts, the kernel decrypts.
    let sink = udp_socket(&kern_ns, SocketAddrV4::new(KERN_INNER, 5000)).expect("socket");
    let mut enc = element(
        "IPsecGCMEncap",
        &format!("SPI {SPI_IN:#x}, KEY {KEY_IN}, SRC {FB}, DST {KERN}"),
    );
    let payloads: Vec<Vec<u8>> = (0..6)
        .map(|i| format!("fusebox-to-kernel {i} {}", "x".repeat(i * 37)).into_bytes())
        .collect();
    let mut sent = 0;
    for (i, pl) in payloads.iter().enumerate() {
        let inner = Frame::udp(FB_INNER, KERN_INNER, 4000, 5000)
            .macs(fb.eth0.mac, kern.eth0.mac)
            .payload(pl)
            .build();
        let mut p = Packet::from_bytes(&inner);
        p.set_mac_header(0);
        p.set_network_header(14);
        let out = match enc.push(0, p, &mut Context::new(Timestamp(0))) {
            Verdict::Out(0, p) => p.data().to_vec(),
            v => panic!("encap: {v:?}"),
        };
        let mut frames = vec![out.clone()];
        if i == 2 {
            // A copy with a flipped ICV byte first: the kernel must refuse it (its window
            // does not move, so the genuine packet still passes).
            let mut bad = out;
            let at = bad.len() - 1;
            bad[at] ^= 1;
            frames.insert(0, bad);
        }
        for f in &frames {
            assert!(dev.tx.send(Timestamp(0), f).expect("send"));
            sent += 1;
        }
    }
    dev.tx.flush().expect("flush");
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    let start = Instant::now();
    while got.len() < payloads.len() + 1 && start.elapsed() < Duration::from_secs(3) {
        match sink.recv_from(&mut buf) {
            Ok((n, from)) => {
                assert_eq!(from, std::net::SocketAddr::from((FB_INNER, 4000)));
                got.push(buf[..n].to_vec());
            }
            Err(_) => break,
        }
    }
    assert_eq!(
        got, payloads,
        "the kernel's decryption of FuseBox's {sent} ESP frames"
    );

    // The kernel encrypts, FuseBox decrypts.
    let src = udp_socket(&kern_ns, SocketAddrV4::new(KERN_INNER, 7000)).expect("socket");
    let back: Vec<Vec<u8>> = (0..5)
        .map(|i| format!("kernel-to-fusebox {i} {}", "y".repeat(i * 53)).into_bytes())
        .collect();
    // Drain what the fb side saw so far (ARP, our own frames are not read back).
    let _ = dev
        .rx
        .recv(256, Duration::from_millis(50), &mut |_, _, _| {});
    for b in &back {
        src.send_to(b, SocketAddrV4::new(FB_INNER, 6000))
            .expect("send in kern");
    }
    let mut esp = Vec::new();
    let start = Instant::now();
    while esp.len() < back.len() && start.elapsed() < Duration::from_secs(3) {
        let r = dev
            .rx
            .recv(64, Duration::from_millis(20), &mut |_, _, f| {
                if f.len() > 34 && f[12..14] == [0x08, 0x00] && f[23] == wire::ip::protocol::ESP {
                    esp.push(f.to_vec());
                }
            })
            .expect("receive");
        assert_ne!(r, Recv::End);
    }
    assert_eq!(esp.len(), back.len(), "ESP frames from the kernel");
    let mut dec = element(
        "IPsecGCMDecap",
        &format!("SPI {SPI_OUT:#x}, KEY {KEY_OUT}, SRC {KERN}, DST {FB}, REPLAY 64"),
    );
    for (f, b) in esp.iter().zip(&back) {
        let mut p = Packet::from_bytes(f);
        p.set_mac_header(0);
        p.set_network_header(14);
        let inner = match dec.push(0, p, &mut Context::new(Timestamp(0))) {
            Verdict::Out(0, p) => p.data()[14..].to_vec(),
            Verdict::Drop(_, r) => panic!("FuseBox refused the kernel's ESP: {r}"),
            v => panic!("decap: {v:?}"),
        };
        let ihl = usize::from(inner[0] & 0x0f) * 4;
        assert_eq!(wire::checksum::data(&inner[..ihl]), 0, "inner IP checksum");
        assert_eq!(
            usize::from(u16::from_be_bytes([inner[2], inner[3]])),
            inner.len()
        );
        assert_eq!(inner[9], wire::ip::protocol::UDP);
        assert_eq!(&inner[12..16], &KERN_INNER.octets());
        assert_eq!(&inner[16..20], &FB_INNER.octets());
        let udp = &inner[ihl..];
        assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), 7000);
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 6000);
        assert_eq!(&udp[8..], &b[..], "the inner payload, byte for byte");
    }
    drop(lab);
}
