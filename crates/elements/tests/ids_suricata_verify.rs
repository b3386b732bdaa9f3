//! `SnortIDS` against suricata-verify (`../shared/data/ids/suricata-verify-subset`).
//!
//! For every case of `INDEX.tsv` not listed in [`LEFT_OUT`] (with its reason), the case's
//! `test.rules` are loaded into a `SnortIDS` (no rule may be skipped), its pcap is pushed
//! through the element packet by packet (the packet index is Suricata's `pcap_cnt`,
//! 1-based), and every `test.yaml` filter on alert events is compared: the number of alerts
//! with the given `alert.signature_id`, `src_ip`, `dest_ip`, `src_port`, `dest_port`,
//! `proto` and `pcap_cnt` (each optional). Cases without a pcap whose rules Suricata must
//! refuse (`test-bad-*`, incomplete hex) are checked to be refused. Filters on other event
//! types (flow, http, stats) and shell checks are not compared.
//!
//! Suricata-verify runs with Suricata's default `HOME_NET`
//! (`[192.168.0.0/16,10.0.0.0/8,172.16.0.0/12]`, `EXTERNAL_NET !$HOME_NET`); a case's
//! `suricata.yaml` `action-order` becomes the element's `ORDER`.
//!
//! Data is read from `../shared/data` next to the workspace; absent, the test skips with a
//! message, except under `CI=true` where it fails.

mod common;
use elements::ids::SnortIDS;
use elements::{BuildCtx, Context, Element, Names, Verdict};
use packet::{Packet, Timestamp};
use pcap::Capture;
use std::path::{Path, PathBuf};

/// Cases left out, with the reason.
const LEFT_OUT: &[(&str, &str)] = &[
    (
        "tests/alert-testmyids",
        "`target` is a Suricata-only option (refused)",
    ),
    (
        "tests/bug-130",
        "filters on HTTP parser fields (app_proto, http.*, alert.action)",
    ),
    ("tests/bug-2769", "pcre"),
    (
        "tests/bug-4571-01",
        "IP-in-IP tunnel: only the outer IPv4 header is decoded",
    ),
    ("tests/bug-4571-02", "IPv6"),
    ("tests/bug-4571-03", "IPv6 in IPv6"),
    ("tests/bug-4571-03-pre-8", "IPv6 in IPv6"),
    (
        "tests/bug-4571-04",
        "IPv6 in IPv4 tunnel: only the outer IPv4 header is decoded",
    ),
    ("tests/bug-4571-06", "IPv4 in IPv6"),
    ("tests/bug-4571-06-pre-8", "IPv4 in IPv6"),
    ("tests/bug-5162", "pcre (rule 4)"),
    ("tests/bug-5464-verdict-07", "reject action"),
    (
        "tests/bug-5825-midstream-exception-policy/exception-policy-ids-midstream-enabled-bypass",
        "checks that Suricata refuses an exception-policy setting, not rules",
    ),
    (
        "tests/bug-6733-syn-packet-flow-output",
        "no alert counts (flow records only)",
    ),
    (
        "tests/bug-8021-alert-max-verdict-01",
        "Suricata's per-packet alert queue limit and alert.action/verdict fields",
    ),
    ("tests/detect-pcre/detect-pcre-03", "pcre"),
    (
        "tests/eve-overlap-payload-05-gap",
        "tcp-stream rules (stream reassembly)",
    ),
    (
        "tests/eve-payload-05-tcp-data-gap",
        "tcp-stream rules (stream reassembly)",
    ),
    (
        "tests/eve-payload-06-tcp-data-leading-gap",
        "tcp-stream rules (stream reassembly)",
    ),
    (
        "tests/exception-policy-default-03",
        "Suricata's exception policy drops midstream flows",
    ),
    (
        "tests/exception-policy-master-switch/exception-policy-master-switch-01",
        "Suricata's exception policy drops midstream flows",
    ),
    (
        "tests/exception-policy-master-switch/exception-policy-master-switch-02",
        "Suricata's exception policy (IPS midstream) suppresses the alert",
    ),
    (
        "tests/exception-policy-master-switch/exception-policy-master-switch-04",
        "Suricata's exception policy passes midstream flows uninspected",
    ),
    (
        "tests/exception-policy-master-switch/exception-policy-master-switch-05",
        "Suricata's exception policy: midstream flows not inspected",
    ),
    (
        "tests/exception-policy-midstream-01",
        "Suricata's exception policy passes midstream flows uninspected",
    ),
    (
        "tests/exception-policy-midstream-05",
        "Suricata's exception policy bypasses midstream flows",
    ),
    (
        "tests/rule-grouping/rule-grouping-1",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-10",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-11",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-12",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-13",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-14",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-15",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-17",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-19",
        "engine analysis output only, no packets",
    ),
    (
        "tests/rule-grouping/rule-grouping-9",
        "engine analysis output only, no packets",
    ),
    (
        "tests/tcp-async-01",
        "the content spans two TCP segments (needs stream reassembly)",
    ),
    (
        "tests/tcp-fastopen-12",
        "filter on packet_info.linktype_name",
    ),
    (
        "tests/tcp-split-handshake-01-4whs",
        "tcp-stream rule (stream reassembly)",
    ),
    (
        "tests/tcp-split-handshake-02-5whs",
        "tcp-stream rule (stream reassembly)",
    ),
    (
        "tests/tls/tls-bypass-missing-event",
        "tcp-stream rule and pcre",
    ),
    (
        "tests/util-action-tests/util-action-11",
        "Suricata inspects IP-only rules (no payload keyword) once per flow, Snort every packet",
    ),
    (
        "tests/util-action-tests/util-action-12",
        "Suricata inspects IP-only rules (no payload keyword) once per flow, Snort every packet",
    ),
    (
        "tests/util-action-tests/util-action-14",
        "Suricata inspects IP-only rules (no payload keyword) once per flow, Snort every packet",
    ),
    (
        "tests/util-action-tests/util-action-15",
        "Suricata inspects IP-only rules (no payload keyword) once per flow, Snort every packet",
    ),
    (
        "tests/util-action-tests/util-action-16",
        "Suricata inspects IP-only rules (no payload keyword) once per flow, Snort every packet",
    ),
];

