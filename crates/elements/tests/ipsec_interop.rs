//! ESP interoperability with an outside implementation: scapy's IPsec layer (AES-GCM as
//! RFC 4106, tunnel mode; `tests/ipsec/scapy_esp.py`). Both ways, for AES-GCM-128 with
//! 32-bit sequence numbers and AES-GCM-256 with extended ones across the wrap of the low
//! half:
//!
//! * given the same key, SPI, sequence number and IV, scapy writes the same ESP bytes
//!   (header, IV, ciphertext, ICV) as `IPsecGCMEncap`, and decrypts FuseBox's packets back
//!   to the inner datagrams;
//! * `IPsecGCMDecap` turns scapy's packets back into the inner datagrams, byte for byte.
//!
//! Needs Debian's `python3-scapy` (installed by scripts/setup.sh and .ci/run); skipped
//! with a message without it, except under `CI=true`.

use elements::{BuildCtx, Context, Element, Names, Verdict};
use packet::{Packet, Timestamp};
use std::path::{Path, PathBuf};
use std::process::Command;
use wire::build::Frame;

const PYTHON: &str = "/usr/bin/python3";

fn scapy_available(test: &str) -> bool {
    let ok = Command::new(PYTHON)
        .args(["-c", "import scapy.layers.ipsec, cryptography"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{test}: needs {PYTHON} with scapy (python3-scapy), and CI=true");
        }
        eprintln!("skipping {test}: needs {PYTHON} with scapy (apt-get install python3-scapy)");
    }
    ok
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ipsec/scapy_esp.py")
}

fn scapy(args: &[&str]) {
    let out = Command::new(PYTHON)
        .arg(script())
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "scapy_esp.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn element(class: &str, config: &str) -> Box<dyn Element> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/e",
        ninputs: 1,
        noutputs: 1,
        names: &names,
        base_dir: Path::new("."),
    };
    elements::build(class, config, &bcx).unwrap_or_else(|e| panic!("{class}: {e}"))
}

/// Pushes `bytes` (network header at 0) through `e`: the output's bytes.
fn push(e: &mut dyn Element, bytes: &[u8]) -> Result<Vec<u8>, &'static str> {
    let mut p = Packet::from_bytes(bytes);
    p.set_network_header(0);
    match e.push(0, p, &mut Context::new(Timestamp(0))) {
        Verdict::Out(0, p) => Ok(p.data().to_vec()),
        Verdict::Drop(_, r) => Err(r),
        v => panic!("unexpected {v:?}"),
    }
}

