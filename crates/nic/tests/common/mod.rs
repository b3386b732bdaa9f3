//! Test networks: two fresh network namespaces joined by a veth pair, deleted on drop.
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nic::{PortError, Recv, RxPort, TxPort};

/// True when the test can make namespaces; otherwise prints why and returns false, except
/// under `CI=true`, where a missing privilege or tool fails the test.
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if root && ip {
        return true;
    }
    let why = if !root { "root" } else { "iproute2's `ip`" };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: needs {why}, and CI=true");
    }
    eprintln!("skipping {test}: needs {why}");
    false
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Namespace `a` holds device `dev_a`, namespace `b` holds its veth peer `dev_b`.
pub struct Net {
    pub a: String,
    pub b: String,
    pub dev_a: String,
    pub dev_b: String,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Net {
    /// Makes the namespaces and the pair, both ends up, without IPv6 addresses (so the
    /// kernel sends nothing on its own).
    pub fn new() -> Net {
        Net::with_queues(1)
    }

    /// As [`Net::new`], each end with `queues` receive and transmit queues.
    pub fn with_queues(queues: u32) -> Net {
        let q = queues.to_string();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id() % 100_000;
        let net = Net {
            a: format!("fbnic{pid}_{n}a"),
            b: format!("fbnic{pid}_{n}b"),
            dev_a: format!("fb{pid}_{n}a"),
            dev_b: format!("fb{pid}_{n}b"),
        };
        let setup = || -> Result<(), String> {
            ip(&["netns", "add", &net.a])?;
            ip(&["netns", "add", &net.b])?;
            ip(&[
                "link",
                "add",
                &net.dev_a,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                &net.a,
                "type",
                "veth",
                "peer",
                "name",
                &net.dev_b,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                &net.b,
            ])?;
            for (ns, dev) in [(&net.a, &net.dev_a), (&net.b, &net.dev_b)] {
                ip(&["-n", ns, "link", "set", dev, "addrgenmode", "none"])?;
                ip(&["-n", ns, "link", "set", dev, "up"])?;
            }
            Ok(())
        };
        if let Err(e) = setup() {
            drop(net);
            panic!("making the test network: {e}");
        }
        net
    }

    /// Brings up namespace `b`'s loopback device (whose driver has no XDP of its own).
    pub fn loopback_up_b(&self) {
        ip(&["-n", &self.b, "link", "set", "lo", "up"]).unwrap();
    }

    /// Deletes `dev_b` (and so the pair).
    pub fn delete_b(&self) {
        ip(&["-n", &self.b, "link", "del", &self.dev_b]).unwrap();
    }

    /// Takes `dev_b` down.
    pub fn down_b(&self) {
        ip(&["-n", &self.b, "link", "set", &self.dev_b, "down"]).unwrap();
    }

    /// Runs `f` inside namespace `a`.
    pub fn in_a<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        nic::netns::run_in(&self.a, f).unwrap()
    }

    /// Runs `f` inside namespace `b`.
    pub fn in_b<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        nic::netns::run_in(&self.b, f).unwrap()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes the devices in it.
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

/// The EtherType of test frames (IEEE local experimental), so stray frames are told apart.
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// Test frame `i`: broadcast destination, a fixed source, optionally one 802.1Q tag, the test
/// EtherType, then `i` and a pattern, `len` bytes in all (at least 60).
pub fn frame(i: u32, len: usize, vlan: Option<u16>) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    if let Some(tci) = vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&i.to_be_bytes());
    while f.len() < len.max(60) {
        f.push((f.len() as u32 ^ i) as u8);
    }
    f
}

/// True for test frames (with or without one VLAN tag).
pub fn is_test_frame(f: &[u8]) -> bool {
    let et = |o: usize| f.get(o..o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    et(12) == Some(TEST_ETHERTYPE) || (et(12) == Some(0x8100) && et(16) == Some(TEST_ETHERTYPE))
}

/// A mix of sizes and tags.
pub fn frames(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = [60, 64, 128, 512, 1000, 1514][(i % 6) as usize];
            let vlan = (i % 7 == 3).then_some(100 + (i as u16 % 50));
            frame(i, len, vlan)
        })
        .collect()
}

/// Receives until `want` test frames came or `limit` passed; returns the test frames and
/// how many frames of any kind were handed over.
pub fn receive(rx: &mut dyn RxPort, want: usize, limit: Duration) -> (Vec<Vec<u8>>, u64) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut all = 0u64;
    while got.len() < want && start.elapsed() < limit {
        let r = rx
            .recv(64, Duration::from_millis(20), &mut |_, _, b| {
                all += 1;
                if is_test_frame(b) {
                    got.push(b.to_vec());
                }
            })
            .unwrap();
        if let Recv::Frames(n) = r {
            assert!(n > 0 && n <= 64, "{n} frames in one call");
        }
        assert_ne!(r, Recv::End, "a live port never ends");
    }
    (got, all)
}

/// Sends every frame, flushes, and returns how many `send` accepted.
pub fn send_all(tx: &mut dyn TxPort, frames: &[Vec<u8>]) -> usize {
    let mut ok = 0;
    for f in frames {
        if tx.send(packet::Timestamp(0), f).unwrap() {
            ok += 1;
        }
    }
    tx.flush().unwrap();
    ok
}

/// Receives until the port reports an error or `limit` passed; returns the error and how
/// long it took.
pub fn until_error(rx: &mut dyn RxPort, limit: Duration) -> (Option<PortError>, Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        match rx.recv(64, Duration::from_millis(20), &mut |_, _, _| {}) {
            Ok(Recv::End) => panic!("a live port never ends"),
            Ok(_) => {}
            Err(e) => return (Some(e), start.elapsed()),
        }
    }
    (None, start.elapsed())
}

/// Whether `ip` shows an XDP program on the device `dev` of namespace `ns`.
pub fn has_xdp(ns: &str, dev: &str) -> bool {
    let out = Command::new("ip")
        .args(["-n", ns, "link", "show", "dev", dev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("xdp")
}
