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
use common::ovs::Ovs;
use common::*;
use std::path::Path;

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
        &["-O", "OpenFlow13", "add-flows", &ovs.br, &path],
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
