//! One NF: its Click configuration instantiated as an element graph.

use elements::{BuildCtx, Element, Names, Role};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// An error building an NF: the configuration's file, line and column, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    /// `file:line:col: message`.
    pub message: String,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuildError {}

/// Where a packet goes when it leaves an element's output port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Index of the target element in the NF.
    pub element: usize,
    /// Input port of the target.
    pub port: usize,
}

/// An NF: elements, their names and classes, and the connections between them.
pub struct Nf {
    /// NF name (chain level).
    pub name: String,
    /// The elements, in declaration order (an executor may take them; the metadata below
    /// stays).
    pub elements: Vec<Box<dyn Element>>,
    /// Click class of each element.
    pub classes: Vec<&'static str>,
    /// Role of each element (device, dump, or inner).
    pub roles: Vec<Role>,
    /// Element names (`Class@N` for anonymous ones, `compound/member` inside compounds).
    pub names: Vec<String>,
    /// Where each element was declared (`file:line:col`).
    pub spans: Vec<String>,
    /// Each element's configuration string as written (variables substituted).
    pub configs: Vec<String>,
    /// For each element, for each output port, the connection (None if unconnected).
    pub edges: Vec<Vec<Option<Edge>>>,
    /// Number of connected inputs of each element.
    pub ninputs: Vec<usize>,
}

impl fmt::Debug for Nf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nf")
            .field("name", &self.name)
            .field("names", &self.names)
            .finish()
    }
}

/// Classes that only declare things (names, scheduling) and whose declarations other
/// elements read while being built.
fn declare(names: &mut Names, class: &str, name: &str, config: &str) -> Result<(), String> {
    match class {
        "AddressInfo" => names.add_address_info(config).map_err(|e| e.message),
        "IPRewriterPatterns" => names.add_patterns(config).map_err(|e| e.message),
        "RoundRobinIPMapper" => {
            names.add_mapper(name, class, config);
            Ok(())
        }
        _ => Ok(()),
    }
}

