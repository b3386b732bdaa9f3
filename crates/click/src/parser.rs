//! Recursive-descent parser: tokens to an unexpanded syntax tree.
//!
//! Names are resolved in textual order, as Click does: element names and
//! element classes must be declared before they are used. Configuration
//! strings are kept raw here; variables are substituted during expansion.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::error::{Error, Result, Span};
use crate::lexer::{process_config, split_args, Lexer, RawConfig, Tok, Token};

/// Index into [`Ast::classes`].
pub(crate) type ClassId = usize;

/// Maximum nesting of `{ ... }` compound bodies in the source text.
pub(crate) const MAX_NESTING: usize = 64;

/// What an element in a body is.
#[derive(Clone, Debug)]
pub(crate) enum ElemKind {
    /// A primitive element of the named class.
    Primitive(String),
    /// An instance of a compound element class.
    Compound(ClassId),
    /// The `input` pseudo-element of a compound body.
    Input,
    /// The `output` pseudo-element of a compound body.
    Output,
}

/// An element declared (explicitly or anonymously) in a body.
#[derive(Clone, Debug)]
pub(crate) struct PElem {
    pub name: String,
    pub kind: ElemKind,
    pub config: Option<RawConfig>,
    pub span: Span,
}

/// A connection between two elements of the same body.
#[derive(Clone, Debug)]
pub(crate) struct PConn {
    pub from: usize,
    pub from_port: usize,
    pub to: usize,
    pub to_port: usize,
    /// Position of the `->`.
    pub span: Span,
    /// Position of the source endpoint (its element or output port).
    pub from_span: Span,
    /// Position of the destination endpoint (its input port or element).
    pub to_span: Span,
}

/// The top-level configuration or the body of a compound class.
#[derive(Clone, Debug, Default)]
pub(crate) struct Body {
    pub elements: Vec<PElem>,
    pub conns: Vec<PConn>,
}

/// A compound element class (`elementclass Name { ... }` or `{ ... }`).
#[derive(Clone, Debug)]
pub(crate) struct ClassDef {
    pub name: String,
    /// Positional parameters, without `$`.
    pub params: Vec<String>,
    /// Keyword parameters: (KEYWORD, variable without `$`).
    pub keywords: Vec<(String, String)>,
    pub body: Body,
    /// The class in whose body this class was defined (`None`: top level).
    pub parent: Option<ClassId>,
    /// Input ports of `input` that the body uses.
    pub inputs: BTreeSet<usize>,
    /// Output ports of `output` that the body uses.
    pub outputs: BTreeSet<usize>,
}

/// Result of parsing.
#[derive(Debug, Default)]
pub(crate) struct Ast {
    pub top: Body,
    pub classes: Vec<ClassDef>,
    /// Top-level `define`s: (name without `$`, value, position).
    pub defines: Vec<(String, String, Span)>,
    pub requires: Vec<String>,
}

/// What a class name in scope stands for.
#[derive(Clone, Debug)]
enum Binding {
    Compound(ClassId),
    Primitive(String),
}

/// Parsing state of one body.
struct Scope {
    class: Option<ClassId>,
    body: Body,
    names: HashMap<String, usize>,
    classes: HashMap<String, (Binding, Span)>,
    /// Primitive class names used so far (first use), for define-after-use.
    used_classes: HashMap<String, Span>,
    /// Bare identifiers that became anonymous elements (first use).
    bare: HashMap<String, Span>,
    /// Number of pseudo-elements (`input`, `output`) at the start of `body`.
    pseudo: usize,
}

