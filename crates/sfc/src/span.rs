//! Where each value of a chain file sits in its source: a map from JSON pointers
//! (`/chains/0/id`) to line and column, for JSON (a small scanner over text serde_json has
//! already accepted) and for TOML (toml_edit's spans).

use std::collections::BTreeMap;

/// A 1-based line and column (columns count characters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

/// The positions of a document's values and object keys, by JSON pointer.
#[derive(Clone, Debug, Default)]
pub struct Spans {
    values: BTreeMap<String, Pos>,
    keys: BTreeMap<String, Pos>,
}

/// Escapes one JSON pointer segment (`~` → `~0`, `/` → `~1`).
pub fn escape(seg: &str) -> String {
    seg.replace('~', "~0").replace('/', "~1")
}

impl Spans {
    /// Where the value at `pointer` starts; for a pointer that is not there (a missing
    /// property), where its nearest present parent starts.
    pub fn value(&self, pointer: &str) -> Pos {
        let mut p = pointer;
        loop {
            if let Some(pos) = self.values.get(p) {
                return *pos;
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return Pos { line: 1, column: 1 },
            }
        }
    }

    /// Where the key of the property at `pointer` is written (its value when it has no key
    /// of its own, e.g. an array item).
    pub fn key(&self, pointer: &str) -> Pos {
        self.keys
            .get(pointer)
            .copied()
            .unwrap_or_else(|| self.value(pointer))
    }

    /// The spans of a JSON text (which must be valid JSON: check it with serde_json first;
    /// on anything unexpected the scanner stops and keeps what it found).
    pub fn of_json(text: &str) -> Spans {
        let mut s = Scanner {
            text,
            i: 0,
            line: 1,
            col: 1,
            spans: Spans::default(),
        };
        s.skip_ws();
        let _ = s.value(String::new());
        s.spans
    }

    /// The spans of a TOML text (empty if it does not parse).
    pub fn of_toml(text: &str) -> Spans {
        let mut spans = Spans::default();
        let Ok(doc) = text.parse::<toml_edit::ImDocument<String>>() else {
            return spans;
        };
        let lines = LineIndex::new(text);
        spans
            .values
            .insert(String::new(), Pos { line: 1, column: 1 });
        toml_table(doc.as_table(), "", &lines, &mut spans);
        spans
    }
}

struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { text, starts }
    }
    fn pos(&self, byte: usize) -> Pos {
        let line = self.starts.partition_point(|&s| s <= byte).max(1);
        let start = self.starts[line - 1];
        let end = byte.min(self.text.len()).max(start);
        let column = self
            .text
            .get(start..end)
            .map_or(1, |s| s.chars().count() + 1);
        Pos { line, column }
    }
}

/// Line and column of byte offset `byte` in `text`.
pub fn pos_of(text: &str, byte: usize) -> Pos {
    LineIndex::new(text).pos(byte)
}

fn toml_table(t: &toml_edit::Table, ptr: &str, lines: &LineIndex, spans: &mut Spans) {
    for (k, item) in t.iter() {
        let p = format!("{ptr}/{}", escape(k));
        if let Some((key, _)) = t.get_key_value(k) {
            if let Some(r) = key.span() {
                spans.keys.insert(p.clone(), lines.pos(r.start));
            }
        }
        toml_item(item, &p, lines, spans);
    }
}

fn toml_item(item: &toml_edit::Item, ptr: &str, lines: &LineIndex, spans: &mut Spans) {
    use toml_edit::Item;
    let at = item.span().map(|r| lines.pos(r.start));
    if let Some(pos) = at.or_else(|| spans.keys.get(ptr).copied()) {
        spans.values.insert(ptr.to_string(), pos);
    }
    match item {
        Item::Table(t) => toml_table(t, ptr, lines, spans),
        Item::ArrayOfTables(a) => {
            for (i, t) in a.iter().enumerate() {
                let p = format!("{ptr}/{i}");
                if let Some(r) = t.span() {
                    spans.values.insert(p.clone(), lines.pos(r.start));
                }
                toml_table(t, &p, lines, spans);
            }
        }
        Item::Value(v) => toml_value(v, ptr, lines, spans),
        Item::None => {}
    }
}

