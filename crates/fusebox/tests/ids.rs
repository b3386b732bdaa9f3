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
