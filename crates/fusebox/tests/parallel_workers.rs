//! `--parallel-workers N` with the parallel mode: the planner's decision (which branches go
//! to helper threads, and why) is printed, and `fusebox verify --modes naive,parallel`
//! stays identical; `fusebox run` reports the hand-offs.

mod common;
use common::*;

/// Four firewalls that never drop (a classifier every output of which goes on), in a line.
fn firewalls(d: &std::path::Path) -> std::path::PathBuf {
    let rules: Vec<String> = (0..40)
        .map(|i| format!("src net 172.16.{i}.0/24 && dst port {}", 1000 + i))
        .collect();
    let mut click = format!(
        "FromDevice(eth0) -> Strip(14) -> MarkIPHeader -> c :: IPClassifier({}, -);\nu :: Unstrip(14);\n",
        rules.join(", ")
    );
    for i in 0..=rules.len() {
        click.push_str(&format!("c[{i}] -> u;\n"));
    }
    click.push_str("u -> ToDevice(eth1);\n");
    std::fs::write(d.join("fw.click"), click).unwrap();
    let mut toml = String::new();
    for i in 1..=4 {
        toml.push_str(&format!("[nf.fw{i}]\nclick = \"fw.click\"\n"));
    }
    for i in 1..4 {
        toml.push_str(&format!(
            "[[link]]\nbetween = [\"fw{i}.eth1\", \"fw{}.eth0\"]\n",
            i + 1
        ));
    }
    toml.push_str("[[entry]]\nto = \"fw1.eth0\"\n");
    let p = d.join("chain.toml");
    std::fs::write(&p, toml).unwrap();
    p
}

#[test]
fn the_planners_branches_on_two_workers_verify_identical() {
    let d = scratch("parallel-workers");
    let chain = firewalls(&d);
    gen_trace(
        &d,
        "trace.pcap",
        &[
            "--packets",
            "3000",
            "--flows",
            "100",
            "--mix",
            "udp=1,tcp=1",
        ],
    );
    let chain = chain.to_str().unwrap();
    let o = fusebox_ok(
        &d,
        &[
            "verify",
            chain,
            "--input",
            "fw1.eth0=trace.pcap",
            "--modes",
            "naive,parallel",
            "--parallel-workers",
            "2",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(err.contains("branches on 2 worker(s)"), "{err}");
    // Every branch has a worker and a reason; the first starts the group at home.
    assert!(
        err.contains("fw1") && err.contains("worker 0 — the group's first branch"),
        "{err}"
    );
    assert_eq!(err.matches(": worker ").count(), 4, "{err}");
    assert!(out.contains("identical"), "{out}");

    // The run reports the groups, and the hand-offs when a branch went to a helper.
    let o = fusebox_ok(
        &d,
        &[
            "run",
            chain,
            "--input",
            "fw1.eth0=trace.pcap",
            "--mode",
            "parallel",
            "--parallel-workers",
            "2",
            "--progress",
            "off",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("parallel: 1 groups; 3000 packets merged"),
        "{err}"
    );
    if err.contains(": worker 1 ") {
        assert!(err.contains("packets handed off in batches"), "{err}");
    }
    // Without the parallel mode the option is refused.
    let o = fusebox(
        &d,
        &[
            "run",
            chain,
            "--input",
            "fw1.eth0=trace.pcap",
            "--parallel-workers",
            "2",
        ],
    );
    assert!(!o.status.success());
    let _ = std::fs::remove_dir_all(&d);
}
