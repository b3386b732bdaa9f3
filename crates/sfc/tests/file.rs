//! The chain file: the thesis' files accepted as printed, TOML = JSON, and errors that say
//! where (file, line, column) and what was expected.

use sfc::file::{ChainFile, FileError, Format, Node};
use std::path::Path;

fn example(name: &str) -> ChainFile {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/sfc")
        .join(name);
    ChainFile::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

fn errors(text: &str, format: Format) -> Vec<FileError> {
    match ChainFile::parse(text, format, "in") {
        Ok(f) => panic!("accepted: {f:?}"),
        Err(e) => e.0,
    }
}

/// (line, column, path) of each error, and every message must contain `expected`.
fn at(text: &str, format: Format) -> Vec<(usize, usize, String)> {
    let es = errors(text, format);
    for e in &es {
        assert!(e.message.contains("expected"), "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("in:{}:{}: ", e.line, e.column)),
            "{e}"
        );
    }
    es.into_iter().map(|e| (e.line, e.column, e.path)).collect()
}

#[test]
fn thesis_files_as_printed() {
    let f = example("fig5-10.json");
    assert_eq!(f.chains.len(), 2);
    assert_eq!(f.chains[1].id, 200);
    assert_eq!(
        f.chains[1].nodes,
        vec![Node::One("sf1".into()), Node::One("sf3".into())]
    );
    assert_eq!(f.functions[2].host, "server2");
    assert_eq!(f.functions[2].kind, "tc-redirect");
    assert!(f.direct_links);
    let a1 = example("listing-a1.json");
    assert_eq!(a1.chains[0].id, 7892);
    assert_eq!(a1.functions[1].kind, "tc-redirect-delay");
    // Round trip through our own JSON.
    let again = ChainFile::parse(&a1.to_json(), Format::Json, "x").unwrap();
    assert_eq!(again, a1);
}

#[test]
fn toml_equals_json() {
    assert_eq!(example("fig5-10.toml"), example("fig5-10.json"));
    let ext = example("extended.toml");
    assert_eq!(ext, example("extended.json"));
    assert_eq!(ext.chains[0].nodes[2].choices(), ["ids", "ids-spare"]);
    assert!(ext.functions[1].nat);
    assert_eq!(ext.chains[0].classifier[1].iface.as_deref(), Some("eth0"));
    // Written back as TOML, it reads the same.
    let text = toml::to_string(&ext).unwrap();
    assert_eq!(ChainFile::parse(&text, Format::Toml, "x").unwrap(), ext);
}

#[test]
fn schema_errors_point_into_json() {
    let text = r#"{
  "chains": [
    { "id": "one", "nodes": ["sf1", 3] },
    { "id": 2, "nodes": ["sf1"], "colour": "red" }
  ],
  "functions": [
    { "tag": "sf1", "type": "x" },
    { "tag": "bad tag", "type": "x", "host": "h", "nat": "yes" }
  ]
}"#;
    assert_eq!(
        at(text, Format::Json),
        vec![
            (3, 13, "/chains/0/id".into()),
            (3, 37, "/chains/0/nodes/1".into()),
            (4, 34, "/chains/1/colour".into()),
            (7, 5, "/functions/0".into()),
            (8, 14, "/functions/1/tag".into()),
            (8, 58, "/functions/1/nat".into()),
        ]
    );
    let es = errors(text, Format::Json);
    assert!(
        es[2].message.contains("unknown field \"colour\""),
        "{}",
        es[2]
    );
    assert!(
        es[2].message.contains("classifier, entry, id, nodes"),
        "{}",
        es[2]
    );
    assert!(es[3].message.contains("host, tag, type"), "{}", es[3]);
    assert!(
        es[3].message.contains("missing field \"host\""),
        "{}",
        es[3]
    );
}