impl Scope {
    fn new(class: Option<ClassId>, file: &Arc<str>) -> Scope {
        let mut s = Scope {
            class,
            body: Body::default(),
            names: HashMap::new(),
            classes: HashMap::new(),
            used_classes: HashMap::new(),
            bare: HashMap::new(),
            pseudo: 0,
        };
        if class.is_some() {
            for (name, kind) in [("input", ElemKind::Input), ("output", ElemKind::Output)] {
                s.body.elements.push(PElem {
                    name: name.into(),
                    kind,
                    config: None,
                    span: Span::new(file.clone(), 0, 0),
                });
                s.names.insert(name.into(), s.body.elements.len() - 1);
            }
            s.pseudo = 2;
        }
        s
    }
}

/// One side of a connection as parsed.
struct Endpoint {
    elem: usize,
    /// Input port written before the element, with its position.
    in_port: Option<(usize, Span)>,
    /// Position of the element reference.
    span: Span,
    /// `a, b :: C` declaration (cannot take part in a connection).
    multi: bool,
}

/// The parser.
pub(crate) struct Parser {
    lex: Lexer,
    peeked: Option<Token>,
    file: Arc<str>,
    scopes: Vec<Scope>,
    ast: Ast,
}

fn is_reserved(name: &str) -> bool {
    name == "input" || name == "output"
}

impl Parser {
    pub(crate) fn new(source: &str, file: Arc<str>) -> Parser {
        Parser {
            lex: Lexer::new(source, file.clone()),
            peeked: None,
            scopes: vec![Scope::new(None, &file)],
            file,
            ast: Ast::default(),
        }
    }

    /// Parses the whole input.
    pub(crate) fn parse(mut self) -> Result<Ast> {
        self.parse_stmts(None)?;
        let top = self.scopes.pop().map(|s| s.body).unwrap_or_default();
        self.ast.top = top;
        Ok(self.ast)
    }

    // ----- token helpers -----

    fn span_of(&self, t: &Token) -> Span {
        Span::new(self.file.clone(), t.line, t.col)
    }

