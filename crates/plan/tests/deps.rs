//! The dependency rules (Table III, field by field) as a table: two-NF chains, whether the
//! planner puts them side by side, and the rule that decided.

mod common;

use plan::deps::parallel;

/// (earlier NF's body, later NF's body, parallel?, a word of the deciding reason).
const RULES: &[(&str, &str, bool, &str)] = &[
    // RAR: two probes read the same and write only annotations nobody reads.
    ("Counter", "Counter", true, "annotations nobody reads"),
    // RAR on IP fields placed by both.
    (
        "MarkIPHeader(14) -> IPFilter(allow src 10.0.0.1, allow all)",
        "MarkIPHeader(14) -> IPFilter(allow src 10.0.0.2, allow all)",
        true,
        "read after read on",
    ),
    // A header check cuts at the IPv4 length: no group at all.
    (
        "MarkIPHeader(14) -> IPFilter(allow ip ttl > 3, allow all)",
        "CheckIPHeader(14) -> DecIPTTL",
        false, // the later cuts at the IPv4 length: no group at all
        "length",
    ),
    (
        "MarkIPHeader(14) -> IPFilter(allow ip ttl > 3, allow all)",
        "MarkIPHeader(14) -> IPFilter(allow ip ttl > 0, allow all) -> EtherRewrite(1:1:1:1:1:1, 2:2:2:2:2:2)",
        true,
        "read after read on ip_ihl, ip_ttl",
    ),
    (
        "MarkIPHeader(14) -> IPFilter(allow ip ttl > 3, allow all)",
        "MarkIPHeader(14) -> DecIPTTL",
        true,
        "write after read on ip_ttl",
    ),
    // RAW on the TTL.
    (
        "MarkIPHeader(14) -> DecIPTTL",
        "MarkIPHeader(14) -> IPFilter(allow ip ttl > 3, allow all)",
        false,
        "read after write on ip_ttl",
    ),
    // RAW: the later reads the addresses the earlier wrote.
    (
        "EtherRewrite(1:1:1:1:1:1, 2:2:2:2:2:2)",
        "FromDevice(eth0) -> c :: Classifier(0/010101010101, -) -> ToDevice(eth1); c[1] -> Discard;",
        false,
        "read after write",
    ),
    // Disjoint: MACs written, IPv4 source read at byte 14.
    (
        "EtherRewrite(1:1:1:1:1:1, 2:2:2:2:2:2)",
        "MarkIPHeader(14) -> IPFilter(allow src 10.0.0.1, allow all)",
        true,
        "keeps no state",
    ),
    // The IPv4 header at an unknown place may overlap the MACs.
    (
        "EtherRewrite(1:1:1:1:1:1, 2:2:2:2:2:2)",
        "IPFilter(allow src 10.0.0.1, allow all)",
        false,
        "read after write",
    ),
    // WAW on the MACs.
    (
        "EtherRewrite(1:1:1:1:1:1, 2:2:2:2:2:2)",
        "EtherRewrite(3:3:3:3:3:3, 4:4:4:4:4:4)",
        false,
        "write after write",
    ),
    // Annotations: a paint the later reads.
    ("Paint(3)", "CheckPaint(3)", false, "read after write on anno:paint"),
    // Drops: a dropping filter before a stateless one is fine, before a counter not.
    (
        "MarkIPHeader(14) -> IPFilter(allow udp, deny all)",
        "MarkIPHeader(14) -> IPFilter(allow src 10.0.0.1, allow all)",
        true,
        "keeps no state",
    ),
    (
        "MarkIPHeader(14) -> IPFilter(allow udp, deny all)",
        "Counter",
        false,
        "keeps state",
    ),
    // A counter before a dropping filter: the drop discards, the count was right anyway.
    (
        "Counter",
        "MarkIPHeader(14) -> IPFilter(allow udp, deny all)",
        true,
        "parallel group",
    ),
    // Length: Strip in the earlier.
    ("Strip(14)", "Counter", false, "length"),
    // Copies.
    (
        "Counter",
        "FromDevice(eth0) -> t :: Tee -> ToDevice(eth1); t[1] -> Discard;",
        false,
        "copy",
    ),
    // Opaque without a declaration: taken to do anything.
    (
        "Counter",
        "IPEncap(4, 1.0.0.1, 2.0.0.2)",
        false,
        "length",
    ),
    // Opaque with a declaration: a round robin reads nothing, writes nothing.
    (
        "Counter",
        "FromDevice(eth0) -> r :: RoundRobinSwitch -> ToDevice(eth1); r[1] -> ToDevice(eth1);",
        true,
        "parallel group",
    ),
    // Table III with the opaque NFs' declarations. A monitor (probe) then an IDS: read after
    // read, the IDS's drop is allowed after a reader.
    (
        "MarkIPHeader(14) -> Monitor",
        "MarkIPHeader(14) -> SnortIDS(RULES /dev/null)",
        true,
        "read after read on",
    ),
    // An IDS then a monitor: the monitor counts what the IDS may drop (Table III's N/A: the
    // later NF's state would see a packet the sequence never gives it).
    (
        "MarkIPHeader(14) -> SnortIDS(RULES /dev/null)",
        "MarkIPHeader(14) -> Monitor",
        false,
        "keeps state",
    ),
    // Two monitors: read after read, neither drops.
    (
        "MarkIPHeader(14) -> Monitor",
        "MarkIPHeader(14) -> Monitor",
        true,
        "read after read on",
    ),
    // A NAT writes the addresses a later monitor reads (read after write) ...
    (
        "MarkIPHeader(14) -> IPRewriter(pattern 203.0.113.1 50000-50010 - - 0 0, drop)",
        "MarkIPHeader(14) -> Monitor",
        false,
        "read after write on",
    ),
    // ... while a monitor before a NAT only reads what the NAT writes after it.
    (
        "MarkIPHeader(14) -> Monitor",
        "MarkIPHeader(14) -> IPRewriter(pattern 203.0.113.1 50000-50010 - - 0 0, drop)",
        true,
        "write after read on",
    ),
    // A load balancer rewrites the destination an IDS reads.
    (
        "MarkIPHeader(14) -> Maglev(BACKEND a 10.0.1.1 02:00:00:00:01:01)",
        "MarkIPHeader(14) -> SnortIDS(RULES /dev/null)",
        false,
        "read after write on",
    ),
    // Two NATs write the same fields.
    (
        "MarkIPHeader(14) -> IPRewriter(pattern 10.0.0.1 1000-2000 - - 0 0, drop)",
        "MarkIPHeader(14) -> IPRewriter(pattern 10.0.0.2 3000-4000 - - 0 0, drop)",
        false,
        "write after write on",
    ),
];

