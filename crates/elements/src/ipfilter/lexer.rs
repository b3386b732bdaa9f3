//! Splits a pattern into words as Click's IPFilter does: operators (`&&`, `||`, `!`, `==`,
//! `!=`, `<`, `<=`, `>`, `>=`, `=`, `&`, `|`), punctuation (`(`, `)`, `[`, `]`, `,`, `;`, `?`)
//! and words made of letters, digits and `-._/:@`.

/// One word of a pattern and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token<'a> {
    /// The word's text.
    pub text: &'a str,
    /// Byte offset of the word in the pattern.
    pub pos: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '/' | '@' | '_' | ':')
}

/// Splits `text` into tokens. Never fails: any other character is a one-character token the
/// parser will reject with its position.
pub fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some(&(pos, c)) = it.peek() {
        if c.is_whitespace() {
            it.next();
            continue;
        }
        let next = text[pos + c.len_utf8()..].chars().next();
        let two = match c {
            '&' | '|' => next == Some(c),
            '<' | '>' | '!' | '=' => next == Some('='),
            _ => false,
        };
        if two {
            out.push(Token {
                text: &text[pos..pos + 2],
                pos,
            });
            it.next();
            it.next();
            continue;
        }
        if is_word_char(c) {
            let mut end = pos;
            while let Some(&(p, ch)) = it.peek() {
                if !is_word_char(ch) {
                    break;
                }
                end = p + ch.len_utf8();
                it.next();
            }
            out.push(Token {
                text: &text[pos..end],
                pos,
            });
        } else {
            let end = pos + c.len_utf8();
            out.push(Token {
                text: &text[pos..end],
                pos,
            });
            it.next();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&str> {
        tokenize(s).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn splits_like_click() {
        assert_eq!(
            words("src host 10.0.0.1&&!tcp"),
            ["src", "host", "10.0.0.1", "&&", "!", "tcp"]
        );
        assert_eq!(words("ip[0:1]>=4"), ["ip", "[", "0:1", "]", ">=", "4"]);
        assert_eq!(words("a ? b : c"), ["a", "?", "b", ":", "c"]);
        assert_eq!(
            words("ttl!=5 == = < ||"),
            ["ttl", "!=", "5", "==", "=", "<", "||"]
        );
        assert_eq!(tokenize("  x  y")[1].pos, 5);
        assert_eq!(words("é$"), ["é", "$"]);
    }
}
