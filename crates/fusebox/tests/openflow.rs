//! `fusebox synth --openflow` in a real Open vSwitch: the flows load (OpenFlow 1.3) into a
//! bridge of the userspace datapath, and for sampled frames `ovs-appctl ofproto/trace`
//! tags the class FuseBox's own classifier gives them (or a class whose residual tests
//! the frame fails, or none: the server then classifies it itself).
//!
//! The test runs its own `ovsdb-server` and `ovs-vswitchd` in a private directory, with
//! dummy ports (no kernel interface, no kernel module, no systemd), and stops and removes
//! them afterwards. Without Open vSwitch it skips with a message, except under `CI=true`
//! (`.ci/run` installs it).

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A private Open vSwitch: stopped and removed when dropped.
struct Ovs {
    dir: PathBuf,
}

impl Ovs {
    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        for v in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"] {
            c.env(v, &self.dir);
        }
        c
    }

    fn run(&self, prog: &str, args: &[&str]) -> String {
        let o = self.cmd(prog).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{prog} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    fn db(&self) -> String {
        format!("--db=unix:{}/db.sock", self.dir.display())
    }

    fn ctl(&self) -> String {
        let pid = std::fs::read_to_string(self.dir.join("vs.pid")).unwrap();
        format!("{}/ovs-vswitchd.{}.ctl", self.dir.display(), pid.trim())
    }

    /// Starts the database and the switch, with bridge `br0` (userspace datapath,
    /// OpenFlow 1.3) and dummy ports 1..=ports.
    fn start(name: &str, ports: usize) -> Ovs {
        let dir = scratch(name);
        let ovs = Ovs { dir };
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
                "br0",
                "--",
                "set",
                "bridge",
                "br0",
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
                    "br0",
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

    /// The VLAN id the switch tags `frame` with when it enters at `port` (`None`:
    /// untagged).
    fn tag(&self, port: usize, frame: &[u8]) -> Option<usize> {
        let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
        let out = self.run(
            "ovs-appctl",
            &[
                "-t",
                &self.ctl(),
                "ofproto/trace",
                "br0",
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
            let _ = self
                .cmd("ovs-appctl")
                .args(["-t", &self.ctl(), "exit"])
                .output();
            let _ = Command::new("kill").arg(pid.trim()).output();
        }
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("ovsdb.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn have_ovs() -> bool {
    have_tool("ovs-vswitchd", "Open vSwitch", "the OpenFlow export check")
}

/// Loads `chain`'s flows into a switch and checks `frames` (entering at the first entry)
/// against FuseBox's classifier; returns how many the switch tagged with their class.
fn check(name: &str, chain: &Path, defines: &[(String, String)], frames: &[Vec<u8>]) -> usize {
    let file = chain::ChainFile::load(chain).unwrap();
    let opts = chain::RunOptions {
        defines: defines.to_vec(),
        ..chain::RunOptions::default()
    };
    let ex = chain::Executor::new(&file, &opts, |_, _| Ok(chain::ExitSink::Count)).unwrap();
    let s = synth::synthesize(&ex);
    let flows = synth::openflow::openflow(&ex, &s.program, "LOCAL").unwrap();
    let mut entries = ex.entry_elements();
    entries.sort_by_key(|(e, _)| e.to_string());
    let ovs = Ovs::start(name, entries.len());
    std::fs::write(ovs.dir.join("flows"), &flows).unwrap();
    let path = ovs.dir.join("flows").display().to_string();
    ovs.run(
        "ovs-ofctl",
        &["-O", "OpenFlow13", "add-flows", "br0", &path],
    );
    let g = entries[0].1;
    let (mut same, mut untagged, mut residual_fails) = (0, 0, 0);
    for (i, f) in frames.iter().enumerate() {
        let want = synth::openflow::class_of(&s.program, g, f);
        match ovs.tag(1, f) {
            None => untagged += 1,
            Some(id) if synth::openflow::residual_holds(&s.program, g, id, f) => {
                assert_eq!(
                    Some(id),
                    want,
                    "{name}: frame {i} tagged {id}, FuseBox classifies it {want:?}: {f:02x?}"
                );
                same += 1;
            }
            Some(_) => residual_fails += 1,
        }
    }
    eprintln!(
        "{name}: {} frames: {same} tagged with their class, {residual_fails} tagged with a class whose residual they fail, {untagged} untagged",
        frames.len()
    );
    same
}

#[test]
fn the_switch_tags_the_class_fusebox_gives() {
    if !have_ovs() {
        return;
    }
    let dir = scratch("openflow");
    std::fs::write(dir.join("acl.cb"), rule_set(200, 5)).unwrap();
    // Frames from the rules' corners, with some expiring TTLs, bad checksums and options.
    fusebox_ok(
        &dir,
        &[
            "gen",
            "-o",
            "t.pcap",
            "--packets",
            "150",
            "--flows",
            "150",
            "--rules",
            "acl.cb",
            "--ttl",
            "1-10",
            "--bad-ip-checksum",
            "0.05",
            "--ip-options",
            "0.05",
        ],
    );
    let frames = packets(&dir.join("t.pcap"));
    let rules = (
        "RULES".to_string(),
        dir.join("acl.cb").display().to_string(),
    );
    let isp = root().join("examples/isp/chain.toml");
    let same = check("openflow-isp", &isp, &[rules], &frames);
    assert!(same > frames.len() / 2, "{same} of {}", frames.len());
    // The ten routers: TTL ranges and routes.
    gen_trace(
        &dir,
        "r.pcap",
        &["--packets", "100", "--flows", "100", "--ttl", "1-16"],
    );
    let frames = packets(&dir.join("r.pcap"));
    let routers = root().join("examples/routers/chain.toml");
    let same = check("openflow-routers", &routers, &[], &frames);
    assert!(same > frames.len() / 2, "{same} of {}", frames.len());
}
