//! Compound-element expansion: syntax tree to a flat [`Config`].
//!
//! Every compound instance gets two *tunnels* (one for its `input`, one for
//! its `output`). Connections to a compound's port `i` go into its input
//! tunnel's port `i`; the body's `input[i] -> x` leaves from the same tunnel
//! port, and symmetrically for outputs. After all bodies are expanded, each
//! connection leaving a real element is followed through any chain of
//! tunnels (this also handles `input -> output` pass-throughs) to the real
//! elements it reaches.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::error::{Error, Result, Span};
use crate::lexer::{process_config, split_args};
use crate::parser::{Ast, Body, ClassDef, ClassId, ElemKind, PConn, PElem};
use crate::{Config, Connection, ElementDecl};

/// Maximum depth of nested compound instantiation.
pub(crate) const MAX_DEPTH: usize = 64;

/// Upper bound on elements, compound instances and connections created by
/// expansion, so that exponential configurations fail instead of
/// exhausting memory.
pub(crate) const MAX_SIZE: usize = 1_000_000;

/// A variable scope: compound parameters (or top-level defines), chained
/// to the scope in which the compound class was defined.
struct Env<'a> {
    vars: HashMap<String, String>,
    class: Option<ClassId>,
    parent: Option<&'a Env<'a>>,
}

impl<'a> Env<'a> {
    fn lookup(&self, name: &str) -> Option<String> {
        let mut env = Some(self);
        while let Some(e) = env {
            if let Some(v) = e.vars.get(name) {
                return Some(v.clone());
            }
            env = e.parent;
        }
        None
    }

