//! Every supported syntax form, with the resulting flat graph.

mod common;
use common::*;

#[test]
fn declaration_forms() {
    let c = parse("a :: Counter(1); b :: Discard\nc, d :: Queue( 10 ) ; e :: Idle()");
    assert_eq!(
        elems(&c),
        vec![
            ("a", "Counter", "1"),
            ("b", "Discard", ""),
            ("c", "Queue", "10"),
            ("d", "Queue", "10"),
            ("e", "Idle", ""),
        ]
    );
    assert!(c.connections.is_empty());
    assert_eq!(c.find("d"), Some(3));
    assert_eq!(c.find("zz"), None);
}

#[test]
fn spans_of_elements() {
    let c = parse("\n  a :: A;\n b, c :: B");
    let spans: Vec<String> = c.elements.iter().map(|e| e.span.to_string()).collect();
    assert_eq!(spans, vec!["t.click:2:3", "t.click:3:2", "t.click:3:5"]);
}

#[test]
fn simple_and_chained_connections() {
    let c = parse("a :: A; b :: B; c :: C; d :: D; a -> b -> c -> d;");
    assert_eq!(
        conns(&c),
        vec![("a", 0, "b", 0), ("b", 0, "c", 0), ("c", 0, "d", 0)]
    );
    assert_eq!(c.connections[0].span.to_string(), "t.click:1:35");
}

#[test]
fn ports_with_and_without_spaces() {
    let c = parse("a :: A; b :: B; a[1] -> [0]b; a [2] -> [3] b; a[ 4 ]->[ 5 ]b");
    assert_eq!(
        conns(&c),
        vec![("a", 1, "b", 0), ("a", 2, "b", 3), ("a", 4, "b", 5)]
    );
}

#[test]
fn anonymous_elements_are_numbered_like_click() {
    let c = parse("FromDevice(eth0) -> Counter -> Discard;");
    assert_eq!(
        elems(&c),
        vec![
            ("FromDevice@1", "FromDevice", "eth0"),
            ("Counter@2", "Counter", ""),
            ("Discard@3", "Discard", "")
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("FromDevice@1", 0, "Counter@2", 0),
            ("Counter@2", 0, "Discard@3", 0)
        ]
    );
    // The counter includes named elements.
    let c = parse("x :: Idle; y :: Idle; x -> Counter -> y");
    assert_eq!(c.elements[2].name, "Counter@3");
}

#[test]
fn declarations_inside_connections() {
    let c = parse("FromDevice(eth0) -> c :: Counter -> Discard;\nc2 :: Counter -> c");
    assert_eq!(
        elems(&c),
        vec![
            ("FromDevice@1", "FromDevice", "eth0"),
            ("c", "Counter", ""),
            ("Discard@3", "Discard", ""),
            ("c2", "Counter", ""),
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("FromDevice@1", 0, "c", 0),
            ("c", 0, "Discard@3", 0),
            ("c2", 0, "c", 0)
        ]
    );
}

#[test]
fn bare_unknown_identifier_is_anonymous_element() {
    let c = parse("a :: Idle; a -> Discard; a[1] -> Discard");
    assert_eq!(
        elems(&c),
        vec![
            ("a", "Idle", ""),
            ("Discard@2", "Discard", ""),
            ("Discard@3", "Discard", "")
        ]
    );
    assert_eq!(
        conns(&c),
        vec![("a", 0, "Discard@2", 0), ("a", 1, "Discard@3", 0)]
    );
}

#[test]
fn newline_separated_statements_and_optional_semicolons() {
    let c = parse("a :: A\nb :: B\na -> b\nb -> a\n\n;;\n");
    assert_eq!(conns(&c), vec![("a", 0, "b", 0), ("b", 0, "a", 0)]);
    // A chain may continue on the next line.
    let c = parse("a :: A\n  -> b :: B\n  -> Discard");
    assert_eq!(conns(&c), vec![("a", 0, "b", 0), ("b", 0, "Discard@3", 0)]);
}

#[test]
fn comments_everywhere() {
    let src = "// header\n/* block\n comment */ a /* x */ :: /* y */ Counter( /* c */ 1 // trailing\n , 2 ) // end\n# 12 \"file.click\"\n   #pragma\na -> /* mid */ Discard";
    let c = parse(src);
    assert_eq!(
        elems(&c),
        vec![("a", "Counter", "1 \n , 2"), ("Discard@2", "Discard", "")]
    );
    assert_eq!(conns(&c), vec![("a", 0, "Discard@2", 0)]);
}