fn toml_value(v: &toml_edit::Value, ptr: &str, lines: &LineIndex, spans: &mut Spans) {
    use toml_edit::Value;
    if let Some(r) = v.span() {
        spans.values.insert(ptr.to_string(), lines.pos(r.start));
    }
    match v {
        Value::Array(a) => {
            for (i, e) in a.iter().enumerate() {
                toml_value(e, &format!("{ptr}/{i}"), lines, spans);
            }
        }
        Value::InlineTable(t) => {
            for (k, e) in t.iter() {
                let p = format!("{ptr}/{}", escape(k));
                if let Some((key, _)) = t.get_key_value(k) {
                    if let Some(r) = key.span() {
                        spans.keys.insert(p.clone(), lines.pos(r.start));
                    }
                }
                toml_value(e, &p, lines, spans);
            }
        }
        _ => {}
    }
}

struct Scanner<'a> {
    text: &'a str,
    i: usize,
    line: usize,
    col: usize,
    spans: Spans,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.i).copied()
    }
    fn bump(&mut self) {
        if let Some(c) = self.text[self.i..].chars().next() {
            self.i += c.len_utf8();
            if c == '\n' {
                self.line += 1;
                self.col = 1;
            } else {
                self.col += 1;
            }
        }
    }
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.col,
        }
    }
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.bump();
        }
    }
    fn eat(&mut self, c: u8) -> Option<()> {
        self.skip_ws();
        (self.peek() == Some(c)).then(|| self.bump())
    }
    /// A string token; returns its decoded text.
    fn string(&mut self) -> Option<String> {
        let start = self.i;
        if self.peek() != Some(b'"') {
            return None;
        }
        self.bump();
        loop {
            match self.peek()? {
                b'\\' => {
                    self.bump();
                    self.bump();
                }
                b'"' => {
                    self.bump();
                    break;
                }
                _ => self.bump(),
            }
        }
        serde_json::from_str(&self.text[start..self.i]).ok()
    }
    fn value(&mut self, ptr: String) -> Option<()> {
        self.skip_ws();
        self.spans.values.insert(ptr.clone(), self.pos());
        match self.peek()? {
            b'{' => {
                self.bump();
                self.skip_ws();
                if self.peek() == Some(b'}') {
                    self.bump();
                    return Some(());
                }
                loop {
                    self.skip_ws();
                    let kpos = self.pos();
                    let k = self.string()?;
                    let p = format!("{ptr}/{}", escape(&k));
                    self.spans.keys.insert(p.clone(), kpos);
                    self.eat(b':')?;
                    self.value(p)?;
                    self.skip_ws();
                    match self.peek()? {
                        b',' => self.bump(),
                        b'}' => {
                            self.bump();
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.bump();
                self.skip_ws();
                if self.peek() == Some(b']') {
                    self.bump();
                    return Some(());
                }
                let mut n = 0usize;
                loop {
                    self.value(format!("{ptr}/{n}"))?;
                    n += 1;
                    self.skip_ws();
                    match self.peek()? {
                        b',' => self.bump(),
                        b']' => {
                            self.bump();
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(|_| ()),
            _ => {
                while matches!(self.peek(), Some(c) if !matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\r' | b'\n'))
                {
                    self.bump();
                }
                Some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_positions() {
        let t = "{\n  \"a\": [1, {\"b/c\": \"x\"}],\n  \"é\": true\n}";
        let s = Spans::of_json(t);
        assert_eq!(s.value("/a"), Pos { line: 2, column: 8 });
        assert_eq!(
            s.value("/a/1"),
            Pos {
                line: 2,
                column: 12
            }
        );
        assert_eq!(
            s.key("/a/1/b~1c"),
            Pos {
                line: 2,
                column: 13
            }
        );
        assert_eq!(
            s.value("/a/1/b~1c"),
            Pos {
                line: 2,
                column: 20
            }
        );
        assert_eq!(s.value("/é"), Pos { line: 3, column: 8 });
        // a missing property falls back to its parent
        assert_eq!(
            s.value("/a/1/zz"),
            Pos {
                line: 2,
                column: 12
            }
        );
    }

    #[test]
    fn toml_positions() {
        let t = "direct_links = false\n[[chains]]\nid = 1\nnodes = [\"a\", [\"b\", \"c\"]]\n";
        let s = Spans::of_toml(t);
        assert_eq!(
            s.value("/direct_links"),
            Pos {
                line: 1,
                column: 16
            }
        );
        assert_eq!(s.value("/chains/0/id"), Pos { line: 3, column: 6 });
        assert_eq!(s.key("/chains/0/id"), Pos { line: 3, column: 1 });
        assert_eq!(
            s.value("/chains/0/nodes/1/1"),
            Pos {
                line: 4,
                column: 21
            }
        );
    }

    #[test]
    fn scanner_survives_garbage() {
        for t in ["", "{", "{\"a\"", "[1,", "\"abc", "{\"a\":}"] {
            let _ = Spans::of_json(t);
            let _ = Spans::of_toml(t);
        }
    }
}