    /// The innermost frame that belongs to `class` (or the root frame).
    fn frame_for(&self, class: Option<ClassId>) -> &Env<'a> {
        let mut env = self;
        loop {
            if env.class == class {
                return env;
            }
            match env.parent {
                Some(p) => env = p,
                None => return env,
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Node {
    Real(usize),
    Tunnel(usize),
}

struct Edge {
    from: Node,
    from_port: usize,
    to: Node,
    to_port: usize,
    span: Span,
}

struct Expander<'a> {
    ast: &'a Ast,
    elements: Vec<ElementDecl>,
    names: HashMap<String, usize>,
    edges: Vec<Edge>,
    tunnels: usize,
    stack: Vec<ClassId>,
    work: usize,
}

/// Expands `ast` into a flat configuration. `defines` override the
/// configuration's own `define`s.
pub(crate) fn expand(ast: &Ast, defines: &[(String, String)]) -> Result<Config> {
    let mut vars: HashMap<String, String> = ast
        .defines
        .iter()
        .map(|(n, v, _)| (n.clone(), v.clone()))
        .collect();
    for (n, v) in defines {
        let n = n.strip_prefix('$').unwrap_or(n);
        vars.insert(n.to_string(), v.clone());
    }
    let root = Env {
        vars,
        class: None,
        parent: None,
    };
    let mut ex = Expander {
        ast,
        elements: Vec::new(),
        names: HashMap::new(),
        edges: Vec::new(),
        tunnels: 0,
        stack: Vec::new(),
        work: 0,
    };
    ex.expand_body(&ast.top, &root, "", None)?;
    let connections = ex.resolve()?;
    Ok(Config {
        elements: ex.elements,
        connections,
        requires: ast.requires.clone(),
    })
}

fn class_desc(class: &ClassDef) -> String {
    if class.name.is_empty() {
        "its anonymous compound class".to_string()
    } else {
        format!("elementclass `{}`", class.name)
    }
}

fn ports_desc(kind: &str, ports: &BTreeSet<usize>) -> String {
    if ports.is_empty() {
        return format!("no {kind} ports");
    }
    let list: Vec<String> = ports.iter().map(|p| p.to_string()).collect();
    let s = if ports.len() == 1 { "" } else { "s" };
    format!("{kind} port{s} {}", list.join(", "))
}

impl<'a> Expander<'a> {
    fn bump_work(&mut self, span: &Span) -> Result<()> {
        self.work += 1;
        if self.work > MAX_SIZE {
            return Err(Error::new(
                span.clone(),
                format!("configuration too large: expansion creates more than {MAX_SIZE} elements and connections"),
            ));
        }
        Ok(())
    }

    fn config(&self, e: &PElem, env: &Env<'_>) -> Result<String> {
        match &e.config {
            Some(raw) => {
                let lookup = |name: &str| env.lookup(name);
                process_config(raw, &e.span.file, Some(&lookup))
            }
            None => Ok(String::new()),
        }
    }

    fn add_element(
        &mut self,
        name: String,
        class: &str,
        config: String,
        span: &Span,
    ) -> Result<usize> {
        if let Some(&prev) = self.names.get(&name) {
            return Err(Error::new(
                span.clone(),
                format!(
                    "element `{name}` conflicts with element `{name}` declared at {}",
                    self.elements[prev].span
                ),
            ));
        }
        self.bump_work(span)?;
        let idx = self.elements.len();
        self.names.insert(name.clone(), idx);
        self.elements.push(ElementDecl {
            name,
            class: class.to_string(),
            config,
            span: span.clone(),
        });
        Ok(idx)
    }

    fn expand_body(
        &mut self,
        body: &Body,
        env: &Env<'_>,
        prefix: &str,
        tunnels: Option<(usize, usize)>,
    ) -> Result<()> {
        let ast = self.ast;
        let mut local: Vec<(Option<Node>, Option<Node>)> = Vec::with_capacity(body.elements.len());
        for e in &body.elements {
            let nodes = match &e.kind {
                ElemKind::Input => (None, tunnels.map(|t| Node::Tunnel(t.0))),
                ElemKind::Output => (tunnels.map(|t| Node::Tunnel(t.1)), None),
                ElemKind::Primitive(class) => {
                    let config = self.config(e, env)?;
                    let idx =
                        self.add_element(format!("{prefix}{}", e.name), class, config, &e.span)?;
                    (Some(Node::Real(idx)), Some(Node::Real(idx)))
                }
                ElemKind::Compound(cid) => {
                    let (i, o) = self.instantiate(&ast.classes[*cid], *cid, e, env, prefix)?;
                    (Some(Node::Tunnel(i)), Some(Node::Tunnel(o)))
                }
            };
            local.push(nodes);
        }
        for c in &body.conns {
            self.check_ports(body, c)?;
            let from = local.get(c.from).and_then(|n| n.1);
            let to = local.get(c.to).and_then(|n| n.0);
            if let (Some(from), Some(to)) = (from, to) {
                self.bump_work(&c.span)?;
                self.edges.push(Edge {
                    from,
                    from_port: c.from_port,
                    to,
                    to_port: c.to_port,
                    span: c.span.clone(),
                });
            }
        }
        Ok(())
    }

    /// Errors if a connection uses a compound port its body never mentions.
    fn check_ports(&self, body: &Body, c: &PConn) -> Result<()> {
        if let Some(PElem {
            name,
            kind: ElemKind::Compound(cid),
            ..
        }) = body.elements.get(c.to)
        {
            let class = &self.ast.classes[*cid];
            if !class.inputs.contains(&c.to_port) {
                return Err(Error::new(
                    c.to_span.clone(),
                    format!(
                        "`{name}` has no input port {}: {} uses {}",
                        c.to_port,
                        class_desc(class),
                        ports_desc("input", &class.inputs)
                    ),
                ));
            }
        }
        if let Some(PElem {
            name,
            kind: ElemKind::Compound(cid),
            ..
        }) = body.elements.get(c.from)
        {
            let class = &self.ast.classes[*cid];
            if !class.outputs.contains(&c.from_port) {
                return Err(Error::new(
                    c.from_span.clone(),
                    format!(
                        "`{name}` has no output port {}: {} uses {}",
                        c.from_port,
                        class_desc(class),
                        ports_desc("output", &class.outputs)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Expands one compound instance; returns its (input, output) tunnels.
    fn instantiate(
        &mut self,
        class: &ClassDef,
        cid: ClassId,
        e: &PElem,
        env: &Env<'_>,
        prefix: &str,
    ) -> Result<(usize, usize)> {
        if self.stack.contains(&cid) {
            return Err(Error::new(
                e.span.clone(),
                format!(
                    "recursive elementclass `{}`: it instantiates itself",
                    class.name
                ),
            ));
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(Error::new(
                e.span.clone(),
                format!("compound elements nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        self.bump_work(&e.span)?;
        let args = split_args(&self.config(e, env)?);
        let mut vars = HashMap::new();
        let mut positional = Vec::new();
        for arg in args {
            let first = arg.split_whitespace().next().unwrap_or("");
            if let Some((kw, var)) = class.keywords.iter().find(|(k, _)| k == first) {
                if vars.contains_key(var) {
                    return Err(Error::new(
                        e.span.clone(),
                        format!("keyword argument `{kw}` given twice"),
                    ));
                }
                vars.insert(var.clone(), arg[first.len()..].trim().to_string());
            } else {
                positional.push(arg);
            }
        }
        if positional.len() != class.params.len() {
            let params: Vec<String> = class.params.iter().map(|p| format!("${p}")).collect();
            let s = if params.len() == 1 { "" } else { "s" };
            let list = if params.is_empty() {
                String::new()
            } else {
                format!(" ({})", params.join(", "))
            };
            return Err(Error::new(
                e.span.clone(),
                format!(
                    "{} expects {} argument{s}{list}, found {}",
                    class_desc(class).replace("its anonymous", "anonymous"),
                    params.len(),
                    positional.len()
                ),
            ));
        }
        for (p, v) in class.params.iter().zip(positional) {
            vars.insert(p.clone(), v);
        }
        for (_, var) in &class.keywords {
            vars.entry(var.clone()).or_default();
        }
        let frame = env.frame_for(class.parent);
        let inner = Env {
            vars,
            class: Some(cid),
            parent: Some(frame),
        };
        let tin = self.tunnels;
        self.tunnels += 2;
        self.stack.push(cid);
        let result = self.expand_body(
            &class.body,
            &inner,
            &format!("{prefix}{}/", e.name),
            Some((tin, tin + 1)),
        );
        self.stack.pop();
        result.map(|()| (tin, tin + 1))
    }

    /// Follows edges through tunnels to produce real connections.
    fn resolve(&mut self) -> Result<Vec<Connection>> {
        let mut from_tunnel: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
        for (i, e) in self.edges.iter().enumerate() {
            if let Node::Tunnel(t) = e.from {
                from_tunnel.entry((t, e.from_port)).or_default().push(i);
            }
        }
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut steps = 0usize;
        for e in &self.edges {
            let Node::Real(g) = e.from else { continue };
            let mut stack = vec![(e.to, e.to_port)];
            let mut visited = HashSet::new();
            while let Some((node, port)) = stack.pop() {
                steps += 1;
                if steps > 10 * MAX_SIZE {
                    return Err(Error::new(
                        e.span.clone(),
                        "configuration too large: too many connections through compound elements",
                    ));
                }
                match node {
                    Node::Real(h) => {
                        if seen.insert((g, e.from_port, h, port)) {
                            out.push(Connection {
                                from: g,
                                from_port: e.from_port,
                                to: h,
                                to_port: port,
                                span: e.span.clone(),
                            });
                        }
                    }
                    Node::Tunnel(t) => {
                        if visited.insert((t, port)) {
                            if let Some(list) = from_tunnel.get(&(t, port)) {
                                for &j in list.iter().rev() {
                                    stack.push((self.edges[j].to, self.edges[j].to_port));
                                }
                            }
                        }
                    }
                }
            }
        }
        out.sort_by_key(|c| (c.from, c.from_port, c.to, c.to_port));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::parse_str;

    fn edges(src: &str) -> Vec<(String, usize, String, usize)> {
        let c = parse_str(src, "t", &[]).unwrap();
        c.connections
            .iter()
            .map(|x| {
                let n = |i: usize| c.elements[i].name.clone();
                (n(x.from), x.from_port, n(x.to), x.to_port)
            })
            .collect()
    }

    #[test]
    fn passthrough_cycle_terminates() {
        // A loop made only of pass-through compounds creates no connection.
        let e = edges("elementclass W { input -> output }\nw :: W; v :: W; w -> v -> w");
        assert!(e.is_empty());
    }

    #[test]
    fn nested_passthrough_chains() {
        let e = edges(
            "elementclass W { input -> output }\n\
             elementclass WW { input -> W -> W -> output }\n\
             a :: A; b :: B; a -> WW -> WW -> b",
        );
        assert_eq!(e, vec![("a".into(), 0, "b".into(), 0)]);
    }

    #[test]
    fn ports_survive_tunnels() {
        let e = edges(
            "elementclass S { input[3] -> [2]output }\n\
             a :: A; b :: B; a[7] -> [3]s :: S[2] -> [5]b",
        );
        assert_eq!(e, vec![("a".into(), 7, "b".into(), 5)]);
    }
}
