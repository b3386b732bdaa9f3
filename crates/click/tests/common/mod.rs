//! Helpers shared by the integration tests.
#![allow(dead_code)]

use click::Config;

/// Parses `src` as file `t.click`, panicking with the error on failure.
pub fn parse(src: &str) -> Config {
    parse_with(src, &[])
}

/// Parses with command-line style defines.
pub fn parse_with(src: &str, defines: &[(&str, &str)]) -> Config {
    let defines: Vec<(String, String)> = defines
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    click::parse_str(src, "t.click", &defines).unwrap_or_else(|e| panic!("unexpected error: {e}"))
}

/// `(name, class, config)` of every element.
pub fn elems(c: &Config) -> Vec<(&str, &str, &str)> {
    c.elements
        .iter()
        .map(|e| (e.name.as_str(), e.class.as_str(), e.config.as_str()))
        .collect()
}

/// `(from, from_port, to, to_port)` of every connection, by element name.
pub fn conns(c: &Config) -> Vec<(&str, usize, &str, usize)> {
    c.connections
        .iter()
        .map(|x| {
            (
                c.elements[x.from].name.as_str(),
                x.from_port,
                c.elements[x.to].name.as_str(),
                x.to_port,
            )
        })
        .collect()
}

/// Like [`conns`] but sorted, for order-independent comparisons.
pub fn sorted_conns(c: &Config) -> Vec<(&str, usize, &str, usize)> {
    let mut v = conns(c);
    v.sort();
    v
}

/// The error message (`file:line:col: message`) for an invalid config.
pub fn err(src: &str) -> String {
    match click::parse_str(src, "t.click", &[]) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e.to_string(),
    }
}
