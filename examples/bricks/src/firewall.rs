//! `FirewallNF`: the Click-style firewall of NetBricks' §5 — a linear scan of an access
//! control list, the first matching rule deciding.
//!
//! ```text
//! FirewallNF(RULE, ..., [FILE PATH, ...], [ALLOW_PERCENT P, SEED S, FIRST N])
//! ```
//!
//! The rules are `IPFilter`'s, read by the same code: `allow PATTERN` or `deny PATTERN`
//! (`drop` is `deny`) in Click's `IPClassifier` dialect, inline or one per line in rule files
//! (`FILE examples/isp/acl.rules`; ClassBench filter sets too, with `IPFilter`'s keywords).
//! So the NF can be compared with `IPFilter` on the same list: allowed packets leave by
//! output 0, denied ones and those no rule matches are dropped under `filter-deny`, as
//! `IPFilter` does. Where `IPFilter` compiles long lists into a decision tree, this NF scans
//! them in order, as NetBricks' (and Click's original) firewall does.
//!
//! Drops: `parse-ethernet`, `parse-ipv4` (not an IPv4 frame), `filter-deny`. Rules with an
//! output number (`IPFilter`'s `1 PATTERN`) are refused: a firewall allows or denies.

use elements::ipfilter::{Expr, FilterAction, IPFilter, View};
use elements::model::IpAnchor;
use elements::record::Declared;
use elements::registry::{Doc, ElementClass};
use elements::{Args, BuildCtx, ConfigError, Element};
use operators::nf::{class, Leave};
use operators::{pipe, Ethernet, Ipv4, OperatorNf, Pkt, Raw, Stage};

/// The class name.
pub const NAME: &str = "FirewallNF";

/// The NF's pipeline over the access control list `acl` (`true`: allow): the first rule
/// whose pattern matches decides; no match denies.
pub fn pipeline(acl: Vec<(bool, Expr)>) -> impl Stage<Pkt<Raw>, Out = impl Leave> + 'static {
    pipe::<Raw, ()>()
        .parse::<Ethernet>()
        .parse::<Ipv4>()
        .filter("filter-deny", move |p| {
            let view = View {
                mac: Some(p.data()),
                ..View::from_ip(p.header().into_inner())
            };
            acl.iter()
                .find(|(_, pattern)| pattern.matches(&view))
                .is_some_and(|(allow, _)| *allow)
        })
        .into_stage()
}

/// What the NF declares for the planner: rules may read any byte of the frame (IPv4 header at
/// 14, as its pipeline parses it); nothing written; denied and unparsable packets dropped.
pub fn declared() -> Declared {
    Declared {
        sets_headers: true,
        ip_at: IpAnchor::Data(14),
        ..Declared::reads_anything(true)
    }
}

/// Reads the rules as `IPFilter` does and builds the NF.
fn build(
    name: &'static str,
    args: &Args,
    bcx: &BuildCtx<'_>,
) -> Result<Box<dyn Element>, ConfigError> {
    let err = |m: String| ConfigError::new(format!("{name}: {m}"));
    let filter = IPFilter::configure(args, bcx).map_err(|e| err(e.message))?;
    let mut acl = Vec::with_capacity(filter.rules().len());
    for (i, (action, pattern)) in filter.rules().iter().enumerate() {
        let allow = match action {
            FilterAction::Output(0) => true,
            FilterAction::Drop => false,
            FilterAction::Output(n) => {
                return Err(err(format!(
                    "rule {i}: output {n}: a firewall rule allows or denies (`allow`, `deny`)"
                )))
            }
        };
        acl.push((allow, pattern.clone()));
    }
    Ok(Box::new(
        OperatorNf::<_, ()>::new(name, 1, pipeline(acl))
            .stateless()
            .with_declared(declared()),
    ))
}

/// The registry entry.
pub const CLASS: ElementClass = class(
    NAME,
    build,
    Doc::new(
        "RULE, ..., [FILE PATH, keywords ALLOW_PERCENT, SEED, FIRST]",
        "The Click-style firewall written with operators (examples/bricks): a linear scan of \
         IPFilter's `allow`/`deny` rules (inline or FILE), the first match deciding; no match \
         denies.",
        "allow tcp && dst port 80, deny all",
    )
    .drops(&[&["parse-ethernet", "parse-ipv4", "filter-deny"]]),
);

#[cfg(test)]
mod tests {
    use crate::testutil::{build, build_in, push};
    use elements::Verdict;
    use wire::build::Frame;

    #[test]
    fn first_match_decides_and_no_match_denies() {
        let mut nf = build(
            "FirewallNF",
            "deny src host 10.0.0.9, allow tcp && dst port 80, allow udp",
            1,
        );
        let verdict = |nf: &mut dyn elements::Element, f: Vec<u8>| match push(nf, 0, &f, 0) {
            Verdict::Out(0, _) => "allow",
            Verdict::Drop(_, r) => r,
            v => panic!("{v:?}"),
        };
        let tcp = |src, dport| Frame::tcp(src, [10, 0, 1, 1], 999, dport).build();
        assert_eq!(verdict(&mut *nf, tcp([10, 0, 0, 1], 80)), "allow");
        assert_eq!(verdict(&mut *nf, tcp([10, 0, 0, 9], 80)), "filter-deny");
        assert_eq!(verdict(&mut *nf, tcp([10, 0, 0, 1], 81)), "filter-deny");
        let udp = Frame::udp([10, 0, 0, 9], [10, 0, 1, 1], 1, 2).build();
        assert_eq!(verdict(&mut *nf, udp), "filter-deny");
        let udp = Frame::udp([10, 0, 0, 8], [10, 0, 1, 1], 1, 2).build();
        assert_eq!(verdict(&mut *nf, udp), "allow");
        assert_eq!(verdict(&mut *nf, vec![0; 12]), "parse-ethernet");
    }

    #[test]
    fn reads_rule_files_and_refuses_outputs() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../isp");
        assert!(build_in("FirewallNF", "FILE acl.rules", 1, &dir).is_ok());
        let e = build_in("FirewallNF", "1 tcp, deny all", 1, &dir)
            .err()
            .unwrap();
        assert!(e.message.starts_with("FirewallNF: rule 0: output 1"), "{e}");
        let e = build_in("FirewallNF", "FILE nowhere.rules", 1, &dir)
            .err()
            .unwrap();
        assert!(e.message.starts_with("FirewallNF: FILE"), "{e}");
    }
}