fn data_dir() -> Option<PathBuf> {
    common::shared_data("ids/suricata-verify-subset")
}

/// One `filter` check of a `test.yaml`: the count and the `match` keys.
#[derive(Debug, Clone)]
struct Filter {
    count: u64,
    keys: Vec<(String, String)>,
}

/// The `checks: - filter:` entries of a suricata-verify `test.yaml` (a small reader for the
/// subset of YAML these files use: nested maps by indentation, lists of maps).
fn filters(yaml: &str) -> Vec<Filter> {
    let mut out: Vec<Filter> = Vec::new();
    let mut in_filter = false;
    let mut match_indent: Option<usize> = None;
    let mut prefix: Vec<(usize, String)> = Vec::new();
    for raw in yaml.lines() {
        let line = raw.split(" #").next().unwrap_or("");
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if let Some(mi) = match_indent {
            if indent > mi {
                // Nested maps become dotted keys (`alert:` / `signature_id:`).
                while prefix.last().is_some_and(|(i, _)| *i >= indent) {
                    prefix.pop();
                }
                if let Some((k, v)) = t.split_once(':') {
                    let k = k.trim();
                    let v = v.trim().trim_matches('"').trim_matches('\'');
                    let mut key: Vec<&str> = prefix.iter().map(|(_, p)| p.as_str()).collect();
                    key.push(k);
                    if v.is_empty() {
                        prefix.push((indent, k.to_string()));
                    } else if let Some(f) = out.last_mut() {
                        f.keys.push((key.join("."), v.to_string()));
                    }
                }
                continue;
            }
            match_indent = None;
            prefix.clear();
        }
        if t.starts_with("- ") {
            in_filter = t == "- filter:";
            if in_filter {
                out.push(Filter {
                    count: 0,
                    keys: Vec::new(),
                });
            }
            continue;
        }
        if !in_filter {
            continue;
        }
        if let Some(c) = t.strip_prefix("count:") {
            if let Some(f) = out.last_mut() {
                f.count = c.trim().parse().unwrap_or(u64::MAX);
            }
        } else if t == "match:" {
            match_indent = Some(indent);
        }
    }
    out
}

/// An alert as the filters see it, read back from the element's alert line.
#[derive(Debug)]
struct Alert {
    sid: String,
    proto: String,
    src: String,
    sport: String,
    dst: String,
    dport: String,
    packet: String,
}

