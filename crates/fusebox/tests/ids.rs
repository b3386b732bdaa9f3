//! `SnortIDS` in a Click configuration run by the CLI: `examples/speedybox/ids.click` on a
//! generated trace (alerts, drops by reason, `verify` identical), an `ALERTS` file in Snort's
//! fast format, and rule errors reported with their place.

mod common;
use common::*;

fn summary(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("JSON summary on stdout")
}

fn gen(dir: &std::path::Path) {
    fusebox_ok(
        dir,
        &[
            "gen",
            "-o",
            "trace.pcap",
            "--packets",
            "2000",
            "--flows",
            "20",
            "--mix",
            "tcp=1,udp=1",
            "--dport",
            "53,1234",
            "--dst",
            "10.0.0.0/24",
        ],
    );
}

#[test]
fn speedybox_example_alerts_and_drops() {
    let d = scratch("ids-example");
    gen(&d);
    let click = root().join("examples/speedybox/ids.click");
    let o = fusebox_ok(
        &d,
        &[
            "run",
            click.to_str().unwrap(),
            "--input",
            "eth0=trace.pcap",
            "--output",
            "eth1=out.pcap",
            "--json",
        ],
    );
    let s = summary(&o);
    let ids = s["nfs"][0]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["class"] == "SnortIDS")
        .expect("the SnortIDS element")
        .clone();
    let stats = &ids["stats"];
    assert_eq!(stats["rules_loaded"], 5);
    assert_eq!(stats["packets"], 2000);
    assert!(stats["alerts"].as_u64().unwrap() > 0);
    let dropped = stats["dropped"].as_u64().unwrap();
    assert!(
        dropped > 0,
        "datagrams to 1234 with the blocked pattern are dropped"
    );
    assert_eq!(ids["drops"]["ids-drop"].as_u64(), Some(dropped));
    assert_eq!(packets(&d.join("out.pcap")).len() as u64, 2000 - dropped);
    let v = fusebox_ok(
        &d,
        &[
            "verify",
            click.to_str().unwrap(),
            "--input",
            "ids.eth0=trace.pcap",
        ],
    );
    let line = String::from_utf8_lossy(&v.stdout).to_string();
    assert!(line.starts_with("identical:"), "{line}");
}

#[test]
fn alerts_file_and_rule_errors() {
    let d = scratch("ids-alerts");
    gen(&d);
    std::fs::write(
        d.join("r.rules"),
        "alert udp any any -> any 53 (msg:\"DNS\"; classtype:misc-activity; sid:7; rev:3;)\n",
    )
    .unwrap();
    std::fs::write(
        d.join("ids.click"),
        "FromDevice(eth0) -> CheckIPHeader(14) -> SnortIDS(r.rules, ALERTS fast.log) -> ToDevice(eth1);\n",
    )
    .unwrap();
    fusebox_ok(
        &d,
        &[
            "run",
            "ids.click",
            "--input",
            "eth0=trace.pcap",
            "--output",
            "eth1=out.pcap",
        ],
    );
    let log = std::fs::read_to_string(d.join("fast.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert!(!lines.is_empty());
    for l in &lines {
        // MM/DD-HH:MM:SS.uuuuuu  [**] [1:7:3] DNS [**] [Classification: Misc activity] [Priority: 3] {UDP} a:p -> b:53 [flow F] [packet N]
        assert_eq!(&l[2..3], "/");
        assert_eq!(&l[21..23], "  ");
        assert!(
            l[23..].starts_with(
                "[**] [1:7:3] DNS [**] [Classification: Misc activity] [Priority: 3] {UDP} "
            ),
            "{l}"
        );
        assert!(l.contains(":53 [flow "), "{l}");
    }
    // A rule error names the rule file, line and column, and the option.
    std::fs::write(
        d.join("r.rules"),
        "\nalert udp any any -> any 53 (content:\"a\"; byte_test:1,>,2,0; sid:7;)\n",
    )
    .unwrap();
    let o = fusebox(&d, &["run", "ids.click", "--input", "eth0=trace.pcap"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("r.rules:2:43: option `byte_test` is not supported"),
        "{err}"
    );
}

#[test]
fn fast_path_replays_the_ids_identically() {
    let d = scratch("ids-fastpath");
    fusebox_ok(
        &d,
        &[
            "gen",
            "-o",
            "trace.pcap",
            "--packets",
            "5000",
            "--flows",
            "50",
            "--mix",
            "tcp=2,udp=1",
            "--dport",
            "53,1234,80",
            "--dst",
            "10.0.0.0/24",
        ],
    );
    let rules = root().join("examples/speedybox/ids.rules");
    // Both directions through one IDS (replies reflected), so handshakes complete.
    std::fs::write(
        d.join("two.click"),
        format!(
            "ids :: SnortIDS({}, VAR HOME_NET 10.0.0.0/8, VAR HTTP_PORTS [80,8080]);\n\
             FromDevice(eth0) -> CheckIPHeader(14) -> ids;\n\
             FromDevice(eth1) -> CheckIPHeader(14) -> ids;\n\
             ids -> c :: IPClassifier(dst net 10.0.0.0/24, -);\n\
             c[0] -> ToDevice(eth1);\n\
             c[1] -> ToDevice(eth0);\n",
            rules.display()
        ),
    )
    .unwrap();
    let base = [
        "two.click",
        "--input",
        "two.eth0=trace.pcap",
        "--reflect",
        "two.eth1",
    ];
    let mut args = vec!["verify"];
    args.extend_from_slice(&base);
    args.extend_from_slice(&["--modes", "naive,fastpath,synth"]);
    let v = fusebox_ok(&d, &args);
    let line = String::from_utf8_lossy(&v.stdout).to_string();
    assert!(line.starts_with("identical:"), "{line}");
    for initial in ["first", "handshake"] {
        let mut args = vec!["run"];
        args.extend_from_slice(&base);
        args.extend_from_slice(&["--mode", "fastpath", "--initial", initial, "--out-dir", "."]);
        let o = fusebox_ok(&d, &args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let fp = text
            .lines()
            .find(|l| l.starts_with("fastpath:"))
            .unwrap_or_else(|| panic!("no fastpath line:\n{text}"));
        assert!(fp.ends_with("full chain by reason: none"), "{fp}");
        let served: u64 = fp
            .trim_start_matches("fastpath: ")
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(
            served > 9000,
            "most packets take the consolidated path: {fp}"
        );
        assert!(text.contains("drop ids-drop"), "{text}");
    }
}
