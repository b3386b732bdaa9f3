//! The kernel data plane: plan keys applied to the NSH stages on a veth pair, kept across a
//! restart of the agent (pinned maps and the ledger), removed when the plan goes. Needs root
//! and the built BPF objects (skips without, fails under CI=true).

use std::process::Command;

use sfc::dataplane::{reconcile, Dataplane, Reconciled};
use sfc::entries::{fwd_end, md1, sph, FlowKey, StageCfg, PROXY_STATIC};
use sfc::kernel::{pin_name, KernelDataplane};
use sfc::keys::{self, Kv};
use sfc::plan::{Attach, FwdEntry, HostPlan, Instance, ProxyEntry, Stage};

struct Veth(String);

/// Removes the test's pin directories and ledger, even when the test fails.
struct Pins(String, std::path::PathBuf);

impl Drop for Pins {
    fn drop(&mut self) {
        if let Ok(dir) = std::fs::read_dir(stages::load::PIN_ROOT) {
            for e in dir.flatten() {
                if e.file_name().to_string_lossy().starts_with(&self.0) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let _ = std::fs::remove_file(&self.1);
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

fn ifindex(name: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn plan_keys_fill_the_stages_and_survive_a_restart() {
    if !stages::require_bpf("plan_keys_fill_the_stages_and_survive_a_restart") {
        return;
    }
    let pid = std::process::id();
    let (a, b) = (format!("fbk{pid}a"), format!("fbk{pid}b"));
    let ok = Command::new("ip")
        .args(["link", "add", &a, "type", "veth", "peer", "name", &b])
        .status()
        .unwrap()
        .success();
    assert!(ok, "ip link add {a} type veth");
    let _veth = Veth(a.clone());
    assert!(Command::new("ip")
        .args(["link", "set", &a, "up"])
        .status()
        .unwrap()
        .success());
    let ifa = ifindex(&a);

    let host = format!("kh{pid}");
    let ledger = std::env::temp_dir().join(format!("fusebox-ledger-{pid}.json"));
    let _pins = Pins(pin_name(&host, ""), ledger.clone());
    let mut inst = Instance::default();
    inst.attach.push(Attach {
        stage: Stage::Dec,
        iface: a.clone(),
        ifindex: ifa,
    });
    inst.fwd.push(FwdEntry {
        spi: 100,
        si: 254,
        val: fwd_end(),
    });
    inst.fwd.push(FwdEntry {
        spi: 200,
        si: 254,
        val: fwd_end(),
    });
    inst.cfg.insert(
        ifa,
        StageCfg {
            mac: [2, 0, 0, 0, 0, 1],
            flags: 0,
            ifindex: ifa,
        },
    );
    let flow = FlowKey {
        saddr: [10, 0, 0, 1].into(),
        daddr: [10, 0, 0, 2].into(),
        sport: 1,
        dport: 2,
        proto: 17,
    };
    inst.proxy.push(ProxyEntry {
        key: flow,
        meta: md1(100, 254, PROXY_STATIC),
    });
    let mut plan = HostPlan {
        host: host.clone(),
        ..HostPlan::default()
    };
    plan.instances.insert("sf1".into(), inst);
    let want = keys::keys(&plan);

    let mut dp = KernelDataplane::open(&host, &ledger, Default::default()).unwrap();
    let r = reconcile(&mut dp, &want).unwrap();
    assert_eq!(r.put, want.len());
    let i = dp.instance_of("sf1").unwrap();
    let mut fwd: Vec<u32> = i.list_fwd().unwrap().into_iter().map(|(k, _)| k).collect();
    fwd.sort();
    assert_eq!(fwd, vec![sph(100, 254), sph(200, 254)]);
    assert_eq!(i.list_proxy().unwrap().len(), 1);
    assert_eq!(i.list_cfg().unwrap().len(), 1);
    assert_eq!(i.attachments().len(), 1);
    let pins = std::path::Path::new(stages::load::PIN_ROOT).join(pin_name(&host, "sf1"));
    assert!(pins.exists());

    // The agent goes away (the instances are kept) and comes back: nothing to do.
    drop(dp);
    assert!(pins.exists(), "the pins went with the agent");
    let mut dp = KernelDataplane::open(&host, &ledger, Default::default()).unwrap();
    assert_eq!(dp.installed().unwrap(), want);
    assert_eq!(reconcile(&mut dp, &want).unwrap(), Reconciled::default());
    assert_eq!(dp.instance_of("sf1").unwrap().list_fwd().unwrap().len(), 2);

    // An upgrade whose stages lay a map out otherwise (here `cls_slots` pinned as another
    // map): the agent comes back, makes the instance again and installs all of it again.
    drop(dp);
    let cls_slots = pins.join("cls_slots");
    std::fs::remove_file(&cls_slots).unwrap();
    libbpf_rs::MapHandle::from_pinned_path(pins.join("cfg_slots"))
        .unwrap()
        .pin(&cls_slots)
        .unwrap();
    let mut dp = KernelDataplane::open(&host, &ledger, Default::default()).unwrap();
    let kept: Vec<String> = dp.installed().unwrap().into_keys().collect();
    assert_eq!(kept, vec![format!("{}i/sf1", keys::plan_prefix(&host))]);
    assert_eq!(
        reconcile(&mut dp, &want).unwrap(),
        Reconciled {
            put: want.len() - 1,
            deleted: 0
        }
    );
    let i = dp.instance_of("sf1").unwrap();
    assert_eq!(i.list_fwd().unwrap().len(), 2);
    assert_eq!(i.list_proxy().unwrap().len(), 1);
    assert_eq!(i.list_cfg().unwrap().len(), 1);
    assert_eq!(i.attachments().len(), 1);
    assert_eq!(dp.installed().unwrap(), want);

    // One entry moves: one delete, one put.
    let mut plan2 = plan.clone();
    if let Some(i) = plan2.instances.get_mut("sf1") {
        i.fwd.retain(|f| f.spi != 200);
        i.fwd.push(FwdEntry {
            spi: 300,
            si: 254,
            val: fwd_end(),
        });
    }
    let want2 = keys::keys(&plan2);
    assert_eq!(
        reconcile(&mut dp, &want2).unwrap(),
        Reconciled { put: 1, deleted: 1 }
    );
    let mut fwd: Vec<u32> = dp
        .instance_of("sf1")
        .unwrap()
        .list_fwd()
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    fwd.sort();
    assert_eq!(fwd, vec![sph(100, 254), sph(300, 254)]);

    // A key of another host, or of no known shape, is an error, not a panic.
    let mut bad = Kv::new();
    bad.insert(
        format!("{}i/sf1/zzz/1", keys::plan_prefix(&host)),
        b"{}".to_vec(),
    );
    assert!(dp.apply(&bad, &[]).is_err());
    bad.clear();
    bad.insert(
        format!("{}i/sf1", keys::plan_prefix("other")),
        b"{}".to_vec(),
    );
    assert!(dp.apply(&bad, &[]).is_err());

    // The plan goes: everything is removed.
    assert_eq!(reconcile(&mut dp, &Kv::new()).unwrap().deleted, want2.len());
    assert!(dp.instance_of("sf1").is_none());
    assert!(!pins.exists(), "the instance was not removed");
    dp.remove_all().unwrap();
}
