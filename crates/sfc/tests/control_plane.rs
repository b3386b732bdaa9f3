//! The control plane end to end against a real etcd with mutual TLS: a controller and agents
//! (tokio tasks, each with the in-memory fake data plane, whose state outlives its agent as
//! pinned maps do). Skipped without the `etcd` binary, a failure under CI=true.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sfc::agent::{AgentConfig, AgentOptions};
use sfc::controller::{ChainFileSource, ControllerOptions};
use sfc::dataplane::{Counters, Dataplane, DataplaneError, FakeState, MemoryDataplane};
use sfc::file::ChainFile;
use sfc::keys::{self, Kv};
use sfc::plan::Plan;
use sfc::registry::{Hello, Registry};
use sfc::store::{Store, TlsFiles};
use sfc::testing::{Etcd, TestCa};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Fig. 5.10 of the thesis (chains 100: sf2 → sf3 and 200: sf1 → sf3), where sf3's node
/// has an alternative, sf4 on a third host.
const CHAINS: &str = r#"{
  "chains": [
    { "id": 100, "nodes": ["sf2", ["sf3", "sf4"]] },
    { "id": 200, "nodes": ["sf1", ["sf3", "sf4"]] }
  ],
  "functions": [
    { "tag": "sf1", "type": "tc-redirect", "host": "server1" },
    { "tag": "sf2", "type": "tc-redirect", "host": "server1" },
    { "tag": "sf3", "type": "tc-redirect", "host": "server2" },
    { "tag": "sf4", "type": "tc-redirect", "host": "server3" }
  ]
}"#;

/// The same with chain 100 moved to sf1 → sf2 → sf3 and chain 200 gone.
const CHAINS_CHANGED: &str = r#"{
  "chains": [
    { "id": 100, "nodes": ["sf1", "sf2", ["sf3", "sf4"]] }
  ],
  "functions": [
    { "tag": "sf1", "type": "tc-redirect", "host": "server1" },
    { "tag": "sf2", "type": "tc-redirect", "host": "server1" },
    { "tag": "sf3", "type": "tc-redirect", "host": "server2" },
    { "tag": "sf4", "type": "tc-redirect", "host": "server3" }
  ]
}"#;

fn agent_config(host: &str) -> AgentConfig {
    let n = host.trim_start_matches("server").parse::<u8>().unwrap_or(9);
    let sfs: &[&str] = match host {
        "server1" => &["sf1", "sf2"],
        "server2" => &["sf3"],
        _ => &["sf4"],
    };
    let mut text = String::new();
    for (i, tag) in sfs.iter().enumerate() {
        let i = i as u8 + 1;
        text.push_str(&format!(
            "[[sf]]\ntag = \"{tag}\"\niface_in = {{ name = \"{tag}-in\", ifindex = {}, mac = \"02:00:00:00:{n:02x}:{:02x}\" }}\n",
            10 * i,
            2 * i
        ));
        text.push_str(&format!(
            "iface_out = {{ name = \"{tag}-out\", ifindex = {}, mac = \"02:00:00:00:{n:02x}:{:02x}\" }}\n",
            10 * i + 1,
            2 * i + 1
        ));
    }
    AgentConfig::parse(&text, host).unwrap()
}

fn hello(host: &str) -> Hello {
    agent_config(host).hello(host).unwrap()
}

/// What `hosts` (the live ones) should hold for the chain file at `path`.
fn expected(path: &Path, hosts: &[&str]) -> (Plan, BTreeMap<String, Kv>) {
    let file = ChainFile::load(path).unwrap();
    let reg = Registry::from_hellos(hosts.iter().map(|h| hello(h)));
    let plan = sfc::plan::plan(&file, &reg);
    let per_host = hosts
        .iter()
        .map(|h| {
            (
                h.to_string(),
                plan.hosts.get(*h).map(keys::keys).unwrap_or_default(),
            )
        })
        .collect();
    (plan, per_host)
}

fn log(line: &str) {
    eprintln!("{line}");
}

struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Running {
    /// Kills the task (no clean-up, as `kill -9`: its lease stays until its TTL).
    fn kill(self) {
        self.task.abort();
        drop(self.stop);
    }

    /// Stops it cleanly and waits.
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

fn spawn_agent(etcd: &Etcd, tls: &TlsFiles, host: &str, dp: &MemoryDataplane) -> Running {
    spawn_agent_with(etcd, tls, hello(host), dp.clone())
}

/// An agent with Hello `hello` on data plane `dp` (a 2 s lease; status and retries every
/// 300 ms).
fn spawn_agent_with<D: Dataplane + Send + 'static>(
    etcd: &Etcd,
    tls: &TlsFiles,
    hello: Hello,
    mut dp: D,
) -> Running {
    let mut options = AgentOptions::new(etcd.endpoint(), tls.clone());
    options.ttl = 2;
    options.retry_every = Duration::from_millis(300);
    options.status_every = Duration::from_millis(300);
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(async move {
        sfc::agent::run(&hello, &mut dp, &options, rx, &log).await;
    });
    Running { stop, task }
}

fn spawn_controller(etcd: &Etcd, tls: &TlsFiles, chains: &Path) -> Running {
    let mut options = ControllerOptions::new(etcd.endpoint(), tls.clone());
    options.poll_every = Duration::from_millis(100);
    options.retry_every = Duration::from_millis(300);
    let mut source = ChainFileSource::new(chains, sfc::plan::plan);
    let (stop, rx) = watch::channel(false);
    let task = tokio::spawn(async move {
        let r = sfc::controller::run(&mut source, &options, rx, &log).await;
        if let Err(e) = r {
            eprintln!("controller: {e}");
        }
    });
    Running { stop, task }
}

