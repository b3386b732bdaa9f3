//! Malformed configurations: exact positions and messages.

mod common;
use common::*;

/// (input, expected `file:line:col: message`).
const CASES: &[(&str, &str)] = &[
    // Unterminated constructs.
    ("a :: A(1, 2\nb :: B", "t.click:1:7: unclosed `(`: expected `)` before end of file"),
    ("a :: A(\"abc)\nb :: B", "t.click:1:8: unterminated string: expected `\"` before end of file"),
    ("a :: A('abc)", "t.click:1:8: unterminated string: expected `'` before end of file"),
    ("a :: A;\n  /* oops", "t.click:2:3: unterminated comment: expected `*/` before end of file"),
    ("a :: A(1 /* ) */", "t.click:1:7: unclosed `(`: expected `)` before end of file"),
    ("elementclass E {\n input -> output", "t.click:1:16: unclosed `{`: expected `}` before end of file"),
    ("x :: { input -> output", "t.click:1:6: unclosed `{`: expected `}` before end of file"),
    // Declarations.
    ("a :: ;", "t.click:1:6: expected element class after `::`, found `;`"),
    ("a ::", "t.click:1:5: expected element class after `::`, found end of file"),
    ("a :: A;\nb :: B;\n  a :: C", "t.click:3:3: element `a` already declared at t.click:1:1"),
    ("a, b ;", "t.click:1:6: expected `::` after element names, found `;`"),
    ("a, b :: A -> c", "t.click:1:1: a declaration of several elements cannot be part of a connection"),
    ("Idle -> c\nc :: C", "t.click:2:1: element `c` declared after use at t.click:1:9: elements must be declared before they are connected"),
    ("input :: A", "t.click:1:1: `input` is reserved for compound element ports and cannot be declared"),
    ("a :: A; a(1) -> b", "t.click:1:10: expected `->` or `;`, found `(`: `a` is an element (declared at t.click:1:1), not an element class"),
    // Connections and ports.
    ("a :: A(1) ) -> b", "t.click:1:11: expected `->` or `;`, found `)`"),
    ("a :: A; a => b", "t.click:1:11: expected `->` or `;`, found `=`"),
    ("a :: A; a[x] -> Discard", "t.click:1:11: expected port number, found identifier `x`"),
    ("a :: A; a[1 -> Discard", "t.click:1:13: expected `]` after port number, found `->`"),
    ("a :: A; a[99999999999999999999999] -> b", "t.click:1:11: port number `99999999999999999999999` is too large"),
    ("a :: A; a[1];", "t.click:1:13: expected `->` after output port `[1]`, found `;`"),
    ("a :: A; a -> [0];", "t.click:1:17: expected element after input port `[0]`, found `;`"),
    ("a :: A; a -> ;", "t.click:1:14: expected element after `->`, found `;`"),
    ("[0]a :: A", "t.click:1:1: expected element and `->` before input port `[0]`"),
    ("a :: A -> 5", "t.click:1:11: expected element after `->`, found number `5`"),
    (")", "t.click:1:1: expected element declaration or connection, found `)`"),
    ("a :: A }", "t.click:1:8: expected `->` or `;`, found `}`"),
    // Variables.
    ("a :: A(1,\n  $NOPE)", "t.click:2:3: undefined variable `$NOPE`"),
    ("elementclass E { input -> X($q) -> output }\nIdle -> E -> Discard", "t.click:1:29: undefined variable `$q`"),
    ("define($A 1)\ndefine($A 2)", "t.click:2:1: variable `$A` already defined at t.click:1:1"),
    ("define(A 1)", "t.click:1:1: expected `$NAME value` in `define`, found `A 1`"),
    ("elementclass E { define($X 1) input -> output }", "t.click:1:18: `define` is only allowed at top level"),
    // input / output.
    ("input -> Discard", "t.click:1:1: `input` used outside an elementclass"),
    ("Idle -> [1]output", "t.click:1:12: `output` used outside an elementclass"),
    ("elementclass E { output -> input }", "t.click:1:18: `output` can only be used as a connection destination, as in `... -> [N]output`"),
    ("elementclass E { Idle -> input }", "t.click:1:26: `input` can only be used as a connection source, as in `input[N] -> ...`"),
    // Element classes.
    ("elementclass E { input -> output }\nelementclass E { input -> output }", "t.click:2:14: elementclass `E` already defined at t.click:1:14"),
    ("Idle -> E\nelementclass E { input -> output }", "t.click:2:14: elementclass `E` defined after use at t.click:1:9: element classes must be defined before they are used"),
    ("elementclass ;", "t.click:1:14: expected element class name after `elementclass`, found `;`"),
    ("elementclass E ;", "t.click:1:16: expected `{` or element class name after `elementclass E`, found `;`"),
    ("elementclass E { $a $b | }", "t.click:1:21: expected `,` or `|` after parameter, found variable `$b`"),
    ("elementclass E { $a, $a | }", "t.click:1:22: parameter `$a` declared twice"),
    ("elementclass E { input -> output }\nIdle -> [1]e :: E", "t.click:2:9: `e` has no input port 1: elementclass `E` uses input port 0"),
    ("elementclass E { input -> output }\ne :: E; e[2] -> Discard", "t.click:2:10: `e` has no output port 2: elementclass `E` uses output port 0"),
    ("elementclass E { input -> Discard }\nIdle -> E -> Discard", "t.click:2:9: `E@2` has no output port 0: elementclass `E` uses no output ports"),
    ("elementclass E { $a | input -> output }\nIdle -> E(1, 2) -> Discard", "t.click:2:9: elementclass `E` expects 1 argument ($a), found 2"),
    ("elementclass R { input -> R -> output }\nIdle -> R -> Discard", "t.click:1:27: recursive elementclass `R`: it instantiates itself"),
    ("elementclass E { input -> x :: X -> output }\ne/x :: Y; Idle -> e :: E -> Discard", "t.click:1:27: element `e/x` conflicts with element `e/x` declared at t.click:2:1"),
];

