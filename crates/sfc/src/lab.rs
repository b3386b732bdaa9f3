//! Test and benchmark networks made of namespaces: hosts, service functions and end points,
//! as Chaining-Box's experiments lay them out (§6.1), all removed when the [`Lab`] drops.
//!
//! - A **host** is a network namespace holding a Linux bridge (`br0`): its L2 fabric.
//!   Hosts are joined by veth pairs between their bridges ([`Lab::join`]), so every host
//!   reaches every other on one L2 segment (the Ethernet transport), and each bridge port
//!   can carry an address for the VXLAN-GPE underlay.
//! - A **service function** is a namespace with one interface `eth0` whose peer (the SF's
//!   *port*, named after the SF) sits on its host's bridge. By default it is a Linux
//!   router (forwarding on, reverse-path filter and redirects off): what arrives on `eth0`
//!   leaves on `eth0` towards the route's next hop. Dec runs at XDP on `eth0`; Enc and Fwd
//!   run at TC ingress of the port, where every frame the SF sends arrives whether the
//!   kernel or a user-space program (AF_XDP, AF_PACKET with queueing bypassed — both skip
//!   the SF side's TC egress) sent it.
//! - An **end point** (traffic source or sink) is a namespace with one interface `eth0`
//!   on a host's bridge.
//! - A **direct link** is a veth pair `dl0` between two SFs of one host (§5.5).
//!
//! Names carry the process id and a counter, so tests running at once never collide.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// What went wrong while building a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The lab needs root (namespaces, veths, bridges).
    #[error("the lab needs root")]
    NotRoot,
    /// A command failed.
    #[error("`{cmd}` failed: {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// What it printed on standard error.
        stderr: String,
    },
    /// Something read back from the system was not as expected.
    #[error("{0}")]
    Unexpected(String),
}

/// An interface of the lab: the namespace it is in, its name, index and MAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    /// Network namespace (a name under `/var/run/netns`).
    pub netns: String,
    /// Device name inside the namespace.
    pub name: String,
    /// Interface index inside the namespace.
    pub ifindex: u32,
    /// MAC address.
    pub mac: [u8; 6],
}

/// A service function of the lab.
#[derive(Debug, Clone)]
pub struct Sf {
    /// The SF's tag.
    pub tag: String,
    /// The host it runs on.
    pub host: String,
    /// `eth0` inside the SF's namespace (Dec attaches here).
    pub eth0: Iface,
    /// The SF's port on the host bridge (Enc and Fwd attach at its TC ingress).
    pub port: Iface,
    /// The SF's address on the fabric.
    pub ip: Ipv4Addr,
}

/// A traffic source or sink.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Its name.
    pub name: String,
    /// The host whose bridge it hangs on.
    pub host: String,
    /// `eth0` inside its namespace.
    pub eth0: Iface,
    /// Its port on the host bridge (Cls attaches at its TC ingress for a source).
    pub port: Iface,
    /// Its address.
    pub ip: Ipv4Addr,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A set of namespaces, removed on drop.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    namespaces: Vec<String>,
    hosts: Vec<String>,
    links: u32,
}