impl Nf {
    /// Instantiates `config` as NF `name`; relative file names in it resolve against `base_dir`.
    /// Qualified names (which seed elements' pseudo-random choices) are `NAME/ELEMENT` when
    /// `scoped`, else the element names as written.
    pub fn build(
        name: &str,
        config: &click::Config,
        base_dir: &Path,
        scoped: bool,
    ) -> Result<Nf, BuildError> {
        let n = config.elements.len();
        let mut ninputs = vec![0usize; n];
        let mut noutputs = vec![0usize; n];
        for c in &config.connections {
            noutputs[c.from] = noutputs[c.from].max(c.from_port + 1);
            ninputs[c.to] = ninputs[c.to].max(c.to_port + 1);
        }
        let err = |i: usize, msg: String| BuildError {
            message: format!("{}: {msg}", config.elements[i].span),
        };
        let mut names = Names::new();
        for (i, d) in config.elements.iter().enumerate() {
            let qualified = if scoped {
                format!("{name}/{}", d.name)
            } else {
                d.name.clone()
            };
            declare(&mut names, &d.class, &qualified, &d.config)
                .map_err(|m| err(i, format!("{} `{}`: {m}", d.class, d.name)))?;
            // Mappers are referred to by their local name in rewriter specs.
            if d.class == "RoundRobinIPMapper" {
                names.add_mapper(&d.name, &d.class, &d.config);
            }
        }
        let mut elements: Vec<Box<dyn Element>> = Vec::with_capacity(n);
        for (i, d) in config.elements.iter().enumerate() {
            let qualified = if scoped {
                format!("{name}/{}", d.name)
            } else {
                d.name.clone()
            };
            let bcx = BuildCtx {
                name: &qualified,
                ninputs: ninputs[i],
                noutputs: noutputs[i],
                names: &names,
                base_dir,
            };
            let e = elements::build(&d.class, &d.config, &bcx)
                .map_err(|e| err(i, format!("{} `{}`: {}", d.class, d.name, e.message)))?;
            let pc = e.port_count();
            if noutputs[i] > pc.max_out {
                return Err(err(
                    i,
                    format!(
                        "{} `{}` has {} ports, but output {} is connected",
                        d.class,
                        d.name,
                        pc.describe(),
                        noutputs[i] - 1
                    ),
                ));
            }
            if ninputs[i] > pc.max_in {
                return Err(err(
                    i,
                    format!(
                        "{} `{}` has {} ports, but input {} is connected",
                        d.class,
                        d.name,
                        pc.describe(),
                        ninputs[i] - 1
                    ),
                ));
            }
            if noutputs[i] < pc.min_out {
                return Err(err(
                    i,
                    format!(
                        "{} `{}` has {} ports, but output {} is not connected",
                        d.class,
                        d.name,
                        pc.describe(),
                        noutputs[i]
                    ),
                ));
            }
            elements.push(e);
        }
        let mut edges: Vec<Vec<Option<Edge>>> = noutputs.iter().map(|&k| vec![None; k]).collect();
        for c in &config.connections {
            if let Some(prev) = edges[c.from][c.from_port] {
                if prev
                    != (Edge {
                        element: c.to,
                        port: c.to_port,
                    })
                {
                    return Err(BuildError {
                        message: format!(
                            "{}: output {} of `{}` is connected twice (to `{}` and `{}`); use Tee to copy packets",
                            c.span, c.from_port, config.elements[c.from].name, config.elements[prev.element].name, config.elements[c.to].name
                        ),
                    });
                }
            }
            edges[c.from][c.from_port] = Some(Edge {
                element: c.to,
                port: c.to_port,
            });
        }
        for (i, outs) in edges.iter().enumerate() {
            if let Some(p) = outs.iter().position(Option::is_none) {
                return Err(err(
                    i,
                    format!(
                        "output {p} of `{}` is not connected",
                        config.elements[i].name
                    ),
                ));
            }
        }
        let nf = Nf {
            name: name.to_string(),
            classes: elements.iter().map(|e| e.class_name()).collect(),
            roles: elements.iter().map(|e| e.role()).collect(),
            elements,
            names: config.elements.iter().map(|d| d.name.clone()).collect(),
            spans: config.elements.iter().map(|d| d.span.to_string()).collect(),
            configs: config.elements.iter().map(|d| d.config.clone()).collect(),
            edges,
            ninputs,
        };
        nf.check_devices()?;
        Ok(nf)
    }

    fn check_devices(&self) -> Result<(), BuildError> {
        let mut seen: BTreeMap<(bool, String), usize> = BTreeMap::new();
        for (i, role) in self.roles.iter().enumerate() {
            // Several ToDevice(X) may send out of X; packets arriving on X need one receiver.
            let key = match role.clone() {
                Role::FromDevice(d) => (true, d),
                _ => continue,
            };
            if let Some(&prev) = seen.get(&key) {
                return Err(BuildError {
                    message: format!(
                        "{}: `{}` uses device `{}` already used by `{}` at {}; an interface has one {} element to deliver arriving packets to",
                        self.spans[i],
                        self.names[i],
                        key.1,
                        self.names[prev],
                        self.spans[prev],
                        self.classes[i]
                    ),
                });
            }
            seen.insert(key, i);
        }
        Ok(())
    }

    /// The interfaces the NF has: names used by `FromDevice` or `ToDevice`, sorted.
    pub fn interfaces(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .roles
            .iter()
            .filter_map(|r| match r {
                Role::FromDevice(d) | Role::ToDevice(d) => Some(d.clone()),
                _ => None,
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The element that receives packets arriving on interface `iface`.
    pub fn from_device(&self, iface: &str) -> Option<usize> {
        self.roles
            .iter()
            .position(|r| matches!(r, Role::FromDevice(d) if d == iface))
    }

    /// A readable listing of the element graph (for `fusebox check`).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (i, class) in self.classes.iter().enumerate() {
            s.push_str(&format!("  {} :: {}", self.names[i], class));
            let outs: Vec<String> = self.edges[i]
                .iter()
                .enumerate()
                .filter_map(|(p, ed)| {
                    ed.map(|ed| format!("[{p}] -> [{}]{}", ed.port, self.names[ed.element]))
                })
                .collect();
            if !outs.is_empty() {
                s.push_str(&format!("   {}", outs.join(", ")));
            }
            s.push('\n');
        }
        s
    }
}