#[test]
fn error_positions_and_messages() {
    let mut failures = Vec::new();
    for (src, want) in CASES {
        let got = err(src);
        if got != *want {
            failures.push(format!(
                "input:    {src:?}\nexpected: {want}\ngot:      {got}\n"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn error_fields_and_std_error() {
    let e = click::parse_str("a :: A;\n  b ->", "my.click", &[]).unwrap_err();
    assert_eq!(&*e.span.file, "my.click");
    assert_eq!((e.span.line, e.span.col), (2, 7));
    assert_eq!(e.message, "expected element after `->`, found end of file");
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert_eq!(
        boxed.to_string(),
        "my.click:2:7: expected element after `->`, found end of file"
    );
}

#[test]
fn nesting_depth_is_limited() {
    // 70 classes, each instantiating the previous one.
    let mut src = String::from("elementclass C0 { input -> Leaf -> output }\n");
    for i in 1..70 {
        src.push_str(&format!(
            "elementclass C{i} {{ input -> C{} -> output }}\n",
            i - 1
        ));
    }
    src.push_str("Idle -> C69 -> Discard\n");
    assert_eq!(
        err(&src),
        "t.click:7:28: compound elements nested more than 64 levels deep"
    );
    // 64 levels are fine.
    let ok = src.replace("Idle -> C69", "Idle -> C63");
    let c = parse(&ok);
    assert_eq!(c.elements.len(), 3);
    assert_eq!(c.elements[1].name.matches('/').count(), 64);
}

#[test]
fn source_nesting_depth_is_limited() {
    let src = "{".repeat(100);
    assert_eq!(
        err(&src),
        "t.click:1:65: compound elements nested too deeply (more than 64 levels)"
    );
}

#[test]
fn exponential_expansion_is_rejected() {
    let mut src = String::from("elementclass C0 { input -> Leaf -> output }\n");
    for i in 1..40 {
        let p = i - 1;
        src.push_str(&format!(
            "elementclass C{i} {{ input -> C{p} -> C{p} -> output }}\n"
        ));
    }
    src.push_str("Idle -> C39 -> Discard\n");
    let e = err(&src);
    assert!(e.contains("configuration too large"), "{e}");
}
