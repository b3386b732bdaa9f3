//! `fusebox synth` and `fusebox explain` on the bundled examples: the classes SNF's Fig. 6
//! draws, written once, and explanations that agree with what the chain does.

mod common;

use common::{fusebox_ok, root};

fn fusebox(args: &[&str]) -> String {
    String::from_utf8_lossy(&fusebox_ok(&root(), args).stdout).into_owned()
}

/// The classes of `fusebox synth` output: (filter line, full text of the class).
fn classes(out: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for line in out.lines() {
        if line.trim_start().starts_with('#') {
            v.push(line.to_string());
        } else if line.starts_with("        ") {
            if let Some(last) = v.last_mut() {
                last.push('\n');
                last.push_str(line);
            }
        }
    }
    v
}

#[test]
fn fig5_synthesizes_into_the_classes_of_fig6() {
    let out = fusebox(&["synth", "examples/fig5/chain.toml", "--entry", "napt.eth0"]);
    let cs = classes(&out);
    // UDP to port 1234: one class through all three NFs, every field written once.
    let udp: Vec<&String> = cs
        .iter()
        .filter(|c| c.contains("ip_proto=17") && c.contains("dport=1234"))
        .filter(|c| c.contains("-> exit lb/"))
        .collect();
    assert!(!udp.is_empty(), "no UDP/1234 class leaves the LB:\n{out}");
    let c = udp[0];
    for w in [
        "ip_ttl-=3",
        "ip_src:=10.0.0.1",
        "sport:=rw#0{1000-9000}",
        "ip_dst:=rw#1{10.0.1.1-10.0.1.2}",
        "eth_src:=02:00:00:00:00:05",
        "eth_dst:=02:00:00:00:00:06",
        "ip_csum once",
        "l4_csum once",
        "decided at run time by napt/rw, then lb/rw",
    ] {
        assert!(c.contains(w), "UDP class lacks `{w}`:\n{c}");
    }
    assert_eq!(
        c.matches("ip_ttl").count(),
        2,
        "TTL read once, written once:\n{c}"
    );
    // TCP: rewritten to 10.1.1.2 by the NAPT, out of its eth2.
    assert!(
        cs.iter().any(|c| c.contains("ip_proto=6")
            && c.contains("ip_dst:=10.1.1.2")
            && c.contains("-> exit napt/ToDevice")),
        "no TCP class to 10.1.1.2:\n{out}"
    );
    // Early discard: drops with their reasons and no writes.
    let drops: Vec<&String> = cs.iter().filter(|c| c.contains("-> drop")).collect();
    assert!(drops
        .iter()
        .any(|c| c.contains("drop bad-ip-checksum at napt/CheckIPHeader")));
    assert!(drops
        .iter()
        .any(|c| c.contains("drop filter-deny at fw/IPFilter")));
    assert!(drops
        .iter()
        .filter(|c| c.contains("at napt/CheckIPHeader"))
        .all(|c| c.contains("writes -")));
}

#[test]
fn ten_routers_are_one_class_per_route_with_ttl_minus_ten() {
    let out = fusebox(&["synth", "examples/routers/chain.toml", "--entry", "r1.eth0"]);
    let cs = classes(&out);
    assert!(
        cs.iter().any(|c| c.contains("ip_ttl-=10")
            && c.contains("-> exit r10/")
            && c.contains("ip_csum once")
            && !c.contains("decided at run time")),
        "no class through all ten routers:\n{out}"
    );
    // A packet whose TTL runs out in router k is dropped there, without writes.
    assert!(cs
        .iter()
        .any(|c| c.contains("ip_ttl=5") && c.contains("drop ttl-expired at r5/")));
    assert!(!out.contains("runs naive"), "{out}");
}

#[test]
fn dot_draws_both_graphs() {
    let out = fusebox(&[
        "synth",
        "examples/fig5/chain.toml",
        "--dot",
        "--entry",
        "napt.eth0",
    ]);
    assert!(out.starts_with("digraph fusebox {"));
    assert!(out.contains("cluster_original") && out.contains("cluster_synth"));
    assert!(out.contains("style=dashed, label=\"link\""));
    assert!(out.trim_end().ends_with('}'));
}

#[test]
fn explain_names_the_class_and_agrees_with_both_runs() {
    let out = fusebox(&[
        "explain",
        "examples/fig5/chain.toml",
        "--packet",
        "udp 192.168.0.5:4000 > 10.0.2.1:1234 ttl 10",
    ]);
    assert!(out.contains("class #"), "{out}");
    assert!(out.contains("napt/rw") && out.contains("lb/rw"), "{out}");
    let naive = out
        .lines()
        .find_map(|l| l.strip_prefix("naive run: "))
        .expect("naive line");
    let synth = out
        .lines()
        .find_map(|l| l.strip_prefix("synth run: "))
        .expect("synth line");
    assert_eq!(naive, synth);
    assert!(
        naive.contains("leaves lb.eth1") && naive.contains("ttl 7"),
        "{naive}"
    );
    assert!(naive.contains("10.0.0.1>10.0.1.1"), "{naive}");
    // A packet the firewall refuses.
    let out = fusebox(&[
        "explain",
        "examples/fig5/chain.toml",
        "--packet",
        "udp 192.168.0.5:4000 > 10.0.2.1:53",
    ]);
    assert!(out.contains("naive run: dropped at fw/"), "{out}");
    assert!(out.contains("synth run: dropped at fw/"), "{out}");
}