/// Waits until `host`'s Hello is registered.
async fn registered(store: &mut Store, host: &str) {
    let start = Instant::now();
    while store.get(&keys::hello_key(host)).await.unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{host} did not register"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every host's fake data plane holds what `want` says.
async fn converge(
    dps: &BTreeMap<String, MemoryDataplane>,
    want: &BTreeMap<String, Kv>,
    what: &str,
) {
    let start = Instant::now();
    loop {
        let ok = want.iter().all(|(h, kv)| {
            dps.get(h)
                .map(|d| d.state().entries == *kv)
                .unwrap_or(false)
        });
        if ok {
            return;
        }
        if start.elapsed() > Duration::from_secs(15) {
            for (h, kv) in want {
                let got = dps.get(h).map(|d| d.state().entries).unwrap_or_default();
                eprintln!(
                    "{h}: want {:?}\n{h}: got  {:?}",
                    kv.keys().collect::<Vec<_>>(),
                    got.keys().collect::<Vec<_>>()
                );
            }
            panic!("{what}: the data planes did not converge in 15 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Setup {
    etcd: Etcd,
    controller_tls: TlsFiles,
    agent_tls: BTreeMap<String, TlsFiles>,
    chains: PathBuf,
    dps: BTreeMap<String, MemoryDataplane>,
}

fn setup(test: &str, hosts: &[&str]) -> Option<Setup> {
    let etcd = Etcd::start_or_skip(test).unwrap()?;
    let controller_tls = etcd.client_tls("controller").unwrap();
    let agent_tls = hosts
        .iter()
        .map(|h| {
            (
                h.to_string(),
                etcd.client_tls(&format!("agent-{h}")).unwrap(),
            )
        })
        .collect();
    let chains = etcd.dir().join("chains.json");
    std::fs::write(&chains, CHAINS).unwrap();
    let dps = hosts
        .iter()
        .map(|h| (h.to_string(), MemoryDataplane::new()))
        .collect();
    Some(Setup {
        etcd,
        controller_tls,
        agent_tls,
        chains,
        dps,
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn counts(dps: &BTreeMap<String, MemoryDataplane>) -> BTreeMap<String, FakeState> {
    dps.iter().map(|(h, d)| (h.clone(), d.state())).collect()
}

#[test]
fn agents_converge_survive_restarts_and_outages() {
    let hosts = ["server1", "server2"];
    let Some(s) = setup("agents_converge_survive_restarts_and_outages", &hosts) else {
        return;
    };
    rt().block_on(async {
        let controller = spawn_controller(&s.etcd, &s.controller_tls, &s.chains);
        let mut agents: BTreeMap<&str, Running> = hosts
            .iter()
            .map(|h| (*h, spawn_agent(&s.etcd, &s.agent_tls[*h], h, &s.dps[*h])))
            .collect();
        let (plan, want) = expected(&s.chains, &hosts);
        assert!(plan.chains.iter().all(|c| c.installed), "{:?}", plan.chains);
        assert!(
            want.values().all(|kv| !kv.is_empty()),
            "both hosts have entries"
        );
        converge(&s.dps, &want, "controller + two agents").await;

        // The status keys show every host's entries, grouped by stage.
        let mut store = Store::connect(s.etcd.endpoint(), &s.controller_tls)
            .await
            .unwrap();
        let start = Instant::now();
        loop {
            let st = sfc::status::ChainStatus::fetch(&mut store).await.unwrap();
            let published: BTreeMap<String, usize> = st
                .hosts
                .iter()
                .map(|h| {
                    (
                        h.host.clone(),
                        h.stages.values().map(|s| s.entries.len()).sum(),
                    )
                })
                .collect();
            let wanted: BTreeMap<String, usize> =
                want.iter().map(|(h, kv)| (h.clone(), kv.len())).collect();
            if published == wanted && st.chains.len() == 2 {
                assert!(st.render(sfc::status::now()).contains("host server2"));
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "status not published: {published:?} vs {wanted:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // An agent killed and restarted reconverges with no work: its data plane kept its state.
        let before = counts(&s.dps);
        agents.remove("server1").unwrap().kill();
        tokio::time::sleep(Duration::from_millis(500)).await;
        agents.insert(
            "server1",
            spawn_agent(
                &s.etcd,
                &s.agent_tls["server1"],
                "server1",
                &s.dps["server1"],
            ),
        );
        // Registered again (its Hello is back) and reconciled.
        registered(&mut store, "server1").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        converge(&s.dps, &want, "after the agent's restart").await;
        assert_eq!(counts(&s.dps), before, "a restarted agent redid work");

        // The controller stopped: the agents keep their state.
        controller.stop().await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            counts(&s.dps),
            before,
            "agents changed state without the controller"
        );
        drop(store);
        // etcd gone too: still the same state (the agents retry in the background).
        let endpoint = s.etcd.endpoint().to_string();
        drop(s.etcd);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            counts(&s.dps),
            before,
            "agents changed state without etcd ({endpoint})"
        );
        for (_, a) in agents {
            a.stop().await;
        }
    });
}

#[test]
fn a_dead_host_is_routed_around_and_a_changed_file_moves_entries() {
    let hosts = ["server1", "server2", "server3"];
    let Some(s) = setup(
        "a_dead_host_is_routed_around_and_a_changed_file_moves_entries",
        &hosts,
    ) else {
        return;
    };
    rt().block_on(async {
        let controller = spawn_controller(&s.etcd, &s.controller_tls, &s.chains);
        let mut agents: BTreeMap<&str, Running> = hosts
            .iter()
            .map(|h| (*h, spawn_agent(&s.etcd, &s.agent_tls[*h], h, &s.dps[*h])))
            .collect();
        let (plan, want) = expected(&s.chains, &hosts);
        assert!(
            plan.chains
                .iter()
                .all(|c| c.path.iter().any(|hop| hop.tag == "sf3")),
            "{:?}",
            plan.chains
        );
        converge(&s.dps, &want, "three agents").await;

        // server2's agent dies: its lease expires, sf4 on server3 takes sf3's place.
        agents.remove("server2").unwrap().kill();
        let (plan, mut want) = expected(&s.chains, &["server1", "server3"]);
        assert!(
            plan.chains
                .iter()
                .all(|c| c.installed && c.path.iter().any(|hop| hop.tag == "sf4")),
            "{:?}",
            plan.chains
        );
        let server2_before = s.dps["server2"].state();
        want.remove("server2");
        converge(&s.dps, &want, "around the dead host").await;
        // Its keys are gone from etcd; its data plane (no agent) kept its last state.
        let mut store = Store::connect(s.etcd.endpoint(), &s.controller_tls)
            .await
            .unwrap();
        assert!(store
            .get_prefix(&keys::plan_prefix("server2"))
            .await
            .unwrap()
            .kvs
            .is_empty());
        assert_eq!(s.dps["server2"].state(), server2_before);
        let report = store.get(&keys::report_key()).await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&report).contains("sf4"));

        // The chain file changes: entries move (the diff is applied: gone keys deleted).
        let old = counts(&s.dps);
        std::fs::write(&s.chains, CHAINS_CHANGED).unwrap();
        let (plan, mut want) = expected(&s.chains, &["server1", "server3"]);
        assert_eq!(plan.chains.len(), 1);
        want.remove("server2");
        converge(&s.dps, &want, "after the chain file changed").await;
        let new = counts(&s.dps);
        assert!(
            new["server1"].deletes > old["server1"].deletes
                || new["server3"].deletes > old["server3"].deletes,
            "nothing was uninstalled"
        );
        assert_ne!(new["server1"].entries, old["server1"].entries);

        // A bad edit leaves the plan in force.
        std::fs::write(&s.chains, "{ not json").unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        converge(&s.dps, &want, "after a bad edit").await;

        controller.stop().await;
        for (_, a) in agents {
            a.stop().await;
        }
    });
}

#[test]
fn once_applies_and_returns_and_forged_agents_are_refused() {
    let Some(s) = setup(
        "once_applies_and_returns_and_forged_agents_are_refused",
        &["server1"],
    ) else {
        return;
    };
    rt().block_on(async {
        let mut store = Store::connect(s.etcd.endpoint(), &s.controller_tls)
            .await
            .unwrap();
        // A registered Hello (no agent: written by hand under a lease) and a stale host's key.
        let lease = store.lease(10).await.unwrap();
        let h = serde_json::to_vec(&hello("server1")).unwrap();
        store
            .put(&keys::hello_key("server1"), &h, Some(lease.id()))
            .await
            .unwrap();
        store
            .put(&format!("{}i/old", keys::plan_prefix("gone")), b"{}", None)
            .await
            .unwrap();
        let mut options = ControllerOptions::new(s.etcd.endpoint(), s.controller_tls.clone());
        options.once = true;
        let mut source = ChainFileSource::new(&s.chains, sfc::plan::plan);
        let (_stop, rx) = watch::channel(false);
        tokio::time::timeout(
            Duration::from_secs(10),
            sfc::controller::run(&mut source, &options, rx, &log),
        )
        .await
        .expect("--once returns")
        .unwrap();
        let (_, want) = expected(&s.chains, &["server1"]);
        let got = store
            .get_prefix(&keys::plan_prefix("server1"))
            .await
            .unwrap()
            .kvs;
        // The entries, and a commit naming exactly them when there are any.
        let (entries, commit) = keys::committed("server1", &got).unwrap();
        assert_eq!(entries, want["server1"]);
        assert_eq!(commit.is_some(), !entries.is_empty());
        assert!(store
            .get_prefix(&keys::plan_prefix("gone"))
            .await
            .unwrap()
            .kvs
            .is_empty());
        // Applying the same plan again writes nothing.
        let plan = sfc::plan::plan(
            &ChainFile::load(&s.chains).unwrap(),
            &Registry::from_hellos([hello("server1")]),
        );
        let again = sfc::controller::apply_plan(&mut store, &plan)
            .await
            .unwrap();
        assert_eq!((again.put, again.deleted), (0, 0));

        // An agent whose certificate comes from another CA never registers.
        let forger = TestCa::new(&s.etcd.dir().join("forged"), "forged-ca").unwrap();
        let forged = TlsFiles {
            ca: s.controller_tls.ca.clone(),
            ..forger.issue("agent-server9", false).unwrap()
        };
        let dp = MemoryDataplane::new();
        let agent = spawn_agent(&s.etcd, &forged, "server9", &dp);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(store
            .get(&keys::hello_key("server9"))
            .await
            .unwrap()
            .is_none());
        agent.stop().await;
    });
}

/// A fake data plane that records the set of entries it holds after every change: what the
/// agent reconciled to, each time.
#[derive(Clone, Default)]
struct Recording {
    dp: MemoryDataplane,
    states: std::sync::Arc<std::sync::Mutex<Vec<Kv>>>,
}

impl Dataplane for Recording {
    fn installed(&self) -> Result<Kv, DataplaneError> {
        self.dp.installed()
    }

    fn apply(&mut self, puts: &Kv, deletes: &[String]) -> Result<(), DataplaneError> {
        self.dp.apply(puts, deletes)?;
        self.states.lock().unwrap().push(self.dp.state().entries);
        Ok(())
    }

    fn counters(&self) -> Result<BTreeMap<String, Counters>, DataplaneError> {
        self.dp.counters()
    }
}

/// One SF (sf1) and a classifier interface (eth0) on server1.
fn big_hello() -> Hello {
    let text = r#"
        [[sf]]
        tag = "sf1"
        iface_in = { name = "sf1-in", ifindex = 10, mac = "02:00:00:00:01:02" }
        iface_out = { name = "sf1-out", ifindex = 11, mac = "02:00:00:00:01:03" }
        [[iface]]
        name = "eth0"
        ifindex = 2
        mac = "02:00:00:00:01:09"
    "#;
    AgentConfig::parse(text, "big")
        .unwrap()
        .hello("server1")
        .unwrap()
}

/// Chains `ids` through sf1, each classified on server1's eth0 by its own 5-tuple: three
/// entry keys per chain (classifier, the classifier's forwarding entry, sf1's).
fn big_plan(ids: std::ops::RangeInclusive<u32>) -> Plan {
    let chains: Vec<String> = ids
        .map(|id| {
            format!(
                r#"{{ "id": {id}, "nodes": ["sf1"], "entry": "server1", "classifier": [
                     {{ "src": "10.1.{}.{}", "dst": "10.2.0.1", "proto": "udp", "sport": 5000,
                        "dport": 53, "iface": "eth0" }} ] }}"#,
                id / 250,
                id % 250 + 1
            )
        })
        .collect();
    let text = format!(
        r#"{{ "chains": [{}], "functions": [{{ "tag": "sf1", "type": "tc-redirect", "host": "server1" }}] }}"#,
        chains.join(",")
    );
    let file = ChainFile::parse(&text, sfc::file::Format::Json, "big.json").unwrap();
    let plan = sfc::plan::plan(&file, &Registry::from_hellos([big_hello()]));
    assert!(plan.chains.iter().all(|c| c.installed), "{:?}", plan.chains);
    plan
}

/// Waits until server1's published status satisfies `ok`.
async fn published(store: &mut Store, what: &str, ok: impl Fn(&sfc::status::HostStatus) -> bool) {
    let start = Instant::now();
    loop {
        let st = sfc::status::ChainStatus::fetch(store).await.unwrap();
        let h = st.hosts.iter().find(|h| h.host == "server1");
        if h.is_some_and(&ok) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what}: server1's status is {:?}",
            h.map(|h| (h.plan_revision, h.plan_generation, &h.pending))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the recording data plane holds `want`.
async fn holds(dp: &Recording, want: &Kv, what: &str) {
    let start = Instant::now();
    while dp.dp.state().entries != *want {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{what}: the agent did not install the plan in 15 s ({} of {} entries)",
            dp.dp.state().entries.len(),
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn changes_of_more_than_one_transaction_reach_the_agent_whole() {
    let Some(s) = setup(
        "changes_of_more_than_one_transaction_reach_the_agent_whole",
        &["server1"],
    ) else {
        return;
    };
    let max = sfc::store::MAX_TXN_OPS;
    let keys_of = |p: &Plan| keys::keys(&p.hosts["server1"]);
    let (plan1, plan2) = (big_plan(1..=100), big_plan(51..=150));
    let (keys1, keys2) = (keys_of(&plan1), keys_of(&plan2));
    let (puts, deletes) = keys::diff(&keys1, &keys2);
    assert!(keys1.len() > 2 * max, "{} keys", keys1.len());
    assert!(
        puts.len() + deletes.len() > 2 * max,
        "a diff of {} puts and {} deletes",
        puts.len(),
        deletes.len()
    );
    rt().block_on(async {
        let dp = Recording::default();
        let agent = spawn_agent_with(&s.etcd, &s.agent_tls["server1"], big_hello(), dp.clone());
        let mut store = Store::connect(s.etcd.endpoint(), &s.controller_tls)
            .await
            .unwrap();
        registered(&mut store, "server1").await;
        // The test's own watch counts the transactions each change takes.
        let prefix = keys::plan_prefix("server1");
        let from = store.get_prefix(&prefix).await.unwrap().revision + 1;
        let mut w = store.watch_prefix(&prefix, from).await.unwrap();
        let mut revisions = std::collections::BTreeSet::new();
        // The revisions of the plan's changes: until the watch has been quiet for 500 ms.
        let mut count_revisions = async |w: &mut sfc::store::PrefixWatch| {
            while let Ok(batch) = tokio::time::timeout(Duration::from_millis(500), w.next()).await {
                revisions.insert(batch.unwrap().1);
            }
        };

        // The first plan: keys1.len() + 1 operations, three transactions.
        let a = sfc::controller::apply_plan(&mut store, &plan1)
            .await
            .unwrap();
        assert_eq!((a.put, a.deleted), (keys1.len(), 0));
        holds(&dp, &keys1, "the first plan").await;
        // A change of more than two transactions: deletes and puts.
        let a = sfc::controller::apply_plan(&mut store, &plan2)
            .await
            .unwrap();
        assert_eq!((a.put, a.deleted), (puts.len(), deletes.len()));
        holds(&dp, &keys2, "the changed plan").await;
        count_revisions(&mut w).await;
        assert!(
            revisions.len() >= 6,
            "the two changes took {} transactions: the test does not split them",
            revisions.len()
        );

        // A controller that died half-way: 100 deletes and 100 puts of the change back to
        // plan 1, and no commit. The agent keeps plan 2 installed.
        let (back_puts, back_deletes) = keys::diff(&keys2, &keys1);
        assert!(back_puts.len() > 100 && back_deletes.len() > 100);
        let half: Kv = back_puts.into_iter().take(100).collect();
        store.apply(&half, &back_deletes[..100]).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = dp.dp.state().entries;
        assert!(
            now == keys2,
            "a half-written change was installed ({} entries, {} of them plan 2's)",
            now.len(),
            now.iter()
                .filter(|(k, v)| keys2.get(*k) == Some(*v))
                .count()
        );
        // Its status says so: still generation 2, a change pending.
        published(&mut store, "a half-written change", |h| {
            h.plan_generation == 2 && h.pending.as_deref().is_some_and(|p| p.contains("commit 2"))
        })
        .await;
        // The next controller finishes it: the agent installs plan 1 whole.
        let a = sfc::controller::apply_plan(&mut store, &plan1)
            .await
            .unwrap();
        assert!(a.put + a.deleted > 0);
        holds(&dp, &keys1, "the finished change").await;
        let (entries, commit) =
            keys::committed("server1", &store.get_prefix(&prefix).await.unwrap().kvs).unwrap();
        assert_eq!(entries, keys1);
        assert_eq!(commit.map(|c| c.generation), Some(3));
        published(&mut store, "the finished change", |h| {
            h.plan_generation == 3 && h.pending.is_none()
        })
        .await;

        // The host leaves the plan: every key goes, the commit last; nothing is left.
        sfc::controller::apply_plan(&mut store, &Plan::default())
            .await
            .unwrap();
        holds(&dp, &Kv::new(), "the empty plan").await;
        assert!(store.get_prefix(&prefix).await.unwrap().kvs.is_empty());

        // Every set the agent installed was a complete plan, each of them in turn.
        let states = dp.states.lock().unwrap().clone();
        let names = |k: &Kv| {
            if *k == keys1 {
                "plan 1"
            } else if *k == keys2 {
                "plan 2"
            } else if k.is_empty() {
                "empty"
            } else {
                "PARTIAL"
            }
        };
        let seq: Vec<&str> = states.iter().map(names).collect();
        assert_eq!(
            seq,
            ["plan 1", "plan 2", "plan 1", "empty"],
            "the agent installed {} sets",
            states.len()
        );
        agent.stop().await;
    });
}
