//! The loader on a real interface: a veth pair made by the test (unique names, deleted by a
//! Drop guard) gets Dec at XDP, Cls at TC ingress, the no-op at TC egress; `ip` and `tc` see
//! them; detaching and dropping the instance remove them, its maps and its pin directory.

mod common;

use std::process::Command;

use stages::maps::{ClsKey, Counter, CounterStage, FlowKey, FwdAction, FwdVal, NshMeta, StageCfg};
use stages::{Hook, Instance, Stage};

struct Veth(String);

impl Veth {
    fn new(tag: &str) -> Veth {
        let name = format!("fbst{}{tag}", std::process::id() % 100_000);
        let ok = Command::new("ip")
            .args([
                "link",
                "add",
                &name,
                "type",
                "veth",
                "peer",
                "name",
                &format!("{name}p"),
            ])
            .status()
            .expect("run ip")
            .success();
        assert!(ok, "ip link add {name} type veth");
        let d = Veth(name);
        assert!(Command::new("ip")
            .args(["link", "set", &d.0, "up"])
            .status()
            .unwrap()
            .success());
        d
    }

    fn ifindex(&self) -> u32 {
        std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", self.0))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn show(&self, args: &[&str]) -> String {
        let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn xdp(&self) -> String {
        self.show(&["ip", "-d", "link", "show", "dev", &self.0])
    }

    fn tc(&self, dir: &str) -> String {
        self.show(&["tc", "filter", "show", "dev", &self.0, dir])
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

#[test]
fn attach_detach_and_remove() {
    let Some(mut i) = common::instance("attach") else {
        return;
    };
    let dev = Veth::new("a");
    let ifx = dev.ifindex();
    assert!(matches!(
        i.attach(Stage::Dec, ifx, Hook::Egress),
        Err(stages::Error::Hook(..))
    ));
    i.attach(Stage::Dec, ifx, Hook::Xdp).unwrap();
    i.attach(Stage::Cls, ifx, Hook::Ingress).unwrap();
    i.attach(Stage::NoopTc, ifx, Hook::Egress).unwrap();
    assert!(dev.xdp().contains("xdp"), "XDP attached: {}", dev.xdp());
    assert!(dev.tc("ingress").contains("cls"), "{}", dev.tc("ingress"));
    assert!(dev.tc("egress").contains("noop_tc"), "{}", dev.tc("egress"));
    assert_eq!(i.attachments().len(), 3);
    // Attaching again replaces.
    i.attach(Stage::Cls, ifx, Hook::Ingress).unwrap();
    assert_eq!(i.attachments().len(), 3);
    i.detach(Stage::Cls, ifx, Hook::Ingress).unwrap();
    assert!(!dev.tc("ingress").contains("cls"), "{}", dev.tc("ingress"));
    let dir = i.pin_dir().to_path_buf();
    assert!(dir.join("proxy_table").exists());
    drop(i);
    assert!(!dev.xdp().contains("prog/xdp"), "XDP detached on drop");
    assert!(!dev.tc("egress").contains("noop_tc"), "TC detached on drop");
    assert!(!dir.exists(), "pin directory removed on drop");
}

#[test]
fn removal_happens_on_panic_too() {
    let Some(i) = common::instance("panic") else {
        return;
    };
    let dir = i.pin_dir().to_path_buf();
    let r = std::panic::catch_unwind(move || {
        let _owned = i;
        panic!("a failing test");
    });
    assert!(r.is_err());
    assert!(!dir.exists(), "pin directory removed while unwinding");
}

#[test]
fn kept_instances_survive_and_are_reopened_with_their_entries() {
    if !stages::require_bpf("kept") {
        return;
    }
    let name = format!("test-{}-kept", std::process::id());
    let key = FlowKey {
        saddr: [1, 2, 3, 4].into(),
        daddr: [5, 6, 7, 8].into(),
        sport: 1,
        dport: 2,
        proto: 17,
    };
    let m = NshMeta::md1(7, 7, 7, [7; 4]);
    let cfg = StageCfg {
        mac: [2, 0, 0, 0, 0, 7],
        flags: 0,
        ifindex: 9,
    };
    {
        let mut i = Instance::create(&name).unwrap();
        i.insert_proxy(&key, &m).unwrap();
        i.insert_cfg(9, &cfg).unwrap();
        i.keep();
    }
    let i = Instance::create(&name).unwrap();
    assert_eq!(i.list_proxy().unwrap(), vec![(key, m)]);
    assert_eq!(i.list_cfg().unwrap(), vec![(9, cfg)]);
    let dir = i.pin_dir().to_path_buf();
    i.remove().unwrap();
    assert!(!dir.exists());
    assert!(matches!(
        Instance::create("../escape"),
        Err(stages::Error::Name(_))
    ));
}

/// An instance whose pins another build made (here: `cls_slots` pinned as another map, of
/// another layout) is refused with the map and both definitions named, not with libbpf's
/// bare "Invalid argument"; `unpin_stale` removes it, and it is made again, empty.
#[test]
fn an_instance_pinned_by_another_build_is_named_then_made_again() {
    use libbpf_rs::MapCore;
    if !stages::require_bpf("stale") {
        return;
    }
    let name = format!("test-{}-stale", std::process::id());
    let cfg = StageCfg {
        mac: [2, 0, 0, 0, 0, 7],
        flags: 0,
        ifindex: 9,
    };
    let dir = {
        let mut i = Instance::create(&name).unwrap();
        i.insert_cfg(9, &cfg).unwrap();
        i.keep();
        i.pin_dir().to_path_buf()
    };
    let cls_slots = dir.join("cls_slots");
    std::fs::remove_file(&cls_slots).unwrap();
    let mut other = libbpf_rs::MapHandle::from_pinned_path(dir.join("cfg_slots")).unwrap();
    other.pin(&cls_slots).unwrap();
    let (want, got) = (other.value_size(), other.max_entries());
    match Instance::create(&name) {
        Err(e @ stages::Error::StalePin { .. }) => {
            let text = e.to_string();
            assert!(text.starts_with(&cls_slots.display().to_string()), "{text}");
            assert!(
                text.contains(&format!("value {want} bytes, {got} entries")),
                "{text}"
            );
            assert!(text.contains("value 128 bytes, 4096 entries"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert!(dir.exists(), "a refused instance keeps its pins");
    Instance::unpin_stale(&name).unwrap();
    assert!(!dir.exists());
    Instance::unpin_stale(&name).unwrap(); // absent: nothing to do
    assert!(matches!(
        Instance::unpin_stale("../escape"),
        Err(stages::Error::Name(_))
    ));
    let i = Instance::create(&name).unwrap();
    assert_eq!(i.list_cfg().unwrap(), vec![]);
    i.remove().unwrap();
}

#[test]
fn a_standalone_object_attaches_at_xdp_and_both_tc_hooks() {
    if !stages::require_bpf("standalone") {
        return;
    }
    // The no-op object loaded on its own (as another project's objects are), its maps private.
    let bytes = stages::object_bytes("noop").expect("noop built");
    let o = stages::Standalone::load("noop", bytes).unwrap();
    // Its maps (pinned by name in FuseBox's objects) are pinned nowhere: not at bpffs' root,
    // where they would outlive the test and be shared by the next object of that name.
    assert_eq!(o.pinned_maps(), Vec::<String>::new());
    for m in stages::load::MAP_NAMES {
        let p = std::path::Path::new(stages::load::BPFFS).join(m);
        assert!(!p.exists(), "{} is pinned", p.display());
    }
    let leftovers: Vec<_> = std::fs::read_dir(stages::load::BPFFS)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("fusebox-standalone-{}-", std::process::id()))
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let dev = Veth::new("s");
    let ifx = dev.ifindex();
    // A program of the wrong kind for the hook, or a missing one, is refused.
    assert!(o.attach("noop_tc", ifx, Hook::Xdp, 0).is_err());
    assert!(o.attach("noop_xdp", ifx, Hook::Egress, 10).is_err());
    assert!(o.attach("nothing", ifx, Hook::Egress, 10).is_err());
    assert!(!dev.xdp().contains("prog/xdp"), "{}", dev.xdp());
    o.attach("noop_xdp", ifx, Hook::Xdp, 0).unwrap();
    o.attach("noop_tc", ifx, Hook::Egress, 20).unwrap();
    // Two filters on one hook (the qdisc made once), by priority; again replaces.
    o.attach("noop_tc", ifx, Hook::Ingress, 10).unwrap();
    o.attach("noop_tc", ifx, Hook::Ingress, 30).unwrap();
    o.attach("noop_tc", ifx, Hook::Ingress, 30).unwrap();
    assert!(dev.xdp().contains("prog/xdp"), "{}", dev.xdp());
    let egress = dev.tc("egress");
    assert!(
        egress.contains("noop_tc") && egress.contains("pref 20"),
        "{egress}"
    );
    let ingress = dev.tc("ingress");
    let filters = ingress.lines().filter(|l| l.contains("noop_tc")).count();
    assert_eq!(filters, 2, "{ingress}");
    assert!(
        ingress.contains("pref 10") && ingress.contains("pref 30"),
        "{ingress}"
    );
    // The attachments outlive the object (they go with the interface).
    drop(o);
    assert!(dev.tc("egress").contains("noop_tc"), "{}", dev.tc("egress"));
}

/// Two veth pairs made by the live XDP test, deleted on drop (also on failure).
struct Pairs(Vec<Veth>);

/// Cls's XDP form live: attached at XDP on a veth, with Fwd at TC ingress of the same veth, a
/// TCP frame sent into it (AF_PACKET on its peer) is classified at XDP (the NSH pushed by
/// `bpf_xdp_adjust_head`), goes up as an NSH frame (XDP_PASS), is forwarded by Fwd out of a
/// second veth and arrives at that one's peer exactly as `wire` builds it; a frame of
/// another flow passes; detaching removes the XDP program.
#[test]
fn cls_at_xdp_then_fwd_at_tc_ingress_live() {
    cls_then_fwd_live("cls-xdp-live", "x", true);
}

/// Cls+Fwd, what the agents attach at a chain's entry, live at TC ingress: the same frames
/// leave the second veth. Its steady-state path (cls_fwd.bpf.c `cls_fwd_fast`) makes room
/// with `bpf_skb_change_head`, which at TC ingress is right only because the frame is
/// redirected (the kernel pushes the MAC header's length back before the redirect): this is
/// where that is checked, on a real interface.
#[test]
fn cls_fwd_at_tc_ingress_live() {
    cls_then_fwd_live("cls-fwd-live", "c", false);
}

/// The live classification and forwarding of the two tests above: with Cls at XDP and Fwd
/// at TC ingress (`xdp`), or Cls+Fwd at TC ingress.
fn cls_then_fwd_live(name: &str, tag: &str, xdp: bool) {
    use ports::port::{RxPort, TxPort};
    let Some(mut i) = common::instance(name) else {
        return;
    };
    let pairs = Pairs(vec![Veth::new(tag), Veth::new(&format!("{tag}2"))]);
    let (a, b) = (&pairs.0[0], &pairs.0[1]);
    let (ap, bp) = (format!("{}p", a.0), format!("{}p", b.0));
    for d in [&ap, &bp] {
        assert!(Command::new("ip")
            .args(["link", "set", d, "up"])
            .status()
            .unwrap()
            .success());
    }
    let (ia, ib) = (a.ifindex(), b.ifindex());
    let frame = wire::build::Frame::tcp([192, 0, 2, 1], [192, 0, 2, 2], 40000, 80)
        .payload(b"live")
        .build();
    let other = wire::build::Frame::tcp([192, 0, 2, 1], [192, 0, 2, 2], 40001, 80)
        .payload(b"live")
        .build();
    let flow = FlowKey {
        saddr: [192, 0, 2, 1].into(),
        daddr: [192, 0, 2, 2].into(),
        sport: 40000,
        dport: 80,
        proto: 6,
    };
    i.insert_cls(
        &ClsKey { ifindex: ia, flow },
        &NshMeta::md1(0x51, 255, 30, [5; 4]),
    )
    .unwrap();
    let (next, ours) = ([2, 0, 0, 0, 0, 0x52], [2, 0, 0, 0, 0, 0x51]);
    i.insert_fwd(
        0x51 << 8 | 255,
        &FwdVal {
            action: FwdAction::Ethernet,
            flags: 0,
            dmac: next,
            smac: ours,
            udp_sport: 0,
            ifindex: ib,
            saddr: [0, 0, 0, 0].into(),
            daddr: [0, 0, 0, 0].into(),
            vni: 0,
        },
    )
    .unwrap();
    if xdp {
        assert!(matches!(
            i.attach(Stage::ClsXdp, ia, Hook::Ingress),
            Err(stages::Error::Hook(..))
        ));
        i.attach(Stage::ClsXdp, ia, Hook::Xdp).unwrap();
        i.attach(Stage::Fwd, ia, Hook::Ingress).unwrap();
        assert!(a.xdp().contains("prog/xdp"), "{}", a.xdp());
    } else {
        i.attach(Stage::ClsFwd, ia, Hook::Ingress).unwrap();
        assert!(a.tc("ingress").contains("cls_fwd"), "{}", a.tc("ingress"));
    }
    let mut rx = nic::afpacket::AfPacketRx::open(&bp).unwrap();
    let mut tx = nic::afpacket::AfPacketTx::open(&ap).unwrap();
    i.clear_counters().unwrap();
    for f in [&frame, &other, &frame] {
        tx.send(packet::Timestamp(0), f).unwrap();
    }
    tx.flush().unwrap();
    let want = wire::build::Nsh::md1(0x51, 255, [5; 4])
        .ttl(29)
        .ethernet(next, ours, &frame);
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while got.len() < 2 && std::time::Instant::now() < deadline {
        rx.recv(16, std::time::Duration::from_millis(100), &mut |_, _, f| {
            if f.len() > 13 && f[12..14] == [0x89, 0x4f] {
                got.push(f.to_vec());
            }
        })
        .unwrap();
    }
    assert_eq!(
        got,
        vec![want.clone(), want],
        "both frames of the flow, forwarded"
    );
    let done = |s: CounterStage| {
        common::nonzero(&i, s)
            .into_iter()
            .find(|(c, _)| *c == Counter::Done)
            .map_or(0, |(_, n)| n)
    };
    assert_eq!(done(CounterStage::Cls), 2, "classified");
    assert_eq!(done(CounterStage::Fwd), 2, "forwarded at TC ingress");
    if xdp {
        i.detach(Stage::ClsXdp, ia, Hook::Xdp).unwrap();
        assert!(!a.xdp().contains("prog/xdp"), "{}", a.xdp());
    }
    drop(i);
    drop(pairs);
}