#[test]
fn ether_rewrite_is_written_once_and_verifies() {
    // A bridge-like NF that rewrites the MAC addresses after checking the IPv4 header and
    // decrementing the TTL: EtherRewrite is synthesized (its writes are the class's), in
    // both directions.
    let d = common::scratch("synth-etherrewrite");
    std::fs::write(
        d.join("mac.click"),
        "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> DecIPTTL -> Unstrip(14)\n\
         -> EtherRewrite(2:0:0:0:0:aa, 2:0:0:0:0:bb) -> ToDevice(eth1);\n\
         FromDevice(eth1) -> EtherRewrite(2:0:0:0:0:cc, 2:0:0:0:0:dd) -> Strip(14)\n\
         -> CheckIPHeader -> Unstrip(14) -> ToDevice(eth0);\n",
    )
    .unwrap();
    let out = String::from_utf8(fusebox_ok(&d, &["synth", "mac.click"]).stdout).unwrap();
    // Left to the element: only frames too short for a MAC header, and IPv4 lengths whose
    // frame would not fit 16 bits.
    assert!(out.matches("handoff").count() <= 2, "{out}");
    assert!(
        out.contains("eth_dst:=02:00:00:00:00:bb eth_src:=02:00:00:00:00:aa"),
        "{out}"
    );
    assert!(
        out.contains("eth_dst:=02:00:00:00:00:dd eth_src:=02:00:00:00:00:cc"),
        "{out}"
    );
    common::gen_trace(
        &d,
        "t.pcap",
        &[
            "--packets",
            "3000",
            "--ttl",
            "1-4",
            "--bad-ip-checksum",
            "0.05",
            "--truncate",
            "0.05",
            "--seed",
            "4",
        ],
    );
    for entry in ["eth0", "eth1"] {
        let o = fusebox_ok(
            &d,
            &["verify", "mac.click", "--input", &format!("{entry}=t.pcap")],
        );
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(s.starts_with("identical: "), "{entry}: {s}");
    }
}

#[test]
fn tee_copies_are_synthesized_and_verify() {
    // A Tee copies every checked packet to a router-like arm, a UDP-only monitor arm and a
    // discard: synthesis forks the class (no hand-over), counts the copies as created, and
    // both the synthesized run and the stock Click export give the naive packets.
    let d = common::scratch("synth-tee");
    std::fs::write(
        d.join("tee.click"),
        "FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> Counter -> t :: Tee(3);\n\
         t[0] -> DecIPTTL -> EtherEncap(0x0800, 2:0:0:0:0:1, 2:0:0:0:0:2) -> ToDevice(eth1);\n\
         t[1] -> IPFilter(allow udp, deny all)\n\
         -> EtherEncap(0x0800, 2:0:0:0:0:3, 2:0:0:0:0:4) -> ToDevice(eth2);\n\
         t[2] -> Discard;\n\
         FromDevice(eth1) -> Discard;\nFromDevice(eth2) -> Discard;\n",
    )
    .unwrap();
    let out = String::from_utf8(fusebox_ok(&d, &["synth", "tee.click"]).stdout).unwrap();
    assert!(
        out.contains("entry tee.eth0:") && out.contains("0 handed to opaque elements"),
        "{out}"
    );
    common::gen_trace(
        &d,
        "t.pcap",
        &[
            "--packets",
            "4000",
            "--mix",
            "udp=1,tcp=1",
            "--ttl",
            "1-4",
            "--bad-ip-checksum",
            "0.05",
            "--seed",
            "9",
        ],
    );
    let o = fusebox_ok(
        &d,
        &["verify", "tee.click", "--input", "eth0=t.pcap", "--json"],
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["identical"], true, "{j}");
    // 4000 in; every checked packet copied twice.
    let run = fusebox_ok(
        &d,
        &[
            "run",
            "tee.click",
            "--input",
            "eth0=t.pcap",
            "--mode",
            "synth",
            "--json",
            "--out-dir",
            ".",
        ],
    );
    let s: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let created = s["totals"]["created"].as_u64().unwrap();
    let checked = s["nfs"][0]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["class"] == "Counter")
        .unwrap()["input"]
        .as_u64()
        .unwrap();
    assert_eq!(created, 2 * checked, "{s}");
    assert_eq!(s["totals"]["balanced"], true);
    let text =
        String::from_utf8(fusebox_ok(&d, &["synth", "tee.click", "--click"]).stdout).unwrap();
    std::fs::write(d.join("x.click"), &text).unwrap();
    assert!(text.contains(":: Tee(3)"), "{text}");
    let o = fusebox_ok(
        &d,
        &[
            "verify",
            "tee.click",
            "--against",
            "x.click",
            "--input",
            "tee.eth0=t.pcap",
        ],
    );
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("identical: "));
}
