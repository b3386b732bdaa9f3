//! Interoperability: Open vSwitch's userspace datapath forwards FuseBox's NSH.
//!
//! A private switch (`common::ovs`, as `openflow.rs` runs it) with a bridge of the
//! userspace datapath (`datapath_type=netdev`) and three ports, each a veth pair whose other
//! end lives in a network namespace the test makes. Frames `wire::build::Nsh` writes (MD
//! type 1, Ethernet transport: EtherType 0x894F, which OVS parses as an Ethernet packet with
//! NSH fields) are sent into port 1 from the first namespace:
//!
//! * OVS reads their NSH as FuseBox wrote it (`ofproto/trace`'s flow: TTL, MD type, next
//!   protocol, SPI, SI, the four context headers);
//! * a flow matching `nsh_spi=10,nsh_si=255` forwards them out of port 2 and one matching
//!   `nsh_si=254` out of port 3, unchanged byte for byte;
//! * a flow with `decap(),decap()` (the outer Ethernet, then the NSH) sends port 3 the inner
//!   frame, byte for byte;
//! * a path with no flow is dropped (nothing arrives anywhere else).
//!
//! Needs root (namespaces, veths) and Open vSwitch: without either the test skips with a
//! message, except under `CI=true`, where it fails. Namespaces are named after the process
//! id and removed (with their veths) even when the test fails.

mod common;

use common::have_tool;
use common::ovs::Ovs;
use std::process::Command;
use std::time::{Duration, Instant};
use wire::build::{Frame, Nsh};

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

/// Three namespaces `NAME1..3`, each holding device `sf` (the port's end), veth peer of
/// `NAMEo1..3` in the switch's namespace; all up, with no IPv6 addresses (so the kernel
/// sends nothing of its own). Dropping it deletes the namespaces and so the veths.
struct Net {
    ns: Vec<String>,
    ports: Vec<String>,
}

