//! `fusebox plan --pipeline` writes a PLAN file; `fusebox run --plan` runs it with the
//! outputs and counters of a run on one core; stale and impossible plans are refused with
//! the file named.

mod common;
use common::*;

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_hand_written_pipeline_runs_as_one_core() {
    let d = scratch("plan-run");
    gen_trace(
        &d,
        "t.pcap",
        &[
            "--packets",
            "3000",
            "--flows",
            "200",
            "--ttl",
            "1-64",
            "--dst",
            "0.0.0.0/0",
        ],
    );
    let chain = root().join("examples/isp/chain.toml");
    let chain = chain.to_str().unwrap();
    fusebox_ok(
        &d,
        &[
            "plan",
            chain,
            "--pipeline",
            "fw|router,napt",
            "--out",
            "p.json",
        ],
    );
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("p.json")).unwrap()).unwrap();
    assert_eq!(
        plan["placement"]["stages"][1]["nfs"],
        serde_json::json!([1, 2])
    );
    assert_eq!(
        plan["chain"]["nfs"],
        serde_json::json!(["fw", "router", "napt"])
    );
    // A run into its own folder (`--out-dir NAME`) with these extra arguments: its JSON.
    let run_into = |name: &str, extra: &[&str]| {
        std::fs::create_dir_all(d.join(name)).unwrap();
        let mut args = vec![
            "run",
            chain,
            "--input",
            "fw.eth0=t.pcap",
            "--out-dir",
            name,
            "--json",
            "-q",
        ];
        args.extend_from_slice(extra);
        json(&fusebox_ok(&d, &args))
    };
    let a = run_into("one", &[]);
    // As planned; and merged on the same plan: each stage merges its own NFs (the
    // router's check after the firewall's is not stepped over across the cut).
    for (name, extra) in [
        ("piped", &["--plan", "p.json"][..]),
        ("merged", &["--plan", "p.json", "--mode", "merged"][..]),
    ] {
        let b = run_into(name, extra);
        assert_eq!(a["nfs"], b["nfs"], "{name}");
        assert_eq!(a["exits"], b["exits"], "{name}");
        assert_eq!(a["totals"], b["totals"], "{name}");
        assert_eq!(b["totals"]["balanced"], true, "{name}");
        let mut compared = 0;
        for x in a["exits"].as_array().unwrap() {
            let f = format!("{}.pcap", x["name"].as_str().unwrap());
            let (p, q) = (
                packets(&d.join("one").join(&f)),
                packets(&d.join(name).join(&f)),
            );
            assert_eq!(p.len() as u64, x["packets"].as_u64().unwrap());
            assert!(p == q, "{name}: {f} differs");
            compared += p.len();
        }
        assert!(compared > 0);
    }
    // In memory, every pass goes through both stages.
    let r = fusebox_ok(
        &d,
        &[
            "run",
            chain,
            "--input",
            "fw.eth0=t.pcap",
            "--replay",
            "3",
            "--plan",
            "p.json",
            "--json",
            "-q",
        ],
    );
    let r = json(&r);
    assert_eq!(r["summary"]["totals"]["input"], 9000);
    assert_eq!(r["summary"]["totals"]["balanced"], true);
}

#[test]
fn stale_and_impossible_plans_are_refused() {
    let d = scratch("plan-refused");
    gen_trace(&d, "t.pcap", &["--packets", "10"]);
    for f in ["chain.toml", "fw.click", "acl.rules"] {
        std::fs::copy(root().join("examples/isp").join(f), d.join(f)).unwrap();
    }
    // The chain refers to ../routers and ../napts: keep them reachable.
    let text = std::fs::read_to_string(d.join("chain.toml"))
        .unwrap()
        .replace(
            "../routers/",
            &format!("{}/", root().join("examples/routers").display()),
        )
        .replace(
            "../napts/",
            &format!("{}/", root().join("examples/napts").display()),
        );
    std::fs::write(d.join("chain.toml"), &text).unwrap();
    fusebox_ok(
        &d,
        &[
            "plan",
            "chain.toml",
            "--pipeline",
            "fw|router|napt",
            "--out",
            "bad.json",
        ],
    );
    let o = fusebox(
        &d,
        &[
            "run",
            "chain.toml",
            "--input",
            "fw.eth0=t.pcap",
            "--plan",
            "bad.json",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the plan cannot run") && err.contains("napt/rw"),
        "{err}"
    );
    fusebox_ok(
        &d,
        &[
            "plan",
            "chain.toml",
            "--pipeline",
            "fw|router,napt",
            "--out",
            "p.json",
        ],
    );
    std::fs::write(
        d.join("chain.toml"),
        text.replace("02:00:00:00:0e:10", "02:00:00:00:0e:99"),
    )
    .unwrap();
    let o = fusebox(
        &d,
        &[
            "run",
            "chain.toml",
            "--input",
            "fw.eth0=t.pcap",
            "--plan",
            "p.json",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("p.json") && err.contains("make the plan again"),
        "{err}"
    );
    let o = fusebox(
        &d,
        &[
            "plan",
            "chain.toml",
            "--pipeline",
            "fw|lb",
            "--out",
            "x.json",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no NF lb"), "{err}");
    std::fs::write(d.join("junk.json"), "[1, 2]").unwrap();
    let o = fusebox(
        &d,
        &[
            "run",
            "chain.toml",
            "--input",
            "fw.eth0=t.pcap",
            "--plan",
            "junk.json",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("junk.json") && err.contains("not a FuseBox plan"),
        "{err}"
    );
}
