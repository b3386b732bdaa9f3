//! `fusebox synth`: the traffic classes of a chain.

use crate::error::CliError;
use crate::run_cmd::{load_chain, parse_defines};
use chain::{Executor, ExitSink, RunOptions};
use clap::Args;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use synth::show;

/// Arguments of `fusebox synth`.
#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Chain file (.toml) or a single Click configuration (.click).
    pub chain: PathBuf,
    /// Override a `define` of the Click configurations: NAME=VALUE. Repeatable.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
    /// Show the elements each class passes.
    #[arg(long)]
    pub path: bool,
    /// Only classes of this entry (NF.IFACE).
    #[arg(long, value_name = "NF.IFACE")]
    pub entry: Option<String>,
    /// Print a Graphviz drawing of the original chain and the synthesized one side by side
    /// (`fusebox synth chain.toml --dot | dot -Tsvg > chain.svg`).
    #[arg(long)]
    pub dot: bool,
    /// Print one equivalent configuration made only of stock Click elements (classifier,
    /// rewriters, DecIPTTL, EtherEncap, ...); check it with `fusebox verify CHAIN --against
    /// FILE`.
    #[arg(long, conflicts_with = "dot")]
    pub click: bool,
    /// Print each entry's first classification as OpenFlow 1.3 flows (`ovs-ofctl -O
    /// OpenFlow13 add-flows BRIDGE FILE`): entry k (in name order) is OpenFlow port k, each
    /// class is tagged with VLAN id = its number and sent to --of-port.
    #[arg(long, conflicts_with_all = ["dot", "click"])]
    pub openflow: bool,
    /// The OpenFlow port classified frames go to (the FuseBox server's), or LOCAL.
    #[arg(
        long,
        value_name = "PORT",
        default_value = "LOCAL",
        requires = "openflow"
    )]
    pub of_port: String,
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The original chain (NF clusters, element edges, links dashed) and the synthesized one
/// (per entry: one classifier, one node per class with its writes, its end).
fn dot(ex: &Executor, s: &synth::Synthesis, only: Option<&str>) -> String {
    let mut o = String::from("digraph fusebox {\n  rankdir=LR; node [shape=box, fontsize=10];\n");
    let _ = writeln!(
        o,
        "  subgraph cluster_original {{ label=\"original chain\";"
    );
    let n = ex.element_count();
    let mut nf = u32::MAX;
    for g in 0..n {
        if ex.element_nf(g) != nf {
            if nf != u32::MAX {
                o.push_str("    }\n");
            }
            nf = ex.element_nf(g);
            let name = ex.element_name(g);
            let nfname = name.split('/').next().unwrap_or("");
            let _ = writeln!(
                o,
                "    subgraph cluster_nf{nf} {{ label=\"{}\";",
                esc(nfname)
            );
        }
        let name = ex.element_name(g);
        let class = ex.element(g).class_name();
        let _ = writeln!(o, "      e{g} [label=\"{}\\n{}\"];", esc(&name), class);
    }
    if nf != u32::MAX {
        o.push_str("    }\n");
    }
    for g in 0..n {
        for p in 0..ex.outputs(g) {
            if let Some((_, t, tp)) = ex.edge(g, p) {
                let _ = writeln!(
                    o,
                    "    e{g} -> e{t} [taillabel=\"{p}\", headlabel=\"{tp}\"];"
                );
            }
        }
        if let chain::Place::Link(t) = ex.place(g) {
            let _ = writeln!(o, "    e{g} -> e{t} [style=dashed, label=\"link\"];");
        }
    }
    o.push_str("  }\n  subgraph cluster_synth { label=\"synthesized\";\n");
    let mut entries: Vec<&str> = s.classes.iter().map(|c| c.entry.as_str()).collect();
    entries.dedup();
    let mut ends: Vec<String> = Vec::new();
    for (ei, e) in entries.iter().enumerate() {
        if only.is_some_and(|x| x != *e) {
            continue;
        }
        let _ = writeln!(
            o,
            "    c{ei} [shape=diamond, label=\"classify\\n{}\"];",
            esc(e)
        );
        for (ci, c) in s.classes.iter().enumerate().filter(|(_, c)| c.entry == *e) {
            let mut label = show::filter(&c.filter);
            if label.len() > 120 {
                label.truncate(117);
                label.push_str("...");
            }
            let writes = show::writes(c);
            let _ = writeln!(
                o,
                "    k{ci} [label=\"{}\\nwrites {}\"{}];",
                esc(&label),
                esc(&writes),
                if c.end.starts_with("drop") {
                    ", color=gray"
                } else {
                    ""
                }
            );
            let _ = writeln!(o, "    c{ei} -> k{ci};");
            let end = match ends.iter().position(|x| *x == c.end) {
                Some(i) => i,
                None => {
                    ends.push(c.end.clone());
                    ends.len() - 1
                }
            };
            let _ = writeln!(o, "    k{ci} -> z{end};");
        }
    }
    for (i, e) in ends.iter().enumerate() {
        let _ = writeln!(o, "    z{i} [shape=oval, label=\"{}\"];", esc(e));
    }
    o.push_str("  }\n}\n");
    o
}

