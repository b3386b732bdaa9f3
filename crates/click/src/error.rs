//! Source positions and parse errors.

use std::fmt;
use std::sync::Arc;

/// A position in a configuration file.
///
/// `line` and `col` are 1-based (columns count Unicode scalar values, a tab
/// counts as one column). I/O errors that have no position use `0:0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// File name as given to the parser.
    pub file: Arc<str>,
    /// 1-based line number.
    pub line: u32,
    /// 1-based column number.
    pub col: u32,
}

impl Span {
    /// Creates a span.
    pub fn new(file: Arc<str>, line: u32, col: u32) -> Span {
        Span { file, line, col }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// A configuration error: where it happened and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Where the problem was detected.
    pub span: Span,
    /// Human-readable description, e.g. ``expected `->` or `;`, found `)` ``.
    pub message: String,
}

impl Error {
    /// Creates an error at `span`.
    pub fn new(span: Span, message: impl Into<String>) -> Error {
        Error {
            span,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.span, self.message)
    }
}

impl std::error::Error for Error {}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;