    fn peek(&mut self) -> Result<&Token> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lex.next_token()?);
        }
        match &self.peeked {
            Some(t) => Ok(t),
            None => unreachable!("peeked token was just filled"),
        }
    }

    fn peek_tok(&mut self) -> Result<Tok> {
        Ok(self.peek()?.tok.clone())
    }

    /// The token after the peeked one, without consuming anything.
    fn peek_second(&mut self) -> Result<Tok> {
        self.peek()?;
        let saved = self.lex.save();
        let t = self.lex.next_token();
        self.lex.restore(saved);
        Ok(t?.tok)
    }

    fn bump(&mut self) -> Result<Token> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lex.next_token(),
        }
    }

    fn err<T>(&self, t: &Token, msg: impl Into<String>) -> Result<T> {
        Err(Error::new(self.span_of(t), msg))
    }

    fn expected<T>(&self, t: &Token, what: &str) -> Result<T> {
        self.err(t, format!("expected {what}, found {}", t.tok.describe()))
    }

    /// Reads `( config )` if the next token is `(`.
    fn opt_config(&mut self) -> Result<Option<RawConfig>> {
        if self.peek()?.tok != Tok::LParen {
            return Ok(None);
        }
        let open = self.bump()?;
        self.lex.read_config(open.line, open.col).map(Some)
    }

    fn scope(&mut self) -> &mut Scope {
        let n = self.scopes.len();
        &mut self.scopes[n - 1]
    }

    fn in_compound(&self) -> bool {
        self.scopes.last().is_some_and(|s| s.class.is_some())
    }

    // ----- statements -----

    /// Parses statements until end of file (top level, `open` is `None`) or
    /// until the `}` closing a compound body opened by `open` (not consumed).
    fn parse_stmts(&mut self, open: Option<&Token>) -> Result<()> {
        loop {
            let t = self.peek()?.clone();
            let connection = match &t.tok {
                Tok::Eof => {
                    return match open {
                        Some(o) => self.err(o, "unclosed `{`: expected `}` before end of file"),
                        None => Ok(()),
                    }
                }
                Tok::RBrace if open.is_some() => return Ok(()),
                Tok::Semi => {
                    self.bump()?;
                    continue;
                }
                Tok::Ident(w) if w == "elementclass" => {
                    self.bump()?;
                    self.parse_elementclass(&t)?;
                    false
                }
                Tok::Ident(w) if (w == "require" || w == "define") => {
                    if self.peek_second()? == Tok::LParen {
                        self.bump()?;
                        self.parse_directive(&t, w == "define")?;
                        false
                    } else {
                        self.parse_connection()?;
                        true
                    }
                }
                Tok::Ident(_) | Tok::LBrace | Tok::LBracket => {
                    self.parse_connection()?;
                    true
                }
                _ => return self.expected(&t, "element declaration or connection"),
            };
            let t = self.peek()?.clone();
            match t.tok {
                Tok::Semi => {
                    self.bump()?;
                }
                Tok::Eof | Tok::Ident(_) | Tok::LBrace => {}
                Tok::RBrace if open.is_some() => {}
                _ if connection => return self.expected(&t, "`->` or `;`"),
                _ => return self.expected(&t, "`;`"),
            }
        }
    }

    /// `require(...)` or `define(...)`; the keyword was consumed.
    fn parse_directive(&mut self, kw: &Token, define: bool) -> Result<()> {
        let raw = match self.opt_config()? {
            Some(raw) => raw,
            None => return self.expected(kw, "`(`"),
        };
        let text = process_config(&raw, &self.file, None)?;
        let args = split_args(&text);
        if !define {
            self.ast
                .requires
                .extend(args.into_iter().filter(|a| !a.is_empty()));
            return Ok(());
        }
        if self.in_compound() {
            return self.err(kw, "`define` is only allowed at top level");
        }
        let span = self.span_of(kw);
        for arg in args.iter().filter(|a| !a.is_empty()) {
            let rest = arg.strip_prefix('$').unwrap_or("");
            let name_len = rest
                .find(|c: char| !crate::lexer::is_var_char(c))
                .unwrap_or(rest.len());
            let (name, value) = rest.split_at(name_len);
            let value_ok = value.is_empty() || value.starts_with(char::is_whitespace);
            if name.is_empty() || !value_ok {
                return Err(Error::new(
                    span,
                    format!("expected `$NAME value` in `define`, found `{arg}`"),
                ));
            }
            if let Some((_, _, prev)) = self.ast.defines.iter().find(|d| d.0 == name) {
                return Err(Error::new(
                    span,
                    format!("variable `${name}` already defined at {prev}"),
                ));
            }
            self.ast
                .defines
                .push((name.to_string(), value.trim().to_string(), span.clone()));
        }
        Ok(())
    }

    /// `elementclass Name { body }` or `elementclass Name Other`; the
    /// keyword was consumed.
    fn parse_elementclass(&mut self, _kw: &Token) -> Result<()> {
        let nt = self.bump()?;
        let name = match &nt.tok {
            Tok::Ident(n) if !is_reserved(n) => n.clone(),
            _ => return self.expected(&nt, "element class name after `elementclass`"),
        };
        let span = self.span_of(&nt);
        if let Some((_, prev)) = self.scope().classes.get(&name) {
            let prev = prev.clone();
            return Err(Error::new(
                span,
                format!("elementclass `{name}` already defined at {prev}"),
            ));
        }
        if let Some(used) = self.scope().used_classes.get(&name) {
            let used = used.clone();
            return Err(Error::new(
                span,
                format!(
                    "elementclass `{name}` defined after use at {used}: \
                     element classes must be defined before they are used"
                ),
            ));
        }
        let t = self.peek()?.clone();
        match &t.tok {
            Tok::LBrace => {
                self.bump()?;
                let id = self.ast.classes.len();
                // Registered before the body is parsed, so that a recursive
                // class is reported as such during expansion.
                self.scope()
                    .classes
                    .insert(name.clone(), (Binding::Compound(id), span.clone()));
                self.parse_compound_body(&t, name)?;
                Ok(())
            }
            Tok::Ident(other) if !is_reserved(other) => {
                self.bump()?;
                if *other == name {
                    return self.err(
                        &t,
                        format!("elementclass `{name}` cannot be a synonym for itself"),
                    );
                }
                let binding = match self.lookup_class(other) {
                    Some(b) => b,
                    None => {
                        let s = self.span_of(&t);
                        self.scope().used_classes.entry(other.clone()).or_insert(s);
                        Binding::Primitive(other.clone())
                    }
                };
                self.scope().classes.insert(name, (binding, span));
                Ok(())
            }
            _ => self.expected(
                &t,
                &format!("`{{` or element class name after `elementclass {name}`"),
            ),
        }
    }

    fn lookup_class(&self, name: &str) -> Option<Binding> {
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.classes.get(name).map(|(b, _)| b.clone()))
    }

    /// Parses a compound body after its `{` (token `open`), including the
    /// closing `}`, and returns the new class.
    fn parse_compound_body(&mut self, open: &Token, name: String) -> Result<ClassId> {
        if self.scopes.len() > MAX_NESTING {
            return self.err(
                open,
                format!("compound elements nested too deeply (more than {MAX_NESTING} levels)"),
            );
        }
        let id = self.ast.classes.len();
        let parent = self.scopes.last().and_then(|s| s.class);
        self.ast.classes.push(ClassDef {
            name,
            params: Vec::new(),
            keywords: Vec::new(),
            body: Body::default(),
            parent,
            inputs: BTreeSet::new(),
            outputs: BTreeSet::new(),
        });
        self.parse_params(id)?;
        self.scopes.push(Scope::new(Some(id), &self.file));
        let result = self.parse_stmts(Some(open));
        let Some(scope) = self.scopes.pop() else {
            unreachable!("scope pushed above")
        };
        result?;
        self.bump()?; // `}`
        if let Some(outer) = self.scopes.last_mut() {
            for (k, v) in scope.used_classes {
                outer.used_classes.entry(k).or_insert(v);
            }
        }
        let class = &mut self.ast.classes[id];
        class.body = scope.body;
        for c in &class.body.conns {
            if c.from == 0 {
                class.inputs.insert(c.from_port);
            }
            if c.to == 1 {
                class.outputs.insert(c.to_port);
            }
        }
        Ok(id)
    }

    /// Optional `$a, $b, KEY $k |` parameter list at the start of a body.
    fn parse_params(&mut self, id: ClassId) -> Result<()> {
        let starts = match self.peek_tok()? {
            Tok::Var(_) | Tok::Bar => true,
            Tok::Ident(_) => matches!(self.peek_second()?, Tok::Var(_)),
            _ => false,
        };
        if !starts {
            return Ok(());
        }
        let mut seen: Vec<String> = Vec::new();
        loop {
            let t = self.bump()?;
            let (keyword, var) = match &t.tok {
                Tok::Bar if seen.is_empty() => return Ok(()),
                Tok::Var(v) => (None, v.clone()),
                Tok::Ident(k) => {
                    let vt = self.bump()?;
                    match vt.tok {
                        Tok::Var(v) => (Some(k.clone()), v),
                        _ => {
                            return self
                                .expected(&vt, &format!("parameter variable after keyword `{k}`"))
                        }
                    }
                }
                _ => return self.expected(&t, "parameter (`$name` or `KEYWORD $name`)"),
            };
            if seen.contains(&var) {
                return self.err(&t, format!("parameter `${var}` declared twice"));
            }
            let class = &mut self.ast.classes[id];
            if let Some(k) = keyword {
                if class.keywords.iter().any(|(kk, _)| *kk == k) {
                    return self.err(&t, format!("keyword `{k}` declared twice"));
                }
                class.keywords.push((k, var.clone()));
            } else {
                class.params.push(var.clone());
            }
            seen.push(var);
            let sep = self.bump()?;
            match sep.tok {
                Tok::Comma => {}
                Tok::Bar => return Ok(()),
                _ => return self.expected(&sep, "`,` or `|` after parameter"),
            }
        }
    }

    // ----- connections -----

    fn parse_port(&mut self) -> Result<(usize, Span)> {
        let open = self.bump()?; // `[`
        let span = self.span_of(&open);
        let t = self.bump()?;
        let port = match &t.tok {
            Tok::Number(n) => match n.parse::<usize>() {
                Ok(p) if p <= u16::MAX as usize => p,
                _ => return self.err(&t, format!("port number `{n}` is too large")),
            },
            _ => return self.expected(&t, "port number"),
        };
        let close = self.bump()?;
        if close.tok != Tok::RBracket {
            return self.expected(&close, "`]` after port number");
        }
        Ok((port, span))
    }

    /// `endpoint (-> endpoint)*` with optional ports.
    fn parse_connection(&mut self) -> Result<()> {
        // (element, output port, its span, `->` token) of the previous hop.
        let mut prev: Option<(usize, usize, Span, Token)> = None;
        loop {
            let ep = self.parse_endpoint(prev.as_ref().map(|p| &p.3))?;
            if ep.multi && prev.is_some() {
                return Err(Error::new(
                    ep.span,
                    "a declaration of several elements cannot be part of a connection",
                ));
            }
            match prev.take() {
                Some((from, from_port, from_span, arrow)) => {
                    let (to_port, to_span) = ep.in_port.clone().unwrap_or((0, ep.span.clone()));
                    self.connect(
                        from, from_port, from_span, ep.elem, to_port, to_span, &arrow,
                    )?;
                }
                None => {
                    if let Some((p, span)) = &ep.in_port {
                        return Err(Error::new(
                            span.clone(),
                            format!("expected element and `->` before input port `[{p}]`"),
                        ));
                    }
                }
            }
            let out = if self.peek()?.tok == Tok::LBracket {
                Some(self.parse_port()?)
            } else {
                None
            };
            let t = self.peek()?.clone();
            if ep.multi && (out.is_some() || t.tok == Tok::Arrow) {
                return Err(Error::new(
                    ep.span,
                    "a declaration of several elements cannot be part of a connection",
                ));
            }
            if t.tok == Tok::Arrow {
                let arrow = self.bump()?;
                let (port, span) = out.unwrap_or((0, ep.span.clone()));
                prev = Some((ep.elem, port, span, arrow));
                continue;
            }
            if let Some((p, _)) = out {
                return self.expected(&t, &format!("`->` after output port `[{p}]`"));
            }
            return Ok(());
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn connect(
        &mut self,
        from: usize,
        from_port: usize,
        from_span: Span,
        to: usize,
        to_port: usize,
        to_span: Span,
        arrow: &Token,
    ) -> Result<()> {
        let kinds = {
            let els = &self.scope().body.elements;
            (els[from].kind.clone(), els[to].kind.clone())
        };
        if let ElemKind::Output = kinds.0 {
            return Err(Error::new(
                from_span,
                "`output` can only be used as a connection destination, as in `... -> [N]output`",
            ));
        }
        if let ElemKind::Input = kinds.1 {
            return Err(Error::new(
                to_span,
                "`input` can only be used as a connection source, as in `input[N] -> ...`",
            ));
        }
        let span = self.span_of(arrow);
        self.scope().body.conns.push(PConn {
            from,
            from_port,
            to,
            to_port,
            span,
            from_span,
            to_span,
        });
        Ok(())
    }

    /// Parses `[port]? element`. `arrow` is the preceding `->`, if any.
    fn parse_endpoint(&mut self, arrow: Option<&Token>) -> Result<Endpoint> {
        let in_port = if self.peek()?.tok == Tok::LBracket {
            Some(self.parse_port()?)
        } else {
            None
        };
        let t = self.bump()?;
        let span = self.span_of(&t);
        let (elem, multi) = match &t.tok {
            Tok::Ident(name) => self.parse_element(name.clone(), &t)?,
            Tok::LBrace => {
                let class = self.parse_compound_body(&t, String::new())?;
                let name = self.anon_name("Compound");
                (
                    self.add_element(name, ElemKind::Compound(class), None, span.clone()),
                    false,
                )
            }
            _ => {
                return match (&in_port, arrow) {
                    (Some((p, _)), _) => {
                        self.expected(&t, &format!("element after input port `[{p}]`"))
                    }
                    (None, Some(_)) => self.expected(&t, "element after `->`"),
                    (None, None) => self.expected(&t, "element"),
                }
            }
        };
        Ok(Endpoint {
            elem,
            in_port,
            span,
            multi,
        })
    }

    fn add_element(
        &mut self,
        name: String,
        kind: ElemKind,
        config: Option<RawConfig>,
        span: Span,
    ) -> usize {
        let scope = self.scope();
        let idx = scope.body.elements.len();
        scope.names.insert(name.clone(), idx);
        scope.body.elements.push(PElem {
            name,
            kind,
            config,
            span,
        });
        idx
    }

    /// Click-style anonymous name `Class@N`.
    fn anon_name(&mut self, class: &str) -> String {
        let scope = self.scope();
        let mut n = scope.body.elements.len() - scope.pseudo + 1;
        loop {
            let name = format!("{class}@{n}");
            if !scope.names.contains_key(&name) {
                return name;
            }
            n += 1;
        }
    }

    fn class_kind(&mut self, class: &str, span: &Span) -> ElemKind {
        match self.lookup_class(class) {
            Some(Binding::Compound(id)) => ElemKind::Compound(id),
            Some(Binding::Primitive(p)) => ElemKind::Primitive(p),
            None => {
                self.scope()
                    .used_classes
                    .entry(class.to_string())
                    .or_insert_with(|| span.clone());
                ElemKind::Primitive(class.to_string())
            }
        }
    }

    /// After an identifier in element position: a declaration
    /// (`a :: C`, `a, b :: C`), a reference, or an anonymous element.
    fn parse_element(&mut self, name: String, t: &Token) -> Result<(usize, bool)> {
        let span = self.span_of(t);
        let next = self.peek()?.clone();
        if next.tok == Tok::DColon || next.tok == Tok::Comma {
            let mut names = vec![(name, span)];
            while self.peek()?.tok == Tok::Comma {
                self.bump()?;
                let nt = self.bump()?;
                match &nt.tok {
                    Tok::Ident(n) => names.push((n.clone(), self.span_of(&nt))),
                    _ => return self.expected(&nt, "element name after `,`"),
                }
            }
            let dc = self.bump()?;
            if dc.tok != Tok::DColon {
                return self.expected(&dc, "`::` after element names");
            }
            let ct = self.bump()?;
            let cspan = self.span_of(&ct);
            let kind = match &ct.tok {
                Tok::Ident(c) if !is_reserved(c) => self.class_kind(c, &cspan),
                Tok::LBrace => {
                    let id = self.parse_compound_body(&ct, String::new())?;
                    ElemKind::Compound(id)
                }
                _ => return self.expected(&ct, "element class after `::`"),
            };
            let config = match kind {
                ElemKind::Compound(_) if ct.tok == Tok::LBrace => None,
                _ => self.opt_config()?,
            };
            let multi = names.len() > 1;
            let mut last = 0;
            for (n, nspan) in names {
                self.check_new_name(&n, &nspan)?;
                last = self.add_element(n, kind.clone(), config.clone(), nspan);
            }
            return Ok((last, multi));
        }
        // Reference to a declared element?
        if let Some(&idx) = self.scope().names.get(&name) {
            if next.tok == Tok::LParen && is_reserved(&name) {
                return self.err(
                    &next,
                    format!("expected `->` or `;`, found `(`: `{name}` cannot be configured"),
                );
            }
            if next.tok == Tok::LParen {
                let prev = self.scope().body.elements[idx].span.clone();
                return self.err(
                    &next,
                    format!(
                        "expected `->` or `;`, found `(`: `{name}` is an element (declared at {prev}), not an element class"
                    ),
                );
            }
            return Ok((idx, false));
        }
        if is_reserved(&name) {
            return self.err(t, format!("`{name}` used outside an elementclass"));
        }
        // Anonymous element of class `name`.
        let kind = self.class_kind(&name, &span);
        let config = self.opt_config()?;
        if config.is_none() {
            self.scope()
                .bare
                .entry(name.clone())
                .or_insert_with(|| span.clone());
        }
        let anon = self.anon_name(&name);
        Ok((self.add_element(anon, kind, config, span), false))
    }

    fn check_new_name(&mut self, name: &str, span: &Span) -> Result<()> {
        if is_reserved(name) {
            return Err(Error::new(
                span.clone(),
                format!("`{name}` is reserved for compound element ports and cannot be declared"),
            ));
        }
        let scope = self.scope();
        if let Some(&idx) = scope.names.get(name) {
            let prev = scope.body.elements[idx].span.clone();
            return Err(Error::new(
                span.clone(),
                format!("element `{name}` already declared at {prev}"),
            ));
        }
        if let Some(prev) = scope.bare.get(name) {
            let prev = prev.clone();
            return Err(Error::new(
                span.clone(),
                format!(
                    "element `{name}` declared after use at {prev}: \
                     elements must be declared before they are connected"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ast(src: &str) -> Ast {
        Parser::new(src, "t".into()).parse().unwrap()
    }

    #[test]
    fn class_signature_and_ports() {
        let a = ast(
            "elementclass E { $a, K $k, $b | input[2] -> x :: X -> [1]output; input -> output }",
        );
        assert_eq!(a.classes.len(), 1);
        let c = &a.classes[0];
        assert_eq!(c.name, "E");
        assert_eq!(c.params, vec!["a", "b"]);
        assert_eq!(c.keywords, vec![("K".to_string(), "k".to_string())]);
        assert_eq!(c.inputs.iter().copied().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(c.outputs.iter().copied().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(c.parent, None);
        // input, output, x
        assert_eq!(c.body.elements.len(), 3);
        assert!(a.top.elements.is_empty());
    }

    #[test]
    fn keyword_only_and_empty_parameter_lists() {
        let a =
            ast("elementclass E { K $k | input -> output } elementclass F { | input -> output }");
        assert_eq!(a.classes[0].keywords.len(), 1);
        assert!(a.classes[1].params.is_empty() && a.classes[1].keywords.is_empty());
    }

    #[test]
    fn nested_classes_record_their_parent_and_are_local() {
        let a = ast(
            "elementclass O { elementclass I { input -> output } input -> I -> output }\nIdle -> I",
        );
        assert_eq!(a.classes[1].name, "I");
        assert_eq!(a.classes[1].parent, Some(0));
        // Outside `O`, `I` is an ordinary (primitive) class name.
        assert!(matches!(&a.top.elements[1].kind, ElemKind::Primitive(c) if c == "I"));
    }

    #[test]
    fn configs_stay_raw_until_expansion() {
        let a = ast("x :: X( $undefined /* c */ )");
        let raw = a.top.elements[0].config.as_ref().unwrap();
        assert_eq!(raw.text, " $undefined /* c */ ");
        assert_eq!((raw.line, raw.col), (1, 8));
    }

    #[test]
    fn defines_are_collected() {
        let a = ast("define($A 1 2, $B)");
        let d: Vec<(&str, &str)> = a
            .defines
            .iter()
            .map(|(n, v, _)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(d, vec![("A", "1 2"), ("B", "")]);
    }
}