impl Net {
    fn new() -> Net {
        let base = format!("fbn{}", std::process::id() % 1_000_000);
        let net = Net {
            ns: (1..=3).map(|i| format!("{base}_{i}")).collect(),
            ports: (1..=3).map(|i| format!("{base}o{i}")).collect(),
        };
        let setup = || -> Result<(), String> {
            for (ns, port) in net.ns.iter().zip(&net.ports) {
                ip(&["netns", "add", ns])?;
                ip(&[
                    "link", "add", port, "type", "veth", "peer", "name", "sf", "netns", ns,
                ])?;
                ip(&["link", "set", port, "addrgenmode", "none"])?;
                ip(&["link", "set", port, "up"])?;
                ip(&["-n", ns, "link", "set", "dev", "sf", "addrgenmode", "none"])?;
                ip(&["-n", ns, "link", "set", "dev", "sf", "up"])?;
            }
            Ok(())
        };
        if let Err(e) = setup() {
            drop(net);
            panic!("making the test network: {e}");
        }
        net
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = ip(&["netns", "del", ns]);
        }
        for port in &self.ports {
            let _ = ip(&["link", "del", port]);
        }
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn inner(n: u8) -> Vec<u8> {
    Frame::udp([10, 0, 0, n], [10, 0, 1, n], 1000 + u16::from(n), 53)
        .macs([2, 0, 0, 0, 1, n], [2, 0, 0, 0, 2, n])
        .payload(&[n; 30])
        .build()
}

const SRC: [u8; 6] = [6, 0, 0, 0, 0, 1];
const DST: [u8; 6] = [6, 0, 0, 0, 0, 2];

#[test]
fn open_vswitch_forwards_and_decapsulates_fusebox_nsh() {
    if !is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the Open vSwitch NSH test needs root (CI=true: not skipping)"
        );
        eprintln!("not root: skipping the Open vSwitch NSH test");
        return;
    }
    if !have_tool("ovs-vswitchd", "Open vSwitch", "the Open vSwitch NSH test") {
        return;
    }
    let net = Net::new();
    let ovs = Ovs::start("ovs-nsh", 0);
    for (i, port) in net.ports.iter().enumerate() {
        ovs.add_port(port, i + 1);
    }
    let flows = ovs.dir.join("nsh-flows");
    std::fs::write(
        &flows,
        "priority=10,in_port=1,dl_type=0x894f,nsh_spi=10,nsh_si=255,actions=output:2\n\
         priority=10,in_port=1,dl_type=0x894f,nsh_spi=10,nsh_si=254,actions=output:3\n\
         priority=10,in_port=1,dl_type=0x894f,nsh_spi=20,nsh_si=255,actions=decap(),decap(),output:3\n",
    )
    .unwrap();
    let of = |args: &[&str]| {
        let mut a = vec!["-O", "OpenFlow13"];
        a.extend_from_slice(args);
        ovs.run("ovs-ofctl", &a)
    };
    // No NORMAL flow: only the NSH flows forward anything.
    of(&["del-flows", &ovs.br]);
    of(&["add-flows", &ovs.br, flows.to_str().unwrap()]);

    let to_2: Vec<Vec<u8>> = (1..=3)
        .map(|n| Nsh::md1(10, 255, [u32::from(n), 2, 3, 4]).ethernet(DST, SRC, &inner(n)))
        .collect();
    let to_3: Vec<Vec<u8>> = (4..=5)
        .map(|n| {
            Nsh::md1(10, 254, [u32::from(n), 0, 0, 0])
                .ttl(7)
                .ethernet(DST, SRC, &inner(n))
        })
        .collect();
    let decap: Vec<(Vec<u8>, Vec<u8>)> = (6..=7)
        .map(|n| {
            let f =
                Nsh::md1(20, 255, [0xdead_beef, 0, 0, u32::from(n)]).ethernet(DST, SRC, &inner(n));
            (f, inner(n))
        })
        .collect();
    let unknown = Nsh::md1(30, 255, [0; 4]).ethernet(DST, SRC, &inner(8));

    // OVS reads the NSH as FuseBox wrote it.
    let hex: String = to_3[0].iter().map(|b| format!("{b:02x}")).collect();
    let trace = ovs.run(
        "ovs-appctl",
        &[
            "-t",
            &ovs.ctl(),
            "ofproto/trace",
            &ovs.br,
            "in_port=1",
            &hex,
        ],
    );
    let flow = trace
        .lines()
        .find_map(|l| l.strip_prefix("Flow: "))
        .unwrap_or_else(|| panic!("no flow in:\n{trace}"));
    for field in [
        "dl_type=0x894f",
        "nsh_ttl=7",
        "nsh_mdtype=1",
        "nsh_np=3",
        "nsh_spi=0xa",
        "nsh_si=254",
        "nsh_c1=0x4",
        "nsh_c2=0x0",
    ] {
        assert!(flow.split(',').any(|f| f == field), "{field} not in {flow}");
    }

    // The hosts' ends of the ports, opened in their namespaces.
    let open = |i: usize| {
        nic::netns::run_in(&net.ns[i], || nic::open("sf", nic::Kind::AfPacket))
            .unwrap()
            .unwrap_or_else(|e| panic!("opening sf in {}: {e}", net.ns[i]))
    };
    let mut h1 = open(0);
    let mut h2 = open(1);
    let mut h3 = open(2);
    let sent: Vec<&Vec<u8>> = to_2
        .iter()
        .chain(&to_3)
        .chain(decap.iter().map(|(f, _)| f))
        .chain([&unknown])
        .collect();
    for f in &sent {
        h1.tx.send(packet::Timestamp(0), f).unwrap();
    }
    h1.tx.flush().unwrap();

    let mut want_2 = to_2.clone();
    let mut want_3: Vec<Vec<u8>> = to_3
        .iter()
        .cloned()
        .chain(decap.iter().map(|(_, i)| i.clone()))
        .collect();
    let (mut got_2, mut got_3, mut got_1) = (Vec::new(), Vec::new(), Vec::new());
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until && (got_2.len() < want_2.len() || got_3.len() < want_3.len()) {
        for (dev, got) in [
            (&mut h2, &mut got_2),
            (&mut h3, &mut got_3),
            (&mut h1, &mut got_1),
        ] {
            dev.rx
                .recv(64, Duration::from_millis(10), &mut |_, _, b| {
                    got.push(b.to_vec())
                })
                .unwrap();
        }
    }
    // Anything late (a frame of the unknown path, a duplicate) has time to show up.
    std::thread::sleep(Duration::from_millis(200));
    for (dev, got) in [
        (&mut h2, &mut got_2),
        (&mut h3, &mut got_3),
        (&mut h1, &mut got_1),
    ] {
        dev.rx
            .recv(64, Duration::from_millis(10), &mut |_, _, b| {
                got.push(b.to_vec())
            })
            .unwrap();
    }
    for v in [&mut want_2, &mut want_3, &mut got_2, &mut got_3] {
        v.sort();
    }
    assert_eq!(
        got_2, want_2,
        "port 2: the SPI 10 / SI 255 frames, unchanged"
    );
    assert_eq!(
        got_3, want_3,
        "port 3: the SI 254 frames unchanged and the decapsulated inner frames"
    );
    assert!(
        got_1.is_empty(),
        "nothing comes back to port 1: {got_1:02x?}"
    );
    // The switch counted what it matched (its counters catch up with the datapath's
    // cached flows within a second or so), and the unknown path matched nothing.
    let want = [
        ("nsh_spi=0xa,nsh_si=255", 3),
        ("nsh_spi=0xa,nsh_si=254", 2),
        ("nsh_spi=0x14,nsh_si=255", 2),
    ];
    let counted = |dump: &str| {
        want.iter().all(|(m, n)| {
            dump.lines()
                .any(|l| l.contains(m) && l.contains(&format!("n_packets={n},")))
        })
    };
    let until = Instant::now() + Duration::from_secs(10);
    let mut dump = of(&["dump-flows", &ovs.br]);
    while !counted(&dump) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
        dump = of(&["dump-flows", &ovs.br]);
    }
    assert!(counted(&dump), "flow counters, want {want:?}:\n{dump}");
    drop(ovs);
    drop(net);
}
