//! A private Open vSwitch for the tests (`openflow.rs`, `ovs_nsh.rs`): its own
//! `ovsdb-server` and `ovs-vswitchd` in a scratch directory, a bridge of the userspace
//! datapath (OpenFlow 1.3) with a name of its own, stopped and removed, datapath and
//! devices with it, when dropped.

use super::scratch;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A private Open vSwitch: stopped and removed when dropped.
pub struct Ovs {
    /// The switch's directory (database, sockets, logs, pid files).
    pub dir: PathBuf,
    /// Its bridge: unique to the test process and the switch, since the userspace
    /// datapath makes a device of that name in the host's namespace.
    pub br: String,
}

impl Ovs {
    /// A command of Open vSwitch's talking to this switch.
    pub fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        for v in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
            c.env(v, &self.dir);
        }
        c
    }

    /// Runs `prog ARGS` for this switch; panics with its stderr unless it succeeds.
    pub fn run(&self, prog: &str, args: &[&str]) -> String {
        let o = self.cmd(prog).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{prog} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    /// The `--db` option naming this switch's database.
    pub fn db(&self) -> String {
        format!("--db=unix:{}/db.sock", self.dir.display())
    }

    /// The switch daemon's control socket.
    pub fn ctl(&self) -> String {
        let pid = std::fs::read_to_string(self.dir.join("vs.pid")).unwrap();
        format!("{}/ovs-vswitchd.{}.ctl", self.dir.display(), pid.trim())
    }

    /// Starts the database and the switch, with bridge [`Ovs::br`] (userspace datapath,
    /// OpenFlow 1.3) and dummy ports 1..=ports.
    pub fn start(name: &str, ports: usize) -> Ovs {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = scratch(name);
        let br = format!(
            "fbbr{}x{}",
            std::process::id() % 100_000,
            N.fetch_add(1, Ordering::Relaxed)
        );
        let ovs = Ovs { dir, br };
        let d = ovs.dir.display().to_string();
        ovs.run(
            "ovsdb-tool",
            &[
                "create",
                &format!("{d}/conf.db"),
                "/usr/share/openvswitch/vswitch.ovsschema",
            ],
        );
        ovs.run(
            "ovsdb-server",
            &[
                &format!("--remote=punix:{d}/db.sock"),
                &format!("--pidfile={d}/ovsdb.pid"),
                "--detach",
                "--no-chdir",
                &format!("--log-file={d}/ovsdb.log"),
                &format!("{d}/conf.db"),
            ],
        );
        ovs.run("ovs-vsctl", &[&ovs.db(), "--no-wait", "init"]);
        ovs.run(
            "ovs-vswitchd",
            &[
                &format!("unix:{d}/db.sock"),
                &format!("--pidfile={d}/vs.pid"),
                "--detach",
                "--no-chdir",
                &format!("--log-file={d}/vs.log"),
                "--enable-dummy",
            ],
        );
        ovs.run(
            "ovs-vsctl",
            &[
                &ovs.db(),
                "add-br",
                &ovs.br,
                "--",
                "set",
                "bridge",
                &ovs.br,
                "datapath_type=netdev",
                "protocols=OpenFlow13",
            ],
        );
        for p in 1..=ports {
            ovs.run(
                "ovs-vsctl",
                &[
                    &ovs.db(),
                    "add-port",
                    &ovs.br,
                    &format!("p{p}"),
                    "--",
                    "set",
                    "interface",
                    &format!("p{p}"),
                    "type=dummy",
                    &format!("ofport_request={p}"),
                ],
            );
        }
        ovs
    }

    /// Adds the Linux device `dev` (of the switch's namespace) to the bridge as OpenFlow port
    /// `ofport`.
    pub fn add_port(&self, dev: &str, ofport: usize) {
        self.run(
            "ovs-vsctl",
            &[
                &self.db(),
                "add-port",
                &self.br,
                dev,
                "--",
                "set",
                "interface",
                dev,
                &format!("ofport_request={ofport}"),
            ],
        );
    }

    /// The VLAN id the switch tags `frame` with when it enters at `port` (`None`:
    /// untagged).
    pub fn tag(&self, port: usize, frame: &[u8]) -> Option<usize> {
        let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
        let out = self.run(
            "ovs-appctl",
            &[
                "-t",
                &self.ctl(),
                "ofproto/trace",
                &self.br,
                &format!("in_port={port}"),
                &hex,
            ],
        );
        let actions = out
            .lines()
            .find_map(|l| l.strip_prefix("Datapath actions: "))
            .unwrap_or_else(|| panic!("no datapath actions in:\n{out}"));
        actions
            .split("push_vlan(vid=")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .map(|v| v.parse().unwrap())
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("vs.pid")) {
            // --cleanup: the datapath and its devices go with the switch, once it has
            // exited (killed before, it leaves them behind).
            let _ = self
                .cmd("ovs-appctl")
                .args(["-t", &self.ctl(), "exit", "--cleanup"])
                .output();
            let proc = PathBuf::from("/proc").join(pid.trim());
            for _ in 0..100 {
                if !proc.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = Command::new("kill").arg(pid.trim()).output();
        }
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("ovsdb.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