#[test]
fn configuration_strings_are_raw() {
    let c = parse(
        "p :: Print(\"a ) // not a comment\", 'it''s (', X f(1, (2)), \"esc \\\" )\")\nq :: Q(\n  multi\n  line\n)",
    );
    assert_eq!(
        c.elements[0].config,
        "\"a ) // not a comment\", 'it''s (', X f(1, (2)), \"esc \\\" )\""
    );
    assert_eq!(c.elements[1].config, "multi\n  line");
}

#[test]
fn duplicate_connections_are_kept_once() {
    let c = parse("a :: A; b :: B; a -> b; a -> b; a[0] -> [0]b; a[1] -> b");
    assert_eq!(conns(&c), vec![("a", 0, "b", 0), ("a", 1, "b", 0)]);
}

#[test]
fn require_is_recorded() {
    let c = parse("require(package foo, library bar.click);\nrequire(fastclassifier) a :: A");
    assert_eq!(
        c.requires,
        vec!["package foo", "library bar.click", "fastclassifier"]
    );
    assert_eq!(c.elements.len(), 1);
}

#[test]
fn defines_and_command_line_overrides() {
    let src = "define($A 1, $B two words, $EMPTY)\nx :: X($A, $B, [$EMPTY], ${A}0, '$A', \"$A\")";
    let c = parse(src);
    assert_eq!(c.elements[0].config, "1, two words, [], 10, '$A', \"1\"");
    let c = parse_with(src, &[("A", "9"), ("NEW", "n")]);
    assert_eq!(c.elements[0].config, "9, two words, [], 90, '$A', \"9\"");
    // Command-line defines work without a define in the file.
    let c = parse_with("x :: X($NEW)", &[("NEW", "n")]);
    assert_eq!(c.elements[0].config, "n");
    // Defines apply to the whole file, wherever they appear.
    let c = parse("x :: X($LATE)\ndefine($LATE ok)");
    assert_eq!(c.elements[0].config, "ok");
}

#[test]
fn dollar_without_name_is_literal() {
    let c = parse("x :: X($ 5, a$, $1)");
    assert_eq!(c.elements[0].config, "$ 5, a$, $1");
}

#[test]
fn elementclass_basic_expansion() {
    let c = parse(
        "elementclass Two { input -> a :: A -> output; input[1] -> b :: B -> [1]output }\n\
         src :: S; t :: Two; d0 :: D; d1 :: D;\n\
         src -> t -> d0; src[1] -> [1]t[1] -> d1;",
    );
    assert_eq!(
        elems(&c),
        vec![
            ("src", "S", ""),
            ("t/a", "A", ""),
            ("t/b", "B", ""),
            ("d0", "D", ""),
            ("d1", "D", "")
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("src", 0, "t/a", 0),
            ("src", 1, "t/b", 0),
            ("t/a", 0, "d0", 0),
            ("t/b", 0, "d1", 0),
        ]
    );
}

#[test]
fn elementclass_parameters_positional_and_keyword() {
    let c = parse(
        "elementclass P { $a, $b, LEN $len, TTL $ttl | input -> x :: X($a, $b, $len, [$ttl]) -> output }\n\
         Idle -> p :: P(1, two, LEN 64) -> Discard\n\
         Idle -> q :: P(TTL 3, 1, 2) -> Discard",
    );
    assert_eq!(c.elements[c.find("p/x").unwrap()].config, "1, two, 64, []");
    assert_eq!(c.elements[c.find("q/x").unwrap()].config, "1, 2, , [3]");
}

#[test]
fn elementclass_input_fans_out_and_outputs_merge() {
    let c = parse(
        "elementclass F { input -> a :: A; input -> b :: B; a -> output; b -> output }\n\
         s :: S -> f :: F -> d :: D",
    );
    assert_eq!(
        sorted_conns(&c),
        vec![
            ("f/a", 0, "d", 0),
            ("f/b", 0, "d", 0),
            ("s", 0, "f/a", 0),
            ("s", 0, "f/b", 0)
        ]
    );
}

#[test]
fn elementclass_passthrough() {
    let c = parse(
        "elementclass Wire { input -> output }\n\
         elementclass Cross { input[0] -> [1]output; input[1] -> [0]output }\n\
         a :: A; b :: B; d0 :: D; d1 :: D\n\
         a -> w :: Wire -> x :: Wire -> b\n\
         a[1] -> [0]c :: Cross; b[1] -> [1]c; c[0] -> d0; c[1] -> d1",
    );
    assert_eq!(elems(&c).len(), 4);
    assert_eq!(
        sorted_conns(&c),
        vec![("a", 0, "b", 0), ("a", 1, "d1", 0), ("b", 1, "d0", 0)]
    );
}