/// `fusebox synth`.
pub fn run(a: &SynthArgs) -> Result<ExitCode, CliError> {
    let chain = load_chain(&a.chain)?;
    let opts = RunOptions {
        defines: parse_defines(&a.defines)?,
        ..RunOptions::default()
    };
    let ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count))?;
    let s = synth::synthesize(&ex);
    if a.click {
        let mut prog = s.program.clone();
        for n in &mut prog.nodes {
            if let chain::program::Node::Classify(c) = n {
                c.sort_by_key(|_| 0);
            }
        }
        let text = synth::export::click(&ex, &prog, &a.chain.display().to_string())?;
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
        return Ok(ExitCode::SUCCESS);
    }
    if a.openflow {
        let text = synth::openflow::openflow(&ex, &s.program, &a.of_port)?;
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
        return Ok(ExitCode::SUCCESS);
    }
    if a.dot {
        let d = dot(&ex, &s, a.entry.as_deref());
        let _ = std::io::stdout().lock().write_all(d.as_bytes());
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = String::new();
    let mut entries: Vec<String> = s.classes.iter().map(|c| c.entry.clone()).collect();
    entries.dedup();
    for e in &entries {
        if a.entry.as_ref().is_some_and(|x| x != e) {
            continue;
        }
        let cs: Vec<_> = s.classes.iter().filter(|c| &c.entry == e).collect();
        let exits = cs.iter().filter(|c| c.end.starts_with("exit")).count();
        let drops = cs.iter().filter(|c| c.end.starts_with("drop")).count();
        let hands = cs.iter().filter(|c| c.end.starts_with("handoff")).count();
        let tests: usize = cs.iter().map(|c| c.filter.fields().count()).sum();
        let _ = writeln!(o,
            "entry {e}: {} traffic classes ({exits} leave, {drops} dropped early, {hands} handed to opaque elements); classifier: {tests} field tests",
            cs.len()
        );
        for (i, c) in cs.iter().enumerate() {
            let _ = writeln!(o, "  #{i:<3} {}", show::filter(&c.filter));
            if !c.stateful.is_empty() {
                let _ = writeln!(
                    o,
                    "        decided at run time by {}",
                    c.stateful.join(", then ")
                );
            }
            let _ = writeln!(o, "        writes {}", show::writes(c));
            let _ = writeln!(o, "        -> {}", c.end);
            if a.path {
                let _ = writeln!(o, "        via {}", c.path.join(" > "));
            }
        }
    }
    for n in &s.naive_entries {
        let _ = writeln!(o, "runs naive: {n}");
    }
    if !s.handoffs.is_empty() {
        let _ = writeln!(o, "opaque elements (run as they are, naive from there):");
        for (e, n) in &s.handoffs {
            let _ = writeln!(o, "  {e}: {n} classes");
        }
    }
    // A closed pipe (`| head`) is not an error.
    let _ = std::io::stdout().lock().write_all(o.as_bytes());
    Ok(ExitCode::SUCCESS)
}
