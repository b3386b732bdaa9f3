//! Hand-rolled lexer for the Click configuration language.
//!
//! The lexer is pull-based: the parser asks for one token at a time, and
//! asks for a raw configuration string right after it consumed a `(` that
//! opens an element configuration (configuration strings are not tokenised).

use std::sync::Arc;

use crate::error::{Error, Result, Span};

/// A lexical token kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// Identifier: letters, digits, `_`, `@` and inner `/`, not all digits.
    Ident(String),
    /// All-digit word (used for port numbers).
    Number(String),
    /// `$name` (without the `$`).
    Var(String),
    /// `::`
    DColon,
    /// `->`
    Arrow,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `,`
    Comma,
    /// `;`
    Semi,
    /// `|`
    Bar,
    /// Any other character.
    Other(char),
    /// End of input.
    Eof,
}

impl Tok {
    /// Describes the token for "found ..." parts of error messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier `{s}`"),
            Tok::Number(s) => format!("number `{s}`"),
            Tok::Var(s) => format!("variable `${s}`"),
            Tok::DColon => "`::`".into(),
            Tok::Arrow => "`->`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBrace => "`{`".into(),
            Tok::RBrace => "`}`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Semi => "`;`".into(),
            Tok::Bar => "`|`".into(),
            Tok::Other(c) => format!("`{}`", c.escape_default()),
            Tok::Eof => "end of file".into(),
        }
    }
}

/// A token and the position of its first character.
#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: u32,
    pub col: u32,
}

/// A configuration string exactly as written between `(` and `)`,
/// comments included, with the position of its first character.
#[derive(Clone, Debug, Default)]
pub(crate) struct RawConfig {
    pub text: String,
    pub line: u32,
    pub col: u32,
}

/// Saved lexer position, used for two-token lookahead.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LexState {
    pos: usize,
    line: u32,
    col: u32,
}

/// The lexer.
pub(crate) struct Lexer {
    chars: Vec<char>,
    st: LexState,
    file: Arc<str>,
}

/// Characters that may appear in identifiers (besides inner `/`).
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '@'
}