fn parse_alert(line: &str) -> Alert {
    let start = line.find("[**] [").expect("gid:sid:rev") + 6;
    let sid = line[start..].split(':').nth(1).unwrap_or("").to_string();
    let brace = line.rfind('{').expect("{PROTO}");
    let rest = &line[brace + 1..];
    let (proto, rest) = rest.split_once("} ").expect("proto");
    let (addrs, tail) = rest.split_once(" [flow ").expect("flow");
    let (a, b) = addrs.split_once(" -> ").expect("->");
    let split = |s: &str| match s.rsplit_once(':') {
        Some((ip, p)) => (ip.to_string(), p.to_string()),
        None => (s.to_string(), String::new()),
    };
    let (src, sport) = split(a);
    let (dst, dport) = split(b);
    let packet = tail
        .split("[packet ")
        .nth(1)
        .unwrap_or("")
        .trim_end_matches(']')
        .to_string();
    Alert {
        sid,
        proto: proto.to_string(),
        src,
        sport,
        dst,
        dport,
        packet,
    }
}

/// Whether the alert passes a filter's keys; `Err` names a key this test cannot compare.
fn passes(a: &Alert, keys: &[(String, String)]) -> Result<bool, String> {
    let mut ok = true;
    for (k, v) in keys {
        let got: &str = match k.as_str() {
            "event_type" => continue,
            "alert.signature_id" => &a.sid,
            "src_ip" => &a.src,
            "dest_ip" => &a.dst,
            "src_port" => &a.sport,
            "dest_port" => &a.dport,
            "proto" => &a.proto,
            "pcap_cnt" => &a.packet,
            "ip_v" => "4",
            "pkt_src" => "wire/pcap",
            _ => return Err(format!("filter key `{k}`")),
        };
        ok &= got == v;
    }
    Ok(ok)
}

/// A frame, where its IPv4 header is (when the link type says), and its time.
type Frame = (Vec<u8>, Option<usize>, Timestamp);

/// The frames of a pcap.
fn read_pcap(path: &Path) -> Result<Vec<Frame>, String> {
    let mut cap = Capture::from_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let link = cap.get_datalink().0;
    let mut out = Vec::new();
    loop {
        match cap.next_packet() {
            Ok(p) => {
                let d = p.data.to_vec();
                let ip = match link {
                    1 => None, // Ethernet: the element finds it
                    101 | 228 => Some(0),
                    113 => (d.get(14..16) == Some(&[0x08, 0x00])).then_some(16),
                    l => return Err(format!("link type {l}")),
                };
                let ts = Timestamp::from_parts(
                    p.header.ts.tv_sec as u64,
                    (p.header.ts.tv_usec as u32).saturating_mul(1000),
                );
                out.push((d, ip, ts));
            }
            Err(pcap::Error::NoMorePackets) => break,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(out)
}

/// `action-order` of a case's `suricata.yaml`, as the element's `ORDER`.
fn action_order(dir: &Path) -> Option<String> {
    let y = std::fs::read_to_string(dir.join("suricata.yaml")).ok()?;
    let mut lines = y.lines().skip_while(|l| !l.starts_with("action-order:"));
    lines.next()?;
    let order: Vec<&str> = lines
        .map_while(|l| l.trim().strip_prefix("- "))
        .filter(|a| *a != "reject")
        .collect();
    Some(order.join(" "))
}

enum Outcome {
    Pass(usize),
    Fail(String),
}

fn build(dir: &Path, config: &str) -> Result<Box<dyn Element>, String> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "sv/ids",
        ninputs: 1,
        noutputs: 1,
        names: &names,
        base_dir: dir,
    };
    elements::build("SnortIDS", config, &bcx).map_err(|e| e.message)
}

/// Whether Suricata refuses the case's rules: it exits with an error, or the checks look
/// for rule errors in the engine log.
fn expects_refusal(yaml: &str) -> bool {
    yaml.lines().any(|l| l.trim() == "exit-code: 1")
        || filters(yaml).iter().any(|f| {
            f.keys
                .iter()
                .any(|(k, v)| k == "event_type" && v == "engine")
                && f.keys.iter().any(|(k, v)| {
                    (k == "engine.module" && v.starts_with("detect"))
                        || (k == "engine.message"
                            && (v.contains("nvalid") || v.contains("ncomplete")))
                })
        })
}