#[test]
fn nested_compounds_and_argument_substitution() {
    let c = parse(
        "elementclass Inner { $v | input -> i :: I($v) -> output }\n\
         elementclass Outer { $x, $y | input -> in1 :: Inner($x) -> in2 :: Inner($y + $x) -> output }\n\
         define($G 7)\n\
         Idle -> o :: Outer(1, $G) -> Discard",
    );
    assert_eq!(
        elems(&c),
        vec![
            ("Idle@1", "Idle", ""),
            ("o/in1/i", "I", "1"),
            ("o/in2/i", "I", "7 + 1"),
            ("Discard@3", "Discard", ""),
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("Idle@1", 0, "o/in1/i", 0),
            ("o/in1/i", 0, "o/in2/i", 0),
            ("o/in2/i", 0, "Discard@3", 0)
        ]
    );
}

#[test]
fn compound_bodies_see_defines_and_enclosing_parameters() {
    let c = parse(
        "define($D top)\n\
         elementclass Outer { $p |\n\
           elementclass Local { input -> l :: L($p, $D) -> output }\n\
           input -> Local -> output }\n\
         Idle -> Outer(arg) -> Discard",
    );
    assert_eq!(c.elements[1].name, "Outer@2/Local@1/l");
    assert_eq!(c.elements[1].config, "arg, top");
}

#[test]
fn anonymous_compounds() {
    let c = parse("x :: { input -> Counter -> output }\nIdle -> x -> { input -> q :: Queue -> output } -> Discard");
    assert_eq!(
        elems(&c),
        vec![
            ("x/Counter@1", "Counter", ""),
            ("Idle@2", "Idle", ""),
            ("Compound@3/q", "Queue", ""),
            ("Discard@4", "Discard", ""),
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("x/Counter@1", 0, "Compound@3/q", 0),
            ("Idle@2", 0, "x/Counter@1", 0),
            ("Compound@3/q", 0, "Discard@4", 0),
        ]
    );
}

#[test]
fn compound_class_used_as_bare_and_anonymous_element() {
    let c = parse("elementclass C { input -> k :: K -> output }\nIdle -> C -> C -> Discard");
    assert_eq!(
        elems(&c),
        vec![
            ("Idle@1", "Idle", ""),
            ("C@2/k", "K", ""),
            ("C@3/k", "K", ""),
            ("Discard@4", "Discard", "")
        ]
    );
    assert_eq!(
        conns(&c),
        vec![
            ("Idle@1", 0, "C@2/k", 0),
            ("C@2/k", 0, "C@3/k", 0),
            ("C@3/k", 0, "Discard@4", 0)
        ]
    );
}

#[test]
fn elementclass_synonyms() {
    let c = parse(
        "elementclass Sink Discard;\nelementclass C { input -> output }\nelementclass D C;\n\
         Idle -> Sink; Idle -> D -> s :: Sink",
    );
    assert_eq!(
        elems(&c),
        vec![
            ("Idle@1", "Idle", ""),
            ("Sink@2", "Discard", ""),
            ("Idle@3", "Idle", ""),
            ("s", "Discard", "")
        ]
    );
    assert_eq!(
        conns(&c),
        vec![("Idle@1", 0, "Sink@2", 0), ("Idle@3", 0, "s", 0)]
    );
}

#[test]
fn compound_member_names_are_local() {
    // `a` inside the class does not clash with the top-level `a`.
    let c = parse("elementclass C { input -> a :: A -> output }\na :: A; a -> c :: C -> a");
    assert_eq!(elems(&c), vec![("a", "A", ""), ("c/a", "A", "")]);
    assert_eq!(conns(&c), vec![("a", 0, "c/a", 0), ("c/a", 0, "a", 0)]);
}

#[test]
fn connection_spans_point_at_arrows() {
    let c = parse("a :: A\nb :: B\n  a\n   -> b");
    assert_eq!(c.connections[0].span.to_string(), "t.click:4:4");
}

#[test]
fn empty_and_comment_only_configs() {
    assert_eq!(parse("").elements.len(), 0);
    assert_eq!(parse("// nothing\n/* here */ ;;").elements.len(), 0);
}

#[test]
fn parse_file_reads_and_reports_io_errors() {
    let dir = tempfile::Builder::new()
        .prefix("click-test-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("x.click");
    std::fs::write(&path, "a :: A -> Discard").unwrap();
    let c = click::parse_file(&path, &[]).unwrap();
    assert_eq!(c.elements.len(), 2);
    assert_eq!(&*c.elements[0].span.file, path.display().to_string());
    let missing = dir.path().join("missing.click");
    let e = click::parse_file(&missing, &[]).unwrap_err();
    assert_eq!((e.span.line, e.span.col), (0, 0));
    assert!(e
        .to_string()
        .starts_with(&format!("{}:0:0: cannot read file", missing.display())));
    dir.close().unwrap();
}