/// Characters that may appear in `$variable` names.
pub(crate) fn is_var_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Lexer {
    pub(crate) fn new(source: &str, file: Arc<str>) -> Lexer {
        Lexer {
            chars: source.chars().collect(),
            st: LexState {
                pos: 0,
                line: 1,
                col: 1,
            },
            file,
        }
    }

    pub(crate) fn span(&self, line: u32, col: u32) -> Span {
        Span::new(self.file.clone(), line, col)
    }

    pub(crate) fn save(&self) -> LexState {
        self.st
    }

    pub(crate) fn restore(&mut self, st: LexState) {
        self.st = st;
    }

    fn peek_char(&self, off: usize) -> Option<char> {
        self.chars.get(self.st.pos + off).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.st.pos).copied()?;
        self.st.pos += 1;
        if c == '\n' {
            self.st.line = self.st.line.saturating_add(1);
            self.st.col = 1;
        } else {
            self.st.col = self.st.col.saturating_add(1);
        }
        Some(c)
    }

    /// True if only whitespace precedes the current position on its line.
    fn at_line_start(&self) -> bool {
        self.chars[..self.st.pos]
            .iter()
            .rev()
            .take_while(|&&c| c != '\n')
            .all(|c| c.is_whitespace())
    }

    fn skip_to_eol(&mut self) {
        while let Some(c) = self.peek_char(0) {
            if c == '\n' {
                break;
            }
            self.bump();
        }
    }

    /// Skips a `/* ... */` comment; the current position is at the `/`.
    fn skip_block_comment(&mut self) -> Result<()> {
        let (line, col) = (self.st.line, self.st.col);
        self.bump();
        self.bump();
        loop {
            match self.bump() {
                None => {
                    return Err(Error::new(
                        self.span(line, col),
                        "unterminated comment: expected `*/` before end of file",
                    ))
                }
                Some('*') if self.peek_char(0) == Some('/') => {
                    self.bump();
                    return Ok(());
                }
                Some(_) => {}
            }
        }
    }

    /// Skips whitespace, `//` and `/* */` comments, and `#` lines.
    fn skip_trivia(&mut self) -> Result<()> {
        while let Some(c) = self.peek_char(0) {
            if c.is_whitespace() {
                self.bump();
            } else if c == '/' && self.peek_char(1) == Some('/') {
                self.skip_to_eol();
            } else if c == '/' && self.peek_char(1) == Some('*') {
                self.skip_block_comment()?;
            } else if c == '#' && self.at_line_start() {
                self.skip_to_eol();
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Returns the next token.
    pub(crate) fn next_token(&mut self) -> Result<Token> {
        self.skip_trivia()?;
        let (line, col) = (self.st.line, self.st.col);
        let mk = |tok| Ok(Token { tok, line, col });
        let Some(c) = self.bump() else {
            return mk(Tok::Eof);
        };
        match c {
            ':' if self.peek_char(0) == Some(':') => {
                self.bump();
                mk(Tok::DColon)
            }
            '-' if self.peek_char(0) == Some('>') => {
                self.bump();
                mk(Tok::Arrow)
            }
            '[' => mk(Tok::LBracket),
            ']' => mk(Tok::RBracket),
            '(' => mk(Tok::LParen),
            ')' => mk(Tok::RParen),
            '{' => mk(Tok::LBrace),
            '}' => mk(Tok::RBrace),
            ',' => mk(Tok::Comma),
            ';' => mk(Tok::Semi),
            '|' => mk(Tok::Bar),
            '$' if self.peek_char(0).is_some_and(is_var_char) => {
                let mut name = String::new();
                while let Some(c) = self.peek_char(0).filter(|&c| is_var_char(c)) {
                    name.push(c);
                    self.bump();
                }
                mk(Tok::Var(name))
            }
            c if is_word_char(c) => {
                let mut word = String::from(c);
                loop {
                    match self.peek_char(0) {
                        Some(c) if is_word_char(c) => {}
                        Some('/') if self.peek_char(1).is_some_and(is_word_char) => {}
                        _ => break,
                    }
                    if let Some(c) = self.bump() {
                        word.push(c);
                    }
                }
                if word.chars().all(|c| c.is_ascii_digit()) {
                    mk(Tok::Number(word))
                } else {
                    mk(Tok::Ident(word))
                }
            }
            c => mk(Tok::Other(c)),
        }
    }

    /// Skips a quoted string; the current position is at the opening quote.
    fn skip_quoted(&mut self, quote: char) -> Result<()> {
        let (line, col) = (self.st.line, self.st.col);
        self.bump();
        loop {
            match self.bump() {
                None => {
                    return Err(Error::new(
                        self.span(line, col),
                        format!("unterminated string: expected `{quote}` before end of file"),
                    ))
                }
                Some('\\') if quote == '"' => {
                    self.bump();
                }
                Some(c) if c == quote => return Ok(()),
                Some(_) => {}
            }
        }
    }

    /// Reads a raw configuration string. Must be called right after the
    /// opening `(` (at `open_line:open_col`) was returned by `next_token`;
    /// consumes everything up to and including the matching `)`.
    pub(crate) fn read_config(&mut self, open_line: u32, open_col: u32) -> Result<RawConfig> {
        let start = self.st;
        let mut depth = 1usize;
        loop {
            match self.peek_char(0) {
                None => {
                    return Err(Error::new(
                        self.span(open_line, open_col),
                        "unclosed `(`: expected `)` before end of file",
                    ))
                }
                Some('"') => self.skip_quoted('"')?,
                Some('\'') => self.skip_quoted('\'')?,
                Some('/') if self.peek_char(1) == Some('/') => self.skip_to_eol(),
                Some('/') if self.peek_char(1) == Some('*') => self.skip_block_comment()?,
                Some(c) => {
                    if c == '(' {
                        depth += 1;
                    } else if c == ')' {
                        depth -= 1;
                        if depth == 0 {
                            let text: String = self.chars[start.pos..self.st.pos].iter().collect();
                            self.bump();
                            return Ok(RawConfig {
                                text,
                                line: start.line,
                                col: start.col,
                            });
                        }
                    }
                    self.bump();
                }
            }
        }
    }
}

/// Looks up a variable's value by name (without `$`).
pub(crate) type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Processes a raw configuration string: removes comments outside quotes,
/// substitutes `$name` / `${name}` outside single quotes (when `lookup` is
/// given; an unknown variable is an error at its position), and trims
/// surrounding whitespace.
pub(crate) fn process_config(
    raw: &RawConfig,
    file: &Arc<str>,
    lookup: Option<Lookup<'_>>,
) -> Result<String> {
    let chars: Vec<char> = raw.text.chars().collect();
    let mut out = String::with_capacity(raw.text.len());
    let (mut line, mut col) = (raw.line, raw.col);
    let mut i = 0;
    // Advances over `n` characters, updating the position.
    let advance = |i: &mut usize, line: &mut u32, col: &mut u32, n: usize| {
        for _ in 0..n {
            if chars.get(*i) == Some(&'\n') {
                *line = line.saturating_add(1);
                *col = 1;
            } else {
                *col = col.saturating_add(1);
            }
            *i += 1;
        }
    };
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match quote {
            Some('"') if c == '\\' => {
                out.push(c);
                if let Some(n) = next {
                    out.push(n);
                }
                advance(&mut i, &mut line, &mut col, 2);
                continue;
            }
            Some(q) if c == q => {
                quote = None;
                out.push(c);
                advance(&mut i, &mut line, &mut col, 1);
                continue;
            }
            Some('\'') => {
                out.push(c);
                advance(&mut i, &mut line, &mut col, 1);
                continue;
            }
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                out.push(c);
                advance(&mut i, &mut line, &mut col, 1);
                continue;
            }
            None if c == '/' && next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    advance(&mut i, &mut line, &mut col, 1);
                }
                continue;
            }
            None if c == '/' && next == Some('*') => {
                advance(&mut i, &mut line, &mut col, 2);
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    advance(&mut i, &mut line, &mut col, 1);
                }
                advance(&mut i, &mut line, &mut col, 2);
                out.push(' ');
                continue;
            }
            _ => {}
        }
        // Outside single quotes: variable substitution.
        if let (Some(lookup), '$') = (lookup, c) {
            let braced = next == Some('{');
            let name_start = if braced { i + 2 } else { i + 1 };
            let mut end = name_start;
            while end < chars.len() && is_var_char(chars[end]) {
                end += 1;
            }
            let valid_name = end > name_start && !chars[name_start].is_ascii_digit();
            let closed = !braced || chars.get(end) == Some(&'}');
            if valid_name && closed {
                let name: String = chars[name_start..end].iter().collect();
                match lookup(&name) {
                    Some(value) => out.push_str(&value),
                    None => {
                        return Err(Error::new(
                            Span::new(file.clone(), line, col),
                            format!("undefined variable `${name}`"),
                        ))
                    }
                }
                let len = end - i + usize::from(braced);
                advance(&mut i, &mut line, &mut col, len);
                continue;
            }
        }
        out.push(c);
        advance(&mut i, &mut line, &mut col, 1);
    }
    Ok(out.trim().to_string())
}

