//! `fusebox controller --check / --dry-run`, `fusebox pki`, and `fusebox chain access` with
//! `fusebox pki`'s certificates against a real etcd (chains across hosts).

mod common;
use common::*;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn dry_run_prints_the_thesis_table() {
    let d = scratch("sfc-dry");
    let f = root().join("examples/sfc/fig5-10.json");
    let out = stdout(&fusebox_ok(
        &d,
        &["controller", f.to_str().unwrap(), "--dry-run"],
    ));
    // Fig. 5.10: sf1 and sf2 forward to sf3's MAC, sf3 ends both chains.
    let sf3_mac = out
        .lines()
        .find(|l| l.contains("(200,254)"))
        .and_then(|l| l.split("ethernet to ").nth(1))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    assert!(
        out.contains(&format!("(100,254) → ethernet to {sf3_mac} (sf3 in)")),
        "{out}"
    );
    assert!(out.contains("(100,253) → end of path"), "{out}");
    assert!(out.contains("(200,253) → end of path"), "{out}");
    assert!(
        out.contains("installed: sf2@server1 (SI 255) → sf3@server2 (SI 254)"),
        "{out}"
    );
    let toml = root().join("examples/sfc/fig5-10.toml");
    let again = stdout(&fusebox_ok(
        &d,
        &["controller", toml.to_str().unwrap(), "--dry-run"],
    ));
    assert_eq!(again, out);
    // --json is the plan itself.
    let json = stdout(&fusebox_ok(
        &d,
        &["controller", f.to_str().unwrap(), "--dry-run", "--json"],
    ));
    let plan: sfc::plan::Plan = serde_json::from_str(&json).unwrap();
    assert_eq!(plan.hosts["server2"].instances["sf3"].fwd.len(), 2);
}

#[test]
fn dry_run_with_hellos() {
    let d = scratch("sfc-hellos");
    let hellos = r#"[{"host": "server1", "functions": {
        "sf1": {"iface_in": {"name": "veth1", "ifindex": 7, "mac": "0a:00:00:00:00:01"}}}}]"#;
    std::fs::write(d.join("hellos.json"), hellos).unwrap();
    let f = root().join("examples/sfc/listing-a1.json");
    let out = stdout(&fusebox_ok(
        &d,
        &[
            "controller",
            f.to_str().unwrap(),
            "--dry-run",
            "--hellos",
            "hellos.json",
        ],
    ));
    // server2 has no agent: chain 1234 is not installed, 7892 is.
    assert!(out.contains("dec@veth1"), "{out}");
    assert!(out.contains("(7892,254) → end of path"), "{out}");
    assert!(out.contains("1234     NOT installed"), "{out}");
    assert!(out.contains("host server2 has no live agent"), "{out}");
}

