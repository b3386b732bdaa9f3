//! Small linear chains built from Click snippets, for the planner's tests.
// Each test binary uses part of this module.
#![allow(dead_code)]

use chain::{ChainFile, Executor, ExitSink, RunOptions};

/// A chain of NFs `n0 -> n1 -> ...`, each `FromDevice(eth0) -> BODY -> ToDevice(eth1)`
/// (`BODY` may be empty; one naming `FromDevice` is the whole configuration), linked `n{i}.eth1 -- n{i+1}.eth0`, entered at `n0.eth0`.
pub fn linear(test: &str, bodies: &[&str]) -> Executor {
    let configs: Vec<String> = bodies
        .iter()
        .map(|b| {
            if b.contains("FromDevice") {
                b.to_string()
            } else if b.is_empty() {
                "FromDevice(eth0) -> ToDevice(eth1);".to_string()
            } else {
                format!("FromDevice(eth0) -> {b} -> ToDevice(eth1);")
            }
        })
        .collect();
    let refs: Vec<&str> = configs.iter().map(String::as_str).collect();
    chain_of(test, &refs)
}

/// A chain of NFs with these whole Click configurations, linked as [`linear`] links them.
pub fn chain_of(test: &str, configs: &[&str]) -> Executor {
    let dir = tempfile::Builder::new()
        .prefix(&format!("plan-{test}-"))
        .tempdir()
        .unwrap();
    let chain = write_chain_file(dir.path(), configs);
    let ex = Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count)).unwrap();
    drop(dir);
    ex
}

/// Writes the chain of NFs with these whole Click configurations into `dir` (`n{i}.click`,
/// `chain.toml`: `n{i}.eth1 -- n{i+1}.eth0`, entered at `n0.eth0`) and loads it.
pub fn write_chain_file(dir: &std::path::Path, configs: &[&str]) -> ChainFile {
    let mut toml = String::new();
    for (i, c) in configs.iter().enumerate() {
        std::fs::write(dir.join(format!("n{i}.click")), c).unwrap();
        toml.push_str(&format!("[nf.n{i}]\nclick = \"n{i}.click\"\n"));
    }
    for i in 1..configs.len() {
        toml.push_str(&format!(
            "[[link]]\nbetween = [\"n{}.eth1\", \"n{i}.eth0\"]\n",
            i - 1
        ));
    }
    toml.push_str("[[entry]]\nto = \"n0.eth0\"\n");
    let path = dir.join("chain.toml");
    std::fs::write(&path, toml).unwrap();
    ChainFile::load(&path).unwrap()
}