/// Splits a processed configuration string into comma-separated arguments,
/// ignoring commas inside quotes and brackets. Arguments are trimmed; an
/// empty string has no arguments and a trailing empty argument is dropped.
pub(crate) fn split_args(s: &str) -> Vec<String> {
    if s.trim().is_empty() {
        return Vec::new();
    }
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in s.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            cur.push(c);
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                args.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    let last = cur.trim().to_string();
    if !last.is_empty() || args.is_empty() {
        args.push(last);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        let mut lx = Lexer::new(s, "t".into());
        let mut v = Vec::new();
        loop {
            let t = lx.next_token().unwrap();
            if t.tok == Tok::Eof {
                return v;
            }
            v.push(t.tok);
        }
    }

    #[test]
    fn tokens_and_comments() {
        let v = toks("a/b :: C // x\n/* y */\n# line\n  # also\n[12]->$v |");
        assert_eq!(
            v,
            vec![
                Tok::Ident("a/b".into()),
                Tok::DColon,
                Tok::Ident("C".into()),
                Tok::LBracket,
                Tok::Number("12".into()),
                Tok::RBracket,
                Tok::Arrow,
                Tok::Var("v".into()),
                Tok::Bar,
            ]
        );
        // `#` not at line start is a character, not a comment.
        assert_eq!(
            toks("a #b"),
            vec![
                Tok::Ident("a".into()),
                Tok::Other('#'),
                Tok::Ident("b".into())
            ]
        );
        // `a//c` is `a` then a comment.
        assert_eq!(toks("a//c"), vec![Tok::Ident("a".into())]);
    }

    #[test]
    fn positions() {
        let mut lx = Lexer::new("\n  ab\tcd", "t".into());
        let t = lx.next_token().unwrap();
        assert_eq!((t.line, t.col), (2, 3));
        let t = lx.next_token().unwrap();
        assert_eq!((t.line, t.col), (2, 6));
    }

    #[test]
    fn config_strings() {
        let mut lx = Lexer::new("(a(b) \")\" ')' /* ) */ // )\n c) x", "t".into());
        let t = lx.next_token().unwrap();
        let raw = lx.read_config(t.line, t.col).unwrap();
        assert_eq!(raw.text, "a(b) \")\" ')' /* ) */ // )\n c");
        assert_eq!((raw.line, raw.col), (1, 2));
        let p = process_config(&raw, &"t".into(), None).unwrap();
        assert_eq!(p, "a(b) \")\" ')'   \n c");
        assert_eq!(lx.next_token().unwrap().tok, Tok::Ident("x".into()));
    }

    #[test]
    fn substitution() {
        let raw = RawConfig {
            text: " $a, ${a}b, '$a', \"$a\", $ , $1 ".into(),
            line: 1,
            col: 1,
        };
        let f = |n: &str| (n == "a").then(|| "X".to_string());
        let p = process_config(&raw, &"t".into(), Some(&f)).unwrap();
        assert_eq!(p, "X, Xb, '$a', \"X\", $ , $1");
        let raw = RawConfig {
            text: "ok,\n  $zz".into(),
            line: 3,
            col: 7,
        };
        let e = process_config(&raw, &"t".into(), Some(&f)).unwrap_err();
        assert_eq!(e.to_string(), "t:4:3: undefined variable `$zz`");
    }

    #[test]
    fn splitting() {
        assert_eq!(split_args(""), Vec::<String>::new());
        assert_eq!(
            split_args(" a , f(b, c) , \"x,y\" "),
            vec!["a", "f(b, c)", "\"x,y\""]
        );
        assert_eq!(split_args("a, b,"), vec!["a", "b"]);
        assert_eq!(split_args(","), vec![""]);
    }
}
