//! The store against a real etcd with mutual TLS (skipped without the `etcd` binary, a
//! failure under CI=true).

use sfc::keys::Kv;
use std::time::Duration;

use sfc::store::{Change, Store};
use sfc::testing::{Etcd, TestCa};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_certificate_from_another_ca_is_refused() {
    let Some(etcd) = Etcd::start_or_skip("a_certificate_from_another_ca_is_refused").unwrap()
    else {
        return;
    };
    let good = etcd.client_tls("agent-good").unwrap();
    let forger = TestCa::new(&etcd.dir().join("forged"), "forged-ca").unwrap();
    let forged = forger.issue("agent-forged", false).unwrap();
    // The forged identity trusts the real CA (so only the client side is wrong).
    let forged = sfc::store::TlsFiles {
        ca: good.ca.clone(),
        ..forged
    };
    rt().block_on(async {
        assert!(Store::connect(etcd.endpoint(), &good).await.is_ok());
        let refused = Store::connect(etcd.endpoint(), &forged).await;
        assert!(refused.is_err(), "a certificate from another CA connected");
    });
}

#[test]
fn transactions_prefixes_watches_and_leases() {
    let Some(etcd) = Etcd::start_or_skip("transactions_prefixes_watches_and_leases").unwrap()
    else {
        return;
    };
    let tls = etcd.client_tls("controller").unwrap();
    rt().block_on(async {
        let mut s = Store::connect(etcd.endpoint(), &tls).await.unwrap();
        let puts: Kv = (0..300)
            .map(|i| (format!("/t/a/{i:03}"), format!("v{i}").into_bytes()))
            .collect();
        s.apply(&puts, &[]).await.unwrap();
        let snap = s.get_prefix("/t/a/").await.unwrap();
        assert_eq!(snap.kvs.len(), 300);
        let mut watch = s.watch_prefix("/t/a/", snap.revision + 1).await.unwrap();
        s.apply(
            &[("/t/a/new".to_string(), b"n".to_vec())]
                .into_iter()
                .collect(),
            &["/t/a/000".into()],
        )
        .await
        .unwrap();
        let mut seen = Kv::new();
        let mut changes = Vec::new();
        while changes.len() < 2 {
            let (c, _) = tokio::time::timeout(Duration::from_secs(5), watch.next())
                .await
                .unwrap()
                .unwrap();
            changes.extend(c);
        }
        assert!(changes.contains(&Change::Delete("/t/a/000".into())));
        assert!(changes.contains(&Change::Put("/t/a/new".into(), b"n".to_vec())));
        for c in changes {
            c.apply_to(&mut seen);
        }
        // A watch resumed from an old revision replays what happened since.
        let mut replay = s.watch_prefix("/t/a/", snap.revision + 1).await.unwrap();
        let (c, _) = tokio::time::timeout(Duration::from_secs(5), replay.next())
            .await
            .unwrap()
            .unwrap();
        assert!(!c.is_empty());

        let lease = s.lease(2).await.unwrap();
        s.put("/t/lease", b"held", Some(lease.id())).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            s.get("/t/lease").await.unwrap().as_deref(),
            Some(&b"held"[..]),
            "keepalive failed"
        );
        drop(lease);
        let start = std::time::Instant::now();
        while s.get("/t/lease").await.unwrap().is_some() {
            assert!(
                start.elapsed() < Duration::from_secs(8),
                "the lease did not expire"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        s.create("/t/once", b"1", None).await.unwrap();
        assert!(s.create("/t/once", b"2", None).await.is_err());
    });
}

#[test]
fn rbac_confines_agents_to_their_own_keys() {
    let Some(etcd) = Etcd::start_or_skip("rbac_confines_agents_to_their_own_keys").unwrap() else {
        return;
    };
    let root = etcd.client_tls("root").unwrap();
    let controller = etcd.client_tls("controller").unwrap();
    let agent1 = etcd.client_tls("agent-server1").unwrap();
    let stranger = etcd.client_tls("stranger").unwrap();
    use sfc::keys;
    rt().block_on(async {
        let mut admin = Store::connect(etcd.endpoint(), &root).await.unwrap();
        admin.allow_controller("controller").await.unwrap();
        admin.allow_agent("agent-server1", "server1").await.unwrap();
        admin.enable_auth().await.unwrap();
        // Twice is fine (already there).
        let r = admin.allow_agent("agent-server1", "server1").await;
        eprintln!("again: {r:?}");

        let mut c = Store::connect(etcd.endpoint(), &controller).await.unwrap();
        let plan1 = format!("{}i/sf1", keys::plan_prefix("server1"));
        let plan2 = format!("{}i/sf3", keys::plan_prefix("server2"));
        c.apply(
            &[
                (plan1.clone(), b"{}".to_vec()),
                (plan2.clone(), b"{}".to_vec()),
            ]
            .into_iter()
            .collect(),
            &[],
        )
        .await
        .unwrap();

        let mut a = Store::connect(etcd.endpoint(), &agent1).await.unwrap();
        let lease = a.lease(5).await.unwrap();
        a.put(&keys::hello_key("server1"), b"{}", Some(lease.id()))
            .await
            .unwrap();
        a.put(&keys::status_key("server1"), b"{}", Some(lease.id()))
            .await
            .unwrap();
        assert_eq!(
            a.get_prefix(&keys::plan_prefix("server1"))
                .await
                .unwrap()
                .kvs
                .len(),
            1
        );
        let mut w = a
            .watch_prefix(&keys::plan_prefix("server1"), 0)
            .await
            .unwrap();
        // Not another host's keys, not the plan, not the registry.
        assert!(a
            .put(&keys::hello_key("server2"), b"{}", None)
            .await
            .is_err());
        assert!(a
            .put(&keys::status_key("server2"), b"{}", None)
            .await
            .is_err());
        assert!(a.put(&plan1, b"forged", None).await.is_err());
        assert!(a.get_prefix(&keys::plan_prefix("server2")).await.is_err());
        assert!(a.get_prefix(&keys::hello_prefix()).await.is_err());
        // Its watch still works.
        c.put(&plan1, b"{\"v\":2}", None).await.unwrap();
        let (changes, _) = tokio::time::timeout(Duration::from_secs(5), w.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            changes,
            vec![Change::Put(plan1.clone(), b"{\"v\":2}".to_vec())]
        );
        // A certificate of the right CA but no user: connected, yet refused everything.
        let mut s = Store::connect(etcd.endpoint(), &stranger).await;
        if let Ok(s) = &mut s {
            assert!(s.get_prefix(&keys::plan_prefix("server1")).await.is_err());
        }
        lease.revoke().await.unwrap();
    });
}
