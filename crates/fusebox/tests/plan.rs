//! `fusebox plan`: profiles beside the paper's rows, the dependency table and the groups, as
//! text and as JSON.

mod common;

use common::{fusebox_ok, root};

fn fusebox(args: &[&str]) -> String {
    String::from_utf8_lossy(&fusebox_ok(&root(), args).stdout).into_owned()
}

#[test]
fn plan_prints_profiles_dependencies_and_groups() {
    let out = fusebox(&["plan", "examples/plan/chain.toml"]);
    // One table line per NF, with the paper's rows beside it.
    let line = |nf: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{nf} ")))
            .unwrap_or_else(|| panic!("no line for {nf}:\n{out}"))
            .to_string()
    };
    assert!(line("probe").contains("Probe/Firewall/LB: Y/N  N/N  N  N (differs in 0)"));
    assert!(line("mac").contains("NAT: Y/N  Y/N  N  N"));
    assert!(
        out.contains("  writes: eth_dst eth_src anno:pkt_type anno:mac_header"),
        "{out}"
    );
    assert!(out.contains("fw -> ttl: sequential"), "{out}");
    assert!(out.contains("parallel group: probe | fw | mac"), "{out}");
}

#[test]
fn plan_json_has_the_groups_as_nf_indices() {
    let out = fusebox(&["plan", "examples/plan/chain.toml", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"], serde_json::json!([[0, 1, 2]]));
    assert_eq!(v["profiles"].as_array().map(Vec::len), Some(4));
    assert_eq!(v["profiles"][2]["writes"][0], "eth_dst");
    let pairs = v["dependencies"]["pairs"].as_array().unwrap();
    assert!(pairs
        .iter()
        .any(|p| p["earlier_name"] == "fw" && p["later_name"] == "ttl" && p["allowed"] == false));
}

#[test]
fn plan_on_the_fig5_chain_finds_no_group_and_says_why() {
    let out = fusebox(&["plan", "examples/fig5/chain.toml"]);
    assert!(out.contains("parallel groups: none"), "{out}");
    assert!(
        out.contains("napt: no single way on: leaves by several interfaces"),
        "{out}"
    );
}