#[test]
fn check_and_errors() {
    let d = scratch("sfc-check");
    let f = root().join("examples/sfc/listing-a1.json");
    let out = stdout(&fusebox_ok(
        &d,
        &["controller", f.to_str().unwrap(), "--check"],
    ));
    assert!(out.contains("valid (2 chains, 2 functions)"), "{out}");
    std::fs::write(
        d.join("bad.json"),
        "{\n  \"chains\": [{\"id\": 1, \"nodes\": [\"sf9\"]}],\n  \"functions\": [{\"tag\": \"sf1\", \"type\": \"x\", \"host\": \"h\"}]\n}\n",
    )
    .unwrap();
    let o = fusebox(&d, &["controller", "bad.json", "--check"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("bad.json:2:34: /chains/0/nodes/0: unknown tag \"sf9\": expected one of the functions' tags (sf1)"),
        "{err}"
    );
    // Without --dry-run or --check this build has no etcd to write to.
    let o = fusebox(&d, &["controller", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn pki_writes_and_refuses_to_overwrite() {
    let d = scratch("sfc-pki");
    let out = stdout(&fusebox_ok(
        &d,
        &[
            "pki",
            "--dir",
            "pki",
            "--hosts",
            "server1,server2",
            "--san",
            "10.1.0.1",
        ],
    ));
    assert_eq!(out.lines().count(), 12, "{out}");
    assert!(d.join("pki/agent-server2-key.pem").exists());
    assert!(d.join("pki/root.pem").exists() && d.join("pki/root-key.pem").exists());
    let o = fusebox(&d, &["pki", "--dir", "pki", "--hosts", "server1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    fusebox_ok(
        &d,
        &["pki", "--dir", "pki", "--hosts", "server1", "--force"],
    );
}

/// Removes a directory on drop (also when the test fails).
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `fusebox pki`'s certificates run etcd, its `root` certificate turns access control on
/// with `fusebox chain access`, and then an agent can write only its own keys while the
/// controller writes every host's.
#[test]
fn pki_root_certificate_turns_access_control_on() {
    use sfc::keys;
    use sfc::store::{Store, TlsFiles};
    let d = Scratch(scratch("sfc-access"));
    fusebox_ok(&d.0, &["pki", "--dir", "pki", "--hosts", "server1,server2"]);
    let pki = d.0.join("pki");
    let tls = |name: &str| TlsFiles {
        ca: pki.join("ca.pem"),
        cert: pki.join(format!("{name}.pem")),
        key: pki.join(format!("{name}-key.pem")),
    };
    let Some(etcd) = sfc::testing::Etcd::start_with_or_skip(
        "pki_root_certificate_turns_access_control_on",
        &tls("etcd"),
        &tls("controller"),
    )
    .unwrap() else {
        return;
    };
    let access = |who: &str, agents: &[&str]| {
        let who = tls(who);
        let mut args: Vec<String> = [
            "chain",
            "access",
            "--etcd",
            etcd.endpoint(),
            "--ca",
            who.ca.to_str().unwrap(),
            "--cert",
            who.cert.to_str().unwrap(),
            "--key",
            who.key.to_str().unwrap(),
            "--controller",
            sfc::pki::CONTROLLER_CN,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for a in agents {
            args.extend(["--agent".to_string(), a.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fusebox(&d.0, &args)
    };
    let o = access("root", &["server1", "server2"]);
    assert!(
        o.status.success(),
        "chain access with root.pem: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout(&o).contains("access control on: 1 controller(s), 2 agent(s)"));
    // Access control is on: only root administers it now (the controller's certificate
    // cannot add an agent; root's can).
    let o = access("controller", &["server3"]);
    assert_eq!(o.status.code(), Some(1), "the controller changed the roles");
    assert!(access("root", &["server1", "server2", "server3"])
        .status
        .success());

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut agent = Store::connect(etcd.endpoint(), &tls("agent-server1"))
            .await
            .unwrap();
        let mut controller = Store::connect(etcd.endpoint(), &tls("controller"))
            .await
            .unwrap();
        let other_plan = format!("{}i/sf3", keys::plan_prefix("server2"));
        let own_plan = format!("{}i/sf1", keys::plan_prefix("server1"));
        // The agent: its own Hello and status, yes; another host's keys or any plan, no.
        agent
            .put(&keys::hello_key("server1"), b"{}", None)
            .await
            .unwrap();
        agent
            .put(&keys::status_key("server1"), b"{}", None)
            .await
            .unwrap();
        for key in [
            keys::hello_key("server2"),
            keys::status_key("server2"),
            other_plan.clone(),
            own_plan.clone(),
            keys::commit_key("server2"),
        ] {
            assert!(
                agent.put(&key, b"forged", None).await.is_err(),
                "agent server1 wrote {key}"
            );
        }
        assert!(agent
            .get_prefix(&keys::plan_prefix("server2"))
            .await
            .is_err());
        // The controller: every host's plan, and reads the Hellos.
        for key in [&other_plan, &own_plan] {
            controller.put(key, b"{}", None).await.unwrap();
        }
        assert_eq!(
            controller
                .get_prefix(&keys::hello_prefix())
                .await
                .unwrap()
                .kvs
                .len(),
            1
        );
        // The agent reads its own plan only.
        let own = agent
            .get_prefix(&keys::plan_prefix("server1"))
            .await
            .unwrap();
        assert_eq!(own.kvs.keys().collect::<Vec<_>>(), [&own_plan]);
        // What the controller wrote is there, the agent's forgeries are not.
        assert_eq!(
            controller.get(&other_plan).await.unwrap().as_deref(),
            Some(&b"{}"[..])
        );
    });
}
