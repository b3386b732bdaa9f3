//! One NF: its Click configuration instantiated as an element graph.

use elements::{BuildCtx, ConfigError, Element, Names, Role};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// An error building an NF: where in the configuration (file, line, column) and what is
/// wrong there. Displayed as `file:line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    /// The declaration or connection at fault.
    pub span: click::Span,
    /// What is wrong (boxed: errors are rare, `Result`s stay small).
    pub kind: Box<BuildErrorKind>,
}

/// What is wrong with an NF's configuration ([`BuildError`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildErrorKind {
    /// An element (or a declaration such as `AddressInfo`) refuses its configuration.
    Config {
        /// The element's class.
        class: String,
        /// The element's name.
        name: String,
        /// What the element expected.
        error: ConfigError,
    },
    /// An element has a port connected that its class does not have, or misses one it needs.
    Ports {
        /// The element's class.
        class: String,
        /// The element's name.
        name: String,
        /// The port counts the class accepts (Click's notation, `1/1-2`).
        accepts: String,
        /// Which port is at fault.
        port: PortFault,
    },
    /// One output is connected to two places.
    ConnectedTwice {
        /// The output port.
        port: usize,
        /// The element whose output it is.
        from: String,
        /// The first target.
        first: String,
        /// The second target.
        second: String,
    },
    /// An output is not connected.
    Unconnected {
        /// The output port.
        port: usize,
        /// The element whose output it is.
        element: String,
    },
    /// Two elements receive the packets arriving on one interface.
    DeviceTwice {
        /// The second element.
        element: String,
        /// Its class (`FromDevice`).
        class: String,
        /// The interface.
        device: String,
        /// The first element.
        previous: String,
        /// Where the first element is declared.
        previous_at: click::Span,
    },
}

/// Which port of an element is at fault ([`BuildErrorKind::Ports`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortFault {
    /// This output is connected, but the class has fewer outputs.
    ExtraOutput(usize),
    /// This input is connected, but the class has fewer inputs.
    ExtraInput(usize),
    /// This output (the first missing one) is needed but not connected.
    MissingOutput(usize),
}

impl fmt::Display for BuildErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildErrorKind::Config { class, name, error } => write!(f, "{class} `{name}`: {error}"),
            BuildErrorKind::Ports {
                class,
                name,
                accepts,
                port,
            } => {
                let (side, p, what) = match port {
                    PortFault::ExtraOutput(p) => ("output", p, "is connected"),
                    PortFault::ExtraInput(p) => ("input", p, "is connected"),
                    PortFault::MissingOutput(p) => ("output", p, "is not connected"),
                };
                write!(f, "{class} `{name}` has {accepts} ports, but {side} {p} {what}")
            }
            BuildErrorKind::ConnectedTwice {
                port,
                from,
                first,
                second,
            } => write!(
                f,
                "output {port} of `{from}` is connected twice (to `{first}` and `{second}`); use Tee to copy packets"
            ),
            BuildErrorKind::Unconnected { port, element } => {
                write!(f, "output {port} of `{element}` is not connected")
            }
            BuildErrorKind::DeviceTwice {
                element,
                class,
                device,
                previous,
                previous_at,
            } => write!(
                f,
                "`{element}` uses device `{device}` already used by `{previous}` at {previous_at}; an interface has one {class} element to deliver arriving packets to"
            ),
        }
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.span, self.kind)
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
    /// Where each element was declared.
    pub spans: Vec<click::Span>,
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
fn declare(names: &mut Names, class: &str, name: &str, config: &str) -> Result<(), ConfigError> {
    match class {
        "AddressInfo" => names.add_address_info(config),
        "IPRewriterPatterns" => names.add_patterns(config),
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
        let err = |i: usize, kind: BuildErrorKind| BuildError {
            span: config.elements[i].span.clone(),
            kind: Box::new(kind),
        };
        let config_err = |i: usize, error: ConfigError| {
            let d = &config.elements[i];
            err(
                i,
                BuildErrorKind::Config {
                    class: d.class.clone(),
                    name: d.name.clone(),
                    error,
                },
            )
        };
        let mut names = Names::new();
        for (i, d) in config.elements.iter().enumerate() {
            let qualified = if scoped {
                format!("{name}/{}", d.name)
            } else {
                d.name.clone()
            };
            declare(&mut names, &d.class, &qualified, &d.config).map_err(|e| config_err(i, e))?;
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
            let e = elements::build(&d.class, &d.config, &bcx).map_err(|e| config_err(i, e))?;
            let pc = e.port_count();
            if noutputs[i] > pc.max_out {
                return Err(err(
                    i,
                    BuildErrorKind::Ports {
                        class: d.class.clone(),
                        name: d.name.clone(),
                        accepts: pc.describe(),
                        port: PortFault::ExtraOutput(noutputs[i] - 1),
                    },
                ));
            }
            if ninputs[i] > pc.max_in {
                return Err(err(
                    i,
                    BuildErrorKind::Ports {
                        class: d.class.clone(),
                        name: d.name.clone(),
                        accepts: pc.describe(),
                        port: PortFault::ExtraInput(ninputs[i] - 1),
                    },
                ));
            }
            if noutputs[i] < pc.min_out {
                return Err(err(
                    i,
                    BuildErrorKind::Ports {
                        class: d.class.clone(),
                        name: d.name.clone(),
                        accepts: pc.describe(),
                        port: PortFault::MissingOutput(noutputs[i]),
                    },
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
                        span: c.span.clone(),
                        kind: Box::new(BuildErrorKind::ConnectedTwice {
                            port: c.from_port,
                            from: config.elements[c.from].name.clone(),
                            first: config.elements[prev.element].name.clone(),
                            second: config.elements[c.to].name.clone(),
                        }),
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
                    BuildErrorKind::Unconnected {
                        port: p,
                        element: config.elements[i].name.clone(),
                    },
                ));
            }
        }
        let nf = Nf {
            name: name.to_string(),
            classes: elements.iter().map(|e| e.class_name()).collect(),
            roles: elements.iter().map(|e| e.role()).collect(),
            elements,
            names: config.elements.iter().map(|d| d.name.clone()).collect(),
            spans: config.elements.iter().map(|d| d.span.clone()).collect(),
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
                    span: self.spans[i].clone(),
                    kind: Box::new(BuildErrorKind::DeviceTwice {
                        element: self.names[i].clone(),
                        class: self.classes[i].to_string(),
                        device: key.1,
                        previous: self.names[prev].clone(),
                        previous_at: self.spans[prev].clone(),
                    }),
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