fn run_case(root: &Path, case: &str, pcap: &str) -> Outcome {
    let dir = root.join(case);
    let rules = dir.join("test.rules");
    let yaml = std::fs::read_to_string(dir.join("test.yaml")).unwrap_or_default();
    let mut config = format!(
        "RULES {}, VAR HOME_NET [192.168.0.0/16,10.0.0.0/8,172.16.0.0/12], VAR EXTERNAL_NET !$HOME_NET",
        rules.display()
    );
    if let Some(o) = action_order(&dir) {
        config.push_str(&format!(", ORDER \"{o}\""));
    }
    if expects_refusal(&yaml) {
        // Rules Suricata refuses: the element must refuse them too.
        return match build(&dir, &config) {
            Err(e) => Outcome::Pass(usize::from(!e.is_empty())),
            Ok(_) => Outcome::Fail("rules accepted, Suricata refuses them".into()),
        };
    }
    let mut e = match build(&dir, &config) {
        Ok(e) => e,
        Err(m) => return Outcome::Fail(format!("refused: {m}")),
    };
    let frames = match read_pcap(&root.join(pcap)) {
        Ok(f) => f,
        Err(m) => return Outcome::Fail(m),
    };
    let mut cx = Context::default();
    for (i, (d, ip, ts)) in frames.into_iter().enumerate() {
        let mut p = Packet::from_bytes(&d);
        p.meta.timestamp = ts;
        p.meta.input_index = i as u64 + 1;
        if let Some(o) = ip {
            p.set_network_header(o);
        }
        cx.now = ts;
        match e.push(0, p, &mut cx) {
            Verdict::Out(0, _) | Verdict::Drop(..) => {}
            v => return Outcome::Fail(format!("unexpected verdict {v:?}")),
        }
    }
    let ids = e.as_any().downcast_ref::<SnortIDS>().expect("a SnortIDS");
    let alerts: Vec<Alert> = ids.alerts().iter().map(|l| parse_alert(l)).collect();
    let mut compared = 0;
    let mut wrong = Vec::new();
    for f in filters(&yaml) {
        let is_alert = f
            .keys
            .iter()
            .any(|(k, v)| k == "event_type" && v == "alert");
        if !is_alert {
            continue;
        }
        let mut n = 0u64;
        for a in &alerts {
            match passes(a, &f.keys) {
                Ok(true) => n += 1,
                Ok(false) => {}
                Err(m) => return Outcome::Fail(format!("cannot compare: {m}")),
            }
        }
        compared += 1;
        if n != f.count {
            wrong.push(format!("{:?}: expected {}, got {n}", f.keys, f.count));
        }
    }
    if compared == 0 {
        return Outcome::Fail("no alert filter to compare".into());
    }
    if wrong.is_empty() {
        Outcome::Pass(compared)
    } else {
        Outcome::Fail(format!("{} (alerts: {:?})", wrong.join("; "), ids.alerts()))
    }
}

#[test]
fn suricata_verify_cases_agree() {
    let Some(root) = data_dir() else { return };
    let index = std::fs::read_to_string(root.join("INDEX.tsv")).expect("INDEX.tsv");
    let cases: Vec<(String, String)> = index
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut c = l.split('\t');
            let dir = c.next().unwrap_or("").to_string();
            let pcap = c.next().unwrap_or("").to_string();
            (dir, pcap)
        })
        .collect();
    for (name, _) in LEFT_OUT {
        assert!(
            cases.iter().any(|(d, _)| d == name),
            "{name} is left out but not in INDEX.tsv"
        );
    }
    let (mut used, mut passed, mut filters_compared) = (0, 0, 0);
    let mut failures = Vec::new();
    for (dir, pcap) in &cases {
        let left_out = LEFT_OUT.iter().find(|(n, _)| n == dir);
        let outcome = run_case(&root, dir, pcap);
        match (left_out, outcome) {
            (None, Outcome::Pass(n)) => {
                println!("pass: {dir} ({n} checks)");
                used += 1;
                passed += 1;
                filters_compared += n;
            }
            (None, Outcome::Fail(m)) => {
                used += 1;
                failures.push(format!("{dir}: {m}"));
            }
            (Some((_, why)), Outcome::Pass(_)) => {
                println!("left out but passes: {dir} ({why})");
            }
            (Some(_), Outcome::Fail(_)) => {}
        }
    }
    println!(
        "suricata-verify: {} cases, {used} used, {passed} pass ({filters_compared} checks), {} left out",
        cases.len(),
        LEFT_OUT.len()
    );
    assert!(
        failures.is_empty(),
        "failing cases:\n{}",
        failures.join("\n")
    );
}
