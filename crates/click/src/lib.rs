//! The Click configuration language, parsed into a flat network-function
//! graph.
//!
//! [Click](https://github.com/kohler/click) configurations describe a graph
//! of elements: `name :: Class(configuration)` declares an element and
//! `a [1] -> [0] b` connects output port 1 of `a` to input port 0 of `b`.
//! This crate parses that language (see click(5)) and returns a [`Config`]
//! in which compound elements (`elementclass`) have been expanded, so only
//! primitive elements remain. It does not know any element library: a class
//! name is just an identifier, and configuration strings are returned raw
//! (comments removed, `$variables` substituted, whitespace trimmed) for
//! the element implementations to parse.
//!
//! ```
//! let cfg = click::parse_str(
//!     "elementclass Count { $n | input -> c :: Counter($n) -> output }
//!      define($N 5)
//!      FromDevice(eth0) -> k :: Count($N) -> Discard;",
//!     "example.click",
//!     &[],
//! )
//! .unwrap();
//! let names: Vec<&str> = cfg.elements.iter().map(|e| e.name.as_str()).collect();
//! assert_eq!(names, ["FromDevice@1", "k/c", "Discard@3"]);
//! let counter = &cfg.elements[cfg.find("k/c").unwrap()];
//! assert_eq!((counter.class.as_str(), counter.config.as_str()), ("Counter", "5"));
//! // FromDevice@1 -> k/c -> Discard@3
//! let edges: Vec<_> = cfg.connections.iter().map(|c| (c.from, c.from_port, c.to, c.to_port)).collect();
//! assert_eq!(edges, [(0, 0, 1, 0), (1, 0, 2, 0)]);
//! ```
//!
//! # Supported language
//!
//! * Comments: `// ...`, `/* ... */`, and lines whose first non-blank
//!   character is `#`.
//! * Declarations `a :: C(cfg)`, `a :: C`, `a, b :: C(cfg)`; declarations
//!   inside connections (`x -> c :: Counter -> y`).
//! * Anonymous elements `-> Counter(1) ->` and bare class names
//!   (`-> Discard`), named `Class@N` like Click does, where `N` counts the
//!   elements declared so far in the enclosing body, starting at 1.
//! * Connections with optional ports (`a[1] -> [2]b`, default 0), chains,
//!   statements separated by `;` or simply following each other.
//! * `elementclass Name { $a, $b, KEY $k | body }`, with `input`/`output`
//!   pseudo-elements; anonymous compounds (`x :: { ... }`, `-> { ... } ->`);
//!   synonyms (`elementclass A B;`); nested and locally-defined classes.
//!   Compound members are named `instance/member`; pass-through
//!   (`input -> output`) connections are resolved.
//! * `define($NAME value, ...)` at top level and `$NAME` / `${NAME}`
//!   substitution in configuration strings (outside single quotes), with
//!   command-line defines taking precedence.
//! * `require(...)`, recorded in [`Config::requires`].
//!
//! Names must be declared before use, as in Click. Errors carry a
//! `file:line:col` position and say what was expected; the parser never
//! panics.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod expand;
mod lexer;
mod parser;

use std::path::Path;
use std::sync::Arc;

pub use error::{Error, Span};

/// A primitive element of the flattened configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementDecl {
    /// Element name, e.g. `rt`, `Counter@3`, or `r/rt` inside compound `r`.
    pub name: String,
    /// Element class name as written (or as aliased by a synonym class).
    pub class: String,
    /// Raw configuration string: comments removed, variables substituted,
    /// surrounding whitespace trimmed; empty if none was given.
    pub config: String,
    /// Where the element was declared.
    pub span: Span,
}

/// A connection `elements[from] [from_port] -> [to_port] elements[to]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// Index of the source element in [`Config::elements`].
    pub from: usize,
    /// Output port of the source element.
    pub from_port: usize,
    /// Index of the destination element in [`Config::elements`].
    pub to: usize,
    /// Input port of the destination element.
    pub to_port: usize,
    /// Position of the `->` that created the connection.
    pub span: Span,
}

/// A flat configuration: primitive elements and the connections between
/// them. Duplicate connections appear once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Elements in declaration order (compound members in place of their
    /// compound).
    pub elements: Vec<ElementDecl>,
    /// Connections, sorted by `(from, from_port, to, to_port)`.
    pub connections: Vec<Connection>,
    /// Arguments of `require(...)` statements, e.g. `package foo`.
    pub requires: Vec<String>,
}

impl Config {
    /// Index of the element called `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.elements.iter().position(|e| e.name == name)
    }
}

/// Parses a Click configuration. `file` is used in error positions;
/// `defines` are `(NAME, VALUE)` pairs (NAME without `$`) that override
/// the configuration's `define`s, like `click --define NAME=VALUE`.
pub fn parse_str(source: &str, file: &str, defines: &[(String, String)]) -> Result<Config, Error> {
    let file: Arc<str> = Arc::from(file);
    let ast = parser::Parser::new(source, file).parse()?;
    expand::expand(&ast, defines)
}

/// Reads and parses a Click configuration file. I/O errors are reported
/// at position `file:0:0`.
pub fn parse_file(path: &Path, defines: &[(String, String)]) -> Result<Config, Error> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(source) => parse_str(&source, &file, defines),
        Err(e) => Err(Error::new(
            Span::new(Arc::from(file.as_str()), 0, 0),
            format!("cannot read file: {e}"),
        )),
    }
}