/// Runs a command, returning its standard output.
fn run(cmd: &mut Command) -> Result<String, LabError> {
    let line = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| LabError::Command {
        cmd: line.clone(),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(LabError::Command {
            cmd: line,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> Result<String, LabError> {
    run(Command::new("ip").args(args))
}

/// Runs `ip ARGS` inside namespace `ns`.
fn ip_in(ns: &str, args: &[&str]) -> Result<String, LabError> {
    run(Command::new("ip").arg("-n").arg(ns).args(args))
}

/// Runs a program inside namespace `ns`.
pub fn exec_in(ns: &str, program: &str, args: &[&str]) -> Result<String, LabError> {
    run(Command::new("ip")
        .args(["netns", "exec", ns, program])
        .args(args))
}

fn sysctl(ns: &str, key: &str, value: &str) -> Result<(), LabError> {
    exec_in(ns, "sysctl", &["-qw", &format!("{key}={value}")]).map(|_| ())
}

/// Reads an interface's index and MAC inside a namespace.
pub fn iface(ns: &str, name: &str) -> Result<Iface, LabError> {
    let out = ip_in(ns, &["-o", "link", "show", "dev", name])?;
    let ifindex = out
        .split(':')
        .next()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| LabError::Unexpected(format!("no ifindex in `{out}`")))?;
    let mac = out
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .and_then(parse_mac)
        .ok_or_else(|| LabError::Unexpected(format!("no MAC in `{out}`")))?;
    Ok(Iface {
        netns: ns.to_string(),
        name: name.to_string(),
        ifindex,
        mac,
    })
}

/// A UDP socket bound to `addr` inside namespace `ns` (it stays in that namespace, usable
/// from any thread), with a one-second receive timeout.
pub fn udp_socket(ns: &str, addr: std::net::SocketAddrV4) -> Result<std::net::UdpSocket, LabError> {
    // A bind that fails once is tried again for a second before its error is returned: a
    // live test saw one unexplained failure in about ten runs, under load.
    let mut tries = 0;
    let sock = loop {
        let bound = nic::netns::run_in(ns, || std::net::UdpSocket::bind(addr))
            .map_err(|e| LabError::Unexpected(format!("joining {ns}: {e}")))
            .and_then(|r| {
                r.map_err(|e| LabError::Unexpected(format!("binding {addr} in {ns}: {e}")))
            });
        match bound {
            Ok(sock) => break sock,
            Err(e) if tries >= 10 => return Err(e),
            Err(e) => {
                tries += 1;
                eprintln!("lab: {e}; trying again");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    };
    sock.set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .map_err(|e| LabError::Unexpected(e.to_string()))?;
    Ok(sock)
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Formats a MAC as `aa:bb:cc:dd:ee:ff`.
pub fn mac_string(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// True when the caller may build labs; otherwise says why on standard error and returns
/// false, except under `CI=true`, where it panics (CI has root).
pub fn can_run(test: &str) -> bool {
    let root = run(Command::new("id").arg("-u"))
        .map(|s| s.trim() == "0")
        .unwrap_or(false);
    let tools = Command::new("ip").arg("-V").output().is_ok();
    if root && tools {
        return true;
    }
    let why = if !root { "root" } else { "iproute2's `ip`" };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: needs {why}, and CI=true");
    }
    eprintln!("skipping {test}: needs {why}");
    false
}

impl Lab {
    /// An empty lab; namespaces it makes are named `fbsfc<pid>_<n>-…`.
    pub fn new() -> Result<Lab, LabError> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Ok(Lab {
            prefix: format!("fbsfc{}_{n}", std::process::id() % 100_000),
            namespaces: Vec::new(),
            hosts: Vec::new(),
            links: 0,
        })
    }

    /// The namespace name of a host, SF or end point called `name`.
    pub fn netns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    fn add_netns(&mut self, name: &str) -> Result<String, LabError> {
        let ns = self.netns(name);
        ip(&["netns", "add", &ns])?;
        self.namespaces.push(ns.clone());
        ip_in(&ns, &["link", "set", "lo", "up"])?;
        // No router solicitations or IPv6 chatter on the lab's links.
        sysctl(&ns, "net.ipv6.conf.all.disable_ipv6", "1")?;
        sysctl(&ns, "net.ipv6.conf.default.disable_ipv6", "1")?;
        Ok(ns)
    }

    /// Adds a host: a namespace with a bridge `br0` (no STP, no forwarding delay).
    pub fn host(&mut self, name: &str) -> Result<String, LabError> {
        let ns = self.add_netns(name)?;
        ip_in(
            &ns,
            &[
                "link",
                "add",
                "br0",
                "type",
                "bridge",
                "stp_state",
                "0",
                "forward_delay",
                "0",
            ],
        )?;
        ip_in(&ns, &["link", "set", "br0", "up"])?;
        // A plain L2 fabric: where br_netfilter is loaded, bridged IPv4 frames would go
        // through iptables, which reads the network header where the kernel's protocol
        // mark says: a frame Cls encapsulated at TC ingress still carries IPv4's mark,
        // and its NSH would be taken for a bad IPv4 header and dropped. Without the
        // module the keys do not exist, which is fine.
        for key in ["iptables", "ip6tables", "arptables"] {
            let _ = sysctl(&ns, &format!("net.bridge.bridge-nf-call-{key}"), "0");
        }
        self.hosts.push(name.to_string());
        Ok(ns)
    }

    /// A veth pair from namespace `ns` (device `dev`) to host `host`'s bridge (port `port`).
    fn plug(&mut self, ns: &str, dev: &str, host: &str, port: &str) -> Result<(), LabError> {
        let hns = self.netns(host);
        // Made in the host namespace, then one end moved, so names may repeat across hosts.
        ip_in(
            &hns,
            &["link", "add", port, "type", "veth", "peer", "name", dev],
        )?;
        ip_in(&hns, &["link", "set", dev, "netns", ns])?;
        ip_in(&hns, &["link", "set", port, "master", "br0", "up"])?;
        ip_in(ns, &["link", "set", dev, "up"])?;
        Ok(())
    }

    /// Joins two hosts' bridges with a veth pair (ports `to-<b>` on `a`, `to-<a>` on `b`).
    pub fn join(&mut self, a: &str, b: &str) -> Result<(), LabError> {
        let (na, nb) = (self.netns(a), self.netns(b));
        let (pa, pb) = (format!("to-{b}"), format!("to-{a}"));
        ip_in(
            &na,
            &["link", "add", &pa, "type", "veth", "peer", "name", &pb],
        )?;
        ip_in(&na, &["link", "set", &pb, "netns", &nb])?;
        ip_in(&na, &["link", "set", &pa, "master", "br0", "up"])?;
        ip_in(&nb, &["link", "set", &pb, "master", "br0", "up"])?;
        Ok(())
    }

    /// Adds a service function `tag` on `host`: a Linux router with `eth0` at `ip`/24.
    pub fn sf(&mut self, host: &str, tag: &str, ip: Ipv4Addr) -> Result<Sf, LabError> {
        let ns = self.add_netns(tag)?;
        self.plug(&ns, "eth0", host, tag)?;
        ip_in(&ns, &["addr", "add", &format!("{ip}/24"), "dev", "eth0"])?;
        sysctl(&ns, "net.ipv4.ip_forward", "1")?;
        for dev in ["all", "default", "eth0"] {
            sysctl(&ns, &format!("net.ipv4.conf.{dev}.rp_filter"), "0")?;
            sysctl(&ns, &format!("net.ipv4.conf.{dev}.send_redirects"), "0")?;
            sysctl(&ns, &format!("net.ipv4.conf.{dev}.accept_local"), "1")?;
        }
        Ok(Sf {
            tag: tag.to_string(),
            host: host.to_string(),
            eth0: iface(&ns, "eth0")?,
            port: iface(&self.netns(host), tag)?,
            ip,
        })
    }

    /// Gives SF `sf` a second interface `dev` on its host's bridge (port `<tag>-<dev>`), as
    /// an SF that receives on one interface and sends on another has. Returns the
    /// interface inside the SF and its port.
    pub fn sf_iface(&mut self, sf: &Sf, dev: &str) -> Result<(Iface, Iface), LabError> {
        let ns = self.netns(&sf.tag);
        let port = format!("{}-{dev}", sf.tag);
        self.plug(&ns, dev, &sf.host, &port)?;
        Ok((iface(&ns, dev)?, iface(&self.netns(&sf.host), &port)?))
    }

    /// Makes host `host`'s bridge deliver to port `port` only the frames addressed to `mac`
    /// (a static forwarding entry) and broadcasts: no flooding of unknown unicast. A
    /// user-space SF reads every frame its interface gets, whoever it is addressed to, and
    /// would take in (and send on again) the frames the bridge floods while it has not
    /// learnt their destination — its own output among them.
    pub fn unflooded(&self, host: &str, port: &str, mac: &[u8; 6]) -> Result<(), LabError> {
        let hns = self.netns(host);
        run(Command::new("bridge").args(["-n", &hns, "link", "set", "dev", port, "flood", "off"]))?;
        run(Command::new("bridge").args([
            "-n",
            &hns,
            "fdb",
            "replace",
            &mac_string(mac),
            "dev",
            port,
            "master",
            "static",
        ]))?;
        Ok(())
    }

    /// Makes end point `name` send complete transport checksums (`ethtool -K eth0 tx off`).
    /// A socket's packets on a veth otherwise carry only the pseudo-header sum (the
    /// kernel's checksum offload: the receiving kernel trusts them as they are), which a
    /// user-space SF reading raw frames takes for the checksum and updates incrementally
    /// into a wrong one.
    pub fn full_checksums(&self, name: &str) -> Result<(), LabError> {
        exec_in(&self.netns(name), "ethtool", &["-K", "eth0", "tx", "off"]).map(|_| ())
    }

    /// Adds an end point `name` on `host` with `eth0` at `ip`/24.
    pub fn endpoint(&mut self, host: &str, name: &str, ip: Ipv4Addr) -> Result<Endpoint, LabError> {
        let ns = self.add_netns(name)?;
        self.plug(&ns, "eth0", host, name)?;
        ip_in(&ns, &["addr", "add", &format!("{ip}/24"), "dev", "eth0"])?;
        Ok(Endpoint {
            name: name.to_string(),
            host: host.to_string(),
            eth0: iface(&ns, "eth0")?,
            port: iface(&self.netns(host), name)?,
            ip,
        })
    }

    /// In namespace `ns`: a route to `dst` (a prefix) through gateway `via` on `dev`, with a
    /// permanent neighbour entry `via` → `mac` (so no ARP is needed on the chain's path).
    pub fn route(
        &self,
        ns: &str,
        dst: &str,
        via: Ipv4Addr,
        mac: &[u8; 6],
        dev: &str,
    ) -> Result<(), LabError> {
        let via_s = via.to_string();
        ip_in(
            ns,
            &[
                "neigh",
                "replace",
                &via_s,
                "lladdr",
                &mac_string(mac),
                "nud",
                "permanent",
                "dev",
                dev,
            ],
        )?;
        ip_in(
            ns,
            &["route", "replace", dst, "via", &via_s, "dev", dev, "onlink"],
        )?;
        Ok(())
    }

    /// In namespace `ns`: a permanent neighbour entry `addr` → `mac` on `dev`.
    pub fn neigh(
        &self,
        ns: &str,
        addr: Ipv4Addr,
        mac: &[u8; 6],
        dev: &str,
    ) -> Result<(), LabError> {
        ip_in(
            ns,
            &[
                "neigh",
                "replace",
                &addr.to_string(),
                "lladdr",
                &mac_string(mac),
                "nud",
                "permanent",
                "dev",
                dev,
            ],
        )
        .map(|_| ())
    }

    /// A direct link between two SFs of one host: a veth pair named `dl0` on both sides,
    /// up, addressed `a_ip`/30 and `b_ip`/30. Returns the two ends.
    pub fn direct_link(
        &mut self,
        a: &Sf,
        b: &Sf,
        a_ip: Ipv4Addr,
        b_ip: Ipv4Addr,
    ) -> Result<(Iface, Iface), LabError> {
        let (na, nb) = (self.netns(&a.tag), self.netns(&b.tag));
        self.links += 1;
        let tmp = format!("dl{}", self.links);
        ip_in(
            &na,
            &["link", "add", "dl0", "type", "veth", "peer", "name", &tmp],
        )?;
        ip_in(&na, &["link", "set", &tmp, "netns", &nb])?;
        ip_in(&nb, &["link", "set", &tmp, "name", "dl0"])?;
        for (ns, addr) in [(&na, a_ip), (&nb, b_ip)] {
            ip_in(ns, &["addr", "add", &format!("{addr}/30"), "dev", "dl0"])?;
            ip_in(ns, &["link", "set", "dl0", "up"])?;
            for key in ["rp_filter", "send_redirects"] {
                sysctl(ns, &format!("net.ipv4.conf.dl0.{key}"), "0")?;
            }
        }
        Ok((iface(&na, "dl0")?, iface(&nb, "dl0")?))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes its devices and their veth peers.
        for ns in self.namespaces.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddrV4;

    #[test]
    fn macs_parse_and_print() {
        let m = parse_mac("02:00:0a:ff:00:01").unwrap();
        assert_eq!(m, [2, 0, 10, 255, 0, 1]);
        assert_eq!(mac_string(&m), "02:00:0a:ff:00:01");
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:02"), None);
        assert_eq!(parse_mac("zz:00:0a:ff:00:01"), None);
    }

    #[test]
    fn a_lab_forwards_through_a_router_sf_and_is_removed() {
        if !can_run("lab") {
            return;
        }
        let mut lab = Lab::new().unwrap();
        lab.host("h1").unwrap();
        lab.host("h2").unwrap();
        lab.join("h1", "h2").unwrap();
        let sf = lab.sf("h1", "sf1", Ipv4Addr::new(10, 9, 0, 11)).unwrap();
        let src = lab
            .endpoint("h1", "src", Ipv4Addr::new(10, 9, 0, 1))
            .unwrap();
        let dst = lab
            .endpoint("h2", "dst", Ipv4Addr::new(10, 9, 0, 2))
            .unwrap();
        assert_ne!(sf.eth0.mac, sf.port.mac);
        let (eth1, port1) = lab.sf_iface(&sf, "eth1").unwrap();
        assert_eq!(
            (eth1.name.as_str(), port1.name.as_str()),
            ("eth1", "sf1-eth1")
        );
        assert_eq!(eth1.netns, lab.netns("sf1"));
        assert_ne!(eth1.mac, sf.eth0.mac);
        lab.unflooded("h1", &port1.name, &eth1.mac).unwrap();
        let fdb =
            run(Command::new("bridge").args(["-n", &lab.netns("h1"), "fdb", "show"])).unwrap();
        assert!(
            fdb.lines().any(|l| l.contains(&mac_string(&eth1.mac))
                && l.contains("sf1-eth1")
                && l.contains("static")),
            "{fdb}"
        );
        let (sns, dns) = (lab.netns("src"), lab.netns("dst"));
        // Across the hosts' link, plain L2 (ARP resolves on its own).
        let rx = udp_socket(&dns, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000)).unwrap();
        let tx = udp_socket(&sns, SocketAddrV4::new(src.ip, 7001)).unwrap();
        tx.send_to(b"hello", SocketAddrV4::new(dst.ip, 7000))
            .unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(
            from,
            std::net::SocketAddr::V4(SocketAddrV4::new(src.ip, 7001))
        );
        // Through the SF: the source routes 10.9.1.0/24 via the SF, which forwards to dst.
        lab.route(&sns, "10.9.1.0/24", sf.ip, &sf.eth0.mac, "eth0")
            .unwrap();
        let sfns = lab.netns("sf1");
        exec_in(&dns, "ip", &["addr", "add", "10.9.1.2/24", "dev", "eth0"]).unwrap();
        lab.neigh(&sfns, Ipv4Addr::new(10, 9, 1, 2), &dst.eth0.mac, "eth0")
            .unwrap();
        exec_in(&sfns, "ip", &["route", "add", "10.9.1.0/24", "dev", "eth0"]).unwrap();
        tx.send_to(
            b"routed",
            SocketAddrV4::new(Ipv4Addr::new(10, 9, 1, 2), 7000),
        )
        .unwrap();
        let (n, _) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"routed");
        let names: Vec<String> = lab.namespaces.clone();
        drop((rx, tx));
        drop(lab);
        let list = ip(&["netns", "list"]).unwrap();
        for ns in names {
            assert!(!list.contains(&ns), "{ns} left behind");
        }
    }
}
