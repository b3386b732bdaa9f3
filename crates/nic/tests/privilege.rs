//! A missing privilege names the capability: each case drops capabilities from one thread's
//! effective set (the rest of the process keeps them) and opens ports there.

mod common;

use common::{can_run, has_xdp, Net};
use nic::afpacket::{AfPacketRx, AfPacketTx};
use nic::afxdp::{self, Config};
use nic::{Capability, Kind, PortError};

const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

#[repr(C)]
struct Header {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Removes `caps` from the calling thread's effective set.
fn drop_caps(caps: &[u32]) {
    let mut h = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget with a version-3 header writes two Data entries, both live.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) };
    assert_eq!(r, 0, "capget: {}", std::io::Error::last_os_error());
    for &c in caps {
        d[(c / 32) as usize].effective &= !(1 << (c % 32));
    }
    // SAFETY: capset reads the header and two Data entries, both live; it changes only the
    // calling thread's capabilities.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) };
    assert_eq!(r, 0, "capset: {}", std::io::Error::last_os_error());
}

fn privilege(e: PortError) -> (Capability, String) {
    let text = e.to_string();
    match e {
        PortError::Privilege { cap, .. } => (cap, text),
        other => panic!("not a privilege error: {other:?}"),
    }
}

#[test]
fn a_missing_privilege_names_the_capability() {
    if !can_run("a_missing_privilege_names_the_capability") {
        return;
    }
    let net = Net::new();
    let dev = net.dev_b.as_str();

    let (cap, text) = privilege(
        net.in_b(|| {
            drop_caps(&[CAP_NET_RAW]);
            AfPacketRx::open(dev)
        })
        .unwrap_err(),
    );
    assert_eq!(cap, Capability::NetRaw);
    assert_eq!(
        text,
        format!("{dev}: opening an AF_PACKET socket needs CAP_NET_RAW (run as root or grant it)")
    );
    let (cap, _) = privilege(
        net.in_b(|| {
            drop_caps(&[CAP_NET_RAW]);
            AfPacketTx::open(dev)
        })
        .unwrap_err(),
    );
    assert_eq!(cap, Capability::NetRaw);
    // No fallback helps without CAP_NET_RAW, and none is attempted past the error.
    let (cap, _) = privilege(
        net.in_b(|| {
            drop_caps(&[CAP_NET_RAW]);
            nic::open(dev, Kind::Auto)
        })
        .unwrap_err(),
    );
    assert_eq!(cap, Capability::NetRaw);

    // AF_XDP without CAP_BPF (and CAP_SYS_ADMIN, which stands in for it).
    let (cap, text) = privilege(
        net.in_b(|| {
            drop_caps(&[CAP_BPF, CAP_SYS_ADMIN]);
            afxdp::open(dev, &Config::default()).map(|_| ())
        })
        .unwrap_err(),
    );
    assert_eq!(cap, Capability::Bpf);
    assert!(text.contains("needs CAP_BPF (or CAP_SYS_ADMIN)"), "{text}");
    // ... and nic::open falls back to AF_PACKET, saying why.
    let d = net
        .in_b(|| {
            drop_caps(&[CAP_BPF, CAP_SYS_ADMIN]);
            nic::open(dev, Kind::AfXdp)
        })
        .unwrap();
    assert_eq!(d.kind, Kind::AfPacket);
    let note = d.note.clone().unwrap_or_default();
    assert!(
        note.starts_with(&format!("{dev}: XDP not available (")) && note.contains("CAP_BPF"),
        "{note}"
    );
    assert!(note.ends_with("using AF_PACKET"), "{note}");
    drop(d);

    // AF_XDP without CAP_NET_ADMIN (and CAP_SYS_ADMIN, which the kernel takes instead).
    let (cap, text) = privilege(
        net.in_b(|| {
            drop_caps(&[CAP_NET_ADMIN, CAP_SYS_ADMIN]);
            afxdp::open(dev, &Config::default()).map(|_| ())
        })
        .unwrap_err(),
    );
    assert_eq!(cap, Capability::NetAdmin, "{text}");
    assert!(text.contains("needs CAP_NET_ADMIN"), "{text}");

    // AF_XDP without CAP_NET_RAW: the program is attached before the socket is refused,
    // and detached again.
    let (cap, _) = privilege(
        net.in_b(|| {
            drop_caps(&[CAP_NET_RAW]);
            afxdp::open(dev, &Config::default()).map(|_| ())
        })
        .unwrap_err(),
    );
    assert_eq!(cap, Capability::NetRaw);
    assert!(!has_xdp(&net.b, dev), "XDP program left attached");
}
