//! `SnortIDS` loads the Snort 2.9 community rules of `../shared/data/ids` directly.
//!
//! Data is read from `../shared/data` next to the workspace; absent, the tests skip with a
//! message, except under `CI=true` where they fail.

mod common;
use elements::ids::SnortIDS;
use elements::{BuildCtx, Context, Element, Names, Verdict};
use packet::Packet;
use std::path::{Path, PathBuf};
use wire::build::Frame;

fn data_dir() -> Option<PathBuf> {
    common::shared_data("ids/snort-community-rules")
}

fn build(dir: &Path, config: &str) -> Result<Box<dyn Element>, String> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/ids",
        ninputs: 1,
        noutputs: 1,
        names: &names,
        base_dir: dir,
    };
    elements::build("SnortIDS", config, &bcx).map_err(|e| e.message)
}

fn stat(e: &dyn Element, name: &str) -> u64 {
    e.stats()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(u64::MAX, |(_, v)| v)
}

/// Rule lines of a rules file (not comments).
fn rule_lines(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .expect("rules")
        .lines()
        .filter(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#')
        })
        .count() as u64
}

/// An Ethernet/IPv4/TCP frame (identification 1, no checksums).
fn tcp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, flags: u8, payload: &[u8]) -> Packet {
    let f = Frame::tcp(src, dst, sport, dport)
        .flags(flags)
        .payload(payload)
        .ident(1)
        .no_sums();
    Packet::from_bytes(&f.build())
}

#[test]
fn simple_content_rules_load_directly() {
    let Some(dir) = data_dir() else { return };
    let file = dir.join("community-simple-content.rules");
    let total = rule_lines(&file);
    let mut e = build(
        &dir,
        "community-simple-content.rules, CONF snort.conf, SKIP_UNSUPPORTED true",
    )
    .expect("loads");
    let (loaded, skipped) = (
        stat(e.as_ref(), "rules_loaded"),
        stat(e.as_ref(), "rules_skipped"),
    );
    println!("community-simple-content.rules: {total} rules, {loaded} loaded, {skipped} skipped");
    assert_eq!(loaded + skipped, total);
    assert_eq!(skipped, 0, "every option of the subset is implemented");
    // Without SKIP_UNSUPPORTED it loads as well (nothing to skip).
    let strict = build(&dir, "community-simple-content.rules, CONF snort.conf").expect("loads");
    assert_eq!(stat(strict.as_ref(), "rules_loaded"), total);
    // Without snort.conf, the port variables are undefined: refused with file and line.
    let err = build(&dir, "community-simple-content.rules")
        .err()
        .unwrap_or_default();
    assert!(
        err.contains("community-simple-content.rules:") && err.contains("undefined variable"),
        "{err}"
    );

    // sid 108 (QAZ Worm Client Login): $EXTERNAL_NET any -> $HOME_NET 7597,
    // flow:to_server,established, content:"qazwsx.hsq".
    let (c, s) = ([10, 0, 0, 1], [192, 168, 0, 2]);
    let mut cx = Context::default();
    let mut push = |e: &mut Box<dyn Element>, p: Packet| match e.push(0, p, &mut cx) {
        Verdict::Out(0, _) => {}
        v => panic!("unexpected verdict {v:?}"),
    };
    push(&mut e, tcp(c, 3000, s, 7597, 0x18, b"xx qazwsx.hsq")); // midstream: no alert
    assert_eq!(stat(e.as_ref(), "alerts"), 0);
    push(&mut e, tcp(c, 3001, s, 7597, 0x02, b""));
    push(&mut e, tcp(s, 7597, c, 3001, 0x12, b""));
    push(&mut e, tcp(c, 3001, s, 7597, 0x10, b""));
    push(&mut e, tcp(c, 3001, s, 7597, 0x18, b"xx qazwsx.hsq"));
    let ids = e.as_any().downcast_ref::<SnortIDS>().expect("SnortIDS");
    assert_eq!(
        ids.alert_counts().get(&(1, 108)),
        Some(&1),
        "{:?}",
        ids.alerts()
    );
    assert!(ids.alerts()[0].contains(
        "[1:108:12] MALWARE-BACKDOOR QAZ Worm Client Login access [**] [Classification: Misc activity] [Priority: 3] {TCP} 10.0.0.1:3001 -> 192.168.0.2:7597 [flow 1] [packet 0]"
    ));
}

#[test]
fn full_community_rules_load_with_skips() {
    let Some(dir) = data_dir() else { return };
    let e = build(
        &dir,
        "community.rules, CONF snort.conf, SKIP_UNSUPPORTED true",
    )
    .expect("loads");
    let (loaded, skipped) = (
        stat(e.as_ref(), "rules_loaded"),
        stat(e.as_ref(), "rules_skipped"),
    );
    println!("community.rules: {loaded} enabled rules loaded, {skipped} skipped");
    assert_eq!(loaded + skipped, rule_lines(&dir.join("community.rules")));
    assert!(loaded > 0 && skipped > 0);
    // Strictly, the first unsupported option is named with its place.
    let err = build(&dir, "community.rules, CONF snort.conf")
        .err()
        .unwrap_or_default();
    assert!(
        err.contains("community.rules:") && err.contains("is not supported"),
        "{err}"
    );
}
