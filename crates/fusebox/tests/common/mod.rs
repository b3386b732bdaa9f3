//! Helpers shared by the end-to-end tests: run the binary, read outputs, decode packets.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod ovs;

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What every scratch directory's name starts with, before the test process's id.
const SCRATCH: &str = "fusebox-test-";

/// A fresh scratch directory for one test. A test's directory stays after it (to look at
/// when it failed) until a later test process starts: the first scratch directory a process
/// asks for removes those of test processes no longer running ([`remove_stale_scratch`]).
pub fn scratch(name: &str) -> PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(remove_stale_scratch);
    let d = std::env::temp_dir().join(format!("{SCRATCH}{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes the scratch directories whose test process is gone (no `/proc/<pid>`); those
/// of running ones, another test binary's among them, stay.
fn remove_stale_scratch() {
    let tmp = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Runs `fusebox ARGS` in `dir`.
pub fn fusebox(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fusebox"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Runs `fusebox ARGS` and panics with its stderr unless it succeeds.
pub fn fusebox_ok(dir: &Path, args: &[&str]) -> Output {
    let o = fusebox(dir, args);
    assert!(
        o.status.success(),
        "fusebox {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The packets of a pcap file.
pub fn packets(path: &Path) -> Vec<Vec<u8>> {
    let (recs, err) = ports::pcap::read_all(path).unwrap();
    assert!(err.is_none(), "{err:?}");
    recs.into_iter().map(|r| r.data).collect()
}

/// Whether tcpdump is installed (required under CI).
pub fn have_tcpdump() -> bool {
    have_tool("tcpdump", "tcpdump", "the tcpdump check")
}

/// Whether `prog --version` runs; if not, says which `check` is skipped, and fails under
/// CI, where every tool the tests use is installed.
pub fn have_tool(prog: &str, name: &str, check: &str) -> bool {
    let ok = Command::new(prog)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{name} is required under CI"
        );
        eprintln!("{name} not installed: skipping {check}");
    }
    ok
}

/// tcpdump -nn -vv's lines for a file.
pub fn tcpdump(path: &Path) -> String {
    let o = Command::new("tcpdump")
        .args(["-nn", "-vv", "-r"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Decoded IPv4 fields of an Ethernet frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V4 {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: std::net::Ipv4Addr,
    pub dst: std::net::Ipv4Addr,
    pub ttl: u8,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    pub ip_ok: bool,
    pub l4_ok: bool,
}

fn sum(b: &[u8], init: u32) -> u32 {
    let mut s = init;
    for c in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

/// Decodes an Ethernet/IPv4 frame and verifies its checksums independently of `wire`.
pub fn v4(f: &[u8]) -> V4 {
    assert!(f.len() >= 34 && f[12..14] == [8, 0], "not IPv4: {f:02x?}");
    let ip = &f[14..];
    let hl = ((ip[0] & 15) as usize) * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    let ip_ok = sum(&ip[..hl], 0) == 0xffff;
    let l4 = &ip[hl..total];
    let proto = ip[9];
    let pseudo = sum(&ip[12..20], 0) + u32::from(proto) + l4.len() as u32;
    let l4_ok = match proto {
        17 if l4[6] == 0 && l4[7] == 0 => true,
        6 | 17 => sum(l4, pseudo) == 0xffff,
        1 => sum(l4, 0) == 0xffff,
        _ => true,
    };
    let (sport, dport) = if matches!(proto, 6 | 17) {
        (
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        )
    } else {
        (0, 0)
    };
    V4 {
        dst_mac: f[0..6].try_into().unwrap(),
        src_mac: f[6..12].try_into().unwrap(),
        src: <[u8; 4]>::try_from(&ip[12..16]).unwrap().into(),
        dst: <[u8; 4]>::try_from(&ip[16..20]).unwrap().into(),
        ttl: ip[8],
        proto,
        sport,
        dport,
        ip_ok,
        l4_ok,
    }
}

/// `fusebox gen -o FILE ARGS` in `dir`.
#[allow(dead_code)]
pub fn gen_trace(dir: &Path, file: &str, args: &[&str]) {
    let mut all = vec!["gen", "-o", file];
    all.extend_from_slice(args);
    fusebox_ok(dir, &all);
}

/// xorshift64
pub fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A ClassBench-format set of `n` rules over 10.0.0.0/14 (the last a catch-all).
pub fn rule_set(n: usize, seed: u64) -> String {
    let mut x = seed | 1;
    let mut out = String::new();
    for _ in 0..n - 1 {
        let mut r = |m: u64| next(&mut x) % m;
        let (sl, dl) = (
            [8, 16, 24, 28, 32][r(5) as usize],
            [0, 16, 24][r(3) as usize],
        );
        let ip = |a: u64| std::net::Ipv4Addr::from((0x0a00_0000 | a) as u32);
        let (s, d) = (ip(r(1 << 18)), ip(r(1 << 18)));
        let dp = match r(3) {
            0 => (0, 65535),
            1 => {
                let p = [53, 80, 443, 123, 1234][r(5) as usize];
                (p, p)
            }
            _ => (1024, 65535),
        };
        let proto = ["0x06/0xFF", "0x11/0xFF", "0x00/0x00", "0x01/0xFF"][r(4) as usize];
        out.push_str(&format!(
            "@{s}/{sl}\t{d}/{dl}\t0 : 65535\t{} : {}\t{proto}\t0x0000/0x0000\t\n",
            dp.0, dp.1
        ));
    }
    out.push_str("@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n");
    out
}
