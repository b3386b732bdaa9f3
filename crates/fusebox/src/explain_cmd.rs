//! `fusebox explain`: which traffic class a packet falls in, and what the chain does to it.

use crate::error::CliError;
use crate::run_cmd::{load_chain, parse_defines};
use chain::program::frame_value;
use chain::{Endpoint, Executor, ExitSink, RunOptions};
use clap::Args;
use packet::Packet;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use synth::show;

/// Arguments of `fusebox explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Chain file (.toml) or a single Click configuration (.click).
    pub chain: PathBuf,
    /// The interface the packet enters at (NF.IFACE); default: the chain's first entry.
    #[arg(long, value_name = "NF.IFACE")]
    pub entry: Option<String>,
    /// The packet as a 5-tuple: "udp 192.168.0.5:4000 > 10.0.2.1:1234" (tcp, udp or icmp;
    /// add "ttl N" or "len N" to change the defaults 64 and 60).
    #[arg(long, value_name = "TUPLE")]
    pub packet: Option<String>,
    /// Take the packet from this capture instead...
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// ...at this index (0 = first).
    #[arg(long, default_value_t = 0)]
    pub index: usize,
    /// Override a `define` of the Click configurations: NAME=VALUE. Repeatable.
    #[arg(short = 'D', long = "define", value_name = "NAME=VALUE")]
    pub defines: Vec<String>,
}

/// Builds an Ethernet/IPv4 frame from "proto a.b.c.d:p > e.f.g.h:q [ttl N] [len N]".
fn frame_of(spec: &str) -> Result<Vec<u8>, CliError> {
    use wire::build::Frame;
    let err = || {
        CliError::Invalid(format!(
            "--packet {spec:?}: expected \"udp 192.168.0.5:4000 > 10.0.2.1:1234\""
        ))
    };
    let w: Vec<&str> = spec.split_whitespace().collect();
    if w.len() < 4 || w[2] != ">" {
        return Err(err());
    }
    let ep = |s: &str| -> Result<(Ipv4Addr, u16), CliError> {
        let (a, p) = s.split_once(':').unwrap_or((s, "0"));
        Ok((a.parse().map_err(|_| err())?, p.parse().map_err(|_| err())?))
    };
    let (src, sport) = ep(w[1])?;
    let (dst, dport) = ep(w[3])?;
    let (frame, l4len) = match w[0] {
        "tcp" => (
            Frame::tcp(src, dst, sport, dport).flags(wire::tcp::flags::SYN),
            wire::tcp::HEADER_LEN,
        ),
        "udp" => (Frame::udp(src, dst, sport, dport), wire::udp::HEADER_LEN),
        "icmp" => (
            Frame::icmp(src, dst, wire::icmpv4::msg_type::ECHO_REQUEST, 0),
            wire::icmpv4::HEADER_LEN,
        ),
        _ => return Err(err()),
    };
    let mut ttl = 64u8;
    let mut len = 60usize;
    let mut i = 4;
    while i + 1 < w.len() {
        match w[i] {
            "ttl" => ttl = w[i + 1].parse().map_err(|_| err())?,
            "len" => len = w[i + 1].parse().map_err(|_| err())?,
            _ => return Err(err()),
        }
        i += 2;
    }
    let headers = wire::ethernet::HEADER_LEN + wire::ipv4::HEADER_LEN + l4len;
    let len = len.max(headers).min(1514);
    Ok(frame
        .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ttl(ttl)
        .payload(&vec![0; len - headers])
        .build())
}

/// Runs one packet through a fresh executor; says where it went.
fn trace(
    chain: &chain::ChainFile,
    opts: &RunOptions,
    entry: &Endpoint,
    frame: &[u8],
    synth: bool,
) -> Result<String, CliError> {
    let mut ex = Executor::new(chain, opts, |_, _| Ok(ExitSink::Memory(Vec::new())))?;
    synth::Mode::from(synth).install(&mut ex, chain::FastOptions::default());
    let at = ex
        .entry(entry)
        .ok_or_else(|| CliError::Invalid(format!("{entry}: no FromDevice for this interface")))?;
    ex.inject(at, Packet::from_bytes(frame));
    let out = ex.finish()?;
    let s = ex.summary();
    let mut parts = Vec::new();
    for (exit, pkts) in &out {
        for (_, _, bytes) in pkts {
            parts.push(format!("leaves {exit}: {}", synth::verify::decode(bytes)));
        }
    }
    for nf in &s.nfs {
        for e in &nf.elements {
            for (r, n) in &e.drops {
                if *n > 0 {
                    parts.push(format!("dropped at {}/{} ({r})", nf.name, e.name));
                }
            }
        }
    }
    if parts.is_empty() {
        parts.push("held (queued)".into());
    }
    Ok(parts.join("; "))
}

/// `fusebox explain`.
pub fn run(a: &ExplainArgs) -> Result<ExitCode, CliError> {
    let chain = load_chain(&a.chain)?;
    let opts = RunOptions {
        defines: parse_defines(&a.defines)?,
        ..RunOptions::default()
    };
    let entry = match &a.entry {
        Some(e) => Endpoint::parse(e)
            .ok_or_else(|| CliError::Invalid(format!("--entry {e}: expected NF.IFACE")))?,
        None => chain
            .entries
            .first()
            .map(|(e, _)| e.clone())
            .ok_or_else(|| {
                CliError::Invalid("the chain has no [[entry]]: give --entry NF.IFACE".into())
            })?,
    };
    let frame = match (&a.packet, &a.pcap) {
        (Some(p), None) => frame_of(p)?,
        (None, Some(f)) => {
            let (recs, _) = ports::pcap::read_all(f)?;
            recs.get(a.index).map(|r| r.data.clone()).ok_or_else(|| {
                CliError::Invalid(format!("{}: no packet at index {}", f.display(), a.index))
            })?
        }
        _ => {
            return Err(CliError::Invalid(
                "give either --packet \"udp A:P > B:Q\" or --pcap FILE [--index N]".into(),
            ))
        }
    };
    let ex = Executor::new(&chain, &opts, |_, _| Ok(ExitSink::Count))?;
    let s = synth::synthesize(&ex);
    let mut o = String::new();
    let _ = writeln!(o, "packet: {}", synth::verify::decode(&frame));
    let name = entry.to_string();
    let mut found = 0;
    for (i, c) in s
        .classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.entry == name)
    {
        let inside = c
            .filter
            .fields()
            .all(|(f, set)| set.contains(frame_value(&frame, f)));
        if !inside {
            continue;
        }
        found += 1;
        let _ = writeln!(o, "class #{i} of entry {name}: {}", show::filter(&c.filter));
        if !c.stateful.is_empty() {
            let _ = writeln!(
                o,
                "  (one of the classes stateful elements choose among at run time: {})",
                c.stateful.join(", then ")
            );
        }
        let _ = writeln!(o, "  elements, in chain order:");
        for e in &c.path {
            let _ = writeln!(o, "    {e}");
        }
        let _ = writeln!(o, "  writes {}", show::writes(c));
        let _ = writeln!(o, "  -> {}", c.end);
    }
    if found == 0 {
        let _ = writeln!(
            o,
            "no synthesized class: entry {name} runs naive ({})",
            s.naive_entries.join("; ")
        );
    }
    let _ = writeln!(
        o,
        "naive run: {}",
        trace(&chain, &opts, &entry, &frame, false)?
    );
    let _ = writeln!(
        o,
        "synth run: {}",
        trace(&chain, &opts, &entry, &frame, true)?
    );
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), o.as_bytes());
    Ok(ExitCode::SUCCESS)
}