#[test]
fn table_iii_field_by_field() {
    let mut failures = Vec::new();
    for (i, (a, b, want, why)) in RULES.iter().enumerate() {
        let ex = common::linear(&format!("rule{i}"), &[a, b]);
        let (par, report) = parallel(&ex);
        let got = par.groups.len() == 1 && par.groups[0].nfs == [0, 1];
        assert!(got || par.groups.is_empty(), "rule {i}: {par:?}");
        let text = report.text();
        if got != *want || !text.contains(why) {
            failures.push(format!(
                "rule {i} ({a} | {b}): parallel {got}, want {want} for `{why}`:\n{text}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn groups_grow_along_the_chain_and_restart_after_a_conflict() {
    // n0, n1 read; n2 writes the MACs, n3 writes them again (a new group), n4 reads.
    let ex = common::linear(
        "grow",
        &[
            "Counter",
            "MarkIPHeader(14) -> IPFilter(allow src 10.0.0.1, allow all)",
            "EtherRewrite(1:1:1:1:1:1, 2:2:2:2:2:2)",
            "EtherRewrite(3:3:3:3:3:3, 4:4:4:4:4:4)",
            "MarkIPHeader(14) -> IPFilter(allow all)",
        ],
    );
    let (par, report) = parallel(&ex);
    let groups: Vec<Vec<usize>> = par.groups.iter().map(|g| g.nfs.clone()).collect();
    assert_eq!(groups, vec![vec![0, 1, 2], vec![3, 4]], "{}", report.text());
    // Every pair of the first group was checked.
    for (a, b) in [(0, 1), (0, 2), (1, 2), (2, 3)] {
        assert!(
            report.pairs.iter().any(|p| p.earlier == a && p.later == b),
            "pair {a} {b}: {}",
            report.text()
        );
    }
}

#[test]
fn an_nf_with_two_ways_on_ends_a_group() {
    let ex = common::chain_of(
        "fork",
        &[
            "FromDevice(eth0) -> c :: Classifier(12/0800, -) -> ToDevice(eth1); c[1] -> ToDevice(eth2);",
            "FromDevice(eth0) -> Counter -> ToDevice(eth1);",
        ],
    );
    let (par, report) = parallel(&ex);
    assert!(par.groups.is_empty());
    assert!(
        report.text().contains("several interfaces"),
        "{}",
        report.text()
    );
}

#[test]
fn nfs_passing_replies_back_are_grouped_by_their_forward_way() {
    // Both NFs pass replies (arriving on eth1) back out of eth0: what enters by eth0 leaves
    // by eth1 only, so the monitor and the IDS form a group.
    let ex = common::chain_of(
        "replies",
        &[
            "FromDevice(eth0) -> MarkIPHeader(14) -> Monitor -> ToDevice(eth1); FromDevice(eth1) -> ToDevice(eth0);",
            "FromDevice(eth0) -> MarkIPHeader(14) -> SnortIDS(RULES /dev/null) -> ToDevice(eth1); FromDevice(eth1) -> ToDevice(eth0);",
        ],
    );
    let (par, report) = parallel(&ex);
    let groups: Vec<Vec<usize>> = par.groups.iter().map(|g| g.nfs.clone()).collect();
    assert_eq!(groups, vec![vec![0, 1]], "{}", report.text());
    // One whose forward packets may also go back out of eth0 has no single way on.
    let ex = common::chain_of(
        "bounce",
        &[
            "FromDevice(eth0) -> c :: Classifier(12/0800, -) -> ToDevice(eth1); c[1] -> ToDevice(eth0); FromDevice(eth1) -> ToDevice(eth0);",
            "FromDevice(eth0) -> Counter -> ToDevice(eth1); FromDevice(eth1) -> ToDevice(eth0);",
        ],
    );
    let (par, report) = parallel(&ex);
    assert!(
        par.groups.iter().all(|g| g.nfs != [0, 1]),
        "{}",
        report.text()
    );
    assert!(
        report
            .text()
            .contains("n0: no single way on: leaves by several interfaces"),
        "{}",
        report.text()
    );
}

#[test]
fn a_line_passing_replies_back_is_grouped_along_the_line() {
    let fwd = |body: &str| {
        format!("FromDevice(eth0) -> MarkIPHeader(14) -> {body} -> ToDevice(eth1); FromDevice(eth1) -> ToDevice(eth0);")
    };
    let configs = [
        fwd("Monitor"),
        fwd("Monitor"),
        fwd("Counter"),
        fwd("Monitor"),
    ];
    let refs: Vec<&str> = configs.iter().map(String::as_str).collect();
    let ex = common::chain_of("line", &refs);
    let (par, report) = parallel(&ex);
    let groups: Vec<Vec<usize>> = par.groups.iter().map(|g| g.nfs.clone()).collect();
    assert_eq!(groups, vec![vec![0, 1, 2, 3]], "{}", report.text());
    assert!(
        report.text().contains("n1: -> n0 or n2"),
        "{}",
        report.text()
    );
}