/// Inner IPv4 datagrams of several protocols and sizes (no Ethernet header).
fn inners() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (i, n) in [0usize, 1, 2, 3, 5, 17, 64, 200, 1300]
        .into_iter()
        .enumerate()
    {
        let payload: Vec<u8> = (0..n).map(|k| (k * 31 + i) as u8).collect();
        let f = match i % 3 {
            0 => Frame::udp([10, 1, 0, 5], [10, 2, 0, 1], 4000 + i as u16, 5000),
            1 => Frame::tcp([10, 1, 0, 6], [10, 2, 0, 2], 40000, 80).flags(wire::tcp::flags::ACK),
            _ => Frame::icmp(
                [10, 1, 0, 7],
                [10, 2, 0, 3],
                wire::icmpv4::msg_type::ECHO_REQUEST,
                0,
            )
            .icmp_rest(0x0007_0000 | i as u32),
        };
        v.push(f.payload(&payload).build()[14..].to_vec());
    }
    v
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn write_lines(path: &Path, packets: &[Vec<u8>]) {
    let text: String = packets.iter().map(|p| hex(p) + "\n").collect();
    std::fs::write(path, text).unwrap();
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn both_ways(tag: &str, keysalt: &str, spi: u32, esn: bool, seq: u64, replay: u32) {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("fusebox-ipsec-{tag}-"))
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let inner = inners();
    let esn_kw = if esn { ", ESN true" } else { "" };
    let (src, dst) = ("192.0.2.1", "192.0.2.2");
    let mut enc = element(
        "IPsecGCMEncap",
        &format!("SPI {spi:#x}, KEY {keysalt}, SRC {src}, DST {dst}, SEQ {seq}{esn_kw}"),
    );
    let ours: Vec<Vec<u8>> = inner
        .iter()
        .map(|p| push(enc.as_mut(), p).unwrap())
        .collect();
    // Scapy encrypts the same datagrams under the same sequence numbers and IVs.
    let (i_in, i_out) = (dir.join("inner.hex"), dir.join("scapy-esp.hex"));
    write_lines(&i_in, &inner);
    let esn_arg = if esn { "1" } else { "0" };
    scapy(&[
        "encrypt",
        keysalt,
        &spi.to_string(),
        src,
        dst,
        esn_arg,
        &seq.to_string(),
        i_in.to_str().unwrap(),
        i_out.to_str().unwrap(),
    ]);
    let theirs: Vec<Vec<u8>> = read_lines(&i_out).iter().map(|l| unhex(l)).collect();
    assert_eq!(theirs.len(), inner.len());
    for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        // The outer headers differ only where each implementation decides (IP ID, TTL):
        // same addresses and protocol; the ESP part is the same, byte for byte.
        assert_eq!(a.len(), b.len(), "{tag} packet {k}: lengths");
        assert_eq!(&a[9..10], &b[9..10], "{tag} packet {k}: protocol");
        assert_eq!(&a[12..20], &b[12..20], "{tag} packet {k}: addresses");
        assert_eq!(hex(&a[20..]), hex(&b[20..]), "{tag} packet {k}: ESP bytes");
    }
    // Scapy decrypts FuseBox's packets.
    let (e_in, e_out) = (dir.join("fusebox-esp.hex"), dir.join("scapy-inner.hex"));
    write_lines(&e_in, &ours);
    scapy(&[
        "decrypt",
        keysalt,
        &spi.to_string(),
        esn_arg,
        e_in.to_str().unwrap(),
        e_out.to_str().unwrap(),
    ]);
    let back = read_lines(&e_out);
    for (k, (b, p)) in back.iter().zip(&inner).enumerate() {
        assert_eq!(
            b,
            &hex(p),
            "{tag} packet {k}: scapy's decryption of FuseBox's ESP"
        );
    }
    // FuseBox decrypts scapy's packets; a tampered one is refused.
    let mut dec = element(
        "IPsecGCMDecap",
        &format!("SPI {spi:#x}, KEY {keysalt}, SRC {src}, DST {dst}, REPLAY {replay}{esn_kw}"),
    );
    for (k, (t, p)) in theirs.iter().zip(&inner).enumerate() {
        if k == 3 {
            let mut bad = t.clone();
            let at = bad.len() - 1;
            bad[at] ^= 0x80;
            assert_eq!(push(dec.as_mut(), &bad), Err("bad-icv"), "{tag}");
        }
        assert_eq!(
            hex(&push(dec.as_mut(), t).unwrap()),
            hex(p),
            "{tag} packet {k}: FuseBox's decryption of scapy's ESP"
        );
    }
}

#[test]
fn esp_interoperates_with_scapy_both_ways() {
    if !scapy_available("esp_interoperates_with_scapy_both_ways") {
        return;
    }
    both_ways(
        "gcm128",
        "000102030405060708090a0b0c0d0e0fa0a1a2a3",
        0x1001,
        false,
        1,
        64,
    );
    both_ways(
        "gcm256-esn",
        "f0e0d0c0b0a090807060504030201000112233445566778899aabbccddeeff0001020304",
        0xabcdef,
        true,
        u64::from(u32::MAX) - 3,
        // A fresh receiver (top 0) with a window of W cannot place a low half within W of
        // 2^32 (it would lie below 0, RFC 4303 A2.2 case B): a window of 1 starts here.
        1,
    );
}