#[test]
fn schema_errors_point_into_toml() {
    let text = "[[chains]]\nid = 1\nnodes = [\"a\", [\"b\", 7]]\nentry = \"h\"\nclassifier = [{ src = \"10.0.0.1\", dst = \"10.0.0\", proto = \"sctp\" }]\n\n[[functions]]\ntag = \"a\"\ntype = \"x\"\nhost = \"h\"\nsize = 3\n\n[[hosts]]\nname = \"h\"\ntransport = \"gre\"\n";
    assert_eq!(
        at(text, Format::Toml),
        vec![
            (3, 15, "/chains/0/nodes/1".into()),
            (5, 41, "/chains/0/classifier/0/dst".into()),
            (5, 59, "/chains/0/classifier/0/proto".into()),
            (11, 1, "/functions/0/size".into()),
            (15, 13, "/hosts/0/transport".into()),
        ]
    );
}

#[test]
fn syntax_errors() {
    let e = errors(
        "{\n  \"chains\": [\n    { \"id\": 1, }\n  ]\n}",
        Format::Json,
    );
    assert_eq!((e[0].line, e[0].column), (3, 16));
    assert!(e[0].message.starts_with("JSON syntax"));
    let e = errors("[[chains]\nid = 1\n", Format::Toml);
    assert_eq!(e[0].line, 1);
    assert!(e[0].message.starts_with("TOML syntax"));
    assert!(!e[0].message.contains('\n'));
    let e = ChainFile::load(Path::new("/nonexistent/chains.json")).unwrap_err();
    assert!(e.to_string().contains("cannot read"), "{e}");
}

#[test]
fn semantic_errors() {
    let long: Vec<String> = (0..256).map(|_| "\"a\"".to_string()).collect();
    let text = format!(
        r#"{{"chains": [
  {{"id": 16777216, "nodes": ["a"]}},
  {{"id": 5, "nodes": ["a", ["b", "zz"]]}},
  {{"id": 5, "nodes": []}},
  {{"id": 6, "nodes": [{}]}},
  {{"id": 7, "nodes": ["a"], "classifier": [{{"src": "1.1.1.1", "dst": "2.2.2.2", "proto": "udp"}}]}}
],
"functions": [
  {{"tag": "a", "type": "x", "host": "h"}},
  {{"tag": "b", "type": "x", "host": "h", "nat": true, "nsh_aware": true}},
  {{"tag": "a", "type": "x", "host": "h"}}
]}}"#,
        long.join(", ")
    );
    // The SPI is checked with the schema; the rest once the file has the right shape.
    assert_eq!(
        at(&text, Format::Json),
        vec![(2, 10, "/chains/0/id".into())]
    );
    let text = text.replace("16777216", "1");
    let got = at(&text, Format::Json);
    let paths: Vec<&str> = got.iter().map(|(_, _, p)| p.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "/chains/1/nodes/1/1",
            "/chains/2/id",
            "/chains/2/nodes",
            "/chains/3/nodes",
            "/chains/4/classifier/0",
            "/chains/4/classifier/0",
            "/functions/1/nat",
            "/functions/2/tag",
        ]
    );
    let es = errors(&text, Format::Json);
    assert!(es[0].message.contains("unknown tag \"zz\""), "{}", es[0]);
    assert!(
        es[1]
            .message
            .contains("duplicate chain id 5 (first at line 3)"),
        "{}",
        es[1]
    );
    assert!(es[3].message.contains("chain of 256 SFs"), "{}", es[3]);
    assert!(
        es[7]
            .message
            .contains("duplicate tag \"a\" (first at line 9)"),
        "{}",
        es[7]
    );
}

#[test]
fn garbage_never_panics() {
    for t in [
        "",
        "null",
        "[]",
        "{\"chains\": 3}",
        "{\"chains\": [], \"functions\": [{}]}",
        "\u{0}",
        "[[x]]\n[x]",
    ] {
        let _ = ChainFile::parse(t, Format::Json, "g");
        let _ = ChainFile::parse(t, Format::Toml, "g");
    }
}
