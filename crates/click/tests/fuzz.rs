//! The parser never panics: arbitrary strings and mutated valid configs
//! must produce `Ok` or `Err`.

use proptest::prelude::*;

const SEEDS: &[&str] = &[
    r#"// router
elementclass Router { $mac, $gw |
  input -> Strip(14) -> CheckIPHeader -> rt :: RadixIPLookup(10.0.0.0/8 0, 0.0.0.0/0 $gw 1);
  rt[0] -> DecIPTTL -> EtherEncap(0x0800, $mac, 00:00:00:00:00:02) -> [0]output;
  rt[1] -> DecIPTTL -> EtherEncap(0x0800, $mac, 00:00:00:00:00:03) -> [1]output;
}
define($MAC 00:00:00:00:00:01)
FromDevice(eth0) -> r :: Router($MAC, 10.0.0.254);
r[0] -> ToDevice(eth1); r[1] -> Queue -> ToDevice(eth2)
"#,
    r#"AddressInfo(ext 10.0.0.1, int 192.168.0.0/24);
rw :: IPRewriter(pattern ext 1000-9000 - - 0 1, drop);
FromDevice(eth0) -> Strip(14) -> CheckIPHeader -> [0]rw;
rw[0] -> EtherEncap(0x0800, 1:1:1:1:1:1, 2:2:2:2:2:2) -> ToDevice(eth1);
rw[1] -> Discard;
"#,
    r#"require(package x) elementclass W { input -> output } elementclass S W;
x :: { input[1] -> [0]output; input -> [1]output } a, b :: Q("a)\"", ')'/* c */)
# line
elementclass P { $p, K $k | input -> c :: C($p $k) -> output }
a -> x -> P(1, K 2) -> { input -> output } -> W -> S -> b; x[1] -> b"#,
];

/// Tokens that are likely to produce interesting syntax when spliced in.
const TOKENS: &[&str] = &[
    "->",
    "::",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    ",",
    ";",
    "|",
    "$a",
    "$",
    "\"",
    "'",
    "/*",
    "*/",
    "//",
    "\n#",
    "input",
    "output",
    "elementclass",
    "define(",
    "require(",
    "0",
    "99",
    "x",
    "\n",
    " ",
    "${",
    "@",
    "/",
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, usize),
    Duplicate(usize, usize),
    Swap(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..8).prop_map(|(a, b)| Mutation::Delete(a, b)),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(a, b)| Mutation::Insert(a, b)),
        (any::<usize>(), 1usize..40).prop_map(|(a, b)| Mutation::Duplicate(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
    ]
}

fn apply(src: &str, muts: &[Mutation]) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for m in muts {
        let n = chars.len().max(1);
        match *m {
            Mutation::Delete(at, len) => {
                let at = at % n;
                let end = (at + len).min(chars.len());
                if at < end {
                    chars.drain(at..end);
                }
            }
            Mutation::Insert(at, tok) => {
                let at = at % (chars.len() + 1);
                chars.splice(at..at, TOKENS[tok].chars());
            }
            Mutation::Duplicate(at, len) => {
                let at = at % n;
                let end = (at + len).min(chars.len());
                let piece: Vec<char> = chars.get(at..end).unwrap_or(&[]).to_vec();
                chars.splice(at..at, piece);
            }
            Mutation::Swap(a, b) => {
                if !chars.is_empty() {
                    let (a, b) = (a % chars.len(), b % chars.len());
                    chars.swap(a, b);
                }
            }
        }
    }
    chars.into_iter().collect()
}

fn check(src: &str) {
    // Either result is fine; a panic fails the test. Errors must carry a
    // sensible position.
    if let Err(e) = click::parse_str(src, "fuzz.click", &[("gw".into(), "1.2.3.4".into())]) {
        assert!(e.span.line >= 1 && e.span.col >= 1, "bad span in {e}");
        assert!(!e.message.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings(s in any::<String>()) {
        check(&s);
    }

    #[test]
    fn syntax_soup(parts in proptest::collection::vec(0..TOKENS.len(), 0..60)) {
        let s: String = parts.iter().map(|&i| TOKENS[i]).collect::<Vec<_>>().join(" ");
        check(&s);
    }

    #[test]
    fn mutated_valid_configs(seed in 0..SEEDS.len(), muts in proptest::collection::vec(mutation(), 1..6)) {
        check(&apply(SEEDS[seed], &muts));
    }
}

#[test]
fn seeds_are_valid() {
    for s in SEEDS {
        if let Err(e) = click::parse_str(s, "seed.click", &[]) {
            panic!("seed failed: {e}");
        }
    }
}
